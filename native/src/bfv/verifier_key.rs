//! Seed 001 §4.5: the gallery kept under the verifier's key, so a query needs no key switching and one
//! product per gallery ciphertext is two pointwise products per limb instead of Alg. 2's 2L digit products.
//!
//! The CS switches each gallery ciphertext to s_v once (``rns::Basis::switch``) and drops it to the modulus
//! p₁ = q₀q₁ (``rescale``): ĉ = (ĉ₀, ĉ₁) with ĉ₀ + ĉ₁·s_v = (p₁/t)·π(A) + e mod p₁. ``lift`` stores it centred over
//! Q = q₀q₁q₂P (p₂ = q₂P) in NTT form. A gallery ciphertext is a stack of S slices, slice σ holding columns
//! σ·d … σ·d + d − 1 of its templates (``encoding.slices``). The verifier's query is 2S + 1 symmetric RLWE rows
//! under s_v at Q, their uniform halves expanded from a seed: R₀^σ = Enc(p₂·π(b_σ)), R₁^σ = Enc(p₂·π(b_σ)·s_v)
//! for every slice and Z = Enc(0). Then ĉ₀^σ·R₀^σ + ĉ₁^σ·R₁^σ decrypts to p₂·π(b_σ)·(ĉ₀^σ + ĉ₁^σ·s_v) =
//! (Q/t)·π(A_σ)π(b_σ) + p₂·π(b_σ)·e (mod Q, as Q·π(b_σ)·k ≡ 0): the product at the scale Q/t with noise
//! p₂·π(b_σ)·e, a ≈ 2^-19 step. Summed over the slices (in NTT form, one inverse NTT per ciphertext) the
//! coefficients k·d − 1 carry the whole inner products. ``pack.rs`` packs the products, adds Z·u + (e₀, e₁) for a
//! fresh ternary u per pack, so the c₁ the verifier receives is an RLWE sample it cannot strip (it knows the rows'
//! uniform halves), and modulus-switches them to q' = 2^w.
//!
//! NTTs are tfhe-ntt's (Zama's maintained AVX2 transforms; their evaluation order is internal, so NTT-form data
//! never leaves this module except as opaque stored or sent polynomials made by the same transform).

use super::ntt32::Plan;
use aes::Aes128;
use aes::cipher::BlockEncrypt;
use aes::cipher::generic_array::GenericArray;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rayon::prelude::*;

use super::arith::{Modulus, mul_shoup};

/// Limbs of Q: q₀, q₁ (p₁, the gallery's modulus), q₂, P.
pub const LIMBS: usize = 4;
/// Query rows of S slices: R₀^σ, R₁^σ for each, then Z.
pub fn rows_of(slices: usize) -> usize {
    2 * slices + 1
}

/// Slices S of rows.len() = (2S + 1)·2·LIMBS·N Shoup rows or (2S + 1)·2·LIMBS·N residues.
pub fn slices_of(rows: usize, n: usize) -> usize {
    (rows / (2 * LIMBS * n)).saturating_sub(1) / 2
}
/// Centred binomial η for the errors (σ = √(η/2) ≈ 3.24, SEAL's σ = 3.2).
pub(super) const ETA: u32 = 21;

pub type Res<T> = Result<T, String>;

pub struct Product {
    pub n: usize,
    pub p: [u64; LIMBS],
    pub(super) m: [Modulus; LIMBS],
    pub(super) plans: Vec<Plan>,
    /// q₀^{-1} mod q₁ (Shoup): CRT of the gallery's two limbs.
    q0_inv: (u64, u64),
    /// p₂ mod p_i.
    p2: [u64; LIMBS],
    /// 32-bit Shoup pairs: N^{-1} mod p_l; P^{-1} mod q₀,q₁,q₂; q₂^{-1} mod q₀,q₁; q₀^{-1} mod q₁.
    pub(super) ninv: [(u32, u32); LIMBS],
    pub(super) pinv: [(u32, u32); 3],
    pub(super) q2inv: [(u32, u32); 2],
    pub(super) q0inv32: (u32, u32),
}

