//! The per-entry steps of CrypTFlow2's millionaires' protocol (Rathee et al., CCS 2020, Π_MILL — seed 001
//! §2.6 / Alg. 3), of its Beaver bit triples and of ABY's B2A (Demmler et al., NDSS 2015, §III-C), over the
//! random-OT keys of `otext` — the hot loops of privface/crypto/millionaire.py, which keeps the message order,
//! the randomness and the tweak bookkeeping.
//!
//! * 1-out-of-2^w OT from w random OTs: S masks message v with TCCR(⊕_t K_{t, v_t}, tweak0 + i·2^w + v)
//!   (two bits: lt ⊕ [v < y_j], eq ⊕ [v = y_j]); R unmasks the one at its block value x_j.
//! * Bit triples from two ROTs per triple (bit 0 of each key); B2A from one ROT per bit (the key's first four
//!   bytes read as a little-endian u32).
//!
//! Packed bits are LSB first (numpy's `bitorder="little"`); the outputs are byte for byte those of
//! tests/helpers/millionaire_oracle.py.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::bfv::pool;
use crate::otext::{contiguous, read_row, tccr_cipher, tccr_rows};

/// Entries per rayon task.
const CHUNK: usize = 1024;

/// The largest block width (2^w keys per entry).
pub const MAX_BLOCK_BITS: usize = 8;

fn check_block(keys: usize, m: usize, ell: usize, p: usize, w: usize) -> Result<(), String> {
    if !(1..=MAX_BLOCK_BITS).contains(&w) || p + w > ell || ell > 64 {
        return Err(format!("millionaire: block {p}..{} outside 0..{ell}", p + w));
    }
    if keys != 16 * m * ell {
        return Err(format!("millionaire: expected {m} × {ell} keys of 16 bytes"));
    }
    Ok(())
}

/// S's masked 2^w messages of block bits p..p+w of every entry: ct[i, v] = (lt | eq << 1) ⊕ (TCCR(key) & 3),
/// packed as bits (i, v, {lt, eq}).
#[allow(clippy::too_many_arguments)]
pub fn leaf_send(
    k0: &[u8],
    k1: &[u8],
    ell: usize,
    p: usize,
    w: usize,
    y: &[u64],
    ls: &[u8],
    es: &[u8],
    tweak0: u64,
) -> Result<Vec<u8>, String> {
    let m = y.len();
    check_block(k0.len(), m, ell, p, w)?;
    if k1.len() != k0.len() || ls.len() != m || es.len() != m {
        return Err("millionaire: keys, inputs and random bits differ in length".into());
    }
    let n = 1usize << w;
    let aes = tccr_cipher();
    let mut ct = vec![0u8; m * n];
    ct.par_chunks_mut(CHUNK * n).enumerate().for_each(|(c, out)| {
        let mut key = vec![0u128; n];
        for (k, o) in out.chunks_mut(n).enumerate() {
            let i = c * CHUNK + k;
            let row = i * ell + p;
            key[0] = read_row(k0, row);
            key[1] = read_row(k1, row);
            for t in 1..w {
                let (a, b) = (read_row(k0, row + t), read_row(k1, row + t));
                let half = 1 << t;
                for v in 0..half {
                    key[half + v] = key[v] ^ b;
                    key[v] ^= a;
                }
            }
            let base = tweak0.wrapping_add((i as u64) << w);
            tccr_rows(&aes, &mut key, |v| base.wrapping_add(v as u64));
            let yj = ((y[i] >> p) & ((1 << w) - 1)) as usize;
            for (v, o) in o.iter_mut().enumerate() {
                let lt = (ls[i] & 1) ^ u8::from(v < yj);
                let eq = (es[i] & 1) ^ u8::from(v == yj);
                *o = (lt | eq << 1) ^ (key[v] as u8 & 3);
            }
        }
    });
    Ok(pack2(&ct))
}

/// Two-bit values packed four to a byte, LSB first.
fn pack2(vals: &[u8]) -> Vec<u8> {
    vals.par_chunks(4)
        .map(|q| q.iter().enumerate().fold(0u8, |b, (k, &v)| b | v << (2 * k)))
        .collect()
}

