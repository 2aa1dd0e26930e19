"""The kiosk of a gsm terminal (seed 004 §3: the Terminal captures the face w; issue 39's terminal page): the page
at ``/app/kiosk.html`` posts the camera's frames, the terminal embeds the latest one at each match/start, and the
page shows the outcome of the last match (the decision large, or why a match was refused).

Posting a frame sets what the terminal compares against, so it takes the kiosk token (``secrets``, printed by
``privface serve`` once, compared in constant time); frames older than ``max_age`` seconds are not used.
The status carries no template, score or key: the subject ID, the decision or the refusal's message, a time.
"""
from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable

from ...errors import PrivfaceError, ProtocolError
from .gsm_pairing import Pairing

MAX_FRAME_BYTES = 4 * 1024 * 1024
FRAME_TYPES = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")  # JPEG, PNG


class KioskError(PrivfaceError):
    """A kiosk request refused: bad token, a frame that is not a JPEG/PNG or too large."""


class Kiosk:
    """The latest frame (bytes and arrival time) and the last outcome, shared by the kiosk page and the terminal."""

    def __init__(self, template_of: Callable[[bytes], object], *, token: str | None = None,
                 max_age: float = 15.0) -> None:
        self.token = token or secrets.token_urlsafe(24)
        self._template_of = template_of
        self._max_age = max_age
        self._lock = threading.Lock()
        self._frame: tuple[bytes, float] | None = None
        self._status: dict = {"seq": 0, "state": "idle"}
        self.pairing = Pairing()  # the short codes the page shows (gsm_pairing.py)

    def check_token(self, token: str | None) -> None:
        if not token or not hmac.compare_digest(token.encode(), self.token.encode()):
            raise KioskError("this kiosk request needs the kiosk token (printed by privface serve)")

    def post_frame(self, token: str | None, data: bytes) -> None:
        self.check_token(token)
        if len(data) > MAX_FRAME_BYTES or not data.startswith(FRAME_TYPES):
            raise KioskError(f"a kiosk frame is one JPEG or PNG image of at most {MAX_FRAME_BYTES} bytes")
        with self._lock:
            self._frame = (bytes(data), time.monotonic())

    def capture(self):
        """The terminal's w: the latest frame, embedded and quantized; ProtocolError when there is none fresh or
        it shows no face (the device gets the message, the kiosk shows it)."""
        with self._lock:
            frame = self._frame
        if frame is None or time.monotonic() - frame[1] > self._max_age:
            raise ProtocolError("the terminal's camera has no fresh frame: look at the camera and try again")
        try:
            return self._template_of(frame[0])
        except PrivfaceError as e:
            raise ProtocolError(f"no usable face in the terminal's camera frame ({e})") from None

    def record(self, subject: str | None, state: str, message: str = "") -> None:
        """state: accept, reject, abort, refused, locked."""
        with self._lock:
            self._status = {"seq": self._status["seq"] + 1, "state": state, "subject": subject, "message": message,
                            "at": time.time()}

    def status(self, token: str | None) -> dict:
        self.check_token(token)
        with self._lock:
            return dict(self._status)
