//! IKNP oblivious-transfer extension (Ishai–Kilian–Nissim–Petrank, CRYPTO 2003 — seed 001 ref. [18]), the
//! hot loops of privface/crypto/otext.py, which keeps the base OTs, the tweak counters and the protocol:
//!
//! * G(k_i): AES-128-CTR keyed by the base-OT seed k_i, 16-byte all-zero initial counter block incremented as a
//!   128-bit big-endian integer, one stream per seed continuing across calls (κ = 128 streams per party).
//! * The κ × m bit matrix transposed to m rows of κ bits, in 64 × 64 blocks (Hacker's Delight §7-3, the same
//!   six masked swap rounds as before), bits LSB first.
//! * H = TCCR(x, j) = π(π(x) ⊕ j) ⊕ π(x), π fixed-key AES-128, j as 8 little-endian bytes then 8 zero bytes
//!   (Guo–Katz–Wang–Yu, S&P 2020).
//!
//! The outputs are byte for byte those of the numpy implementation (tests/helpers/otext_oracle.py), hence
//! the same wire bytes.

use aes::Aes128;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::bfv::pool;

/// The security parameter κ: base OTs, rows of the IKNP matrix, bits per random-OT key.
pub const KAPPA: usize = 128;

/// π's fixed key: SHAKE-256("privface/otext/tccr/v1"), first 16 bytes (otext.py's `_FIXED_KEY`).
pub const TCCR_KEY: [u8; 16] = [
    0x1a, 0xf1, 0x05, 0x44, 0x20, 0xd5, 0x07, 0x8e, 0x2c, 0x17, 0xee, 0x56, 0x71, 0x33, 0xee, 0x10,
];

/// Blocks per batched AES call (the AES-NI backend pipelines 8 at a time).
const LANES: usize = 32;

/// Rows per rayon task.
const CHUNK: usize = 4096;

pub fn tccr_cipher() -> Aes128 {
    Aes128::new(&TCCR_KEY.into())
}

/// x_i ← TCCR(x_i, tweak(i)) for every row (u128 read little-endian from its 16 bytes), LANES at a time.
pub fn tccr_rows(aes: &Aes128, x: &mut [u128], tweak: impl Fn(usize) -> u64) {
    let mut blocks = [GenericArray::default(); LANES];
    let mut px = [0u128; LANES];
    for (c, rows) in x.chunks_mut(LANES).enumerate() {
        let n = rows.len();
        for (b, r) in blocks.iter_mut().zip(rows.iter()) {
            b.copy_from_slice(&r.to_le_bytes());
        }
        aes.encrypt_blocks(&mut blocks[..n]);
        for i in 0..n {
            px[i] = u128::from_le_bytes(blocks[i].into());
            blocks[i].copy_from_slice(&(px[i] ^ u128::from(tweak(c * LANES + i))).to_le_bytes());
        }
        aes.encrypt_blocks(&mut blocks[..n]);
        for i in 0..n {
            rows[i] = u128::from_le_bytes(blocks[i].into()) ^ px[i];
        }
    }
}

pub fn read_row(data: &[u8], i: usize) -> u128 {
    u128::from_le_bytes(data[16 * i..16 * i + 16].try_into().expect("16 bytes"))
}

/// TCCR over n rows of 16 bytes with tweaks[i], in parallel.
pub fn tccr(x: &[u8], tweaks: &[u64]) -> Vec<u8> {
    let aes = tccr_cipher();
    let mut out = x.to_vec();
    out.par_chunks_mut(16 * CHUNK)
        .zip(tweaks.par_chunks(CHUNK))
        .for_each(|(o, tw)| {
            let mut rows: Vec<u128> = (0..tw.len()).map(|i| read_row(o, i)).collect();
            tccr_rows(&aes, &mut rows, |i| tw[i]);
            for (i, r) in rows.iter().enumerate() {
                o[16 * i..16 * i + 16].copy_from_slice(&r.to_le_bytes());
            }
        });
    out
}

/// κ AES-128-CTR streams G(k_i), each continuing where the last `take` stopped.
pub struct Streams {
    keys: Vec<Aes128>,
    pos: u64,
}

impl Streams {
    pub fn new(seeds: &[u8]) -> Result<Streams, String> {
        if seeds.len() != 16 * KAPPA {
            return Err(format!("IKNP: expected {KAPPA} seeds of 16 bytes"));
        }
        let keys = seeds
            .chunks(16)
            .map(|k| Aes128::new(GenericArray::from_slice(k)))
            .collect();
        Ok(Streams { keys, pos: 0 })
    }

