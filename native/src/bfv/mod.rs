//! BFV in RNS form for cryptomask (seed 001 §2.2, §2.4, §4.3, §4.5): the polynomial hot loops behind
//! `privface.crypto` — negacyclic NTTs, pointwise products, key switching and modulus switching for primes up to
//! 62 bits at N = 4096 (or any power of two), and §4.5's product with the gallery under the verifier's key
//! (`verifier_key`). Python passes uint64
//! arrays (C order, limb axis −2 as in `crypto.rlwe`) and keeps the protocol logic; every call validates its
//! shapes and residues, then releases the GIL and runs on the `set_threads` pool.

pub mod arith;
pub mod ntt;
pub mod ntt32;
pub mod pack;
pub mod pool;
pub mod refresh;
pub mod rns;
pub mod steps;
pub mod verifier_key;

use std::borrow::Cow;

use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

type Out<'py> = PyResult<Bound<'py, PyArrayDyn<u64>>>;

fn err(e: String) -> PyErr {
    PyValueError::new_err(e)
}

fn flat<'a, T: numpy::Element + Copy>(a: &'a PyReadonlyArrayDyn<'_, T>) -> Cow<'a, [T]> {
    match a.as_slice() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(a.as_array().iter().copied().collect()),
    }
}

fn array<'py>(py: Python<'py>, shape: Vec<usize>, v: Vec<u64>) -> Out<'py> {
    Ok(ArrayD::from_shape_vec(IxDyn(&shape), v)
        .map_err(|e| err(e.to_string()))?
        .into_pyarray(py))
}

/// The RNS basis q_0…q_{L−1} (data primes) and optionally a special prime P (key basis qP), degree N.
#[pyclass(frozen, name = "Basis", module = "privface_native.bfv")]
pub struct PyBasis {
    inner: rns::Basis,
}

impl PyBasis {
    /// Shape (…, limbs, N) with limbs = L (key = False) or L + 1 (key = True); returns (leading, limbs).
    fn lead(&self, shape: &[usize], tail: usize, key: bool, what: &str) -> PyResult<usize> {
        let limbs = self.inner.limbs(key);
        if key && !self.inner.special {
            return Err(err(format!("{what}: this basis has no special prime")));
        }
        if shape.len() < 2 || shape[shape.len() - 2] != limbs || shape[shape.len() - 1] != tail {
            return Err(err(format!(
                "{what}: expected shape (..., {limbs}, {tail}), got {shape:?}"
            )));
        }
        Ok(limbs)
    }

    fn checked<'a>(
        &self,
        a: &'a PyReadonlyArrayDyn<'_, u64>,
        key: bool,
        what: &str,
    ) -> PyResult<(Cow<'a, [u64]>, usize)> {
        let limbs = self.lead(a.shape(), self.inner.n, key, what)?;
        let v = flat(a);
        self.inner.check(&v, limbs, what).map_err(err)?;
        Ok((v, limbs))
    }

    fn exact(shape: &[usize], want: &[usize], what: &str) -> PyResult<()> {
        if shape != want {
            return Err(err(format!("{what}: expected shape {want:?}, got {shape:?}")));
        }
        Ok(())
    }
}

#[pymethods]
impl PyBasis {
    #[new]
    #[pyo3(signature = (data_moduli, n, special=None))]
    fn new(py: Python<'_>, data_moduli: Vec<u64>, n: usize, special: Option<u64>) -> PyResult<Self> {
        let inner = py.detach(|| rns::Basis::new(&data_moduli, special, n)).map_err(err)?;
        Ok(PyBasis { inner })
    }

    #[getter]
    fn n(&self) -> usize {
        self.inner.n
    }

    /// Data primes (key = False) or data primes then P (key = True).
    #[pyo3(signature = (key=false))]
    fn moduli(&self, key: bool) -> Vec<u64> {
        self.inner.moduli(key)
    }

    /// The primitive 2N-th roots ψ used per prime (NTT(a)_k = a(ψ^{2k+1})).
    fn roots(&self) -> Vec<u64> {
        self.inner.tables.iter().map(|t| t.psi).collect()
    }

