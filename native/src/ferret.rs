//! Ferret (Yang, Weng, Lan, Zhang, Wang, CCS 2020), semi-honest: correlated OTs r_i = s_i ⊕ b_i·Δ (the
//! sender holds Δ and s, the receiver b and r; IKNP's correlation before its hash) by primal regular-noise LPN,
//! n = t·2^h outputs per iteration from `reserve` = k + t·h of the previous iteration's (the first from
//! IKNP or SoftSpokenOT read before their hash).
//!
//! * SPCOT (Ferret §4, Fig. 6 without its check): per tree j the sender expands a random root by a GGM tree
//!   of depth h (G(s) = (π_0(s) ⊕ s, π_1(s) ⊕ s), two fixed-key AES, as EMP's TwoKeyPRP) into leaves v_j; per
//!   level i it has K_0^i, K_1^i, the XORs of the level's left (even) and right (odd) nodes, and sends
//!   K_0^i ⊕ H(s), K_1^i ⊕ H(s ⊕ Δ) for level i's base COT (b, r = s ⊕ b·Δ), H the TCCR hash with the COT's
//!   index as tweak: the receiver opens K_b^i. Its point α_j is not chosen but read off the base COTs, bit i
//!   (from the root) = ¬b, so that K_b^i is the side off its path (as EMP's SPCOT receiver's `get_index`):
//!   no choice corrections d, and the sender needs nothing from the receiver. As in SoftSpokenOT's punctured tree
//!   the receiver rebuilds every leaf but α_j, and from γ_j = Δ ⊕ ⊕_x v_{j,x} (also sent) sets
//!   w_{j,α_j} = v_{j,α_j} ⊕ Δ: w_j = v_j ⊕ e_j·Δ with e_j the unit vector at α_j.
//! * MPCOT: t such trees side by side (regular noise: one 1 per block of 2^h).
//! * LPN (Ferret §5, primal): the k COTs (u, r_u = s_u ⊕ u·Δ) of the reserve are the LPN secret; output i is
//!   b_i = e_i ⊕ ⊕_{j ∈ N(i)} u_j with r_i = w_i ⊕ ⊕ r_{u,j} and s_i = v_i ⊕ ⊕ s_{u,j}, N(i) d = 10 indices
//!   in [0, k) from AES-CTR under a public seed (the same matrix every iteration, as EMP). The first `reserve`
//!   outputs seed the next iteration; the rest are the caller's.
//!
//! Semi-honest only (cryptomask's model): no consistency check (Ferret's check guards against a malicious
//! sender's inconsistent Δ across trees and a malicious receiver's choice bits).

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;

use crate::bfv::pool;
use crate::otext::{contiguous, rows16};
use crate::prp::{Prp, TCCR_KEY, ctr_fill, tccr_with};

/// One iteration's shape: n = t·2^h outputs, k the LPN dimension, t noise weight (trees), h tree depth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub n: usize,
    pub k: usize,
    pub t: usize,
    pub h: usize,
}

/// EMP's regular-noise set (emp-ot, emp-ot/ferret/constants.h: N_REG, K_REG, T_REG, BIN_SZ_REG), as
/// OpenCheetah runs it: 128-bit LPN security with d = 10.
pub const REGULAR: Params = Params {
    n: 10_608_640,
    k: 589_824,
    t: 1295,
    h: 13,
};

/// A small set for the tests (no security).
pub const TOY: Params = Params {
    n: 1024,
    k: 128,
    t: 16,
    h: 6,
};

/// Nonzeros per row of the LPN matrix.
pub const D: usize = 10;

/// Rows of the LPN matrix per rayon task.
const CHUNK: usize = 4096;

impl Params {
    pub fn named(name: &str) -> Result<Params, String> {
        match name {
            "regular" => Ok(REGULAR),
            "toy" => Ok(TOY),
            _ => Err(format!("Ferret: unknown parameter set {name:?} (regular or toy)")),
        }
    }

