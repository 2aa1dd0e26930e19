/**
 * Unit-norm embeddings → m-bit integer templates of one exact L2 norm ζ (seed 004 §2 Def. 1, §3 Fig. 1), as
 * `privface.templates.fixed_norm.fixed_norm_template` step for step, so the page's gsm template equals Python's:
 * round ζ·x/‖x‖ (‖x‖ from the correctly rounded Σx_i², as `math.fsum`), then single or pair ±1 moves that bring
 * Σu_i² closest to ζ², and when stuck four coordinates re-chosen as a sum of four squares. Ties go to the first
 * index, sorts are stable (as the Python's). Here m ≤ 26 so every sum stays an exact double.
 */

export class TemplateError extends Error {
  override name = "TemplateError";
}

export function zeta(m: number): number {
  if (!Number.isInteger(m) || m < 2 || m > 26) throw new TemplateError(`template bits m must be an integer in [2, 26] here, got ${m}`);
  return 2 ** (m - 1) - 1;
}

/** Σ xs, correctly rounded (Shewchuk's partials, as Python's math.fsum for finite inputs). */
export function fsum(xs: Iterable<number>): number {
  const partials: number[] = [];
  for (let x of xs) {
    let i = 0;
    for (let y of partials) {
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0) partials[i++] = lo;
      x = hi;
    }
    partials.length = i;
    partials.push(x);
  }
  let n = partials.length;
  if (n === 0) return 0;
  let hi = partials[--n]!;
  let lo = 0;
  while (n > 0) {
    const x = hi;
    const y = partials[--n]!;
    hi = x + y;
    const yr = hi - x;
    lo = y - yr;
    if (lo !== 0) break;
  }
  // half-way case: make the rounding match the exact sum's (Python's fsum correction)
  if (n > 0 && ((lo < 0 && partials[n - 1]! < 0) || (lo > 0 && partials[n - 1]! > 0))) {
    const y = lo * 2;
    const x = hi + y;
    if (y === x - hi) hi = x;
  }
  return hi;
}

