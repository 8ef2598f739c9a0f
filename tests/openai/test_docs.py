"""The examples in the OpenAI layer's docstrings run."""

from __future__ import annotations

import importlib

import pytest

from ..support.build import docstring_examples

MODULES = [
    "chatparse.openai",
    "chatparse.openai._chat",
    "chatparse.openai._calls",
    "chatparse.openai._wire",
    "chatparse.openai._request",
    "chatparse.openai._responses",
    "chatparse.openai._auto",
]


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str) -> None:
    result = docstring_examples(importlib.import_module(module))
    assert result.failed == 0
