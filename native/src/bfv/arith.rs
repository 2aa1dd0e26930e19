//! Word-size modular arithmetic for NTT-friendly primes p < 2^62 (seed 001 §2.2: R_q = Z_q[X]/(X^N + 1) in RNS).
//!
//! Hand-written (no maintained crate offers Shoup/Barrett arithmetic for arbitrary 62-bit primes with the lazy
//! [0, 4p) ranges the NTT needs): Barrett reduction of 128-bit products with ⌊2^128/p⌋, and Shoup multiplication
//! by a fixed operand w with w' = ⌊w·2^64/p⌋, whose result lies in [0, 2p).

/// Largest admissible prime bit size: the lazy butterflies keep values below 4p < 2^64.
pub const MAX_BITS: u32 = 62;

#[derive(Clone, Copy, Debug)]
pub struct Modulus {
    pub p: u64,
    /// ⌊2^128 / p⌋ as (high, low) words.
    r1: u64,
    r0: u64,
}

impl Modulus {
    pub fn new(p: u64) -> Self {
        assert!(p > 2 && p < (1u64 << MAX_BITS), "modulus out of range");
        // ⌊2^128/p⌋ = ⌊(2^128 − 1)/p⌋ unless p | 2^128, impossible for an odd p > 2
        let r = u128::MAX / p as u128;
        Modulus {
            p,
            r1: (r >> 64) as u64,
            r0: r as u64,
        }
    }

    /// x mod p for any 128-bit x (Barrett: the quotient estimate is at most 2 below the true quotient).
    #[inline(always)]
    pub fn reduce128(&self, x: u128) -> u64 {
        let (x0, x1) = (x as u64, (x >> 64) as u64);
        let a = ((x0 as u128) * (self.r0 as u128)) >> 64;
        let b = (x0 as u128) * (self.r1 as u128);
        let c = (x1 as u128) * (self.r0 as u128);
        let mid = a + (b as u64 as u128) + (c as u64 as u128);
        let q = (x1 as u128) * (self.r1 as u128) + (b >> 64) + (c >> 64) + (mid >> 64);
        let mut r = x0.wrapping_sub((q as u64).wrapping_mul(self.p));
        if r >= self.p {
            r -= self.p;
        }
        if r >= self.p {
            r -= self.p;
        }
        r
    }

    /// (⌊x/p⌋, x mod p) for any 128-bit x, by the same Barrett estimate.
    #[inline(always)]
    pub fn divrem128(&self, x: u128) -> (u128, u64) {
        let (x0, x1) = (x as u64, (x >> 64) as u64);
        let a = ((x0 as u128) * (self.r0 as u128)) >> 64;
        let b = (x0 as u128) * (self.r1 as u128);
        let c = (x1 as u128) * (self.r0 as u128);
        let mid = a + (b as u64 as u128) + (c as u64 as u128);
        let mut q = (x1 as u128) * (self.r1 as u128) + (b >> 64) + (c >> 64) + (mid >> 64);
        let mut r = x0.wrapping_sub((q as u64).wrapping_mul(self.p));
        for _ in 0..2 {
            if r >= self.p {
                r -= self.p;
                q += 1;
            }
        }
        (q, r)
    }

    #[inline(always)]
    pub fn reduce(&self, x: u64) -> u64 {
        self.reduce128(x as u128)
    }

    #[inline(always)]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce128((a as u128) * (b as u128))
    }

    #[inline(always)]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        let s = a + b;
        if s >= self.p { s - self.p } else { s }
    }

    #[inline(always)]
    pub fn sub(&self, a: u64, b: u64) -> u64 {
        if a >= b { a - b } else { a + self.p - b }
    }

    /// A signed integer mod p.
    #[inline(always)]
    pub fn from_i64(&self, v: i64) -> u64 {
        let r = v.unsigned_abs() % self.p;
        if v < 0 && r != 0 { self.p - r } else { r }
    }

    pub fn pow(&self, mut b: u64, mut e: u64) -> u64 {
        let mut r = 1u64;
        b = self.reduce(b);
        while e > 0 {
            if e & 1 == 1 {
                r = self.mul(r, b);
            }
            b = self.mul(b, b);
            e >>= 1;
        }
        r
    }

    /// a^{-1} mod p (p prime, a ≢ 0).
    pub fn inv(&self, a: u64) -> u64 {
        self.pow(a, self.p - 2)
    }

    /// w' = ⌊w·2^64/p⌋ for Shoup multiplication by w < p.
    #[inline(always)]
    pub fn shoup(&self, w: u64) -> u64 {
        (((w as u128) << 64) / self.p as u128) as u64
    }
}

