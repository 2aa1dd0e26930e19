//! PackLWEs (Chen, Dai, Kim and Song, "Efficient homomorphic conversion between (ring) LWE ciphertexts",
//! ACNS 2021, Alg. 2) for cryptomask's distances: the d ciphertexts of a group, each holding its inner products at
//! the coefficients k·d − 1 (seed 001 §2.2), become one ciphertext holding all of them, so the CS sends one
//! (c₀, c₁) per d gallery ciphertexts instead of d c₁'s (§4.3's 2Nq bits per ciphertext).
//!
//! With d a power of two, S = Z[X^d] is the subring fixed by the automorphisms τ_k: X ↦ X^k with k ≡ 1 mod 2N/d, a
//! group of order d = [R : S]. Each input is first multiplied by −d^{-1}·X^{N−d+1} = d^{-1}·X^{−(d−1)}, which moves
//! its products to the coefficients m·d (its S-part). Level l = 1 … log₂ d merges item r with item r + d/2^l:
//! ct ← (ct_r + X^{d/2^l}·ct_{r+d/2^l}) + τ_k(ct_r − X^{d/2^l}·ct_{r+d/2^l}) with k = 1 + (2N/d)·2^{l−1}, which maps
//! X^{d/2^l} to −X^{d/2^l}. After log₂ d levels item r's S-part sits at the coefficients m·d + r, times d (undone by
//! the d^{-1} above), and every other coefficient of every input (the cross-correlations of gallery and query)
//! is gone: the levels together apply the trace of R over S.
//!
//! The packing runs at q₀q₁ (the products are dropped from Q by P and q₂ first): τ_k is applied to the coefficients
//! and switched back from τ_k(s) to s with a Galois key over q₀q₁P, gadget digits [c]_{q₀} and [c]_{q₁}; the
//! switching noise stays near 2^-20 of a plaintext step.
//! Hand-written: no maintained Rust crate offers BFV automorphisms in SEAL's RNS layout.

use aes::Aes128;
use aes::cipher::KeyInit;
use aes::cipher::generic_array::GenericArray;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use std::cell::RefCell;

use rayon::prelude::*;

use super::steps::{self, DROP, FINISH, MAC, PACK, PACK_NTT};
use super::verifier_key::{
    ETA, LIMBS, Product, Res, Shouped, cbd, cbd_word, ctr_words, drop_limb, red1, shoup32, shouped, slices_of,
};

/// Shoup rows of Galois keys (…, 3, N) over q₀, q₁, P.
fn shouped_key(pr: &Product, keys: &[u32]) -> Vec<Shouped> {
    keys.par_chunks(pr.n)
        .enumerate()
        .map(|(i, c)| {
            let p = pr.p[KEY[i % KL]];
            Shouped {
                w: c.to_vec(),
                wp: c.iter().map(|&w| (((w as u64) << 32) / p) as u32).collect(),
            }
        })
        .collect()
}

/// Limbs of a ciphertext while it is packed: q₀, q₁ (P only inside the key switching).
pub const DATA: usize = 2;
/// Gadget digits of a Galois key: [c]_{q₀} and [c]_{q₁}.
pub const DIGITS: usize = 2;
/// Limbs of a Galois key: q₀, q₁, P (indices into the product's four primes).
pub const KEY: [usize; 3] = [0, 1, 3];
const KL: usize = KEY.len();
/// u32 words of one packed-stage ciphertext (2, DATA, N) per coefficient.
const CT: usize = 2 * DATA;

/// Gallery stacks per product task: the query's rows of a coefficient block are read once for all of them.
const GROUP: usize = 8;

/// log₂ d, the levels (and Galois keys) for groups of d ciphertexts.
pub fn levels(n: usize, d: usize) -> Res<usize> {
    if !d.is_power_of_two() || d < 2 || d > n / 2 {
        return Err(format!(
            "packing: the stride d must be a power of two in [2, N/2], got {d}"
        ));
    }
    Ok(d.trailing_zeros() as usize)
}

/// The Galois element k of level l (1-based): 1 + (2N/d)·2^{l−1}.
pub fn galois_element(n: usize, d: usize, l: usize) -> usize {
    1 + ((2 * n / d) << (l - 1))
}

