/**
 * gsm over HTTP from the browser, as `privface.service.clients.gsm.DeviceClient`: `POST /v1/gsm/<step>` to a
 * provider (`key`, `enrol/start`, `enrol/finish`) and a terminal (`match/present`, `match/start`,
 * `match/compare`, `match/finish`). Every answer is decoded and checked before use; the report gives the
 * device-side compute time apart from the HTTP time, and the bytes per step.
 */
import { ServiceClient, ServiceError } from "../im2020/http.js";
import { decode, encode } from "../wire/codec.js";
import type { GsmDevice } from "./device.js";
import type { GsmWork } from "./paillier.js";
import { ProtocolError, VARIANT_IDS, type Variant } from "./params.js";

export { ServiceClient, ServiceError };

/** A client for one gsm server (provider or terminal). */
export function gsmClient(base: string, apiKey: string | null = null): ServiceClient {
  return new ServiceClient(base.replace(/\/+$/, ""), "gsm", apiKey);
}

/** The provider's Ed25519 verification key (32 bytes; trust on first use: compare its fingerprint out of band). */
export async function fetchProviderKey(http: ServiceClient): Promise<Uint8Array> {
  http.reset();
  const key = decode(await http.step("key", encode("gsm.ProviderKey", { ed25519: new Uint8Array(0) })), "gsm.ProviderKey")
    .values.ed25519 as Uint8Array;
  http.reset();
  if (key.length !== 32) throw new ProtocolError("the provider's verification key is not 32 bytes");
  return key;
}

export interface StepBytes {
  step: string;
  sent: number;
  received: number;
}

/** Totals of ServiceClient.totals(), the device's compute time and the bytes of each step. */
export interface GsmReport {
  bytes_sent: number;
  bytes_received: number;
  http_ms: number;
  server_ms: number;
  network_ms: number;
  device_ms: number;
  steps: StepBytes[];
}

const stepBytes = (http: ServiceClient): StepBytes[] => http.stats.map((s) => ({ step: s.step, sent: s.bytesSent, received: s.bytesReceived }));

/** Π_en: enrol/start (epk, ⟦u_i⟧, Π_epk, Fig. 9) → Fig. 10 challenge; enrol/finish → signed m1, kept by the device. */
export async function enrol(http: ServiceClient, dev: GsmDevice, u: readonly number[],
                            onProgress?: (what: string, done: number) => void, work: Partial<GsmWork> = {},
                            precomputed: Uint8Array | null = null): Promise<GsmReport & { subject_id: string; expires_at: number; phases_ms: Record<string, number> }> {
  http.reset();
  let device = 0;
  const phases: Record<string, number> = {};
  let t0 = performance.now();
  const request = await dev.enrolStart(u, (d) => onProgress?.("proving", d), work, phases, precomputed);
  device += performance.now() - t0;
  onProgress?.("provider", 0);
  const challenge = await http.step("enrol/start", request);
  t0 = performance.now();
  const answer = await dev.enrolRespond(challenge, work);
  phases.norm_response_ms = performance.now() - t0;
  device += phases.norm_response_ms;
  const m1 = await http.step("enrol/finish", answer);
  t0 = performance.now();
  const fields = dev.acceptEnrolment(m1);
  device += performance.now() - t0;
  http.session = null;
  const round = (x: number) => Math.round(x * 10) / 10;
  return { subject_id: dev.subjectId, expires_at: Number(fields.expires_at), device_ms: device, ...http.totals(),
    steps: stepBytes(http), phases_ms: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, round(v)])) };
}

/** Send m1 ahead of the capture (§5) so the terminal validates and precomputes before the user reaches the camera;
 *  for Π3 the device meanwhile makes its OT randomness for the coming session (`preparePi3`). */
export async function present(http: ServiceClient, dev: GsmDevice, variant: Variant): Promise<{ expires_at: number; prepare_ms: number }> {
  http.reset();
  let prepare = 0;
  if (variant === "pi3") prepare = (await import("./compare.js")).preparePi3(dev);
  const start = encode("gsm.MatchStart", { variant: VARIANT_IDS[variant], first_message: dev.firstMessage() });
  const answer = decode(await http.step("match/present", start), "gsm.Presented").values;
  http.reset();
  if (answer.subject_id !== dev.subjectId) throw new ProtocolError("the terminal acknowledged a different subject");
  return { expires_at: Number(answer.expires_at), prepare_ms: prepare };
}

export interface MatchReport extends GsmReport {
  decision: "accept" | "reject" | "abort";
  match: boolean;
  aborted: boolean;
}

/** One matching session against the terminal's current capture. Π1's result is the device's own bit, which the
 *  terminal echoes as a Claim. */
export async function match(http: ServiceClient, dev: GsmDevice, variant: Variant): Promise<MatchReport> {
  http.reset();
  let device = 0;
  const timed = <T>(f: () => T): T => {
    const t0 = performance.now();
    try {
      return f();
    } finally {
      device += performance.now() - t0;
    }
  };
  const start = encode("gsm.MatchStart", { variant: VARIANT_IDS[variant], first_message: dev.firstMessage() });
  try {
    const challenge = await http.step("match/start", start);
    let result: { match: boolean; aborted: boolean };
    if (variant === "pi1") {
      const decision = timed(() => dev.pi1Decide(challenge));
      const mine = decode(decision, "gsm.Decision").values.match as boolean;
      const claim = decode(await http.step("match/finish", decision), "gsm.Claim").values;
      if (claim.device_claims_match !== mine) throw new ProtocolError("the terminal echoed a different Π1 claim");
      result = { match: mine, aborted: false };
    } else if (variant === "pi2") {
      const reply = timed(() => dev.pi2Reply(challenge));
      result = decode(await http.step("match/finish", reply), "gsm.Decision").values as { match: boolean; aborted: boolean };
    } else {
      const { request, state } = await timedAsync(() => pi3Request(dev, challenge), (ms) => (device += ms));
      const garbled = await http.step("match/compare", request);
      const finish = timed(() => state.finish(garbled));
      result = decode(await http.step("match/finish", finish), "gsm.Decision").values as { match: boolean; aborted: boolean };
    }
    return { decision: result.aborted ? "abort" : result.match ? "accept" : "reject", match: result.match && !result.aborted,
      aborted: result.aborted, device_ms: device, ...http.totals(), steps: stepBytes(http) };
  } finally {
    http.session = null;
  }
}

async function timedAsync<T>(f: () => Promise<T>, add: (ms: number) => void): Promise<T> {
  const t0 = performance.now();
  try {
    return await f();
  } finally {
    add(performance.now() - t0);
  }
}

/** Π3 round 3 (Fig. 5 step 3), loaded on first use: the OT receiver and evaluator live in compare.ts. */
async function pi3Request(dev: GsmDevice, challenge: Uint8Array) {
  const { pi3Request: request } = await import("./compare.js");
  return request(dev, challenge);
}
