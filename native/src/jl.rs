//! Joye–Libert decryption's discrete logarithm (Joye & Libert, EUROCRYPT 2013; seed 000 §II-B): with
//! h = c^p' mod p = g^m and g of order 2^k in Z*_p, m by Pohlig–Hellman split in halves — for m = lo + 2^n1·hi
//! in a group of order 2^n (n1 = ⌊n/2⌋, n2 = n − n1): h^(2^n2) = g_n1^lo gives lo, then h·g_n^(−lo) = g_n2^hi
//! gives hi, down to w-bit pieces read from a 2^w-entry table. g_n^(−lo) costs one multiplication per byte
//! of lo from precomputed tables T_n[j][v] = g_n^(−v·2^(8j)), g_n = g^(2^(k−n)).
//!
//! The same algorithm and tables as privface/crypto/joye_libert.py ran in Python (now its test oracle);
//! the arithmetic is crypto-bigint's fixed-size Montgomery form (stack values, one instance per limb count).
//! The c^p' exponentiations stay in GMP (gmpy2).

use std::collections::HashMap;

use crypto_bigint::modular::{FixedMontyForm, FixedMontyParams};
use crypto_bigint::{Odd, Uint};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Discrete logarithms for one key (g of order 2^k modulo p), whatever p's size.
pub trait Dlog: Send + Sync {
    /// m mod 2^k for h = g^m (h big-endian, below p), written little-endian into `out` (⌈k/8⌉ zeroed bytes).
    fn dlog(&self, h: &[u8], out: &mut [u8]) -> Result<(), String>;
    fn w(&self) -> u32;
}

/// The tables at a fixed number of 64-bit limbs L (p < 2^(64·L)): leaf table for w-bit logarithms,
/// correction rows per inner node size.
struct Tables<const L: usize> {
    params: FixedMontyParams<L>,
    k: u32,
    w: u32,
    leaf: HashMap<u128, u32>,
    inner: HashMap<u32, Vec<Vec<FixedMontyForm<L>>>>,
}

/// The lookup key of an element: the low 128 bits of its Montgomery representation (distinct for the
/// elements of a leaf table: checked when it is built).
fn key<const L: usize>(x: &FixedMontyForm<L>) -> u128 {
    let w = x.as_montgomery().as_words();
    w[0] as u128 | if L > 1 { (w[1] as u128) << 64 } else { 0 }
}

/// A big-endian integer as Uint<L>; an error if it does not fit.
fn uint<const L: usize>(bytes: &[u8]) -> Result<Uint<L>, String> {
    let start = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let bytes = &bytes[start..];
    if bytes.len() > 8 * L {
        return Err("JL dlog: value does not fit p's size".into());
    }
    let mut padded = vec![0u8; 8 * L];
    padded[8 * L - bytes.len()..].copy_from_slice(bytes);
    Ok(Uint::from_be_slice(&padded))
}

impl<const L: usize> Tables<L> {
    fn new(p: &[u8], g: &[u8], k: u32, w: u32) -> Result<Self, String> {
        let modulus = Odd::new(uint::<L>(p)?).into_option().ok_or("JL dlog: p must be odd")?;
        let params = FixedMontyParams::new_vartime(modulus);
        let g = FixedMontyForm::new(&uint::<L>(g)?, &params);
        let one = FixedMontyForm::one(&params);
        // leaf: (g^(2^(k−w)))^i ↦ i
        let base = g.square_repeat_vartime(k - w);
        let mut leaf = HashMap::with_capacity(1 << w);
        let mut t = one;
        for i in 0..1u32 << w {
            if leaf.insert(key(&t), i).is_some() {
                return Err("JL dlog: g does not have order 2^k (or a table key collision)".into());
            }
            t = t.mul(&base);
        }
        if t != one {
            return Err("JL dlog: g^(2^(k−w)) does not have order 2^w".into());
        }
        let mut inner = HashMap::new();
        let mut todo = vec![k];
        while let Some(n) = todo.pop() {
            if n <= w || inner.contains_key(&n) {
                continue;
            }
            // g_n^(−1) = g_n^(2^n − 1) = Π_{i<n} g_n^(2^i), as g_n has order 2^n
            let mut sq = g.square_repeat_vartime(k - n);
            let mut g_n_inv = one;
            for _ in 0..n {
                g_n_inv = g_n_inv.mul(&sq);
                sq = sq.square();
            }
            inner.insert(n, fixed_base_table(&g_n_inv, n / 2, &one));
            todo.push(n / 2);
            todo.push(n - n / 2);
        }
        Ok(Tables {
            params,
            k,
            w,
            leaf,
            inner,
        })
    }

