"""``gallery remove`` for cryptomask galleries: erasure (``protocols.cryptomask.erase``: a masked refresh with the key
generator, which holds the database key sk in the key store).

Each block holding a removed template is read, the stacks (Alg. 1's ciphertexts of δ rows) holding one are masked
by the CS, refreshed by the KG with the removed rows' coefficients set to 0, unmasked, and the block is written as
a new generation by ``cryptomask_gallery._write_block`` (pieces, then the commit record — its one atomic switch —
then the old pieces deleted), its removed rows' ids ``null``; then the store is purged (SQLite ``secure_delete``,
WAL truncated; PostgreSQL: the old rows are deleted, ``VACUUM (FULL)`` is the operator's step, docs/operations.md).
An erased row stays in the gallery as a zero template: its score ⟨0, b⟩ = 0 never reaches a τ > 0, so the 1-bit
answer (seed 001 Alg. 3) is the one over the other templates, and Alg. 1's merge indicator is unchanged.

``gallery update`` is the same rewrite with the new template written into the erased row (``withdraw(replace=…)``).

Crash safety: per block. A crash leaves each block wholly old or wholly erased (updated); a change whose templates
sit in several blocks may be left done in some of them (``gallery list`` shows which ids remain; removing those finishes
it). Enrolment and removal take the gallery's writer lease, so they never rewrite one block at once. A CS that is
serving (``privface serve --protocol cryptomask``) keeps the gallery it loaded until it restarts.
"""
from __future__ import annotations

import time

import numpy as np

from ..crypto.lattice import LatticeSecretContext
from ..errors import CryptoError
from ..protocols.cryptomask import encoding
from ..protocols.cryptomask.erase import EraseHolder, EraseKey, keep_mask
from ..store import open_store
from .cryptomask_gallery import CMGallery, _commit, _read_block, _write_block
from .layout import KEY, GalleryError, default_key_store, read_json, record_key, writer_lease


def erase_key(gallery_url: str, name: str = "default", key_store_url: str | None = None) -> EraseKey:
    """The KG's side from the key store's sk, checked against the gallery's pk (GalleryError otherwise)."""
    import hashlib

    g = CMGallery(gallery_url, name)
    with open_store(key_store_url or default_key_store(gallery_url)) as keys:
        meta = read_json(keys.get(KEY, record_key(name, "meta")), f"key store meta of gallery {name!r}")
        sk = keys.get(KEY, record_key(name, "sk"))
    if sk is None or meta.get("pk_sha256") != hashlib.sha256(g.pk_bytes).hexdigest():
        raise GalleryError("the key store holds no database key sk for this gallery (public key differs)")
    try:
        return EraseKey(LatticeSecretContext.from_bytes(g.public, sk))
    except CryptoError as e:
        raise GalleryError(f"the key store's sk is damaged ({e})") from None


def withdraw(gallery_url: str, ids: list[str], name: str = "default", *, key, replace=None) -> dict:
    """Erase ``ids`` from a cryptomask gallery with the KG's ``key`` (``erase_key`` or any object with
    ``refresh(masked, keep)``). Every id must be enrolled now (GalleryError naming the others, nothing written).
    Returns ``{"withdrawn", "blocks_written", "stacks_refreshed", "erased": True, "store_purged", "erase_seconds",
    "erase_bytes_sent", "erase_bytes_received"}``.

    ``replace`` (``gallery update``): {id: its new unit template (d,)} for some of ``ids``: each such row is written
    into the refreshed stack in place of the erased one (a plaintext addition of its encoding, exact in BFV: Alg. 1's
    encoding of a stack holding only that row), the id kept at its position — the erasure and the new template are
    one write of the block, so a crash leaves each block wholly old or wholly updated."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        raise GalleryError("name at least one identity to remove")
    if key is None:
        raise GalleryError("a cryptomask template is erased with the key generator's sk (--key-store): an id "
                           "withdrawn without erasure would still count in the 1-bit answer")
    t0 = time.perf_counter()
    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        g = CMGallery(gallery_url, name)
        delta = g.delta
        commits = {b: _commit(local, name, b, g.meta, g.block_count(b), g.basis) for b in range(g.nblocks)}
        where: dict[str, tuple[int, int]] = {}
        for b, c in commits.items():
            for pos, i in enumerate(x for r in c["ids"] for x in r):
                if i in wanted and i not in where:
                    where[i] = (b, pos)
        unknown = [i for i in wanted if i not in where]
        if unknown:
            raise GalleryError(f"not in gallery {name!r}: {', '.join(unknown[:10])}"
                               + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""))
        holder = EraseHolder(g.public)
        stride, slices = encoding.stride(g.dim), encoding.slices(g.dim)
        sent = received = stacks = 0
        for b in sorted({b for b, _ in where.values()}):
            c = commits[b]
            flat = [i for r in c["ids"] for i in r]
            gone = {pos for i, (bb, pos) in where.items() if bb == b}
            arr = _read_block(local, name, b, c, g.basis)  # (k, S, 2, L, N)
            touched = sorted({pos // delta for pos in gone})
            rows = [[s * delta + i not in gone for i in range(delta)] for s in touched]
            keep = keep_mask(rows, g.basis.n, stride, slices)
            masked, r = holder.mask(arr[touched].reshape((-1,) + arr.shape[2:]))
            answer = key.refresh(masked, keep)
            fresh = holder.unmask(answer, r, keep)
            new = {pos: replace[flat[pos]] for pos in gone if replace and flat[pos] in replace}
            if new:
                fresh = holder.add_plain(fresh, _rows_plain(new, touched, delta, g.dim, g.basis.n, holder.t))
            sent, received = sent + masked.nbytes + keep.size // 8, received + np.asarray(answer).nbytes
            arr[touched] = fresh.reshape((len(touched),) + arr.shape[1:])
            stacks += len(touched)
            lease.check()
            _write_block(local, name, b, arr, [None if p in gone and p not in new else i for p, i in enumerate(flat)],
                         delta, c)
            lease.renew()
        purged = local.purge()
    return {"withdrawn": wanted, "blocks_written": len({b for b, _ in where.values()}), "stacks_refreshed": stacks,
            "erased": True, "store_purged": purged, "erase_seconds": round(time.perf_counter() - t0, 3),
            "erase_bytes_sent": sent, "erase_bytes_received": received}


def _rows_plain(new: dict, touched: list[int], delta: int, dim: int, n: int, t: int) -> np.ndarray:
    """Alg. 1's plaintext coefficients of the touched stacks holding only the rows of ``new`` (block position →
    unit template), the other rows 0: (len(touched)·S, N) mod t, in ``touched``'s order."""
    out = []
    for s in touched:
        A = np.zeros((delta, dim), dtype=np.int64)
        for pos, row in new.items():
            if pos // delta == s:
                A[pos % delta] = encoding.quantize(np.asarray(row, dtype=np.float64).reshape(1, -1))[0]
        out.append(encoding.encode_matrix(A, n, t))
    return np.concatenate(out)


__all__ = ["erase_key", "withdraw"]
