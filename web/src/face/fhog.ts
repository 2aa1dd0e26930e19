/**
 * Felzenszwalb's HOG features (Felzenszwalb, Girshick, McAllester, Ramanan, "Object Detection
 * with Discriminatively Trained Part Based Models", PAMI 32(9), 2010, §6) exactly as dlib's
 * extract_fhog_features computes them for RGB images (dlib/image_transforms/fhog.h): 31 planes
 * (18 signed + 9 unsigned orientations, 4 texture energies), cell size 8, the gradient of the
 * colour channel with the largest magnitude, float32 arithmetic in dlib's order of operations.
 *
 * Ported by hand (no maintained JavaScript library reproduces dlib's fHOG).
 */
import type { RGBImage } from "./geometry.js";

const f = Math.fround;
const DIRS: [number, number][] = [
  [1.0, 0.0], [0.9397, 0.342], [0.766, 0.6428], [0.5, 0.866], [0.1736, 0.9848],
  [-0.1736, 0.9848], [-0.5, 0.866], [-0.766, 0.6428], [-0.9397, 0.342],
].map(([a, b]) => [f(a!), f(b!)] as [number, number]);
const DX = Float64Array.from(DIRS, (d) => d[0]);
const DY = Float64Array.from(DIRS, (d) => d[1]);

let ORIENT: Uint8Array | null = null;

/** The orientation bin (0–17) dlib snaps an integer gradient (gx, gy) ∈ [−255, 255]² to, for all
 * gradients at once: the float32 dot products with the 9 unit directions, computed once. */
export function orientations(): Uint8Array {
  if (ORIENT) return ORIENT;
  const t = new Uint8Array(511 * 511);
  for (let gy = -255; gy <= 255; gy++)
    for (let gx = -255; gx <= 255; gx++) {
      let best = 0, bestO = 0;
      for (let o = 0; o < 9; o++) {
        const dot = f(f(DX[o]! * gx) + f(DY[o]! * gy));
        if (dot > best) { best = dot; bestO = o; }
        else if (-dot > best) { best = -dot; bestO = o + 9; }
      }
      t[(gy + 255) * 511 + gx + 255] = bestO;
    }
  return (ORIENT = t);
}

/** 31 feature planes, each rows×cols float32 (row-major), zero outside the HOG cells. */
export interface FHOG {
  rows: number;
  cols: number;
  planes: Float32Array[];
}

/**
 * extract_fhog_features(img, hog, cellSize, filterRowsPadding, filterColsPadding).
 * simdTail: the pixel column from which dlib's scalar (non-SIMD) loop takes over in each row.
 */
