/** A Web Worker of the gsm Device's pool (issue 39): the exponentiation pool's job (base^exp mod m for many bases,
 *  as crypto/worker.ts) and two more for Π_en — `rn`: short-exponent pairs (r, r^N mod N²) of the device's own key
 *  (gsm/paillier.ts ShortRn, tables built once per key in this worker), `prodpow`: Π b_i^e_i mod m, `powsq`:
 *  base^exp mod p² in p-adic digits (Paillier decryption's CRT halves). */
import { modPow, modPowSquare } from "../crypto/bignum.js";
import { localProdPow, ShortRn } from "../gsm/paillier.js";

interface Job {
  id: number;
  kind?: "rn" | "prodpow" | "powsq";
  bases?: bigint[];
  exps?: bigint[];
  exp?: bigint;
  mod?: bigint;
  p?: bigint;
  q?: bigint;
  count?: number;
}

const scope = self as unknown as { onmessage: ((e: MessageEvent<Job>) => void) | null; postMessage(v: unknown): void };
let source: ShortRn | null = null;

async function run(job: Job): Promise<bigint[]> {
  if (job.kind === "rn") {
    if (source === null || source.p !== job.p || source.q !== job.q) source = new ShortRn(job.p!, job.q!);
    return Array.from({ length: job.count! }, () => source!.next()).flat();
  }
  if (job.kind === "powsq") return job.bases!.map((b) => modPowSquare(b, job.exp!, job.p!));
  if (job.kind === "prodpow") return [await localProdPow(job.bases!, job.exps!, job.mod!)];
  return job.bases!.map((b) => modPow(b, job.exp!, job.mod!));
}

scope.onmessage = (e) => {
  run(e.data).then((out) => scope.postMessage({ id: e.data.id, out }), (err) => scope.postMessage({ id: e.data.id, error: String(err) }));
};