    /// Forward negacyclic NTT of residues (..., limbs, N), natural order.
    #[pyo3(signature = (a, key=false))]
    fn forward<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, key: bool) -> Out<'py> {
        let (v, limbs) = self.checked(&a, key, "forward NTT")?;
        let mut v = v.into_owned();
        py.detach(|| pool::install(|| self.inner.forward(&mut v, limbs)));
        array(py, a.shape().to_vec(), v)
    }

    #[pyo3(signature = (a, key=false))]
    fn inverse<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>, key: bool) -> Out<'py> {
        let (v, limbs) = self.checked(&a, key, "inverse NTT")?;
        let mut v = v.into_owned();
        py.detach(|| pool::install(|| self.inner.inverse(&mut v, limbs)));
        array(py, a.shape().to_vec(), v)
    }

    /// Pointwise product a ⊙ b mod each prime: a (..., limbs, N), b of a's shape or one (limbs, N) broadcast.
    #[pyo3(signature = (a, b, key=false))]
    fn mul<'py>(
        &self,
        py: Python<'py>,
        a: PyReadonlyArrayDyn<'py, u64>,
        b: PyReadonlyArrayDyn<'py, u64>,
        key: bool,
    ) -> Out<'py> {
        if b.shape() != a.shape() && b.shape() != &a.shape()[a.ndim().saturating_sub(2)..] {
            return Err(err(format!(
                "pointwise product: shapes {:?} and {:?}",
                a.shape(),
                b.shape()
            )));
        }
        let (x, limbs) = self.checked(&a, key, "pointwise product")?;
        let (y, _) = self.checked(&b, key, "pointwise product")?;
        let v = py.detach(|| pool::install(|| self.inner.mul(&x, &y, limbs)));
        array(py, a.shape().to_vec(), v)
    }

    /// SwKeyGen(s, s') with randomness a (L, L+1, N) uniform mod qP and e (L, N) small: K (L, 2, L+1, N).
    fn swkeygen<'py>(
        &self,
        py: Python<'py>,
        s: PyReadonlyArrayDyn<'py, i64>,
        s_new: PyReadonlyArrayDyn<'py, i64>,
        a: PyReadonlyArrayDyn<'py, u64>,
        e: PyReadonlyArrayDyn<'py, i64>,
    ) -> Out<'py> {
        let (l, n) = (self.inner.l, self.inner.n);
        Self::exact(s.shape(), &[n], "SwKeyGen s")?;
        Self::exact(s_new.shape(), &[n], "SwKeyGen s'")?;
        Self::exact(a.shape(), &[l, l + 1, n], "SwKeyGen a")?;
        Self::exact(e.shape(), &[l, n], "SwKeyGen e")?;
        let (av, _) = self.checked(&a, true, "SwKeyGen a")?;
        let (sv, snv, ev) = (flat(&s), flat(&s_new), flat(&e));
        let out = py
            .detach(|| pool::install(|| self.inner.swkeygen(&sv, &snv, &av, &ev)))
            .map_err(err)?;
        array(py, vec![l, 2, l + 1, n], out)
    }

    /// Switching(ct, K): (..., 2, L, N) coefficient form under s → under s'.
    fn switch<'py>(
        &self,
        py: Python<'py>,
        ct: PyReadonlyArrayDyn<'py, u64>,
        k: PyReadonlyArrayDyn<'py, u64>,
    ) -> Out<'py> {
        let (l, n) = (self.inner.l, self.inner.n);
        let sh = ct.shape();
        if sh.len() < 3 || sh[sh.len() - 3] != 2 {
            return Err(err(format!("key switching: expected (..., 2, {l}, {n}), got {sh:?}")));
        }
        Self::exact(k.shape(), &[l, 2, l + 1, n], "switching key")?;
        let (cv, _) = self.checked(&ct, false, "key switching")?;
        let (kv, _) = self.checked(&k, true, "switching key")?;
        let out = py
            .detach(|| pool::install(|| self.inner.switch(&cv, &kv)))
            .map_err(err)?;
        array(py, sh.to_vec(), out)
    }

    /// Modulus switching by the last of the first `limbs` data primes: (..., limbs, N) → (..., limbs − 1, N),
    /// ⌊x/q_{limbs−1}⌉ (coefficient form).
    #[pyo3(signature = (x, limbs=None))]
    fn rescale<'py>(&self, py: Python<'py>, x: PyReadonlyArrayDyn<'py, u64>, limbs: Option<usize>) -> Out<'py> {
        let limbs = limbs.unwrap_or(self.inner.l);
        let sh = x.shape();
        if limbs > self.inner.l || sh.len() < 2 || sh[sh.len() - 2] != limbs || sh[sh.len() - 1] != self.inner.n {
            return Err(err(format!(
                "rescale: expected (..., {limbs}, {}), got {sh:?}",
                self.inner.n
            )));
        }
        let v = flat(&x);
        self.inner.check(&v, limbs, "rescale").map_err(err)?;
        let out = py
            .detach(|| pool::install(|| self.inner.rescale(&v, limbs)))
            .map_err(err)?;
        let mut shape = sh.to_vec();
        let k = shape.len() - 2;
        shape[k] = limbs - 1;
        array(py, shape, out)
    }

    /// The erasing refresh's key step (``refresh::reencrypt``) on this basis (q₀, P): c0 (m, N) padded copies and
    /// c1 (d, N) with d | m, mod q₀; s (2, N) the secret key; perm (2, N) SEAL's NTT index → natural index; two
    /// 32-byte seeds (a, and the fresh errors). Returns b (m, 2, N), SEAL's NTT order.
    #[allow(clippy::too_many_arguments)]
    fn refresh_reencrypt<'py>(
        &self,
        py: Python<'py>,
        c0: PyReadonlyArrayDyn<'py, u64>,
        c1: PyReadonlyArrayDyn<'py, u64>,
        s: PyReadonlyArrayDyn<'py, u64>,
        perm: PyReadonlyArrayDyn<'py, u64>,
        seed_a: &[u8],
        seed_e: &[u8],
    ) -> Out<'py> {
        let n = self.inner.n;
        if self.inner.l != 2 || self.inner.special {
            return Err(err("refresh: the basis must be (q₀, P)".into()));
        }
        let (m, d) = (c0.shape(), c1.shape());
        if m.len() != 2 || d.len() != 2 || m[1] != n || d[1] != n || d[0] == 0 || m[0] % d[0] != 0 {
            return Err(err(format!(
                "refresh: expected c0 (m, {n}), c1 (d, {n}), d | m; got {m:?}, {d:?}"
            )));
        }
        Self::exact(perm.shape(), &[2, n], "refresh order map")?;
        let (sv, _) = self.checked(&s, false, "refresh secret key")?;
        let (c0v, c1v) = (flat(&c0), flat(&c1));
        let q0 = self.inner.tables[0].m.p;
        if c0v.iter().chain(c1v.iter()).any(|&x| x >= q0) {
            return Err(err("refresh: a residue is not below q₀".into()));
        }
        let pv: Vec<usize> = flat(&perm).iter().map(|&x| x as usize).collect();
        let (sa, se) = (seed32(seed_a, "refresh seed")?, seed32(seed_e, "refresh seed")?);
        let rows = m[0];
        let out = py
            .detach(|| pool::install(|| refresh::reencrypt(&self.inner, &c0v, &c1v, &sv, &pv, sa, se)))
            .map_err(err)?;
        array(py, vec![rows, 2, n], out)
    }

    /// Uniform residues (count, limbs, cols) mod the data (or key) primes, expanded from a 32-byte seed
    /// (ChaCha20; cols: N by default): the same seed always gives the same polynomials.
    #[pyo3(signature = (seed, count, key=false, cols=None))]
    fn uniform<'py>(&self, py: Python<'py>, seed: &[u8], count: usize, key: bool, cols: Option<usize>) -> Out<'py> {
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| err("uniform: the seed must be 32 bytes".into()))?;
        if key && !self.inner.special {
            return Err(err("uniform: this basis has no special prime".into()));
        }
        let limbs = self.inner.limbs(key);
        let cols = cols.unwrap_or(self.inner.n);
        let out = py.detach(|| pool::install(|| self.inner.uniform(seed, count, limbs, cols)));
        array(py, vec![count, limbs, cols], out)
    }
}

