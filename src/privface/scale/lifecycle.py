"""A gallery after enrolment: ``info``, ``list_ids``, ``add`` and ``withdraw`` (``privface gallery info | list | add |
remove``).

``add`` puts new identities into a hers / idface-ckks / idface-paillier gallery without the secret key (seed 003
§3.1: ENC_DB under the public key, blocks added homomorphically). The last block's free positions are filled by
adding an encryption of the new templates at those positions (zeros elsewhere) to its ciphertexts, while the
scheme's decryption bound allows one more summed encryption (``GalleryScheme.max_sums``; commit entry ``sums``);
otherwise the last block is sealed (its free positions become empty ids, scoring 0) and new blocks follow. Every
changed or new block is written as a new generation (``layout.block_key(b, gen)``), then the meta — the gallery's
one pointer: ``n``, ``gen`` and each block's live generation ``block_gens`` — is replaced in one store write, then
the superseded generations are deleted (``secure_delete``, WAL purged). A crash before the meta write leaves the
gallery as it was (orphan records, deleted by the next change); after it, the change is done. Readers read the
meta once and the generations it names; a running local server (``scale.ident.LocalRole``) loads the changed
blocks, re-attaches to the key server (which still accepts the previous layout for identifications in flight) and
swaps its view in one assignment. cryptomask: ``add`` appends a batch (seed 001 Alg. 1, ``cryptomask_gallery``).

``info`` and ``list_ids`` read the gallery store's meta and commit records (``scale.layout``) of any scheme; no
ciphertext is read. ``withdraw`` takes identities out of the answers of a hers / idface-ckks / idface-paillier
gallery (seed 003 §3.2: a withdrawn slot's id becomes ``null``; S_local maps it to nobody and tells S_key, which
leaves it out of its argmax: ``Attach.empty``); ``update`` withdraws and adds in one change.

**Erasure (hers).** With S_key's refresh link (``key``), ``withdraw`` and ``update`` also erase: each block holding
a removed template is rewritten by ``HERS.erase`` — a masked interactive refresh with S_key (``crypto.ckks_refresh``:
S_key sees one-time-padded copies only) and a 0/1 slot mask at the refreshed level — into a new generation whose
empty slots decrypt to ≈ 0; then the meta write and the deletion of the old generation, as for ``add``. Seed 003's
IDFace packs one identity per base-p digit of a coefficient (CKKS) or of a Paillier plaintext, and a digit is not a
linear function of the plaintext: idface-ckks / idface-paillier blocks are erased by ``protocols.idface.erase``
(pads, one garbled circuit per removed digit) with S_key's secret scheme in process, or over the wire with
``erase_link.DigitEraseLink`` (``privface serve --protocol ident``: the key server's ``erase/*`` steps).

A withdrawal without erasure is one store write per block (the block's commit record, its ``ids`` entry set to
``null``), then the meta's ``gen`` is bumped so that running local servers (``scale.ident.LocalRole``) re-read the
ids; each write is atomic, so a crash leaves every block withdrawn or not, and a running identification resolves
against the ids it read when it started. Withdrawals take the gallery's writer lease (``layout.writer_lease``), as
enrolment does.
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
    meta_backend,
    part_key,
    read_json,
    record_key,
    retune,
    stored_scheme,
    tau_of,
    writer_lease,
)
from .schemes import GALLERY_SCHEMES
from .sources import photo_histogram


def _scheme(gallery_url: str, name: str) -> str:
    scheme = stored_scheme(gallery_url, name)
    if scheme not in GALLERY_SCHEMES:
        raise GalleryError(f"no gallery {name!r} in this store (or its meta is damaged)")
    return scheme


def _slots(gallery_url: str, name: str) -> tuple[str, list[list[str | None]], int, int | None]:
    """(scheme, the ids of every block in gallery order — ``None`` for a withdrawn slot —, the bytes of the block
    arrays the commit records describe, and for a gallery of its own layout (cryptomask: no meta generation, each
    block counts its own) the sum of its blocks' generations, which every change raises). Reads commit records
    only, never a ciphertext."""
    scheme = _scheme(gallery_url, name)
    if GALLERY_SCHEMES[scheme].own_layout:
        from .cryptomask_gallery import CMGallery, _commit

        cm = CMGallery(gallery_url, name)
        with open_store(gallery_url) as local:
            commits = [_commit(local, name, b, cm.meta, cm.block_count(b), cm.basis) for b in range(cm.nblocks)]
        return (scheme, [[i for c in commits for r in c["ids"] for i in r]], sum(_bytes(c) for c in commits),
                sum(c["gen"] for c in commits))
    from .gallery import Gallery

    g = Gallery(gallery_url, name)
    out, stored = [], 0
    with open_store(gallery_url) as local:
        for b in range(g.nblocks):
            commit = read_json(local.get(LOCAL, record_key(name, block_key(b, g.gens[b]))), f"block {b} commit record")
            out.append(list(commit["ids"]))
            stored += _bytes(commit)
    return scheme, out, stored, None


def _bytes(commit: dict) -> int:
    import numpy as np

    return int(np.dtype(commit["dtype"]).itemsize * int(np.prod(commit["shape"])))


def list_ids(gallery_url: str, name: str = "default") -> list[str]:
    """The identities a gallery answers with, in gallery order (withdrawn ones left out)."""
    return [i for block in _slots(gallery_url, name)[1] for i in block if i is not None]


def info(gallery_url: str, name: str = "default", key_store_url: str | None = None, *, tau: bool = True) -> dict:
    """A gallery's settings and size: scheme, identities answered and withdrawn, blocks, capacity, the idface
    transform, the stored ciphertext bytes and (``tau``) τ and its source from the key store — ``key_store_url``,
    or the default next to a ``sqlite:///g.db`` gallery when that file exists (never created here)."""
    scheme, blocks, stored, block_gens = _slots(gallery_url, name)
    with open_store(gallery_url) as local:
        meta = read_json(local.get(LOCAL, record_key(name, "meta")), f"gallery {name!r} meta")
    slots = sum(len(b) for b in blocks)
    withdrawn = sum(i is None for b in blocks for i in b)
    out = {"name": name, "scheme": scheme, "identities": slots - withdrawn, "withdrawn": withdrawn,
           "slots": slots, "dim": meta.get("dim"), "insecure_test_params": meta.get("insecure_test_params"),
           "generation": int(meta.get("gen", 0)) if block_gens is None else block_gens}
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
        out.update(_tau(gallery_url, name, key_store_url, out["identities"]))
    return out


def _retuned(report: dict, gallery_url: str, name: str, key_store_url: str | None = None, on: bool = True,
             source=None, answered: int | None = None) -> dict:
    """The change's report with τ recomputed for the identities the gallery now answers (``answered`` when the
    change counted them, else read again; ``layout.retune``; the photo counts of ``source``'s identities join the
    key store's); not ``on`` (S_local serving over HTTP never opens the key store): S_key recomputes it at the next
    attach, counting identities it did not see as the strictest."""
    if not on:
        return report
    photos = None if source is None else photo_histogram(source)
    n = len(list_ids(gallery_url, name)) if answered is None else answered
    return {**report, **retune(gallery_url, name, key_store_url, n, photos)}


def _tau(gallery_url: str, name: str, key_store_url: str | None, n: int | None = None) -> dict:
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
        return tau_of(gallery_url, name, key_store_url, n)
    except GalleryError as e:
        return {"tau": None, "tau_source": f"key store unreadable ({e})"}


def withdraw(gallery_url: str, ids: list[str], name: str = "default", *, key=None, retune_tau: bool = True) -> dict:
    """Take ``ids`` out of the answers of a hers / idface gallery; with ``key`` (S_key's refresh link: an object with
    ``refresh(masked) -> answer``, e.g. the gallery's ``HERSKey`` or ``service.clients.hers.HttpKeyServer``) and an
    erasable scheme (hers), also erase them: every block holding one is rewritten by ``erase`` as a new generation
    whose withdrawn slots decrypt to ≈ 0, and the superseded generation is deleted (module docstring).

    Every id must be answered by the gallery now (GalleryError naming the others, before anything is written).
    Returns ``{"withdrawn": [...], "blocks_written": k, "erased": bool, "generation": g, ...}``."""
    scheme = _scheme(gallery_url, name)
    if GALLERY_SCHEMES[scheme].own_layout:  # cryptomask: erasure only (its 1-bit answer has no ids to withdraw)
        from .cryptomask_erase import withdraw as erase

        return _retuned(erase(gallery_url, ids, name, key=key), gallery_url, name, on=retune_tau)
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        raise GalleryError("name at least one identity to remove")
    from .gallery import Gallery

    erase = key is not None and GALLERY_SCHEMES[scheme].erasable
    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        g = Gallery(gallery_url, name)
        collect(local, name, g.meta, g.nblocks)
        commits, where, answered = _find(local, gallery_url, name, g, wanted)
        unknown = [i for i in wanted if i not in where]
        if unknown:
            raise GalleryError(f"not in gallery {name!r}: {', '.join(unknown[:10])}"
                               + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""))
        for b, slot in where.values():
            commits[b]["ids"][slot] = None
        report: dict = {}
        if erase:
            gone = {b: {slot for bb, slot in where.values() if bb == b} for b in commits}
            erased = _erase_blocks(g, {b: c["ids"] for b, c in commits.items()}, key, lease, report, gone)
            gen, purged = _commit_erased(local, name, g, erased, commits, lease)
        else:
            meta = read_json(local.get(LOCAL, record_key(name, "meta")), f"gallery {name!r} meta")
            meta["gen"] = gen = int(meta.get("gen", 0)) + 1
            for b, commit in sorted(commits.items()):
                lease.check()
                commit.pop("erased", None)  # a slot withdrawn, not erased: ``erase_withdrawn`` finds the block
                local.put(LOCAL, record_key(name, block_key(b, g.gens[b])), json.dumps(commit).encode())
            lease.check()
            local.put(LOCAL, record_key(name, "meta"), json.dumps(meta).encode())  # the change is done here
            purged = local.purge()  # the superseded commit records (they named the ids)
    return _retuned({"withdrawn": wanted, "blocks_written": len(commits), "erased": erase, "generation": gen,
                     "store_purged": purged, **report}, gallery_url, name, on=retune_tau,
                    answered=answered - len(wanted))


