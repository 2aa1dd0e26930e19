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
use aes::cipher::consts::U16;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::inout::InOutBuf;
use aes::cipher::{BlockEncrypt, KeyInit};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArrayDyn};
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

/// Blocks per batched AES call (the AES-NI backend pipelines 8 at a time; 64 blocks = 1 KiB stays in L1).
const LANES: usize = 64;

/// Rows per rayon task of `tccr`.
const CHUNK: usize = 4096;

/// Bytes of every row of the IKNP matrix per extension task: 8·TB columns (OTs), a κ × TB tile (16 KiB).
const TB: usize = 256;

/// Columns (OTs) per extension task.
const TILE_COLS: usize = 8 * TB;

/// AES-128 encryption of whole 16-byte blocks in place: AES-NI with 8 blocks in flight (runtime-detected),
/// else the `aes` crate. The round keys are expanded once (FIPS-197 §5.2; checked against the `aes` crate by
/// the tests). The crate's own AES-NI backend costs a dispatch, a closure and block-type copies per call,
/// which dominate the short calls of the per-tile CTR streams.
#[derive(Clone)]
pub struct Prp {
    soft: Aes128,
    #[cfg(target_arch = "x86_64")]
    rk: [[u8; 16]; 11],
    #[cfg(target_arch = "x86_64")]
    kind: Unit,
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Debug)]
enum Unit {
    AesNi,
    Soft,
}

