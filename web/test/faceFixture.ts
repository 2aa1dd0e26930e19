/**
 * TEST FIXTURE, never in the product bundle: stands in for src/app/face.ts (the browser face pipeline) in the
 * browser tests' fixture bundle (dist-test/app-fixture.js). It returns the descriptors the test queued on
 * `window.__privfaceFixtureDescriptors` (computed by the Python pipeline); null = "no face".
 */
export class NoFaceError extends Error {
  override name = "NoFaceError";
}
export class AmbiguousFaceError extends Error {
  override name = "AmbiguousFaceError";
}
export class PhotoError extends Error {
  override name = "PhotoError";
}

type Queue = (number[] | null)[];

export function preload(): Promise<unknown> {
  return Promise.resolve();
}

export async function open(source: Blob | ImageBitmap) {
  const bmp = source instanceof ImageBitmap ? source : await createImageBitmap(source).catch(() => {
    throw new PhotoError("not an image this browser can read");
  });
  const { width, height } = bmp;
  return { width, height, workWidth: width, workHeight: height, preview: bmp, ambiguous: false, decode_ms: 0, detect_ms: 0,
    faces: [{ box: [0, 0, width - 1, height - 1] as [number, number, number, number], area: width * height }] };
}

export async function embed(face: number) {
  const q = (globalThis as unknown as { __privfaceFixtureDescriptors?: Queue }).__privfaceFixtureDescriptors;
  if (!q || q.length === 0) throw new Error("test fixture: no descriptor queued");
  const d = q.shift()!;
  if (d === null) throw new NoFaceError("no face");
  return { descriptor: Float32Array.from(d), box: [0, 0, 1, 1] as [number, number, number, number], face, timings: {} };
}
