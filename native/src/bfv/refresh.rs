//! The key holder's step of the erasing CKKS refresh (Mouchet, Troncoso-Pastoriza, Bossuat, Hubaux, PoPETs 2021
//! §IV-E, one key holder; `privface.crypto.ckks_refresh`) in one pass per copy: decrypt the padded copy at q₀,
//! lift the plaintext to (−q₀/2, q₀/2], add a fresh centred binomial error (η = 24), and encrypt it afresh under s
//! at q₀·P with a uniform a expanded from a seed. Arrays are in SEAL's NTT order (`perm` maps it to this core's
//! natural order per prime), so no SEAL serialisation is involved. Hand-written: SEAL exposes no batched
//! decrypt/encrypt on raw residues.

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rayon::prelude::*;

use super::arith::mul_shoup;
use super::rns::{Basis, Res};

/// A signed v with |v| < p, as a residue mod p (no division).
#[inline(always)]
fn small_mod(v: i64, p: u64) -> u64 {
    if v < 0 { p.wrapping_add(v as u64) } else { v as u64 }
}

/// Centred binomial η = 24 from one word: the bit counts of its low and next 24-bit fields, subtracted.
#[inline(always)]
pub fn binomial24(w: u64) -> i64 {
    (w & 0xFF_FFFF).count_ones() as i64 - ((w >> 24) & 0xFF_FFFF).count_ones() as i64
}

/// `CKKSRefresh.expand_a(seed, i)` of the Python side: ChaCha20 under `seed` on stream i, for each prime words
/// drawn in rounds of (missing + 64), masked to the prime's bit length, the first ones below the prime kept
/// (the rest of a round discarded). Returns (limbs·N) residues, natural order of the draw (SEAL's NTT order).
pub fn expand_a(seed: [u8; 32], stream: u64, moduli: &[u64], n: usize) -> Vec<u64> {
    let mut rng = ChaCha20Rng::from_seed(seed);
    rng.set_stream(stream);
    let mut out = Vec::with_capacity(moduli.len() * n);
    for &q in moduli {
        let mask = u64::MAX >> q.leading_zeros();
        let mut have = 0;
        while have < n {
            let draw = n - have + 64;
            for _ in 0..draw {
                let v = rng.next_u64() & mask;
                if v < q && have < n {
                    out.push(v);
                    have += 1;
                }
            }
        }
    }
    out
}

/// The inverse of each limb's permutation (SEAL index j → natural index perm[j]); Err unless each is one.
pub fn inverse_perm(perm: &[usize], limbs: usize, n: usize) -> Res<Vec<usize>> {
    let mut inv = vec![usize::MAX; limbs * n];
    for l in 0..limbs {
        for (j, &k) in perm[l * n..(l + 1) * n].iter().enumerate() {
            if k >= n || inv[l * n + k] != usize::MAX {
                return Err("refresh: the NTT order map is not a permutation".into());
            }
            inv[l * n + k] = j;
        }
    }
    Ok(inv)
}

/// b (m, 2, N) for the m padded copies c0 (m, N) with c1 (d, N) (copy j has c1[j mod d]), all mod q₀ in SEAL's
/// NTT order; s (2, N) the secret key mod (q₀, P) in that order; perm (2, N) SEAL index → natural index. Copy j:
/// w = INTT(c0_j + c1·s), v = centred(w) + e_j (e_j from ChaCha20(seed_e) stream j, one word per coefficient),
/// b_j = NTT(v) − a_j·s mod (q₀, P), a_j = `expand_a(seed_a, j)`.
#[allow(clippy::too_many_arguments)]
pub fn reencrypt(
    basis: &Basis,
    c0: &[u64],
    c1: &[u64],
    s: &[u64],
    perm: &[usize],
    seed_a: [u8; 32],
    seed_e: [u8; 32],
) -> Res<Vec<u64>> {
    let n = basis.n;
    if basis.tables.len() != 2 || basis.special {
        return Err("refresh: the basis must be (q₀, P)".into());
    }
    let (d, m) = (c1.len() / n, c0.len() / n);
    if d == 0 || m % d != 0 || s.len() != 2 * n || perm.len() != 2 * n {
        return Err("refresh: shapes do not fit".into());
    }
    let inv = inverse_perm(perm, 2, n)?;
    let (t0, t1) = (&basis.tables[0], &basis.tables[1]);
    let (q0, p) = (t0.m, t1.m);
    if p.p <= q0.p / 2 + 24 {
        return Err("refresh: P must exceed q₀/2 + 24 (the lifted plaintext plus its error)".into());
    }
    let moduli = [q0.p, p.p];
    // s with its Shoup companions per limb: every product below is by s
    let sp: Vec<u64> = (0..2 * n).map(|x| basis.tables[x / n].m.shoup(s[x])).collect();
    let mut cs = vec![0u64; d * n]; // c1·s mod q₀, once per ciphertext
    cs.par_chunks_mut(n).zip(c1.par_chunks(n)).for_each(|(o, c)| {
        for x in 0..n {
            o[x] = mul_shoup(c[x], s[x], sp[x], q0.p);
        }
    });
    let mut out = vec![0u64; m * 2 * n];
    out.par_chunks_mut(2 * n).enumerate().for_each(|(j, o)| {
        let (c, cj) = (&c0[j * n..(j + 1) * n], &cs[(j % d) * n..(j % d + 1) * n]);
        let mut w: Vec<u64> = (0..n)
            .map(|k| {
                let x = inv[k];
                q0.add(c[x], cj[x])
            })
            .collect();
        t0.inverse(&mut w);
        let mut rng = ChaCha20Rng::from_seed(seed_e);
        rng.set_stream(j as u64);
        let half = q0.p / 2;
        let mut hi = vec![0u64; n];
        for k in 0..n {
            let centred = if w[k] > half {
                w[k] as i64 - q0.p as i64
            } else {
                w[k] as i64
            };
            let v = centred + binomial24(rng.next_u64()); // |v| ≤ q₀/2 + 24 < min(q₀, P)
            w[k] = small_mod(v, q0.p);
            hi[k] = small_mod(v, p.p);
        }
        t0.forward(&mut w);
        t1.forward(&mut hi);
        let a = expand_a(seed_a, j as u64, &moduli, n);
        let (o0, o1) = o.split_at_mut(n);
        for x in 0..n {
            o0[x] = q0.sub(w[perm[x]], mul_shoup(a[x], s[x], sp[x], q0.p));
            o1[x] = p.sub(hi[perm[n + x]], mul_shoup(a[n + x], s[n + x], sp[n + x], p.p));
        }
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_is_centred_with_variance_12() {
        let mut rng = ChaCha20Rng::from_seed([7; 32]);
        let v: Vec<i64> = (0..200_000).map(|_| binomial24(rng.next_u64())).collect();
        let mean = v.iter().sum::<i64>() as f64 / v.len() as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.05 && (var - 12.0).abs() < 0.3, "mean {mean} var {var}");
        assert!(v.iter().all(|x| x.abs() <= 24));
    }

    #[test]
    fn a_bad_permutation_is_refused() {
        assert!(inverse_perm(&[0, 0, 1, 0], 2, 2).is_err());
        assert_eq!(inverse_perm(&[1, 0, 0, 1], 2, 2).unwrap(), vec![1, 0, 0, 1]);
    }
}
