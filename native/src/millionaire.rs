//! The per-entry steps of CrypTFlow2's millionaires' protocol (Rathee et al., CCS 2020, Π_MILL — seed 001
//! §2.6 / Alg. 3), of its Beaver bit triples and of ABY's B2A (Demmler et al., NDSS 2015, §III-C), over the
//! random-OT keys of `otext` — the hot loops of privface/crypto/millionaire.py, which keeps the message order
//! and the randomness.
//!
//! * 1-out-of-2^w OT from w random OTs (Naor–Pinkas, STOC 1999, 1-out-of-N from 1-out-of-2): S masks message v
//!   (two bits: lt ⊕ [v < y_j], eq ⊕ [v = y_j]) with ⊕_t of bits 2v, 2v + 1 of K_{t, v_t}; R unmasks the one
//!   at its block value x_j. The keys are random-OT outputs (IKNP's hash H(j, q_j)), uniform and independent,
//!   so their bits serve as Naor–Pinkas' PRF outputs: for v ≠ x some K_{t, 1 − x_t} is unknown to R and its
//!   bits 2v, 2v + 1 mask message v alone, so the other 2^w − 1 messages are one-time padded (2^(w+1) ≤ 128
//!   bits of each key: w ≤ MAX_BLOCK_BITS). No hash per message: CrypTFlow2 hashes one per message. Both sides use
//!   the keys of the comparison's m·ell OTs inside the extension's tasks (`otext::Sender::extend_with`):
//!   S keeps only the packed messages, R only a two-bit mask per block and entry, never the 16-byte keys.
//! * Bit triples from two ROTs per triple (bit 0 of each key); B2A from one ROT per bit (the key's first four
//!   bytes read as a little-endian u32).
//!
//! Packed bits are LSB first (numpy's `bitorder="little"`); the outputs are byte for byte those of
//! tests/helpers/millionaire_oracle.py.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::bfv::pool;
use crate::otext::{PyIknpReceiver, PyIknpSender, Receiver, Sender, Shared, contiguous, read_row, row_bytes};

/// Entries per parallel task of the element-wise steps (leaf openings, triples, B2A).
const CHUNK: usize = 1 << 16;

/// The largest block width: the 2^w two-bit messages of a block are masked by 2^(w+1) ≤ 128 bits of each key.
pub const MAX_BLOCK_BITS: usize = 6;

/// (p, w) of every block of an ell-bit comparison, from the widths (each 1..=MAX_BLOCK_BITS, summing to ell).
fn blocks(ell: usize, widths: &[usize]) -> Result<Vec<(usize, usize)>, String> {
    if !(1..=64).contains(&ell) || widths.iter().sum::<usize>() != ell {
        return Err(format!("millionaire: block widths {widths:?} do not split {ell} bits"));
    }
    let mut p = 0;
    let mut out = Vec::with_capacity(widths.len());
    for &w in widths {
        if !(1..=MAX_BLOCK_BITS).contains(&w) {
            return Err(format!("millionaire: blocks of 1..={MAX_BLOCK_BITS} bits"));
        }
        out.push((p, w));
        p += w;
    }
    Ok(out)
}

/// `blocks` for the other modules' tests.
#[cfg(test)]
pub(crate) fn blocks_of(ell: usize, widths: &[usize]) -> Result<Vec<(usize, usize)>, String> {
    blocks(ell, widths)
}

/// One task's entries: the first one's index and the task's keys, ell rows per entry from row 0.
struct Task<'a> {
    first: usize,
    count: usize,
    ell: usize,
    k0: &'a [u8],
    k1: &'a [u8],
}

/// The constants of a block of w bits (messages v = 0..2^w, two bits each, message v at bits 2v, 2v + 1).
struct Layout {
    /// bits 2v, 2v + 1 set for every v with bit t clear, one word per t < w
    clear: Vec<u128>,
    /// (lt, eq) of every message for S's block value y: [v < y] at bit 2v, [v = y] at bit 2v + 1
    base: Vec<u128>,
    /// all 2^(w+1) message bits; the lt bits; the eq bits
    full: u128,
    lt: u128,
    eq: u128,
}

impl Layout {
    fn new(w: usize) -> Layout {
        let n = 1usize << w;
        let pairs = |keep: &dyn Fn(usize) -> bool| (0..n).filter(|&v| keep(v)).fold(0u128, |a, v| a | 3 << (2 * v));
        let full = pairs(&|_| true);
        Layout {
            clear: (0..w).map(|t| pairs(&|v| v >> t & 1 == 0)).collect(),
            base: (0..n)
                .map(|y| (pairs(&|v| v < y) & (full / 3)) | 2 << (2 * y))
                .collect(),
            full,
            lt: full / 3,
            eq: (full / 3) << 1,
        }
    }
}

