/**
 * The privface wire format, driven by `src/privface/wire/schema.json` (bundled at build time; nothing here
 * re-states a message). Byte-identical with the Python `privface.wire.codec`: frame = magic | version u8 |
 * type id u16 | fields in schema order; decoding checks every length, range and pattern and refuses
 * trailing bytes (any violation is a WireError). Fixed-width integers (`uint`, issue 39): exactly width × times
 * big-endian bytes, left-padded, the width a number or an earlier `width` field of the message; `decode`'s
 * `widths` refuses a width field other than the receiver's key gives. Retired type ids are refused with the reason.
 */
import schemaJson from "../../../src/privface/wire/schema.json";

export class WireError extends Error {
  override name = "WireError";
}

type Spec =
  | { type: "u8" | "u16" | "u32" | "u64" | "i32" | "bool" }
  | { type: "bytes"; max: number }
  | { type: "bigint"; max: number }
  | { type: "width"; max: number }
  | { type: "uint"; width: number | string; times?: number }
  | { type: "str"; max: number; pattern?: string; regex?: RegExp }
  | { type: "list"; max: number; of: Spec }
  | { type: "optional"; of: Spec };

/** A field value: numbers for u8/u16/u32/i32, bigint for u64 and bigint, Uint8Array, string, boolean,
 *  arrays for lists, null for an absent optional. */
export type Value = number | bigint | boolean | string | Uint8Array | null | Value[];
export type Fields = Record<string, Value>;

interface RawSchema {
  magic: string;
  version: number;
  max_message_bytes: number;
  retired?: Record<string, string>;
  types: Record<string, unknown>;
  messages: { name: string; id: number; fields: [string, unknown][] }[];
}

const SCHEMA = schemaJson as unknown as RawSchema;
const MAGIC = new TextEncoder().encode(SCHEMA.magic);
export const VERSION = SCHEMA.version;
export const MAX_MESSAGE_BYTES = SCHEMA.max_message_bytes;
const HEADER = MAGIC.length + 3;
const RANGE: Record<string, [number, number]> = {
  u8: [0, 0xff], u16: [0, 0xffff], u32: [0, 0xffffffff], i32: [-0x80000000, 0x7fffffff],
};
const U64_MAX = (1n << 64n) - 1n;

function resolve(spec: unknown): Spec {
  const raw = (typeof spec === "string" ? SCHEMA.types[spec] : spec) as Record<string, unknown> | undefined;
  if (raw === undefined) throw new Error(`wire schema: unknown type ${String(spec)}`);
  const out: Record<string, unknown> = { ...raw };
  if ("of" in out) out.of = resolve(out.of);
  // The schema's patterns are anchored ^…$ and use only syntax that means the same in Python and JS.
  if (typeof out.pattern === "string") out.regex = new RegExp(out.pattern, "u");
  return out as Spec;
}

const BY_NAME = new Map<string, { id: number; fields: [string, Spec][] }>();
const BY_ID = new Map<number, string>();
const RETIRED = new Map<number, string>(Object.entries(SCHEMA.retired ?? {}).map(([id, why]) => [Number(id), why]));
for (const m of SCHEMA.messages) {
  BY_NAME.set(m.name, { id: m.id, fields: m.fields.map(([f, t]) => [f, resolve(t)]) });
  if (BY_ID.has(m.id) || RETIRED.has(m.id)) throw new Error("wire schema: duplicate or retired message type ids");
  BY_ID.set(m.id, m.name);
}

export function messageNames(): string[] {
  return [...BY_NAME.keys()];
}

// ---------------------------------------------------------------- encoding

class Writer {
  buf = new Uint8Array(1024);
  len = 0;
  room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }
  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
  uint(v: number, size: number): void {
    this.room(size);
    for (let i = size - 1; i >= 0; i--) {
      this.buf[this.len + i] = v & 0xff;
      v = Math.floor(v / 256);
    }
    this.len += size;
  }
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** Minimal big-endian magnitude of a non-negative integer (zero: no bytes). */
export function bigToBytes(v: bigint): Uint8Array {
  if (v === 0n) return new Uint8Array(0);
  let hex = v.toString(16);
  if (hex.length % 2) hex = "0" + hex;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(2 * i, 2), 16);
  return out;
}

export function bytesToBig(b: Uint8Array): bigint {
  if (b.length === 0) return 0n;
  let hex = "";
  for (const x of b) hex += HEX[x];
  return BigInt("0x" + hex);
}

/** The byte size of a `uint`: its literal width or its message's width field, times `times`. */
function uintSize(spec: { width: number | string; times?: number }, ctx: Fields): number {
  let width = spec.width;
  if (typeof width === "string") {
    const v = ctx[width];
    if (typeof v !== "number") throw new WireError(`a uint of width ${width} outside a message that has that field`);
    width = v;
  }
  return width * (spec.times ?? 1);
}

