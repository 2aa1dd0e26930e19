"""Renewability (ISO/IEC 24745; issue 6): re-encrypt every stored reference under a fresh auth key pair, without
re-enrolment and without the auth server ever seeing a template — blind re-encryption.

For each reference c = Enc_old(m) the DB server draws a uniform mask R and sends Enc_old(m) ⊞ Enc_old(R):
BFV ``lattice.blind`` (R uniform mod t per coefficient: m + R is uniform), CKKS ``lattice.blind`` (R uniform mod
every RNS prime: Δ·m + e + R is uniform mod q — statistical distance 0, no flooding bound needed), NTRU random
bits (Enc(m) + Enc(R) = Enc(m ⊕ R), uniform bits). The auth server decrypts the masked value and re-encrypts it
under the new key (``AuthServer.reencrypt``); the DB server removes Enc_new(R) (BFV/CKKS: adds Enc_new(−R); NTRU:
adds Enc_new(R), since XOR is its own inverse).

Crash safety: a ``StoredReference`` holds the reference per key version and is replaced atomically as a whole.

1. ``rotate_begin``: the auth server makes key version n+1 (or returns the ring of a rotation already under way).
2. every record without a version-(n+1) copy gets one (old copy kept) — clients still use key n meanwhile;
3. ``activate``: clients get key n+1 from now on;
4. every record is cut down to its version-(n+1) copy (a record enrolled under key n after step 2 is
   re-encrypted here first);
5. ``retire``: the auth server deletes key n.

Every step is idempotent, so re-running after a crash anywhere finishes the job; no record is ever without a
copy under a key the auth server holds. Each record is rewritten by compare-and-swap (``TemplateStore.swap``):
an enrolment or revocation of the same subject committed between the rotation's read and its write (another
thread or process) wins, and the pass reads that record again and redoes it (``CONTENDED_ROUNDS``), so a
re-enrolment is never replaced by the re-encrypted old template.
"""
from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from ...errors import ProtocolError
from ...store.base import TemplateStore
from .messages import AuthKeys, KeyRequest, PublicKey, ReencryptRequest, ReencryptResponse, StoredReference
from .params import NTRU, KolbergParams
from .parties import PROTOCOL, REENCRYPT_BATCH, _Public, _read, read_reference

CONTENDED_ROUNDS = 5
"""Rounds a pass re-reads and redoes records that other writers changed under it before it gives up."""


@dataclass
class RotationReport:
    """``privface rotate-keys --json``: what one run did."""

    scheme: str
    from_version: int
    to_version: int
    references: int  # records seen in the last pass (= enrolled subjects)
    reencrypted: int  # references this run re-encrypted
    already: int  # references that already had a copy under the new key (a resumed run)
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def _blind(pub: _Public, c):
    """(Enc(m ⊞ R), R): the masked ciphertext for the auth server and the mask the DB server keeps."""
    if pub.params.scheme == NTRU:
        r = np.frombuffer(secrets.token_bytes(c.nbits), dtype=np.uint8) & 1
        return c + pub.key.encrypt(r), r
    return pub.key.blind(c)


def _unblind(pub: _Public, c, mask):
    if pub.params.scheme == NTRU:
        return c + pub.key.encrypt(mask)
    return pub.key.unblind(c, mask)


