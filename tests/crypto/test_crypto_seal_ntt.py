"""crypto.seal_ntt (the native NTT in SEAL's order) and the refresh's native steps against SEAL's own: the forward
and inverse transforms equal ``seal_arrays.ntt`` / ``inverse_ntt`` (SEAL's ``transform_to/from_ntt``), the native
rescale equals ``Evaluator.rescale_to_next``, the key holder's re-encryption decrypts (SEAL's decryptor at q₀) to the
padded plaintext, and the refresh's pads are uniform in both forms. Real parameters (HERS_CKKS) and the toy ring."""
from __future__ import annotations

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
    dec = sealapi.Decryptor(pub.seal_context, sec._secret_key)
    for t in range(2):
        want = sealapi.Plaintext()
        m = seal_arrays.ciphertext_from_array(pub.seal_context, ref.pid, masked[t], scale=pub.scale)
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
    assert pads.shape == (3, 64, pub.n) and np.array_equal(masked[:, 0, 0], pads.reshape(-1, pub.n))
    assert np.array_equal(masked[:, 1], cts[0, 1][None].repeat(192, axis=0))
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
    assert not np.array_equal(pu, pu2) and np.abs(e).max() <= 24 and e.any()
    coeffs = ref.high.inverse(pu)
    for limb, q in enumerate((ref.q0, ref.p)):
        coeffs[:, :, limb] = (coeffs[:, :, limb].astype(object) + e) % q
    low = ref.low.forward(ref.high.basis.rescale(coeffs.astype(np.uint64)))
    dec = sealapi.Decryptor(pub.seal_context, sec._secret_key)
    for ct in low:
        pt = sealapi.Plaintext()
        dec.decrypt(seal_arrays.ciphertext_from_array(pub.seal_context, ref.pid, ct, scale=pub.scale), pt)
        assert np.abs(pub.encoder.decode_double(pt)).max() < 1e-6


def test_expand_all_equals_expand_a_on_both_paths(keys):
    """The key holder's vectorised expansion of the a halves equals the holder's one-by-one ``expand_a``; with the
    word masks widened (every copy then has words ≥ the prime) each copy takes expand_a's rejection path."""
    pub, _, ref = keys
    seed = bytes(range(32))
    want = np.stack([ref.expand_a(seed, i) for i in range(7)])
    assert np.array_equal(ref.expand_all(seed, 7), want)
    other = CKKSRefresh(pub)
    other._expand_masks = np.full_like(other._expand_masks, np.iinfo(np.uint64).max)
    assert np.array_equal(other.expand_all(seed, 7), want)
