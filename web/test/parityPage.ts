/**
 * Test/bench bundle (dist-test/parity.js, never in the product): loaded into the page at /app/ by
 * `privface bench web --parity`, it embeds images with the browser face pipeline (web/src/face/parity.ts)
 * on the models the server serves, and returns descriptors for comparison with the Python pipeline. `backend`: the
 * face backend to run (default: the server's, as the page chooses it).
 */
import { modelFiles } from "../src/app/models.js";
import type { FaceBackend } from "../src/face/index.js";
import { runParity } from "../src/face/parity.js";

(globalThis as unknown as Record<string, unknown>).privfaceParity = async (images: { name: string; b64: string }[],
  backend?: FaceBackend) => {
  const decoded = images.map(({ name, b64 }) => ({ name, bytes: Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)) }));
  return runParity(await modelFiles(location.href, backend), decoded, new URL("ort/", location.href).href);
};
