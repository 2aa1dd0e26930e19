//! SoftSpokenOT (Roy, CRYPTO 2022), semi-honest: IKNP's correlation q_j = t_j ⊕ r_j·Δ from κ/k
//! small-field subspace VOLEs over F_{2^k} instead of κ correlated OTs, so the receiver's message u is κ/k
//! rows of m bits (128/k bits per OT) instead of κ rows.
//!
//! * Setup, per instance i < κ/k: the extension receiver expands a random root by a k-level GGM tree
//!   (G(s) = AES-128-CTR_s, 32 bytes: left child, right child) into 2^k leaf seeds s_{i,x}; base OT i·k + b
//!   carries the XOR of the level-(k − b) nodes whose last bit is 1 (message 0) or 0 (message 1). The sender,
//!   choosing bit b of Δ_i (its k bits i·k..i·k + k of Δ), learns the siblings of the path to leaf Δ_i, hence
//!   every leaf but s_{i,Δ_i} (a punctured PRF: `ggm_punctured`). The base OTs are otext's κ = 128, unchanged.
//! * Extend: r_{i,x} = G(s_{i,x}) (the AES-CTR streams of `otext::Streams`, continuing across calls). The
//!   receiver has u_i = ⊕_x r_{i,x} and, per bit b, v_{i,b} = ⊕_{x: x_b = 1} r_{i,x}; the sender, lacking
//!   r_{i,Δ_i}, has w_{i,b} = ⊕_{x: (x ⊕ Δ_i)_b = 1} r_{i,x} = v_{i,b} ⊕ Δ_{i,b}·u_i (the term x = Δ_i has
//!   coefficient 0): the bit-sliced VOLE w = v + Δ_i·u over F_{2^k}. The receiver sends c_i = u_i ⊕ r (the
//!   choices), the sender sets q_{i,b} = w_{i,b} ⊕ Δ_{i,b}·c_i = v_{i,b} ⊕ Δ_{i,b}·r. Rows i·k + b of q and t
//!   are then exactly IKNP's, and `otext` transposes and hashes them as before.
//! * The sums over subsets by a butterfly: 2^(k+1) row XORs per instance instead of k·2^(k−1).
//!
//! Semi-honest only (cryptomask's model): no consistency check (Roy's check is for a malicious receiver).

use crate::otext::KAPPA;
use crate::prp::{Prp, ctr_fill};

/// The widths k supported: powers of two dividing κ (8: 16 bits per OT, 2^8 PRG streams per instance).
pub fn check_k(k: usize) -> Result<(), String> {
    if ![1, 2, 4, 8].contains(&k) {
        return Err(format!("SoftSpokenOT: k must be 1, 2, 4 or 8, not {k}"));
    }
    Ok(())
}

fn children(s: &[u8; 16]) -> ([u8; 16], [u8; 16]) {
    let mut out = [0u8; 32];
    ctr_fill(&Prp::new(s), 0, &mut out);
    (out[..16].try_into().expect("16"), out[16..].try_into().expect("16"))
}

/// The 2^k leaves of the GGM tree of `root` (leaf x: path bits from the root, most significant first) and
/// every level's nodes (level d: 2^d nodes).
fn ggm_levels(root: &[u8; 16], k: usize) -> Vec<Vec<[u8; 16]>> {
    let mut levels = vec![vec![*root]];
    for d in 0..k {
        let next = levels[d]
            .iter()
            .flat_map(|s| {
                let (l, r) = children(s);
                [l, r]
            })
            .collect();
        levels.push(next);
    }
    levels
}

/// (base-OT messages 0, messages 1, the leaves) of `ggm_send`.
pub type Setup = (Vec<u8>, Vec<u8>, Vec<u8>);

