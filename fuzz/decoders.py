"""Coverage-guided fuzzing of every wire decoder with atheris (libFuzzer over instrumented Python; issue 8 §3).

    python fuzz/decoders.py TARGET [libFuzzer options]     e.g. wire -max_total_time=30
    python fuzz/decoders.py --write-corpus                 refresh fuzz/corpus/ from a recorded run

Targets and their property (any other exception is a crash: atheris prints it, writes the input, exits 1):
  wire      ``wire.decode`` of any frame raises only ``WireError``; a frame it accepts re-encodes to the same
            bytes (the encoding is canonical: one message, one frame).
  blobs     the binary formats carried inside frames — OT request/response, garbled circuit, garbler message,
            evaluator result (``crypto/``), NTRU public key, SEAL public context, gsm zk ``NormResponse`` — raise
            only their documented error (``CryptoError``; ``ProtocolError`` for zk, ``WireError`` for a frame).
  services  every step of every role (``ProtocolService.handle``; continuation steps with a real session state
            from a recorded flow) raises only what app.py answers with a 4xx: ``MessageError``,
            ``NotEnrolledError``, ``SessionError``, ``AlreadyEnrolledError`` — so no decoder or party error
            becomes a 500.

The first input byte picks the decoder / (role, step). Corpus: the committed seeds in ``fuzz/corpus/TARGET``
(valid frames of every message type of a real run up to 40 kB, the bytes fields inside them, and mutated
ones) plus, for services, seeds recorded at start-up from a fresh run of every role (``roles.py``) — those
carry this run's keys, so mutations reach the parties behind the key checks. New inputs go to a temporary
directory, never the repo.
"""
from __future__ import annotations

import contextlib
import random
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
TARGETS = ("wire", "blobs", "services")
sys.path.insert(0, str(HERE))

with atheris.instrument_imports(include=["privface"]):
    # the roles' services and clients, imported here so that they are instrumented too
    import privface.protocols.kolberg.rotation
    import privface.service.bindings.cryptomask
    import privface.service.bindings.gsm
    import privface.service.bindings.hers
    import privface.service.bindings.im2020
    import privface.service.bindings.kolberg  # noqa: F401
    import roles as roles_module
    from privface.crypto import compare, garble, lattice, ntru, ot
    from privface.errors import CryptoError, ProtocolError
    from privface.protocols.gsm import zk
    from privface.service.base import AlreadyEnrolledError, MessageError, NotEnrolledError, SessionError
    from privface.wire import WireError, decode, encode

from mutate import mutate  # noqa: E402 (found through the sys.path entry above)

# ---------------------------------------------------------------- targets


def fuzz_wire(data: bytes) -> None:
    try:
        name, values = decode(data)
    except WireError:
        return
    if encode(name, values) != data:
        raise AssertionError(f"{name}: decoded frame does not re-encode to the same bytes")


BLOB_DECODERS = (
    ("ot.OTRequest", ot.OTRequest.from_bytes, CryptoError),
    ("ot.OTResponse", ot.OTResponse.from_bytes, CryptoError),
    ("garble.GarbledCircuit", garble.GarbledCircuit.from_bytes, CryptoError),
    ("compare.GarblerMessage", compare.GarblerMessage.from_bytes, CryptoError),
    ("compare.EvaluatorResult", compare.EvaluatorResult.from_bytes, CryptoError),
    ("ntru.NTRUPublicKey", ntru.NTRUPublicKey.from_bytes, CryptoError),
    ("lattice.LatticePublicContext", lattice.LatticePublicContext.from_bytes, CryptoError),
    ("zk.NormResponse", zk.NormResponse.from_bytes, (ProtocolError, WireError)),
)


def fuzz_blobs(data: bytes) -> None:
    if not data:
        return
    _, decoder, allowed = BLOB_DECODERS[data[0] % len(BLOB_DECODERS)]
    try:
        decoder(data[1:])
    except allowed:
        pass


SERVICE_ERRORS = (MessageError, NotEnrolledError, SessionError, AlreadyEnrolledError)


