/**
 * The gsm Device in the page (issue 39), served at /app/gsm.js by a gsm provider: key generation in a Web Worker
 * with progress, enrolment at this provider (Π_en with its proofs), the key file (wire gsm.DeviceKey, with the
 * signed m1) kept wrapped under the page's non-extractable AES-GCM key (keystore.ts, record "gsm/<ID>": "/" is not
 * in any subject ID, so it never collides with an im2020 key), export/import of the key file, and Π1–Π3 against a
 * terminal the page may reach.
 */
import { PowPool } from "../crypto/pool.js";
import { GsmDevice } from "../gsm/device.js";
import { enrol, fetchProviderKey, gsmClient, match, present } from "../gsm/http.js";
import { deviceKeyBytes, loadDeviceKey } from "../gsm/keyfile.js";
import { PaillierKey, type GsmWork } from "../gsm/paillier.js";
import { GsmParams, type GsmParamsInit, type Variant } from "../gsm/params.js";
import { deleteKey, loadKey, saveKey } from "./keystore.js";

export { GsmDevice, GsmParams };

const RECORD = (id: string) => `gsm/${id}`;

/** The server's gsm parameters (/app/params.json of a gsm server). */
export async function serverParams(): Promise<GsmParams> {
  const r = await fetch("params.json", { cache: "no-store" });
  const p = (await r.json()) as GsmParamsInit & { protocol?: string };
  if (p.protocol !== "gsm") throw new Error("this server does not speak gsm");
  return new GsmParams(p);
}

/** A Paillier–Blum key of `bits` bits made in a Web Worker; `onProgress(tries)` per 8 prime candidates. */
export function generateKeyInWorker(bits: number, onProgress?: (tries: number) => void, arith = "gmp-wasm"): Promise<PaillierKey> {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL(`gsm-keygen.js?arith=${arith}`, import.meta.url), { type: "module" });
    w.onmessage = (e: MessageEvent<{ tries?: number; p?: string; q?: string; error?: string }>) => {
      if (e.data.error) {
        w.terminate();
        reject(new Error(e.data.error));
      } else if (e.data.p && e.data.q) {
        w.terminate();
        try {
          resolve(new PaillierKey(BigInt("0x" + e.data.p), BigInt("0x" + e.data.q)));
        } catch (err) {
          reject(err as Error);
        }
      } else if (e.data.tries !== undefined) {
        onProgress?.(e.data.tries);
      }
    };
    w.onerror = (e) => {
      w.terminate();
      reject(new Error(e.message || "the key generation worker failed"));
    };
    w.postMessage({ bits });
  });
}

/** Π_en's long arithmetic on `pool` (gsm-worker.js): every batch split evenly over the workers. */
export function poolWork(pool: PowPool): GsmWork {
  const chunks = <T>(xs: T[]): T[][] => {
    const per = Math.ceil(xs.length / pool.size);
    return Array.from({ length: pool.size }, (_, i) => xs.slice(i * per, (i + 1) * per)).filter((c) => c.length > 0);
  };
  return {
    powMany: pool.powMany,
    powSquareMany: async (bases, exp, p) =>
      (await pool.spread(chunks(bases).map((c) => ({ kind: "powsq", bases: c, exp, p })))).flat(),
    prodPow: async (bases, exps, m) => {
      const idx = chunks(bases.map((_, i) => i));
      const parts = await pool.spread(idx.map((c) => ({ kind: "prodpow", bases: c.map((i) => bases[i]), exps: c.map((i) => exps[i]), mod: m })));
      return parts.reduce((acc, [x]) => (acc * x!) % m, 1n);
    },
    rnMany: async (key, count) => {
      const per = Math.ceil(count / pool.size);
      const jobs = Array.from({ length: pool.size }, (_, i) => Math.max(0, Math.min(per, count - i * per))).filter((k) => k > 0)
        .map((k) => ({ kind: "rn", p: key.p, q: key.q, count: k }));
      const flat = (await pool.spread(jobs)).flat();
      return Array.from({ length: count }, (_, i) => [flat[2 * i]!, flat[2 * i + 1]!] as [bigint, bigint]);
    },
  };
}

const PRE = (id: string) => `gsm-pre/${id}`;
const NEXT = (id: string) => `gsm-next/${id}`; // a prepared key until its enrolment succeeds (then "gsm/<ID>")

function workerPool(): PowPool {
  return new PowPool(new URL("gsm-worker.js", import.meta.url), Math.min(navigator.hardwareConcurrency || 2, 8));
}

/** Key generation for `subjectId` at this provider, then Π_en's precomputation (`GsmDevice.precomputeEnrolment`:
 *  the ℓ pairs (r_i, r_i^N), Fig. 9's mask pair and Π_epk — nothing that depends on the face), both stored wrapped
 *  (app/keystore.ts: the key file under "gsm-next/<ID>" — an enrolled key under "gsm/<ID>" stays until the new one
 *  is enrolled — the precomputation under "gsm-pre/<ID>"). `enrolHere` then only encrypts, proves Fig. 9 and answers
 *  Fig. 10. */
