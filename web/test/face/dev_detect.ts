// Dev check: the full TS pipeline against the Python reference dump (ORL PGMs).
import { readFileSync } from "node:fs";
import { FacePipeline, readPgm } from "../../src/face/index.js";

const [refPath, sp, det, onnx] = process.argv.slice(2);
const ref = JSON.parse(readFileSync(refPath!, "utf8"));
const pipe = await FacePipeline.load({ landmarks5: readFileSync(sp!), hogDetector: readFileSync(det!), resnet: readFileSync(onnx!) });
let n = 0, rectEq = 0, undetected = 0, pyHog = 0;
const l2s: number[] = [], ms: number[] = [];
for (const r of ref) {
  if (!r.path.endsWith(".pgm")) continue;
  n++;
  const img = readPgm(readFileSync(r.path));
  const { work } = FacePipeline.workingImage(img);
  const t0 = performance.now();
  const rect = pipe.detect(work);
  ms.push(performance.now() - t0);
  if (r.detector === "hog") pyHog++;
  if (!rect) { undetected++; continue; }
  if (r.detector === "hog" && JSON.stringify([rect.left, rect.top, rect.right, rect.bottom]) === JSON.stringify(r.rect)) rectEq++;
  else if (r.detector === "hog") console.log("rect differs", r.path, rect, r.rect);
}
ms.sort((a, b) => a - b);
console.log({ n, pyHog, rectEq, undetected, detect_ms_median: ms[ms.length >> 1] });
