"""Engine tests skip cleanly where the engine is not installed, and must not skip where it is required.

`.ci/steps/vllm.sh` sets `CHATPARSE_REQUIRE_VLLM=1`, `.ci/steps/sglang.sh` sets
`CHATPARSE_REQUIRE_SGLANG=1`: in those runs a skipped test of that engine is reported as a failure.
A test module names its engine with a module-level `ENGINE = "vllm"` (or `"sglang"`).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest

REQUIRE = {"vllm": "CHATPARSE_REQUIRE_VLLM", "sglang": "CHATPARSE_REQUIRE_SGLANG"}


def required(engine: str) -> bool:
    return os.environ.get(REQUIRE[engine], "") not in ("", "0")


def engine_module(engine: str, module: str) -> Any:
    """Import `module` of `engine`, or skip the calling test module (fail where it is required)."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or an engine failing at import on this machine
        if required(engine):
            raise RuntimeError(f"{REQUIRE[engine]}=1 but {module} cannot be imported: {e}") from e
        pytest.skip(f"{engine} is not installed here ({type(e).__name__}: {e})", allow_module_level=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    engine = getattr(getattr(item, "module", None), "ENGINE", None)
    if report.skipped and engine in REQUIRE and required(engine):
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE[engine]}=1: this {engine} test must not skip ({report.longrepr})"
