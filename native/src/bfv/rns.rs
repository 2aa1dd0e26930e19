//! BFV ciphertext arithmetic over an RNS basis (seed 001 §2.2 BFV, §2.4 key switching, §4.3 Alg. 2):
//! batched NTTs, pointwise products, RNS gadget digits and the external product, SwKeyGen / Switching with a
//! special prime P, modulus switching (dropping a prime, or scaling to a small modulus t with rounding) and
//! coefficient extraction. Shapes follow the Python code it replaces: a polynomial is (L, N) residues, a
//! ciphertext (2, L, N), all flat row-major slices here.
//!
//! Gadget (RNS): digit_j(c) = [c]_{q_j}, g_j = (q/q_j)·[(q/q_j)^{-1}]_{q_j}, Σ_j digit_j(c)·g_j ≡ c (mod q).
//! SwKeyGen(s, s'): K_j = (−a_j·s' + e_j + P·g_j·s, a_j) mod qP, NTT form. Switching(c, K) =
//! (c_0, 0) + ⌊(Σ_j digit_j(c_1)·K_j)/P⌉ mod q. Hand-written: no maintained Rust crate exposes key switching
//! between two unrelated secret keys or SEAL's RNS layout.

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rayon::prelude::*;

use super::arith::Modulus;
use super::ntt::NttTable;

pub struct Basis {
    pub n: usize,
    /// NTT tables of q_0..q_{L−1}, then P (if any): the key basis qP.
    pub tables: Vec<NttTable>,
    pub l: usize,
    pub special: bool,
}

pub type Res<T> = Result<T, String>;

impl Basis {
    pub fn new(data: &[u64], special: Option<u64>, n: usize) -> Res<Self> {
        if data.is_empty() {
            return Err("RNS basis: at least one data prime".into());
        }
        let mut all: Vec<u64> = data.to_vec();
        all.extend(special);
        for (i, &p) in all.iter().enumerate() {
            if all[..i].contains(&p) {
                return Err(format!("RNS basis: prime {p} repeated"));
            }
        }
        let tables = all.iter().map(|&p| NttTable::new(p, n)).collect::<Res<Vec<_>>>()?;
        Ok(Basis {
            n,
            tables,
            l: data.len(),
            special: special.is_some(),
        })
    }

    pub fn moduli(&self, key: bool) -> Vec<u64> {
        self.tables[..self.limbs(key)].iter().map(|t| t.m.p).collect()
    }

    pub fn limbs(&self, key: bool) -> usize {
        if key { self.l + 1 } else { self.l }
    }

    fn m(&self, i: usize) -> &Modulus {
        &self.tables[i].m
    }

    /// Every residue of (…, L', N) data below its prime (L' = limbs over the first primes).
    pub fn check<T: Copy + Into<u64> + Sync>(&self, a: &[T], limbs: usize, what: &str) -> Res<()> {
        let n = self.n;
        let bad = a.par_chunks(n).enumerate().any(|(i, c)| {
            let p = self.tables[i % limbs].m.p;
            c.iter().any(|&x| x.into() >= p)
        });
        if bad {
            Err(format!("{what}: a residue is not below its prime"))
        } else {
            Ok(())
        }
    }

    pub fn forward(&self, a: &mut [u64], limbs: usize) {
        a.par_chunks_mut(self.n)
            .enumerate()
            .for_each(|(i, c)| self.tables[i % limbs].forward(c));
    }

    pub fn inverse(&self, a: &mut [u64], limbs: usize) {
        a.par_chunks_mut(self.n)
            .enumerate()
            .for_each(|(i, c)| self.tables[i % limbs].inverse(c));
    }

    /// a ⊙ b limb by limb; b has a's shape or is one (limbs, N) polynomial broadcast over a's leading axes.
    pub fn mul(&self, a: &[u64], b: &[u64], limbs: usize) -> Vec<u64> {
        let n = self.n;
        let mut out = vec![0u64; a.len()];
        out.par_chunks_mut(n)
            .zip(a.par_chunks(n))
            .enumerate()
            .for_each(|(i, (o, x))| {
                let m = self.m(i % limbs);
                let y = if b.len() == a.len() {
                    &b[i * n..(i + 1) * n]
                } else {
                    &b[(i % limbs) * n..(i % limbs + 1) * n]
                };
                for k in 0..n {
                    o[k] = m.mul(x[k], y[k]);
                }
            });
        out
    }