    /// COTs an iteration consumes: the LPN secret's k and t·h for the trees.
    pub fn reserve(&self) -> usize {
        self.k + self.t * self.h
    }

    /// COTs an iteration hands to the caller.
    pub fn output(&self) -> usize {
        self.n - self.reserve()
    }

    /// Bytes of the sender's message: per tree h pairs of 16-byte ciphertexts and γ.
    pub fn msg_bytes(&self) -> usize {
        self.t * (32 * self.h + 16)
    }
}

fn load(b: &[u8], i: usize) -> u128 {
    u128::from_le_bytes(b[16 * i..16 * i + 16].try_into().expect("16 bytes"))
}

/// The GGM PRG's two fixed keys.
struct Ggm(Prp, Prp);

impl Ggm {
    fn new() -> Ggm {
        Ggm(Prp::new(b"ferret GGM left "), Prp::new(b"ferret GGM right"))
    }

    /// The next level: node p's children at 2p, 2p + 1.
    fn expand(&self, level: &[u128]) -> Vec<u128> {
        let mut b0: Vec<u8> = level.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut b1 = b0.clone();
        self.0.encrypt(&mut b0);
        self.1.encrypt(&mut b1);
        level
            .iter()
            .enumerate()
            .flat_map(|(p, s)| [load(&b0, p) ^ s, load(&b1, p) ^ s])
            .collect()
    }
}

/// H(x_i ⊕ xor, tweak0 + i) for every x_i.
fn hash(x: &[u128], xor: u128, tweak0: u64) -> Vec<u128> {
    let aes = Prp::new(&TCCR_KEY);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = vec![0u8; bytes.len()];
    tccr_with(&aes, &bytes, xor, &mut out, |i| tweak0.wrapping_add(i as u64));
    (0..x.len()).map(|i| load(&out, i)).collect()
}

/// N(i) for rows first.. of vals: vals_i ^= ⊕_{j ∈ N(i)} base_j and, when `bits` is not empty,
/// bits_i ^= ⊕ base_bits_j. Row i's indices: the 4-byte words 0..D of bytes 48·i.. of AES-CTR(lpn) mod k.
fn lpn(lpn: &Prp, base: &[u128], base_bits: &[u8], vals: &mut [u128], bits: &mut [u8]) {
    let k = base.len() as u32;
    let rows = |c: usize, v: &mut [u128], mut b: Option<&mut [u8]>| {
        let mut buf = vec![0u8; 48 * v.len()];
        ctr_fill(lpn, (48 * c * CHUNK) as u64, &mut buf);
        for (i, vi) in v.iter_mut().enumerate() {
            let (mut acc, mut ab) = (0u128, 0u8);
            for w in buf[48 * i..48 * i + 4 * D].chunks_exact(4) {
                let j = (u32::from_le_bytes(w.try_into().expect("4")) % k) as usize;
                acc ^= base[j];
                ab ^= base_bits.get(j).copied().unwrap_or(0);
            }
            *vi ^= acc;
            if let Some(b) = b.as_deref_mut() {
                b[i] ^= ab;
            }
        }
    };
    if bits.is_empty() {
        vals.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, v)| rows(c, v, None));
    } else {
        vals.par_chunks_mut(CHUNK)
            .zip(bits.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(c, (v, b))| rows(c, v, Some(b)));
    }
}

/// The Δ holder.
pub struct Sender {
    p: Params,
    delta: u128,
    /// s of the reserve: the LPN secret's k, then t·h for the trees
    base: Vec<u128>,
    lpn: Prp,
    prg: Prp,
    pos: u64,
    /// tweak of the next iteration's first tree COT
    ctr: u64,
}

