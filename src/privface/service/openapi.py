"""``/openapi.json`` with one operation per protocol step (issue 8 §3).

The service routes every step through ``POST /v1/{protocol}/{step}``; described that way, a client or an API
fuzzer (schemathesis) only learns that some string pair is accepted and spends its requests on 404s. This
adds each mounted step as its own path: its octet-stream body with the step's size cap, whether it continues
a flow (``X-Privface-Session`` required) and the error model of app.py. The generic route stays described
(it is the one that serves them all).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from fastapi import FastAPI

from .base import ProtocolService
from .sessions import SESSION_HEADER

OCTETS = "application/octet-stream"
ERRORS = {400: "the message failed validation", 401: "no or unknown API key", 403: "the key lacks the step's scope",
          404: "subject not enrolled", 409: "session missing, unknown, expired or out of order, "
               "or an enrolment of an already-enrolled subject",
          413: "body over the step's limit", 415: "body not application/octet-stream",
          429: "rate limit, this caller's share of sessions, or a lock-out after failed attempts (Retry-After)",
          503: "store unavailable or too many open sessions"}


def _operation(svc: ProtocolService, step: str, cap: int, template: dict) -> dict:
    session = {"name": SESSION_HEADER, "in": "header", "required": True,
               "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
               "description": "the id the previous step returned"}
    error = template["responses"]["400"]["content"]
    op = {"summary": f"{svc.name} {step}", "operationId": _op_id(svc, step),
          "tags": [svc.name], "parameters": [] if step in svc.first_steps else [session],
          "requestBody": {"required": True, "content": {OCTETS: {"schema": {
              "type": "string", "format": "binary", "maxLength": cap}}},
              "description": "one wire-encoded message (wire/schema.json)"},
          "responses": {"200": {"description": f"the response message; header {SESSION_HEADER} when the flow continues",
                                "content": {OCTETS: {"schema": {"type": "string", "format": "binary"}}}},
                        **{str(c): {"description": d, "content": error} for c, d in ERRORS.items()}}}
    if "security" in template:
        op["security"] = template["security"]
    follows = getattr(svc, "next_steps", None)  # step → the steps that take its session, where a service says
    then = ([t for t in follows.get(step, ()) if t in svc.steps] if follows is not None
            else [t for t in svc.steps if t not in svc.first_steps])
    if then:  # OpenAPI links: a continuation step takes the session id this answer returns (stateful fuzzing)
        op["responses"]["200"]["links"] = {_op_id(svc, t): {
            "operationId": _op_id(svc, t),
            "parameters": {f"header.{SESSION_HEADER}": f"$response.header.{SESSION_HEADER}"}}
            for t in then}
    return op


def _op_id(svc: ProtocolService, step: str) -> str:
    return f"{svc.name}_{step.replace('/', '_').replace('-', '_')}"


def describe_steps(app: FastAPI, services: Mapping[str, ProtocolService],
                   limit: Callable[[ProtocolService, str], int]) -> None:
    """Add to ``app``'s OpenAPI schema one operation per mounted step, next to the generic step route
    (``limit(svc, step)``: the step's body cap). Call after any other ``app.openapi`` wrapper."""
    make = app.openapi
    done = []

    def openapi() -> dict:
        schema = make()
        if not done:
            paths = schema["paths"]
            generic = next(p for p in list(paths) if p.startswith("/v1/{protocol}"))
            template = paths[generic]["post"]
            for svc in services.values():
                for step in svc.steps:
                    paths[f"/v1/{svc.name}/{step}"] = {"post": _operation(svc, step, limit(svc, step), template)}
                for old, step in getattr(svc, "step_aliases", {}).items():
                    operation = _operation(svc, step, limit(svc, step), template)
                    operation.update(deprecated=True, description=f"the old name of {svc.name}/{step}: the same step",
                                     operationId=_op_id(svc, old))
                    paths[f"/v1/{svc.name}/{old}"] = {"post": operation}
            done.append(True)
        return schema

    app.openapi = openapi


__all__ = ["describe_steps"]
