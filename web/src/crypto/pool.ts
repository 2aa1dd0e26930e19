/** Exponentiations with one exponent and modulus for many bases, split over Web Workers (worker.ts) — the
 *  browser's counterpart of the Python client's decryption threads (`decrypt_values` on `workers`). */
export type PowMany = (bases: bigint[], exp: bigint, mod: bigint) => Promise<bigint[]>;

export class PowPool {
  private readonly workers: Worker[];
  private next = 0;
  private readonly pending = new Map<number, { resolve: (v: bigint[]) => void; reject: (e: Error) => void }>();

  constructor(url: URL, size: number) {
    this.workers = Array.from({ length: Math.max(1, size) }, () => {
      const w = new Worker(url, { type: "module" });
      w.onmessage = (e: MessageEvent<{ id: number; out?: bigint[]; error?: string }>) => {
        const p = this.pending.get(e.data.id);
        this.pending.delete(e.data.id);
        if (e.data.out) p?.resolve(e.data.out);
        else p?.reject(new Error(e.data.error ?? "worker failed"));
      };
      return w;
    });
  }

  get size(): number {
    return this.workers.length;
  }

  /** Stop the workers (pending batches never resolve). */
  close(): void {
    for (const w of this.workers) w.terminate();
  }

  /** Job i to worker i mod size, for workers that take more kinds of job than `powMany`'s (app/gsmWorker.ts). */
  spread(jobs: Record<string, unknown>[]): Promise<bigint[][]> {
    return Promise.all(jobs.map((job, i) => {
      const id = this.next++;
      return new Promise<bigint[]>((resolve, reject) => {
        this.pending.set(id, { resolve, reject });
        this.workers[i % this.workers.length]!.postMessage({ ...job, id });
      });
    }));
  }

  powMany: PowMany = async (bases, exp, mod) => {
    const per = Math.ceil(bases.length / this.workers.length);
    const parts = this.workers.map((w, i) => {
      const chunk = bases.slice(i * per, (i + 1) * per);
      if (chunk.length === 0) return Promise.resolve([] as bigint[]);
      const id = this.next++;
      return new Promise<bigint[]>((resolve, reject) => {
        this.pending.set(id, { resolve, reject });
        w.postMessage({ id, bases: chunk, exp, mod });
      });
    });
    return (await Promise.all(parts)).flat();
  };
}
