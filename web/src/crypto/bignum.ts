/**
 * Big-integer arithmetic for the browser client on native BigInt, with the long modular exponentiations and
 * Jacobi symbols optionally done by GMP compiled to WebAssembly (the npm package gmp-wasm): `useGmp()`
 * switches over. `privface bench web --arith gmp-wasm|bigint` compares them; the page keeps the faster. Miller–Rabin, the Jacobi symbol and
 * the extended Euclid below are written here because BigInt has none and the maintained WebAssembly
 * library is only worth its conversion cost for long exponents.
 */

type PowFn = (base: bigint, exp: bigint, mod: bigint) => bigint;

const WINDOW = 5;

/** base^exp mod m by left-to-right sliding windows of WINDOW bits (native BigInt). */
export function modPowNative(base: bigint, exp: bigint, mod: bigint): bigint {
  if (mod === 1n) return 0n;
  base %= mod;
  if (base < 0n) base += mod;
  if (exp < 64n) {
    let r = 1n;
    let b = base;
    let e = exp;
    while (e > 0n) {
      if (e & 1n) r = (r * b) % mod;
      b = (b * b) % mod;
      e >>= 1n;
    }
    return r;
  }
  const sq = (base * base) % mod;
  const odd: bigint[] = [base]; // base^(2i+1)
  for (let i = 1; i < 1 << (WINDOW - 1); i++) odd.push((odd[i - 1]! * sq) % mod);
  const bits = exp.toString(2);
  let r = 1n;
  let i = 0;
  while (i < bits.length) {
    if (bits[i] === "0") {
      r = (r * r) % mod;
      i++;
      continue;
    }
    let j = Math.min(i + WINDOW, bits.length);
    while (bits[j - 1] === "0") j--;
    const v = parseInt(bits.slice(i, j), 2);
    for (let t = i; t < j; t++) r = (r * r) % mod;
    r = (r * odd[v >> 1]!) % mod;
    i = j;
  }
  return r;
}

/** base^exp mod p² for an odd p > 1, in p-adic digits x = x₀ + x₁·p (0 ≤ x₀, x₁ < p): a product is x₀y₀ split
 *  by one division into t₀ + t₁·p, then x₁' = (t₁ + x₀y₁ + x₁y₀) mod p — two |p|-bit divisions and three |p|-bit
 *  products instead of one 2|p|-bit product and its 4|p|-bit by 2|p|-bit remainder, which V8's BigInt division
 *  makes several times dearer. Left-to-right sliding windows of 6 bits. Used by Paillier decryption's CRT halves
 *  c^(p−1) mod p² (Paillier 1999 §7). */
export function modPowSquare(base: bigint, exp: bigint, p: bigint): bigint {
  const p2 = p * p;
  base %= p2;
  if (base < 0n) base += p2;
  if (exp < 64n) return modPowNative(base, exp, p2);
  type Digits = [bigint, bigint];
  const mul = (a: Digits, b: Digits): Digits => {
    const t = a[0] * b[0];
    const t1 = t / p;
    return [t - t1 * p, (t1 + a[0] * b[1] + a[1] * b[0]) % p];
  };
  const sqr = (a: Digits): Digits => {
    const t = a[0] * a[0];
    const t1 = t / p;
    return [t - t1 * p, (t1 + ((a[0] * a[1]) << 1n)) % p];
  };
  const W = 6;
  const x: Digits = [base % p, base / p];
  const x2 = sqr(x);
  const odd: Digits[] = [x]; // x^(2i+1)
  for (let i = 1; i < 1 << (W - 1); i++) odd.push(mul(odd[i - 1]!, x2));
  const bits = exp.toString(2);
  let r: Digits | null = null;
  let i = 0;
  while (i < bits.length) {
    if (bits[i] === "0") {
      r = sqr(r!);
      i++;
      continue;
    }
    let j = Math.min(i + W, bits.length);
    while (bits[j - 1] === "0") j--;
    const o = odd[parseInt(bits.slice(i, j), 2) >> 1]!;
    if (r === null) r = o;
    else {
      for (let t = i; t < j; t++) r = sqr(r);
      r = mul(r, o);
    }
    i = j;
  }
  return r![0] + r![1] * p;
}

let pow: PowFn = modPowNative;
let backend = "bigint";

export function modPow(base: bigint, exp: bigint, mod: bigint): bigint {
  return pow(base, exp, mod);
}

export function arithmeticBackend(): string {
  return backend;
}

interface GmpBinding {
  mpz_t(): number;
  mpz_init(x: number): void;
  mpz_set_string(x: number, s: string, base: number): number;
  mpz_to_string(x: number, base: number): string;
  mpz_powm(r: number, b: number, e: number, m: number): void;
  mpz_jacobi(a: number, b: number): number;
}

/** Long exponentiations by GMP (WebAssembly) from now on; native BigInt for short exponents. */
export async function useGmp(): Promise<void> {
  const gmp = await import("gmp-wasm");
  const lib = await gmp.init();
  const b = lib.binding as unknown as GmpBinding;
  const [x, e, m, r] = [b.mpz_t(), b.mpz_t(), b.mpz_t(), b.mpz_t()];
  for (const v of [x, e, m, r]) b.mpz_init(v);
  pow = (base, exp, mod) => {
    if (exp < 256n || base < 0n) return modPowNative(base, exp, mod);
    b.mpz_set_string(x, base.toString(16), 16);
    b.mpz_set_string(e, exp.toString(16), 16);
    b.mpz_set_string(m, mod.toString(16), 16);
    b.mpz_powm(r, x, e, m);
    return BigInt("0x" + b.mpz_to_string(r, 16));
  };
  jac = (a, n) => {
    if (a < 0n || n <= 0n || (n & 1n) === 0n) return jacobiNative(a, n);
    b.mpz_set_string(x, a.toString(16), 16);
    b.mpz_set_string(m, n.toString(16), 16);
    return b.mpz_jacobi(x, m);
  };
  backend = "gmp-wasm";
}

