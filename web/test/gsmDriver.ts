/**
 * Test driver (Node) for the browser's gsm Device: JSON lines on stdin → JSON lines on stdout, so the Python
 * tests run web/src/gsm against a Python provider and terminal over loopback HTTP. Not shipped in the page.
 *   {"cmd":"backend","name":"gmp"|"bigint"}                                → {"backend"}
 *   {"cmd":"keygen","bits":…}                                              → {"p","q" (hex),"ms"}
 *   {"cmd":"enrol","dev":…,"p","q","id","params","provider","template",
 *    "tamper"?:"plaintext_proof"|"modulus_proof"|"norm", "precompute"?}   → {"m1" (hex),"report"}
 *   {"cmd":"pow_square","base","exp","p" (hex)}                            → {"hex"} (bignum.ts modPowSquare)
 *   {"cmd":"load","dev":…,"p","q","id","params","provider_key","m1"}      → {"ok"} (a device from a key file's parts)
 *   {"cmd":"match","dev":…,"terminal","variant","tamper"?:"m1"|"reply"|"pi3_x"} → {"report"}
 *   {"cmd":"export","dev":…,"provider"}                                    → {"hex": gsm.DeviceKey}
 *   {"cmd":"import","dev":…,"key","params"}                                → {"provider","enrolled"}
 *   {"cmd":"present","dev":…,"terminal","variant"}                         → {"expires_at"}
 *   {"cmd":"m1","dev":…,"m1"}                                              → {"ms"} (keep a new signed m1)
 *   {"cmd":"pi3_request","dev":…,"challenge"} / {"cmd":"pi3_finish","dev":…,"compare"} → {"hex","ms"}
 *   {"cmd":"reply","dev":…,"variant","challenge"}                          → {"hex"} (round 3 on a given Challenge)
 *   {"cmd":"fixed_norm","x":[…],"m"}                                        → {"u"} (templates/fixedNorm.ts)
 * Errors: {"error","type","status"?}.
 */
import { createInterface } from "node:readline";
import { arithmeticBackend, modPowSquare, useGmp, useNative } from "../src/crypto/bignum.js";
import { pi3Request } from "../src/gsm/compare.js";
import { GsmDevice, type Pi3State } from "../src/gsm/device.js";
import { enrol, fetchProviderKey, gsmClient, match, present, ServiceError } from "../src/gsm/http.js";
import { deviceKeyBytes, loadDeviceKey } from "../src/gsm/keyfile.js";
import { C_HEX } from "../src/gsm/ot.js";
import { generateBlumKey, PaillierKey } from "../src/gsm/paillier.js";
import { GsmParams, type GsmParamsInit, type Variant } from "../src/gsm/params.js";
import { fixedNormTemplate } from "../src/templates/fixedNorm.js";
import { decode, encode } from "../src/wire/codec.js";

// Node's fetch reuses a kept-alive connection the server may have closed meanwhile (uvicorn: after 5 s idle, which a
// loaded machine reaches between two steps) and then fails before sending; a browser retries such a request itself.
const nodeFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  try {
    return await nodeFetch(input, init);
  } catch (e) {
    const code = ((e as { cause?: { code?: string } }).cause?.code) ?? "";
    if (!["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"].includes(code)) throw e;
    return nodeFetch(input, init);
  }
};

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const unhex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));
const devices = new Map<string, GsmDevice>();
const pi3States = new Map<string, Pi3State>();

type Req = Record<string, any>;

function device(r: Req): GsmDevice {
  const d = devices.get(r.dev);
  if (!d) throw new Error(`no device ${r.dev}`);
  return d;
}

