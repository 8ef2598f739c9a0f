"""The canitoolcall corpus through the SGLang plugin, driven as SGLang's server drives its parsers
(reasoning parser, then the tool-call parser on its normal text, `parse_stream_end` at the end),
next to SGLang's built-in parsers for the same family in the same run (driver: `replay.py`).

The plugin must score what the library scores (466 pass, 3 soft, 0 fail); the built-in parsers'
scores are printed for comparison, not asserted.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import engine_module

ENGINE = "sglang"
engine_module("sglang", "sglang.srt.function_call.function_call_parser")
pytest.importorskip("canitoolcall")

from canitoolcall.adapters import sglang as canitoolcall_sglang  # noqa: E402

from . import replay as R  # noqa: E402


@pytest.fixture(scope="module")
def run() -> R.CorpusRun:
    import chatparse.integrations.sglang as plugin

    plugin.register()

    def ours(su: R.Setup, out: R.CorpusRun) -> Any:
        streams = {s: R.sglang_stream(su, "chatparse", "chatparse", s) for s in R.STRATEGIES}
        return R.sglang_nonstream(su, "chatparse", "chatparse"), streams

    def builtin(su: R.Setup) -> Any:
        rule = canitoolcall_sglang.resolve_parsers(su.fixture.family, su.fixture.reference_model)
        if rule is None or rule.tool_call_parser is None:
            return None
        tool, reasoning = rule.tool_call_parser, rule.reasoning_parser
        streams = {s: R.sglang_stream(su, tool, reasoning, s) for s in R.STRATEGIES}
        return f"{tool}/{reasoning or '-'}", R.sglang_nonstream(su, tool, reasoning), streams

    return R.run_corpus(ours, builtin)


def test_plugin_scores_what_the_library_scores(run: R.CorpusRun, capsys: pytest.CaptureFixture[str]) -> None:
    R.assert_library_scores(run, "SGLang", capsys)