#: (gallery URL, record key) → (the commit record's bytes, the ids it answers): what ``_find`` parsed before, so a
#: serving process re-reads a 2^20 gallery's records but parses only the ones that changed or may name a wanted id
_ANSWERED: dict[tuple[str, str], tuple[bytes, int]] = {}
_ANSWERED_GALLERIES = 4
#: more wanted ids than this: every record is parsed (a byte search per id per record would cost more)
_SEARCHED_IDS = 8


def _find(local, gallery_url: str, name: str, g, wanted: list[str]) -> tuple[dict, dict, int]:
    """({b: commit record of block b} for the blocks holding a wanted id, {id: (b, slot)}, the ids the gallery
    answers now). A record is parsed only when its bytes contain a wanted id as JSON writes it (a hit may be false:
    the parse decides), or differ from the ones ``_ANSWERED`` holds for its key."""
    want = set(wanted)
    needles = [(i, {json.dumps(i).encode(), json.dumps(i, ensure_ascii=False).encode()}) for i in wanted]
    search = len(wanted) <= _SEARCHED_IDS
    if len({u for u, _ in _ANSWERED} | {gallery_url}) > _ANSWERED_GALLERIES:
        _ANSWERED.clear()
    commits, where, answered = {}, {}, 0
    for b in range(g.nblocks):
        key_b = record_key(name, block_key(b, g.gens[b]))
        raw = local.get(LOCAL, key_b)
        known = _ANSWERED.get((gallery_url, key_b))
        if (search and raw is not None and known is not None and known[0] == raw
                and not any(n in raw for i, ns in needles if i not in where for n in ns)):
            answered += known[1]
            continue
        commit = read_json(raw, f"block {b} commit record")
        ids = commit["ids"]
        live = len(ids) - ids.count(None)
        _ANSWERED[(gallery_url, key_b)] = (raw, live)
        answered += live
        for i in want.intersection(ids) - where.keys():  # a set test per block, not per slot
            where[i] = (b, ids.index(i))
            commits[b] = commit
    live_keys = {record_key(name, block_key(b, g.gens[b])) for b in range(g.nblocks)}
    mine = f"{name}.block."
    for k in [k for k in _ANSWERED if k[0] == gallery_url and k[1].startswith(mine) and k[1] not in live_keys]:
        del _ANSWERED[k]  # superseded generations
    return commits, where, answered


