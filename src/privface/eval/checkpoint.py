"""Resumable results of a long evaluation: an append-only JSON-lines file, created 0600.

Line 1 is the header ``{"checkpoint": "privface-eval", "version": 1, "settings": {…}}``; every further
line is one finished chunk ``{"pairs": [pair indices], "scores": [...] | null, "decisions": [...]}``,
written with flush + fsync before the next chunk starts. A kill can only tear the last line; reopening
drops a torn last line (rewriting the file by write + fsync + rename) and resumes after the good ones.
A file whose settings differ is refused (``CheckpointError``), never mixed in. It holds no keys: only
pair indices, squared distances of quantized evaluation templates and decisions.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import CheckpointError

MAGIC, VERSION = "privface-eval", 1


def _line(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode() + b"\n"


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class Checkpoint:
    """``done``: pair index → (score or None, decision) from earlier runs; ``append`` records a chunk."""

    def __init__(self, path: str | os.PathLike, settings: dict, pairs: int) -> None:
        self.path = Path(path)
        self.settings = json.loads(json.dumps(settings, sort_keys=True))
        self.pairs = pairs
        self.done: dict[int, tuple[float | None, bool]] = {}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        header = _line({"checkpoint": MAGIC, "version": VERSION, "settings": self.settings})
        if self.path.exists():
            good = self._read()
            if good != self.path.stat().st_size:
                _write_atomically(self.path, self.path.read_bytes()[:good])
        else:
            _write_atomically(self.path, header)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _read(self) -> int:
        """Load the done chunks; the byte length of the good prefix (everything but a torn last line)."""
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        complete = lines[:-1]  # the part after the last newline is torn (or empty)
        try:
            head = json.loads(complete[0]) if complete else None
        except ValueError:
            head = None
        if not isinstance(head, dict) or head.get("checkpoint") != MAGIC or head.get("version") != VERSION:
            raise CheckpointError(f"{self.path} is not a privface evaluation checkpoint; move it away or pass "
                                  "another --checkpoint")
        if head.get("settings") != self.settings:
            theirs = head.get("settings") or {}
            differ = sorted(k for k in set(theirs) | set(self.settings) if theirs.get(k) != self.settings.get(k))
            raise CheckpointError(f"checkpoint {self.path} was written with other settings ({', '.join(differ)}); "
                                  "delete it or pass another --checkpoint to start afresh")
        good = len(complete[0]) + 1
        for n, raw in enumerate(complete[1:], start=2):
            try:
                self._load_chunk(json.loads(raw))
            except (ValueError, TypeError, KeyError) as e:
                raise CheckpointError(f"checkpoint {self.path} line {n} is damaged ({e}); delete the file") from None
            good += len(raw) + 1
        return good

    def _load_chunk(self, chunk: dict) -> None:
        pairs, decisions, scores = chunk["pairs"], chunk["decisions"], chunk["scores"]
        if scores is None:
            scores = [None] * len(pairs)
        if not len(pairs) == len(decisions) == len(scores):
            raise ValueError("pairs, scores and decisions differ in length")
        for p, s, d in zip(pairs, scores, decisions):
            if not (type(p) is int and 0 <= p < self.pairs and type(d) is bool
                    and (s is None or type(s) in (int, float))):
                raise ValueError(f"bad entry for pair {p!r}")
            self.done[p] = (s, d)

    def append(self, pairs: list[int], scores: list | None, decisions: list[bool]) -> None:
        os.write(self._fd, _line({"pairs": [int(p) for p in pairs],
                                  "scores": None if scores is None else [int(s) for s in scores],
                                  "decisions": [bool(d) for d in decisions]}))
        os.fsync(self._fd)
        for k, p in enumerate(pairs):
            self.done[int(p)] = (None if scores is None else int(scores[k]), bool(decisions[k]))

    def close(self) -> None:
        os.close(self._fd)
