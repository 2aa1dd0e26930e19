"""The native §4.5 product (native/src/bfv/verifier_key.rs) against Python integers as the oracle: the transform,
the centred lift from p₁ = q₀q₁ to Q = q₀q₁q₂P, the verifier's rows, ĉ₀·R₀ + ĉ₁·R₁, PackLWEs (``pack``: the trace
of its items, decrypted with Python integers) and ``packed_distances`` decrypted at q' = 2^40 to the products —
on random inputs at a small N, and on SEAL's cryptomask primes; SEAL decrypts a native pack of its own
ciphertexts."""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
import tenseal.sealapi as sealapi
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto import rlwe, seal_arrays, seal_io
from privface.crypto.lattice import generate_lattice_keypair
from privface.crypto.native import ext
from privface.protocols.cryptomask.params import CM_BFV_TOY

bfv = ext.bfv
few = settings(max_examples=6, deadline=None)
seeds = st.integers(0, 2**32 - 1)


def primes(n):
    return bfv.ntt_primes(27, n, 3) + bfv.ntt_primes(28, n, 1)


def negacyclic(a, b):
    """Exact integer negacyclic product of two integer sequences."""
    n = len(a)
    out = [0] * n
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                if i + j < n:
                    out[i + j] += x * y
                else:
                    out[i + j - n] -= x * y
    return out


