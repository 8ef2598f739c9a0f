"""The scanner (`chatparse._scan`): one test per search strategy, the decisions, the prefilter.

Each strategy is checked on the delimiter shapes that select it: which strategy a pattern gets,
that its cursor finds exactly the leftmost match of `regex.search` at end of stream, that before
the end it never reports a match that more text could change nor skips a start where one could
begin, and that it skips what a failure decided (counted, not timed).
"""

from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from chatparse import _rx, _scan
from chatparse._scan import Commit, Hold, Watch, WatchList

SHAPES = {
    _scan.LiteralSearch: None,  # literal lists: see test_literal_cursor
    _scan.PrefixSearch: [r"<tool_call>(?=\s*\{)", r"</function>\s*</tool_call>", r"\[TOOL_CALLS\](?P<n>\w+)"],
    _scan.TriggerSearch: [r"[<\[]x", r"\w;"],
    _scan.LoopSearch: [r"\s*<tool_call>", r"\s*(?:<\|im_end\|>|<\|endoftext\|>)", r"[^<]*<c>", r"\s{0,4}<x>"],
    _scan.AnchorSearch: [r"^<think>", r"\A\s*x"],
    _scan.EverySearch: [r"(?=)", r".*?END", r"(?<=;)\s*x"],
    _scan.UnionSearch: [
        r"(?:<\|message_model\|>)?[^<]*<\|content_text\|>",
        r"(?:<\|tool_call\|>|^)\s*(?=\[)",
        r"(?:<\|a\|>[^<]{0,8}|\s*)<\|b\|>",
        r"</?｜DSML｜ ?x>",
    ],
}

ALPHABET = "ab<>/| \n[]xc;END"


def _delim(p: str) -> _scan.Delimiter:
    d = _scan.Delimiter(p, None)
    d.module_re = regex.compile(p, regex.DOTALL)
    return d


def _leftmost(p: str, text: str) -> tuple[int, int] | None:
    m = regex.compile(p, regex.DOTALL).search(text)
    if m is None or m.start() >= len(text):
        return None
    return (m.start(), m.end())


def _cases() -> list[tuple[type, str]]:
    return [(cls, p) for cls, ps in SHAPES.items() if ps for p in ps]


@pytest.mark.parametrize(("cls", "pattern"), _cases(), ids=[p for _, p in _cases()])
def test_each_shape_gets_its_strategy(cls: type, pattern: str) -> None:
    assert type(_delim(pattern).strategy) is cls


@pytest.mark.parametrize(("cls", "pattern"), _cases(), ids=[p for _, p in _cases()])
@settings(max_examples=150, deadline=None)
@given(text=st.text(ALPHABET, max_size=16), more=st.text(ALPHABET, max_size=5))
def test_each_strategy_finds_the_leftmost_match(cls: type, pattern: str, text: str, more: str) -> None:
    d = _delim(pattern)
    status, pos, end = d.cursor({}).advance(text, True, len(text) + 1, -1)
    got = None if status == _scan.NONE else (pos, end)
    assert got == _leftmost(pattern, text), (pattern, text)
    # Before the end of the stream: a match is final; nothing can start before a reported position.
    status, pos, end = d.cursor({}).advance(text, False, len(text) + 1, -1)
    full = _leftmost(pattern, text + more)
    if status == _scan.MATCH:
        assert full == (pos, end), (pattern, text, more)
    elif full is not None:
        assert full[0] >= min(pos, len(text)), (pattern, text, more, status, pos)


@settings(max_examples=300, deadline=None)
@given(
    lits=st.lists(
        st.sampled_from(["<a>", "<ab>", "</a>", "x", "<", "ab"]), min_size=1, max_size=3, unique=True
    ),
    text=st.text("<>/abx", max_size=14),
)
def test_literal_cursor(lits: list[str], text: str) -> None:
    d = _scan.Delimiter("|".join(regex.escape(x) for x in sorted(lits, key=len, reverse=True)), lits)
    assert isinstance(d.strategy, _scan.LiteralSearch)
    status, pos, end = d.cursor({}).advance(text, True, len(text) + 1, -1)
    expected = _leftmost("|".join(regex.escape(x) for x in sorted(lits, key=len, reverse=True)), text)
    assert (None if status == _scan.NONE else (pos, end)) == expected


def _count_steps(d: _scan.Delimiter, text: str) -> int:
    before = _rx.STEPS[0]
    d.cursor({}).advance(text, True, len(text) + 1, -1)
    return _rx.STEPS[0] - before


def test_loop_search_skips_a_failed_run() -> None:
    # A failed attempt at the start of a C run decides the whole run: one attempt, not one per start.
    d = _delim(r"\s*<tool_call>")
    assert isinstance(d.strategy, _scan.LoopSearch)
    small, large = _count_steps(d, " " * 2000 + "<x>"), _count_steps(d, " " * 4000 + "<x>")
    assert large <= small + 10


def test_union_search_runs_each_branch_finder() -> None:
    d = _delim(r"(?:<\|message_model\|>)?[^<]*<\|content_text\|>")
    text = "x" * 3000 + "<|content_text|>"
    assert d.cursor({}).advance(text, True, len(text) + 1, -1) == (_scan.MATCH, 0, len(text))
    small, large = _count_steps(d, "x" * 3000 + "<b>"), _count_steps(d, "x" * 6000 + "<b>")
    assert large <= small + 10


