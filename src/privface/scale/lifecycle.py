"""A gallery after enrolment: ``info``, ``list_ids`` and ``withdraw`` (``privface gallery info | list | remove``).

``info`` and ``list_ids`` read the gallery store's meta and commit records (``scale.layout``) of any scheme; no
ciphertext is read. ``withdraw`` takes identities out of the answers of a hers / idface-ckks / idface-paillier
gallery (seed 003 §3.2: S_local maps the index S_key releases to an id; a withdrawn slot maps to none).

**What withdraw is not: erasure.** The packed block ciphertexts still carry a withdrawn template. Seed 003's
ENC_DB packs many identities into one ciphertext — HERS one per CKKS slot (§3.1), IDFace one per base-p digit of a
coefficient (CKKS) or of a Paillier plaintext (§4.2) — and zeroing one slot or digit without the secret key is not
a linear map these schemes offer: a CKKS slot mask is a plaintext product that needs a level HERS_CKKS does not
have (one data prime, no rescaling), and a digit of Σ_i p^i·x_i is not a linear function of the plaintext. So the
key holder decrypting a block still finds the withdrawn template (docs/operations.md, "Changing a gallery").

A withdrawal is one store write per block (the block's commit record, its ``ids`` entry set to ``null``), then the
meta's ``gen`` is bumped so that running local servers (``scale.ident.LocalRole``) re-read the ids; each write is
atomic, so a crash leaves every block withdrawn or not, and a running identification resolves against the ids it
read when it started. Withdrawals take the gallery's writer lease (``layout.writer_lease``), as enrolment does.
"""
from __future__ import annotations

import json

from ..store import open_store
from ..store.sqlite import SQLiteStore
from .layout import (
    LOCAL,
    GalleryError,
    block_key,
    default_key_store,
    read_json,
    record_key,
    stored_scheme,
    tau_of,
    writer_lease,
)
from .schemes import GALLERY_SCHEMES


def _scheme(gallery_url: str, name: str) -> str:
    scheme = stored_scheme(gallery_url, name)
    if scheme not in GALLERY_SCHEMES:
        raise GalleryError(f"no gallery {name!r} in this store (or its meta is damaged)")
    return scheme


def _slots(gallery_url: str, name: str) -> tuple[str, list[list[str | None]]]:
    """(scheme, the ids of every block in gallery order, ``None`` for a withdrawn slot)."""
    scheme = _scheme(gallery_url, name)
    if GALLERY_SCHEMES[scheme].own_layout:
        from .cryptomask_gallery import CMGallery

        g = CMGallery(gallery_url, name)
        return scheme, [g.ids()]
    from .gallery import Gallery

    g = Gallery(gallery_url, name)
    out = []
    with open_store(gallery_url) as local:
        for b in range(g.nblocks):
            commit = read_json(local.get(LOCAL, record_key(name, block_key(b))), f"block {b} commit record")
            out.append(list(commit["ids"]))
    return scheme, out


def list_ids(gallery_url: str, name: str = "default") -> list[str]:
    """The identities a gallery answers with, in gallery order (withdrawn ones left out)."""
    return [i for block in _slots(gallery_url, name)[1] for i in block if i is not None]


