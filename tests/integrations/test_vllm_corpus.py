"""The canitoolcall corpus through the vLLM plugin, driven as vLLM's server drives its parser, next to
vLLM's built-in parser for the same family in the same run (see `replay.py` for the driver).

Deltas of one token, of 1-8 tokens (two seeds) and the whole output; canitoolcall's own verdicts.
The plugin must score what the library scores (`tests/conformance`: 466 pass, 3 soft, 0 fail);
the built-in parsers' scores are printed for comparison, not asserted.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import engine_module

ENGINE = "vllm"
engine_module("vllm", "vllm.parser.parser_manager")
pytest.importorskip("canitoolcall")

from canitoolcall.adapters import vllm as canitoolcall_vllm  # noqa: E402

from . import replay as R  # noqa: E402


@pytest.fixture(scope="module")
def run() -> R.CorpusRun:
    import chatparse.integrations.vllm  # noqa: F401 - registered by the entry point anyway

    def plugin(su: R.Setup, out: R.CorpusRun) -> Any:
        cls = R.vllm_parser_cls(su, "chatparse", "chatparse")
        streams = {}
        for s in R.STRATEGIES:
            deltas: list[Any] = []
            streams[s] = R.vllm_stream(su, cls, s, deltas)
            out.deltas[(su.fixture.id, s)] = deltas
        return R.vllm_nonstream(su, cls), streams

    def builtin(su: R.Setup) -> Any:
        rule = canitoolcall_vllm.resolve_parsers(su.fixture.family, su.fixture.reference_model)
        if rule is None or rule.choice is None:
            return None
        try:
            cls = R.vllm_parser_cls(su, rule.choice.tool_parser, rule.choice.reasoning_parser)
        except Exception:
            return None
        streams = {s: R.vllm_stream(su, cls, s) for s in R.STRATEGIES}
        label = f"{rule.choice.tool_parser}/{rule.choice.reasoning_parser or '-'}"
        return label, R.vllm_nonstream(su, cls), streams

    return R.run_corpus(plugin, builtin)


def test_plugin_scores_what_the_library_scores(run: R.CorpusRun, capsys: pytest.CaptureFixture[str]) -> None:
    R.assert_library_scores(run, "vLLM", capsys)


def _conventions(deltas: list[Any], *, single_token: bool) -> list[str]:
    """vLLM's OpenAI delta conventions (its test harness's reconstructors), re-implemented."""
    problems: list[str] = []
    seen: set[int] = set()
    newest = -1
    shown = [d for d in deltas if d is not None]
    for n, d in enumerate(shown):
        final = n == len(shown) - 1
        calls = d.tool_calls or []
        kinds = [
            k
            for k, on in (
                ("content", bool(d.content)),
                ("reasoning", bool(d.reasoning)),
                ("calls", bool(calls)),
            )
            if on
        ]
        if single_token and not final and len(kinds) > 1:
            problems.append(f"delta {n} carries {' and '.join(kinds)}")
        if single_token and not final and len(calls) > 1:
            problems.append(f"delta {n} carries {len(calls)} calls")
        for tc in calls:
            fn = tc.function
            if tc.index not in seen:
                if tc.index != newest + 1:
                    problems.append(f"index {tc.index} after {newest}")
                if not tc.id or tc.type != "function" or fn is None or not fn.name:
                    problems.append(f"first delta of index {tc.index} lacks id, type or name")
                seen.add(tc.index)
                newest = tc.index
            else:
                if tc.id or (fn is not None and fn.name):
                    problems.append(f"id or name repeated for index {tc.index}")
                if tc.index != newest:
                    problems.append(f"arguments for index {tc.index} after index {newest} started")
    return problems


def test_openai_delta_conventions(run: R.CorpusRun) -> None:
    """One kind per delta (reasoning, content or one call) for one-token steps except the final
    one; id, type and name only in the first delta of an index; contiguous indices; argument
    fragments only for the newest index (every chunking)."""
    problems = []
    for (fid, strategy), deltas in run.deltas.items():
        for p in _conventions(deltas, single_token=strategy == "token"):
            problems.append(f"{fid} [{strategy}]: {p}")
    assert not problems, "\n".join(problems[:40])
