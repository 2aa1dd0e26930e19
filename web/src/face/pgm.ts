/** A minimal reader for binary PGM/PPM (P5 grey, P6 RGB; 8-bit) files; ORL is distributed as PGM. */
import type { RGBImage } from "./geometry.js";

export function readPgm(bytes: Uint8Array): RGBImage {
  let pos = 0;
  const token = (): string => {
    for (;;) {
      while (pos < bytes.length && /\s/.test(String.fromCharCode(bytes[pos]!))) pos++;
      if (bytes[pos] === 0x23) while (pos < bytes.length && bytes[pos] !== 0x0a) pos++;
      else break;
    }
    let s = "";
    while (pos < bytes.length && !/\s/.test(String.fromCharCode(bytes[pos]!))) s += String.fromCharCode(bytes[pos++]!);
    return s;
  };
  const magic = token();
  if (magic !== "P5" && magic !== "P6") throw new Error("not a binary PGM (P5) or PPM (P6) file");
  const ch = magic === "P6" ? 3 : 1;
  const width = Number(token()), height = Number(token()), maxval = Number(token());
  pos++; // the single whitespace after maxval
  if (!(width > 0 && height > 0 && maxval > 0 && maxval < 256)) throw new Error("unsupported PGM header");
  if (pos + width * height * ch > bytes.length) throw new Error("truncated PGM/PPM file");
  const data = new Uint8Array(width * height * 3);
  const scale = (v: number) => (maxval === 255 ? v : Math.round((v * 255) / maxval));
  for (let i = 0; i < width * height; i++) {
    if (ch === 1) data[3 * i] = data[3 * i + 1] = data[3 * i + 2] = scale(bytes[pos + i]!);
    else for (let k = 0; k < 3; k++) data[3 * i + k] = scale(bytes[pos + 3 * i + k]!);
  }
  return { width, height, data };
}
