/**
 * The `sface` backend's alignment and embedding in the browser, as Python's `SFaceBackend(landmarks=5)` (privface.faces.sface on
 * faces.onnx_backend): from dlib's 5 landmarks (its CC0 shape predictor) the eye centres (midpoints of each eye's two
 * corners) and the nose base, the least-squares similarity (Umeyama 1991) onto their calibrated positions on the
 * ArcFace 112×112 template (`DLIB5_REF`), Pillow's bilinear affine warp (libImaging/Geometry.c, black outside
 * the image; a Pillow BOX shrink first when the face is more than twice the chip), then SFace (Zhong et al., IEEE
 * TIP 30, 2021; OpenCV's `face_recognition_sface_2021dec.onnx`) in onnxruntime-web on raw RGB pixel values, NCHW
 * float (the graph normalises them itself), and the output scaled to unit length.
 */
import * as ort from "onnxruntime-web/wasm";

import { type RGBImage, similarityTransform } from "./geometry.js";
import { resizeBox } from "./resize.js";
import type { ResNetOptions } from "./resnet.js";
import type { Point } from "./shapePredictor.js";

export const ARCFACE_CHIP = 112;
/** onnx_backend.DLIB5_REF: where the image-left eye centre, the image-right eye centre and the nose base of dlib's
 * 5-point model fall on the ArcFace 112×112 template (x, y; pixel centres at integers). */
export const DLIB5_REF = [38.3323, 53.2151, 73.302, 53.0978, 56.1107, 79.7049];

/** onnx_backend.dlib5_points: from dlib's 5 landmarks (image-right eye outer and inner corner, image-left eye outer
 * and inner corner, nose base) the image-left eye centre, the image-right eye centre (midpoints of the corners) and
 * the nose base; landmarks divided by `scale` first, as Python's shape_to_array. Flat x, y. */
export function dlib5Points(parts: Point[], scale = 1): number[] {
  if (parts.length !== 5) throw new Error("the alignment points need dlib's 5 landmarks");
  const p = parts.map(([x, y]) => [x / scale, y / scale] as [number, number]);
  const mid = (i: number): [number, number] => [(p[i]![0] + p[i + 1]![0]) / 2, (p[i]![1] + p[i + 1]![1]) / 2];
  return [...mid(2), ...mid(0), ...p[4]!];
}

/** A part of a larger image: `img` holds the pixels from (x0, y0) of an image `width`×`height`. */
export interface Frame {
  x0: number;
  y0: number;
  width: number;
  height: number;
}

/** onnx_backend.warp_affine: Image.transform(AFFINE, BILINEAR) by the inverse of the 2×3 similarity `m`. With a
 * `frame`, `img` is a crop of the image `m` refers to, holding every pixel the chip samples (see `chipRegion`). */
export function warpAffine(img: RGBImage, m: readonly number[], size = ARCFACE_CHIP, frame?: Frame): RGBImage {
  const [a, b, tx, c, d, ty] = m as [number, number, number, number, number, number];
  const det = a * d - b * c;
  const i00 = d / det, i01 = -b / det, i10 = -c / det, i11 = a / det;
  const t0 = -(i00 * tx + i01 * ty), t1 = -(i10 * tx + i11 * ty);
  const c0 = t0 + 0.5 - (i00 * 0.5 + i01 * 0.5), c1 = t1 + 0.5 - (i10 * 0.5 + i11 * 0.5);
  const { data } = img;
  const stride = img.width;
  const { x0: ox, y0: oy, width: w, height: h } = frame ?? { x0: 0, y0: 0, width: img.width, height: img.height };
  const out = new Uint8Array(size * size * 3);
  for (let y = 0; y < size; y++)
    for (let x = 0; x < size; x++) {
      const u = x + 0.5, v = y + 0.5;
      let xin = i00 * u + i01 * v + c0;
      let yin = i10 * u + i11 * v + c1;
      if (xin < 0 || xin >= w || yin < 0 || yin >= h) continue; // black
      xin -= 0.5;
      yin -= 0.5;
      const xi = Math.floor(xin), yi = Math.floor(yin);
      const dx = xin - xi, dy = yin - yi;
      const row0 = (Math.min(Math.max(yi, 0), h - 1) - oy) * stride;
      const x0 = Math.min(Math.max(xi, 0), w - 1) - ox, x1 = Math.min(Math.max(xi + 1, 0), w - 1) - ox;
      const row1 = yi + 1 >= 0 && yi + 1 < h ? (yi + 1 - oy) * stride : -1;
      for (let ch = 0; ch < 3; ch++) {
        const p0 = data[3 * (row0 + x0) + ch]!, p1 = data[3 * (row0 + x1) + ch]!;
        const v1 = p0 + (p1 - p0) * dx;
        let v2 = v1;
        if (row1 >= 0) {
          const q0 = data[3 * (row1 + x0) + ch]!, q1 = data[3 * (row1 + x1) + ch]!;
          v2 = q0 + (q1 - q0) * dx;
        }
        out[3 * (y * size + x) + ch] = Math.trunc(v1 + (v2 - v1) * dy);
      }
    }
  return { width: size, height: size, data: out };
}

