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

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::bfv::pool;
use crate::prp::{Prp, TCCR_KEY, ctr_fill, tccr_to, tccr_with};
use crate::softspoken::{delta_chunk, ggm_punctured, ggm_send, subset_sums, xor_into};

/// The security parameter κ: base OTs, rows of the IKNP matrix, bits per random-OT key.
pub const KAPPA: usize = 128;

/// Rows per rayon task of `tccr`.
const CHUNK: usize = 4096;

/// Bytes of every row of the IKNP matrix per extension task: 8·TB columns (OTs), a κ × TB tile (16 KiB).
const TB: usize = 256;

/// Columns (OTs) per extension task.
const TILE_COLS: usize = 8 * TB;

/// Bytes between the rows of a tile: TB and two AES blocks of slack, so that a row's key stream is written as
/// whole counter blocks from the block holding its first byte (`Streams::blocks`) instead of copied into place.
const STRIDE: usize = TB + 32;

pub fn read_row(data: &[u8], i: usize) -> u128 {
    u128::from_le_bytes(data[16 * i..16 * i + 16].try_into().expect("16 bytes"))
}

/// TCCR over n rows of 16 bytes with tweaks[i], in parallel.
pub fn tccr(x: &[u8], tweaks: &[u64]) -> Vec<u8> {
    let aes = Prp::new(&TCCR_KEY);
    let mut out = vec![0u8; x.len()];
    out.par_chunks_mut(16 * CHUNK)
        .zip(x.par_chunks(16 * CHUNK))
        .zip(tweaks.par_chunks(CHUNK))
        .for_each(|((o, xs), tw)| tccr_with(&aes, xs, 0, o, |i| tw[i]));
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
        Ok(Streams::of(seeds))
    }

    /// One stream per 16-byte seed (SoftSpokenOT: (κ/k)·2^k of them).
    pub fn of(seeds: &[u8]) -> Streams {
        let keys = seeds
            .chunks(16)
            .map(|k| Prp::new(k.try_into().expect("16 bytes")))
            .collect();
        Streams { keys, pos: 0 }
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

    /// Bytes off..off + len of stream i (as `fill`) as whole counter blocks at the start of `buf`: they begin
    /// at the returned skip (< 16), the same for every stream.
    fn blocks(&self, i: usize, off: usize, len: usize, buf: &mut [u8]) -> usize {
        let at = self.pos + off as u64;
        let skip = (at % 16) as usize;
        let whole = (skip + len).div_ceil(16) * 16;
        ctr_fill(&self.keys[i], at - skip as u64, &mut buf[..whole]);
        skip
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
fn transpose_tile_scalar(tile: &[u8], stride: usize, out: &mut [u8], groups: usize) {
    let mut w = [0u64; 64];
    for c in 0..(2 * groups).min(TB / 8) {
        for g in 0..KAPPA / 64 {
            for (r, x) in w.iter_mut().enumerate() {
                let off = (64 * g + r) * stride + 8 * c;
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
fn transpose_tile_sse2(tile: &[u8], stride: usize, out: &mut [u8], groups: usize) {
    use std::arch::x86_64::*;
    assert!(16 * groups <= TB && tile.len() >= (KAPPA - 1) * stride + 16 * groups && out.len() >= 16 * 128 * groups);
    for cg in 0..groups {
        for g in 0..KAPPA / 16 {
            let mut x = [_mm_setzero_si128(); 16];
            for (k, v) in x.iter_mut().enumerate() {
                let src = &tile[(16 * g + k) * stride + 16 * cg..][..16];
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
fn transpose_tile_avx2(tile: &[u8], stride: usize, out: &mut [u8], groups: usize) {
    use std::arch::x86_64::*;
    assert!(16 * groups <= TB && tile.len() >= (KAPPA - 1) * stride + 16 * groups && out.len() >= 16 * 128 * groups);
    for cg in 0..groups {
        for g in 0..KAPPA / 32 {
            let mut x = [_mm256_setzero_si256(); 16];
            for (k, v) in x.iter_mut().enumerate() {
                let lo = &tile[(32 * g + k) * stride + 16 * cg..][..16];
                let hi = &tile[(32 * g + 16 + k) * stride + 16 * cg..][..16];
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

/// The four unpack rounds of `transpose_tile_sse2` on 16 registers, in each 128-bit lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn unpack_rounds_512(x: &mut [std::arch::x86_64::__m512i; 16]) {
    use std::arch::x86_64::*;
    for i in (0..16).filter(|i| i & 1 == 0) {
        let (a, b) = (x[i], x[i | 1]);
        (x[i], x[i | 1]) = (_mm512_unpacklo_epi8(a, b), _mm512_unpackhi_epi8(a, b));
    }
    for i in (0..16).filter(|i| i & 2 == 0) {
        let (a, b) = (x[i], x[i | 2]);
        (x[i], x[i | 2]) = (_mm512_unpacklo_epi16(a, b), _mm512_unpackhi_epi16(a, b));
    }
    for i in (0..16).filter(|i| i & 4 == 0) {
        let (a, b) = (x[i], x[i | 4]);
        (x[i], x[i | 4]) = (_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    }
    for i in (0..16).filter(|i| i & 8 == 0) {
        let (a, b) = (x[i], x[i | 8]);
        (x[i], x[i | 8]) = (_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    }
}

/// The AVX-512 transpose: as `transpose_tile_avx2` with four 128-bit lanes, rows 64g + 16q + k in lane q, so
/// that one `vpmovb2m` gives 64 rows of a column: again half the unpacks, masks, shifts and stores.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn transpose_tile_avx512(tile: &[u8], stride: usize, out: &mut [u8], groups: usize) {
    use std::arch::x86_64::*;
    assert!(16 * groups <= TB && tile.len() >= (KAPPA - 1) * stride + 16 * groups && out.len() >= 16 * 128 * groups);
    for cg in 0..groups {
        for g in 0..KAPPA / 64 {
            let mut x = [_mm512_setzero_si512(); 16];
            for (k, v) in x.iter_mut().enumerate() {
                let [a, b, c, d] = [0, 1, 2, 3].map(|q| {
                    let src = &tile[(64 * g + 16 * q + k) * stride + 16 * cg..][..16];
                    // SAFETY: `src` is 16 readable bytes (bounds-checked slice); loadu needs no alignment.
                    unsafe { _mm_loadu_si128(src.as_ptr().cast()) }
                });
                let lo = _mm512_inserti32x4::<1>(_mm512_castsi128_si512(a), b);
                *v = _mm512_inserti32x4::<3>(_mm512_inserti32x4::<2>(lo, c), d);
            }
            unpack_rounds_512(&mut x);
            for c in 0..16 {
                let rev = ((c & 1) << 3) | ((c & 2) << 1) | ((c & 4) >> 1) | ((c & 8) >> 3);
                let mut v = x[rev];
                for b in (0..8).rev() {
                    let mask = _mm512_movepi8_mask(v);
                    let j = 128 * cg + 8 * c + b;
                    out[16 * j + 8 * g..16 * j + 8 * g + 8].copy_from_slice(&mask.to_le_bytes());
                    v = _mm512_slli_epi64::<1>(v);
                }
            }
        }
    }
}

/// The GFNI transpose: the byte transpose of `transpose_tile_avx512` (rows loaded so that each 8-byte word holds
/// its 8 rows in reverse order), then per 8-byte word one `gf2p8affineqb` with the word as the matrix: byte b of
/// the result holds bit b of the 8 rows (the instruction reads matrix row 7 − i for result bit i, hence the
/// reversed load). A byte permutation then gathers the 8 words' byte b, and the two 64-row halves are interleaved
/// into 128 contiguous output bytes: no per-bit masks or shifts.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
fn transpose_tile_gfni(tile: &[u8], stride: usize, out: &mut [u8], groups: usize) {
    use std::arch::x86_64::*;
    assert!(16 * groups <= TB && tile.len() >= (KAPPA - 1) * stride + 16 * groups && out.len() >= 16 * 128 * groups);
    // result byte b of a word = matrix row bits b: x's byte b is 1 << b
    let unit = _mm512_set1_epi64(0x8040_2010_0804_0201_u64 as i64);
    // byte 8b + i ← byte 8i + b: the 8 × 8 byte transpose inside each 64-byte register
    let swap = _mm512_set_epi8(
        63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 60, 52, 44, 36,
        28, 20, 12, 4, 59, 51, 43, 35, 27, 19, 11, 3, 58, 50, 42, 34, 26, 18, 10, 2, 57, 49, 41, 33, 25, 17, 9, 1, 56,
        48, 40, 32, 24, 16, 8, 0,
    );
    let (lo, hi) = (
        _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0),
        _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4),
    );
    for cg in 0..groups {
        let mut half = [[_mm512_setzero_si512(); 16]; 2];
        for (g, h) in half.iter_mut().enumerate() {
            let mut x = [_mm512_setzero_si512(); 16];
            let base = tile[(64 * g) * stride + 16 * cg..].as_ptr();
            for (k, v) in x.iter_mut().enumerate() {
                let r = (k & 8) | (7 - (k & 7)); // byte k of a lane is row r: each word's rows reversed
                // SAFETY: rows 64g + 16q + r < κ hold 16 bytes at 16cg (asserted above: tile is long enough for
                // row κ − 1 at 16·groups); loadu needs no alignment.
                *v = unsafe {
                    let at = |q: usize| base.add((16 * q + r) * stride).cast::<__m128i>();
                    let ab =
                        _mm512_inserti32x4::<1>(_mm512_castsi128_si512(_mm_loadu_si128(at(0))), _mm_loadu_si128(at(1)));
                    _mm512_inserti32x4::<3>(
                        _mm512_inserti32x4::<2>(ab, _mm_loadu_si128(at(2))),
                        _mm_loadu_si128(at(3)),
                    )
                };
            }
            unpack_rounds_512(&mut x);
            // column byte c: word i = rows 64g + 8i + 7 … + 0; after the affine step word i, byte b = bit 8c + b
            // of rows 64g + 8i … + 7, i.e. byte 8g + i of output row 8c + b; `swap` makes word b of it
            for (c, o) in h.iter_mut().enumerate() {
                let rev = ((c & 1) << 3) | ((c & 2) << 1) | ((c & 4) >> 1) | ((c & 8) >> 3);
                let t = _mm512_gf2p8affine_epi64_epi8::<0>(unit, x[rev]);
                *o = _mm512_permutexvar_epi8(swap, t);
            }
        }
        for (c, (&a, &b)) in half[0].iter().zip(&half[1]).enumerate() {
            // output rows 128cg + 8c + b, b < 8: 128 bytes, word 2b + g = half g's word b
            let at = 16 * (128 * cg + 8 * c);
            let dst = &mut out[at..at + 128];
            // SAFETY: `dst` is 128 writable bytes (bounds-checked slice); storeu needs no alignment.
            unsafe {
                _mm512_storeu_si512(dst.as_mut_ptr().cast(), _mm512_permutex2var_epi64(a, lo, b));
                _mm512_storeu_si512(dst.as_mut_ptr().add(64).cast(), _mm512_permutex2var_epi64(a, hi, b));
            }
        }
    }
}

/// A κ × TB tile (row r at r·stride) → its first 128·groups columns as rows of κ bits (16 bytes each, bit r =
/// row r) in `out`.
fn transpose_tile(tile: &[u8], stride: usize, out: &mut [u8], groups: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("gfni") && std::arch::is_x86_feature_detected!("avx512vbmi") {
        // SAFETY: GFNI and AVX-512 VBMI (hence F and BW) detected just above.
        unsafe { transpose_tile_gfni(tile, stride, out, groups) };
    } else if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: AVX-512 BW (hence F) detected just above.
        unsafe { transpose_tile_avx512(tile, stride, out, groups) };
    } else if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 detected just above.
        unsafe { transpose_tile_avx2(tile, stride, out, groups) };
    } else {
        // SAFETY: SSE2 is part of the x86_64 baseline: every x86_64 CPU has it.
        unsafe { transpose_tile_sse2(tile, stride, out, groups) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    transpose_tile_scalar(tile, stride, out, groups);
}

/// The per-task scratch of an extension: a κ × TB tile of the matrix (rows STRIDE bytes apart), another row,
/// its transpose and the task's hashed keys.
struct Scratch {
    tile: Vec<u8>,
    row: Vec<u8>,
    cols: Vec<u8>,
    h0: Vec<u8>,
    h1: Vec<u8>,
    /// SoftSpokenOT: an instance's 2^k stream rows (allocated on first use)
    soft: Vec<u8>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            tile: vec![0; KAPPA * STRIDE],
            row: vec![0; STRIDE],
            cols: vec![0; 16 * TILE_COLS],
            h0: vec![0; 16 * TILE_COLS],
            h1: vec![0; 16 * TILE_COLS],
            soft: Vec::new(),
        }
    }
}

/// OTs per extension task when every task must hold whole groups of `group` OTs starting on a byte: the
/// largest multiple of 8·group that fits a tile.
fn task_cols(group: usize) -> Result<usize, String> {
    if group == 0 || 8 * group > TILE_COLS {
        return Err(format!("IKNP: groups of 1..={} OTs", TILE_COLS / 8));
    }
    Ok(TILE_COLS / (8 * group) * 8 * group)
}

/// A buffer that the tasks of one parallel loop write at disjoint byte ranges.
pub struct Shared {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a Shared is only used inside one parallel loop whose tasks write disjoint byte ranges (see `slice`)
// of a buffer that outlives the loop and is not otherwise accessed meanwhile.
unsafe impl Sync for Shared {}

impl Shared {
    pub fn new(buf: &mut [u8]) -> Shared {
        Shared {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    /// Bytes off..off + n.
    ///
    /// # Safety
    /// No other live slice overlaps these bytes (each task owns its own range).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice(&self, off: usize, n: usize) -> &mut [u8] {
        assert!(off + n <= self.len, "Shared: bytes {off}..{} of {}", off + n, self.len);
        // SAFETY: in bounds (asserted) and exclusive, by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), n) }
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
                s.tile[r * STRIDE..r * STRIDE + w].copy_from_slice(&rows[r * nb + off..r * nb + off + w]);
            }
            transpose_tile(&s.tile, STRIDE, &mut s.cols, n.div_ceil(128));
            o.copy_from_slice(&s.cols[..16 * n]);
        });
    out
}

/// Choices (nonzero = 1) as bits, LSB first, ⌈m/8⌉ bytes.
pub fn pack_bits(choices: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; choices.len().div_ceil(8)];
    let whole = choices.len() / 8;
    for (o, c) in out[..whole].iter_mut().zip(choices.chunks_exact(8)) {
        // each byte's bit 0 (after r != 0 → 0/1) gathered into one byte: byte k's bit lands at bit 56 + k
        let v = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        let ones = ((v | (v >> 1) | (v >> 2) | (v >> 3) | (v >> 4) | (v >> 5) | (v >> 6) | (v >> 7))
            & 0x0101_0101_0101_0101)
            .wrapping_mul(0x0102_0408_1020_4080);
        *o = (ones >> 56) as u8;
    }
    if whole < out.len() {
        out[whole] = choices[8 * whole..]
            .iter()
            .enumerate()
            .fold(0, |b, (k, &r)| b | u8::from(r != 0) << k);
    }
    out
}

/// Bytes per row of the IKNP matrix for m OTs: whole 64-bit words.
pub fn row_bytes(m: usize) -> usize {
    m.div_ceil(64) * 8
}

/// The first `width` bytes of every 16-byte key into `out` (copies of a fixed size for the widths in use: LLVM
/// turns a byte loop of variable length into a call to memmove per key, which costs more than the key).
fn prefixes(keys: &[u8], width: usize, out: &mut [u8]) {
    fn fixed<const W: usize>(keys: &[u8], out: &mut [u8]) {
        for (d, k) in out.chunks_exact_mut(W).zip(keys.chunks_exact(16)) {
            d.copy_from_slice(&k[..W]);
        }
    }
    match width {
        16 => out.copy_from_slice(keys),
        1 => fixed::<1>(keys, out),
        4 => fixed::<4>(keys, out),
        8 => fixed::<8>(keys, out),
        _ => {
            for (d, k) in out.chunks_exact_mut(width).zip(keys.chunks_exact(16)) {
                d.copy_from_slice(&k[..width]);
            }
        }
    }
}

/// Rows of u that the sender prefetches ahead: its task reads κ short runs, one per row, too far apart for the
/// hardware prefetcher.
const AHEAD: usize = 8;

/// A hint to bring bytes at..at + len of `data` into the cache (nothing past its end).
#[inline(always)]
fn prefetch(data: &[u8], at: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for i in (at..(at + len).min(data.len())).step_by(64) {
        // SAFETY: i < data.len(); a prefetch never faults and changes no memory.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(data.as_ptr().add(i).cast()) };
    }
}

/// SoftSpokenOT's sender rows of one task (`softspoken`): per instance i the 2^k − 1 streams it knows, row y =
/// r_{y ⊕ Δ_i} (row 0, the punctured leaf, zero), their subset sums w_{i,b} ⊕ Δ_{i,b}·c_i into tile rows i·k + b
/// (bytes skip..skip + w, skip returned).
#[allow(clippy::too_many_arguments)]
fn soft_sender_tile(
    streams: &Streams,
    delta: &[u8; 16],
    k: usize,
    u: &[u8],
    nb: usize,
    off: usize,
    w: usize,
    s: &mut Scratch,
) -> usize {
    let n = 1usize << k;
    let Scratch { tile, row, soft, .. } = s;
    soft.resize(n * STRIDE, 0);
    let mut skip = 0;
    for i in 0..KAPPA / k {
        let di = delta_chunk(delta, i, k);
        soft[..STRIDE].fill(0);
        for y in 1..n {
            skip = streams.blocks((i << k) + (y ^ di), off, w, &mut soft[y * STRIDE..(y + 1) * STRIDE]);
        }
        let ui = &u[i * nb + off..i * nb + off + w];
        subset_sums(soft, STRIDE, skip, w, k, row, |b, v| {
            let q = &mut tile[(i * k + b) * STRIDE + skip..][..w];
            q.copy_from_slice(v);
            if di >> b & 1 == 1 {
                xor_into(q, ui);
            }
        });
    }
    skip
}

/// The extension sender: Δ and the seeds k_i^{Δ_i} it learnt as base-OT receiver (IKNP), or SoftSpokenOT's
/// punctured leaves.
pub struct Sender {
    delta: [u8; 16],
    streams: Streams,
    /// SoftSpokenOT's k (streams: (κ/k)·2^k leaves, instance-major, leaf Δ_i all-zero and unused); None: IKNP
    soft: Option<usize>,
    /// Output the correlated OTs (q_j, q_j ⊕ Δ) unhashed (Ferret's base COTs) instead of H(j, ·).
    pub raw: bool,
}

impl Sender {
    pub fn new(delta: &[u8], seeds: &[u8]) -> Result<Sender, String> {
        let delta: [u8; 16] = delta.try_into().map_err(|_| "IKNP: Δ must be 16 bytes".to_string())?;
        Ok(Sender {
            delta,
            streams: Streams::new(seeds)?,
            soft: None,
            raw: false,
        })
    }

    /// SoftSpokenOT's sender with width k: Δ and its κ base-OT outputs (message Δ_j of OT j).
    pub fn softspoken(k: usize, delta: &[u8], got: &[u8]) -> Result<Sender, String> {
        let delta: [u8; 16] = delta
            .try_into()
            .map_err(|_| "SoftSpokenOT: Δ must be 16 bytes".to_string())?;
        let leaves = ggm_punctured(k, &delta, got)?;
        Ok(Sender {
            delta,
            streams: Streams::of(&leaves),
            soft: Some(k),
            raw: false,
        })
    }

    /// Rows of the receiver's message u: κ (IKNP) or κ/k (SoftSpokenOT).
    pub fn u_rows(&self) -> usize {
        self.soft.map_or(KAPPA, |k| KAPPA / k)
    }

    /// The receiver's u (κ rows of row_bytes(m)) → (H(j, q_j), H(j, q_j ⊕ Δ)), each m × 16 bytes, with
    /// q_i = G(k_i^{Δ_i}) ⊕ Δ_i·u_i transposed; tweaks counter + j.
    pub fn extend(&mut self, u: &[u8], m: usize, counter: u64) -> Result<(Vec<u8>, Vec<u8>), String> {
        let (mut h0, mut h1) = (vec![0u8; 16 * m], vec![0u8; 16 * m]);
        self.extend_prefix(u, m, counter, 16, &mut h0, &mut h1)?;
        Ok((h0, h1))
    }

    /// `extend` keeping the first `width` bytes of every key (m × width bytes each) in caller-provided
    /// outputs: the triples and B2A use one bit or one word of each key.
    pub fn extend_prefix(
        &mut self,
        u: &[u8],
        m: usize,
        counter: u64,
        width: usize,
        h0: &mut [u8],
        h1: &mut [u8],
    ) -> Result<(), String> {
        if !(1..=16).contains(&width) || h0.len() != width * m || h1.len() != width * m {
            return Err(format!("IKNP: the outputs must be {m} × {width} bytes, width ≤ 16"));
        }
        let (o0, o1) = (Shared::new(h0), Shared::new(h1));
        self.extend_with(u, m, counter, 1, |first, k0, k1| {
            let n = k0.len() / 16;
            // SAFETY: the tasks' OT ranges first..first + n are disjoint.
            let (d0, d1) = unsafe { (o0.slice(width * first, width * n), o1.slice(width * first, width * n)) };
            prefixes(k0, width, d0);
            prefixes(k1, width, d1);
        })
    }

    /// The extension of m OTs in parallel tasks of whole groups of `group` OTs: each task's keys
    /// (H(j, q_j), H(j, q_j ⊕ Δ)), n × 16 bytes each, go to `consume(first OT, keys0, keys1)` instead of
    /// memory. Per task: the κ × n/8 tile of q generated in place, transposed, hashed into the scratch.
    pub fn extend_with<F>(&mut self, u: &[u8], m: usize, counter: u64, group: usize, consume: F) -> Result<(), String>
    where
        F: Fn(usize, &[u8], &[u8]) + Sync,
    {
        let (nb, rows) = (row_bytes(m), self.u_rows());
        if u.len() != rows * nb {
            return Err(format!("OT extension: u must be {rows} × {nb} bytes"));
        }
        let cols = task_cols(group)?;
        let aes = Prp::new(&TCCR_KEY);
        let (delta, d128) = (self.delta, u128::from_le_bytes(self.delta));
        let (streams, soft, raw) = (&self.streams, self.soft, self.raw);
        (0..m.div_ceil(cols))
            .into_par_iter()
            .for_each_init(Scratch::new, |s, t| {
                let (first, off) = (t * cols, t * cols / 8);
                let n = cols.min(m - first);
                let w = n.div_ceil(8);
                let mut skip = 0;
                if let Some(k) = soft {
                    skip = soft_sender_tile(streams, &delta, k, u, nb, off, w, s);
                }
                for r in (0..KAPPA).filter(|_| soft.is_none()) {
                    prefetch(u, (r + AHEAD) * nb + off, w);
                    let row = &mut s.tile[r * STRIDE..(r + 1) * STRIDE];
                    skip = streams.blocks(r, off, w, row);
                    if delta[r / 8] >> (r % 8) & 1 == 1 {
                        let q = &mut row[skip..skip + w];
                        q.iter_mut().zip(&u[r * nb + off..]).for_each(|(a, b)| *a ^= b);
                    }
                }
                transpose_tile(&s.tile[skip..], STRIDE, &mut s.cols, n.div_ceil(128));
                let tweak = counter.wrapping_add(first as u64);
                let (h0, h1) = (&mut s.h0[..16 * n], &mut s.h1[..16 * n]);
                if raw {
                    h0.copy_from_slice(&s.cols[..16 * n]);
                    for (d, q) in h1.chunks_exact_mut(16).zip(h0.chunks_exact(16)) {
                        d.copy_from_slice(&(read_row(q, 0) ^ d128).to_le_bytes());
                    }
                } else {
                    tccr_to(&aes, &s.cols[..16 * n], 0, h0, tweak);
                    tccr_to(&aes, &s.cols[..16 * n], d128, h1, tweak);
                }
                consume(first, h0, h1);
            });
        self.streams.pos += nb as u64;
        Ok(())
    }
}

/// The extension receiver: both seeds of every base OT.
pub struct Receiver {
    s0: Streams,
    s1: Streams,
    /// SoftSpokenOT's k (s0: the (κ/k)·2^k leaves, s1 empty); None: IKNP
    soft: Option<usize>,
    /// Output t_j unhashed (Ferret's base COTs: t_j = q_j ⊕ r_j·Δ) instead of H(j, t_j).
    pub raw: bool,
}

impl Receiver {
    pub fn new(seeds0: &[u8], seeds1: &[u8]) -> Result<Receiver, String> {
        Ok(Receiver {
            s0: Streams::new(seeds0)?,
            s1: Streams::new(seeds1)?,
            soft: None,
            raw: false,
        })
    }

    /// SoftSpokenOT's receiver with width k from κ/k random roots: (the receiver, its base-OT messages 0 and 1,
    /// κ × 16 bytes each, to send as base-OT sender).
    pub fn softspoken(k: usize, roots: &[u8]) -> Result<(Receiver, Vec<u8>, Vec<u8>), String> {
        let (m0, m1, leaves) = ggm_send(k, roots)?;
        let r = Receiver {
            s0: Streams::of(&leaves),
            s1: Streams::of(&[]),
            soft: Some(k),
            raw: false,
        };
        Ok((r, m0, m1))
    }

    /// Rows of the message u: κ (IKNP) or κ/k (SoftSpokenOT).
    pub fn u_rows(&self) -> usize {
        self.soft.map_or(KAPPA, |k| KAPPA / k)
    }

    /// Choice bits r (m, nonzero = 1) → (u = G(k^0) ⊕ G(k^1) ⊕ r, κ rows of row_bytes(m); H(j, t_j), m × 16).
    pub fn extend(&mut self, choices: &[u8], counter: u64) -> (Vec<u8>, Vec<u8>) {
        let m = choices.len();
        let (mut u, mut kr) = (vec![0u8; self.u_rows() * row_bytes(m)], vec![0u8; 16 * m]);
        self.extend_prefix(choices, counter, 16, &mut u, &mut kr)
            .expect("outputs sized for the choices");
        (u, kr)
    }

    /// `extend` into caller-provided outputs, keeping the first `width` bytes of every key: u of
    /// u_rows × row_bytes(m) bytes, kr of m × width.
    pub fn extend_prefix(
        &mut self,
        choices: &[u8],
        counter: u64,
        width: usize,
        u: &mut [u8],
        kr: &mut [u8],
    ) -> Result<(), String> {
        let m = choices.len();
        if !(1..=16).contains(&width) || kr.len() != width * m {
            return Err(format!(
                "IKNP: the keys' output must be {m} × {width} bytes, width ≤ 16"
            ));
        }
        let out = Shared::new(kr);
        self.extend_with(&pack_bits(choices), m, counter, 1, u, |first, k| {
            let n = k.len() / 16;
            // SAFETY: the tasks' OT ranges first..first + n are disjoint.
            let d = unsafe { out.slice(width * first, width * n) };
            prefixes(k, width, d);
        })
    }

    /// The extension on m choices, packed LSB first (`pack_bits`; bits past m zero), in parallel tasks of whole
    /// groups of `group` OTs: u written into `u` (κ × row_bytes(m) bytes), each task's keys H(j, t_j) (n × 16
    /// bytes) to `consume(first OT, keys)`. Per task: the κ × n/8 tile of t = G(k^0) generated in place, its
    /// bytes of u written, t transposed and hashed into the scratch.
    pub fn extend_with<F>(
        &mut self,
        bits: &[u8],
        m: usize,
        counter: u64,
        group: usize,
        u: &mut [u8],
        consume: F,
    ) -> Result<(), String>
    where
        F: Fn(usize, &[u8]) + Sync,
    {
        let (nb, rows) = (row_bytes(m), self.u_rows());
        if u.len() != rows * nb {
            return Err(format!("OT extension: u must be {rows} × {nb} bytes"));
        }
        if bits.len() != m.div_ceil(8) {
            return Err(format!("IKNP: {m} choices are {} packed bytes", m.div_ceil(8)));
        }
        let cols = task_cols(group)?;
        let aes = Prp::new(&TCCR_KEY);
        let (s0, s1, soft, raw) = (&self.s0, &self.s1, self.soft, self.raw);
        let uo = Shared::new(u);
        let tasks = m.div_ceil(cols);
        (0..tasks).into_par_iter().for_each_init(Scratch::new, |s, t| {
            let (first, off) = (t * cols, t * cols / 8);
            let n = cols.min(m - first);
            let w = n.div_ceil(8);
            // the last task also writes u's padding up to whole 64-bit words (no choices: G(k^0) ⊕ G(k^1))
            let wu = if t + 1 == tasks { nb - off } else { w };
            let pk = &bits[off..off + w];
            let (mut pad, mut skip) = ([0u8; 8], 0);
            if let Some(k) = soft {
                let Scratch { tile, row, soft, .. } = &mut *s;
                soft.resize(STRIDE << k, 0);
                for i in 0..KAPPA / k {
                    for x in 0..1usize << k {
                        skip = s0.blocks((i << k) + x, off, w, &mut soft[x * STRIDE..(x + 1) * STRIDE]);
                    }
                    subset_sums(soft, STRIDE, skip, w, k, row, |b, v| {
                        tile[(i * k + b) * STRIDE + skip..][..w].copy_from_slice(v);
                    });
                    // SAFETY: task t alone owns bytes off..off + wu of every row, in bounds of rows × nb.
                    let ui = unsafe { uo.slice(i * nb + off, wu) };
                    // c_i = u_i ⊕ r; the padding past the last choice byte is zero
                    ui[..w].copy_from_slice(&soft[skip..skip + w]);
                    xor_into(&mut ui[..w], pk);
                    ui[w..].fill(0);
                }
            }
            for r in (0..KAPPA).filter(|_| soft.is_none()) {
                let ti = &mut s.tile[r * STRIDE..(r + 1) * STRIDE];
                skip = s0.blocks(r, off, w, ti);
                s1.blocks(r, off, w, &mut s.row);
                // SAFETY: task t alone owns bytes off..off + wu of every row, in bounds of κ × nb.
                let ui = unsafe { uo.slice(r * nb + off, wu) };
                let (ti, g1) = (&ti[skip..skip + w], &s.row[skip..skip + w]);
                for (((o, a), b), c) in ui.iter_mut().zip(ti).zip(g1).zip(pk) {
                    *o = a ^ b ^ c;
                }
                if wu > w {
                    let (p0, p1) = (&mut pad[..wu - w], &mut [0u8; 8][..wu - w]);
                    s0.fill(r, off + w, p0);
                    s1.fill(r, off + w, p1);
                    for (k, (a, b)) in p0.iter().zip(p1.iter()).enumerate() {
                        ui[w + k] = a ^ b;
                    }
                }
            }
            transpose_tile(&s.tile[skip..], STRIDE, &mut s.cols, n.div_ceil(128));
            let h = &mut s.h0[..16 * n];
            if raw {
                h.copy_from_slice(&s.cols[..16 * n]);
            } else {
                tccr_to(&aes, &s.cols[..16 * n], 0, h, counter.wrapping_add(first as u64));
            }
            consume(first, h);
        });
        self.s0.pos += nb as u64;
        self.s1.pos += nb as u64;
        Ok(())
    }
}

/// A sender and a receiver on fixed seeds and Δ (tests).
#[cfg(test)]
pub(crate) fn pair() -> (Sender, Receiver) {
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
    (
        Sender::new(&delta, &chosen).unwrap(),
        Receiver::new(&seeds0, &seeds1).unwrap(),
    )
}

/// A SoftSpokenOT sender and receiver of width k on fixed roots and Δ, through the base-OT messages (tests).
#[cfg(test)]
pub(crate) fn pair_soft(k: usize) -> (Sender, Receiver) {
    let roots: Vec<u8> = (0..16 * (KAPPA / k)).map(|i| (i * 11 + 3) as u8).collect();
    let delta: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5a);
    let (r, m0, m1) = Receiver::softspoken(k, &roots).unwrap();
    let got: Vec<u8> = (0..KAPPA)
        .flat_map(|i| if delta[i / 8] >> (i % 8) & 1 == 1 { &m1 } else { &m0 }[16 * i..16 * i + 16].to_vec())
        .collect();
    (Sender::softspoken(k, &delta, &got).unwrap(), r)
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
    pub(crate) inner: Sender,
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

    /// SoftSpokenOT's sender (`softspoken`): width k, Δ (16 bytes), its κ base-OT outputs (κ × 16 bytes).
    #[staticmethod]
    fn softspoken(k: usize, delta: &[u8], got: &[u8]) -> PyResult<Self> {
        Ok(PyIknpSender {
            inner: Sender::softspoken(k, delta, got).map_err(err)?,
        })
    }

    /// Rows of the receiver's message u: κ (IKNP) or κ/k (SoftSpokenOT).
    #[getter]
    fn u_rows(&self) -> usize {
        self.inner.u_rows()
    }

    /// From now on `extend` returns the correlated OTs (q_j, q_j ⊕ Δ) unhashed (Ferret's base COTs).
    fn correlated(&mut self) {
        self.inner.raw = true;
    }

    /// u (κ × row_bytes(m), uint8) → (H(j, q_j), H(j, q_j ⊕ Δ)), each (m, width) uint8 (the keys' first
    /// `width` bytes), tweaks counter + j.
    #[pyo3(signature = (u, m, counter, width = 16))]
    #[allow(clippy::type_complexity)]
    fn extend<'py>(
        &mut self,
        py: Python<'py>,
        u: PyReadonlyArrayDyn<'py, u8>,
        m: usize,
        counter: u64,
        width: usize,
    ) -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
        let u = contiguous(&u, "IKNP u")?;
        let inner = &mut self.inner;
        let (k0, k1) = (
            PyArray2::<u8>::zeros(py, [m, width], false),
            PyArray2::<u8>::zeros(py, [m, width], false),
        );
        {
            let (mut w0, mut w1) = (k0.readwrite(), k1.readwrite());
            let (h0, h1) = (slice_mut(&mut w0)?, slice_mut(&mut w1)?);
            py.detach(|| pool::install(|| inner.extend_prefix(u, m, counter, width, h0, h1)))
                .map_err(err)?;
        }
        Ok((k0, k1))
    }
}

#[pyclass(name = "IknpReceiver", module = "privface_native")]
pub struct PyIknpReceiver {
    pub(crate) inner: Receiver,
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

    /// Rows of the message u: κ (IKNP) or κ/k (SoftSpokenOT).
    #[getter]
    fn u_rows(&self) -> usize {
        self.inner.u_rows()
    }

    /// From now on `extend` returns t_j unhashed (t_j = q_j ⊕ r_j·Δ: Ferret's base COTs).
    fn correlated(&mut self) {
        self.inner.raw = true;
    }

    /// Choice bits (m,) uint8 → (u (κ, row_bytes(m)) uint8, H(j, t_j) (m, width) uint8), tweaks counter + j.
    #[pyo3(signature = (choices, counter, width = 16))]
    #[allow(clippy::type_complexity)]
    fn extend<'py>(
        &mut self,
        py: Python<'py>,
        choices: PyReadonlyArrayDyn<'py, u8>,
        counter: u64,
        width: usize,
    ) -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray2<u8>>)> {
        let r = contiguous(&choices, "IKNP choices")?;
        let nb = row_bytes(r.len());
        let inner = &mut self.inner;
        let (u, kr) = (
            PyArray2::<u8>::zeros(py, [inner.u_rows(), nb], false),
            PyArray2::<u8>::zeros(py, [r.len(), width], false),
        );
        {
            let (mut wu, mut wk) = (u.readwrite(), kr.readwrite());
            let (us, ks) = (slice_mut(&mut wu)?, slice_mut(&mut wk)?);
            py.detach(|| pool::install(|| inner.extend_prefix(r, counter, width, us, ks)))
                .map_err(err)?;
        }
        Ok((u, kr))
    }
}

/// SoftSpokenOT's receiver (`softspoken`) of width k from κ/k random 16-byte roots → (the receiver, its κ
/// base-OT messages 0 and 1 as κ × 16 bytes each).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn softspoken_receiver<'py>(
    py: Python<'py>,
    k: usize,
    roots: &[u8],
) -> PyResult<(
    PyIknpReceiver,
    Bound<'py, pyo3::types::PyBytes>,
    Bound<'py, pyo3::types::PyBytes>,
)> {
    let (inner, m0, m1) = Receiver::softspoken(k, roots).map_err(err)?;
    Ok((
        PyIknpReceiver { inner },
        pyo3::types::PyBytes::new(py, &m0),
        pyo3::types::PyBytes::new(py, &m1),
    ))
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
    m.add_function(wrap_pyfunction!(softspoken_receiver, m)?)?;
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
    fn pack_bits_packs_lsb_first() {
        let choices: Vec<u8> = (0..1000u32)
            .map(|i| [0u8, 1, 0, 0, 7, 255, 1, 0, 3][(i * i % 9) as usize])
            .collect();
        for n in [0usize, 1, 7, 8, 9, 63, 64, 65, 1000] {
            let mut want = vec![0u8; n.div_ceil(8)];
            for (i, &c) in choices[..n].iter().enumerate() {
                want[i / 8] |= u8::from(c != 0) << (i % 8);
            }
            assert_eq!(pack_bits(&choices[..n]), want, "{n} choices");
        }
    }

    use super::pair;

    #[test]
    fn softspoken_outputs_are_random_ots_with_iknp_s_correlation() {
        for k in [1usize, 2, 4, 8] {
            let (mut s, mut r) = pair_soft(k);
            assert_eq!((s.u_rows(), r.u_rows()), (KAPPA / k, KAPPA / k));
            let mut counter = 0;
            for m in [1usize, 100, 64, 5000] {
                let choices: Vec<u8> = (0..m).map(|j| ((j * 5 + m) % 3 == 0) as u8).collect();
                let (u, kr) = r.extend(&choices, counter);
                assert_eq!(u.len(), KAPPA / k * row_bytes(m));
                let (k0, k1) = s.extend(&u, m, counter).unwrap();
                for j in 0..m {
                    let want = if choices[j] == 1 { &k1 } else { &k0 };
                    let other = if choices[j] == 1 { &k0 } else { &k1 };
                    assert_eq!(
                        &kr[16 * j..16 * j + 16],
                        &want[16 * j..16 * j + 16],
                        "k {k} m {m} OT {j}"
                    );
                    assert_ne!(&kr[16 * j..16 * j + 16], &other[16 * j..16 * j + 16]);
                }
                counter += m as u64;
            }
            assert!(s.extend(&vec![0u8; KAPPA * 8], 5, 0).is_err() || k == 1);
        }
    }

    #[test]
    fn iknp_outputs_are_random_ots() {
        let (mut s, mut r) = pair();
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
    fn tasks_of_whole_groups_give_the_same_u_and_keys() {
        // several tasks, the last one short, m not a multiple of 8 or 64, streams not at a block boundary
        for (group, m) in [
            (17usize, 5 * 2040 + 13 * 17),
            (31, 2 * 1984 + 31),
            (1, 3 * 2048 + 5),
            (64, 2048 + 64),
        ] {
            let choices: Vec<u8> = (0..m).map(|j| ((j * 5 + m) % 3 == 0) as u8).collect();
            let ((mut s, mut r), (mut s2, mut r2)) = (pair(), pair());
            let (u0, kr0) = r.extend(&choices[..7], 0);
            s.extend(&u0, 7, 0).unwrap();
            let (v0, _) = r2.extend(&choices[..7], 0);
            s2.extend(&v0, 7, 0).unwrap();
            assert_eq!(kr0.len(), 7 * 16);
            let (u, kr) = r.extend(&choices, 7);
            let (k0, k1) = s.extend(&u, m, 7).unwrap();
            let mut u2 = vec![0u8; u.len()];
            let mut got_r = vec![0u8; kr.len()];
            let out = Shared::new(&mut got_r);
            r2.extend_with(&pack_bits(&choices), m, 7, group, &mut u2, |first, k| {
                assert_eq!(first % group, 0);
                assert!(k.len() / 16 % group == 0 || first + k.len() / 16 == m);
                // SAFETY: disjoint task ranges.
                unsafe { out.slice(16 * first, k.len()) }.copy_from_slice(k);
            })
            .unwrap();
            assert_eq!(u2, u, "group {group}");
            assert_eq!(got_r, kr, "group {group}");
            let (mut g0, mut g1) = (vec![0u8; k0.len()], vec![0u8; k1.len()]);
            let (o0, o1) = (Shared::new(&mut g0), Shared::new(&mut g1));
            s2.extend_with(&u2, m, 7, group, |first, a, b| {
                // SAFETY: disjoint task ranges.
                unsafe { o0.slice(16 * first, a.len()) }.copy_from_slice(a);
                unsafe { o1.slice(16 * first, b.len()) }.copy_from_slice(b);
            })
            .unwrap();
            assert_eq!((g0, g1), (k0, k1), "group {group}");
            let (mut p0, mut p1) = (vec![0u8; 4 * m], vec![0u8; 4 * m]);
            let (w, _) = r.extend(&choices, 7 + m as u64);
            s.extend_prefix(&w, m, 7 + m as u64, 4, &mut p0, &mut p1).unwrap();
            let (w2, kk) = r2.extend(&choices, 7 + m as u64);
            assert_eq!(w, w2);
            let (q0, q1) = s2.extend(&w2, m, 7 + m as u64).unwrap();
            for j in 0..m {
                assert_eq!(p0[4 * j..4 * j + 4], q0[16 * j..16 * j + 4]);
                assert_eq!(p1[4 * j..4 * j + 4], q1[16 * j..16 * j + 4]);
                let want = if choices[j] == 1 { &q1 } else { &q0 };
                assert_eq!(kk[16 * j..16 * j + 16], want[16 * j..16 * j + 16]);
            }
        }
        assert!(task_cols(0).is_err() && task_cols(257).is_err());
    }

    #[test]
    fn simd_and_scalar_transposes_agree() {
        let tile: Vec<u8> = (0..KAPPA * STRIDE).map(|i| (i * 131 % 251) as u8).collect();
        for (stride, shift) in [(TB, 0), (STRIDE, 0), (STRIDE, 9)] {
            let t = &tile[shift..];
            let (mut a, mut b) = (vec![0u8; 16 * TILE_COLS], vec![0u8; 16 * TILE_COLS]);
            transpose_tile_scalar(t, stride, &mut b, TB / 16);
            transpose_tile(t, stride, &mut a, TB / 16);
            assert_eq!(a, b);
            // bit c of row r's byte is column 8·byte + c
            let (r, j) = (77, 8 * 100 + 5);
            assert_eq!(b[16 * j + r / 8] >> (r % 8) & 1, t[r * stride + 100] >> 5 & 1);
            #[cfg(target_arch = "x86_64")]
            {
                a.fill(0);
                // SAFETY: SSE2 is part of the x86_64 baseline.
                unsafe { transpose_tile_sse2(t, stride, &mut a, TB / 16) };
                assert_eq!(a, b);
                if std::arch::is_x86_feature_detected!("avx2") {
                    a.fill(0);
                    // SAFETY: AVX2 detected just above.
                    unsafe { transpose_tile_avx2(t, stride, &mut a, TB / 16) };
                    assert_eq!(a, b);
                }
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    a.fill(0);
                    // SAFETY: AVX-512 BW detected just above.
                    unsafe { transpose_tile_avx512(t, stride, &mut a, TB / 16) };
                    assert_eq!(a, b);
                }
                if std::arch::is_x86_feature_detected!("gfni") && std::arch::is_x86_feature_detected!("avx512vbmi") {
                    a.fill(0);
                    // SAFETY: GFNI and AVX-512 VBMI detected just above.
                    unsafe { transpose_tile_gfni(t, stride, &mut a, TB / 16) };
                    assert_eq!(a, b);
                    // fewer column groups than the tile holds: the rest of `out` untouched
                    a.fill(7);
                    // SAFETY: as above.
                    unsafe { transpose_tile_gfni(t, stride, &mut a, 3) };
                    assert_eq!(a[..16 * 128 * 3], b[..16 * 128 * 3]);
                    assert!(a[16 * 128 * 3..].iter().all(|&x| x == 7));
                }
            }
        }
    }

    #[test]
    fn stream_blocks_are_the_stream_bytes() {
        let seeds: Vec<u8> = (0..16 * KAPPA).map(|i| (i * 7 + 3) as u8).collect();
        let mut st = Streams::new(&seeds).unwrap();
        st.take(24); // an unaligned position
        for (off, len) in [(0usize, 256usize), (8, 256), (252, 144), (3, 1)] {
            let mut want = vec![0u8; len];
            st.fill(5, off, &mut want);
            let mut buf = vec![0u8; STRIDE];
            let skip = st.blocks(5, off, len, &mut buf);
            assert_eq!(skip, (24 + off) % 16);
            assert_eq!(&buf[skip..skip + len], &want[..]);
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
