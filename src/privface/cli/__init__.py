"""privface command line: thin — parses, calls the library, prints (tables for people, --json for scripts)."""
from __future__ import annotations

import argparse
import os
import sys

from .. import __version__, heap
from ..errors import PrivfaceError
from . import bench, faces, gallery, identify, keys, report, serve, verification
from . import eval as eval_cmd

__all__ = ["build_parser", "main"]

# One entry per command group, each adding its subcommands; the order is the order of `privface --help`.
REGISTER = (
    faces.register,  # embed, compare
    eval_cmd.register,  # eval
    bench.register,  # bench
    report.register,  # report
    faces.register_tools,  # protocols, train-pca
    serve.register,  # serve
    keys.register,  # keys, certs
    verification.register,  # enroll, verify, revoke
    identify.register,  # identify
    gallery.register,  # gallery enrol
    keys.register_rotate_keys,  # rotate-keys
    faces.register_demo,  # demo
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="privface", description=__doc__)
    p.add_argument("--version", action="version", version=f"privface {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for register in REGISTER:
        register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        heap.retain()  # every command: the service and the benchmarks repeat large allocations (heap.py)
        if argv[:1] == ["serve"]:  # serve options from --config FILE and $PRIVFACE_* (service/config.py)
            from ..service import config

            config.apply(_subparser(parser, "serve"), argv[1:], os.environ)
        a = parser.parse_args(argv)
        code = a.func(a)
        sys.stdout.flush()  # a reader that left early (`| head -1`) is met here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except PrivfaceError as e:
        print(f"privface: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("privface: interrupted", file=sys.stderr)
        return 130


def _reader_gone() -> int:
    """stdout's reader closed the pipe (``privface … | head -1``): stop quietly with the status a process killed
    by SIGPIPE has (128 + 13), as other command-line tools do; stdout goes to /dev/null so that the flush at
    interpreter exit cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]

