//! Negacyclic NTTs modulo primes below 2^30 on 32-bit lanes: Zama's tfhe-ntt `prime32::Plan` (AVX2 or scalar),
//! and on CPUs with AVX-512 (runtime-detected) a hand-written 16-lane transform with the same output — tfhe-ntt's
//! own AVX-512 kernels build only on nightly Rust.
//!
//! The AVX-512 transform is Harvey's (Harvey 2014, "Faster arithmetic for number-theoretic transforms", §3):
//! Cooley–Tukey butterflies with Shoup's multiplication, values kept lazily below 4p, the forward output in
//! bit-reversed order, the inverse unnormalised (N·a), both fully reduced — as tfhe-ntt's, so the two agree word
//! for word (the tests compare them). Its root ψ (a primitive 2N-th root of unity) is read off the plan's own
//! transform of X, whose first output is ψ. The last four stages (half-widths 8, 4, 2, 1) run on pairs of
//! registers regrouped by `vpermt2d` so that each butterfly's two inputs sit in the same lane of two registers.

use tfhe_ntt::prime32::Plan as Tfhe;

/// A negacyclic NTT of size N modulo p < 2^30.
pub struct Plan {
    tfhe: Tfhe,
    #[cfg(target_arch = "x86_64")]
    wide: Option<Wide>,
}

impl Plan {
    pub fn try_new(n: usize, p: u32) -> Option<Plan> {
        let tfhe = Tfhe::try_new(n, p)?;
        #[cfg(target_arch = "x86_64")]
        {
            let wide = (p < 1 << 30 && n >= 32 && super::rns::avx512()).then(|| Wide::new(&tfhe, n, p));
            Some(Plan { tfhe, wide })
        }
        #[cfg(not(target_arch = "x86_64"))]
        Some(Plan { tfhe })
    }

    /// Forward transform in place: coefficients (each below 4p) → evaluations in bit-reversed order, below p.
    #[inline]
    pub fn fwd(&self, buf: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(w) = &self.wide {
            assert_eq!(buf.len(), w.n);
            // SAFETY: `wide` exists only where the CPU has AVX-512 F/VL/BW/DQ (checked in `try_new`).
            unsafe { w.fwd(buf) };
            return;
        }
        self.tfhe.fwd(buf)
    }

    /// Inverse transform in place: evaluations in bit-reversed order (each below 4p) → N times the coefficients,
    /// below p.
    #[inline]
    pub fn inv(&self, buf: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(w) = &self.wide {
            assert_eq!(buf.len(), w.n);
            // SAFETY: as in `fwd`.
            unsafe { w.inv(buf) };
            return;
        }
        self.tfhe.inv(buf)
    }

    /// tfhe-ntt's transform, for the tests.
    #[cfg(test)]
    fn reference(&self) -> &Tfhe {
        &self.tfhe
    }
}

fn pow(mut b: u64, mut e: u64, p: u64) -> u64 {
    let mut r = 1;
    while e > 0 {
        if e & 1 == 1 {
            r = r * b % p;
        }
        b = b * b % p;
        e >>= 1;
    }
    r
}

fn bit_rev(bits: u32, x: usize) -> usize {
    x.reverse_bits() >> (usize::BITS - bits)
}

/// The AVX-512 transform's tables.
#[cfg(target_arch = "x86_64")]
struct Wide {
    n: usize,
    p: u32,
    /// ψ^bitrev(x) and its Shoup companion ⌊w·2^32/p⌋ at x = m + i (stage m, group i), for the wide stages
    fwd: Vec<(u32, u32)>,
    /// ψ^−bitrev(x), the same way
    inv: Vec<(u32, u32)>,
    /// the last four stages' twiddles (half-width t = 8, 4, 2, 1), one per X lane of each 32-element block:
    /// (w, w') arrays of N/2 each, forward then inverse
    small_fwd: [(Vec<u32>, Vec<u32>); 4],
    small_inv: [(Vec<u32>, Vec<u32>); 4],
    /// per small stage: lanes of X and Y in a 32-element block, and where each element of a and b comes back from
    idx: [[[u32; 16]; 4]; 4],
}

