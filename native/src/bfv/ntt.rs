//! Negacyclic NTT mod one prime (seed 001 §2.2: products in R_q = Z_q[X]/(X^N + 1) as pointwise products).
//!
//! NTT(a)_k = Σ_i a_i ψ^{(2k+1)i} mod p for k = 0..N−1 in natural order (a evaluated at the odd powers of a
//! primitive 2N-th root ψ), the convention of the Python transform it replaces. Hand-written: Cooley–Tukey
//! forward and Gentleman–Sande inverse with ψ folded into the twiddles (Longa–Naehrig), Harvey's lazy
//! butterflies over [0, 4p) with Shoup twiddles, and one bit-reversal permutation to natural order. Primes of
//! ≥ 30 bits (N ≥ 16) run on Zama's tfhe-ntt 64-bit plans instead (AVX2 when the CPU has it), their output
//! order mapped to this one; the hand-written transform stays the reference they are tested against.

use super::arith::{Modulus, mul_shoup, mul_shoup_lazy, primitive_root_2n};

pub struct NttTable {
    pub m: Modulus,
    pub n: usize,
    pub psi: u64,
    /// ψ^{brv(k)} and its Shoup companion.
    fwd: Vec<(u64, u64)>,
    /// ψ^{−brv(k)}, Shoup.
    inv: Vec<(u64, u64)>,
    n_inv: (u64, u64),
    /// The pairs (i, brv(i)) with i < brv(i): the bit-reversal permutation as swaps.
    swaps: Vec<(u32, u32)>,
    /// For p < 2^30 (4p < 2^32): the same twiddles with 32-bit Shoup companions ⌊w·2^32/p⌋, so the butterflies
    /// run on 32-bit lanes (AVX2 when the CPU has it).
    small: Option<Small>,
    /// For wider primes (N ≥ 16): Zama's tfhe-ntt 64-bit plan (AVX2 when the CPU has it; its own root and
    /// bit-reversed order) and the map to this table's natural order.
    wide: Option<Wide>,
}

struct Wide {
    plan: tfhe_ntt::prime64::Plan,
    /// Natural index k → the plan's output index holding a(ψ^{2k+1}).
    order: Vec<u32>,
}

struct Small {
    fwd: Vec<(u32, u32)>,
    inv: Vec<(u32, u32)>,
    n_inv: (u32, u32),
}

#[inline(always)]
fn brv(x: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (usize::BITS - bits)
    }
}

impl NttTable {
    pub fn new(p: u64, n: usize) -> Result<Self, String> {
        if n < 2 || !n.is_power_of_two() {
            return Err(format!("NTT: N = {n} is not a power of two ≥ 2"));
        }
        if !(3..1u64 << super::arith::MAX_BITS).contains(&p) || !super::arith::is_prime(p) {
            return Err(format!("NTT: {p} is not a prime below 2^{}", super::arith::MAX_BITS));
        }
        let m = Modulus::new(p);
        let psi = primitive_root_2n(&m, n as u64).ok_or_else(|| format!("NTT: {p} is not ≡ 1 (mod {})", 2 * n))?;
        let psi_inv = m.inv(psi);
        let log_n = n.trailing_zeros();
        let (mut fwd, mut inv) = (vec![(0, 0); n], vec![(0, 0); n]);
        let (mut x, mut y) = (1u64, 1u64);
        for i in 0..n {
            let k = brv(i, log_n);
            fwd[k] = (x, m.shoup(x));
            inv[k] = (y, m.shoup(y));
            x = m.mul(x, psi);
            y = m.mul(y, psi_inv);
        }
        let ni = m.inv(n as u64 % p);
        let swaps = (0..n)
            .filter_map(|i| {
                let j = brv(i, log_n);
                (i < j).then_some((i as u32, j as u32))
            })
            .collect();
        Ok(NttTable {
            m,
            n,
            psi,
            fwd,
            inv,
            n_inv: (ni, m.shoup(ni)),
            swaps,
            small: None,
            wide: None,
        }
        .with_small()
        .with_wide())
    }

    /// The tfhe-ntt plan for a prime of ≥ 30 bits, with its output order matched to ours by transforming X:
    /// its output j is the evaluation point it holds, which must be some ψ^{2k+1} (None, and the scalar
    /// transform, when the plan or the match fails).
    fn with_wide(mut self) -> Self {
        let (n, m) = (self.n, self.m);
        if self.small.is_some() || n < 16 {
            return self;
        }
        let Some(plan) = tfhe_ntt::prime64::Plan::try_new(n, m.p) else {
            return self;
        };
        let mut x = vec![0u64; n];
        x[1] = 1;
        plan.fwd(&mut x);
        let at: std::collections::HashMap<u64, u32> = x.iter().enumerate().map(|(j, &v)| (v, j as u32)).collect();
        let (psi2, mut w) = (m.mul(self.psi, self.psi), self.psi);
        let mut order = Vec::with_capacity(n);
        for _ in 0..n {
            match at.get(&w) {
                Some(&j) => order.push(j),
                None => return self,
            }
            w = m.mul(w, psi2);
        }
        self.wide = Some(Wide { plan, order });
        self
    }

