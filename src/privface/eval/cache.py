"""Embedding cache: SQLite, keyed by image-content hash + backend options hash.

It holds plaintext embeddings of *evaluation* images (public datasets) so that repeated evaluations
skip the face pipeline; it is never used by the protocols. The file is created 0600. Results,
including "no face found", are committed in small batches so a crash loses at most one batch.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import numpy as np

SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    image_sha256 TEXT NOT NULL,
    options_sha256 TEXT NOT NULL,
    detector TEXT NOT NULL,          -- 'hog' | 'cnn' | 'whole' | '' when no face was found
    vector BLOB,                     -- float32 little-endian, NULL when no face was found
    PRIMARY KEY (image_sha256, options_sha256)
);
CREATE TABLE IF NOT EXISTS options (options_sha256 TEXT PRIMARY KEY, json TEXT NOT NULL);
"""


def default_path() -> Path:
    base = os.environ.get("PRIVFACE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "privface")
    return Path(base) / "embeddings.sqlite"


def options_key(options: dict) -> str:
    return hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()


def file_key(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class EmbeddingCache:
    """get/put of (detector, embedding or None) per image hash for one backend configuration."""

    def __init__(self, options: dict, path: str | os.PathLike | None = None):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists()
        self.db = sqlite3.connect(self.path)
        if fresh:
            os.chmod(self.path, 0o600)
        self.db.executescript(SCHEMA)
        self.okey = options_key(options)
        self.db.execute("INSERT OR IGNORE INTO options VALUES (?, ?)", (self.okey, json.dumps(options, sort_keys=True)))
        self.db.commit()

    def get_many(self, keys: list[str]) -> dict[str, tuple[str, np.ndarray | None]]:
        out = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            q = ("SELECT image_sha256, detector, vector FROM embeddings WHERE options_sha256=? "
                 f"AND image_sha256 IN ({','.join('?' * len(chunk))})")
            for k, det, blob in self.db.execute(q, [self.okey, *chunk]):
                out[k] = (det, None if blob is None else np.frombuffer(blob, dtype="<f4").copy())
        return out

    def put_many(self, rows: list[tuple[str, str, np.ndarray | None]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)",
            [(k, self.okey, det, None if v is None else np.asarray(v, "<f4").tobytes()) for k, det, v in rows])
        self.db.commit()

    def close(self) -> None:
        self.db.close()
