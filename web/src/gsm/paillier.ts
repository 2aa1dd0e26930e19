/**
 * The device's Paillier key pair (seed 004 §5: epk = N, g = N + 1; esk = (p, q)), as
 * `privface.crypto.paillier.PaillierPrivateKey`: Paillier–Blum primes p ≡ q ≡ 3 (mod 4) for Π_epk (§8.1),
 * decryption by CRT, and the owner's r^N by CRT (two |p|-bit exponentiations per prime).
 */
import type { PowMany } from "../crypto/pool.js";
import { bitLength, gcd, isProbablePrime, modInv, modPow, modPowSquare, randomBelow, randomBits, randomPrime } from "../crypto/bignum.js";

const WINDOW = 5;

/** T[j][v] = base^(v·2^(WINDOW·j)) mod m for j < ⌈bits/WINDOW⌉. */
function combTable(base: bigint, bits: number, m: bigint): bigint[][] {
  const rows: bigint[][] = [];
  let b = base % m;
  for (let j = 0; j < Math.ceil(bits / WINDOW); j++) {
    const row = [1n];
    let t = 1n;
    for (let v = 1; v < 1 << WINDOW; v++) {
      t = (t * b) % m;
      row.push(t);
    }
    rows.push(row);
    b = (t * b) % m;
  }
  return rows;
}

function combPow(table: bigint[][], e: bigint, m: bigint): bigint {
  let acc = 1n;
  const mask = BigInt((1 << WINDOW) - 1);
  const w = BigInt(WINDOW);
  for (const row of table) {
    const v = Number(e & mask);
    if (v) acc = (acc * row[v]!) % m;
    e >>= w;
  }
  return acc;
}

export function crt(xp: bigint, xq: bigint, p: bigint, q: bigint, qInvP: bigint): bigint {
  let t = ((xp - xq) * qInvP) % p;
  if (t < 0n) t += p;
  return xq + q * t;
}

/** A uniform unit of Z*_n. */
export function randomUnit(n: bigint): bigint {
  for (;;) {
    const r = randomBelow(n);
    if (r !== 0n && gcd(r, n) === 1n) return r;
  }
}

/** The owner's short-exponent (r, r^N mod N²) source (`OwnerShortExponentRn`, DJN10 §4.2): fixed-base comb tables
 *  of h mod p, q (r = h^s by CRT) and of h^N mod p², q² (r^N by CRT), built once; every pair then costs four
 *  comb products of ⌈|N|/2⌉/WINDOW multiplications, two of them at half the width. */
export class ShortRn {
  private readonly bits: number;
  private readonly tables: bigint[][][];
  private readonly n: bigint;
  private readonly qInvP: bigint;
  private readonly q2InvP2: bigint;

  constructor(readonly p: bigint, readonly q: bigint) {
    this.n = p * q;
    this.bits = Math.ceil(bitLength(this.n) / 2);
    this.qInvP = modInv(q, p);
    this.q2InvP2 = modInv(q * q, p * p);
    const h = randomUnit(this.n);
    this.tables = [combTable(h, this.bits, p), combTable(h, this.bits, q),
      combTable(modPowSquare(h, this.n, p), this.bits, p * p), combTable(modPowSquare(h, this.n, q), this.bits, q * q)];
  }

  next(): [bigint, bigint] {
    const { p, q } = this;
    const s = randomBits(this.bits);
    const [tp, tq, tp2, tq2] = this.tables as [bigint[][], bigint[][], bigint[][], bigint[][]];
    return [crt(combPow(tp, s, p), combPow(tq, s, q), p, q, this.qInvP),
      crt(combPow(tp2, s, p * p), combPow(tq2, s, q * q), p * p, q * q, this.q2InvP2)];
  }
}

export class PaillierKey {
  readonly n: bigint;
  readonly n2: bigint;
  readonly p2: bigint;
  readonly q2: bigint;
  private readonly hp: bigint;
  private readonly hq: bigint;
  readonly qInvP: bigint;
  private readonly q2InvP2: bigint;

  constructor(readonly p: bigint, readonly q: bigint) {
    if (p === q || !isProbablePrime(p, 20) || !isProbablePrime(q, 20)) {
      throw new RangeError("p and q must be two distinct primes");
    }
    this.n = p * q;
    if (gcd(this.n, (p - 1n) * (q - 1n)) !== 1n) throw new RangeError("Paillier needs gcd(N, (p−1)(q−1)) = 1");
    this.n2 = this.n * this.n;
    this.p2 = p * p;
    this.q2 = q * q;
    const g = this.n + 1n;
    this.hp = modInv((modPow(g, p - 1n, this.p2) - 1n) / p, p);
    this.hq = modInv((modPow(g, q - 1n, this.q2) - 1n) / q, q);
    this.qInvP = modInv(q, p);
    this.q2InvP2 = modInv(this.q2, this.p2);
  }

  get bits(): number {
    return bitLength(this.n);
  }

  /** (1 + xN) mod N² = g^x. */
  plainFactor(x: bigint): bigint {
    let m = x % this.n;
    if (m < 0n) m += this.n;
    return (1n + m * this.n) % this.n2;
  }

