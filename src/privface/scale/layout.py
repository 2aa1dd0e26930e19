"""The store layout every persisted gallery shares (seed 003 §3.2 for hers / idface, seed 001 §3.1 for cryptomask).

Two stores, kept apart as the two servers are, every key prefixed by the gallery's name (``default.meta`` …, see
``record_key``) so that one store can hold several galleries:

* the **gallery store** (``--gallery URL``), protocol ``gallery`` (``LOCAL``): ``meta`` (a JSON object naming
  the ``scheme``), ``pk``, and per block b ``block.BBBBBB`` (``block_key``: the block's commit record, a JSON
  object) with its pieces of at most ``PART_BYTES``; what else a scheme keeps is its module's (``scale.gallery``,
  ``scale.cryptomask_gallery``).
* the **key store** (``--key-store URL``; default for ``sqlite:///g.db``: ``sqlite:///g.keys.db``), protocol
  ``gallery-key`` (``KEY``): the secret keys and ``meta`` (τ, its provenance, the SHA-256 of the public key).

One enrolment per gallery at a time: ``writer_lease`` holds ``<name>.lease`` (protocol ``gallery-lease`` of the
gallery store; ``store.lease.Lease``: token, host, pid, acquired, expires) for the whole enrolment. A second
enrolment meanwhile gets GalleryError and writes nothing; a killed enrolment's lease expires after ``LEASE_TTL``
and the next enrolment takes it over and resumes. Readers never look at the lease.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from contextlib import contextmanager

from ..errors import PrivfaceError
from ..faces.registry import LEGACY_BACKEND
from ..store import open_store
from ..store.base import redact
from ..store.lease import Lease, LeaseHeld, LeaseLost, when
from .tau_curve import bounded_mix, describe, tau_for_mix

LOCAL, KEY, LEASE = "gallery", "gallery-key", "gallery-lease"
LEASE_TTL = 120.0  # seconds a dead enrolment keeps its gallery locked
lease_clock = time.time  # wall clock (leases are shared across hosts); tests move it forward
PART_BYTES = 32 << 20
VERSION = 1
_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")


class GalleryError(PrivfaceError):
    """The gallery or key store is missing, damaged, mismatched, or the enrolment settings changed."""


def record_key(name: str, key: str) -> str:
    """The store subject id of ``key`` in gallery ``name`` (several galleries can share one store)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise GalleryError(f"a gallery name is 1–64 characters of a–z 0–9 _ -, got {name!r}")
    return f"{name}.{key}"


def block_key(b: int, gen: int = 0) -> str:
    """Block b's commit record (its pieces' keys start with it); generation ``gen`` > 0 for a block rewritten by a
    gallery change (``scale.lifecycle``: the meta's ``block_gens`` names each block's live generation)."""
    return f"block.{b:06d}" if gen == 0 else f"block.{b:06d}.g{gen:06d}"


def part_key(b: int, gen: int, p: int) -> str:
    """Piece p of block b's array in generation ``gen``."""
    return f"{block_key(b, gen)}.part.{p:04d}"


def ids_digest(ids: list[str]) -> str:
    """SHA-256 of an id list, one id a line: how the meta names an enrolment's source."""
    h = hashlib.sha256()
    for i in ids:
        h.update(i.encode() + b"\n")
    return h.hexdigest()


def read_json(record: bytes | None, what: str) -> dict:
    """A JSON-object record (meta, commit record); GalleryError naming ``what`` if missing or damaged."""
    if record is None:
        raise GalleryError(f"{what} is missing")
    try:
        out = json.loads(record)
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise GalleryError(f"{what} is damaged")
    return out


def stored_scheme(gallery_url: str, name: str = "default") -> str | None:
    """The scheme recorded in a gallery's meta (None when absent or unreadable): lets callers dispatch."""
    with open_store(gallery_url) as local:
        raw = local.get(LOCAL, record_key(name, "meta"))
    try:
        scheme = json.loads(raw).get("scheme") if raw else None
    except (ValueError, AttributeError):
        return None
    return scheme if isinstance(scheme, str) else None


def default_key_store(gallery_url: str) -> str:
    """``sqlite:///g.db`` → ``sqlite:///g.keys.db``; other URLs need an explicit key store."""
    if gallery_url.startswith("sqlite:///") and gallery_url not in ("sqlite:///:memory:",):
        path = gallery_url[len("sqlite:///"):]
        base = path[:-3] if path.endswith(".db") else path
        return f"sqlite:///{base}.keys.db"
    raise GalleryError("give --key-store URL: the key server's store (sk) must be kept apart from the gallery")


