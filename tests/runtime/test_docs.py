"""The README's "Agent turns" example and the docstring examples of chatparse.runtime run and stay true."""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_readme_agent_turns_example_runs_and_prints_what_it_says() -> None:
    section = _section("Agent turns")
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    code = next(body for lang, body in blocks if lang == "python")
    expected = next(body for lang, body in blocks if lang == "text")
    assert len(code.strip().splitlines()) <= 20
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md (Agent turns)", "exec"), {"__name__": "readme_example"})
    assert out.getvalue() == expected


@pytest.mark.parametrize(
    "module",
    [
        "chatparse.runtime",
        "chatparse.runtime._options",
        "chatparse.runtime._hooks",
        "chatparse.runtime._tools",
        "chatparse.runtime._turn",
        "chatparse.runtime._base",
        "chatparse.runtime._replay",
    ],
)
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