def info(gallery_url: str, name: str = "default", key_store_url: str | None = None, *, tau: bool = True) -> dict:
    """A gallery's settings and size: scheme, identities answered and withdrawn, blocks, capacity, the idface
    transform, the stored ciphertext bytes and (``tau``) τ and its source from the key store — ``key_store_url``,
    or the default next to a ``sqlite:///g.db`` gallery when that file exists (never created here)."""
    scheme, blocks = _slots(gallery_url, name)
    with open_store(gallery_url) as local:
        meta = read_json(local.get(LOCAL, record_key(name, "meta")), f"gallery {name!r} meta")
        stored = sum(len(local.get(LOCAL, k) or b"") for k in local.ids(LOCAL)
                     if k.startswith(f"{name}.block.") and ".part." in k)
    slots = sum(len(b) for b in blocks)
    withdrawn = sum(i is None for b in blocks for i in b)
    out = {"name": name, "scheme": scheme, "identities": slots - withdrawn, "withdrawn": withdrawn,
           "slots": slots, "dim": meta.get("dim"), "insecure_test_params": meta.get("insecure_test_params"),
           "generation": int(meta.get("gen", 0))}
    if GALLERY_SCHEMES[scheme].own_layout:
        out.update(blocks=-(-slots // (meta["delta"] * meta["cts_per_block"])) if slots else 0,
                   capacity=meta["delta"] * meta["cts_per_block"], batches=len(meta.get("batches", [])))
    else:
        lift = meta.get("lift")
        out.update(blocks=len(blocks), capacity=meta.get("capacity"), beta=meta.get("beta"),
                   centring="none" if meta.get("centring") is None else "shipped",
                   lift=None if lift is None else lift.get("dim"))
    out["storage_bytes"] = stored
    out["storage_bytes_per_identity"] = round(stored / max(1, slots - withdrawn), 1)
    if tau:
        out.update(_tau(gallery_url, name, key_store_url))
    return out


def _tau(gallery_url: str, name: str, key_store_url: str | None) -> dict:
    if key_store_url is None:
        try:
            key_store_url = default_key_store(gallery_url)
        except GalleryError:
            key_store_url = None
        if key_store_url is not None and not SQLiteStore.path_of(key_store_url).exists():
            key_store_url = None
    if key_store_url is None:
        return {"tau": None, "tau_source": "key store not given (--key-store)"}
    try:
        return tau_of(gallery_url, name, key_store_url)
    except GalleryError as e:
        return {"tau": None, "tau_source": f"key store unreadable ({e})"}


def withdraw(gallery_url: str, ids: list[str], name: str = "default") -> dict:
    """Take ``ids`` out of the answers of a hers / idface gallery (see the module docstring: not erasure).

    Every id must be answered by the gallery now (GalleryError naming the others, before anything is written).
    Returns ``{"withdrawn": [...], "blocks_written": k, "erased": False, "generation": g}``."""
    scheme = _scheme(gallery_url, name)
    if GALLERY_SCHEMES[scheme].own_layout:
        raise GalleryError("a cryptomask gallery answers one bit over the whole gallery (seed 001 Alg. 3): a "
                           "template cannot be withdrawn from its answers without re-enrolling the gallery")
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        raise GalleryError("name at least one identity to remove")
    from .gallery import Gallery

    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        g = Gallery(gallery_url, name)
        commits, where = {}, {}
        for b in range(g.nblocks):
            key = record_key(name, block_key(b))
            commit = read_json(local.get(LOCAL, key), f"block {b} commit record")
            for slot, i in enumerate(commit["ids"]):
                if i in wanted and i not in where:
                    where[i] = (b, slot)
                    commits[b] = commit
        unknown = [i for i in wanted if i not in where]
        if unknown:
            raise GalleryError(f"not in gallery {name!r}: {', '.join(unknown[:10])}"
                               + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""))
        for b, slot in where.values():
            commits[b]["ids"][slot] = None
        for b, commit in sorted(commits.items()):
            lease.check()
            local.put(LOCAL, record_key(name, block_key(b)), json.dumps(commit).encode())
        lease.check()
        meta = read_json(local.get(LOCAL, record_key(name, "meta")), f"gallery {name!r} meta")
        meta["gen"] = int(meta.get("gen", 0)) + 1
        local.put(LOCAL, record_key(name, "meta"), json.dumps(meta).encode())
        purged = local.purge()  # the superseded commit records named the ids
    return {"withdrawn": wanted, "blocks_written": len(commits), "erased": False, "generation": meta["gen"],
            "store_purged": purged}


__all__ = ["info", "list_ids", "withdraw"]
