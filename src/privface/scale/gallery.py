"""Persistent encrypted galleries for hers / idface-ckks / idface-paillier (seed 003 §3.2, §4): resumable,
block-atomic enrolment.

Two stores, kept apart as the two servers are:

Every key below is prefixed by the gallery's name (``default.meta`` …), so one store can hold several galleries.

* the **gallery store** (S_local, ``--gallery URL``) holds, under protocol ``gallery``: ``meta`` (scheme,
  parameters — for idface also the centring mean μ and the lift's D and seed, so that every query is
  centred and lifted as the enrolled templates were —, size, a digest of the id list), ``pk`` (the public
  lattice context; idface-paillier: N, ``paillier_blocks``) and, per block b,
  ``block.BBBBBB.part.PPPP`` (the block's ciphertext array in ≤ 32 MiB pieces) then ``block.BBBBBB`` (the
  commit record: count, dtype, shape, SHA-256 of the array, the block's ids). A block exists only once its
  commit record does, and that record is written after every piece, so a crash leaves whole blocks and
  at most some orphan pieces that the re-run overwrites. Pieces keep every record far below the store's
  64 MiB limit and let a 1M × 512 gallery (≈ 2.4 GB at β = 63) stream in and out of SQLite or PostgreSQL.
* the **key store** (S_key, ``--key-store URL``; default for ``sqlite:///g.db``: ``sqlite:///g.keys.db``)
  holds, under protocol ``gallery-key``: ``sk`` (the secret key), ``meta`` (τ and the SHA-256 of the public
  context it belongs to). The gallery store never sees sk.

Enrolment streams templates from a ``Source`` (``.npy`` rows or face images), encrypts block after block and
commits each; re-running the same enrolment skips committed blocks (the templates of a skipped block are not
even read), so an interrupted enrolment resumes and ends with the same gallery an uninterrupted one would hold
(same ids, same answers). Templates are scaled to unit norm (HERS needs ‖x‖ ≤ 1; T_α ignores scale).

Each scheme is an adapter of ``scale.schemes`` (key records, ENC_DB / IP_DB, block layout); this module knows
none of them by name. The store keys, records and the writer lease are ``scale.layout``'s.

One enrolment per gallery at a time: ``layout.writer_lease`` holds ``<name>.lease`` (protocol ``gallery-lease`` of
the gallery store; ``store.lease.Lease``: token, host, pid, acquired, expires) for the whole enrolment, renewed
after every block and every ``LEASE_TTL`` / 3 s. A second enrolment meanwhile gets GalleryError and writes nothing; a
killed enrolment's lease expires after ``LEASE_TTL`` (120 s) and the next enrolment takes it over and resumes.
Readers (``Gallery``, identification) never look at the lease.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import CryptoError, TemplateError
from ..faces.registry import DEFAULT_BACKEND
from ..protocols.hers import KeyServer, LocalServer
from ..protocols.idface import IDFaceParams
from ..protocols.idface.centring import shipped_mean
from ..store import open_store
from ..store.base import redact
from .encrypt_pool import default_workers, encrypted_blocks
from .layout import (
    KEY,
    LEASE,
    LEASE_TTL,
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
    part_key,
    progress_bar,
    read_json,
    record_key,
    retune,
    stored_scheme,
    tau_of,
    writer_lease,
)
from .schemes import BLOCK_SCHEMES, GALLERY_SCHEMES, GalleryScheme, gallery_scheme
from .sources import ImageSource, NpySource, Source, open_source, photo_histogram, unit

SCHEMES = BLOCK_SCHEMES
__all__ = ["KEY", "LEASE", "LEASE_TTL", "LOCAL", "PART_BYTES", "SCHEMES", "VERSION", "EnrolReport", "Gallery",
           "GalleryError", "ImageSource", "NpySource", "Settings", "Source", "check_tau", "cost_note",
           "default_key_store", "deployment_defaults", "enrol",
           "gallery_ids", "key_server", "new_tau", "open_source", "tau_of", "unit", "writer_lease"]


@dataclass(frozen=True)
class Settings:
    """A gallery's scheme and parameters; idface-ckks / idface-paillier: β, the centring mean μ (or None) and
    the lift (D, seed) (or None) — ``protocols.idface.IDFaceParams`` applies them inside ENC_DB and IP_DB.
    idface-paillier's keys and block arrays are ``paillier_blocks``' (2048-bit N; 512 only for tests)."""

    scheme: str
    dim: int
    beta: int | None
    insecure_test_params: bool
    mean: tuple[float, ...] | None = field(default=None, repr=False)
    lift: int | None = None
    lift_seed: int | None = None

    @property
    def adapter(self) -> GalleryScheme:
        """This gallery's scheme adapter (``scale.schemes``)."""
        return gallery_scheme(self.scheme, blocks=True)

    def idface_params(self):
        return IDFaceParams.for_dim(self.dim, self.beta, self.mean, self.lift, self.lift_seed)

    def generate_keypair(self) -> tuple[object, object, bytes, bytes]:
        """(pub, sec, pk record, sk record) of a fresh key pair for this scheme."""
        return self.adapter.generate_keypair(self)

    def load_public(self, raw: bytes):
        """The public key / context from its record (CryptoError if damaged)."""
        return self.adapter.load_public(self, raw)

    def load_secret(self, pub, raw: bytes):
        return self.adapter.load_secret(self, pub, raw)

    def public_scheme(self, pub):
        return self.adapter.public_scheme(self, pub)

    def secret_scheme(self, sec):
        return self.adapter.secret_scheme(self, sec)

    def tau_key(self, centring: str) -> str:
        """This setting's key in the shipped default-τ table (``scale.default_tau``)."""
        return self.adapter.tau_key(self, centring)

    def block_layout(self, pub) -> tuple[str, tuple[int, ...]]:
        """The dtype and shape every stored block array of this scheme has."""
        return self.adapter.block_layout(self, pub)

    def public_meta(self, pub) -> dict:
        """idface-paillier: the public key N (hex) in the meta too, checked against the ``pk`` record on load."""
        return self.adapter.public_meta(pub)

    def transform_meta(self) -> dict:
        """The meta entries that fix the idface pre-transform: ``centring`` {mean} and ``lift`` {dim, seed}."""
        return {"centring": None if self.mean is None else {"mean": list(self.mean)},
                "lift": None if self.lift is None else {"dim": self.lift, "seed": self.lift_seed}}


