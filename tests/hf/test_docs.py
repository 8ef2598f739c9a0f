"""The examples in chatparse.hf's docstrings run and stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "chatparse.hf",
    "chatparse.hf._tokenizer",
    "chatparse.hf._install",
    "chatparse.hf._history",
    "chatparse.hf._decode",
    "chatparse.hf._dataset",
]


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_every_public_name_has_a_docstring() -> None:
    hf = importlib.import_module("chatparse.hf")
    for name in hf.__all__:
        assert getattr(hf, name).__doc__, name
