// Node driver: serves the harness on loopback and runs it in headless Chromium (Debian's binary).
// usage: node chromium.mjs <models-json> <images-json> <out-json>
//   models-json: {"resnet": path, "landmarks5": path, "hogDetector": path, "mmod": path, "mmodMeta": path}
//   images-json: ["/abs/path/a.pgm", ...]
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const [modelsJson, imagesJson, outJson] = process.argv.slice(2);
const models = JSON.parse(readFileSync(modelsJson!, "utf8"));
const images: string[] = JSON.parse(readFileSync(imagesJson!, "utf8"));
const here = dirname(fileURLToPath(import.meta.url));
const ortDir = join(here, "..", "..", "node_modules", "onnxruntime-web", "dist");
const byName = new Map(images.map((p, i) => [`${i}_${p.split("/").slice(-2).join("_")}`, p]));
const types: Record<string, string> = { ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm", ".html": "text/html" };

const server = createServer((req, res) => {
  const url = decodeURIComponent((req.url ?? "/").split("?")[0]!);
  let file: string | undefined;
  if (url === "/") {
    res.writeHead(200, { "content-type": "text/html" });
    res.end('<!doctype html><meta charset="utf-8"><script type="module" src="/page.mjs"></script>');
    return;
  }
  if (url === "/page.mjs") file = join(here, "_page.mjs");
  else if (url.startsWith("/ort/")) file = join(ortDir, url.slice(5).replace(/[/\\]/g, ""));
  else if (url === "/models/resnet.onnx") file = models.resnet;
  else if (url === "/models/landmarks5.dat") file = models.landmarks5;
  else if (url === "/models/hog.svm") file = models.hogDetector;
  else if (url === "/models/mmod.onnx") file = models.mmod;
  else if (url === "/models/mmod.json") file = models.mmodMeta;
  else if (url.startsWith("/images/")) file = byName.get(url.slice(8));
  if (!file) { res.writeHead(404).end(); return; }
  try {
    const body = readFileSync(file);
    const ext = file.slice(file.lastIndexOf("."));
    res.writeHead(200, { "content-type": types[ext] ?? "application/octet-stream" });
    res.end(body);
  } catch { res.writeHead(404).end(); }
});
await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
const port = (server.address() as any).port;
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage();
  page.on("console", (m) => console.error("[page]", m.text()));
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.waitForFunction(() => typeof (globalThis as any).faceParity === "function");
  const t0 = Date.now();
  const results = await page.evaluate((names) => (globalThis as any).faceParity(names), [...byName.keys()]);
  const version = browser.version();
  writeFileSync(outJson!, JSON.stringify({ browser: `Chromium ${version}`, wall_ms: Date.now() - t0, results: results.map((r: any, i: number) => ({ ...r, path: images[i] })) }));
} finally {
  await browser.close();
  server.close();
}
