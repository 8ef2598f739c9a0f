"""Engine tests skip cleanly where the engine is not installed, and must not skip where it is required.

`.ci/steps/vllm.sh` sets `CHATPARSE_REQUIRE_VLLM=1`, `.ci/steps/sglang.sh` sets
`CHATPARSE_REQUIRE_SGLANG=1`: in those runs a skipped test of that engine is reported as a failure,
except a counting test that skips on the compiled build (`tests.support.build.pure_only`: the engine
steps run the same tests on both builds, and those run on the pure one).
A test module names its engine with a module-level `ENGINE = "vllm"` (or `"sglang"`).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest

from ..support.build import PURE_ONLY_REASON

# vLLM picks its platform once, at the first use of `vllm.platforms.current_platform`: the wheel is a
# CUDA build and the machine has no GPU, so the CPU platform is named before any vLLM import (the
# serving test builds a `VllmConfig`, which needs a device). Nothing comes from the hub.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

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
    expected_failure = hasattr(report, "wasxfail")  # an xfail is reported as skipped: not a skip
    pure_only = PURE_ONLY_REASON in str(report.longrepr)
    if report.skipped and not expected_failure and not pure_only and engine in REQUIRE and required(engine):
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE[engine]}=1: this {engine} test must not skip ({report.longrepr})"
