/**
 * The page's C1 step: the browser face pipeline (web/src/face) in a Web Worker (faceWorker.ts), so that a large
 * photo never freezes the page. `open` decodes a photo and finds its faces (a preview and the boxes to draw);
 * `embed` aligns and embeds the face chosen. Stages are reported as they start: decoding, detecting, aligning,
 * embedding.
 */
export class NoFaceError extends Error {
  override name = "NoFaceError";
}

/** Two faces of about the same size (the second's box area ≥ 0.8 × the largest's) and no choice made yet. */
export class AmbiguousFaceError extends Error {
  override name = "AmbiguousFaceError";
}

/** The photo is not usable (not an image, too small, too large); `message` says why. */
export class PhotoError extends Error {
  override name = "PhotoError";
}

export type Stage = "decoding" | "detecting" | "aligning" | "embedding";

export interface FoundFace {
  /** left, top, right, bottom in the photo's pixels (as Python's Face.box) */
  box: [number, number, number, number];
  area: number;
}

export interface Opened {
  width: number;
  height: number;
  workWidth: number;
  workHeight: number;
  /** the working image (what detection saw), to draw in the preview */
  preview: ImageBitmap | null;
  /** largest first */
  faces: FoundFace[];
  ambiguous: boolean;
  decode_ms: number;
  detect_ms: number;
}

export interface Embedded {
  descriptor: Float32Array;
  box: [number, number, number, number];
  face: number;
  timings: Record<string, number>;
}

type Progress = (stage: Stage, done?: number) => void;
type Pending = { resolve: (v: never) => void; reject: (e: Error) => void; progress?: Progress };

let worker: Worker | null = null;
let next = 0;
const pending = new Map<number, Pending>();

function call<T>(message: Record<string, unknown>, progress?: Progress, transfer: Transferable[] = []): Promise<T> {
  if (!worker) {
    worker = new Worker(new URL("face-worker.js", import.meta.url), { type: "module" });
    worker.onmessage = (e: MessageEvent<{ id: number; stage?: Stage; done?: number; result?: unknown;
      error?: { kind: string; message: string } }>) => {
      const p = pending.get(e.data.id);
      if (!p) return;
      if (e.data.stage) {
        p.progress?.(e.data.stage, e.data.done);
        return;
      }
      pending.delete(e.data.id);
      const err = e.data.error;
      if (!err) p.resolve(e.data.result as never);
      else if (err.kind === "no-face") p.reject(new NoFaceError(err.message));
      else if (["not-image", "too-small", "too-large"].includes(err.kind)) p.reject(new PhotoError(err.message));
      else p.reject(new Error(err.message));
    };
    worker.onerror = (e) => {
      for (const p of pending.values()) p.reject(new Error(`the face worker failed: ${e.message}`));
      pending.clear();
    };
  }
  const id = next++;
  return new Promise<T>((resolve, reject) => {
    pending.set(id, { resolve: resolve as (v: never) => void, reject, progress });
    worker!.postMessage({ ...message, id }, transfer);
  });
}

let ready: Promise<unknown> | null = null;

/** Load the models in the worker (once); the page calls it early so that the first photo does not wait. */
export function preload(): Promise<unknown> {
  // ?face_threads=N (bench web --face-threads): onnxruntime's WebAssembly threads. Default 1: on the 2-core test
  // machine one thread measured faster for C1 and left C2/C3 undisturbed (threads spin between inferences).
  const threads = Number(new URLSearchParams(location.search).get("face_threads") ?? 1);
  ready ??= call({ op: "init", base: location.href, threads });
  return ready;
}

/** Decode a photo (a file, or a camera frame as an ImageBitmap, transferred) and find its faces. */
export async function open(source: Blob | ImageBitmap, progress?: Progress): Promise<Opened> {
  void preload();
  return call<Opened>({ op: "open", source }, progress, source instanceof ImageBitmap ? [source] : []);
}

/** Align and embed face `face` (0: the largest) of the last opened photo. */
export async function embed(face: number, progress?: Progress): Promise<Embedded> {
  await preload();
  return call<Embedded>({ op: "embed", face }, progress);
}
