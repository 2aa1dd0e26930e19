/**
 * The kiosk page of a gsm terminal (issue 39; server side service/bindings/gsm_kiosk.py): it shows the address a
 * phone presents to and a short pairing code for it, posts the camera's frames (the terminal's capture w, seed 004 §3) and shows the outcome of the
 * last match large, or why the terminal refused it. The kiosk token comes in the URL's fragment (printed by
 * `privface serve`), is kept in this tab only and sent with every kiosk request.
 */
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const ui = { pair: $("pair"), code: $("pair-code"), video: $<HTMLVideoElement>("video"), decision: $("kiosk-decision"), detail: $("kiosk-detail"),
  camera: $<HTMLButtonElement>("kiosk-camera") };

const FRAME_MS = 1000;
const POLL_MS = 700;
const SHOW_MS = 8000;

function token(): string {
  const m = /token=([A-Za-z0-9_-]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem("kiosk-token", m[1]!);
    history.replaceState(null, "", location.pathname); // not left in the address bar
  }
  return sessionStorage.getItem("kiosk-token") ?? "";
}

const headers = { "x-kiosk-token": token() };

function show(state: string, text: string, detail = ""): void {
  ui.decision.className = `kiosk-decision ${state}`;
  ui.decision.textContent = text;
  ui.detail.textContent = detail;
}

/** What a person at the kiosk should read for the terminal's refusal `message` (bindings/gsm.py, parties.py). */
export function explainRefusal(state: string, message: string): string {
  if (state === "locked") return "Too many failed attempts for this ID: it is locked out for a while.";
  if (/no usable face|no fresh camera frame|no fresh frame/.test(message)) return "No face seen: look at the camera and present again.";
  if (/expired/.test(message)) return "This phone's enrolment has expired: enrol again with your provider.";
  if (/signature/.test(message)) return "This phone was enrolled by another provider than this terminal's.";
  if (/first message|m1|Template|ciphertext/i.test(message)) return "The phone sent an invalid or foreign enrolment.";
  return `Refused: ${message}`;
}

let last = -1;
let clear: number | undefined;

async function poll(): Promise<void> {
  try {
    const r = await fetch("kiosk/status", { headers, cache: "no-store" });
    if (r.status === 403) {
      show("refused", "Not authorised", "Open this page with the kiosk link printed by privface serve (…/kiosk.html#token=…).");
      return;
    }
    const s = (await r.json()) as { seq: number; state: string; subject?: string | null; message?: string };
    if (s.seq !== last) {
      if (last >= 0 || s.state !== "idle") {
        const who = s.subject ? ` (${s.subject})` : "";
        if (s.state === "accept") show("accept", "Accepted", `Welcome${who}.`);
        else if (s.state === "reject") show("reject", "Rejected", `The face does not match this phone's enrolment${who}.`);
        else show(s.state, explainRefusal(s.state, s.message ?? ""), s.message ?? "");
        window.clearTimeout(clear);
        clear = window.setTimeout(() => show("", "Waiting…"), SHOW_MS);
      }
      if (last >= 0) void newCode();
      last = s.seq;
    }
  } catch {
    ui.detail.textContent = "The terminal does not answer.";
  }
}

async function sendFrame(canvas: HTMLCanvasElement): Promise<void> {
  const v = ui.video;
  if (!v.videoWidth) return;
  canvas.width = v.videoWidth;
  canvas.height = v.videoHeight;
  canvas.getContext("2d")!.drawImage(v, 0, 0);
  const blob = await new Promise<Blob | null>((resolve) => canvas.toBlob(resolve, "image/jpeg", 0.9));
  if (blob) await fetch("kiosk/frame", { method: "POST", headers, body: blob }).catch(() => undefined);
}

async function startCamera(): Promise<void> {
  try {
    ui.video.srcObject = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "user" }, audio: false });
    await ui.video.play();
    ui.camera.hidden = true;
    const canvas = document.createElement("canvas");
    const loop = async () => {
      await sendFrame(canvas);
      window.setTimeout(() => void loop(), FRAME_MS);
    };
    void loop();
  } catch (e) {
    show("refused", "No camera", `The camera cannot be used (${(e as Error).message}).`);
  }
}

/** A fresh pairing code (service/bindings/gsm_pairing.py: single use, expires), shown large; renewed before it
 *  expires and after every match (the phone that used it consumed it). */
let codeTimer: number | undefined;
async function newCode(): Promise<void> {
  window.clearTimeout(codeTimer);
  try {
    const r = await fetch("kiosk/pair", { method: "POST", headers, cache: "no-store" });
    if (!r.ok) throw new Error(String(r.status));
    const c = (await r.json()) as { code: string; ttl: number; url: string };
    ui.code.textContent = `${c.code.slice(0, 4)}-${c.code.slice(4)}`;
    ui.pair.textContent = c.url;
    codeTimer = window.setTimeout(() => void newCode(), Math.max(5, c.ttl - 10) * 1000);
  } catch {
    ui.code.textContent = "—";
    codeTimer = window.setTimeout(() => void newCode(), 5000);
  }
}

ui.pair.textContent = `${location.origin}/`;
void newCode();
ui.camera.addEventListener("click", () => void startCamera());
void startCamera();
window.setInterval(() => void poll(), POLL_MS);
void poll();
