//! Exponentiation modulo a public odd N (a Joye–Libert modulus, 2048 or 3072 bits) for the server's
//! BlindESED (seed 000 eq. (4)–(5)): the columns β̄_i^r share one exponent, α is one multi-exponentiation
//! Π β̄_i^(e_i).
//!
//! The arithmetic is OpenSSL's Montgomery multiplication (libcrypto BN, x86-64 mulx/adx assembly), about
//! twice GMP's speed at these sizes; the Pippenger loop is the one privface/crypto/numbers.py's `multiexp`
//! runs in Python (its test oracle). Both are variable-time in the exponent: the callers' exponents are the
//! server's per-attempt randomizers, each used once. openssl-sys declares the BN functions but not the
//! Montgomery-context ones and BN_copy, declared below from <openssl/bn.h>.

use std::os::raw::c_int;
use std::ptr;

use openssl_sys::{
    BIGNUM, BN_CTX, BN_CTX_free, BN_CTX_new, BN_MONT_CTX, BN_bin2bn, BN_bn2binpad, BN_cmp, BN_free, BN_is_odd, BN_new,
    BN_num_bits, BN_set_word,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

unsafe extern "C" {
    fn BN_copy(to: *mut BIGNUM, from: *const BIGNUM) -> *mut BIGNUM;
    fn BN_MONT_CTX_new() -> *mut BN_MONT_CTX;
    fn BN_MONT_CTX_free(mont: *mut BN_MONT_CTX);
    fn BN_MONT_CTX_set(mont: *mut BN_MONT_CTX, modulus: *const BIGNUM, ctx: *mut BN_CTX) -> c_int;
    fn BN_mod_exp_mont(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        p: *const BIGNUM,
        m: *const BIGNUM,
        ctx: *mut BN_CTX,
        mont: *mut BN_MONT_CTX,
    ) -> c_int;
    fn BN_mod_mul_montgomery(
        r: *mut BIGNUM,
        a: *const BIGNUM,
        b: *const BIGNUM,
        mont: *mut BN_MONT_CTX,
        ctx: *mut BN_CTX,
    ) -> c_int;
    fn BN_to_montgomery(r: *mut BIGNUM, a: *const BIGNUM, mont: *mut BN_MONT_CTX, ctx: *mut BN_CTX) -> c_int;
    fn BN_from_montgomery(r: *mut BIGNUM, a: *const BIGNUM, mont: *mut BN_MONT_CTX, ctx: *mut BN_CTX) -> c_int;
}

const OOM: &str = "modexp: OpenSSL could not allocate a number";

/// An owned BIGNUM.
struct Bn(*mut BIGNUM);

impl Bn {
    fn new() -> Result<Self, String> {
        let p = unsafe { BN_new() };
        if p.is_null() { Err(OOM.into()) } else { Ok(Bn(p)) }
    }

    fn from_be(bytes: &[u8]) -> Result<Self, String> {
        let len = c_int::try_from(bytes.len()).map_err(|_| "modexp: number too long")?;
        let p = unsafe { BN_bin2bn(bytes.as_ptr(), len, ptr::null_mut()) };
        if p.is_null() { Err(OOM.into()) } else { Ok(Bn(p)) }
    }

    fn copy_from(&mut self, other: &Bn) -> Result<(), String> {
        if unsafe { BN_copy(self.0, other.0) }.is_null() {
            return Err(OOM.into());
        }
        Ok(())
    }

    fn write_be(&self, out: &mut [u8]) {
        let n = unsafe { BN_bn2binpad(self.0, out.as_mut_ptr(), out.len() as c_int) };
        debug_assert_eq!(n as usize, out.len());
    }
}

impl Drop for Bn {
    fn drop(&mut self) {
        unsafe { BN_free(self.0) }
    }
}

/// A BN_CTX: per call, never shared between threads.
struct Ctx(*mut BN_CTX);

impl Ctx {
    fn new() -> Result<Self, String> {
        let p = unsafe { BN_CTX_new() };
        if p.is_null() { Err(OOM.into()) } else { Ok(Ctx(p)) }
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        unsafe { BN_CTX_free(self.0) }
    }
}

fn check(ok: c_int) -> Result<(), String> {
    if ok == 1 {
        Ok(())
    } else {
        Err("modexp: an OpenSSL BN operation failed".into())
    }
}

/// N with its Montgomery context (read-only after construction, so shared by threads).
pub struct Modulus {
    n: Bn,
    mont: *mut BN_MONT_CTX,
    bytes: usize,
}

// The context and N are only read after `new` (OpenSSL's RSA shares a BN_MONT_CTX between threads the same way).
unsafe impl Send for Modulus {}
unsafe impl Sync for Modulus {}

impl Drop for Modulus {
    fn drop(&mut self) {
        unsafe { BN_MONT_CTX_free(self.mont) }
    }
}

impl Modulus {
    /// N from big-endian bytes: odd and above 1. Values are then read and written at N's byte length.
    pub fn new(n: &[u8]) -> Result<Self, String> {
        let bn = Bn::from_be(n)?;
        let bits = unsafe { BN_num_bits(bn.0) };
        if bits < 2 || unsafe { BN_is_odd(bn.0) } != 1 {
            return Err("modexp: the modulus must be odd and above 1".into());
        }
        let ctx = Ctx::new()?;
        let mont = unsafe { BN_MONT_CTX_new() };
        if mont.is_null() {
            return Err(OOM.into());
        }
        let m = Modulus {
            n: bn,
            mont,
            bytes: (bits as usize).div_ceil(8),
        };
        check(unsafe { BN_MONT_CTX_set(m.mont, m.n.0, ctx.0) })?;
        Ok(m)
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// A value read from exactly N's byte length, below N.
    fn element(&self, bytes: &[u8]) -> Result<Bn, String> {
        let v = Bn::from_be(bytes)?;
        if unsafe { BN_cmp(v.0, self.n.0) } >= 0 {
            return Err("modexp: a base is not below the modulus".into());
        }
        Ok(v)
    }

    fn values<'a>(&self, concat: &'a [u8]) -> Result<std::slice::ChunksExact<'a, u8>, String> {
        if !concat.len().is_multiple_of(self.bytes) {
            return Err(format!("modexp: values must be {} bytes each", self.bytes));
        }
        Ok(concat.chunks_exact(self.bytes))
    }

    /// [b^e mod N for b in bases] (concatenated at N's length), e big-endian.
    pub fn pow_many(&self, bases: &[u8], exponent: &[u8]) -> Result<Vec<u8>, String> {
        let e = Bn::from_be(exponent)?;
        let ctx = Ctx::new()?;
        let r = Bn::new()?;
        let mut out = vec![0u8; bases.len()];
        for (b, o) in self.values(bases)?.zip(out.chunks_exact_mut(self.bytes)) {
            let b = self.element(b)?;
            check(unsafe { BN_mod_exp_mont(r.0, b.0, e.0, self.n.0, ctx.0, self.mont) })?;
            r.write_be(o);
        }
        Ok(out)
    }

    /// Π b_i^(e_i) mod N by Pippenger's bucket method (numbers.py `multiexp`): per `window`-bit digit
    /// position, the bases bucketed by digit and the buckets summed by running products. Exponents are
    /// big-endian, `exp_bytes` each; `window` 0 picks the cheapest for (bits/window)·(n + 2^(window+1)).
    pub fn multiexp(&self, bases: &[u8], exponents: &[u8], exp_bytes: usize, window: u32) -> Result<Vec<u8>, String> {
        if exp_bytes == 0 || !exponents.len().is_multiple_of(exp_bytes) {
            return Err("modexp: exponents must be exp_bytes each".into());
        }
        let count = exponents.len() / exp_bytes;
        if bases.len() != count * self.bytes {
            return Err("modexp: multiexp needs as many exponents as bases".into());
        }
        let ctx = Ctx::new()?;
        let mut mont_bases = Vec::with_capacity(count);
        for b in self.values(bases)? {
            let v = self.element(b)?;
            check(unsafe { BN_to_montgomery(v.0, v.0, self.mont, ctx.0) })?;
            mont_bases.push(v);
        }
        let exps: Vec<&[u8]> = exponents.chunks_exact(exp_bytes).collect();
        let bits = exps.iter().map(|e| bit_length(e)).max().unwrap_or(0);
        let one = Bn::new()?;
        check(unsafe { BN_set_word(one.0, 1) })?;
        let mut acc = Bn::new()?;
        check(unsafe { BN_to_montgomery(acc.0, one.0, self.mont, ctx.0) })?;
        if bits > 0 {
            let c = if window > 0 {
                window.min(16)
            } else {
                (1..=8u32)
                    .min_by_key(|&c| bits.div_ceil(c) as usize * (count + (2usize << c)))
                    .unwrap_or(4)
            };
            let mut buckets: Vec<Option<Bn>> = (0..1usize << c).map(|_| None).collect();
            let mut running = Bn::new()?;
            let mut total = Bn::new()?;
            let mut started = false;
            let mut pos = (bits - 1) / c * c;
            loop {
                if started {
                    for _ in 0..c {
                        self.mul(&acc, &acc, &acc, &ctx)?;
                    }
                }
                for (b, e) in mont_bases.iter().zip(&exps) {
                    let d = digit(e, pos, c);
                    if d != 0 {
                        match &mut buckets[d] {
                            Some(x) => self.mul(x, x, b, &ctx)?,
                            slot => {
                                let mut x = Bn::new()?;
                                x.copy_from(b)?;
                                *slot = Some(x);
                            }
                        }
                    }
                }
                let (mut have_running, mut have_total) = (false, false);
                for d in (1..buckets.len()).rev() {
                    if let Some(x) = buckets[d].take() {
                        if have_running {
                            self.mul(&running, &running, &x, &ctx)?;
                        } else {
                            running.copy_from(&x)?;
                            have_running = true;
                        }
                    }
                    if have_running {
                        if have_total {
                            self.mul(&total, &total, &running, &ctx)?;
                        } else {
                            total.copy_from(&running)?;
                            have_total = true;
                        }
                    }
                }
                if have_total {
                    if started {
                        self.mul(&acc, &acc, &total, &ctx)?;
                    } else {
                        acc.copy_from(&total)?;
                        started = true;
                    }
                }
                if pos == 0 {
                    break;
                }
                pos -= c;
            }
        }
        let r = Bn::new()?;
        check(unsafe { BN_from_montgomery(r.0, acc.0, self.mont, ctx.0) })?;
        let mut out = vec![0u8; self.bytes];
        r.write_be(&mut out);
        Ok(out)
    }

    /// r = a·b·R⁻¹ mod N (Montgomery form); r may alias a or b.
    fn mul(&self, r: &Bn, a: &Bn, b: &Bn, ctx: &Ctx) -> Result<(), String> {
        check(unsafe { BN_mod_mul_montgomery(r.0, a.0, b.0, self.mont, ctx.0) })
    }
}

