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
        streams = {}
        for s in R.STRATEGIES:
            items: list[Any] = []
            streams[s] = R.sglang_stream(su, "chatparse", "chatparse", s, items)
            out.deltas[(su.fixture.id, s)] = items
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


def _conventions(items: list[Any]) -> list[str]:
    """SGLang's call-item conventions, which its server turns into OpenAI deltas (an id is minted
    for an item with a name): the first item of an index carries the name, later ones none;
    indices contiguous from 0 in call order; argument fragments only for the newest index; each
    index's fragments join into a JSON object."""
    import json

    problems: list[str] = []
    seen: dict[int, str] = {}
    newest = -1
    for n, it in enumerate(items):
        if it.tool_index not in seen:
            if it.tool_index != newest + 1:
                problems.append(f"item {n}: index {it.tool_index} after {newest}")
            if not it.name:
                problems.append(f"item {n}: first item of index {it.tool_index} has no name")
            seen[it.tool_index] = ""
            newest = it.tool_index
        else:
            if it.name:
                problems.append(f"item {n}: name repeated for index {it.tool_index}")
            if it.tool_index != newest:
                problems.append(f"item {n}: arguments for index {it.tool_index} after index {newest} started")
        seen[it.tool_index] += it.parameters or ""
    for index, arguments in seen.items():
        try:
            ok = isinstance(json.loads(arguments), dict)
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"index {index}: arguments {arguments[:60]!r} are not a JSON object")
    return problems


def test_call_item_conventions(run: R.CorpusRun) -> None:
    """Every fixture, every chunking: the items the plugin releases keep SGLang's conventions."""
    problems = []
    calls = 0
    for (fid, strategy), items in run.deltas.items():
        calls += len({it.tool_index for it in items})
        problems += [f"{fid} [{strategy}]: {p}" for p in _conventions(items)]
    assert not problems, "\n".join(problems[:40])
    assert calls > 600  # the corpus's calls, in every chunking (not an empty run)
