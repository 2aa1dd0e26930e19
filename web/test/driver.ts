/**
 * Test driver (Node): JSON lines on stdin → JSON lines on stdout, so the Python tests can run the browser
 * client's code against the Python codec and the Python im2020 server. Not shipped in the page.
 *   {"cmd":"roundtrip","hex":…[,"widths":{…}]}     → {"hex": decode-then-encode of the frame} | {"error": …}
 *   {"cmd":"keygen","jl":{bits,k,p_bits},"params":…,"id":…,"server":…} → {"key": key file hex, "ms": …}
 *   {"cmd":"enrol"|"auth_start","key":…,"params":…,"template":[…]} → {"hex": message}
 *   {"cmd":"finish","key":…,"params":…,"challenge":hex} → {"hex": AuthFinish, "s_star": decimal}
 *   {"cmd":"revoke_proof","key":…,"params":…,"challenge":hex} → {"hex": RevokeProof} | {"error": …}
 *   {"cmd":"backend","name":"gmp"|"bigint"}         → {"backend": …}
 */
import { createInterface } from "node:readline";
import { arithmeticBackend, useGmp, useNative } from "../src/crypto/bignum.js";
import { generateKey } from "../src/crypto/joyeLibert.js";
import { Im2020Client, keyFileBytes, loadKeyFile, type Im2020Params } from "../src/im2020/client.js";
import { decode, encode } from "../src/wire/codec.js";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const unhex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));

type Req = Record<string, any>;

async function handle(r: Req): Promise<Record<string, unknown>> {
  switch (r.cmd) {
    case "roundtrip": {
      const { name, values } = decode(unhex(r.hex), undefined, r.widths);
      return { name, hex: hex(encode(name, values)) };
    }
    case "backend":
      if (r.name === "gmp") await useGmp();
      else useNative();
      return { backend: arithmeticBackend() };
    case "keygen": {
      const t0 = performance.now();
      const sk = await generateKey(r.jl);
      const ms = performance.now() - t0;
      return { key: hex(keyFileBytes(new Im2020Client(r.id, sk, r.params as Im2020Params), r.server)), ms };
    }
    case "enrol": case "auth_start": {
      const { client } = loadKeyFile(unhex(r.key), r.params);
      const t0 = performance.now();
      const msg = r.cmd === "enrol" ? client.enrol(r.template) : client.authStart(r.template);
      return { hex: hex(msg), ms: performance.now() - t0 };
    }
    case "finish": {
      const { client } = loadKeyFile(unhex(r.key), r.params);
      client.sk.dlogTables();
      const t0 = performance.now();
      const { sStar } = await client.blindedScore(unhex(r.challenge));
      return { hex: hex(client.authFinish(sStar)), s_star: sStar.toString(), ms: performance.now() - t0 };
    }
    case "revoke_proof": {
      const { client } = loadKeyFile(unhex(r.key), r.params);
      return { hex: hex(await client.revokeProof(unhex(r.challenge))) };
    }
  }
  throw new Error(`unknown command ${r.cmd}`);
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let out: Record<string, unknown>;
  try {
    out = await handle(JSON.parse(line));
  } catch (e) {
    out = { error: (e as Error).message, type: (e as Error).name };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
