"""crypto.seal_ntt (the native NTT in SEAL's order) and the refresh's native steps against SEAL's own: the forward
and inverse transforms equal ``seal_arrays.ntt`` / ``inverse_ntt`` (SEAL's ``transform_to/from_ntt``), the native
rescale equals ``Evaluator.rescale_to_next``, the key holder's re-encryption decrypts (SEAL's decryptor at q₀) to the
padded plaintext, and the refresh's pads are uniform in both forms. Real parameters (HERS_CKKS) and the toy ring."""
from __future__ import annotations

import struct

import numpy as np
import pytest
import tenseal.sealapi as sealapi

from privface.crypto import seal_arrays
from privface.crypto.ckks_refresh import CKKSRefresh
from privface.crypto.lattice import LatticeParams, generate_lattice_keypair
from privface.crypto.seal_ntt import SealOrderNTT
from privface.protocols.hers import HERS_CKKS

TOY = LatticeParams("ckks-2048-q60-toy", "ckks", 2048, (60, 60), scale_bits=36)


@pytest.fixture(scope="module", params=["toy", "real"])
def keys(request):
    real = request.param == "real"
    pub, sec = generate_lattice_keypair(HERS_CKKS if real else TOY, insecure_test_params=not real)
    return pub, sec, CKKSRefresh(pub)


def _residues(rng, moduli, count, n):
    q = np.array(moduli, dtype=np.uint64)[:, None]
    a = rng.integers(0, 1 << 62, (count, len(moduli), n), dtype=np.uint64) % q
    a[0, :, :3] = q - 1  # the extremes
    a[-1, :, 3:5] = 0
    return a


def test_forward_and_inverse_equal_seals_transforms(keys):
    pub, _, ref = keys
    rng = np.random.default_rng(1)
    for ntt, ctx, ev, pid in ((ref.low, pub.seal_context, pub.evaluator, ref.pid),
                              (ref.high, ref.context, ref.evaluator, ref.top)):
        a = _residues(rng, ntt.moduli, 20, pub.n)
        want = seal_arrays.ntt(ctx, ev, pid, a)
        got = ntt.forward(a)
        assert got.dtype == np.uint64 and got.shape == a.shape
        assert np.array_equal(got, want)
        assert np.array_equal(ntt.inverse(want), seal_arrays.inverse_ntt(ctx, ev, pid, want))
        assert np.array_equal(ntt.inverse(got), a)


def test_a_permuted_prime_order_is_refused(keys):
    """The permutation is read from SEAL and checked: primes that are not the context's cannot be matched."""
    pub, _, ref = keys
    with pytest.raises(Exception, match="not the native|expected shape|SEAL"):
        SealOrderNTT(ref.context, ref.evaluator, ref.top, [ref.p, ref.q0], pub.n)


def test_native_rescale_equals_seals(keys):
    pub, _, ref = keys
    rng = np.random.default_rng(2)
    top = np.stack([_residues(rng, (ref.q0, ref.p), 2, pub.n) for _ in range(6)])  # (6, 2, 2, n) NTT form
    got = ref.rescale(top)
    for i in range(top.shape[0]):
        ct = seal_arrays.ciphertext_from_array(ref.context, ref.top, top[i], scale=pub.scale * ref.p)
        ref.evaluator.rescale_to_next_inplace(ct)
        assert np.array_equal(got[i], seal_arrays.ciphertext_to_array(ct))