    fn with_small(mut self) -> Self {
        let p = self.m.p;
        if p < 1 << 30 {
            let s32 = |&(w, _): &(u64, u64)| (w as u32, ((w << 32) / p) as u32);
            self.small = Some(Small {
                fwd: self.fwd.iter().map(s32).collect(),
                inv: self.inv.iter().map(s32).collect(),
                n_inv: s32(&self.n_inv),
            });
        }
        self
    }

    /// In place: coefficients in [0, p) → NTT values in [0, p), natural order.
    pub fn forward(&self, a: &mut [u64]) {
        if let Some(sm) = &self.small {
            let mut b: Vec<u32> = a.iter().map(|&x| x as u32).collect();
            if super::rns::avx2() {
                // SAFETY: the CPU supports AVX2 (checked at run time).
                unsafe { forward32_avx2(&mut b, &sm.fwd, self.m.p as u32) }
            } else {
                forward32(&mut b, &sm.fwd, self.m.p as u32)
            }
            for (x, &y) in a.iter_mut().zip(&b) {
                *x = y as u64;
            }
            self.bit_reverse(a);
            return;
        }
        if let Some(wd) = &self.wide {
            wd.plan.fwd(a);
            let tmp = a.to_vec();
            for (x, &j) in a.iter_mut().zip(&wd.order) {
                *x = tmp[j as usize];
            }
            return;
        }
        self.forward64(a);
    }

    fn forward64(&self, a: &mut [u64]) {
        let (n, p) = (self.n, self.m.p);
        let two_p = 2 * p;
        let mut t = n;
        let mut m = 1;
        while m < n {
            t >>= 1;
            for i in 0..m {
                let (w, wp) = self.fwd[m + i];
                let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let mut u = *x;
                    if u >= two_p {
                        u -= two_p;
                    }
                    let v = mul_shoup_lazy(*y, w, wp, p);
                    *x = u + v;
                    *y = u + two_p - v;
                }
            }
            m <<= 1;
        }
        for x in a.iter_mut() {
            let mut v = *x;
            if v >= two_p {
                v -= two_p;
            }
            if v >= p {
                v -= p;
            }
            *x = v;
        }
        self.bit_reverse(a);
    }

    /// In place: NTT values in [0, p), natural order → coefficients in [0, p).
    pub fn inverse(&self, a: &mut [u64]) {
        if let Some(wd) = &self.wide {
            let tmp = a.to_vec();
            for (&x, &j) in tmp.iter().zip(&wd.order) {
                a[j as usize] = x;
            }
            wd.plan.inv(a);
            wd.plan.normalize(a);
            return;
        }
        self.bit_reverse(a);
        if let Some(sm) = &self.small {
            let mut b: Vec<u32> = a.iter().map(|&x| x as u32).collect();
            if super::rns::avx2() {
                // SAFETY: the CPU supports AVX2 (checked at run time).
                unsafe { inverse32_avx2(&mut b, &sm.inv, sm.n_inv, self.m.p as u32) }
            } else {
                inverse32(&mut b, &sm.inv, sm.n_inv, self.m.p as u32)
            }
            for (x, &y) in a.iter_mut().zip(&b) {
                *x = y as u64;
            }
            return;
        }
        let (n, p) = (self.n, self.m.p);
        let two_p = 2 * p;
        let mut t = 1;
        let mut m = n;
        while m > 1 {
            let h = m >> 1;
            for i in 0..h {
                let (w, wp) = self.inv[h + i];
                let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
                for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                    let (u, v) = (*x, *y);
                    let mut s = u + v;
                    if s >= two_p {
                        s -= two_p;
                    }
                    *x = s;
                    *y = mul_shoup_lazy(u + two_p - v, w, wp, p);
                }
            }
            t <<= 1;
            m = h;
        }
        let (ni, nip) = self.n_inv;
        for x in a.iter_mut() {
            *x = mul_shoup(*x, ni, nip, p);
        }
    }

    fn bit_reverse(&self, a: &mut [u64]) {
        for &(i, j) in &self.swaps {
            a.swap(i as usize, j as usize);
        }
    }
}

#[inline(always)]
fn shoup32(x: u32, w: u32, wp: u32, p: u32) -> u32 {
    let q = ((x as u64 * wp as u64) >> 32) as u32;
    x.wrapping_mul(w).wrapping_sub(q.wrapping_mul(p))
}