/// The CS's masks of packs c0 (G, N) at 2^wire_bits (``pack::mask_shares``, ChaCha20 from `seed`): (the masked
/// c0 + u' mod 2^wire_bits with its low k₀ = wire_bits − t_bits − margin_bits + 1 bits zero, sent as its high
/// wire_bits − k₀ bits; its shares d₀ = −⌊t·u'/2^wire_bits⌉ mod t), both (G, N); t = 2^t_bits.
#[pyfunction]
fn mask_shares<'py>(
    py: Python<'py>,
    c0: PyReadonlyArrayDyn<'py, u64>,
    seed: &[u8],
    wire_bits: u32,
    t_bits: u32,
    margin_bits: u32,
) -> Masked<'py> {
    let sh = c0.shape().to_vec();
    if sh.len() != 2 || sh[1] == 0 {
        return Err(err(format!("mask_shares: expected c0 (G, N), got {sh:?}")));
    }
    if !(wire_bits <= 32 && t_bits < wire_bits && margin_bits >= 2 && margin_bits < wire_bits - t_bits) {
        return Err(err(
            "mask_shares: needs t_bits < wire_bits ≤ 32 and 2 ≤ margin_bits < wire_bits − t_bits".into(),
        ));
    }
    let sd = seed32(seed, "mask_shares")?;
    let mut v = flat(&c0).into_owned();
    if v.iter().any(|&x| x >> wire_bits != 0) {
        return Err(err(format!("mask_shares: a residue is not below 2^{wire_bits}")));
    }
    let d0 = py.detach(|| pool::install(|| pack::mask_shares(&mut v, sh[1], sd, wire_bits, t_bits, margin_bits)));
    Ok((array(py, sh.clone(), v)?, array32(py, sh, d0)?))
}

