/**
 * The device's side of the enrolment proofs Π_en (seed 004 §6 enrolment, §8, App. F), byte for byte as
 * `privface.protocols.gsm.zk`: Π_epk (CGGMP20 Fig. 16 Π^mod with Fiat–Shamir), Fig. 9 (batched plaintext
 * knowledge, Fiat–Shamir), and the prover's answer to the provider's Fig. 10 norm challenge. SHAKE-256 over
 * a domain-separated, length-prefixed transcript is the random oracle.
 */
import { shake256 } from "@noble/hashes/sha3.js";
import { bitLength, isProbablePrime, jacobi, modInv, modPow, randomBelow } from "../crypto/bignum.js";
import { bigToBytes, bytesToBig, decode, encode } from "../wire/codec.js";
import type { PowMany } from "../crypto/pool.js";
import { crt, localProdPow, localPowMany, localPowSquareMany, randomUnit, type PaillierKey, type PowSquareMany, type ProdPow } from "./paillier.js";
import { keyWidth, ProtocolError } from "./params.js";

export const MOD_ROUNDS = 128;
export const CHALLENGE_BITS = 128;
export const N_HAT_BITS = 128;
const DOMAIN = new TextEncoder().encode("privface/gsm/zk/v1/");

type Item = bigint | Uint8Array;

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** SHAKE-256(domain ‖ label ‖ (len u32 ‖ item)*) read to `length` bytes. */
function xof(label: string, items: Item[], length: number): Uint8Array {
  const parts: Uint8Array[] = [DOMAIN, new TextEncoder().encode(label)];
  for (const it of items) {
    const raw = typeof it === "bigint" ? bigToBytes(it) : it;
    const len = new Uint8Array(4);
    new DataView(len.buffer).setUint32(0, raw.length);
    parts.push(len, raw);
  }
  return shake256(concat(parts), { dkLen: length });
}

function split(stream: Uint8Array, count: number, size: number): bigint[] {
  return Array.from({ length: count }, (_, i) => bytesToBig(stream.subarray(i * size, (i + 1) * size)));
}

function modChallenges(n: bigint, w: bigint, rounds: number, context: Uint8Array): bigint[] {
  const size = Math.ceil(bitLength(n) / 8) + 16;
  return split(xof("mod", [n, w, context], rounds * size), rounds, size).map((y) => y % n);
}

const mod = (a: bigint, m: bigint) => ((a % m) + m) % m;

/** Π^mod prover (CGGMP20 Fig. 16): w with (w|N) = −1; z_i = y_i^(N⁻¹ mod φ(N)), x_i = ((−1)^a w^b y_i)^(1/4);
 *  the exponentiations in four batches of `powMany` (one exponent each, per prime). */
export async function proveModulus(key: PaillierKey, context: Uint8Array, rounds = MOD_ROUNDS,
                                   powMany: PowMany = localPowMany): Promise<Uint8Array> {
  const { p, q, n } = key;
  if (p % 4n !== 3n || q % 4n !== 3n) throw new RangeError("Π_epk needs a Paillier–Blum key (p ≡ q ≡ 3 mod 4)");
  let w: bigint;
  do w = randomUnit(n);
  while (jacobi(w, n) !== -1);
  const ys = modChallenges(n, w, rounds, context);
  const ab = new Uint8Array(rounds);
  // (±w^b·y | p) = (±1 | p)(w | p)^b (y | p) with (−1 | p) = −1 (p ≡ 3 mod 4): two Legendre symbols per round
  const [wp, wq] = [jacobi(w % p, p), jacobi(w % q, q)];
  const yps = ys.map((y, i) => {
    const [lp, lq] = [jacobi(y % p, p), jacobi(y % q, q)];
    if (lp === 0 || lq === 0) throw new RangeError("y shares a factor with N");
    for (const [a, b] of [[0, 0], [1, 0], [0, 1], [1, 1]] as const) {
      if ((a ? -1 : 1) * (b ? wp : 1) * lp === 1 && (a ? -1 : 1) * (b ? wq : 1) * lq === 1) {
        ab[i] = a + 2 * b;
        return mod((a ? -y : y) * (b ? w : 1n), n);
      }
    }
    throw new RangeError("no fourth root: w is not a non-residue mod both primes");
  });
  const [zp, zq, xp, xq] = await Promise.all([
    powMany(ys.map((y) => y % p), modInv(n, p - 1n), p), powMany(ys.map((y) => y % q), modInv(n, q - 1n), q),
    powMany(yps.map((y) => y % p), ((p + 1n) / 4n) ** 2n % (p - 1n), p),
    powMany(yps.map((y) => y % q), ((q + 1n) / 4n) ** 2n % (q - 1n), q)]);
  const zs = ys.map((_, i) => crt(zp[i]!, zq[i]!, p, q, key.qInvP));
  const xs = ys.map((_, i) => crt(xp[i]!, xq[i]!, p, q, key.qInvP));
  return encode("gsm.ModulusProof", { n_bytes: keyWidth(n), w, x: xs, z: zs, ab });
}

