"""The fixed cost of a one-shot parse of a typical turn (text, then a few calls), counted, never
timed: the decisions `run` takes through `_decide`, and the objects made per parse.

Checked on the catalog families SGLang's detectors cover, with the request's tools.
"""

from __future__ import annotations

from typing import Any

import pytest

import chatparse
from chatparse import _oneshot, catalog

from ..support.build import pure_only
from ..support.calls import dense_calls
from ..support.counting import calls_of

FAMILIES = ["qwen3", "qwen3_xml", "kimi_k2", "deepseek_v3"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


def _turn(family: str, n: int) -> str:
    think = "<think>\nThe user wants f twice.\n</think>\n\n" if family.startswith("qwen3") else ""
    return think + "Let me call f." + ("\n" if family.startswith("qwen3") else "") + dense_calls(family, n)


@pure_only
@pytest.mark.parametrize("family", FAMILIES)
def test_every_call_of_a_run_closes_in_the_call_loop(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first call of a run too (opened by `_decide`, not by an again step): no call region's
    # closer is decided by `_decide`, so a turn costs the same decisions with 1 call as with 5.
    asked: list[Any] = []
    real = _oneshot._decide

    def decide(fw: Any, *args: Any) -> Any:
        seekers, buf, q = args[:3]
        assert q < len(buf)  # at the end of the text nothing is taken: `run` asks nothing
        asked.append(fw)
        return real(fw, *args)

    monkeypatch.setattr(_oneshot, "_decide", decide)
    t = chatparse.load_response_template(catalog.get(family))
    calls_list = _oneshot.plan_for(t).by_field["tool_calls"]
    seen = []
    for n in (1, 5):
        asked.clear()
        out = chatparse.parse_response(_turn(family, n), t, prefix="", tools=TOOLS)
        assert [c["function"]["arguments"] for c in out["tool_calls"]] == [{"a": i} for i in range(n)]
        assert calls_list not in asked, family
        seen.append(len(asked))
    assert seen[0] == seen[1], seen


@pytest.mark.parametrize("family", FAMILIES)
def test_no_again_step_after_a_field_written_once(family: str) -> None:
    # The again step bets on the same opener right after its region: only for a field that takes
    # several regions (the calls), never after reasoning.
    t = chatparse.load_response_template(catalog.get(family))
    plan = _oneshot.plan_for(t)
    for w, again in zip(plan.top.entries, plan.again):
        f = t.fields[w.field]
        if not (w.is_open and (f.repeats or f.join is not None)):
            assert again is None, w.field
    assert any(a is not None and a.calls is not None for a in plan.again)


@pure_only
@pytest.mark.parametrize("family", FAMILIES)
def test_call_loop_asks_no_seeker_per_call(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The call loop finds each closer with C calls of its own (a literal, a lead, or Kimi K2's
    # literal-led pattern: `str.find` and one `match`): the seekers' `first` is asked a constant
    # number of times per turn, not per call (qwen3_xml's name-run opener is asked at each again
    # step by its own seeker's `match_here`, not `first`).
    firsts = calls_of(monkeypatch, _oneshot._Seek, "first")
    t = chatparse.load_response_template(catalog.get(family))
    seen = []
    for n in (2, 12):
        firsts[0] = 0
        out = chatparse.parse_response(_turn(family, n), t, prefix="", tools=TOOLS)
        assert len(out["tool_calls"]) == n
        seen.append(firsts[0])
    assert seen[0] == seen[1], seen


@pure_only
@pytest.mark.parametrize("family", FAMILIES)
def test_no_second_again_step_where_the_call_loop_stopped(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The call loop ends where its own again step did not apply (text after the calls, or the
    # end): `run` goes straight to `_decide` there, without the same again step a second time.
    t = chatparse.load_response_template(catalog.get(family))
    tries = calls_of(monkeypatch, _oneshot._Again, "open_at")
    for tail in ("", "\nDone."):
        tries[0] = 0
        out = chatparse.parse_response(_turn(family, 3) + tail, t, prefix="", tools=TOOLS)
        assert len(out["tool_calls"]) == 3
        assert tries[0] == 0, (family, tail)


_PREFIX_CLOSER = {
    "start_anchor": "A",
    "fields": {
        # the call's closer: one `regex` search, every match starting with `</c>` (the loop finds
        # it with `str.find` and one `match`); it fails at a `</c>` not followed by `\n`
        "tool_calls": {
            "open_pattern": "<c>",
            "close_pattern": "</c>(?=\\n)",
            "repeats": True,
            "content": "json",
            "content_args": {"close_outside_strings": True},
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<end>"},
    },
}


@pytest.mark.parametrize(
    "text",
    [
        '<c>{"name": "f", "arguments": {}}</c>\n<c>{"name": "g", "arguments": {}}</c>\n',
        '<c>{"name": "f", "arguments": {}}</c>x</c>\n<c>{"name": "g", "arguments": {}}</c>\n',  # fails first
        '<c>{"name": "f", "arguments": {"a": "</c>\\n"}}</c>\n<c>{"name": "g"}</c>\n',  # inside a string
        '<c>{"name": "f", "arguments": {}}</c>x',  # no match at all
        "Hi<c>{}</c>\n<end>",
    ],
)
def test_literal_led_closer_in_the_call_loop_agrees_with_streaming(text: str) -> None:
    from .test_oneshot import assert_same

    t = chatparse.load_response_template(_PREFIX_CLOSER)
    calls = _oneshot.plan_for(t).again[0].calls  # type: ignore[union-attr]
    assert calls is not None and calls.prefix == "</c>"
    assert_same(text, t)
    assert_same(text, t, tools=TOOLS)
