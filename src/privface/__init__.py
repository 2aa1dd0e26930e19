"""privface — face recognition in which nobody sees a face template in the clear.

The stable API is the names in ``__all__``, all reachable as ``privface.<name>``:

Faces (face_recognition's ``load_image_file`` / ``face_locations`` / ``face_encodings`` / ``face_distance`` /
``compare_faces``), on the default backend ``sface`` (dlib detection, 5-point alignment, SFace 128-D; since issue
36 — before, dlib ResNet-128) or on ``backend="dlib-resnet128"``; each backend is created on first use:
    load_image(image)               → H×W×3 uint8 RGB array (path, bytes, PIL image or array)
    detect(image)                   → face boxes (left, top, right, bottom), largest first
    embed(image, which="single", backend=None) → the face's embedding (refuses two faces of about the same size:
                                      AmbiguousFaceError; which="largest" or N chooses); "all": one row per face
    distance(known, candidate)      → Euclidean distance(s) between embeddings
    compare(known, candidate, tolerance=None, backend=None) → same person? (distance ≤ tolerance; default the
                                      backend's shared threshold: sface 1.12, dlib-resnet128 0.53)
Embeddings of two backends are not comparable: compare only those of one backend, and give a protocol client the
backend its embeddings came from (``Im2020Params(backend=…)``, ``KolbergParams(backend=…)``; a server refuses
templates of another backend than its own).

One client per protocol, each talking to a running ``privface serve``:
    Im2020Client (im2020, 1:1 verification), DeviceClient (gsm, the user's device), KolbergClient (kolberg),
    IdentClient (hers / idface two-server identification), VerifierClient (cryptomask, 1-bit identification)

Encrypted galleries (1:N): enrol(gallery_url, templates, scheme, …), identify(embedding, gallery_url, …)

Errors: PrivfaceError (base of every error raised on purpose), ImageError, FaceError (NoFaceError,
AmbiguousFaceError).

Everything else is private and may change without notice: names starting with an underscore, and every module
and name not listed in ``__all__`` (``privface.faces``, ``privface.protocols``, ``privface.crypto`` … are the
implementation). ``import privface`` loads no face model and no HE library; they load on first use.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from .errors import AmbiguousFaceError, FaceError, ImageError, NoFaceError, PrivfaceError

if TYPE_CHECKING:
    import numpy as np

    from .faces.base import Backend

__version__ = "0.1.0"

__all__ = [
    "AmbiguousFaceError", "DeviceClient", "FaceError", "IdentClient", "Im2020Client", "ImageError", "KolbergClient",
    "NoFaceError", "PrivfaceError",
    "VerifierClient", "compare", "detect", "distance", "embed", "enrol", "identify", "load_image",
]


def __getattr__(name: str) -> Any:
    """The protocol clients, imported on first access (PEP 562) so that ``import privface`` stays light: a client
    pulls in its protocol's crypto (TenSEAL, gmpy2, …). Plain imports, so the import contracts see them."""
    if name == "Im2020Client":
        from .service.clients.im2020 import Im2020Client as value
    elif name == "DeviceClient":
        from .service.clients.gsm import DeviceClient as value
    elif name == "KolbergClient":
        from .service.clients.kolberg import KolbergClient as value
    elif name == "IdentClient":
        from .service.clients.hers import IdentClient as value
    elif name == "VerifierClient":
        from .service.clients.cryptomask import VerifierClient as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


@lru_cache(maxsize=4)
def _backend(name: str | None = None) -> Backend:
    """A face backend by name (None: the default, ``faces.registry.DEFAULT_BACKEND`` = sface), made once."""
    from .faces.registry import DEFAULT_BACKEND, make_backend

    return make_backend(name or DEFAULT_BACKEND)


def load_image(image) -> np.ndarray:
    """The image as an H×W×3 uint8 RGB array, from a path, encoded bytes, a PIL image or an array.
    Raises ImageError for a missing, corrupt or undersized image."""
    from .faces.image import load_rgb

    return load_rgb(image)


def detect(image, backend: str | None = None) -> list[tuple[int, int, int, int]]:
    """Boxes (left, top, right, bottom) in image pixels of every face found, largest first; [] if none."""
    rgb, detector = load_image(image), _backend(backend).detector
    work, scale = detector.working_image(rgb)
    return [d.box for d in detector.detect(work, scale)]


