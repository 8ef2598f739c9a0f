"""The examples in public docstrings run and stay true."""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path
from typing import Any

import pytest


def _source_examples(mod: Any) -> doctest.TestResults:
    """Run the docstring examples of a compiled (mypyc) module: doctest cannot find the docstrings
    of native functions, so they are read from the module's source (installed beside it) and run
    in the compiled module's names."""
    src = Path(mod.__file__).with_name(mod.__name__.rsplit(".", 1)[-1] + ".py")
    tree = ast.parse(src.read_text(encoding="utf-8"))
    runner = doctest.DocTestRunner()
    parser = doctest.DocTestParser()
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and ">>>" in doc:
                name = getattr(node, "name", mod.__name__)
                runner.run(parser.get_doctest(doc, dict(vars(mod)), name, str(src), 0))
    return runner.summarize(verbose=False)


@pytest.mark.parametrize(
    "module", ["chatparse", "chatparse._parser", "chatparse._template", "chatparse._lint"]
)
def test_docstring_examples(module: str) -> None:
    mod = importlib.import_module(module)
    if mod.__file__ is not None and not mod.__file__.endswith(".py"):
        result = _source_examples(mod)
    else:
        result = doctest.testmod(mod)
    assert result.attempted > 0 and result.failed == 0