impl Sender {
    /// Δ, the reserve's s (p.reserve() of them), the public LPN seed and a random seed for the roots.
    pub fn new(
        p: Params,
        delta: u128,
        base: Vec<u128>,
        lpn_seed: &[u8; 16],
        seed: &[u8; 16],
    ) -> Result<Sender, String> {
        if base.len() != p.reserve() {
            return Err(format!(
                "Ferret: the sender needs {} base COTs, not {}",
                p.reserve(),
                base.len()
            ));
        }
        Ok(Sender {
            p,
            delta,
            base,
            lpn: Prp::new(lpn_seed),
            prg: Prp::new(seed),
            pos: 0,
            ctr: 0,
        })
    }

    /// An iteration: (the message to the receiver, msg_bytes; this iteration's p.output() s).
    pub fn extend(&mut self) -> (Vec<u8>, Vec<u128>) {
        let Params { k, t, h, .. } = self.p;
        let delta = self.delta;
        let s = &self.base[k..];
        let (h0, h1) = (hash(s, 0, self.ctr), hash(s, delta, self.ctr));
        let mut roots = vec![0u8; 16 * t];
        ctr_fill(&self.prg, self.pos, &mut roots);
        self.pos += roots.len() as u64;
        let ggm = Ggm::new();
        let trees: Vec<(Vec<u128>, Vec<u8>)> = (0..t)
            .into_par_iter()
            .map(|j| {
                let mut level = vec![load(&roots, j)];
                let mut msg = Vec::with_capacity(32 * h + 16);
                for i in 0..h {
                    level = ggm.expand(&level);
                    let (mut k0, mut k1) = (0u128, 0u128);
                    for pair in level.chunks_exact(2) {
                        k0 ^= pair[0];
                        k1 ^= pair[1];
                    }
                    msg.extend((k0 ^ h0[j * h + i]).to_le_bytes());
                    msg.extend((k1 ^ h1[j * h + i]).to_le_bytes());
                }
                let gamma = level.iter().fold(delta, |a, v| a ^ v);
                msg.extend(gamma.to_le_bytes());
                (level, msg)
            })
            .collect();
        let mut msg = Vec::with_capacity(self.p.msg_bytes());
        let mut v = Vec::with_capacity(self.p.n);
        for (leaves, m) in trees {
            v.extend(leaves);
            msg.extend(m);
        }
        lpn(&self.lpn, &self.base[..k], &[], &mut v, &mut []);
        let out = v.split_off(self.p.reserve());
        self.base = v;
        self.ctr += (t * h) as u64;
        (msg, out)
    }
}

/// The choice holder.
pub struct Receiver {
    p: Params,
    /// b and r of the reserve, laid out as the sender's s
    bits: Vec<u8>,
    base: Vec<u128>,
    lpn: Prp,
    ctr: u64,
}

impl Receiver {
    pub fn new(p: Params, bits: Vec<u8>, base: Vec<u128>, lpn_seed: &[u8; 16]) -> Result<Receiver, String> {
        if base.len() != p.reserve() || bits.len() != p.reserve() {
            return Err(format!(
                "Ferret: the receiver needs {} base COTs and choice bits",
                p.reserve()
            ));
        }
        Ok(Receiver {
            p,
            bits: bits.iter().map(|b| b & 1).collect(),
            base,
            lpn: Prp::new(lpn_seed),
            ctr: 0,
        })
    }

    /// The points α_j of this iteration: bit i from the root = ¬b of tree j's level-(i + 1) base COT.
    fn points(&self) -> Vec<usize> {
        let Params { k, t, h, .. } = self.p;
        (0..t)
            .map(|j| (0..h).fold(0, |a, i| a << 1 | usize::from(self.bits[k + j * h + i] ^ 1)))
            .collect()
    }