def _carried(commit: dict, erased: bool = False) -> dict:
    """The commit entries an erased block keeps (``sums``: its kept slots keep their noise), and ``erased``: every
    empty slot of the block decrypts to ≈ 0 (``withdraw`` with a key; ``erase_withdrawn`` skips such a block)."""
    return {**{k: commit[k] for k in ("sums",) if k in commit}, **({"erased": True} if erased else {})}


def _commit_erased(local, name: str, g, erased: dict, commits: dict, lease) -> tuple[int, int]:
    """Write each erased block array as the next generation with its commit record's ids and count (and the
    ``erased`` mark where the scheme zeroes every empty slot), then the meta naming them (the change is done
    there), then delete the superseded generations and purge the store: (the new generation, records purged)."""
    from .gallery import _put_block

    meta = read_json(local.get(LOCAL, record_key(name, "meta")), f"gallery {name!r} meta")
    meta["gen"] = gen = int(meta.get("gen", 0)) + 1
    gens, every = list(g.gens), g.settings.adapter.erases_every_empty_slot
    for b, arr in erased.items():
        lease.check()
        _put_block(local, name, b, arr, int(commits[b]["count"]), commits[b]["ids"], gen,
                   _carried(commits[b], erased=every))
        gens[b] = gen
    meta["block_gens"] = gens
    lease.check()
    local.put(LOCAL, record_key(name, "meta"), json.dumps(meta).encode())  # the change is done here
    collect(local, name, meta, g.nblocks)
    return gen, local.purge()