CENTRINGS = ("none", "shipped")


def deployment_defaults(scheme: str, dim: int, centring: str | None, lift: int | None) -> tuple[str, int | None]:
    """(centring, lift) as ``privface gallery enrol`` and ``privface.enrol`` choose them when not given: idface
    centred with the backend's shipped mean and lifted to ``protocols.idface.lift.DEFAULT_LIFT`` (d = 128 → 2048;
    the settings whose default τ is calibrated and whose accuracy the docs report); ``lift`` 0 is no lift. hers and
    cryptomask take neither. (``enrol`` itself takes them literally: no centring, no lift unless asked.)"""
    from ..protocols.idface.lift import DEFAULT_LIFT

    if not gallery_scheme(scheme).transform:
        return centring or "none", lift or None
    return centring or "shipped", (DEFAULT_LIFT.get(dim) if lift is None else lift) or None


def cost_note(report) -> str | None:
    """A line for the enrolment output when the gallery fills under a tenth of its (last) block: what a block of
    this setting costs and what is smaller (issue 37: 20 faces in idface-ckks with the 2048-D lift are one 537 MB
    block, against 16.8 MB for hers). None when the blocks are well used."""
    if not report.blocks or report.n >= report.templates_per_block // 10:
        return None
    block = report.storage_bytes / report.blocks
    text = (f"one {report.scheme} block is {block / 1e6:.1f} MB and holds up to {report.templates_per_block} "
            f"identities; these {report.n} use {report.storage_bytes_per_identity / 1e6:.2f} MB each")
    if report.lift:
        text += (f" — the lift to D = {report.lift} makes each block {report.lift // report.dim}× larger (it keeps "
                 "idface's accuracy at d = 128); --lift 0 or --scheme hers is smaller for a small gallery")
    return text + "."


