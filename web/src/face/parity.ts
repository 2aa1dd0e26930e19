/**
 * The parity/timing harness of the face pipeline, callable in a browser page (and in Node):
 * embeds a list of images and returns, per image, the descriptor (or the error) and the timings.
 * `privface bench web --parity` drives it in headless Chromium and compares with Python.
 */
import { FacePipeline, type FaceModelFiles, NoFaceError } from "./index.js";
import type { RGBImage } from "./geometry.js";
import { readPgm } from "./pgm.js";

export interface ParityImage {
  name: string;
  /** PGM/PPM/JPEG/PNG bytes (PGM and PPM decoded here; other formats by the browser's decoder). */
  bytes: Uint8Array;
}

export interface ParityResult {
  name: string;
  descriptor: number[] | null;
  box: [number, number, number, number] | null;
  error: string | null;
  timings: Record<string, number> | null;
  /** time from the image bytes to the descriptor, decoding included */
  face_ms: number;
}

async function decode(bytes: Uint8Array): Promise<RGBImage> {
  if (bytes[0] === 0x50 && (bytes[1] === 0x35 || bytes[1] === 0x36)) return readPgm(bytes); // "P5", "P6"
  // Pillow (the Python side) applies neither embedded colour profiles nor premultiplied alpha
  const bitmap = await createImageBitmap(new Blob([bytes as BlobPart]), { colorSpaceConversion: "none", premultiplyAlpha: "none" });
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const ctx = canvas.getContext("2d");
  if (!ctx) throw new Error("no 2d canvas");
  ctx.drawImage(bitmap, 0, 0);
  const id = ctx.getImageData(0, 0, bitmap.width, bitmap.height);
  const rgb = new Uint8Array(id.width * id.height * 3);
  for (let i = 0, j = 0; i < id.data.length; i += 4, j += 3) {
    rgb[j] = id.data[i]!;
    rgb[j + 1] = id.data[i + 1]!;
    rgb[j + 2] = id.data[i + 2]!;
  }
  return { width: id.width, height: id.height, data: rgb };
}

export async function runParity(files: FaceModelFiles, images: ParityImage[], wasmPaths?: string): Promise<ParityResult[]> {
  const pipe = await FacePipeline.load(files, wasmPaths ? { wasmPaths } : {});
  const out: ParityResult[] = [];
  for (const im of images) {
    const t0 = performance.now();
    try {
      const rgb = await decode(im.bytes);
      const r = await pipe.embedRGB(rgb);
      out.push({ name: im.name, descriptor: Array.from(r.descriptor), box: r.box, error: null, timings: { ...r.timings }, face_ms: performance.now() - t0 });
    } catch (e) {
      const msg = e instanceof NoFaceError ? "no face" : String(e);
      out.push({ name: im.name, descriptor: null, box: null, error: msg, timings: null, face_ms: performance.now() - t0 });
    }
  }
  return out;
}
