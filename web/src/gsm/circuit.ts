/**
 * Boolean circuits and the builder of `privface.crypto.garble` (XOR, AND, INV, GAND gates over numbered wires;
 * words little-endian), wire for wire and gate for gate, so the circuit digest (SHA-256) the terminal's
 * garbled circuit carries equals the one built here — and the seed 004 §7 Fig. 6 circuit of
 * `crypto.compare.gsm_pi3_circuit`.
 */
import { sha256 } from "@noble/hashes/sha2.js";

export const OPS = ["XOR", "AND", "INV", "GAND"] as const;
const XOR = 0;
const AND = 1;
const INV = 2;
const GAND = 3;

export interface Circuit {
  nWires: number;
  garblerInputs: number[];
  evaluatorInputs: number[];
  constants: [number, number][];
  /** (op, a, b, out) per gate; b = −1 for INV. */
  gates: Int32Array;
  outputs: number[];
  andCount: number;
  halfCount: number;
  digest: Uint8Array;
}

export class CircuitBuilder {
  private n = 0;
  private garbler: number[] = [];
  private garblerSet = new Set<number>();
  private evaluator: number[] = [];
  private constants: [number, number][] = [];
  private gates: number[] = [];
  private outputs: number[] = [];

  private wire(): number {
    return this.n++;
  }

  garblerInput(k: number): number[] {
    const ws = Array.from({ length: k }, () => this.wire());
    this.garbler.push(...ws);
    ws.forEach((w) => this.garblerSet.add(w));
    return ws;
  }

  evaluatorInput(k: number): number[] {
    const ws = Array.from({ length: k }, () => this.wire());
    this.evaluator.push(...ws);
    return ws;
  }

  constant(value: number, k: number): number[] {
    const ws = Array.from({ length: k }, () => this.wire());
    ws.forEach((w, i) => this.constants.push([w, Math.floor(value / 2 ** i) % 2]));
    return ws;
  }

  private gate(op: number, a: number, b = -1): number {
    const out = this.wire();
    this.gates.push(op, a, b, out);
    return out;
  }

  xor(a: number, b: number): number {
    return this.gate(XOR, a, b);
  }

  and(a: number, b: number): number {
    return this.gate(AND, a, b);
  }

  inv(a: number): number {
    return this.gate(INV, a);
  }

  andKnown(a: number, b: number): number {
    if (!this.garblerSet.has(a)) throw new RangeError("andKnown: the first input must be a garbler input wire");
    return this.gate(GAND, a, b);
  }

  /** Ripple-carry x + y + carry; null = carry 0. */
  private addc(x: number[], y: number[], carry: number | null): [number[], number | null] {
    if (x.length !== y.length) throw new RangeError("add: operands of different widths");
    const out: number[] = [];
    for (let i = 0; i < x.length; i++) {
      const a = x[i]!;
      const b = y[i]!;
      if (carry === null) {
        out.push(this.xor(a, b));
        carry = this.and(a, b);
        continue;
      }
      out.push(this.xor(this.xor(a, b), carry));
      carry = this.xor(carry, this.and(this.xor(a, carry), this.xor(b, carry)));
    }
    return [out, carry];
  }

  add(x: number[], y: number[]): number[] {
    return this.addc(x, y, null)[0];
  }

  private xPlusNotYPlus1(x: number[], y: number[]): [number[], number] {
    const one = this.constant(1, 1)[0]!;
    const [out, carry] = this.addc(x, y.map((b) => this.inv(b)), one);
    return [out, carry!];
  }

  sub(x: number[], y: number[]): number[] {
    return this.xPlusNotYPlus1(x, y)[0];
  }

  mul(x: number[], y: number[], yKnown = false): number[] {
    const k = x.length;
    if (!(y.length > 0 && y.length <= k)) throw new RangeError("mul: the second operand must have 1 … len(x) bits");
    const bit = yKnown ? (a: number, yi: number) => this.andKnown(yi, a) : (a: number, yi: number) => this.and(a, yi);
    let acc = x.map((a) => bit(a, y[0]!));
    for (let i = 1; i < y.length; i++) {
      const partial = x.slice(0, k - i).map((a) => bit(a, y[i]!));
      acc = [...acc.slice(0, i), ...this.addc(acc.slice(i), partial, null)[0]];
    }
    return acc;
  }