/// The `count` largest primes ≡ 1 (mod 2n) below 2^bits, decreasing.
#[pyfunction]
fn ntt_primes(bits: u32, n: u64, count: usize) -> PyResult<Vec<u64>> {
    if !(20..=arith::MAX_BITS).contains(&bits) || !n.is_power_of_two() {
        return Err(err(format!(
            "ntt_primes: bits in [20, {}] and n a power of two",
            arith::MAX_BITS
        )));
    }
    Ok(arith::ntt_primes(bits, n, count))
}

/// Threads for every BFV operation from now on (0: one per core).
#[pyfunction]
fn set_threads(n: usize) -> PyResult<()> {
    pool::set_threads(n).map_err(err)
}

#[pyfunction]
fn threads() -> usize {
    pool::threads()
}

/// Thread-seconds of the CS's distance steps since the last call (``steps::NAMES``: products_mac, products_intt,
/// drop, pack, pack_ntt, finish), then reset: a profile for ``privface bench identify``.
#[pyfunction]
fn distance_steps() -> Vec<(&'static str, f64)> {
    steps::NAMES.into_iter().zip(steps::take()).collect()
}

type Out32<'py> = PyResult<Bound<'py, PyArrayDyn<u32>>>;
type Pair64<'py> = PyResult<(Bound<'py, PyArrayDyn<u64>>, Bound<'py, PyArrayDyn<u64>>)>;
type Masked<'py> = PyResult<(Bound<'py, PyArrayDyn<u64>>, Bound<'py, PyArrayDyn<u32>>)>;

fn array32<'py>(py: Python<'py>, shape: Vec<usize>, v: Vec<u32>) -> Out32<'py> {
    Ok(ArrayD::from_shape_vec(IxDyn(&shape), v)
        .map_err(|e| err(e.to_string()))?
        .into_pyarray(py))
}

fn seed32(seed: &[u8], what: &str) -> PyResult<[u8; 32]> {
    seed.try_into()
        .map_err(|_| err(format!("{what}: the seed must be 32 bytes")))
}

/// Seed 001 §4.5's product with the gallery under the verifier's key over Q = q₀q₁q₂P (``verifier_key``).
#[pyclass(frozen, name = "VerifierKeyProduct", module = "privface_native.bfv")]
pub struct PyVerifierKeyProduct {
    inner: verifier_key::Product,
}

