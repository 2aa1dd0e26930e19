"""Face pipeline: image → detected, aligned, embedded faces (see `base.Face`)."""
from .base import Backend, Face
from .image import load_rgb