  /** (r, r^N mod N²) for a fresh uniform r ∈ Z*_N: r^N mod p² = (r^q mod p)^p mod p². */
  randomRRn(): [bigint, bigint] {
    const rp = randomUnit(this.p);
    const rq = randomUnit(this.q);
    const np = modPowSquare(modPow(rp, this.q, this.p), this.p, this.p);
    const nq = modPowSquare(modPow(rq, this.p, this.q), this.q, this.q);
    return [crt(rp, rq, this.p, this.q, this.qInvP), crt(np, nq, this.p2, this.q2, this.q2InvP2)];
  }

  private short: ShortRn | null = null;

  /** (r, r^N mod N²) = (h^s mod N, (h^N)^s mod N²) for s ← [0, 2^⌈|N|/2⌉), h drawn once per key object
   *  (`OwnerShortExponentRn`: DJN10 §4.2 short exponents, for the key owner's own encryptions only — the Π_en
   *  ciphertexts, whose witness r the Fig. 9 proof masks with a uniform unit). */
  shortRRn(): [bigint, bigint] {
    this.short ??= new ShortRn(this.p, this.q);
    return this.short.next();
  }

  /** ⟦x; r⟧ and the witness r (short-exponent r, `shortRRn`; or the given pair). */
  encrypt(x: bigint, rRn: [bigint, bigint] = this.shortRRn()): { c: bigint; r: bigint } {
    const [r, rn] = rRn;
    return { c: (this.plainFactor(x) * rn) % this.n2, r };
  }

  /** c as a ciphertext under this key: an integer in Z*_{N²}, else ProtocolError-worthy RangeError. */
  checkCiphertext(c: bigint): bigint {
    if (c <= 0n || c >= this.n2 || gcd(c, this.n) !== 1n) throw new RangeError("a ciphertext is not in Z*_{N²} for this key");
    return c;
  }

  /** [Dec(c)] with the CRT halves c^(p−1) mod p², c^(q−1) mod q² as two batches of `powSquareMany` (a worker
   *  pool in the page: `decrypt_many`'s threads). */
  async decryptMany(cts: bigint[], powSquareMany: PowSquareMany = localPowSquareMany): Promise<bigint[]> {
    cts.forEach((c) => this.checkCiphertext(c));
    const [hp, hq] = await Promise.all([powSquareMany(cts.map((c) => c % this.p2), this.p - 1n, this.p),
      powSquareMany(cts.map((c) => c % this.q2), this.q - 1n, this.q)]);
    return cts.map((_, i) => crt((((hp[i]! - 1n) / this.p) * this.hp) % this.p, (((hq[i]! - 1n) / this.q) * this.hq) % this.q,
      this.p, this.q, this.qInvP));
  }

  /** Dec(c) ∈ [0, N) by CRT. */
  decrypt(c: bigint): bigint {
    this.checkCiphertext(c);
    const mp = (((modPowSquare(c, this.p - 1n, this.p) - 1n) / this.p) * this.hp) % this.p;
    const mq = (((modPowSquare(c, this.q - 1n, this.q) - 1n) / this.q) * this.hq) % this.q;
    return crt(mp, mq, this.p, this.q, this.qInvP);
  }
}

/** base^exp mod m for many bases on this thread (the default when no worker pool is given). */
export const localPowMany: PowMany = async (bases, exp, m) => bases.map((b) => modPow(b, exp, m));

/** base^exp mod p² for many bases (`modPowSquare`: p-adic digits), p the prime. */
export type PowSquareMany = (bases: bigint[], exp: bigint, p: bigint) => Promise<bigint[]>;

export const localPowSquareMany: PowSquareMany = async (bases, exp, p) => bases.map((b) => modPowSquare(b, exp, p));

/** Π b_i^(e_i) mod m. */
export type ProdPow = (bases: bigint[], exps: bigint[], m: bigint) => Promise<bigint>;

export const localProdPow: ProdPow = async (bases, exps, m) => bases.reduce((acc, b, i) => (acc * modPow(b, exps[i]!, m)) % m, 1n);

/** The device's long arithmetic for Π_en, on this thread by default; in the page, spread over a Web Worker pool
 *  (app/gsmWorker.ts). `rnMany(key, k)`: k short-exponent pairs (r, r^N mod N²) of `key` (`ShortRn`). */
export interface GsmWork {
  powMany: PowMany;
  powSquareMany: PowSquareMany;
  prodPow: ProdPow;
  rnMany: (key: PaillierKey, count: number) => Promise<[bigint, bigint][]>;
}

export const localWork: GsmWork = {
  powMany: localPowMany,
  powSquareMany: localPowSquareMany,
  prodPow: localProdPow,
  rnMany: async (key, count) => Array.from({ length: count }, () => key.shortRRn()),
};

/** A Paillier–Blum key of exactly `bits` bits (|p| = |q| = bits/2, p ≡ q ≡ 3 mod 4), as
 *  `generate_paillier_keypair(bits, blum=True)`; `onTry` is called per prime candidate (progress). */
export function generateBlumKey(bits: number, onTry?: () => void): PaillierKey {
  if (bits % 2 || bits < 16) throw new RangeError(`Paillier modulus bits must be even and at least 16, got ${bits}`);
  for (;;) {
    const p = randomPrime(bits / 2, 3n, 2, onTry);
    const q = randomPrime(bits / 2, 3n, 2, onTry);
    if (p !== q && gcd(p * q, (p - 1n) * (q - 1n)) === 1n) return new PaillierKey(p, q);
  }
}
