"""The canitoolcall corpus through the vLLM plugin, driven as vLLM's server drives its parser, next to
vLLM's built-in parser for the same family in the same run (see `replay.py` for the driver).

Deltas of one token, of 1-8 tokens (two seeds) and the whole output; canitoolcall's own verdicts.
The plugin must score what the library scores (`tests/conformance`: 466 pass, 3 soft, 0 fail);
the built-in parsers' scores are printed for comparison, not asserted.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import pytest

from .conftest import engine_module

ENGINE = "vllm"
engine_module("vllm", "vllm.parser.parser_manager")
pytest.importorskip("canitoolcall")

from canitoolcall.adapters import vllm as canitoolcall_vllm  # noqa: E402

from tests.conformance import canitoolcall_baseline as B  # noqa: E402

from . import replay as R  # noqa: E402


class Run:
    def __init__(self) -> None:
        self.plugin: dict[str, list[R.Verdict]] = defaultdict(list)
        self.builtin: dict[str, list[R.Verdict]] = defaultdict(list)
        self.builtin_names: dict[str, set[str]] = defaultdict(set)
        self.deltas: dict[tuple[str, str], list[Any]] = {}


@pytest.fixture(scope="module")
def run() -> Run:
    import chatparse.integrations.vllm  # noqa: F401 - registered by the entry point anyway

    logging.disable(logging.WARNING)  # the built-in parsers log every malformed call
    out = Run()
    try:
        for fx in R.corpus():
            su = R.setup_for(fx)
            assert su is not None, fx.id
            with R.plugin_env(su):
                cls = R.vllm_parser_cls(su, "chatparse", "chatparse")
                ns = R.vllm_nonstream(su, cls)
                streams = {}
                for s in R.STRATEGIES:
                    deltas: list[Any] = []
                    streams[s] = R.vllm_stream(su, cls, s, deltas)
                    out.deltas[(fx.id, s)] = deltas
            out.plugin[fx.family].append(R.verdict(fx, ns, streams))
            rule = canitoolcall_vllm.resolve_parsers(fx.family, fx.reference_model)
            if rule is None or rule.choice is None:
                continue
            try:
                builtin = R.vllm_parser_cls(su, rule.choice.tool_parser, rule.choice.reasoning_parser)
            except Exception:
                continue
            out.builtin_names[fx.family].add(
                f"{rule.choice.tool_parser}/{rule.choice.reasoning_parser or '-'}"
            )
            ns = R.vllm_nonstream(su, builtin)
            streams = {s: R.vllm_stream(su, builtin, s) for s in R.STRATEGIES}
            out.builtin[fx.family].append(R.verdict(fx, ns, streams))
    finally:
        logging.disable(logging.NOTSET)
    return out


def test_plugin_scores_what_the_library_scores(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        "| family | fixtures | chatparse plugin p/s/f | vLLM built-in | built-in p/s/f |",
        "|---|---:|---:|---|---:|",
    ]
    for fam in sorted(run.plugin):
        p, s, f = R.tally(run.plugin[fam])
        b = run.builtin.get(fam, [])
        bp, bs, bf = R.tally(b)
        names = ", ".join(sorted(run.builtin_names.get(fam, ()))) or "-"
        lines.append(
            f"| {fam} | {len(run.plugin[fam])} | {p}/{s}/{f} | {names} | {bp}/{bs}/{bf} ({len(b)} run) |"
        )
    everything = [v for vs in run.plugin.values() for v in vs]
    builtin = [v for vs in run.builtin.values() for v in vs]
    p, s, f = R.tally(everything)
    bp, bs, bf = R.tally(builtin)
    lines.append(f"| total | {len(everything)} | {p}/{s}/{f} | | {bp}/{bs}/{bf} ({len(builtin)} run) |")
    with capsys.disabled():
        print(f"\ncanitoolcall corpus through vLLM's parser API (deltas: {', '.join(R.STRATEGIES)})")
        print("\n".join(lines))
    failing = [f"{v.fixture.id}: {v.failing[:2]}" for v in everything if v.failing]
    assert not failing, "\n".join(failing)
    assert len(everything) == B.MEASURED_SUPPORTED
    assert p >= B.MEASURED_STRICT["all"] and p + s >= B.MEASURED_PASS_OR_SOFT["all"] and f == 0


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


def test_openai_delta_conventions(run: Run) -> None:
    """One kind per delta (reasoning, content or one call) for one-token steps except the final
    one; id, type and name only in the first delta of an index; contiguous indices; argument
    fragments only for the newest index (every chunking)."""
    problems = []
    for (fid, strategy), deltas in run.deltas.items():
        for p in _conventions(deltas, single_token=strategy == "token"):
            problems.append(f"{fid} [{strategy}]: {p}")
    assert not problems, "\n".join(problems[:40])
