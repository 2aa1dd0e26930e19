/**
 * The page's C1 step (seed 000 §IV-B, Table I) off the main thread: a Web Worker that decodes the photo
 * (createImageBitmap), brings it to the working size of Python's Detector (downscaled to a longer side of 1280,
 * read in strips so a 50-megapixel photo is never held whole; small ones upscaled), finds every face, and on
 * request aligns and embeds one of them with the face pipeline (web/src/face: HOG/CNN detectors, landmarks,
 * chip, ResNet-128 in onnxruntime-web; or, on a server whose backend is sface, the same 5 landmarks, the 112×112
 * chip of the photo as given on the eye centres and nose base, and SFace). The page (face.ts) only draws and talks; nothing here blocks it.
 *
 * Messages in: {op: "init", base, threads} · {op: "open", id, source: Blob | ImageBitmap} · {op: "embed", id, face}.
 * Out: {id, stage} while working (decoding, detecting, aligning, embedding), then {id, result} or {id, error}.
 */
import { FacePipeline, type PhotoSource, SAME_SIZE, type RGBImage } from "../face/index.js";
import type { Rect } from "../face/shapePredictor.js";
import { resizeBicubicStrips, resizeBoxStrips } from "../face/resize.js";
import { modelFiles } from "./models.js";

/** As Python's faces.image.MAX_PIXELS: decompression bombs are refused. */
const MAX_PIXELS = 64_000_000;

/** input: the photo as given (sface aligns on it, as Python does): its pixels where it is no larger than the working
 * image, else a reader of its decoded bitmap (kept open until the next photo). */
interface Current { work: RGBImage; scale: number; rects: Rect[]; input: RGBImage | PhotoSource | null; bitmap: ImageBitmap | null }

const scope = self as unknown as { onmessage: ((e: MessageEvent) => void) | null; postMessage(v: unknown, t?: Transferable[]): void };
let pipeline: Promise<FacePipeline> | null = null;
let current: Current | null = null;
let queue: Promise<unknown> = Promise.resolve();

class Refused extends Error {
  constructor(readonly kind: string, message: string) {
    super(message);
  }
}

function strips(bitmap: ImageBitmap): (y0: number, rows: number) => Uint8ClampedArray {
  const canvas = new OffscreenCanvas(bitmap.width, 256);
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  if (!ctx) throw new Error("no 2d canvas in this worker");
  return (y0, rows) => {
    ctx.clearRect(0, 0, bitmap.width, rows);
    ctx.drawImage(bitmap, 0, y0, bitmap.width, rows, 0, 0, bitmap.width, rows);
    return ctx.getImageData(0, 0, bitmap.width, rows).data;
  };
}

/** The decoded photo as sface's alignment reads it: a region (one canvas read), or the whole shrunk in strips. */
function photoSource(bitmap: ImageBitmap): PhotoSource {
  return {
    width: bitmap.width,
    height: bitmap.height,
    crop({ x0, y0, width, height }) {
      const canvas = new OffscreenCanvas(width, height);
      const ctx = canvas.getContext("2d", { willReadFrequently: true });
      if (!ctx) throw new Error("no 2d canvas in this worker");
      ctx.drawImage(bitmap, x0, y0, width, height, 0, 0, width, height);
      const rgba = ctx.getImageData(0, 0, width, height).data;
      const data = new Uint8Array(width * height * 3);
      for (let i = 0, j = 0; j < data.length; i += 4, j += 3) {
        data[j] = rgba[i]!;
        data[j + 1] = rgba[i + 1]!;
        data[j + 2] = rgba[i + 2]!;
      }
      return { width, height, data };
    },
    shrink(width, height) {
      return resizeBoxStrips(bitmap.width, bitmap.height, width, height, strips(bitmap));
    },
  };
}

function preview(work: RGBImage): ImageBitmap {
  const rgba = new Uint8ClampedArray(work.width * work.height * 4);
  for (let i = 0, j = 0; j < work.data.length; i += 4, j += 3) {
    rgba[i] = work.data[j]!;
    rgba[i + 1] = work.data[j + 1]!;
    rgba[i + 2] = work.data[j + 2]!;
    rgba[i + 3] = 255;
  }
  const canvas = new OffscreenCanvas(work.width, work.height);
  canvas.getContext("2d")!.putImageData(new ImageData(rgba, work.width, work.height), 0, 0);
  return canvas.transferToImageBitmap();
}