    /// The next `nbytes` of every stream: κ rows of `nbytes`, row-major.
    pub fn take(&mut self, nbytes: usize) -> Vec<u8> {
        let mut out = vec![0u8; self.keys.len() * nbytes];
        if nbytes > 0 {
            let pos = self.pos;
            out.par_chunks_mut(nbytes)
                .zip(self.keys.par_iter())
                .for_each(|(row, aes)| ctr_fill(aes, pos, row));
        }
        self.pos += nbytes as u64;
        out
    }
}

/// Bytes pos.. of AES-CTR(key) with the all-zero initial counter block (a 128-bit big-endian counter).
fn ctr_fill(aes: &Aes128, pos: u64, row: &mut [u8]) {
    let mut blocks = [GenericArray::default(); LANES];
    let mut ctr = u128::from(pos / 16);
    let mut skip = (pos % 16) as usize;
    let mut done = 0;
    while done < row.len() {
        let need = (skip + row.len() - done).div_ceil(16).min(LANES);
        for (k, b) in blocks[..need].iter_mut().enumerate() {
            b.copy_from_slice(&ctr.wrapping_add(k as u128).to_be_bytes());
        }
        ctr = ctr.wrapping_add(need as u128);
        aes.encrypt_blocks(&mut blocks[..need]);
        for b in &blocks[..need] {
            let src = &b[skip..];
            skip = 0;
            let n = src.len().min(row.len() - done);
            row[done..done + n].copy_from_slice(&src[..n]);
            done += n;
        }
    }
}

/// One masked swap round of the 64 × 64 transpose: rows r and r + J (r with bit J clear) exchange their
/// J-bit groups selected by `mask`.
#[inline(always)]
fn swap_round<const J: usize>(w: &mut [u64; 64], mask: u64) {
    for base in (0..64).step_by(2 * J) {
        for r in base..base + J {
            let t = ((w[r] >> J) ^ w[r + J]) & mask;
            w[r] ^= t << J;
            w[r + J] ^= t;
        }
    }
}

/// One 64 × 64 bit block (word r = row r, bit c = column c) transposed in place (Hacker's Delight §7-3).
fn transpose64(w: &mut [u64; 64]) {
    swap_round::<32>(w, 0x0000_0000_FFFF_FFFF);
    swap_round::<16>(w, 0x0000_FFFF_0000_FFFF);
    swap_round::<8>(w, 0x00FF_00FF_00FF_00FF);
    swap_round::<4>(w, 0x0F0F_0F0F_0F0F_0F0F);
    swap_round::<2>(w, 0x3333_3333_3333_3333);
    swap_round::<1>(w, 0x5555_5555_5555_5555);
}

/// Column blocks per tile: one 64-byte cache line of every row, read once (rows nb bytes apart, often a
/// multiple of the page size, would otherwise evict each other between blocks).
const TILE: usize = 8;

/// Columns 64c..64c+63, for the `count` ≤ TILE blocks c = c0.., of the κ rows (each `nb` bytes) as rows of
/// κ bits, 64 per block.
fn column_tile(rows: &[u8], nb: usize, c0: usize, count: usize) -> Vec<[u128; 64]> {
    let mut words = [[0u64; 64]; TILE];
    let mut out = vec![[0u128; 64]; count];
    for g in 0..KAPPA / 64 {
        for r in 0..64 {
            let off = (64 * g + r) * nb + 8 * c0;
            for (k, w) in words.iter_mut().take(count).enumerate() {
                w[r] = u64::from_le_bytes(rows[off + 8 * k..off + 8 * k + 8].try_into().expect("8 bytes"));
            }
        }
        for (w, o) in words.iter_mut().zip(out.iter_mut()) {
            transpose64(w);
            for (x, &word) in o.iter_mut().zip(w.iter()) {
                *x |= u128::from(word) << (64 * g);
            }
        }
    }
    out
}

/// κ rows of nb bytes (nb a multiple of 8) → the first m of their columns as rows of κ bits (m × 16 bytes).
pub fn transpose(rows: &[u8], nb: usize, m: usize) -> Vec<u8> {
    let mut out = vec![0u8; 16 * m];
    out.par_chunks_mut(16 * 64 * TILE).enumerate().for_each(|(t, o)| {
        let tile = column_tile(rows, nb, t * TILE, (o.len() / 16).div_ceil(64));
        for (i, r) in tile.iter().flatten().take(o.len() / 16).enumerate() {
            o[16 * i..16 * i + 16].copy_from_slice(&r.to_le_bytes());
        }
    });
    out
}