export async function prepareHere(subjectId: string, onProgress?: (what: string, n: number) => void) {
  const params = await serverParams();
  const t0 = performance.now();
  const key = await generateKeyInWorker(params.paillierBits, (n) => onProgress?.("keygen", n));
  const keygenMs = performance.now() - t0;
  const http = gsmClient(new URL("..", location.href).href);
  const dev = new GsmDevice(subjectId, params, key, await fetchProviderKey(http));
  const pool = workerPool();
  const t1 = performance.now();
  let pre;
  try {
    onProgress?.("precompute", 0);
    pre = await dev.precomputeEnrolment(poolWork(pool));
  } finally {
    pool.close();
  }
  const precomputeMs = performance.now() - t1;
  await saveKey(NEXT(subjectId), deviceKeyBytes(dev, http.base));
  await saveKey(PRE(subjectId), pre);
  return { keygen_ms: keygenMs, precompute_ms: precomputeMs, bits: key.bits };
}

/** `prepareHere` unless this phone already holds an unenrolled key for `subjectId` at this provider (with its
 *  precomputation); concurrent calls for one subject share one run. Zero times when nothing was made. */
export function ensurePrepared(subjectId: string, onProgress?: (what: string, n: number) => void) {
  const running = preparing.get(subjectId);
  if (running) return running;
  const job = (async () => {
    const params = await serverParams();
    const providerKey = bytesHex(await fetchProviderKey(gsmClient(new URL("..", location.href).href)));
    const next = await loadKey(NEXT(subjectId)).catch(() => null);
    const dev = next === null ? null : (() => {
      try {
        return loadDeviceKey(next, params).device;
      } catch {
        return null;
      }
    })();
    if (dev !== null && !dev.enrolled && dev.key.bits >= params.paillierBits && dev.providerKey !== null
        && bytesHex(dev.providerKey) === providerKey && (await loadKey(PRE(subjectId))) !== null) {
      return { keygen_ms: 0, precompute_ms: 0 };
    }
    return prepareHere(subjectId, onProgress);
  })().finally(() => preparing.delete(subjectId));
  preparing.set(subjectId, job);
  return job;
}

const preparing = new Map<string, Promise<{ keygen_ms: number; precompute_ms: number }>>();

/** Enrol `template` (ℓ integers of norm ζ) under `subjectId` at this provider: with the key and precomputation of
 *  `ensurePrepared` (the page starts it when the photo is chosen); the precomputation record is deleted before use,
 *  so its r_i are never used twice; the key file with m1 is stored wrapped. */
export async function enrolHere(subjectId: string, template: number[], onProgress?: (what: string, n: number) => void) {
  const prep = await ensurePrepared(subjectId, onProgress);
  const next = await loadKey(NEXT(subjectId));
  if (next === null) throw new Error("this phone's prepared key is gone (another tab enrolled with it): try again");
  const dev = loadDeviceKey(next, await serverParams()).device;
  const http = gsmClient(new URL("..", location.href).href);
  const pre = await loadKey(PRE(subjectId));
  await deleteKey(PRE(subjectId));
  const pool = workerPool();
  let report;
  try {
    report = await enrol(http, dev, template, onProgress, poolWork(pool), pre);
  } finally {
    pool.close();
  }
  await saveKey(RECORD(subjectId), deviceKeyBytes(dev, http.base));
  await deleteKey(NEXT(subjectId));
  return { ...report, ...prep, bits: dev.key.bits };
}

const bytesHex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** The stored device of `subjectId` (unwrapped and checked), or null. */
export async function storedDevice(subjectId: string): Promise<GsmDevice | null> {
  const data = await loadKey(RECORD(subjectId));
  return data === null ? null : loadDeviceKey(data, await serverParams()).device;
}

export async function exportKey(subjectId: string): Promise<Uint8Array | null> {
  return loadKey(RECORD(subjectId));
}

/** Import a key file (checked first: it must load as a device for this server's parameters). */
export async function importKey(data: Uint8Array): Promise<string> {
  const { device } = loadDeviceKey(data, await serverParams());
  await saveKey(RECORD(device.subjectId), data);
  return device.subjectId;
}

/** A kiosk's pairing code as typed: 8 of Crockford's base 32 (service/bindings/gsm_pairing.py), one dash or space
 *  allowed in the middle, any case, the look-alikes O, I, L accepted (the terminal reads them as 0, 1, 1). */
export const PAIRING_CODE = /^[0-9A-TV-Z]{4}[- ]?[0-9A-TV-Z]{4}$/i;

/** The terminal that issued `code`: asked of the terminals this app may reach (params.json `terminals`, the
 *  provider's --allow-origin list) and of this origin; the issuer answers once (single use), the others 404. */
export async function resolvePairingCode(code: string): Promise<string> {
  const p = (await (await fetch("params.json", { cache: "no-store" })).json()) as { terminals?: string[] };
  const origins = [...new Set([...(p.terminals ?? []), location.origin])];
  let unknown = "";
  let refused = "";
  for (const origin of origins) {
    let r: Response;
    try {
      r = await fetch(`${origin}/app/pair`, { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ code: code.trim() }), cache: "no-store" });
    } catch {
      continue; // offline or not a kiosk: the next one
    }
    const body = (await r.json().catch(() => ({}))) as { terminal?: string; error?: string; type?: string };
    if (r.ok && typeof body.terminal === "string") return body.terminal;
    if (body.type === "PairingError" && body.error) {
      if (r.status === 404) unknown = body.error;
      else refused = body.error; // malformed, or too many wrong codes from here: say that first
    }
  }
  throw new Error(refused || unknown || "No terminal this app may reach knows this pairing code: check it, or ask the kiosk for a new one.");
}

export async function presentAndMatch(subjectId: string, terminal: string, variant: Variant) {
  const dev = await storedDevice(subjectId);
  if (dev === null) throw new Error(`no gsm key for ${subjectId} on this device`);
  const http = gsmClient(terminal);
  await present(http, dev, variant);
  return match(http, dev, variant);
}