/** Exactly `size` big-endian bytes of a non-negative integer, left-padded with zeros; null if it does not fit. */
export function bigToFixed(v: bigint, size: number): Uint8Array | null {
  const raw = bigToBytes(v);
  if (raw.length > size) return null;
  const out = new Uint8Array(size);
  out.set(raw, size - raw.length);
  return out;
}

function enc(spec: Spec, v: Value | undefined, w: Writer, where: string, ctx: Fields): void {
  switch (spec.type) {
    case "bool":
      if (typeof v !== "boolean") throw new WireError(`${where}: expected bool`);
      w.uint(v ? 1 : 0, 1);
      return;
    case "u8": case "u16": case "u32": case "i32": {
      if (typeof v !== "number" || !Number.isInteger(v)) throw new WireError(`${where}: expected an integer`);
      const [lo, hi] = RANGE[spec.type]!;
      if (v < lo || v > hi) throw new WireError(`${where}: ${v} does not fit ${spec.type}`);
      w.uint(v < 0 ? v + 0x100000000 : v, spec.type === "u8" ? 1 : spec.type === "u16" ? 2 : 4);
      return;
    }
    case "u64": {
      const b = typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : v;
      if (typeof b !== "bigint" || b < 0n || b > U64_MAX) throw new WireError(`${where}: expected a u64`);
      w.uint(Number(b >> 32n), 4);
      w.uint(Number(b & 0xffffffffn), 4);
      return;
    }
    case "bytes": case "str": {
      let raw: Uint8Array;
      if (spec.type === "str") {
        if (typeof v !== "string") throw new WireError(`${where}: expected str`);
        if (spec.regex && !spec.regex.test(v)) throw new WireError(`${where}: value does not match ${spec.pattern}`);
        raw = new TextEncoder().encode(v);
      } else {
        if (!(v instanceof Uint8Array)) throw new WireError(`${where}: expected bytes`);
        raw = v;
      }
      if (raw.length > spec.max) throw new WireError(`${where}: ${raw.length} bytes exceed the maximum ${spec.max}`);
      w.uint(raw.length, 4);
      w.bytes(raw);
      return;
    }
    case "bigint": {
      if (typeof v !== "bigint" || v < 0n) throw new WireError(`${where}: expected a non-negative bigint`);
      const raw = bigToBytes(v);
      if (raw.length > spec.max) throw new WireError(`${where}: integer of ${raw.length} bytes exceeds the maximum ${spec.max}`);
      w.uint(raw.length, 2);
      w.bytes(raw);
      return;
    }
    case "width": {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > spec.max) {
        throw new WireError(`${where}: a byte width must be an integer in [1, ${spec.max}]`);
      }
      w.uint(v, 2);
      return;
    }
    case "uint": {
      if (typeof v !== "bigint" || v < 0n) throw new WireError(`${where}: expected a non-negative bigint`);
      const size = uintSize(spec, ctx);
      const raw = bigToFixed(v, size);
      if (raw === null) throw new WireError(`${where}: integer does not fit the field's ${size} bytes`);
      w.bytes(raw);
      return;
    }
    case "list": {
      if (!Array.isArray(v)) throw new WireError(`${where}: expected a list`);
      if (v.length > spec.max) throw new WireError(`${where}: ${v.length} items exceed the maximum ${spec.max}`);
      w.uint(v.length, 4);
      v.forEach((item, i) => enc(spec.of, item, w, `${where}[${i}]`, ctx));
      return;
    }
    case "optional":
      if (v === null || v === undefined) {
        w.uint(0, 1);
      } else {
        w.uint(1, 1);
        enc(spec.of, v, w, where, ctx);
      }
      return;
  }
}

/** The frame of message `name` with the given field values (exactly the schema's fields). */
export function encode(name: string, values: Fields): Uint8Array {
  const m = BY_NAME.get(name);
  if (!m) throw new WireError(`unknown message type ${name}`);
  const want = m.fields.map(([f]) => f).sort().join(",");
  if (Object.keys(values).sort().join(",") !== want) throw new WireError(`${name}: fields differ from the schema's`);
  const w = new Writer();
  w.bytes(MAGIC);
  w.uint(VERSION, 1);
  w.uint(m.id, 2);
  for (const [f, spec] of m.fields) enc(spec, values[f], w, `${name}.${f}`, values);
  if (w.len > MAX_MESSAGE_BYTES) throw new WireError(`${name}: ${w.len} bytes exceed the message maximum`);
  return w.buf.slice(0, w.len);
}

// ---------------------------------------------------------------- decoding

