"""Typed errors raised by privface; each carries a message fit to show a user."""


class PrivfaceError(Exception):
    """Base class of every error privface raises on purpose."""


class ImageError(PrivfaceError):
    """The input is not a readable image (missing file, not an image, corrupt, wrong array shape)."""


class FaceError(PrivfaceError):
    """No usable face in an image: none found, or which one to use is not clear (or not there)."""


class NoFaceError(FaceError):
    """No face was found in an image."""


class AmbiguousFaceError(FaceError):
    """Two or more faces of about the same size (`faces.detect.SAME_SIZE`) and no choice of which to use.

    boxes: (left, top, right, bottom) of every face found, largest first, in input-image pixels — the numbering
    ``which=N`` (Python) and ``--face N`` (CLI) choose by."""

    def __init__(self, boxes: list[tuple[int, int, int, int]], where: str = "the image"):
        self.boxes = [tuple(b) for b in boxes]
        self.where = where
        listed = ", ".join(f"face {i} at {box_text(b)}" for i, b in enumerate(self.boxes))
        super().__init__(f"{len(self.boxes)} faces of about the same size in {where} ({listed}): choose one with "
                         f"--face N (command line) or which=N (Python), N as listed (largest first), or use the "
                         f"largest with --face largest / which=\"largest\"")


def box_text(box) -> str:
    """A face box (left, top, right, bottom) as people read it: "x,y w×h" (top-left corner, size) in pixels."""
    left, top, right, bottom = (int(v) for v in box)
    return f"{left},{top} {right - left}×{bottom - top}"


class ModelError(PrivfaceError):
    """A model file is missing, corrupt, or of the wrong kind/shape."""


class DatasetError(PrivfaceError):
    """A dataset folder or protocol file is missing or malformed."""


class TemplateError(PrivfaceError):
    """A template has the wrong shape, type or range for the requested encoding."""


class CryptoError(PrivfaceError):
    """A key, ciphertext, encoding or parameter set is invalid, insecure or used with the wrong key."""


class ProtocolError(PrivfaceError):
    """A protocol message is invalid for the party receiving it (wrong size, range, group, key or signature)."""


class UnknownSubjectError(ProtocolError):
    """A protocol message names a subject that is not enrolled."""


class BackendMismatchError(ProtocolError):
    """Templates of two face backends met (issue 36): an enrolment or probe made on ``client_backend`` at a server,
    or against an enrolment, of ``server_backend``. Their distances mean nothing together, so nothing is compared
    (HTTP 409, the body naming both)."""

    def __init__(self, message: str, server_backend: str, client_backend: str) -> None:
        super().__init__(message)
        self.server_backend, self.client_backend = server_backend, client_backend


def check_backend(server_backend: str, client_backend: str, what: str) -> None:
    """BackendMismatchError unless ``client_backend`` (of ``what``: "this enrolment", "this probe", …) is
    ``server_backend``."""
    if client_backend != server_backend:
        raise BackendMismatchError(f"{what} was made with the face backend {client_backend}, but this server decides "
                                   f"on {server_backend} templates: use --backend {server_backend} (templates of two "
                                   f"backends cannot be compared)", server_backend, client_backend)


class SubjectExistsError(ProtocolError):
    """A registration names a subject that is already enrolled (registration creates only)."""


class CheckpointError(PrivfaceError):
    """An evaluation checkpoint file belongs to other settings or is damaged beyond its last line."""


class UnavailableError(PrivfaceError):
    """A part of the service is down for a while (e.g. a gallery shard restarting after its node was lost):
    nothing was answered, retry after ``retry_after`` seconds (HTTP 503 with Retry-After)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, int(-(-retry_after // 1)))  # whole seconds, as Retry-After wants
