/**
 * Half-gates evaluation (Zahur–Rosulek–Evans, EUROCRYPT 2015, Fig. 2; generator half-gates §3.1) with free-XOR
 * and point-and-permute, as `native/src/garble.rs::evaluate`: H(x, j) = π(σ(x) ⊕ j) ⊕ σ(x), π = AES-128 under
 * the garbler's public key, σ(x) = 2·x in GF(2^128). Labels are 128-bit little-endian, held as four 32-bit
 * words (w0 lowest), which is also how the AES below reads a block.
 *
 * AES is @noble/ciphers' block function: WebCrypto offers no single-block (ECB) encryption and only
 * asynchronous calls, one per hash, where a garbled Fig. 6 circuit needs ≈ 4000 of them.
 */
import { unsafe as aes } from "@noble/ciphers/aes.js";
import type { Circuit } from "./circuit.js";

const LABEL = 16;
const XOR = 0;
const AND = 1;
const INV = 2;

export class GarbleError extends Error {
  override name = "GarbleError";
}

/** A garbled circuit as `GarbledCircuit.from_bytes`: digest ‖ key ‖ n u32 ‖ n × (T_G ‖ T_E) [‖ h u32 ‖ h × T]. */
export interface Garbled {
  digest: Uint8Array;
  key: Uint8Array;
  tables: Uint32Array;
  halfTables: Uint32Array;
}

const u32be = (d: Uint8Array, o: number) => ((d[o]! << 24) | (d[o + 1]! << 16) | (d[o + 2]! << 8) | d[o + 3]!) >>> 0;

function words(bytes: Uint8Array): Uint32Array {
  const out = new Uint32Array(bytes.length / 4);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < out.length; i++) out[i] = dv.getUint32(4 * i, true);
  return out;
}

export function labelsToBytes(w: Uint32Array): Uint8Array {
  const out = new Uint8Array(w.length * 4);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < w.length; i++) dv.setUint32(4 * i, w[i]!, true);
  return out;
}

export function parseGarbled(data: Uint8Array): Garbled {
  if (data.length < 52) throw new GarbleError("garbled circuit: shorter than its header");
  const n = u32be(data, 48);
  const end = 52 + 32 * n;
  let half: Uint8Array = new Uint8Array(0);
  if (data.length > end + 4) {
    const h = u32be(data, end);
    if (h === 0 || data.length !== end + 4 + 16 * h) throw new GarbleError(`garbled circuit: ${h} half-gate tables do not fit`);
    half = data.subarray(end + 4);
  } else if (data.length !== end) {
    throw new GarbleError(`garbled circuit: ${n} tables need ${end} bytes, got ${data.length}`);
  }
  return { digest: data.slice(0, 32), key: data.slice(32, 48), tables: words(data.slice(52, end)), halfTables: words(half.slice()) };
}

/** Evaluate on the active labels (garbler inputs then constants: `fixed`; evaluator inputs: `own`, 4 words each);
 *  the output labels (only the garbler can decode them). */
