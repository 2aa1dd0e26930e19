/**
 * The page at /app/ of `privface serve --protocol im2020`: the im2020 device party (seed 000 §IV-B, Table I's
 * C1 face, C2 encryption, C3 decryption) in the browser. Bad input gets a message and sends and stores nothing.
 */
import { arithmeticBackend, useGmp } from "../crypto/bignum.js";
import { PowPool } from "../crypto/pool.js";
import { generateKey } from "../crypto/joyeLibert.js";
import {
  checkSubjectId, Im2020Client, keyFileBytes, KeyFileError, loadKeyFile, ProtocolError, quantize, type Im2020Params,
} from "../im2020/client.js";
import { enrol, revoke, ServiceClient, ServiceError, verify, type Report } from "../im2020/http.js";
import { embed, NoFaceError, preload } from "./face.js";
import { deleteKey, listKeys, loadKey, saveKey } from "./keystore.js";

type RGBA = { width: number; height: number; data: Uint8ClampedArray };

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const ui = {
  subject: $<HTMLInputElement>("subject"), photo: $<HTMLInputElement>("photo"), video: $<HTMLVideoElement>("video"),
  canvas: $<HTMLCanvasElement>("canvas"), source: $("source"), cameraStart: $<HTMLButtonElement>("camera-start"),
  cameraShot: $<HTMLButtonElement>("camera-shot"), enrol: $<HTMLButtonElement>("enrol"),
  verify: $<HTMLButtonElement>("verify"), revoke: $<HTMLButtonElement>("revoke"), status: $("status"),
  progress: $<HTMLProgressElement>("progress"), result: $("result"), decision: $("decision"),
  timings: $<HTMLTableElement>("timings"), keys: $("keys"), keyExport: $<HTMLButtonElement>("key-export"),
  keyImport: $<HTMLInputElement>("key-import"), level: $("level"), apiKey: $<HTMLInputElement>("api-key"),
  revokeAsk: $("revoke-ask"), revokeQuestion: $("revoke-question"),
  revokeConfirm: $<HTMLButtonElement>("revoke-confirm"), revokeCancel: $<HTMLButtonElement>("revoke-cancel"),
};

let params: Im2020Params | null = null;
let image: RGBA | null = null;
let stream: MediaStream | null = null;
const http = new ServiceClient(location.origin);
let pool: PowPool | null = null;

function status(text: string, error = false): void {
  ui.status.textContent = text;
  ui.status.classList.toggle("error", error);
  ui.status.dataset.state = error ? "error" : "ok";
  document.body.dataset.seq = String(Number(document.body.dataset.seq ?? 0) + 1); // for tests: a new message
}

function busy(on: boolean): void {
  for (const b of [ui.enrol, ui.verify, ui.revoke, ui.revokeConfirm, ui.revokeCancel, ui.keyExport, ui.cameraStart]) b.disabled = on;
  document.body.dataset.busy = on ? "1" : "0";
}

function showReport(title: string, cls: string, report: Report): void {
  ui.result.hidden = false;
  ui.decision.textContent = title;
  ui.decision.className = `decision ${cls}`;
  const rows: [string, string][] = [];
  const names: Record<string, string> = {
    face_ms: "C1 face (detect, align, embed)", keygen_ms: "key generation", encrypt_ms: "C2 encrypt",
    server_ms: "server", decrypt_ms: "C3 decrypt", network_ms: "network", total_ms: "total",
    bytes_sent: "bytes sent", bytes_received: "bytes received",
  };
  for (const [k, label] of Object.entries(names)) {
    const v = report[k];
    if (typeof v === "number") rows.push([label, k.endsWith("_ms") ? v.toFixed(1) : String(v)]);
  }
  const body = ui.timings.tBodies[0]!;
  body.replaceChildren(...rows.map(([a, b]) => {
    const tr = document.createElement("tr");
    for (const t of [a, b]) tr.appendChild(document.createElement("td")).textContent = t;
    return tr;
  }));
  ui.result.dataset.report = JSON.stringify({ ...report, backend: arithmeticBackend() });
}