/// Transposed rows → (TCCR(row_j, counter + j), TCCR(row_j ⊕ Δ, counter + j)) per 64-column block; the second
/// only with `delta`.
fn hash_columns(rows: &[u8], nb: usize, m: usize, counter: u64, delta: Option<u128>) -> (Vec<u8>, Vec<u8>) {
    let aes = tccr_cipher();
    let mut h0 = vec![0u8; 16 * m];
    let mut h1 = vec![0u8; if delta.is_some() { 16 * m } else { 0 }];
    let job = |t: usize, o0: &mut [u8], o1: Option<&mut [u8]>| {
        let n = o0.len() / 16;
        let block: Vec<u128> = column_tile(rows, nb, t * TILE, n.div_ceil(64))
            .into_iter()
            .flatten()
            .take(n)
            .collect();
        let tweak = |i: usize| counter.wrapping_add((64 * TILE * t + i) as u64);
        let mut q = block.clone();
        tccr_rows(&aes, &mut q, tweak);
        for (i, r) in q.iter().enumerate() {
            o0[16 * i..16 * i + 16].copy_from_slice(&r.to_le_bytes());
        }
        if let (Some(o1), Some(d)) = (o1, delta) {
            let mut q: Vec<u128> = block.iter().map(|x| x ^ d).collect();
            tccr_rows(&aes, &mut q, tweak);
            for (i, r) in q.iter().enumerate() {
                o1[16 * i..16 * i + 16].copy_from_slice(&r.to_le_bytes());
            }
        }
    };
    let rows_per_task = 64 * TILE;
    if delta.is_some() {
        h0.par_chunks_mut(16 * rows_per_task)
            .zip(h1.par_chunks_mut(16 * rows_per_task))
            .enumerate()
            .for_each(|(t, (o0, o1))| job(t, o0, Some(o1)));
    } else {
        h0.par_chunks_mut(16 * rows_per_task)
            .enumerate()
            .for_each(|(t, o0)| job(t, o0, None));
    }
    (h0, h1)
}

/// Bytes per row of the IKNP matrix for m OTs: whole 64-bit words.
pub fn row_bytes(m: usize) -> usize {
    m.div_ceil(64) * 8
}

/// The extension sender: Δ and the seeds k_i^{Δ_i} it learnt as base-OT receiver.
pub struct Sender {
    delta: [u8; 16],
    streams: Streams,
}

impl Sender {
    pub fn new(delta: &[u8], seeds: &[u8]) -> Result<Sender, String> {
        let delta: [u8; 16] = delta.try_into().map_err(|_| "IKNP: Δ must be 16 bytes".to_string())?;
        Ok(Sender {
            delta,
            streams: Streams::new(seeds)?,
        })
    }

    /// The receiver's u (κ rows of row_bytes(m)) → (H(j, q_j), H(j, q_j ⊕ Δ)), each m × 16 bytes, with
    /// q_i = G(k_i^{Δ_i}) ⊕ Δ_i·u_i transposed; tweaks counter + j.
    pub fn extend(&mut self, u: &[u8], m: usize, counter: u64) -> Result<(Vec<u8>, Vec<u8>), String> {
        let nb = row_bytes(m);
        if u.len() != KAPPA * nb {
            return Err(format!("IKNP: u must be {KAPPA} × {nb} bytes"));
        }
        let mut q = self.streams.take(nb);
        if nb > 0 {
            let delta = self.delta;
            q.par_chunks_mut(nb)
                .zip(u.par_chunks(nb))
                .enumerate()
                .filter(|(i, _)| delta[i / 8] >> (i % 8) & 1 == 1)
                .for_each(|(_, (qi, ui))| qi.iter_mut().zip(ui).for_each(|(a, b)| *a ^= b));
        }
        Ok(hash_columns(&q, nb, m, counter, Some(u128::from_le_bytes(self.delta))))
    }
}

/// The extension receiver: both seeds of every base OT.
pub struct Receiver {
    s0: Streams,
    s1: Streams,
}

impl Receiver {
    pub fn new(seeds0: &[u8], seeds1: &[u8]) -> Result<Receiver, String> {
        Ok(Receiver {
            s0: Streams::new(seeds0)?,
            s1: Streams::new(seeds1)?,
        })
    }