export function evaluate(c: Circuit, gc: Garbled, fixed: Uint32Array, own: Uint32Array): Uint32Array {
  if (gc.digest.length !== 32 || !gc.digest.every((b, i) => b === c.digest[i])) {
    throw new GarbleError("the garbled circuit is not the agreed circuit");
  }
  if (gc.tables.length !== 8 * c.andCount || gc.halfTables.length !== 4 * c.halfCount) {
    throw new GarbleError(`garbled circuit: ${c.andCount} AND tables and ${c.halfCount} half-gate tables expected`);
  }
  if (fixed.length !== 4 * (c.garblerInputs.length + c.constants.length) || own.length !== 4 * c.evaluatorInputs.length) {
    throw new GarbleError("garbled circuit: wrong number of input labels");
  }
  const w = new Uint32Array(4 * c.nWires);
  const fixedWires = [...c.garblerInputs, ...c.constants.map(([x]) => x)];
  fixedWires.forEach((wire, i) => w.set(fixed.subarray(4 * i, 4 * i + 4), 4 * wire));
  c.evaluatorInputs.forEach((wire, i) => w.set(own.subarray(4 * i, 4 * i + 4), 4 * wire));
  const xk = aes.expandKeyLE(gc.key);
  const g = c.gates;
  let t = 0;
  let hi = 0;
  // H(x, tweak) into h0..h3 for the label at w[4·x]; tweak = (t0, 0, 0, t3)
  let h0 = 0, h1 = 0, h2 = 0, h3 = 0;
  const hash = (at: number, t0: number, t3: number) => {
    const x0 = w[at]!, x1 = w[at + 1]!, x2 = w[at + 2]!, x3 = w[at + 3]!;
    // σ(x) = x << 1, ⊕ 0x87 if the top bit was set
    const s0 = ((x0 << 1) ^ (x3 >>> 31 ? 0x87 : 0)) >>> 0;
    const s1 = ((x1 << 1) | (x0 >>> 31)) >>> 0;
    const s2 = ((x2 << 1) | (x1 >>> 31)) >>> 0;
    const s3 = ((x3 << 1) | (x2 >>> 31)) >>> 0;
    const e = aes.encrypt(xk, (s0 ^ t0) >>> 0, s1, s2, (s3 ^ t3) >>> 0);
    h0 = (e.s0 ^ s0) >>> 0;
    h1 = (e.s1 ^ s1) >>> 0;
    h2 = (e.s2 ^ s2) >>> 0;
    h3 = (e.s3 ^ s3) >>> 0;
  };
  for (let i = 0; i < g.length; i += 4) {
    const op = g[i]!, a = 4 * g[i + 1]!, b = 4 * g[i + 2]!, o = 4 * g[i + 3]!;
    if (op === XOR) {
      for (let j = 0; j < 4; j++) w[o + j] = w[a + j]! ^ w[b + j]!;
    } else if (op === INV) {
      for (let j = 0; j < 4; j++) w[o + j] = w[a + j]!;
    } else if (op === AND) {
      const j = 2 * t;
      hash(a, j, 0);
      let r0 = h0, r1 = h1, r2 = h2, r3 = h3;
      hash(b, j + 1, 0);
      r0 ^= h0; r1 ^= h1; r2 ^= h2; r3 ^= h3;
      if (w[a]! & 1) {
        const k = 8 * t;
        r0 ^= gc.tables[k]!; r1 ^= gc.tables[k + 1]!; r2 ^= gc.tables[k + 2]!; r3 ^= gc.tables[k + 3]!;
      }
      if (w[b]! & 1) {
        const k = 8 * t + 4;
        r0 ^= gc.tables[k]! ^ w[a]!; r1 ^= gc.tables[k + 1]! ^ w[a + 1]!;
        r2 ^= gc.tables[k + 2]! ^ w[a + 2]!; r3 ^= gc.tables[k + 3]! ^ w[a + 3]!;
      }
      w[o] = r0; w[o + 1] = r1; w[o + 2] = r2; w[o + 3] = r3;
      t++;
    } else {
      hash(b, hi, 1); // HALF_TWEAK + h = 2^96 + h
      if (w[b]! & 1) {
        const k = 4 * hi;
        h0 ^= gc.halfTables[k]!; h1 ^= gc.halfTables[k + 1]!; h2 ^= gc.halfTables[k + 2]!; h3 ^= gc.halfTables[k + 3]!;
      }
      w[o] = h0; w[o + 1] = h1; w[o + 2] = h2; w[o + 3] = h3;
      hi++;
    }
  }
  const out = new Uint32Array(4 * c.outputs.length);
  c.outputs.forEach((wire, i) => out.set(w.subarray(4 * wire, 4 * wire + 4), 4 * i));
  return out;
}

export { LABEL };