/// S's 2^w two-bit messages of block (p, w) of the task's entries, packed LSB first into `out` (the task's
/// bytes): message v of entry i = first + k is (ls_i ⊕ [v < y_i]) | (es_i ⊕ [v = y_i]) << 1, masked by the
/// XOR over t < w of bits 2v, 2v + 1 of K_{t, v_t} (Naor–Pinkas' 1-out-of-N from w random OTs, the keys' own
/// bits in place of the PRF: 2^(w+1) ≤ 128 bits per key).
fn leaf_messages(t: &Task, (p, w): (usize, usize), lay: &Layout, y: &[u64], ls: &[u8], es: &[u8], out: &mut [u8]) {
    let bytes = (2usize << w).div_ceil(8);
    for k in 0..t.count {
        let (i, row) = (t.first + k, k * t.ell + p);
        let mut msg = lay.base[((y[i] >> p) & ((1 << w) - 1)) as usize];
        for (s, &c) in lay.clear.iter().enumerate() {
            let (a, b) = (read_row(t.k0, row + s), read_row(t.k1, row + s));
            msg ^= (a & c) | (b & !c);
        }
        if ls[i] & 1 == 1 {
            msg ^= lay.lt;
        }
        if es[i] & 1 == 1 {
            msg ^= lay.eq;
        }
        let v = (msg & lay.full).to_le_bytes();
        if w == 1 {
            out[k / 2] |= v[0] << (4 * (k % 2)); // four bits per entry
            continue;
        }
        let o = &mut out[k * bytes..];
        // fixed-size copies: a call to memmove per entry would cost more than the entry
        match bytes {
            16 => o[..16].copy_from_slice(&v),
            8 => o[..8].copy_from_slice(&v[..8]),
            4 => o[..4].copy_from_slice(&v[..4]),
            2 => o[..2].copy_from_slice(&v[..2]),
            _ => o[0] = v[0],
        }
    }
}

/// R's masks of block (p, w) of the task's entries (keys K_{t, x_t} in `t.k0`): bits 2x_i, 2x_i + 1 of
/// ⊕_t K_{t, x_t}.
fn leaf_masks(t: &Task, (p, w): (usize, usize), x: &[u64], out: &mut [u8]) {
    for (k, o) in out.iter_mut().enumerate() {
        let row = k * t.ell + p;
        let key = (0..w).fold(0u128, |a, s| a ^ read_row(t.k0, row + s));
        let xi = (x[t.first + k] >> p) & ((1 << w) - 1);
        *o = (key >> (2 * xi)) as u8 & 3;
    }
}

/// Bytes of a block's packed messages for m entries: 2 bits per message, 2^w messages per entry.
fn ct_bytes(m: usize, w: usize) -> usize {
    (2 * (m << w)).div_ceil(8)
}

/// S's inputs and the random bits of its blocks.
pub struct LeafInputs<'a> {
    pub y: &'a [u64],
    pub ls: Vec<&'a [u8]>,
    pub es: Vec<&'a [u8]>,
}

/// The keys' source of `leaves_send_by`: runs the extension (or the hash of COTs) in tasks of whole entries,
/// each task's (first OT, keys0, keys1) to the consumer it is given.
pub type SendKeys<'a> = &'a (dyn Fn(usize, &[u8], &[u8]) + Sync);

/// S's masked messages of every block of every entry (one packed buffer per block, bits (i, v, {lt, eq})),
/// extending the m·ell random OTs on R's u (entry i's bit t is OT i·ell + t) in the same pass: the keys
/// never reach memory.
pub fn leaves_send(
    sender: &mut Sender,
    u: &[u8],
    counter: u64,
    ell: usize,
    widths: &[usize],
    inp: &LeafInputs,
) -> Result<Vec<Vec<u8>>, String> {
    let m = inp.y.len();
    leaves_send_by(ell, widths, inp, |f| sender.extend_with(u, m * ell, counter, ell, f))
}

/// `leaves_send` on any source of the m·ell random-OT keys (IKNP/SoftSpokenOT's extension, or Ferret's COTs
/// hashed by `cot`); `keys` must call its consumer in tasks of whole groups of 8·ell OTs.
pub fn leaves_send_by<E>(ell: usize, widths: &[usize], inp: &LeafInputs, keys: E) -> Result<Vec<Vec<u8>>, String>
where
    E: FnOnce(SendKeys) -> Result<(), String>,
{
    let m = inp.y.len();
    let bl = blocks(ell, widths)?;
    if inp.ls.len() != bl.len() || inp.es.len() != bl.len() {
        return Err("millionaire: one set of random bits per block".into());
    }
    if inp.ls.iter().chain(&inp.es).any(|b| b.len() != m) {
        return Err("millionaire: inputs and random bits differ in length".into());
    }
    let mut cts: Vec<Vec<u8>> = bl.iter().map(|&(_, w)| vec![0u8; ct_bytes(m, w)]).collect();
    let outs: Vec<Shared> = cts.iter_mut().map(|c| Shared::new(c)).collect();
    let lays: Vec<Layout> = bl.iter().map(|&(_, w)| Layout::new(w)).collect();
    keys(&|first, k0, k1| {
        let t = Task {
            first: first / ell,
            count: k0.len() / 16 / ell,
            ell,
            k0,
            k1,
        };
        for (b, ((&(p, w), out), lay)) in bl.iter().zip(&outs).zip(&lays).enumerate() {
            // first is a multiple of 8 entries (whole groups of ell OTs start on a byte): a whole byte
            let lo = (t.first << w) / 4;
            let hi = ct_bytes(t.first + t.count, w);
            // SAFETY: the tasks' entry ranges, hence these byte ranges, are disjoint.
            let out = unsafe { out.slice(lo, hi - lo) };
            leaf_messages(&t, (p, w), lay, inp.y, inp.ls[b], inp.es[b], out);
        }
    })?;
    Ok(cts)
}

