/**
 * Joye–Libert encryption (Joye & Libert, EUROCRYPT 2013), the LHE of seed 000 §II-B/§VI, key owner's
 * side only: key generation, the owner's CRT encryption and the decryption by a Pohlig–Hellman discrete
 * logarithm in halves — the algorithms of the Python `privface.crypto.joye_libert`, on BigInt.
 *
 *   Enc(m; x) = y^m · x^(2^k) mod N;  Dec: h = c^p' mod p = g^m with g = y^p' of order 2^k, p' = (p−1)/2^k.
 *
 * Decryption is blinded as in the Python key: h = (c·ρ)^p' with a fresh ρ = x^(2^k) mod p (ρ^p' = 1), and the
 * Jacobi symbol of c mod q is read from c·x² mod q, so the variable-time BigInt arithmetic never runs on a
 * ciphertext as the server sent it (a remote timing attack on p, as Brumley and Boneh's on RSA-CRT).
 */
import { bitLength, isProbablePrime, jacobi, modInv, modPow, randomBelowMany, randomPrime } from "./bignum.js";

export interface JLParams {
  bits: number;
  k: number;
  p_bits: number | null;
}

export class CryptoError extends Error {
  override name = "CryptoError";
}

/** T[j][v] = base^(v·2^(8j)) mod m for j < ⌈bits/8⌉, v < 256. */
export function fixedBaseTable(base: bigint, bits: number, m: bigint): bigint[][] {
  const rows: bigint[][] = [];
  let b = base % m;
  for (let j = 0; j < Math.ceil(bits / 8); j++) {
    const row = [1n];
    let t = 1n;
    for (let v = 1; v < 256; v++) {
      t = (t * b) % m;
      row.push(t);
    }
    rows.push(row);
    b = (t * b) % m;
  }
  return rows;
}

export function fixedBasePow(table: bigint[][], e: bigint, m: bigint): bigint {
  let acc = 1n;
  for (const row of table) {
    const v = Number(e & 255n);
    if (v) acc = (acc * row[v]!) % m;
    e >>= 8n;
  }
  return acc;
}

type Tables = { w: number; leaf: Map<bigint, number>; inner: Map<number, bigint[][]> };

export class JLPrivateKey {
  readonly n: bigint;
  readonly twoK: bigint;
  readonly pPrime: bigint;
  readonly qInvP: bigint;
  private readonly g: bigint;
  private tables: Tables | null = null;
  private encTable: bigint[][] | null = null;
  private pool: bigint[] = [];

  constructor(readonly p: bigint, readonly q: bigint, readonly y: bigint, readonly k: number) {
    this.n = p * q;
    this.twoK = 1n << BigInt(k);
    this.pPrime = (p - 1n) >> BigInt(k);
    this.qInvP = modInv(q, p);
    this.g = modPow(y, this.pPrime, p);
  }

  /** Checks of a key read from a file: p, q distinct probable primes, p ≡ 1 (mod 2^k), q ≡ 3 (mod 4), y a
   *  non-residue mod p and mod q (as JoyeLibertPrivateKey's constructor). */
  validate(): void {
    const { p, q, y } = this;
    if (p === q || !isProbablePrime(p, 16) || !isProbablePrime(q, 16)) throw new CryptoError("p and q must be two distinct primes");
    if (p % this.twoK !== 1n || q % 4n !== 3n) throw new CryptoError("Joye–Libert needs p ≡ 1 (mod 2^k) and q ≡ 3 (mod 4)");
    if (!(y > 0n && y < this.n) || jacobi(y, p) !== -1 || jacobi(y, q) !== -1) {
      throw new CryptoError("y must be a quadratic non-residue modulo p and modulo q");
    }
  }

  get bits(): number {
    return bitLength(this.n);
  }

  /** x^(2^k) mod p by k squarings. */
  private randomness(x: bigint): bigint {
    let r = x;
    for (let i = 0; i < this.k; i++) r = (r * r) % this.p;
    return r;
  }

