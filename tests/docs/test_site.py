"""The built documentation site: every generated page is there and holds the data it is generated from, and no
page loads anything from another origin (no CDN fonts, icons or scripts: theme.font is off)."""
from __future__ import annotations

import re
from pathlib import Path

from privface.cli import build_parser
from privface.protocols import PROTOCOLS

# a resource the browser fetches by itself: src=, <link href=> (stylesheets, preconnects, icons), CSS url()/@import
FETCHED = re.compile(r"""(?:\bsrc\s*=\s*["']?|<link\b[^>]*\bhref\s*=\s*["']?|url\(\s*["']?|@import\s+["'])"""
                     r"""\s*(?:https?:)?//""", re.I)


def test_no_page_or_stylesheet_loads_from_another_origin(site: Path):
    files = [p for p in site.rglob("*") if p.suffix in (".html", ".css")]
    assert len(files) > 20
    offenders = {str(p.relative_to(site)): m.group(0) for p in files for m in [FETCHED.search(p.read_text())] if m}
    assert not offenders
    assert "fonts.googleapis" not in "".join(p.read_text() for p in files if p.suffix == ".html")


def test_generated_pages_follow_the_code(site: Path):
    concepts = (site / "concepts.html").read_text()
    for name in PROTOCOLS:  # the catalogue table links every protocol's page
        assert f'href="protocols/{name}.html"' in concepts
    cli = (site / "cli.html").read_text()
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for command in (a.dest for a in sub._choices_actions):  # each command once (enrol, not its alias enroll)
        assert f"privface {command}" in cli
    http = (site / "http-api.html").read_text()
    for path in ("/v1/im2020/auth/start", "/v1/gsm/match/compare", "/v1/kolberg/verify/challenge", "/v1/ident/identify",
                 "/v1/cryptomask/identify/reveal", "/healthz"):
        assert path in http
    assert "Im2020Client" in (site / "api.html").read_text()
    for page in ("index", "getting-started", "operations", "results", "lab-notes", "papers", "architecture",
                 "changelog", *(f"protocols/{n}" for n in PROTOCOLS)):
        assert (site / f"{page}.html").is_file(), page
    assert "seed 000" in (site / "papers.html").read_text()
