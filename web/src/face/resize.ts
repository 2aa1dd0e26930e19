/**
 * Pillow's `Image.resize(size, Image.BICUBIC)` for 8-bit RGB images (libImaging/Resample.c):
 * separable convolution with the Keys cubic (a = −0.5), support scaled when downsampling,
 * coefficients in 22-bit fixed point, horizontal pass first. The Python side upscales small
 * images this way before detection, so the browser must produce the same pixels.
 *
 * Ported by hand: no maintained JavaScript library reproduces Pillow's resampling exactly.
 */
import type { RGBImage } from "./geometry.js";

const PRECISION_BITS = 32 - 8 - 2;

function bicubic(x: number): number {
  const a = -0.5;
  if (x < 0) x = -x;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

/** Pillow's BOX filter (support 1/2): `Image.resize(size, Image.BOX)`, as onnx_backend.align shrinks a large face. */
function box(x: number): number {
  return x > -0.5 && x <= 0.5 ? 1 : 0;
}

interface Filter {
  fn: (x: number) => number;
  support: number;
}

const BICUBIC: Filter = { fn: bicubic, support: 2 };
const BOX: Filter = { fn: box, support: 0.5 };

interface Coeffs {
  ksize: number;
  bounds: Int32Array; // xmin, xmax (count) per output pixel
  kk: Int32Array;
}

function precompute(inSize: number, outSize: number, filter: Filter = BICUBIC): Coeffs {
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = filter.support * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const kk = new Int32Array(outSize * ksize);
  const k = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1 / filterscale;
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      const w = filter.fn((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (let x = 0; x < xmax; x++) {
      const v = ww !== 0 ? k[x]! / ww : k[x]!;
      kk[xx * ksize + x] = v < 0 ? Math.trunc(-0.5 + v * (1 << PRECISION_BITS)) : Math.trunc(0.5 + v * (1 << PRECISION_BITS));
    }
    bounds[2 * xx] = xmin;
    bounds[2 * xx + 1] = xmax;
  }
  return { ksize, bounds, kk };
}

function clip8(v: number): number {
  const x = Math.floor(v / (1 << PRECISION_BITS)); // arithmetic shift of a value that may exceed 32 bits
  return x < 0 ? 0 : x > 255 ? 255 : x;
}

/** The horizontal pass over `rows` rows of `src` (`channels` bytes per pixel, RGB or RGBA) into `out` (RGB, outW
 * wide) from its row `outRow`. */
function horizontal(src: ArrayLike<number>, channels: number, inW: number, rows: number, c: Coeffs, outW: number,
  out: Uint8Array, outRow: number): void {
  const { ksize, bounds, kk } = c;
  for (let y = 0; y < rows; y++)
    for (let xx = 0; xx < outW; xx++) {
      const xmin = bounds[2 * xx]!, xmax = bounds[2 * xx + 1]!;
      for (let ch = 0; ch < 3; ch++) {
        let ss = 1 << (PRECISION_BITS - 1);
        for (let x = 0; x < xmax; x++) ss += src[channels * (y * inW + x + xmin) + ch]! * kk[xx * ksize + x]!;
        out[3 * ((outRow + y) * outW + xx) + ch] = clip8(ss);
      }
    }
}

function vertical(cur: RGBImage, outH: number, filter: Filter = BICUBIC): RGBImage {
  const { width: outW, height: inH, data: src } = cur;
  const { ksize, bounds, kk } = precompute(inH, outH, filter);
  const out = new Uint8Array(outW * outH * 3);
  for (let yy = 0; yy < outH; yy++) {
    const ymin = bounds[2 * yy]!, ymax = bounds[2 * yy + 1]!;
    for (let x = 0; x < outW; x++)
      for (let ch = 0; ch < 3; ch++) {
        let ss = 1 << (PRECISION_BITS - 1);
        for (let y = 0; y < ymax; y++) ss += src[3 * ((y + ymin) * outW + x) + ch]! * kk[yy * ksize + y]!;
        out[3 * (yy * outW + x) + ch] = clip8(ss);
      }
  }
  return { width: outW, height: outH, data: out };
}

function resize(img: RGBImage, outW: number, outH: number, filter: Filter): RGBImage {
  const { width: inW, height: inH, data } = img;
  let cur: RGBImage = img;
  if (outW !== inW) {
    const out = new Uint8Array(outW * inH * 3);
    horizontal(data, 3, inW, inH, precompute(inW, outW, filter), outW, out, 0);
    cur = { width: outW, height: inH, data: out };
  }
  if (outH !== inH) cur = vertical(cur, outH, filter);
  return cur === img ? { width: inW, height: inH, data: data.slice() } : cur;
}

export function resizeBicubic(img: RGBImage, outW: number, outH: number): RGBImage {
  return resize(img, outW, outH, BICUBIC);
}

/** Pillow's `Image.resize(size, Image.BOX)` (same separable fixed-point resampling, box filter). */
export function resizeBox(img: RGBImage, outW: number, outH: number): RGBImage {
  return resize(img, outW, outH, BOX);
}

/**
 * `resizeBicubic` of an image read in horizontal strips (`strip(y0, rows)`: those rows, RGBA as a canvas's
 * getImageData gives them, or RGB with channels = 3), so that a 50-megapixel photo is never held whole: the horizontal pass runs strip by
 * strip, the vertical pass on its (outW-wide) result. `progress(done)` is called after each strip (0–1).
 */
export function resizeBicubicStrips(inW: number, inH: number, outW: number, outH: number,
  strip: (y0: number, rows: number) => ArrayLike<number>, rowsPerStrip = 256,
  progress?: (done: number) => void, channels: 3 | 4 = 4): RGBImage {
  return resizeStrips(inW, inH, outW, outH, strip, rowsPerStrip, progress, channels, BICUBIC);
}

/** `resizeBox` of an image read in strips (as `resizeBicubicStrips`). */
export function resizeBoxStrips(inW: number, inH: number, outW: number, outH: number,
  strip: (y0: number, rows: number) => ArrayLike<number>, rowsPerStrip = 256, channels: 3 | 4 = 4): RGBImage {
  return resizeStrips(inW, inH, outW, outH, strip, rowsPerStrip, undefined, channels, BOX);
}

function resizeStrips(inW: number, inH: number, outW: number, outH: number,
  strip: (y0: number, rows: number) => ArrayLike<number>, rowsPerStrip: number,
  progress: ((done: number) => void) | undefined, channels: 3 | 4, filter: Filter): RGBImage {
  const c = outW !== inW ? precompute(inW, outW, filter) : null;
  const w = c ? outW : inW;
  const out = new Uint8Array(w * inH * 3);
  for (let y0 = 0; y0 < inH; y0 += rowsPerStrip) {
    const rows = Math.min(rowsPerStrip, inH - y0);
    const src = strip(y0, rows);
    if (c) horizontal(src, channels, inW, rows, c, outW, out, y0);
    else for (let i = 0, j = 3 * y0 * inW; i < rows * inW * channels; i += channels, j += 3) {
      out[j] = src[i]!;
      out[j + 1] = src[i + 1]!;
      out[j + 2] = src[i + 2]!;
    }
    progress?.((y0 + rows) / inH);
  }
  const cur: RGBImage = { width: w, height: inH, data: out };
  return outH !== inH ? vertical(cur, outH, filter) : cur;
}
