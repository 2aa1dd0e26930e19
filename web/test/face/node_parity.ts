// Node driver of the parity harness (PGM images only: other formats need a browser's decoder).
// usage: node node_parity.mjs <models-json> <images-json> <out-json>
import { readFileSync, writeFileSync } from "node:fs";
import { runParity } from "../../src/face/parity.js";

const [modelsJson, imagesJson, outJson] = process.argv.slice(2);
const m = JSON.parse(readFileSync(modelsJson!, "utf8"));
const paths: string[] = JSON.parse(readFileSync(imagesJson!, "utf8"));
const files = {
  resnet: readFileSync(m.resnet), landmarks5: readFileSync(m.landmarks5), hogDetector: readFileSync(m.hogDetector),
  mmod: m.mmod ? { model: readFileSync(m.mmod), meta: JSON.parse(readFileSync(m.mmodMeta, "utf8")) } : undefined,
};
const results = await runParity(files, paths.map((p) => ({ name: p, bytes: readFileSync(p) })));
writeFileSync(outJson!, JSON.stringify({ runtime: `Node ${process.version}`, results }));
