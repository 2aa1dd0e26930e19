"""The cryptomask CS with its gallery resident in Ray shards (``scale.resident_cs``, issue 38 §1, §3): on a local Ray
(every port on 127.0.0.1), a toy gallery of 3500 templates (4 blocks, 14 ciphertexts, 2 packs) split over 2 shards
on pack boundaries. The answer one process builds and the shards' gathered answer agree chunk by chunk (packs,
entries, and d_0 + d_1 mod t — the inner products Alg. 3 compares — equal, and equal to the quantised plaintext);
over loopback HTTP the verifier's bit equals the in-process one; a shard killed by Ray is restarted, reloads its
blocks, and the next identifications are answered correctly (or 503 with Retry-After while it reloads)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from privface.protocols.cryptomask import encoding
from privface.protocols.cryptomask.server import chunk_packs
from privface.scale import NpySource, enrol, identify
from privface.scale.cryptomask_gallery import CMGallery, verifier
from privface.service.app import create_app
from privface.service.bindings.cryptomask import CryptoMaskService
from privface.service.client import ServiceError
from privface.service.clients.cryptomask import VerifierClient
from privface.service.launch import serve_in_thread
from privface.store.sqlite import SQLiteStore

D, N, TAU = 128, 3500, 0.5


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.slow
def test_resident_cs_answers_as_one_process_and_survives_a_lost_shard(tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'privface[ray]')")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    from privface.scale.resident_cs import ResidentCloudServer

    rng = np.random.default_rng(381)
    x = _unit(rng.standard_normal((N, D)))
    np.save(tmp_path / "faces.npy", x)
    gallery_url, keys_url = f"sqlite:///{tmp_path / 'gallery.db'}", f"sqlite:///{tmp_path / 'keys.db'}"
    enrol(gallery_url, NpySource([tmp_path / "faces.npy"]), "cryptomask", key_store_url=keys_url, tau=TAU,
          insecure_test_params=True)
    gallery = CMGallery(gallery_url)
    assert gallery.nblocks == 4
    one = gallery.cloud_server()
    ver, _ = verifier(gallery, keys_url)
    store = SQLiteStore(tmp_path / "cs.db")
    try:
        svc = CryptoMaskService(store, gallery_url=gallery_url, ray="auto", shards=3, chunk=1)
        shards = svc.party.cs
        assert isinstance(shards, ResidentCloudServer)
        assert shards.ranges == [(0, 2), (2, 4)]  # pack boundaries: 8 ciphertexts = 2 blocks (3 asked, 2 fit)
        assert shards.ciphertexts == one.ciphertexts == 14
        # the blocks once, switched to sk_v, and each shard its own last stack under pk (Alg. 1's merge target)
        assert shards.storage_bytes == one.storage_bytes + one.last.nbytes

        # chunk by chunk, the very answer one process sends: packs, entries and the inner products d_0 + d_1
        probe = _unit(x[1234] + 0.02 * rng.standard_normal(D))
        q = ver.query(probe)
        fanned, rows = shards.prepare(q), one.prepare(q)
        plain = (encoding.quantize(x) @ encoding.quantize(probe)) % one.t
        span = 1 * one.group  # chunk=1: one pack per DistanceChunk
        got_all = []
        for lo in range(0, one.ciphertexts, span):
            hi = min(one.ciphertexts, lo + span)
            (m1, d01), (m2, d02) = one.distances_of(rows, lo, hi), shards.distances_of(fanned, lo, hi)
            assert m1.c1.shape == m2.c1.shape and m1.c0.shape == m2.c0.shape and len(d01) == len(d02)
            ip1 = (ver.shares(m1, len(d01)) + d01) % one.t
            ip2 = (ver.shares(m2, len(d02)) + d02) % one.t
            assert np.array_equal(ip1, ip2)
            got_all.append(ip2)
        assert np.array_equal(np.concatenate(got_all), plain)
        assert chunk_packs(one.n) >= 1 and svc.party.chunks == 2

        # over loopback HTTP: the bit of the in-process CS, a match and a stranger
        probes = [(probe, True), (_unit(rng.standard_normal(D)), False)]
        with serve_in_thread(create_app(store, [svc])) as url, VerifierClient(url, keys_url) as client:
            for y, expect in probes:
                assert client.identify(y)["match"] == identify(y, gallery_url, key_store_url=keys_url)["match"] \
                    == expect

            # a lost shard: Ray restarts it, it reloads its blocks; answers stay right (or 503 + Retry-After)
            before = shards.info()[1]["pid"]
            ray.kill(shards.shards[1], no_restart=False)
            t0, unavailable, answered = time.monotonic(), 0, 0
            while answered < 4 and time.monotonic() - t0 < 120:
                y, expect = probes[answered % 2]
                try:
                    assert client.identify(y)["match"] == expect
                    answered += 1
                except ServiceError as e:
                    assert e.status == 503, e
                    unavailable += 1
                    time.sleep(1)
            assert answered == 4, (answered, unavailable)
            after = shards.info()[1]
            assert after["pid"] != before and after["error"] is None and (after["lo"], after["hi"]) == (2, 4)
        shards.close()
    finally:
        store.close()
        ray.shutdown()


def test_block_ranges_are_contiguous_even_and_on_pack_boundaries():
    from privface.scale.resident import block_ranges

    assert block_ranges(4, 3, 2) == [(0, 2), (2, 4)]  # 3 asked, 2 fit on 2-block boundaries
    assert block_ranges(7, 2) == [(0, 4), (4, 7)]  # numpy rounds 3.5 to 4
    for nblocks in range(1, 40):
        for shards in range(1, 9):
            for align in (1, 2, 4):
                r = block_ranges(nblocks, shards, align)
                assert r[0][0] == 0 and r[-1][1] == nblocks and all(a[1] == b[0] for a, b in zip(r, r[1:]))
                assert all(lo % align == 0 and hi > lo for lo, hi in r) and len(r) <= shards


def test_shards_answering_for_other_blocks_give_no_answer():
    from privface.errors import UnavailableError
    from privface.scale.resident_cs import ResidentCloudServer

    cs = ResidentCloudServer.__new__(ResidentCloudServer)
    cs.ranges, cs.counts, cs.delta, cs.group = [(0, 2), (2, 3)], [1020, 1020, 30], 255, 8

    class _G:
        capacity = 1020

    cs.gallery = _G()

    def part(lo, hi, n, packs):
        return lo, hi, np.zeros((packs, 4), np.uint64), np.zeros((packs, 4), np.uint64), np.zeros(n, np.int64), 0, 0

    good = [part(0, 2, 2040, 1), part(2, 3, 30, 1)]
    assert len(cs._combine(good).d0) == 2070
    for bad in ([part(0, 2, 2040, 1), part(0, 2, 2040, 1)],  # a restarted shard with another range
                [part(0, 2, 2040, 1), part(2, 3, 29, 1)],  # other entries
                [part(0, 2, 2040, 2), part(2, 3, 30, 1)]):  # other packs
        with pytest.raises(UnavailableError):
            cs._combine(bad)