@contextmanager
def writer_lease(local, gallery_url: str, name: str):
    """Gallery ``name``'s writer lease (``store.lease.Lease`` under protocol ``gallery-lease`` of the gallery
    store), held around a whole enrolment so that one enrolment at a time writes the gallery. Another live
    lease → GalleryError before anything is written; the body's ``check()`` / ``renew()`` → GalleryError once
    the lease was lost (it expired and another enrolment took it over)."""
    what = f"gallery {name!r} in {redact(gallery_url)}"
    try:
        with Lease(local, LEASE, record_key(name, "lease"), ttl=LEASE_TTL, clock=lease_clock) as lease:
            try:
                yield lease
            except LeaseLost:
                raise GalleryError(f"{what}: this enrolment lost its writer lease (it expired and another "
                                   "enrolment took it over); stopped, nothing more written") from None
    except LeaseHeld as e:
        h = e.holder
        raise GalleryError(f"{what} is being enrolled by {h['host']}/{h['pid']} since {when(h['acquired'])}; "
                           f"wait, or if that process died, retry after {when(h['expires'])}") from None


def _photos(hist: dict | None) -> dict[str, int] | None:
    """A photo-count histogram {k: identities} as the key store meta keeps it (string keys, counts > 0)."""
    if hist is None:
        return None
    return {str(int(k)): int(v) for k, v in sorted(hist.items(), key=lambda kv: int(kv[0])) if int(v) > 0}


def new_tau(tau: float | None, backend: str, dim: int, key: str, n: int = 1, photos: dict | None = None) -> dict:
    """The key store meta's τ fields for a new gallery of ``n`` identities: ``tau`` as given (``tau_mode``
    "explicit"), else the default τ(n) (``scale.tau_curve``; "default", recomputed as the gallery changes).
    ``photos`` {k: identities}: how many photos each enrolled identity was fused from (default: one each); kept as
    ``tau_photos_seen``, the counts of every identity enrolled where the key store was written (``retune`` adds)."""
    if tau is not None:
        return {"tau": float(tau), "tau_source": "--tau", "tau_mode": "explicit"}
    meta = {"tau_mode": "default", "tau_photos_seen": _photos(photos if photos is not None else {1: n}),
            "tau_setting": {"backend": backend, "dim": int(dim), "key": key}}
    try:
        return {**meta, **_default_tau(meta, n)}
    except PrivfaceError as e:
        raise GalleryError(str(e)) from None


def _default_tau(meta: dict, n: int) -> dict:
    s, seen = meta["tau_setting"], meta.get("tau_photos_seen")
    mix = bounded_mix(seen, max(int(n), 1))
    t, src = tau_for_mix(str(s.get("backend")), int(s.get("dim", 0)), str(s.get("key")), mix)
    return {"tau": t, "tau_n": int(n), "tau_mode": "default", "tau_source": describe(src), "tau_photos": _photos(mix)}


def current_tau(meta: dict, n: int | None) -> dict:
    """{"tau", "tau_n", "tau_mode", "tau_source", "tau_photos"} of a key store meta for a gallery answering ``n``
    identities now: a default τ is τ for the photo-count mix of those n (``tau_curve.bounded_mix`` of the meta's
    ``tau_photos_seen``: counts S_local cannot lower — identities the key store did not see count as the strictest
    curve), computed here so that a gallery changed where the key store was out of reach (e.g. over HTTP at S_local)
    gets its τ where the key store is; an explicit or older τ as stored."""
    mode = meta.get("tau_mode", "fixed")
    out = {"tau": meta.get("tau"), "tau_n": meta.get("tau_n"), "tau_mode": mode,
           "tau_source": meta.get("tau_source", "not recorded (made before 2026-11)")}
    if "tau_photos" in meta:
        out["tau_photos"] = meta["tau_photos"]
    if mode == "explicit":
        out["tau_mode"] = "explicit"
    if mode != "default" or n is None:
        return out
    s = meta.get("tau_setting")
    seen = meta.get("tau_photos_seen")
    if not isinstance(s, dict) or not (seen is None or isinstance(seen, dict)):
        raise GalleryError("the key store's τ setting is damaged")
    try:
        return _default_tau(meta, n)
    except (PrivfaceError, TypeError, ValueError, AttributeError) as e:
        raise GalleryError(f"the key store's τ setting is damaged ({e})") from None


