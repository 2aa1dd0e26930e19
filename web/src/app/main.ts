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
import { AmbiguousFaceError, embed, NoFaceError, open, type Opened, PhotoError, preload, type Stage } from "./face.js";
import { deleteKey, listKeys, loadKey, saveKey } from "./keystore.js";

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
  faceChoice: $<HTMLSelectElement>("face-choice"), faceRow: $("face-row"),
};

let params: Im2020Params | null = null;
/** The photo chosen (decoded and searched for faces in the face worker) and the face picked in it, if any. */
let photo: (Opened & { label: string; camera: boolean }) | null = null;
let picked: number | null = null;
let photoSeq = 0;
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
    face_ms: "C1 face (detect, align, embed)", decode_ms: "photo decoding", keygen_ms: "key generation", encrypt_ms: "C2 encrypt",
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
  if (e instanceof AmbiguousFaceError || e instanceof PhotoError) return `${e.message} Nothing was sent or stored.`;
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
  const ids = (await listKeys()).filter((id) => !id.includes("/")); // gsm keys are "gsm/<ID>" (web/src/gsm)
  ui.keys.textContent = ids.length ? ids.join(", ") : "none";
}

// ---------------------------------------------------------------- face image

const STAGES: Record<Stage, [number, string]> = {
  decoding: [1, "Decoding the photo"], detecting: [2, "Finding the faces"], aligning: [3, "Aligning the face"],
  embedding: [4, "Embedding the face"],
};

/** Progress of the face worker: the stage in the status line and the progress bar (4 stages). */
function stage(name: Stage, done?: number): void {
  const [n, text] = STAGES[name];
  ui.progress.hidden = false;
  ui.progress.max = 4;
  ui.progress.value = n - 1 + (done ?? 0);
  status(`${text}… (${n}/4${done !== undefined && done < 1 ? `, ${Math.round(done * 100)}%` : ""})`);
}

/** The face the template is taken from: the one picked, else the largest unless another is about as large. */
function usedFace(): number {
  if (!photo) throw new ProtocolError("Choose a photo or take a picture first.");
  if (photo.faces.length === 0) throw new NoFaceError();
  if (picked !== null) return picked;
  if (photo.ambiguous) {
    throw new AmbiguousFaceError(`This photo has ${photo.faces.length} faces of about the same size: click the one ` +
      'to use in the photo, or pick it under "Face to use".');
  }
  return 0;
}

/** The preview: the photo as detection saw it, every face outlined, the one used in green and numbered. */
function drawPreview(): void {
  if (!photo) return;
  const { workWidth: w, workHeight: h, width } = photo;
  ui.canvas.width = w;
  ui.canvas.height = h;
  const ctx = ui.canvas.getContext("2d")!;
  if (photo.preview) ctx.drawImage(photo.preview, 0, 0);
  const k = w / width;
  let used: number | null = null;
  try {
    used = usedFace();
  } catch {
    used = null;
  }
  const line = Math.max(2, Math.round(w / 250));
  const size = Math.max(16, Math.round(w / 16));
  ctx.font = `bold ${size}px sans-serif`;
  photo.faces.forEach(({ box: [l, t, r, b] }, i) => {
    const on = i === used;
    ctx.lineWidth = on ? line * 2 : line;
    ctx.strokeStyle = on ? "#1a7f37" : photo!.ambiguous && picked === null ? "#d29922" : "#8c959f";
    ctx.setLineDash(on ? [] : [line * 3, line * 2]);
    ctx.strokeRect(l * k, t * k, (r - l) * k, (b - t) * k);
    if (photo!.faces.length > 1) {
      ctx.fillStyle = ctx.strokeStyle;
      ctx.setLineDash([]);
      ctx.lineWidth = line;
      ctx.strokeStyle = "rgba(0, 0, 0, 0.75)";
      ctx.strokeText(String(i + 1), l * k + line * 2, t * k + size + line);
      ctx.fillText(String(i + 1), l * k + line * 2, t * k + size + line);
    }
  });
  ui.canvas.dataset.faces = JSON.stringify(photo.faces.map((f) => f.box));
  ui.canvas.dataset.size = `${photo.width},${photo.height}`;
  ui.canvas.dataset.used = used === null ? "" : String(used);
}

function describeFace(i: number): string {
  const [l, t, r, b] = photo!.faces[i]!.box;
  const where = photo!.faces.length > 1 ? ` — ${i === 0 ? "largest, " : ""}at ${l},${t}` : "";
  return `Face ${i + 1}${where} (${r - l}×${b - t} px)`;
}

/** The list of faces under the preview (shown when there are several). */
function listFaces(): void {
  const n = photo?.faces.length ?? 0;
  ui.faceRow.hidden = n < 2;
  const options = [new Option(photo?.ambiguous ? "— choose a face —" : "the largest", "")];
  for (let i = 0; i < n; i++) options.push(new Option(describeFace(i), String(i)));
  ui.faceChoice.replaceChildren(...options);
  ui.faceChoice.value = picked === null ? "" : String(picked);
}

function photoStatus(): void {
  if (!photo) return;
  const n = photo.faces.length;
  const what = photo.camera ? "Picture" : "Photo";
  if (n === 0) status("No face was found in this image: choose another photo.", true);
  else if (photo.ambiguous && picked === null) {
    status(`This photo has ${n} faces of about the same size: click the one to use in the photo, or pick it under ` +
      `"Face to use". Nothing is sent until you choose.`, true);
  } else if (n === 1) status(`${what} ready: the face outlined in green is used.`);
  else {
    const i = usedFace();
    status(`${what} ready: face ${i + 1} of ${n}${i === 0 ? ", the largest," : ""} is used (outlined in green); ` +
      "click another face to use it.");
  }
}

