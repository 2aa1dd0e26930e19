/** A Web Worker that makes the device's 3072-bit Paillier–Blum key (gsm/paillier.ts) off the page's thread,
 *  posting {tries} per prime candidate (progress) and then {p, q} as hex (never logged). Long exponentiations on
 *  GMP (WebAssembly) with ?arith=gmp-wasm. */
import { useGmp } from "../crypto/bignum.js";
import { generateBlumKey } from "./paillier.js";

const scope = self as unknown as { onmessage: ((e: MessageEvent<{ bits: number }>) => void) | null; postMessage(v: unknown): void };

scope.onmessage = (e) => {
  const arith = new URL(self.location.href).searchParams.get("arith");
  void (arith === "gmp-wasm" ? useGmp() : Promise.resolve()).then(() => {
    try {
      let tries = 0;
      const key = generateBlumKey(e.data.bits, () => {
        tries++;
        if (tries % 8 === 0) scope.postMessage({ tries });
      });
      scope.postMessage({ p: key.p.toString(16), q: key.q.toString(16), tries });
    } catch (err) {
      scope.postMessage({ error: String(err) });
    }
  });
};