async function open(id: number, source: Blob | ImageBitmap): Promise<void> {
  current?.bitmap?.close();
  current = null;
  const stage = (name: string, done?: number) => scope.postMessage({ id, stage: name, done });
  stage("decoding");
  const t0 = performance.now();
  let bitmap: ImageBitmap;
  try { // as Pillow: no colour-profile conversion, no premultiplied alpha; EXIF orientation applied (exif_transpose)
    bitmap = source instanceof ImageBitmap ? source : await createImageBitmap(source,
      { colorSpaceConversion: "none", premultiplyAlpha: "none", imageOrientation: "from-image" });
  } catch {
    throw new Refused("not-image", "not an image this browser can read");
  }
  const { width, height } = bitmap;
  try {
    if (width < 8 || height < 8) throw new Refused("too-small", `${width}×${height} is too small to hold a face`);
    if (width * height > MAX_PIXELS) throw new Refused("too-large", `${width}×${height} is larger than 64 megapixels`);
    const read = strips(bitmap);
    const { work, scale } = FacePipeline.workingImageStrips(width, height, read, (done) => stage("decoding", done));
    const decodeMs = performance.now() - t0;
    const shown = preview(work);
    stage("detecting");
    const pipe = await (pipeline ?? Promise.reject(new Error("face models not loaded")));
    // sface aligns on the photo as given: a small (upscaled) one is copied, a large one read from its bitmap
    const sface = pipe.backend === "sface";
    const input = scale === 1 ? work : !sface ? null
      : scale > 1 ? resizeBicubicStrips(width, height, width, height, read) : photoSource(bitmap);
    const t1 = performance.now();
    const { rects, detector } = await pipe.detectAll(work);
    current = { work, scale, rects, input, bitmap: sface && scale < 1 ? bitmap : null };
    const area = (r: Rect) => (r.right - r.left + 1) * (r.bottom - r.top + 1);
    scope.postMessage({ id, result: {
      width, height, workWidth: work.width, workHeight: work.height, detector, preview: shown,
      faces: rects.map((r) => ({ box: FacePipeline.inputBox(r, scale), area: area(r) })),
      ambiguous: rects.length >= 2 && area(rects[1]!) >= SAME_SIZE * area(rects[0]!),
      decode_ms: decodeMs, detect_ms: performance.now() - t1,
    } }, [shown]);
  } finally {
    if (current?.bitmap !== bitmap) bitmap.close();
  }
}

async function embed(id: number, face: number): Promise<void> {
  if (!current) throw new Refused("no-image", "choose a photo or take a picture first");
  const rect = current.rects[face];
  if (!rect) throw new Refused("no-face", current.rects.length ? `there is no face ${face}` : "no face found in the image");
  const pipe = await pipeline!;
  const r = await pipe.embedAt(current.work, current.scale, rect, (name) => scope.postMessage({ id, stage: name }),
    current.input);
  scope.postMessage({ id, result: { ...r, box: FacePipeline.inputBox(rect, current.scale), face } });
}

scope.onmessage = (e: MessageEvent) => {
  const m = e.data as { op: string; id: number; base?: string; threads?: number; source?: Blob | ImageBitmap; face?: number };
  if (m.op === "init") {
    pipeline ??= modelFiles(m.base!).then((files) => FacePipeline.load(files,
      { wasmPaths: new URL("ort/", m.base!).href, threads: m.threads ?? 1 }));
    pipeline.then((pipe) => scope.postMessage({ id: m.id, result: pipe.backend }),
      (err) => scope.postMessage({ id: m.id, error: { kind: "models", message: String((err as Error).message ?? err) } }));
    return;
  }
  // one job at a time, in order: a photo chosen while another is still being decoded replaces it only after
  const job = queue.then(() => (m.op === "open" ? open(m.id, m.source!) : embed(m.id, m.face ?? 0)));
  queue = job.catch(() => undefined);
  job.catch((err: unknown) => scope.postMessage({ id: m.id, error: {
    kind: err instanceof Refused ? err.kind : "other", message: String((err as Error).message ?? err) } }));
};
