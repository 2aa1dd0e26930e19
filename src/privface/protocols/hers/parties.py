"""Secure identification from a database encryption scheme (seed 003 §3.2): ``LocalServer`` and ``KeyServer``.

S_local holds pk and the encrypted database DB = {(ID_i, C_i)}: it enrols templates with ENC_DB (one block of
``capacity`` templates per C_i) and answers a query with IP_DB(y, C_i) for every block. S_key holds sk: it
decrypts every matching score, takes the index of the largest one and returns it iff it is ≥ τ, else reject
(``None``). The scores never leave S_key, so no noise flooding is needed on them; the released index is the
argmax (first index on ties), a function of the plaintext scores up to CKKS error for HERS.

A scheme is any object with ``capacity``, ``enc_db(templates) -> block``, ``ip_db(query, blocks) -> message``
(public side) and ``decrypt_scores(message) -> scores`` (secret side); ``hers.scheme`` and ``idface`` provide them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ProtocolError, TemplateError

#: Seed 003 §3.2's two servers, shared by hers and idface (``DESCRIPTION["threat_model"]``).
THREAT_MODEL = {
    "local_server": "honest-but-curious: holds pk, the encrypted database and sees plaintext queries",
    "key_server": "honest-but-curious, holds sk; must not collude with the local server",
}
LOCAL_SERVER_LEAKAGE = ["query template (plaintext, as in seed 003)", "gallery size", "matched index or reject"]


@dataclass(frozen=True)
class Decision:
    """S_key's answer: the index of the best score if it is ≥ τ, else ``None`` (reject)."""

    index: int | None


class LocalServer:
    """S_local: public key, encrypted blocks and the identities in enrolment order."""

    def __init__(self, scheme) -> None:
        self.scheme = scheme
        self.blocks: list = []
        self.ids: list[str] = []

    def enrol(self, ids: list[str], templates) -> None:
        """ENC_DB over blocks of ``capacity`` templates; a partial last block stays partial (§3.2)."""
        x = np.asarray(templates)
        if x.ndim != 2 or x.shape[0] != len(ids):
            raise TemplateError(f"need one template row per id, got {x.shape} for {len(ids)} ids")
        cap = self.scheme.capacity
        for lo in range(0, len(ids), cap):
            self.blocks.append(self.scheme.enc_db(x[lo:lo + cap]))
        self.ids.extend(ids)

    def identify_request(self, query):
        """IP_DB(y, C_i) for every block: the message to S_key."""
        if not self.blocks:
            raise ProtocolError("nothing enrolled")
        return self.scheme.ip_db(query, self.blocks)

    def resolve(self, decision: Decision) -> str | None:
        if decision.index is None:
            return None
        if not 0 <= decision.index < len(self.ids):
            raise ProtocolError("key server returned an index outside the gallery")
        return self.ids[decision.index]

    @property
    def storage_bytes(self) -> int:
        return sum(self.scheme.block_bytes(b) for b in self.blocks)


class KeyServer:
    """S_key: the secret-key side of the scheme and the threshold τ."""

    def __init__(self, secret_scheme, tau: float, empty=None) -> None:
        self.secret, self.tau = secret_scheme, tau
        self.empty = empty
        """Bool mask of gallery indices holding no identity (withdrawn), left out of the argmax; None: none."""

    def decide(self, message) -> Decision:
        scores = self.secret.decrypt_scores(message)  # validates the message
        if self.empty is not None:
            scores = np.where(self.empty[:len(scores)], -np.inf, scores)
        best = int(np.argmax(scores))
        return Decision(best if scores[best] >= self.tau else None)


def identify(local: LocalServer, key: KeyServer, query) -> str | None:
    """One identification: S_local → S_key → S_local."""
    return local.resolve(key.decide(local.identify_request(query)))
