/**
 * Reader for dlib's binary serialization format (dlib/serialize.h), enough for the model files
 * privface loads in the browser: the shape predictor `.dat` and the HOG `object_detector` file.
 *
 * Written by hand: no maintained JavaScript library reads dlib's format. Format facts:
 *  - integers: a control byte (bit 7 = negative, low nibble = byte count) then the magnitude's
 *    bytes little-endian;
 *  - float/double: `float_details`, i.e. a mantissa (int64) and an exponent (int16), both as
 *    integers above, value = mantissa·2^exponent (exponents 32000–32002: ±inf, NaN);
 *  - bool: one byte '0' or '1'; string: length then bytes;
 *  - std::vector: size then elements; dlib::matrix: −nr, −nc then the elements row-major.
 */

/** 2^e for dlib's int16 exponents (Math.pow is exact there; a table is several times faster on 16 M floats). */
const POW2 = new Float64Array(65536).map((_, i) => Math.pow(2, i - 32768));

export class DlibFormatError extends Error {
  override name = "DlibFormatError";
}

export class DlibReader {
  pos = 0;
  constructor(private readonly bytes: Uint8Array) {}

  fail(msg: string): never {
    throw new DlibFormatError(`dlib model file: ${msg} (at byte ${this.pos})`);
  }

  get done(): boolean {
    return this.pos >= this.bytes.length;
  }

  byte(): number {
    if (this.pos >= this.bytes.length) this.fail("unexpected end of file");
    return this.bytes[this.pos++]!;
  }

  int(): number {
    const ctrl = this.byte();
    if (ctrl & 0x70) this.fail(`bad integer control byte 0x${ctrl.toString(16)}`);
    const size = ctrl & 0x0f;
    if (size > 8) this.fail("integer wider than 8 bytes");
    if (this.pos + size > this.bytes.length) this.fail("unexpected end of file");
    const b = this.bytes;
    let value = 0;
    let mul = 1;
    for (let i = 0; i < size; i++) {
      value += b[this.pos++]! * mul;
      mul *= 256;
    }
    if (value > Number.MAX_SAFE_INTEGER) this.fail("integer too large");
    return ctrl & 0x80 ? -value : value;
  }

  uint(): number {
    const v = this.int();
    if (v < 0) this.fail("negative value for an unsigned field");
    return v;
  }

  bool(): boolean {
    const b = this.byte();
    if (b !== 0x30 && b !== 0x31) this.fail(`bad bool byte ${b}`);
    return b === 0x31;
  }

  string(): string {
    const n = this.uint();
    if (this.pos + n > this.bytes.length) this.fail("unexpected end of file");
    let s = "";
    for (let i = 0; i < n; i++) s += String.fromCharCode(this.bytes[this.pos++]!);
    return s;
  }

  /** A float or double (dlib writes both as float_details). */
  float(): number {
    const mantissa = this.int();
    const exponent = this.int();
    if (exponent >= 32000) {
      if (exponent === 32000) return Infinity;
      if (exponent === 32001) return -Infinity;
      return NaN;
    }
    return exponent >= -32768 ? mantissa * POW2[exponent + 32768]! : mantissa * Math.pow(2, exponent);
  }

  /** A dlib::matrix of floats/doubles: returns rows, cols and the row-major values. */
  matrix(): { nr: number; nc: number; data: Float64Array } {
    let nr = this.int();
    let nc = this.int();
    if (nr > 0 || nc > 0) this.fail("old-style matrix serialization is not supported");
    nr = -nr;
    nc = -nc;
    if (nr * nc > 1 << 26) this.fail("matrix too large");
    const data = new Float64Array(nr * nc);
    for (let i = 0; i < data.length; i++) data[i] = this.float();
    return { nr, nc, data };
  }

  /** A column of `n` floats as float32 (a shape predictor's leaf: no float64 copy for its 16 M values). */
  matrixF32(n: number, what: string): Float32Array {
    const nr = -this.int();
    const nc = -this.int();
    if (nr * nc !== n || nr < 0) this.fail(what);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = this.float();
    return data;
  }

  /** A std::vector's length, checked against a sanity bound. */
  size(max = 1 << 26): number {
    const n = this.uint();
    if (n > max) this.fail(`vector length ${n} too large`);
    return n;
  }
}
