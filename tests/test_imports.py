"""Import rules that the import contracts (``make lint``: ``lint-imports``, [tool.importlinter] in pyproject.toml)
cannot state, because they are about names, not modules: no module imports an underscore name of another
top-level package of ``privface`` (a package's private names are its own business)."""
from __future__ import annotations

import ast
from pathlib import Path

import privface

SRC = Path(privface.__file__).parent


def _module(path: Path) -> tuple[str, bool]:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _private_imports():
    for path in sorted(SRC.rglob("*.py")):
        name, is_package = _module(path)
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield name, target, alias.name, node.lineno


KNOWN: set[tuple[str, str]] = set()  # (module, private name) pairs allowed to cross: none


def _top(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_private_name_crosses_a_package():
    crossing = [f"{who}:{line} imports {name} from {target}" for who, target, name, line in _private_imports()
                if target.startswith("privface") and _top(who) != _top(target) and (who, name) not in KNOWN]
    assert crossing == []


def test_the_scan_sees_private_names_inside_a_package():
    """The scan above is not vacuous: private names used inside their own package are found."""
    inside = {(who, name) for who, target, name, _ in _private_imports() if _top(who) == _top(target)}
    assert ("privface.templates.ternary", "_float_array") in inside
