/** The page's C1 step: the browser face pipeline (web/src/face), from an RGBA image to the 128-D descriptor. */
export { embed, NoFaceError } from "../face/index.js";
