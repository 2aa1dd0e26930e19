/**
 * dlib's face chip extraction: get_face_chip_details (5-point template, size, padding) and
 * extract_image_chip with bilinear interpolation over a pyramid_down<2> image pyramid
 * (dlib/image_transforms/interpolation.h, image_pyramid.h), as `dlib.get_face_chip` runs it.
 *
 * Ported by hand (no maintained JavaScript library reproduces dlib's chips bit for bit): the
 * rounding and truncation points follow dlib so that chips equal dlib's.
 */
import { type Affine, type RGBImage, similarityTransform } from "./geometry.js";
import type { Point } from "./shapePredictor.js";

/** dlib's mean 5-point face shape (get_face_chip_details). */
const FIVE = [
  0.8595674595992, 0.2134981538014, 0.6460604764104, 0.2289674387677, 0.1205750620789, 0.2137274526848,
  0.3340850613712, 0.2290642403242, 0.4901123135679, 0.6277975316475,
];

/** drectangle: l, t, r, b (width = r − l + 1). */
type DRect = [number, number, number, number];

const area = (r: DRect): number => (r[0] > r[2] || r[1] > r[3] ? 0 : (r[2] - r[0] + 1) * (r[3] - r[1] + 1));
const rectDown = (r: DRect): DRect => [r[0] / 2 - 1.25, r[1] / 2 - 0.75, r[2] / 2 - 1.25, r[3] / 2 - 0.75];

export interface ChipDetails {
  rect: DRect;
  angle: number;
  rows: number;
  cols: number;
}

export function faceChipDetails(parts: Point[], size = 150, padding = 0.25): ChipDetails {
  if (parts.length !== 5) throw new RangeError("face chips need the 5-point landmarks");
  const from: number[] = [];
  const to: number[] = [];
  for (let i = 0; i < 5; i++) {
    from.push(((padding + FIVE[2 * i]!) / (2 * padding + 1)) * size, ((padding + FIVE[2 * i + 1]!) / (2 * padding + 1)) * size);
    to.push(parts[i]![0], parts[i]![1]);
  }
  const t = similarityTransform(from, to);
  const angle = Math.atan2(t[3], t[0]);
  const scale = Math.hypot(t[0], t[3]);
  const cx = t[0] * (size / 2) + t[1] * (size / 2) + t[2];
  const cy = t[3] * (size / 2) + t[4] * (size / 2) + t[5];
  const w = size * scale - 1, h = size * scale - 1; // centered_drect
  return { rect: [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], angle, rows: size, cols: size };
}

function rotate(cx: number, cy: number, x: number, y: number, angle: number): [number, number] {
  const s = Math.sin(angle), c = Math.cos(angle);
  const dx = x - cx, dy = y - cy;
  return [c * dx - s * dy + cx, s * dx + c * dy + cy];
}

/** The sub-image [l, t, r, b] (inclusive, integer) of an RGB image. */
function crop(img: RGBImage, l: number, t: number, r: number, b: number): RGBImage {
  const width = r - l + 1, height = b - t + 1;
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++)
    data.set(img.data.subarray(3 * ((y + t) * img.width + l), 3 * ((y + t) * img.width + r + 1)), 3 * y * width);
  return { width, height, data };
}

/** pyramid_down<2> of an RGB image: 5-tap [1 4 6 4 1] filter in both directions, every other pixel. */
export function pyramidDown2(img: RGBImage): RGBImage {
  const { width: nc, height: nr, data } = img;
  if (nr <= 8 || nc <= 8) return { width: 0, height: 0, data: new Uint8Array(0) };
  const tc = Math.floor((nc - 3) / 2);
  const tmp = new Uint16Array(nr * tc * 3);
  for (let r = 0; r < nr; r++) {
    for (let c = 0, oc = 0; c < tc; c++, oc += 2) {
      const o = 3 * (r * nc + oc);
      for (let k = 0; k < 3; k++)
        tmp[3 * (r * tc + c) + k] = data[o + k]! + 4 * data[o + 3 + k]! + 6 * data[o + 6 + k]! + 4 * data[o + 9 + k]! + data[o + 12 + k]!;
    }
  }
  const dr = Math.floor((nr - 3) / 2);
  const out = new Uint8Array(dr * tc * 3);
  let row = 0;
  for (let r = 2; r < nr - 2; r += 2, row++) {
    for (let c = 0; c < tc; c++)
      for (let k = 0; k < 3; k++) {
        const i = (rr: number) => tmp[3 * (rr * tc + c) + k]!;
        out[3 * (row * tc + c) + k] = ((i(r - 2) + 4 * i(r - 1) + 6 * i(r) + 4 * i(r + 1) + i(r + 2)) & 0xffff) >> 8;
      }
  }
  return { width: tc, height: dr, data: out };
}

