"""Persisted cryptomask galleries (seed 001 §3.1, Alg. 1): the Cloud Server's encrypted gallery in a store.

Two stores, as for hers / idface-ckks (``scale.gallery``), every key prefixed by the gallery's name:

* the **gallery store** (the CS's, ``--gallery URL``), protocol ``gallery``: ``meta`` (scheme ``cryptomask``, d,
  δ, ciphertexts per block, the enrolment batches, the SHA-256 of k_sw), ``pk`` (the database's public BFV
  context, which the DPs encrypt under), ``ksw`` (k_sw = SwKeyGen(sk, sk_v), Alg. 2 line 1: the CS's switching
  key, uint64 (L, 2, L+1, N)), ``galois`` (the Galois keys under sk_v with which the CS packs the distances,
  uint32 (log₂ D, 2, 2, 3, N), ``protocols.cryptomask.he``) and, per block b, ``block.BBBBBB.gGGGGGG.part.PPPP``
  (≤ 32 MiB pieces of the block's BFV ciphertexts, k stacks of S slices (k, S, 2, L, N) uint32 in coefficient
  form, generation G; ``protocols.cryptomask.encoding``) then
  ``block.BBBBBB``, the commit record: count, shape, SHA-256, generation, Alg. 1's merge indicator ``ind`` (rows
  used in the block's last ciphertext, 0 = full) and the ids per ciphertext row.
* the **key store** (``--key-store``), protocol ``gallery-key``: the KG's ``sk``, the verifier's ``pk_v`` and
  ``sk_v``, ``meta`` (τ, SHA-256 of pk). The gallery store never holds sk or sk_v.

**Storage: ciphertexts (1×), switched at load.** The CS of ``protocols.cryptomask.he`` keeps the gallery under the
verifier's key, lifted over Q in NTT form (seed 001 §4.5; 4/3 of a ciphertext). The store keeps the ciphertexts
under pk as Alg. 1 produced them, and ``CloudServer.load`` switches and lifts them once per process (or per Ray
actor, for its blocks only). Why: the store does not depend on which verifier's k_sw the CS holds, enrolment
computes no NTT, and the merge of Alg. 1 line 7 is one addition on the stored form. The price is load time — a key
switch per ciphertext, far more than reading it — paid once by a long-lived CS and split over Ray actors; a
one-shot ``privface identify`` pays it every time (docs/protocols/cryptomask.md, "Persisted galleries and Ray", has
the figures).

**Alg. 1 and crash safety.** Templates fill ciphertexts δ at a time and blocks C ciphertexts at a time, in order,
so every block but the last is full. An enrolment call appends a *batch* (a source's ids): the DP encrypts with
the CS's indicator ind = count mod δ, its first ciphertext is merged into the last stored one (Alg. 1 line 7),
and the last block is *rewritten*: its new generation's pieces go under new keys, then its commit record replaces
the old one in one store write, then the old pieces are deleted. A block's content is only what its commit record
names, so a crash keeps either the old or the new block, never a mix. The batch (its ids' SHA-256, start, size)
is recorded in ``meta`` before its first block; re-running the same enrolment resumes after the last committed
template, a different source is refused until that batch is finished, and ids already enrolled are refused, so
no template is lost or enrolled twice.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import numpy as np

from ..crypto.lattice import LatticePublicContext, LatticeSecretContext
from ..errors import CryptoError, PrivfaceError, ProtocolError
from ..faces.registry import DEFAULT_BACKEND
from ..protocols.cryptomask import encoding
from ..protocols.cryptomask.he import (
    CloudServer,
    DataProvider,
    VerifierHE,
    basis_of,
    galois_moduli,
    galois_shape,
    merge_last,
)
from ..protocols.cryptomask.params import CM_BFV, CM_BFV_TOY
from ..protocols.cryptomask.parties import KeyGenerator
from ..store import open_store
from ..store.base import redact
from .layout import (
    KEY,
    LOCAL,
    PART_BYTES,
    VERSION,
    GalleryError,
    block_key,
    check_tau,
    current_tau,
    default_key_store,
    ids_digest,
    meta_backend,
    new_tau,
    progress_bar,
    read_json,
    record_key,
    writer_lease,
)
from .sources import Source, photo_histogram

SCHEME = "cryptomask"
CTS_PER_BLOCK = 4  # stacks per block: 6.3 MB at N = 4096 and d = 128 (16 slices, 2044 templates)


def _params(insecure: bool):
    return CM_BFV_TOY if insecure else CM_BFV


# ------------------------------------------------------------------------------------------ validation
def _meta(raw: bytes | None, what: str) -> dict:
    meta = read_json(raw, what)
    if isinstance(meta, dict) and meta.get("scheme") == SCHEME and "slices" not in meta:
        raise GalleryError("the gallery was made before cryptomask cut templates into slices (one ciphertext per "
                           "template row): re-create it (`privface gallery enrol` into a new --gallery)")
    try:
        ok = (meta["version"] == VERSION and meta["scheme"] == SCHEME
              and all(type(meta[k]) is int and meta[k] > 0 for k in ("dim", "delta", "cts_per_block", "n"))
              and type(meta["insecure_test_params"]) is bool and isinstance(meta["ksw_sha256"], str)
              and isinstance(meta["batches"], list))
        if ok:
            n = _params(meta["insecure_test_params"]).poly_modulus_degree
            ok = (meta["delta"] == encoding.rows_per_poly(n, meta["dim"])
                  and meta["slices"] == encoding.slices(meta["dim"]))
            at = 0
            for bt in meta["batches"]:
                ok = (ok and type(bt["start"]) is int and bt["start"] == at and type(bt["n"]) is int and bt["n"] > 0
                      and isinstance(bt["ids_sha256"], str))
                at += bt["n"] if ok else 0
            ok = ok and at == meta["n"]
    except (KeyError, TypeError, PrivfaceError):
        ok = False
    if not ok:
        raise GalleryError(f"{what} is damaged")
    return meta


def _public(raw: bytes | None, meta: dict):
    if raw is None:
        raise GalleryError("the gallery's public key is missing")
    try:
        pub = LatticePublicContext.from_bytes(raw, insecure_test_params=meta["insecure_test_params"])
    except CryptoError as e:
        raise GalleryError(f"the gallery's public key is damaged ({e})") from None
    if pub.params != _params(meta["insecure_test_params"]):
        raise GalleryError("the gallery's public key has other parameters than cryptomask's")
    return pub


def _ksw(raw: bytes | None, meta: dict, basis) -> np.ndarray:
    shape = (basis.L, 2, basis.L + 1, basis.n)
    if raw is None or len(raw) != 8 * int(np.prod(shape)) or hashlib.sha256(raw).hexdigest() != meta["ksw_sha256"]:
        raise GalleryError("the gallery's switching key k_sw is missing or damaged")
    K = np.frombuffer(raw, dtype=np.uint64).reshape(shape)
    if np.any(K >= np.array(basis.key, dtype=np.uint64)[:, None]):
        raise GalleryError("the gallery's switching key k_sw is damaged (a residue is not below its prime)")
    return K


def _galois(raw: bytes | None, meta: dict, basis) -> np.ndarray:
    if "galois_sha256" not in meta:
        raise GalleryError("the gallery was made before the CS packed its distances and has no Galois keys: "
                           "re-create it (`privface gallery enrol` into a new --gallery)")
    shape = galois_shape(basis.n, meta["dim"])
    if (raw is None or len(raw) != 4 * int(np.prod(shape))
            or hashlib.sha256(raw).hexdigest() != meta["galois_sha256"]):
        raise GalleryError("the gallery's Galois keys are missing or damaged")
    G = np.frombuffer(raw, dtype=np.uint32).reshape(shape)
    if np.any(G >= np.array(galois_moduli(basis), dtype=np.uint32)[:, None]):
        raise GalleryError("the gallery's Galois keys are damaged (a residue is not below its prime)")
    return G


def _commit(local, name: str, b: int, meta: dict, count: int, basis) -> dict:
    """Block b's commit record, checked against the gallery: ``count`` templates, δ ids per ciphertext row."""
    c = read_json(local.get(LOCAL, record_key(name, block_key(b))), f"block {b} commit record")
    delta, k = meta["delta"], -(-count // meta["delta"])
    rows = c.get("ids")
    shape = [k, meta["slices"], 2, basis.L, basis.n]
    if (c.get("count") != count or c.get("dtype") != "uint32" or c.get("shape") != shape
            or c.get("ind") != count % delta or type(c.get("gen")) is not int or c.get("gen") < 0
            or type(c.get("parts")) is not int or c.get("parts") < 1 or not isinstance(c.get("sha256"), str)
            or not isinstance(rows, list) or len(rows) != k or [len(r) if isinstance(r, list) else -1 for r in rows]
            != [delta] * (k - 1) + [count - (k - 1) * delta]
            or not all(isinstance(i, str) or i is None for r in rows for i in r)):  # None: erased (cryptomask_erase)
        raise GalleryError(f"block {b} commit record does not match the gallery")
    return c


def _part_key(b: int, gen: int, p: int) -> str:
    return f"{block_key(b)}.g{gen:06d}.part.{p:04d}"


def _read_block(local, name: str, b: int, c: dict, basis) -> np.ndarray:
    arr = np.empty(c["shape"], dtype=np.uint32)
    raw, pos = memoryview(arr).cast("B"), 0
    for p in range(c["parts"]):
        piece = local.get(LOCAL, record_key(name, _part_key(b, c["gen"], p)))
        if piece is None or pos + len(piece) > len(raw):
            raise GalleryError(f"block {b}: piece {p} missing or too long")
        raw[pos:pos + len(piece)] = piece
        pos += len(piece)
    if pos != len(raw) or hashlib.sha256(raw).hexdigest() != c["sha256"]:
        raise GalleryError(f"block {b} is damaged (length or SHA-256 differs from its commit)")
    if np.any(arr >= np.array(basis.q, dtype=np.uint32)[:, None]):
        raise GalleryError(f"block {b} is damaged (a residue is not below its prime)")
    return arr


def _write_block(local, name: str, b: int, arr: np.ndarray, ids: list[str | None], delta: int,
                 old: dict | None) -> None:
    """Pieces of a new generation, then the commit record (the block's one atomic switch), then old pieces go."""
    gen = 0 if old is None else old["gen"] + 1
    raw = memoryview(np.ascontiguousarray(arr, dtype=np.uint32)).cast("B")
    parts = max(1, -(-len(raw) // PART_BYTES))
    for p in range(parts):
        local.put(LOCAL, record_key(name, _part_key(b, gen, p)), raw[p * PART_BYTES:(p + 1) * PART_BYTES])
    commit = {"count": len(ids), "dtype": "uint32", "shape": list(arr.shape), "parts": parts, "gen": gen,
              "sha256": hashlib.sha256(raw).hexdigest(), "ind": len(ids) % delta,
              "ids": [ids[i:i + delta] for i in range(0, len(ids), delta)]}
    local.put(LOCAL, record_key(name, block_key(b)), json.dumps(commit).encode())
    for p in range(0 if old is None else old["parts"]):
        local.delete(LOCAL, record_key(name, _part_key(b, old["gen"], p)))


def _committed(local, name: str, meta: dict, basis) -> tuple[int, list[str], dict | None]:
    """(templates committed, their ids, the last block's commit record): blocks are a prefix, all full but the last."""
    cap = meta["delta"] * meta["cts_per_block"]
    ids, last, b = [], None, 0
    while True:
        raw = local.get(LOCAL, record_key(name, block_key(b)))
        if raw is None:
            return len(ids), ids, last
        count = read_json(raw, f"block {b} commit record").get("count")
        if type(count) is not int or not 0 < count <= cap or (last is not None and last["count"] != cap):
            raise GalleryError(f"block {b} commit record does not match the gallery")
        last = _commit(local, name, b, meta, count, basis)
        ids.extend(i for r in last["ids"] for i in r)
        b += 1


# --------------------------------------------------------------------------------------------- enrolment
@dataclass
class CMEnrolReport:
    scheme: str
    n: int
    added_now: int
    skipped: int
    dim: int
    delta: int
    ind: int
    blocks: int
    blocks_written: int
    templates_per_block: int
    storage_bytes: int
    storage_bytes_per_identity: float
    public_bytes: int
    enrol_s: float

    photos: dict | None = None
    """Several photos per identity (``sources.FusedImageSource``): per identity the photos used and refused."""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def enrol(gallery_url: str, source: Source, *, key_store_url: str | None = None, tau: float | None = None,
          insecure_test_params: bool = False, progress: bool = False, after_block=None,
          name: str = "default", backend: str = DEFAULT_BACKEND) -> CMEnrolReport:
    """Alg. 1 into a persisted gallery: append ``source`` (a new batch) or resume its interrupted enrolment.

    A new gallery gets the KG's keys (sk, the verifier's pk_v, sk_v → key store; pk, k_sw → gallery store).
    ``after_block(b)`` is called after block b's commit record is written (tests interrupt enrolment with it).
    One enrolment per gallery at a time (``layout.writer_lease``): the last block is never rewritten by two.
    """
    t0 = time.perf_counter()
    ids, dim = list(source.ids), int(source.dim)
    if len(set(ids)) != len(ids):
        raise GalleryError("the source repeats an id")
    n_ring = _params(insecure_test_params).poly_modulus_degree
    delta = encoding.rows_per_poly(n_ring, dim)  # TemplateError for a d cryptomask cannot pack
    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        raw = local.get(LOCAL, record_key(name, "meta"))
        if raw is None:
            if tau is not None and not -1.0 < tau < 1.0:
                raise GalleryError("--tau is a cosine in (−1, 1) for cryptomask")
            tau_meta = new_tau(tau, backend, dim, "cryptomask", len(ids), photo_histogram(source))
            tau = tau_meta["tau"]
            kg = KeyGenerator(insecure_test_params=insecure_test_params)
            pub_v, sec_v = kg.verifier_keys("verifier")
            K = np.ascontiguousarray(kg.switching_key("verifier"), dtype=np.uint64)
            GK = np.ascontiguousarray(kg.galois_keys("verifier", dim), dtype=np.uint32)
            pk = kg.public.to_bytes()
            key_store_url = key_store_url or default_key_store(gallery_url)  # only a new gallery needs it (an add
            # by the CS, which never reads the key store, appends to an existing one)
            with open_store(key_store_url) as keys:  # secrets first: a gallery never exists without its keys
                keys.put(KEY, record_key(name, "sk"), kg.secret_bytes())
                keys.put(KEY, record_key(name, "pk_v"), pub_v.to_bytes())
                keys.put(KEY, record_key(name, "sk_v"), sec_v.secret_to_bytes())
                meta_k = {"pk_sha256": hashlib.sha256(pk).hexdigest(), **tau_meta}
                keys.put(KEY, record_key(name, "meta"), json.dumps(meta_k).encode())
            local.put(LOCAL, record_key(name, "pk"), pk)
            local.put(LOCAL, record_key(name, "ksw"), K.tobytes())
            local.put(LOCAL, record_key(name, "galois"), GK.tobytes())
            meta = {"version": VERSION, "scheme": SCHEME, "dim": dim, "beta": None,
                    "insecure_test_params": insecure_test_params, "delta": delta, "slices": encoding.slices(dim),
                    "cts_per_block": CTS_PER_BLOCK,
                    "ksw_sha256": hashlib.sha256(K.tobytes()).hexdigest(),
                    "galois_sha256": hashlib.sha256(GK.tobytes()).hexdigest(), "batches": [], "n": 0,
                    "backend": backend}
            pub = kg.public
        else:
            meta = read_json(raw, "gallery meta")
            if meta.get("scheme") != SCHEME:
                raise GalleryError(f"the gallery was enrolled with {meta.get('scheme')}, not cryptomask (scheme)")
            meta = _meta(raw, "gallery meta")
            differ = [k for k, v in (("dim", dim), ("insecure_test_params", insecure_test_params)) if meta.get(k) != v]
            differ += ["backend"] if meta_backend(meta) != backend else []
            if differ:
                raise GalleryError(f"the gallery was enrolled with other settings ({', '.join(differ)}); "
                                   "use another --gallery to start afresh")
            check_tau(tau, gallery_url, name, key_store_url)
            pk = local.get(LOCAL, record_key(name, "pk"))
            pub = _public(pk, meta)
        basis = basis_of(pub)
        cap = delta * meta["cts_per_block"]
        count, enrolled, last = _committed(local, name, meta, basis)
        if count > meta["n"]:
            raise GalleryError("the gallery holds more templates than its meta records (damaged)")
        batches, digest = meta["batches"], ids_digest(ids)
        if batches and batches[-1]["ids_sha256"] == digest and batches[-1]["n"] == len(ids):
            start = batches[-1]["start"]  # resume (or nothing left to do)
        elif batches and count < meta["n"]:
            raise GalleryError("an earlier enrolment into this gallery was interrupted: re-run it with the same "
                               "inputs to finish it before adding others")
        else:
            if not set(ids).isdisjoint(enrolled):
                raise GalleryError("some ids are already enrolled in this gallery (a template is enrolled once)")
            start = count
            batches.append({"start": start, "n": len(ids), "ids_sha256": digest})
            meta["n"] = start + len(ids)
            local.put(LOCAL, record_key(name, "meta"), json.dumps(meta).encode())  # the batch before its first block
        done, skipped, written = count - start, count - start, 0
        bar = progress_bar(len(ids), done, progress)
        dp = DataProvider(pub)
        try:
            while done < len(ids):
                b, used = divmod(count, cap)
                take = min(cap - used, len(ids) - done)
                up = dp.enrol(source.templates(done, done + take), count % delta)  # Alg. 1 lines 2–6
                cts, old_ids = up.cts, []
                if used:  # the block's last ciphertext takes the merge (Alg. 1 line 7); the block is rewritten
                    old = _read_block(local, name, b, last, basis)
                    if up.merge:
                        old[-1] = merge_last(basis, old[-1], cts[0])
                        cts = cts[1:]
                    cts, old_ids = np.concatenate([old, cts]), [i for r in last["ids"] for i in r]
                lease.check()
                _write_block(local, name, b, cts, old_ids + ids[done:done + take], delta, last if used else None)
                lease.renew()
                last = _commit(local, name, b, meta, used + take, basis)
                count, done, written = count + take, done + take, written + 1
                if bar is not None:
                    bar.update(take)
                if after_block is not None:
                    after_block(b)
        finally:
            if bar is not None:
                bar.close()
    nblocks = -(-count // cap)
    stored = 4 * encoding.slices(dim) * 2 * basis.L * basis.n * -(-count // delta)
    public_bytes = (len(pk) + 8 * basis.L * 2 * (basis.L + 1) * basis.n  # pk + k_sw + Galois keys, once per gallery
                    + 4 * int(np.prod(galois_shape(basis.n, dim))))
    return CMEnrolReport(SCHEME, count, len(ids) - skipped, skipped, dim, delta, count % delta, nblocks, written,
                         cap, stored, round(stored / max(count, 1), 1), public_bytes,
                         round(time.perf_counter() - t0, 3))


# -------------------------------------------------------------------------------------------- loading
class CMGallery:
    """The CS's view of a persisted cryptomask gallery: meta, pk, k_sw and the block layout; blocks on demand."""

    def __init__(self, gallery_url: str, name: str = "default") -> None:
        self.url, self.name = gallery_url, name
        with open_store(gallery_url) as local:
            self.meta = _meta(local.get(LOCAL, record_key(name, "meta")),
                              f"gallery {name!r} meta in {redact(gallery_url)}")
            self.pk_bytes = local.get(LOCAL, record_key(name, "pk"))
            self.public = _public(self.pk_bytes, self.meta)
            self.basis = basis_of(self.public)
            self.ksw = _ksw(local.get(LOCAL, record_key(name, "ksw")), self.meta, self.basis)
            self.galois = _galois(local.get(LOCAL, record_key(name, "galois")), self.meta, self.basis)
            self.n, self.dim, self.delta = self.meta["n"], self.meta["dim"], self.meta["delta"]
            self.backend = meta_backend(self.meta)
            self.capacity = self.delta * self.meta["cts_per_block"]
            self.nblocks = -(-self.n // self.capacity)
            missing = [b for b in range(self.nblocks) if local.get(LOCAL, record_key(name, block_key(b))) is None]
        if missing:
            raise GalleryError(f"the gallery is incomplete ({len(missing)} of {self.nblocks} blocks missing): "
                               "re-run the same `privface gallery enrol` to finish it")

    def block_count(self, b: int) -> int:
        return min(self.capacity, self.n - b * self.capacity)

    def load_blocks(self, indices) -> list[np.ndarray]:
        """The ciphertext arrays (k, 2, L, N) of the given blocks, each checked against its commit record."""
        out = []
        with open_store(self.url) as local:
            for b in indices:
                c = _commit(local, self.name, b, self.meta, self.block_count(b), self.basis)
                out.append(_read_block(local, self.name, b, c, self.basis))
        return out

    def ids(self) -> list[str]:
        with open_store(self.url) as local:
            return [i for b in range(self.nblocks) for r in
                    _commit(local, self.name, b, self.meta, self.block_count(b), self.basis)["ids"] for i in r]

    def cloud_server(self, indices=None):
        """A ``CloudServer`` holding the given blocks (default all), with k_sw: Alg. 2's CS part."""
        indices = list(range(self.nblocks) if indices is None else indices)
        cs = CloudServer(self.public, self.dim)
        try:
            cs.load(self.load_blocks(indices), sum(self.block_count(b) for b in indices))
            cs.set_switching_key(self.ksw, self.galois)
        except ProtocolError as e:
            raise GalleryError(f"the gallery is damaged ({e})") from None
        return cs


def verifier(gallery: CMGallery, key_store_url: str | None = None):
    """(VerifierHE with pk and the verifier's sk_v from the key store, τ), checked against the gallery's pk."""
    return verifier_keys(key_store_url or default_key_store(gallery.url), gallery.name, gallery.pk_bytes,
                         gallery.dim, gallery.meta["insecure_test_params"], n=gallery.n)


def verifier_keys(key_store_url: str, name: str, pk_bytes: bytes, dim: int, insecure_test_params: bool,
                  n: int | None = None):
    """(VerifierHE, τ) from the key store's sk_v for the database public key ``pk_bytes`` — from the gallery store,
    or sent by a CS over HTTP: accepted only if its SHA-256 is the one the key store recorded next to sk_v."""
    with open_store(key_store_url) as keys:
        meta = read_json(keys.get(KEY, record_key(name, "meta")), f"key store meta of gallery {name!r}")
        pk_v, sk_v = keys.get(KEY, record_key(name, "pk_v")), keys.get(KEY, record_key(name, "sk_v"))
    if pk_v is None or sk_v is None:
        raise GalleryError("the key store holds no verifier key (pk_v, sk_v)")
    if meta.get("pk_sha256") != hashlib.sha256(pk_bytes).hexdigest():
        raise GalleryError("the key store belongs to another gallery (public key differs)")
    tau = current_tau(meta, n)["tau"]  # a default τ follows the gallery's size N (scale.tau_curve)
    if not isinstance(tau, float) or not -1.0 < tau < 1.0:
        raise GalleryError("the key store's τ is damaged")
    public = _public(pk_bytes, {"insecure_test_params": insecure_test_params})
    try:
        pub_v = LatticePublicContext.from_bytes(pk_v, insecure_test_params=insecure_test_params)
        if pub_v.params != public.params:
            raise CryptoError("pk_v has other parameters than the gallery")
        sec_v = LatticeSecretContext.from_bytes(pub_v, sk_v)
        return VerifierHE(public, pub_v, sec_v, dim), tau
    except CryptoError as e:
        raise GalleryError(f"the key store's verifier key is damaged ({e})") from None