impl Prp {
    pub fn new(key: &[u8; 16]) -> Prp {
        #[cfg(target_arch = "x86_64")]
        {
            let kind = if std::arch::is_x86_feature_detected!("aes") {
                Unit::AesNi
            } else {
                Unit::Soft
            };
            let rk = if kind == Unit::Soft {
                [[0; 16]; 11]
            } else {
                // SAFETY: AES-NI (and SSE2, baseline) detected just above.
                unsafe { x86::expand(key) }
            };
            Prp {
                soft: Aes128::new(GenericArray::from_slice(key)),
                rk,
                kind,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Prp {
            soft: Aes128::new(GenericArray::from_slice(key)),
        }
    }

    /// Every whole 16-byte block of `buf` encrypted in place (a trailing partial block is left alone).
    #[inline]
    pub fn encrypt(&self, buf: &mut [u8]) {
        let n = buf.len() / 16 * 16;
        let buf = &mut buf[..n];
        #[cfg(target_arch = "x86_64")]
        match self.kind {
            // SAFETY: `kind` records the CPU features detected in `new`.
            Unit::AesNi => unsafe { x86::encrypt_aesni(&self.rk, buf) },
            Unit::Soft => encrypt_in_place(&self.soft, buf),
        }
        #[cfg(not(target_arch = "x86_64"))]
        encrypt_in_place(&self.soft, buf);
    }

    #[cfg(all(test, target_arch = "x86_64"))]
    fn with_unit(mut self, kind: Unit) -> Prp {
        self.kind = kind;
        self
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    macro_rules! round_key {
        ($k:expr, $rcon:literal) => {{
            let k = $k;
            let t = _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<$rcon>(k));
            let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            _mm_xor_si128(k, t)
        }};
    }

    /// The 11 AES-128 round keys of `key`.
    #[target_feature(enable = "aes,sse2")]
    pub(super) fn expand(key: &[u8; 16]) -> [[u8; 16]; 11] {
        // SAFETY: `key` is 16 readable bytes; loadu needs no alignment.
        let k0 = unsafe { _mm_loadu_si128(key.as_ptr().cast()) };
        let k1 = round_key!(k0, 0x01);
        let k2 = round_key!(k1, 0x02);
        let k3 = round_key!(k2, 0x04);
        let k4 = round_key!(k3, 0x08);
        let k5 = round_key!(k4, 0x10);
        let k6 = round_key!(k5, 0x20);
        let k7 = round_key!(k6, 0x40);
        let k8 = round_key!(k7, 0x80);
        let k9 = round_key!(k8, 0x1b);
        let k10 = round_key!(k9, 0x36);
        let mut rk = [[0u8; 16]; 11];
        for (d, k) in rk.iter_mut().zip([k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10]) {
            // SAFETY: `d` is 16 writable bytes; storeu needs no alignment.
            unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), k) };
        }
        rk
    }

    #[inline]
    #[target_feature(enable = "aes,sse2")]
    fn keys128(rk: &[[u8; 16]; 11]) -> [__m128i; 11] {
        let mut k = [_mm_setzero_si128(); 11];
        for (v, r) in k.iter_mut().zip(rk) {
            // SAFETY: every round key is 16 readable bytes; loadu needs no alignment.
            *v = unsafe { _mm_loadu_si128(r.as_ptr().cast()) };
        }
        k
    }

    /// TCCR by AES-NI, 8 rows in flight, π(x) kept in registers: out_i = π(π(x_i ⊕ xor) ⊕ j) ⊕ π(x_i ⊕ xor),
    /// j = tweak0 + i in the low 8 bytes; x and out hold the same whole number of blocks.
    #[target_feature(enable = "aes,sse2")]
    pub(super) fn tccr_aesni(rk: &[[u8; 16]; 11], x: &[u8], xor: u128, out: &mut [u8], tweak0: u64) {
        assert_eq!(x.len(), out.len());
        let k = keys128(rk);
        let xr = _mm_set_epi64x((xor >> 64) as u64 as i64, xor as u64 as i64);
        let mut tw = tweak0;
        let mut xs = x.chunks_exact(128);
        let mut os = out.chunks_exact_mut(128);
        for (xc, oc) in (&mut xs).zip(&mut os) {
            let (src, dst): (*const __m128i, *mut __m128i) = (xc.as_ptr().cast(), oc.as_mut_ptr().cast());
            let mut p = [_mm_setzero_si128(); 8];
            for (i, v) in p.iter_mut().enumerate() {
                // SAFETY: `xc` is 128 bytes: block i at src + i is in bounds; loadu needs no alignment.
                let xi = unsafe { _mm_loadu_si128(src.add(i)) };
                *v = _mm_xor_si128(_mm_xor_si128(xi, xr), k[0]);
            }
            for rkey in &k[1..10] {
                for v in p.iter_mut() {
                    *v = _mm_aesenc_si128(*v, *rkey);
                }
            }
            let mut s = [_mm_setzero_si128(); 8];
            for (i, (v, q)) in s.iter_mut().zip(p.iter_mut()).enumerate() {
                *q = _mm_aesenclast_si128(*q, k[10]);
                let j = _mm_set_epi64x(0, tw.wrapping_add(i as u64) as i64);
                *v = _mm_xor_si128(_mm_xor_si128(*q, j), k[0]);
            }
            tw = tw.wrapping_add(8);
            for rkey in &k[1..10] {
                for v in s.iter_mut() {
                    *v = _mm_aesenc_si128(*v, *rkey);
                }
            }
            for (i, (v, q)) in s.iter().zip(p.iter()).enumerate() {
                let h = _mm_xor_si128(_mm_aesenclast_si128(*v, k[10]), *q);
                // SAFETY: `oc` is 128 bytes: block i at dst + i is in bounds; storeu needs no alignment.
                unsafe { _mm_storeu_si128(dst.add(i), h) };
            }
        }
        for (xc, oc) in xs
            .remainder()
            .chunks_exact(16)
            .zip(os.into_remainder().chunks_exact_mut(16))
        {
            // SAFETY: `xc` and `oc` are one 16-byte block each; loadu/storeu need no alignment.
            let xi = unsafe { _mm_loadu_si128(xc.as_ptr().cast()) };
            let mut q = _mm_xor_si128(_mm_xor_si128(xi, xr), k[0]);
            for rkey in &k[1..10] {
                q = _mm_aesenc_si128(q, *rkey);
            }
            q = _mm_aesenclast_si128(q, k[10]);
            let mut v = _mm_xor_si128(_mm_xor_si128(q, _mm_set_epi64x(0, tw as i64)), k[0]);
            tw = tw.wrapping_add(1);
            for rkey in &k[1..10] {
                v = _mm_aesenc_si128(v, *rkey);
            }
            // SAFETY: as above.
            unsafe { _mm_storeu_si128(oc.as_mut_ptr().cast(), _mm_xor_si128(_mm_aesenclast_si128(v, k[10]), q)) };
        }
    }

    /// The counter block of `ctr` (16 big-endian bytes) as a register.
    #[inline]
    #[target_feature(enable = "sse2")]
    fn ctr_block(ctr: u128) -> __m128i {
        let le = ctr.swap_bytes();
        _mm_set_epi64x((le >> 64) as u64 as i64, le as u64 as i64)
    }

    /// AES-CTR keystream blocks ctr, ctr + 1, … (128-bit big-endian counters) into `out` (whole blocks), 8
    /// in flight, the counter blocks built in registers.
    #[target_feature(enable = "aes,sse2")]
    pub(super) fn ctr_aesni(rk: &[[u8; 16]; 11], ctr: u128, out: &mut [u8]) {
        let k = keys128(rk);
        let mut ctr = ctr;
        let mut eight = out.chunks_exact_mut(128);
        for c in &mut eight {
            let p: *mut __m128i = c.as_mut_ptr().cast();
            let mut x = [_mm_setzero_si128(); 8];
            for (i, v) in x.iter_mut().enumerate() {
                *v = _mm_xor_si128(ctr_block(ctr.wrapping_add(i as u128)), k[0]);
            }
            ctr = ctr.wrapping_add(8);
            for rkey in &k[1..10] {
                for v in x.iter_mut() {
                    *v = _mm_aesenc_si128(*v, *rkey);
                }
            }
            for (i, v) in x.iter().enumerate() {
                // SAFETY: `c` is 128 bytes: block i at p + i is in bounds; storeu needs no alignment.
                unsafe { _mm_storeu_si128(p.add(i), _mm_aesenclast_si128(*v, k[10])) };
            }
        }
        for c in eight.into_remainder().chunks_exact_mut(16) {
            let mut v = _mm_xor_si128(ctr_block(ctr), k[0]);
            ctr = ctr.wrapping_add(1);
            for rkey in &k[1..10] {
                v = _mm_aesenc_si128(v, *rkey);
            }
            // SAFETY: `c` is one 16-byte block; storeu needs no alignment.
            unsafe { _mm_storeu_si128(c.as_mut_ptr().cast(), _mm_aesenclast_si128(v, k[10])) };
        }
    }

    /// AES-NI, 8 blocks in flight; `buf` holds whole blocks.
    #[inline]
    #[target_feature(enable = "aes,sse2")]
    pub(super) fn encrypt_aesni(rk: &[[u8; 16]; 11], buf: &mut [u8]) {
        let k = keys128(rk);
        let mut eight = buf.chunks_exact_mut(128);
        for c in &mut eight {
            let p: *mut __m128i = c.as_mut_ptr().cast();
            let mut x = [_mm_setzero_si128(); 8];
            for (i, v) in x.iter_mut().enumerate() {
                // SAFETY: `c` is 128 bytes: block i at p + i is in bounds; loadu needs no alignment.
                *v = _mm_xor_si128(unsafe { _mm_loadu_si128(p.add(i)) }, k[0]);
            }
            for rkey in &k[1..10] {
                for v in x.iter_mut() {
                    *v = _mm_aesenc_si128(*v, *rkey);
                }
            }
            for (i, v) in x.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { _mm_storeu_si128(p.add(i), _mm_aesenclast_si128(*v, k[10])) };
            }
        }
        for c in eight.into_remainder().chunks_exact_mut(16) {
            let p: *mut __m128i = c.as_mut_ptr().cast();
            // SAFETY: `c` is one 16-byte block; loadu/storeu need no alignment.
            let mut v = _mm_xor_si128(unsafe { _mm_loadu_si128(p) }, k[0]);
            for rkey in &k[1..10] {
                v = _mm_aesenc_si128(v, *rkey);
            }
            // SAFETY: as above.
            unsafe { _mm_storeu_si128(p, _mm_aesenclast_si128(v, k[10])) };
        }
    }
}