fn bit_length(e: &[u8]) -> u32 {
    e.iter()
        .position(|&b| b != 0)
        .map_or(0, |i| 8 * (e.len() - i) as u32 - e[i].leading_zeros())
}

/// Bits [pos, pos + c) of the big-endian e.
fn digit(e: &[u8], pos: u32, c: u32) -> usize {
    let mut d = 0usize;
    for i in 0..c {
        let bit = pos + i;
        let byte = e.len() as i64 - 1 - (bit / 8) as i64;
        if byte >= 0 && (e[byte as usize] >> (bit % 8)) & 1 == 1 {
            d |= 1 << i;
        }
    }
    d
}

// --- Python bindings ---------------------------------------------------------------------------

/// MontModulus(n): exponentiation modulo the odd n (big-endian bytes); values at n's byte length.
#[pyclass(frozen, name = "MontModulus", module = "privface_native")]
pub struct PyModulus(Modulus);

#[pymethods]
impl PyModulus {
    #[new]
    fn py_new(n: &[u8]) -> PyResult<Self> {
        Modulus::new(n).map(PyModulus).map_err(PyValueError::new_err)
    }

    /// n's length in bytes: the width of every value passed in and out.
    #[getter]
    fn size(&self) -> usize {
        self.0.bytes()
    }