impl Product {
    pub fn new(p: &[u64], n: usize) -> Res<Self> {
        if p.len() != LIMBS {
            return Err(format!(
                "verifier-key product: {LIMBS} primes (q0, q1, q2, P), got {}",
                p.len()
            ));
        }
        let p: [u64; LIMBS] = [p[0], p[1], p[2], p[3]];
        for (i, &x) in p.iter().enumerate() {
            if x >= 1 << 29 || p[..i].contains(&x) || !super::arith::is_prime(x) {
                return Err(format!("verifier-key product: {x} is not a new prime below 2^29"));
            }
        }
        let plans = p
            .iter()
            .map(|&x| Plan::try_new(n, x as u32).ok_or_else(|| format!("NTT: no plan for N = {n}, p = {x}")))
            .collect::<Res<Vec<_>>>()?;
        let m = p.map(Modulus::new);
        let shoup = |i: usize, v: u64| (v, m[i].shoup(v));
        let q0_inv = shoup(1, m[1].inv(p[0] % p[1]));
        let p2 = std::array::from_fn(|i| m[i].mul(p[2] % p[i], p[3] % p[i]));
        let s32 = |i: usize, v: u64| (v as u32, ((v << 32) / p[i]) as u32);
        let ninv = std::array::from_fn(|i| s32(i, m[i].inv(n as u64 % p[i])));
        let pinv = std::array::from_fn(|i| s32(i, m[i].inv(p[3] % p[i])));
        let q2inv = std::array::from_fn(|i| s32(i, m[i].inv(p[2] % p[i])));
        let q0inv32 = s32(1, m[1].inv(p[0] % p[1]));
        Ok(Product {
            n,
            p,
            m,
            plans,
            q0_inv,
            p2,
            ninv,
            pinv,
            q2inv,
            q0inv32,
        })
    }

    /// Small signed integers (|x| < p_l) → NTT form mod p_l.
    pub(super) fn fwd_signed(&self, v: &[i64], l: usize, out: &mut [u32]) {
        let p = self.p[l] as i64;
        for (o, &x) in out.iter_mut().zip(v) {
            *o = small_mod(x, p) as u32;
        }
        self.plans[l].fwd(out);
    }

    /// Gallery ciphertexts (k, 2, 2, N) mod q₀, q₁ (coefficient form) → centred over Q, NTT form (k, 2, 4, N).
    pub fn lift(&self, ct: &[u64]) -> Vec<u32> {
        let n = self.n;
        let (q0, q1) = (self.p[0], self.p[1]);
        let p1 = q0 * q1;
        let p1_mod = [self.m[2].reduce(p1), self.m[3].reduce(p1)];
        let mut out = vec![0u32; ct.len() * 2];
        out.par_chunks_mut(LIMBS * n)
            .zip(ct.par_chunks(2 * n))
            .for_each(|(o, c)| {
                let (a0, a1) = c.split_at(n);
                for j in 0..n {
                    let (x0, x1) = (a0[j], a1[j]);
                    let d = mul_shoup(self.m[1].sub(x1, x0 % q1), self.q0_inv.0, self.q0_inv.1, q1);
                    let x = x0 + q0 * d; // in [0, p₁)
                    o[j] = x0 as u32;
                    o[n + j] = x1 as u32;
                    for (i, l) in [2usize, 3].into_iter().enumerate() {
                        let r = self.m[l].reduce(x);
                        // centred: x − p₁ when x > p₁/2
                        o[l * n + j] = if x > p1 / 2 { self.m[l].sub(r, p1_mod[i]) } else { r } as u32;
                    }
                }
                for (l, limb) in o.chunks_mut(n).enumerate() {
                    self.plans[l].fwd(limb);
                }
            });
        out
    }

    /// Seed 001 Alg. 2 line 13 on packs (G, N) modulus-switched to q' = 2^bits: c'₀ + c'₁·s_v mod q'. The product
    /// c'₁·s_v is exact: |c'₁·s_v| < N·2^bits ≤ q₀q₁/2 (the caller checks it), so it is taken by NTT mod q₀ and mod
    /// q₁, joined by CRT and centred. `s_hat`: s_v in NTT form mod q₀, q₁ (2, N).
    pub fn phase(&self, c0: &[u32], c1: &[u32], s_hat: &[u32], bits: u32) -> Vec<u32> {
        let n = self.n;
        let (q0, q1) = (self.p[0], self.p[1]);
        let mask = u32::MAX >> (32 - bits);
        // s_v·N^{-1} per limb (the inverse NTT's scaling folded in), with Shoup companions
        let s: Vec<(u64, u64)> = s_hat
            .chunks(n)
            .enumerate()
            .flat_map(|(l, row)| {
                let ni = self.m[l].inv(n as u64 % self.p[l]);
                row.iter().map(move |&x| {
                    let w = self.m[l].mul(x as u64, ni);
                    (w, self.m[l].shoup(w))
                })
            })
            .collect();
        let mut out = vec![0u32; c0.len()];
        out.par_chunks_mut(n)
            .zip(c0.par_chunks(n).zip(c1.par_chunks(n)))
            .for_each_init(
                || [vec![0u32; n], vec![0u32; n]],
                |y, (o, (a0, a1))| {
                    for (l, yl) in y.iter_mut().enumerate() {
                        let p = self.p[l];
                        for (t, &x) in yl.iter_mut().zip(a1) {
                            *t = (x as u64 % p) as u32;
                        }
                        self.plans[l].fwd(yl);
                        for (t, &(w, wp)) in yl.iter_mut().zip(&s[l * n..(l + 1) * n]) {
                            *t = mul_shoup(*t as u64, w, wp, p) as u32;
                        }
                        self.plans[l].inv(yl);
                    }
                    for j in 0..n {
                        let (a, b) = (y[0][j] as u64, y[1][j] as u64);
                        let d = mul_shoup(self.m[1].sub(b, a % q1), self.q0_inv.0, self.q0_inv.1, q1);
                        let x = a + q0 * d; // c'₁·s_v mod q₀q₁, in [0, q₀q₁)
                        let v = if x > q0 * q1 / 2 { x.wrapping_sub(q0 * q1) } else { x };
                        o[j] = (a0[j] as u64).wrapping_add(v) as u32 & mask;
                    }
                },
            );
        out
    }

