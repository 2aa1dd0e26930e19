//! The Naor–Pinkas OT sender's keys on edwards25519 (privface/crypto/ot.py, NP01 §3.1): for each received
//! PK_{j,0}, K_{j,0} = r·PK_{j,0} and K_{j,1} = r·C − K_{j,0}, each as its Montgomery u-coordinate (what the
//! pads hash). curve25519-dalek's arithmetic (AVX2 backend when the CPU has it) on rayon's threads; the
//! checks are libsodium's for `crypto_scalarmult_ed25519_noclamp`, which the Python sender ran per transfer
//! before (and which stays its test oracle): a canonical encoding of a curve point, not of small order, in
//! the prime-order subgroup, and keys other than the neutral element.

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;

/// A received point: canonical, on the curve, not of small order, in the prime-order subgroup.
fn element(bytes: &[u8]) -> Option<EdwardsPoint> {
    let c = CompressedEdwardsY::from_slice(bytes).ok()?;
    let p = c.decompress()?;
    (p.compress() == c && !p.is_small_order() && p.is_torsion_free()).then_some(p)
}

/// u(K) (32 bytes, little-endian), or None for the neutral element (u = (1 + y)/(1 − y) is undefined).
fn u_coordinate(k: &EdwardsPoint) -> Option<[u8; 32]> {
    (!k.is_identity()).then(|| k.to_montgomery().to_bytes())
}

/// [u(r·PK_j) ‖ u(r·C − r·PK_j)] for the 32-byte points PK_j concatenated; r a canonical non-zero scalar,
/// rc = r·C (the sender's own point). The error names the first bad transfer.
pub fn sender_keys(r: &[u8; 32], rc: &[u8; 32], pk0s: &[u8]) -> Result<Vec<u8>, String> {
    let r = Option::<Scalar>::from(Scalar::from_canonical_bytes(*r))
        .filter(|r| *r != Scalar::ZERO)
        .ok_or("OT: r must be a canonical non-zero scalar")?;
    let rc = element(rc).ok_or("OT: r·C is not an element of the edwards25519 group")?;
    if !pk0s.len().is_multiple_of(32) {
        return Err("OT: points are 32 bytes each".into());
    }
    let mut out = vec![0u8; 2 * pk0s.len()];
    out.par_chunks_mut(64)
        .zip(pk0s.par_chunks(32))
        .enumerate()
        .try_for_each(|(j, (o, pk0))| {
            let p = element(pk0).ok_or(format!("OT: PK_j,0 {j} is not an element of the edwards25519 group"))?;
            let k0 = p * r;
            let k1 = rc - k0;
            let neutral = || format!("OT: a key of transfer {j} is the neutral element");
            o[..32].copy_from_slice(&u_coordinate(&k0).ok_or_else(neutral)?);
            o[32..].copy_from_slice(&u_coordinate(&k1).ok_or_else(neutral)?);
            Ok::<_, String>(())
        })?;
    Ok(out)
}

// --- Python bindings ---------------------------------------------------------------------------

/// ot_sender_keys(r, rc, pk0s): u(K_{j,0}) ‖ u(K_{j,1}) per transfer (64 bytes each), concatenated.
#[pyfunction]
fn ot_sender_keys<'py>(py: Python<'py>, r: [u8; 32], rc: [u8; 32], pk0s: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let out = py
        .detach(|| sender_keys(&r, &rc, pk0s))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ot_sender_keys, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT as B, EIGHT_TORSION};

    #[test]
    fn keys_are_r_times_pk_and_the_complement() {
        let r = Scalar::from(123_456_789u64);
        let c = B * Scalar::from(77u64);
        let pks: Vec<EdwardsPoint> = (1..6u64).map(|i| B * Scalar::from(i * 1000 + 7)).collect();
        let concat: Vec<u8> = pks.iter().flat_map(|p| p.compress().to_bytes()).collect();
        let out = sender_keys(&r.to_bytes(), &(c * r).compress().to_bytes(), &concat).unwrap();
        for (p, o) in pks.iter().zip(out.chunks(64)) {
            assert_eq!(o[..32], (p * r).to_montgomery().to_bytes());
            assert_eq!(o[32..], ((c - p) * r).to_montgomery().to_bytes());
        }
    }

    #[test]
    fn bad_points_are_refused_by_index() {
        let r = Scalar::from(5u64).to_bytes();
        let rc = (B * Scalar::from(35u64)).compress().to_bytes();
        let good = (B * Scalar::from(3u64)).compress().to_bytes();
        let torsion = (B * Scalar::from(3u64) + EIGHT_TORSION[1]).compress().to_bytes();
        let small = EIGHT_TORSION[2].compress().to_bytes();
        let mut non_canonical = [0xffu8; 32];
        non_canonical[0] = 0xee; // y = 2^255 − 18 ≥ p
        non_canonical[31] = 0x7f;
        for bad in [torsion, small, non_canonical] {
            let concat = [good, bad].concat();
            let e = sender_keys(&r, &rc, &concat).unwrap_err();
            assert!(e.contains("PK_j,0 1"), "{e}");
        }
        assert!(sender_keys(&Scalar::ZERO.to_bytes(), &rc, &good).is_err());
        assert!(sender_keys(&r, &rc, &good[..31]).is_err());
        // PK = C: K_1 = r·(C − PK) is the neutral element
        let c = (B * Scalar::from(7u64)).compress().to_bytes();
        let e = sender_keys(&r, &rc, &c).unwrap_err();
        assert!(e.contains("neutral"), "{e}");
    }
}
