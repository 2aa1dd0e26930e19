/** A Web Worker of the exponentiation pool (pool.ts): base^exp mod m for a chunk of bases, on native BigInt, or GMP
 *  (WebAssembly) with ?arith=gmp-wasm. */
import { modPow, useGmp } from "./bignum.js";

interface Job {
  id: number;
  bases: bigint[];
  exp: bigint;
  mod: bigint;
}

const ready = new URL(self.location.href).searchParams.get("arith") === "gmp-wasm" ? useGmp() : Promise.resolve();
const scope = self as unknown as { onmessage: ((e: MessageEvent<Job>) => void) | null; postMessage(v: unknown): void };

scope.onmessage = (e) => {
  const { id, bases, exp, mod } = e.data;
  void ready.then(() => {
    try {
      scope.postMessage({ id, out: bases.map((b) => modPow(b, exp, mod)) });
    } catch (err) {
      scope.postMessage({ id, error: String(err) });
    }
  });
};
