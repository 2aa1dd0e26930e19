"""Every relative link of README.md and of the documentation pages (docs/**/*.md) names a file that exists and,
with a #fragment, a heading of that file (checked where the heading is written in the file; the generated
headings of docs pages are checked by `make docs`, whose strict build fails on a missing anchor)."""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The text without code fences and inline code, where a [x](y) is not a link."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """Python-Markdown's toc slugify (the anchors mkdocs writes) of a heading's text."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip()
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def anchors(path: Path) -> set[str]:
    heads = re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M), re.M)
    return {slug(h) for h in heads}


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_pages_have_links():
    assert len(links(ROOT / "README.md")) >= 20
    assert all(p.is_file() for p in PAGES) and len(PAGES) > 15


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
            continue
        if fragment and file.suffix == ".md":
            generated = "<!-- privface:" in file.read_text()
            if fragment not in anchors(file) and not generated:
                broken.append(f"{target}: no heading #{fragment} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
