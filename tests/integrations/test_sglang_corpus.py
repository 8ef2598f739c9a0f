"""The canitoolcall corpus through the SGLang plugin, driven as SGLang's server drives its parsers
(reasoning parser, then the tool-call parser on its normal text, `parse_stream_end` at the end),
next to SGLang's built-in parsers for the same family in the same run (driver: `replay.py`).

The plugin must score what the library scores (466 pass, 3 soft, 0 fail); the built-in parsers'
scores are printed for comparison, not asserted.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import pytest

from .conftest import engine_module

ENGINE = "sglang"
engine_module("sglang", "sglang.srt.function_call.function_call_parser")
pytest.importorskip("canitoolcall")

from canitoolcall.adapters import sglang as canitoolcall_sglang  # noqa: E402

from tests.conformance import canitoolcall_baseline as B  # noqa: E402

from . import replay as R  # noqa: E402


class Run:
    def __init__(self) -> None:
        self.plugin: dict[str, list[R.Verdict]] = defaultdict(list)
        self.builtin: dict[str, list[R.Verdict]] = defaultdict(list)
        self.builtin_names: dict[str, set[str]] = defaultdict(set)


@pytest.fixture(scope="module")
def run() -> Run:
    import chatparse.integrations.sglang as plugin

    plugin.register()
    logging.disable(logging.WARNING)  # the built-in detectors log every malformed call
    out = Run()
    try:
        for fx in R.corpus():
            su = R.setup_for(fx)
            assert su is not None, fx.id
            with R.plugin_env(su):
                ns = R.sglang_nonstream(su, "chatparse", "chatparse")
                streams = {s: R.sglang_stream(su, "chatparse", "chatparse", s) for s in R.STRATEGIES}
            out.plugin[fx.family].append(R.verdict(fx, ns, streams))
            rule = canitoolcall_sglang.resolve_parsers(fx.family, fx.reference_model)
            if rule is None or rule.tool_call_parser is None:
                continue
            out.builtin_names[fx.family].add(f"{rule.tool_call_parser}/{rule.reasoning_parser or '-'}")
            ns = R.sglang_nonstream(su, rule.tool_call_parser, rule.reasoning_parser)
            streams = {
                s: R.sglang_stream(su, rule.tool_call_parser, rule.reasoning_parser, s) for s in R.STRATEGIES
            }
            out.builtin[fx.family].append(R.verdict(fx, ns, streams))
    finally:
        logging.disable(logging.NOTSET)
    return out


def test_plugin_scores_what_the_library_scores(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        "| family | fixtures | chatparse plugin p/s/f | SGLang built-in | built-in p/s/f |",
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
        print(f"\ncanitoolcall corpus through SGLang's parser API (deltas: {', '.join(R.STRATEGIES)})")
        print("\n".join(lines))
    failing = [f"{v.fixture.id}: {v.failing[:2]}" for v in everything if v.failing]
    assert not failing, "\n".join(failing)
    assert len(everything) == B.MEASURED_SUPPORTED
    assert p >= B.MEASURED_STRICT["all"] and p + s >= B.MEASURED_PASS_OR_SOFT["all"] and f == 0