def _settings(scheme: str, dim: int, beta: int | None, insecure: bool, centring: str = "none",
              backend: str = DEFAULT_BACKEND, lift: int | None = None) -> Settings:
    adapter = gallery_scheme(scheme, blocks=True)
    if centring not in CENTRINGS:
        raise GalleryError(f"--centring must be one of {CENTRINGS}, got {centring!r}")
    if not adapter.transform:
        _no_transform(beta, centring, lift)
        return Settings(scheme, dim, beta, insecure)
    mean = None
    if centring == "shipped":
        mean = tuple(float(v) for v in shipped_mean(backend))
        if len(mean) != dim:
            raise GalleryError(f"the shipped {backend} mean has d = {len(mean)}, the templates d = {dim}")
    p = IDFaceParams.for_dim(dim, beta, mean, lift or None)  # validates d, D and β
    return Settings(scheme, dim, p.beta, insecure, p.mean, p.lift, None if p.lift is None else p.lift_seed)


def _no_transform(beta: int | None, centring: str, lift: int | None) -> None:
    if beta is not None or centring != "none" or lift:
        raise GalleryError("--beta, --centring and --lift apply to idface-ckks / idface-paillier only")


def _meta_settings(meta: dict) -> Settings:
    """Settings from a stored meta record (galleries without ``centring`` / ``lift`` entries have neither)."""
    adapter = GALLERY_SCHEMES.get(meta.get("scheme"))
    if adapter is not None and adapter.own_layout:
        raise GalleryError("this is a cryptomask gallery: it is answered by `privface identify --gallery` "
                           "(scale.cryptomask_identify), not by the hers/idface local and key servers")
    try:
        centring, lifted = meta.get("centring"), meta.get("lift")
        mean = None if centring is None else tuple(float(v) for v in centring["mean"])
        lift, seed = (None, None) if lifted is None else (_int(lifted["dim"]), _int(lifted["seed"]))
        settings = Settings(meta["scheme"], int(meta["dim"]), meta["beta"], bool(meta["insecure_test_params"]),
                            mean, lift, seed)
        if settings.scheme not in SCHEMES:
            raise ValueError(settings.scheme)
        if settings.adapter.transform:
            settings.idface_params()  # validates μ, D and the seed
        elif mean is not None or lift is not None:
            raise ValueError("hers has no centring or lift")
    except (KeyError, TypeError, ValueError, TemplateError) as e:
        raise GalleryError(f"gallery meta is damaged ({e})") from None
    return settings


def block_gens(meta: dict, nblocks: int) -> list[int]:
    """Each block's live generation: the meta's ``block_gens`` after a gallery change (``scale.lifecycle``), else
    all 0 (as enrolment writes them)."""
    gens = meta.get("block_gens")
    if gens is None:
        return [0] * nblocks
    if (not isinstance(gens, list) or len(gens) != nblocks
            or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gens)):
        raise GalleryError("gallery meta is damaged (block_gens)")
    return gens


def parts_gen(commit: dict, gen: int) -> int:
    """The generation whose pieces a commit record names: its own, or (``parts_gen``) an earlier one's, when a
    change rewrote only the record (a block sealed full by ``scale.lifecycle.add``)."""
    g = commit.get("parts_gen", gen)
    if not isinstance(g, int) or isinstance(g, bool) or not 0 <= g <= gen:
        raise GalleryError("a block commit record is damaged (parts_gen)")
    return g


def _int(v) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


