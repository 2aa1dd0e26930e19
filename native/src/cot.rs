//! Random OTs from correlated OTs (Ferret's outputs, `ferret`), as EMP and OpenCheetah derive them: the
//! sender's COT (s_j, Δ) gives the two keys H(j, s_j), H(j, s_j ⊕ Δ), the receiver's (b_j, r_j = s_j ⊕ b_j·Δ)
//! the key H(j, r_j) of its random choice b_j, H the tweakable correlation-robust hash TCCR of `prp` (Guo, Katz,
//! Wang, Yu, S&P 2020) — IKNP's output hash (Ishai et al. 2003 §3), applied to Ferret's correlation instead.
//!
//! A chosen choice c_j costs one bit: the receiver sends d_j = c_j ⊕ b_j and the sender swaps its keys where
//! d_j = 1 (Beaver's derandomisation, CRYPTO 1995): (H(j, s_j ⊕ d_j·Δ), H(j, s_j ⊕ ¬d_j·Δ)), so key c_j is
//! H(j, s_j ⊕ b_j·Δ) = H(j, r_j). Random choices (the triples' a, b) take Ferret's b_j as they are: no bit.
//!
//! `ferret`'s pools hash each refill's COTs as they add them (`cot_rot_send`/`cot_rot_recv` with the tweaks the
//! COTs will be used with) and keep the keys' first 4 bytes, which `millionaire::leaves_send_keys` and
//! `leaves_recv_keys` read: an identification hashes nothing. `send_with`/`recv_with` hash task by task for a
//! consumer (the tests compare the leaves on their keys with the leaves on keys hashed ahead).

