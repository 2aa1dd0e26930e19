"""Seed 003 §3.2's two servers as separate processes (protocol ``ident``): ``KeyRole`` (S_key) and ``LocalRole``
(S_local), speaking the messages of ``protocols.hers.messages`` over any link with ``attach`` and ``decide``
(in process: a ``KeyRole``; over HTTP: ``service.clients.hers.HttpKeyServer``).

Key material stays where ``privface gallery enrol`` put it (``scale.gallery``): S_key's store holds sk and
``{pk_sha256, tau}`` under ``gallery-key``/``<name>.*``; the gallery store holds pk, settings and blocks. S_key
never reads the gallery store (its commit records name every identity): S_local sends the public context and
layout once (``Attach``), S_key accepts them only if their SHA-256 is the one next to its sk, and keeps them in
its own store so that a restart needs no new attach. The scores are decrypted, folded into the running best
and dropped chunk by chunk: only the final index (or reject) leaves S_key, and nothing of them is logged.

idface-paillier (seed 003 §4.3): the same messages; ``Attach.public_context`` is N and ``ScoreChunk.residues``
the (ct⁺, ct⁻) of each block as fixed-width big-endian values, each checked to be a unit of Z_N² before
decryption (``scale.paillier_blocks``).
"""
from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time

import numpy as np

from ..crypto.ckks_refresh import Masked
from ..errors import CryptoError, PrivfaceError, ProtocolError, TemplateError, UnavailableError
from ..protocols.common import read_message
from ..protocols.hers.messages import (
    Attach,
    Attached,
    Erased,
    EraseOpened,
    ErasePads,
    KeyDecision,
    Query,
    Reencrypt,
    Reencrypted,
    Result,
    ScoreChunk,
)
from ..protocols.hers.parties import Decision, LocalServer
from ..store import open_store
from ..store.base import TemplateStore
from ..wire import WireError
from .erase_link import DigitEraseLink, KeyEraser
from .gallery import KEY, SCHEMES, Gallery, Settings, gallery_ids
from .layout import LOCAL as GALLERY
from .layout import GalleryError, current_tau, record_key
from .schemes import GALLERY_SCHEMES
from .sources import unit

ATTACH_SPACE = "ident-key"
"""S_key's own record of the attached public context (``<name>.attach``: the ``Attach`` frame)."""
CHUNK_BYTES = 3 << 20
"""Residue bytes per ``ScoreChunk`` at most (whole blocks; real parameters: 12 idface / 24 hers blocks)."""
MAX_CHUNK_BLOCKS = 128  # the schema's ``counts`` maximum
EARLIER_LAYOUTS = 4
"""Earlier layouts (gallery sizes) of the attached gallery S_key still accepts chunks of, for requests in flight."""
REENCRYPT_BYTES = 3_900_000
"""Bound on a ``Reencrypted`` frame's b halves (erasure; the wire's 4 MB field): a ``Reencrypt`` frame carries the
copies of as many ciphertexts as fit (5 at N = 8192 with 5 copies: 3.3 MB back, 2.0 MB out)."""
MAX_PENDING, PENDING_TTL = 256, 600.0
"""Open multi-chunk requests S_key keeps at most, and for how many seconds an unfinished one is kept."""


def ciphertexts_per_block(scheme: str) -> int:
    """IP_DB ciphertexts per block: HERS one (Σ y_j·ct_j), IDFace two (ct⁺, ct⁻)."""
    return GALLERY_SCHEMES[scheme].ip_db_ciphertexts


