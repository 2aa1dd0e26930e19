"""idface (seed 003 §4): transform, Encode/Decode, CKKS and Paillier database encryption, two-server identify.

Decoded inner products must equal the plaintext ⟨T_α(x), T_β(y)⟩ for every enrolled template, and the
identification answer must equal the plaintext one. Toy lattice/Paillier sizes only behind
insecure_test_params; the ``realsize`` tests run the real 128-bit CKKS and 2048-bit Paillier parameters.
"""
import numpy as np
import pytest
import tenseal.sealapi as sealapi
from hypothesis import given, settings
from hypothesis import strategies as st

from privface.crypto import seal_arrays
from privface.crypto.lattice import CKKS, CKKS_128, LatticeParams, generate_lattice_keypair
from privface.crypto.paillier import generate_paillier_keypair
from privface.errors import CryptoError, ProtocolError, TemplateError
from privface.protocols import catalogue
from privface.protocols.hers import CKKSScores, KeyServer, LocalServer, identify
from privface.protocols.idface import (
    IDFACE_CKKS,
    PARAMETER_SETS,
    IDFaceCKKS,
    IDFaceCKKSKey,
    IDFacePaillier,
    IDFacePaillierKey,
    IDFaceParams,
    PaillierScores,
    decode,
    encode,
    plaintext_scores,
    separate,
    t_alpha,
)
from privface.protocols.idface.ckks import LIFT_NOISE_BOUND, NOISE_BITS, NOISE_BOUND

TOY_CKKS = LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36)
rng = np.random.default_rng(7)


def unit(n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def noisy(x, sigma=0.4):
    y = x + sigma * rng.standard_normal(x.shape) / np.sqrt(x.size)
    return y / np.linalg.norm(y)


# ------------------------------------------------------------------ transform and encoding
def test_t_alpha_keeps_signs_of_the_alpha_largest():
    x = unit(20, 128)
    z = t_alpha(x, 85)
    assert z.dtype == np.int8 and set(np.unique(z)) <= {-1, 0, 1}
    assert np.all((z != 0).sum(axis=1) == 85)
    for row, zr in zip(x, z):
        kept = np.abs(row[zr != 0]).min()
        assert kept >= np.abs(row[zr == 0]).max()
        assert np.all(np.sign(row[zr != 0]) == zr[zr != 0])


def test_t_alpha_refuses_bad_input():
    with pytest.raises(TemplateError):
        t_alpha(unit(2, 8), 9)
    with pytest.raises(TemplateError):
        t_alpha(np.array([[np.nan, 1.0]]), 1)
    with pytest.raises(TemplateError):
        t_alpha(np.zeros((2, 2, 2)), 1)


def test_separation_recombines():
    z = t_alpha(unit(5, 64), 40)
    plus, minus = separate(z)
    assert np.array_equal(plus.astype(int) - minus.astype(int), z)
    assert not np.any(plus & minus)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 342), st.integers(1, 7), st.integers(0, 2**31))
def test_encode_decode_roundtrip_with_sums(base, m, seed):
    if base ** m >= 1 << 63:
        return
    r = np.random.default_rng(seed)
    parts = r.integers(0, 2, (base - 1, m, 9))  # at most base − 1 binary vectors summed: no carry
    total = sum(encode(p, base) for p in parts)
    assert np.array_equal(decode(total, base, m), parts.sum(axis=0))


def test_parameter_sets_and_templates_per_slot():
    assert [IDFaceParams.for_dim(512, b).templates_per_slot(2047) for b in (63, 127, 341)] == [341, 292, 243]
    assert [IDFaceParams.for_dim(512, b).templates_per_slot(44) for b in (63, 127, 341)] == [7, 6, 5]
    assert IDFaceParams.for_dim(128).alpha == 85 and IDFaceParams.for_dim(128).beta == 15
    with pytest.raises(TemplateError):
        IDFaceParams.for_dim(512, 64)
    with pytest.raises(TemplateError):
        IDFaceParams.for_dim(100)
    # the lift dimensions (test_idface_lift.py): α = ⌊2D/3⌋, p = α + 1 at β = α → 4 templates per 44-bit slot
    assert [IDFaceParams.for_dim(128, lift=D).templates_per_slot(44) for D in (1024, 2048)] == [4, 4]


# ------------------------------------------------------------------ CKKS
@pytest.fixture(scope="module")
def toy_ckks():
    return generate_lattice_keypair(TOY_CKKS, insecure_test_params=True)


def deploy(scheme, key_scheme, ids, x, tau):
    local = LocalServer(scheme)
    local.enrol(ids, x)
    return local, KeyServer(key_scheme, tau)


