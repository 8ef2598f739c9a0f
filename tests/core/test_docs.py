"""The examples in public docstrings run and stay true."""

from __future__ import annotations

import importlib

import pytest

from ..support.build import docstring_examples


@pytest.mark.parametrize(
    "module", ["chatparse", "chatparse._parser", "chatparse._template", "chatparse._lint"]
)
def test_docstring_examples(module: str) -> None:
    result = docstring_examples(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
