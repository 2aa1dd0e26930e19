//! Fixed-key and counter-mode AES-128 for the OT extension and the millionaires' protocol: the PRP π, the
//! tweakable correlation-robust hash TCCR(x, j) = π(π(x) ⊕ j) ⊕ π(x) (Guo–Katz–Wang–Yu, S&P 2020) and the
//! AES-CTR streams G(k) of IKNP.
//!
//! Hand-written because the `aes` crate encrypts one call's blocks at a time behind a dispatch: here the round
//! keys are expanded once and 8 registers stay in flight — with VAES (AVX-512) 4 blocks per register, else
//! AES-NI one per register (both runtime-detected), else the `aes` crate. Every kernel is checked against the
//! `aes` crate by the tests.

use aes::Aes128;
use aes::cipher::consts::U16;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::inout::InOutBuf;
use aes::cipher::{BlockEncrypt, KeyInit};

/// π's fixed key: SHAKE-256("privface/otext/tccr/v1"), first 16 bytes (otext.py's `_FIXED_KEY`).
pub const TCCR_KEY: [u8; 16] = [
    0x1a, 0xf1, 0x05, 0x44, 0x20, 0xd5, 0x07, 0x8e, 0x2c, 0x17, 0xee, 0x56, 0x71, 0x33, 0xee, 0x10,
];

/// Blocks per batched AES call (the AES-NI backend pipelines 8 at a time; 64 blocks = 1 KiB stays in L1).
const LANES: usize = 64;

/// AES-128 encryption of whole 16-byte blocks in place: AES-NI with 8 blocks in flight (runtime-detected),
/// else the `aes` crate; TCCR and CTR with VAES where the CPU has it. The round keys are expanded once (FIPS-197 §5.2; checked against the `aes` crate by
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
pub(crate) enum Unit {
    Vaes,
    AesNi,
    Soft,
}