impl PyVerifierKeyProduct {
    fn shape(&self, got: &[usize], tail: &[usize], what: &str) -> PyResult<usize> {
        let n = self.inner.n;
        let mut want: Vec<usize> = tail.to_vec();
        want.push(n);
        if got.len() != want.len() + 1 || got[1..] != want[..] {
            return Err(err(format!(
                "{what}: expected (k, {}), got {got:?}",
                want.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(got[0])
    }

    fn below<T: Copy + Into<u64> + Sync>(&self, v: &[T], what: &str) -> PyResult<()> {
        let n = self.inner.n;
        let limbs = verifier_key::LIMBS;
        let bad = v
            .chunks(n)
            .enumerate()
            .any(|(i, c)| c.iter().any(|&x| x.into() >= self.inner.p[i % limbs]));
        if bad {
            Err(err(format!("{what}: a residue is not below its prime")))
        } else {
            Ok(())
        }
    }
}

#[pymethods]
impl PyVerifierKeyProduct {
    /// Primes q₀, q₁ (the gallery's p₁), q₂, P (each below 2^29, ≡ 1 mod 2N) and N.
    #[new]
    fn new(moduli: Vec<u64>, n: usize) -> PyResult<Self> {
        Ok(PyVerifierKeyProduct {
            inner: verifier_key::Product::new(&moduli, n).map_err(err)?,
        })
    }

    fn moduli(&self) -> Vec<u64> {
        self.inner.p.to_vec()
    }

    /// Gallery ciphertexts (k, 2, 2, N) mod q₀, q₁ under s_v → the stored form (k, 2, 4, N), uint32.
    fn lift<'py>(&self, py: Python<'py>, ct: PyReadonlyArrayDyn<'py, u64>) -> Out32<'py> {
        let k = self.shape(ct.shape(), &[2, 2], "lift")?;
        let v = flat(&ct);
        let (q0, q1) = (self.inner.p[0], self.inner.p[1]);
        let n = self.inner.n;
        if v.chunks(n)
            .enumerate()
            .any(|(i, c)| c.iter().any(|&x| x >= if i % 2 == 0 { q0 } else { q1 }))
        {
            return Err(err("lift: a residue is not below its prime".into()));
        }
        let out = py.detach(|| pool::install(|| self.inner.lift(&v)));
        array32(py, vec![k, 2, verifier_key::LIMBS, n], out)
    }

    /// The verifier's rows' b-halves (2S + 1, 4, N) for its secret s (N,) and the messages m (S, N) of its S slices
    /// (small integers).
    fn encrypt_rows<'py>(
        &self,
        py: Python<'py>,
        s: PyReadonlyArrayDyn<'py, i64>,
        m: PyReadonlyArrayDyn<'py, i64>,
        seed_a: &[u8],
        seed_e: &[u8],
    ) -> Out32<'py> {
        let n = self.inner.n;
        Self::exact1(s.shape(), n, "rows: s")?;
        let slices = m.shape().first().copied().unwrap_or(0);
        if m.shape() != [slices, n] || slices == 0 {
            return Err(err(format!("rows: messages (S, {n}) with S ≥ 1, got {:?}", m.shape())));
        }
        let (sa, se) = (seed32(seed_a, "rows")?, seed32(seed_e, "rows")?);
        let (sv, mv) = (flat(&s), flat(&m));
        let out = py.detach(|| self.inner.encrypt_rows(&sv, &mv, sa, se));
        array32(py, vec![verifier_key::rows_of(slices), verifier_key::LIMBS, n], out)
    }

    /// Rows (2S + 1, 2, 4, N) from the b-halves (2S + 1, 4, N) as received (checked) and the uniform halves' seed.
    fn rows<'py>(&self, py: Python<'py>, b: PyReadonlyArrayDyn<'py, u32>, seed_a: &[u8]) -> Out32<'py> {
        let n = self.inner.n;
        let r = b.shape().first().copied().unwrap_or(0);
        if b.shape() != [r, verifier_key::LIMBS, n] || r < 3 || r % 2 == 0 {
            return Err(err(format!(
                "rows: expected (2S + 1, {}, {n}) with S ≥ 1, got {:?}",
                verifier_key::LIMBS,
                b.shape()
            )));
        }
        let v = flat(&b);
        self.below(&v, "rows")?;
        let sa = seed32(seed_a, "rows")?;
        let out = py.detach(|| self.inner.rows(&v, sa));
        array32(py, vec![r, 2, verifier_key::LIMBS, n], out)
    }

    /// Σ_σ ĉ₀^σ·R₀^σ + ĉ₁^σ·R₁^σ in coefficient form (k, 2, 4, N) for gallery (k, S, 2, 4, N) and rows
    /// (2S + 1, 2, 4, N) (the oracle tests' view of the product).
    fn product<'py>(
        &self,
        py: Python<'py>,
        g: PyReadonlyArrayDyn<'py, u32>,
        rows: PyReadonlyArrayDyn<'py, u32>,
    ) -> Out<'py> {
        let slices = self.rows_shape(rows.shape())?;
        let k = self.shape(g.shape(), &[slices, 2, verifier_key::LIMBS], "product: gallery")?;
        let (gv, rv) = (flat(&g), flat(&rows));
        self.below(&gv, "product: gallery")?;
        self.below(&rv, "product: rows")?;
        let out = py.detach(|| pool::install(|| self.inner.product(&gv, &rv)));
        array(py, vec![k, 2, verifier_key::LIMBS, self.inner.n], out)
    }

