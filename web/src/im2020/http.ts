/**
 * im2020 over HTTP from the browser, as `privface.protocols.im2020.remote`: `POST /v1/im2020/<step>` with
 * wire-encoded bodies, the session header between steps, and per step the bytes each way, the HTTP wall
 * time and the server's compute time (its Server-Timing header) — network = wall − server.
 */
import { decode } from "../wire/codec.js";
import type { PowMany } from "../crypto/pool.js";
import type { Im2020Client } from "./client.js";

export const SESSION_HEADER = "X-Privface-Session";

export class ServiceError extends Error {
  override name = "ServiceError";
  constructor(message: string, readonly status: number, readonly kind: string) {
    super(message);
  }
}

export interface StepStat {
  step: string;
  bytesSent: number;
  bytesReceived: number;
  ms: number;
  serverMs: number;
}

export class ServiceClient {
  session: string | null = null;
  stats: StepStat[] = [];

  constructor(readonly base: string, readonly protocol = "im2020", public apiKey: string | null = null) {}

  reset(): void {
    this.session = null;
    this.stats = [];
  }

  async step(step: string, body: Uint8Array): Promise<Uint8Array> {
    const headers: Record<string, string> = { "content-type": "application/octet-stream" };
    if (this.session) headers[SESSION_HEADER] = this.session;
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    const t0 = performance.now();
    let r: Response;
    let data: Uint8Array;
    try {
      r = await fetch(`${this.base}/v1/${this.protocol}/${step}`, { method: "POST", body: body as Uint8Array<ArrayBuffer>, headers, cache: "no-store" });
      data = new Uint8Array(await r.arrayBuffer());
    } catch {
      throw new ServiceError("the server cannot be reached (network error)", 0, "Unreachable");
    }
    const ms = performance.now() - t0;
    this.stats.push({ step, bytesSent: body.length, bytesReceived: data.length, ms, serverMs: serverMs(r.headers.get("server-timing")) });
    if (!r.ok) {
      let message = `the server refused ${step} (HTTP ${r.status})`;
      let kind = "HTTPError";
      try {
        const err = JSON.parse(new TextDecoder().decode(data)) as { error?: string; type?: string };
        if (err.error) message = err.error;
        if (err.type) kind = err.type;
      } catch { /* not JSON: keep the generic message */ }
      throw new ServiceError(message, r.status, kind);
    }
    this.session = r.headers.get(SESSION_HEADER);
    return data;
  }

  totals(): { bytes_sent: number; bytes_received: number; http_ms: number; server_ms: number; network_ms: number } {
    const sum = (f: (s: StepStat) => number) => this.stats.reduce((a, s) => a + f(s), 0);
    const http = sum((s) => s.ms);
    const server = sum((s) => s.serverMs);
    return { bytes_sent: sum((s) => s.bytesSent), bytes_received: sum((s) => s.bytesReceived), http_ms: http,
      server_ms: server, network_ms: Math.max(http - server, 0) };
  }
}

function serverMs(header: string | null): number {
  const m = header ? /compute;dur=([0-9.]+)/.exec(header) : null;
  return m ? Number(m[1]) : 0;
}

export interface Report {
  [k: string]: number | string | boolean;
}

/** §IV-B.2 (registration): C = Enc(Γ) → server. */
export async function enrol(http: ServiceClient, client: Im2020Client, template: number[]): Promise<Report> {
  http.reset();
  const t0 = performance.now();
  const body = client.enrol(template);
  const encrypt = performance.now() - t0;
  const resp = decode(await http.step("enrol", body), "im2020.EnrolResponse").values;
  return { replaced: resp.replaced as boolean, encrypt_ms: encrypt, ...http.totals() };
}

/** §IV-B.3: auth/start with C′ (C2), decrypt S* (C3), auth/finish with s*; the server's decision. */
export async function verify(http: ServiceClient, client: Im2020Client, template: number[], powMany?: PowMany): Promise<Report> {
  http.reset();
  const t0 = performance.now();
  const start = client.authStart(template);
  const t1 = performance.now();
  const challenge = await http.step("auth/start", start);
  if (decode(challenge, "im2020.AuthChallenge").values.compare_bits !== null) { // refused before decrypting
    throw new ServiceError("this server runs the secure-comparison mode (§VII), which the browser client does not " +
      "implement; use the CLI", 0, "ModeMismatch");
  }
  const t2 = performance.now();
  const { sStar } = await client.blindedScore(challenge, powMany);
  const finish = client.authFinish(sStar);
  const t3 = performance.now();
  const result = decode(await http.step("auth/finish", finish), "im2020.AuthResult").values;
  const accepted = result.accepted as boolean;
  return { decision: accepted ? "accept" : "reject", accepted, encrypt_ms: t1 - t0, decrypt_ms: t3 - t2, ...http.totals() };
}

/** Revocation by proof of key possession (`Server.revoke_start`): revoke/start → c = Enc(ρ) and the server's
 *  commitment; revoke/finish with ρ = Dec(c), sent only if it opens the commitment. */
export async function revoke(http: ServiceClient, client: Im2020Client): Promise<Report> {
  http.reset();
  try {
    const challenge = await http.step("revoke/start", client.revokeStart());
    const t0 = performance.now();
    const proof = await client.revokeProof(challenge);
    const decrypt = performance.now() - t0;
    const resp = decode(await http.step("revoke/finish", proof), "im2020.RevokeResponse").values;
    return { revoked: resp.revoked as boolean, decrypt_ms: decrypt, ...http.totals() };
  } finally {
    http.reset(); // the challenge served its one try
  }
}