def crt(res, mods):
    """Residues (L,) → the integer in [0, Π mods)."""
    Q = 1
    for p in mods:
        Q *= p
    return sum(int(r) * (Q // p) * pow(Q // p, -1, p) for r, p in zip(res, mods)) % Q


@pytest.fixture(scope="module")
def small():
    n = 64
    return bfv.VerifierKeyProduct(primes(n), n), primes(n), n


@few
@given(seeds)
def test_transform_products_and_lift_match_integers(small, seed):
    pr, p, n = small
    rng = np.random.default_rng(seed)
    a = np.stack([rng.integers(0, q, n) for q in p]).astype(np.uint64)
    assert np.array_equal(pr.inverse(pr.forward(a)), a)
    low = np.stack([rng.integers(0, p[0], (2, 2, n)), rng.integers(0, p[1], (2, 2, n))], axis=2).astype(np.uint64)
    g = pr.lift(low)  # two slices of one stack
    back = pr.inverse(g)
    p1 = p[0] * p[1]
    for sl in range(2):
        for h in range(2):
            for j in range(n):
                x = crt(low[sl, h, :, j], p[:2])
                x = x - p1 if x > p1 // 2 else x  # centred
                assert [int(back[sl, h, li, j]) for li in range(4)] == [x % q for q in p]
    b = np.stack([a, a[:, ::-1], np.roll(a, 1, axis=1), a, a[:, ::-1]]).astype(np.uint64)
    rows = pr.rows(pr.forward(b).astype(np.uint32), os.urandom(32))
    out = pr.product(g[None], rows)
    rc = pr.inverse(rows)  # (5, 2, 4, n) coefficient form
    for li, q in enumerate(p):
        for half in range(2):
            want = [0] * n
            for sl in range(2):  # Σ_σ ĉ₀^σ·R₀^σ + ĉ₁^σ·R₁^σ
                c = [[int(v) for v in back[sl, h, li]] for h in range(2)]
                for h in range(2):
                    row = [int(v) for v in rc[2 * sl + h, half, li]]
                    want = [(w + x) % q for w, x in zip(want, negacyclic(c[h], row))]
            assert [int(v) for v in out[0, half, li]] == want


def test_products_of_many_slices_fold_in_64_bits(small):
    """37 slices (more than two 64-bit folds of 16) of residues near 29-bit p, the largest products (74 of them
    would overflow 64 bits): the product in NTT form equals Σ_σ ĉ₀^σ·R₀^σ + ĉ₁^σ·R₁^σ mod p, coefficient by
    coefficient."""
    _, _, n = small
    p = [int(q) for q in bfv.ntt_primes(29, n, 4)]
    pr = bfv.VerifierKeyProduct(p, n)
    rng = np.random.default_rng(11)
    S = 37
    near = lambda *shape: np.stack([rng.integers(q - 50, q, shape + (n,)) for q in p], axis=-2)  # noqa: E731
    g = near(S, 2).astype(np.uint32)  # (S, 2, 4, n), NTT form
    rows = pr.rows(near(2 * S + 1).astype(np.uint32), os.urandom(32))  # (2S + 1, 2, 4, n)
    got = pr.forward(pr.product(g[None], rows)[0])
    for li, q in enumerate(p):
        for half in range(2):
            want = sum(g[sl, h, li].astype(object) * rows[2 * sl + h, half, li].astype(object)
                       for sl in range(S) for h in range(2)) % q
            assert [int(v) for v in got[half, li]] == [int(v) for v in want]


@few
@given(seeds)
def test_rows_decrypt_and_distances_carry_the_product(small, seed):
    """Rows under s decrypt to p₂·m_σ, p₂·m_σ·s per slice and 0 plus small errors; a gallery stack of two slices
    A_σ at p₁ times the rows, re-randomised and switched to 2^40, decrypts to round(2^40·(Σ_σ A_σ·m_σ mod t)/t)
    within a small error."""
    pr, p, n = small
    rng = np.random.default_rng(seed)
    t, w = 1 << 20, 40
    s = rng.integers(-1, 2, n).astype(np.int64)
    m = np.zeros((2, n), np.int64)
    m[:, :8] = rng.integers(-255, 256, (2, 8))
    key = os.urandom(32)
    rows = pr.rows(pr.encrypt_rows(s, m, key, os.urandom(32)), key)
    rc = pr.inverse(rows)
    Q = p[0] * p[1] * p[2] * p[3]
    p2, p1 = p[2] * p[3], p[0] * p[1]
    msgs = []
    for sl in range(2):
        ms = negacyclic([int(v) for v in m[sl]], [int(v) for v in s])
        msgs += [[p2 * int(v) for v in m[sl]], [p2 * v for v in ms]]
    assert rows.shape == (5, 2, 4, n)
    for r, msg in enumerate(msgs + [[0] * n]):
        b = [crt(rc[r, 0, :, j], p) for j in range(n)]
        a = [crt(rc[r, 1, :, j], p) for j in range(n)]
        ph = [(x + y) % Q for x, y in zip(b, negacyclic(a, [int(v) for v in s]))]
        err = [((v - mm + Q // 2) % Q) - Q // 2 for v, mm in zip(ph, msg)]
        assert max(abs(e) for e in err) < 64
    # gallery stacks of two slices under s at p₁: ĉ₀ = −ĉ₁·s + round(p₁·A/t) + e, eleven of them: two packs of d = 8
    # (the second padded); coefficient m·d + r of pack g carries coefficient m·d + d − 1 of Σ_σ A_{g·d+r,σ}·m_σ
    d, k = 8, 11
    As = rng.integers(-255, 256, (k, 2, n))
    low = []
    for A in As.reshape(2 * k, n):
        c1 = [int(v) for v in rng.integers(0, p1, n)]
        c0 = [(x + round(p1 * int(a) / t) + int(e)) % p1
              for x, a, e in zip(negacyclic([-v for v in c1], [int(v) for v in s]), A, rng.integers(-3, 4, n))]
        low.append([[[v % q for v in c] for q in p[:2]] for c in (c0, c1)])
    keys = pr.galois_keys(s, d, os.urandom(32), os.urandom(32))
    g = pr.lift(np.array(low, dtype=np.uint64)).reshape(k, 2, 2, 4, n)
    d1, d0 = pr.packed_distances([g[:3], g[3:]], rows, keys, d, os.urandom(32), 0, w)  # two parts, one pack across
    assert d1.shape == d0.shape == (2, n)
    for g in range(2):
        c1s = negacyclic([int(v) for v in d1[g]], [int(v) for v in s])
        phase = [(int(x) + y) % (1 << w) for x, y in zip(d0[g], c1s)]
        for r in range(d):
            prod = [0] * n
            if g * d + r < k:
                for sl in range(2):
                    part = negacyclic([int(v) for v in As[g * d + r, sl]], [int(v) for v in m[sl]])
                    prod = [x + y for x, y in zip(prod, part)]
            for mm in range(n // d):
                want = ((prod[mm * d + d - 1] % t) << w) // t
                got = phase[mm * d + r]
                diff = ((got - want + (1 << (w - 1))) % (1 << w)) - (1 << (w - 1))
                assert abs(diff) < 1 << (w - 20 - 12), (g, r, mm, diff)  # below 2^-12 of a plaintext step


@few
@given(seeds, st.sampled_from([2, 4, 16]))
def test_pack_is_the_trace_of_the_items(small, seed, d):
    """PackLWEs on RLWE ciphertexts at q₀q₁ of random plaintexts M_r (every coefficient random, so nothing but
    the trace can cancel the rest): coefficient m·d + r of the pack decrypts to d·M_r[m·d] (mod t)."""
    pr, p, n = small
    rng = np.random.default_rng(seed)
    t, q = 1 << 20, p[0] * p[1]
    s = [int(v) for v in rng.integers(-1, 2, n)]
    keys = pr.galois_keys(np.array(s, np.int64), d, os.urandom(32), os.urandom(32))
    M = rng.integers(0, t, (2 * d, n))
    items = []
    for msg in M:
        c1 = [int(v) for v in rng.integers(0, q, n)]
        c0 = [(x + (q // t) * int(a) + int(e)) % q
              for x, a, e in zip(negacyclic([-v for v in c1], s), msg, rng.integers(-3, 4, n))]
        items.append([[[v % pi for v in c] for pi in p[:2]] for c in (c0, c1)])
    packs = pr.pack(np.array(items, dtype=np.uint32), d, keys)
    assert packs.shape == (2, 2, 2, n)
    for g in range(2):
        c0 = [crt(packs[g, 0, :, j], p[:2]) for j in range(n)]
        c1 = [crt(packs[g, 1, :, j], p[:2]) for j in range(n)]
        phase = [(x + y) % q for x, y in zip(c0, negacyclic(c1, s))]
        got = [((v * t + q // 2) // q) % t for v in phase]
        want = [0] * n
        for r in range(d):
            for mm in range(n // d):
                want[mm * d + r] = d * int(M[g * d + r, mm * d]) % t
        assert got == want


def _phase_oracle(pr, p, c0, c1, s, bits):
    """The verifier's numpy phase before the native one: NTT over all four primes, CRT of q₀ and q₁."""
    pv = np.array(p, dtype=np.uint64)[:, None]
    x = pr.forward(np.ascontiguousarray(c1[:, None, :].astype(np.uint64) % pv))
    s_hat = pr.forward(np.mod(s[None, :], pv.astype(np.int64)).astype(np.uint64))
    y = pr.inverse(((x.astype(np.uint64) * s_hat) % pv).astype(np.uint32))
    q0, q1 = p[0], p[1]
    a, b = y[:, 0], y[:, 1]
    dlt = ((b + np.uint64(q1) - a % np.uint64(q1)) % np.uint64(q1)) * np.uint64(pow(q0, -1, q1)) % np.uint64(q1)
    v = (a + np.uint64(q0) * dlt).astype(np.int64)
    v[v > (q0 * q1) // 2] -= q0 * q1
    return (c0.astype(np.uint64) + v.view(np.uint64)) & np.uint64((1 << bits) - 1)


@few
@given(seeds, st.sampled_from([8, 20, 32]))
def test_phase_is_c0_plus_c1_times_s_exactly(small, seed, bits):
    """Alg. 2 line 13 at q' = 2^bits: the native phase equals c'₀ + c'₁·s_v mod 2^bits from exact integers, and the
    numpy code it replaced, on random packs, including c'₁ at the top of its range."""
    pr, p, n = small
    rng = np.random.default_rng(seed)
    g = 3
    c0 = rng.integers(0, 1 << bits, (g, n), dtype=np.uint64).astype(np.uint32)
    c1 = rng.integers(0, 1 << bits, (g, n), dtype=np.uint64).astype(np.uint32)
    c1[0] = (1 << bits) - 1
    s = rng.integers(-1, 2, n).astype(np.int64)
    s_hat = pr.forward(np.mod(s[None, :], np.array(p, dtype=np.int64)[:, None]).astype(np.uint64))[:2]
    got = pr.phase(c0, c1, s_hat, bits)
    assert got.dtype == np.uint32 and got.shape == (g, n)
    for i in range(g):
        exact = [(int(a) + v) % (1 << bits) for a, v in zip(c0[i], negacyclic([int(x) for x in c1[i]], list(s)))]
        assert got[i].tolist() == exact
    assert np.array_equal(got.astype(np.uint64), _phase_oracle(pr, p, c0, c1, s, bits))


def test_mask_shares_pad_c0_and_keep_the_cs_share():
    """Alg. 2 line 14 with §4.5's compressed c₀: the masked c'₀ + u' is a multiple of 2^k₀ (k₀ = shift − margin + 1),
    sent as its high bits; u' keeps its fraction out of [½ − 2^-margin, ½ + 2^-margin) of a step, d₀ = −⌊t·u'/q'⌉
    mod t; reproducible from the seed, fresh across seeds; the band is exactly 2^k₀ wide, so every c₀ has exactly one
    refused multiple per step — with one bit fewer sent (one multiple per step) half the c₀ would have none."""
    wire, t_bits, margin = 32, 20, 2
    shift, half, near = wire - t_bits, 1 << (wire - t_bits - 1), 1 << (wire - t_bits - margin)
    k0 = shift - margin + 1
    rng = np.random.default_rng(5)
    c0 = rng.integers(0, 1 << wire, (40, 4096), dtype=np.uint64)
    seed = os.urandom(32)
    m, d0 = bfv.mask_shares(c0, seed, wire, t_bits, margin)
    assert m.dtype == np.uint64 and d0.dtype == np.uint32 and m.shape == d0.shape == c0.shape
    assert int(m.max()) < 1 << (wire - k0) and int(m.max()) >= 1 << (wire - k0 - 1)
    u = ((m << np.uint64(k0)) - c0) & np.uint64((1 << wire) - 1)
    frac = (u & np.uint64((1 << shift) - 1)).astype(np.int64)
    assert not np.any((frac >= half - near) & (frac < half + near))
    assert np.array_equal(d0, (-(((u + np.uint64(half)) >> np.uint64(shift)).astype(np.int64))) % (1 << t_bits))
    top = (u >> np.uint64(shift)).astype(np.int64).ravel()  # the step of u': uniform over 2^t_bits values
    assert abs(np.bincount(top % 16, minlength=16) / top.size - 1 / 16).max() < 0.01
    again = bfv.mask_shares(c0, seed, wire, t_bits, margin)
    assert np.array_equal(again[0], m) and np.array_equal(again[1], d0)
    assert not np.array_equal(bfv.mask_shares(c0, os.urandom(32), wire, t_bits, margin)[0], m)
    assert not np.array_equal(m[0], m[1] - c0[1] + c0[0])  # rows use different streams

    def refused(step_bits: int) -> np.ndarray:  # multiples of 2^step_bits per step whose fraction is in the band
        js = np.arange(1 << (shift - step_bits), dtype=np.int64)[:, None]
        f = ((js << step_bits) - c0[0].astype(np.int64)[None, :]) % (1 << shift)
        return ((f >= half - near) & (f < half + near)).sum(axis=0)

    assert np.all(refused(k0) == 1)  # the chosen width: one of 2^(margin − 1) refused, always
    assert abs(np.mean(refused(k0 + 1) == 1) - 0.5) < 0.05  # one bit fewer: no choice left for half of them
    with pytest.raises(ValueError, match="below"):
        bfv.mask_shares(np.full((1, 8), 1 << 32, np.uint64), seed, wire, t_bits, margin)
    with pytest.raises(ValueError, match="margin"):
        bfv.mask_shares(c0, seed, wire, t_bits, 12)
    with pytest.raises(ValueError, match="margin"):
        bfv.mask_shares(c0, seed, wire, t_bits, 1)  # a band of a whole step: nothing to draw
    with pytest.raises(ValueError, match="seed"):
        bfv.mask_shares(c0, b"short", wire, t_bits, margin)


def test_bad_inputs_are_errors(small):
    pr, p, n = small
    with pytest.raises(ValueError):
        bfv.VerifierKeyProduct(p[:3], n)
    with pytest.raises(ValueError):
        bfv.VerifierKeyProduct([p[0], p[0], p[2], p[3]], n)
    with pytest.raises(ValueError, match="prime"):
        pr.rows(np.full((3, 4, n), p[0], np.uint32), os.urandom(32))
    with pytest.raises(ValueError):
        pr.rows(np.zeros((3, 4, n), np.uint32), b"short")
    with pytest.raises(ValueError, match="prime"):
        pr.lift(np.full((1, 2, 2, n), p[1], np.uint64))
    keys = pr.galois_keys(np.zeros(n, np.int64), 8, os.urandom(32), os.urandom(32))
    g, rows = np.zeros((1, 1, 2, 4, n), np.uint32), np.zeros((3, 2, 4, n), np.uint32)
    with pytest.raises(ValueError, match="2S"):
        pr.rows(np.zeros((4, 4, n), np.uint32), os.urandom(32))
    with pytest.raises(ValueError, match="gallery"):  # two slices' rows, one-slice stacks
        pr.packed_distances([g], np.zeros((5, 2, 4, n), np.uint32), keys, 8, os.urandom(32), 0, 32)
    for d in (3, 1, n):  # not a power of two in [2, N/2]
        with pytest.raises(ValueError, match="power of two"):
            pr.packed_distances([g], rows, keys, d, os.urandom(32), 0, 32)
    with pytest.raises(ValueError, match="Galois keys"):
        pr.packed_distances([g], rows, keys[:-1], 8, os.urandom(32), 0, 32)
    with pytest.raises(ValueError, match="prime"):
        pr.packed_distances([g], rows, np.full_like(keys, p[0]), 8, os.urandom(32), 0, 32)
    with pytest.raises(ValueError, match="ternary"):
        pr.galois_keys(np.full(n, 2, np.int64), 8, os.urandom(32), os.urandom(32))
    with pytest.raises(ValueError, match="prime"):
        pr.pack(np.full((8, 2, 2, n), p[0], np.uint32), 8, keys)
    z, s_hat = np.zeros((2, n), np.uint32), np.zeros((2, n), np.uint32)
    with pytest.raises(ValueError, match="below 2"):
        pr.phase(z, np.full((2, n), 1 << 20, np.uint32), s_hat, 20)
    with pytest.raises(ValueError, match="expected"):
        pr.phase(z, z[:1], s_hat, 32)
    with pytest.raises(ValueError, match="prime"):
        pr.phase(z, z, np.full((2, n), p[0], np.uint32), 32)
    with pytest.raises(ValueError, match="wire_bits"):
        pr.phase(z, z, s_hat, 33)


def test_seal_decrypts_a_native_pack():
    """SEAL encrypts 2·d plaintexts under pk_v and drops them to q₀q₁; the native PackLWEs packs each d of them
    with Galois keys of SEAL's sk_v; SEAL's Decryptor with sk_v reads d·M_r[m·d] at coefficient m·d + r."""
    pub, sec = generate_lattice_keypair(CM_BFV_TOY, insecure_test_params=True)
    n, t, d = CM_BFV_TOY.poly_modulus_degree, CM_BFV_TOY.plain_modulus, 16
    mods = [m.value() for m in pub.seal_context.key_context_data().parms().coeff_modulus()]
    pr = bfv.VerifierKeyProduct(mods, n)
    basis = SimpleNamespace(L=3, n=n, q=tuple(mods[:3]))  # what secret_coefficients reads
    s = rlwe.secret_coefficients(basis, pub.seal_context, pub.evaluator, sec._secret_key).astype(np.int64)
    keys = pr.galois_keys(s, d, os.urandom(32), os.urandom(32))
    M = np.random.default_rng(4).integers(0, t, (2 * d, n)).astype(np.uint64)
    low = pub.seal_context.first_context_data().next_context_data().parms_id()
    items = []
    for msg in M:
        ct = sealapi.Ciphertext()
        pub.encryptor.encrypt(seal_io.load_plaintext(pub.seal_context, (0, 0, 0, 0), msg, 1.0), ct)
        pub.evaluator.mod_switch_to_next_inplace(ct)  # q₀q₁q₂ → q₀q₁
        items.append(seal_arrays.ciphertext_to_array(ct))
    packs = pr.pack(np.array(items, dtype=np.uint32), d, keys)
    out = sealapi.Plaintext()
    for g in range(2):
        sealapi.Decryptor(pub.seal_context, sec._secret_key).decrypt(
            seal_arrays.ciphertext_from_array(pub.seal_context, low, packs[g].astype(np.uint64), ntt_form=False), out)
        got = seal_io.data_array(seal_io.save(out), out.coeff_count(), "pt")
        want = np.zeros(n, dtype=np.uint64)
        for r in range(d):
            want[r::d] = (d * M[g * d + r, ::d]) % t
        assert np.array_equal(np.pad(got, (0, n - len(got))), want)


def test_distance_steps_count_packed_distances_and_reset(small):
    """``distance_steps`` (the bench's profile of the CS's distances): its six steps, each positive after a
    ``packed_distances`` call of two packs (the pack and its key switches' NTTs included), all zero when asked again."""
    pr, p, n = small
    rng = np.random.default_rng(5)
    d, k, S = 8, 11, 2
    s = rng.integers(-1, 2, n).astype(np.int64)
    key = os.urandom(32)
    rows = pr.rows(pr.encrypt_rows(s, rng.integers(-9, 10, (S, n)), key, os.urandom(32)), key)
    low = np.stack([rng.integers(0, q, (k * S, 2, n)) for q in p[:2]], axis=2).astype(np.uint64)
    g = pr.lift(low).reshape(k, S, 2, 4, n)
    keys = pr.galois_keys(s, d, os.urandom(32), os.urandom(32))
    bfv.distance_steps()
    pr.packed_distances([g], rows, keys, d, os.urandom(32), 0, 32)
    steps = dict(bfv.distance_steps())
    assert list(steps) == ["products_mac", "products_intt", "drop", "pack", "pack_ntt", "finish"]
    assert all(v > 0 for v in steps.values()), steps
    assert steps["pack_ntt"] < steps["pack"]
    assert all(v == 0 for _, v in bfv.distance_steps())
