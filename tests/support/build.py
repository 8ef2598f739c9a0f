"""Which build of chatparse the tests run on: the pure-Python default, or the opt-in compiled one
(`HATCH_BUILD_HOOK_ENABLE_MYPYC=1 pip install .`, which compiles the core modules with mypyc).

Operation-counting tests count calls by patching module functions and class methods. Inside
compiled modules calls are native (C) calls that never look the patched name up, and compiled
classes refuse new attributes, so those tests cannot count there: they skip under the compiled
build with `pure_only` and keep running in the pure build (CI's main step). Every other test runs
in both builds.
"""

from __future__ import annotations

import pytest

from chatparse import _scan

#: Whether the core modules are mypyc-compiled extension modules.
COMPILED: bool = not _scan.__file__.endswith(".py")

#: Marks a test that counts operations by patching chatparse internals (see the module docstring).
pure_only = pytest.mark.skipif(
    COMPILED,
    reason="counts operations by patching chatparse internals, which compiled (mypyc) code calls "
    "natively; runs in the pure-Python build",
)
