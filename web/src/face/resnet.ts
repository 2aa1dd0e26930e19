/**
 * dlib's ResNet-128 face descriptor (dlib_face_recognition_resnet_model_v1, seed 000 §VI-B) run by
 * onnxruntime-web (WebAssembly, SIMD) on the ONNX graph the Python side derives from the shipped
 * .dat file (privface.faces.dlib_onnx). The graph takes N×150×150×3 uint8 RGB chips and does
 * dlib's input normalisation itself ((pixel − mean RGB)/256), so the browser feeds raw chips as
 * the Python backend does.
 */
import * as ort from "onnxruntime-web/wasm";

import type { RGBImage } from "./geometry.js";

export const CHIP_SIZE = 150;

export interface ResNetOptions {
  /** Where onnxruntime-web finds its .wasm/.mjs files (a URL prefix ending in "/"). */
  wasmPaths?: string;
  /** WebAssembly threads; >1 only works where SharedArrayBuffer is available (cross-origin isolation). */
  threads?: number;
}

export class ResNet {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async load(model: Uint8Array, opts: ResNetOptions = {}): Promise<ResNet> {
    if (opts.wasmPaths) ort.env.wasm.wasmPaths = opts.wasmPaths;
    const isolated = typeof globalThis.crossOriginIsolated === "boolean" ? globalThis.crossOriginIsolated : false;
    ort.env.wasm.numThreads = isolated ? Math.max(1, opts.threads ?? 1) : 1;
    ort.env.wasm.simd = true;
    const session = await ort.InferenceSession.create(model, {
      executionProviders: ["wasm"],
      graphOptimizationLevel: "all",
    });
    if (!session.inputNames.includes("chip") || !session.outputNames.includes("embedding"))
      throw new Error("face model: expected input 'chip' and output 'embedding'");
    return new ResNet(session);
  }

  /** The 128-D descriptor of one aligned 150×150 chip. */
  async embed(chip: RGBImage): Promise<Float32Array> {
    if (chip.width !== CHIP_SIZE || chip.height !== CHIP_SIZE) throw new RangeError("chips must be 150×150");
    const input = new ort.Tensor("uint8", chip.data, [1, CHIP_SIZE, CHIP_SIZE, 3]);
    const out = await this.session.run({ chip: input });
    const emb = out["embedding"];
    if (!emb || emb.type !== "float32" || emb.dims.length !== 2 || emb.dims[1] !== 128)
      throw new Error("face model: unexpected output");
    return Float32Array.from(emb.data as Float32Array);
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
