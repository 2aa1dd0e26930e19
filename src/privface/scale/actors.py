"""Ray for the sharded galleries: connect (or start a local Ray), and one actor per contiguous range of blocks."""
from __future__ import annotations

import os

import numpy as np

from ..errors import PrivfaceError
from .layout import GalleryError


def _ray():
    try:
        import ray
    except ImportError:
        raise PrivfaceError("--ray needs Ray: pip install 'privface[ray]'") from None
    return ray


def init_ray(address: str = "auto", num_cpus: int | None = None):
    """Connect to Ray unless already connected: ``auto`` = a local Ray (or $RAY_ADDRESS), else a cluster address.

    A local Ray binds 127.0.0.1 only (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, unless set otherwise; read when Ray
    is first imported) and starts its workers at niceness 0 (Ray's default 15 starves the shards on a busy
    machine); start a cluster with ``RAY_worker_niceness=0`` for the same effect.
    """
    if address == "auto" and not os.environ.get("RAY_ADDRESS"):  # a local Ray: its ports on 127.0.0.1 only
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = _ray()
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "log_to_driver": False}
        if address == "auto" and os.environ.get("RAY_ADDRESS"):
            ray.init(**kwargs)
        elif address == "auto":  # Ray runs workers at nice 15; here they do the work, so at the driver's priority.
            # "local": always a Ray of its own — Ray's own auto-detection would join any cluster another process
            # started on this machine (its /tmp/ray/ray_current_cluster), with that cluster's CPUs and settings
            ray.init(address="local", num_cpus=num_cpus, _system_config={"worker_niceness": 0}, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    return ray


def start_shards(ray, cls, gallery, workers: int | None, **kwargs) -> list:
    """One ``cls(url, name, block range, **kwargs)`` actor per contiguous range of the gallery's blocks (``workers``
    ranges, default one per CPU), each loaded; a shard's load error (``ready()`` → (size, error)) is the
    GalleryError one process raises, after every actor is stopped."""
    if workers is None:
        workers = max(1, int(ray.available_resources().get("CPU", 1)))
    bounds = np.linspace(0, gallery.nblocks, max(1, min(workers, gallery.nblocks)) + 1).round().astype(int)
    actor = ray.remote(num_cpus=1)(cls)
    shards = [actor.remote(gallery.url, gallery.name, list(range(lo, hi)), **kwargs)
              for lo, hi in zip(bounds, bounds[1:])]
    errors = [e for _, e in ray.get([s.ready.remote() for s in shards]) if e is not None]
    if errors:
        for s in shards:
            ray.kill(s)
        raise GalleryError(errors[0])
    return shards
