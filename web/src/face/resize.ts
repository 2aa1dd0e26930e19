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

interface Coeffs {
  ksize: number;
  bounds: Int32Array; // xmin, xmax (count) per output pixel
  kk: Int32Array;
}

function precompute(inSize: number, outSize: number): Coeffs {
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = 2 * filterscale;
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
      const w = bicubic((x + xmin - center + 0.5) * ss);
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

export function resizeBicubic(img: RGBImage, outW: number, outH: number): RGBImage {
  const { width: inW, height: inH, data } = img;
  let cur: RGBImage = img;
  if (outW !== inW) {
    const { ksize, bounds, kk } = precompute(inW, outW);
    const out = new Uint8Array(outW * inH * 3);
    for (let y = 0; y < inH; y++)
      for (let xx = 0; xx < outW; xx++) {
        const xmin = bounds[2 * xx]!, xmax = bounds[2 * xx + 1]!;
        for (let c = 0; c < 3; c++) {
          let ss = 1 << (PRECISION_BITS - 1);
          for (let x = 0; x < xmax; x++) ss += data[3 * (y * inW + x + xmin) + c]! * kk[xx * ksize + x]!;
          out[3 * (y * outW + xx) + c] = clip8(ss);
        }
      }
    cur = { width: outW, height: inH, data: out };
  }
  if (outH !== inH) {
    const { ksize, bounds, kk } = precompute(inH, outH);
    const src = cur.data;
    const out = new Uint8Array(outW * outH * 3);
    for (let yy = 0; yy < outH; yy++) {
      const ymin = bounds[2 * yy]!, ymax = bounds[2 * yy + 1]!;
      for (let x = 0; x < outW; x++)
        for (let c = 0; c < 3; c++) {
          let ss = 1 << (PRECISION_BITS - 1);
          for (let y = 0; y < ymax; y++) ss += src[3 * ((y + ymin) * outW + x) + c]! * kk[yy * ksize + y]!;
          out[3 * (yy * outW + x) + c] = clip8(ss);
        }
    }
    cur = { width: outW, height: outH, data: out };
  }
  return cur === img ? { width: inW, height: inH, data: data.slice() } : cur;
}