export function extractFhog(img: RGBImage, cellSize = 8, rowsPad = 1, colsPad = 1): FHOG {
  const { width: nc, height: nr, data } = img;
  const cellsNr = Math.trunc(f(f(nr) / f(cellSize)) + 0.5);
  const cellsNc = Math.trunc(f(f(nc) / f(cellSize)) + 0.5);
  const hogNr = Math.max(cellsNr - 2, 0), hogNc = Math.max(cellsNc - 2, 0);
  const empty = (): FHOG => ({ rows: 0, cols: 0, planes: Array.from({ length: 31 }, () => new Float32Array(0)) });
  if (cellsNr === 0 || cellsNc === 0 || hogNr === 0 || hogNc === 0) return empty();
  const hc = cellsNc + 2;
  const orient = orientations();
  const hist = new Float32Array((cellsNr + 2) * hc * 18);
  const visNr = Math.min(cellsNr * cellSize, nr) - 1;
  const visNc = Math.min(cellsNc * cellSize, nc) - 1;
  const simdEnd = (() => { let x = 1; while (x < visNc - 7) x += 8; return x; })();
  for (let y = 1; y < visNr; y++) {
    const yp = f((y + 0.5) / cellSize - 0.5);
    const iyp = Math.floor(yp);
    const vy0 = f(yp - iyp), vy1 = f(1 - vy0);
    const rowU = 3 * ((y - 1) * nc), rowC = 3 * (y * nc), rowD = 3 * ((y + 1) * nc);
    for (let x = 1; x < visNc; x++) {
      // the gradient of the channel with the largest magnitude; ties: the SIMD loop keeps the later
      // channel, the scalar loop (columns from simdEnd on) the earlier one
      const simd = x < simdEnd;
      const iL = rowC + 3 * (x - 1), iR = rowC + 3 * (x + 1), iU = rowU + 3 * x, iD = rowD + 3 * x;
      let gx = data[iR]! - data[iL]!, gy = data[iD]! - data[iU]!;
      let len = gx * gx + gy * gy;
      const gx1 = data[iR + 1]! - data[iL + 1]!, gy1 = data[iD + 1]! - data[iU + 1]!;
      const l1 = gx1 * gx1 + gy1 * gy1;
      if (simd ? l1 >= len : l1 > len) { gx = gx1; gy = gy1; len = l1; }
      const gx2 = data[iR + 2]! - data[iL + 2]!, gy2 = data[iD + 2]! - data[iU + 2]!;
      const l2 = gx2 * gx2 + gy2 * gy2;
      if (simd ? l2 >= len : l2 > len) { gx = gx2; gy = gy2; len = l2; }
      const bestO = orient[(gy + 255) * 511 + gx + 255]!;
      const v = f(Math.sqrt(len));
      const xp = f((x + 0.5) / cellSize - 0.5);
      const ixp = Math.floor(xp);
      const vx0 = f(xp - ixp), vx1 = f(1 - vx0);
      let v11, v01, v10, v00;
      if (simd) {
        const a1 = f(vx1 * v), a0 = f(vx0 * v);
        v11 = f(vy1 * a1); v01 = f(vy0 * a1); v10 = f(vy1 * a0); v00 = f(vy0 * a0);
      } else {
        v11 = f(f(vy1 * vx1) * v); v01 = f(f(vy0 * vx1) * v); v10 = f(f(vy1 * vx0) * v); v00 = f(f(vy0 * vx0) * v);
      }
      const b = ((iyp + 1) * hc + ixp + 1) * 18 + bestO;
      const hc18 = hc * 18;
      hist[b] = hist[b]! + v11;
      hist[b + hc18] = hist[b + hc18]! + v01;
      hist[b + 18] = hist[b + 18]! + v10;
      hist[b + hc18 + 18] = hist[b + hc18 + 18]! + v00;
    }
  }
  const norm = new Float32Array(cellsNr * cellsNc);
  for (let r = 0; r < cellsNr; r++)
    for (let c = 0; c < cellsNc; c++) {
      const h = ((r + 1) * hc + c + 1) * 18;
      let s = 0;
      for (let o = 0; o < 9; o++) {
        const t = f(hist[h + o]! + hist[h + o + 9]!);
        s = f(s + f(t * t));
      }
      norm[r * cellsNc + c] = s;
    }
  const rows = hogNr + rowsPad - 1, cols = hogNc + colsPad - 1;
  const planes = Array.from({ length: 31 }, () => new Float32Array(rows * cols));
  const pr = Math.trunc((rowsPad - 1) / 2), pc = Math.trunc((colsPad - 1) / 2);
  const eps = f(0.0001), c02 = f(0.2), c01 = f(0.1), c4714 = f(2 * 0.2357);
  const nn = new Float64Array(4), n = new Float64Array(4), t = new Float64Array(4);
  const h0 = new Float64Array(4), h1 = new Float64Array(4), h2 = new Float64Array(4);
  const W = cellsNc;
  for (let y = 0; y < hogNr; y++) {
    for (let x = 0; x < hogNc; x++) {
      // the four 2×2-cell blocks around the cell (dlib's z1..z4 lanes)
      const a = y * W + x;
      const n00 = norm[a]!, n01 = norm[a + 1]!, n02 = norm[a + 2]!;
      const n10 = norm[a + W]!, n11 = norm[a + W + 1]!, n12 = norm[a + W + 2]!;
      const n20 = norm[a + 2 * W]!, n21 = norm[a + 2 * W + 1]!, n22 = norm[a + 2 * W + 2]!;
      nn[0] = f(c02 * f(Math.sqrt(f(f(f(f(n11 + n12) + n21) + n22) + eps))));
      nn[1] = f(c02 * f(Math.sqrt(f(f(f(f(n01 + n02) + n11) + n12) + eps))));
      nn[2] = f(c02 * f(Math.sqrt(f(f(f(f(n10 + n11) + n20) + n21) + eps))));
      nn[3] = f(c02 * f(Math.sqrt(f(f(f(f(n00 + n01) + n10) + n11) + eps))));
      for (let k = 0; k < 4; k++) {
        n[k] = f(c01 / nn[k]!);
        t[k] = 0;
      }
      const o0 = (y + pr) * cols + x + pc;
      const hb = ((y + 2) * hc + x + 2) * 18;
      for (let o = 0; o < 18; o += 3) {
        const v0 = hist[hb + o]!, v1 = hist[hb + o + 1]!, v2 = hist[hb + o + 2]!;
        for (let k = 0; k < 4; k++) {
          h0[k] = f(Math.min(v0, nn[k]!) * n[k]!);
          h1[k] = f(Math.min(v1, nn[k]!) * n[k]!);
          h2[k] = f(Math.min(v2, nn[k]!) * n[k]!);
          t[k] = f(t[k]! + f(f(h0[k]! + h1[k]!) + h2[k]!));
        }
        // dlib's sum(simd4f): (a0 + a1) + (a2 + a3)
        planes[o]![o0] = f(f(h0[0]! + h0[1]!) + f(h0[2]! + h0[3]!));
        planes[o + 1]![o0] = f(f(h1[0]! + h1[1]!) + f(h1[2]! + h1[3]!));
        planes[o + 2]![o0] = f(f(h2[0]! + h2[1]!) + f(h2[2]! + h2[3]!));
      }
      for (let o = 0; o < 9; o++) {
        const v = f(hist[hb + o]! + hist[hb + o + 9]!);
        for (let k = 0; k < 4; k++) h0[k] = f(Math.min(v, nn[k]!) * n[k]!);
        planes[18 + o]![o0] = f(f(h0[0]! + h0[1]!) + f(h0[2]! + h0[3]!));
      }
      for (let k = 0; k < 4; k++) planes[27 + k]![o0] = f(t[k]! * c4714);
    }
  }
  return { rows, cols, planes };
}