    fn solve(&self, h: FixedMontyForm<L>, n: u32, offset: u32, out: &mut [u8]) -> Result<(), String> {
        if n <= self.w {
            let v = *self.leaf.get(&key(&h)).ok_or("JL dlog: h is not a power of g")? >> (self.w - n);
            put_bits(out, offset, n, v);
            return Ok(());
        }
        let (n1, n2) = (n / 2, n - n / 2);
        self.solve(h.square_repeat_vartime(n2), n1, offset, out)?; // lo, bits [offset, offset + n1)
        let mut t = h;
        for (j, row) in self.inner[&n].iter().enumerate() {
            let byte = get_bits(out, offset + 8 * j as u32, (n1 - 8 * j as u32).min(8)) as usize;
            if byte != 0 {
                t = t.mul(&row[byte]);
            }
        }
        self.solve(t, n2, offset + n1, out) // hi
    }
}

impl<const L: usize> Dlog for Tables<L> {
    fn dlog(&self, h: &[u8], out: &mut [u8]) -> Result<(), String> {
        let h = uint::<L>(h)?;
        if h >= *self.params.modulus().as_ref() {
            return Err("JL dlog: h is not below p".into());
        }
        self.solve(FixedMontyForm::new(&h, &self.params), self.k, 0, out)
    }

    fn w(&self) -> u32 {
        self.w
    }
}

/// T[j][v] = base^(v·2^(8j)) for j < ⌈bits/8⌉, v < 256.
fn fixed_base_table<const L: usize>(
    base: &FixedMontyForm<L>,
    bits: u32,
    one: &FixedMontyForm<L>,
) -> Vec<Vec<FixedMontyForm<L>>> {
    let mut rows = Vec::new();
    let mut b = *base;
    for _ in 0..bits.div_ceil(8) {
        let mut row = Vec::with_capacity(256);
        let mut t = *one;
        for _ in 0..256 {
            row.push(t);
            t = t.mul(&b);
        }
        rows.push(row);
        b = t; // base^(256·2^(8j))
    }
    rows
}

/// Tables for g of order 2^k modulo the odd prime p (big-endian bytes), leaf size w ≤ min(k, 24), at the
/// smallest supported limb count that holds p (up to 4096 bits).
pub fn tables(p: &[u8], g: &[u8], k: u32, w: u32) -> Result<Box<dyn Dlog>, String> {
    if k == 0 || w == 0 || w > k || w > 24 {
        return Err(format!("JL dlog: need 1 ≤ w ≤ min(k, 24), got k = {k}, w = {w}"));
    }
    let bits = p
        .iter()
        .position(|&b| b != 0)
        .map_or(0, |i| 8 * (p.len() - i) - p[i].leading_zeros() as usize);
    macro_rules! sized {
        ($($l:literal),*) => {
            $(if bits <= 64 * $l {
                return Ok(Box::new(Tables::<$l>::new(p, g, k, w)?));
            })*
        };
    }
    sized!(1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 18, 20, 24, 32, 40, 48, 64);
    Err(format!("JL dlog: a {bits}-bit p is larger than supported (4096 bits)"))
}