def _erase_blocks(g, ids: dict, key, lease, report: dict, gone: dict | None = None) -> dict:
    """{b: the erased array of block b} for the blocks ``ids`` names (b → its ids, ``None`` where withdrawn): every
    slot without an id is zeroed (``GalleryScheme.erase``; idface-ckks zeroes only ``gone[b]``, the slots this
    change withdraws). Adds the refresh's figures to ``report``."""
    import time

    import numpy as np

    t0 = time.perf_counter()
    adapter, pub = g.settings.adapter, g.public_context
    out, sent, received, hiding, exchanges = {}, 0, 0, None, 0
    for b in sorted(ids):
        block = g.load_blocks([b])[0][0]
        keep = np.zeros(g.capacity, dtype=bool)
        keep[:len(ids[b])] = [i is not None for i in ids[b]]
        out[b], r = adapter.erase(g.public, adapter.block_to_array(block, pub), block.count, keep, key,
                                  None if gone is None else gone[b])
        sent, received, hiding = sent + r["bytes_sent"], received + r["bytes_received"], r["hiding_bits"]
        exchanges += r.get("exchanges", 0)  # idface: the key server round trips (3 per erasure group)
        lease.renew()
    report.update(erase_seconds=round(time.perf_counter() - t0, 3), erase_bytes_sent=sent,
                  erase_bytes_received=received, erase_hiding_bits=hiding,
                  **({"erase_exchanges": exchanges} if exchanges else {}))
    return out


