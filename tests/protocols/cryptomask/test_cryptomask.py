"""cryptomask (seed 001): encoding, NTT, key switching, OT extension + comparison, end to end with 1-bit answers."""
import numpy as np
import pytest
import tenseal.sealapi as sealapi

from privface.crypto import rlwe, seal_arrays, seal_io
from privface.crypto.lattice import generate_lattice_keypair
from privface.crypto.millionaire import MASK32, Wire, b2a, drelu_shares, millionaire, random_bits
from privface.crypto.ntt import RNSNTT
from privface.crypto.otext import IKNPReceiver, IKNPSender, SoftSpokenReceiver, SoftSpokenSender, _transpose
from privface.errors import CryptoError, ProtocolError, TemplateError
from privface.protocols import catalogue
from privface.protocols.cryptomask import CM_BFV, CryptoMask, encoding
from privface.protocols.cryptomask.he import Distances, Query, Upload
from privface.protocols.cryptomask.params import CM_BFV_TOY


def unit(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def negacyclic(a, b, n):
    full = np.convolve(a, b)
    out = full[:n].copy()
    out[:full.size - n] -= full[n:]
    return out


@pytest.mark.parametrize("d", [128, 100, 5, 3])
def test_encoding_puts_inner_products_at_kd_minus_1(d):
    """§2.2/§4.1 per slice: coefficient k·D − 1 of Σ_σ π(A_σ)·π(b_σ) is ⟨A[k], b⟩ for all δ rows, D = d rounded up to
    a power of two, at most WIDTH (d = 100: 13 slices, the last padded; d = 3: one slice of D = 4)."""
    n, rng = 4096, np.random.default_rng(d)
    delta, D, S = encoding.rows_per_poly(n, d), encoding.stride(d), encoding.slices(d)
    assert (D, S) == {128: (8, 16), 100: (8, 13), 5: (8, 1), 3: (4, 1)}[d]
    assert delta == -(-(n - D) // D) and delta * D <= n - 1
    assert np.array_equal(encoding.positions(n, d), np.arange(1, delta + 1) * D - 1)
    A, b = rng.integers(-300, 300, (delta, d)), rng.integers(-300, 300, d)
    polys, query = encoding.encode_matrix(A, n, 1 << 20), encoding.encode_query(b, n)
    assert polys.shape == query.shape == (S, n)
    prod = sum(negacyclic(np.mod(p.astype(np.int64) + (1 << 19), 1 << 20) - (1 << 19), q, n)
               for p, q in zip(polys, query))
    assert np.array_equal(prod[encoding.positions(n, d)], A @ b)
    with pytest.raises(TemplateError):
        encoding.encode_matrix(np.zeros((delta + 1, d), np.int64), n, 1 << 20)


def test_ntt_multiplies_negacyclically_and_reads_coefficients():
    mods = [m.value() for m in sealapi.CoeffModulus.Create(1024, [27, 27, 28])]
    T, rng = RNSNTT(mods, 1024), np.random.default_rng(0)
    a = np.stack([rng.integers(0, p, 1024) for p in mods]).astype(np.uint64)
    b = rng.integers(-3, 4, 1024)
    c = T.inverse(T.forward(a) * T.forward(np.mod(b[None], np.array(mods)[:, None]).astype(np.uint64)) % T.p)
    for li, p in enumerate(mods):
        assert np.array_equal(c[li].astype(object), np.mod(negacyclic(a[li].astype(object), b.astype(object), 1024), p))
    W = T.coefficient_functional([0, 5, 1023])
    got = rlwe.matmul_mod(T.forward(a)[None], rlwe.functional_parts(W), mods)[0]
    assert np.array_equal(got, a[:, [0, 5, 1023]])


def test_key_switching_decrypts_under_the_verifier_key():
    """SwKeyGen/Switching (§2.4) in numpy: SEAL's Decryptor with sk_v recovers what pk encrypted."""
    pub, sec = generate_lattice_keypair(CM_BFV_TOY, insecure_test_params=True)
    pub_v, sec_v = generate_lattice_keypair(CM_BFV_TOY, insecure_test_params=True)
    from privface.protocols.cryptomask.he import basis_of

    nb = basis_of(pub)
    b = rlwe.RNSBasis(nb.q, nb.P, nb.n)  # the numpy oracle of the native core
    s = rlwe.secret_coefficients(b, pub.seal_context, pub.evaluator, sec._secret_key)
    sv = rlwe.secret_coefficients(b, pub_v.seal_context, pub_v.evaluator, sec_v._secret_key)
    assert not np.array_equal(s, sv)
    m = np.random.default_rng(1).integers(0, 1 << 20, b.n).astype(np.uint64)
    ct = sealapi.Ciphertext()
    pub.encryptor.encrypt(seal_io.load_plaintext(pub.seal_context, (0, 0, 0, 0), m, 1.0), ct)
    switched = rlwe.switch(b, seal_arrays.ciphertext_to_array(ct), rlwe.swkeygen(b, s, sv))
    out = sealapi.Plaintext()
    sealapi.Decryptor(pub_v.seal_context, sec_v._secret_key).decrypt(
        seal_arrays.ciphertext_from_array(pub_v.seal_context, pub_v.seal_context.first_parms_id(), switched,
                                           ntt_form=False), out)
    assert np.array_equal(seal_io.data_array(seal_io.save(out), out.coeff_count(), "pt"), m)
    # under the old key it no longer decrypts
    sealapi.Decryptor(pub.seal_context, sec._secret_key).decrypt(
        seal_arrays.ciphertext_from_array(pub.seal_context, pub.seal_context.first_parms_id(), switched,
                                           ntt_form=False), out)
    assert not np.array_equal(seal_io.data_array(seal_io.save(out), out.coeff_count(), "pt")[:64], m[:64])


def test_bit_transpose_matches_unpack_transpose():
    r = np.random.default_rng(2).integers(0, 256, (128, 128), dtype=np.uint8)
    for m in (1024, 1000):
        ref = np.packbits(np.unpackbits(r, axis=1, bitorder="little")[:, :m].T, axis=1, bitorder="little")
        assert np.array_equal(_transpose(r, m), ref)


@pytest.fixture(scope="module", params=["iknp", "softspoken"])
def ot_pair(request):
    S, R = (IKNPSender(), IKNPReceiver()) if request.param == "iknp" else (SoftSpokenSender(), SoftSpokenReceiver())
    S.setup_finish(R.setup_response(S.setup_request()))
    return S, R


def test_iknp_random_ots(ot_pair):
    S, R = ot_pair
    r = random_bits(1000)
    u, kr = R.extend(r)
    k0, k1 = S.extend(u, 1000)
    assert np.array_equal(np.where(r[:, None] == 1, k1, k0), kr)
    assert not np.array_equal(k0, k1) and not np.array_equal(kr, np.where(r[:, None] == 1, k0, k1))
    with pytest.raises(CryptoError):
        S.extend(u[:, :-1], 1000)


@pytest.mark.parametrize("ell", [1, 2, 3, 4, 5, 8, 9, 12, 13, 17, 19, 31])  # 1 to 8 leaves, odd and even
def test_millionaire_drelu_and_b2a(ot_pair, ell):
    S, R = ot_pair
    rng, wire = np.random.default_rng(ell), Wire()
    y, x = rng.integers(0, 1 << ell, 3000).astype(np.uint64), rng.integers(0, 1 << ell, 3000).astype(np.uint64)
    x[:100], x[100], y[100], x[101], y[101] = y[:100], 0, 0, (1 << ell) - 1, (1 << ell) - 1
    a, b = millionaire(S, R, y, x, ell, wire, "p")
    assert np.array_equal(a ^ b, (x < y).astype(np.uint8))
    zS = rng.integers(0, 1 << (ell + 1), 3000).astype(np.uint64)
    zR = rng.integers(0, 1 << (ell + 1), 3000).astype(np.uint64)
    a, b = drelu_shares(S, R, zS, zR, ell + 1, wire, "p")
    assert np.array_equal(a ^ b, (((zS + zR) % (1 << (ell + 1))) < (1 << ell)).astype(np.uint8))
    bs, br = random_bits(3000), random_bits(3000)
    A, B = b2a(S, R, bs, br, wire, "p")
    assert np.array_equal((A + B) & MASK32, (bs ^ br).astype(np.uint64))
    with pytest.raises(CryptoError):
        millionaire(S, R, y, x << np.uint64(1), ell, wire, "p")


@pytest.fixture(scope="module")
def toy():
    return CryptoMask(128, tau=0.5, insecure_test_params=True)


def test_end_to_end_match_and_non_match_equal_plaintext(toy):
    """Alg. 1 over three uploads (merge indicator), Alg. 2 shares exact, Alg. 3's bit = plaintext decision."""
    rng = np.random.default_rng(7)
    x = unit(rng, 600, 128)
    toy.enrol(x[:5])  # ind = 5 of δ = 255
    toy.enrol(x[5:300])  # merges 250 into the last stack, then 45 more
    toy.enrol(x[300:])
    assert toy.cs.count == 600 and toy.cs.ciphertexts == 3 and toy.cs.ind == 600 % 255
    A = encoding.quantize(x)
    probe = x[17] + 0.3 * rng.standard_normal(128) / np.sqrt(128)
    probe /= np.linalg.norm(probe)
    stranger = unit(rng, 1, 128)[0]
    for b, expect in ((probe, True), (stranger, False)):
        q = toy.verifier.query(b)
        msg, d0 = toy.cs.distances(q)
        d = np.mod(d0 + toy.verifier.shares(msg, 600), 1 << 20)
        assert np.array_equal(np.where(d >= 1 << 19, d - (1 << 20), d), A @ encoding.quantize(b))
        plain = bool((A @ encoding.quantize(b)).max() >= toy.ts)
        run = toy.identify(b)
        assert run.match == plain == expect
        assert set(run.bytes) == {"query", "distances", "compare", "b2a", "final", "ot_refill"} and run.comm_bytes > 0


def test_variant_wo_reveals_the_distances_and_skips_alg3():
    """CryptoMask-WO (seed 001 Fig. 2): the verifier decrypts every inner product exactly (the CS's shares are 0),
    decides in the clear and names the best entry; no Alg. 3 phase crosses the wire, and the bytes are the query and
    the distances of the W run on the same gallery."""
    rng = np.random.default_rng(11)
    x = unit(rng, 300, 128)
    cm = CryptoMask(128, tau=0.5, insecure_test_params=True, variant="wo")
    cm.enrol(x)
    probe = x[42] + 0.3 * rng.standard_normal(128) / np.sqrt(128)
    probe /= np.linalg.norm(probe)
    A = encoding.quantize(x)
    for b in (probe, unit(rng, 1, 128)[0]):
        msg, d0 = cm.cs.distances(cm.verifier.query(b), mask=False)
        assert not d0.any()
        assert np.array_equal(cm.verifier.distances(msg, 300), A @ encoding.quantize(b))
        run, w = cm.identify(b), cm.identify(b, variant="w")
        scores = A @ encoding.quantize(b)
        assert run.match == w.match == bool(scores.max() >= cm.ts) and scores[run.best] == scores.max()
        assert set(run.bytes) == {"query", "distances"} and run.rounds == 1 and w.best is None
        assert run.bytes["distances"] == w.bytes["distances"] and run.comm_bytes < w.comm_bytes
    assert cm.identify(probe).best == 42
    with pytest.raises(ProtocolError):
        CryptoMask(128, insecure_test_params=True, variant="w0")


def test_threshold_edge_is_exact():
    """ts exactly at the best score matches (≥), one above it does not."""
    rng = np.random.default_rng(8)
    b = unit(rng, 1, 128)[0]
    cm = CryptoMask(128, tau=0.0, insecure_test_params=True)
    x = unit(rng, 20, 128)
    cm.enrol(x)
    best = int((encoding.quantize(x) @ encoding.quantize(b)).max())
    cm.tau = best / (1 << 16)
    assert cm.ts == best and cm.identify(b).match
    cm.tau = (best + 1) / (1 << 16)
    assert cm.ts == best + 1 and not cm.identify(b).match


def test_real_face_embeddings(demo_faces):
    """dlib embeddings of the demo identities: an altered copy of an enrolled face matches, another does not."""
    refs = {k: v[0] / np.linalg.norm(v[0]) for k, v in demo_faces.items()}
    names = sorted(refs)
    enrolled, absent = names[:-1], names[-1]
    cm = CryptoMask(128, tau=0.95, insecure_test_params=True)
    cm.enrol(np.stack([refs[k] for k in enrolled]))
    A = encoding.quantize(np.stack([refs[k] for k in enrolled]))
    for name, expect in ((enrolled[0], True), (absent, False)):
        probe = demo_faces[name][1][0] / np.linalg.norm(demo_faces[name][1][0])
        assert cm.identify(probe).match == bool((A @ encoding.quantize(probe)).max() >= cm.ts) == expect


def test_messages_are_validated(toy):
    L, n = toy.cs.basis.L, toy.cs.n
    if not toy.cs.count:  # run alone: enrol something first
        toy.enrol(unit(np.random.default_rng(10), 3, 128))
    q = toy.verifier.query(unit(np.random.default_rng(9), 1, 128)[0])
    bad = q.rows.copy()
    bad[0, 0, 0] = toy.cs.basis.q[0]
    with pytest.raises(ProtocolError, match="prime"):
        toy.cs.distances(Query(bad, q.seed))
    with pytest.raises(ProtocolError):
        toy.cs.distances(Query(q.rows[:-1], q.seed))
    with pytest.raises(ProtocolError):
        toy.cs.distances(Query(q.rows, q.seed[:-1]))
    with pytest.raises(ProtocolError):
        Query.from_bytes(q.to_bytes()[:-4], n, 128)
    msg, _ = toy.cs.distances(q)
    with pytest.raises(ProtocolError):
        toy.verifier.shares(Distances(msg.c1.astype(np.int64), msg.c0), toy.cs.count)
    with pytest.raises(ProtocolError):
        toy.cs.receive(Upload(np.zeros((1, 16, 2, L, n), np.uint32), merge=toy.cs.ind == 0, ind=0, count=1))
    with pytest.raises(ProtocolError):  # right flag, wrong indicator
        toy.cs.receive(Upload(np.zeros((1, 16, 2, L, n), np.uint32), merge=toy.cs.ind > 0, ind=toy.cs.ind, count=1))
    with pytest.raises(ProtocolError):  # a stack without its slices
        toy.cs.receive(Upload(np.zeros((1, 2, L, n), np.uint32), merge=toy.cs.ind > 0, ind=(toy.cs.ind + 1) % 255,
                              count=1))
    with pytest.raises(TemplateError):
        toy.verifier.query(np.ones(128))  # not a unit vector


def test_real_parameters_and_catalogue():
    assert CM_BFV.security_bits == 128 and CM_BFV.total_bits == 109 and CM_BFV.plain_modulus == 1 << 20
    with pytest.raises(CryptoError):
        generate_lattice_keypair(CM_BFV_TOY)
    entry = next(d for d in catalogue() if d["name"] == "cryptomask")
    assert entry["security_levels"][0]["security_bits"] == 128


@pytest.mark.parametrize("d", [100, 512, 3])
def test_other_dimensions_end_to_end(d):
    """d = 100 (the last slice padded), d = 512 (64 slices) and d = 3 (one slice of D = 4)."""
    rng = np.random.default_rng(d)
    x = unit(rng, 30, d)
    cm = CryptoMask(d, tau=0.6, insecure_test_params=True)
    cm.enrol(x[:7])
    cm.enrol(x[7:])
    A = encoding.quantize(x)
    probe = x[11] + 0.2 * rng.standard_normal(d) / np.sqrt(d)
    for b, expect in ((probe / np.linalg.norm(probe), True), (unit(rng, 1, d)[0], False)):
        plain = bool((A @ encoding.quantize(b)).max() >= cm.ts)
        assert cm.identify(b).match == plain and (plain == expect or d == 3)  # in 3-D a stranger is near someone


def test_rounds_do_not_grow_with_the_gallery():
    """Alg. 3 in one batch in process: the same number of verifier–CS round trips at 31 and at 2 400 templates, and
    the modulus-switched distances cost 4 bytes per coefficient (N of c'_1 and N of c'_0 per pack of 8 stacks)."""
    rng = np.random.default_rng(5)
    cm = CryptoMask(128, insecure_test_params=True)
    rounds = []
    for n in (31, 2369):
        cm.enrol(unit(rng, n, 128))
        run = cm.identify(unit(rng, 1, 128)[0])
        rounds.append(run.rounds)
        assert run.bytes["distances"] == -(-cm.cs.ciphertexts // 8) * cm.cs.n * 50 // 8  # a pack per 8; 21 + 29 bits
    assert rounds[0] == rounds[1] > 1


def test_lift_on_the_fly_gives_the_same_shares_in_half_the_memory():
    """CloudServer(precompute=False) keeps the p₁ ciphertexts, not their lift over Q (§4.5): d_0 + d_1 are the inner
    products either way."""
    rng = np.random.default_rng(6)
    x, y = unit(rng, 100, 128), unit(rng, 1, 128)[0]
    sizes = []
    for pre in (True, False):
        cm = CryptoMask(128, insecure_test_params=True, precompute=pre)
        cm.enrol(x[:40])
        cm.enrol(x[40:])  # the merge into the last ciphertext (Alg. 1 line 7)
        msg, d0 = cm.cs.distances(cm.verifier.query(y))
        d = (d0 + cm.verifier.shares(msg, cm.cs.count)) % (1 << 20)
        d = np.where(d >= 1 << 19, d - (1 << 20), d)
        assert np.array_equal(d, encoding.quantize(x) @ encoding.quantize(y))
        sizes.append(sum(b.nbytes for b in cm.cs.blocks))
    assert sizes[0] == 2 * sizes[1]
