// Builds the page bundle into src/privface/service/webapp/ (git-ignored package data served at /app/ by
// `privface serve`) and the Node test driver into dist-test/.
import { build } from "esbuild";
import { cpSync, mkdirSync } from "node:fs";

const out = new URL("../src/privface/service/webapp/", import.meta.url).pathname;
mkdirSync(out, { recursive: true });
const common = { bundle: true, format: "esm", target: "es2022", sourcemap: false, logLevel: "warning" };
const entries = [];
try {
  entries.push(build({ ...common, entryPoints: ["src/app/main.ts"], outfile: out + "app.js", platform: "browser", minify: true }));
} catch {}
entries.push(build({ ...common, entryPoints: ["test/driver.ts"], outfile: "dist-test/driver.mjs", platform: "node",
  banner: { js: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);" } }));
await Promise.all(entries);
cpSync("static", out, { recursive: true });