  /** [Enc(m) for m in ms] by the owner (Python `encrypt_many`): y^m mod p from a fixed-base table,
   *  x^(2^k) mod p; mod q the single squaring (−1)^m·x² (q ≡ 3 mod 4 makes it distributed as y^m·x^(2^k)). */
  encryptMany(ms: bigint[]): bigint[] {
    const { p, q } = this;
    const tp = this.encTable ?? (this.encTable = fixedBaseTable(this.y % p, this.k, p));
    const pooled = this.pool.splice(0, ms.length);
    const xp = randomBelowMany(p - 1n, ms.length - pooled.length);
    const xq = randomBelowMany(q - 1n, ms.length);
    return ms.map((m0, i) => {
      const m = ((m0 % this.twoK) + this.twoK) % this.twoK;
      const r = i < pooled.length ? pooled[i]! : this.randomness(xp[i - pooled.length]! + 1n);
      const cp = (fixedBasePow(tp, m, p) * r) % p;
      let cq = ((xq[i]! + 1n) * (xq[i]! + 1n)) % q;
      if (m & 1n) cq = q - cq;
      return cq + q * ((((cp - cq) * this.qInvP) % p + p) % p); // CRT (Garner)
    });
  }

  /** Top the pool of randomness x^(2^k) mod p (fresh uniform x, each used by exactly one later `encryptMany`
   *  encryption or decryption blinding) up to `count`, and build the encryption and logarithm tables: the
   *  message-independent work, done ahead of time (the Python `Client.prepare`). Returns how many were made. */
  prepare(count: number): number {
    this.encTable ??= fixedBaseTable(this.y % this.p, this.k, this.p);
    this.dlogTables();
    const need = count - this.pool.length;
    if (need <= 0) return 0;
    for (const x of randomBelowMany(this.p - 1n, need)) this.pool.push(this.randomness(x + 1n));
    return need;
  }

  /** [Dec(c)] of received integers, each checked to be a ciphertext: 0 < c < N, a unit, Jacobi symbol +1 —
   *  with the owner's shortcut (c/p) = (−1)^Dec(c), so only (c mod q / q) is computed. */
  decryptValues(values: bigint[]): bigint[] {
    this.checkRange(values);
    return this.finishDecrypt(values, this.blind(values).map((c) => modPow(c, this.pPrime, this.p)));
  }

  /** `decryptValues` with the c^p' mod p computed by `powMany` (e.g. a pool of Web Workers) while this
   *  thread computes the Jacobi symbols. */
  async decryptValuesWith(values: bigint[], powMany: (b: bigint[], e: bigint, m: bigint) => Promise<bigint[]>): Promise<bigint[]> {
    this.checkRange(values);
    const pending = powMany(this.blind(values), this.pPrime, this.p);
    return this.finishDecrypt(values, await pending, this.jacobiQ(values));
  }

  /** c·ρ mod p with ρ = x^(2^k) from the pool or fresh: (c·ρ)^p' = c^p'. */
  private blind(values: bigint[]): bigint[] {
    const pooled = this.pool.splice(0, values.length);
    const xs = randomBelowMany(this.p - 1n, values.length - pooled.length);
    return values.map((c, i) => (c * (i < pooled.length ? pooled[i]! : this.randomness(xs[i - pooled.length]! + 1n))) % this.p);
  }

  /** (c mod q / q) of each value, read from c·x² mod q for a fresh unit x. */
  private jacobiQ(values: bigint[]): number[] {
    const q = this.q;
    const xs = randomBelowMany(q - 1n, values.length);
    return values.map((c, i) => jacobi((c * (xs[i]! + 1n) ** 2n) % q, q));
  }

  private checkRange(values: bigint[]): void {
    values.forEach((c, i) => {
      if (!(c > 0n && c < this.n)) throw new CryptoError(`Joye–Libert ciphertext ${i} is outside Z_N for this key`);
    });
  }

  private finishDecrypt(values: bigint[], hs: bigint[], lqs?: number[]): bigint[] {
    lqs ??= this.jacobiQ(values);
    if (hs.length !== values.length) throw new CryptoError("decryption lost values");
    hs.forEach((h, i) => {
      if (h === 0n || lqs![i] === 0) throw new CryptoError(`Joye–Libert ciphertext ${i} is not a unit of Z_N`);
    });
    const ms = this.dlog(hs, this.k, this.dlogTables());
    ms.forEach((m, i) => {
      if (lqs![i] !== (m & 1n ? -1 : 1)) throw new CryptoError(`Joye–Libert ciphertext ${i} has Jacobi symbol −1`);
    });
    return ms;
  }