pub fn tccr_cipher() -> Aes128 {
    Aes128::new(&TCCR_KEY.into())
}

/// Every whole 16-byte block of `buf` encrypted in place (one batched call: the backend pipelines them).
#[inline]
fn encrypt_in_place(aes: &Aes128, buf: &mut [u8]) {
    let (blocks, _) = InOutBuf::from(buf).into_chunks::<U16>();
    aes.encrypt_blocks_inout(blocks);
}

#[inline(always)]
fn load16(b: &[u8]) -> u128 {
    u128::from_le_bytes(b.try_into().expect("16 bytes"))
}

/// out_i ← TCCR(x_i ⊕ xor, tweak0 + i) for the rows of x (n × 16 bytes, u128 little-endian), LANES at a time:
/// π(x) into a scratch buffer, then π(π(x) ⊕ j) in place in `out`, then ⊕ π(x).
fn tccr_to(aes: &Prp, x: &[u8], xor: u128, out: &mut [u8], tweak0: u64) {
    assert_eq!(x.len(), out.len());
    #[cfg(target_arch = "x86_64")]
    if aes.kind == Unit::AesNi {
        // SAFETY: `kind` records the CPU features detected in `Prp::new`.
        unsafe { x86::tccr_aesni(&aes.rk, x, xor, out, tweak0) };
        return;
    }
    let mut px = [0u8; 16 * LANES];
    for (c, (xc, oc)) in x.chunks(16 * LANES).zip(out.chunks_mut(16 * LANES)).enumerate() {
        let p = &mut px[..xc.len()];
        for (d, s) in p.chunks_exact_mut(16).zip(xc.chunks_exact(16)) {
            d.copy_from_slice(&(load16(s) ^ xor).to_le_bytes());
        }
        aes.encrypt(p);
        let tw = tweak0.wrapping_add((c * LANES) as u64);
        for (i, (d, s)) in oc.chunks_exact_mut(16).zip(p.chunks_exact(16)).enumerate() {
            d.copy_from_slice(&(load16(s) ^ u128::from(tw.wrapping_add(i as u64))).to_le_bytes());
        }
        aes.encrypt(oc);
        for (d, s) in oc.chunks_exact_mut(16).zip(p.chunks_exact(16)) {
            d.copy_from_slice(&(load16(d) ^ load16(s)).to_le_bytes());
        }
    }
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
    keys: Vec<Prp>,
    pos: u64,
}

