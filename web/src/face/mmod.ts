/**
 * dlib's CNN face detector (MMOD: King, "Max-Margin Object Detection", arXiv:1502.00046) as
 * `dlib.cnn_face_detection_model_v1(...)(img, upsample)` runs it: pyramid_up, dlib's tiled
 * image pyramid (pyramid_down<6>, dlib/image_transforms/image_pyramid.h,
 * input_rgb_image_pyramid in dlib/dnn/input.h), the network (ONNX converted by
 * privface.faces.mmod_onnx, run by onnxruntime-web), then loss_mmod's detection decoding and
 * non-max suppression (dlib/dnn/loss.h). The pipeline uses it where the HOG detector finds no face,
 * as the Python Detector does.
 *
 * Ported by hand (no maintained JavaScript library reproduces dlib's MMOD pipeline).
 */
import * as ort from "onnxruntime-web/wasm";

import type { RGBImage } from "./geometry.js";
import { pyramidUp2 } from "./hog.js";
import type { Rect } from "./shapePredictor.js";

const f = Math.fround;
const lround = (x: number): number => (x < 0 ? -Math.round(-x) : Math.round(x));

/** What privface.faces.mmod_onnx writes next to the .onnx. */
export interface MmodMeta {
  avg_rgb: [number, number, number];
  padding: number;
  outer_padding: number;
  window: [number, number];
  nms: [number, number];
  map: [number, number];
}

export interface MmodDetection {
  rect: Rect;
  score: number;
}

/** [left, top, right, bottom], inclusive integers */
type IRect = [number, number, number, number];

/** impl::compute_tiled_image_pyramid_details for pyramid_down<6>. */
export function tiledPyramidRects(nr: number, nc: number, padding: number, outer: number): { rects: IRect[]; nr: number; nc: number } {
  const rects: IRect[] = [[0, 0, nc - 1, nr - 1]];
  for (;;) {
    nr = Math.floor((5 / 6) * nr);
    nc = Math.floor((5 / 6) * nc);
    if (nr * nc === 0 || nr < 5) break;
    rects.push([0, 0, nc - 1, nr - 1]);
  }
  const H = (r: IRect) => r[3] - r[1] + 1, W = (r: IRect) => r[2] - r[0] + 1;
  let total = 0;
  for (const r of rects) total += H(r) + padding;
  total -= padding * 2;
  let height = 0, prevWidth = 0;
  for (const r of rects) {
    if (W(r) <= W(rects[0]!) - prevWidth - padding && (height - H(rects[0]!)) * 2 >= total - H(rects[0]!)) break;
    height += H(r) + padding;
    prevWidth = W(r);
  }
  height -= padding;
  const width = W(rects[0]!);
  let y = outer, i = 0;
  while (y < height + outer && i < rects.length) {
    const r = rects[i]!;
    rects[i] = [r[0] + outer, r[1] + y, r[2] + outer, r[3] + y];
    y += H(rects[i]!) + padding;
    i++;
  }
  y -= padding;
  while (i < rects.length) {
    const r = rects[i]!;
    const p1x = outer + width - 1, p1y = y - 1;
    const rect: IRect = [p1x - r[2], p1y - r[3], p1x, p1y];
    const r0 = rects[0]!;
    if (Math.max(r0[0], rect[0]) <= Math.min(r0[2], rect[2]) && Math.max(r0[1], rect[1]) <= Math.min(r0[3], rect[3])) break;
    rects[i] = rect;
    y -= H(rect) + padding;
    i++;
  }
  rects.length = i;
  return { rects, nr: height + outer * 2, nc: width + outer * 2 };
}

/** resize_image for float grayscale images (dlib's SIMD bilinear), between sub-rectangles of planes. */
function resizePlane(src: Float32Array, stride: number, s: IRect, d: IRect, dst: Float32Array): void {
  const inW = s[2] - s[0] + 1, inH = s[3] - s[1] + 1, outW = d[2] - d[0] + 1, outH = d[3] - d[1] + 1;
  const at = (r: number, c: number) => src[(s[1] + r) * stride + s[0] + c]!;
  const xScale = (inW - 1) / Math.max(outW - 1, 1), yScale = (inH - 1) / Math.max(outH - 1, 1);
  const xs4 = f(4 * xScale);
  let y = -yScale;
  for (let r = 0; r < outH; r++) {
    y += yScale;
    const top = Math.floor(y), bottom = Math.min(top + 1, inH - 1);
    const tb = y - top, tbF = f(tb), itbF = f(1 - tb);
    const x0 = -4 * xScale;
    const lane = [f(x0), f(x0 + xScale), f(x0 + 2 * xScale), f(x0 + 3 * xScale)];
    const o = (d[1] + r) * stride + d[0];
    let c = 0;
    for (;; c += 4) {
      for (let k = 0; k < 4; k++) lane[k] = f(lane[k]! + xs4);
      if (Math.trunc(lane[3]!) + 1 >= inW) break;
      for (let k = 0; k < 4; k++) {
        const left = Math.trunc(lane[k]!);
        const lr = f(lane[k]! - left), ilr = f(1 - lr);
        dst[o + c + k] = f(f(f(f(f(itbF * ilr) * at(top, left)) + f(f(itbF * lr) * at(top, left + 1))) + f(f(tbF * ilr) * at(bottom, left))) + f(f(tbF * lr) * at(bottom, left + 1)));
      }
    }
    let x = -xScale + c * xScale;
    for (; c < outW; c++) {
      x += xScale;
      const left = Math.floor(x), right = Math.min(left + 1, inW - 1);
      const lr = f(x - left), ilr = f(1 - lr);
      const a = f(f(ilr * at(top, left)) + f(lr * at(top, right)));
      const b = f(f(ilr * at(bottom, left)) + f(lr * at(bottom, right)));
      dst[o + c] = f((1 - tb) * a + tb * b);
    }
  }
}