/// τ_k as a table: coefficient i moves to dest & (N − 1), negated when dest ≥ N (X^N = −1).
fn galois_table(n: usize, k: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * k) & (2 * n - 1)) as u32).collect()
}

/// τ_k(a) mod p by its table.
#[inline(always)]
fn permute(a: &[u32], table: &[u32], p: u32, out: &mut [u32]) {
    let n = a.len();
    for (&x, &j) in a.iter().zip(table) {
        let j = j as usize;
        if j < n {
            out[j] = x;
        } else {
            out[j - n] = red1(p - x, p);
        }
    }
}

impl Product {
    fn p32(&self) -> [u32; LIMBS] {
        self.p.map(|v| v as u32)
    }

    /// Galois keys (levels, DIGITS, 2, 3, N) over q₀, q₁, P in NTT form for the secret s (N small integers) and
    /// stride d: K_j = (−a_j·s + e_j + P·g_j·τ_k(s), a_j), g_j the gadget of digit j (1 mod q_j, 0 mod the other).
    pub fn galois_keys(&self, s: &[i64], d: usize, seed_a: [u8; 32], seed_e: [u8; 32]) -> Res<Vec<u32>> {
        let n = self.n;
        let lv = levels(n, d)?;
        let a = self.uniform(seed_a, lv * DIGITS); // (·, 4, N): limbs 0, 1, 3 used
        let mut rng = ChaCha20Rng::from_seed(seed_e);
        let e: Vec<i64> = (0..lv * DIGITS * n).map(|_| cbd(&mut rng, ETA) as i64).collect();
        let mut out = vec![0u32; lv * DIGITS * 2 * KL * n];
        let (mut sh, mut th, mut eh) = (vec![0u32; n], vec![0u32; n], vec![0u32; n]);
        let mut ts = vec![0i64; n];
        for l in 0..lv {
            for (&x, &j) in s.iter().zip(&galois_table(n, galois_element(n, d, l + 1))) {
                let j = j as usize;
                if j < n { ts[j] = x } else { ts[j - n] = -x }
            }
            for (kl, &limb) in KEY.iter().enumerate() {
                let md = &self.m[limb];
                self.fwd_signed(s, limb, &mut sh);
                self.fwd_signed(&ts, limb, &mut th);
                let pg = md.reduce(self.p[3]);
                for j in 0..DIGITS {
                    let r = l * DIGITS + j;
                    self.fwd_signed(&e[r * n..(r + 1) * n], limb, &mut eh);
                    let ar = &a[(r * LIMBS + limb) * n..(r * LIMBS + limb + 1) * n];
                    let base = ((r * 2) * KL + kl) * n;
                    for t in 0..n {
                        let mut v = md.sub(eh[t] as u64, md.mul(ar[t] as u64, sh[t] as u64));
                        if limb == j {
                            v = md.add(v, md.mul(pg, th[t] as u64));
                        }
                        out[base + t] = v as u32;
                        out[base + KL * n + t] = ar[t];
                    }
                }
            }
        }
        Ok(out)
    }

