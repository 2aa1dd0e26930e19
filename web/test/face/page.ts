// Browser entry of the parity harness: fetches the models and images named by the driver.
import { runParity } from "../../src/face/parity.js";

const get = async (url: string): Promise<Uint8Array> => {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
};

(globalThis as any).faceParity = async (names: string[]) => {
  const files = {
    resnet: await get("/models/resnet.onnx"),
    landmarks5: await get("/models/landmarks5.dat"),
    hogDetector: await get("/models/hog.svm"),
    mmod: { model: await get("/models/mmod.onnx"), meta: JSON.parse(new TextDecoder().decode(await get("/models/mmod.json"))) },
  };
  const images = [];
  for (const n of names) images.push({ name: n, bytes: await get("/images/" + encodeURIComponent(n)) });
  return runParity(files, images, "/ort/");
};
