/**
 * The gsm device's key file (wire record gsm.DeviceKey, as `privface.service.clients.gsm.device_key_record` /
 * `load_device`): esk = (p, q), the subject, the provider's URL and Ed25519 key, and the signed m1 once enrolled.
 * The page keeps these bytes wrapped (app/keystore.ts) and exports/imports them as they are.
 */
import { decode, encode, WireError } from "../wire/codec.js";
import { GsmDevice } from "./device.js";
import { PaillierKey } from "./paillier.js";
import { type GsmParams, ProtocolError } from "./params.js";

export class KeyFileError extends Error {
  override name = "KeyFileError";
}

export function deviceKeyBytes(dev: GsmDevice, providerUrl: string): Uint8Array {
  if (dev.providerKey === null) throw new ProtocolError("a device key file needs the provider's verification key");
  return encode("gsm.DeviceKey", { subject_id: dev.subjectId, provider: providerUrl, provider_key: dev.providerKey,
    p: dev.key.p, q: dev.key.q, first_message: dev.enrolled ? dev.firstMessage() : new Uint8Array(0),
    insecure_test_params: dev.params.insecureTestParams, backend: dev.params.backend });
}

/** A device from key-file bytes, checked: a Paillier–Blum key of the required size, m1 (if any) ours and signed. */
export function loadDeviceKey(data: Uint8Array, params: GsmParams): { device: GsmDevice; provider: string } {
  let v;
  try {
    v = decode(data, "gsm.DeviceKey").values;
  } catch (e) {
    try { // a file written before key files named their backend: its templates were dlib's (as Python reads it)
      v = { ...decode(data, "gsm.LegacyDeviceKey").values, backend: "dlib-resnet128" };
    } catch {
      throw new KeyFileError(`not a gsm key file: ${(e as WireError).message}`);
    }
  }
  const backend = (v.backend ?? null) as string | null;
  if (backend !== null && params.backend !== null && backend !== params.backend) {
    throw new KeyFileError(`this key file's templates are ${backend}'s; this server's are ${params.backend}'s`);
  }
  if (v.insecure_test_params && !params.insecureTestParams) {
    throw new KeyFileError("this key file holds insecure test parameters; it does not fit this server");
  }
  const p = v.p as bigint;
  const q = v.q as bigint;
  if (p % 4n !== 3n || q % 4n !== 3n) throw new KeyFileError("the key file's Paillier key is not a Paillier–Blum key");
  let key: PaillierKey;
  try {
    key = new PaillierKey(p, q);
  } catch (e) {
    throw new KeyFileError(`the key file's Paillier key is invalid: ${(e as Error).message}`);
  }
  let device: GsmDevice;
  try {
    device = new GsmDevice(v.subject_id as string, params, key, v.provider_key as Uint8Array);
  } catch (e) {
    throw new KeyFileError(`the key file does not fit this server: ${(e as Error).message}`);
  }
  const m1 = v.first_message as Uint8Array;
  if (m1.length) device.acceptEnrolment(m1);
  return { device, provider: v.provider as string };
}