    /// Choice bits r (m, nonzero = 1) → (u = G(k^0) ⊕ G(k^1) ⊕ r, κ rows of row_bytes(m); H(j, t_j), m × 16).
    pub fn extend(&mut self, choices: &[u8], counter: u64) -> (Vec<u8>, Vec<u8>) {
        let m = choices.len();
        let nb = row_bytes(m);
        let t = self.s0.take(nb);
        let mut u = self.s1.take(nb);
        let mut packed = vec![0u8; nb];
        for (i, &r) in choices.iter().enumerate() {
            packed[i / 8] |= u8::from(r != 0) << (i % 8);
        }
        if nb > 0 {
            u.par_chunks_mut(nb).zip(t.par_chunks(nb)).for_each(|(ui, ti)| {
                for ((a, b), p) in ui.iter_mut().zip(ti).zip(&packed) {
                    *a ^= b ^ p;
                }
            });
        }
        let (kr, _) = hash_columns(&t, nb, m, counter, None);
        (u, kr)
    }
}

// ----------------------------------------------------------------------------------------- Python
fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

/// A C-contiguous uint8/uint64 array's data (the Python wrappers pass np.ascontiguousarray).
pub fn contiguous<'a, T: numpy::Element>(a: &'a PyReadonlyArrayDyn<'_, T>, what: &str) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| err(format!("{what}: expected a C-contiguous array")))
}

pub fn rows16<'py>(py: Python<'py>, v: Vec<u8>) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let n = v.len() / 16;
    Ok(Array2::from_shape_vec((n, 16), v)
        .map_err(|e| err(e.to_string()))?
        .into_pyarray(py))
}

#[pyclass(name = "IknpSender", module = "privface_native")]
pub struct PyIknpSender {
    inner: Sender,
}

#[pymethods]
impl PyIknpSender {
    /// delta: Δ packed LSB first (16 bytes); seeds: the κ seeds k_i^{Δ_i}, concatenated (κ × 16 bytes).
    #[new]
    fn new(delta: &[u8], seeds: &[u8]) -> PyResult<Self> {
        Ok(PyIknpSender {
            inner: Sender::new(delta, seeds).map_err(err)?,
        })
    }

    /// u (κ × row_bytes(m), uint8) → (H(j, q_j), H(j, q_j ⊕ Δ)), each (m, 16) uint8, tweaks counter + j.
    #[allow(clippy::type_complexity)]
    fn extend<'py>(
        &mut self,
        py: Python<'py>,
        u: PyReadonlyArrayDyn<'py, u8>,
        m: usize,
        counter: u64,
    ) -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
        let u = contiguous(&u, "IKNP u")?;
        let inner = &mut self.inner;
        let (k0, k1) = py
            .detach(|| pool::install(|| inner.extend(u, m, counter)))
            .map_err(err)?;
        Ok((rows16(py, k0)?, rows16(py, k1)?))
    }
}

#[pyclass(name = "IknpReceiver", module = "privface_native")]
pub struct PyIknpReceiver {
    inner: Receiver,
}

#[pymethods]
impl PyIknpReceiver {
    /// seeds0, seeds1: the κ seed pairs (k_i^0, k_i^1), each side concatenated (κ × 16 bytes).
    #[new]
    fn new(seeds0: &[u8], seeds1: &[u8]) -> PyResult<Self> {
        Ok(PyIknpReceiver {
            inner: Receiver::new(seeds0, seeds1).map_err(err)?,
        })
    }

    /// Choice bits (m,) uint8 → (u (κ, row_bytes(m)) uint8, H(j, t_j) (m, 16) uint8), tweaks counter + j.
    #[allow(clippy::type_complexity)]
    fn extend<'py>(
        &mut self,
        py: Python<'py>,
        choices: PyReadonlyArrayDyn<'py, u8>,
        counter: u64,
    ) -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
        let r = contiguous(&choices, "IKNP choices")?;
        let nb = row_bytes(r.len());
        let inner = &mut self.inner;
        let (u, kr) = py.detach(|| pool::install(|| inner.extend(r, counter)));
        let u = Array2::from_shape_vec((KAPPA, nb), u)
            .map_err(|e| err(e.to_string()))?
            .into_pyarray(py);
        Ok((u, rows16(py, kr)?))
    }
}

/// TCCR(x_i, tweaks_i) for rows x (n × 16 bytes, uint8) and tweaks (n,) uint64 → (n, 16) uint8.
#[pyfunction]
fn tccr_hash<'py>(
    py: Python<'py>,
    x: PyReadonlyArrayDyn<'py, u8>,
    tweaks: PyReadonlyArrayDyn<'py, u64>,
) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let (xs, tw) = (contiguous(&x, "TCCR rows")?, contiguous(&tweaks, "TCCR tweaks")?);
    if xs.len() != 16 * tw.len() {
        return Err(err(format!("TCCR: {} bytes of rows for {} tweaks", xs.len(), tw.len())));
    }
    let out = py.detach(|| pool::install(|| tccr(xs, tw)));
    rows16(py, out)
}

