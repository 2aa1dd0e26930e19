/**
 * The receiver of the Naor–Pinkas two-message OT on edwards25519 (SODA 2001 §3.1; seed 004 App. B.4), as
 * `privface.crypto.ot` with group ED25519 (gid 3): k_j uniform mod ℓ, PK_{j,σ} = k_j·B, PK_{j,1−σ} = C − k_j·B,
 * sends PK_{j,0}; m_{j,σ} = E_{j,σ} ⊕ SHAKE-256(domain ‖ "/pad/" ‖ gid ‖ j ‖ σ ‖ PK_{j,0} ‖ R ‖ u(k_j·R)), u the
 * Montgomery u-coordinate. Points through @noble/curves; R is checked to be a canonical point of the prime-order
 * subgroup (not of small order) before use, as libsodium's checks do on the Python side.
 */
import { ed25519 } from "@noble/curves/ed25519.js";
import { shake256 } from "@noble/hashes/sha3.js";
import { bytesToBig } from "../wire/codec.js";
import { modInv, randomBytes } from "../crypto/bignum.js";

export const GID = 3;
const DOMAIN = new TextEncoder().encode("privface/ot/naor-pinkas/v1");
/** C = libsodium's crypto_core_ed25519_from_uniform(SHAKE-256(domain ‖ "/C/edwards25519")[:32]): a point nobody
 *  knows the logarithm of (`EdwardsGroup.C`; the test suite checks it against Python's). */
export const C_HEX = "489a46801e319a20b7d1ee31355286146c3fd96da6d26188e7647195dc112c74";
const P25519 = (1n << 255n) - 19n;
const Point = ed25519.Point;
const ELL = Point.Fn.ORDER;

export class OTError extends Error {
  override name = "OTError";
}

const le = (b: Uint8Array) => bytesToBig(Uint8Array.from(b).reverse());

function toLE32(v: bigint): Uint8Array {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) {
    out[i] = Number(v & 255n);
    v >>= 8n;
  }
  return out;
}

/** u = (1 + y)/(1 − y) mod 2^255 − 19 of an encoding, 32 bytes LE; the neutral element is refused. */
function uCoordinate(point: Uint8Array): Uint8Array {
  const y = le(point) & ((1n << 255n) - 1n);
  if (y % P25519 === 1n) throw new OTError("OT: a key is the neutral element");
  return toLE32((((1n + y) % P25519) * modInv(1n - y, P25519)) % P25519);
}

/** A canonical encoding of a point of the prime-order subgroup, not of small order. */
function checkPoint(bytes: Uint8Array, what: string) {
  try {
    const p = Point.fromBytes(bytes, false);
    p.assertValidity();
    if (p.isSmallOrder() || !p.isTorsionFree() || !p.toBytes().every((b, i) => b === bytes[i])) throw new Error();
    return p;
  } catch {
    throw new OTError(`OT: ${what} is not an element of the edwards25519 group`);
  }
}

function pad(j: number, i: number, pk0: Uint8Array, R: Uint8Array, key: Uint8Array, length: number): Uint8Array {
  const head = new Uint8Array(DOMAIN.length + 5 + 6);
  head.set(DOMAIN);
  head.set(new TextEncoder().encode("/pad/"), DOMAIN.length);
  const o = DOMAIN.length + 5;
  head[o] = GID;
  new DataView(head.buffer).setUint32(o + 1, j);
  head[o + 5] = i;
  const msg = new Uint8Array(head.length + 96);
  msg.set(head);
  msg.set(pk0, head.length);
  msg.set(R, head.length + 32);
  msg.set(key, head.length + 64);
  return shake256(msg, { dkLen: length });
}

/** A uniform non-zero scalar mod ℓ from 512 random bits. */
function randomScalar(): bigint {
  for (;;) {
    const k = le(randomBytes(64)) % ELL;
    if (k !== 0n) return k;
  }
}

let cPoint: ReturnType<typeof Point.fromHex> | null = null;
const C = () => (cPoint ??= Point.fromHex(C_HEX));

/** The receiver's choice-independent part of `count` transfers, made ahead of the challenge (an off-line phase,
 *  as `ot.ReceiverRandomness`): per transfer a fresh k_j, k_j·B and C − k_j·B. Single use (`take`). */
export class ReceiverRandomness {
  private items: { k: bigint; y: Uint8Array; cy: Uint8Array }[] | null;

  constructor(count: number) {
    const c = C();
    this.items = Array.from({ length: count }, () => {
      const k = randomScalar();
      const y = Point.BASE.multiply(k);
      return { k, y: y.toBytes(), cy: c.subtract(y).toBytes() };
    });
  }

  get size(): number {
    return this.items?.length ?? 0;
  }

  take(n: number) {
    const items = this.items;
    this.items = null;
    if (items === null || n > items.length) throw new OTError(`OT: precomputed randomness for ${n} transfers is not available`);
    return items.slice(0, n);
  }
}

/** One batch of transfers for the choice bits `choices`; `receive` works once. `precomputed`: randomness made
 *  ahead of time (consumed). */
export class OTReceiver {
  private k: bigint[] | null;
  readonly pk0: Uint8Array[];

  constructor(readonly choices: number[], precomputed?: ReceiverRandomness) {
    if (choices.length === 0 || choices.some((c) => c !== 0 && c !== 1)) throw new OTError("OT: choice bits must be 0 or 1");
    const items = (precomputed ?? new ReceiverRandomness(choices.length)).take(choices.length);
    this.k = items.map((it) => it.k);
    this.pk0 = items.map((it, j) => (choices[j] === 0 ? it.y : it.cy));
  }

  /** OTRequest bytes: gid u8 ‖ n u32 ‖ n × 32. */
  request(): Uint8Array {
    const out = new Uint8Array(5 + 32 * this.pk0.length);
    out[0] = GID;
    new DataView(out.buffer).setUint32(1, this.pk0.length);
    this.pk0.forEach((p, j) => out.set(p, 5 + 32 * j));
    return out;
  }

  /** m_{j,σ_j} from the OTResponse bytes (gid u8 ‖ n u32 ‖ m u16 ‖ R ‖ n × (E_0 ‖ E_1)). */
  receive(data: Uint8Array, messageBytes: number): Uint8Array[] {
    if (this.k === null) throw new OTError("OT: this receiver has already received its messages");
    if (data.length < 7 + 32) throw new OTError("OT: a response is shorter than its header");
    const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
    const n = dv.getUint32(1);
    const m = dv.getUint16(5);
    if (data[0] !== GID) throw new OTError("OT: the response is not for this receiver's group");
    if (n !== this.choices.length || m !== messageBytes) throw new OTError(`OT: expected ${this.choices.length} transfers of ${messageBytes} bytes`);
    if (data.length !== 39 + 2 * n * m) throw new OTError("OT: the response has the wrong length");
    const Rb = data.slice(7, 39);
    const R = checkPoint(Rb, "R").precompute(8, false); // one point, many scalars: a window table once
    const out = this.k.map((k, j) => {
      const c = this.choices[j]!;
      const key = uCoordinate(R.multiply(k).toBytes());
      const e = data.subarray(39 + (2 * j + c) * m, 39 + (2 * j + c + 1) * m);
      const p = pad(j, c, this.pk0[j]!, Rb, key, m);
      return e.map((x, i) => x ^ p[i]!);
    });
    this.k = null;
    return out;
  }
}
