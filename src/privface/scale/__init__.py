"""scale — 1:N identification over persisted encrypted galleries, in one process or sharded on Ray.

``schemes``: one adapter per gallery scheme (``GALLERY_SCHEMES``); ``layout``: the store keys and records every
gallery shares; ``sources``: where templates come from.
``gallery``: resumable, block-atomic enrolment into a gallery store (S_local) and a separate key store (S_key);
``cryptomask_gallery`` / ``cryptomask_identify``: seed 001's own layout and 1-bit answer.
``ident``: S_key and S_local of protocol ``ident`` over a persisted gallery (served by ``service.bindings.hers``).
``sharded``: ``identify`` (one call: template → id or None, with timings) and ``RayLocalServer``, which shards
the gallery's blocks over Ray actors that each load their blocks once and run IP_DB; sk stays in the driver.
"""
from .gallery import SCHEMES, EnrolReport, Gallery, enrol, gallery_ids, key_server
from .layout import GalleryError, default_key_store
from .schemes import GALLERY_SCHEMES, GalleryScheme
from .sharded import RayLocalServer, identify
from .sources import ImageSource, NpySource, Source, open_source

__all__ = ["GALLERY_SCHEMES", "SCHEMES", "EnrolReport", "Gallery", "GalleryError", "GalleryScheme", "ImageSource",
           "NpySource", "RayLocalServer", "Source", "default_key_store", "enrol", "gallery_ids", "identify",
           "key_server", "open_source"]
