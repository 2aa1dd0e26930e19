/**
 * dlib's frontal face detector: object_detector<scan_fhog_pyramid<pyramid_down<6>>> with its five
 * fHOG filters (a HOG sliding-window detector in the manner of Dalal & Triggs, CVPR 2005, on
 * Felzenszwalb's features; dlib/image_processing/scan_fhog_pyramid.h, object_detector.h), run as
 * dlib's Python `fhog_object_detector.run(img, upsample, 0)` runs it. The weights are read from
 * the detector's own serialization (`dlib.get_frontal_face_detector().save(path)`, produced by
 * the Python side at run time).
 *
 * Ported by hand (no maintained JavaScript library implements dlib's detector): image pyramid
 * and resizing follow dlib's float32 SIMD code so the detections equal dlib's boxes.
 */
import { DlibReader } from "./dlibio.js";
import { type FHOG, extractFhog } from "./fhog.js";
import type { RGBImage } from "./geometry.js";
import type { Rect } from "./shapePredictor.js";

const f = Math.fround;

export interface Detection {
  rect: Rect;
  score: number;
  weightIndex: number;
}

/** dlib's resize_image(in, out, interpolate_bilinear) for RGB images (the SIMD float32 version). */
export function resizeBilinear(img: RGBImage, outW: number, outH: number): RGBImage {
  const { width: inW, height: inH, data } = img;
  const out = new Uint8Array(outW * outH * 3);
  if (outW === 0 || outH === 0 || inW === 0 || inH === 0) return { width: outW, height: outH, data: out };
  const xScale = (inW - 1) / Math.max(outW - 1, 1);
  const yScale = (inH - 1) / Math.max(outH - 1, 1);
  const xs4 = f(4 * xScale);
  let y = -yScale;
  for (let r = 0; r < outH; r++) {
    y += yScale;
    const top = Math.floor(y);
    const bottom = Math.min(top + 1, inH - 1);
    const tb = y - top;
    const tbF = f(tb), itbF = f(1 - tb);
    const x0 = -4 * xScale;
    const lane = [f(x0), f(x0 + xScale), f(x0 + 2 * xScale), f(x0 + 3 * xScale)];
    const T = 3 * top * inW, B = 3 * bottom * inW;
    let c = 0;
    for (;; c += 4) {
      for (let k = 0; k < 4; k++) lane[k] = f(lane[k]! + xs4);
      if (Math.trunc(lane[3]!) + 1 >= inW) break;
      for (let k = 0; k < 4; k++) {
        const xv = lane[k]!;
        const left = Math.trunc(xv);
        const lr = f(xv - left), ilr = f(1 - lr);
        const tlf = f(itbF * ilr), trf = f(itbF * lr), blf = f(tbF * ilr), brf = f(tbF * lr);
        const o = 3 * (r * outW + c + k);
        for (let ch = 0; ch < 3; ch++) {
          const v = f(f(f(f(tlf * data[T + 3 * left + ch]!) + f(trf * data[T + 3 * (left + 1) + ch]!)) + f(blf * data[B + 3 * left + ch]!)) + f(brf * data[B + 3 * (left + 1) + ch]!));
          out[o + ch] = Math.trunc(v) & 0xff;
        }
      }
    }
    let x = -xScale + c * xScale;
    for (; c < outW; c++) {
      x += xScale;
      const left = Math.floor(x);
      const right = Math.min(left + 1, inW - 1);
      const lr = x - left;
      const o = 3 * (r * outW + c);
      for (let ch = 0; ch < 3; ch++) {
        const v = (1 - tb) * ((1 - lr) * data[T + 3 * left + ch]! + lr * data[T + 3 * right + ch]!) +
          tb * ((1 - lr) * data[B + 3 * left + ch]! + lr * data[B + 3 * right + ch]!);
        out[o + ch] = Math.trunc(v);
      }
    }
  }
  return { width: outW, height: outH, data: out };
}

/** pyramid_up(img) with pyramid_down<2>: the image resized to (2·rows+1)×(2·cols+2). */
export function pyramidUp2(img: RGBImage): RGBImage {
  return resizeBilinear(img, 2 * img.width + 2, 2 * img.height + 1);
}

