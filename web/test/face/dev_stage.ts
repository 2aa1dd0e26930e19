// Dev check: Python's rects -> TS landmarks, chips, descriptors vs the Python reference dump.
import { readFileSync } from "node:fs";
import { readPgm } from "../../src/face/pgm.js";
import { resizeBicubic } from "../../src/face/resize.js";
import { ShapePredictor } from "../../src/face/shapePredictor.js";
import { faceChip } from "../../src/face/chip.js";
import { ResNet } from "../../src/face/resnet.js";

const ref = JSON.parse(readFileSync(process.argv[2]!, "utf8"));
const sp = ShapePredictor.parse(readFileSync(process.argv[3]!));
const net = await ResNet.load(readFileSync(process.argv[4]!));
let partsEq = 0, chipEq = 0, n = 0, maxl2 = 0;
const l2s: number[] = [];
for (const r of ref) {
  if (!r.path.endsWith(".pgm") || !r.rect) continue;
  n++;
  let img = readPgm(readFileSync(r.path));
  if (r.work[0] !== img.width) img = resizeBicubic(img, r.work[0], r.work[1]);
  const [left, top, right, bottom] = r.rect;
  const parts = sp.predict(img, { left, top, right, bottom });
  if (JSON.stringify(parts) === JSON.stringify(r.parts)) partsEq++;
  else if (n < 5) console.log("parts", r.path, parts, r.parts);
  const chip = faceChip(img, parts);
  let s = 0; for (const v of chip.data) s += v;
  if (s === r.chip_sum) chipEq++;
  const d = await net.embed(chip);
  let l2 = 0; for (let i = 0; i < 128; i++) l2 += (d[i]! - r.descriptor[i]) ** 2;
  l2s.push(Math.sqrt(l2));
}
l2s.sort((a, b) => a - b);
console.log({ n, partsEq, chipEq, maxl2: l2s[l2s.length - 1], median: l2s[l2s.length >> 1] });