/// R's (lt, eq) shares of block bits p..p+w: the message at its block value x_j, unmasked by
/// TCCR(⊕_t K_{t, x_t}).
pub fn leaf_recv(
    kr: &[u8],
    ell: usize,
    p: usize,
    w: usize,
    x: &[u64],
    ct: &[u8],
    tweak0: u64,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let m = x.len();
    check_block(kr.len(), m, ell, p, w)?;
    if ct.len() != (2 * (m << w)).div_ceil(8) {
        return Err("millionaire: the masked messages have the wrong length".into());
    }
    let aes = tccr_cipher();
    let mut got = vec![0u8; m];
    got.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
        let mut keys: Vec<u128> = Vec::with_capacity(out.len());
        let mut xs: Vec<usize> = Vec::with_capacity(out.len());
        for k in 0..out.len() {
            let i = c * CHUNK + k;
            let xj = ((x[i] >> p) & ((1 << w) - 1)) as usize;
            let row = i * ell + p;
            keys.push((0..w).fold(0u128, |a, t| a ^ read_row(kr, row + t)));
            xs.push(xj);
        }
        let first = c * CHUNK;
        tccr_rows(&aes, &mut keys, |k| {
            tweak0.wrapping_add((((first + k) as u64) << w) + xs[k] as u64)
        });
        for (k, o) in out.iter_mut().enumerate() {
            let bit = 2 * (((first + k) << w) + xs[k]);
            let two = (ct[bit / 8] >> (bit % 8)) & 3; // bit is even: both bits in one byte
            *o = two ^ (keys[k] as u8 & 3);
        }
    });
    Ok((
        got.iter().map(|g| g & 1).collect(),
        got.iter().map(|g| g >> 1).collect(),
    ))
}

fn bit0(keys: &[u8], i: usize) -> u8 {
    keys[16 * i] & 1
}

/// (a, c, the correction y0 ⊕ y1 ⊕ b) of every triple.
pub type Triples = (Vec<u8>, Vec<u8>, Vec<u8>);

/// S's triples from its ROT keys (t0, t1) of 2n OTs (x from the first n, y from the second) and its random b.
pub fn triples_send(t0: &[u8], t1: &[u8], b: &[u8]) -> Result<Triples, String> {
    let n = b.len();
    if t0.len() != 32 * n || t1.len() != t0.len() {
        return Err(format!("bit triples: expected 2 × {n} keys of 16 bytes"));
    }
    let (mut a, mut c, mut e) = (vec![0u8; n], vec![0u8; n], vec![0u8; n]);
    for i in 0..n {
        let (x0, x1, y0, y1) = (bit0(t0, i), bit0(t1, i), bit0(t0, n + i), bit0(t1, n + i));
        a[i] = x0 ^ x1;
        e[i] = y0 ^ y1 ^ b[i];
        c[i] = (a[i] & b[i]) ^ x0 ^ y0;
    }
    Ok((a, c, e))
}

/// R's c = a·b ⊕ x_{b} ⊕ y_{a} ⊕ a·e from its ROT keys (2n OTs with choices b ‖ a) and S's correction e.
pub fn triples_recv(kt: &[u8], a: &[u8], b: &[u8], e: &[u8]) -> Result<Vec<u8>, String> {
    let n = a.len();
    if kt.len() != 32 * n || b.len() != n || e.len() != n {
        return Err(format!("bit triples: expected 2 × {n} keys of 16 bytes and {n} bits"));
    }
    Ok((0..n)
        .map(|i| (a[i] & b[i]) ^ bit0(kt, i) ^ bit0(kt, n + i) ^ (a[i] & e[i]))
        .collect())
}

fn low32(keys: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(keys[16 * i..16 * i + 4].try_into().expect("4 bytes"))
}

/// S's B2A step: (D_i = r0 − r1 + b_S mod 2^32 as little-endian u32 bytes, its share b_S − 2·(−r0) mod 2^32).
pub fn b2a_send(k0: &[u8], k1: &[u8], b: &[u8]) -> Result<(Vec<u8>, Vec<u64>), String> {
    let n = b.len();
    if k0.len() != 16 * n || k1.len() != k0.len() {
        return Err(format!("B2A: expected {n} keys of 16 bytes"));
    }
    let mut d = Vec::with_capacity(4 * n);
    let mut share = Vec::with_capacity(n);
    for (i, &bi) in b.iter().enumerate() {
        let (r0, r1, bi) = (low32(k0, i), low32(k1, i), u32::from(bi));
        d.extend_from_slice(&r0.wrapping_sub(r1).wrapping_add(bi).to_le_bytes());
        share.push(u64::from(bi.wrapping_sub(r0.wrapping_neg().wrapping_mul(2))));
    }
    Ok((d, share))
}

