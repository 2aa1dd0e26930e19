/**
 * /app/'s protocol picker and the gsm Device's part of the page (issue 39): the user picks the protocol their
 * server speaks (preset from params.json); for gsm, a photo → the in-page face pipeline (face.ts) → the fixed-norm
 * template (templates/fixedNorm.ts, as Python's) → enrolment at this provider (gsm.ts), and presentation to a
 * terminal (Π2/Π3). The page's CSP lets it reach only its own server, so a phone presents on the terminal's own
 * /app/ after importing its key file there.
 */
import { embed, NoFaceError, open, PhotoError } from "./face.js";
import { enrolHere, ensurePrepared, exportKey, importKey, PAIRING_CODE, presentAndMatch, resolvePairingCode } from "./gsm.js";
import { fixedNormTemplate } from "../templates/fixedNorm.js";
import { loadDeviceKey } from "../gsm/keyfile.js";
import { GsmParams, type GsmParamsInit, type Variant } from "../gsm/params.js";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

interface ServerParams extends GsmParamsInit {
  protocol?: string;
  role?: string;
}

/** The photo's template for this server: the largest face, embedded, then ℓ integers of norm ζ. */
export async function templateFromPhoto(photo: Blob, params: GsmParams, onStage?: (s: string) => void): Promise<number[]> {
  const opened = await open(photo, (s) => onStage?.(s));
  if (opened.faces.length === 0) throw new NoFaceError("no face was found in the photo");
  const { descriptor } = await embed(0, (s) => onStage?.(s));
  if (descriptor.length !== params.ell) {
    throw new Error(`this server's templates have ℓ = ${params.ell} values, the face model gives ${descriptor.length}`);
  }
  return fixedNormTemplate(descriptor, params.m);
}

function explain(e: unknown): string {
  if (e instanceof NoFaceError) return "No face in this photo: take one facing the camera, in good light.";
  if (e instanceof PhotoError) return e.message;
  const msg = (e as Error).message ?? String(e);
  if (/cannot be reached|Failed to fetch|NetworkError|Content Security Policy/i.test(msg)) {
    return `The terminal cannot be reached from this app: it is offline, or it does not let ${location.origin} call it `
      + "(its operator allows it with privface serve --allow-origin, and this app's server names the terminal's origin "
      + "the same way) — or open the terminal's own page (its address + /app/) and import your key file there.";
  }
  if (/expired/.test(msg)) return "Your enrolment has expired: enrol again at your provider.";
  if (/locked|too many/i.test(msg)) return `The terminal refuses for now: ${msg}`;
  return msg;
}

async function init(): Promise<void> {
  const picker = $<HTMLSelectElement>("protocol");
  if (!picker) return;
  const note = $("protocol-note");
  const gsmUi = $("gsm-ui");
  const others = Array.from(document.querySelectorAll<HTMLElement>("main > section, main > details, main > .lead"))
    .filter((el) => el !== gsmUi && !el.contains(picker));
  let server: ServerParams = {};
  try {
    server = (await (await fetch("params.json", { cache: "no-store" })).json()) as ServerParams;
  } catch {
    /* main.ts reports it */
  }
  const speaks = server.protocol === "gsm" ? "gsm" : "im2020";
  picker.value = speaks;
  const apply = () => {
    const chosen = picker.value;
    note.hidden = chosen === speaks;
    note.textContent = chosen === speaks ? "" : `This server speaks ${speaks}, not ${chosen}: open the page of your ${chosen} server.`;
    gsmUi.hidden = !(chosen === "gsm" && speaks === "gsm");
    for (const el of others) el.hidden = chosen !== "im2020" || speaks !== "im2020";
  };
  picker.addEventListener("change", apply);
  apply();
  if (speaks === "gsm") setUpGsm(server);
}

function setUpGsm(server: ServerParams): void {
  const params = new GsmParams(server);
  const status = $("gsm-status");
  const decision = $("gsm-decision");
  const progress = $<HTMLProgressElement>("gsm-progress");
  const subject = $<HTMLInputElement>("gsm-subject");
  const terminal = $<HTMLInputElement>("gsm-terminal");
  const photo = $<HTMLInputElement>("gsm-photo");
  terminal.value = server.role === "terminal" ? `${location.origin}/` : "";
  $("gsm-enrol").hidden = server.role !== "provider";
  const say = (text: string, error = false) => {
    status.textContent = text;
    status.classList.toggle("error", error);
  };
  const run = (f: () => Promise<void>) => () => {
    decision.textContent = "";
    decision.className = "decision";
    f().catch((e) => say(explain(e), true)).finally(() => (progress.hidden = true));
  };
  const id = () => {
    const v = subject.value.trim();
    if (!/^[A-Za-z0-9._@+-]{1,128}$/.test(v)) throw new Error("Your ID: 1–128 of A–Z a–z 0–9 . _ @ + -");
    return v;
  };
  // The key and Π_en's precomputation are made while the user picks the photo (gsm.ts ensurePrepared); enrolling
  // then waits for them if they are not done yet.
  photo.addEventListener("change", () => {
    if (server.role !== "provider") return;
    try {
      void ensurePrepared(id()).catch(() => undefined); // its error, if any, shows when enrolling
    } catch { /* no valid ID yet: made at enrolment */ }
  });
  $("gsm-enrol").addEventListener("click", run(async () => {
    const who = id();
    const file = photo.files?.[0];
    if (!file) throw new Error("Choose a photo of your face first.");
    progress.hidden = false;
    const template = await templateFromPhoto(file, params, (s) => say(`Photo: ${s}…`));
    say("Making this phone's key and enrolling (keys stay on this phone)…");
    const r = await enrolHere(who, template, (what, n) => say(what === "keygen" ? `Generating the key… ${n} candidates`
      : what === "provider" ? "The provider checks the proofs…" : `Proving… ${Math.round(n * 100)} %`));
    say(`Enrolled ${who}: this phone keeps the signed enrolment (until ${new Date(r.expires_at * 1000).toLocaleDateString()}).`);
  }));
  $("gsm-present").addEventListener("click", run(async () => {
    const who = id();
    const typed = terminal.value.trim();
    const url = new URL(PAIRING_CODE.test(typed) ? await resolvePairingCode(typed) : typed || `${location.origin}/`,
      location.href);
    say("Presenting to the terminal: look at its camera…");
    const r = await presentAndMatch(who, url.href, $<HTMLSelectElement>("gsm-variant").value as Variant);
    decision.textContent = r.decision === "accept" ? "Accepted" : r.decision === "reject" ? "Rejected" : "Aborted";
    decision.className = `decision ${r.decision === "accept" ? "accept" : "reject"}`;
    say(`The terminal decided (${Math.round(r.device_ms)} ms on this phone).`);
  }));
  $("gsm-export").addEventListener("click", run(async () => {
    const who = id();
    const data = await exportKey(who);
    if (data === null) throw new Error(`No gsm key for ${who} on this device.`);
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([data as BlobPart], { type: "application/octet-stream" }));
    a.download = `${who}.gsm-key`;
    a.click();
    say("Exported: the key file holds your secret key — keep it safe.");
  }));
  $<HTMLInputElement>("gsm-import").addEventListener("change", run(async () => {
    const file = $<HTMLInputElement>("gsm-import").files?.[0];
    if (!file) return;
    const data = new Uint8Array(await file.arrayBuffer());
    loadDeviceKey(data, params); // checked before it is stored
    const who = await importKey(data);
    subject.value = who;
    say(`Imported the key of ${who}.`);
  }));
}

void init();