impl Streams {
    pub fn new(seeds: &[u8]) -> Result<Streams, String> {
        if seeds.len() != 16 * KAPPA {
            return Err(format!("IKNP: expected {KAPPA} seeds of 16 bytes"));
        }
        let keys = seeds
            .chunks(16)
            .map(|k| Prp::new(k.try_into().expect("16 bytes")))
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

    /// Bytes off.. of stream i past the current position (without advancing it) into `row`.
    fn fill(&self, i: usize, off: usize, row: &mut [u8]) {
        ctr_fill(&self.keys[i], self.pos + off as u64, row);
    }
}

/// Bytes pos.. of AES-CTR(key) with the all-zero initial counter block (a 128-bit big-endian counter): the
/// counter blocks are written straight into `row` and encrypted in place, LANES at a time; an unaligned head
/// and a partial tail go through one block each.
fn ctr_fill(aes: &Prp, pos: u64, row: &mut [u8]) {
    let mut ctr = u128::from(pos / 16);
    let skip = (pos % 16) as usize;
    let mut row = row;
    if skip != 0 && !row.is_empty() {
        let mut b = ctr.to_be_bytes();
        aes.encrypt(&mut b);
        let n = (16 - skip).min(row.len());
        row[..n].copy_from_slice(&b[skip..skip + n]);
        row = &mut row[n..];
        ctr = ctr.wrapping_add(1);
    }
    let whole = row.len() / 16 * 16;
    let (body, tail) = row.split_at_mut(whole);
    #[cfg(target_arch = "x86_64")]
    if aes.kind == Unit::AesNi {
        // SAFETY: `kind` records the CPU features detected in `Prp::new`.
        unsafe { x86::ctr_aesni(&aes.rk, ctr, body) };
        ctr = ctr.wrapping_add((body.len() / 16) as u128);
    }
    #[cfg(target_arch = "x86_64")]
    let body = if aes.kind == Unit::AesNi { &mut [][..] } else { body };
    for chunk in body.chunks_mut(16 * LANES) {
        for b in chunk.chunks_exact_mut(16) {
            b.copy_from_slice(&ctr.to_be_bytes());
            ctr = ctr.wrapping_add(1);
        }
        aes.encrypt(chunk);
    }
    if !tail.is_empty() {
        let mut b = ctr.to_be_bytes();
        aes.encrypt(&mut b);
        tail.copy_from_slice(&b[..tail.len()]);
    }
}

/// One masked swap round of the 64 × 64 transpose: rows r and r + J (r with bit J clear) exchange their
/// J-bit groups selected by `mask`.
#[inline(always)]
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
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
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
fn transpose64(w: &mut [u64; 64]) {
    swap_round::<32>(w, 0x0000_0000_FFFF_FFFF);
    swap_round::<16>(w, 0x0000_FFFF_0000_FFFF);
    swap_round::<8>(w, 0x00FF_00FF_00FF_00FF);
    swap_round::<4>(w, 0x0F0F_0F0F_0F0F_0F0F);
    swap_round::<2>(w, 0x3333_3333_3333_3333);
    swap_round::<1>(w, 0x5555_5555_5555_5555);
}

/// The portable transpose of a tile (see `transpose_tile`): 64 × 64 blocks.
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
fn transpose_tile_scalar(tile: &[u8], out: &mut [u8], groups: usize) {
    let mut w = [0u64; 64];
    for c in 0..(2 * groups).min(TB / 8) {
        for g in 0..KAPPA / 64 {
            for (r, x) in w.iter_mut().enumerate() {
                let off = (64 * g + r) * TB + 8 * c;
                *x = u64::from_le_bytes(tile[off..off + 8].try_into().expect("8 bytes"));
            }
            transpose64(&mut w);
            for (k, x) in w.iter().enumerate() {
                let j = 64 * c + k;
                out[16 * j + 8 * g..16 * j + 8 * g + 8].copy_from_slice(&x.to_le_bytes());
            }
        }
    }
}

/// The SSE2 transpose (emp-toolkit's `sse_trans` idea): per 16 rows × 16 bytes, a 16 × 16 byte transpose by
/// four rounds of unpacks, then `movemask` picks bit 7 of every byte (8 columns × 16 rows), shifting left
/// between the 8 bits of a byte.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn transpose_tile_sse2(tile: &[u8], out: &mut [u8], groups: usize) {
    use std::arch::x86_64::*;
    assert!(tile.len() >= KAPPA * TB && out.len() >= 16 * 8 * 16 * groups && 16 * groups <= TB);
    for cg in 0..groups {
        for g in 0..KAPPA / 16 {
            let mut x = [_mm_setzero_si128(); 16];
            for (k, v) in x.iter_mut().enumerate() {
                let src = &tile[(16 * g + k) * TB + 16 * cg..][..16];
                // SAFETY: `src` is 16 readable bytes (bounds-checked slice); loadu needs no alignment.
                *v = unsafe { _mm_loadu_si128(src.as_ptr().cast()) };
            }
            // After round s, register bit s holds column bit 3 − s (lo: 0, hi: 1) where it held row bit s,
            // and byte position bit s holds row bit s: register rev4(c) ends with byte k = row k, column c.
            for i in (0..16).filter(|i| i & 1 == 0) {
                let (a, b) = (x[i], x[i | 1]);
                (x[i], x[i | 1]) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
            }
            for i in (0..16).filter(|i| i & 2 == 0) {
                let (a, b) = (x[i], x[i | 2]);
                (x[i], x[i | 2]) = (_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b));
            }
            for i in (0..16).filter(|i| i & 4 == 0) {
                let (a, b) = (x[i], x[i | 4]);
                (x[i], x[i | 4]) = (_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b));
            }
            for i in (0..16).filter(|i| i & 8 == 0) {
                let (a, b) = (x[i], x[i | 8]);
                (x[i], x[i | 8]) = (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b));
            }
            for c in 0..16 {
                let rev = ((c & 1) << 3) | ((c & 2) << 1) | ((c & 4) >> 1) | ((c & 8) >> 3);
                let mut v = x[rev];
                for b in (0..8).rev() {
                    let mask = _mm_movemask_epi8(v) as u16;
                    let j = 128 * cg + 8 * c + b;
                    out[16 * j + 2 * g..16 * j + 2 * g + 2].copy_from_slice(&mask.to_le_bytes());
                    v = _mm_slli_epi64::<1>(v);
                }
            }
        }
    }
}

