/**
 * The Device party of Game-Set-MATCH (seed 004 §5–§7) in the browser, as `privface.protocols.gsm.parties.Device`:
 * it holds its Paillier key pair (esk never leaves it) and the provider-signed first message m1.
 *
 *   enrolStart(u)       Π_en round 1 (§6, §8): epk, ⟦u_i⟧, Π_epk, Fig. 9 — an EnrolRequest
 *   enrolRespond(ch)    Π_en round 2: the Fig. 10 answer — a NormResponse
 *   acceptEnrolment(m1) keep m1 after checking subject, key and the provider's Ed25519 signature σ
 *   pi1Decide / pi2Reply / pi3Request + pi3Finish   round 3 (Fig. 3, 4, 5) on the terminal's Challenge
 *
 * Every incoming message is decoded by the wire codec and checked before use.
 */
import { ed25519 } from "@noble/curves/ed25519.js";
import { decode, encode, type Fields } from "../wire/codec.js";
import { localWork, type GsmWork, type PaillierKey } from "./paillier.js";
import { checkTemplate, decode2Sum, GsmParams, keyWidth, ProtocolError, replyWidth, VARIANT_IDS, type Variant } from "./params.js";
import { normResponse, proveModulus, provePlaintextKnowledge } from "./zk.js";

export const SIGNATURE_CONTEXT = new TextEncoder().encode("privface/gsm/first-message/v1\0");
export const ENROL_CONTEXT = new TextEncoder().encode("privface/gsm/enrol/v1\0");
const SUBJECT = /^[A-Za-z0-9._@+-]{1,128}$/;

function cat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** The m1 message names the device reads: gsm wire v2's, and an m1 signed before it (minimal-length integers,
 *  kept in key files until it expires; re-sent as is — its σ covers that encoding). */
export const TEMPLATE = "gsm.Template";
export const LEGACY_TEMPLATE = "gsm.LegacyTemplate";

/** What the provider signs: the context and m1 encoded (in its own wire version `name`) with an empty σ. */
export function signedBytes(m1: Fields, name: string = TEMPLATE): Uint8Array {
  return cat(SIGNATURE_CONTEXT, encode(name, { ...m1, signature: new Uint8Array(0) }));
}

/** An m1 from its bytes: a v2 Template (its width checked against its own N) or a LegacyTemplate. */
export function readTemplate(m1Bytes: Uint8Array): { name: string; values: Fields } {
  let m;
  try {
    m = decode(m1Bytes);
  } catch (e) {
    throw new ProtocolError(`malformed first message: ${(e as Error).message}`);
  }
  if (m.name !== TEMPLATE && m.name !== LEGACY_TEMPLATE) throw new ProtocolError(`expected a first message, got ${m.name}`);
  if (m.name === TEMPLATE && m.values.n_bytes !== keyWidth(m.values.pk_n as bigint)) {
    throw new ProtocolError(`the first message carries integers of ${String(m.values.n_bytes)} bytes; its key N is ${keyWidth(m.values.pk_n as bigint)} bytes wide`);
  }
  return m;
}

/** Fiat–Shamir context of Π_epk and Fig. 9: subject and provider key (`enrol_context`). */
export function enrolContext(subjectId: string, providerKey: Uint8Array): Uint8Array {
  const id = new TextEncoder().encode(subjectId);
  return cat(ENROL_CONTEXT, new Uint8Array([id.length >> 8, id.length & 0xff]), id, providerKey);
}

export function verifyFirstMessage(providerKey: Uint8Array, m1: Fields, name: string = TEMPLATE): void {
  let ok = false;
  try {
    ok = ed25519.verify(m1.signature as Uint8Array, signedBytes(m1, name), providerKey);
  } catch {
    ok = false;
  }
  if (!ok) throw new ProtocolError("the provider's signature on the first message does not verify");
}

/** What the device keeps for Π3 between round 3 and round 5 (its OT secrets and circuit): `finish` takes the
 *  terminal's CompareChallenge bytes and gives the CompareFinish bytes. */
export interface Pi3State {
  finish(compareChallenge: Uint8Array): Uint8Array;
}

const bytesHex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const hexBytes = (h: string) => new Uint8Array((h.match(/../g) ?? []).map((x) => parseInt(x, 16)));

interface Precomputed {
  pairs: [bigint, bigint][];
  mask: [bigint, bigint];
  modulusProof: Uint8Array;
}

export class GsmDevice {
  private m1: Fields | null = null;
  private m1Bytes: Uint8Array | null = null;