def chunk_blocks(block_bytes: int) -> int:
    """Whole blocks per ``ScoreChunk`` so that a frame stays under ``CHUNK_BYTES`` (< the 4 MiB frame)."""
    return max(1, min(MAX_CHUNK_BLOCKS, CHUNK_BYTES // block_bytes))


def block_counts(n: int, capacity: int) -> list[int]:
    """Templates per block of an n-template gallery (only the last block is partial)."""
    return [min(capacity, n - lo) for lo in range(0, n, capacity)]


class KeyRole:
    """S_key over the wire: ``attach`` (Attach → Attached) and ``decide`` (ScoreChunk → None until the chunk
    that completes the request, then KeyDecision). Every chunk is checked against the attached gallery's
    layout (block offset, count per block, byte length, residues below their primes) before anything is
    decrypted or any state changes."""

    def __init__(self, store: TemplateStore, name: str = "default", *, insecure_test_params: bool = False,
                 workers: int = 1) -> None:
        self.store, self.name, self.insecure_test_params = store, name, insecure_test_params
        self.workers, self._decrypt_pool = workers, None  # ``workers`` > 1: decryption in child processes
        sk, meta = store.get(KEY, f"{name}.sk"), store.get(KEY, f"{name}.meta")
        if sk is None or meta is None:
            raise PrivfaceError(f"the key store holds no key of gallery {name!r} (privface gallery enrol --key-store)")
        try:
            meta = json.loads(meta)
            self._pk_sha256, self.tau = bytes.fromhex(meta["pk_sha256"]), float(meta["tau"])
            self._meta = meta  # a default τ follows the attached gallery's size (``_tau_for``)
        except (ValueError, KeyError, TypeError):
            raise PrivfaceError(f"the key store's record of gallery {name!r} is damaged") from None
        self._sk = sk
        self._gallery = None  # (secret scheme, n, capacity, (scheme adapter, its ScoreChunk layout))
        self._earlier: list = []  # the layouts before the last attachments (requests in flight while a gallery grew)
        self._pending: dict[bytes, tuple[int, float, int, float]] = {}  # id → (next block, best, index, start)
        self._lock = threading.Lock()
        self._eraser = KeyEraser()  # idface's digit erasures in progress (``erase_link``)
        saved = store.get(ATTACH_SPACE, f"{name}.attach")
        if saved is not None:
            try:
                self._gallery = self._open(read_message(Attach, saved))
                self.tau = self._tau_for(self._gallery)
            except WireError:  # kept by an earlier build (Attach had no ``empty``): the local server attaches again
                self._gallery = None

    def _open(self, msg: Attach):
        if hashlib.sha256(msg.public_context).digest() != self._pk_sha256:
            raise ProtocolError("the public context does not belong to this key server's secret key")
        if msg.scheme not in SCHEMES or msg.n < 1 or msg.capacity < 1:
            raise ProtocolError("Attach: unknown scheme or empty gallery")
        transform = GALLERY_SCHEMES[msg.scheme].transform
        if (msg.beta is None) == transform or (not transform and msg.lift is not None):
            raise ProtocolError("Attach: β and the lift go with idface only")
        if (msg.lift is None) != (msg.lift_seed is None):
            raise ProtocolError("Attach: the lift needs its dimension and its seed")
        try:
            settings = Settings(msg.scheme, msg.dim, msg.beta, self.insecure_test_params, lift=msg.lift,
                                lift_seed=msg.lift_seed)
            public = settings.load_public(msg.public_context)
            secret = settings.secret_scheme(settings.load_secret(public, self._sk))
        except (CryptoError, TemplateError, ValueError) as e:
            raise ProtocolError(f"Attach: {e}") from None
        if secret.capacity != msg.capacity:
            raise ProtocolError("Attach: block capacity disagrees with the scheme's")
        if self.workers > 1:  # the key's own processes (scale.key_pool), started once: every attach has this pk
            from .key_pool import DecryptPool

            with self._lock:
                if self._decrypt_pool is None:
                    self._decrypt_pool = DecryptPool(secret, settings, msg.public_context, self._sk, self.workers)
            secret = self._decrypt_pool
        empty = None
        if msg.empty is not None:
            if len(msg.empty) != -(-msg.n // 8):
                raise ProtocolError(f"Attach: the empty-slot bitmap has {len(msg.empty)} bytes, n = {msg.n} needs "
                                    f"{-(-msg.n // 8)}")
            bits = np.unpackbits(np.frombuffer(msg.empty, dtype=np.uint8), bitorder="little")
            if bits[msg.n:].any():
                raise ProtocolError("Attach: the empty-slot bitmap marks slots beyond n")
            empty = bits[:msg.n].astype(bool)
        return secret, msg.n, msg.capacity, (settings.adapter, settings.adapter.score_layout(public)), empty

    def attach(self, body) -> Attached:
        msg = read_message(Attach, body)
        gallery = self._open(msg)  # validated in full before anything is kept
        tau = self._tau_for(gallery)
        frame = msg.to_bytes()
        with self._lock:
            if self.store.get(ATTACH_SPACE, f"{self.name}.attach") != frame:
                self.store.put(ATTACH_SPACE, f"{self.name}.attach", frame)
            if self._gallery is not None and self._gallery[1] != gallery[1]:  # the gallery grew (scale.lifecycle.add)
                self._earlier = ([self._gallery] + self._earlier)[:EARLIER_LAYOUTS]
            self._gallery, self.tau = gallery, tau
        return Attached(self._pk_sha256, msg.n)

    def _tau_for(self, gallery) -> float:
        """τ for an attached gallery: a default τ is τ(N) (``layout.current_tau``, issue 37), so a gallery changed
        at S_local gets its τ here, where the key store is. N is every slot S_key decrypts a score for, empty ones
        included: S_local's empty-slot bitmap cannot lower τ (at worst τ is that of a slightly larger gallery)."""
        try:
            return float(current_tau(self._meta, gallery[1])["tau"])
        except GalleryError as e:
            raise PrivfaceError(str(e)) from None

    def _check(self, msg: ScoreChunk):
        """The chunk's residues as a ``CKKSScores`` (or ``PaillierScores``) of its blocks, or ProtocolError (no
        state read or kept)."""
        if self._gallery is None:
            raise ProtocolError("no gallery attached (the local server attaches when it starts)")
        for gallery in [self._gallery, *self._earlier]:  # earlier: requests begun before the gallery grew
            secret, n, capacity, (adapter, layout), empty = gallery
            counts = block_counts(n, capacity)
            if msg.total == len(counts) and msg.counts == counts[msg.offset:msg.offset + len(msg.counts)]:
                break
        else:
            secret, n, capacity, (adapter, layout), empty = self._gallery
            counts = block_counts(n, capacity)
        if len(msg.request_id) != 16:
            raise ProtocolError("request id must be 16 bytes")
        if msg.total != len(counts) or not msg.counts or msg.offset + len(msg.counts) > msg.total:
            raise ProtocolError(f"ScoreChunk: blocks {msg.offset}+{len(msg.counts)} of {msg.total}, "
                                f"the gallery has {len(counts)}")
        if msg.counts != counts[msg.offset:msg.offset + len(msg.counts)]:
            raise ProtocolError("ScoreChunk: block counts differ from the gallery's layout")
        try:  # lengths; idface-paillier: every ciphertext a unit of Z_N²
            return secret, capacity, adapter.scores_from_residues(msg.residues, list(msg.counts), layout), empty
        except (CryptoError, PrivfaceError) as e:
            raise ProtocolError(f"ScoreChunk: {e}") from None

    def decide(self, body) -> KeyDecision | None:
        """Fold one chunk into the request's running best (first index on ties, as ``KeyServer.decide``)."""
        msg = read_message(ScoreChunk, body)
        secret, capacity, scores_msg, empty = self._check(msg)
        with self._lock:
            now = time.monotonic()
            for rid in [r for r, (*_, t) in self._pending.items() if now - t > PENDING_TTL]:
                del self._pending[rid]
            done, best, index, start = self._pending.get(msg.request_id, (0, -np.inf, -1, now))
            if msg.offset != done:
                raise ProtocolError(f"ScoreChunk offset {msg.offset}, expected {done}")
            last = msg.offset + len(msg.counts) == msg.total
            if done == 0 and not last and len(self._pending) >= MAX_PENDING:
                raise ProtocolError("too many open requests at the key server")
        scores = secret.decrypt_scores(scores_msg)  # checks residues < primes; ProtocolError if tampered
        if empty is not None:  # withdrawn slots and a sealed block's free positions answer nobody
            base = msg.offset * capacity
            scores = np.where(empty[base:base + len(scores)], -np.inf, scores)
        j = int(np.argmax(scores))
        if scores[j] > best:
            best, index = float(scores[j]), msg.offset * capacity + j
        with self._lock:
            if self._pending.get(msg.request_id, (0,))[0] != done:
                raise ProtocolError("concurrent chunks for one request")
            if not last:
                self._pending[msg.request_id] = (done + len(msg.counts), best, index, start)
                return None
            self._pending.pop(msg.request_id, None)
        return KeyDecision(msg.request_id, index if best >= self.tau else None)


    def reencrypt(self, body) -> Reencrypted:
        """The erasing refresh's key step (hers: ``HERSKey.refresh``) on the attached gallery's key: checked
        (length, residues below q₀) before decryption; what leaves is a fresh encryption, never a plaintext."""
        msg = read_message(Reencrypt, body)
        if self._gallery is None:
            raise ProtocolError("no gallery attached (the local server attaches when it starts)")
        secret = self._gallery[0]
        if not hasattr(secret, "refresh"):
            raise ProtocolError("this gallery's scheme does not erase by refresh")
        n, copies = secret.public.n, msg.copies
        per = n * 8
        g = len(msg.columns) // per
        if (not g or len(msg.columns) % per or not 1 <= copies <= 16 or len(msg.padded) != copies * g * per
                or copies * g * 2 * per > REENCRYPT_BYTES):
            raise ProtocolError(f"Reencrypt: 1 to 16 copies of g ciphertexts ({per}-byte halves), "
                                f"answer ≤ {REENCRYPT_BYTES} bytes")
        masked = Masked(np.frombuffer(msg.padded, dtype="<u8").astype(np.uint64).reshape(copies, g, n),
                        np.frombuffer(msg.columns, dtype="<u8").astype(np.uint64).reshape(g, n))
        (b, seed), = secret.refresh(masked)
        return Reencrypted(np.ascontiguousarray(b, dtype="<u8").tobytes(), seed)


    def erase_open(self, body) -> EraseOpened:
        """Digit erasure (idface-ckks / idface-paillier), step 1 on the attached gallery's key: ``erase_link.KeyEraser``
        checks every field before decrypting; what leaves is garbled tables and the OT's first message."""
        return self._eraser.open(self._digit_secret(), body)

    def erase_transfer(self, body) -> ErasePads:
        """Digit erasure, step 2: the OT extension's pads for S_local's input labels."""
        return self._eraser.transfer(body)

    def erase_close(self, body) -> Erased:
        """Digit erasure, step 3: the output labels decoded, fresh encryptions under sk (never a plaintext)."""
        return self._eraser.close(body)

    def _digit_secret(self):
        from .key_pool import DecryptPool

        if self._gallery is None:
            raise ProtocolError("no gallery attached (the local server attaches when it starts)")
        secret = self._gallery[0]
        return secret.secret if isinstance(secret, DecryptPool) else secret


class KeyLink:
    """S_local's side of the erasing refresh over a link with ``reencrypt`` (a ``KeyRole`` in process, or
    ``service.clients.hers.HttpKeyServer``): ``refresh(masked)`` sends the masked copies (``Masked``) in frames of
    as many ciphertexts (all their copies, each c₁ once) as ``REENCRYPT_BYTES`` allows and returns S_key's answers,
    one (b, seed) chunk per frame, checked for length."""

    def __init__(self, key) -> None:
        self.key = key

    def refresh(self, masked: Masked) -> list[tuple[np.ndarray, bytes]]:
        copies, k, n = masked.padded.shape
        g = max(1, min(k, REENCRYPT_BYTES // (copies * 2 * n * 8)))
        out = []
        for lo in range(0, k, g):
            cols, pads = masked.columns[lo:lo + g], masked.padded[:, lo:lo + g]
            frame = Reencrypt(copies, np.ascontiguousarray(cols, "<u8").tobytes(),
                              np.ascontiguousarray(pads, "<u8").tobytes())
            reply = read_message(Reencrypted, self.key.reencrypt(frame))
            if len(reply.ciphertexts) != pads.shape[0] * pads.shape[1] * 2 * n * 8 or len(reply.seed) != 32:
                raise ProtocolError("the key server's Reencrypted has the wrong length")
            out.append((np.frombuffer(reply.ciphertexts, dtype="<u8").astype(np.uint64).reshape(-1, 2, n),
                        reply.seed))
        return out


class LocalRole:
    """S_local over the wire: the persisted gallery (every block in memory, or resident in ``shards`` Ray actors
    of the cluster at ``ray``: ``scale.resident``) and a link to S_key; ``identify`` (Query → Result) runs IP_DB,
    sends the message in ``ScoreChunk``s and resolves the decision."""

    def __init__(self, gallery_url: str, key, name: str = "default", *, chunk: int | None = None,
                 ray: str | None = None, shards: int | None = None) -> None:
        self._store = open_store(gallery_url)  # the meta is read once per identification (``refresh``)
        self._meta = self._store.get(GALLERY, record_key(name, "meta"))
        self.gallery = Gallery(gallery_url, name)
        self.resident = ray is not None
        if ray is None:
            local = self.gallery.local_server()
        else:
            from .resident import ResidentLocalServer

            self.shards = ResidentLocalServer(self.gallery, address=ray, shards=shards)
            local = self.shards.bind()
        self.view: tuple = (local, local.ids)
        self._reload = threading.Lock()
        s = self.gallery.settings
        self.key, self.dim = key, s.dim
        self.chunk = chunk or chunk_blocks(s.adapter.score_block_bytes(self.gallery.public_context))
        self._attach(self.gallery, local.ids)

    def erase_link(self, key=None) -> KeyLink | DigitEraseLink | None:
        """The link ``scale.lifecycle`` erases with over ``key`` (default: this server's link to S_key): hers over
        ``reencrypt`` (``KeyLink``), idface-ckks / idface-paillier over ``erase/open|transfer|close``
        (``erase_link.DigitEraseLink``); None for a scheme that does not erase."""
        adapter = self.gallery.settings.adapter
        if adapter.reencrypt_erasure:
            return KeyLink(key or self.key)
        if adapter.erasable:
            return DigitEraseLink(key or self.key, getattr(self.gallery.public.public, "nsquare", None))
        return None

    @property
    def local(self) -> LocalServer:
        """The current view's S_local (blocks and ids)."""
        return self.view[0]

    def query(self, body) -> np.ndarray:
        raw = read_message(Query, body).template
        if len(raw) != 8 * self.dim:
            raise ProtocolError(f"Query: expected {self.dim} float64 values, got {len(raw)} bytes")
        y = np.frombuffer(raw, dtype="<f8").reshape(1, -1)
        with np.errstate(over="ignore"):
            if np.all(np.isfinite(y)) and not np.isfinite(np.linalg.norm(y)):
                y = y / np.max(np.abs(y))  # ‖y‖ overflows float64: rescale first (same direction)
        try:
            return unit(y)
        except TemplateError as e:
            raise ProtocolError(f"Query: {e}") from None

    def refresh(self) -> tuple[LocalServer, list[str | None]]:
        """The gallery view to answer this identification with (blocks and ids). When the meta changed
        (``scale.lifecycle``: a withdrawal rewrote ids, an add wrote new block generations), the gallery is read
        again — only the blocks whose generation changed are loaded —, S_key is attached to the new layout, and
        the new view replaces the old in one assignment: identifications in flight finish on the view they took.
        Resident shards (``ray``): the shards stage the new version (``ResidentLocalServer.update``: each loads its
        changed blocks) before the view switches (issue 38 §2)."""
        meta = self._store.get(GALLERY, record_key(self.gallery.name, "meta"))
        if meta == self._meta:
            return self.view
        with self._reload:
            if meta == self._meta:
                return self.view
            if self.resident:
                return self._refresh_shards(meta)
            for attempt in range(5):
                try:
                    gallery = Gallery(self.gallery.url, self.gallery.name)
                    changed = [b for b in range(gallery.nblocks)
                               if b >= self.gallery.nblocks or gallery.gens[b] != self.gallery.gens[b]]
                    blocks, _ = gallery.load_blocks(changed)
                    ids = gallery_ids(gallery)
                    break
                except GalleryError:  # a generation was replaced while being read: read the new meta again
                    if attempt == 4:
                        raise
                    time.sleep(0.05 * (attempt + 1))
            old, _ = self.view
            local = LocalServer(gallery.public)
            local.blocks = list(old.blocks[:gallery.nblocks]) + [None] * max(0, gallery.nblocks - len(old.blocks))
            for b, block in zip(changed, blocks):
                local.blocks[b] = block
            local.ids = ids
            if ids != self.view[1]:  # a new size or other empty slots: S_key's layout changes
                self._attach(gallery, ids)
            self.gallery, self._meta = gallery, meta
            self.view = (local, ids)
            return self.view

    def _refresh_shards(self, meta: bytes | None) -> tuple:
        """The changed gallery staged on the shards, S_key attached to its layout, then the view switched."""
        for attempt in range(5):
            try:
                gallery = Gallery(self.gallery.url, self.gallery.name)
                ids = gallery_ids(gallery)
                local = self.shards.update(gallery, ids)
                break
            except GalleryError as e:  # changed again while being read, or a shard could not stage it: read anew
                if attempt == 4:
                    raise UnavailableError(f"the gallery's shards could not take its change yet ({e}): nothing "
                                           "was answered, retry shortly", 10) from None
                time.sleep(0.05 * (attempt + 1))
        if ids != self.view[1]:
            self._attach(gallery, ids)
        self.gallery, self._meta = gallery, meta
        self.view = (local, ids)
        return self.view

    def _attach(self, g: Gallery, ids: list[str | None]) -> None:
        s = g.settings
        empty = np.array([i is None for i in ids], dtype=bool)
        bitmap = np.packbits(empty, bitorder="little").tobytes() if empty.any() else None
        attached = read_message(Attached, self.key.attach(Attach(s.scheme, s.dim, s.beta, g.n, g.capacity, g.pk_bytes,
                                                                 s.lift, s.lift_seed, bitmap)))
        if attached.pk_sha256 != hashlib.sha256(g.pk_bytes).digest() or attached.n != g.n:
            raise ProtocolError("the key server holds the key of another gallery")

    def identify(self, body) -> Result:
        local, ids = self.refresh()
        msg = local.identify_request(self.query(body))
        index = Decision(self._ask(msg)).index
        if index is not None and not 0 <= index < len(ids):
            raise ProtocolError("key server returned an index outside the gallery")
        who = None if index is None else ids[index]
        return Result(who is not None, who)

    def _residues(self, msg, lo: int, hi: int) -> bytes:
        """Blocks lo … hi − 1 of the IP_DB message as ``ScoreChunk.residues``."""
        return self.gallery.settings.adapter.residues(msg, lo, hi, self.gallery.public_context)

    def _ask(self, msg) -> int | None:
        rid, total = secrets.token_bytes(16), len(msg.counts)
        reply = None
        for lo in range(0, total, self.chunk):
            hi = min(total, lo + self.chunk)
            residues = self._residues(msg, lo, hi)
            reply = self.key.decide(ScoreChunk(rid, lo, total, msg.counts[lo:hi], residues))
        if reply is None:
            raise ProtocolError("the key server returned no decision")
        decision = read_message(KeyDecision, reply)
        if decision.request_id != rid:
            raise ProtocolError("the key server answered another request")
        return decision.index


def score_frame_bytes(scheme: str, ring_n: int, blocks: int) -> int:
    """The frame size of a ``ScoreChunk`` of ``blocks`` blocks (docs/protocols/idface.md: what a 2^20 gallery sends)."""
    shape = (blocks, ciphertexts_per_block(scheme), 2, 1, ring_n)
    return len(ScoreChunk(bytes(16), 0, blocks, [1] * blocks, bytes(8 * int(np.prod(shape)))).to_bytes())