def _settled(keys: list[str], head: str) -> bool:
    """Whether a block's stored ``keys`` are only its live commit record ``head`` and pieces of that same
    generation: nothing of it to delete, and its record need not be read. (A record naming an earlier generation's
    pieces, ``parts_gen``, is written by a change that writes no pieces, so it never sits beside pieces of its own
    generation; a block holding keys of two generations is read.)"""
    part = head + ".part."
    return head in keys and all(k == head or (k.startswith(part) and k[len(part):].isdigit()) for k in keys)


def collect(local, name: str, meta: dict, nblocks: int) -> int:
    """Delete every block record of gallery ``name`` the meta does not name (superseded generations, orphans of a
    change that crashed before its meta write); the number deleted. Only blocks holding keys of another generation
    than the meta's have their commit record read (a change touches a few of a gallery's blocks)."""
    from .gallery import block_gens, parts_gen

    gens, prefix = block_gens(meta, nblocks), f"{name}.block."
    by_block: dict[int, list[str]] = {}
    for k in local.ids(LOCAL):
        if k.startswith(prefix):
            b = k[len(prefix):len(prefix) + 6]
            by_block.setdefault(int(b) if b.isdigit() else -1, []).append(k)
    missing = [b for b in range(nblocks) if b not in by_block]
    if missing:
        raise GalleryError(f"block {missing[0]} commit record is missing")
    gone = []
    for b, keys in by_block.items():
        if not 0 <= b < nblocks:
            gone += keys
            continue
        head = record_key(name, block_key(b, gens[b]))
        if _settled(keys, head):
            continue
        commit = read_json(local.get(LOCAL, head), f"block {b} commit record")  # missing: refused, as before
        pg = parts_gen(commit, gens[b])
        keep = {head, *(record_key(name, part_key(b, pg, p)) for p in range(int(commit["parts"])))}
        gone += [k for k in keys if k not in keep]
    for k in gone:
        local.delete(LOCAL, k)
    return len(gone)


def add(gallery_url: str, source, name: str = "default", *, key_store_url: str | None = None,
        progress: bool = False, retune_tau: bool = True) -> dict:
    """Add ``source``'s identities to a gallery (module docstring); ids already answered are refused (GalleryError,
    nothing written). Returns ``{"added", "n", "blocks_written", "blocks_filled", "blocks_sealed", "generation",
    "seconds"}``; cryptomask: its enrolment report (a new batch, seed 001 Alg. 1)."""
    scheme = _scheme(gallery_url, name)
    adapter = GALLERY_SCHEMES[scheme]
    if adapter.own_layout:  # the gallery's own settings: a new batch must match them (cryptomask_gallery.enrol)
        with open_store(gallery_url) as local:
            meta = read_json(local.get(LOCAL, record_key(name, "meta")), f"gallery {name!r} meta")
        return _retuned(adapter.enrol(gallery_url, source, key_store_url=key_store_url, progress=progress, name=name,
                                      insecure_test_params=bool(meta.get("insecure_test_params")),
                                      backend=meta_backend(meta)).to_dict(),
                        gallery_url, name, key_store_url, retune_tau, source)
    return _retuned(_change(gallery_url, source, name, replace=False), gallery_url, name, key_store_url, retune_tau,
                    source)


def update(gallery_url: str, source, name: str = "default", *, key=None, retune_tau: bool = True) -> dict:
    """Give ``source``'s identities — each answered by the gallery now — new templates: in one change (one meta
    write), each old slot is withdrawn and the new template added as by ``add``. With ``key`` and an erasable
    scheme the old templates are erased as by ``withdraw``; otherwise they stay in their blocks' ciphertexts."""
    if GALLERY_SCHEMES[_scheme(gallery_url, name)].own_layout:  # cryptomask: the new rows replace the erased ones
        return _cm_update(gallery_url, source, name, key)
    return _retuned(_change(gallery_url, source, name, replace=True, key=key), gallery_url, name, on=retune_tau,
                    source=source)