use numpy::{PyArray2, PyArrayMethods, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::bfv::pool;
use crate::millionaire::{LeafInputs, leaves_recv_keys, leaves_send_keys};
use crate::otext::{Shared, contiguous, pack_bits};
use crate::prp::{Prp, TCCR_KEY, tccr_to};

/// OTs per task at most (before rounding to whole groups).
const COLS: usize = 4096;

/// OTs per task: whole groups of `group` OTs, starting on a byte.
fn task_cols(group: usize) -> usize {
    (COLS / (8 * group)).max(1) * 8 * group
}

fn bit(packed: &[u8], i: usize) -> u8 {
    packed[i / 8] >> (i % 8) & 1
}

/// The sender's keys of the m COTs s (m × 16 bytes): per task of whole groups, (first OT, H(j, s_j ⊕ d_j·Δ),
/// H(j, s_j ⊕ ¬d_j·Δ)) to `consume`, tweak j = counter + index; d packed LSB first, or empty (no correction).
pub fn send_with<F>(s: &[u8], delta: u128, d: &[u8], counter: u64, group: usize, consume: F) -> Result<(), String>
where
    F: Fn(usize, &[u8], &[u8]) + Sync,
{
    let m = s.len() / 16;
    if !s.len().is_multiple_of(16) || group == 0 {
        return Err("COT: the sender's s must be rows of 16 bytes".into());
    }
    if !d.is_empty() && d.len() != m.div_ceil(8) {
        return Err(format!(
            "COT: {m} corrections are {} packed bytes, not {}",
            m.div_ceil(8),
            d.len()
        ));
    }
    let (aes, cols) = (Prp::new(&TCCR_KEY), task_cols(group));
    (0..m.div_ceil(cols)).into_par_iter().for_each_init(
        || (vec![0u8; 16 * cols], vec![0u8; 16 * cols], vec![0u8; 16 * cols]),
        |(x, h0, h1), t| {
            let (first, n) = (t * cols, cols.min(m - t * cols));
            let (x, h0, h1) = (&mut x[..16 * n], &mut h0[..16 * n], &mut h1[..16 * n]);
            x.copy_from_slice(&s[16 * first..16 * (first + n)]);
            if !d.is_empty() {
                for (k, row) in x.chunks_exact_mut(16).enumerate() {
                    if bit(d, first + k) == 1 {
                        let v = u128::from_le_bytes((&*row).try_into().expect("16 bytes")) ^ delta;
                        row.copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            let tweak = counter.wrapping_add(first as u64);
            tccr_to(&aes, x, 0, h0, tweak);
            tccr_to(&aes, x, delta, h1, tweak);
            consume(first, h0, h1);
        },
    );
    Ok(())
}

/// The receiver's keys H(j, r_j) of the m COTs r (m × 16 bytes), per task to `consume(first OT, keys)`.
pub fn recv_with<F>(r: &[u8], counter: u64, group: usize, consume: F) -> Result<(), String>
where
    F: Fn(usize, &[u8]) + Sync,
{
    if !r.len().is_multiple_of(16) || group == 0 {
        return Err("COT: the receiver's r must be rows of 16 bytes".into());
    }
    let (m, aes, cols) = (r.len() / 16, Prp::new(&TCCR_KEY), task_cols(group));
    (0..m.div_ceil(cols)).into_par_iter().for_each_init(
        || vec![0u8; 16 * cols],
        |h, t| {
            let (first, n) = (t * cols, cols.min(m - t * cols));
            let h = &mut h[..16 * n];
            tccr_to(
                &aes,
                &r[16 * first..16 * (first + n)],
                0,
                h,
                counter.wrapping_add(first as u64),
            );
            consume(first, h);
        },
    );
    Ok(())
}

/// The first `width` bytes of every key (n × 16) into `out` (n × width).
fn prefixes(keys: &[u8], width: usize, out: &mut [u8]) {
    for (o, k) in out.chunks_exact_mut(width).zip(keys.chunks_exact(16)) {
        o.copy_from_slice(&k[..width]);
    }
}

/// The sender's random-OT keys, their first `width` bytes: (k0, k1), m × width each.
pub fn rot_send(s: &[u8], delta: u128, d: &[u8], counter: u64, width: usize) -> Result<(Vec<u8>, Vec<u8>), String> {
    if !(1..=16).contains(&width) {
        return Err("COT: keys of 1..=16 bytes".into());
    }
    let m = s.len() / 16;
    let (mut k0, mut k1) = (vec![0u8; width * m], vec![0u8; width * m]);
    let (o0, o1) = (Shared::new(&mut k0), Shared::new(&mut k1));
    send_with(s, delta, d, counter, 1, |first, h0, h1| {
        let n = h0.len() / 16;
        // SAFETY: the tasks' OT ranges first..first + n are disjoint.
        let (a, b) = unsafe { (o0.slice(width * first, width * n), o1.slice(width * first, width * n)) };
        prefixes(h0, width, a);
        prefixes(h1, width, b);
    })?;
    Ok((k0, k1))
}

/// The receiver's keys H(j, r_j), their first `width` bytes (m × width).
pub fn rot_recv(r: &[u8], counter: u64, width: usize) -> Result<Vec<u8>, String> {
    if !(1..=16).contains(&width) {
        return Err("COT: keys of 1..=16 bytes".into());
    }
    let mut k = vec![0u8; width * (r.len() / 16)];
    let o = Shared::new(&mut k);
    recv_with(r, counter, 1, |first, h| {
        let n = h.len() / 16;
        // SAFETY: the tasks' OT ranges are disjoint.
        prefixes(h, width, unsafe { o.slice(width * first, width * n) });
    })?;
    Ok(k)
}

// ----------------------------------------------------------------------------------------- Python
fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

fn delta_of(delta: &[u8]) -> PyResult<u128> {
    let b: [u8; 16] = delta.try_into().map_err(|_| err("COT: Δ must be 16 bytes".into()))?;
    Ok(u128::from_le_bytes(b))
}

type Bits<'py> = Bound<'py, numpy::PyArray1<u8>>;

fn arr2<'py>(py: Python<'py>, v: Vec<u8>, width: usize) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let n = v.len() / width;
    numpy::PyArray1::from_vec(py, v)
        .reshape([n, width])
        .map_err(|e| err(e.to_string()))
}

/// The sender's random-OT keys from COTs s (m, 16) uint8, Δ, packed corrections d (uint8, empty: none), the first
/// tweak → (k0, k1), each (m, width) uint8.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn cot_rot_send<'py>(
    py: Python<'py>,
    s: PyReadonlyArrayDyn<'py, u8>,
    delta: &[u8],
    d: PyReadonlyArrayDyn<'py, u8>,
    counter: u64,
    width: usize,
) -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
    let (s, d, delta) = (contiguous(&s, "s")?, contiguous(&d, "d")?, delta_of(delta)?);
    let (k0, k1) = py
        .detach(|| pool::install(|| rot_send(s, delta, d, counter, width)))
        .map_err(err)?;
    Ok((arr2(py, k0, width)?, arr2(py, k1, width)?))
}

/// The receiver's random-OT keys H(j, r_j) from COTs r (m, 16) uint8 → (m, width) uint8.
#[pyfunction]
fn cot_rot_recv<'py>(
    py: Python<'py>,
    r: PyReadonlyArrayDyn<'py, u8>,
    counter: u64,
    width: usize,
) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let r = contiguous(&r, "r")?;
    let k = py
        .detach(|| pool::install(|| rot_recv(r, counter, width)))
        .map_err(err)?;
    arr2(py, k, width)
}