class Reader {
  pos = HEADER;
  constructor(readonly data: Uint8Array) {}
  take(n: number, where: string): Uint8Array {
    if (this.pos + n > this.data.length) {
      throw new WireError(`${where}: message truncated (needs ${n} more bytes at offset ${this.pos})`);
    }
    const b = this.data.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  uint(size: number, where: string): number {
    const b = this.take(size, where);
    let v = 0;
    for (const x of b) v = v * 256 + x;
    return v;
  }
}

function dec(spec: Spec, r: Reader, where: string, ctx: Fields): Value {
  switch (spec.type) {
    case "bool": {
      const v = r.uint(1, where);
      if (v > 1) throw new WireError(`${where}: bool must be 0 or 1, got ${v}`);
      return v === 1;
    }
    case "u8": return r.uint(1, where);
    case "u16": return r.uint(2, where);
    case "u32": return r.uint(4, where);
    case "i32": {
      const v = r.uint(4, where);
      return v >= 0x80000000 ? v - 0x100000000 : v;
    }
    case "u64": {
      const hi = r.uint(4, where);
      const lo = r.uint(4, where);
      return (BigInt(hi) << 32n) | BigInt(lo);
    }
    case "bytes": case "str": {
      const n = r.uint(4, where);
      if (n > spec.max) throw new WireError(`${where}: length ${n} exceeds the maximum ${spec.max}`);
      const raw = r.take(n, where);
      if (spec.type === "bytes") return raw.slice();
      let s: string;
      try {
        s = new TextDecoder("utf-8", { fatal: true }).decode(raw);
      } catch {
        throw new WireError(`${where}: not valid UTF-8`);
      }
      if (spec.regex && !spec.regex.test(s)) throw new WireError(`${where}: value does not match ${spec.pattern}`);
      return s;
    }
    case "bigint": {
      const n = r.uint(2, where);
      if (n > spec.max) throw new WireError(`${where}: integer of ${n} bytes exceeds the maximum ${spec.max}`);
      const raw = r.take(n, where);
      if (raw[0] === 0) throw new WireError(`${where}: integer has a leading zero byte (not minimal)`);
      return bytesToBig(raw);
    }
    case "width": {
      const v = r.uint(2, where);
      if (v < 1 || v > spec.max) throw new WireError(`${where}: byte width ${v} outside [1, ${spec.max}]`);
      return v;
    }
    case "uint":
      return bytesToBig(r.take(uintSize(spec, ctx), where));
    case "list": {
      const n = r.uint(4, where);
      if (n > spec.max) throw new WireError(`${where}: ${n} items exceed the maximum ${spec.max}`);
      const out: Value[] = [];
      for (let i = 0; i < n; i++) out.push(dec(spec.of, r, `${where}[${i}]`, ctx));
      return out;
    }
    case "optional": {
      const flag = r.uint(1, where);
      if (flag > 1) throw new WireError(`${where}: optional flag must be 0 or 1, got ${flag}`);
      return flag ? dec(spec.of, r, where, ctx) : null;
    }
  }
}

/** The message name in a frame's header (magic, version and type id checked). */
export function messageType(data: Uint8Array): string {
  if (data.length > MAX_MESSAGE_BYTES) throw new WireError(`message of ${data.length} bytes exceeds the maximum`);
  if (data.length < HEADER) throw new WireError(`message truncated: ${data.length} bytes, the header alone has ${HEADER}`);
  for (let i = 0; i < MAGIC.length; i++) {
    if (data[i] !== MAGIC[i]) throw new WireError("not a privface wire message (bad magic)");
  }
  const version = data[MAGIC.length]!;
  if (version !== VERSION) throw new WireError(`unsupported wire version ${version} (this build speaks ${VERSION})`);
  const tid = data[MAGIC.length + 1]! * 256 + data[MAGIC.length + 2]!;
  const retired = RETIRED.get(tid);
  if (retired !== undefined) throw new WireError(`message type id ${tid} is retired: ${retired}`);
  const name = BY_ID.get(tid);
  if (name === undefined) throw new WireError(`unknown message type id ${tid}`);
  return name;
}

/** The field values of one frame; `expected` names the only acceptable message type; `widths` maps width fields
 *  (e.g. `n_bytes`) to the value the receiver's key gives — another value is refused. */
export function decode(data: Uint8Array, expected?: string, widths?: Record<string, number>): { name: string; values: Fields } {
  const name = messageType(data);
  if (expected !== undefined && name !== expected) throw new WireError(`expected a ${expected} message, got ${name}`);
  const r = new Reader(data);
  const values: Fields = {};
  for (const [f, spec] of BY_NAME.get(name)!.fields) {
    values[f] = dec(spec, r, `${name}.${f}`, values);
    const want = widths?.[f];
    if (spec.type === "width" && want !== undefined && values[f] !== want) {
      throw new WireError(`${name}.${f}: integers of ${String(values[f])} bytes where this key's are ${want} bytes`);
    }
  }
  if (r.pos !== data.length) throw new WireError(`${name}: ${data.length - r.pos} trailing bytes after the last field`);
  return { name, values };
}
