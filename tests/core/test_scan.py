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

from ..support.build import pure_only

SHAPES = {
    _scan.LiteralSearch: None,  # literal lists: see test_literal_cursor
    _scan.PrefixSearch: [
        r"<tool_call>(?=\s*\{)",
        r"</function>\s*</tool_call>",
        r"\[TOOL_CALLS\](?P<n>\w+)",
        r"(?<=</parameter>\s{0,4}|>)</function>(?!\s*</tool_call>)",  # a lookbehind is zero-width
    ],
    _scan.TriggerSearch: [r"[<\[]x", r"\w;"],
    _scan.LoopSearch: [r"\s*<tool_call>", r"\s*(?:<\|im_end\|>|<\|endoftext\|>)", r"[^<]*<c>", r"\s{0,4}<x>"],
    _scan.AnchorSearch: [r"^<think>", r"\A\s*x"],
    _scan.AfterSearch: [
        r"(?<=;)",
        r"(?<=;)\s*x",
        r'(?<=<x name="[^"]{1,8}"\s{0,2}/>)',
        r"(?<=a|b;)",
        r"(?<=</ab>)x",  # (its last 4 characters: `/ab>`)
    ],
    _scan.EverySearch: [r"(?=)", r".*?END", r"(?<=[a-z])"],
    _scan.UnionSearch: [
        r"(?:<\|message_model\|>)?[^<]*<\|content_text\|>",
        r"(?:<\|tool_call\|>|^)\s*(?=\[)",
        r"(?:<\|a\|>[^<]{0,8}|\s*)<\|b\|>",
    ],
    _scan.PrefixSetSearch: [
        r"</?｜DSML｜ ?x>",
        r"(?:<\|im_end\|>|<\|endoftext\|>|</s>)",
        r"(?:ab|ac|b)c",
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


def test_prefix_set_search_is_one_finder_for_all_prefixes() -> None:
    # Six literal alternatives (DeepSeek's content closer): one finder, two C searches per call,
    # no attempt where none of the literals occurs; a buffer tail that begins one is a candidate.
    alts = ["<|a|>", "<|ab|>", "</think>", "<|sep|>", "<|end|>", "<|x|>"]
    d = _delim(r"\s*(?:" + "|".join(regex.escape(a) for a in alts) + ")")
    assert isinstance(d.strategy, _scan.LoopSearch)
    assert isinstance(d.strategy.rest, _scan.PrefixSetSearch)
    assert _count_steps(d, "<| a| > " * 500) <= 1
    f = d.strategy.rest.finder()
    assert f.next("xx <|se", 0, False) == 3 and f.next("xx <|se", 0, True) == 8
    assert f.next("xx <|sep|>", 0, True) == 3


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=" \nab", max_size=30), lo=st.integers(0, 30), hi=st.integers(0, 30))
def test_run_start_is_the_start_of_the_run_before_hi(text: str, lo: int, hi: int) -> None:
    """`run_start` (a short run read back a character at a time, a longer one by a reverse match)
    is the first position >= lo from which every character up to `hi` is in the class."""
    hi = min(hi, len(text))
    loop = _rx.CharTest(r"(?:\s)", 0)
    want = hi
    while want > lo and text[want - 1] in " \n":
        want -= 1
    assert _scan.run_start(loop, text, lo, hi) == want


def test_trigger_search_tries_only_trigger_characters() -> None:
    d = _delim(r"\w;")
    assert d.cursor({}).advance("ab 12; x", True, 9, -1) == (_scan.MATCH, 4, 6)
    assert _count_steps(d, "abc " * 500) == 0


def test_after_search_tries_only_positions_after_its_characters() -> None:
    # The self-closing DSML call (`<invoke name="x"/>`): a zero-width closer right after `/>`.
    d = _delim(r'(?<=<x name="[^"]{1,8}"\s{0,2}/>)')
    # Its text always ends with `/>`: only the positions right after a `/>` are tried.
    assert isinstance(d.strategy, _scan.AfterSearch) and d.strategy.after == ["/>"]
    text = '<x name="f"/>'
    assert d.cursor({}).advance(text + "y", True, 99, -1) == (_scan.MATCH, len(text), len(text))
    assert _count_steps(d, "abc " * 500) == 0  # no `>`: no attempt
    body = '<p name="a">v</p>' * 100
    assert _count_steps(d, body + "z") == 0  # `>` but never `/>` (one attempt per `>` before)
    assert _count_steps(d, '<p name="a"/>v' * 100 + "z") <= 100  # one attempt per `/>` at most
    # A lookbehind that can end with several characters keeps the character trigger.
    assert _delim(r"(?<=a|b;)").strategy.after == [";", "a"]