    /// Galois keys (levels, 2, 2, 3, N) over q₀, q₁, P of the secret s (N,) for packing groups of d ciphertexts.
    fn galois_keys<'py>(
        &self,
        py: Python<'py>,
        s: PyReadonlyArrayDyn<'py, i64>,
        d: usize,
        seed_a: &[u8],
        seed_e: &[u8],
    ) -> Out32<'py> {
        let n = self.inner.n;
        Self::exact1(s.shape(), n, "galois_keys: s")?;
        let lv = pack::levels(n, d).map_err(err)?;
        let (sa, se) = (seed32(seed_a, "galois_keys")?, seed32(seed_e, "galois_keys")?);
        let sv = flat(&s);
        if sv.iter().any(|&x| x.abs() > 1) {
            return Err(err("galois_keys: s must be ternary".into()));
        }
        let out = py.detach(|| self.inner.galois_keys(&sv, d, sa, se)).map_err(err)?;
        array32(py, vec![lv, pack::DIGITS, 2, pack::KEY.len(), n], out)
    }

    /// Test path: PackLWEs of items (G·d, 2, 2, N) (coefficient residues mod q₀, q₁) → (G, 2, 2, N).
    fn pack<'py>(
        &self,
        py: Python<'py>,
        items: PyReadonlyArrayDyn<'py, u32>,
        d: usize,
        keys: PyReadonlyArrayDyn<'py, u32>,
    ) -> Out32<'py> {
        let n = self.inner.n;
        let lv = pack::levels(n, d).map_err(err)?;
        self.keys_shape(keys.shape(), lv)?;
        let sh = items.shape();
        if sh.len() != 4 || sh[1..] != [2, pack::DATA, n] || sh[0] % d != 0 || sh[0] == 0 {
            return Err(err(format!("pack: expected (G·{d}, 2, 2, {n}), got {sh:?}")));
        }
        let (kv, mut iv) = (flat(&keys), flat(&items).into_owned());
        self.keys_below(&kv, "pack: Galois keys")?;
        let p = self.inner.p;
        if iv
            .chunks(n)
            .enumerate()
            .any(|(i, c)| c.iter().any(|&x| x as u64 >= p[i % pack::DATA]))
        {
            return Err(err("pack: a residue is not below its prime".into()));
        }
        py.detach(|| pool::install(|| self.inner.pack(&mut iv, d, &kv)))
            .map_err(err)?;
        let g = sh[0] / d;
        let item = 2 * pack::DATA * n;
        let out: Vec<u32> = iv.chunks(d * item).flat_map(|c| c[..item].to_vec()).collect();
        array32(py, vec![g, 2, pack::DATA, n], out)
    }

    /// Alg. 2 lines 5–11 with PackLWEs: the gallery as a list of arrays (k_i, S, 2, 4, N), read in order as one
    /// (no copy: the CS keeps its gallery in blocks), rows (2S + 1, 2, 4, N), Galois keys for groups of d →
    /// (c₁ (G, N) at 2^``c1_bits``, default ``wire_bits``; c₀ (G, N) at 2^``wire_bits``), G = ⌈Σ k_i/d⌉; the entry
    /// of stack g·d + r, row m, at m·d + r. ``c1_bits`` < ``wire_bits``: seed 001 §4.5's compressed c₁, switched
    /// straight to the smaller modulus (one rounding, not two).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (g, rows, keys, d, seed, offset, wire_bits, c1_bits=None))]
    fn packed_distances<'py>(
        &self,
        py: Python<'py>,
        g: Vec<PyReadonlyArrayDyn<'py, u32>>,
        rows: PyReadonlyArrayDyn<'py, u32>,
        keys: PyReadonlyArrayDyn<'py, u32>,
        d: usize,
        seed: &[u8],
        offset: u64,
        wire_bits: u32,
        c1_bits: Option<u32>,
    ) -> Pair64<'py> {
        let c1_bits = c1_bits.unwrap_or(wire_bits);
        let n = self.inner.n;
        let slices = self.rows_shape(rows.shape())?;
        let mut k = 0;
        for part in &g {
            k += self.shape(part.shape(), &[slices, 2, verifier_key::LIMBS], "distances: gallery")?;
        }
        let lv = pack::levels(n, d).map_err(err)?;
        self.keys_shape(keys.shape(), lv)?;
        if k == 0 || !(8..=56).contains(&wire_bits) || !(8..=wire_bits).contains(&c1_bits) {
            return Err(err(
                "distances: at least one ciphertext and 8 ≤ c1_bits ≤ wire_bits ≤ 56".into(),
            ));
        }
        let sd = seed32(seed, "distances")?;
        let gv: Vec<Cow<[u32]>> = g.iter().map(flat).collect();
        let (rv, kv) = (flat(&rows), flat(&keys));
        self.below(&rv, "distances: rows")?;
        self.keys_below(&kv, "distances: Galois keys")?;
        let parts: Vec<&[u32]> = gv.iter().map(|c| c.as_ref()).collect();
        let (c1, c0) = py
            .detach(|| {
                pool::install(|| {
                    self.inner
                        .packed_distances(&parts, &rv, &kv, d, sd, offset, [wire_bits, c1_bits])
                })
            })
            .map_err(err)?;
        let groups = k.div_ceil(d);
        Ok((array(py, vec![groups, n], c1)?, array(py, vec![groups, n], c0)?))
    }

    /// The verifier's phases c'₀ + c'₁·s_v mod 2^``wire_bits`` of packs c0, c1 (G, N) < 2^``wire_bits``, with s_v in
    /// NTT form mod q₀, q₁ (2, N) (``forward`` of its residues); uint32 (G, N).
    fn phase<'py>(
        &self,
        py: Python<'py>,
        c0: PyReadonlyArrayDyn<'py, u32>,
        c1: PyReadonlyArrayDyn<'py, u32>,
        s_hat: PyReadonlyArrayDyn<'py, u32>,
        wire_bits: u32,
    ) -> Out32<'py> {
        let n = self.inner.n;
        let (q0, q1) = (self.inner.p[0], self.inner.p[1]);
        if !(1..=32).contains(&wire_bits) || (n as u64) << wire_bits > q0 * q1 / 2 {
            return Err(err(format!(
                "phase: needs 1 ≤ wire_bits ≤ 32 and N·2^wire_bits ≤ q0·q1/2, got {wire_bits}"
            )));
        }
        let sh = c0.shape().to_vec();
        if sh.len() != 2 || sh[1] != n || c1.shape() != &sh[..] || s_hat.shape() != [2, n] {
            return Err(err(format!(
                "phase: expected c0, c1 (G, {n}) and s_hat (2, {n}), got {sh:?}, {:?}, {:?}",
                c1.shape(),
                s_hat.shape()
            )));
        }
        let (a0, a1, sv) = (flat(&c0), flat(&c1), flat(&s_hat));
        if a0.iter().chain(a1.iter()).any(|&x| x >> (wire_bits - 1) >> 1 != 0) {
            return Err(err(format!("phase: a residue is not below 2^{wire_bits}")));
        }
        self.below(&sv, "phase: s_hat")?;
        let out = py.detach(|| pool::install(|| self.inner.phase(&a0, &a1, &sv, wire_bits)));
        array32(py, sh, out)
    }

    /// Test helper: coefficient residues (..., 4, N) → NTT form (this module's order), uint32.
    fn forward<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u64>) -> Out32<'py> {
        let v = flat(&a);
        let sh = a.shape().to_vec();
        if sh.len() < 2 || sh[sh.len() - 1] != self.inner.n || sh[sh.len() - 2] != verifier_key::LIMBS {
            return Err(err(format!("forward: expected (..., 4, {}), got {sh:?}", self.inner.n)));
        }
        self.below(&v, "forward")?;
        let out = py.detach(|| self.inner.forward(&v));
        array32(py, sh, out)
    }

    /// Test helper: NTT form (..., 4, N) → coefficient residues, uint64.
    fn inverse<'py>(&self, py: Python<'py>, a: PyReadonlyArrayDyn<'py, u32>) -> Out<'py> {
        let v = flat(&a);
        let sh = a.shape().to_vec();
        if sh.len() < 2 || sh[sh.len() - 1] != self.inner.n || sh[sh.len() - 2] != verifier_key::LIMBS {
            return Err(err(format!("inverse: expected (..., 4, {}), got {sh:?}", self.inner.n)));
        }
        self.below(&v, "inverse")?;
        let out = py.detach(|| self.inner.inverse(&v));
        array(py, sh, out)
    }
}