/// The AVX2 transpose: as `transpose_tile_sse2` with rows 32g + k in the low and 32g + 16 + k in the high
/// 128-bit lane (the unpacks work per lane), so that one `movemask` gives 32 rows of a column: half the
/// movemasks, shifts and stores.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn transpose_tile_avx2(tile: &[u8], out: &mut [u8], groups: usize) {
    use std::arch::x86_64::*;
    assert!(tile.len() >= KAPPA * TB && out.len() >= 16 * 8 * 16 * groups && 16 * groups <= TB);
    for cg in 0..groups {
        for g in 0..KAPPA / 32 {
            let mut x = [_mm256_setzero_si256(); 16];
            for (k, v) in x.iter_mut().enumerate() {
                let lo = &tile[(32 * g + k) * TB + 16 * cg..][..16];
                let hi = &tile[(32 * g + 16 + k) * TB + 16 * cg..][..16];
                // SAFETY: `lo` and `hi` are 16 readable bytes each (bounds-checked slices); no alignment needed.
                *v = unsafe { _mm256_loadu2_m128i(hi.as_ptr().cast(), lo.as_ptr().cast()) };
            }
            // The rounds of `transpose_tile_sse2`, in each lane.
            for i in (0..16).filter(|i| i & 1 == 0) {
                let (a, b) = (x[i], x[i | 1]);
                (x[i], x[i | 1]) = (_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b));
            }
            for i in (0..16).filter(|i| i & 2 == 0) {
                let (a, b) = (x[i], x[i | 2]);
                (x[i], x[i | 2]) = (_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
            }
            for i in (0..16).filter(|i| i & 4 == 0) {
                let (a, b) = (x[i], x[i | 4]);
                (x[i], x[i | 4]) = (_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
            }
            for i in (0..16).filter(|i| i & 8 == 0) {
                let (a, b) = (x[i], x[i | 8]);
                (x[i], x[i | 8]) = (_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
            }
            for c in 0..16 {
                let rev = ((c & 1) << 3) | ((c & 2) << 1) | ((c & 4) >> 1) | ((c & 8) >> 3);
                let mut v = x[rev];
                for b in (0..8).rev() {
                    let mask = _mm256_movemask_epi8(v) as u32;
                    let j = 128 * cg + 8 * c + b;
                    out[16 * j + 4 * g..16 * j + 4 * g + 4].copy_from_slice(&mask.to_le_bytes());
                    v = _mm256_slli_epi64::<1>(v);
                }
            }
        }
    }
}

/// A κ × TB tile (row r at r·TB) → its first 128·groups columns as rows of κ bits (16 bytes each, bit r =
/// row r) in `out`.
fn transpose_tile(tile: &[u8], out: &mut [u8], groups: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 detected just above.
        unsafe { transpose_tile_avx2(tile, out, groups) };
    } else {
        // SAFETY: SSE2 is part of the x86_64 baseline: every x86_64 CPU has it.
        unsafe { transpose_tile_sse2(tile, out, groups) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    transpose_tile_scalar(tile, out, groups);
}

/// The per-task scratch of an extension: a κ × TB tile of the matrix, another row, and its transpose.
struct Scratch {
    tile: Vec<u8>,
    row: Vec<u8>,
    cols: Vec<u8>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            tile: vec![0; KAPPA * TB],
            row: vec![0; TB],
            cols: vec![0; 16 * TILE_COLS],
        }
    }
}