async function handle(r: Req): Promise<Record<string, unknown>> {
  switch (r.cmd) {
    case "fixed_norm":
      return { u: fixedNormTemplate(r.x as number[], r.m as number) };
    case "backend":
      if (r.name === "gmp") await useGmp();
      else useNative();
      return { backend: arithmeticBackend() };
    case "keygen": {
      const t0 = performance.now();
      const k = generateBlumKey(r.bits);
      return { p: k.p.toString(16), q: k.q.toString(16), ms: performance.now() - t0 };
    }
    case "enrol": {
      const params = new GsmParams(r.params as GsmParamsInit);
      const key = new PaillierKey(BigInt("0x" + r.p), BigInt("0x" + r.q));
      const http = gsmClient(r.provider);
      const vk = await fetchProviderKey(http);
      const dev = new GsmDevice(r.id, params, key, vk);
      if (r.tamper) tamperEnrol(dev, r.tamper);
      const pre = r.precompute ? await dev.precomputeEnrolment() : null;
      const report = await enrol(http, dev, r.template, undefined, {}, pre);
      devices.set(r.dev, dev);
      return { m1: hex(dev.firstMessage()), report };
    }
    case "load": {
      const dev = new GsmDevice(r.id, new GsmParams(r.params), new PaillierKey(BigInt("0x" + r.p), BigInt("0x" + r.q)),
        unhex(r.provider_key));
      dev.acceptEnrolment(unhex(r.m1));
      devices.set(r.dev, dev);
      return { ok: true };
    }
    case "present":
      return await present(gsmClient(r.terminal), device(r), r.variant as Variant);
    case "match": {
      const dev = device(r);
      if (r.tamper) return { report: await match(gsmClient(r.terminal), tamperMatch(dev, r.tamper), r.variant as Variant) };
      return { report: await match(gsmClient(r.terminal), dev, r.variant as Variant) };
    }
    case "export":
      return { hex: hex(deviceKeyBytes(device(r), r.provider)) };
    case "import": {
      const { device: dev, provider } = loadDeviceKey(unhex(r.key), new GsmParams(r.params));
      devices.set(r.dev, dev);
      return { provider, enrolled: dev.enrolled };
    }
    case "m1": {
      const t0 = performance.now();
      device(r).acceptEnrolment(unhex(r.m1));
      return { ms: performance.now() - t0 };
    }
    case "pi3_request": {
      const t0 = performance.now();
      const { request, state } = pi3Request(device(r), unhex(r.challenge));
      pi3States.set(r.dev, state);
      return { hex: hex(request), ms: performance.now() - t0 };
    }
    case "pi3_finish": {
      const state = pi3States.get(r.dev);
      pi3States.delete(r.dev);
      if (!state) throw new Error("no Π3 session for this device");
      const t0 = performance.now();
      return { hex: hex(state.finish(unhex(r.compare))), ms: performance.now() - t0 };
    }
    case "pow_square":
      return { hex: modPowSquare(BigInt("0x" + r.base), BigInt("0x" + r.exp), BigInt("0x" + r.p)).toString(16) };
    case "ot_c":
      return { hex: C_HEX };
    case "reply": {
      const dev = device(r);
      const ch = unhex(r.challenge);
      const t0 = performance.now();
      const out = r.variant === "pi1" ? dev.pi1Decide(ch) : dev.pi2Reply(ch);
      return { hex: hex(out), ms: performance.now() - t0 };
    }
  }
  throw new Error(`unknown command ${r.cmd}`);
}

/** A lying device: it changes its own enrolment messages after computing them honestly. */
function tamperEnrol(dev: GsmDevice, what: string): void {
  const start = dev.enrolStart.bind(dev);
  const respond = dev.enrolRespond.bind(dev);
  if (what === "norm") {
    dev.enrolRespond = async (ch) => {
      const v = decode(await respond(ch), "gsm.NormResponse").values;
      return encode("gsm.NormResponse", { ...v, z: (v.z as bigint) + 1n });
    };
    return;
  }
  dev.enrolStart = async (u, p) => {
    const v = decode(await start(u, p), "gsm.EnrolRequest").values;
    const proof = decode(v[what] as Uint8Array).values;
    const field = what === "plaintext_proof" ? "w" : "w";
    const name = what === "plaintext_proof" ? "gsm.PlaintextKnowledgeProof" : "gsm.ModulusProof";
    return encode("gsm.EnrolRequest", { ...v, [what]: encode(name, { ...proof, [field]: (proof[field] as bigint) + 1n }) });
  };
}

/** A lying device at the terminal: a tampered m1 (one packed ciphertext changed), a forged Π2 reply X + 1, or a
 *  forged Π3 input X + 1 into the OT. */
function tamperMatch(dev: GsmDevice, what: string): GsmDevice {
  const liar = Object.create(dev) as GsmDevice;
  if (what === "m1") {
    const m1 = decode(dev.firstMessage(), "gsm.Template").values;
    const cs = [...(m1.c_packed as bigint[])];
    cs[0] = (cs[0]! * (dev.key.n + 1n)) % dev.key.n2; // ⟦u*_1 + 1⟧
    const forged = encode("gsm.Template", { ...m1, c_packed: cs });
    liar.firstMessage = () => forged;
  } else if (what === "pi3_x") {
    liar.pi3Inputs = (ch) => {
      const [x, y] = dev.pi3Inputs(ch);
      return [x + 1n, y];
    };
  } else if (what === "reply") {
    liar.pi2Reply = (ch) => {
      const x = decode(dev.pi2Reply(ch), "gsm.Reply").values.x as bigint;
      return encode("gsm.Reply", { x_bytes: decode(dev.pi2Reply(ch), "gsm.Reply").values.x_bytes as number, x: x + 1n });
    };
  }
  return liar;
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let out: Record<string, unknown>;
  try {
    out = await handle(JSON.parse(line));
  } catch (e) {
    const err = e as Error;
    out = { error: err.message, type: err.name, ...(e instanceof ServiceError ? { status: e.status, kind: e.kind } : {}) };
  }
  process.stdout.write(JSON.stringify(out, (_, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n");
}