def test_anchor_search_only_looks_at_position_zero() -> None:
    d = _delim(r"^<think>")
    assert d.cursor({}).advance("a<think>", True, 9, -1)[0] == _scan.NONE
    assert d.cursor({}).advance("<think>", True, 8, -1) == (_scan.MATCH, 0, 7)


def test_prefix_search_ignores_text_without_the_prefix() -> None:
    d = _delim(r"<tool_call>(?=\s*\{)")
    text = "<tool " * 500
    assert _count_steps(d, text) == 0  # no attempt: no occurrence of the literal prefix


def test_trigger_search_tries_only_trigger_characters() -> None:
    d = _delim(r"\w;")
    assert d.cursor({}).advance("ab 12; x", True, 9, -1) == (_scan.MATCH, 4, 6)
    assert _count_steps(d, "abc " * 500) == 0


def test_every_search_is_linear_with_memos() -> None:
    d = _delim(r".*?END")
    small, large = _count_steps(d, "EN" * 1000), _count_steps(d, "EN" * 2000)
    assert large <= 2.3 * small + 10


# ------------------------------------------------------------------------------------------------
# Decisions and the prefilter


def _scanner(patterns: list[str]) -> _scan.Scanner:
    entries = [Watch(i == 0, f"f{i}", _delim(p)) for i, p in enumerate(patterns)]
    return WatchList(entries).scanner(0, {})


def test_decisions_are_typed() -> None:
    sc = _scanner([r"\s*<tool_call>", r"<think>"])
    d = sc.decide("hello  ", False)
    assert isinstance(d, Hold) and d.at == 5  # the trailing run may still start `\s*<tool_call>`
    d = sc.decide("hello  <think>x", False)
    assert isinstance(d, Commit) and (d.watch.field, d.start, d.end) == ("f1", 7, 14)


def test_prefilter_holds_at_a_partial_lead_without_cursors() -> None:
    sc = _scanner([r"functools(?=\[)", r"\[TOOL_CALLS\]", r"\s*to=functions\.\w+"])
    assert sc._pre is not None and sc._pre.char is None
    d = sc.decide("call the tool with fun", False)
    # (the space before it is held too: a leading `\s*` loop may end there)
    assert isinstance(d, Hold) and d.at == len("call the tool with")
    assert sc._cursors is None  # decided by the prefilter alone


def test_commit_carries_captures() -> None:
    sc = _scanner([r"<function=(?P<name>[^>]+)>"])
    d = sc.decide("x <function=get_weather> y", True)
    assert isinstance(d, Commit) and d.captures == {"name": "get_weather"}


def test_undecided_reports_what_is_still_being_written() -> None:
    sc = _scanner([r"\s*<tool_call>", r"\s*<\|im_end\|>"])
    watches, at = sc.undecided("Hello <tool_ca", -1)
    assert [w.field for w in watches] == ["f0"] and at == 5


# ------------------------------------------------------------------------------------------------
# Load-time bounds and what the core reports to the layers above


def test_load_time_bounds() -> None:
    import chatparse

    def load(field: dict, **top: object) -> None:
        chatparse.load_response_template({"start_anchor": "A", "fields": {"x": field, "content": {}}, **top})

    with pytest.raises(ValueError, match="lookbehind that can be wider"):
        load({"open_pattern": "(?<=a.*)b", "close": "c"})
    with pytest.raises(ValueError, match="nested more than 64"):
        load({"open_pattern": "(?:" * 80 + "a" + ")" * 80, "close": "c"})
    deep: dict = {}
    cur = deep
    for _ in range(100):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises(ValueError, match="defaults.a.a.a is nested more than 64"):
        load({"open": "<x>", "close": "c"}, defaults=deep)
    with pytest.raises(ValueError, match="transform.a is nested more than 64"):
        load({"open": "<x>", "close": "c", "transform": deep})
    load({"open_pattern": "(?<=ab{0,3})c", "close": "d"})  # bounded lookbehinds load


def test_events_carry_body_spans() -> None:
    import chatparse

    tpl = {"start_anchor": "A", "fields": {"t": {"open": "<t>", "close": "</t>"}, "content": {}}}
    p = chatparse.ResponseParser(tpl, prefix="")
    events = p.feed("hi <t>body</t> x")
    close = next(e for e in events if e["type"] == "region_close" and e["field"] == "t")
    assert p.input_text[close["body_start"] : close["body_end"]] == "body"


def test_cut_off_openers_are_reported() -> None:
    import chatparse
    from chatparse import catalog

    p = chatparse.ResponseParser(catalog.get("qwen3"), prefix="")
    p.feed("Hello <tool_ca")
    message, _ = p.finalize()
    assert message["content"] == "Hello <tool_ca"
    assert p.cut_off == [{"field": "tool_calls", "opener": True, "start": 5}]
    p = chatparse.ResponseParser(catalog.get("qwen3"), prefix="")
    p.feed("Hello there")
    p.finalize()
    assert p.cut_off == []