/// R's side of `leaves_send` before S answers: the extension on the bits of x (u into `u`) and, per block,
/// the mask of the message at its block value (m bytes per block).
pub fn leaves_recv(
    receiver: &mut Receiver,
    counter: u64,
    ell: usize,
    widths: &[usize],
    x: &[u64],
    u: &mut [u8],
) -> Result<Vec<Vec<u8>>, String> {
    let bits = field_bits(x, ell);
    leaves_recv_by(ell, widths, x, |f| {
        receiver.extend_with(&bits, x.len() * ell, counter, ell, u, f)
    })
}

/// `leaves_recv` on any source of R's keys K_{t, x_t} (as `leaves_send_by`).
pub fn leaves_recv_by<E>(ell: usize, widths: &[usize], x: &[u64], keys: E) -> Result<Vec<Vec<u8>>, String>
where
    E: FnOnce(&(dyn Fn(usize, &[u8]) + Sync)) -> Result<(), String>,
{
    let m = x.len();
    let bl = blocks(ell, widths)?;
    let mut masks: Vec<Vec<u8>> = bl.iter().map(|_| vec![0u8; m]).collect();
    let outs: Vec<Shared> = masks.iter_mut().map(|c| Shared::new(c)).collect();
    keys(&|first, k| {
        let t = Task {
            first: first / ell,
            count: k.len() / 16 / ell,
            ell,
            k0: k,
            k1: k,
        };
        for (&pw, out) in bl.iter().zip(&outs) {
            // SAFETY: the tasks' entry ranges are disjoint.
            leaf_masks(&t, pw, x, unsafe { out.slice(t.first, t.count) });
        }
    })?;
    Ok(masks)
}

/// Bytes of a key in `leaves_send_keys`/`leaves_recv_keys`: the first four bytes of each random-OT key, enough for
/// blocks of w ≤ KEY_BLOCK_BITS (2^(w+1) ≤ 32 message bits).
pub const KEY_BYTES: usize = 4;
pub const KEY_BLOCK_BITS: usize = 4;

/// The 57 bits of the packed bit string `d` from bit `at` on (bit t of the result: bit at + t; past the end: 0).
fn bits_at(d: &[u8], at: usize) -> u64 {
    let (lo, sh) = (at / 8, at % 8);
    let mut w = [0u8; 8];
    let n = d.len().saturating_sub(lo).min(8);
    w[..n].copy_from_slice(&d[lo..lo + n]);
    u64::from_le_bytes(w) >> sh
}

fn key32(k: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(k[at..at + 4].try_into().expect("4 bytes"))
}

/// `leaves_send_by` on keys hashed ahead (`cot::rot_send` between identifications): `k0`, `k1` hold m·ell rows of
/// KEY_BYTES bytes, H(j, s_j)[..4] and H(j, s_j ⊕ Δ)[..4]; R's correction d_j swaps them. Byte for byte the same
/// messages as `leaves_send_by` on those COTs, for blocks of at most KEY_BLOCK_BITS bits.
pub fn leaves_send_keys(
    k0: &[u8],
    k1: &[u8],
    d: &[u8],
    ell: usize,
    widths: &[usize],
    inp: &LeafInputs,
) -> Result<Vec<Vec<u8>>, String> {
    let m = inp.y.len();
    let bl = blocks(ell, widths)?;
    if bl.iter().any(|&(_, w)| w > KEY_BLOCK_BITS) || ell > 57 {
        return Err(format!(
            "millionaire: keys of {KEY_BYTES} bytes serve blocks of ≤ {KEY_BLOCK_BITS} bits, inputs of ≤ 57 bits"
        ));
    }
    if k0.len() != KEY_BYTES * m * ell || k1.len() != k0.len() || d.len() != (m * ell).div_ceil(8) {
        return Err(format!(
            "millionaire: {m} comparisons of {ell} bits take {} keys and {} correction bytes",
            m * ell,
            (m * ell).div_ceil(8)
        ));
    }
    if inp.ls.len() != bl.len() || inp.es.len() != bl.len() || inp.ls.iter().chain(&inp.es).any(|b| b.len() != m) {
        return Err("millionaire: one set of random bits per block, one bit per entry".into());
    }
    let mut cts: Vec<Vec<u8>> = bl.iter().map(|&(_, w)| vec![0u8; ct_bytes(m, w)]).collect();
    let outs: Vec<Shared> = cts.iter_mut().map(|c| Shared::new(c)).collect();
    let lays: Vec<Layout> = bl.iter().map(|&(_, w)| Layout::new(w)).collect();
    let clears: Vec<Vec<u32>> = lays
        .iter()
        .map(|l| l.clear.iter().map(|&c| c as u32).collect())
        .collect();
    (0..m.div_ceil(CHUNK)).into_par_iter().for_each(|c| {
        let (first, count) = (c * CHUNK, CHUNK.min(m - c * CHUNK));
        // SAFETY: the chunks' entry ranges (multiples of 8 entries), hence these byte ranges, are disjoint.
        let mut outs: Vec<&mut [u8]> = bl
            .iter()
            .zip(&outs)
            .map(|(&(_, w), o)| {
                let lo = (first << w) / 4;
                unsafe { o.slice(lo, ct_bytes(first + count, w) - lo) }
            })
            .collect();
        // entry by entry, all its blocks: each entry's ell keys are read once, in order
        for kk in 0..count {
            let i = first + kk;
            let (r0, r1) = (&k0[4 * i * ell..4 * (i + 1) * ell], &k1[4 * i * ell..4 * (i + 1) * ell]);
            let dw = bits_at(d, i * ell); // bit t: d_{i·ell + t}
            for (b, ((&(p, w), out), lay)) in bl.iter().zip(outs.iter_mut()).zip(&lays).enumerate() {
                let mut msg = lay.base[((inp.y[i] >> p) & ((1 << w) - 1)) as usize] as u32;
                for (s, &cl) in clears[b].iter().enumerate() {
                    let (a, bb) = (key32(r0, 4 * (p + s)), key32(r1, 4 * (p + s)));
                    // (K_{t,0} & c) | (K_{t,1} & !c) with the keys swapped where d_j = 1, without a branch
                    let dm = 0u32.wrapping_sub((dw >> (p + s)) as u32 & 1);
                    msg ^= bb ^ ((a ^ bb) & (cl ^ dm));
                }
                msg ^= (lay.lt as u32) & 0u32.wrapping_sub(u32::from(inp.ls[b][i] & 1));
                msg ^= (lay.eq as u32) & 0u32.wrapping_sub(u32::from(inp.es[b][i] & 1));
                let v = (msg & lay.full as u32).to_le_bytes();
                match w {
                    1 => out[kk / 2] |= v[0] << (4 * (kk % 2)),
                    4 => out[4 * kk..4 * kk + 4].copy_from_slice(&v),
                    3 => out[2 * kk..2 * kk + 2].copy_from_slice(&v[..2]),
                    _ => out[kk] = v[0],
                }
            }
        }
    });
    Ok(cts)
}

