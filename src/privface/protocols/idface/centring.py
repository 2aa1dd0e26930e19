"""Centring before T_α / T_β: x ↦ (x − μ) / ‖x − μ‖₂.

Seed 003 §4.1 assumes templates spread over the hypersphere S^{d−1}, so that the top-α components and their
signs differ between faces. dlib's ResNet-128 embeddings do not: they share a common offset μ (‖μ‖ ≈ 1.31
for embeddings of norm ≈ 1.5, measured on ORL), so the α largest |x_i| and their signs nearly coincide for
every face and ⟨T_α(x), T_β(y)⟩ hardly separates identities (LFW/ORL figures in docs/protocols/idface.md). Subtracting a
mean estimated from data disjoint from the gallery and the probes, then renormalising, restores the spread.

The mean is fixed before anything is encrypted (T_α runs inside ENC_DB), the same for enrolment and
queries, and travels in ``IDFaceParams.mean``. ``SHIPPED_MEANS`` holds one per face backend, computed from a
public dataset disjoint from the evaluation data (``centring_mean.json`` says which); ``mean_of(gallery)`` is
the alternative of estimating μ from the plaintext gallery at enrolment (S_local sees it then anyway), at
the price of storing an aggregate of the enrolled templates next to the encrypted gallery.
"""
from __future__ import annotations

import json
from functools import cache
from importlib import resources

import numpy as np

from ...errors import TemplateError

MEANS_FILE = "centring_mean.json"


def _rows(x, dim: int | None = None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[0] == 0 or (dim is not None and x.shape[1] != dim):
        raise TemplateError(f"expected templates of shape (count, {dim or 'd'}), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise TemplateError("templates have NaN or infinite coordinates")
    return x


def _unit(x: np.ndarray, what: str) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if np.any(norms <= 1e-12):
        raise TemplateError(f"{what} has no direction (zero vector)")
    return x / norms


def centre(x, mean) -> np.ndarray:
    """u = x/‖x‖, then (u − μ)/‖u − μ‖ per row (float64). μ is a mean of unit templates (``mean_of``)."""
    mu = _rows(mean)
    if mu.shape[0] != 1:
        raise TemplateError("the centring mean must be one vector")
    return _unit(_unit(_rows(x, mu.shape[1]), "a template") - mu, "a template minus the centring mean")


def mean_of(x) -> np.ndarray:
    """μ = mean of the unit-normalised rows of x: how shipped means are made, and the enrolment-time
    alternative (``x`` = the plaintext gallery)."""
    return _unit(_rows(x), "a template").mean(axis=0)


@cache
def _shipped() -> dict:
    return json.loads(resources.files(__package__).joinpath(MEANS_FILE).read_text())


def shipped_mean(backend: str) -> np.ndarray:
    """The packaged mean for a face backend (``centring_mean.json``: values and provenance)."""
    means = _shipped()["means"]
    if backend not in means:
        raise TemplateError(f"no shipped centring mean for backend {backend!r}; have {sorted(means)}")
    return np.array(means[backend]["mean"], dtype=np.float64)


def shipped_provenance(backend: str) -> dict:
    """Where the shipped mean of ``backend`` comes from (dataset, images, backend options)."""
    shipped_mean(backend)
    return {k: v for k, v in _shipped()["means"][backend].items() if k != "mean"}
