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

One enrolment per gallery at a time: ``writer_lease`` holds ``<name>.lease`` (protocol ``gallery-lease`` of the
gallery store; ``store.lease.Lease``: token, host, pid, acquired, expires) for the whole enrolment, renewed after
every block and every ``LEASE_TTL`` / 3 s. A second enrolment meanwhile gets GalleryError and writes nothing; a
killed enrolment's lease expires after ``LEASE_TTL`` (120 s) and the next enrolment takes it over and resumes.
Readers (``Gallery``, identification) never look at the lease.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PrivfaceError, TemplateError

SCHEMES = ("idface-ckks", "hers", "idface-paillier")
LOCAL, KEY, LEASE = "gallery", "gallery-key", "gallery-lease"
LEASE_TTL = 120.0  # seconds a dead enrolment keeps its gallery locked
lease_clock = time.time  # wall clock (leases are shared across hosts); tests move it forward
PART_BYTES = 32 << 20
VERSION = 1
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".pgm", ".bmp", ".ppm", ".tif", ".tiff", ".webp"}


class GalleryError(PrivfaceError):
    """The gallery or key store is missing, damaged, mismatched, or the enrolment settings changed."""


# --------------------------------------------------------------------------------------------- sources
class Source:
    """Templates in a fixed order: ``ids`` up front, ``templates(lo, hi)`` read lazily (unit rows, float64)."""

    ids: list[str]
    dim: int

    def templates(self, lo: int, hi: int) -> np.ndarray:
        raise NotImplementedError


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise TemplateError(f"templates must be a finite (count, d) array, got shape {x.shape}")
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norm == 0):
        raise TemplateError("a template is the zero vector")
    return x / norm


