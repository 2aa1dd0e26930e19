// Dev check: the TS detectors (HOG, CNN fallback) against the Python reference dump (ORL PGMs).
// usage: node _dev_detect.mjs ref.json models.json [only-cnn]
import { readFileSync } from "node:fs";
import { FacePipeline, readPgm } from "../../src/face/index.js";

const [refPath, modelsPath, only] = process.argv.slice(2);
const ref = JSON.parse(readFileSync(refPath!, "utf8"));
const m = JSON.parse(readFileSync(modelsPath!, "utf8"));
const pipe = await FacePipeline.load({
  landmarks5: readFileSync(m.landmarks5), hogDetector: readFileSync(m.hogDetector), resnet: readFileSync(m.resnet),
  mmod: m.mmod ? { model: readFileSync(m.mmod), meta: JSON.parse(readFileSync(m.mmodMeta, "utf8")) } : undefined,
});
let n = 0, rectEq = 0, undetected = 0, detEq = 0;
const ms: number[] = [];
for (const r of ref) {
  if (!r.path.endsWith(".pgm") || (only && r.detector !== only)) continue;
  n++;
  const { work } = FacePipeline.workingImage(readPgm(readFileSync(r.path)));
  const t0 = performance.now();
  const found = await pipe.detect(work);
  ms.push(performance.now() - t0);
  if (!found) { undetected++; continue; }
  if (found.detector === r.detector) detEq++;
  const rect = found.rect;
  if (JSON.stringify([rect.left, rect.top, rect.right, rect.bottom]) === JSON.stringify(r.rect)) rectEq++;
  else console.log("rect differs", r.path, found, r.rect, r.detector);
}
ms.sort((a, b) => a - b);
console.log({ n, rectEq, detEq, undetected, detect_ms_median: ms[ms.length >> 1], detect_ms_max: ms[ms.length - 1] });