/// `leaves_recv_by` on R's keys hashed ahead: `k` holds m·ell rows of KEY_BYTES bytes, H(j, r_j)[..4].
pub fn leaves_recv_keys(k: &[u8], ell: usize, widths: &[usize], x: &[u64]) -> Result<Vec<Vec<u8>>, String> {
    let m = x.len();
    let bl = blocks(ell, widths)?;
    if bl.iter().any(|&(_, w)| w > KEY_BLOCK_BITS) || k.len() != KEY_BYTES * m * ell {
        return Err(format!(
            "millionaire: {m} comparisons of {ell} bits take {} keys of {KEY_BYTES} bytes, blocks \
                            of ≤ {KEY_BLOCK_BITS} bits",
            m * ell
        ));
    }
    let mut masks: Vec<Vec<u8>> = bl.iter().map(|_| vec![0u8; m]).collect();
    let outs: Vec<Shared> = masks.iter_mut().map(|c| Shared::new(c)).collect();
    (0..m.div_ceil(CHUNK)).into_par_iter().for_each(|c| {
        let (first, count) = (c * CHUNK, CHUNK.min(m - c * CHUNK));
        // SAFETY: the chunks' entry ranges are disjoint.
        let mut outs: Vec<&mut [u8]> = outs.iter().map(|o| unsafe { o.slice(first, count) }).collect();
        for kk in 0..count {
            let i = first + kk;
            let r = &k[4 * i * ell..4 * (i + 1) * ell];
            for (&(p, w), out) in bl.iter().zip(outs.iter_mut()) {
                let key = (p..p + w).fold(0u32, |a, t| a ^ key32(r, 4 * t));
                out[kk] = (key >> (2 * ((x[i] >> p) & ((1 << w) - 1)))) as u8 & 3;
            }
        }
    });
    Ok(masks)
}

/// The low ell bits of every x_i, concatenated LSB first (bit i·ell + t is bit t of x_i): the choices of
/// `leaves_recv`, packed as `otext::pack_bits` packs them.
pub fn field_bits(x: &[u64], ell: usize) -> Vec<u8> {
    let mut out = vec![0u8; (x.len() * ell).div_ceil(8) + 8];
    let mask = if ell == 64 { u64::MAX } else { (1 << ell) - 1 };
    let (mut acc, mut have, mut at) = (0u128, 0usize, 0usize);
    for &xi in x {
        acc |= u128::from(xi & mask) << have;
        have += ell;
        while have >= 64 {
            out[at..at + 8].copy_from_slice(&(acc as u64).to_le_bytes());
            (acc, have, at) = (acc >> 64, have - 64, at + 8);
        }
    }
    out[at..at + 8].copy_from_slice(&(acc as u64).to_le_bytes());
    out.truncate((x.len() * ell).div_ceil(8));
    out
}