/// S's masked leaf messages of Alg. 3's comparison (as `mill_leaves_send`) from its keys hashed ahead: k0, k1 (m·ell, 4) uint8 — the first
/// four bytes of H(j, s_j), H(j, s_j ⊕ Δ) (`cot_rot_send` without corrections) — and R's packed corrections d.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn cot_leaves_send_keys<'py>(
    py: Python<'py>,
    k0: PyReadonlyArrayDyn<'py, u8>,
    k1: PyReadonlyArrayDyn<'py, u8>,
    d: PyReadonlyArrayDyn<'py, u8>,
    ell: usize,
    widths: Vec<usize>,
    y: PyReadonlyArrayDyn<'py, u64>,
    ls: Vec<PyReadonlyArrayDyn<'py, u8>>,
    es: Vec<PyReadonlyArrayDyn<'py, u8>>,
) -> PyResult<Vec<Bits<'py>>> {
    let (k0, k1, d, y) = (
        contiguous(&k0, "k0")?,
        contiguous(&k1, "k1")?,
        contiguous(&d, "d")?,
        contiguous(&y, "y")?,
    );
    let inp = LeafInputs {
        y,
        ls: ls.iter().map(|a| contiguous(a, "ls")).collect::<PyResult<_>>()?,
        es: es.iter().map(|a| contiguous(a, "es")).collect::<PyResult<_>>()?,
    };
    let cts = py
        .detach(|| pool::install(|| leaves_send_keys(k0, k1, d, ell, &widths, &inp)))
        .map_err(err)?;
    Ok(cts.into_iter().map(|c| numpy::PyArray1::from_vec(py, c)).collect())
}

/// R's side of `cot_leaves_send_keys`: its choice bits b (m·ell,) uint8, keys hashed ahead k (m·ell, 4) uint8 (the
/// first four bytes of H(j, r_j)) and its inputs x (m,) uint64 → (the packed corrections d = bits(x) ⊕ b, per block
/// the masks (m,) uint8).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn cot_leaves_recv_keys<'py>(
    py: Python<'py>,
    b: PyReadonlyArrayDyn<'py, u8>,
    k: PyReadonlyArrayDyn<'py, u8>,
    ell: usize,
    widths: Vec<usize>,
    x: PyReadonlyArrayDyn<'py, u64>,
) -> PyResult<(Bits<'py>, Vec<Bits<'py>>)> {
    let (b, k, x) = (contiguous(&b, "b")?, contiguous(&k, "k")?, contiguous(&x, "x")?);
    if b.len() != x.len() * ell {
        return Err(err(format!(
            "COT: {} comparisons of {ell} bits take {} choice bits",
            x.len(),
            x.len() * ell
        )));
    }
    let (d, masks) = py
        .detach(|| {
            pool::install(|| {
                let masks = leaves_recv_keys(k, ell, &widths, x)?;
                Ok::<_, String>((corrections(b, x, ell), masks))
            })
        })
        .map_err(err)?;
    Ok((
        numpy::PyArray1::from_vec(py, d),
        masks.into_iter().map(|c| numpy::PyArray1::from_vec(py, c)).collect(),
    ))
}