  constructor(readonly subjectId: string, readonly params: GsmParams, readonly key: PaillierKey,
              readonly providerKey: Uint8Array | null = null) {
    if (!SUBJECT.test(subjectId)) throw new ProtocolError("a subject ID is 1–128 of A–Z a–z 0–9 . _ @ + -");
    if (providerKey !== null && providerKey.length !== 32) throw new ProtocolError("an Ed25519 verification key is 32 bytes");
    if (key.bits < params.paillierBits) {
      throw new ProtocolError(`a ${key.bits}-bit Paillier key is below the required ${params.paillierBits} bits`);
    }
  }

  /** What Π_en round 1 needs before the template exists, made ahead (at key generation, while the user is idle):
   *  ℓ short-exponent pairs (r_i, r_i^N mod N²) for the c_i, Fig. 9's uniform mask pair (u, u^N) and Π_epk, which
   *  Fiat–Shamir binds only to N, w and the enrolment context (subject, provider key) — none depend on the face.
   *  The page stores the record wrapped like the key (app/keystore.ts) and deletes it before its one use: an r_i
   *  used twice would give the provider (c_i/c'_i) = g^(x_i − x'_i), so pairs are never reused. */
  async precomputeEnrolment(work: Partial<GsmWork> = {}): Promise<Uint8Array> {
    if (this.providerKey === null) throw new ProtocolError("the device needs the provider's verification key to enrol");
    const w = { ...localWork, ...work };
    const ctx = enrolContext(this.subjectId, this.providerKey);
    const [pairs, proof] = await Promise.all([w.rnMany(this.key, this.params.ell),
      proveModulus(this.key, ctx, undefined, w.powMany)]);
    const hex = (x: bigint) => x.toString(16);
    const record = { v: 2, n: hex(this.key.n), context: bytesHex(ctx), pairs: pairs.map(([r, rn]) => [hex(r), hex(rn)]),
      mask: this.key.randomRRn().map(hex), modulus_proof: bytesHex(proof) };
    return new TextEncoder().encode(JSON.stringify(record));
  }

  /** A record of `precomputeEnrolment` if it is for this key, subject, provider and ℓ (else null: compute afresh). */
  private precomputed(data: Uint8Array | null, ctx: Uint8Array): Precomputed | null {
    if (data === null) return null;
    try {
      const r = JSON.parse(new TextDecoder().decode(data)) as Record<string, unknown>;
      const big = (x: unknown) => BigInt("0x" + String(x));
      if (r.v !== 2 || big(r.n) !== this.key.n || r.context !== bytesHex(ctx) || !Array.isArray(r.pairs)
          || r.pairs.length !== this.params.ell || !Array.isArray(r.mask)) return null;
      const pair = (x: unknown): [bigint, bigint] => {
        const [a, b] = x as [unknown, unknown];
        return [big(a), big(b)];
      };
      return { pairs: r.pairs.map(pair), mask: pair(r.mask), modulusProof: hexBytes(String(r.modulus_proof)) };
    } catch {
      return null;
    }
  }

  /** Π_en round 1: c_i = ⟦u_i mod N; r_i⟧, then Π_epk and Fig. 9 bound to subject and provider. `onProgress`
   *  gets the fraction done; `work`: the long arithmetic (a worker pool in the page) — the pairs (r_i, r_i^N) and
   *  Π_epk run at once, then Fig. 9; both are taken from `precomputed` (`precomputeEnrolment`'s record) when it
   *  matches. `phases` receives each phase's wall time (ms). */
  async enrolStart(u: readonly number[], onProgress?: (done: number) => void, work: Partial<GsmWork> = {},
                   phases: Record<string, number> = {}, precomputed: Uint8Array | null = null): Promise<Uint8Array> {
    if (this.providerKey === null) throw new ProtocolError("the device needs the provider's verification key to enrol");
    const w = { ...localWork, ...work };
    const vals = checkTemplate(u, this.params);
    const ctx = enrolContext(this.subjectId, this.providerKey);
    const pre = this.precomputed(precomputed, ctx);
    phases.precomputed = pre === null ? 0 : 1;
    let t0 = performance.now();
    const [pairs, modulusProof] = pre !== null ? [pre.pairs, pre.modulusProof] : await Promise.all([
      w.rnMany(this.key, vals.length).then((r) => {
        phases.encrypt_ms = performance.now() - t0;
        onProgress?.(0.4);
        return r;
      }),
      proveModulus(this.key, ctx, undefined, w.powMany).then((r) => {
        phases.modulus_proof_ms = performance.now() - t0;
        onProgress?.(0.4);
        return r;
      })]);
    onProgress?.(0.8);
    const cts: bigint[] = [];
    const witness: { x: bigint; r: bigint }[] = [];
    vals.forEach((v, i) => {
      const x = ((v % this.key.n) + this.key.n) % this.key.n;
      const { c, r } = this.key.encrypt(x, pairs[i]);
      cts.push(c);
      witness.push({ x, r });
    });
    t0 = performance.now();
    const plaintextProof = await provePlaintextKnowledge(this.key, cts, witness, ctx, w.prodPow, pre?.mask);
    phases.plaintext_proof_ms = performance.now() - t0;
    onProgress?.(1);
    return encode("gsm.EnrolRequest", { subject_id: this.subjectId, n_bytes: keyWidth(this.key.n), pk_n: this.key.n, c_u: cts,
      modulus_proof: modulusProof, plaintext_proof: plaintextProof });
  }

