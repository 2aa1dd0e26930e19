/**
 * Images and 2-D transforms shared by the face modules, following dlib's conventions
 * (dlib/geometry/point_transforms.h): pixel centres at integer coordinates.
 */

/** An RGB image, 3 bytes per pixel, row-major. */
export interface RGBImage {
  width: number;
  height: number;
  data: Uint8Array;
}

/** An RGBA image as the browser's ImageData holds it. */
export interface RGBAImage {
  width: number;
  height: number;
  data: Uint8ClampedArray | Uint8Array;
}

export function rgbaToRgb(img: RGBAImage): RGBImage {
  const { width, height, data } = img;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width <= 0 || height <= 0)
    throw new RangeError(`bad image size ${width}×${height}`);
  if (data.length !== width * height * 4) throw new RangeError("RGBA data length does not match the image size");
  const out = new Uint8Array(width * height * 3);
  for (let i = 0, j = 0; i < data.length; i += 4, j += 3) {
    out[j] = data[i]!;
    out[j + 1] = data[i + 1]!;
    out[j + 2] = data[i + 2]!;
  }
  return { width, height, data: out };
}

/** An affine map [m00, m01, b0, m10, m11, b1]: p ↦ M·p + b. */
export type Affine = [number, number, number, number, number, number];

export function apply(t: Affine, x: number, y: number): [number, number] {
  return [t[0] * x + t[1] * y + t[2], t[3] * x + t[4] * y + t[5]];
}

/**
 * dlib's find_similarity_transform (Umeyama, "Least-squares estimation of transformation
 * parameters between two point patterns", 1991, eqs. 34–43) for points given as flat x,y arrays.
 * In 2-D the SVD step has a closed form: the best proper rotation of the covariance
 * [[a, b], [c, d]] has angle atan2(c − b, a + d) and trace(D·S) = hypot(a + d, c − b).
 */
export function similarityTransform(from: ArrayLike<number>, to: ArrayLike<number>): Affine {
  const n = from.length / 2;
  let mfx = 0, mfy = 0, mtx = 0, mty = 0;
  for (let i = 0; i < n; i++) {
    mfx += from[2 * i]!;
    mfy += from[2 * i + 1]!;
    mtx += to[2 * i]!;
    mty += to[2 * i + 1]!;
  }
  mfx /= n; mfy /= n; mtx /= n; mty /= n;
  let sigmaFrom = 0, a = 0, b = 0, c = 0, d = 0;
  for (let i = 0; i < n; i++) {
    const fx = from[2 * i]! - mfx, fy = from[2 * i + 1]! - mfy;
    const tx = to[2 * i]! - mtx, ty = to[2 * i + 1]! - mty;
    sigmaFrom += fx * fx + fy * fy;
    a += tx * fx; b += tx * fy; c += ty * fx; d += ty * fy;
  }
  sigmaFrom /= n; a /= n; b /= n; c /= n; d /= n;
  const p = a + d, q = c - b;
  const h = Math.hypot(p, q);
  const cos = h === 0 ? 1 : p / h, sin = h === 0 ? 0 : q / h;
  const s = sigmaFrom !== 0 ? h / sigmaFrom : 1;
  const m00 = s * cos, m01 = -s * sin, m10 = s * sin, m11 = s * cos;
  return [m00, m01, mtx - (m00 * mfx + m01 * mfy), m10, m11, mty - (m10 * mfx + m11 * mfy)];
}
