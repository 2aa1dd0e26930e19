/**
 * The im2020 client party (seed 000 §IV-B) in the browser, as `privface.protocols.im2020.parties.Client`:
 * HE′ = Catalano–Fiore over Joye–Libert. Enrolment (the paper's registration) sends C = Enc(Γ) (§IV-B.2); authentication sends
 * C′ = Enc(Γ′) (C2), decrypts the level-2 S* = (α*, [(β*_i, 0)ᵀ]) of BlindESED by eq. (2):
 * s* = Dec^(α*) + Σ Dec^(β*_i)² mod 2^k (C3, the "improved" level-2 decryption) and returns s* for the
 * server to unblind and compare with τ. Every message goes through the schema-driven codec.
 */
import { CryptoError, JLPrivateKey, type JLParams } from "../crypto/joyeLibert.js";
import { randomBelowMany } from "../crypto/bignum.js";
import type { PowMany } from "../crypto/pool.js";
import { decode, encode, messageType, WireError, type Fields } from "../wire/codec.js";

/** The backend of a key file written before key files named one (issue 36): dlib, the only one there was. */
const LEGACY_BACKEND = "dlib-resnet128";

/** The server's im2020 parameters (served as /app/params.json from its Im2020Params). */
export interface Im2020Params {
  protocol: "im2020";
  /** The server's face backend (issue 36): enrolments and probes name it; the server refuses another. */
  backend: string;
  security_bits: number;
  jl: JLParams;
  dims: number;
  max_abs: number;
  scale: number;
  tau: number;
  mode: string;
  insecure_test_params: boolean;
}

export class ProtocolError extends Error {
  override name = "ProtocolError";
}

const SUBJECT_ID = /^[A-Za-z0-9._@+-]{1,128}$/u;

export function checkSubjectId(id: string): string {
  if (!SUBJECT_ID.test(id)) throw new ProtocolError("a subject ID is 1–128 characters of A–Z a–z 0–9 . _ @ + -");
  return id;
}

/** Γ = ⌊scale·x⌋ (seed 000 §IV-B.2: "multiply each element by 128 and round down"). */
export function quantize(x: ArrayLike<number>, scale: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    if (!Number.isFinite(v)) throw new ProtocolError("the embedding contains NaN or infinite values");
    out.push(Math.floor(v * scale));
  }
  return out;
}

export function checkTemplate(t: number[], params: Im2020Params): number[] {
  if (t.length !== params.dims || t.some((v) => !Number.isInteger(v) || Math.abs(v) > params.max_abs)) {
    throw new ProtocolError(`a template must be ${params.dims} integers in [−${params.max_abs}, ${params.max_abs}]`);
  }
  return t;
}

export class Im2020Client {
  constructor(readonly subjectId: string, readonly sk: JLPrivateKey, readonly params: Im2020Params) {
    checkSubjectId(subjectId);
  }

  private pkFields(): Fields {
    return { pk_n: this.sk.n, pk_y: this.sk.y, pk_k: this.sk.k };
  }

  /** C = (a_i, β_i) = (Γ_i − b_i, Enc^(b_i)), b_i ∈_R M (Catalano–Fiore level 1). */
  encryptTemplate(template: number[]): { c_a: bigint[]; c_beta: bigint[] } {
    checkTemplate(template, this.params);
    const space = this.sk.twoK;
    const bs = randomBelowMany(space, template.length);
    const betas = this.sk.encryptMany(bs);
    const c_a = template.map((m, i) => (((BigInt(m) - bs[i]!) % space) + space) % space);
    return { c_a, c_beta: betas };
  }

  /** §IV-B.2 (registration): ID, the face backend of Γ, pk and C = Enc(Γ). */
  enrol(template: number[]): Uint8Array {
    const c = this.encryptTemplate(template);
    return encode("im2020.EnrolRequest", {
      subject_id: this.subjectId, backend: this.params.backend, ...this.pkFields(), c_a: c.c_a, c_beta: c.c_beta,
      signature: null,
    });
  }

  /** §IV-B.3: ID, the face backend of Γ′ and C′ = Enc(Γ′). */
  authStart(template: number[]): Uint8Array {
    const c = this.encryptTemplate(template);
    return encode("im2020.AuthStart", {
      subject_id: this.subjectId, backend: this.params.backend, c_a: c.c_a, c_beta: c.c_beta,
    });
  }

  /** s* = Dec(S*) by eq. (2): k + 1 base decryptions, every value checked to be a ciphertext; with `powMany`
   *  the exponentiations run there (a Web Worker pool). */
  async blindedScore(challenge: Uint8Array, powMany?: PowMany): Promise<{ sStar: bigint; compareBits: number | null }> {
    const v = decode(challenge, "im2020.AuthChallenge").values;
    const beta = v.beta as bigint[];
    if (beta.length !== this.params.dims) throw new ProtocolError(`S* must have ${this.params.dims} columns, got ${beta.length}`);
    let ms: bigint[];
    try {
      const values = [v.alpha as bigint, ...beta];
      ms = powMany ? await this.sk.decryptValuesWith(values, powMany) : this.sk.decryptValues(values);
    } catch (e) {
      if (e instanceof CryptoError) throw new ProtocolError(`invalid ciphertext: ${e.message}`);
      throw e;
    }
    let s = ms[0]!;
    for (const m of ms.slice(1)) s += m * m;
    return { sStar: s % this.sk.twoK, compareBits: v.compare_bits as number | null };
  }