    /// Coefficient residues (…, 4, N) → NTT form.
    pub fn forward(&self, a: &[u64]) -> Vec<u32> {
        let n = self.n;
        let mut out: Vec<u32> = a.iter().map(|&x| x as u32).collect();
        for (i, c) in out.chunks_mut(n).enumerate() {
            self.plans[i % LIMBS].fwd(c);
        }
        out
    }

    /// NTT form (…, 4, N) → coefficient residues.
    pub fn inverse(&self, a: &[u32]) -> Vec<u64> {
        let n = self.n;
        let mut out = Vec::with_capacity(a.len());
        let mut t = vec![0u32; n];
        for (i, c) in a.chunks(n).enumerate() {
            let l = i % LIMBS;
            t.copy_from_slice(c);
            self.plans[l].inv(&mut t);
            let v = self.m[l].inv(n as u64 % self.p[l]);
            let vp = self.m[l].shoup(v);
            out.extend(t.iter().map(|&x| mul_shoup(x as u64, v, vp, self.p[l])));
        }
        out
    }

    /// Uniform polynomials (count, 4, N) in NTT form from a 32-byte seed: ChaCha20, stream 4r + l for row r,
    /// limb l, rejection sampling below p_l. The same seed gives the same rows on both sides.
    pub fn uniform(&self, seed: [u8; 32], count: usize) -> Vec<u32> {
        let n = self.n;
        let mut out = vec![0u32; count * LIMBS * n];
        out.par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, row)| super::rns::uniform_row(seed, i as u64, self.p[i % LIMBS], row, |v| v as u32));
        out
    }

    /// The verifier's rows (seed 001 §4.5): b-halves (2S + 1, 4, N) in NTT form of R₀^σ = Enc(p₂·m_σ),
    /// R₁^σ = Enc(p₂·m_σ·s) for the S messages `msg` (S·N) and Z = Enc(0) under s, with uniform halves from `seed_a`
    /// and errors from `seed_e`.
    pub fn encrypt_rows(&self, s: &[i64], msg: &[i64], seed_a: [u8; 32], seed_e: [u8; 32]) -> Vec<u32> {
        let n = self.n;
        let rows = rows_of(msg.len() / n);
        let a = self.uniform(seed_a, rows);
        let mut e = vec![0i64; rows * n];
        let mut rng = ChaCha20Rng::from_seed(seed_e);
        for x in e.iter_mut() {
            *x = cbd(&mut rng, ETA) as i64;
        }
        let mut out = vec![0u32; rows * LIMBS * n];
        let (mut sh, mut mh, mut eh) = (vec![0u32; n], vec![0u32; n], vec![0u32; n]);
        for l in 0..LIMBS {
            let md = &self.m[l];
            self.fwd_signed(s, l, &mut sh);
            for r in 0..rows {
                if r < rows - 1 {
                    self.fwd_signed(&msg[(r / 2) * n..(r / 2 + 1) * n], l, &mut mh);
                }
                self.fwd_signed(&e[r * n..(r + 1) * n], l, &mut eh);
                let ar = &a[(r * LIMBS + l) * n..(r * LIMBS + l + 1) * n];
                let o = &mut out[(r * LIMBS + l) * n..(r * LIMBS + l + 1) * n];
                for j in 0..n {
                    let (sj, mj) = (sh[j] as u64, mh[j] as u64);
                    let mut v = md.sub(eh[j] as u64, md.mul(ar[j] as u64, sj));
                    let m = if r == rows - 1 {
                        0
                    } else if r % 2 == 0 {
                        md.mul(self.p2[l], mj)
                    } else {
                        md.mul(self.p2[l], md.mul(mj, sj))
                    };
                    v = md.add(v, m);
                    o[j] = v as u32;
                }
            }
        }
        out
    }

    /// The rows (2S + 1, 2, 4, N): b-halves as sent, uniform halves from the seed.
    pub fn rows(&self, b: &[u32], seed_a: [u8; 32]) -> Vec<u32> {
        let n = self.n;
        let rows = b.len() / (LIMBS * n);
        let a = self.uniform(seed_a, rows);
        let mut out = Vec::with_capacity(2 * b.len());
        for r in 0..rows {
            out.extend_from_slice(&b[r * LIMBS * n..(r + 1) * LIMBS * n]);
            out.extend_from_slice(&a[r * LIMBS * n..(r + 1) * LIMBS * n]);
        }
        out
    }

    /// Σ_σ ĉ₀^σ·R₀^σ + ĉ₁^σ·R₁^σ for one gallery ciphertext of S slices (S, 2, 4, N), limb by limb, inverse NTT
    /// without the factor N^{-1}: acc (2, 4, N) coefficient residues times N.
    #[inline(always)]
    pub(super) fn product_one(&self, g: &[u32], rows: &[Shouped], acc: &mut [u32]) {
        self.products(&[g], rows, acc)
    }

    /// `product_one` for several stacks gs into accs (one (2, 4, N) after another), a block of coefficients at a
    /// time: the query's rows of a block (S slices × 4 words × BLOCK) stay in cache across the stacks instead of
    /// being read again from memory for every stack. Residues below 2^29 make every product below 2^58, so up to
    /// FOLD slices' pairs of products add up in 64 bits before one Barrett reduction.
    #[inline(always)]
    pub(super) fn products(&self, gs: &[&[u32]], rows: &[Shouped], accs: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if super::rns::avx512() && self.n.is_multiple_of(16) {
            // SAFETY: the CPU supports AVX-512 F/VL/BW/DQ (checked at run time); N is a multiple of 16.
            unsafe { self.products_avx512(gs, rows, accs) };
            return;
        }
        self.products_portable(gs, rows, accs)
    }

    /// `products` on any CPU (and the test oracle of `products_avx512`).
    #[inline(always)]
    pub(super) fn products_portable(&self, gs: &[&[u32]], rows: &[Shouped], accs: &mut [u32]) {
        const BLOCK: usize = 512;
        const FOLD: usize = 16;
        let n = self.n;
        let one = 2 * LIMBS * n;
        let mut wide = vec![0u64; 2 * BLOCK];
        for l in 0..LIMBS {
            let p = self.p[l];
            let barrett = (u128::from(u64::MAX) + 1) / u128::from(p);
            let reduce = |x: u64| -> u64 {
                let q = ((u128::from(x) * barrett) >> 64) as u64;
                let r = x - q * p;
                if r >= p { r - p } else { r }
            };
            let row = |r: usize, h: usize, c: usize, e: usize| &rows[(r * 2 + h) * LIMBS + l].w[c..e];
            for c in (0..n).step_by(BLOCK) {
                let e = (c + BLOCK).min(n);
                for (g, acc) in gs.iter().zip(accs.chunks_mut(one)) {
                    let (w0, w1) = wide.split_at_mut(BLOCK);
                    let (w0, w1) = (&mut w0[..e - c], &mut w1[..e - c]);
                    w0.fill(0);
                    w1.fill(0);
                    for (sl, gsl) in g.chunks_exact(one).enumerate() {
                        if sl > 0 && sl % FOLD == 0 {
                            w0.iter_mut().chain(w1.iter_mut()).for_each(|v| *v = reduce(*v));
                        }
                        let g0 = &gsl[l * n + c..l * n + e];
                        let g1 = &gsl[(LIMBS + l) * n + c..(LIMBS + l) * n + e];
                        let b = [row(2 * sl, 0, c, e), row(2 * sl + 1, 0, c, e)];
                        let a = [row(2 * sl, 1, c, e), row(2 * sl + 1, 1, c, e)];
                        mac2(w0, w1, g0, g1, b, a);
                    }
                    let (acc0, acc1) = acc.split_at_mut(LIMBS * n);
                    for (o, w) in acc0[l * n + c..l * n + e].iter_mut().zip(w0.iter()) {
                        *o = reduce(*w) as u32;
                    }
                    for (o, w) in acc1[l * n + c..l * n + e].iter_mut().zip(w1.iter()) {
                        *o = reduce(*w) as u32;
                    }
                }
            }
            self.inverse_limb(l, gs.len(), accs);
        }
    }

    /// Limb l of both halves of the first k products in accs (one (2, 4, N) after another) back from NTT form,
    /// without the factor N^{-1}.
    #[inline(always)]
    fn inverse_limb(&self, l: usize, k: usize, accs: &mut [u32]) {
        let n = self.n;
        let t = std::time::Instant::now();
        for acc in accs.chunks_mut(2 * LIMBS * n).take(k) {
            let (acc0, acc1) = acc.split_at_mut(LIMBS * n);
            self.plans[l].inv(&mut acc0[l * n..(l + 1) * n]);
            self.plans[l].inv(&mut acc1[l * n..(l + 1) * n]);
        }
        super::steps::add(super::steps::INTT, t);
    }

    /// `products` with AVX-512: 16 coefficients at a time, the S slices' products summed in four registers
    /// (even and odd coefficients of each half; vpmuludq reads the low 32 bits of every 64-bit lane) instead of
    /// through memory, then reduced by `reduce_avx512`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2")]
    fn products_avx512(&self, gs: &[&[u32]], rows: &[Shouped], accs: &mut [u32]) {
        use std::arch::x86_64::*;
        const BLOCK: usize = 512;
        const FOLD: usize = 16;
        const AHEAD: usize = 128; // words: each of the gallery's 2S streams is prefetched 16 lines ahead
        let n = self.n;
        let one = 2 * LIMBS * n;
        for l in 0..LIMBS {
            let p = self.p[l];
            let (pv, pinv) = (_mm512_set1_epi64(p as i64), _mm512_set1_pd(1.0 / p as f64));
            let ptr = |r: usize, h: usize| rows[(r * 2 + h) * LIMBS + l].w.as_ptr();
            let slices = gs.first().map_or(0, |g| g.len() / one);
            // per slice: b₀, b₁ (the R₀, R₁ b-halves) and a₀, a₁ (their uniform halves) of this limb
            let rp: Vec<[*const u32; 4]> = (0..slices)
                .map(|sl| [ptr(2 * sl, 0), ptr(2 * sl + 1, 0), ptr(2 * sl, 1), ptr(2 * sl + 1, 1)])
                .collect();
            for c in (0..n).step_by(BLOCK) {
                let e = (c + BLOCK).min(n);
                for (g, acc) in gs.iter().zip(accs.chunks_mut(one)) {
                    assert_eq!(g.len(), slices * one, "products: stacks of S slices");
                    for j in (c..e).step_by(16) {
                        let z = _mm512_setzero_si512();
                        let (mut s0e, mut s0o, mut s1e, mut s1o) = (z, z, z, z);
                        for (sl, r) in rp.iter().enumerate() {
                            if sl > 0 && sl % FOLD == 0 {
                                s0e = reduce_avx512(s0e, pv, pinv);
                                s0o = reduce_avx512(s0o, pv, pinv);
                                s1e = reduce_avx512(s1e, pv, pinv);
                                s1o = reduce_avx512(s1o, pv, pinv);
                            }
                            // SAFETY: j + 16 ≤ n (N a multiple of 16), every row holds N words and the stack
                            // S·2·4·N (asserted), so every load reads 16 words in bounds.
                            let [g0, g1, b0, b1, a0, a1] = unsafe {
                                let gsl = g.as_ptr().add(sl * one);
                                if j + AHEAD < n {
                                    _mm_prefetch::<_MM_HINT_T0>(gsl.add(l * n + j + AHEAD).cast());
                                    _mm_prefetch::<_MM_HINT_T0>(gsl.add((LIMBS + l) * n + j + AHEAD).cast());
                                }
                                [
                                    gsl.add(l * n + j),
                                    gsl.add((LIMBS + l) * n + j),
                                    r[0].add(j),
                                    r[1].add(j),
                                    r[2].add(j),
                                    r[3].add(j),
                                ]
                                .map(|x| _mm512_loadu_si512(x.cast()))
                            };
                            (s0e, s1e) = mac_avx512((s0e, s1e), [g0, g1, b0, b1, a0, a1]);
                            let odd = [g0, g1, b0, b1, a0, a1].map(|x| _mm512_srli_epi64::<32>(x));
                            (s0o, s1o) = mac_avx512((s0o, s1o), odd);
                        }
                        let (acc0, acc1) = acc.split_at_mut(LIMBS * n);
                        for (o, (se, so)) in [(acc0, (s0e, s0o)), (acc1, (s1e, s1o))] {
                            let (re, ro) = (reduce_avx512(se, pv, pinv), reduce_avx512(so, pv, pinv));
                            // lane k: coefficient 2k in the low word, 2k + 1 in the high word
                            let v = _mm512_or_si512(re, _mm512_slli_epi64::<32>(ro));
                            // SAFETY: l·N + j + 16 ≤ 4·N, the length of the half `o`.
                            unsafe { _mm512_storeu_si512(o.as_mut_ptr().add(l * n + j).cast(), v) };
                        }
                    }
                }
            }
            self.inverse_limb(l, gs.len(), accs);
        }
    }

    /// Modulus switching Q → 2^w of m coefficients given as limbs x (4, m) of N·c (the unnormalised inverse NTT),
    /// plus the errors e: exact rescaling by P then q₂ (RNS, ⌊x/p⌉ with the centred remainder), CRT of the two
    /// limbs left into [0, p₁), and ⌊2^w·x/p₁⌉ in float64 (its error, below 2^-12, adds to the rounding's ½).
    #[inline(always)]
    pub(super) fn to_wire(&self, x: &mut [u32], m: usize, e: &[i32], out: &mut [u64], w: u32) {
        let p: [u32; LIMBS] = self.p.map(|v| v as u32);
        let (lo, hi) = x.split_at_mut(2 * m);
        let (x01, (x2, x3)) = (lo, hi.split_at_mut(m));
        let (x0, x1) = x01.split_at_mut(m);
        // normalise (× N^{-1}) and add e
        for (l, xs) in [&mut *x0, &mut *x1, &mut *x2, &mut *x3].into_iter().enumerate() {
            let (ni, nip, pl) = (self.ninv[l].0, self.ninv[l].1, p[l]);
            for (v, &ej) in xs.iter_mut().zip(e) {
                let y = red1(shoup32(*v, ni, nip, pl), pl) as i32 + ej;
                *v = (if y < 0 {
                    y + pl as i32
                } else if y >= pl as i32 {
                    y - pl as i32
                } else {
                    y
                }) as u32;
            }
        }
        // ⌊x/P⌉ over q₀, q₁, q₂, then ⌊x/q₂⌉ over q₀, q₁
        drop_limb(&mut [&mut *x0, &mut *x1, &mut *x2], x3, p[3], &self.pinv, &p);
        drop_limb(&mut [&mut *x0, &mut *x1], x2, p[2], &self.q2inv, &p);
        let q0 = p[0] as u64;
        let scale = (1u64 << w) as f64 / (q0 * p[1] as u64) as f64;
        let mask = (1u64 << w) - 1;
        let (qi, qip) = self.q0inv32;
        for ((o, &a), &b) in out.iter_mut().zip(x0.iter()).zip(x1.iter()) {
            let am = red1(a, p[1]); // a < q₀ < 2q₁
            let diff = if b >= am { b - am } else { b + p[1] - am };
            let dlt = red1(shoup32(diff, qi, qip, p[1]), p[1]) as u64;
            let v = a as u64 + q0 * dlt; // in [0, q₀q₁)
            *o = ((v as f64 * scale + 0.5) as i64 as u64) & mask;
        }
    }

    /// Test path: Σ_σ ĉ₀^σ·R₀^σ + ĉ₁^σ·R₁^σ for gallery (k, S, 2, 4, N) and rows (2S + 1, 2, 4, N), coefficient
    /// form (k, 2, 4, N).
    pub fn product(&self, g: &[u32], rows: &[u32]) -> Vec<u64> {
        let n = self.n;
        let sh = shouped(self, rows, rows.len() / n);
        let ninv: Vec<(u64, u64)> = (0..LIMBS)
            .map(|l| {
                let v = self.m[l].inv(n as u64 % self.p[l]);
                (v, self.m[l].shoup(v))
            })
            .collect();
        let slices = slices_of(rows.len(), n);
        let mut out = vec![0u64; g.len() / slices];
        out.par_chunks_mut(2 * LIMBS * n)
            .zip(g.par_chunks(slices * 2 * LIMBS * n))
            .for_each(|(o, gs)| {
                let mut acc = vec![0u32; 2 * LIMBS * n];
                self.product_one(gs, &sh, &mut acc);
                for (i, (d, &x)) in o.iter_mut().zip(&acc).enumerate() {
                    let l = (i / n) % LIMBS;
                    *d = mul_shoup(x as u64, ninv[l].0, ninv[l].1, self.p[l]);
                }
            });
        out
    }
}