    /// Key switching of τ_k(c)'s c₁ (DATA, N) coefficient form back to s: (k₀, k₁), each (DATA, N), with the key
    /// `key` (DIGITS·2·3 Shoup rows): ⌊(Σ_j D_j·K_j)/P⌉ mod q₀q₁, D_j = [c]_{q_j}.
    #[inline(always)]
    fn switch(&self, c: &[u32], key: &[Shouped], dg: &mut [u32], accs: &mut [u32], k0: &mut [u32], k1: &mut [u32]) {
        let n = self.n;
        let p = self.p32();
        let (x0, x1) = c.split_at(n);
        let (d0, d1) = dg.split_at_mut(KL * n);
        let (d00, r0) = d0.split_at_mut(n);
        let (d01, d03) = r0.split_at_mut(n);
        let (d10, r1) = d1.split_at_mut(n);
        let (d11, d13) = r1.split_at_mut(n);
        // digits below q_j < P, and each prime below twice any other
        for t in 0..n {
            let (a, b) = (x0[t], x1[t]);
            d00[t] = a;
            d01[t] = red1(a, p[1]);
            d03[t] = a;
            d10[t] = red1(b, p[0]);
            d11[t] = b;
            d13[t] = b;
        }
        let t = std::time::Instant::now();
        for (i, row) in dg.chunks_mut(n).enumerate() {
            self.plans[KEY[i % KL]].fwd(row);
        }
        steps::add(PACK_NTT, t);
        for h in 0..2 {
            for (kl, &l) in KEY.iter().enumerate() {
                let pl = p[l];
                let o = &mut accs[(h * KL + kl) * n..(h * KL + kl + 1) * n];
                let (w0, wp0) = key[h * KL + kl].slice(n);
                let (w1, wp1) = key[(2 + h) * KL + kl].slice(n);
                let (a0, a1) = (&dg[kl * n..(kl + 1) * n], &dg[(KL + kl) * n..(KL + kl + 1) * n]);
                for t in 0..n {
                    let s = shoup32(a0[t], w0[t], wp0[t], pl) + shoup32(a1[t], w1[t], wp1[t], pl);
                    o[t] = red1(red1(s, 2 * pl), pl);
                }
                let t = std::time::Instant::now();
                self.plans[l].inv(o);
                steps::add(PACK_NTT, t);
                let (ni, nip) = self.ninv[l];
                for v in o.iter_mut() {
                    *v = red1(shoup32(*v, ni, nip, pl), pl);
                }
            }
        }
        for (h, out) in [k0, k1].into_iter().enumerate() {
            let acc = &mut accs[h * KL * n..(h + 1) * KL * n];
            let (kept, last) = acc.split_at_mut(DATA * n);
            let (a0, a1) = kept.split_at_mut(n);
            drop_limb(&mut [&mut *a0, &mut *a1], last, p[3], &self.pinv, &p);
            out.copy_from_slice(kept);
        }
    }

