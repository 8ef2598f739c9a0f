"""The layering of ARCHITECTURE.md, checked on every import in the package (lazy ones too).

Each layer imports only the layers below it, never sideways or up:

    cli
    server, runtime, integrations     entry points
    hf, constraints                   integrations with other libraries
    openai                            wire formats
    detect, catalog                   what to parse with
    core                              how to parse (top-level modules of chatparse)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "chatparse"

RANK = {
    "core": 0,
    "catalog": 1,
    "detect": 1,
    "openai": 2,
    "hf": 3,
    "constraints": 3,
    "server": 4,
    "runtime": 4,
    "integrations": 4,
    "cli": 5,
}


def _layer(parts: tuple[str, ...]) -> str:
    """The layer of a module given as its path parts below `chatparse`."""
    if not parts:
        return "core"
    head = parts[0].removesuffix(".py")
    if head in ("__main__", "cli"):
        return "cli"
    return head if head in RANK else "core"


def _imports(source: str, rel: tuple[str, ...]) -> list[tuple[int, tuple[str, ...]]]:
    """(line, module path below `chatparse`) of every chatparse import in the source of the module
    at `rel` (its path parts below `chatparse`, without the suffix)."""
    package = rel[:-1]
    out: list[tuple[int, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = tuple(alias.name.split("."))
                if parts[0] == "chatparse":
                    out.append((node.lineno, parts[1:]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                mod = tuple(node.module.split(".")) if node.module else ()
                target = base + mod
            elif node.module and node.module.split(".")[0] == "chatparse":
                target = tuple(node.module.split(".")[1:])
            else:
                continue
            if target:
                out.append((node.lineno, target))
            else:  # from chatparse import x / from .. import x: each name may be a layer
                out.extend((node.lineno, (alias.name,)) for alias in node.names)
    return out


FILES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_is_found() -> None:
    assert len(FILES) > 50
    assert {_layer(f.relative_to(PACKAGE).parts) for f in FILES} == set(RANK)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_only(path: Path) -> None:
    rel = path.relative_to(PACKAGE).with_suffix("").parts
    assert not _violations(path.read_text(encoding="utf-8"), rel)


def _violations(source: str, rel: tuple[str, ...]) -> list[str]:
    own = _layer(rel)
    bad = []
    for line, target in _imports(source, rel):
        other = _layer(target)
        if other != own and RANK[other] >= RANK[own]:
            bad.append(f"line {line}: {own} imports {'.'.join(('chatparse', *target))} ({other})")
    return bad


def test_the_checker_sees_upward_and_sideways_imports() -> None:
    """A lazy shim inside a function, an absolute import and `from .. import` are all seen."""
    lazy = "def f():\n    from ..openai import _auto\n    return _auto\n"
    assert _violations(lazy, ("detect", "__init__")) == ["line 2: detect imports chatparse.openai (openai)"]
    assert _violations("import chatparse.server._app\n", ("runtime", "_x")) == [
        "line 1: runtime imports chatparse.server._app (server)"
    ]
    assert _violations("from .. import catalog\n", ("detect", "_union")) == [
        "line 1: detect imports chatparse.catalog (catalog)"
    ]
    assert _violations("from .. import _parser\nfrom ._x import y\n", ("detect", "_union")) == []
    assert _violations("from chatparse.openai import ChatParser\n", ("cli",)) == []