class Services:
    """(role, flow prefix, step) entries over the roles of roles.py; an input is selector byte + body."""

    def __init__(self, served) -> None:
        self.entries = []
        for role in served:
            for step in role.service.steps:
                prefix = next(([*f[:[s for s, _ in f].index(step)]] for f in role.flows
                               if step in [s for s, _ in f][1:]), [])
                self.entries.append((role, prefix, step))

    def __call__(self, data: bytes) -> None:
        if not data:
            return
        role, prefix, step = self.entries[data[0] % len(self.entries)]
        svc, state = role.service, None
        try:
            for name, body in prefix:  # the real earlier steps of a recorded flow: a live session state
                state = svc.handle(name, body, state).state
        except NotEnrolledError:  # an input revoked the subject of the recorded flow: enrol it again
            for name, body in role.flows[0]:
                svc.handle(name, body, None)
            return
        try:
            svc.handle(step, data[1:], state)
        except SERVICE_ERRORS:
            pass

    def seeds(self) -> list[bytes]:
        out = []
        for i, (role, _, step) in enumerate(self.entries):
            out += [bytes([i]) + b for b in role.seeds.get(step, [])[:3]]
        return out


# ---------------------------------------------------------------- corpus


def _frames(served) -> list[bytes]:
    """The shortest frame of each type sent or answered in the recorded run, frames nested in bytes fields
    (e.g. the gsm proofs inside an EnrolRequest) included."""
    frames, todo = {}, [b for role in served for b in [*(b for bs in role.seeds.values() for b in bs), *role.responses]]
    while todo:
        b = todo.pop()
        with contextlib.suppress(WireError):
            name, values = decode(b)
            frames.setdefault(name, []).append(b)
            todo += [v for v in values.values() if isinstance(v, bytes)]
    return [min(bs, key=len) for bs in frames.values()]


def _blobs(frames: list[bytes]) -> list[bytes]:
    """Every bytes field of every frame, once for each blob decoder."""
    found = set()
    for f in frames:
        name, values = decode(f)
        for v in values.values():
            for item in (v if isinstance(v, list) else [v]):
                if isinstance(item, bytes) and item:
                    found.add(item)
    return [bytes([i]) + b for b in sorted(found, key=len)[:40] for i in range(len(BLOB_DECODERS))]


def _mutants(seeds: list[bytes], count: int, rng: random.Random) -> list[bytes]:
    return [mutate(rng.choice(seeds), rng, seeds) for _ in range(count)]


def _write(directory: Path, items: list[bytes]) -> None:
    import hashlib
    directory.mkdir(parents=True, exist_ok=True)
    for b in items:
        (directory / hashlib.sha1(b).hexdigest()[:16]).write_bytes(b)


def write_corpus() -> None:
    """fuzz/corpus/{wire,blobs}: valid frames of each message type, the blobs inside them, and mutants."""
    rng = random.Random(8)
    with tempfile.TemporaryDirectory() as d, roles_module.roles(Path(d)) as served:
        frames = _frames(served)
        blobs = _blobs(frames)
    for target in ("wire", "blobs"):
        shutil.rmtree(CORPUS / target, ignore_errors=True)
    frames = [f for f in frames if len(f) <= 40_000]  # keeps the repo small; the others come at start-up
    small = [f for f in frames if len(f) <= 4096]
    _write(CORPUS / "wire", frames + _mutants(small, 30, rng))
    blobs = [b for b in blobs if len(b) <= 4096]
    _write(CORPUS / "blobs", blobs[:120] + _mutants(blobs, 30, rng))


# ---------------------------------------------------------------- main


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--write-corpus"]:
        write_corpus()
        return
    if len(argv) < 2 or argv[1] not in TARGETS:
        sys.exit(f"usage: {argv[0]} {{{'|'.join(TARGETS)}}} [libFuzzer options] | --write-corpus")
    target, options = argv[1], argv[2:]
    with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as stack:
        fresh = Path(work) / "corpus"
        fresh.mkdir()
        if target == "wire":
            test = fuzz_wire
        elif target == "blobs":
            test = fuzz_blobs
        else:
            served = stack.enter_context(roles_module.roles(Path(work)))
            test = Services(served)
            _write(fresh, test.seeds())
        dirs = [str(fresh)] + [str(CORPUS / target)] * (CORPUS / target).is_dir()
        atheris.Setup([argv[0], *options, *dirs], test)
        atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
