/**
 * gsm parameters on the device side (seed 004 §5–§7 "Parameter Selection", §9), as
 * `privface.protocols.gsm.params.GsmParams`: ℓ, m, λ, the Paillier size, ζ = 2^(m−1) − 1, T = ⌈T′·ζ²⌉, and
 * the packing's Decode₂-sum (`crypto/packing.py`, ternary layout) the device applies to what it decrypts.
 */

export const PAILLIER_BITS = 3072;
export const TOY_PAILLIER_BITS = 1024;
export const LAMBDA = 40;
export const DEFAULT_COS_THRESHOLD = 0.9277;
export const VARIANTS = ["pi1", "pi2", "pi3"] as const;
export type Variant = (typeof VARIANTS)[number];
export const VARIANT_IDS: Record<Variant, number> = { pi1: 1, pi2: 2, pi3: 3 };

export interface GsmParamsInit {
  ell?: number;
  m?: number;
  lam?: number;
  paillier_bits?: number;
  cos_threshold?: number;
  insecure_test_params?: boolean;
  backend?: string | null;
}

export class GsmParams {
  readonly ell: number;
  readonly m: number;
  readonly lam: number;
  readonly paillierBits: number;
  readonly cosThreshold: number;
  readonly insecureTestParams: boolean;
  /** The face backend of the server's templates (`params.json`), recorded in the key file; null: not said. */
  readonly backend: string | null;

  constructor(init: GsmParamsInit = {}) {
    this.ell = init.ell ?? 128;
    this.m = init.m ?? 16;
    this.lam = init.lam ?? LAMBDA;
    this.insecureTestParams = init.insecure_test_params ?? false;
    this.paillierBits = init.paillier_bits ?? (this.insecureTestParams ? TOY_PAILLIER_BITS : PAILLIER_BITS);
    this.cosThreshold = init.cos_threshold ?? DEFAULT_COS_THRESHOLD;
    this.backend = init.backend ?? null;
    if (!(this.ell >= 1 && this.ell <= 4096)) throw new RangeError(`ℓ must lie in [1, 4096], got ${this.ell}`);
    if (!(this.m >= 2 && this.m <= 31)) throw new RangeError(`template bits m must be in [2, 31], got ${this.m}`);
    if (this.lam < 8) throw new RangeError(`λ must be at least 8, got ${this.lam}`);
    if (!(this.cosThreshold > 0 && this.cosThreshold <= 1)) throw new RangeError("T′ must lie in (0, 1]");
    if (this.paillierBits < 2048 && !this.insecureTestParams) {
      throw new RangeError(`${this.paillierBits}-bit Paillier is below 112-bit security; use ≥ 2048 (default 3072)`);
    }
  }

  /** ζ = 2^(m−1) − 1. */
  get zeta(): number {
    return 2 ** (this.m - 1) - 1;
  }

  get zeta2(): bigint {
    return BigInt(this.zeta) ** 2n;
  }

  /** T = ⌈T′·ζ²⌉, computed as Python's math.ceil(float · int). */
  get threshold(): bigint {
    return BigInt(Math.ceil(this.cosThreshold * this.zeta ** 2));
  }

  /** J_max = 2ζ². */
  get jMax(): bigint {
    return 2n * this.zeta2;
  }

  get aBits(): number {
    return this.lam;
  }

  get padBits(): number {
    return this.jMax.toString(2).length + this.lam;
  }

  /** Π3 circuit width w = bits(J_max) + λ. */
  get circuitBits(): number {
    return this.padBits;
  }

  /** Π3 width of X, pad, T, IP: bits(J_max). */
  get xBits(): number {
    return this.jMax.toString(2).length;
  }
}

/** The byte width of residues mod N on the wire (gsm wire v2, issue 39): ⌈|N|/8⌉; ciphertexts mod N² take twice it. */
export function keyWidth(n: bigint): number {
  return Math.ceil(n.toString(16).length / 2);
}

/** The byte width of Π2's X, a value mod 2^k (k = m + d + λ, the packing's slot bits). */
export function replyWidth(m: number, d: number, lam: number): number {
  return Math.ceil((m + d + lam) / 8);
}

/** Block positions t_1..t_n of the ternary layout: base-3 numbers whose digits are the binary digits of i. */
export function ternaryPositions(n: number): number[] {
  return Array.from({ length: n }, (_, i) => parseInt(i.toString(2), 3));
}

/** Σ_{i ∈ I} block_i(x) mod 2^k, blocks of k = m + d + λ bits at 2t_i (seed 004 Fig. 3 round 3: IP = Σ IP_i). */
export function decode2Sum(m: number, n: number, d: number, lam: number, x: bigint): bigint {
  if (x < 0n) throw new RangeError("a level-2 encoding is non-negative");
  const k = BigInt(m + d + lam);
  const mask = (1n << k) - 1n;
  let sum = 0n;
  for (const t of ternaryPositions(n)) sum += (x >> (k * BigInt(2 * t))) & mask;
  return sum & mask;
}

/** u as integers: ℓ coordinates, |u_i| ≤ ζ and Σu_i² = ζ² exactly (seed 004 Fig. 1: ‖u‖ = ζ). */
export function checkTemplate(u: readonly number[], p: GsmParams): bigint[] {
  if (!Array.isArray(u) || u.length !== p.ell || !u.every((x) => Number.isInteger(x))) {
    throw new ProtocolError(`a gsm template must be ${p.ell} integers`);
  }
  const vals = u.map((x) => BigInt(x));
  const z = BigInt(p.zeta);
  if (vals.some((x) => x > z || -x > z) || vals.reduce((a, x) => a + x * x, 0n) !== p.zeta2) {
    throw new ProtocolError(`a gsm template must have |u_i| ≤ ζ and Σu_i² = ζ² (ζ = ${p.zeta})`);
  }
  return vals;
}

export class ProtocolError extends Error {
  override name = "ProtocolError";
}
