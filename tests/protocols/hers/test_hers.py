"""hers (seed 003 §3): column-wise CKKS database encryption and the local-server / key-server split.

Scores must match the plaintext X·y within ``HERS_ERROR``; the answer must equal the plaintext answer
whenever the best score is separated from the runner-up and from τ by more than twice that error.
"""
import numpy as np
import pytest

from privface.crypto.lattice import CKKS, LatticeParams, generate_lattice_keypair
from privface.errors import ProtocolError, TemplateError
from privface.protocols.hers import HERS, HERS_CKKS, HERS_ERROR, CKKSScores, HERSKey, KeyServer, LocalServer, identify

TOY = LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36)
rng = np.random.default_rng(11)


def unit(n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def toy():
    pub, sec = generate_lattice_keypair(TOY, insecure_test_params=True)
    gallery = unit(1500, 128)  # two blocks of 1024 slots, the second partial
    local = LocalServer(HERS(pub, 128))
    local.enrol([f"id{i}" for i in range(len(gallery))], gallery)
    return local, KeyServer(HERSKey(sec), tau=0.6), gallery


def test_scores_within_documented_error_and_answer_equals_plaintext(toy):
    local, key, gallery = toy
    assert len(local.blocks) == 2
    for k in (3, 1499, None):
        y = unit(1, 128)[0] if k is None else gallery[k] + 0.05 * unit(1, 128)[0]
        y /= np.linalg.norm(y)
        ref = gallery @ y
        scores = key.secret.decrypt_scores(local.identify_request(y))
        assert np.max(np.abs(scores - ref)) <= HERS_ERROR
        top2 = np.sort(ref)[-2:]
        assert top2[1] - top2[0] > 2 * HERS_ERROR and abs(top2[1] - key.tau) > 2 * HERS_ERROR
        expect = f"id{int(np.argmax(ref))}" if top2[1] >= key.tau else None
        assert identify(local, key, y) == expect
        assert expect == (None if k is None else f"id{k}")


def test_bad_input_refused(toy):
    local, key, _ = toy
    with pytest.raises(TemplateError):
        local.identify_request(np.ones(128))  # ‖y‖ > 1
    with pytest.raises(TemplateError):
        local.identify_request(unit(1, 64)[0])
    msg = local.identify_request(unit(1, 128)[0])
    with pytest.raises(ProtocolError):
        key.decide(CKKSScores(msg.arrays[:, :, :1], msg.counts))
    with pytest.raises(ProtocolError):
        key.decide(CKKSScores(msg.arrays, [1, 5000]))
    bad = msg.arrays.copy()
    bad[..., 7] = np.uint64(2**63)
    with pytest.raises(ProtocolError):
        key.decide(CKKSScores(bad, msg.counts))


@pytest.mark.realsize
def test_real_parameters():
    assert HERS_CKKS.security_bits >= 128
    pub, sec = generate_lattice_keypair(HERS_CKKS)
    gallery = unit(50, 128)
    local = LocalServer(HERS(pub, 128))
    local.enrol([str(i) for i in range(50)], gallery)
    y = gallery[17]
    scores = HERSKey(sec).decrypt_scores(local.identify_request(y))
    assert np.max(np.abs(scores - gallery @ y)) <= HERS_ERROR
    assert identify(local, KeyServer(HERSKey(sec), 0.9), y) == "17"



def test_numpy_ip_db_equals_seal_multiply_plain_and_add(toy):
    """The numpy multiply-adds give bit-identical residues to SEAL's multiply_plain + add_inplace."""
    import tenseal.sealapi as sealapi

    from privface.crypto import seal_arrays

    local, _, gallery = toy
    scheme, block = local.scheme, local.blocks[1]
    pub, pid = scheme.public, scheme.parms_id
    y = gallery[1200]
    acc, tmp = sealapi.Ciphertext(), sealapi.Ciphertext()
    for j, yj in enumerate(y):
        residues = block.planes[0, j].astype(np.uint64) | (block.planes[1, j].astype(np.uint64) << np.uint64(30))
        ct = seal_arrays.ciphertext_from_array(pub.seal_context, pid, residues.reshape(2, 1, -1), scale=pub.scale)
        w = sealapi.Plaintext()
        pub.encoder.encode(float(yj), pid, 2.0 ** 20, w)
        pub.evaluator.multiply_plain(ct, w, tmp if j else acc)
        if j:
            pub.evaluator.add_inplace(acc, tmp)
    ours = scheme.ip_db(y, [block]).arrays.reshape(2, 1, -1)
    assert np.array_equal(seal_arrays.ciphertext_to_array(acc), ours)