class NpySource(Source):
    """Rows of ``.npy`` files (memory-mapped, read per block); ids ``<file stem>.<row>``."""

    def __init__(self, paths: list[str | os.PathLike]) -> None:
        self.arrays, self.ids, self._starts = [], [], []
        for p in paths:
            try:
                a = np.load(p, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as e:
                raise GalleryError(f"cannot read embeddings {p}: {e}") from None
            if a.ndim != 2 or a.shape[0] == 0 or not np.issubdtype(a.dtype, np.floating):
                raise TemplateError(f"{p}: expected a non-empty (count, d) float array, got {a.dtype} {a.shape}")
            if self.arrays and a.shape[1] != self.arrays[0].shape[1]:
                raise TemplateError(f"{p}: d = {a.shape[1]}, the other files have d = {self.arrays[0].shape[1]}")
            self._starts.append(len(self.ids))
            self.arrays.append(a)
            self.ids.extend(f"{Path(p).stem}.{i}" for i in range(a.shape[0]))
        if not self.arrays:
            raise GalleryError("no embeddings given")
        self.dim = int(self.arrays[0].shape[1])

    def templates(self, lo: int, hi: int) -> np.ndarray:
        rows = []
        for start, a in zip(self._starts, self.arrays):
            a_lo, a_hi = max(lo - start, 0), min(hi - start, a.shape[0])
            if a_lo < a_hi:
                rows.append(np.asarray(a[a_lo:a_hi], dtype=np.float64))
        return unit(np.concatenate(rows))


class ImageSource(Source):
    """Face images (files, or every image under a directory, sorted); id = the file stem; embedded per block."""

    def __init__(self, paths: list[str | os.PathLike], backend) -> None:
        files = []
        for p in map(Path, paths):
            if p.is_dir():
                files.extend(sorted(f for f in p.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES))
            elif p.is_file():
                files.append(p)
            else:
                raise GalleryError(f"no such image or directory: {p}")
        if not files:
            raise GalleryError("no images found")
        self.files, self.backend, self.dim = files, backend, int(backend.dim)
        self.ids = [f.stem for f in files]

    def templates(self, lo: int, hi: int) -> np.ndarray:
        return unit(np.stack([self.backend.embed(str(f)) for f in self.files[lo:hi]]))


def open_source(paths: list[str], backend_factory=None) -> Source:
    """``.npy`` files → NpySource; otherwise images / directories → ImageSource (``backend_factory()``)."""
    if paths and all(str(p).endswith(".npy") for p in paths):
        return NpySource(paths)
    if any(str(p).endswith(".npy") for p in paths):
        raise GalleryError("give either .npy embedding files or images, not both")
    if backend_factory is None:
        from ..faces.registry import make_backend

        backend_factory = make_backend
    return ImageSource(paths, backend_factory())


# ---------------------------------------------------------------------------------------- key material
def default_key_store(gallery_url: str) -> str:
    """``sqlite:///g.db`` → ``sqlite:///g.keys.db``; other URLs need an explicit key store."""
    if gallery_url.startswith("sqlite:///") and gallery_url not in ("sqlite:///:memory:",):
        path = gallery_url[len("sqlite:///"):]
        base = path[:-3] if path.endswith(".db") else path
        return f"sqlite:///{base}.keys.db"
    raise GalleryError("give --key-store URL: the key server's store (sk) must be kept apart from the gallery")


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

    def lattice_params(self):
        from ..crypto.lattice import CKKS, LatticeParams
        from ..protocols.hers import HERS_CKKS

        if self.insecure_test_params:
            return LatticeParams("ckks-2048-q60-toy", CKKS, 2048, (60, 60), scale_bits=36)
        return HERS_CKKS

    def idface_params(self):
        from ..protocols.idface import IDFaceParams

        return IDFaceParams.for_dim(self.dim, self.beta, self.mean, self.lift, self.lift_seed)

    @property
    def paillier(self) -> bool:
        return self.scheme == "idface-paillier"

    def generate_keys(self) -> tuple[object, object, bytes, bytes]:
        """(pub, sec, pk record, sk record) of a fresh key pair for this scheme."""
        if self.paillier:
            from . import paillier_blocks as pb

            pub, sec = pb.generate_keys(self.insecure_test_params)
            return pub, sec, pb.public_to_bytes(pub), pb.secret_to_bytes(sec)
        from ..crypto.lattice import generate_lattice_keys

        pub, sec = generate_lattice_keys(self.lattice_params(), insecure_test_params=self.insecure_test_params)
        return pub, sec, pub.to_bytes(), sec.secret_to_bytes()

    def load_public(self, raw: bytes):
        """The public key / context from its record (CryptoError if damaged)."""
        if self.paillier:
            from .paillier_blocks import public_from_bytes

            return public_from_bytes(raw, self.insecure_test_params)
        from ..crypto.lattice import LatticePublicContext

        return LatticePublicContext.from_bytes(raw, insecure_test_params=self.insecure_test_params)

    def load_secret(self, pub, raw: bytes):
        if self.paillier:
            from .paillier_blocks import secret_from_bytes

            return secret_from_bytes(pub, raw)
        from ..crypto.lattice import LatticeSecretContext

        return LatticeSecretContext.from_bytes(pub, raw)

    def public_scheme(self, pub):
        if self.paillier:
            from ..protocols.idface import IDFacePaillier

            return IDFacePaillier(pub, self.idface_params())
        if self.scheme == "hers":
            from ..protocols.hers import HERS

            return HERS(pub, self.dim)
        from ..protocols.idface import IDFaceCKKS

        return IDFaceCKKS(pub, self.idface_params())

    def secret_scheme(self, sec):
        if self.paillier:
            from ..protocols.idface import IDFacePaillierKey

            return IDFacePaillierKey(sec, self.idface_params())
        if self.scheme == "hers":
            from ..protocols.hers import HERSKey

            return HERSKey(sec)
        from ..protocols.idface import IDFaceCKKSKey

        return IDFaceCKKSKey(sec, self.idface_params())

    def tau_key(self, centring: str) -> str:
        """This setting's key in the shipped default-τ table (``scale.default_tau``)."""
        from .default_tau import idface_key

        return "hers" if self.scheme == "hers" else idface_key(centring, self.lift, self.beta)

    def block_layout(self, pub) -> tuple[str, tuple[int, ...]]:
        """The dtype and shape every stored block array of this scheme has."""
        if self.paillier:
            from .paillier_blocks import block_shape

            return "uint8", block_shape(pub, self.idface_params().width)
        n = pub.n
        if self.scheme == "hers":
            return "uint32", (2, self.dim, 2 * n)
        return "uint64", (2, self.idface_params().width, 2, 1, n)

    def public_meta(self, pub) -> dict:
        """idface-paillier: the public key N (hex) in the meta too, checked against the ``pk`` record on load."""
        return {"paillier_n": format(int(pub.n), "x")} if self.paillier else {}

    def transform_meta(self) -> dict:
        """The meta entries that fix the idface pre-transform: ``centring`` {mean} and ``lift`` {dim, seed}."""
        return {"centring": None if self.mean is None else {"mean": list(self.mean)},
                "lift": None if self.lift is None else {"dim": self.lift, "seed": self.lift_seed}}


CENTRINGS = ("none", "shipped")


def _settings(scheme: str, dim: int, beta: int | None, insecure: bool, centring: str = "none",
              backend: str = "dlib-resnet128", lift: int | None = None) -> Settings:
    if scheme not in SCHEMES:
        raise GalleryError(f"--scheme must be one of {SCHEMES}, got {scheme!r}")
    if centring not in CENTRINGS:
        raise GalleryError(f"--centring must be one of {CENTRINGS}, got {centring!r}")
    if scheme == "hers":
        if beta is not None or centring != "none" or lift:
            raise GalleryError("--beta, --centring and --lift apply to idface-ckks / idface-paillier only")
        return Settings(scheme, dim, beta, insecure)
    from ..protocols.idface import IDFaceParams
    from ..protocols.idface.centring import shipped_mean

    mean = None
    if centring == "shipped":
        mean = tuple(float(v) for v in shipped_mean(backend))
        if len(mean) != dim:
            raise GalleryError(f"the shipped {backend} mean has d = {len(mean)}, the templates d = {dim}")
    p = IDFaceParams.for_dim(dim, beta, mean, lift or None)  # validates d, D and β
    return Settings(scheme, dim, p.beta, insecure, p.mean, p.lift, None if p.lift is None else p.lift_seed)


def _meta_settings(meta: dict) -> Settings:
    """Settings from a stored meta record (galleries without ``centring`` / ``lift`` entries have neither)."""
    if meta.get("scheme") == "cryptomask":
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
        if settings.scheme != "hers":
            settings.idface_params()  # validates μ, D and the seed
        elif mean is not None or lift is not None:
            raise ValueError("hers has no centring or lift")
    except (KeyError, TypeError, ValueError, TemplateError) as e:
        raise GalleryError(f"gallery meta is damaged ({e})") from None
    return settings


def _int(v) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _ids_digest(ids: list[str]) -> str:
    h = hashlib.sha256()
    for i in ids:
        h.update(i.encode() + b"\n")
    return h.hexdigest()


def _json(record: bytes | None, what: str) -> dict:
    if record is None:
        raise GalleryError(f"{what} is missing")
    try:
        out = json.loads(record)
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise GalleryError(f"{what} is damaged")
    return out


def _block_key(b: int) -> str:
    return f"block.{b:06d}"


_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")


def _k(name: str, key: str) -> str:
    """The store subject id of ``key`` in gallery ``name`` (several galleries can share one store)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise GalleryError(f"a gallery name is 1–64 characters of a–z 0–9 _ -, got {name!r}")
    return f"{name}.{key}"


# --------------------------------------------------------------------------------------------- enrolment
@contextmanager
def writer_lease(local, gallery_url: str, name: str):
    """Gallery ``name``'s writer lease (``store.lease.Lease`` under protocol ``gallery-lease`` of the gallery
    store), held around a whole enrolment so that one enrolment at a time writes the gallery. Another live
    lease → GalleryError before anything is written; the body's ``check()`` / ``renew()`` → GalleryError once
    the lease was lost (it expired and another enrolment took it over)."""
    from ..store.lease import Lease, LeaseHeld, LeaseLost, when

    what = f"gallery {name!r} in {_redact(gallery_url)}"
    try:
        with Lease(local, LEASE, _k(name, "lease"), ttl=LEASE_TTL, clock=lease_clock) as lease:
            try:
                yield lease
            except LeaseLost:
                raise GalleryError(f"{what}: this enrolment lost its writer lease (it expired and another "
                                   "enrolment took it over); stopped, nothing more written") from None
    except LeaseHeld as e:
        h = e.holder
        raise GalleryError(f"{what} is being enrolled by {h['host']}/{h['pid']} since {when(h['acquired'])}; "
                           f"wait, or if that process died, retry after {when(h['expires'])}") from None


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
    enroll_s: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _progress(total: int, initial: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="tpl", desc="enrol", file=sys.stderr, disable=None)


def enrol(gallery_url: str, source: Source, scheme: str, *, key_store_url: str | None = None,
          beta: int | None = None, tau: float | None = None, insecure_test_params: bool = False,
          progress: bool = False, after_block=None, name: str = "default", centring: str = "none",
          backend: str = "dlib-resnet128", lift: int | None = None) -> EnrolReport:
    """Encrypt ``source`` into the gallery block by block; resume when the gallery already holds some blocks.

    idface-ckks: ``centring`` "shipped" subtracts ``backend``'s shipped mean (``protocols.idface.centring``)
    and ``lift`` = D lifts into D dimensions (``protocols.idface.lift``) before T_α; both are recorded in the
    gallery meta, and ``Gallery`` rebuilds the same ``IDFaceParams`` so queries get the same transform.
    A gallery made with other settings or other ids is refused (``GalleryError``), never mixed into.
    ``after_block(b)`` is called after block b is committed (tests interrupt enrolment with it).
    One enrolment per gallery at a time (``writer_lease``): a second one gets GalleryError and changes nothing.
    ``scheme="cryptomask"`` goes to ``cryptomask_gallery.enrol`` (seed 001 Alg. 1: a new source is appended).
    """
    from ..store import open_store

    if scheme == "cryptomask":  # seed 001: its own layout (scale.cryptomask_gallery)
        from . import cryptomask_gallery

        if beta is not None or centring != "none" or lift:
            raise GalleryError("--beta, --centring and --lift apply to idface-ckks / idface-paillier only")
        return cryptomask_gallery.enrol(gallery_url, source, key_store_url=key_store_url, tau=tau,
                                        insecure_test_params=insecure_test_params, progress=progress,
                                        after_block=after_block, name=name, backend=backend)
    settings = _settings(scheme, source.dim, beta, insecure_test_params, centring, backend, lift)
    key_store_url = key_store_url or default_key_store(gallery_url)
    t0 = time.perf_counter()
    ids = source.ids
    wanted = {"version": VERSION, "scheme": settings.scheme, "dim": settings.dim, "beta": settings.beta,
              "insecure_test_params": insecure_test_params, "n": len(ids), "ids_sha256": _ids_digest(ids),
              **settings.transform_meta()}
    with open_store(gallery_url) as local, writer_lease(local, gallery_url, name) as lease:
        meta_raw = local.get(LOCAL, _k(name, "meta"))
        if meta_raw is None:
            tau, tau_source = new_tau(tau, backend, settings.dim, settings.tau_key(centring))
            pub, _, pk, sk = settings.generate_keys()
            with open_store(key_store_url) as keys:  # sk first: a gallery never exists without its key
                keys.put(KEY, _k(name, "sk"), sk)
                keys.put(KEY, _k(name, "meta"), json.dumps({"pk_sha256": hashlib.sha256(pk).hexdigest(),
                                                  "tau": tau, "tau_source": tau_source}).encode())
            local.put(LOCAL, _k(name, "pk"), pk)
            meta = dict(wanted, capacity=settings.public_scheme(pub).capacity, **settings.public_meta(pub))
            local.put(LOCAL, _k(name, "meta"), json.dumps(meta).encode())
        else:
            meta = _json(meta_raw, "gallery meta")
            differ = sorted(k for k in wanted if meta.get(k) != wanted[k])
            if differ:
                raise GalleryError(f"the gallery was enrolled with other settings or inputs ({', '.join(differ)}); "
                                   "use another --gallery to start afresh")
            check_tau(tau, gallery_url, name, key_store_url)
            pub = _load_public(settings, local.get(LOCAL, _k(name, "pk")))
        public = settings.public_scheme(pub)
        cap = int(meta["capacity"])
        if cap != public.capacity:
            raise GalleryError("gallery meta disagrees with its public key (capacity)")
        nblocks = -(-len(ids) // cap)
        done = [local.get(LOCAL, _k(name, _block_key(b))) is not None for b in range(nblocks)]
        bar = _progress(len(ids), sum(min(cap, len(ids) - b * cap) for b in range(nblocks) if done[b]), progress)
        encrypted = 0
        try:
            for b in range(nblocks):
                if done[b]:
                    continue
                lo, hi = b * cap, min(len(ids), (b + 1) * cap)
                block = public.enc_db(source.templates(lo, hi))
                lease.check()
                _put_block(local, name, b, _block_array(settings, block, pub), hi - lo, ids[lo:hi])
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


def _block_array(settings: Settings, block, pub) -> np.ndarray:
    if settings.paillier:
        from .paillier_blocks import block_to_array

        return block_to_array(block, pub)
    return block.planes if hasattr(block, "planes") else block.data


def _make_block(settings: Settings, arr: np.ndarray, count: int, pub, b: int):
    """A stored block array back as the scheme's block (idface-paillier: every ciphertext checked)."""
    if settings.paillier:
        from .paillier_blocks import block_from_array

        return block_from_array(arr, count, pub, f"block {b}")
    if settings.scheme == "hers":
        from ..protocols.hers.scheme import HERSBlock

        return HERSBlock(arr, count)
    from ..protocols.idface.ckks import CKKSBlock

    return CKKSBlock(arr, count)