def _cm_update(gallery_url: str, source, name: str, key) -> dict:
    """cryptomask ``update``: each block holding an old template is refreshed with the KG, the old row zeroed and the
    new template's encoding added in its place, in one write of the block (``cryptomask_erase.withdraw(replace=…)``);
    ids keep their positions and the gallery its size, so τ(N) does not change."""
    from .cryptomask_erase import withdraw as erase

    ids = list(source.ids)
    if len(set(ids)) != len(ids):
        raise GalleryError("the identities given repeat an id")
    from .cryptomask_gallery import CMGallery

    if source.dim != CMGallery(gallery_url, name).dim:
        raise GalleryError(f"the gallery holds d = {CMGallery(gallery_url, name).dim} templates, these have "
                           f"d = {source.dim}")
    x = source.templates(0, len(ids))
    report = erase(gallery_url, ids, name, key=key, replace=dict(zip(ids, x)))
    return {**{k: v for k, v in report.items() if k != "withdrawn"}, "replaced": len(ids),
            "n": len(list_ids(gallery_url, name)), "seconds": report["erase_seconds"]}


def _change(gallery_url: str, source, name: str, replace: bool, key=None) -> dict:
    import time

    from .gallery import Gallery, _put_block, parts_gen

    t0 = time.perf_counter()
    new_ids = list(source.ids)
    if len(set(new_ids)) != len(new_ids):
        raise GalleryError("the identities given repeat an id")
    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        g = Gallery(gallery_url, name)
        adapter = g.settings.adapter
        collect(local, name, g.meta, g.nblocks)
        if source.dim != g.settings.dim:
            raise GalleryError(f"the gallery holds d = {g.settings.dim} templates, these have d = {source.dim}")
        commits = [read_json(local.get(LOCAL, record_key(name, block_key(b, gb))), f"block {b} commit record")
                   for b, gb in enumerate(g.gens)]
        slots = [list(c["ids"]) for c in commits]
        where = {i: (b, k) for b, block in enumerate(slots) for k, i in enumerate(block) if i is not None}
        if replace:
            missing = [i for i in new_ids if i not in where]
            if missing:
                raise GalleryError(f"not in gallery {name!r}: {', '.join(missing[:10])} (`gallery add` adds)")
            for i in new_ids:
                b, k = where[i]
                slots[b][k] = None
        else:
            dup = [i for i in new_ids if i in where]
            if dup:
                raise GalleryError(f"already in gallery {name!r}: {', '.join(dup[:10])} (`gallery update` replaces)")
        touched = {where[i][0] for i in new_ids} if replace else set()
        gone = {b: {where[i][1] for i in new_ids if where[i][0] == b} for b in touched}
        report: dict = {}
        erased = (_erase_blocks(g, {b: slots[b] for b in touched}, key, lease, report, gone)
                  if touched and key is not None and adapter.erasable else {})
        every = adapter.erases_every_empty_slot
        x = source.templates(0, len(new_ids))
        settings, pub, cap = g.settings, g.public_context, g.capacity
        gen = int(g.meta.get("gen", 0)) + 1
        gens, n = list(g.gens), g.n
        writes, records, filled, sealed, pos = [], {}, 0, 0, 0
        last = g.nblocks - 1
        last_count = n - last * cap
        if last_count < cap:
            sums = int(commits[last].get("sums", 1))
            if sums + 1 <= adapter.max_sums(settings):
                k = min(cap - last_count, len(new_ids))
                old = erased[last] if last in erased else adapter.block_to_array(g.load_blocks([last])[0][0], pub)
                fresh = adapter.block_to_array(g.public.enc_db(x[:k], offset=last_count), pub)
                clean = every and (last in erased or (last not in touched and bool(commits[last].get("erased"))))
                writes.append((last, adapter.add_arrays(settings, pub, old, fresh), last_count + k,
                               slots[last] + new_ids[:k], {"sums": sums + 1, **({"erased": True} if clean else {})}))
                pos, filled, n = k, 1, n + k
            else:  # sealed full: its free positions become empty ids
                slots[last] += [None] * (cap - last_count)
                touched.add(last)
                n = last * cap + cap
                sealed = 1
        for b in sorted(set(erased) - {w[0] for w in writes}):
            writes.append((b, erased[b], len(slots[b]), slots[b], _carried(commits[b], erased=every)))
        for b in sorted(touched - {w[0] for w in writes}):  # only the ids change: a new record, the same pieces
            records[b] = dict(commits[b], count=len(slots[b]), ids=slots[b], parts_gen=parts_gen(commits[b], gens[b]))
            records[b].pop("erased", None)  # new empty slots, not erased
        b = g.nblocks
        while pos < len(new_ids):
            k = min(cap, len(new_ids) - pos)
            writes.append((b, adapter.block_to_array(g.public.enc_db(x[pos:pos + k]), pub), k,
                           new_ids[pos:pos + k], {}))
            pos, b, n = pos + k, b + 1, n + k
        for blk, record in records.items():
            lease.check()
            local.put(LOCAL, record_key(name, block_key(blk, gen)), json.dumps(record).encode())
            gens[blk] = gen
        for blk, arr, count, ids, extra in writes:
            lease.check()
            _put_block(local, name, blk, arr, count, ids, gen, extra)
            if blk < len(gens):
                gens[blk] = gen
            else:
                gens.append(gen)
            lease.renew()
        meta = dict(g.meta, n=n, gen=gen, block_gens=gens)
        lease.check()
        local.put(LOCAL, record_key(name, "meta"), json.dumps(meta).encode())  # the change is done here
        collect(local, name, meta, len(gens))
        purged = local.purge()
    return {"replaced" if replace else "added": len(new_ids), "n": n, "blocks_written": len(writes) + len(records),
            "blocks_filled": filled, "blocks_sealed": sealed, "generation": gen, "store_purged": purged,
            **({"erased": bool(erased) or not touched} if replace else {}), **report,
            "seconds": round(time.perf_counter() - t0, 3)}