/// AES-128-CTR words: block (stream, j) for j = 0, 1, …, two little-endian words a block.
#[inline(always)]
pub(super) fn ctr_words(aes: &Aes128, stream: u64, out: &mut [u64]) {
    let mut blocks = [GenericArray::default(); 8];
    let mut j = 0u128;
    for chunk in out.chunks_mut(16) {
        let need = chunk.len().div_ceil(2);
        for (k, b) in blocks[..need].iter_mut().enumerate() {
            b.copy_from_slice(&(((stream as u128) << 64) | (j + k as u128)).to_le_bytes());
        }
        j += need as u128;
        aes.encrypt_blocks(&mut blocks[..need]);
        for (i, x) in chunk.iter_mut().enumerate() {
            let b = &blocks[i / 2];
            let off = 8 * (i % 2);
            *x = u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"));
        }
    }
}

/// A row polynomial (u32, NTT form) with its 32-bit Shoup companions ⌊w·2^32/p⌋ (empty for a row that only the
/// products read: they reduce in float64).
pub(super) struct Shouped {
    pub(super) w: Vec<u32>,
    pub(super) wp: Vec<u32>,
}

impl Shouped {
    pub(super) fn slice(&self, n: usize) -> (&[u32], &[u32]) {
        (&self.w[..n], &self.wp[..n])
    }
}

