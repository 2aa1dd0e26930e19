/**
 * Π3's comparison on the device (seed 004 Fig. 5 rounds 3–5, Fig. 6), as `Device.pi3_request` / `pi3_finish`:
 * the device is the evaluator of the terminal's garbled Fig. 6 circuit (`circuit.gsmPi3Circuit` with the range
 * check), its inputs X mod 2^x_bits and Y mod 2^w obtained by OT (`ot.ts`); it returns the output labels,
 * which only the terminal can decode.
 */
import { decode, encode } from "../wire/codec.js";
import { gsmPi3Circuit } from "./circuit.js";
import type { GsmDevice, Pi3State } from "./device.js";
import { evaluate, GarbleError, labelsToBytes, parseGarbled } from "./garble.js";
import { OTError, OTReceiver, ReceiverRandomness } from "./ot.js";
import { ProtocolError } from "./params.js";

const LABEL = 16;

function bits(v: bigint, k: number): number[] {
  return Array.from({ length: k }, (_, i) => Number((v >> BigInt(i)) & 1n));
}

const u32be = (d: Uint8Array, o: number) => ((d[o]! << 24) | (d[o + 1]! << 16) | (d[o + 2]! << 8) | d[o + 3]!) >>> 0;

function words(b: Uint8Array): Uint32Array {
  const out = new Uint32Array(b.length / 4);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = dv.getUint32(4 * i, true);
  return out;
}

const prepared = new WeakMap<GsmDevice, ReceiverRandomness>();

/** The OT randomness of the device's next Π3 session, made now (e.g. while m1 is presented, before the capture);
 *  the circuit is built too. Returns the time taken (ms). */
export function preparePi3(dev: GsmDevice): number {
  const t0 = performance.now();
  const p = dev.params;
  gsmPi3Circuit(p.circuitBits, true, p.aBits, p.xBits);
  prepared.set(dev, new ReceiverRandomness(p.xBits + p.circuitBits));
  return performance.now() - t0;
}

/** Round 3: decrypt X = J + pad, Y = a·J + b and send OT.Round₁ for their bits; the state finishes round 5. */
export function pi3Request(dev: GsmDevice, challenge: Uint8Array): { request: Uint8Array; state: Pi3State } {
  const [X, Y] = dev.pi3Inputs(challenge);
  const p = dev.params;
  const w = p.circuitBits;
  const xb = p.xBits;
  const circuit = gsmPi3Circuit(w, true, p.aBits, xb);
  const ready = prepared.get(dev);
  prepared.delete(dev);
  const receiver = new OTReceiver([...bits(X & ((1n << BigInt(xb)) - 1n), xb), ...bits(Y & ((1n << BigInt(w)) - 1n), w)],
    ready && ready.size >= xb + w ? ready : undefined);
  const request = encode("gsm.CompareRequest", { ot_request: receiver.request() });
  let done = false;
  const finish = (message: Uint8Array): Uint8Array => {
    if (done) throw new ProtocolError("this Π3 session has already been evaluated");
    const data = decode(message, "gsm.CompareChallenge").values.garbler_message as Uint8Array;
    try {
      if (data.length < 4) throw new GarbleError("garbler message: shorter than its header");
      const n = u32be(data, 0);
      if (data.length < 4 + n + 4) throw new GarbleError("garbler message: truncated");
      const gc = parseGarbled(data.subarray(4, 4 + n));
      const count = u32be(data, 4 + n);
      const end = 8 + n + count * LABEL;
      if (data.length < end) throw new GarbleError("garbler message: truncated labels");
      if (count !== circuit.garblerInputs.length + circuit.constants.length) {
        throw new GarbleError("wrong number of garbler labels");
      }
      const own = receiver.receive(data.subarray(end), LABEL);
      const ownWords = new Uint32Array(4 * own.length);
      own.forEach((l, i) => ownWords.set(words(l), 4 * i));
      const out = evaluate(circuit, gc, words(data.slice(8 + n, end)), ownWords);
      done = true;
      const result = new Uint8Array(4 + out.length * 4);
      new DataView(result.buffer).setUint32(0, circuit.outputs.length);
      result.set(labelsToBytes(out), 4);
      return encode("gsm.CompareFinish", { output_labels: result });
    } catch (e) {
      if (e instanceof GarbleError || e instanceof OTError) throw new ProtocolError(`bad garbled circuit from the terminal: ${e.message}`);
      throw e;
    }
  };
  return { request, state: { finish } };
}