def erase_withdrawn(gallery_url: str, name: str = "default", *, key) -> dict:
    """Erase what was only withdrawn (``withdraw`` or ``update`` without ``key``, ``--withdraw-only``, galleries
    changed before erasure existed): every block with an empty slot and no ``erased`` mark in its commit record is
    rewritten as ``withdraw`` with ``key`` rewrites it (``HERS.erase``: all its empty slots zeroed, kept slots as
    they were), then one meta write and the old generations deleted. Crash-safe as ``withdraw``; the answers do not
    change. Returns ``{"blocks_erased", "erased", "generation", "store_purged", …}`` with the refresh's figures."""
    scheme = _scheme(gallery_url, name)
    if not GALLERY_SCHEMES[scheme].erases_every_empty_slot:
        raise GalleryError(f"{scheme} galleries cannot erase a template withdrawn earlier (only hers does; "
                           "idface-ckks erases at `gallery remove | update` with the key: docs/operations.md, "
                           "\"Changing a gallery\")")
    if key is None:
        raise GalleryError("erasing needs S_key's refresh (its secret key or its reencrypt link)")
    from .gallery import Gallery

    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        g = Gallery(gallery_url, name)
        collect(local, name, g.meta, g.nblocks)
        commits = {b: read_json(local.get(LOCAL, record_key(name, block_key(b, gb))), f"block {b} commit record")
                   for b, gb in enumerate(g.gens)}
        todo = {b: c for b, c in commits.items() if None in c["ids"] and not c.get("erased")}
        if not todo:
            return {"blocks_erased": 0, "erased": True, "generation": int(g.meta.get("gen", 0)), "store_purged": 0}
        report: dict = {}
        erased = _erase_blocks(g, {b: c["ids"] for b, c in todo.items()}, key, lease, report)
        gen, purged = _commit_erased(local, name, g, erased, todo, lease)
    return {"blocks_erased": len(erased), "erased": True, "generation": gen, "store_purged": purged, **report}


__all__ = ["add", "collect", "erase_withdrawn", "info", "list_ids", "update", "withdraw"]