impl PyVerifierKeyProduct {
    fn exact1(got: &[usize], n: usize, what: &str) -> PyResult<()> {
        if got != [n] {
            return Err(err(format!("{what}: expected ({n},), got {got:?}")));
        }
        Ok(())
    }

    fn keys_shape(&self, got: &[usize], levels: usize) -> PyResult<()> {
        let want = [levels, pack::DIGITS, 2, pack::KEY.len(), self.inner.n];
        if got != want {
            return Err(err(format!("Galois keys: expected {want:?}, got {got:?}")));
        }
        Ok(())
    }

    fn keys_below(&self, v: &[u32], what: &str) -> PyResult<()> {
        let (n, p) = (self.inner.n, self.inner.p);
        let bad = v
            .chunks(n)
            .enumerate()
            .any(|(i, c)| c.iter().any(|&x| x as u64 >= p[pack::KEY[i % pack::KEY.len()]]));
        if bad {
            return Err(err(format!("{what}: a residue is not below its prime")));
        }
        Ok(())
    }

    /// Rows (2S + 1, 2, 4, N) → S.
    fn rows_shape(&self, got: &[usize]) -> PyResult<usize> {
        let r = got.first().copied().unwrap_or(0);
        let want = [r, 2, verifier_key::LIMBS, self.inner.n];
        if got != want || r < 3 || r % 2 == 0 {
            return Err(err(format!(
                "rows: expected (2S + 1, 2, {}, {}), got {got:?}",
                verifier_key::LIMBS,
                self.inner.n
            )));
        }
        Ok(r / 2)
    }
}

/// Adds the submodule `bfv` to the extension module.
pub fn register(parent: &Bound<'_, PyModule>) -> PyResult<()> {
    let m = PyModule::new(parent.py(), "bfv")?;
    m.add_class::<PyBasis>()?;
    m.add_class::<PyVerifierKeyProduct>()?;
    m.add_function(wrap_pyfunction!(ntt_primes, &m)?)?;
    m.add_function(wrap_pyfunction!(mask_shares, &m)?)?;
    m.add_function(wrap_pyfunction!(set_threads, &m)?)?;
    m.add_function(wrap_pyfunction!(threads, &m)?)?;
    m.add_function(wrap_pyfunction!(distance_steps, &m)?)?;
    parent.add_submodule(&m)?;
    Ok(())
}