@pytest.mark.parametrize("dim,beta", [(128, 15), (512, 63)])
def test_ckks_scores_exact_and_answers_equal_plaintext(toy_ckks, dim, beta):
    pub, sec = toy_ckks
    params = IDFaceParams.for_dim(dim, beta)
    scheme = IDFaceCKKS(pub, params)
    n = scheme.capacity + 300 if dim == 128 else 150  # d = 128: a partial, a full and a partial block
    gallery = unit(n, dim)
    local = LocalServer(scheme)
    split = 200 if dim == 128 else n  # two enrolment calls → a partial first block
    local.enrol([f"id{i}" for i in range(split)], gallery[:split])
    if split < n:
        local.enrol([f"id{i}" for i in range(split, n)], gallery[split:])
    assert len(local.blocks) == (3 if dim == 128 else 1)
    key = KeyServer(IDFaceCKKSKey(sec, params), tau=beta // 2)
    g = t_alpha(gallery, params.alpha)
    for probe in (noisy(gallery[5]), noisy(gallery[-1]), unit(1, dim)[0]):
        ref = plaintext_scores(g, t_alpha(probe, beta))
        assert np.array_equal(key.secret.decrypt_scores(local.identify_request(probe)), ref)
        best = int(np.argmax(ref))
        assert identify(local, key, probe) == (f"id{best}" if ref[best] >= key.tau else None)
    assert identify(local, key, gallery[-1]) == f"id{len(gallery) - 1}"
    assert identify(local, KeyServer(key.secret, tau=beta + 1), gallery[-1]) is None  # above any score: reject


def test_ckks_refuses_tampered_messages(toy_ckks):
    pub, sec = toy_ckks
    params = IDFaceParams.for_dim(128)
    scheme = IDFaceCKKS(pub, params)
    local, key = deploy(scheme, IDFaceCKKSKey(sec, params), ["a", "b"], unit(2, 128), 5)
    msg = local.identify_request(unit(1, 128)[0])
    bad = msg.arrays.copy()
    bad[0, 0, 0, 0, 0] = np.uint64(scheme.q)
    for m in (CKKSScores(bad, msg.counts), CKKSScores(msg.arrays[:, :1], msg.counts),
              CKKSScores(msg.arrays.astype(np.int64), msg.counts), CKKSScores(msg.arrays, [scheme.capacity + 1]),
              "not a message"):
        with pytest.raises(ProtocolError):
            key.decide(m)
    _, other = generate_lattice_keypair(TOY_CKKS, insecure_test_params=True)
    with pytest.raises(ProtocolError):  # decrypting under another key leaves the encoding range
        IDFaceCKKSKey(other, params).decrypt_scores(msg)
    with pytest.raises(TemplateError):
        local.identify_request(unit(1, 64)[0])


def test_ckks_refuses_toy_or_foreign_parameters():
    with pytest.raises(CryptoError):
        generate_lattice_keypair(TOY_CKKS)  # toy sizes only behind insecure_test_params
    pub, _ = generate_lattice_keypair(CKKS_128)  # 128-bit but three data primes: not the IDFace parameter set
    with pytest.raises(TemplateError):
        IDFaceCKKS(pub, IDFaceParams.for_dim(128))


@pytest.mark.realsize
def test_ckks_real_parameters_noise_bound_and_exact_scores():
    """IDFACE_CKKS: the error of a sum of 341 (the largest β of the paper's sets) fresh encryptions stays within
    NOISE_BOUND, a sum of 1365 (β of the lift D = 2048) within LIFT_NOISE_BOUND < Δ/2, and d = 128, β = 85
    decodes exactly."""
    pub, sec = generate_lattice_keypair(IDFACE_CKKS)
    assert IDFACE_CKKS.security_bits >= 128
    pid = pub.seal_context.first_parms_id()
    q = pub._levels[tuple(pid)][0]
    assert max(max(b) for _, b in PARAMETER_SETS.values()) == 1365
    for count, bound in ((341, NOISE_BOUND), (1365, LIFT_NOISE_BOUND)):
        zeros = seal_arrays.encryptions_of_zero(pub.encryptor, count)
        acc = np.empty_like(zeros[0])
        seal_arrays.lazy_sum(list(zeros), np.array([[q]], dtype=np.uint64), acc)
        ct = seal_arrays.ciphertext_from_array(pub.seal_context, pid, acc)
        pt = sealapi.Plaintext()
        sealapi.Decryptor(pub.seal_context, sec._secret_key).decrypt(ct, pt)
        e = seal_arrays.inverse_ntt(pub.seal_context, pub.evaluator, pid,
                                     seal_arrays.plaintext_to_array(pt).reshape(1, 1, -1))
        e = e.ravel().astype(object)
        assert max(min(int(v), q - int(v)) for v in e) <= bound < 1 << (NOISE_BITS - 1)

    params = IDFaceParams.for_dim(128, 85)
    gallery = unit(40, 128)
    local, key = deploy(IDFaceCKKS(pub, params), IDFaceCKKSKey(sec, params), [str(i) for i in range(40)], gallery, 30)
    probe = noisy(gallery[11])
    assert np.array_equal(key.secret.decrypt_scores(local.identify_request(probe)),
                          plaintext_scores(t_alpha(gallery, 85), t_alpha(probe, 85)))
    assert identify(local, key, probe) == "11"


def test_seal_ntt_roundtrip(toy_ckks):
    pub, _ = toy_ckks
    pid = pub.seal_context.first_parms_id()
    q = pub._levels[tuple(pid)][0]
    polys = rng.integers(0, 1 << 40, (20, 1, pub.n), dtype=np.uint64)
    polys[3] = 0
    f = seal_arrays.ntt(pub.seal_context, pub.evaluator, pid, polys)
    assert np.all(f < q) and not np.array_equal(f, polys)
    assert np.array_equal(seal_arrays.inverse_ntt(pub.seal_context, pub.evaluator, pid, f), polys)


@pytest.mark.parametrize("real", [False, True])
def test_array_decryption_equals_seal_decryptor(toy_ckks, real):
    """seal_arrays.decrypt_arrays (c0 + c1·s mod q in numpy, long-double mulmod) = SEAL's Decryptor."""
    pub, sec = generate_lattice_keypair(IDFACE_CKKS) if real else toy_ckks
    ctx, pid = pub.seal_context, pub.seal_context.first_parms_id()
    levels = pub._levels[tuple(pid)]
    moduli = np.array(levels, dtype=np.uint64)[:, None]
    cts = seal_arrays.encryptions_of_zero(pub.encryptor, 4)
    cts[:, 0] = (cts[:, 0] + rng.integers(0, 1 << 50, cts[:, 0].shape, dtype=np.uint64)) % moduli
    cts[3, 1] = moduli - 1  # extreme residues
    mine = seal_arrays.decrypt_arrays(cts, seal_arrays.secret_key_array(sec._secret_key, pub.n, len(levels)), moduli)
    decryptor = sealapi.Decryptor(ctx, sec._secret_key)
    for ct, got in zip(cts, mine):
        pt = sealapi.Plaintext()
        decryptor.decrypt(seal_arrays.ciphertext_from_array(ctx, pid, ct), pt)
        assert np.array_equal(seal_arrays.plaintext_to_array(pt).reshape(got.shape), got)
    q = np.uint64(levels[0])
    a, b = rng.integers(0, int(q), 5000, dtype=np.uint64), rng.integers(0, int(q), 5000, dtype=np.uint64)
    assert ([int(x) for x in seal_arrays.mulmod(a, b, np.full_like(a, q))]
            == [int(x) * int(y) % int(q) for x, y in zip(a, b)])


# ------------------------------------------------------------------ Paillier
@pytest.fixture(scope="module")
def toy_paillier():
    return generate_paillier_keypair(512, insecure_test_params=True)


@pytest.mark.parametrize("beta,m", [(31, 102), (85, 79)])  # p = 32: ⌊511/5⌋; p = 86: 86^79 < 2^511 < 86^80
def test_paillier_scores_exact_and_answers_equal_plaintext(toy_paillier, beta, m):
    pk, sk = toy_paillier
    params = IDFaceParams.for_dim(128, beta)
    scheme = IDFacePaillier(pk, params)
    assert scheme.m == m
    gallery = unit(230, 128)
    local, key = deploy(scheme, IDFacePaillierKey(sk, params), [str(i) for i in range(230)], gallery, 12)
    assert len(local.blocks) == 3
    g = t_alpha(gallery, params.alpha)
    for probe in (noisy(gallery[3]), noisy(gallery[229]), unit(1, 128)[0]):
        ref = plaintext_scores(g, t_alpha(probe, params.beta))
        assert np.array_equal(key.secret.decrypt_scores(local.identify_request(probe)), ref)
        best = int(np.argmax(ref))
        assert identify(local, key, probe) == (str(best) if ref[best] >= key.tau else None)


def test_paillier_refuses_tampered_messages(toy_paillier):
    pk, sk = toy_paillier
    params = IDFaceParams.for_dim(128)
    local, key = deploy(IDFacePaillier(pk, params), IDFacePaillierKey(sk, params), ["a"], unit(1, 128), 5)
    msg = local.identify_request(unit(1, 128)[0])
    for m in (PaillierScores([(0, 1)], msg.counts), PaillierScores([(pk.nsquare, 1)], msg.counts),
              PaillierScores(msg.values, [0]), PaillierScores(msg.values * 2, msg.counts)):
        with pytest.raises(ProtocolError):
            key.decide(m)


@pytest.mark.realsize
def test_paillier_2048_exact():
    pk, sk = generate_paillier_keypair(2048)
    params = IDFaceParams.for_dim(128, 15)
    gallery = unit(8, 128)
    local, key = deploy(IDFacePaillier(pk, params), IDFacePaillierKey(sk, params), list("abcdefgh"), gallery, 8)
    probe = noisy(gallery[6])
    assert np.array_equal(key.secret.decrypt_scores(local.identify_request(probe)),
                          plaintext_scores(t_alpha(gallery, 85), t_alpha(probe, 15)))
    assert identify(local, key, probe) == "g"


def test_catalogue_lists_idface_and_hers():
    names = {d["name"]: d for d in catalogue()}
    assert names["idface"]["security_levels"][0]["security_bits"] >= 128
    assert names["hers"]["threat_model"]["key_server"]