    /// pow_many(bases, exponent): b^e for each base (concatenated, each at n's length), variable-time in e.
    fn pow_many<'py>(&self, py: Python<'py>, bases: &[u8], exponent: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let out = py
            .detach(|| self.0.pow_many(bases, exponent))
            .map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }

    /// multiexp(bases, exponents, exp_bytes, window=0): Π b_i^(e_i) mod n, variable-time in the e_i.
    #[pyo3(signature = (bases, exponents, exp_bytes, window = 0))]
    fn multiexp<'py>(
        &self,
        py: Python<'py>,
        bases: &[u8],
        exponents: &[u8],
        exp_bytes: usize,
        window: u32,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let out = py
            .detach(|| self.0.multiexp(bases, exponents, exp_bytes, window))
            .map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyModulus>()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be(v: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        out[len - 8..].copy_from_slice(&v.to_be_bytes());
        out
    }

    fn pow_mod(b: u64, mut e: u64, m: u64) -> u64 {
        let (mut r, mut b) = (1u128, b as u128 % m as u128);
        while e > 0 {
            if e & 1 == 1 {
                r = r * b % m as u128;
            }
            b = b * b % m as u128;
            e >>= 1;
        }
        r as u64
    }

    const M: u64 = 0xffff_ffff_ffff_ffc5; // the largest 64-bit prime

    #[test]
    fn pow_many_matches_square_and_multiply() {
        let m = Modulus::new(&be(M, 8)).unwrap();
        let bases: Vec<u64> = vec![2, 3, M - 1, 123_456_789_012_345];
        let concat: Vec<u8> = bases.iter().flat_map(|&b| be(b, 8)).collect();
        let out = m.pow_many(&concat, &be(0xdead_beef_1234, 8)).unwrap();
        for (b, o) in bases.iter().zip(out.chunks(8)) {
            assert_eq!(
                u64::from_be_bytes(o.try_into().unwrap()),
                pow_mod(*b, 0xdead_beef_1234, M)
            );
        }
    }

    #[test]
    fn multiexp_matches_product_of_powers() {
        let m = Modulus::new(&be(M, 8)).unwrap();
        let bases: Vec<u64> = (0..40).map(|i| 7 + 1_000_003 * i).collect();
        let exps: Vec<u64> = (0..40)
            .map(|i| if i % 7 == 3 { 0 } else { 0x9e37_79b9_7f4a_7c15u64 >> i })
            .collect();
        let want = bases
            .iter()
            .zip(&exps)
            .fold(1u128, |acc, (&b, &e)| acc * pow_mod(b, e, M) as u128 % M as u128) as u64;
        let concat_b: Vec<u8> = bases.iter().flat_map(|&b| be(b, 8)).collect();
        let concat_e: Vec<u8> = exps.iter().flat_map(|&e| be(e, 8)).collect();
        for window in [0, 1, 3, 5, 9] {
            let out = m.multiexp(&concat_b, &concat_e, 8, window).unwrap();
            assert_eq!(u64::from_be_bytes(out[..].try_into().unwrap()), want, "window {window}");
        }
        let zeros = vec![0u8; 40 * 8];
        assert_eq!(m.multiexp(&concat_b, &zeros, 8, 0).unwrap(), be(1, 8));
    }

    #[test]
    fn refuses_bad_input() {
        assert!(Modulus::new(&be(10, 8)).is_err());
        assert!(Modulus::new(&be(1, 8)).is_err());
        let m = Modulus::new(&be(M, 8)).unwrap();
        assert!(m.pow_many(&be(M, 8), &be(3, 8)).is_err()); // not below N
        assert!(m.pow_many(&[1, 2, 3], &be(3, 8)).is_err()); // not N's length
        assert!(m.multiexp(&be(3, 8), &be(3, 8)[..7], 8, 0).is_err());
    }
}