/// κ rows of nb bytes (nb a multiple of 8) → the first m of their columns as rows of κ bits (m × 16 bytes).
pub fn transpose(rows: &[u8], nb: usize, m: usize) -> Vec<u8> {
    let mut out = vec![0u8; 16 * m];
    out.par_chunks_mut(16 * TILE_COLS)
        .enumerate()
        .for_each_init(Scratch::new, |s, (t, o)| {
            let (off, n) = (t * TB, o.len() / 16);
            let w = TB.min(nb - off);
            for r in 0..KAPPA {
                s.tile[r * TB..r * TB + w].copy_from_slice(&rows[r * nb + off..r * nb + off + w]);
            }
            transpose_tile(&s.tile, &mut s.cols, n.div_ceil(128));
            o.copy_from_slice(&s.cols[..16 * n]);
        });
    out
}

/// Bytes per row of the IKNP matrix for m OTs: whole 64-bit words.
pub fn row_bytes(m: usize) -> usize {
    m.div_ceil(64) * 8
}

/// The receiver's u, written by the extension tasks: each task writes bytes off..off + w of every row.
struct RowsOut {
    ptr: *mut u8,
    nb: usize,
}

// SAFETY: a RowsOut is only shared between the tasks of one `Receiver::extend`, which write disjoint
// byte ranges (see `row`) of a buffer that outlives them and is not otherwise accessed meanwhile.
unsafe impl Sync for RowsOut {}

impl RowsOut {
    /// Bytes off..off + w of row r.
    ///
    /// # Safety
    /// r < κ, off + w ≤ nb, and no other live slice overlaps these bytes (each task owns its own off range).
    #[allow(clippy::mut_from_ref)]
    unsafe fn row(&self, r: usize, off: usize, w: usize) -> &mut [u8] {
        // SAFETY: in bounds of the κ × nb buffer and exclusive, by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r * self.nb + off), w) }
    }
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
    /// q_i = G(k_i^{Δ_i}) ⊕ Δ_i·u_i transposed; tweaks counter + j. Per task of TILE_COLS OTs: the κ × TB
    /// tile of q generated in place, transposed, hashed straight into the outputs.
    pub fn extend(&mut self, u: &[u8], m: usize, counter: u64) -> Result<(Vec<u8>, Vec<u8>), String> {
        let (mut h0, mut h1) = (vec![0u8; 16 * m], vec![0u8; 16 * m]);
        self.extend_into(u, m, counter, &mut h0, &mut h1)?;
        Ok((h0, h1))
    }

