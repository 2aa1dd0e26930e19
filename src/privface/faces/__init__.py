"""Face pipeline: image → detected, aligned, embedded faces (see `base.Face`)."""
from .base import Backend, Face
from .image import load_rgb

__all__ = ["Backend", "Face", "load_rgb"]