/// The rows (…, N) as `Shouped`, the companions only for rows `from` on (one division each: the query's 2S·8
/// product rows need none), in parallel.
pub(super) fn shouped(pr: &Product, rows: &[u32], from: usize) -> Vec<Shouped> {
    rows.par_chunks(pr.n)
        .enumerate()
        .map(|(i, c)| {
            let p = pr.p[i % LIMBS];
            Shouped {
                w: c.to_vec(),
                wp: if i < from {
                    Vec::new()
                } else {
                    c.iter().map(|&w| (((w as u64) << 32) / p) as u32).collect()
                },
            }
        })
        .collect()
}

#[inline(always)]
pub(super) fn shoup32(x: u32, w: u32, wp: u32, p: u32) -> u32 {
    let q = ((x as u64 * wp as u64) >> 32) as u32;
    x.wrapping_mul(w).wrapping_sub(q.wrapping_mul(p))
}

#[inline(always)]
pub(super) fn red1(x: u32, p: u32) -> u32 {
    if x >= p { x - p } else { x }
}

/// (s₀ + g₀·b₀ + g₁·b₁, s₁ + g₀·a₀ + g₁·a₁) on the low 32 bits of every 64-bit lane of [g₀, g₁, b₀, b₁, a₀, a₁].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn mac_avx512(
    (s0, s1): (std::arch::x86_64::__m512i, std::arch::x86_64::__m512i),
    [g0, g1, b0, b1, a0, a1]: [std::arch::x86_64::__m512i; 6],
) -> (std::arch::x86_64::__m512i, std::arch::x86_64::__m512i) {
    use std::arch::x86_64::*;
    let dot = |x: __m512i, y: __m512i| _mm512_add_epi64(_mm512_mul_epu32(g0, x), _mm512_mul_epu32(g1, y));
    (_mm512_add_epi64(s0, dot(b0, b1)), _mm512_add_epi64(s1, dot(a0, a1)))
}