/// R's corrections d = bits(x) ⊕ b (bit i·ell + t: bit t of x_i), packed; in parallel over runs of 8·k entries
/// (whole bytes).
fn corrections(b: &[u8], x: &[u64], ell: usize) -> Vec<u8> {
    const RUN: usize = 1 << 14;
    let mut d = vec![0u8; (x.len() * ell).div_ceil(8)];
    d.par_chunks_mut(RUN * ell / 8)
        .zip(x.par_chunks(RUN).zip(b.par_chunks(RUN * ell)))
        .for_each(|(o, (x, b))| {
            for ((o, f), p) in o
                .iter_mut()
                .zip(crate::millionaire::field_bits(x, ell))
                .zip(pack_bits(b))
            {
                *o = f ^ p;
            }
        });
    d
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cot_rot_send, m)?)?;
    m.add_function(wrap_pyfunction!(cot_rot_recv, m)?)?;
    m.add_function(wrap_pyfunction!(cot_leaves_send_keys, m)?)?;
    m.add_function(wrap_pyfunction!(cot_leaves_recv_keys, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::millionaire::{blocks_of, leaf_open, leaves_recv_by, leaves_send_by};

    /// COTs on a fixed Δ: (Δ, s; b, r = s ⊕ b·Δ).
    fn cots(m: usize) -> (u128, Vec<u8>, Vec<u8>, Vec<u8>) {
        let delta = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        let s: Vec<u8> = (0..16 * m)
            .map(|i| (i as u8).wrapping_mul(97).wrapping_add(13))
            .collect();
        let b: Vec<u8> = (0..m).map(|i| ((i * 2654435761) >> 9 & 1) as u8).collect();
        let r: Vec<u8> = (0..m)
            .flat_map(|i| {
                let v = u128::from_le_bytes(s[16 * i..16 * i + 16].try_into().unwrap());
                (if b[i] == 1 { v ^ delta } else { v }).to_le_bytes()
            })
            .collect();
        (delta, s, b, r)
    }

    #[test]
    fn the_receiver_holds_the_key_of_its_choice_and_not_the_other() {
        let m = 9000;
        let (delta, s, b, r) = cots(m);
        let kr = rot_recv(&r, 5, 16).unwrap();
        let (k0, k1) = rot_send(&s, delta, &[], 5, 16).unwrap();
        let c: Vec<u8> = (0..m).map(|i| (i % 3 == 0) as u8).collect();
        let d: Vec<u8> = pack_bits(&(0..m).map(|i| c[i] ^ b[i]).collect::<Vec<_>>());
        let (c0, c1) = rot_send(&s, delta, &d, 5, 16).unwrap();
        for i in 0..m {
            let (mine, other) = if b[i] == 1 { (&k1, &k0) } else { (&k0, &k1) };
            assert_eq!(kr[16 * i..16 * i + 16], mine[16 * i..16 * i + 16]);
            assert_ne!(kr[16 * i..16 * i + 16], other[16 * i..16 * i + 16]);
            let (mine, other) = if c[i] == 1 { (&c1, &c0) } else { (&c0, &c1) };
            assert_eq!(kr[16 * i..16 * i + 16], mine[16 * i..16 * i + 16], "corrected OT {i}");
            assert_ne!(kr[16 * i..16 * i + 16], other[16 * i..16 * i + 16]);
        }
        assert!(rot_send(&s, delta, &d[1..], 5, 16).is_err());
        assert!(rot_send(&s[1..], delta, &[], 5, 16).is_err());
    }

    #[test]
    fn leaves_on_cots_and_on_keys_hashed_ahead_open_to_the_comparison() {
        let (m, ell, widths) = (700usize, 18usize, [4usize, 4, 4, 3, 3]);
        let (delta, s, b, r) = cots(m * ell);
        let y: Vec<u64> = (0..m as u64).map(|i| i * 7919 % (1 << ell)).collect();
        let x: Vec<u64> = (0..m as u64).map(|i| i * 104_729 % (1 << ell)).collect();
        let ls: Vec<Vec<u8>> = (0..5).map(|k| (0..m).map(|i| ((i + k) % 2) as u8).collect()).collect();
        let es: Vec<Vec<u8>> = (0..5)
            .map(|k| (0..m).map(|i| ((i / 3 + k) % 2) as u8).collect())
            .collect();
        let masks = leaves_recv_by(ell, &widths, &x, |f| recv_with(&r, 11, ell, f)).unwrap();
        let mut d = crate::millionaire::field_bits(&x, ell);
        for (o, p) in d.iter_mut().zip(pack_bits(&b)) {
            *o ^= p;
        }
        let inp = LeafInputs {
            y: &y,
            ls: ls.iter().map(|v| v.as_slice()).collect(),
            es: es.iter().map(|v| v.as_slice()).collect(),
        };
        let cts = leaves_send_by(ell, &widths, &inp, |f| send_with(&s, delta, &d, 11, ell, f)).unwrap();
        // the same leaves from the keys hashed ahead (the pools' 4-byte keys)
        let (k0, k1) = rot_send(&s, delta, &[], 11, 4).unwrap();
        let kr = rot_recv(&r, 11, 4).unwrap();
        assert_eq!(leaves_send_keys(&k0, &k1, &d, ell, &widths, &inp).unwrap(), cts);
        assert_eq!(leaves_recv_keys(&kr, ell, &widths, &x).unwrap(), masks);
        assert!(leaves_send_keys(&k0, &k1, &d, ell, &[6, 6, 6], &inp).is_err());
        assert!(leaves_send_keys(&k0[4..], &k1, &d, ell, &widths, &inp).is_err());
        assert!(leaves_recv_keys(&kr[..kr.len() - 4], ell, &widths, &x).is_err());
        for (k, (p, w)) in blocks_of(ell, &widths).unwrap().into_iter().enumerate() {
            let (lt, eq) = leaf_open(&cts[k], p, w, &x, &masks[k]).unwrap();
            for i in 0..m {
                let (xj, yj) = (x[i] >> p & ((1 << w) - 1), y[i] >> p & ((1 << w) - 1));
                assert_eq!(lt[i] ^ ls[k][i], u8::from(xj < yj), "block {k} entry {i}");
                assert_eq!(eq[i] ^ es[k][i], u8::from(xj == yj), "block {k} entry {i}");
            }
        }
    }
}
