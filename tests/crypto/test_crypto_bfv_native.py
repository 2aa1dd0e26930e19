"""The native BFV core (native/src/bfv) against the numpy/Python code it replaces, kept here as the oracle:
NTTs, pointwise products, SwKeyGen/Switching and modulus switching on random inputs; 60-bit primes against Python
integers; SEAL decrypts natively switched ciphertexts. (§4.5's product: test_crypto_verifier_key_native.py.)"""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
import tenseal.sealapi as sealapi
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto import rlwe, seal_arrays, seal_io
from privface.crypto.lattice import BFV, LatticeParams, generate_lattice_keypair
from privface.crypto.native import ext
from privface.crypto.ntt import _root

bfv = ext.bfv
N = 4096
# the current cryptomask basis: three 27-bit data primes, a 28-bit special prime (oracle range: < 2^29)
Q27 = [m.value() for m in sealapi.CoeffModulus.Create(N, [27, 27, 27, 28])]
seeds = st.integers(0, 2**32 - 1)
few = settings(max_examples=8, deadline=None)


def residues(rng, shape, mods):
    """Uniform residues of shape (..., L, n) mod each prime of ``mods`` (axis −2)."""
    out = np.empty(shape, np.uint64)
    for li, p in enumerate(mods):
        out[..., li, :] = rng.integers(0, p, shape[:-2] + shape[-1:], dtype=np.uint64)
    return out


def negacyclic_int(a, b, p):
    n = len(a)
    out = [0] * n
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                k = i + j
                if k < n:
                    out[k] += x * y
                else:
                    out[k - n] -= x * y
    return [v % p for v in out]


@pytest.fixture(scope="module")
def b27():
    return bfv.Basis(Q27[:-1], N, Q27[-1]), rlwe.RNSBasis(Q27[:-1], Q27[-1], N)


def test_primes_and_roots_are_the_oracles():
    ps = bfv.ntt_primes(60, N, 3)
    assert len(ps) == 3 and all(p % (2 * N) == 1 and 2**59 < p < 2**60 for p in ps)
    B = bfv.Basis(ps[:2], N, ps[2])
    assert B.moduli() == ps[:2] and B.moduli(key=True) == ps and B.roots() == [_root(p, N) for p in ps]
    with pytest.raises(ValueError):
        bfv.Basis([ps[0] + 2], N)  # not ≡ 1 mod 2N / not prime
    with pytest.raises(ValueError):
        bfv.Basis([ps[0], ps[0]], N)


@few
@given(seed=seeds, lead=st.integers(1, 3))
def test_ntt_matches_numpy_oracle(b27, seed, lead):
    B, ob = b27
    a = residues(np.random.default_rng(seed), (lead, 4, N), Q27)
    fwd = B.forward(a, key=True)
    assert np.array_equal(fwd, ob.ntt_key.forward(a))
    assert np.array_equal(B.inverse(fwd, key=True), a)
    assert np.array_equal(B.inverse(a[:, :3], key=False), ob.ntt.inverse(a[:, :3]))


@few
@given(seed=seeds, bits=st.sampled_from([50, 60, 61, 62]), logn=st.integers(4, 6))
def test_ntt_60bit_multiplies_negacyclically(seed, bits, logn):
    n = 1 << logn
    ps = bfv.ntt_primes(bits, n, 2)
    B, rng = bfv.Basis(ps, n), np.random.default_rng(seed)
    a, b = residues(rng, (2, n), ps), residues(rng, (2, n), ps)
    fa = B.forward(a)
    psi = B.roots()
    for li, p in enumerate(ps):  # natural order: value k is a(ψ^{2k+1})
        k = int(rng.integers(0, n))
        x = pow(psi[li], 2 * k + 1, p)
        assert int(fa[li, k]) == sum(int(c) * pow(x, i, p) for i, c in enumerate(a[li])) % p
    prod = B.inverse(B.mul(fa, B.forward(b)))
    for li, p in enumerate(ps):
        assert [int(v) for v in prod[li]] == negacyclic_int([int(v) for v in a[li]], [int(v) for v in b[li]], p)
        assert np.array_equal(B.mul(a, b)[li].astype(object), (a[li].astype(object) * b[li].astype(object)) % p)


def test_inputs_are_validated(b27):
    B, _ = b27
    a = np.zeros((3, N), np.uint64)
    a[1, 7] = Q27[1]
    with pytest.raises(ValueError, match="below its prime"):
        B.forward(a)
    with pytest.raises(ValueError, match="expected shape"):
        B.forward(np.zeros((4, N), np.uint64))