/** transform_image with interpolate_bilinear: chip pixel (c, r) samples img at trns(c, r); 0 outside. */
function warpBilinear(img: RGBImage, rows: number, cols: number, t: Affine): RGBImage {
  const out = new Uint8Array(rows * cols * 3);
  const { width, height, data } = img;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const x = t[0] * c + t[1] * r + t[2];
      const y = t[3] * c + t[4] * r + t[5];
      const left = Math.floor(x), top = Math.floor(y);
      if (!(left >= 0 && top >= 0 && left + 1 < width && top + 1 < height)) continue;
      const lr = x - left, tb = y - top;
      const o = 3 * (top * width + left), o2 = o + 3 * width, q = 3 * (r * cols + c);
      for (let k = 0; k < 3; k++) {
        const v = (1 - tb) * ((1 - lr) * data[o + k]! + lr * data[o + 3 + k]!) + tb * ((1 - lr) * data[o2 + k]! + lr * data[o2 + 3 + k]!);
        out[q + k] = Math.trunc(v);
      }
    }
  }
  return { width: cols, height: rows, data: out };
}

/** extract_image_chip(img, details, chip) with interpolate_bilinear. */
export function extractImageChip(img: RGBImage, d: ChipDetails): RGBImage {
  const size = d.rows * d.cols;
  let depth = 0;
  let grow = 2;
  let rr = rectDown(d.rect);
  while (area(rr) > size) {
    rr = rectDown(rr);
    depth++;
    grow = grow * 2 + 2;
  }
  const [l, t, r, b] = d.rect;
  const cx = (l + r) / 2, cy = (t + b) / 2;
  const corners = [rotate(cx, cy, l, t, d.angle), rotate(cx, cy, r, t, d.angle), rotate(cx, cy, l, b, d.angle), rotate(cx, cy, r, b, d.angle)];
  const xs = corners.map((p) => p[0]), ys = corners.map((p) => p[1]);
  // grow_rect(rot_rect, grow).intersect(get_rect(img)), rounded to a rectangle (std::lround)
  const gl = Math.max(Math.min(...xs) - grow, 0), gt = Math.max(Math.min(...ys) - grow, 0);
  const gr = Math.min(Math.max(...xs) + grow, img.width - 1), gb = Math.min(Math.max(...ys) + grow, img.height - 1);
  const bl = lround(gl), bt = lround(gt), br = lround(gr), bb = lround(gb);
  if (bl > br || bt > bb) return { width: d.cols, height: d.rows, data: new Uint8Array(size * 3) };
  let src = crop(img, bl, bt, br, bb);
  const levels: RGBImage[] = [];
  for (let i = 0; i < depth; i++) levels.push((src = pyramidDown2(src)));
  let level = -1;
  let rect: DRect = [l - bl, t - bt, r - bl, b - bt];
  while (area(rectDown(rect)) > size) {
    level++;
    rect = rectDown(rect);
  }
  const rcx = (rect[0] + rect[2]) / 2, rcy = (rect[1] + rect[3]) / 2;
  const [x0, y0] = rotate(rcx, rcy, rect[0], rect[1], d.angle);
  const [x1, y1] = rotate(rcx, rcy, rect[2], rect[1], d.angle);
  const [x2, y2] = rotate(rcx, rcy, rect[0], rect[3], d.angle);
  // find_affine_transform from the chip's tl, tr, bl corners to those three points
  const trns: Affine = [(x1 - x0) / (d.cols - 1), (x2 - x0) / (d.rows - 1), x0, (y1 - y0) / (d.cols - 1), (y2 - y0) / (d.rows - 1), y0];
  const base = level === -1 ? crop(img, bl, bt, br, bb) : levels[level]!;
  return warpBilinear(base, d.rows, d.cols, trns);
}

/** std::lround: halves away from zero. */
function lround(x: number): number {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}

/** dlib.get_face_chip(img, shape, size, padding). */
export function faceChip(img: RGBImage, parts: Point[], size = 150, padding = 0.25): RGBImage {
  return extractImageChip(img, faceChipDetails(parts, size, padding));
}