/// The receiver's setup from κ/k roots (16 bytes each): (base-OT messages 0, messages 1, each κ × 16 bytes;
/// the (κ/k)·2^k leaves, 16 bytes each, instance-major).
pub fn ggm_send(k: usize, roots: &[u8]) -> Result<Setup, String> {
    check_k(k)?;
    if roots.len() != 16 * (KAPPA / k) {
        return Err(format!("SoftSpokenOT: expected {} roots of 16 bytes", KAPPA / k));
    }
    let (mut m0, mut m1, mut leaves) = (vec![0u8; 16 * KAPPA], vec![0u8; 16 * KAPPA], vec![]);
    for (i, root) in roots.chunks(16).enumerate() {
        let levels = ggm_levels(root.try_into().expect("16"), k);
        for b in 0..k {
            // level k − b holds the nodes whose last path bit is leaf bit b
            let (mut odd, mut even) = ([0u8; 16], [0u8; 16]);
            for (p, node) in levels[k - b].iter().enumerate() {
                let acc = if p & 1 == 1 { &mut odd } else { &mut even };
                acc.iter_mut().zip(node).for_each(|(a, n)| *a ^= n);
            }
            let j = 16 * (i * k + b);
            // choice Δ_b learns the side it is not on
            m0[j..j + 16].copy_from_slice(&odd);
            m1[j..j + 16].copy_from_slice(&even);
        }
        leaves.extend(levels[k].iter().flatten());
    }
    Ok((m0, m1, leaves))
}

/// Bit `j` of Δ (16 bytes, LSB first).
fn delta_bit(delta: &[u8; 16], j: usize) -> usize {
    usize::from(delta[j / 8] >> (j % 8) & 1)
}

/// Δ_i: bits i·k..i·k + k of Δ as an integer (bit b = Δ bit i·k + b).
pub fn delta_chunk(delta: &[u8; 16], i: usize, k: usize) -> usize {
    (0..k).fold(0, |a, b| a | delta_bit(delta, i * k + b) << b)
}

/// The sender's leaves from its κ base-OT outputs (message Δ_j of OT j, κ × 16 bytes): every leaf of every
/// instance but leaf Δ_i, which is left all-zero (instance-major, as `ggm_send`).
pub fn ggm_punctured(k: usize, delta: &[u8; 16], got: &[u8]) -> Result<Vec<u8>, String> {
    check_k(k)?;
    if got.len() != 16 * KAPPA {
        return Err(format!("SoftSpokenOT: expected {KAPPA} base-OT outputs of 16 bytes"));
    }
    let mut leaves = Vec::with_capacity((16 * (KAPPA / k)) << k);
    for i in 0..KAPPA / k {
        let di = delta_chunk(delta, i, k);
        // level d: 2^d nodes, the one on the path to leaf Δ_i (index di >> (k − d)) unknown (None)
        let mut level: Vec<Option<[u8; 16]>> = vec![None];
        for d in 0..k {
            let mut next: Vec<Option<[u8; 16]>> = level
                .iter()
                .flat_map(|s| match s {
                    Some(s) => {
                        let (l, r) = children(s);
                        [Some(l), Some(r)]
                    }
                    None => [None, None],
                })
                .collect();
            let b = k - 1 - d; // the leaf bit of level d + 1
            let path = di >> b; // the path node at level d + 1
            let sib = path ^ 1;
            let j = 16 * (i * k + b);
            let mut s: [u8; 16] = got[j..j + 16].try_into().expect("16");
            for (p, node) in next.iter().enumerate() {
                if p & 1 == sib & 1 && p != sib {
                    let n = node.expect("only the path's children are unknown, and p is not on it");
                    s.iter_mut().zip(&n).for_each(|(a, n)| *a ^= n);
                }
            }
            next[sib] = Some(s);
            level = next;
        }
        leaves.extend(level.iter().flat_map(|s| s.unwrap_or([0u8; 16])));
    }
    Ok(leaves)
}