/// x mod p for 64-bit lanes x < 2^63 and p < 2^29: the quotient from float64 (off by at most one, as x·2^-53/p
/// is far below 1), then one correction each way.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
#[inline]
fn reduce_avx512(
    x: std::arch::x86_64::__m512i,
    p: std::arch::x86_64::__m512i,
    pinv: std::arch::x86_64::__m512d,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    let q = _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_cvtepu64_pd(x), pinv));
    let r = _mm512_sub_epi64(x, _mm512_mullo_epi64(q, p));
    let neg = _mm512_cmplt_epi64_mask(r, _mm512_setzero_si512());
    let r = _mm512_mask_add_epi64(r, neg, r, p);
    let big = _mm512_cmpge_epi64_mask(r, p);
    _mm512_mask_sub_epi64(r, big, r, p)
}

/// x_l ← (x_l − [r]_centred)·r_p^{-1} mod p_l for the kept limbs, r the dropped limb's residues mod its prime rp:
/// the RNS form of ⌊x/rp⌉.
#[inline(always)]
pub(super) fn drop_limb(kept: &mut [&mut [u32]], r: &[u32], rp: u32, inv: &[(u32, u32)], p: &[u32; LIMBS]) {
    let half = rp / 2;
    for (l, xs) in kept.iter_mut().enumerate() {
        let pl = p[l];
        let rp_mod = rp % pl;
        let (wi, wip) = inv[l];
        for (v, &rv) in xs.iter_mut().zip(r) {
            // [r]_centred mod p_l: r mod p_l (r < 4p_l), minus rp when r > rp/2
            let mut t = rv;
            for _ in 0..3 {
                t = red1(t, pl);
            }
            let neg = if rv > half { rp_mod } else { 0 };
            t = if t >= neg { t - neg } else { t + pl - neg };
            let dlt = if *v >= t { *v - t } else { *v + pl - t };
            *v = red1(shoup32(dlt, wi, wip, pl), pl);
        }
    }
}

