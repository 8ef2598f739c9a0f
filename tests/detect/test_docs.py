"""The examples in the detect layer's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

from ..support.build import docstring_examples

MODULES = ["chatparse.detect", "chatparse.detect._auto"]


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str) -> None:
    result = docstring_examples(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_the_auto_mode_page_examples_run() -> None:
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "detect.md"
    result = doctest.testfile(str(page), module_relative=False)
    assert result.failed == 0 and result.attempted >= 4