def _load_public(settings: Settings, raw: bytes | None):
    from ..errors import CryptoError

    if raw is None:
        raise GalleryError("the gallery's public key is missing")
    try:
        return settings.load_public(raw)
    except CryptoError as e:
        raise GalleryError(f"the gallery's public key is damaged ({e})") from None


def _storage_bytes(settings: Settings, pub, nblocks: int) -> int:
    dtype, shape = settings.block_layout(pub)
    return int(nblocks * np.dtype(dtype).itemsize * int(np.prod(shape)))


def _put_block(store, name: str, b: int, array: np.ndarray, count: int, ids: list[str]) -> None:
    data = np.ascontiguousarray(array)
    raw = memoryview(data).cast("B")
    parts = max(1, -(-len(raw) // PART_BYTES))
    for p in range(parts):
        store.put(LOCAL, _k(name, f"{_block_key(b)}.part.{p:04d}"), raw[p * PART_BYTES:(p + 1) * PART_BYTES])
    commit = {"count": count, "dtype": str(data.dtype), "shape": list(data.shape), "parts": parts,
              "sha256": hashlib.sha256(raw).hexdigest(), "ids": ids}
    store.put(LOCAL, _k(name, _block_key(b)), json.dumps(commit).encode())


# -------------------------------------------------------------------------------------------- loading
class Gallery:
    """S_local's view of a persisted gallery: settings, public scheme, block count; blocks load on demand."""

    def __init__(self, gallery_url: str, name: str = "default") -> None:
        from ..store import open_store

        self.url, self.name = gallery_url, name
        with open_store(gallery_url) as local:
            self.meta = _json(local.get(LOCAL, _k(name, "meta")), f"gallery {name!r} meta in {_redact(gallery_url)}")
            if self.meta.get("version") != VERSION:
                raise GalleryError("unsupported gallery version")
            pk = local.get(LOCAL, _k(name, "pk"))
            if pk is None:
                raise GalleryError("the gallery's public key is missing")
            self.settings = _meta_settings(self.meta)
            self.pk_bytes = pk
            self.public_context = _load_public(self.settings, pk)
            if any(self.meta.get(k) != v for k, v in self.settings.public_meta(self.public_context).items()):
                raise GalleryError("gallery meta disagrees with its public key (paillier_n)")
            self.public = self.settings.public_scheme(self.public_context)
            self.n, self.capacity = self.meta.get("n"), self.meta.get("capacity")
            if not (isinstance(self.n, int) and self.n >= 1 and self.capacity == self.public.capacity):
                raise GalleryError("gallery meta is damaged (n, or capacity disagrees with its public key)")
            self.nblocks = -(-self.n // self.capacity)
            missing = [b for b in range(self.nblocks) if local.get(LOCAL, _k(name, _block_key(b))) is None]
        if missing:
            raise GalleryError(f"the gallery is incomplete ({len(missing)} of {self.nblocks} blocks missing): "
                               "re-run the same `privface gallery enrol` to finish it")

    def load_blocks(self, indices=None) -> tuple[list, list[list[str]]]:
        """(blocks, ids per block) for the given block indices (default: all), verified against their commits."""
        from ..store import open_store

        dtype, shape = self.settings.block_layout(self.public_context)
        indices = range(self.nblocks) if indices is None else indices
        blocks, ids = [], []
        with open_store(self.url) as local:
            for b in indices:
                commit = _json(local.get(LOCAL, _k(self.name, _block_key(b))), f"block {b} commit record")
                count = commit.get("count")
                expect = min(self.capacity, self.n - b * self.capacity)
                if (commit.get("dtype") != dtype or commit.get("shape") != list(shape) or count != expect
                        or not isinstance(commit.get("ids"), list) or len(commit["ids"]) != count):
                    raise GalleryError(f"block {b} commit record does not match the gallery")
                arr = np.empty(shape, dtype=dtype)
                raw = memoryview(arr).cast("B")
                pos = 0
                for p in range(int(commit["parts"])):
                    piece = local.get(LOCAL, _k(self.name, f"{_block_key(b)}.part.{p:04d}"))
                    if piece is None or pos + len(piece) > len(raw):
                        raise GalleryError(f"block {b}: piece {p} missing or too long")
                    raw[pos:pos + len(piece)] = piece
                    pos += len(piece)
                if pos != len(raw) or hashlib.sha256(raw).hexdigest() != commit["sha256"]:
                    raise GalleryError(f"block {b} is damaged (length or SHA-256 differs from its commit)")
                blocks.append(_make_block(self.settings, arr, count, self.public_context, b))
                ids.append(commit["ids"])
        return blocks, ids

    def local_server(self):
        """A ``LocalServer`` holding every block (single process)."""
        from ..protocols.hers import LocalServer

        local = LocalServer(self.public)
        local.blocks, ids = self.load_blocks()
        local.ids = [i for chunk in ids for i in chunk]
        return local


def new_tau(tau: float | None, backend: str, dim: int, key: str) -> tuple[float, str]:
    """(τ, provenance) for a new gallery: ``tau`` as given, else the calibrated default (``scale.default_tau``)."""
    if tau is not None:
        return float(tau), "--tau"
    from .default_tau import default_tau

    try:
        return default_tau(backend, dim, key)
    except PrivfaceError as e:
        raise GalleryError(str(e)) from None


def check_tau(tau: float | None, gallery_url: str, name: str, key_store_url: str | None) -> None:
    """A resumed or appended enrolment may restate τ, never change it (τ is fixed when the gallery is created)."""
    if tau is not None and tau_of(gallery_url, name, key_store_url)["tau"] != float(tau):
        raise GalleryError("--tau is fixed when the gallery is created")


def key_server(gallery: Gallery, key_store_url: str | None = None):
    """S_key for ``gallery``: its sk from the key store (checked against the gallery's public key) and τ."""
    from ..errors import CryptoError
    from ..protocols.hers import KeyServer
    from ..store import open_store

    with open_store(key_store_url or default_key_store(gallery.url)) as keys:
        meta = _json(keys.get(KEY, _k(gallery.name, "meta")), f"key store meta of gallery {gallery.name!r}")
        sk = keys.get(KEY, _k(gallery.name, "sk"))
    if sk is None:
        raise GalleryError("the key store holds no secret key")
    if meta.get("pk_sha256") != hashlib.sha256(gallery.pk_bytes).hexdigest():
        raise GalleryError("the key store belongs to another gallery (public key differs)")
    try:
        sec = gallery.settings.load_secret(gallery.public_context, sk)
    except CryptoError as e:
        raise GalleryError(f"the key store's secret key is damaged ({e})") from None
    return KeyServer(gallery.settings.secret_scheme(sec), float(meta["tau"]))


def tau_of(gallery_url: str, name: str = "default", key_store_url: str | None = None) -> dict:
    """{"tau", "tau_source"} recorded in the key store when the gallery was created."""
    from ..store import open_store

    with open_store(key_store_url or default_key_store(gallery_url)) as keys:
        meta = _json(keys.get(KEY, _k(name, "meta")), f"key store meta of gallery {name!r}")
    return {"tau": meta.get("tau"), "tau_source": meta.get("tau_source", "not recorded (made before 2026-11)")}


def _redact(url: str) -> str:
    from ..store.base import redact

    return redact(url)


def gallery_ids(gallery: Gallery) -> list[str]:
    """The enrolled ids in gallery order, from the blocks' commit records (no ciphertext is read)."""
    from ..store import open_store

    out = []
    with open_store(gallery.url) as local:
        for b in range(gallery.nblocks):
            out.extend(_json(local.get(LOCAL, _k(gallery.name, _block_key(b))), f"block {b} commit record")["ids"])
    return out