    /// One merge of level l: e ← (e + X^s·o) + τ_k(e − X^s·o), items (2, DATA, N) coefficient form.
    #[inline(always)]
    fn merge(&self, e: &mut [u32], o: &[u32], s: usize, perm: &[u32], key: &[Shouped], sc: &mut Scratch) {
        let n = self.n;
        let p = self.p32();
        for (r, (ev, ov)) in e.chunks_mut(n).zip(o.chunks(n)).enumerate() {
            let pl = p[r % DATA];
            let b = &mut sc.b[r * n..(r + 1) * n];
            // X^s·o: o_i at i + s, negated past N; a = e + X^s·o (in place), b = e − X^s·o
            let (e_lo, e_hi) = ev.split_at_mut(s);
            let (b_lo, b_hi) = b.split_at_mut(s);
            let (o_lo, o_hi) = ov.split_at(n - s);
            for ((y, d), &x) in e_hi.iter_mut().zip(b_hi.iter_mut()).zip(o_lo) {
                let v = *y;
                *y = red1(v + x, pl);
                *d = red1(v + pl - x, pl);
            }
            for ((y, d), &x) in e_lo.iter_mut().zip(b_lo.iter_mut()).zip(o_hi) {
                let v = *y;
                *y = red1(v + pl - x, pl);
                *d = red1(v + x, pl);
            }
            permute(b, perm, pl, &mut sc.tb[r * n..(r + 1) * n]);
        }
        let Scratch {
            tb, digits, acc, kk, ..
        } = sc;
        let (k0, k1) = kk.split_at_mut(DATA * n);
        self.switch(&tb[DATA * n..], key, digits, acc, k0, k1);
        for (r, ev) in e.chunks_mut(n).enumerate() {
            let pl = p[r % DATA];
            let add: &[u32] = if r < DATA {
                &k0[r * n..(r + 1) * n]
            } else {
                &k1[(r - DATA) * n..(r - DATA + 1) * n]
            };
            let t0: &[u32] = if r < DATA { &tb[r * n..(r + 1) * n] } else { &[] };
            for (t, v) in ev.iter_mut().enumerate() {
                let mut x = red1(*v + add[t], pl);
                if r < DATA {
                    x = red1(x + t0[t], pl);
                }
                *v = x;
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2")]
    unsafe fn merge_avx512(&self, e: &mut [u32], o: &[u32], s: usize, perm: &[u32], key: &[Shouped], sc: &mut Scratch) {
        self.merge(e, o, s, perm, key, sc)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn merge_avx2(&self, e: &mut [u32], o: &[u32], s: usize, perm: &[u32], key: &[Shouped], sc: &mut Scratch) {
        self.merge(e, o, s, perm, key, sc)
    }

    fn merge_fast(&self, e: &mut [u32], o: &[u32], s: usize, perm: &[u32], key: &[Shouped], sc: &mut Scratch) {
        #[cfg(target_arch = "x86_64")]
        if super::rns::avx512() {
            // SAFETY: the CPU supports AVX-512 F/VL/BW/DQ (checked at run time).
            unsafe { self.merge_avx512(e, o, s, perm, key, sc) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if super::rns::avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time).
            unsafe { self.merge_avx2(e, o, s, perm, key, sc) };
            return;
        }
        self.merge(e, o, s, perm, key, sc)
    }

    /// PackLWEs over groups of d items (G·d, 2, DATA, N) coefficient form, in place: item g·d of each group ends
    /// up holding the group's pack.
    pub fn pack(&self, items: &mut [u32], d: usize, keys: &[u32]) -> Res<()> {
        let n = self.n;
        let lv = levels(n, d)?;
        let item = CT * n;
        if !items.len().is_multiple_of(d * item) || keys.len() != lv * DIGITS * 2 * KL * n {
            return Err("packing: items (G·d, 2, 2, N) and keys (levels, 2, 2, 3, N)".into());
        }
        let sh = shouped_key(self, keys);
        let tables: Vec<Vec<u32>> = (1..=lv).map(|l| galois_table(n, galois_element(n, d, l))).collect();
        // groups in parallel, each one's levels in order (a level's merges also in parallel, for few groups)
        items.par_chunks_mut(d * item).for_each(|group| {
            for l in 1..=lv {
                let half = d >> l;
                let (k, key) = (&tables[l - 1], &sh[(l - 1) * DIGITS * 2 * KL..l * DIGITS * 2 * KL]);
                let (lo, hi) = group[..2 * half * item].split_at_mut(half * item);
                lo.par_chunks_mut(item).zip(hi.par_chunks(item)).for_each(|(e, o)| {
                    let t = std::time::Instant::now();
                    with_scratch(n, |sc| self.merge_fast(e, o, half, k, key, sc));
                    steps::add(PACK, t);
                });
                // the merged items now sit at 0 … half − 1
            }
        });
        Ok(())
    }

    /// Alg. 2 lines 5–11 with packing: the gallery (k, S, 2, 4, N), given in consecutive parts, times the rows
    /// (2S + 1, 2, 4, N) as ``product`` does, groups of d consecutive stacks packed (a short last group padded with zeros), then per packed
    /// ciphertext g: + u·Z + (e₀, e₁) with u, e from AES-128-CTR block (offset + g, j), switched to q' = 2^w[0]
    /// (c₀) and to 2^w[1] (c₁, w[1] ≤ w[0]: §4.5's compressed c₁): (c₁ (G, N), c₀ (G, N)), the entry of gallery
    /// ciphertext g·d + r, row m at coefficient m·d + r.
    #[allow(clippy::too_many_arguments)]
    pub fn packed_distances(
        &self,
        g: &[&[u32]],
        rows: &[u32],
        keys: &[u32],
        d: usize,
        seed: [u8; 32],
        offset: u64,
        w: [u32; 2],
    ) -> Res<(Vec<u64>, Vec<u64>)> {
        let n = self.n;
        levels(n, d)?;
        let slices = slices_of(rows.len(), n);
        let one = slices * 2 * LIMBS * n;
        if slices == 0 || g.iter().all(|p| p.is_empty()) || g.iter().any(|p| !p.len().is_multiple_of(one)) {
            return Err("distances: gallery (k, S, 2, 4, N) and rows (2S + 1, 2, 4, N)".into());
        }
        let stacks: Vec<&[u32]> = g.iter().flat_map(|p| p.chunks(one)).collect();
        let k = stacks.len();
        let groups = k.div_ceil(d);
        let item = CT * n;
        let sh = shouped(self, rows, 2 * slices * 2 * LIMBS); // companions for Z only (`Finish`)
        // −d^{-1}·X^{N−d+1}: its factor per limb, and N·P per limb for the final lift of the pack over Q
        let prep = Prep {
            sh: &sh,
            scale: (0..DATA)
                .map(|l| {
                    let v = self.m[l].sub(0, self.m[l].inv(d as u64 % self.p[l]));
                    (v as u32, ((v << 32) / self.p[l]) as u32)
                })
                .collect(),
            shift: n - d + 1,
        };
        let np: Vec<(u32, u32)> = (0..DATA)
            .map(|l| {
                let v = self.m[l].mul(
                    self.m[l].mul(n as u64 % self.p[l], self.p[3] % self.p[l]),
                    self.p[2] % self.p[l],
                );
                (v as u32, ((v << 32) / self.p[l]) as u32)
            })
            .collect();
        let mut items = vec![0u32; groups * d * item];
        items[..k * item]
            .par_chunks_mut(GROUP * item)
            .zip(stacks.par_chunks(GROUP))
            .for_each(|(out, gs)| with_scratch(n, |sc| self.prep_fast(&prep, gs, &mut sc.prod, out)));
        self.pack(&mut items, d, keys)?;
        let aes = Aes128::new(GenericArray::from_slice(&seed[..16]));
        let job = Finish {
            z: &sh[2 * slices * 2 * LIMBS..],
            np: &np,
            aes: &aes,
            w: w[0],
            w1: w[1],
        };
        let mut c1 = vec![0u64; groups * n];
        let mut c0 = vec![0u64; groups * n];
        c1.par_chunks_mut(n)
            .zip(c0.par_chunks_mut(n))
            .zip(items.par_chunks(d * item))
            .enumerate()
            .for_each(|(gi, ((o1, o0), grp))| self.finish_fast(&job, &grp[..item], offset + gi as u64, o1, o0));
        Ok((c1, c0))
    }
}

impl Product {
    /// One gallery ciphertext's product (``product_one``), dropped from Q to q₀q₁ (by P, then q₂) and multiplied by
    /// −d^{-1}·X^{N−d+1} (``Prep``) into `out` (2, DATA, N).
    #[inline(always)]
    fn prep(&self, job: &Prep, gs: &[&[u32]], accs: &mut [u32], outs: &mut [u32]) {
        let n = self.n;
        let t = std::time::Instant::now();
        self.products(gs, job.sh, accs);
        steps::add(MAC, t); // with the inverse NTTs, which `steps::take` takes out
        let t = std::time::Instant::now();
        for (acc, out) in accs
            .chunks_mut(2 * LIMBS * n)
            .zip(outs.chunks_mut(CT * n))
            .take(gs.len())
        {
            self.prep_one(job, acc, out);
        }
        steps::add(DROP, t);
    }

    /// The drop and the factor of `prep` for one product.
    #[inline(always)]
    fn prep_one(&self, job: &Prep, acc: &mut [u32], out: &mut [u32]) {
        let n = self.n;
        let p = self.p32();
        let (scale, shift) = (&job.scale, job.shift);
        for (h, x) in acc.chunks_mut(LIMBS * n).enumerate() {
            for (l, limb) in x.chunks_mut(n).enumerate() {
                let (ni, nip) = self.ninv[l];
                for v in limb.iter_mut() {
                    *v = red1(shoup32(*v, ni, nip, p[l]), p[l]);
                }
            }
            let (kept, last) = x.split_at_mut(3 * n);
            let (a01, a2) = kept.split_at_mut(2 * n);
            let (a0, a1) = a01.split_at_mut(n);
            drop_limb(&mut [&mut *a0, &mut *a1, &mut *a2], last, p[3], &self.pinv, &p);
            drop_limb(&mut [&mut *a0, &mut *a1], a2, p[2], &self.q2inv, &p);
            for l in 0..DATA {
                let (c, cp, pl) = (scale[l].0, scale[l].1, p[l]);
                let dst = &mut out[(h * DATA + l) * n..(h * DATA + l + 1) * n];
                let (d_lo, d_hi) = dst.split_at_mut(shift);
                let (s_lo, s_hi) = kept[l * n..(l + 1) * n].split_at(n - shift);
                for (y, &v) in d_hi.iter_mut().zip(s_lo) {
                    *y = red1(shoup32(v, c, cp, pl), pl);
                }
                for (y, &v) in d_lo.iter_mut().zip(s_hi) {
                    *y = red1(pl - red1(shoup32(v, c, cp, pl), pl), pl);
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2")]
    unsafe fn prep_avx512(&self, job: &Prep, gs: &[&[u32]], acc: &mut [u32], out: &mut [u32]) {
        self.prep(job, gs, acc, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn prep_avx2(&self, job: &Prep, gs: &[&[u32]], acc: &mut [u32], out: &mut [u32]) {
        self.prep(job, gs, acc, out)
    }

    fn prep_fast(&self, job: &Prep, gs: &[&[u32]], acc: &mut [u32], out: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if super::rns::avx512() {
            // SAFETY: the CPU supports AVX-512 F/VL/BW/DQ (checked at run time).
            unsafe { self.prep_avx512(job, gs, acc, out) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if super::rns::avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time).
            unsafe { self.prep_avx2(job, gs, acc, out) };
            return;
        }
        self.prep(job, gs, acc, out)
    }

    /// One pack (2, DATA, N) at q₀q₁ → + u·Z + (e₀, e₁) over Q, switched to 2^w: its c₁ and c₀ (N each); u, e from
    /// AES-128-CTR block (stream, j).
    #[inline(always)]
    fn finish(&self, job: &Finish, packed: &[u32], stream: u64, o1: &mut [u64], o0: &mut [u64]) {
        let t = std::time::Instant::now();
        let n = self.n;
        let p = self.p32();
        let mut words = vec![0u64; n / 32 + 2 * n + 1];
        ctr_words(job.aes, stream, &mut words);
        let (uw, ew) = words.split_at(n / 32);
        let u: Vec<i64> = (0..n)
            .map(|i| {
                let v = uw[i / 32] >> (2 * (i % 32));
                (v & 1) as i64 - ((v >> 1) & 1) as i64
            })
            .collect();
        let e: Vec<i32> = ew[..2 * n].iter().map(|&v| cbd_word(v, ETA)).collect();
        let mut acc = vec![0u32; 2 * LIMBS * n];
        let mut uh = vec![0u32; n];
        for l in 0..LIMBS {
            self.fwd_signed(&u, l, &mut uh);
            for h in 0..2 {
                let (zw, zp) = job.z[h * LIMBS + l].slice(n);
                let o = &mut acc[(h * LIMBS + l) * n..(h * LIMBS + l + 1) * n];
                for t in 0..n {
                    o[t] = red1(shoup32(uh[t], zw[t], zp[t], p[l]), p[l]);
                }
                self.plans[l].inv(o);
                if l < DATA {
                    // + N·P·q₂·pack (the inverse NTT above leaves its output times N)
                    let (c, cp) = job.np[l];
                    let src = &packed[(h * DATA + l) * n..(h * DATA + l + 1) * n];
                    for (x, &y) in o.iter_mut().zip(src) {
                        *x = red1(*x + red1(shoup32(y, c, cp, p[l]), p[l]), p[l]);
                    }
                }
            }
        }
        let (a0, a1) = acc.split_at_mut(LIMBS * n);
        self.to_wire(a1, n, &e[..n], o1, job.w1);
        self.to_wire(a0, n, &e[n..], o0, job.w);
        steps::add(FINISH, t);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2")]
    unsafe fn finish_avx512(&self, job: &Finish, packed: &[u32], stream: u64, o1: &mut [u64], o0: &mut [u64]) {
        self.finish(job, packed, stream, o1, o0)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn finish_avx2(&self, job: &Finish, packed: &[u32], stream: u64, o1: &mut [u64], o0: &mut [u64]) {
        self.finish(job, packed, stream, o1, o0)
    }

    fn finish_fast(&self, job: &Finish, packed: &[u32], stream: u64, o1: &mut [u64], o0: &mut [u64]) {
        #[cfg(target_arch = "x86_64")]
        if super::rns::avx512() {
            // SAFETY: the CPU supports AVX-512 F/VL/BW/DQ (checked at run time).
            unsafe { self.finish_avx512(job, packed, stream, o1, o0) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if super::rns::avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time).
            unsafe { self.finish_avx2(job, packed, stream, o1, o0) };
            return;
        }
        self.finish(job, packed, stream, o1, o0)
    }
}

/// What every product's ``prep`` shares: the rows' Shoup form, −d^{-1} mod q₀, q₁ (Shoup) and the shift N − d + 1.
struct Prep<'a> {
    sh: &'a [Shouped],
    scale: Vec<(u32, u32)>,
    shift: usize,
}

/// What every pack's ``finish`` shares: Z's Shoup form, N·P·q₂ mod q₀, q₁ (Shoup), the AES-CTR key of u and e,
/// and the wire's bits: w for c₀, w1 ≤ w for c₁.
struct Finish<'a> {
    z: &'a [Shouped],
    np: &'a [(u32, u32)],
    aes: &'a Aes128,
    w: u32,
    w1: u32,
}

thread_local! {
    /// This thread's buffers, kept across calls (a merge takes ≈ 400 KB; allocating them per merge cost page faults).
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

fn with_scratch<R>(n: usize, f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|s| s.n != n) {
            *slot = Some(Scratch::new(n));
        }
        f(slot.as_mut().expect("scratch set above"))
    })
}

/// Per-thread buffers of a merge and of a product.
struct Scratch {
    n: usize,
    prod: Vec<u32>,
    b: Vec<u32>,
    tb: Vec<u32>,
    digits: Vec<u32>,
    acc: Vec<u32>,
    kk: Vec<u32>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Scratch {
            n,
            prod: vec![0; GROUP * 2 * LIMBS * n],
            b: vec![0; CT * n],
            tb: vec![0; CT * n],
            digits: vec![0; DIGITS * KL * n],
            acc: vec![0; 2 * KL * n],
            kk: vec![0; 2 * DATA * n],
        }
    }
}

/// Seed 001 Alg. 2 line 14 at q' = 2^`wire` with §4.5's compressed c₀: the CS replaces every coefficient x of c'₀
/// by a uniform multiple y of 2^k₀ (k₀ = `wire` − `t_bits` − `margin` + 1; rows of N, row r from ChaCha20 stream r of
/// `seed`), so u' = y − x mod q' is its mask and only y's high `wire` − k₀ bits are sent (written back into `c0`); it
/// keeps d₀ = −⌊t·u'/q'⌉ mod t (t = 2^`t_bits`) as its share. A y whose fraction t·u'/q' mod 1 lies in
/// [½ − 2^−`margin`, ½ + 2^−`margin`) is drawn again: that band is exactly 2^k₀ wide, so of the 2^(`margin` − 1)
/// multiples of 2^k₀ in each step exactly one is refused, whatever x is — the verifier's view is the one it had with
/// an uncompressed uniform u' outside the band — and the verifier's rounding of t·(phase + u')/q' crosses no
/// rounding point that the CS's does not while the phase's error e has −2^−`margin` ≤ e·t/q' < 2^−`margin`. The
/// dropped bits of c₀ add no error: the CS's share already accounts for them.
pub fn mask_shares(c0: &mut [u64], n: usize, seed: [u8; 32], wire: u32, t_bits: u32, margin: u32) -> Vec<u32> {
    let shift = wire - t_bits;
    let k0 = shift - margin + 1;
    let (low, half) = ((1u64 << shift) - 1, 1u64 << (shift - 1));
    let (near, wmask, tmask) = (1u64 << (shift - margin), (1u64 << wire) - 1, (1u64 << t_bits) - 1);
    let mut d0 = vec![0u32; c0.len()];
    c0.par_chunks_mut(n)
        .zip(d0.par_chunks_mut(n))
        .enumerate()
        .for_each(|(r, (c, d))| {
            let mut rng = ChaCha20Rng::from_seed(seed);
            rng.set_stream(r as u64);
            for (x, s) in c.iter_mut().zip(d.iter_mut()) {
                let refused = |y: u64| {
                    let u = ((y << k0).wrapping_sub(*x)) & wmask;
                    ((u & low).wrapping_sub(half - near) < 2 * near, u)
                };
                let (y, u) = loop {
                    let y = u64::from(rng.next_u32()) >> (32 - (wire - k0));
                    match refused(y) {
                        (false, u) => break (y, u),
                        // margin 2: y and y ^ 1 are the step's two multiples, one refused — take the other
                        // (uniform over the allowed ones, as a redraw would be, in one draw)
                        (true, _) if margin == 2 => break (y ^ 1, refused(y ^ 1).1),
                        _ => {}
                    }
                };
                *x = y;
                *s = (((u + half) >> shift).wrapping_neg() & tmask) as u32;
            }
        });
    d0
}