  /** (w, leaf, inner) of the logarithm, w = max(8, ⌈k/16⌉) as in the Python key; built once per key. */
  dlogTables(): Tables {
    if (this.tables) return this.tables;
    const { k, p } = this;
    const w = Math.min(k, Math.max(8, Math.ceil(k / 16)));
    const base = modPow(this.g, 1n << BigInt(k - w), p);
    const leaf = new Map<bigint, number>();
    let t = 1n;
    for (let i = 0; i < 1 << w; i++) {
      leaf.set(t, i);
      t = (t * base) % p;
    }
    const inner = new Map<number, bigint[][]>();
    const todo = [k];
    while (todo.length) {
      const size = todo.pop()!;
      if (size <= w || inner.has(size)) continue;
      const gInv = modInv(modPow(this.g, 1n << BigInt(k - size), p), p);
      inner.set(size, fixedBaseTable(gInv, Math.floor(size / 2), p));
      todo.push(Math.floor(size / 2), size - Math.floor(size / 2));
    }
    return (this.tables = { w, leaf, inner });
  }

  /** [m mod 2^n] with h = g_n^m, g_n = g^(2^(k−n)): m = lo + 2^n1·hi, lo from h^(2^n2), hi from h·g_n^(−lo). */
  private dlog(hs: bigint[], n: number, tables: Tables): bigint[] {
    const p = this.p;
    const { w, leaf, inner } = tables;
    if (n <= w) {
      return hs.map((h) => {
        const v = leaf.get(h);
        if (v === undefined) throw new CryptoError("not a ciphertext of this key (no discrete logarithm)");
        return BigInt(v >> (w - n));
      });
    }
    const n1 = Math.floor(n / 2);
    const n2 = n - n1;
    const squared = hs.map((h) => {
      let x = h;
      for (let i = 0; i < n2; i++) x = (x * x) % p;
      return x;
    });
    const los = this.dlog(squared, n1, tables);
    const rows = inner.get(n)!;
    const ts = hs.map((h, i) => {
      let lo = los[i]!;
      for (const row of rows) {
        const v = Number(lo & 255n);
        if (v) h = (h * row[v]!) % p;
        lo >>= 8n;
      }
      return h;
    });
    const his = this.dlog(ts, n2, tables);
    return los.map((lo, i) => lo + (his[i]! << BigInt(n1)));
  }
}

const sleep = () => new Promise<void>((r) => setTimeout(r, 0));

/** (p, q, y) for a parameter set, as `generate_joye_libert_keypair`: p of p_bits bits ≡ 1 (mod 2^k), q of
 *  the rest ≡ 3 (mod 4), N of exactly `bits` bits, y a non-residue mod p and q. Yields to the event loop
 *  between prime candidates; `progress(triedCandidates)`. */
export async function generateKey(params: JLParams, progress?: (tries: number) => void): Promise<JLPrivateKey> {
  const { bits, k } = params;
  const pBits = params.p_bits ?? bits / 2;
  let tries = 0;
  const step = async () => {
    tries++;
    {
      progress?.(tries * 64);
      await sleep();
    }
  };
  for (;;) {
    const p = await findPrime(pBits, 1n, k, step);
    const q = await findPrime(bits - pBits, 3n, 2, step);
    if (p === q || bitLength(p * q) !== bits) continue;
    const n = p * q;
    for (;;) {
      const y = randomBelowMany(n, 1)[0]!;
      if (y > 0n && jacobi(y, p) === -1 && jacobi(y, q) === -1) return new JLPrivateKey(p, q, y, k);
    }
  }
}

async function findPrime(bits: number, low: bigint, lowBits: number, step: () => Promise<void>): Promise<bigint> {
  for (;;) {
    try {
      return randomPrime(bits, low, lowBits, undefined, 64);
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
    }
    await step();
  }
}