    /// The sender's message → this iteration's p.output() (choice bits, r).
    pub fn extend(&mut self, msg: &[u8]) -> Result<(Vec<u8>, Vec<u128>), String> {
        let Params { n, k, t, h } = self.p;
        if msg.len() != self.p.msg_bytes() {
            return Err(format!(
                "Ferret: the sender's message must be {} bytes",
                self.p.msg_bytes()
            ));
        }
        let alpha = self.points();
        let hr = hash(&self.base[k..], 0, self.ctr);
        let ggm = Ggm::new();
        let leaves: Vec<Vec<u128>> = (0..t)
            .into_par_iter()
            .map(|j| {
                let (a, m) = (alpha[j], &msg[j * (32 * h + 16)..(j + 1) * (32 * h + 16)]);
                let mut level = vec![0u128];
                for i in 0..h {
                    level = ggm.expand(&level);
                    let (path, c) = (a >> (h - 1 - i), usize::from(a >> (h - 1 - i) & 1 == 0));
                    let sib = path ^ 1;
                    // K_c: the XOR of the level's nodes on side c; all known but the sibling (path's is garbage)
                    let mut s = load(m, 2 * i + c) ^ hr[j * h + i];
                    for (x, node) in level.iter().enumerate() {
                        if x & 1 == c && x != sib {
                            s ^= node;
                        }
                    }
                    level[sib] = s;
                    level[path] = 0;
                }
                level[a] = load(m, 2 * h) ^ level.iter().fold(0, |acc, v| acc ^ v);
                level
            })
            .collect();
        let mut w: Vec<u128> = leaves.into_iter().flatten().collect();
        let mut e = vec![0u8; n];
        for (j, a) in alpha.iter().enumerate() {
            e[(j << h) + a] = 1;
        }
        lpn(&self.lpn, &self.base[..k], &self.bits[..k], &mut w, &mut e);
        let (out, bits) = (w.split_off(self.p.reserve()), e.split_off(self.p.reserve()));
        self.base = w;
        self.bits = e;
        self.ctr += (t * h) as u64;
        Ok((bits, out))
    }
}

// ----------------------------------------------------------------------------------------- Python
fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

fn key16(b: &[u8], what: &str) -> PyResult<[u8; 16]> {
    b.try_into()
        .map_err(|_| err(format!("Ferret: {what} must be 16 bytes")))
}

fn rows(a: &PyReadonlyArrayDyn<'_, u8>, what: &str) -> PyResult<Vec<u128>> {
    let s = contiguous(a, what)?;
    if !s.len().is_multiple_of(16) {
        return Err(err(format!("Ferret: {what} must be rows of 16 bytes")));
    }
    Ok((0..s.len() / 16).map(|i| load(s, i)).collect())
}