#[cfg(target_arch = "x86_64")]
impl Wide {
    fn new(tfhe: &Tfhe, n: usize, p: u32) -> Wide {
        let mut x = vec![0u32; n];
        x[1] = 1;
        tfhe.fwd(&mut x);
        let (psi, p64) = (u64::from(x[0]), u64::from(p));
        let psi_inv = pow(psi, 2 * n as u64 - 1, p64);
        let bits = n.trailing_zeros();
        let shoup = |w: u64| (w as u32, ((w << 32) / p64) as u32);
        let fwd: Vec<(u32, u32)> = (0..n).map(|x| shoup(pow(psi, bit_rev(bits, x) as u64, p64))).collect();
        let inv: Vec<(u32, u32)> = (0..n)
            .map(|x| shoup(pow(psi_inv, bit_rev(bits, x) as u64, p64)))
            .collect();
        let mut idx = [[[0u32; 16]; 4]; 4];
        let expand = |table: &[(u32, u32)], t: usize| {
            let m = n / (2 * t);
            let (mut w, mut wp) = (vec![0u32; n / 2], vec![0u32; n / 2]);
            for b in (0..n).step_by(32) {
                let xs = (0..32).filter(|e| e & t == 0);
                for (l, e) in xs.enumerate() {
                    let (v, vp) = table[m + (b + e) / (2 * t)];
                    (w[b / 2 + l], wp[b / 2 + l]) = (v, vp);
                }
            }
            (w, wp)
        };
        for (s, t) in [8usize, 4, 2, 1].into_iter().enumerate() {
            let xs: Vec<usize> = (0..32).filter(|e| e & t == 0).collect();
            let pos = |e: usize| xs.iter().position(|&v| v == e).expect("an X element");
            for (l, &e) in xs.iter().enumerate() {
                idx[s][0][l] = e as u32;
                idx[s][1][l] = (e + t) as u32;
            }
            for (half, base) in [(2usize, 0usize), (3, 16)] {
                for (k, v) in idx[s][half].iter_mut().enumerate() {
                    let e = base + k;
                    *v = if e & t == 0 {
                        pos(e) as u32
                    } else {
                        16 + pos(e - t) as u32
                    };
                }
            }
        }
        Wide {
            n,
            p,
            small_fwd: [8, 4, 2, 1].map(|t| expand(&fwd, t)),
            small_inv: [8, 4, 2, 1].map(|t| expand(&inv, t)),
            fwd,
            inv,
            idx,
        }
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2")]
    unsafe fn fwd(&self, a: &mut [u32]) {
        use std::arch::x86_64::*;
        let (n, p) = (self.n, self.p);
        let (vp, v2p) = (_mm512_set1_epi32(p as i32), _mm512_set1_epi32(2 * p as i32));
        let ptr = a.as_mut_ptr();
        let mut t = n / 2;
        let mut m = 1;
        while t >= 16 {
            for i in 0..m {
                let (w, wp) = self.fwd[m + i];
                let (w, wp) = (_mm512_set1_epi32(w as i32), _mm512_set1_epi32(wp as i32));
                let base = 2 * i * t;
                for j in (base..base + t).step_by(16) {
                    // SAFETY: j + t + 16 ≤ N (t is a multiple of 16); unaligned loads and stores.
                    unsafe {
                        let x = _mm512_loadu_si512(ptr.add(j).cast());
                        let y = _mm512_loadu_si512(ptr.add(j + t).cast());
                        let (x, y) = fwd_bf(x, y, w, wp, vp, v2p);
                        _mm512_storeu_si512(ptr.add(j).cast(), x);
                        _mm512_storeu_si512(ptr.add(j + t).cast(), y);
                    }
                }
            }
            t /= 2;
            m *= 2;
        }
        for s in 0..4 {
            let (ws, wps) = &self.small_fwd[s];
            // SAFETY: 16 lanes read from arrays of 16.
            let ix = self.idx[s].map(|v| unsafe { _mm512_loadu_si512(v.as_ptr().cast()) });
            for b in (0..n).step_by(32) {
                // SAFETY: b + 32 ≤ N; the twiddle arrays hold N/2 entries.
                unsafe {
                    let lo = _mm512_loadu_si512(ptr.add(b).cast());
                    let hi = _mm512_loadu_si512(ptr.add(b + 16).cast());
                    let w = _mm512_loadu_si512(ws.as_ptr().add(b / 2).cast());
                    let wp = _mm512_loadu_si512(wps.as_ptr().add(b / 2).cast());
                    let x = _mm512_permutex2var_epi32(lo, ix[0], hi);
                    let y = _mm512_permutex2var_epi32(lo, ix[1], hi);
                    let (x, y) = fwd_bf(x, y, w, wp, vp, v2p);
                    let (lo, hi) = (
                        _mm512_permutex2var_epi32(x, ix[2], y),
                        _mm512_permutex2var_epi32(x, ix[3], y),
                    );
                    let (lo, hi) = if s == 3 {
                        (reduce(lo, vp, v2p), reduce(hi, vp, v2p))
                    } else {
                        (lo, hi)
                    };
                    _mm512_storeu_si512(ptr.add(b).cast(), lo);
                    _mm512_storeu_si512(ptr.add(b + 16).cast(), hi);
                }
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2")]
    unsafe fn inv(&self, a: &mut [u32]) {
        use std::arch::x86_64::*;
        let (n, p) = (self.n, self.p);
        let (vp, v2p) = (_mm512_set1_epi32(p as i32), _mm512_set1_epi32(2 * p as i32));
        let ptr = a.as_mut_ptr();
        for s in (0..4).rev() {
            let (ws, wps) = &self.small_inv[s];
            // SAFETY: 16 lanes read from arrays of 16.
            let ix = self.idx[s].map(|v| unsafe { _mm512_loadu_si512(v.as_ptr().cast()) });
            for b in (0..n).step_by(32) {
                // SAFETY: b + 32 ≤ N; the twiddle arrays hold N/2 entries.
                unsafe {
                    let mut lo = _mm512_loadu_si512(ptr.add(b).cast());
                    let mut hi = _mm512_loadu_si512(ptr.add(b + 16).cast());
                    if s == 3 {
                        // inputs below 4p → below 2p, so that x + y stays below 4p
                        lo = _mm512_min_epu32(lo, _mm512_sub_epi32(lo, v2p));
                        hi = _mm512_min_epu32(hi, _mm512_sub_epi32(hi, v2p));
                    }
                    let w = _mm512_loadu_si512(ws.as_ptr().add(b / 2).cast());
                    let wp = _mm512_loadu_si512(wps.as_ptr().add(b / 2).cast());
                    let x = _mm512_permutex2var_epi32(lo, ix[0], hi);
                    let y = _mm512_permutex2var_epi32(lo, ix[1], hi);
                    let (x, y) = inv_bf(x, y, w, wp, vp, v2p);
                    _mm512_storeu_si512(ptr.add(b).cast(), _mm512_permutex2var_epi32(x, ix[2], y));
                    _mm512_storeu_si512(ptr.add(b + 16).cast(), _mm512_permutex2var_epi32(x, ix[3], y));
                }
            }
        }
        let mut t = 16;
        let mut m = n / 32;
        while m >= 1 {
            for i in 0..m {
                let (w, wp) = self.inv[m + i];
                let (w, wp) = (_mm512_set1_epi32(w as i32), _mm512_set1_epi32(wp as i32));
                let base = 2 * i * t;
                for j in (base..base + t).step_by(16) {
                    // SAFETY: j + t + 16 ≤ N.
                    unsafe {
                        let x = _mm512_loadu_si512(ptr.add(j).cast());
                        let y = _mm512_loadu_si512(ptr.add(j + t).cast());
                        let (x, y) = inv_bf(x, y, w, wp, vp, v2p);
                        let (x, y) = if m == 1 {
                            (reduce(x, vp, v2p), reduce(y, vp, v2p))
                        } else {
                            (x, y)
                        };
                        _mm512_storeu_si512(ptr.add(j).cast(), x);
                        _mm512_storeu_si512(ptr.add(j + t).cast(), y);
                    }
                }
            }
            t *= 2;
            m /= 2;
        }
    }
}

/// The high 32 bits of each lane's 64-bit product.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn mulhi(a: std::arch::x86_64::__m512i, b: std::arch::x86_64::__m512i) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    // SAFETY: called from AVX-512 code only.
    unsafe {
        let even = _mm512_mul_epu32(a, b);
        let odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));
        _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd)
    }
}