/** A user-facing sentence for any failure; nothing was stored when this is shown. */
function explain(e: unknown): string {
  if (e instanceof NoFaceError) return "No face was found in this image. Nothing was sent or stored.";
  if (e instanceof KeyFileError) return `${e.message}. Nothing was changed.`;
  if (e instanceof ServiceError) {
    if (e.status === 0) return e.kind === "Unreachable" ? "The server cannot be reached. Nothing was stored." : e.message;
    if (e.status === 404) return e.kind === "NotEnrolledError" ? `${e.message} at this server.` : `The server refused: ${e.message}`;
    if (e.status === 401) return `This server needs an API key (under "Server API key"): ${e.message}`;
    return `The server refused: ${e.message}`;
  }
  if (e instanceof ProtocolError) return e.message;
  return `Something went wrong: ${(e as Error).message ?? String(e)}`;
}

function subjectId(): string {
  const id = ui.subject.value.trim();
  checkSubjectId(id);
  return id;
}

async function refreshKeys(): Promise<void> {
  const ids = await listKeys();
  ui.keys.textContent = ids.length ? ids.join(", ") : "none";
}

// ---------------------------------------------------------------- face image

function toRGBA(src: CanvasImageSource, width: number, height: number, label: string): void {
  ui.canvas.width = width;
  ui.canvas.height = height;
  const ctx = ui.canvas.getContext("2d", { willReadFrequently: true })!;
  ctx.drawImage(src, 0, 0, width, height);
  image = { width, height, data: ctx.getImageData(0, 0, width, height).data };
  ui.canvas.hidden = false;
  ui.source.textContent = label;
}

async function onPhoto(): Promise<void> {
  const file = ui.photo.files?.[0];
  ui.photo.value = "";
  if (!file) return;
  image = null;
  ui.canvas.hidden = true;
  try {
    const bmp = await createImageBitmap(file);
    toRGBA(bmp, bmp.width, bmp.height, `Photo: ${file.name} (${bmp.width}×${bmp.height})`);
    bmp.close();
    status("Photo ready.");
  } catch {
    ui.source.textContent = "No face image yet.";
    status(`"${file.name}" is not an image this browser can read. Nothing was sent or stored.`, true);
  }
}

async function startCamera(): Promise<void> {
  try {
    stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "user" }, audio: false });
  } catch (e) {
    const denied = (e as DOMException).name === "NotAllowedError";
    status(denied ? "Camera permission was denied. Choose a photo instead; nothing was sent or stored."
      : `No camera available (${(e as Error).message}). Choose a photo instead.`, true);
    return;
  }
  ui.video.srcObject = stream;
  ui.video.hidden = false;
  ui.canvas.hidden = true;
  await ui.video.play();
  ui.cameraShot.hidden = false;
  status("Camera on: look at it and take the picture.");
}

function takePicture(): void {
  const { videoWidth: w, videoHeight: h } = ui.video;
  if (!w || !h) {
    status("The camera gives no picture yet; try again.", true);
    return;
  }
  toRGBA(ui.video, w, h, `Camera picture (${w}×${h})`);
  stream?.getTracks().forEach((t) => t.stop());
  stream = null;
  ui.video.hidden = true;
  ui.cameraShot.hidden = true;
  status("Picture ready.");
}

async function face(): Promise<{ template: number[]; ms: number }> {
  if (!image) throw new ProtocolError("Choose a photo or take a picture first.");
  if (!params) throw new ProtocolError("The server's parameters are not loaded.");
  status("Finding and embedding the face…");
  const t0 = performance.now();
  const { descriptor } = await embed(image);
  return { template: quantize(descriptor, params.scale), ms: performance.now() - t0 };
}

