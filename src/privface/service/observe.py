"""Operations (issue 8 §6): structured JSON logs, the audit trail and Prometheus metrics of the service.

Audit records (logger ``privface.audit``, one per ``/v1`` call, kept at every log level) hold the time, the
party (API key id and name, client address), the protocol and step, the subject ID when the step names one,
the decision and the HTTP status — never a body, template, key, ciphertext or score.
"""
from __future__ import annotations

import json
import logging
import os
import re
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

AUDIT_LOGGER = "privface.audit"
_audit_logger = logging.getLogger(AUDIT_LOGGER)
AUDIT_FIELDS = ("party", "party_name", "client", "protocol", "step", "route", "subject", "decision", "status", "error",
                "ms")
METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (UTC, ISO 8601), level, logger, msg, and a record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
               "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:  # type only: a traceback's locals could hold message bytes
            out["exc_type"] = record.exc_info[0].__name__ if record.exc_info[0] else None
        return json.dumps(out, default=str, ensure_ascii=False)


_PLAIN = re.compile(r"[A-Za-z0-9._@+:/-]*")
_NAME = re.compile(r"[a-z0-9_/-]{1,64}")


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ud800-\udfff"
                     "\ufeff\ufff9-\ufffb]")
"""What a text log line never prints as is: C0 and C1 control characters (terminal escapes), line and paragraph
separators, zero-width and bidirectional formatting characters (which could disguise a line), lone surrogates."""


def _escaped(text: str) -> str:
    """``text`` as the inside of a JSON string that keeps every other character as it is (``—``, ``τ``, ``é``),
    not ``\\u2014``: quotes, backslashes and the ``_UNSAFE`` characters escaped."""
    inner = json.dumps(text, ensure_ascii=False)[1:-1]
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", inner)


def _text_value(value) -> str:
    """A field value for a text log line: plain tokens as they are, anything else (spaces, ``=``, quotes,
    control characters) as a JSON string, so a value can never end the line or forge another field."""
    text = str(value)
    return text if _PLAIN.fullmatch(text) else f'"{_escaped(text)}"'


class TextFormatter(logging.Formatter):
    """``time level logger: msg key=value …`` for people; the message has its control characters escaped
    and field values are quoted unless plain (``_text_value``)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None) or {}
        tail = "".join(f" {k}={_text_value(v)}" for k, v in fields.items() if v is not None)
        msg = _escaped(record.getMessage())  # one line: \n, \r, \t and control characters escaped
        return f"{self.formatTime(record)} {record.levelname.lower()} {record.name}: {msg}{tail}"


class AuditFileHandler(logging.FileHandler):
    """Appends each audit record as one line to ``path``, flushed after every record (``StreamHandler.emit``);
    a new file is created mode 0600 (an existing file keeps its mode)."""

    def __init__(self, path: str) -> None:
        super().__init__(path, mode="a", encoding="utf-8")

    def _open(self):
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding)


def log_config(level: str = "info", fmt: str = "json", audit_log: str | None = None) -> dict:
    """A ``logging.config.dictConfig`` for ``privface serve``: privface's and uvicorn's loggers on stderr in
    ``fmt`` (json or text); ``privface.serve`` (start and stop) at info whatever ``level``. The audit trail
    (``privface.audit``) has a handler and level of its own, so ``level`` never drops it: info on stderr next
    to the log, or JSON lines appended to the file ``audit_log``. uvicorn's access log stays off: the audit
    trail records every step."""
    formatter = {"()": f"{__name__}.{'JsonFormatter' if fmt == 'json' else 'TextFormatter'}"}
    handler = {"class": "logging.StreamHandler", "formatter": "privface", "stream": "ext://sys.stderr"}
    audit_handler = ({"()": f"{__name__}.AuditFileHandler", "path": audit_log, "formatter": "json"}
                     if audit_log else handler)
    levels = {name: level.upper() for name in ("privface", "uvicorn", "uvicorn.error", "uvicorn.access")}
    levels["privface.serve"] = "INFO"
    loggers = {name: {"handlers": ["stderr"], "level": lvl, "propagate": False} for name, lvl in levels.items()}
    loggers[AUDIT_LOGGER] = {"handlers": ["audit"], "level": "INFO", "propagate": False}
    return {"version": 1, "disable_existing_loggers": False,
            "formatters": {"privface": formatter, "json": {"()": f"{__name__}.JsonFormatter"}},
            "handlers": {"stderr": handler, "audit": audit_handler}, "loggers": loggers}


def audit(**fields) -> None:
    """One audit record (AUDIT_FIELDS); values are short identifiers, never message content."""
    protocol, step = (v if isinstance(v, str) and _NAME.fullmatch(v) else "?"
                      for v in (fields.get("protocol"), fields.get("step")))  # names from the URL: only plain ones
    _audit_logger.info("%s/%s %s", protocol, step, fields.get("decision"),
                   extra={"fields": {"event": "audit", **{k: fields.get(k) for k in AUDIT_FIELDS}}})


class Metrics:
    """The app's Prometheus metrics in a registry of its own (several apps may live in one process)."""

    def __init__(self, sessions) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("privface_requests", "Protocol step calls by outcome",
                                ["protocol", "step", "status"], registry=r)
        self.latency = Histogram("privface_request_seconds", "Protocol step latency (whole request)",
                                 ["protocol", "step"], registry=r,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.attempts = Counter("privface_attempts", "Decided verification attempts", ["protocol", "result"],
                                registry=r)
        self.lockouts = Counter("privface_lockout_refusals", "Attempts refused: subject locked out",
                                ["protocol"], registry=r)
        self.rate_limited = Counter("privface_rate_limited", "Calls refused by the per-client rate limit",
                                    registry=r)
        Gauge("privface_sessions_open", "Open multi-round sessions", registry=r).set_function(lambda: len(sessions))

    def render(self) -> bytes:
        return generate_latest(self.registry)


__all__ = ["JsonFormatter", "TextFormatter", "AuditFileHandler", "log_config", "audit", "Metrics",
           "METRICS_CONTENT_TYPE", "AUDIT_LOGGER"]