/// w·y mod p in [0, 2p) for any 32-bit y (Shoup: w' = ⌊w·2^32/p⌋).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn shoup(
    y: std::arch::x86_64::__m512i,
    w: std::arch::x86_64::__m512i,
    wp: std::arch::x86_64::__m512i,
    p: std::arch::x86_64::__m512i,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    // SAFETY: called from AVX-512 code only.
    unsafe {
        let q = mulhi(y, wp);
        _mm512_sub_epi32(_mm512_mullo_epi32(y, w), _mm512_mullo_epi32(q, p))
    }
}

/// Values below 4p → below p.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn reduce(
    x: std::arch::x86_64::__m512i,
    p: std::arch::x86_64::__m512i,
    two_p: std::arch::x86_64::__m512i,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    // SAFETY: called from AVX-512 code only.
    unsafe {
        let x = _mm512_min_epu32(x, _mm512_sub_epi32(x, two_p));
        _mm512_min_epu32(x, _mm512_sub_epi32(x, p))
    }
}

/// (x + w·y, x − w·y) from x, y below 4p, both below 4p.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn fwd_bf(
    x: std::arch::x86_64::__m512i,
    y: std::arch::x86_64::__m512i,
    w: std::arch::x86_64::__m512i,
    wp: std::arch::x86_64::__m512i,
    p: std::arch::x86_64::__m512i,
    two_p: std::arch::x86_64::__m512i,
) -> (std::arch::x86_64::__m512i, std::arch::x86_64::__m512i) {
    use std::arch::x86_64::*;
    // SAFETY: called from AVX-512 code only.
    unsafe {
        let x = _mm512_min_epu32(x, _mm512_sub_epi32(x, two_p));
        let t = shoup(y, w, wp, p);
        (_mm512_add_epi32(x, t), _mm512_add_epi32(_mm512_sub_epi32(x, t), two_p))
    }
}