function pick(i: number | null): void {
  if (!photo || (i !== null && !photo.faces[i])) return;
  picked = i;
  drawPreview();
  listFaces();
  photoStatus();
}

/** Decode a photo or a camera frame in the face worker, show it and its faces. */
async function loadPhoto(source: Blob | ImageBitmap, label: string): Promise<void> {
  const seq = ++photoSeq;
  photo = null;
  picked = null;
  ui.faceRow.hidden = true;
  busy(true);
  try {
    const opened = await open(source, stage);
    if (seq !== photoSeq) return;
    photo = { ...opened, label, camera: source instanceof ImageBitmap };
    ui.source.textContent = `${label} (${opened.width}×${opened.height})`;
    ui.canvas.hidden = false;
    drawPreview();
    listFaces();
    ui.progress.hidden = true;
    photoStatus();
  } catch (e) {
    if (seq !== photoSeq) return;
    ui.progress.hidden = true;
    ui.canvas.hidden = true;
    ui.source.textContent = "No face image yet.";
    status(e instanceof PhotoError ? `"${label}" is ${e.message.startsWith("not ") ? "" : "not usable: "}${e.message}. ` +
      "Nothing was sent or stored." : explain(e), true);
  } finally {
    if (seq === photoSeq) busy(false);
  }
}

async function onPhoto(): Promise<void> {
  const file = ui.photo.files?.[0];
  ui.photo.value = "";
  if (!file) return;
  performance.mark("privface:photo-chosen");
  await loadPhoto(file, file.name);
}

/** A click on the preview picks the face under it. */
function onCanvasClick(e: MouseEvent): void {
  if (!photo) return;
  const rect = ui.canvas.getBoundingClientRect();
  const x = ((e.clientX - rect.left) / rect.width) * photo.width;
  const y = ((e.clientY - rect.top) / rect.height) * photo.height;
  const hit = photo.faces.findIndex(({ box: [l, t, r, b] }) => x >= l && x <= r && y >= t && y <= b);
  if (hit >= 0) pick(hit);
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

async function takePicture(): Promise<void> {
  const { videoWidth: w, videoHeight: h } = ui.video;
  if (!w || !h) {
    status("The camera gives no picture yet; try again.", true);
    return;
  }
  const frame = await createImageBitmap(ui.video);
  stream?.getTracks().forEach((t) => t.stop());
  stream = null;
  ui.video.hidden = true;
  ui.cameraShot.hidden = true;
  await loadPhoto(frame, "Camera picture");
}

/** " (face 2 of 2)" after a result where the photo had several faces. */
function which(index: number): string {
  const n = photo?.faces.length ?? 1;
  return n > 1 ? ` (face ${index + 1} of ${n}${index === 0 ? ", the largest" : ""})` : "";
}

/** C1: the chosen face's template (aligned and embedded in the face worker); ms counts detection too. */
async function face(): Promise<{ template: number[]; ms: number; index: number }> {
  const index = usedFace();
  if (!params) throw new ProtocolError("The server's parameters are not loaded.");
  const t0 = performance.now();
  const { descriptor } = await embed(index, stage);
  ui.progress.hidden = true;
  performance.mark("privface:face-done");
  return { template: quantize(descriptor, params.scale), ms: photo!.detect_ms + performance.now() - t0, index };
}

// ---------------------------------------------------------------- actions

async function doEnrol(): Promise<void> {
  const id = subjectId();
  const t0 = performance.now() - (photo?.detect_ms ?? 0); // C1's detection ran when the photo was chosen
  const { template, ms, index } = await face();
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
  status(r.replaced ? `Enrolled ${id}${which(index)} (replaced the previous enrolment).` : `Enrolled ${id}${which(index)}.`);
  showReport("Enrolled", "accept", { ...r, face_ms: ms, keygen_ms: keygen, total_ms: performance.now() - t0,
    decode_ms: photo!.decode_ms, face: index, faces: photo!.faces.length });
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
  const t0 = performance.now() - (photo?.detect_ms ?? 0); // C1's detection ran when the photo was chosen
  const { template, ms, index } = await face();
  status("Encrypting, matching on the server, decrypting…");
  const r = await verify(http, client, template, pool?.powMany);
  const total = performance.now() - t0;
  prepareLater(client);
  status(r.accepted ? `Verified: this is ${id}${which(index)}.` : `Not verified as ${id}${which(index)}.`);
  showReport(r.accepted ? "Accepted" : "Rejected", r.accepted ? "accept" : "reject",
    { ...r, face_ms: ms, total_ms: total, total_excl_face_ms: total - ms, workers: pool?.size ?? 0,
      decode_ms: photo!.decode_ms, face: index, faces: photo!.faces.length });
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
ui.cameraShot.addEventListener("click", () => void takePicture());
ui.canvas.addEventListener("click", onCanvasClick);
ui.faceChoice.addEventListener("change", () => pick(ui.faceChoice.value === "" ? null : Number(ui.faceChoice.value)));
ui.enrol.addEventListener("click", action(doEnrol));
ui.verify.addEventListener("click", action(doVerify));
ui.revoke.addEventListener("click", action(askRevoke));
ui.revokeConfirm.addEventListener("click", action(doRevoke));
ui.revokeCancel.addEventListener("click", cancelRevoke);
ui.keyExport.addEventListener("click", action(doExport));
ui.keyImport.addEventListener("change", action(doImport));
void init();
