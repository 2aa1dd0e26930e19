//! Negacyclic NTT mod one prime (seed 001 §2.2: products in R_q = Z_q[X]/(X^N + 1) as pointwise products).
//!
//! NTT(a)_k = Σ_i a_i ψ^{(2k+1)i} mod p for k = 0..N−1 in natural order (a evaluated at the odd powers of a
//! primitive 2N-th root ψ), the convention of the Python transform it replaces. Hand-written: Cooley–Tukey
//! forward and Gentleman–Sande inverse with ψ folded into the twiddles (Longa–Naehrig), Harvey's lazy
//! butterflies over [0, 4p) with Shoup twiddles, and one bit-reversal permutation to natural order.

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
        })
    }

    /// In place: coefficients in [0, p) → NTT values in [0, p), natural order.
    pub fn forward(&self, a: &mut [u64]) {
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
        self.bit_reverse(a);
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