def test_reencryption_decrypts_to_the_padded_plaintext(keys):
    """What the key holder returns, brought back to q₀ by SEAL's rescale after a product with P's constant,
    decrypts with SEAL's decryptor to exactly what SEAL decrypts from the masked copy (± the fresh noise)."""
    pub, sec, ref = keys
    vals = np.random.default_rng(3).uniform(-1, 1, pub.n // 2)
    pt = sealapi.Plaintext()
    pub.encoder.encode(vals.tolist(), ref.pid, pub.scale, pt)
    ct = sealapi.Ciphertext()
    pub.encryptor.encrypt(pt, ct)
    cts = seal_arrays.ciphertext_to_array(ct)[None]
    masked, pads = ref.mask(cts, 2)
    (b, seed), = [ref.reencrypt_top(sec._secret_key, masked)]
    assert b.shape == (2, 2, pub.n) and masked.nbytes == 3 * pub.n * 8  # c₁ once: (copies + 1)·n words
    dec = sealapi.Decryptor(pub.seal_context, sec._secret_key)
    for t in range(2):
        want = sealapi.Plaintext()
        copy = np.stack([masked.padded[t, 0], masked.columns[0]])[:, None]
        m = seal_arrays.ciphertext_from_array(pub.seal_context, ref.pid, copy, scale=pub.scale)
        dec.decrypt(m, want)
        top = np.stack([b[t], ref.expand_a(seed, t)])
        unit = sealapi.Plaintext()
        ref.encoder.encode(1.0, ref.top, float(ref.p), unit)  # the constant P at both limbs
        low = ref.rescale(ref.high.mul(top, seal_arrays.plaintext_to_array(unit).reshape(2, pub.n))[None])[0]
        got = sealapi.Plaintext()
        dec.decrypt(seal_arrays.ciphertext_from_array(pub.seal_context, ref.pid, low, scale=pub.scale), got)
        diff = ref.low.inverse((seal_arrays.plaintext_to_array(got) + ref.q0
                                - seal_arrays.plaintext_to_array(want)).reshape(1, 1, pub.n) % np.uint64(ref.q0))
        centred = np.where(diff > ref.q0 // 2, diff.astype(object) - ref.q0, diff.astype(object))
        assert np.abs(centred).max() < 2 ** 12  # the fresh encryption's noise and the rounding only


def test_pads_are_uniform_and_the_first_clean_copy_is_picked(keys):
    pub, _, ref = keys
    cts = np.zeros((64, 2, 1, pub.n), dtype=np.uint64)
    masked, pads = ref.mask(cts, 3)
    assert pads.shape == (3, 64, pub.n) and np.array_equal(masked.padded, pads)
    assert np.array_equal(masked.columns, cts[:, 1, 0])
    r = ref.low.inverse(pads.reshape(-1, 1, pub.n)).astype(np.float64) / ref.q0
    for x in (pads.astype(np.float64) / ref.q0, r):  # both forms uniform on [0, 1): mean ½, variance 1/12
        assert abs(x.mean() - 0.5) < 0.01 and abs(x.var() - 1 / 12) < 0.005
    _, k, pick, r_top, *_ = ref.prepare(pads, np.ones(pub.n // 2))
    assert k == 64 and pick.min() >= 0
    clean = np.all(np.abs(np.where(r > 0.5, r - 1, r)).reshape(3, 64, pub.n) * ref.q0 <= ref.clean, axis=2)
    assert np.array_equal(pick, np.argmax(clean, axis=0))
    assert np.array_equal(r_top[:, 0], pads[pick, np.arange(64)])


def test_encryptions_of_zero_at_the_top_decrypt_to_zero_after_the_rescale(keys):
    """The holder's re-randomisation (pk·u + e at q₀·P, rescaled by P, as SEAL's encrypt_zero does) decrypts with
    SEAL's decryptor to ≈ 0 and differs between calls."""
    pub, sec, ref = keys
    (pu, e), (pu2, _) = ref.zeros_top(3), ref.zeros_top(3)
    assert not np.array_equal(pu, pu2) and e.shape == pu.shape and e.dtype == np.uint64
    signed = [np.where(e[:, :, limb] > q // 2, e[:, :, limb].astype(object) - q, e[:, :, limb]).astype(np.int64)
              for limb, q in enumerate((ref.q0, ref.p))]
    assert np.array_equal(signed[0], signed[1]) and np.abs(signed[0]).max() <= 24 and signed[0].any()
    coeffs = ref.high.inverse(pu)
    for limb, q in enumerate((ref.q0, ref.p)):
        coeffs[:, :, limb] = (coeffs[:, :, limb].astype(object) + e[:, :, limb]) % q
    low = ref.low.forward(ref.high.basis.rescale(coeffs.astype(np.uint64)))
    dec = sealapi.Decryptor(pub.seal_context, sec._secret_key)
    for ct in low:
        pt = sealapi.Plaintext()
        dec.decrypt(seal_arrays.ciphertext_from_array(pub.seal_context, ref.pid, ct, scale=pub.scale), pt)
        assert np.abs(pub.encoder.decode_double(pt)).max() < 1e-6


def _binomial_words(seed: bytes, stream: int, n: int) -> np.ndarray:
    """The spec of the key holder's errors, written here with ``cryptography``'s ChaCha20 (not the native core's):
    stream j's keystream as little-endian words, one per coefficient, η = 24 from two 24-bit fields."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    ks = Cipher(algorithms.ChaCha20(seed, struct.pack("<QQ", 0, stream)), None).encryptor().update(bytes(8 * n))
    w = np.frombuffer(ks, dtype="<u8")
    return (np.bitwise_count(w & np.uint64(0xFFFFFF)).astype(np.int64)
            - np.bitwise_count((w >> np.uint64(24)) & np.uint64(0xFFFFFF)).astype(np.int64))


def test_native_reencryption_equals_the_reference_bit_for_bit(keys):
    """``bfv.Basis.refresh_reencrypt`` (one native pass per copy, c₁ sent once) equals the step written out with
    SEAL-order transforms and numpy: decrypt at q₀, centre, + the η = 24 errors of ChaCha20(seed_e) stream j,
    encrypt at q₀·P with a_j = ``expand_a(seed_a, j)`` — copy j of ciphertext j mod g."""
    pub, sec, ref = keys
    rng = np.random.default_rng(5)
    g, copies, n = 3, 2, pub.n
    cts = _residues(rng, (ref.q0,), 2 * g, n).reshape(g, 2, 1, n)
    masked, _ = ref.mask(cts, copies)
    s = seal_arrays.secret_key_array(sec._secret_key, n, 2)
    seed_a, seed_e = bytes(range(32)), bytes(range(1, 33))
    got = ref.high.basis.refresh_reencrypt(masked.padded.reshape(-1, n), masked.columns, s, ref.high.perm,
                                           seed_a, seed_e)
    q = np.array([ref.q0, ref.p], dtype=object)[:, None]
    for j in range(copies * g):
        c0, c1 = masked.padded[j // g, j % g], masked.columns[j % g]
        w = ref.low.inverse(((c0.astype(object) + c1.astype(object) * s[0].astype(object)) % ref.q0)
                            .astype(np.uint64)[None, None])[0, 0].astype(object)
        v = np.where(w > ref.q0 // 2, w - ref.q0, w) + _binomial_words(seed_e, j, n).astype(object)
        plain = ref.high.forward(np.stack([v % ref.q0, v % ref.p]).astype(np.uint64)[None])[0].astype(object)
        a = ref.expand_a(seed_a, j).astype(object)
        want = ((plain - a * s.astype(object)) % q).astype(np.uint64)
        assert np.array_equal(got[j], want), j


def test_native_reencryption_refuses_what_does_not_fit(keys):
    pub, sec, ref = keys
    n = pub.n
    s = seal_arrays.secret_key_array(sec._secret_key, n, 2)
    ok = np.zeros((4, n), dtype=np.uint64)
    bad_perm = ref.high.perm.copy()
    bad_perm[0, 0] = bad_perm[0, 1]
    for args in ((np.zeros((3, n), dtype=np.uint64), np.zeros((2, n), dtype=np.uint64), s, ref.high.perm),
                 (np.full((4, n), ref.q0, dtype=np.uint64), ok[:2], s, ref.high.perm),
                 (ok, ok[:2], s, bad_perm)):
        with pytest.raises(ValueError):
            ref.high.basis.refresh_reencrypt(*args, bytes(32), bytes(32))
    with pytest.raises(Exception, match="residue|copies|expected"):
        ref.reencrypt_top(sec._secret_key, (np.full((1, 1, n), 2 ** 63, dtype=np.uint64), ok[:1]))