class Rotation:
    """One run of the DB server's side against ``auth`` (``AuthServer`` or ``remote.HttpAuth``: ``rotate_begin``,
    ``reencrypt``, ``activate``, ``retire``). ``after_record`` (tests) is called with each subject id right after
    its record was replaced."""

    def __init__(self, params: KolbergParams, store: TemplateStore, auth, *,
                 after_record: Callable[[str], None] | None = None) -> None:
        self.params, self.store, self.auth, self.after_record = params, store, auth, after_record

    def run(self) -> RotationReport:
        t0 = time.perf_counter()
        ring = _read(AuthKeys, self.auth.rotate_begin(KeyRequest(0)))
        if ring.scheme != self.params.scheme or len(ring.versions) != 2 or len(ring.keys) != 2:
            raise ProtocolError("the auth server did not start a key rotation for this scheme")
        old, new = sorted(ring.versions)
        self.pubs = {v: _Public(self.params, PublicKey(ring.scheme, k)) for v, k in zip(ring.versions, ring.keys)}
        self.old, self.new, self.reencrypted, self.already = old, new, 0, 0
        self._pass(drop_old=False)
        self.auth.activate(KeyRequest(new))
        seen = self._pass(drop_old=True)
        self.auth.retire(KeyRequest(new))
        return RotationReport(self.params.scheme, old, new, seen, self.reencrypted, self.already,
                              round(time.perf_counter() - t0, 3))

    def _pass(self, *, drop_old: bool) -> int:
        """Give every record a copy under the new key (batched re-encryption); with ``drop_old`` keep only it.
        Records another writer changed between our read and our write (an enrolment, a re-enrolment) are
        read again and redone, for at most ``CONTENDED_ROUNDS`` rounds."""
        seen = None
        subjects = self.store.ids(PROTOCOL)
        for _ in range(CONTENDED_ROUNDS):
            self._contended = []
            count = self._pass_over(subjects, drop_old)
            seen = count if seen is None else seen
            if not self._contended:
                return seen
            subjects = self._contended
        raise ProtocolError(f"{len(subjects)} record(s) kept changing while the rotation rewrote them; "
                            "run the rotation again (it resumes)")

    def _pass_over(self, subjects: list[str], drop_old: bool) -> int:
        seen, todo = 0, []
        for subject in subjects:
            blob = self.store.get(PROTOCOL, subject)
            if blob is None:  # revoked meanwhile
                continue
            seen += 1
            rec = read_reference(blob)
            if self.new in rec.versions:
                if not drop_old:
                    self.already += 1
                elif len(rec.versions) > 1:
                    self._replace(subject, blob, StoredReference(subject, rec.backend, [self.new],
                                                                 [rec.templates[rec.versions.index(self.new)]]))
                continue
            if self.old not in rec.versions:
                raise ProtocolError(f"subject {subject!r}: reference under key version(s) {rec.versions}, "
                                    f"which the auth server no longer holds")
            todo.append((subject, blob, rec))
            if len(todo) == REENCRYPT_BATCH:
                self._reencrypt(todo, drop_old)
                todo = []
        if todo:
            self._reencrypt(todo, drop_old)
        return seen

    def _reencrypt(self, todo, drop_old: bool) -> None:
        src, dst = self.pubs[self.old], self.pubs[self.new]
        blinded, masks = [], []
        for _, _, rec in todo:
            masked, mask = _blind(src, src.load(rec.templates[rec.versions.index(self.old)], "template"))
            blinded.append(masked.to_bytes())
            masks.append(mask)
        reply = _read(ReencryptResponse, self.auth.reencrypt(ReencryptRequest(self.old, self.new, blinded)))
        if reply.to_version != self.new or len(reply.templates) != len(todo):
            raise ProtocolError("the auth server's re-encryption answer does not match the request")
        for (subject, blob, rec), fresh, mask in zip(todo, reply.templates, masks):
            c = _unblind(dst, dst.load(fresh, "template"), mask).to_bytes()
            keep = [] if drop_old else [(v, t) for v, t in zip(rec.versions, rec.templates) if v == self.old]
            pairs = keep + [(self.new, c)]
            if self._replace(subject, blob, StoredReference(subject, rec.backend, [v for v, _ in pairs],
                                                            [t for _, t in pairs])):
                self.reencrypted += 1

    def _replace(self, subject: str, seen: bytes, rec: StoredReference) -> bool:
        """Compare-and-swap ``seen`` → ``rec`` in the store. When another writer changed the record since we
        read it, nothing is written (a re-enrolment is never overwritten by the re-encrypted old template)
        and the subject is queued for another round; a revoked record stays revoked."""
        if not self.store.swap(PROTOCOL, subject, seen, rec.to_bytes()):
            if self.store.get(PROTOCOL, subject) is not None:
                self._contended.append(subject)
            return False
        if self.after_record is not None:
            self.after_record(subject)
        return True


def rotate_keys(params: KolbergParams, store: TemplateStore, auth, **kw) -> RotationReport:
    """Run (or resume) a key rotation of every kolberg reference in ``store`` (module docstring)."""
    return Rotation(params, store, auth, **kw).run()


__all__ = ["Rotation", "RotationReport", "rotate_keys"]