def test_suffix_finder_finds_a_suffix_split_across_feeds() -> None:
    """An `after` literal may arrive in pieces: the remembered "none up to here" still searches
    the characters before that end that could begin it."""
    f = _scan._SuffixFinder("/>")
    assert f.next("ab/", 0, False) == 3  # none yet
    assert f.next("ab/>", 3, False) == 4  # `/>` ends at the end: none yet (never at the end)
    assert f.next("ab/>c", 3, False) == 4
    assert f.next("ab/>c", 5, True) == 6  # none after 5, end of stream
    assert f.next("x/>y/>z", 0, False) == 3 and f.next("x/>y/>z", 4, False) == 6


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"(?<=ab)X", "zzaab" * 3 + "XcallY tail"),
        (r"(?<=(?:a|aa){1,20}b)X", "aab" * 5 + "XcallY"),
        (r"(?<=</invoke>)\s*<call>", "x</invoke>  <call>yY"),
        (r"(?<=;)X", ";;X;XcallY"),
        (r"(?<=</ab>)X", "z</ab</ab>XcallY tail"),
        (r"(?<=c/>)X", "zc/c/>XcallY tail"),
    ],
)
def test_after_search_streams_like_one_shot_at_every_split(pattern: str, text: str) -> None:
    """The character a lookbehind-led opener follows can arrive one feed before the opener: the
    prefilter searches it again (regression: `aab` then `X` never opened the region)."""
    import chatparse

    tpl = {
        "start_anchor": "A",
        "fields": {"tool_calls": {"open_pattern": pattern, "close": "Y", "repeats": True}, "content": {}},
    }
    expected = chatparse.parse_response(text, tpl, prefix="")
    assert "tool_calls" in expected
    for size in (1, 2, 3):
        p = chatparse.ResponseParser(tpl, prefix="")
        for i in range(0, len(text), size):
            p.feed(text[i : i + size])
        assert p.finalize()[0] == expected, size
    for cut in range(len(text) + 1):
        p = chatparse.ResponseParser(tpl, prefix="")
        p.feed(text[:cut])
        p.feed(text[cut:])
        assert p.finalize()[0] == expected, cut


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


LEADS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "to=",
    "to=functions.",
    "functools",
    "[TOOL_CALLS]",
    "<|im_end|>",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(LEADS + ["x" * 40 + "<", "a"]), min_size=1, max_size=5, unique=True),
    st.text(alphabet="<>/|[]_tofunc=.xTOLSa ", max_size=40),
)
def test_prefilter_trie_patterns_agree_with_plain_searches(leads: list[str], text: str) -> None:
    """The prefilter's `re` tries (any lead; the earliest buffer tail inside a lead) answer as the
    plain definitions do, with leads cut to `_LEAD_MAX` characters."""
    pre = _scan.Prefilter([_scan.LiteralSearch(leads)])
    cut = [x[: _scan._LEAD_MAX] for x in leads]
    assert max(len(x) for x in pre.literals) <= _scan._LEAD_MAX
    found = pre.search_re.search(text)
    first = min((i for x in cut if (i := text.find(x)) >= 0), default=None)
    assert (found.start() if found else None) == first
    head = pre.head_re.search(text)
    tails = [j for j in range(len(text)) if any(x.startswith(text[j:]) for x in cut)]
    assert (head.start() if head else None) == (tails[0] if tails else None)


@pure_only
def test_auto_mode_prose_is_decided_by_the_prefilter() -> None:
    """Prose through the union template of auto mode (29 delimiters, leads starting with `<`, `[`,
    `f`, `t`): no feed asks the cursors, and each feed runs at most two C searches."""
    from chatparse import ResponseParser
    from chatparse.openai import AutoStream

    tpl = AutoStream()._parser._t
    text = "the tool to fetch the weather for two cities, then a function of the forecast. " * 20
    p = ResponseParser(tpl, prefix="")
    counts = {"scan": 0, "search": 0}
    scan = _scan.Scanner._scan

    def counted(self, *a):  # type: ignore[no-untyped-def]
        counts["scan"] += 1
        return scan(self, *a)

    pre = tpl.watch.prefilter
    assert pre is not None
    search, head = pre.search_re, pre.head_re

    class Counting:
        def __init__(self, rx):  # type: ignore[no-untyped-def]
            self.rx = rx

        def search(self, *a):  # type: ignore[no-untyped-def]
            counts["search"] += 1
            return self.rx.search(*a)

        def match(self, *a):  # type: ignore[no-untyped-def]
            counts["search"] += 1  # (a held tail checked again: a C match counts as a search)
            return self.rx.match(*a)

    _scan.Scanner._scan = counted  # type: ignore[method-assign]
    pre.search_re, pre.head_re = Counting(search), Counting(head)
    try:
        got = "".join(
            e["text"] for i in range(0, len(text), 4) for e in p.feed(text[i : i + 4]) if "text" in e
        )
    finally:
        _scan.Scanner._scan = scan  # type: ignore[method-assign]
        pre.search_re, pre.head_re = search, head
    n_feeds = len(range(0, len(text), 4))
    assert counts["scan"] == 0
    assert counts["search"] <= 2 * n_feeds
    assert text.startswith(got) and len(got) >= len(text) - 16


def test_call_bodies_are_decided_by_the_prefilter() -> None:
    """qwen3_xml call bodies are full of `<parameter=` tags: the prefilter's one lead character
    (`<`) occurs in almost every feed, but only the closer's literal lead asks the cursors, so the
    count of cursor scans does not grow with the number of parameters."""
    from chatparse import ResponseParser, catalog, load_response_template

    tpl = load_response_template(catalog.get("qwen3_xml"))
    scan = _scan.Scanner._scan

    def scans(n_params: int) -> int:
        body = "".join(f"<parameter=p{i}>\nvalue {i}\n</parameter>\n" for i in range(n_params))
        text = f"<tool_call>\n<function=f>\n{body}</function>\n</tool_call>"
        count = [0]

        def counted(self, *a):  # type: ignore[no-untyped-def]
            if self.entries[0].field == "tool_calls" and not self.entries[0].is_open:
                count[0] += 1
            return scan(self, *a)

        _scan.Scanner._scan = counted  # type: ignore[method-assign]
        try:
            p = ResponseParser(tpl, prefix="")
            for i in range(0, len(text), 3):
                p.feed(text[i : i + 3])
            msg, _ = p.finalize()
        finally:
            _scan.Scanner._scan = scan  # type: ignore[method-assign]
        assert len(msg["tool_calls"][0]["function"]["arguments"]) == n_params
        return count[0]

    assert scans(40) == scans(5) <= 8