/// The forward transform of `NttTable::forward64` on 32-bit lanes (p < 2^30), output in bit-reversed order.
#[inline(always)]
fn forward32(a: &mut [u32], tw: &[(u32, u32)], p: u32) {
    let n = a.len();
    let two_p = 2 * p;
    let (mut t, mut m) = (n, 1);
    while m < n {
        t >>= 1;
        for i in 0..m {
            let (w, wp) = tw[m + i];
            let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
            for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                let u = if *x >= two_p { *x - two_p } else { *x };
                let v = shoup32(*y, w, wp, p);
                *x = u + v;
                *y = u + two_p - v;
            }
        }
        m <<= 1;
    }
    for x in a.iter_mut() {
        let mut v = *x;
        if v >= two_p {
            v -= two_p;
        }
        if v >= p {
            v -= p;
        }
        *x = v;
    }
}

/// The inverse transform on 32-bit lanes, input in bit-reversed order.
#[inline(always)]
fn inverse32(a: &mut [u32], tw: &[(u32, u32)], n_inv: (u32, u32), p: u32) {
    let n = a.len();
    let two_p = 2 * p;
    let (mut t, mut m) = (1, n);
    while m > 1 {
        let h = m >> 1;
        for i in 0..h {
            let (w, wp) = tw[h + i];
            let (lo, hi) = a[2 * i * t..2 * i * t + 2 * t].split_at_mut(t);
            for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                let (u, v) = (*x, *y);
                let s = u + v;
                *x = if s >= two_p { s - two_p } else { s };
                *y = shoup32(u + two_p - v, w, wp, p);
            }
        }
        t <<= 1;
        m = h;
    }
    for x in a.iter_mut() {
        let v = shoup32(*x, n_inv.0, n_inv.1, p);
        *x = if v >= p { v - p } else { v };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn forward32_avx2(a: &mut [u32], tw: &[(u32, u32)], p: u32) {
    forward32(a, tw, p)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn forward32_avx2(a: &mut [u32], tw: &[(u32, u32)], p: u32) {
    forward32(a, tw, p)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn inverse32_avx2(a: &mut [u32], tw: &[(u32, u32)], n_inv: (u32, u32), p: u32) {
    inverse32(a, tw, n_inv, p)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn inverse32_avx2(a: &mut [u32], tw: &[(u32, u32)], n_inv: (u32, u32), p: u32) {
    inverse32(a, tw, n_inv, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schoolbook(a: &[u64], b: &[u64], p: u64) -> Vec<u64> {
        let n = a.len();
        let mut out = vec![0u128; n];
        for (i, &x) in a.iter().enumerate() {
            for (j, &y) in b.iter().enumerate() {
                let prod = x as u128 * y as u128 % p as u128;
                let k = (i + j) % n;
                if i + j < n {
                    out[k] = (out[k] + prod) % p as u128;
                } else {
                    out[k] = (out[k] + p as u128 - prod) % p as u128;
                }
            }
        }
        out.into_iter().map(|x| x as u64).collect()
    }

    #[test]
    fn the_wide_plan_agrees_with_the_harvey_transform() {
        for (bits, n) in [(60u32, 8192usize), (60, 4096), (59, 16), (62, 1024), (36, 2048)] {
            for p in super::super::arith::ntt_primes(bits, n as u64, 2) {
                let t = NttTable::new(p, n).unwrap();
                assert!(t.wide.is_some(), "no tfhe-ntt plan for {p}, N = {n}");
                let mut s = p ^ n as u64;
                let a: Vec<u64> = (0..n)
                    .map(|_| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        s % p
                    })
                    .collect();
                let (mut fast, mut slow) = (a.clone(), a.clone());
                t.forward(&mut fast);
                t.forward64(&mut slow);
                assert_eq!(fast, slow, "forward, p = {p}, N = {n}");
                t.inverse(&mut fast);
                assert_eq!(fast, a, "inverse, p = {p}, N = {n}");
            }
        }
    }

    #[test]
    fn negacyclic_product_and_roundtrip() {
        for (bits, n) in [(60u32, 64usize), (61, 256), (30, 16), (62, 32)] {
            let p = super::super::arith::ntt_primes(bits, n as u64, 1)[0];
            let t = NttTable::new(p, n).unwrap();
            let mut s = 12345u64 + bits as u64;
            let mut rnd = || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s % p
            };
            let a: Vec<u64> = (0..n).map(|_| rnd()).collect();
            let b: Vec<u64> = (0..n).map(|_| rnd()).collect();
            let (mut fa, mut fb) = (a.clone(), b.clone());
            t.forward(&mut fa);
            t.forward(&mut fb);
            // natural order: value k is a(ψ^{2k+1})
            let x = t.m.pow(t.psi, 3);
            let mut ev = 0u64;
            for &c in a.iter().rev() {
                ev = t.m.add(t.m.mul(ev, x), c);
            }
            assert_eq!(fa[1], ev);
            let mut prod: Vec<u64> = fa.iter().zip(&fb).map(|(&x, &y)| t.m.mul(x, y)).collect();
            t.inverse(&mut prod);
            assert_eq!(prod, schoolbook(&a, &b, p));
            t.inverse(&mut fa);
            assert_eq!(fa, a);
        }
    }
}