/** Fig. 9 prover with e_i = H(N, ℓ, c_1..c_ℓ, a, context): a = ⟦s; u⟧ (`mask` = (u, u^N), u uniform in Z*_N),
 *  w = s + Σ e_i x_i mod N,
 *  z = u·Π r_i^e_i mod N — the product by CRT mod p and q (`prodPow`: a worker pool in the page). */
export async function provePlaintextKnowledge(key: PaillierKey, cts: bigint[], witness: { x: bigint; r: bigint }[],
                                              context: Uint8Array, prodPow: ProdPow = localProdPow,
                                              mask: [bigint, bigint] = key.randomRRn()): Promise<Uint8Array> {
  const { n, n2, p, q } = key;
  const s = randomBelow(n);
  const [u, un] = mask;
  const a = (key.plainFactor(s) * un) % n2;
  const size = CHALLENGE_BITS / 8;
  const es = split(xof("ptxt", [n, BigInt(cts.length), ...cts, a, context], cts.length * size), cts.length, size);
  let w = s;
  es.forEach((e, i) => {
    w += e * witness[i]!.x;
  });
  const [zp, zq] = await Promise.all([prodPow(witness.map((x) => x.r % p), es, p), prodPow(witness.map((x) => x.r % q), es, q)]);
  const z = (crt(zp, zq, p, q, key.qInvP) * u) % n;
  return encode("gsm.PlaintextKnowledgeProof", { n_bytes: keyWidth(n), a, w: w % n, z });
}

/** Fig. 10 prover: check the challenge (ℓ ciphertexts in Z*_{N²}, N̂ a 128-bit prime), decrypt w_i, v, v̂;
 *  z = v + Σ w_i² mod N, ẑ = v̂ + Σ w_i² mod N̂. */
export async function normResponse(key: PaillierKey, challenge: Uint8Array, count: number,
                                   powSquareMany: PowSquareMany = localPowSquareMany): Promise<Uint8Array> {
  let ch;
  try {
    ch = decode(challenge, "gsm.NormChallenge", { n_bytes: keyWidth(key.n) }).values;
  } catch (e) {
    throw new ProtocolError(`malformed NormChallenge: ${(e as Error).message}`);
  }
  const ws = ch.w as bigint[];
  const nHat = ch.n_hat as bigint;
  if (ws.length !== count) throw new ProtocolError(`NormChallenge must carry ${count} ciphertexts ⟦w_i⟧, got ${ws.length}`);
  if (bitLength(nHat) !== N_HAT_BITS || !isProbablePrime(nHat, 50)) {
    throw new ProtocolError(`NormChallenge N̂ must be a ${N_HAT_BITS}-bit prime`);
  }
  const all = [...ws, ch.v as bigint, ch.v_hat as bigint];
  try {
    all.forEach((c) => key.checkCiphertext(c));
  } catch {
    throw new ProtocolError("NormChallenge ciphertext is not in Z*_{N²} for this key");
  }
  const plain = await key.decryptMany(all, powSquareMany);
  const v = plain[ws.length]!;
  const vHat = plain[ws.length + 1]!;
  const squares = plain.slice(0, ws.length).reduce((acc, x) => acc + x * x, 0n);
  return encode("gsm.NormResponse", { n_bytes: keyWidth(key.n), z: (v + squares) % key.n, z_hat: (vHat + squares) % nHat });
}
