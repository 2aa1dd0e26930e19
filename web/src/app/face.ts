/**
 * The page's C1 step: the browser face pipeline (web/src/face) — detector, landmarks, chip and ResNet-128 in
 * onnxruntime-web — with its models from this server's /app/models/ and onnxruntime's WebAssembly from /app/ort/.
 */
import { embed as pipelineEmbed, init, NoFaceError, type EmbedResult, type FaceModelFiles } from "../face/index.js";

export { NoFaceError };

async function bytes(name: string): Promise<Uint8Array> {
  const r = await fetch(new URL(`models/${name}`, location.href), { cache: "force-cache" });
  if (!r.ok) throw new Error(`the face model ${name} is not available from this server (HTTP ${r.status})`);
  return new Uint8Array(await r.arrayBuffer());
}

export async function modelFiles(): Promise<FaceModelFiles> {
  const listed = (await (await fetch(new URL("models/index.json", location.href))).json()) as string[];
  const [resnet, landmarks5, hogDetector] = await Promise.all(["resnet.onnx", "landmarks5.dat", "hog.svm"].map(bytes));
  const out: FaceModelFiles = { resnet: resnet!, landmarks5: landmarks5!, hogDetector: hogDetector! };
  if (listed.includes("mmod.onnx") && listed.includes("mmod.json")) {
    const [model, meta] = await Promise.all([bytes("mmod.onnx"), bytes("mmod.json")]);
    out.mmod = { model: model!, meta: JSON.parse(new TextDecoder().decode(meta)) };
  }
  return out;
}

let ready: Promise<unknown> | null = null;

/** Load the models (once); the page calls it early so that the first embedding does not wait. */
export function preload(): Promise<unknown> {
  // ?face_threads=N (bench web --face-threads): onnxruntime's WebAssembly threads. Default 1: on the 2-core test
  // machine one thread measured faster for C1 and left C2/C3 undisturbed (threads spin between inferences).
  const threads = Number(new URLSearchParams(location.search).get("face_threads") ?? 1);
  ready ??= init(modelFiles, { wasmPaths: new URL("ort/", location.href).href, threads });
  return ready;
}

export async function embed(image: { width: number; height: number; data: Uint8ClampedArray }): Promise<EmbedResult> {
  await preload();
  return pipelineEmbed(image);
}