    /// Signed integers (N,) → residues (limbs, N).
    pub fn reduce_signed(&self, v: &[i64], limbs: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(limbs * self.n);
        for i in 0..limbs {
            out.extend(v.iter().map(|&x| self.m(i).from_i64(x)));
        }
        out
    }

    /// SwKeyGen(s, s') with the caller's randomness: a (L, L+1, N) uniform residues mod qP, e (L, N) small.
    /// Returns K (L, 2, L+1, N), NTT form over qP.
    pub fn swkeygen(&self, s: &[i64], s_new: &[i64], a: &[u64], e: &[i64]) -> Res<Vec<u64>> {
        if !self.special {
            return Err("key switching needs a special prime".into());
        }
        let (l, n, kl) = (self.l, self.n, self.l + 1);
        let mut sk = self.reduce_signed(s, kl);
        let mut sk_new = self.reduce_signed(s_new, kl);
        self.forward(&mut sk, kl);
        self.forward(&mut sk_new, kl);
        let pp = self.tables[l].m.p;
        let mut out = vec![0u64; l * 2 * kl * n];
        out.par_chunks_mut(2 * kl * n).enumerate().for_each(|(j, kj)| {
            let (k0, k1) = kj.split_at_mut(kl * n);
            let aj = &a[j * kl * n..(j + 1) * kl * n];
            k1.copy_from_slice(aj);
            let mut ej = self.reduce_signed(&e[j * n..(j + 1) * n], kl);
            for i in 0..kl {
                let m = self.m(i);
                let limb = &mut ej[i * n..(i + 1) * n];
                self.tables[i].forward(limb);
                let pg = if i == j { m.reduce(pp) } else { 0 };
                for k in 0..n {
                    let mut v = m.sub(limb[k], m.mul(aj[i * n + k], sk_new[i * n + k]));
                    if pg != 0 {
                        v = m.add(v, m.mul(pg, sk[i * n + k]));
                    }
                    k0[i * n + k] = v;
                }
            }
        });
        Ok(out)
    }

    /// Switching(ct, K): ciphertexts (B, 2, L, N) in coefficient form → the same under the new key.
    pub fn switch(&self, ct: &[u64], k: &[u64]) -> Res<Vec<u64>> {
        if !self.special {
            return Err("key switching needs a special prime".into());
        }
        let (l, n, kl) = (self.l, self.n, self.l + 1);
        let mut out = vec![0u64; ct.len()];
        let pm = self.tables[l].m;
        let p_inv: Vec<u64> = (0..l).map(|i| self.m(i).inv(self.m(i).reduce(pm.p))).collect();
        out.par_chunks_mut(2 * l * n)
            .zip(ct.par_chunks(2 * l * n))
            .for_each(|(o, c)| {
                let c1 = &c[l * n..];
                let mut acc = vec![0u64; 2 * kl * n];
                let mut d = vec![0u64; n];
                for j in 0..l {
                    for i in 0..kl {
                        let m = self.m(i);
                        for (x, &y) in d.iter_mut().zip(&c1[j * n..(j + 1) * n]) {
                            *x = if y < m.p { y } else { m.reduce(y) };
                        }
                        self.tables[i].forward(&mut d);
                        for oc in 0..2 {
                            let kk = &k[((j * 2 + oc) * kl + i) * n..((j * 2 + oc) * kl + i + 1) * n];
                            let a = &mut acc[(oc * kl + i) * n..(oc * kl + i + 1) * n];
                            for t in 0..n {
                                a[t] = m.add(a[t], m.mul(d[t], kk[t]));
                            }
                        }
                    }
                }
                for (i, limb) in acc.chunks_mut(n).enumerate() {
                    self.tables[i % kl].inverse(limb);
                }
                let half = pm.p / 2;
                for oc in 0..2 {
                    let pl = &acc[(oc * kl + l) * n..(oc * kl + l + 1) * n];
                    for i in 0..l {
                        let m = self.m(i);
                        let (pi, pip) = (p_inv[i], m.shoup(p_inv[i]));
                        let src = &acc[(oc * kl + i) * n..(oc * kl + i + 1) * n];
                        let dst = &mut o[(oc * l + i) * n..(oc * l + i + 1) * n];
                        for t in 0..n {
                            // ⌊x/P⌉ = (x − [x]_P)/P with [x]_P centred
                            let v = pl[t];
                            let vr = if v > half {
                                m.sub(0, m.reduce(pm.p - v))
                            } else {
                                m.reduce(v)
                            };
                            let low = m.sub(src[t], vr);
                            let mut r = super::arith::mul_shoup(low, pi, pip, m.p);
                            if oc == 0 {
                                r = m.add(r, c[i * n + t]);
                            }
                            dst[t] = r;
                        }
                    }
                }
            });
        Ok(out)
    }