/// R's (lt, eq) shares of block bits p..p+w: S's message at its block value x_i, unmasked.
pub fn leaf_open(ct: &[u8], p: usize, w: usize, x: &[u64], mask: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let m = x.len();
    if !(1..=MAX_BLOCK_BITS).contains(&w) || p + w > 64 || mask.len() != m || ct.len() != ct_bytes(m, w) {
        return Err("millionaire: the masked messages or the masks have the wrong length".into());
    }
    let (mut lt, mut eq) = (vec![0u8; m], vec![0u8; m]);
    lt.par_chunks_mut(CHUNK)
        .zip(eq.par_chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(c, (lt, eq))| {
            for (k, (l, e)) in lt.iter_mut().zip(eq.iter_mut()).enumerate() {
                let i = c * CHUNK + k;
                let bit = 2 * ((i << w) + ((x[i] >> p) & ((1 << w) - 1)) as usize);
                let g = ((ct[bit / 8] >> (bit % 8)) & 3) ^ mask[i]; // bit is even: both bits in one byte
                (*l, *e) = (g & 1, g >> 1);
            }
        });
    Ok((lt, eq))
}

/// The key width of `keys` holding n keys (their first `width` bytes each, at least `min` bytes).
fn width(keys: usize, n: usize, min: usize) -> Option<usize> {
    (n > 0 && keys.is_multiple_of(n) && (min..=16).contains(&(keys / n))).then(|| keys / n)
}

/// (a, c, the correction y0 ⊕ y1 ⊕ b) of every triple.
pub type Triples = (Vec<u8>, Vec<u8>, Vec<u8>);

/// S's triples from its ROT keys (t0, t1) of 2n OTs (x from the first n, y from the second; bit 0 of each
/// key's first byte) and its random b.
pub fn triples_send(t0: &[u8], t1: &[u8], b: &[u8]) -> Result<Triples, String> {
    let n = b.len();
    if n == 0 {
        return Ok((vec![], vec![], vec![]));
    }
    let k = width(t0.len(), 2 * n, 1).filter(|_| t1.len() == t0.len());
    let k = k.ok_or_else(|| format!("bit triples: expected 2 × {n} keys of equal width"))?;
    let bit = |t: &[u8], i: usize| t[k * i] & 1;
    let (mut a, mut c, mut e) = (vec![0u8; n], vec![0u8; n], vec![0u8; n]);
    a.par_chunks_mut(CHUNK)
        .zip(c.par_chunks_mut(CHUNK).zip(e.par_chunks_mut(CHUNK)))
        .enumerate()
        .for_each(|(ch, (a, (c, e)))| {
            for (j, (a, (c, e))) in a.iter_mut().zip(c.iter_mut().zip(e.iter_mut())).enumerate() {
                let i = ch * CHUNK + j;
                let (x0, x1, y0, y1) = (bit(t0, i), bit(t1, i), bit(t0, n + i), bit(t1, n + i));
                *a = x0 ^ x1;
                *e = y0 ^ y1 ^ b[i];
                *c = (*a & b[i]) ^ x0 ^ y0;
            }
        });
    Ok((a, c, e))
}

/// R's c = a·b ⊕ x_{b} ⊕ y_{a} ⊕ a·e from its ROT keys (2n OTs with choices b ‖ a) and S's correction e.
pub fn triples_recv(kt: &[u8], a: &[u8], b: &[u8], e: &[u8]) -> Result<Vec<u8>, String> {
    let n = a.len();
    if b.len() != n || e.len() != n {
        return Err(format!("bit triples: expected {n} bits each"));
    }
    if n == 0 {
        return Ok(vec![]);
    }
    let k = width(kt.len(), 2 * n, 1).ok_or_else(|| format!("bit triples: expected 2 × {n} keys"))?;
    Ok((0..n)
        .into_par_iter()
        .with_min_len(CHUNK)
        .map(|i| (a[i] & b[i]) ^ (kt[k * i] & 1) ^ (kt[k * (n + i)] & 1) ^ (a[i] & e[i]))
        .collect())
}

fn low32(keys: &[u8], k: usize, i: usize) -> u32 {
    u32::from_le_bytes(keys[k * i..k * i + 4].try_into().expect("4 bytes"))
}

/// S's B2A step: (D_i = r0 − r1 + b_S mod 2^32 as little-endian u32 bytes, its share b_S − 2·(−r0) mod 2^32),
/// r the keys' first four bytes; `swap` (packed bits, little-endian): R's corrections of Ferret's COTs, bit i set
/// exchanges entry i's two keys.
pub fn b2a_send(k0: &[u8], k1: &[u8], b: &[u8], swap: Option<&[u8]>) -> Result<(Vec<u8>, Vec<u64>), String> {
    let n = b.len();
    if n == 0 {
        return Ok((vec![], vec![]));
    }
    let k = width(k0.len(), n, 4).filter(|_| k1.len() == k0.len());
    let k = k.ok_or_else(|| format!("B2A: expected {n} keys of 4..=16 bytes"))?;
    if swap.is_some_and(|s| s.len() != n.div_ceil(8)) {
        return Err(format!("B2A: expected {n} correction bits"));
    }
    let (mut d, mut share) = (vec![0u8; 4 * n], vec![0u64; n]);
    d.par_chunks_mut(4 * CHUNK)
        .zip(share.par_chunks_mut(CHUNK))
        .enumerate()
        .for_each(|(c, (d, share))| {
            for (j, (d, s)) in d.chunks_exact_mut(4).zip(share.iter_mut()).enumerate() {
                let i = c * CHUNK + j;
                let (mut r0, mut r1, bi) = (low32(k0, k, i), low32(k1, k, i), u32::from(b[i]));
                if swap.is_some_and(|s| (s[i / 8] >> (i % 8)) & 1 == 1) {
                    (r0, r1) = (r1, r0);
                }
                d.copy_from_slice(&r0.wrapping_sub(r1).wrapping_add(bi).to_le_bytes());
                *s = u64::from(bi.wrapping_sub(r0.wrapping_neg().wrapping_mul(2)));
            }
        });
    Ok((d, share))
}

