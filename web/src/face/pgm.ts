/** A minimal reader for binary PGM (P5, 8-bit) files, the format of the ORL face database. */
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
  if (token() !== "P5") throw new Error("not a binary PGM (P5) file");
  const width = Number(token()), height = Number(token()), maxval = Number(token());
  pos++; // the single whitespace after maxval
  if (!(width > 0 && height > 0 && maxval > 0 && maxval < 256)) throw new Error("unsupported PGM header");
  if (pos + width * height > bytes.length) throw new Error("truncated PGM file");
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    const v = maxval === 255 ? bytes[pos + i]! : Math.round((bytes[pos + i]! * 255) / maxval);
    data[3 * i] = data[3 * i + 1] = data[3 * i + 2] = v;
  }
  return { width, height, data };
}