def embed(image, which: Literal["single", "largest", "center", "all"] | int = "single",
          backend: str | None = None) -> np.ndarray:
    """The 128-D embedding of the face in the image; raises NoFaceError when there is none, and AmbiguousFaceError
    (naming the faces) when the second-largest face's area is ≥ 0.8 × the largest's. ``which="largest"``: the
    largest whatever the others; ``which=N``: face N of ``detect(image)`` (largest first, from 0); ``"center"``:
    the face nearest the centre; ``"all"``: a (faces × 128) array, one row per face, largest first (0 rows if none).
    ``backend``: "sface" (None, the default) or "dlib-resnet128"."""
    model = _backend(backend)
    if which != "all":
        return model.embed(image, which)
    import numpy as np

    faces = model.faces(image, "all")
    return np.stack([f.embedding for f in faces]) if faces else np.zeros((0, model.dim), np.float32)


def distance(known, candidate) -> Any:
    """Euclidean distance between embeddings: a float for one known embedding, an array for a list (or 2-D array)
    of them, as face_recognition's ``face_distance``."""
    import numpy as np

    from .faces.base import Backend  # the Euclidean distance of every backend: no model is loaded

    d = Backend.distance(np.asarray(known, np.float64), np.asarray(candidate, np.float64))
    return float(d) if np.ndim(d) == 0 else d


def compare(known, candidate, tolerance: float | None = None, backend: str | None = None) -> Any:
    """Same person? ``distance(known, candidate) ≤ tolerance`` (default: the threshold of ``backend``, the one the
    embeddings came from — sface 1.12 (the default), dlib-resnet128 0.53 — which `privface compare` and every
    protocol's default use, ``faces.thresholds``). A bool for one known embedding, a list of bools for a list of them
    (``compare_faces``)."""
    import numpy as np

    if tolerance is None:
        from .faces.registry import DEFAULT_BACKEND
        from .faces.thresholds import operating_point

        limit = operating_point(backend or DEFAULT_BACKEND).distance
    else:
        limit = tolerance
    d = distance(known, candidate)
    return bool(d <= limit) if np.ndim(d) == 0 else [bool(x) for x in np.asarray(d) <= limit]


def enrol(gallery_url: str, templates, scheme: str, *, backend: str | None = None, **options) -> Any:
    """Encrypt templates into a persisted gallery (resumable, block-atomic) and return its EnrolReport.

    templates: image files or folders (embedded with ``backend``, default sface; id = file stem), ``.npy`` files
    of embeddings of ``backend`` (ids ``<stem>.<row>``), or a dict {id: [photos]}: several photos per identity, fused
    into one template (the normalised mean of their unit embeddings; ``report.photos`` lists per identity the photos
    used and those refused — no face, two faces of about the same size, not an image).
    scheme: "hers", "idface-ckks", "idface-paillier" or "cryptomask".
    options: as ``privface gallery enrol`` (key_store_url, tau, beta, centring, lift, name, …), with its defaults:
    idface centred with the shipped mean and, for d = 128, lifted to D = 2048 (``lift=0``: no lift)."""
    from pathlib import Path

    from . import scale
    from .faces.registry import DEFAULT_BACKEND
    from .scale.gallery import deployment_defaults
    from .scale.sources import FusedImageSource

    backend = backend or DEFAULT_BACKEND  # recorded in the gallery: probes of another backend are refused
    if isinstance(templates, dict):
        source = FusedImageSource({str(i): [Path(p) for p in ([ps] if isinstance(ps, (str, Path)) else ps)]
                                   for i, ps in templates.items()}, _backend(backend))
    else:
        paths = [templates] if isinstance(templates, str) or hasattr(templates, "__fspath__") else list(templates)
        source = scale.open_source([str(p) for p in paths], lambda: _backend(backend))
    if scheme != "cryptomask":
        centring, lift = deployment_defaults(scheme, source.dim, options.pop("centring", None),
                                             options.pop("lift", None))
        options.update(centring=centring, lift=lift)
    report = scale.enrol(gallery_url, source, scheme, backend=backend, **options)
    report.photos = getattr(source, "report", None)
    return report


def identify(embedding, gallery_url: str, **options) -> dict:
    """One identification against a gallery made by ``enrol``: ``{"id": str or None, …timings}`` (a cryptomask
    gallery: ``{"match": bool, "id": None, …}``). options: key_store_url, ray, workers, name."""
    from . import scale

    return scale.identify(embedding, gallery_url, **options)