fn get_bits(buf: &[u8], pos: u32, len: u32) -> u32 {
    (0..len).fold(0, |acc, i| {
        acc | (((buf[((pos + i) / 8) as usize] >> ((pos + i) % 8)) & 1) as u32) << i
    })
}

fn put_bits(buf: &mut [u8], pos: u32, len: u32, v: u32) {
    for i in 0..len {
        if (v >> i) & 1 == 1 {
            buf[((pos + i) / 8) as usize] |= 1 << ((pos + i) % 8);
        }
    }
}

// --- Python bindings ---------------------------------------------------------------------------

/// JLDlog(p, g, k, w): the discrete-log tables of one private key (p, g big-endian bytes).
#[pyclass(frozen, name = "JLDlog", module = "privface.crypto._native")]
pub struct PyDlog {
    inner: Box<dyn Dlog>,
    k: u32,
    p_bytes: usize,
}

#[pymethods]
impl PyDlog {
    #[new]
    fn py_new(py: Python<'_>, p: &[u8], g: &[u8], k: u32, w: u32) -> PyResult<Self> {
        py.detach(|| tables(p, g, k, w))
            .map(|inner| PyDlog {
                inner,
                k,
                p_bytes: p.len(),
            })
            .map_err(PyValueError::new_err)
    }

    #[getter]
    fn w(&self) -> u32 {
        self.inner.w()
    }

    /// dlog(hs) for hs the concatenated big-endian values h_i = c_i^p' mod p (each as long as p's
    /// bytes): the logarithms, ⌈k/8⌉ bytes each, little-endian, concatenated.
    fn dlog<'py>(&self, py: Python<'py>, hs: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let d = &self.inner;
        if !hs.len().is_multiple_of(self.p_bytes) {
            return Err(PyValueError::new_err("JL dlog: values must have p's length"));
        }
        let m_bytes = self.k.div_ceil(8) as usize;
        let count = hs.len() / self.p_bytes;
        let out = py
            .detach(|| {
                let mut out = vec![0u8; count * m_bytes];
                for (h, o) in hs.chunks(self.p_bytes).zip(out.chunks_mut(m_bytes)) {
                    d.dlog(h, o)?;
                }
                Ok::<_, String>(out)
            })
            .map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDlog>()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pow_mod(mut b: u64, mut e: u64, p: u64) -> u64 {
        let mut r = 1;
        b %= p;
        while e > 0 {
            if e & 1 == 1 {
                r = r * b % p;
            }
            b = b * b % p;
            e >>= 1;
        }
        r
    }

    #[test]
    fn every_logarithm_in_a_small_group() {
        // p = 7681 = 15·2^9 + 1; 17 is a non-residue mod p, so g = 17^15 has order 2^9
        let (p, k) = (7681u64, 9u32);
        assert_eq!(pow_mod(17, (p - 1) / 2, p), p - 1);
        let g = pow_mod(17, 15, p);
        for w in [1, 2, 3, 9] {
            let d = tables(&p.to_be_bytes(), &g.to_be_bytes(), k, w).unwrap();
            for m in 0..1u64 << k {
                let mut out = [0u8; 2];
                d.dlog(&pow_mod(g, m, p).to_be_bytes(), &mut out).unwrap();
                assert_eq!(u16::from_le_bytes(out) as u64, m, "w = {w}");
            }
        }
    }

    #[test]
    fn bad_inputs_are_errors() {
        let (p, k) = (7681u64, 9u32);
        let g = pow_mod(17, 15, p);
        assert!(tables(&p.to_be_bytes(), &pow_mod(g, 2, p).to_be_bytes(), k, 3).is_err()); // order 2^8
        let d = tables(&p.to_be_bytes(), &g.to_be_bytes(), k, 3).unwrap();
        let mut out = [0u8; 2];
        assert!(d.dlog(&p.to_be_bytes(), &mut out).is_err());
        assert!(d.dlog(&3u64.to_be_bytes(), &mut out).is_err()); // 3 has odd order part: not in <g>
    }
}