fn out16(py: Python<'_>, v: Vec<u128>) -> PyResult<Bound<'_, PyArray2<u8>>> {
    rows16(py, v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

#[pyclass(name = "FerretSender", module = "privface_native")]
pub struct PyFerretSender {
    inner: Sender,
}

#[pymethods]
impl PyFerretSender {
    /// params: "regular" or "toy"; delta: Δ (16 bytes); base: the reserve's s ((reserve, 16) uint8);
    /// lpn_seed: the public LPN seed; seed: 16 random bytes for the GGM roots.
    #[new]
    fn new(
        params: &str,
        delta: &[u8],
        base: PyReadonlyArrayDyn<'_, u8>,
        lpn_seed: &[u8],
        seed: &[u8],
    ) -> PyResult<Self> {
        let p = Params::named(params).map_err(err)?;
        let delta = u128::from_le_bytes(key16(delta, "Δ")?);
        let inner = Sender::new(
            p,
            delta,
            rows(&base, "base COTs")?,
            &key16(lpn_seed, "lpn_seed")?,
            &key16(seed, "seed")?,
        )
        .map_err(err)?;
        Ok(PyFerretSender { inner })
    }

    /// An iteration → (the message to the receiver, this iteration's s (output, 16)).
    fn extend<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyArray2<u8>>)> {
        let inner = &mut self.inner;
        let (msg, out) = py.detach(|| pool::install(|| inner.extend()));
        Ok((PyBytes::new(py, &msg), out16(py, out)?))
    }
}

#[pyclass(name = "FerretReceiver", module = "privface_native")]
pub struct PyFerretReceiver {
    inner: Receiver,
}

#[pymethods]
impl PyFerretReceiver {
    /// params as the sender's; bits: the reserve's choice bits ((reserve,) uint8; uniform and secret: they pick
    /// the first iteration's noise positions); base: its r ((reserve, 16) uint8); lpn_seed: the sender's.
    #[new]
    fn new(
        params: &str,
        bits: PyReadonlyArrayDyn<'_, u8>,
        base: PyReadonlyArrayDyn<'_, u8>,
        lpn_seed: &[u8],
    ) -> PyResult<Self> {
        let p = Params::named(params).map_err(err)?;
        let bits = contiguous(&bits, "choice bits")?.to_vec();
        let inner = Receiver::new(p, bits, rows(&base, "base COTs")?, &key16(lpn_seed, "lpn_seed")?).map_err(err)?;
        Ok(PyFerretReceiver { inner })
    }

    /// The sender's message → (choice bits (output,) uint8, r (output, 16) uint8).
    #[allow(clippy::type_complexity)]
    fn extend<'py>(
        &mut self,
        py: Python<'py>,
        msg: &[u8],
    ) -> PyResult<(Bound<'py, PyArray1<u8>>, Bound<'py, PyArray2<u8>>)> {
        let inner = &mut self.inner;
        let (bits, out) = py.detach(|| pool::install(|| inner.extend(msg))).map_err(err)?;
        Ok((bits.into_pyarray(py), out16(py, out)?))
    }
}

/// (n, k, t, h, reserve, output, msg_bytes) of a named set.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn ferret_params(name: &str) -> PyResult<(usize, usize, usize, usize, usize, usize, usize)> {
    let p = Params::named(name).map_err(err)?;
    Ok((p.n, p.k, p.t, p.h, p.reserve(), p.output(), p.msg_bytes()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFerretSender>()?;
    m.add_class::<PyFerretReceiver>()?;
    m.add_function(wrap_pyfunction!(ferret_params, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otext::{KAPPA, pair, pair_soft, read_row};

    fn mask(b: u8) -> u128 {
        0u128.wrapping_sub(u128::from(b & 1))
    }

    /// The reserve from the real IKNP extension, unhashed: (Δ, s; b, r).
    fn bootstrap(p: Params) -> (u128, Vec<u128>, Vec<u8>, Vec<u128>) {
        bootstrap_from(p, pair())
    }

    /// The reserve from an extension pair (IKNP or SoftSpokenOT), unhashed.
    fn bootstrap_from(
        p: Params,
        (mut snd, mut rcv): (crate::otext::Sender, crate::otext::Receiver),
    ) -> (u128, Vec<u128>, Vec<u8>, Vec<u128>) {
        snd.raw = true;
        rcv.raw = true;
        let m = p.reserve();
        let choices: Vec<u8> = (0..m).map(|i| ((i * 2654435761) >> 7 & 1) as u8).collect();
        let (u, t) = rcv.extend(&choices, 0);
        let (q, q1) = snd.extend(&u, m, 0).unwrap();
        let delta = read_row(&q, 0) ^ read_row(&q1, 0);
        let s: Vec<u128> = (0..m).map(|i| read_row(&q, i)).collect();
        let r: Vec<u128> = (0..m).map(|i| read_row(&t, i)).collect();
        assert_eq!(KAPPA, 128);
        (delta, s, choices, r)
    }

    fn check(bits: &[u8], r: &[u128], s: &[u128], delta: u128) {
        assert_eq!((bits.len(), r.len()), (s.len(), s.len()));
        for i in 0..s.len() {
            assert_eq!(r[i], s[i] ^ mask(bits[i]) & delta, "COT {i}");
        }
    }

    #[test]
    fn iknp_and_softspoken_raw_outputs_are_cots() {
        for pr in [pair(), pair_soft(4), pair_soft(8)] {
            let (delta, s, b, r) = bootstrap_from(TOY, pr);
            check(&b, &r, &s, delta);
            assert!(b.contains(&1) && b.contains(&0));
        }
    }

    #[test]
    fn ferret_outputs_are_cots_across_iterations() {
        let p = TOY;
        let (delta, s, b, r) = bootstrap(p);
        let lpn_seed = [7u8; 16];
        let mut snd = Sender::new(p, delta, s, &lpn_seed, &[1u8; 16]).unwrap();
        let mut rcv = Receiver::new(p, b, r, &lpn_seed).unwrap();
        let mut ones = 0;
        for _ in 0..3 {
            let (msg, so) = snd.extend();
            assert_eq!(msg.len(), p.msg_bytes());
            let (bo, ro) = rcv.extend(&msg).unwrap();
            assert_eq!(so.len(), p.output());
            check(&bo, &ro, &so, delta);
            // the reserve for the next iteration is correlated too
            check(&rcv.bits, &rcv.base, &snd.base, delta);
            ones += bo.iter().filter(|&&x| x == 1).count();
        }
        // LPN outputs: choice bits near uniform, not the sparse noise
        let total = 3 * p.output();
        assert!(ones > total / 3 && ones < 2 * total / 3, "{ones} of {total}");
        assert!(rcv.extend(&[0u8; 1]).is_err());
    }

    #[test]
    fn a_wrong_delta_breaks_the_correlation() {
        let p = TOY;
        let (delta, s, b, r) = bootstrap(p);
        let mut snd = Sender::new(p, delta ^ 1 << 77, s, &[7u8; 16], &[1u8; 16]).unwrap();
        let mut rcv = Receiver::new(p, b, r, &[7u8; 16]).unwrap();
        let (msg, so) = snd.extend();
        let (bo, ro) = rcv.extend(&msg).unwrap();
        assert!((0..so.len()).any(|i| ro[i] != so[i] ^ mask(bo[i]) & delta));
    }

    #[test]
    fn the_parameter_sets_are_regular() {
        for p in [REGULAR, TOY] {
            assert_eq!(p.n, p.t << p.h);
            assert!(p.reserve() < p.n);
        }
        assert_eq!(REGULAR.reserve(), 606_659);
        assert!(Params::named("nope").is_err());
    }

    /// The regular set end to end (`cargo test --release -- --ignored ferret_regular --nocapture`): bytes
    /// both ways per output COT and time per million.
    #[test]
    #[ignore]
    fn ferret_regular_bytes_and_time() {
        let p = REGULAR;
        let t0 = std::time::Instant::now();
        let (delta, s, b, r) = bootstrap_from(p, pair_soft(4));
        let boot = t0.elapsed().as_secs_f64();
        let mut snd = Sender::new(p, delta, s, &[7u8; 16], &[1u8; 16]).unwrap();
        let mut rcv = Receiver::new(p, b, r, &[7u8; 16]).unwrap();
        let (iters, mut bytes, mut secs) = (3, 0usize, 0f64);
        for it in 0..iters {
            let t1 = std::time::Instant::now();
            let (msg, so) = snd.extend();
            let (bo, ro) = rcv.extend(&msg).unwrap();
            secs += t1.elapsed().as_secs_f64();
            bytes += msg.len();
            if it == 0 {
                check(&bo, &ro, &so, delta);
            }
        }
        let ots = iters * p.output();
        println!(
            "{{\"params\": \"regular\", \"ots\": {ots}, \"bytes\": {bytes}, \"bytes_per_ot\": {:.5}, \"s_per_million\": {:.4}, \"bootstrap_softspoken4_s\": {boot:.3}, \"bootstrap_softspoken4_bytes\": {}}}",
            bytes as f64 / ots as f64,
            secs / ots as f64 * 1e6,
            4 * p.reserve(),
        );
    }
}
