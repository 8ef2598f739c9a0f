"""The `chatparse.hf` tests: torch is optional here and required in CI's torch step.

`CHATPARSE_REQUIRE_TORCH=1` (set by `.ci/steps/torch.sh`) turns every skip for a missing torch
into a failure, so the generate()/pipeline tests cannot silently stop running there.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

#: verdicts of the differential comparisons against transformers, printed at the end of the session
STATS: Counter = Counter()


def require_torch():
    """`torch`, or a skip (a failure under CHATPARSE_REQUIRE_TORCH=1)."""
    if os.environ.get("CHATPARSE_REQUIRE_TORCH") == "1":
        import torch  # noqa: F401 - must be importable in the torch step

        return torch
    return pytest.importorskip("torch", reason="needs torch (CI runs these in .ci/steps/torch.sh)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (
        os.environ.get("CHATPARSE_REQUIRE_TORCH") == "1"
        and report.skipped
        and "torch" in str(report.longrepr)
    ):
        report.outcome = "failed"


@pytest.fixture(scope="session", autouse=True)
def _hf_summary(request):
    yield
    if not STATS:
        return
    parts = ", ".join(f"{k}: {v}" for k, v in sorted(STATS.items()))
    line = f"chatparse.hf differential vs transformers 5.24.0 tokenizer API: {parts}"
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if tr is None or capman is None:  # pragma: no cover
        print(line)
        return
    with capman.global_and_fixture_disabled():
        tr.ensure_newline()
        tr.write_line(line)