export function useNative(): void {
  pow = modPowNative;
  jac = jacobiNative;
  backend = "bigint";
}

export function bitLength(x: bigint): number {
  return x === 0n ? 0 : x.toString(2).length;
}

/** Uniform bytes from the platform CSPRNG (crypto.getRandomValues; at most 65536 bytes a call). */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65536)));
  return out;
}

function bytesToBigInt(b: Uint8Array): bigint {
  let hex = "0x0";
  for (const x of b) hex += x.toString(16).padStart(2, "0");
  return BigInt(hex);
}

export function randomBits(bits: number): bigint {
  const b = randomBytes(Math.ceil(bits / 8));
  return bytesToBigInt(b) >> BigInt(b.length * 8 - bits);
}

/** `count` integers in [0, n), each a (|n| + 64)-bit string reduced mod n (NIST SP 800-90A §A.5.1, as the
 *  Python client's random_below_many). */
export function randomBelowMany(n: bigint, count: number): bigint[] {
  const size = Math.ceil((bitLength(n) + 64) / 8);
  const blob = randomBytes(size * count);
  const out: bigint[] = [];
  for (let i = 0; i < count; i++) out.push(bytesToBigInt(blob.subarray(i * size, (i + 1) * size)) % n);
  return out;
}

export function randomBelow(n: bigint): bigint {
  return randomBelowMany(n, 1)[0]!;
}

export function mod(a: bigint, m: bigint): bigint {
  const r = a % m;
  return r < 0n ? r + m : r;
}

/** a⁻¹ mod m (extended Euclid); throws if gcd(a, m) ≠ 1. */
export function modInv(a: bigint, m: bigint): bigint {
  let [r0, r1] = [mod(a, m), m];
  let [s0, s1] = [1n, 0n];
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1] = [r1, r0 - q * r1];
    [s0, s1] = [s1, s0 - q * s1];
  }
  if (r0 !== 1n) throw new RangeError("not invertible");
  return mod(s0, m);
}

export function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a < 0n ? -a : a;
}

let jac: (a: bigint, n: bigint) => number = jacobiNative;

/** The Jacobi symbol (a/n) for odd n > 0 (0 when gcd(a, n) ≠ 1). */
export function jacobi(a: bigint, n: bigint): number {
  return jac(a, n);
}

export function jacobiNative(a: bigint, n: bigint): number {
  if (n <= 0n || (n & 1n) === 0n) throw new RangeError("jacobi needs an odd positive n");
  a = mod(a, n);
  let t = 1;
  while (a !== 0n) {
    while ((a & 1n) === 0n) {
      a >>= 1n;
      const r = n & 7n;
      if (r === 3n || r === 5n) t = -t;
    }
    [a, n] = [n, a];
    if ((a & 3n) === 3n && (n & 3n) === 3n) t = -t;
    a %= n;
  }
  return n === 1n ? t : 0;
}

const SMALL_PRIMES: bigint[] = (() => {
  const out: bigint[] = [];
  const limit = 2000;
  const sieve = new Uint8Array(limit);
  for (let i = 2; i < limit; i++) {
    if (sieve[i]) continue;
    out.push(BigInt(i));
    for (let j = i * i; j < limit; j += i) sieve[j] = 1;
  }
  return out;
})();
const SMALL_PRODUCT = SMALL_PRIMES.reduce((a, b) => a * b, 1n);

/** Miller–Rabin with `rounds` random bases after trial division by the primes below 2000. For random
 *  candidates of ≥ 512 bits, 8 rounds leave an error below 2^-100 (FIPS 186-5 Table B.1). */
export function isProbablePrime(n: bigint, rounds = 8): boolean {
  if (n < 2n) return false;
  for (const p of SMALL_PRIMES) {
    if (n === p) return true;
  }
  if (gcd(n % SMALL_PRODUCT, SMALL_PRODUCT) !== 1n) return false;
  let d = n - 1n;
  let s = 0;
  while ((d & 1n) === 0n) {
    d >>= 1n;
    s++;
  }
  for (let i = 0; i < rounds; i++) {
    const a = 2n + randomBelow(n - 3n);
    let x = modPow(a, d, n);
    if (x === 1n || x === n - 1n) continue;
    let composite = true;
    for (let j = 1; j < s; j++) {
      x = (x * x) % n;
      if (x === n - 1n) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

/** A uniform random prime of exactly `bits` bits, the two top bits set, ≡ low (mod 2^lowBits) — as the
 *  Python `random_prime` (rejection sampling, no next_prime). `onTry` is called per candidate. */
export function randomPrime(bits: number, low: bigint, lowBits: number, onTry?: () => void,
                            maxTries = 100 * bits): bigint {
  const top = 3n << BigInt(bits - 2);
  const lb = BigInt(lowBits);
  for (let i = 0; i < maxTries; i++) {
    const x = (((randomBits(bits) | top) >> lb) << lb) | low;
    onTry?.();
    if (isProbablePrime(x)) return x;
  }
  throw new RangeError(`found no ${bits}-bit prime ≡ ${low} mod 2^${lowBits}`);
}
