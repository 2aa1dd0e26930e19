"""schemathesis hooks (``SCHEMATHESIS_HOOKS=st_hooks``) that make its requests reach the decoders and the parties.

Random bytes stop at the wire magic, so ``map_body`` turns most generated bodies into a recorded valid message
of the same step (``roles.py``), mutated (byte flips, truncation, insertion, length-field smashing, splicing)
or — one case in eight — sent as is. ``before_call`` gives most continuation steps a live session by replaying
a recorded flow up to that step. ``after_call`` tallies every response status (the figures of ``api.py``).
Configuration: ``$PRIVFACE_FUZZ_ROLE``, a JSON file written by api.py. Needs only schemathesis and httpx.
"""
from __future__ import annotations

import hashlib
import json
import os
import random

import httpx
import schemathesis

from mutate import mutate

SESSION = "X-Privface-Session"
_CFG = json.load(open(os.environ["PRIVFACE_FUZZ_ROLE"]))
_SEEDS = {step: [bytes.fromhex(h) for h in hs] for step, hs in _CFG["seeds"].items()}
_ALL = [b for bs in _SEEDS.values() for b in bs]
_FLOWS = [[(step, bytes.fromhex(h)) for step, h in flow] for flow in _CFG["flows"]]
_PREFIX = f"/v1/{_CFG['protocol']}/"
_TALLY = {"bodies_mapped": 0, "requests": 0, "statuses": {}, "setup_requests": 0, "setup_statuses": {}}


def _step(ctx) -> str | None:
    path = getattr(getattr(ctx, "operation", None), "path", "") or ""
    return path[len(_PREFIX):] if path.startswith(_PREFIX) else None


def _rng(data) -> random.Random:
    return random.Random(hashlib.sha256(repr(data).encode()).digest())


@schemathesis.hook
def map_body(ctx, body):
    seeds = _SEEDS.get(_step(ctx) or "") or _ALL
    _TALLY["bodies_mapped"] += 1
    rng = _rng(body)
    roll = rng.random()
    if not seeds or roll < 0.125:
        return body
    seed = rng.choice(seeds)
    return seed if roll < 0.25 else mutate(seed, rng, _ALL)


def _live_session(step: str, auth: dict) -> str | None:
    """Replay the recorded flow that leads to ``step``; the session id its last step returned."""
    for flow in _FLOWS:
        names = [s for s, _ in flow]
        if step not in names[1:]:
            continue
        sid = None
        for name, body in flow[:names.index(step)]:
            headers = {"content-type": "application/octet-stream", **auth, **({SESSION: sid} if sid else {})}
            r = httpx.post(f"{_CFG['url']}{_PREFIX}{name}", content=body, headers=headers, timeout=60)
            _TALLY["setup_requests"] += 1
            _TALLY["setup_statuses"][str(r.status_code)] = _TALLY["setup_statuses"].get(str(r.status_code), 0) + 1
            if r.status_code == 404 and _FLOWS[0][0][0] != name:  # the subject was revoked by a fuzz case
                for first, first_body in _FLOWS[0]:
                    httpx.post(f"{_CFG['url']}{_PREFIX}{first}", content=first_body, headers=headers, timeout=60)
                return None
            sid = r.headers.get(SESSION)
            if r.status_code != 200 or sid is None:
                return None
        return sid
    return None


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    step = _step(ctx)
    if step is None or step in _CFG["first_steps"]:
        return
    if _rng((case.body, case.headers)).random() < 0.8:
        sid = _live_session(step, {"authorization": f"Bearer {_CFG['api_key']}"})
        if sid is not None:
            case.headers = {**(case.headers or {}), SESSION: sid}


@schemathesis.hook
def after_call(ctx, case, response):
    _TALLY["requests"] += 1
    code = str(response.status_code)
    _TALLY["statuses"][code] = _TALLY["statuses"].get(code, 0) + 1
    with open(_CFG["tally"], "w") as f:
        json.dump(_TALLY, f)
