"""Identification against a persisted cryptomask gallery (seed 001 Alg. 2 + Alg. 3), in process or on Ray.

The split: Alg. 2's CS part — switch the query rows to sk_v, one external product per gallery ciphertext, mask,
and the CS's shares d_0 — runs where the blocks are (``CSShard``: in this process, or one Ray actor per
contiguous range of blocks, each loading its blocks and switching them to the verifier's key once). Each shard
packs its own ciphertexts (every block but the last is full, so each shard's entries are whole ciphertexts; a
shard that does not end on a pack boundary sends one more, partly empty pack than one CS would). The driver runs
the verifier (sk_v: Alg. 2 lines 12–15) on each shard's packs, concatenates the shares in block order, and runs
Alg. 3 between the CS side and the verifier. Each shard
draws its own masks, so d_0 and d_1 differ run to run, but d_0 + d_1 = ⟨a_i, b⟩ exactly, and the bit with them.
Shards never see sk_v, and the driver's CS side of Alg. 3 sees only d_0 — as the paper's single CS does.

The answer is the verifier's 1 bit: some enrolled face reaches τ. There is no index (Alg. 3 reveals nothing
else), so ``identify`` returns ``{"match": bool, "id": None, …}``.
"""
from __future__ import annotations

import time

import numpy as np

from ..crypto.millionaire import Wire
from ..protocols.cryptomask.he import Distances
from ..protocols.cryptomask.parties import threshold
from ..protocols.cryptomask.reveal import reveal, setup_ot
from .actors import init_ray, start_shards
from .cryptomask_gallery import CMGallery, verifier
from .layout import GalleryError, tau_of
from .sources import unit

ANSWER = "1 bit (seed 001 Alg. 3): whether some enrolled face reaches τ; no index, so no id"
ANSWER_WO = ("CryptoMask-WO (seed 001 Fig. 2): the verifier decrypted every distance (as HERS' key server), so it "
             "names the best entry")


class CSShard:
    """The CS over a contiguous range of blocks (all of them in process, a range per Ray actor)."""

    def __init__(self, url: str, name: str, indices: list[int] | None = None, *, keep_error: bool = False) -> None:
        self.cs, self.error = None, None
        try:
            self.cs = CMGallery(url, name).cloud_server(indices)
        except GalleryError as e:  # a Ray actor keeps it for ``ready`` (an actor failing in __init__ only dies)
            if not keep_error:
                raise
            self.error = str(e)

    def ready(self) -> tuple[int, str | None]:
        return (0, self.error) if self.cs is None else (self.cs.ciphertexts, None)

    def distances(self, query, mask: bool = True):
        """Alg. 2 lines 3–11 on this shard's ciphertexts: (c_1, masked c_0, d_0); ``mask=False``: CryptoMask-WO
        (c_0 unmasked, d_0 = 0)."""
        msg, d0 = self.cs.distances(query, mask=mask)
        return msg.c1, msg.c0, d0


def identify(query, gallery_url: str, *, key_store_url: str | None = None, ray: str | None = None,
             workers: int | None = None, name: str = "default", variant: str = "w") -> dict:
    """One 1-bit identification: ``{"match", "id": None, timings, bytes}``; ``ray`` as ``scale.identify``.
    ``variant="wo"``: CryptoMask-WO — no Alg. 3; the verifier decrypts the distances and ``id`` is the best entry's."""
    if variant not in ("w", "wo"):
        raise GalleryError("variant must be w or wo")
    wo = variant == "wo"
    t = time.perf_counter()
    gallery = CMGallery(gallery_url, name)
    verifier_he, tau = verifier(gallery, key_store_url)
    if ray is None:
        shards, call = [CSShard(gallery_url, name)], lambda q: [s.distances(q, not wo) for s in shards]
    else:
        rt = init_ray(ray)
        shards = start_shards(rt, CSShard, gallery, workers, keep_error=True)
        call = lambda q: rt.get([s.distances.remote(q, not wo) for s in shards])  # noqa: E731
    wire = Wire()
    ot = None if wo else setup_ot(wire)
    load_s, t = time.perf_counter() - t, time.perf_counter()
    try:
        q = verifier_he.query(unit(np.asarray(query, dtype=np.float64).reshape(1, -1))[0])
        wire.send("query", q.nbytes)
        parts = call(q)
        distances_s, t = time.perf_counter() - t, time.perf_counter()
    finally:
        if ray is not None:
            for s in shards:
                rt.kill(s)
    d0 = np.concatenate([p[2] for p in parts])
    d1 = []
    for c1, c0, d0_shard in parts:
        msg = Distances(c1, c0)
        wire.send("distances", msg.nbytes)
        d1.append((verifier_he.distances if wo else verifier_he.shares)(msg, len(d0_shard)))
    d1 = np.concatenate(d1)
    if len(d1) != gallery.n:
        raise GalleryError("the shards' entries do not add up to the gallery's")
    shares_s, t = time.perf_counter() - t, time.perf_counter()
    if wo:  # the verifier holds the inner products themselves: its threshold in the clear
        best = int(np.argmax(d1))
        bit, found = bool(d1[best] >= threshold(tau)), gallery.ids()[best]
    else:
        bit, found = reveal(*ot, d0, d1, threshold(tau), wire, None), None  # one batch: rounds independent of N
    reveal_s = time.perf_counter() - t
    return {"match": bit, "id": found if bit else None, "variant": variant, "answer": ANSWER_WO if wo else ANSWER,
            "scheme": "cryptomask", "n": gallery.n,
            **tau_of(gallery_url, name, key_store_url, gallery.n), "blocks": gallery.nblocks, "shards": len(shards),
            "load_s": round(load_s, 4),
            "distances_s": round(distances_s, 4), "shares_s": round(shares_s, 4), "reveal_s": round(reveal_s, 4),
            "comm_bytes": sum(v for k, v in wire.bytes.items() if k != "ot_setup"), "rounds": 1 + wire.rounds,
            "bytes_per_phase": {k: v for k, v in wire.bytes.items() if k != "ot_setup"}}