/// n uniform bits, one per byte (0 or 1): ChaCha20 keyed by `seed` (32 bytes from the OS), stream c for the
/// c-th CHUNK of them.
pub fn random_bits(seed: [u8; 32], n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, o)| {
        let mut rng = ChaCha20Rng::from_seed(seed);
        rng.set_stream(c as u64);
        for w in o.chunks_mut(64) {
            let v = rng.next_u64();
            for (i, x) in w.iter_mut().enumerate() {
                *x = (v >> i) as u8 & 1;
            }
        }
    });
    out
}

/// R's B2A step: its share b_R − 2·(rc + b_R·D) mod 2^32.
pub fn b2a_recv(kr: &[u8], b: &[u8], d: &[u8]) -> Result<Vec<u64>, String> {
    let n = b.len();
    if d.len() != 4 * n {
        return Err(format!("B2A: expected {n} words"));
    }
    if n == 0 {
        return Ok(vec![]);
    }
    let k = width(kr.len(), n, 4).ok_or_else(|| format!("B2A: expected {n} keys of 4..=16 bytes"))?;
    Ok((0..n)
        .into_par_iter()
        .with_min_len(CHUNK)
        .map(|i| {
            let di = u32::from_le_bytes(d[4 * i..4 * i + 4].try_into().expect("4 bytes"));
            let bi = u32::from(b[i]);
            let y = low32(kr, k, i).wrapping_add(bi.wrapping_mul(di));
            u64::from(bi.wrapping_sub(y.wrapping_mul(2)))
        })
        .collect())
}

// ----------------------------------------------------------------------------------------- Python
fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

type Bits<'py> = Bound<'py, PyArray1<u8>>;

/// S's masked messages of every block (one packed uint8 array per block) from R's u for the m·ell OTs
/// (counter: their first tweak): inputs y (m,) uint64, the block widths, per block random bits ls, es (m,)
/// uint8.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn mill_leaves_send<'py>(
    py: Python<'py>,
    mut sender: PyRefMut<'py, PyIknpSender>,
    u: PyReadonlyArrayDyn<'py, u8>,
    counter: u64,
    ell: usize,
    widths: Vec<usize>,
    y: PyReadonlyArrayDyn<'py, u64>,
    ls: Vec<PyReadonlyArrayDyn<'py, u8>>,
    es: Vec<PyReadonlyArrayDyn<'py, u8>>,
) -> PyResult<Vec<Bits<'py>>> {
    let (u, y) = (contiguous(&u, "u")?, contiguous(&y, "y")?);
    let inp = LeafInputs {
        y,
        ls: ls.iter().map(|a| contiguous(a, "ls")).collect::<PyResult<_>>()?,
        es: es.iter().map(|a| contiguous(a, "es")).collect::<PyResult<_>>()?,
    };
    let inner = &mut sender.inner;
    let cts = py
        .detach(|| pool::install(|| leaves_send(inner, u, counter, ell, &widths, &inp)))
        .map_err(err)?;
    Ok(cts.into_iter().map(|c| c.into_pyarray(py)).collect())
}

/// R's extension on the bits of x (m,) uint64 (counter: the first tweak of its m·ell OTs) → (u (u_rows,
/// row_bytes(m·ell)) uint8, per block the masks (m,) uint8), for the block widths.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn mill_leaves_recv<'py>(
    py: Python<'py>,
    mut receiver: PyRefMut<'py, PyIknpReceiver>,
    counter: u64,
    ell: usize,
    widths: Vec<usize>,
    x: PyReadonlyArrayDyn<'py, u64>,
) -> PyResult<(Bound<'py, PyArray2<u8>>, Vec<Bits<'py>>)> {
    let x = contiguous(&x, "x")?;
    let nb = row_bytes(x.len() * ell);
    let inner = &mut receiver.inner;
    let u = PyArray2::<u8>::zeros(py, [inner.u_rows(), nb], false);
    let masks = {
        let mut w = u.readwrite();
        let us = w
            .as_slice_mut()
            .map_err(|_| err("u: expected a C-contiguous array".into()))?;
        py.detach(|| pool::install(|| leaves_recv(inner, counter, ell, &widths, x, us)))
            .map_err(err)?
    };
    Ok((u, masks.into_iter().map(|c| c.into_pyarray(py)).collect()))
}