@dataclass
class EnrolReport:
    scheme: str
    n: int
    dim: int
    beta: int | None
    centring: str
    lift: int | None
    blocks: int
    blocks_encrypted: int
    blocks_skipped: int
    templates_per_block: int
    storage_bytes: int
    storage_bytes_per_identity: float
    enrol_s: float

    photos: dict | None = None
    """Several photos per identity (``sources.FusedImageSource``): per identity the photos used and refused."""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def enrol(gallery_url: str, source: Source, scheme: str, *, key_store_url: str | None = None,
          beta: int | None = None, tau: float | None = None, insecure_test_params: bool = False,
          progress: bool = False, after_block=None, name: str = "default", centring: str = "none",
          backend: str = DEFAULT_BACKEND, lift: int | None = None, workers: int | None = None) -> EnrolReport:
    """Encrypt ``source`` into the gallery block by block; resume when the gallery already holds some blocks.

    ``workers``: processes encrypting blocks while this one writes them (``scale.encrypt_pool``; default one per
    core for a large gallery, none for a few blocks).

    idface-ckks: ``centring`` "shipped" subtracts ``backend``'s shipped mean (``protocols.idface.centring``)
    and ``lift`` = D lifts into D dimensions (``protocols.idface.lift``) before T_α; both are recorded in the
    gallery meta, and ``Gallery`` rebuilds the same ``IDFaceParams`` so queries get the same transform.
    A gallery made with other settings or other ids is refused (``GalleryError``), never mixed into.
    ``after_block(b)`` is called after block b is committed (tests interrupt enrolment with it).
    One enrolment per gallery at a time (``writer_lease``): a second one gets GalleryError and changes nothing.
    A scheme with its own layout (``scale.schemes``: cryptomask) enrols itself (``cryptomask_gallery.enrol``;
    seed 001 Alg. 1: a new source is appended).
    """
    adapter = GALLERY_SCHEMES.get(scheme)
    if adapter is not None and adapter.own_layout:  # its own layout (seed 001: scale.cryptomask_gallery)
        _no_transform(beta, centring, lift)
        appended = stored_scheme(gallery_url, name) is not None  # a new batch: its photo counts join the key store's
        report = adapter.enrol(gallery_url, source, key_store_url=key_store_url, tau=tau,
                               insecure_test_params=insecure_test_params, progress=progress,
                               after_block=after_block, name=name, backend=backend)
        retune(gallery_url, name, key_store_url, report.n,  # a batch appended: τ follows N
               photo_histogram(source) if appended else None)
        return report
    settings = _settings(scheme, source.dim, beta, insecure_test_params, centring, backend, lift)
    key_store_url = key_store_url or default_key_store(gallery_url)
    t0 = time.perf_counter()
    ids = source.ids
    wanted = {"version": VERSION, "scheme": settings.scheme, "dim": settings.dim, "beta": settings.beta,
              "insecure_test_params": insecure_test_params, "n": len(ids), "ids_sha256": ids_digest(ids),
              "backend": backend, **settings.transform_meta()}
    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        meta_raw = local.get(LOCAL, record_key(name, "meta"))
        if meta_raw is None:
            tau_meta = new_tau(tau, backend, settings.dim, settings.tau_key(centring), len(ids),
                               photo_histogram(source))
            pub, _, pk, sk = settings.generate_keypair()
            with open_store(key_store_url) as keys:  # sk first: a gallery never exists without its key
                keys.put(KEY, record_key(name, "sk"), sk)
                keys.put(KEY, record_key(name, "meta"), json.dumps({"pk_sha256": hashlib.sha256(pk).hexdigest(),
                                                                    **tau_meta}).encode())
            local.put(LOCAL, record_key(name, "pk"), pk)
            meta = dict(wanted, capacity=settings.public_scheme(pub).capacity, **settings.public_meta(pub))
            local.put(LOCAL, record_key(name, "meta"), json.dumps(meta).encode())
        else:
            meta = read_json(meta_raw, "gallery meta")
            meta = {**meta, "backend": meta_backend(meta)}
            differ = sorted(k for k in wanted if meta.get(k) != wanted[k])
            if differ and meta.get("block_gens") is not None:
                raise GalleryError("the gallery was changed by `privface gallery add` since it was enrolled: add "
                                   "identities with `gallery add`, or use another --gallery to start afresh")
            if differ:
                raise GalleryError(f"the gallery was enrolled with other settings or inputs ({', '.join(differ)}); "
                                   "use another --gallery to start afresh")
            check_tau(tau, gallery_url, name, key_store_url)
            pk = local.get(LOCAL, record_key(name, "pk"))
            pub = _load_public(settings, pk)
        public = settings.public_scheme(pub)
        cap = int(meta["capacity"])
        if cap != public.capacity:
            raise GalleryError("gallery meta disagrees with its public key (capacity)")
        nblocks = -(-len(ids) // cap)
        done = [local.get(LOCAL, record_key(name, block_key(b))) is not None for b in range(nblocks)]
        bar = progress_bar(len(ids), sum(min(cap, len(ids) - b * cap) for b in range(nblocks) if done[b]), progress)
        encrypted = 0
        todo = [b for b in range(nblocks) if not done[b]]
        try:
            for b, array in encrypted_blocks(settings, pk, public, pub, todo,
                                             lambda b: source.templates(b * cap, min(len(ids), (b + 1) * cap)),
                                             default_workers(len(todo)) if workers is None else workers):
                lo, hi = b * cap, min(len(ids), (b + 1) * cap)
                lease.check()
                _put_block(local, name, b, array, hi - lo, ids[lo:hi])
                lease.renew()
                encrypted += 1
                if bar is not None:
                    bar.update(hi - lo)
                if after_block is not None:
                    after_block(b)
        finally:
            if bar is not None:
                bar.close()
    storage = nblocks and _storage_bytes(settings, pub, nblocks)
    return EnrolReport(settings.scheme, len(ids), settings.dim, settings.beta,
                       centring if settings.mean is not None else "none", settings.lift, nblocks, encrypted,
                       nblocks - encrypted, cap, storage, round(storage / len(ids), 1),
                       round(time.perf_counter() - t0, 3))


def _load_public(settings: Settings, raw: bytes | None):
    if raw is None:
        raise GalleryError("the gallery's public key is missing")
    try:
        return settings.load_public(raw)
    except CryptoError as e:
        raise GalleryError(f"the gallery's public key is damaged ({e})") from None


def _storage_bytes(settings: Settings, pub, nblocks: int) -> int:
    dtype, shape = settings.block_layout(pub)
    return int(nblocks * np.dtype(dtype).itemsize * int(np.prod(shape)))


def _put_block(store, name: str, b: int, array: np.ndarray, count: int, ids: list, gen: int = 0,
               extra: dict | None = None) -> None:
    """Block b's pieces, then its commit record (generation ``gen``; ``extra``: more commit entries)."""
    data = np.ascontiguousarray(array)
    raw = memoryview(data).cast("B")
    parts = max(1, -(-len(raw) // PART_BYTES))
    for p in range(parts):
        store.put(LOCAL, record_key(name, part_key(b, gen, p)), raw[p * PART_BYTES:(p + 1) * PART_BYTES])
    commit = {"count": count, "dtype": str(data.dtype), "shape": list(data.shape), "parts": parts,
              "sha256": hashlib.sha256(raw).hexdigest(), "ids": ids, **(extra or {})}
    store.put(LOCAL, record_key(name, block_key(b, gen)), json.dumps(commit).encode())


# -------------------------------------------------------------------------------------------- loading
class Gallery:
    """S_local's view of a persisted gallery: settings, public scheme, block count; blocks load on demand."""

    def __init__(self, gallery_url: str, name: str = "default") -> None:
        self.url, self.name = gallery_url, name
        with open_store(gallery_url) as local:
            self.meta = read_json(local.get(LOCAL, record_key(name, "meta")),
                                  f"gallery {name!r} meta in {redact(gallery_url)}")
            if self.meta.get("version") != VERSION:
                raise GalleryError("unsupported gallery version")
            pk = local.get(LOCAL, record_key(name, "pk"))
            if pk is None:
                raise GalleryError("the gallery's public key is missing")
            self.settings = _meta_settings(self.meta)
            self.backend = meta_backend(self.meta)
            self.pk_bytes = pk
            self.public_context = _load_public(self.settings, pk)
            if any(self.meta.get(k) != v for k, v in self.settings.public_meta(self.public_context).items()):
                raise GalleryError("gallery meta disagrees with its public key (paillier_n)")
            self.public = self.settings.public_scheme(self.public_context)
            self.n, self.capacity = self.meta.get("n"), self.meta.get("capacity")
            if not (isinstance(self.n, int) and self.n >= 1 and self.capacity == self.public.capacity):
                raise GalleryError("gallery meta is damaged (n, or capacity disagrees with its public key)")
            self.nblocks = -(-self.n // self.capacity)
            self.gens = block_gens(self.meta, self.nblocks)
            missing = [b for b in range(self.nblocks)
                       if local.get(LOCAL, record_key(name, block_key(b, self.gens[b]))) is None]
        if missing:
            raise GalleryError(f"the gallery is incomplete ({len(missing)} of {self.nblocks} blocks missing): "
                               "re-run the same `privface gallery enrol` to finish it")

    def load_blocks(self, indices=None) -> tuple[list, list[list[str]]]:
        """(blocks, ids per block) for the given block indices (default: all), verified against their commits."""
        dtype, shape = self.settings.block_layout(self.public_context)
        indices = range(self.nblocks) if indices is None else indices
        blocks, ids = [], []
        with open_store(self.url) as local:
            for b in indices:
                commit = read_json(local.get(LOCAL, record_key(self.name, block_key(b, self.gens[b]))),
                                   f"block {b} commit record")
                count = commit.get("count")
                expect = min(self.capacity, self.n - b * self.capacity)
                if (commit.get("dtype") != dtype or commit.get("shape") != list(shape) or count != expect
                        or not isinstance(commit.get("ids"), list) or len(commit["ids"]) != count):
                    raise GalleryError(f"block {b} commit record does not match the gallery")
                arr = np.empty(shape, dtype=dtype)
                raw = memoryview(arr).cast("B")
                pos = 0
                for p in range(int(commit["parts"])):
                    piece = local.get(LOCAL, record_key(self.name, part_key(b, parts_gen(commit, self.gens[b]), p)))
                    if piece is None or pos + len(piece) > len(raw):
                        raise GalleryError(f"block {b}: piece {p} missing or too long")
                    raw[pos:pos + len(piece)] = piece
                    pos += len(piece)
                if pos != len(raw) or hashlib.sha256(raw).hexdigest() != commit["sha256"]:
                    raise GalleryError(f"block {b} is damaged (length or SHA-256 differs from its commit)")
                blocks.append(self.settings.adapter.block_from_array(arr, count, self.public_context, f"block {b}"))
                ids.append(commit["ids"])
        return blocks, ids

    def local_server(self):
        """A ``LocalServer`` holding every block (single process)."""
        local = LocalServer(self.public)
        local.blocks, ids = self.load_blocks()
        local.ids = [i for chunk in ids for i in chunk]
        return local


def key_server(gallery: Gallery, key_store_url: str | None = None):
    """S_key for ``gallery``: its sk from the key store (checked against the gallery's public key) and τ."""
    with open_store(key_store_url or default_key_store(gallery.url)) as keys:
        meta = read_json(keys.get(KEY, record_key(gallery.name, "meta")), f"key store meta of gallery {gallery.name!r}")
        sk = keys.get(KEY, record_key(gallery.name, "sk"))
    if sk is None:
        raise GalleryError("the key store holds no secret key")
    if meta.get("pk_sha256") != hashlib.sha256(gallery.pk_bytes).hexdigest():
        raise GalleryError("the key store belongs to another gallery (public key differs)")
    try:
        sec = gallery.settings.load_secret(gallery.public_context, sk)
    except CryptoError as e:
        raise GalleryError(f"the key store's secret key is damaged ({e})") from None
    answered = sum(i is not None for i in gallery_ids(gallery))
    return KeyServer(gallery.settings.secret_scheme(sec), float(current_tau(meta, answered)["tau"]))


def gallery_ids(gallery: Gallery) -> list[str]:
    """The enrolled ids in gallery order, from the blocks' commit records (no ciphertext is read)."""
    out = []
    with open_store(gallery.url) as local:
        for b in range(gallery.nblocks):
            commit = read_json(local.get(LOCAL, record_key(gallery.name, block_key(b, gallery.gens[b]))),
                               f"block {b} commit record")
            out.extend(commit["ids"])
    return out