  /** Π_en round 2: the Fig. 10 answer to the provider's challenge (validated first). */
  enrolRespond(challenge: Uint8Array, work: Partial<GsmWork> = {}): Promise<Uint8Array> {
    return normResponse(this.key, challenge, this.params.ell, work.powSquareMany);
  }

  /** Keep the provider's signed m1 after checking it is ours and σ verifies. */
  acceptEnrolment(m1Bytes: Uint8Array): Fields {
    const { name, values: m1 } = readTemplate(m1Bytes);
    if (m1.subject_id !== this.subjectId || m1.pk_n !== this.key.n) {
      throw new ProtocolError("the provider's first message is for another device or key");
    }
    if (this.providerKey !== null) verifyFirstMessage(this.providerKey, m1, name);
    this.m1 = m1;
    this.m1Bytes = m1Bytes.slice();
    return m1;
  }

  get enrolled(): boolean {
    return this.m1 !== null;
  }

  /** Round 1 (all variants): m1's bytes, reusable across sessions. */
  firstMessage(): Uint8Array {
    if (this.m1Bytes === null) throw new ProtocolError("the device is not enrolled");
    return this.m1Bytes;
  }

  firstMessageFields(): Fields {
    if (this.m1 === null) throw new ProtocolError("the device is not enrolled");
    return this.m1;
  }

  private checkChallenge(ch: Fields, variant: Variant): bigint[] {
    if (ch.variant !== VARIANT_IDS[variant]) throw new ProtocolError(`expected a ${variant} challenge, got variant ${String(ch.variant)}`);
    if ((ch.c_y !== null) !== (variant === "pi3")) {
      throw new ProtocolError(`a ${variant} challenge has ${variant === "pi3" ? "two" : "one"} ciphertext(s)`);
    }
    if (ch.n_bytes !== keyWidth(this.key.n)) {
      throw new ProtocolError(`the challenge carries integers of ${String(ch.n_bytes)} bytes; this key's are ${keyWidth(this.key.n)} bytes`);
    }
    return variant === "pi3" ? [ch.c_x as bigint, ch.c_y as bigint] : [ch.c_x as bigint];
  }

  /** Σ slots of Decode₂(Dec(c)) mod 2^k (Fig. 3 round 3 step 1). */
  decodeMany(cts: bigint[], decrypt: (c: bigint[]) => bigint[] = (cs) => cs.map((c) => this.key.decrypt(c))): bigint[] {
    const m1 = this.firstMessageFields();
    for (const c of cts) {
      try {
        this.key.checkCiphertext(c);
      } catch {
        throw new ProtocolError("invalid ciphertext: not in Z*_{N²} for this key");
      }
    }
    return decrypt(cts).map((x) => decode2Sum(this.params.m, m1.n as number, m1.d as number, this.params.lam, x));
  }

  /** Fig. 3 round 3: IP = J − ζ²; send [IP ≥ T] (Π1: the device learns IP). */
  pi1Decide(challenge: Uint8Array): Uint8Array {
    const [c] = this.checkChallenge(decode(challenge, "gsm.Challenge").values, "pi1");
    const ip = this.decodeMany([c!])[0]! - this.params.zeta2;
    return encode("gsm.Decision", { match: ip >= this.params.threshold, aborted: false });
  }

  /** Fig. 4 round 3: X = a·J + b, decoded; the device learns nothing (uniform b). */
  pi2Reply(challenge: Uint8Array): Uint8Array {
    const cts = this.checkChallenge(decode(challenge, "gsm.Challenge").values, "pi2");
    const width = replyWidth(this.params.m, this.firstMessageFields().d as number, this.params.lam);
    return encode("gsm.Reply", { x_bytes: width, x: this.decodeMany(cts)[0]! });
  }

  /** Fig. 5 round 3 steps 1–2: X = J + pad, Y = a·J + b. */
  pi3Inputs(challenge: Uint8Array): [bigint, bigint] {
    const cts = this.checkChallenge(decode(challenge, "gsm.Challenge").values, "pi3");
    const [x, y] = this.decodeMany(cts);
    return [x!, y!];
  }
}