/// (x + y, w·(x − y)) from x, y below 2p, both below 2p.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn inv_bf(
    x: std::arch::x86_64::__m512i,
    y: std::arch::x86_64::__m512i,
    w: std::arch::x86_64::__m512i,
    wp: std::arch::x86_64::__m512i,
    p: std::arch::x86_64::__m512i,
    two_p: std::arch::x86_64::__m512i,
) -> (std::arch::x86_64::__m512i, std::arch::x86_64::__m512i) {
    use std::arch::x86_64::*;
    // SAFETY: called from AVX-512 code only.
    unsafe {
        let s = _mm512_add_epi32(x, y);
        let d = _mm512_add_epi32(_mm512_sub_epi32(x, y), two_p);
        (_mm512_min_epu32(s, _mm512_sub_epi32(s, two_p)), shoup(d, w, wp, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_avx512_transform_equals_tfhe_ntt_word_for_word() {
        // the largest NTT-friendly primes below 2^bits, as the parameter sets pick theirs
        let prime = |n: usize, bits: u32| {
            let step = 2 * n as u64;
            let mut p = ((1u64 << bits) - 1) / step * step + 1;
            while !super::super::arith::is_prime(p) {
                p -= step;
            }
            p as u32
        };
        for (n, bits) in [
            (32usize, 14u32),
            (64, 20),
            (2048, 27),
            (4096, 27),
            (4096, 28),
            (4096, 29),
            (8192, 29),
        ] {
            let p = prime(n, bits);
            let plan = Plan::try_new(n, p).expect("a plan");
            #[cfg(target_arch = "x86_64")]
            assert_eq!(
                plan.wide.is_some(),
                super::super::rns::avx512(),
                "the AVX-512 transform where the CPU has it"
            );
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (n as u64) ^ u64::from(p);
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            for round in 0..4 {
                // inputs below p, then below 4p (the lazy range both accept)
                let bound = if round < 2 { p } else { 4 * p };
                let a: Vec<u32> = (0..n).map(|_| (next() % u64::from(bound)) as u32).collect();
                let (mut mine, mut theirs) = (a.clone(), a.clone());
                plan.fwd(&mut mine);
                plan.reference().fwd(&mut theirs);
                assert_eq!(mine, theirs, "forward, N = {n}, p = {p}");
                let (mut back, mut theirs_back) = (mine.clone(), mine.clone());
                plan.inv(&mut back);
                plan.reference().inv(&mut theirs_back);
                assert_eq!(back, theirs_back, "inverse, N = {n}, p = {p}");
                let want: Vec<u32> = a
                    .iter()
                    .map(|&v| (u64::from(v) * n as u64 % u64::from(p)) as u32)
                    .collect();
                assert_eq!(back, want, "inverse of forward is N·a, N = {n}, p = {p}");
                let lazy: Vec<u32> = mine.iter().map(|&v| v + 2 * p).collect();
                let mut lazy_back = lazy.clone();
                plan.inv(&mut lazy_back);
                assert_eq!(lazy_back, want, "inverse on inputs below 4p, N = {n}, p = {p}");
            }
        }
    }

    /// Timing against tfhe-ntt (not a check): `cargo test --release ntt32 -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn timing() {
        let (n, p) = (4096usize, 268_369_921u32);
        let plan = Plan::try_new(n, p).expect("a plan");
        let mut a: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761) % p).collect();
        for (name, mine) in [("tfhe", false), ("this", true), ("tfhe", false), ("this", true)] {
            let t = std::time::Instant::now();
            for _ in 0..20_000 {
                if mine {
                    plan.fwd(&mut a);
                    plan.inv(&mut a);
                } else {
                    plan.reference().fwd(&mut a);
                    plan.reference().inv(&mut a);
                }
            }
            println!(
                "{name}: {:.2} µs per transform",
                t.elapsed().as_secs_f64() / 40_000.0 * 1e6
            );
        }
    }
}