  /** Basic mode: AuthFinish with s*. */
  authFinish(sStar: bigint): Uint8Array {
    return encode("im2020.AuthFinish", { blinded_score: sStar });
  }

  /** revoke/start: ask for a challenge that only the holder of this ID's secret key can answer. */
  revokeStart(): Uint8Array {
    return encode("im2020.RevokeStart", { subject_id: this.subjectId });
  }

  /** As `Client.revoke_proof`: ρ = Dec(c) (c checked to be a ciphertext), returned as the RevokeProof for
   *  revoke/finish only when SHA-256(context ‖ RevokeProof(ID, ρ)) equals the server's commitment, so the answer
   *  tells the server only the ρ it chose and a challenge holding any other ciphertext gets no decryption. */
  async revokeProof(challenge: Uint8Array): Promise<Uint8Array> {
    const v = decode(challenge, "im2020.RevokeChallenge").values;
    const commitment = v.commitment as Uint8Array;
    if (commitment.length !== 32) throw new ProtocolError("the revocation challenge's commitment is not a SHA-256 digest: nothing was sent");
    if (!globalThis.crypto?.subtle) throw new ProtocolError("revoking needs this page over https or on localhost (WebCrypto)");
    let rho: bigint;
    try {
      rho = this.sk.decryptValues([v.ciphertext as bigint])[0]!;
    } catch (e) {
      if (e instanceof CryptoError) {
        throw new ProtocolError(`invalid ciphertext in the revocation challenge (a wrong key for this ID, or a faulty server): ${e.message}; nothing was sent`);
      }
      throw e;
    }
    const proof = encode("im2020.RevokeProof", { subject_id: this.subjectId, plaintext: rho });
    const opened = new Uint8Array(REVOKE_CONTEXT.length + proof.length);
    opened.set(REVOKE_CONTEXT);
    opened.set(proof, REVOKE_CONTEXT.length);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", opened));
    if (digest.some((b, i) => b !== commitment[i])) {
      throw new ProtocolError("the server's revocation challenge does not decrypt to the value it committed to " +
        "(a wrong key for this ID, or a faulty server): nothing was sent");
    }
    return proof;
  }
}

/** `parties.REVOKE_CONTEXT`: domain separation of the server's commitment to a revocation challenge's answer. */
const REVOKE_CONTEXT = new TextEncoder().encode("privface/im2020/revoke-proof/v1\0");

// ---------------------------------------------------------------- key file

/** The CLI's `--key` file: the wire record im2020.ClientKey (ID, face backend, server URL, p, q, y, k, toy flag). */
export function keyFileBytes(c: Im2020Client, server: string): Uint8Array {
  return encode("im2020.ClientKey", {
    subject_id: c.subjectId, backend: c.params.backend, server, p: c.sk.p, q: c.sk.q, y: c.sk.y, k: c.sk.k,
    insecure_test_params: c.params.insecure_test_params,
  });
}

export class KeyFileError extends Error {
  override name = "KeyFileError";
}

/** The client of a key file, checked as `remote.load_client` does (a well-formed record, a valid JL key)
 *  and against the server's parameters (the N size and k it accepts, and its face backend: a key enrolled with
 *  another cannot verify here; a key file older than issue 36 names none and is dlib-resnet128's). */
export function loadKeyFile(data: Uint8Array, params: Im2020Params): { client: Im2020Client; server: string } {
  let v: Fields;
  try {
    const legacy = messageType(data) === "im2020.LegacyClientKey";
    v = legacy ? { ...decode(data, "im2020.LegacyClientKey").values, backend: LEGACY_BACKEND }
      : decode(data, "im2020.ClientKey").values;
  } catch (e) {
    if (e instanceof WireError) throw new KeyFileError(`not a privface im2020 key file: ${e.message}`);
    throw e;
  }
  let sk: JLPrivateKey;
  try {
    sk = new JLPrivateKey(v.p as bigint, v.q as bigint, v.y as bigint, v.k as number);
    sk.validate();
  } catch (e) {
    throw new KeyFileError(`the key file holds an invalid key: ${(e as Error).message}`);
  }
  if ((v.insecure_test_params as boolean) !== params.insecure_test_params || sk.bits !== params.jl.bits || sk.k !== params.jl.k) {
    throw new KeyFileError(`the key file's key (${sk.bits}-bit N, k = ${sk.k}) does not fit this server ` +
      `(${params.jl.bits}-bit N, k = ${params.jl.k})`);
  }
  if ((v.backend as string) !== params.backend) {
    throw new KeyFileError(`this key was enrolled with the face backend ${v.backend as string}, but this server ` +
      `decides on ${params.backend} templates: enrol again here`);
  }
  return { client: new Im2020Client(v.subject_id as string, sk, params), server: v.server as string };
}