  mulWide(x: number[], y: number[], k: number, yKnown = false): number[] {
    if (!(y.length > 0) || x.length > k) throw new RangeError("mul_wide: need a non-empty y and len(x) ≤ k");
    const bit = yKnown ? (a: number, yi: number) => this.andKnown(yi, a) : (a: number, yi: number) => this.and(a, yi);
    let acc = x.map((a) => bit(a, y[0]!));
    for (let i = 1; i < Math.min(y.length, k); i++) {
      const partial = x.slice(0, k - i).map((a) => bit(a, y[i]!));
      const high = acc.slice(i);
      let [out, carry] = this.addc(high, partial.slice(0, high.length), null);
      for (const b of partial.slice(high.length)) {
        if (carry === null) {
          out.push(b);
          continue;
        }
        out.push(this.xor(b, carry));
        carry = this.and(b, carry);
      }
      acc = [...acc.slice(0, i), ...out, ...(carry !== null && i + out.length < k ? [carry] : [])];
    }
    return acc.length < k ? [...acc, ...this.constant(0, k - acc.length)] : acc.slice(0, k);
  }

  ge(x: number[], y: number[]): number {
    return this.xPlusNotYPlus1(x, y)[1];
  }

  le(x: number[], y: number[]): number {
    return this.ge(y, x);
  }

  eq(x: number[], y: number[]): number {
    if (x.length !== y.length) throw new RangeError("eq: operands of different widths");
    let level = x.map((a, i) => this.inv(this.xor(a, y[i]!)));
    while (level.length > 1) {
      const next: number[] = [];
      for (let i = 0; i + 1 < level.length; i += 2) next.push(this.and(level[i]!, level[i + 1]!));
      if (level.length % 2) next.push(level[level.length - 1]!);
      level = next;
    }
    return level[0]!;
  }

  output(...bits: number[]): void {
    this.outputs.push(...bits);
  }

  build(): Circuit {
    const gates = Int32Array.from(this.gates);
    let andCount = 0;
    let halfCount = 0;
    for (let i = 0; i < gates.length; i += 4) {
      if (gates[i] === AND) andCount++;
      else if (gates[i] === GAND) halfCount++;
    }
    const c = { nWires: this.n, garblerInputs: this.garbler, evaluatorInputs: this.evaluator, constants: this.constants,
      gates, outputs: this.outputs, andCount, halfCount, digest: new Uint8Array(0) as Uint8Array };
    c.digest = circuitDigest(c);
    return c;
  }
}

/** SHA-256 of the circuit, as `Circuit.digest` (struct packing big-endian). */
function circuitDigest(c: Omit<Circuit, "digest">): Uint8Array {
  const parts: number[] = [];
  const u32 = (v: number) => parts.push((v >>> 24) & 255, (v >>> 16) & 255, (v >>> 8) & 255, v & 255);
  for (const ch of "privface/circuit/v1") parts.push(ch.charCodeAt(0));
  for (const part of [c.garblerInputs, c.evaluatorInputs, c.outputs]) {
    u32(part.length);
    part.forEach(u32);
  }
  u32(c.nWires);
  u32(c.constants.length);
  for (const [w, bit] of c.constants) {
    u32(w);
    parts.push(bit);
  }
  for (let i = 0; i < c.gates.length; i += 4) {
    parts.push(c.gates[i]!);
    u32(c.gates[i + 1]! >>> 0); // i32 two's complement: −1 → ffffffff
    u32(c.gates[i + 2]! >>> 0);
    u32(c.gates[i + 3]!);
  }
  return sha256(Uint8Array.from(parts));
}

const cache = new Map<string, Circuit>();

/** Seed 004 §7 Fig. 6 (`gsm_pi3_circuit`): evaluator X (xBits), Y (k); garbler pad, a (aBits), b, T (and ip_max);
 *  outputs [a·IP + b = Y], [T ≤ IP] (and [IP ≤ ip_max]) with IP = X − pad mod 2^xBits. */
export function gsmPi3Circuit(k: number, rangeCheck: boolean, aBits: number, xBits: number): Circuit {
  const key = `${k},${rangeCheck},${aBits},${xBits}`;
  const hit = cache.get(key);
  if (hit) return hit;
  if (xBits > k) throw new RangeError("gsm_pi3_circuit: x_bits must not exceed k");
  const b = new CircuitBuilder();
  const X = b.evaluatorInput(xBits);
  const Y = b.evaluatorInput(k);
  const pad = b.garblerInput(xBits);
  const a = b.garblerInput(aBits);
  const b_ = b.garblerInput(k);
  const T = b.garblerInput(xBits);
  const ip = b.sub(X, pad);
  const prod = xBits === k ? b.mul(ip, a, true) : b.mulWide(ip, a, k, true);
  const bits = [b.eq(b.add(prod, b_), Y), b.le(T, ip)];
  if (rangeCheck) bits.push(b.le(ip, b.garblerInput(xBits)));
  b.output(...bits);
  const c = b.build();
  cache.set(key, c);
  return c;
}
