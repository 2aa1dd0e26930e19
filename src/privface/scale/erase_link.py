"""idface erasure between the two servers over the wire (issue 37): seed 003 §4.3's digit erasure
(``protocols.idface.erase``: pads, one garbled circuit per removed digit, IKNP OT) as three exchanges
S_local → S_key, ``erase/open`` (``EraseOpen`` → ``EraseOpened``), ``erase/transfer`` (``EraseChoices`` →
``ErasePads``) and ``erase/close`` (``EraseOutputs`` → ``Erased``), each message decoded and checked before use.

``DigitEraseLink`` is S_local's side: the ``open``/``transfer``/``close`` object ``protocols.idface.erase.erase_digits``
runs, over a key server link (``scale.ident.KeyRole`` in process, ``service.clients.hers.HttpKeyServer`` over
HTTP); its ``group_bytes`` cuts a block's targets into erasures whose messages fit a wire frame.

``KeyEraser`` is S_key's: at most ``MAX_ERASURES`` erasures open at once, each for ``ERASE_TTL`` seconds, each
step once and in order; a step that fails ends its erasure (no retry: an evaluator probing the OT or the garbling
learns at most whether one erasure completed, about that erasure's fresh randomness only). What S_key answers is
garbled tables, OT messages and fresh encryptions — never a decrypted value or anything that depends on one
other than through ciphertexts under its own key, whatever a caller puts in any field: a caller that sends an
unmasked ciphertext (pads of 0) gets back a fresh encryption of the same plaintext less a digit it chose, which
it cannot read.
"""
from __future__ import annotations

import secrets
import threading
import time

import numpy as np

from ..errors import CryptoError, ProtocolError
from ..protocols.common import read_message
from ..protocols.hers.messages import EraseChoices, Erased, EraseOpen, EraseOpened, EraseOutputs, ErasePads
from ..protocols.idface.erase import LABEL, DigitEraseKey, circuit_bytes, digit_circuit
from ..protocols.idface.paillier_erase import PaillierEraseKey
from ..protocols.idface.paillier_erase import digit_circuit as paillier_circuit

GROUP_BYTES = 3 << 20
"""The bytes one erasure's largest exchange may reach (frames are ≤ 4 MiB: ``wire.MAX_MESSAGE_BYTES``)."""
MAX_ERASURES = 4
ERASE_TTL = 300.0
MAX_TARGETS = 8192  # the schema's list maximum


def _width(nsq: int) -> int:
    return (nsq.bit_length() + 7) // 8


def _ints(raw: bytes, width: int, what: str) -> list[int]:
    if not raw or len(raw) % width:
        raise ProtocolError(f"{what}: a whole number of {width}-byte values expected")
    return [int.from_bytes(raw[i:i + width], "big") for i in range(0, len(raw), width)]


def _to_bytes(values, width: int) -> bytes:
    return b"".join(int(v).to_bytes(width, "big") for v in values)


class DigitEraseLink:
    """S_local's link for ``erase_digits`` over S_key's ``erase/*`` steps; ``nsquare``: idface-paillier's N²
    (None: idface-ckks)."""

    group_bytes = GROUP_BYTES

    def __init__(self, key, nsquare: int | None = None) -> None:
        self.key, self.nsquare = key, nsquare
        self._id: bytes | None = None
        self._n = 0

    def open(self, request: dict) -> dict:
        t = np.ascontiguousarray(request["targets"], dtype="<u4")
        if self.nsquare is None:
            masked = np.ascontiguousarray(request["masked"], dtype="<u8")
            self._n = masked.shape[-1]
            raw = masked.tobytes()
        else:
            raw = _to_bytes(request["masked"], _width(self.nsquare))
        msg = read_message(EraseOpened, self.key.erase_open(EraseOpen(raw, t.tobytes())))
        if len(msg.erase_id) != 16 or len(msg.circuits) != t.shape[0] or len(msg.garbler_labels) != t.shape[0]:
            raise ProtocolError("EraseOpened: one garbled circuit and its labels per target expected")
        if any(len(g) % LABEL for g in msg.garbler_labels):
            raise ProtocolError("EraseOpened: garbler labels are 16 bytes each")
        self._id = msg.erase_id
        return {"ot_request": msg.ot_request, "circuits": msg.circuits,
                "garbler_labels": [[g[i:i + LABEL] for i in range(0, len(g), LABEL)] for g in msg.garbler_labels]}

    def transfer(self, reply: dict) -> np.ndarray:
        u = np.ascontiguousarray(reply["u"], dtype=np.uint8)
        msg = read_message(ErasePads, self.key.erase_transfer(EraseChoices(self._id, reply["ot_response"],
                                                                          u.tobytes())))
        if msg.erase_id != self._id or len(msg.pads) % (2 * LABEL):
            raise ProtocolError("ErasePads: another erasure's, or not whole label pairs")
        return np.frombuffer(msg.pads, dtype=np.uint8).reshape(-1, 2, LABEL)

    def close(self, outputs: list[bytes]):
        msg = read_message(Erased, self.key.erase_close(EraseOutputs(self._id, list(outputs))))
        if msg.erase_id != self._id:
            raise ProtocolError("Erased: another erasure's answer")
        self._id = None
        if self.nsquare is not None:
            return _ints(msg.ciphertexts, _width(self.nsquare), "Erased")
        per = 2 * self._n * 8
        if not msg.ciphertexts or len(msg.ciphertexts) % per:
            raise ProtocolError("Erased: not whole ciphertexts")
        return np.frombuffer(msg.ciphertexts, dtype="<u8").astype(np.uint64).reshape(-1, 2, 1, self._n)


