"""Configuration of ``privface serve`` by file and environment (issue 8 §6).

Every ``serve`` option can come from a TOML file (``--config FILE``; keys are the option names, with ``-``
or ``_``) or from an environment variable ``PRIVFACE_<OPTION>`` (upper case, ``_`` for ``-``, e.g.
``PRIVFACE_RATE_LIMIT=50``; ``--protocol`` takes a comma-separated list; flags take 1/0, true/false).
Precedence: command line, then environment, then file, then the built-in default. ``--no-auth``,
``--insecure-test-params`` and ``--allow-variant`` (gsm Π1 trusts the device) weaken security and are taken
from the command line only. Values are checked as the command line checks them (types, choices); an unknown
key in the file is an error.
"""
from __future__ import annotations

import argparse
import tomllib
from collections.abc import Mapping, Sequence

from ..errors import PrivfaceError

ENV_PREFIX = "PRIVFACE_"
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


COMMAND_LINE_ONLY = ("help", "config", "no_auth", "insecure_test_params", "allow_variant")
"""Switches that weaken security are never taken from a file or the environment."""


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest not in COMMAND_LINE_ONLY}


def _convert(action: argparse.Action, value, where: str):
    """A file or environment value checked and converted like the command line would."""
    flag = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
    if flag:
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            value = value.strip().lower() in _TRUE
        if not isinstance(value, bool):
            raise PrivfaceError(f"{where}: expected true or false")
        return value
    if isinstance(action, argparse._AppendAction):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise PrivfaceError(f"{where}: expected a list (a comma-separated string in the environment)")
        return [_convert_one(action, str(v).strip(), where) for v in items]
    return _convert_one(action, value, where)


def _convert_one(action: argparse.Action, value, where: str):
    if isinstance(value, (dict, list)):
        raise PrivfaceError(f"{where}: expected a single value")
    try:
        value = action.type(value) if action.type is not None else str(value)
    except (TypeError, ValueError):
        raise PrivfaceError(f"{where}: {value!r} is not a valid {getattr(action.type, '__name__', 'value')}") from None
    if action.choices is not None and value not in action.choices:
        raise PrivfaceError(f"{where}: must be one of {', '.join(map(str, action.choices))}, got {value!r}")
    return value


def load_toml(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise PrivfaceError(f"cannot read --config {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise PrivfaceError(f"--config {path} is not valid TOML: {e}") from None


def apply(parser: argparse.ArgumentParser, argv: Sequence[str], environ: Mapping[str, str]) -> None:
    """Set ``parser``'s defaults from the file named by ``--config`` in ``argv`` and from ``environ``, so
    that explicit command-line options still win."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    path = pre.parse_known_args(list(argv))[0].config or environ.get(ENV_PREFIX + "CONFIG")
    actions, values = _options(parser), {}
    for key, value in (load_toml(path) if path else {}).items():
        dest = key.replace("-", "_")
        if dest not in actions:
            raise PrivfaceError(f"--config {path}: unknown option {key!r} (known: "
                                f"{', '.join(sorted(d.replace('_', '-') for d in actions))})")
        values[dest] = _convert(actions[dest], value, f"--config {path}: {key}")
    for dest, action in actions.items():
        name = ENV_PREFIX + dest.upper()
        if name in environ:
            values[dest] = _convert(action, environ[name], name)
    for dest in values:
        actions[dest].required = False  # given by the file or the environment
    parser.set_defaults(**values)


__all__ = ["apply", "load_toml", "ENV_PREFIX"]