/** Round half to even (numpy's rint). */
export function rint(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

const dot = (u: number[]) => u.reduce((a, x) => a + x * x, 0);

/** The template u with Σu_i² = ζ² closest (greedy) to ζ·x/‖x‖. */
export function fixedNormTemplate(x: ArrayLike<number>, m: number, maxMoves = 100_000): number[] {
  const z = zeta(m);
  const v = Array.from(x, Number);
  if (v.length === 0 || !v.every(Number.isFinite)) throw new TemplateError("an embedding must be a non-empty finite vector");
  const norm = Math.sqrt(fsum(v.map((t) => t * t)));
  if (norm === 0) throw new TemplateError("cannot normalise a zero embedding");
  const scale = z / norm;
  let u = v.map((t) => rint(t * scale));
  const target = z * z;
  for (let k = 0; k < maxMoves; k++) {
    const r = target - dot(u);
    if (r === 0) return u.map((t) => t + 0);
    let [gap, moved] = bestMove(u, z, r);
    if (gap >= Math.abs(r)) {
      let best: [number, number[]] | null = null;
      for (const w of singleMoves(u, z, r, 16)) {
        const o = applyBest(w, z, target - dot(w));
        if (best === null || o[0] < best[0]) best = o;
      }
      [gap, moved] = best!;
      if (gap >= Math.abs(r)) return finish(u, z, target).map((t) => t + 0);
    }
    u = moved;
  }
  throw new TemplateError(`could not reach the exact squared norm ζ² = ${target} (ℓ = ${u.length}, m = ${m})`);
}

function steps(u: number[], z: number): [number[], number[]] {
  const mag = u.map(Math.abs);
  return [mag.map((a) => (a < z ? 2 * a + 1 : Infinity)), mag.map((a) => (a >= 1 ? -(2 * a - 1) : -Infinity))];
}

function moved(u: number[], grow: number[], shrink: number[]): number[] {
  const w = u.slice();
  for (const i of grow) w[i] = w[i]! + (w[i]! >= 0 ? 1 : -1);
  for (const i of shrink) w[i] = w[i]! - (w[i]! > 0 ? 1 : -1);
  return w;
}

function argminAbs(r: number, xs: number[]): number {
  let best = 0;
  let bv = Infinity;
  xs.forEach((x, i) => {
    const d = Math.abs(r - x);
    if (d < bv || (i === 0 && !(d >= bv))) {
      bv = d;
      best = i;
    }
  });
  return best;
}

function bestMove(u: number[], z: number, r: number): [number, number[]] {
  const [up, down] = steps(u, z);
  const iUp = argminAbs(r, up);
  const iDown = argminAbs(r, down);
  let pi = 0;
  let pj = 0;
  let pv = Infinity;
  let first = true;
  for (let i = 0; i < u.length; i++) {
    for (let j = 0; j < u.length; j++) {
      let s = up[i]! + down[j]!;
      if (!Number.isFinite(s) || i === j) s = Infinity;
      const d = Math.abs(r - s);
      if (first || d < pv) {
        pv = d;
        pi = i;
        pj = j;
        first = false;
      }
    }
  }
  const options: [number, number[], number[]][] = [[Math.abs(r - up[iUp]!), [iUp], []], [Math.abs(r - down[iDown]!), [], [iDown]],
    [pv, [pi], [pj]]];
  let o = options[0]!;
  for (const c of options.slice(1)) if (c[0] < o[0]) o = c;
  return [o[0], moved(u, o[1], o[2])];
}

function applyBest(u: number[], z: number, r: number): [number, number[]] {
  const [gap, m] = bestMove(u, z, r);
  return gap < Math.abs(r) ? [gap, m] : [Math.abs(r), u];
}

/** Indices of xs sorted by key, stable. */
function argsort(keys: number[]): number[] {
  return keys.map((_, i) => i).sort((a, b) => keys[a]! - keys[b]! || a - b);
}

function singleMoves(u: number[], z: number, r: number, count: number): number[][] {
  const [up, down] = steps(u, z);
  const key = (xs: number[]) => xs.map((x) => Math.abs(r - x));
  const orderUp = argsort(key(up)).slice(0, count);
  const orderDown = argsort(key(down)).slice(0, count);
  return [...orderUp.filter((i) => Number.isFinite(up[i]!)).map((i) => moved(u, [i], [])),
    ...orderDown.filter((i) => Number.isFinite(down[i]!)).map((i) => moved(u, [], [i]))];
}

function finish(u: number[], z: number, target: number): number[] {
  const order = argsort(u.map(Math.abs));
  for (let k = 4; k < Math.min(u.length, 16); k++) {
    const w = k === 4 ? u : moved(u, [order[k]!], []);
    const found = fourSquares(w, z, target - dot(w));
    if (found !== null) return found;
  }
  throw new TemplateError(`could not reach the exact squared norm ζ² = ${target} (ℓ = ${u.length})`);
}

function fourSquares(u: number[], z: number, r: number): number[] | null {
  if (u.length < 4) throw new TemplateError("an exact-norm template needs at least 4 coordinates");
  const order = argsort(u.map(Math.abs));
  let candidates = [order.slice(0, 4)];
  if (r < 0) {
    const nonzero = order.filter((i) => Math.abs(u[i]!) > 0);
    const zero = order.filter((i) => u[i] === 0);
    candidates = [nonzero.slice(0, 4)];
    if (zero.length >= 3) candidates.push([...zero.slice(0, 3), ...nonzero.slice(0, 1)]);
  }
  for (const idx of candidates) {
    if (idx.length === 4) {
      const found = fourSquaresAt(u, z, r, idx);
      if (found !== null) return found;
    }
  }
  return null;
}

function fourSquaresAt(u: number[], z: number, r: number, idx: number[]): number[] | null {
  const [a, b, c, d] = idx.map((i) => Math.abs(u[i]!)) as [number, number, number, number];
  const total = a * a + b * b + c * c + d * d + r;
  for (const w of [8, 32, 96]) {
    let best: { cost: number; vals: number[] } | null = null;
    for (let i = -w; i <= w; i++) {
      const A = Math.abs(a + i);
      for (let j = -w; j <= w; j++) {
        const B = Math.abs(b + j);
        for (let k = -w; k <= w; k++) {
          const C = Math.abs(c + k);
          const rest = total - (A * A + B * B + C * C);
          if (rest < 0) continue;
          const D = rint(Math.sqrt(rest));
          if (D * D !== rest || Math.max(A, B, C, D) > z) continue;
          const cost = Math.abs(i) + Math.abs(j) + Math.abs(k) + Math.abs(D - d);
          if (best === null || cost < best.cost) best = { cost, vals: [A, B, C, D] };
        }
      }
    }
    if (best !== null) {
      const out = u.slice();
      idx.forEach((pos, t) => {
        out[pos] = u[pos]! >= 0 ? best!.vals[t]! : -best!.vals[t]!;
      });
      return out;
    }
  }
  return null;
}
