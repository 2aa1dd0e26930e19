/**
 * TEST FIXTURE, never in the product bundle: stands in for src/app/face.ts (the browser face pipeline) in the
 * browser tests' fixture bundle (dist-test/app-fixture.js). It returns the descriptors the test queued on
 * `window.__privfaceFixtureDescriptors` (computed by the Python pipeline); null = "no face".
 */
export class NoFaceError extends Error {
  override name = "NoFaceError";
}

type Queue = (number[] | null)[];

export function preload(): Promise<unknown> {
  return Promise.resolve();
}

export async function embed(_image: { width: number; height: number; data: Uint8ClampedArray }) {
  const q = (globalThis as unknown as { __privfaceFixtureDescriptors?: Queue }).__privfaceFixtureDescriptors;
  if (!q || q.length === 0) throw new Error("test fixture: no descriptor queued");
  const d = q.shift()!;
  if (d === null) throw new NoFaceError("no face");
  return { descriptor: Float32Array.from(d), box: null, timings: {} };
}