class KeyEraser:
    """S_key's open erasures (module docstring). ``secret`` is the attached gallery's ``IDFaceCKKSKey`` or
    ``IDFacePaillierKey``."""

    def __init__(self) -> None:
        self._open: dict[bytes, list] = {}  # id → [the scheme's erase key, next step, opened at, kind]
        self._lock = threading.Lock()

    def open(self, secret, body) -> EraseOpened:
        from ..protocols.idface.ckks import IDFaceCKKSKey
        from ..protocols.idface.paillier import IDFacePaillierKey

        msg = read_message(EraseOpen, body)
        if isinstance(secret, IDFaceCKKSKey):
            key, cols = DigitEraseKey(secret.secret, secret.params), 3
            per = 2 * key.n * 8
            if not msg.masked or len(msg.masked) % per:
                raise ProtocolError(f"EraseOpen: whole ciphertexts of {per} bytes expected")
            masked = np.frombuffer(msg.masked, dtype="<u8").astype(np.uint64).reshape(-1, 2, 1, key.n)

            def cost(i: int) -> int:
                return circuit_bytes(digit_circuit(key.q, key.p, key.m, i))
        elif isinstance(secret, IDFacePaillierKey):
            key, cols = PaillierEraseKey(secret.secret, secret.params), 2
            masked = _ints(msg.masked, _width(key.nsq), "EraseOpen")

            def cost(i: int) -> int:
                return circuit_bytes(paillier_circuit(key.N, key.p, i)) + 2 * _width(key.nsq)
        else:
            raise ProtocolError("this gallery's scheme does not erase digits")
        if not msg.targets or len(msg.targets) % (4 * cols) or len(msg.targets) // (4 * cols) > MAX_TARGETS:
            raise ProtocolError(f"EraseOpen: 1 to {MAX_TARGETS} target rows of {cols} uint32 expected")
        t = np.frombuffer(msg.targets, dtype="<u4").astype(np.int64).reshape(-1, cols)
        if len(np.unique(t, axis=0)) != len(t):
            raise ProtocolError("EraseOpen: a target repeats")
        if np.any(t[:, -1] >= key.m):
            raise ProtocolError("EraseOpen: a digit out of range")
        digits, counts = np.unique(t[:, -1], return_counts=True)  # each digit's circuit built once
        if sum(cost(int(i)) * int(c) for i, c in zip(digits, counts)) > 2 * GROUP_BYTES:  # what garbling sends back
            raise ProtocolError(f"EraseOpen: the targets' circuits exceed {2 * GROUP_BYTES} bytes; send fewer")
        with self._lock:
            now = time.monotonic()
            for k in [k for k, v in self._open.items() if now - v[2] > ERASE_TTL]:
                del self._open[k]
            if len(self._open) >= MAX_ERASURES:
                raise ProtocolError(f"{MAX_ERASURES} erasures open at the key server; try later")
            eid = secrets.token_bytes(16)
            self._open[eid] = [key, "busy", now]
        try:
            opened = key.open({"masked": masked, "targets": t})  # checks shapes and ranges before decrypting
        except (CryptoError, ProtocolError):
            self._end(eid)
            raise
        self._set(eid, "transfer")
        return EraseOpened(eid, opened["ot_request"], opened["circuits"],
                           [b"".join(g) for g in opened["garbler_labels"]])

    def transfer(self, body) -> ErasePads:
        msg = read_message(EraseChoices, body)
        key = self._take(msg.erase_id, "transfer")
        try:
            if not msg.u or len(msg.u) % key._state["ot"].rows:
                raise ProtocolError("EraseChoices: u must have κ whole rows")
            u = np.frombuffer(msg.u, dtype=np.uint8).reshape(key._state["ot"].rows, -1)
            pads = key.transfer({"ot_response": msg.ot_response, "u": u})  # IKNP checks u's shape for m OTs
        except (CryptoError, ProtocolError, KeyError):
            self._end(msg.erase_id)
            raise ProtocolError("EraseChoices refused; the erasure is ended") from None
        self._set(msg.erase_id, "close")
        return ErasePads(msg.erase_id, np.ascontiguousarray(pads, dtype=np.uint8).tobytes())

    def close(self, body) -> Erased:
        msg = read_message(EraseOutputs, body)
        key = self._take(msg.erase_id, "close")
        try:
            fresh = key.close(list(msg.outputs))  # a label that is neither of its wire's: refused
        except (CryptoError, ProtocolError):
            raise ProtocolError("EraseOutputs refused; the erasure is ended") from None
        finally:
            self._end(msg.erase_id)
        if isinstance(fresh, np.ndarray):
            return Erased(msg.erase_id, np.ascontiguousarray(fresh, dtype="<u8").tobytes())
        return Erased(msg.erase_id, _to_bytes(fresh, _width(key.nsq)))

    def _take(self, eid: bytes, step: str):
        with self._lock:
            entry = self._open.get(eid)
            if entry is None or time.monotonic() - entry[2] > ERASE_TTL:
                self._open.pop(eid, None)
                raise ProtocolError("no such erasure open at the key server (ended, expired or never opened)")
            if entry[1] != step:
                raise ProtocolError(f"erasure step {step!r} out of order")
            entry[1] = "busy"
            return entry[0]

    def _set(self, eid: bytes, step: str) -> None:
        with self._lock:
            if eid in self._open:
                self._open[eid][1] = step

    def _end(self, eid: bytes) -> None:
        with self._lock:
            self._open.pop(eid, None)


__all__ = ["DigitEraseLink", "KeyEraser"]