/// R's (lt, eq) bits (m,) uint8 of block bits p..p+w: S's packed messages ct, its inputs x, its masks.
#[pyfunction]
fn mill_leaf_open<'py>(
    py: Python<'py>,
    ct: PyReadonlyArrayDyn<'py, u8>,
    p: usize,
    w: usize,
    x: PyReadonlyArrayDyn<'py, u64>,
    mask: PyReadonlyArrayDyn<'py, u8>,
) -> PyResult<(Bits<'py>, Bits<'py>)> {
    let (ct, x, mask) = (contiguous(&ct, "ct")?, contiguous(&x, "x")?, contiguous(&mask, "mask")?);
    let (lt, eq) = py
        .detach(|| pool::install(|| leaf_open(ct, p, w, x, mask)))
        .map_err(err)?;
    Ok((lt.into_pyarray(py), eq.into_pyarray(py)))
}

/// S's bit triples: ROT keys t0, t1 (2n, width ≥ 1), random b (n,) → (a, c, correction), each (n,) uint8.
#[pyfunction(name = "triples_send")]
fn py_triples_send<'py>(
    py: Python<'py>,
    t0: PyReadonlyArrayDyn<'py, u8>,
    t1: PyReadonlyArrayDyn<'py, u8>,
    b: PyReadonlyArrayDyn<'py, u8>,
) -> PyResult<(Bits<'py>, Bits<'py>, Bits<'py>)> {
    let (t0, t1, b) = (contiguous(&t0, "t0")?, contiguous(&t1, "t1")?, contiguous(&b, "b")?);
    let (a, c, e) = py.detach(|| pool::install(|| triples_send(t0, t1, b))).map_err(err)?;
    Ok((a.into_pyarray(py), c.into_pyarray(py), e.into_pyarray(py)))
}

/// R's bit triples' c (n,) uint8: ROT keys kt (2n, width ≥ 1) for choices b ‖ a, its a, b and S's correction e.
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
    let c = py.detach(|| pool::install(|| triples_recv(kt, a, b, e))).map_err(err)?;
    Ok(c.into_pyarray(py))
}

/// S's B2A: ROT keys k0, k1 (n, width ≥ 4), its bits (n,) uint8, optional packed swap bits (``b2a_send``) →
/// (D as 4n bytes uint8, its shares (n,) uint64).
#[pyfunction(name = "b2a_send")]
#[pyo3(signature = (k0, k1, b, swap=None))]
fn py_b2a_send<'py>(
    py: Python<'py>,
    k0: PyReadonlyArrayDyn<'py, u8>,
    k1: PyReadonlyArrayDyn<'py, u8>,
    b: PyReadonlyArrayDyn<'py, u8>,
    swap: Option<PyReadonlyArrayDyn<'py, u8>>,
) -> PyResult<(Bits<'py>, Bound<'py, PyArray1<u64>>)> {
    let (k0, k1, b) = (contiguous(&k0, "k0")?, contiguous(&k1, "k1")?, contiguous(&b, "b")?);
    let swap = swap.as_ref().map(|s| contiguous(s, "swap")).transpose()?;
    let (d, s) = py.detach(|| pool::install(|| b2a_send(k0, k1, b, swap))).map_err(err)?;
    Ok((d.into_pyarray(py), s.into_pyarray(py)))
}

/// n uniform bits (n,) uint8 of 0/1 from a 32-byte seed (``random_bits``).
#[pyfunction(name = "random_bits")]
fn py_random_bits<'py>(py: Python<'py>, seed: &[u8], n: usize) -> PyResult<Bits<'py>> {
    let seed: [u8; 32] = seed
        .try_into()
        .map_err(|_| PyValueError::new_err("random_bits: a 32-byte seed"))?;
    let v = py.detach(|| pool::install(|| random_bits(seed, n)));
    Ok(v.into_pyarray(py))
}