/** The pixels of a width×height image the chip of similarity `m` samples (with a margin of 2), clipped to it. */
export function chipRegion(m: readonly number[], width: number, height: number, size = ARCFACE_CHIP): Frame {
  const [a, b, tx, c, d, ty] = m as [number, number, number, number, number, number];
  const det = a * d - b * c;
  const xs: number[] = [], ys: number[] = [];
  for (const [u, v] of [[0, 0], [size, 0], [0, size], [size, size]] as const) {
    xs.push((d * (u - tx) - b * (v - ty)) / det);
    ys.push((-c * (u - tx) + a * (v - ty)) / det);
  }
  const x0 = Math.max(0, Math.floor(Math.min(...xs)) - 2), y0 = Math.max(0, Math.floor(Math.min(...ys)) - 2);
  const x1 = Math.min(width, Math.ceil(Math.max(...xs)) + 3), y1 = Math.min(height, Math.ceil(Math.max(...ys)) + 3);
  return { x0: Math.min(x0, width - 1), y0: Math.min(y0, height - 1), width: Math.max(1, x1 - x0), height: Math.max(1, y1 - y0) };
}

/** Python's round(): halves to even. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** An image too large to hold whole (a photo the face worker reads from its decoded bitmap). */
export interface PhotoSource {
  width: number;
  height: number;
  /** the RGB pixels of a region */
  crop(region: Frame): RGBImage;
  /** the whole image shrunk with Pillow's BOX filter */
  shrink(width: number, height: number): RGBImage;
}

/** onnx_backend.align: the 112×112 chip for landmarks (flat x, y) in `img` pixels whose template positions are `ref`
 * (default: `dlib5Points` onto `DLIB5_REF`). */
export function alignChip(img: RGBImage | PhotoSource, points: number[], ref: readonly number[] = DLIB5_REF): RGBImage {
  let m = similarityTransform(points, ref);
  const scale = Math.hypot(m[0], m[3]);
  const { width: w, height: h } = img;
  if (scale < 0.5) {
    const nw = Math.max(1, roundHalfEven(w * scale)), nh = Math.max(1, roundHalfEven(h * scale));
    const small = "data" in img ? resizeBox(img, nw, nh) : img.shrink(nw, nh);
    points = points.map((v, i) => (v + 0.5) * (i % 2 === 0 ? nw / w : nh / h) - 0.5);
    m = similarityTransform(points, ref);
    return warpAffine(small, m, ARCFACE_CHIP);
  }
  if ("data" in img) return warpAffine(img, m, ARCFACE_CHIP);
  const region = chipRegion(m, w, h);
  return warpAffine(img.crop(region), m, ARCFACE_CHIP, { ...region, width: w, height: h });
}

export class SFace {
  private constructor(private readonly session: ort.InferenceSession, private readonly input: string,
    private readonly output: string) {}

  static async load(model: Uint8Array, opts: ResNetOptions = {}): Promise<SFace> {
    if (opts.wasmPaths) ort.env.wasm.wasmPaths = opts.wasmPaths;
    const isolated = typeof globalThis.crossOriginIsolated === "boolean" ? globalThis.crossOriginIsolated : false;
    ort.env.wasm.numThreads = isolated ? Math.max(1, opts.threads ?? 1) : 1;
    ort.env.wasm.simd = true;
    const session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
    if (session.inputNames.length !== 1 || session.outputNames.length !== 1)
      throw new Error("SFace model: expected one input and one output");
    return new SFace(session, session.inputNames[0]!, session.outputNames[0]!);
  }

  /** The unit-length 128-D embedding of one aligned 112×112 RGB chip (onnx_backend.embed_chips, mean 0, std 1). */
  async embed(chip: RGBImage): Promise<Float32Array> {
    if (chip.width !== ARCFACE_CHIP || chip.height !== ARCFACE_CHIP) throw new RangeError("chips must be 112×112");
    const n = ARCFACE_CHIP * ARCFACE_CHIP;
    const x = new Float32Array(3 * n);
    for (let i = 0; i < n; i++) {
      x[i] = chip.data[3 * i]!;
      x[n + i] = chip.data[3 * i + 1]!;
      x[2 * n + i] = chip.data[3 * i + 2]!;
    }
    const out = (await this.session.run({ [this.input]: new ort.Tensor("float32", x, [1, 3, ARCFACE_CHIP, ARCFACE_CHIP]) }))[this.output];
    if (!out || out.type !== "float32" || out.dims.length !== 2 || out.dims[1] !== 128) throw new Error("SFace model: unexpected output");
    const e = out.data as Float32Array;
    let s = 0;
    for (const v of e) s += v * v;
    if (!Number.isFinite(s)) throw new Error("SFace model: the model produced non-finite values");
    const norm = Math.max(Math.fround(Math.sqrt(s)), 1e-12);
    return Float32Array.from(e, (v) => v / norm);
  }
}