/// x mod p for |x| < p.
#[inline(always)]
pub(super) fn small_mod(x: i64, p: i64) -> u64 {
    (if x < 0 { x + p } else { x }) as u64
}

/// A centred binomial sample: popcount of η random bits minus popcount of η more.
#[inline(always)]
pub(super) fn cbd(rng: &mut ChaCha20Rng, eta: u32) -> i32 {
    cbd_word(rng.next_u64(), eta)
}

#[inline(always)]
pub(super) fn cbd_word(v: u64, eta: u32) -> i32 {
    let m = (1u64 << eta) - 1;
    (v & m).count_ones() as i32 - ((v >> 32) & m).count_ones() as i32
}

/// o0 += g0·b₀ + g1·b₁ and o1 += g0·a₀ + g1·a₁ in 64 bits (residues below 2^29: each pair below 2^59), no
/// reduction; 32×32 → 64-bit products, so the loop vectorises (vpmuludq).
#[inline(always)]
fn mac2_body(o0: &mut [u64], o1: &mut [u64], g0: &[u32], g1: &[u32], b: [&[u32]; 2], a: [&[u32]; 2]) {
    let n = o0.len();
    let (o1, g0, g1) = (&mut o1[..n], &g0[..n], &g1[..n]);
    let (b0, b1, a0, a1) = (&b[0][..n], &b[1][..n], &a[0][..n], &a[1][..n]);
    for j in 0..n {
        let (x0, x1) = (u64::from(g0[j]), u64::from(g1[j]));
        o0[j] += x0 * u64::from(b0[j]) + x1 * u64::from(b1[j]);
        o1[j] += x0 * u64::from(a0[j]) + x1 * u64::from(a1[j]);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2")]
unsafe fn mac2_avx512(o0: &mut [u64], o1: &mut [u64], g0: &[u32], g1: &[u32], b: [&[u32]; 2], a: [&[u32]; 2]) {
    mac2_body(o0, o1, g0, g1, b, a)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mac2_avx2(o0: &mut [u64], o1: &mut [u64], g0: &[u32], g1: &[u32], b: [&[u32]; 2], a: [&[u32]; 2]) {
    mac2_body(o0, o1, g0, g1, b, a)
}

fn mac2(o0: &mut [u64], o1: &mut [u64], g0: &[u32], g1: &[u32], b: [&[u32]; 2], a: [&[u32]; 2]) {
    #[cfg(target_arch = "x86_64")]
    if super::rns::avx512() {
        // SAFETY: the CPU supports AVX-512 F/VL/BW/DQ (checked at run time).
        unsafe { mac2_avx512(o0, o1, g0, g1, b, a) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::rns::avx2() {
        // SAFETY: the CPU supports AVX2 (checked at run time).
        unsafe { mac2_avx2(o0, o1, g0, g1, b, a) };
        return;
    }
    mac2_body(o0, o1, g0, g1, b, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primes(n: usize) -> Vec<u64> {
        let mut p = super::super::arith::ntt_primes(27, n as u64, 3);
        p.extend(super::super::arith::ntt_primes(28, n as u64, 1));
        p
    }

    /// The AVX-512 products equal the portable ones: random residues and residues at p − 1 (the largest sums),
    /// S = 1, 16 (one full fold) and 33 (two reductions between the slices), several stacks.
    #[test]
    fn avx512_products_equal_portable() {
        if !super::super::rns::avx512() {
            return;
        }
        let n = 256;
        let pr = Product::new(&primes(n), n).unwrap();
        let mut rng = ChaCha20Rng::from_seed([9; 32]);
        for slices in [1usize, 16, 33] {
            for top in [false, true] {
                let res = |rng: &mut ChaCha20Rng, i: usize| {
                    let p = pr.p[(i / n) % LIMBS];
                    (if top { p - 1 } else { rng.next_u64() % p }) as u32
                };
                let rows: Vec<u32> = (0..rows_of(slices) * 2 * LIMBS * n).map(|i| res(&mut rng, i)).collect();
                let g: Vec<u32> = (0..3 * slices * 2 * LIMBS * n).map(|i| res(&mut rng, i)).collect();
                let sh = shouped(&pr, &rows, rows.len() / n);
                let gs: Vec<&[u32]> = g.chunks(slices * 2 * LIMBS * n).collect();
                let (mut want, mut got) = (vec![0u32; 3 * 2 * LIMBS * n], vec![0u32; 3 * 2 * LIMBS * n]);
                pr.products_portable(&gs, &sh, &mut want);
                // SAFETY: the CPU supports AVX-512 F/VL/BW/DQ (checked above).
                unsafe { pr.products_avx512(&gs, &sh, &mut got) };
                assert_eq!(want, got, "S = {slices}, top = {top}");
            }
        }
    }

    /// Encrypt under s, multiply by a gallery ciphertext of a known message, decrypt: the product's phase.
    #[test]
    fn rows_decrypt_and_product_scales() {
        let n = 64;
        let pr = Product::new(&primes(n), n).unwrap();
        let mut rng = ChaCha20Rng::from_seed([7; 32]);
        let s: Vec<i64> = (0..n).map(|_| cbd(&mut rng, 1) as i64).collect();
        let m: Vec<i64> = (0..n).map(|i| (i as i64 % 5) - 2).collect();
        let b = pr.encrypt_rows(&s, &m, [1; 32], [2; 32]);
        let rows = pr.rows(&b, [1; 32]);
        // b + a·s = e + message, limb 0 (p₂ ≡ 0 mod q₂, P)
        let mut sh = vec![0u32; n];
        pr.fwd_signed(&s, 0, &mut sh);
        let m0 = &pr.m[0];
        let mut ph: Vec<u32> = (0..n)
            .map(|j| m0.add(rows[j] as u64, m0.mul(rows[LIMBS * n + j] as u64, sh[j] as u64)) as u32)
            .collect();
        pr.plans[0].inv(&mut ph);
        let ninv = m0.inv(n as u64);
        for (j, &v) in ph.iter().enumerate() {
            let v = m0.mul(v as u64, ninv);
            let want = m0.mul(pr.p2[0], m0.from_i64(m[j]));
            let diff = m0.sub(v, want);
            assert!(diff < 50 || diff > pr.p[0] - 50, "row 0 noise too large at {j}");
        }
    }
}