@few
@given(seed=seeds)
def test_swkeygen_and_switch_match_oracle(b27, seed):
    B, ob = b27
    rng = np.random.default_rng(seed)
    s, sv = rng.integers(-1, 2, N), rng.integers(-1, 2, N)
    a = residues(rng, (3, 4, N), Q27)
    e = rng.integers(-21, 22, (3, N))
    K = B.swkeygen(s, sv, a, e)
    saved = rlwe.uniform, rlwe.cbd
    rlwe.uniform, rlwe.cbd = (lambda shape, mods: a), (lambda shape: e)
    try:
        assert np.array_equal(K, rlwe.swkeygen(ob, s, sv))
    finally:
        rlwe.uniform, rlwe.cbd = saved
    ct = residues(rng, (2, 2, 3, N), Q27[:-1])
    assert np.array_equal(B.switch(ct, K), rlwe.switch(ob, ct, K))


@few
@given(seed=seeds, bits=st.sampled_from([27, 45, 60, 61]), limbs=st.integers(2, 3))
def test_rescale_rounds_x_over_the_last_prime(seed, bits, limbs):
    n = 16
    ps = bfv.ntt_primes(bits, n, limbs)
    B, rng = bfv.Basis(ps, n), np.random.default_rng(seed)
    x = residues(rng, (2, limbs, n), ps)
    got = B.rescale(x)
    Q, last = int(np.prod(np.array(ps, dtype=object))), ps[-1]
    for bi in range(2):
        for k in range(n):
            v = crt([int(x[bi, i, k]) for i in range(limbs)], ps)
            want = (2 * v + last) // (2 * last)  # ⌊v/q_last⌉, ties up
            if 2 * (v % last) == last:
                continue
            assert [int(g) for g in got[bi, :, k]] == [want % p for p in ps[:-1]], (v, Q)


def crt(res, ps):
    Q = 1
    for p in ps:
        Q *= p
    return sum(r * (Q // p) * pow(Q // p, -1, p) for r, p in zip(res, ps)) % Q


@few
@given(seed=st.binary(min_size=32, max_size=32))
def test_uniform_from_seed_is_deterministic_and_in_range(seed):
    ps = bfv.ntt_primes(60, N, 2) + Q27[:1]
    B = bfv.Basis(ps[:2], N, ps[2])
    u = B.uniform(seed, 3, key=True)
    assert u.shape == (3, 3, N) and np.array_equal(u, B.uniform(seed, 3, key=True))
    assert all(np.all(u[:, li] < p) for li, p in enumerate(ps))
    other = B.uniform(bytes([seed[0] ^ 1]) + seed[1:], 3, key=True)
    assert not np.array_equal(u[0], u[1]) and not np.array_equal(u, other)
    # roughly uniform: the mean of 4096 residues mod a 60-bit p is p/2 within 6 standard deviations
    mean = u[:, 0].astype(np.float64).mean() / ps[0]
    assert abs(mean - 0.5) < 6 * (1 / 12 / (3 * N)) ** 0.5
    with pytest.raises(ValueError):
        B.uniform(b"short", 1)


def test_threads_knob():
    before = bfv.threads()
    try:
        bfv.set_threads(1)
        assert bfv.threads() == 1
    finally:
        bfv.set_threads(0)
    assert bfv.threads() == before


@pytest.mark.parametrize("bits", [(27, 27, 27, 28), (60, 49)], ids=["27-bit", "60+49"])
def test_seal_decrypts_native_key_switching(bits):
    """SEAL encrypts under sk, native SwKeyGen/Switching move the ciphertext to sk_v, SEAL decrypts with sk_v."""
    params = LatticeParams(f"bfv-{N}-ks-test", BFV, N, bits, plain_modulus=1 << 20)
    pub, sec = generate_lattice_keypair(params, insecure_test_params=True)
    pub_v, sec_v = generate_lattice_keypair(params, insecure_test_params=True)
    mods = [m.value() for m in pub.seal_context.key_context_data().parms().coeff_modulus()]
    ob = SimpleNamespace(L=len(mods) - 1, n=N, q=tuple(mods[:-1]))  # all secret_coefficients reads
    s = rlwe.secret_coefficients(ob, pub.seal_context, pub.evaluator, sec._secret_key)
    sv = rlwe.secret_coefficients(ob, pub_v.seal_context, pub_v.evaluator, sec_v._secret_key)
    B, L = bfv.Basis(mods[:-1], N, mods[-1]), len(mods) - 1
    K = B.swkeygen(s, sv, B.uniform(os.urandom(32), L, key=True), rlwe.cbd((L, N)))
    m = np.random.default_rng(3).integers(0, 1 << 20, N).astype(np.uint64)
    ct = sealapi.Ciphertext()
    pub.encryptor.encrypt(seal_io.load_plaintext(pub.seal_context, (0, 0, 0, 0), m, 1.0), ct)
    switched = B.switch(seal_arrays.ciphertext_to_array(ct), K)
    out = sealapi.Plaintext()
    for ctx, key, same in ((pub_v, sec_v, True), (pub, sec, False)):
        sealapi.Decryptor(ctx.seal_context, key._secret_key).decrypt(
            seal_arrays.ciphertext_from_array(ctx.seal_context, ctx.seal_context.first_parms_id(), switched,
                                               ntt_form=False), out)
        got = seal_io.data_array(seal_io.save(out), out.coeff_count(), "pt")
        assert np.array_equal(got, m) == same