export class MmodDetector {
  private constructor(private readonly session: ort.InferenceSession, private readonly meta: MmodMeta) {}

  static async load(model: Uint8Array, meta: MmodMeta): Promise<MmodDetector> {
    const ok = (v: unknown) => typeof v === "number" && Number.isFinite(v);
    if (!meta || ![...meta.avg_rgb, meta.padding, meta.outer_padding, ...meta.window, ...meta.nms, ...meta.map].every(ok))
      throw new Error("CNN face detector: bad metadata");
    const session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
    return new MmodDetector(session, meta);
  }

  /** The network's input tensor (the normalised tiled pyramid) and the pyramid's rectangles. */
  tensor(img: RGBImage): { data: Float32Array; nr: number; nc: number; rects: IRect[] } {
    const { rects, nr, nc } = tiledPyramidRects(img.height, img.width, this.meta.padding, this.meta.outer_padding);
    const data = new Float32Array(3 * nr * nc);
    if (rects.length === 0) return { data, nr, nc, rects };
    const r0 = rects[0]!;
    for (let k = 0; k < 3; k++) {
      const plane = data.subarray(k * nr * nc, (k + 1) * nr * nc);
      const avg = f(this.meta.avg_rgb[k]!);
      for (let r = 0; r < img.height; r++)
        for (let c = 0; c < img.width; c++) plane[(r0[1] + r) * nc + r0[0] + c] = f(img.data[3 * (r * img.width + c) + k]! - avg) / 256;
      for (let i = 1; i < rects.length; i++) resizePlane(plane, nc, rects[i - 1]!, rects[i]!, plane);
    }
    return { data, nr, nc, rects };
  }

  /** cnn_face_detection_model_v1(img, upsample): detections in img pixels, best first. */
  async run(img: RGBImage, upsample: number): Promise<MmodDetection[]> {
    let work = img;
    for (let i = 0; i < upsample; i++) work = pyramidUp2(work);
    const { data, nr, nc, rects } = this.tensor(work);
    if (rects.length === 0) return [];
    const out = await this.session.run({ x: new ort.Tensor("float32", data, [1, 3, nr, nc]) });
    const scores = out["scores"];
    if (!scores || scores.dims.length !== 4) throw new Error("CNN face detector: unexpected output");
    const [, , h, w] = scores.dims as number[];
    const s = scores.data as Float32Array;
    const [scale, offset] = this.meta.map;
    const [ww, wh] = this.meta.window;
    const dets: { rect: [number, number, number, number]; score: number }[] = [];
    for (let r = 0; r < h!; r++)
      for (let c = 0; c < w!; c++) {
        const score = s[r * w! + c]!;
        if (!(score > 0)) continue;
        const px = c * scale + offset, py = r * scale + offset;
        // centered_drect, then tiled_pyramid_to_image
        let l = px - (ww - 1) / 2, t = py - (wh - 1) / 2, rr = px + (ww - 1) / 2, b = py + (wh - 1) / 2;
        const cx = lround((l + rr) / 2), cy = lround((t + b) / 2);
        let level = 0, best = Infinity;
        for (let i = 0; i < rects.length; i++) {
          const q = rects[i]!;
          if (cx >= q[0] && cx <= q[2] && cy >= q[1] && cy <= q[3]) { level = i; break; }
          const nx = Math.min(Math.max(cx, q[0]), q[2]), ny = Math.min(Math.max(cy, q[1]), q[3]);
          const dist = Math.hypot(nx - cx, ny - cy);
          if (dist < best) { best = dist; level = i; }
        }
        const o = rects[level]!;
        l -= o[0]; rr -= o[0]; t -= o[1]; b -= o[1];
        for (let i = 0; i < level; i++) { l = l * 1.2 + 0.3; t = t * 1.2 + 0.3; rr = rr * 1.2 + 0.3; b = b * 1.2 + 0.3; }
        dets.push({ rect: [l, t, rr, b], score });
      }
    dets.sort((a, b) => b.score - a.score);
    const [iou, covered] = this.meta.nms;
    const final: { rect: IRect; score: number }[] = [];
    for (const d of dets) {
      const q = d.rect.map(lround) as IRect;
      if (final.some((k) => overlaps(k.rect, q, iou, covered))) continue;
      final.push({ rect: q, score: d.score });
    }
    return final.map(({ rect, score }) => {
      let [l, t, r, b] = rect;
      for (let i = 0; i < upsample; i++) { l = l / 2 - 1.25; t = t / 2 - 0.75; r = r / 2 - 1.25; b = b / 2 - 0.75; }
      return { rect: { left: lround(l), top: lround(t), right: lround(r), bottom: lround(b) }, score };
    });
  }
}

function overlaps(a: IRect, b: IRect, iouThresh: number, coveredThresh: number): boolean {
  const area = (l: number, t: number, r: number, bt: number) => (l > r || t > bt ? 0 : (r - l + 1) * (bt - t + 1));
  const inner = area(Math.max(a[0], b[0]), Math.max(a[1], b[1]), Math.min(a[2], b[2]), Math.min(a[3], b[3]));
  if (inner === 0) return false;
  const outer = area(Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[2], b[2]), Math.max(a[3], b[3]));
  return inner / outer > iouThresh || inner / area(...a) > coveredThresh || inner / area(...b) > coveredThresh;
}
