"""scale — 1:N identification over persisted encrypted galleries, in one process or sharded on Ray.

``gallery``: resumable, block-atomic enrolment into a gallery store (S_local) and a separate key store (S_key).
``sharded``: ``identify`` (one call: template → id or None, with timings) and ``RayLocalServer``, which shards
the gallery's blocks over Ray actors that each load their blocks once and run IP_DB; sk stays in the driver.
"""
from .gallery import (
                      SCHEMES,
                      EnrolReport,
                      Gallery,
                      GalleryError,
                      ImageSource,
                      NpySource,
                      Source,
                      default_key_store,
                      enrol,
                      gallery_ids,
                      key_server,
                      open_source,
)
from .sharded import RayLocalServer, identify

__all__ = ["SCHEMES", "EnrolReport", "Gallery", "GalleryError", "ImageSource", "NpySource", "RayLocalServer",
           "Source", "default_key_store", "enrol", "gallery_ids", "identify", "key_server", "open_source"]