/// R's B2A step: its share b_R − 2·(rc + b_R·D) mod 2^32.
pub fn b2a_recv(kr: &[u8], b: &[u8], d: &[u8]) -> Result<Vec<u64>, String> {
    let n = b.len();
    if kr.len() != 16 * n || d.len() != 4 * n {
        return Err(format!("B2A: expected {n} keys of 16 bytes and {n} words"));
    }
    Ok((0..n)
        .map(|i| {
            let di = u32::from_le_bytes(d[4 * i..4 * i + 4].try_into().expect("4 bytes"));
            let bi = u32::from(b[i]);
            let y = low32(kr, i).wrapping_add(bi.wrapping_mul(di));
            u64::from(bi.wrapping_sub(y.wrapping_mul(2)))
        })
        .collect())
}

// ----------------------------------------------------------------------------------------- Python
fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

type Bits<'py> = Bound<'py, PyArray1<u8>>;

/// S's masked messages of one block (bytes to send, uint8): keys k0, k1 (m·ell, 16), inputs y (m,) uint64,
/// random bits ls, es (m,) uint8, first tweak.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn mill_leaf_send<'py>(
    py: Python<'py>,
    k0: PyReadonlyArrayDyn<'py, u8>,
    k1: PyReadonlyArrayDyn<'py, u8>,
    ell: usize,
    p: usize,
    w: usize,
    y: PyReadonlyArrayDyn<'py, u64>,
    ls: PyReadonlyArrayDyn<'py, u8>,
    es: PyReadonlyArrayDyn<'py, u8>,
    tweak0: u64,
) -> PyResult<Bits<'py>> {
    let (k0, k1) = (contiguous(&k0, "k0")?, contiguous(&k1, "k1")?);
    let (y, ls, es) = (contiguous(&y, "y")?, contiguous(&ls, "ls")?, contiguous(&es, "es")?);
    let out = py
        .detach(|| pool::install(|| leaf_send(k0, k1, ell, p, w, y, ls, es, tweak0)))
        .map_err(err)?;
    Ok(out.into_pyarray(py))
}

/// R's (lt, eq) bits (m,) uint8 of one block: keys kr (m·ell, 16), inputs x (m,) uint64, S's packed ct.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn mill_leaf_recv<'py>(
    py: Python<'py>,
    kr: PyReadonlyArrayDyn<'py, u8>,
    ell: usize,
    p: usize,
    w: usize,
    x: PyReadonlyArrayDyn<'py, u64>,
    ct: PyReadonlyArrayDyn<'py, u8>,
    tweak0: u64,
) -> PyResult<(Bits<'py>, Bits<'py>)> {
    let (kr, x, ct) = (contiguous(&kr, "kr")?, contiguous(&x, "x")?, contiguous(&ct, "ct")?);
    let (lt, eq) = py
        .detach(|| pool::install(|| leaf_recv(kr, ell, p, w, x, ct, tweak0)))
        .map_err(err)?;
    Ok((lt.into_pyarray(py), eq.into_pyarray(py)))
}

/// S's bit triples: ROT keys t0, t1 (2n, 16), random b (n,) → (a, c, correction), each (n,) uint8.
#[pyfunction(name = "triples_send")]
fn py_triples_send<'py>(
    py: Python<'py>,
    t0: PyReadonlyArrayDyn<'py, u8>,
    t1: PyReadonlyArrayDyn<'py, u8>,
    b: PyReadonlyArrayDyn<'py, u8>,
) -> PyResult<(Bits<'py>, Bits<'py>, Bits<'py>)> {
    let (t0, t1, b) = (contiguous(&t0, "t0")?, contiguous(&t1, "t1")?, contiguous(&b, "b")?);
    let (a, c, e) = py.detach(|| triples_send(t0, t1, b)).map_err(err)?;
    Ok((a.into_pyarray(py), c.into_pyarray(py), e.into_pyarray(py)))
}

/// R's bit triples' c (n,) uint8: ROT keys kt (2n, 16) for choices b ‖ a, its a, b and S's correction e.
#[pyfunction(name = "triples_recv")]
fn py_triples_recv<'py>(
    py: Python<'py>,
    kt: PyReadonlyArrayDyn<'py, u8>,
    a: PyReadonlyArrayDyn<'py, u8>,
    b: PyReadonlyArrayDyn<'py, u8>,
    e: PyReadonlyArrayDyn<'py, u8>,
) -> PyResult<Bits<'py>> {
    let (kt, a) = (contiguous(&kt, "kt")?, contiguous(&a, "a")?);
    let (b, e) = (contiguous(&b, "b")?, contiguous(&e, "e")?);
    let c = py.detach(|| triples_recv(kt, a, b, e)).map_err(err)?;
    Ok(c.into_pyarray(py))
}

