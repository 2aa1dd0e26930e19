// Builds the page into src/privface/service/webapp/ (git-ignored package data that `privface serve` serves at
// /app/) and, for the tests, the Node driver and the page's test-fixture bundle into dist-test/.
import { build } from "esbuild";
import { cpSync, existsSync, mkdirSync, readdirSync } from "node:fs";

const out = new URL("../src/privface/service/webapp/", import.meta.url).pathname;
mkdirSync(out, { recursive: true });
const common = { bundle: true, format: "esm", target: "es2022", logLevel: "warning" };
const page = { ...common, entryPoints: ["src/app/main.ts"], platform: "browser", minify: true };
const jobs = [
  build({ ...common, entryPoints: ["test/driver.ts", "test/browser.ts", "test/gsmDriver.ts"], outdir: "dist-test", outExtension: { ".js": ".mjs" },
    platform: "node", external: ["playwright-core"], banner: { js: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);" } }),
  // TEST FIXTURE bundle: the page with src/app/face.ts (the face pipeline) replaced by test/faceFixture.ts (tests only).
  build({ ...page, outfile: "dist-test/app-fixture.js", plugins: [{
    name: "face-fixture",
    setup(b) {
      b.onResolve({ filter: /^\.\/face\.js$/ }, () => ({ path: new URL("test/faceFixture.ts", import.meta.url).pathname }));
    },
  }] }),
];
jobs.push(build({ ...common, entryPoints: ["src/crypto/worker.ts"], outfile: out + "worker.js", platform: "browser", minify: true }));
// the installable app (issue 39): the service worker, named after this build, and its registration
const buildId = Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
jobs.push(build({ ...common, entryPoints: ["src/app/sw.ts"], outfile: out + "sw.js", platform: "browser", minify: true,
  define: { __BUILD__: JSON.stringify(buildId) } }));
jobs.push(build({ ...common, entryPoints: ["src/app/pwa.ts"], outfile: out + "pwa.js", platform: "browser", minify: true }));
// gsm's Device (issue 39): the page module and its key generation worker
jobs.push(build({ ...common, entryPoints: ["src/app/gsm.ts"], outfile: out + "gsm.js", platform: "browser", minify: true }));
jobs.push(build({ ...common, entryPoints: ["src/gsm/keygenWorker.ts"], outfile: out + "gsm-keygen.js", platform: "browser", minify: true }));
jobs.push(build({ ...common, entryPoints: ["src/app/gsmWorker.ts"], outfile: out + "gsm-worker.js", platform: "browser", minify: true }));
jobs.push(build({ ...common, entryPoints: ["src/app/kiosk.ts"], outfile: out + "kiosk.js", platform: "browser", minify: true }));
jobs.push(build({ ...common, entryPoints: ["src/app/gsmPage.ts"], outfile: out + "gsm-page.js", platform: "browser", minify: true }));
if (existsSync("src/face/index.ts")) {
  jobs.push(build({ ...page, outfile: out + "app.js" }));
  // the face pipeline's Web Worker (src/app/faceWorker.ts): decoding, resizing, detection and embedding off the page
  jobs.push(build({ ...page, entryPoints: ["src/app/faceWorker.ts"], outfile: out + "face-worker.js" }));
  // bench web --parity: the face pipeline's parity harness on the served models (test/bench only)
  jobs.push(build({ ...page, entryPoints: ["test/parityPage.ts"], outfile: "dist-test/parity.js" }));
  // onnxruntime-web's WebAssembly runtime, served from /app/ort/ (its loader imports the .mjs next to the .wasm)
  const ort = "node_modules/onnxruntime-web/dist/";
  mkdirSync(out + "ort", { recursive: true });
  for (const f of readdirSync(ort)) {
    if (/^ort-wasm-simd-threaded\.(wasm|mjs)$/.test(f)) cpSync(ort + f, out + "ort/" + f);
  }
} else {
  console.warn("web: src/face/index.ts is missing (the browser face pipeline is not merged): the page bundle is not built");
}
await Promise.all(jobs);
cpSync("static", out, { recursive: true });
