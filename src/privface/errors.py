"""Typed errors raised by privface; each carries a message fit to show a user."""


class PrivfaceError(Exception):
    """Base class of every error privface raises on purpose."""


class ImageError(PrivfaceError):
    """The input is not a readable image (missing file, not an image, corrupt, wrong array shape)."""


class NoFaceError(PrivfaceError):
    """No face was found in an image."""


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


class SubjectExistsError(ProtocolError):
    """A registration names a subject that is already enrolled (registration creates only)."""


class CheckpointError(PrivfaceError):
    """An evaluation checkpoint file belongs to other settings or is damaged beyond its last line."""
