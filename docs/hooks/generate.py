"""MkDocs hook: the generated parts of the documentation, rendered from the code at build time.

A page asks for generated text with an HTML comment marker on a line of its own:

    <!-- privface:protocol-table -->        "which protocol for which job", from ``privface.protocols.catalogue()``
    <!-- privface:threat-models -->         every protocol's declared threat model and leakage, one table
    <!-- privface:catalogue NAME -->        one protocol's declared threat model, leakage, levels and parameters
    <!-- privface:cli -->                   each command's help, walked from ``privface.cli.build_parser()``
    <!-- privface:http -->                  every role's endpoints, from the OpenAPI document ``create_app`` serves
    <!-- privface:http ROLE -->             the steps of one role (``im2020``, ``gsm-provider``, …)
    <!-- privface:import-contracts -->      the import contracts of ``[tool.importlinter]`` in pyproject.toml

Nothing here is written by hand about the data it renders: change the code and the next ``make docs`` says so.
An unknown marker is an error (``mkdocs build --strict`` fails).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import re
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

MARKER = re.compile(r"^<!-- privface:([a-z-]+)(?: ([A-Za-z0-9_-]+))? -->$", re.M)

# The protocol pages of the site, by catalogue name.
PAGES = {name: f"protocols/{name}.md" for name in ("im2020", "gsm", "kolberg", "hers", "idface", "cryptomask")}


def on_page_markdown(markdown: str, page, config, files) -> str:
    depth = page.file.src_uri.count("/")

    def render(m: re.Match) -> str:
        kind, arg = m.group(1), m.group(2)
        if kind == "protocol-table":
            return protocol_table("../" * depth)
        if kind == "threat-models":
            return threat_models("../" * depth)
        if kind == "catalogue":
            return catalogue_entry(arg)
        if kind == "cli":
            return cli_reference()
        if kind == "http":
            return http_reference(arg)
        if kind == "import-contracts":
            return import_contracts()
        raise ValueError(f"{page.file.src_uri}: unknown generated block privface:{kind}")

    return MARKER.sub(render, markdown)


# ---------------------------------------------------------------------------------------------- the catalogue

@functools.cache
def _catalogue() -> list[dict]:
    from privface.protocols import catalogue

    return catalogue()


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _seed(desc: dict) -> str:
    return desc["paper"].split(":", 1)[0]


def protocol_table(prefix: str) -> str:
    rows = ["| job | protocol | paper | parties | modes | default security |", "|---|---|---|---|---|---|"]
    for d in _catalogue():
        modes = "; ".join(f"{mode} ({re.split(r' [(]|;', m['status'])[0]})" for mode, m in d["modes"].items())
        bits = d.get("default_security_bits", "")
        rows.append(f"| {_cell(d['task'])} | [{d['name']}]({prefix}{PAGES[d['name']]}) "
                    f"| [seed {_seed(d)}]({prefix}papers.md#seed-{_seed(d)}) | {_cell(', '.join(d['parties']))} "
                    f"| {_cell(modes)} | {bits}-bit |")
    return "\n".join(rows) + "\n"


def _leakage(m: dict) -> str:
    leak = m.get("leakage", {})
    if not isinstance(leak, dict):
        return str(leak)
    return "; ".join(f"{who}: {', '.join(map(str, x)) if isinstance(x, (list, tuple)) else x}"
                     for who, x in leak.items())


def threat_models(prefix: str) -> str:
    rows = ["| protocol | party | trusted how | mode: who learns what |", "|---|---|---|---|"]
    for d in _catalogue():
        threat = d["threat_model"] if isinstance(d["threat_model"], dict) else {"all": d["threat_model"]}
        modes = "<br>".join(f"**{mode}**: {_cell(_leakage(m))}" for mode, m in d["modes"].items())
        for i, (who, what) in enumerate(threat.items()):
            name = f"[{d['name']}]({prefix}{PAGES[d['name']]})" if i == 0 else ""
            rows.append(f"| {name} | {_cell(who).replace('_', ' ')} | {_cell(what)} | {modes if i == 0 else ''} |")
    return "\n".join(rows) + "\n"


def _value(v) -> str:
    if isinstance(v, (dict, list, tuple)):
        return f"`{_cell(json.dumps(v, ensure_ascii=False, default=str))}`"
    return _cell(v)


def catalogue_entry(name: str | None) -> str:
    d = next((d for d in _catalogue() if d["name"] == name), None)
    if d is None:
        raise ValueError(f"privface:catalogue: no protocol {name!r} in the catalogue")
    out = [f"*Generated from `privface protocols` ({d['name']}'s `DESCRIPTION`).*", "",
           f"- **Paper:** seed {_cell(d['paper'])}", f"- **Task:** {_cell(d['task'])}",
           f"- **Parties:** {_cell(', '.join(d['parties']))}", "", "**Threat model**", "",
           "| party | assumption |", "|---|---|"]
    threat = d["threat_model"]
    if isinstance(threat, dict):
        out += [f"| {_cell(who).replace('_', ' ')} | {_cell(what)} |" for who, what in threat.items()]
    else:
        out.append(f"| all | {_cell(threat)} |")
    out += ["", "**Modes and leakage** (who learns what)", "", "| mode | status | leakage |", "|---|---|---|"]
    for mode, m in d["modes"].items():
        out.append(f"| {_cell(mode)} | {_cell(m['status'])} | {_cell(_leakage(m))} |")
    out += ["", "**Security levels**", "", "| level |", "|---|"]
    out += [f"| {_cell(', '.join(f'{k} = {v}' for k, v in lvl.items()))} |" for lvl in d["security_levels"]]
    out += ["", "**Parameters**", "", "| parameter | value |", "|---|---|"]
    out += [f"| `{k}` | {_value(v)} |" for k, v in d["parameters"].items()]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------- the CLI

def _walk(parser: argparse.ArgumentParser, path: list[str]):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] != name:  # an alias (enroll → enrol): listed with its command
                    continue
                sub._privface_help = helps.get(name)
                yield from _walk(sub, [*path, name])


@functools.cache
def cli_reference() -> str:
    from privface.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"  # argparse wraps help to $COLUMNS: the same page everywhere, fits the content column
    try:
        parser = build_parser()
        out = []
        for path, p in _walk(parser, []):
            title = " ".join(["privface", *path])
            out += [f"{'#' * min(2 + max(len(path) - 1, 0), 4)} `{title}`", ""]
            summary = getattr(p, "_privface_help", None)
            if summary:
                out += [_cell(summary[0].upper() + summary[1:]) + ".", ""]
            out += ["```text", p.format_help().rstrip(), "```", ""]
        return "\n".join(out)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


# ---------------------------------------------------------------------------------------------- the HTTP API

def _roles(tmp: Path, stack: contextlib.ExitStack) -> dict:
    """Every service role of service/registry.py, built in-process with toy key sizes (the steps, scopes and
    body caps do not depend on the key size, except where a cap follows it; the page says so)."""
    import numpy as np

    from privface.protocols.im2020 import Im2020Params
    from privface.scale import NpySource, enrol
    from privface.service.bindings.cryptomask import CryptoMaskService
    from privface.service.bindings.gsm import GsmService
    from privface.service.bindings.hers import IdentService
    from privface.service.bindings.im2020 import Im2020Service
    from privface.service.bindings.kolberg import KolbergService
    from privface.store.sqlite import SQLiteStore

    def store(name: str):
        return stack.enter_context(SQLiteStore(tmp / f"{name}.db"))

    rng = np.random.default_rng(0)
    roles = {"im2020": Im2020Service(store("im2020"), params=Im2020Params.toy()),
             "im2020 (secure comparison)": Im2020Service(store("im2020sc"),
                                                         params=Im2020Params.toy(mode="secure-comparison")),
             "gsm-provider": GsmService(store("gsmp"), role="provider", insecure_test_params=True),
             "gsm-terminal": GsmService(store("gsmt"), role="terminal", insecure_test_params=True,
                                        capture=lambda: None, m1_cache=0)}
    auth = KolbergService(store("kauth"), role="auth", scheme="ntru")
    roles["kolberg-auth"] = auth
    roles["kolberg-db"] = KolbergService(store("kdb"), role="db", scheme="ntru", auth=auth.party)
    for scheme, dim in (("hers", 32), ("cryptomask", 128)):
        x = rng.normal(size=(4, dim))
        np.save(tmp / f"{scheme}.npy", x / np.linalg.norm(x, axis=1, keepdims=True))
        enrol(f"sqlite:///{tmp / (scheme + '-gallery.db')}", NpySource([tmp / f"{scheme}.npy"]), scheme,
              key_store_url=f"sqlite:///{tmp / (scheme + '-key.db')}", tau=0.5, insecure_test_params=True)
    key = IdentService(store("hers-key"), role="key", insecure_test_params=True)
    roles["ident-key"] = key
    roles["ident-local"] = IdentService(store("ilocal"), role="local",
                                        gallery_url=f"sqlite:///{tmp / 'hers-gallery.db'}", key=key.party)
    roles["cryptomask-cs"] = CryptoMaskService(store("cm"), gallery_url=f"sqlite:///{tmp / 'cryptomask-gallery.db'}")
    return roles


@functools.cache
def _openapi() -> dict[str, tuple[dict, object]]:
    from privface.service.app import create_app
    from privface.service.auth import ApiKeys
    from privface.store.sqlite import SQLiteStore

    logging.getLogger("privface").setLevel(logging.ERROR)  # the toy-parameter warnings
    out = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        roles = _roles(Path(tmp), stack)
        for role, svc in roles.items():
            keys_store = stack.enter_context(SQLiteStore(Path(tmp) / f"keys-{len(out)}.db"))
            app = create_app(keys_store, [svc], keys=ApiKeys(keys_store))
            out[role] = (app.openapi(), svc)
    return out


def _scope(svc, step: str) -> str:
    scope = getattr(svc, "scopes", {}).get(step)
    if scope is None:
        return "none: refused (403)"
    return " or ".join(f"`{s}`" for s in ((scope,) if isinstance(scope, str) else scope))


def _role_steps(role: str, schema: dict, svc) -> list[str]:
    out = [f"### {role}", "", "| step | session | scope | body (max bytes) |", "|---|---|---|---|"]
    for path, item in schema["paths"].items():
        if not path.startswith(f"/v1/{svc.name}/"):
            continue
        op = item["post"]
        step = path.split("/", 3)[3]
        session = "none (starts a flow)" if not op.get("parameters") else "required: `X-Privface-Session`"
        cap = op["requestBody"]["content"]["application/octet-stream"]["schema"].get("maxLength", "")
        cap = f"{cap:,}".replace(",", " ") if isinstance(cap, int) else str(cap)
        name = f"`POST {path}`"
        target = step
        if op.get("deprecated"):
            target = getattr(svc, "step_aliases", {}).get(step, step)
            name += f" (deprecated: the old name of `{target}`)"
        out.append(f"| {name} | {session} | {_scope(svc, target)} | {cap} |")
    return out + [""]


def http_reference(role: str | None) -> str:
    docs = _openapi()
    if role is not None:
        hits = [r for r in docs if r == role or r.startswith((role + " ", role + "-"))]
        if not hits:
            raise ValueError(f"privface:http: no service role {role!r} (known: {', '.join(docs)})")
        out = ["*Generated from the service's OpenAPI document (`create_app`, API keys on).*", ""]
        for r in hits:
            out += _role_steps(r, *docs[r])[2:] if len(hits) == 1 else _role_steps(r, *docs[r])
        return "\n".join(out) + "\n"
    first_schema = next(iter(docs.values()))[0]
    out = [f"OpenAPI {first_schema['openapi']}. Every role serves these routes:", "",
           "| method and path | summary |", "|---|---|"]
    for path, item in first_schema["paths"].items():
        if path.startswith("/v1/") and not path.startswith("/v1/{"):
            continue
        for method, op in item.items():
            out.append(f"| `{method.upper()} {path}` | {_cell(op.get('summary', ''))} |")
    step_op = next(item["post"] for path, item in first_schema["paths"].items()
                   if path.startswith("/v1/") and not path.startswith("/v1/{"))
    out += ["", "## Responses of every step", "",
            "Errors are JSON `{\"error\": \"<message>\", \"type\": \"<kind>\"}`; the full table with the `type` "
            "values is under [Operations](operations.md#the-service).", "", "| status | meaning |", "|---|---|"]
    out += [f"| {code} | {_cell(r['description'])} |" for code, r in step_op["responses"].items()]
    sec = first_schema.get("components", {}).get("securitySchemes", {})
    if sec:
        out += ["", "Security schemes: " + "; ".join(f"`{k}`: {v.get('type')} {v.get('scheme', '')} "
                                                     f"{_cell(v.get('description', ''))}".rstrip()
                                                     for k, v in sec.items()) + "."]
    out += ["", "## Steps per role", "",
            "Request and response bodies are one wire-encoded message each (`application/octet-stream`, "
            "see [the wire format](architecture.md#the-wire-format)). Body caps are those of the toy key sizes "
            "the page is built with where a cap follows the key size (gsm, cryptomask); `privface serve` logs "
            "its own.", ""]
    for r, (schema, svc) in docs.items():
        out += _role_steps(r, schema, svc)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------- the import contracts

def import_contracts() -> str:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    out = [f"*Generated from `[tool.importlinter]` in pyproject.toml (root package `{config['root_package']}`; "
           "`make lint` runs `lint-imports`).*", ""]
    for c in config["contracts"]:
        out += [f"**{_cell(c['name'])}** (`{c['type']}`)", ""]
        for key in ("layers", "source_modules", "forbidden_modules", "ancestors", "containers"):
            if key in c:
                out.append(f"- {key.replace('_', ' ')}: " + ", ".join(f"`{m}`" for m in c[key]))
        out.append("")
    return "\n".join(out)