// ---------------------------------------------------------------- actions

async function doEnrol(): Promise<void> {
  const id = subjectId();
  const t0 = performance.now();
  const { template, ms } = await face();
  status("Generating your key pair (this takes a few seconds)…");
  ui.progress.hidden = false;
  ui.progress.removeAttribute("value");
  const tk = performance.now();
  const sk = await generateKey(params!.jl, (tries) => {
    status(`Generating your key pair… ${tries} prime candidates tried`);
  });
  const keygen = performance.now() - tk;
  ui.progress.hidden = true;
  const client = new Im2020Client(id, sk, params!);
  status("Encrypting and enrolling…");
  const r = await enrol(http, client, template);
  await saveKey(id, keyFileBytes(client, location.origin)); // only once the server has accepted
  await refreshKeys();
  clients.set(id, { file: keyFileBytes(client, location.origin), client });
  prepareLater(client);
  status(r.replaced ? `Enrolled ${id} (replaced the previous enrolment).` : `Enrolled ${id}.`);
  showReport("Enrolled", "accept", { ...r, face_ms: ms, keygen_ms: keygen, total_ms: performance.now() - t0 });
}

const clients = new Map<string, { file: Uint8Array; client: Im2020Client }>();

/** The client of the stored key of `id` (kept loaded while its key file is unchanged). */
async function clientFor(id: string): Promise<Im2020Client> {
  const file = await loadKey(id);
  if (!file) throw new ProtocolError(`There is no key for ${id} on this device: enrol first, or import your key file.`);
  const hit = clients.get(id);
  if (hit && hit.file.length === file.length && hit.file.every((b, i) => b === file[i])) return hit.client;
  const { client } = loadKeyFile(file, params!);
  clients.set(id, { file, client });
  return client;
}

/** The next C′'s encryption randomness, S*'s decryption blinding and the tables, while the page waits for the user (`prepare`). */
function prepareLater(client: Im2020Client): void {
  setTimeout(() => client.sk.prepare(2 * params!.dims + 1), 0);
}

async function doVerify(): Promise<void> {
  const id = subjectId();
  const client = await clientFor(id);
  const t0 = performance.now();
  const { template, ms } = await face();
  status("Encrypting, matching on the server, decrypting…");
  const r = await verify(http, client, template, pool?.powMany);
  const total = performance.now() - t0;
  prepareLater(client);
  status(r.accepted ? `Verified: this is ${id}.` : `Not verified as ${id}.`);
  showReport(r.accepted ? "Accepted" : "Rejected", r.accepted ? "accept" : "reject",
    { ...r, face_ms: ms, total_ms: total, total_excl_face_ms: total - ms, workers: pool?.size ?? 0 });
}

/** The ID a shown confirmation is for (the Revoke button asks first; Yes revokes this ID, nothing else). */
let revoking: string | null = null;

/** Revoke, first step: only with this device's key for the ID (the server takes its proof of possession);
 *  asks for confirmation in the page. */
async function askRevoke(): Promise<void> {
  const id = subjectId();
  await clientFor(id); // no key here: refused before anything is asked or sent
  revoking = id;
  ui.revokeQuestion.textContent = `Revoke ${id}? The server deletes its enrolment (this device proves it holds ` +
    `the key) and this device deletes the key. This cannot be undone: to use ${id} again you enrol again.`;
  ui.revokeAsk.hidden = false;
  status(`Confirm below to revoke ${id}, or cancel.`);
}

async function doRevoke(): Promise<void> {
  const id = revoking;
  revoking = null;
  if (!id || id !== ui.subject.value.trim()) throw new ProtocolError("The ID changed since you asked: nothing was revoked; click Revoke again.");
  const r = await revoke(http, await clientFor(id));
  clients.delete(id);
  let kept: string | null = null;
  try {
    await deleteKey(id);
    if (await loadKey(id)) kept = "it is still there";
  } catch (e) {
    kept = (e as Error).message ?? String(e);
  }
  await refreshKeys();
  if (kept) {
    status(`Revoked ${id} at the server, but this device's key could not be deleted (${kept}): it opens nothing ` +
      "any more; clear this site's data to remove it.", true);
  } else {
    status(`Revoked ${id}: the server's record and this device's key are deleted.`);
  }
  showReport("Revoked", "reject", r);
}