impl Prp {
    pub fn new(key: &[u8; 16]) -> Prp {
        #[cfg(target_arch = "x86_64")]
        {
            let kind = if std::arch::is_x86_feature_detected!("vaes")
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("aes")
            {
                Unit::Vaes
            } else if std::arch::is_x86_feature_detected!("aes") {
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
            Unit::Vaes | Unit::AesNi => unsafe { x86::encrypt_aesni(&self.rk, buf) },
            Unit::Soft => encrypt_in_place(&self.soft, buf),
        }
        #[cfg(not(target_arch = "x86_64"))]
        encrypt_in_place(&self.soft, buf);
    }

    #[cfg(all(test, target_arch = "x86_64"))]
    pub(crate) fn with_unit(mut self, kind: Unit) -> Prp {
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

    /// TCCR by AES-NI, 8 rows in flight, π(x) kept in registers: out_i = π(π(x_i ⊕ xor) ⊕ j_i) ⊕ π(x_i ⊕ xor),
    /// j_i = tweak(i) in the low 8 bytes; x and out hold the same whole number of blocks.
    #[target_feature(enable = "aes,sse2")]
    pub(super) fn tccr_aesni<T: Fn(usize) -> u64>(rk: &[[u8; 16]; 11], x: &[u8], xor: u128, out: &mut [u8], tweak: T) {
        assert_eq!(x.len(), out.len());
        let k = keys128(rk);
        let xr = _mm_set_epi64x((xor >> 64) as u64 as i64, xor as u64 as i64);
        let mut tw = 0usize;
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
                let j = _mm_set_epi64x(0, tweak(tw + i) as i64);
                *v = _mm_xor_si128(_mm_xor_si128(*q, j), k[0]);
            }
            tw += 8;
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
            let mut v = _mm_xor_si128(_mm_xor_si128(q, _mm_set_epi64x(0, tweak(tw) as i64)), k[0]);
            tw += 1;
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

    /// The 11 round keys, each broadcast to the four 128-bit lanes.
    #[inline]
    #[target_feature(enable = "avx512f,aes,sse2")]
    fn keys512(rk: &[[u8; 16]; 11]) -> [__m512i; 11] {
        let k = keys128(rk);
        let mut out = [_mm512_setzero_si512(); 11];
        for (o, v) in out.iter_mut().zip(k) {
            *o = _mm512_broadcast_i32x4(v);
        }
        out
    }

    /// Four 128-bit words (lane i = j_i in its low 8 bytes, zero above).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn tweaks4(j: [u64; 4]) -> __m512i {
        _mm512_set_epi64(0, j[3] as i64, 0, j[2] as i64, 0, j[1] as i64, 0, j[0] as i64)
    }

    /// `tccr_aesni` by VAES: 8 registers of 4 rows each in flight; the rows past the last whole 32 go through
    /// `tccr_aesni`.
    #[target_feature(enable = "vaes,avx512f,aes,sse2")]
    pub(super) fn tccr_vaes<T: Fn(usize) -> u64>(rk: &[[u8; 16]; 11], x: &[u8], xor: u128, out: &mut [u8], tweak: T) {
        assert_eq!(x.len(), out.len());
        let k = keys512(rk);
        let xr = _mm512_broadcast_i32x4(_mm_set_epi64x((xor >> 64) as u64 as i64, xor as u64 as i64));
        let whole = x.len() / 512 * 512;
        for (c, (xc, oc)) in x[..whole]
            .chunks_exact(512)
            .zip(out[..whole].chunks_exact_mut(512))
            .enumerate()
        {
            let (src, dst): (*const __m512i, *mut __m512i) = (xc.as_ptr().cast(), oc.as_mut_ptr().cast());
            let mut p = [_mm512_setzero_si512(); 8];
            for (i, v) in p.iter_mut().enumerate() {
                // SAFETY: `xc` is 512 bytes: register i at src + i is in bounds; loadu needs no alignment.
                let xi = unsafe { _mm512_loadu_si512(src.add(i)) };
                *v = _mm512_xor_si512(_mm512_xor_si512(xi, xr), k[0]);
            }
            for rkey in &k[1..10] {
                for v in p.iter_mut() {
                    *v = _mm512_aesenc_epi128(*v, *rkey);
                }
            }
            let mut s = [_mm512_setzero_si512(); 8];
            for (i, (v, q)) in s.iter_mut().zip(p.iter_mut()).enumerate() {
                *q = _mm512_aesenclast_epi128(*q, k[10]);
                let r = 32 * c + 4 * i;
                let j = tweaks4([tweak(r), tweak(r + 1), tweak(r + 2), tweak(r + 3)]);
                *v = _mm512_xor_si512(_mm512_xor_si512(*q, j), k[0]);
            }
            for rkey in &k[1..10] {
                for v in s.iter_mut() {
                    *v = _mm512_aesenc_epi128(*v, *rkey);
                }
            }
            for (i, (v, q)) in s.iter().zip(p.iter()).enumerate() {
                let h = _mm512_xor_si512(_mm512_aesenclast_epi128(*v, k[10]), *q);
                // SAFETY: `oc` is 512 bytes: register i at dst + i is in bounds; storeu needs no alignment.
                unsafe { _mm512_storeu_si512(dst.add(i), h) };
            }
        }
        let first = whole / 16;
        tccr_aesni(rk, &x[whole..], xor, &mut out[whole..], |i| tweak(first + i));
    }

    /// R registers of 4 counter blocks ctr, ctr + 1, … encrypted by VAES into `out`: whole blocks, more than
    /// 4(R − 1) and at most 4R of them (the last register stored under a mask).
    #[inline]
    #[target_feature(enable = "vaes,avx512f,aes,sse2")]
    fn ctr_regs<const R: usize>(k: &[__m512i; 11], ctr: u128, out: &mut [u8]) {
        let blocks = out.len() / 16;
        assert!(out.len().is_multiple_of(16) && blocks > 4 * (R - 1) && blocks <= 4 * R);
        let p: *mut __m512i = out.as_mut_ptr().cast();
        let mut x = [_mm512_setzero_si512(); R];
        for (i, v) in x.iter_mut().enumerate() {
            let b = |j: u128| ctr_block(ctr.wrapping_add(4 * i as u128 + j));
            let lo = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(b(0)), b(1));
            let hi = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(b(2)), b(3));
            let blocks = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
            *v = _mm512_xor_si512(blocks, k[0]);
        }
        for rkey in &k[1..10] {
            for v in x.iter_mut() {
                *v = _mm512_aesenc_epi128(*v, *rkey);
            }
        }
        for (i, v) in x.iter().enumerate() {
            let y = _mm512_aesenclast_epi128(*v, k[10]);
            let left = blocks - 4 * i;
            // SAFETY: register i covers blocks 4i … 4i + 3 of `out`; a partial last one is stored under a mask of
            // its `left` blocks (two 8-byte words each), so every write is in bounds; no alignment needed.
            unsafe {
                if left >= 4 {
                    _mm512_storeu_si512(p.add(i), y);
                } else {
                    _mm512_mask_storeu_epi64(p.add(i).cast(), (1u8 << (2 * left)) - 1, y);
                }
            }
        }
    }

    /// `ctr_aesni` by VAES: up to 8 registers of 4 counter blocks in flight, a partial last register included
    /// (the trailing block of an unaligned row would otherwise run alone, at AES's latency).
    #[target_feature(enable = "vaes,avx512f,aes,sse2")]
    pub(super) fn ctr_vaes(rk: &[[u8; 16]; 11], ctr: u128, out: &mut [u8]) {
        let k = keys512(rk);
        let mut ctr = ctr;
        for c in out.chunks_mut(512) {
            match c.len().div_ceil(64) {
                8 => ctr_regs::<8>(&k, ctr, c),
                7 => ctr_regs::<7>(&k, ctr, c),
                6 => ctr_regs::<6>(&k, ctr, c),
                5 => ctr_regs::<5>(&k, ctr, c),
                4 => ctr_regs::<4>(&k, ctr, c),
                3 => ctr_regs::<3>(&k, ctr, c),
                2 => ctr_regs::<2>(&k, ctr, c),
                _ => ctr_regs::<1>(&k, ctr, c),
            }
            ctr = ctr.wrapping_add((c.len() / 16) as u128);
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

#[cfg(test)]
fn tccr_cipher() -> Aes128 {
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

/// out_i ← TCCR(x_i ⊕ xor, tweak0 + i) for the rows of x (n × 16 bytes, u128 little-endian).
pub fn tccr_to(aes: &Prp, x: &[u8], xor: u128, out: &mut [u8], tweak0: u64) {
    tccr_with(aes, x, xor, out, |i| tweak0.wrapping_add(i as u64));
}

/// out_i ← TCCR(x_i ⊕ xor, tweak(i)) for the rows of x (n × 16 bytes, u128 little-endian); the portable path
/// LANES at a time: π(x) into a scratch buffer, then π(π(x) ⊕ j) in place in `out`, then ⊕ π(x).
pub fn tccr_with(aes: &Prp, x: &[u8], xor: u128, out: &mut [u8], tweak: impl Fn(usize) -> u64) {
    assert_eq!(x.len(), out.len());
    #[cfg(target_arch = "x86_64")]
    match aes.kind {
        // SAFETY: `kind` records the CPU features detected in `Prp::new`.
        Unit::Vaes => return unsafe { x86::tccr_vaes(&aes.rk, x, xor, out, tweak) },
        // SAFETY: as above.
        Unit::AesNi => return unsafe { x86::tccr_aesni(&aes.rk, x, xor, out, tweak) },
        Unit::Soft => {}
    }
    let mut px = [0u8; 16 * LANES];
    for (c, (xc, oc)) in x.chunks(16 * LANES).zip(out.chunks_mut(16 * LANES)).enumerate() {
        let p = &mut px[..xc.len()];
        for (d, s) in p.chunks_exact_mut(16).zip(xc.chunks_exact(16)) {
            d.copy_from_slice(&(load16(s) ^ xor).to_le_bytes());
        }
        aes.encrypt(p);
        for (i, (d, s)) in oc.chunks_exact_mut(16).zip(p.chunks_exact(16)).enumerate() {
            d.copy_from_slice(&(load16(s) ^ u128::from(tweak(c * LANES + i))).to_le_bytes());
        }
        aes.encrypt(oc);
        for (d, s) in oc.chunks_exact_mut(16).zip(p.chunks_exact(16)) {
            d.copy_from_slice(&(load16(d) ^ load16(s)).to_le_bytes());
        }
    }
}

/// x_i ← TCCR(x_i, tweak(i)) for every row (u128 read little-endian from its 16 bytes), LANES at a time.
#[cfg(test)]
fn tccr_rows(aes: &Aes128, x: &mut [u128], tweak: impl Fn(usize) -> u64) {
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

/// Bytes pos.. of AES-CTR(key) with the all-zero initial counter block (a 128-bit big-endian counter) into
/// `row`. A short row that does not start or end on a block (the extension's per-task rows) goes through a
/// scratch of whole blocks, so that its first and last blocks are pipelined with the others.
pub fn ctr_fill(aes: &Prp, pos: u64, row: &mut [u8]) {
    let ctr = u128::from(pos / 16);
    let skip = (pos % 16) as usize;
    if row.is_empty() {
        return;
    }
    if skip == 0 && row.len().is_multiple_of(16) {
        return ctr_blocks(aes, ctr, row);
    }
    const SHORT: usize = 512;
    let blocks = (skip + row.len()).div_ceil(16);
    if 16 * blocks <= SHORT {
        let mut buf = [0u8; SHORT];
        let buf = &mut buf[..16 * blocks];
        ctr_blocks(aes, ctr, buf);
        row.copy_from_slice(&buf[skip..skip + row.len()]);
        return;
    }
    let head = (16 - skip) % 16;
    let (first, rest) = row.split_at_mut(head);
    if head > 0 {
        let mut b = [0u8; 16];
        ctr_blocks(aes, ctr, &mut b);
        first.copy_from_slice(&b[skip..]);
    }
    let ctr = ctr.wrapping_add(u128::from(head > 0));
    let whole = rest.len() / 16 * 16;
    let (body, tail) = rest.split_at_mut(whole);
    ctr_blocks(aes, ctr, body);
    if !tail.is_empty() {
        let mut b = [0u8; 16];
        ctr_blocks(aes, ctr.wrapping_add((whole / 16) as u128), &mut b);
        tail.copy_from_slice(&b[..tail.len()]);
    }
}

/// Counter blocks ctr, ctr + 1, … encrypted into `out` (whole blocks).
fn ctr_blocks(aes: &Prp, ctr: u128, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    match aes.kind {
        // SAFETY: `kind` records the CPU features detected in `Prp::new`.
        Unit::Vaes => return unsafe { x86::ctr_vaes(&aes.rk, ctr, out) },
        // SAFETY: as above.
        Unit::AesNi => return unsafe { x86::ctr_aesni(&aes.rk, ctr, out) },
        Unit::Soft => {}
    }
    let mut ctr = ctr;
    for chunk in out.chunks_mut(16 * LANES) {
        for b in chunk.chunks_exact_mut(16) {
            b.copy_from_slice(&ctr.to_be_bytes());
            ctr = ctr.wrapping_add(1);
        }
        aes.encrypt(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for kind in units() {
            let mut got = data.clone();
            prp.clone().with_unit(kind).encrypt(&mut got);
            assert_eq!(got, want, "{kind:?}");
        }
    }

    /// The units this CPU has.
    #[cfg(target_arch = "x86_64")]
    fn units() -> Vec<Unit> {
        let mut u = vec![Unit::Soft];
        if std::arch::is_x86_feature_detected!("aes") {
            u.push(Unit::AesNi);
        }
        if Prp::new(&TCCR_KEY).kind == Unit::Vaes {
            u.push(Unit::Vaes);
        }
        u
    }

    #[test]
    fn tccr_kernels_match_the_portable_tccr() {
        // 77 rows: two whole VAES groups of 32, then 8 + 5 rows by AES-NI
        let x: Vec<u8> = (0..16 * 77).map(|i| (i * 131 % 256) as u8).collect();
        let d = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128;
        let tweak = |i: usize| (u64::MAX - 3).wrapping_add((i as u64).wrapping_mul(0x9e37_79b9));
        let want: Vec<u8> = x
            .chunks(16)
            .enumerate()
            .flat_map(|(i, r)| {
                let mut q = [u128::from_le_bytes(r.try_into().unwrap()) ^ d];
                tccr_rows(&tccr_cipher(), &mut q, |_| tweak(i));
                q[0].to_le_bytes()
            })
            .collect();
        let prp = Prp::new(&TCCR_KEY);
        let mut got = vec![0u8; x.len()];
        tccr_with(&prp, &x, d, &mut got, tweak);
        assert_eq!(got, want);
        #[cfg(target_arch = "x86_64")]
        for kind in units() {
            let mut got = vec![0u8; x.len()];
            tccr_with(&prp.clone().with_unit(kind), &x, d, &mut got, tweak);
            assert_eq!(got, want, "{kind:?}");
        }
        let mut got = vec![0u8; x.len()];
        tccr_to(&prp, &x, d, &mut got, 5);
        let mut seq = vec![0u8; x.len()];
        tccr_with(&prp, &x, d, &mut seq, |i| 5 + i as u64);
        assert_eq!(got, seq);
    }

    #[test]
    fn ctr_kernel_matches_the_portable_ctr() {
        let key: [u8; 16] = core::array::from_fn(|i| (i * 17 + 9) as u8);
        let prp = Prp::new(&key);
        let cases = [
            (0u64, 0usize),
            (8, 200),
            (0, 16 * 19),
            (u64::MAX - 100, 77),
            (40, 16 * 70 + 9),
            (0, 512),
            (0, 16),
            (16, 16 * 3),
            (0, 16 * 17),
            (8, 16 * 16),
            (0, 16 * 33),
        ];
        for (pos, len) in cases {
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
            for kind in units() {
                let mut got = vec![0u8; len];
                ctr_fill(&prp.clone().with_unit(kind), pos, &mut got);
                assert_eq!(got, want, "{kind:?}, pos {pos} len {len}");
            }
        }
    }
}