/// κ rows of nb bytes (nb a multiple of 8, κ × nb uint8) → their first m columns as (m, 16) uint8 rows.
#[pyfunction]
fn bit_transpose<'py>(
    py: Python<'py>,
    rows: PyReadonlyArrayDyn<'py, u8>,
    m: usize,
) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let data = contiguous(&rows, "transpose")?;
    let nb = data.len() / KAPPA;
    if data.len() != KAPPA * nb || !nb.is_multiple_of(8) || m > 8 * nb {
        return Err(err(format!(
            "transpose: expected {KAPPA} rows of whole 64-bit words holding ≥ {m} columns"
        )));
    }
    let out = py.detach(|| pool::install(|| transpose(data, nb, m)));
    rows16(py, out)
}

/// The first 16 bytes of SHAKE-256 that key π (checked against otext.py by the tests).
#[pyfunction]
fn tccr_key<'py>(py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
    pyo3::types::PyBytes::new(py, &TCCR_KEY)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyIknpSender>()?;
    m.add_class::<PyIknpReceiver>()?;
    m.add_function(wrap_pyfunction!(tccr_hash, m)?)?;
    m.add_function(wrap_pyfunction!(bit_transpose, m)?)?;
    m.add_function(wrap_pyfunction!(tccr_key, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iknp_outputs_are_random_ots() {
        let seeds0: Vec<u8> = (0..16 * KAPPA).map(|i| (i * 7 + 1) as u8).collect();
        let seeds1: Vec<u8> = (0..16 * KAPPA).map(|i| (i * 13 + 5) as u8).collect();
        let delta: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5a);
        let chosen: Vec<u8> = (0..KAPPA)
            .flat_map(|i| {
                let src = if delta[i / 8] >> (i % 8) & 1 == 1 {
                    &seeds1
                } else {
                    &seeds0
                };
                src[16 * i..16 * i + 16].to_vec()
            })
            .collect();
        let mut s = Sender::new(&delta, &chosen).unwrap();
        let mut r = Receiver::new(&seeds0, &seeds1).unwrap();
        let mut counter = 0;
        for m in [1usize, 100, 64, 1000] {
            let choices: Vec<u8> = (0..m).map(|j| ((j * 5 + m) % 3 == 0) as u8).collect();
            let (u, kr) = r.extend(&choices, counter);
            let (k0, k1) = s.extend(&u, m, counter).unwrap();
            for j in 0..m {
                let want = if choices[j] == 1 { &k1 } else { &k0 };
                let other = if choices[j] == 1 { &k0 } else { &k1 };
                assert_eq!(&kr[16 * j..16 * j + 16], &want[16 * j..16 * j + 16]);
                assert_ne!(&kr[16 * j..16 * j + 16], &other[16 * j..16 * j + 16]);
            }
            counter += m as u64;
        }
        assert!(s.extend(&[0u8; 10], 5, 0).is_err());
    }

    #[test]
    fn transpose_moves_bit_rc_to_cr() {
        let nb = 16;
        let rows: Vec<u8> = (0..KAPPA * nb).map(|i| (i * 31 % 251) as u8).collect();
        let out = transpose(&rows, nb, 100);
        for r in 0..KAPPA {
            for c in 0..100 {
                let a = rows[r * nb + c / 8] >> (c % 8) & 1;
                let b = out[16 * c + r / 8] >> (r % 8) & 1;
                assert_eq!(a, b, "row {r} column {c}");
            }
        }
    }

    #[test]
    fn ctr_streams_continue_across_unaligned_takes() {
        let seeds: Vec<u8> = (0..16 * KAPPA).map(|i| i as u8).collect();
        let mut a = Streams::new(&seeds).unwrap();
        let mut b = Streams::new(&seeds).unwrap();
        let whole = a.take(1000);
        let (x, y, z) = (b.take(8), b.take(24), b.take(968));
        for i in 0..KAPPA {
            let mut row = x[8 * i..8 * i + 8].to_vec();
            row.extend_from_slice(&y[24 * i..24 * i + 24]);
            row.extend_from_slice(&z[968 * i..968 * i + 968]);
            assert_eq!(row, whole[1000 * i..1000 * i + 1000]);
        }
    }
}