/// S's B2A: ROT keys k0, k1 (n, 16), its bits (n,) uint8 → (D as 4n bytes uint8, its shares (n,) uint64).
#[pyfunction(name = "b2a_send")]
fn py_b2a_send<'py>(
    py: Python<'py>,
    k0: PyReadonlyArrayDyn<'py, u8>,
    k1: PyReadonlyArrayDyn<'py, u8>,
    b: PyReadonlyArrayDyn<'py, u8>,
) -> PyResult<(Bits<'py>, Bound<'py, PyArray1<u64>>)> {
    let (k0, k1, b) = (contiguous(&k0, "k0")?, contiguous(&k1, "k1")?, contiguous(&b, "b")?);
    let (d, s) = py.detach(|| b2a_send(k0, k1, b)).map_err(err)?;
    Ok((d.into_pyarray(py), s.into_pyarray(py)))
}

/// R's B2A: ROT keys kr (n, 16), its bits (n,) uint8, S's D (4n bytes) → its shares (n,) uint64.
#[pyfunction(name = "b2a_recv")]
fn py_b2a_recv<'py>(
    py: Python<'py>,
    kr: PyReadonlyArrayDyn<'py, u8>,
    b: PyReadonlyArrayDyn<'py, u8>,
    d: PyReadonlyArrayDyn<'py, u8>,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let (kr, b, d) = (contiguous(&kr, "kr")?, contiguous(&b, "b")?, contiguous(&d, "D")?);
    let s = py.detach(|| b2a_recv(kr, b, d)).map_err(err)?;
    Ok(s.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mill_leaf_send, m)?)?;
    m.add_function(wrap_pyfunction!(mill_leaf_recv, m)?)?;
    m.add_function(wrap_pyfunction!(py_triples_send, m)?)?;
    m.add_function(wrap_pyfunction!(py_triples_recv, m)?)?;
    m.add_function(wrap_pyfunction!(py_b2a_send, m)?)?;
    m.add_function(wrap_pyfunction!(py_b2a_recv, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(m: usize, salt: u8) -> Vec<u8> {
        (0..16 * m)
            .map(|i| (i as u8).wrapping_mul(29).wrapping_add(salt))
            .collect()
    }

    #[test]
    fn the_receiver_unmasks_the_message_at_its_block_value() {
        let (m, ell, w) = (37usize, 8usize, 4usize);
        let (k0, k1) = (keys(m * ell, 3), keys(m * ell, 101));
        let y: Vec<u64> = (0..m as u64).map(|i| i * 7 % 256).collect();
        let x: Vec<u64> = (0..m as u64).map(|i| i * 11 % 256).collect();
        // R's keys: K_{t, x_t}
        let mut kr = vec![0u8; k0.len()];
        for (i, xi) in x.iter().enumerate() {
            for t in 0..ell {
                let src = if xi >> t & 1 == 1 { &k1 } else { &k0 };
                let o = 16 * (i * ell + t);
                kr[o..o + 16].copy_from_slice(&src[o..o + 16]);
            }
        }
        let ls: Vec<u8> = (0..m).map(|i| (i % 2) as u8).collect();
        let es: Vec<u8> = (0..m).map(|i| (i / 3 % 2) as u8).collect();
        for p in [0, 4] {
            let ct = leaf_send(&k0, &k1, ell, p, w, &y, &ls, &es, 1 << 63).unwrap();
            let (lt, eq) = leaf_recv(&kr, ell, p, w, &x, &ct, 1 << 63).unwrap();
            for i in 0..m {
                let (xj, yj) = (x[i] >> p & 15, y[i] >> p & 15);
                assert_eq!(lt[i] ^ ls[i], u8::from(xj < yj));
                assert_eq!(eq[i] ^ es[i], u8::from(xj == yj));
            }
        }
    }

    #[test]
    fn b2a_shares_add_to_the_xor() {
        let n = 50;
        let (k0, k1) = (keys(n, 9), keys(n, 77));
        let bs: Vec<u8> = (0..n).map(|i| (i % 3 == 0) as u8).collect();
        let br: Vec<u8> = (0..n).map(|i| (i % 5 == 0) as u8).collect();
        let kr: Vec<u8> = (0..n)
            .flat_map(|i| if br[i] == 1 { &k1 } else { &k0 }[16 * i..16 * i + 16].to_vec())
            .collect();
        let (d, s) = b2a_send(&k0, &k1, &bs).unwrap();
        let r = b2a_recv(&kr, &br, &d).unwrap();
        for i in 0..n {
            assert_eq!((s[i] + r[i]) & 0xFFFF_FFFF, u64::from(bs[i] ^ br[i]));
        }
    }
}