function cancelRevoke(): void {
  revoking = null;
  ui.revokeAsk.hidden = true;
  status("Revocation cancelled: nothing was changed.");
}

async function doExport(): Promise<void> {
  const id = subjectId();
  const file = await loadKey(id);
  if (!file) throw new ProtocolError(`There is no key for ${id} on this device.`);
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([file as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }));
  a.download = `${id}.key`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
  status(`Exported the key of ${id} as ${id}.key: keep it private, it is your secret key.`);
}

async function doImport(): Promise<void> {
  const file = ui.keyImport.files?.[0];
  ui.keyImport.value = "";
  if (!file) return;
  if (file.size > 4096) throw new KeyFileError(`"${file.name}" is not a privface im2020 key file (too large)`);
  const data = new Uint8Array(await file.arrayBuffer());
  const { client } = loadKeyFile(data, params!); // validates before anything is stored
  await saveKey(client.subjectId, data);
  ui.subject.value = client.subjectId;
  await refreshKeys();
  status(`Imported the key of ${client.subjectId}.`);
}

function action(f: () => Promise<void>): () => void {
  return () => {
    busy(true);
    http.apiKey = ui.apiKey.value.trim() || null;
    ui.result.hidden = true;
    ui.revokeAsk.hidden = true; // a confirmation holds only until the next action
    f().catch((e) => {
      ui.progress.hidden = true;
      status(explain(e), true);
    }).finally(() => busy(false));
  };
}

async function init(): Promise<void> {
  busy(true);
  try {
    const r = await fetch("params.json", { cache: "no-store" });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    params = (await r.json()) as Im2020Params;
    ui.level.textContent = String(params.security_bits);
    // Native BigInt measured faster than GMP in WebAssembly in Chromium (`privface bench web --arith`);
    // ?arith=gmp-wasm and ?workers=N (0: none) exist for those comparisons.
    const query = new URLSearchParams(location.search);
    const gmp = query.get("arith") === "gmp-wasm";
    if (gmp) await useGmp();
    const workers = Math.min(Number(query.get("workers") ?? (navigator.hardwareConcurrency || 1)), 4);
    try { // C3's exponentiations on every core, as the Python client's decryption threads
      pool = workers > 0 ? new PowPool(new URL(`worker.js${gmp ? "?arith=gmp-wasm" : ""}`,
        import.meta.url), workers) : null;
    } catch {
      pool = null;
    }
    await refreshKeys();
    status("Ready.");
    preload().catch((e) => status(`The face models cannot be loaded (${(e as Error).message}): photos cannot be used.`, true));
  } catch (e) {
    status(`The server's parameters cannot be loaded (${(e as Error).message}).`, true);
    return;
  } finally {
    busy(false);
  }
  if (params.mode !== "basic") status("This server runs the secure-comparison mode: verification needs the CLI.", true);
}

ui.photo.addEventListener("change", () => void onPhoto());
ui.cameraStart.addEventListener("click", () => void startCamera());
ui.cameraShot.addEventListener("click", takePicture);
ui.enrol.addEventListener("click", action(doEnrol));
ui.verify.addEventListener("click", action(doVerify));
ui.revoke.addEventListener("click", action(askRevoke));
ui.revokeConfirm.addEventListener("click", action(doRevoke));
ui.revokeCancel.addEventListener("click", cancelRevoke);
ui.keyExport.addEventListener("click", action(doExport));
ui.keyImport.addEventListener("change", action(doImport));
void init();