/// R's B2A: ROT keys kr (n, width ≥ 4), its bits (n,) uint8, S's D (4n bytes) → its shares (n,) uint64.
#[pyfunction(name = "b2a_recv")]
fn py_b2a_recv<'py>(
    py: Python<'py>,
    kr: PyReadonlyArrayDyn<'py, u8>,
    b: PyReadonlyArrayDyn<'py, u8>,
    d: PyReadonlyArrayDyn<'py, u8>,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    let (kr, b, d) = (contiguous(&kr, "kr")?, contiguous(&b, "b")?, contiguous(&d, "D")?);
    let s = py.detach(|| pool::install(|| b2a_recv(kr, b, d))).map_err(err)?;
    Ok(s.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mill_leaves_send, m)?)?;
    m.add_function(wrap_pyfunction!(mill_leaves_recv, m)?)?;
    m.add_function(wrap_pyfunction!(mill_leaf_open, m)?)?;
    m.add_function(wrap_pyfunction!(py_triples_send, m)?)?;
    m.add_function(wrap_pyfunction!(py_triples_recv, m)?)?;
    m.add_function(wrap_pyfunction!(py_b2a_send, m)?)?;
    m.add_function(wrap_pyfunction!(py_random_bits, m)?)?;
    m.add_function(wrap_pyfunction!(py_b2a_recv, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otext::KAPPA;

    fn keys(m: usize, salt: u8) -> Vec<u8> {
        (0..16 * m)
            .map(|i| (i as u8).wrapping_mul(29).wrapping_add(salt))
            .collect()
    }

    #[test]
    fn field_bits_are_the_packed_choices() {
        for (ell, m) in [(1, 9), (7, 13), (18, 1), (18, 101), (31, 40), (64, 5)] {
            let x: Vec<u64> = (0..m as u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 61))
                .collect();
            let choices: Vec<u8> = x
                .iter()
                .flat_map(|&xi| (0..ell).map(move |t| (xi >> t & 1) as u8))
                .collect();
            assert_eq!(
                field_bits(&x, ell),
                crate::otext::pack_bits(&choices),
                "ell {ell}, m {m}"
            );
        }
    }

    #[test]
    fn the_receiver_unmasks_the_message_at_its_block_value() {
        // several extension tasks (120 entries of 17 OTs each), the last one short; every width 1..=6
        for (widths, soft) in [
            ([4usize, 4, 4, 4, 1], None),
            ([6, 5, 3, 2, 1], None),
            ([4, 4, 3, 3, 3], Some(4)),
        ] {
            let (mut s, mut r) = match soft {
                None => crate::otext::pair(),
                Some(k) => crate::otext::pair_soft(k),
            };
            let (m, ell) = (1000usize, 17usize);
            let y: Vec<u64> = (0..m as u64).map(|i| i * 7919 % (1 << ell)).collect();
            let x: Vec<u64> = (0..m as u64).map(|i| i * 104_729 % (1 << ell)).collect();
            let ls: Vec<Vec<u8>> = (0..5).map(|b| (0..m).map(|i| ((i + b) % 2) as u8).collect()).collect();
            let es: Vec<Vec<u8>> = (0..5)
                .map(|b| (0..m).map(|i| ((i / 3 + b) % 2) as u8).collect())
                .collect();
            let mut u = vec![0u8; r.u_rows() * row_bytes(m * ell)];
            assert_eq!(r.u_rows(), KAPPA / soft.unwrap_or(1));
            let masks = leaves_recv(&mut r, 3, ell, &widths, &x, &mut u).unwrap();
            let inp = LeafInputs {
                y: &y,
                ls: ls.iter().map(|v| v.as_slice()).collect(),
                es: es.iter().map(|v| v.as_slice()).collect(),
            };
            let cts = leaves_send(&mut s, &u, 3, ell, &widths, &inp).unwrap();
            for (b, (p, w)) in blocks(ell, &widths).unwrap().into_iter().enumerate() {
                let (lt, eq) = leaf_open(&cts[b], p, w, &x, &masks[b]).unwrap();
                for i in 0..m {
                    let (xj, yj) = (x[i] >> p & ((1 << w) - 1), y[i] >> p & ((1 << w) - 1));
                    assert_eq!(lt[i] ^ ls[b][i], u8::from(xj < yj), "block {b} entry {i}");
                    assert_eq!(eq[i] ^ es[b][i], u8::from(xj == yj), "block {b} entry {i}");
                }
            }
        }
        assert!(blocks(17, &[4, 4, 4, 4]).is_err() && blocks(18, &[9, 9]).is_err() && blocks(14, &[7, 7]).is_err());
    }

    #[test]
    fn b2a_shares_add_to_the_xor() {
        let n = 50;
        let (k0, k1) = (keys(n, 9), keys(n, 77));
        let bs: Vec<u8> = (0..n).map(|i| (i % 3 == 0) as u8).collect();
        let br: Vec<u8> = (0..n).map(|i| (i % 5 == 0) as u8).collect();
        let sw: Vec<u8> = (0..n).map(|i| (i % 7 < 3) as u8).collect();
        let packed: Vec<u8> = sw
            .chunks(8)
            .map(|c| c.iter().enumerate().fold(0, |a, (j, &b)| a | (b << j)))
            .collect();
        // R's key of its bit in S's frame: the swapped pair when the correction bit is set
        for swap in [None, Some(&packed[..])] {
            let kr: Vec<u8> = (0..n)
                .flat_map(|i| {
                    let c = br[i] ^ if swap.is_some() { sw[i] } else { 0 };
                    let k = if c == 1 { &k1 } else { &k0 };
                    k[16 * i..16 * i + 16].to_vec()
                })
                .collect();
            let (d, s) = b2a_send(&k0, &k1, &bs, swap).unwrap();
            let r = b2a_recv(&kr, &br, &d).unwrap();
            for i in 0..n {
                assert_eq!((s[i] + r[i]) & 0xFFFF_FFFF, u64::from(bs[i] ^ br[i]));
            }
        }
        assert!(b2a_send(&k0, &k1, &bs, Some(&packed[1..])).is_err());
    }

    #[test]
    fn random_bits_are_bits_of_the_seed() {
        let n = 3 * CHUNK + 5;
        let (a, b, c) = (
            random_bits([1; 32], n),
            random_bits([1; 32], n),
            random_bits([2; 32], n),
        );
        assert!(a == b && a != c && a.iter().all(|&x| x < 2));
        let ones = a.iter().map(|&x| x as usize).sum::<usize>();
        assert!(ones.abs_diff(n / 2) < 2000, "{ones} ones of {n}");
        assert_ne!(a[..CHUNK], a[CHUNK..2 * CHUNK]); // a stream per chunk
    }
}