    /// Modulus switching by the last data prime: (B, L, N) coefficient residues of x mod q_0…q_{L−1} →
    /// (B, L−1, N) residues of ⌊x/q_{L−1}⌉ mod q_0…q_{L−2}.
    pub fn rescale(&self, x: &[u64], limbs: usize) -> Res<Vec<u64>> {
        if limbs < 2 {
            return Err("rescale: needs at least two primes".into());
        }
        let n = self.n;
        let last = *self.m(limbs - 1);
        let inv: Vec<(u64, u64)> = (0..limbs - 1)
            .map(|i| {
                let m = self.m(i);
                let v = m.inv(m.reduce(last.p));
                (v, m.shoup(v))
            })
            .collect();
        let mut out = vec![0u64; x.len() / limbs * (limbs - 1)];
        out.par_chunks_mut((limbs - 1) * n)
            .zip(x.par_chunks(limbs * n))
            .for_each(|(o, xs)| {
                let xl = &xs[(limbs - 1) * n..];
                let half = last.p / 2;
                for i in 0..limbs - 1 {
                    let m = self.m(i);
                    for t in 0..n {
                        let v = xl[t];
                        // centred remainder r ∈ (−P/2, P/2], as a residue mod q_i
                        let r = if v > half {
                            m.sub(0, m.reduce(last.p - v))
                        } else {
                            m.reduce(v)
                        };
                        o[i * n + t] = super::arith::mul_shoup(m.sub(xs[i * n + t], r), inv[i].0, inv[i].1, m.p);
                    }
                }
            });
        Ok(out)
    }

    /// Uniform residues (count, limbs, cols) expanded from a 32-byte seed: ChaCha20 with stream i for the i-th
    /// (polynomial, limb) row, rejection sampling of words masked to the prime's bit length. The same seed gives
    /// the same polynomials, so a uniform polynomial can travel as its seed (seed 001 §4.5's communication).
    pub fn uniform(&self, seed: [u8; 32], count: usize, limbs: usize, cols: usize) -> Vec<u64> {
        let mut out = vec![0u64; count * limbs * cols];
        if cols == 0 {
            return out;
        }
        out.par_chunks_mut(cols)
            .enumerate()
            .for_each(|(i, row)| uniform_row(seed, i as u64, self.tables[i % limbs].m.p, row, |v| v));
        out
    }
}

/// Row `stream` of the seed's uniform polynomials: ChaCha20(seed) on that stream, words masked to p's bit length,
/// rejected unless below p, stored through `conv`.
pub fn uniform_row<T>(seed: [u8; 32], stream: u64, p: u64, row: &mut [T], conv: impl Fn(u64) -> T) {
    let mask = u64::MAX >> p.leading_zeros();
    let mut rng = ChaCha20Rng::from_seed(seed);
    rng.set_stream(stream);
    for x in row.iter_mut() {
        *x = loop {
            let v = rng.next_u64() & mask;
            if v < p {
                break conv(v);
            }
        };
    }
}

/// AVX-512 F, VL, BW and DQ (the vectorised 32-bit loops' 16-lane form), detected once.
pub fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512dq")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

pub fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