def tau_warning(fields: dict) -> dict:
    """``fields`` (``current_tau``'s) with a ``tau_warning`` when a default cosine τ(N) is above every cosine: the
    calibration puts FPIR 0.003 out of the backend's reach at this N, and the gallery matches nobody. Said, never
    stored (τ(N) moves with N)."""
    tau, setting = fields.get("tau"), fields.get("tau_source", "")
    if fields.get("tau_mode") == "default" and isinstance(tau, float) and tau > 1.0 and "idface" not in setting:
        return {**fields, "tau_warning": f"τ(N) = {tau:g} is above every cosine (≤ 1): at the target FPIR this "
                                         f"gallery of {fields.get('tau_n')} identities matches nobody — use a "
                                         "stronger face backend, or an explicit τ (a higher FPIR)"}
    return fields


def tau_of(gallery_url: str, name: str = "default", key_store_url: str | None = None, n: int | None = None) -> dict:
    """{"tau", "tau_n", "tau_mode", "tau_source"} from the key store (``current_tau`` for ``n`` identities; with
    ``tau_warning``'s warning)."""
    with open_store(key_store_url or default_key_store(gallery_url)) as keys:
        meta = read_json(keys.get(KEY, record_key(name, "meta")), f"key store meta of gallery {name!r}")
    return tau_warning(current_tau(meta, n))


def retune(gallery_url: str, name: str, key_store_url: str | None, n: int, photos: dict | None = None) -> dict:
    """After a gallery change: a default τ is recomputed for its ``n`` identities and written to the key store meta
    (``current_tau``'s fields returned); ``photos`` {k: identities}, the photo counts of the identities this change
    enrolled, are added to the meta's ``tau_photos_seen`` (a removal never lowers them: ``tau_curve.bounded_mix``).
    Without a reachable key store (``key_store_url`` None and no default
    ``g.keys.db`` file) nothing is written: S_key computes τ(N) itself when it next loads or attaches."""
    from ..store.sqlite import SQLiteStore

    url = key_store_url
    if url is None:
        try:
            url = default_key_store(gallery_url)
        except GalleryError:
            url = None
        if url is not None and not SQLiteStore.path_of(url).exists():
            url = None
    if url is None:
        return {"tau": None, "tau_n": n, "tau_source": "key store not given (--key-store): S_key computes τ(N) "
                                                       "when it next loads the gallery"}
    with open_store(url) as keys:
        meta = read_json(keys.get(KEY, record_key(name, "meta")), f"key store meta of gallery {name!r}")
        if meta.get("tau_mode") == "default" and photos:
            seen = meta.get("tau_photos_seen")
            seen = dict(seen) if isinstance(seen, dict) else {"1": int(meta.get("tau_n") or 0)}
            for k, v in (_photos(photos) or {}).items():
                seen[k] = int(seen.get(k, 0)) + v
            meta = {**meta, "tau_photos_seen": _photos(seen)}
        now = current_tau(meta, n)
        if meta.get("tau_mode") == "default" and {**meta, **now} != meta:
            keys.put(KEY, record_key(name, "meta"), json.dumps({**meta, **now}).encode())
    return tau_warning(now)


def check_tau(tau: float | None, gallery_url: str, name: str, key_store_url: str | None) -> None:
    """A resumed or appended enrolment may restate τ, never change it (τ is fixed when the gallery is created)."""
    if tau is not None and tau_of(gallery_url, name, key_store_url)["tau"] != float(tau):
        raise GalleryError("--tau is fixed when the gallery is created")


def progress_bar(total: int, initial: int, enabled: bool):
    """A tqdm bar on stderr for an enrolment (None when not ``enabled``)."""
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="tpl", desc="enrol", file=sys.stderr, disable=None)


# LEGACY_BACKEND (faces.registry): the face backend of a gallery whose meta has no ``backend`` (made before
# galleries recorded it)


def meta_backend(meta: dict) -> str:
    """The face backend a gallery's templates come from (its meta's ``backend``; ``LEGACY_BACKEND`` if absent)."""
    backend = meta.get("backend", LEGACY_BACKEND)
    if not isinstance(backend, str) or not backend:
        raise GalleryError("gallery meta is damaged (backend)")
    return backend


def check_backend(meta: dict, backend: str) -> None:
    """GalleryError unless probes of ``backend`` may be compared with the gallery's templates (one backend)."""
    held = meta_backend(meta)
    if backend != held:
        raise GalleryError(f"the gallery holds {held} templates; this face was embedded with {backend}: "
                           f"embed it with --backend {held} (templates of two face models never compare)")