/// x·w mod p in [0, 2p) for any x < 2^64, with w < p and wp = ⌊w·2^64/p⌋ (Shoup).
#[inline(always)]
pub fn mul_shoup_lazy(x: u64, w: u64, wp: u64, p: u64) -> u64 {
    let q = (((x as u128) * (wp as u128)) >> 64) as u64;
    x.wrapping_mul(w).wrapping_sub(q.wrapping_mul(p))
}

#[inline(always)]
pub fn mul_shoup(x: u64, w: u64, wp: u64, p: u64) -> u64 {
    let r = mul_shoup_lazy(x, w, wp, p);
    if r >= p { r - p } else { r }
}

/// Deterministic Miller–Rabin for 64-bit integers (the first 12 primes as bases).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    for sp in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        if n.is_multiple_of(sp) {
            return n == sp;
        }
    }
    let mulm = |a: u64, b: u64| ((a as u128 * b as u128) % n as u128) as u64;
    let powm = |mut b: u64, mut e: u64| {
        let mut r = 1u64;
        while e > 0 {
            if e & 1 == 1 {
                r = mulm(r, b);
            }
            b = mulm(b, b);
            e >>= 1;
        }
        r
    };
    let s = (n - 1).trailing_zeros();
    let d = (n - 1) >> s;
    'bases: for a in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        let mut x = powm(a, d);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mulm(x, x);
            if x == n - 1 {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

/// The `count` largest primes p ≡ 1 (mod 2n) below 2^bits, in decreasing order.
pub fn ntt_primes(bits: u32, n: u64, count: usize) -> Vec<u64> {
    assert!((20..=MAX_BITS).contains(&bits), "prime size out of range");
    let step = 2 * n;
    let mut c = ((1u64 << bits) - 1) / step * step + 1;
    let mut out = Vec::with_capacity(count);
    while out.len() < count && c > step {
        if c < (1u64 << bits) && is_prime(c) {
            out.push(c);
        }
        c -= step;
    }
    out
}

/// A primitive 2n-th root of unity mod p (p ≡ 1 mod 2n), the smallest generator-derived one, as the
/// Python oracle picks it (g = 2, 3, … until g^{(p−1)/2n} has order exactly 2n).
pub fn primitive_root_2n(m: &Modulus, n: u64) -> Option<u64> {
    let p = m.p;
    if !(p - 1).is_multiple_of(2 * n) {
        return None;
    }
    for g in 2..(1u64 << 16) {
        let psi = m.pow(g, (p - 1) / (2 * n));
        if m.pow(psi, n) == p - 1 {
            return Some(psi);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barrett_matches_u128_rem() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for &p in &[(1u64 << 61) - 1, 1152921504606830593, 134250497, 3] {
            if p < 3 {
                continue;
            }
            let m = Modulus::new(p);
            for _ in 0..10_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let y = x.rotate_left(23);
                let v = ((x as u128) << 64) | y as u128;
                assert_eq!(m.reduce128(v) as u128, v % p as u128);
                let (a, b) = (x % p, y % p);
                assert_eq!(m.mul(a, b) as u128, (a as u128 * b as u128) % p as u128);
                let w = y % p;
                assert_eq!(
                    mul_shoup(x, w, m.shoup(w), p) as u128,
                    (x as u128 * w as u128) % p as u128
                );
            }
        }
    }

    #[test]
    fn primes_are_ntt_friendly() {
        for p in ntt_primes(60, 4096, 3) {
            assert!(is_prime(p) && p % 8192 == 1 && p < 1 << 60 && p > 1 << 59);
        }
    }
}