/** pyramid_down<6> of an image: 5/6 of its size, bilinear. */
function pyramidDown6(img: RGBImage): RGBImage {
  return resizeBilinear(img, Math.floor((5 * img.width) / 6), Math.floor((5 * img.height) / 6));
}

const lround = (x: number): number => (x < 0 ? -Math.round(-x) : Math.round(x));
const tdiv = (a: number, b: number): number => Math.trunc(a / b);

interface Filter {
  /** per fHOG plane, the rank-1 terms of its SVD (dlib's build_fhog_filterbank): row (fw) and column (fh) filters */
  terms: { plane: number; row: Float64Array; col: Float64Array }[];
  thresh: number;
}

/** Eigen-decomposition of a symmetric n×n matrix (cyclic Jacobi): eigenvalues and eigenvectors as columns. */
function jacobiEigen(a: Float64Array, n: number): { values: Float64Array; vectors: Float64Array } {
  const A = a.slice();
  const V = new Float64Array(n * n);
  for (let i = 0; i < n; i++) V[i * n + i] = 1;
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let p = 0; p < n; p++) for (let q = p + 1; q < n; q++) off += A[p * n + q]! ** 2;
    if (off < 1e-30) break;
    for (let p = 0; p < n; p++)
      for (let q = p + 1; q < n; q++) {
        const apq = A[p * n + q]!;
        if (Math.abs(apq) < 1e-300) continue;
        const theta = (A[q * n + q]! - A[p * n + p]!) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1), s = t * c;
        for (let k = 0; k < n; k++) {
          const akp = A[k * n + p]!, akq = A[k * n + q]!;
          A[k * n + p] = c * akp - s * akq;
          A[k * n + q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = A[p * n + k]!, aqk = A[q * n + k]!;
          A[p * n + k] = c * apk - s * aqk;
          A[q * n + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = V[k * n + p]!, vkq = V[k * n + q]!;
          V[k * n + p] = c * vkp - s * vkq;
          V[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) values[i] = A[i * n + i]!;
  return { values, vectors: V };
}

/** The rank-1 terms of an fh×fw filter kept by dlib (singular values above max(1e-4, 0.001·max)). */
function separate(w: Float64Array, fh: number, fw: number): { row: Float64Array; col: Float64Array }[] {
  const ata = new Float64Array(fw * fw);
  for (let i = 0; i < fw; i++)
    for (let j = 0; j < fw; j++) {
      let s = 0;
      for (let m = 0; m < fh; m++) s += w[m * fw + i]! * w[m * fw + j]!;
      ata[i * fw + j] = s;
    }
  const { values, vectors } = jacobiEigen(ata, fw);
  const sv = Array.from(values, (v) => Math.sqrt(Math.max(v, 0)));
  const thresh = Math.max(1e-4, Math.max(...sv) * 0.001);
  const out: { row: Float64Array; col: Float64Array }[] = [];
  for (let j = 0; j < fw; j++) {
    const s = sv[j]!;
    if (s <= thresh) continue;
    const row = new Float64Array(fw), col = new Float64Array(fh);
    const r = Math.sqrt(s);
    for (let n = 0; n < fw; n++) row[n] = vectors[n * fw + j]! * r;
    for (let m = 0; m < fh; m++) {
      let u = 0;
      for (let n = 0; n < fw; n++) u += w[m * fw + n]! * vectors[n * fw + j]!;
      col[m] = (u / s) * r;
    }
    out.push({ row, col });
  }
  return out;
}

export class HogDetector {
  private constructor(
    private readonly cellSize: number,
    private readonly padding: number,
    private readonly windowWidth: number,
    private readonly windowHeight: number,
    private readonly maxLevels: number,
    private readonly minLayerWidth: number,
    private readonly minLayerHeight: number,
    private readonly iouThresh: number,
    private readonly coveredThresh: number,
    private readonly filters: Filter[],
    readonly fw: number,
    readonly fh: number,
  ) {
    for (let p = 0; p < 31; p++) {
      const terms: { wi: number; col: Float64Array }[] = [];
      const rows: number[] = [];
      filters.forEach((flt, wi) => {
        for (const t of flt.terms) if (t.plane === p) { terms.push({ wi, col: t.col }); rows.push(...t.row); }
      });
      this.byPlane.push(terms);
      this.rowsByPlane.push(Float64Array.from(rows));
    }
  }

  private readonly byPlane: { wi: number; col: Float64Array }[][] = [];
  private readonly rowsByPlane: Float64Array[] = [];

  /** Parses dlib's serialization of object_detector<scan_fhog_pyramid<pyramid_down<6>>>. */
  static parse(bytes: Uint8Array): HogDetector {
    const r = new DlibReader(bytes);
    if (r.int() !== 2) r.fail("unexpected object_detector version");
    if (r.int() !== 1) r.fail("unexpected scan_fhog_pyramid version");
    r.uint(); // feats: dlib::array max_size
    if (r.uint() !== 0) r.fail("serialized detector holds feature images");
    const cellSize = r.int(), padding = r.uint(), ww = r.uint(), wh = r.uint();
    const maxLevels = r.uint(), minW = r.uint(), minH = r.uint();
    r.float(); // nuclear_norm_regularization_strength
    const dims = r.int();
    const iou = r.float(), covered = r.float();
    if (!(cellSize > 1 && cellSize < 64 && ww > 0 && wh > 0 && ww < 4096 && wh < 4096)) r.fail("bad scanner configuration");
    // compute_fhog_window_size
    const tl = [tdiv(-tdiv(ww, 2) - 1, cellSize) - 1, tdiv(-tdiv(wh, 2) - 1, cellSize) - 1];
    const br = [tdiv(-tdiv(ww, 2) + ww - 1 - 1, cellSize) - 1, tdiv(-tdiv(wh, 2) + wh - 1 - 1, cellSize) - 1];
    const fw = br[0]! - tl[0]! + 1 + 2 * padding, fh = br[1]! - tl[1]! + 1 + 2 * padding;
    if (dims !== 31 * fw * fh) r.fail(`detector has ${dims} dimensions, expected ${31 * fw * fh}`);
    const n = r.size(64);
    const filters: Filter[] = [];
    for (let i = 0; i < n; i++) {
      const m = r.matrix();
      if (m.nc !== 1 || m.nr !== dims + 1) r.fail("weight vector has the wrong length");
      const terms: Filter["terms"] = [];
      for (let p = 0; p < 31; p++)
        for (const t of separate(m.data.slice(p * fw * fh, (p + 1) * fw * fh), fh, fw)) terms.push({ plane: p, ...t });
      filters.push({ terms, thresh: m.data[dims]! });
    }
    return new HogDetector(cellSize, padding, ww, wh, maxLevels, minW, minH, iou, covered, filters, fw, fh);
  }

  /** fhog_object_detector.run(img, upsample, 0): detections in img pixels, best first. */
  run(img: RGBImage, upsample: number): Detection[] {
    let work = img;
    for (let i = 0; i < upsample; i++) work = pyramidUp2(work);
    const dets = this.detect(work);
    if (upsample > 0)
      for (const d of dets) {
        let { left, top, right, bottom } = d.rect;
        let l = left, t = top, rr = right, b = bottom;
        for (let i = 0; i < upsample; i++) {
          l = l / 2 - 1.25; t = t / 2 - 0.75; rr = rr / 2 - 1.25; b = b / 2 - 0.75;
        }
        d.rect = { left: lround(l), top: lround(t), right: lround(rr), bottom: lround(b) };
      }
    return dets;
  }

  private pyramid(img: RGBImage): FHOG[] {
    let levels = 0;
    let rc = [0, 0, img.width - 1, img.height - 1];
    do {
      rc = rc.map((v) => lround((v - 0.3) * (5 / 6)));
      levels++;
    } while (rc[2]! - rc[0]! + 1 >= this.minLayerWidth && rc[3]! - rc[1]! + 1 >= this.minLayerHeight && levels < this.maxLevels);
    const feats = [extractFhog(img, this.cellSize, this.fh, this.fw)];
    let cur = img;
    for (let l = 1; l < levels; l++) {
      cur = pyramidDown6(cur);
      feats.push(extractFhog(cur, this.cellSize, this.fh, this.fw));
    }
    return feats;
  }

  /** object_detector::operator()(img, dets, 0). */
  detect(img: RGBImage): Detection[] {
    const feats = this.pyramid(img);
    const { fw, fh, cellSize } = this;
    const boxW = fw - 2 * this.padding, boxH = fh - 2 * this.padding;
    const all: Detection[] = [];
    let scratch = new Float64Array(0);
    for (let l = 0; l < feats.length; l++) {
      const F = feats[l]!;
      if (F.rows === 0) continue;
      const firstRow = Math.floor(fh / 2), firstCol = Math.floor(fw / 2);
      const lastRow = F.rows - Math.floor((fh - 1) / 2), lastCol = F.cols - Math.floor((fw - 1) / 2);
      if (lastRow <= firstRow || lastCol <= firstCol) continue;
      const outW = lastCol - firstCol;
      const sals = this.filters.map(() => new Float64Array((lastRow - firstRow) * outW));
      for (let p = 0; p < 31; p++) {
        const terms = this.byPlane[p]!;
        const K = terms.length;
        if (K === 0) continue;
        const plane = F.planes[p]!;
        const rowsK = this.rowsByPlane[p]!;
        const scr = scratch.length >= K * F.rows * outW ? scratch : (scratch = new Float64Array(K * F.rows * outW));
        const stride = F.rows * outW;
        // float_spatially_filter_image_separable for each term: its row filter over every row...
        for (let k = 0; k < K; k++) {
          const out = scr.subarray(k * stride, (k + 1) * stride);
          if (fw === 10) rowPass10(plane, F.rows, F.cols, outW, rowsK, k * fw, out);
          else rowPass(plane, F.rows, F.cols, outW, rowsK, k * fw, fw, out);
        }
        // ...then its column filter, added to its detector's saliency
        for (let k = 0; k < K; k++) {
          const { wi, col } = terms[k]!;
          const src = scr.subarray(k * stride, (k + 1) * stride);
          if (fh === 10) colPass10(src, lastRow - firstRow, outW, col, sals[wi]!);
          else colPass(src, lastRow - firstRow, outW, col, fh, sals[wi]!);
        }
      }
      for (let wi = 0; wi < this.filters.length; wi++) {
        const filt = this.filters[wi]!;
        const sal = sals[wi]!;
        for (let r = firstRow; r < lastRow; r++)
          for (let c = firstCol; c < lastCol; c++) {
            const s = f(sal[(r - firstRow) * outW + c - firstCol]!);
            if (s >= filt.thresh) all.push({ rect: this.toImage(c, r, boxW, boxH, l), score: s - filt.thresh, weightIndex: wi });
          }
      }
    }
    all.sort((a, b) => b.score - a.score);
    const final: Detection[] = [];
    for (const d of all) if (!final.some((k) => this.overlaps(k.rect, d.rect))) final.push(d);
    return final;
  }

  private toImage(c: number, r: number, boxW: number, boxH: number, level: number): Rect {
    // centered_rect(point(c, r), boxW, boxH), then fhog_to_image, then rect_up(level)
    const l0 = c - Math.floor(boxW / 2), t0 = r - Math.floor(boxH / 2);
    const corner = (x: number, y: number): [number, number] => {
      const cs = this.cellSize;
      const px = (x + 1 - Math.trunc((this.fw - 1) / 2)) * cs + 1;
      const py = (y + 1 - Math.trunc((this.fh - 1) / 2)) * cs + 1;
      const h = Math.trunc(cs / 2);
      return [px + (px >= 0 ? h : -h), py + (py >= 0 ? h : -h)];
    };
    let [a, b] = corner(l0, t0);
    let [cc, d] = corner(l0 + boxW - 1, t0 + boxH - 1);
    for (let i = 0; i < level; i++) {
      a = a * 1.2 + 0.3; b = b * 1.2 + 0.3; cc = cc * 1.2 + 0.3; d = d * 1.2 + 0.3;
    }
    return { left: lround(a), top: lround(b), right: lround(cc), bottom: lround(d) };
  }

  private overlaps(a: Rect, b: Rect): boolean {
    const area = (l: number, t: number, r: number, bt: number) => (l > r || t > bt ? 0 : (r - l + 1) * (bt - t + 1));
    const inner = area(Math.max(a.left, b.left), Math.max(a.top, b.top), Math.min(a.right, b.right), Math.min(a.bottom, b.bottom));
    if (inner === 0) return false;
    const outer = area(Math.min(a.left, b.left), Math.min(a.top, b.top), Math.max(a.right, b.right), Math.max(a.bottom, b.bottom));
    const aa = area(a.left, a.top, a.right, a.bottom), ba = area(b.left, b.top, b.right, b.bottom);
    return inner / outer > this.iouThresh || inner / aa > this.coveredThresh || inner / ba > this.coveredThresh;
  }
}

function rowPass(plane: Float32Array, rows: number, cols: number, outW: number, w: Float64Array, o: number, fw: number, out: Float64Array): void {
  for (let r = 0; r < rows; r++) {
    const b = r * cols, so = r * outW;
    for (let c = 0; c < outW; c++) {
      let s = 0;
      for (let n = 0; n < fw; n++) s += plane[b + c + n]! * w[o + n]!;
      out[so + c] = s;
    }
  }
}

/** rowPass with the 10 taps of dlib's frontal detector held in locals. */
function rowPass10(plane: Float32Array, rows: number, cols: number, outW: number, w: Float64Array, o: number, out: Float64Array): void {
  const w0 = w[o]!, w1 = w[o + 1]!, w2 = w[o + 2]!, w3 = w[o + 3]!, w4 = w[o + 4]!;
  const w5 = w[o + 5]!, w6 = w[o + 6]!, w7 = w[o + 7]!, w8 = w[o + 8]!, w9 = w[o + 9]!;
  for (let r = 0; r < rows; r++) {
    const b = r * cols, so = r * outW;
    for (let c = 0; c < outW; c++) {
      const i = b + c;
      out[so + c] = plane[i]! * w0 + plane[i + 1]! * w1 + plane[i + 2]! * w2 + plane[i + 3]! * w3 + plane[i + 4]! * w4 +
        plane[i + 5]! * w5 + plane[i + 6]! * w6 + plane[i + 7]! * w7 + plane[i + 8]! * w8 + plane[i + 9]! * w9;
    }
  }
}

function colPass(src: Float64Array, outRows: number, outW: number, col: Float64Array, fh: number, sal: Float64Array): void {
  for (let r = 0; r < outRows; r++) {
    const dst = r * outW;
    for (let m = 0; m < fh; m++) {
      const cm = col[m]!, so = (r + m) * outW;
      for (let c = 0; c < outW; c++) sal[dst + c] = sal[dst + c]! + src[so + c]! * cm;
    }
  }
}

function colPass10(src: Float64Array, outRows: number, outW: number, col: Float64Array, sal: Float64Array): void {
  const c0 = col[0]!, c1 = col[1]!, c2 = col[2]!, c3 = col[3]!, c4 = col[4]!;
  const c5 = col[5]!, c6 = col[6]!, c7 = col[7]!, c8 = col[8]!, c9 = col[9]!;
  for (let r = 0; r < outRows; r++) {
    const dst = r * outW;
    for (let c = 0; c < outW; c++) {
      const i = r * outW + c;
      sal[dst + c] = sal[dst + c]! + (src[i]! * c0 + src[i + outW]! * c1 + src[i + 2 * outW]! * c2 + src[i + 3 * outW]! * c3 +
        src[i + 4 * outW]! * c4 + src[i + 5 * outW]! * c5 + src[i + 6 * outW]! * c6 + src[i + 7 * outW]! * c7 +
        src[i + 8 * outW]! * c8 + src[i + 9 * outW]! * c9);
    }
  }
}