    /// `extend` into caller-provided outputs of m × 16 bytes each (the Python wrapper passes numpy's
    /// buffers, which numpy backs with huge pages: the page faults of fresh 16·m-byte vectors cost about as
    /// much as the extension itself at m = 2^22).
    pub fn extend_into(
        &mut self,
        u: &[u8],
        m: usize,
        counter: u64,
        h0: &mut [u8],
        h1: &mut [u8],
    ) -> Result<(), String> {
        let nb = row_bytes(m);
        if u.len() != KAPPA * nb {
            return Err(format!("IKNP: u must be {KAPPA} × {nb} bytes"));
        }
        if h0.len() != 16 * m || h1.len() != 16 * m {
            return Err(format!("IKNP: the outputs must be {m} × 16 bytes"));
        }
        let aes = Prp::new(&TCCR_KEY);
        let (delta, d128) = (self.delta, u128::from_le_bytes(self.delta));
        let streams = &self.streams;
        h0.par_chunks_mut(16 * TILE_COLS)
            .zip(h1.par_chunks_mut(16 * TILE_COLS))
            .enumerate()
            .for_each_init(Scratch::new, |s, (t, (o0, o1))| {
                let (off, n) = (t * TB, o0.len() / 16);
                let w = TB.min(nb - off);
                for r in 0..KAPPA {
                    let q = &mut s.tile[r * TB..r * TB + w];
                    streams.fill(r, off, q);
                    if delta[r / 8] >> (r % 8) & 1 == 1 {
                        q.iter_mut().zip(&u[r * nb + off..]).for_each(|(a, b)| *a ^= b);
                    }
                }
                transpose_tile(&s.tile, &mut s.cols, n.div_ceil(128));
                let tweak = counter.wrapping_add((t * TILE_COLS) as u64);
                tccr_to(&aes, &s.cols[..16 * n], 0, o0, tweak);
                tccr_to(&aes, &s.cols[..16 * n], d128, o1, tweak);
            });
        self.streams.pos += nb as u64;
        Ok(())
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
    /// Per task of TILE_COLS OTs: the κ × TB tile of t = G(k^0) generated in place, its bytes of u written, t
    /// transposed and hashed straight into the output.
    pub fn extend(&mut self, choices: &[u8], counter: u64) -> (Vec<u8>, Vec<u8>) {
        let m = choices.len();
        let (mut u, mut kr) = (vec![0u8; KAPPA * row_bytes(m)], vec![0u8; 16 * m]);
        self.extend_into(choices, counter, &mut u, &mut kr)
            .expect("outputs sized for the choices");
        (u, kr)
    }

    /// `extend` into caller-provided outputs: u of κ × row_bytes(m) bytes, kr of m × 16 (see
    /// `Sender::extend_into`).
    pub fn extend_into(&mut self, choices: &[u8], counter: u64, u: &mut [u8], kr: &mut [u8]) -> Result<(), String> {
        let m = choices.len();
        let nb = row_bytes(m);
        if u.len() != KAPPA * nb || kr.len() != 16 * m {
            return Err(format!("IKNP: the outputs must be {KAPPA} × {nb} and {m} × 16 bytes"));
        }
        let aes = Prp::new(&TCCR_KEY);
        let (s0, s1) = (&self.s0, &self.s1);
        let uo = RowsOut {
            ptr: u.as_mut_ptr(),
            nb,
        };
        kr.par_chunks_mut(16 * TILE_COLS)
            .enumerate()
            .for_each_init(Scratch::new, |s, (t, o)| {
                let (off, n) = (t * TB, o.len() / 16);
                let w = TB.min(nb - off);
                let mut packed = [0u8; TB];
                for (p, c) in packed.iter_mut().zip(choices[8 * off..].chunks(8)) {
                    *p = c.iter().enumerate().fold(0, |b, (k, &r)| b | u8::from(r != 0) << k);
                }
                for r in 0..KAPPA {
                    let ti = &mut s.tile[r * TB..r * TB + w];
                    s0.fill(r, off, ti);
                    let g1 = &mut s.row[..w];
                    s1.fill(r, off, g1);
                    // SAFETY: r < κ and off + w ≤ nb; task t alone owns bytes t·TB..t·TB + w of every row,
                    // and `u` is not touched elsewhere until the parallel loop ends.
                    let ui = unsafe { uo.row(r, off, w) };
                    let (ti, g1, pk) = (&ti[..w], &g1[..w], &packed[..w]);
                    for k in 0..w {
                        ui[k] = ti[k] ^ g1[k] ^ pk[k];
                    }
                }
                transpose_tile(&s.tile, &mut s.cols, n.div_ceil(128));
                tccr_to(
                    &aes,
                    &s.cols[..16 * n],
                    0,
                    o,
                    counter.wrapping_add((t * TILE_COLS) as u64),
                );
            });
        self.s0.pos += nb as u64;
        self.s1.pos += nb as u64;
        Ok(())
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

/// A fresh C-contiguous array's data, writable.
fn slice_mut<'a>(a: &'a mut numpy::PyReadwriteArray2<'_, u8>) -> PyResult<&'a mut [u8]> {
    a.as_slice_mut()
        .map_err(|_| err("expected a C-contiguous array".to_string()))
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
        let (k0, k1) = (
            PyArray2::<u8>::zeros(py, [m, 16], false),
            PyArray2::<u8>::zeros(py, [m, 16], false),
        );
        {
            let (mut w0, mut w1) = (k0.readwrite(), k1.readwrite());
            let (h0, h1) = (slice_mut(&mut w0)?, slice_mut(&mut w1)?);
            py.detach(|| pool::install(|| inner.extend_into(u, m, counter, h0, h1)))
                .map_err(err)?;
        }
        Ok((k0, k1))
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
        let (u, kr) = (
            PyArray2::<u8>::zeros(py, [KAPPA, nb], false),
            PyArray2::<u8>::zeros(py, [r.len(), 16], false),
        );
        {
            let (mut wu, mut wk) = (u.readwrite(), kr.readwrite());
            let (us, ks) = (slice_mut(&mut wu)?, slice_mut(&mut wk)?);
            py.detach(|| pool::install(|| inner.extend_into(r, counter, us, ks)))
                .map_err(err)?;
        }
        Ok((u, kr))
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
    fn prp_units_match_the_aes_crate() {
        let key: [u8; 16] = core::array::from_fn(|i| (i * 29 + 3) as u8);
        let data: Vec<u8> = (0..16 * 77 + 5).map(|i| (i * 131 % 256) as u8).collect();
        let mut want = data.clone();
        encrypt_in_place(&Aes128::new(GenericArray::from_slice(&key)), &mut want);
        let prp = Prp::new(&key);
        let mut got = data.clone();
        prp.encrypt(&mut got);
        assert_eq!(got, want);
        #[cfg(target_arch = "x86_64")]
        for kind in [Unit::AesNi, Unit::Soft] {
            if kind == Unit::AesNi && !std::arch::is_x86_feature_detected!("aes") {
                continue;
            }
            let mut got = data.clone();
            prp.clone().with_unit(kind).encrypt(&mut got);
            assert_eq!(got, want, "{kind:?}");
        }
    }

    #[test]
    fn tccr_kernel_matches_the_portable_tccr() {
        let x: Vec<u8> = (0..16 * 77).map(|i| (i * 131 % 256) as u8).collect();
        let d = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        let want: Vec<u8> = x
            .chunks(16)
            .enumerate()
            .flat_map(|(i, r)| {
                let mut q = [u128::from_le_bytes(r.try_into().unwrap()) ^ d];
                tccr_rows(&tccr_cipher(), &mut q, |_| (u64::MAX - 3).wrapping_add(i as u64));
                q[0].to_le_bytes()
            })
            .collect();
        let prp = Prp::new(&TCCR_KEY);
        let mut got = vec![0u8; x.len()];
        tccr_to(&prp, &x, d, &mut got, u64::MAX - 3);
        assert_eq!(got, want);
        #[cfg(target_arch = "x86_64")]
        {
            let mut got = vec![0u8; x.len()];
            tccr_to(&prp.with_unit(Unit::Soft), &x, d, &mut got, u64::MAX - 3);
            assert_eq!(got, want);
        }
    }

    #[test]
    fn ctr_kernel_matches_the_portable_ctr() {
        let key: [u8; 16] = core::array::from_fn(|i| (i * 17 + 9) as u8);
        let prp = Prp::new(&key);
        for (pos, len) in [(0u64, 0usize), (8, 200), (0, 16 * 19), (u64::MAX - 100, 77)] {
            let mut want = vec![0u8; len];
            for (k, b) in want.iter_mut().enumerate() {
                let i = pos % 16 + k as u64;
                let mut blk = (u128::from(pos / 16) + u128::from(i / 16)).to_be_bytes();
                encrypt_in_place(&Aes128::new(GenericArray::from_slice(&key)), &mut blk);
                *b = blk[(i % 16) as usize];
            }
            let mut got = vec![0u8; len];
            ctr_fill(&prp, pos, &mut got);
            assert_eq!(got, want, "pos {pos} len {len}");
            #[cfg(target_arch = "x86_64")]
            {
                let mut got = vec![0u8; len];
                ctr_fill(&prp.clone().with_unit(Unit::Soft), pos, &mut got);
                assert_eq!(got, want, "soft, pos {pos} len {len}");
            }
        }
    }

    #[test]
    fn simd_and_scalar_transposes_agree() {
        let tile: Vec<u8> = (0..KAPPA * TB).map(|i| (i * 131 % 251) as u8).collect();
        let (mut a, mut b) = (vec![0u8; 16 * TILE_COLS], vec![0u8; 16 * TILE_COLS]);
        transpose_tile_scalar(&tile, &mut b, TB / 16);
        transpose_tile(&tile, &mut a, TB / 16);
        assert_eq!(a, b);
        #[cfg(target_arch = "x86_64")]
        {
            a.fill(0);
            // SAFETY: SSE2 is part of the x86_64 baseline.
            unsafe { transpose_tile_sse2(&tile, &mut a, TB / 16) };
            assert_eq!(a, b);
        }
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
