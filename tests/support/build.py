"""Which build of chatparse the tests run on: the pure-Python default, or the opt-in compiled one
(`HATCH_BUILD_HOOK_ENABLE_MYPYC=1 pip install .`, which compiles the core modules with mypyc).

Operation-counting tests count calls by patching module functions and class methods. Inside
compiled modules calls are native (C) calls that never look the patched name up, so those tests
cannot count there: they skip under the compiled
build (`pure_only` on a test, `skip_if_compiled()` in a counting harness: their bounds would hold
on counts that stay at zero) and keep running in the pure build (CI's main step). Every other test
runs in both builds.
"""

from __future__ import annotations

import ast
import doctest
from pathlib import Path
from typing import Any

import pytest

from chatparse import _scan

#: Whether the core modules are mypyc-compiled extension modules.
COMPILED: bool = not _scan.__file__.endswith(".py")

PURE_ONLY_REASON = (
    "counts operations by patching chatparse internals, which compiled (mypyc) code calls "
    "natively; runs in the pure-Python build"
)

#: Marks a test that counts operations by patching chatparse internals (see the module docstring).
pure_only = pytest.mark.skipif(COMPILED, reason=PURE_ONLY_REASON)


def skip_if_compiled() -> None:
    """`pure_only` for a counting harness: the test using it skips on the compiled build (there its
    counts would stay at or near zero, and bounds on them would hold whatever the code did)."""
    if COMPILED:
        pytest.skip(PURE_ONLY_REASON)


def docstring_examples(mod: Any) -> doctest.TestResults:
    """Run the docstring examples of module `mod` (`doctest.testmod`). For a compiled module, whose
    native functions doctest cannot find, they are read from the module's source (installed beside
    it) and run in the compiled module's names."""
    if mod.__file__ is None or mod.__file__.endswith(".py"):
        return doctest.testmod(mod)
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
