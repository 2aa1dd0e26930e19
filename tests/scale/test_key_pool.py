"""S_key's decryption in worker processes of its own (issue 38 §4, ``scale.key_pool``): the scores and decisions
equal the key server's own decryption, the workers are the key server's children (the secret key goes nowhere
else), a tampered message is refused with nothing decided, and ``serve --role key`` with workers answers over
real loopback HTTP as without. Toy ring (insecure_test_params), real SEAL."""
import os

import numpy as np
import pytest

from privface.errors import ProtocolError
from privface.protocols.hers.messages import Query
from privface.scale import Gallery, NpySource, enrol
from privface.scale.gallery import key_server
from privface.scale.ident import KeyRole, LocalRole
from privface.scale.key_pool import DecryptPool, key_workers, split
from privface.service.app import create_app
from privface.service.auth import ApiKeys
from privface.service.bindings.hers import IdentService
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore

N, DIM, TAU = 10_000, 32, 0.9  # toy ring: 1024 slots → 10 blocks


@pytest.fixture(scope="module")
def gallery(tmp_path_factory):
    root = tmp_path_factory.mktemp("key-pool")
    x = np.random.default_rng(38).normal(size=(N, DIM))
    np.save(root / "f.npy", x)
    url, keys = f"sqlite:///{root / 'g.db'}", f"sqlite:///{root / 'k.db'}"
    enrol(url, NpySource([root / "f.npy"]), "hers", key_store_url=keys, tau=TAU, insecure_test_params=True)
    return dict(root=root, x=x, url=url, keys=keys)


def _sk(keys_url: str) -> bytes:
    with SQLiteStore(keys_url.removeprefix("sqlite:///")) as s:
        return s.get("gallery-key", "default.sk")


def test_pool_decrypts_as_the_key_server_and_refuses_tampering(gallery):
    g = Gallery(gallery["url"])
    key = key_server(g, gallery["keys"])
    local = g.local_server()
    probe = gallery["x"][1234] + 0.05 * np.random.default_rng(1).normal(size=DIM)
    msg = local.identify_request(probe.reshape(1, -1) / np.linalg.norm(probe))
    assert len(msg.counts) == 10
    pool = DecryptPool(key.secret, g.settings, g.pk_bytes, _sk(gallery["keys"]), workers=2, min_blocks=1)
    try:
        pids = {p for p in pool._pool._processes}
        assert len(pids) == 2 and os.getpid() not in pids
        assert all(int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]) == os.getpid() for p in pids)
        want = key.secret.decrypt_scores(msg)
        got = pool.decrypt_scores(msg)
        assert pool.pooled == 1
        assert np.array_equal(got, want) and int(np.argmax(got)) == 1234
        tampered = split(msg, 1)[0]
        tampered.arrays = tampered.arrays.copy()
        tampered.arrays[7, 0, 1, 0, 5] = np.uint64(2**63)  # not below its prime: refused by a worker
        with pytest.raises(ProtocolError, match="prime"):
            pool.decrypt_scores(tampered)
        assert np.array_equal(pool.decrypt_scores(msg), want)  # the workers go on
    finally:
        pool.close()


def test_key_workers_option():
    assert key_workers(3) == 3
    with pytest.raises(Exception, match="at least 1"):
        key_workers(0)


def test_key_server_with_workers_over_http_answers_as_without(gallery, tmp_path):
    key_store, local_store = SQLiteStore(gallery["keys"].removeprefix("sqlite:///")), SQLiteStore(tmp_path / "l.db")
    internal = ApiKeys(key_store).create("internal")[1]
    key = IdentService(key_store, role="key", insecure_test_params=True, key_workers=2)
    plain_store = SQLiteStore(gallery["keys"].removeprefix("sqlite:///"))
    plain = LocalRole(gallery["url"], KeyRole(plain_store, insecure_test_params=True))  # decrypts in its process
    rng = np.random.default_rng(2)
    probes = [gallery["x"][i] + 0.05 * rng.normal(size=DIM) for i in rng.integers(0, N, 6)]
    probes.append(rng.normal(size=DIM))
    try:
        with serve_in_thread(create_app(key_store, [key], keys=ApiKeys(key_store))) as key_url:
            local = IdentService(local_store, role="local", gallery_url=gallery["url"], key_url=key_url,
                                 key_api_key=internal)
            assert key.party._decrypt_pool is not None and key.party._decrypt_pool.workers == 2
            answers = []
            for p in probes:
                body = Query(np.asarray(p, "<f8").tobytes()).to_bytes()
                answers.append(local.party.identify(body).subject_id)
                assert answers[-1] == plain.identify(body).subject_id
            assert sum(a is not None for a in answers) >= 5 and answers[-1] is None
            assert key.party._decrypt_pool.pooled == len(probes)  # every request decrypted by the workers
    finally:
        if key.party._decrypt_pool is not None:
            key.party._decrypt_pool.close()
        for s in (key_store, local_store, plain_store):
            s.close()