/// The subset sums of one instance in place: `rows` holds 2^k rows of `len` bytes at `stride` (row x: r_x, from
/// byte `at`); afterwards `out(b)` has received ⊕_{x: x_b = 1} r_x for every b < k, and row 0 holds ⊕_x r_x.
/// Level b pairs the partial sums S_{2p}, S_{2p + 1} over the low bits: the odd ones (leaf bit b set) go to
/// v_b, then S_p ← S_{2p} ⊕ S_{2p + 1} (kept in row 2p·2^b). `acc`: scratch of ≥ len bytes.
pub fn subset_sums(
    rows: &mut [u8],
    stride: usize,
    at: usize,
    len: usize,
    k: usize,
    acc: &mut [u8],
    mut out: impl FnMut(usize, &[u8]),
) {
    let acc = &mut acc[..len];
    for b in 0..k {
        let step = 1usize << b;
        acc.fill(0);
        for p in (0..1usize << k).step_by(2 * step) {
            let (lo, hi) = rows.split_at_mut((p + step) * stride);
            let odd = &hi[at..at + len];
            xor_into(acc, odd);
            xor_into(&mut lo[p * stride + at..p * stride + at + len], odd);
        }
        out(b, acc);
    }
}

/// d ^= s over their common length, 64 bytes at a time (fixed-size arrays, so that LLVM emits vector XORs: the
/// byte-wise zip stayed scalar here and took half the extension's time).
#[inline(always)]
pub fn xor_into(d: &mut [u8], s: &[u8]) {
    let n = d.len().min(s.len());
    let (mut dc, mut sc) = (d[..n].chunks_exact_mut(64), s[..n].chunks_exact(64));
    for (a, b) in (&mut dc).zip(&mut sc) {
        let (a, b): (&mut [u8; 64], &[u8; 64]) = (a.try_into().expect("64"), b.try_into().expect("64"));
        for i in 0..64 {
            a[i] ^= b[i];
        }
    }
    for (a, b) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
        *a ^= b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sender_learns_every_leaf_but_its_own() {
        for k in [1usize, 2, 4, 8] {
            let roots: Vec<u8> = (0..16 * (KAPPA / k)).map(|i| (i * 91 + 7) as u8).collect();
            let (m0, m1, leaves) = ggm_send(k, &roots).unwrap();
            let delta: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(53) ^ 0xa6);
            let got: Vec<u8> = (0..KAPPA)
                .flat_map(|j| {
                    let src = if delta_bit(&delta, j) == 1 { &m1 } else { &m0 };
                    src[16 * j..16 * j + 16].to_vec()
                })
                .collect();
            let punct = ggm_punctured(k, &delta, &got).unwrap();
            assert_eq!(punct.len(), leaves.len());
            for i in 0..KAPPA / k {
                let di = delta_chunk(&delta, i, k);
                for x in 0..1usize << k {
                    let at = 16 * ((i << k) + x);
                    if x == di {
                        assert_eq!(punct[at..at + 16], [0u8; 16]);
                        assert_ne!(leaves[at..at + 16], [0u8; 16]);
                    } else {
                        assert_eq!(punct[at..at + 16], leaves[at..at + 16], "k {k} instance {i} leaf {x}");
                    }
                }
            }
        }
        assert!(ggm_send(3, &[0u8; 16 * 42]).is_err() && ggm_send(4, &[0u8; 16]).is_err());
    }

    #[test]
    fn subset_sums_are_the_sums_over_each_bit() {
        for k in [1usize, 2, 4, 8] {
            let (stride, at, len) = (40, 3, 29);
            let rows: Vec<u8> = (0..stride << k).map(|i| (i * 37 % 253) as u8).collect();
            let mut work = rows.clone();
            let mut got = vec![vec![]; k];
            subset_sums(&mut work, stride, at, len, k, &mut [0u8; 64], |b, v| {
                got[b] = v.to_vec()
            });
            for (b, got_b) in got.iter().enumerate() {
                let mut want = vec![0u8; len];
                let mut all = vec![0u8; len];
                for x in 0..1usize << k {
                    let r = &rows[x * stride + at..x * stride + at + len];
                    all.iter_mut().zip(r).for_each(|(a, r)| *a ^= r);
                    if x >> b & 1 == 1 {
                        want.iter_mut().zip(r).for_each(|(a, r)| *a ^= r);
                    }
                }
                assert_eq!(*got_b, want, "k {k} bit {b}");
                assert_eq!(work[at..at + len], all[..]);
            }
        }
    }
}
