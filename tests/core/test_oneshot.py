"""The one-shot fast path (`chatparse._oneshot`) gives exactly the streaming parser's result.

`parse_events(..., fast=False)` is the streaming parser fed the whole text at once and finalized;
`fast=True` is the one-shot scanner. Both must give the same events (types, fields, offsets,
captures, values, errors), the same message and the same exceptions, on every catalog template
and on generated templates, for texts built from each template's own delimiters (cut, repeated,
inside JSON strings, around whitespace runs) and prompt prefixes. Work is counted, never timed.
"""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import _oneshot, _rx, catalog
from chatparse.errors import RequiredFieldsMissing

from ..support.build import pure_only
from . import strategies as cst
from .test_linear import TEMPLATES, N, counting, sample, shapes

CATALOG = {name: catalog.get(name) for name in catalog.names()}


def _norm_event(e: dict) -> dict:
    out = dict(e)
    if "error" in out:
        err = out["error"]
        out["error"] = (type(err).__name__, str(err))
    return out


def _outcome(text: str, template: Any, prefix: str, tools: Any, fast: bool) -> Any:
    try:
        parser, events = _oneshot.parse_events(text, template, prefix, tools, fast=fast)
    except (ValueError, TypeError, KeyError) as e:
        return ("raised", type(e).__name__, str(e))
    out: list[Any] = [[_norm_event(e) for e in events]]
    try:
        parser._check_required(events)
    except RequiredFieldsMissing as e:
        out.append(("missing", str(e)))
        return out
    out.append(parser._finish())
    return out


def _parse(text: str, template: Any, prefix: str, tools: Any = None) -> Any:
    try:
        return chatparse.parse_response(text, template, prefix=prefix, tools=tools)
    except (ValueError, TypeError, KeyError) as e:
        return ("raised", type(e).__name__, str(e))


def _streamed_parse(text: str, template: Any, prefix: str, tools: Any = None) -> Any:
    """`parse_response` as the streaming parser gives it: the first malformed region's error,
    then the required-field check, then the message."""
    try:
        parser, events = _oneshot.parse_events(text, template, prefix, tools, fast=False)
        for e in events:
            if e["type"] == "region_malformed":
                raise e["error"]
        parser._check_required(events)
        return parser._finish()
    except (ValueError, TypeError, KeyError) as e:
        return ("raised", type(e).__name__, str(e))


def assert_same(text: str, template: Any, prefix: str = "", tools: Any = None) -> None:
    fast = _outcome(text, template, prefix, tools, True)
    slow = _outcome(text, template, prefix, tools, False)
    assert fast == slow, (text, prefix)
    # `parse_response` (the one-shot run without events) == the streaming parser's answer
    assert _parse(text, template, prefix, tools) == _streamed_parse(text, template, prefix, tools), (
        text,
        prefix,
    )


# --------------------------------------------------------------------------------------------
# Differential: fast == streaming


@pytest.mark.parametrize("name", sorted(CATALOG))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_catalog_fast_equals_streaming(name: str, data: st.DataObject) -> None:
    spec = CATALOG[name]
    text = data.draw(cst.texts_for(spec, max_pieces=18), label="text")
    prefix = data.draw(cst.prefixes_for(spec), label="prefix")
    assert_same(text, spec, prefix)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cst.template_cases())
def test_generated_templates_fast_equals_streaming(case: tuple[dict, str, str]) -> None:
    template, prefix, text = case
    assert_same(text, template, prefix)


_WS = st.sampled_from([" ", "\n", "  ", "\n\n", "\t", " " * 40, "\n" * 30])


@pytest.mark.parametrize("name", sorted(CATALOG))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_catalog_delimiter_soup(name: str, data: st.DataObject) -> None:
    # The template's delimiters, cut one character short, inside JSON strings and between
    # whitespace runs: the shapes where a refused or undecided match changes the answer.
    spec = CATALOG[name]
    delims = cst.delimiter_strings(spec) or ["x"]
    piece = st.one_of(
        st.sampled_from(delims),
        st.sampled_from(delims).map(lambda d: d[:-1] if len(d) > 1 else d),
        st.sampled_from(delims).map(lambda d: json.dumps({"name": "f", "arguments": {"a": d}})),
        _WS,
        st.sampled_from(['{"name": "f", "arguments": {}}', "{", "}", '"', "\\", "word", "<", ">"]),
    )
    text = data.draw(st.lists(piece, max_size=24).map("".join), label="text")
    assert_same(text, spec, "")


def test_auto_union_template_fast_equals_streaming() -> None:
    t = TEMPLATES["auto-union"]
    for spec in CATALOG.values():
        for d in cst.delimiter_strings(spec)[:12]:
            assert_same(f"hi {d} there{d}\n  {d}", t)


# --------------------------------------------------------------------------------------------
# The fast path is taken (no silent bail-out) on call-dense texts


# The benchmark's own call-dense texts (benchmarks/bench_core.py `case_calls`).
from benchmarks.bench_core import _calls_text  # noqa: E402


@pytest.mark.parametrize("family", ["qwen3", "qwen3_xml", "kimi_k2", "deepseek_v3"])
def test_call_dense_texts_parse_the_same(family: str) -> None:
    text = _calls_text(family, 60)
    assert_same(text, CATALOG[family])
    got = chatparse.parse_response(text, CATALOG[family], prefix="")
    assert len(got["tool_calls"]) == 60


@pytest.mark.parametrize("family", ["qwen3", "deepseek_v3", "kimi_k2"])
def test_call_dense_texts_take_the_fast_path(family: str) -> None:
    # No bail-out and no step of the streaming matcher: every decision came from a C search.
    text = _calls_text(family, 50)
    bails = _oneshot.BAILS[0]
    with counting() as counts:
        chatparse.parse_response(text, CATALOG[family], prefix="")
    assert _oneshot.BAILS[0] == bails
    assert counts["steps"] == 0 and counts["run"] == 0, counts


# --------------------------------------------------------------------------------------------
# Linear work, counted


@contextmanager
def counting_fast() -> Iterator[collections.Counter]:
    """`test_linear.counting` plus the seekers: their searches by the characters they cover."""
    with counting() as counts:
        patched = []
        for cls in (
            _oneshot._LiteralSeek,
            _oneshot._SearchSeek,
            _oneshot._LoopSeek,
            _oneshot._LeadRunSeek,
            _oneshot._CursorSeek,
        ):
            original = vars(cls)["_search"]

            def counted(self: Any, buf: str, q: int, _original: Callable = original) -> Any:
                r = _original(self, buf, q)
                counts["span:_search"] += min(r[0], len(buf)) - q + 1
                return r

            patched.append((cls, original))
            cls._search = counted  # type: ignore[method-assign]
        open_at = vars(_oneshot._Again)["open_at"]

        def again_open_at(self: Any, buf: str, pos: int, run_end: list[int]) -> Any:
            # the again step's C work: the leading runs it measured, its opener match, and the
            # other delimiters' tests (each bounded by the opener's match, `_at_test`, whether
            # separate or in the opener's lookahead: `joined`)
            before = run_end[0]
            found = open_at(self, buf, pos, run_end)
            counts["span:again"] += max(run_end[0] - max(before, pos), 0) + 1
            if found is not None:
                counts["span:again"] += (found.end + 1 - pos) * (1 + len(self.others) + self.joined)
            return found

        _oneshot._Again.open_at = again_open_at  # type: ignore[method-assign]
        closer_at = _oneshot._closer_at

        def counted_closer_at(buf: str, pos: int, *args: Any) -> Any:
            # the call loop's own closer searches: the text up to the closer found (or the end)
            s, e = closer_at(buf, pos, *args)
            counts["span:closer"] += e - pos + 1
            return s, e

        _oneshot._closer_at = counted_closer_at
        lead_closer_at = _oneshot._lead_closer_at

        def counted_lead_closer_at(buf: str, pos: int, lead: str, sk: Any) -> Any:
            # a cursor closer's direct attempt: the text up to the lead's first occurrence and
            # what the attempt there reads (`_read_end`); the seeker's searches count themselves
            got = lead_closer_at(buf, pos, lead, sk)
            at = buf.find(lead, pos)
            counts["span:lead"] += (sk._read_end(buf, at) if at >= 0 else len(buf)) - pos + 1
            return got

        _oneshot._lead_closer_at = counted_lead_closer_at
        match_at = vars(_oneshot._CursorSeek)["match_at"]

        def counted_match_at(self: Any, buf: str, s: int) -> Any:
            # an opener's direct attempt at the again step: the text it can read
            got = match_at(self, buf, s)
            if got is not False:
                counts["span:match_at"] += self.c_reach - s + 1
            return got

        _oneshot._CursorSeek.match_at = counted_match_at  # type: ignore[method-assign]
        match_here = vars(_oneshot._CursorSeek)["match_here"]

        def counted_match_here(self: Any, buf: str, s: int) -> Any:
            # the same, where the closer's lead bounds the reads (`_free_opener`)
            counts["span:match_here"] += self._read_end(buf, s) - s + 1
            return match_here(self, buf, s)

        _oneshot._CursorSeek.match_here = counted_match_here  # type: ignore[method-assign]
        try:
            yield counts
        finally:
            _oneshot._CursorSeek.match_here = match_here  # type: ignore[method-assign]
            _oneshot._CursorSeek.match_at = match_at  # type: ignore[method-assign]
            _oneshot._lead_closer_at = lead_closer_at
            _oneshot._closer_at = closer_at
            _oneshot._Again.open_at = open_at  # type: ignore[method-assign]
            for cls, original in patched:
                cls._search = original  # type: ignore[method-assign]


def _fast_work(t: Any, text: str) -> int:
    """The work of both one-shot paths on `text`: with events (`parse_events`) and without
    (`parse_response`: `run`'s call loop)."""
    with counting_fast() as counts:
        _oneshot.parse_events(text, t, "", None)
        with contextlib.suppress(ValueError, TypeError, KeyError):
            _oneshot.parse(text, t, "", None)
    return sum(counts.values())


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_one_shot_fast_path_is_linear(name: str) -> None:
    t = TEMPLATES[name]
    for shape, make in shapes(t).items():
        small = _fast_work(t, make(4 * N))
        large = _fast_work(t, make(8 * N))
        assert large <= 2.3 * small + 200, (name, shape, small, large)


# --------------------------------------------------------------------------------------------
# The again step: the next call's opener right after a call, without asking every seeker


@pytest.mark.parametrize(
    "family, per_call", [("qwen3", 1), ("deepseek_v3", 1), ("kimi_k2", 1), ("qwen3_xml", 2)]
)
def test_again_step_takes_the_next_call_without_the_seekers(family: str, per_call: int) -> None:
    # 50 calls: the seekers are asked for the first call's opener and for each call's closer;
    # every later opener is the again step's (without it: about 4 `first` calls per call). An
    # opener only its own seeker's proof bounds (qwen3_xml's name run) is asked of that seeker,
    # but the other top delimiters' seekers still are not.
    text = _calls_text(family, 50)
    firsts = collections.Counter()
    original = _oneshot._Seek.first

    def first(self: Any, buf: str, q: int) -> int:
        firsts["first"] += 1
        return original(self, buf, q)

    _oneshot._Seek.first = first  # type: ignore[method-assign]
    try:
        got = chatparse.parse_response(text, CATALOG[family], prefix="")
    finally:
        _oneshot._Seek.first = original  # type: ignore[method-assign]
    assert len(got["tool_calls"]) == 50
    assert firsts["first"] <= per_call * 50 + 15, firsts
    assert_same(text, CATALOG[family])


_AGAIN_SPEC = {
    "start_anchor": "A",
    "fields": {
        "tool_calls": {"open_pattern": "\\s*<a>", "close": "</a>", "repeats": True},
        "thinking": {"open": "<a><b>", "close": "</b>"},
        "content": {"close_pattern": "[^#]*#"},
    },
}


@pytest.mark.parametrize(
    "text",
    [
        "<a>1</a><a>2</a>\n<a>3</a>",
        "<a>1</a><a><b>2</b><a>3</a>",  # a longer top delimiter at the again step's position wins
        "<a>1</a> <a><b>2</b> x",
        "<a>1</a><a>2</a>#rest",  # the content closer's run reaches past the opener: seekers decide
        "<a>1</a>   \n  x<a>2</a>",  # the opener fails after a run: seekers decide
        "<a>1</a>",
        "<a>1</a>\n",
    ],
)
def test_again_step_agrees_with_the_seekers(text: str) -> None:
    t = chatparse.load_response_template(_AGAIN_SPEC)
    assert _oneshot.plan_for(t).again[0] is not None or _oneshot.plan_for(t).again[1] is not None
    assert_same(text, t)


@pure_only
@pytest.mark.parametrize("family", ["qwen3", "qwen3_xml", "kimi_k2", "deepseek_v3"])
def test_call_loop_takes_a_call_dense_text(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # `parse_response` of 50 calls: after the first call, closers and openers come from the call
    # loop (`_call_loop`), not from `run`'s general step (`_decide`), and the opener with the
    # other top delimiters is one `regex` match where their sources join (`_Again.joined`).
    text = _calls_text(family, 50)
    calls = collections.Counter()
    decide, loop = _oneshot._decide, _oneshot._call_loop

    def counted_decide(*args: Any) -> Any:
        calls["decide"] += 1
        return decide(*args)

    def counted_loop(*args: Any) -> Any:
        calls["loop"] += 1
        return loop(*args)

    monkeypatch.setattr(_oneshot, "_decide", counted_decide)
    monkeypatch.setattr(_oneshot, "_call_loop", counted_loop)
    got = chatparse.parse_response(text, CATALOG[family], prefix="")
    assert len(got["tool_calls"]) == 50
    assert calls["loop"] == 1 and calls["decide"] <= 6, calls
    t = chatparse.load_response_template(CATALOG[family])
    again = [a for a in _oneshot.plan_for(t).again if a is not None and a.calls is not None]
    assert any(a.calls.name == "tool_calls" for a in again)
    if family != "qwen3_xml":  # (its opener is asked of its own seeker)
        assert all(a.joined and not a.others for a in again if a.calls.name == "tool_calls")


_LOOP_CALL = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'


@pytest.mark.parametrize(
    "text",
    [
        _LOOP_CALL * 3,
        _LOOP_CALL
        + '<tool_call>\n{"name": "f", "arguments": {"a": "</tool_call>"}}\n</tool_call>'
        + _LOOP_CALL,
        _LOOP_CALL + "<tool_call>\n{bad json}\n</tool_call>" + _LOOP_CALL,  # the first error is raised
        _LOOP_CALL + "\nsome prose\n" + _LOOP_CALL,
        _LOOP_CALL + '<tool_call>\n{"name": "f"',  # the last call is cut off
        _LOOP_CALL + "\n\n<tool_call>\n" + _LOOP_CALL,
        _LOOP_CALL + '<tool_call>{"name": "f", "arguments": {"a": "x\\\\"}}</tool_call>' + _LOOP_CALL,
        _LOOP_CALL + "<think>no</think>" + _LOOP_CALL + "<|im_end|>",
    ],
)
def test_call_loop_agrees_with_the_streaming_parser(text: str) -> None:
    # The plain case and each way out of the call loop (a closer in a string, a malformed call,
    # text between calls, a cut-off call, an escape before the closer).
    assert_same(text, CATALOG["qwen3"])
    assert_same(text, CATALOG["qwen3"], tools=[{"type": "function", "function": {"name": "f"}}])
    # defaults holding the repeating field: a list the calls join, a string they cannot
    for default in ([{"type": "function", "function": {"name": "d", "arguments": {}}}], "x"):
        spec = {**CATALOG["qwen3"], "defaults": {"role": "assistant", "tool_calls": default}}
        assert_same(text, spec)


_DS_CALL = '<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{"a": 1}\n```<｜tool▁call▁end｜>'


@pytest.mark.parametrize(
    "text",
    [
        "<｜tool▁calls▁begin｜>" + _DS_CALL * 3 + "<｜tool▁calls▁end｜>",
        # the closer's lead where its pattern fails (a code fence in an argument), then the closer
        _DS_CALL + _DS_CALL.replace('{"a": 1}', '{"a": "```x"}') + _DS_CALL,
        _DS_CALL
        + _DS_CALL.replace("```<｜tool▁call▁end｜>", "``` \n\n ```  \n<｜tool▁call▁end｜>")
        + _DS_CALL,
        _DS_CALL + _DS_CALL.replace("```<｜tool▁call▁end｜>", "```"),  # no closer: cut off
        _DS_CALL + "\n\n" + _DS_CALL + " text " + _DS_CALL,
    ],
)
def test_call_loop_lead_run_closer_agrees_with_the_streaming_parser(text: str) -> None:
    # DeepSeek's `\s*```\s*<｜tool▁call▁end｜>`: the call loop's first-lead candidate and its exits.
    assert_same(text, CATALOG["deepseek_v3"])


def test_call_loop_exits_stay_linear() -> None:
    # Every call leaves the call loop (a lead its pattern fails at, a closer in a string) and the
    # general step takes it back: the loop's own searches and the seekers' add up linearly.
    fenced = _DS_CALL.replace('{"a": 1}', '{"a": "```x"}')
    quoted = '<tool_call>\n{"name": "f", "arguments": {"a": "</tool_call>"}}\n</tool_call>'
    for t, call in ((CATALOG["deepseek_v3"], fenced), (CATALOG["qwen3"], quoted)):
        small = _fast_work(t, call * 100)
        large = _fast_work(t, call * 200)
        assert large <= 2.3 * small + 200, (small, large)


def test_again_step_on_runs_after_calls_stays_linear() -> None:
    # Each call is followed by a long whitespace run that ends in prose: the again step's opener
    # (`\s*<tool_call>`) crosses the run and fails, the seekers then decide; no run is crossed
    # again by a later step.
    t = CATALOG["qwen3"]
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'

    def make(k: int) -> str:
        return (call + " " * 200 + "x") * k

    small = _fast_work(t, make(40))
    large = _fast_work(t, make(80))
    assert large <= 2.3 * small + 200, (small, large)
    small = _fast_work(t, (call + "\n") * 200 + " " * 4000)
    large = _fast_work(t, (call + "\n") * 400 + " " * 8000)
    assert large <= 2.3 * small + 200, (small, large)


def test_no_match_steps_for_proven_delimiters() -> None:
    # Every delimiter the plan searches in C has a proof behind it.
    for name, t in TEMPLATES.items():
        plan = _oneshot.plan_for(t)
        for fw in plan.watches.values():
            for w, kind in zip(fw.entries, fw.kinds):
                d = w.delimiter
                if kind == _oneshot._SEARCH:
                    b = _rx.backtrack_bound(d.prog.tree)
                    assert b is not None and b <= _rx.SAFE_STEPS, (name, d.source)


def test_forced_linear_rejects_a_run_a_candidate_can_start_in() -> None:
    # `<f=[^>\n]+>`: a candidate `<` can start inside the name run of an earlier attempt, so
    # "<f=<f=<f=..." would cross the same run once per candidate: not proven, streaming cursor.
    t = chatparse.load_response_template(
        {
            "start_anchor": "A",
            "fields": {
                "tool_calls": {
                    "open_pattern": "\\s*<f=(?P<name>[^>\\n]+)>",
                    "close": "</f>",
                    "transform": {"name": "{name}"},
                },
                "content": {},
            },
        }
    )
    d = t.fields["tool_calls"].opener
    assert not _oneshot.forced_linear(d)
    # the same run after a lead it cannot contain is proven
    t2 = chatparse.load_response_template(
        {
            "start_anchor": "A",
            "fields": {
                "tool_calls": {
                    "open_pattern": "\\s*<f=(?P<name>[^<>\\n]+)>",
                    "close": "</f>",
                    "transform": {"name": "{name}"},
                },
                "content": {},
            },
        }
    )
    assert _oneshot.forced_linear(t2.fields["tool_calls"].opener)


def test_forced_linear_reads_the_leads_of_a_prefix_set() -> None:
    # `\s*(?:<|a|>|<|b|>)`: the rest after the run is searched by one trie finder (a
    # `PrefixSetSearch`) whose candidates start with `<`, never inside a `\s` run: proven, so
    # Kimi K2's content closer is searched in C.
    from chatparse._scan import PrefixSetSearch

    t = chatparse.load_response_template(CATALOG["kimi_k2"])
    closer = t.fields["content"].closer
    parts = getattr(closer.strategy, "parts", [])
    assert any(isinstance(getattr(p, "rest", None), PrefixSetSearch) for p in parts)
    assert _oneshot.forced_linear(closer)
    assert _oneshot._kind(closer) != _oneshot._CURSOR


def test_hostile_candidates_inside_runs_stay_linear() -> None:
    spec = {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open_pattern": "\\s*<f=(?P<name>[^>\\n]+)>",
                "close": "</f>",
                "transform": {"name": "{name}"},
            },
            "content": {},
        },
    }
    t = chatparse.load_response_template(spec)
    small = _fast_work(t, "<f=" * 2000 + "\n")
    large = _fast_work(t, "<f=" * 4000 + "\n")
    assert large <= 2.3 * small + 200, (small, large)


@settings(max_examples=500, deadline=None)
@given(
    body=st.text(alphabet='ab"\\ {}\n', max_size=40),
    points=st.lists(st.integers(min_value=0, max_value=42), max_size=6),
)
def test_quote_guard_agrees_with_the_string_guard(body: str, points: list[int]) -> None:
    from chatparse._scan import StringGuard

    buf = "<x>" + body
    slow = StringGuard(3, (), '"', False)
    fast = _oneshot._QuoteGuard(3)
    for p in points:
        p = min(3 + p, len(buf))
        assert fast.inside(buf, p) == slow.inside(buf, p), (buf, p)


# --------------------------------------------------------------------------------------------
# `C* REST` searched in C: `(?:\G|(?<!C))(?:PATTERN)`


def _leftmost(rx: Any, buf: str, q: int) -> tuple[int, int] | None:
    """The leftmost match at or after `q`, by trying every start (the definition)."""
    for i in range(q, len(buf) + 1):
        m = rx.match(buf, i)
        if m is not None:
            return m.start(), m.end()
    return None


def _opener(source: str) -> Any:
    """The compiled call opener of a small template whose `tool_calls` opener is `source`."""
    t = chatparse.load_response_template(
        {
            "start_anchor": "A",
            "fields": {
                "tool_calls": {"open_pattern": source, "close": "</f>", "transform": {"x": "{content}"}},
                "content": {},
            },
        }
    )
    return t.fields["tool_calls"].opener


_RUN_SOURCES = [
    "\\s*<tool_call>",
    "\\s*(?:<\\|im_end\\|>|</think>|</tool_call>)",
    "\\s*<f=(?P<name>[^<>\\n]+)>",
    "\\s+```\\s*<e>",
    " {2,}<x>",
]


@settings(max_examples=300, deadline=None)
@given(
    source=st.sampled_from(_RUN_SOURCES),
    text=st.lists(
        st.sampled_from([" ", "\n", "<", ">", "tool_call", "/", "f=", "a", "<x>", "```", "<e>"]), max_size=30
    ).map("".join),
)
@example(source=" {2,}<x>", text="a   <x>")  # a start inside a run
@example(source="\\s*<tool_call>", text="x \n <tool_call>")
def test_run_pattern_finds_the_leftmost_match(source: str, text: str) -> None:
    d = _opener(source)
    fast = _oneshot.run_pattern(d)
    assert fast is not None and _oneshot._kind(d) == _oneshot._RUN
    for q in range(len(text) + 1):  # every start, inside runs too
        m = fast.search(text, q)
        want = _leftmost(d.module_re, text, q)
        got = (m.start(), m.end()) if m is not None else None
        assert got == want, (source, text, q)
        if m is not None:
            assert m.groupdict() == d.module_re.match(text, m.start()).groupdict()


def test_run_pattern_declines_a_rest_that_can_start_in_the_run() -> None:
    # `\s*\s?<x>`: REST can start with a `\s`, so a match can begin inside a run: no rewrite.
    assert _oneshot.run_pattern(_opener("\\s*[ <]x>")) is None


_LEAD_SOURCES = [
    "<\\|e\\|>(?:[^<]{0,256}(?=<\\|b\\|>|<\\|z\\|>))?",  # kimi_k2's call closer, shortened
    "<f=(?P<name>[^<>\\n]+)>",
    "</?x>\\s*",
    "(?:<a>|<b>)[^<]*</c>",
]


@settings(max_examples=200, deadline=None)
@given(
    source=st.sampled_from(_LEAD_SOURCES),
    text=st.lists(
        st.sampled_from(
            [" ", "\n", "<", ">", "/", "f=", "a", "x", "<x>", "<|e|>", "<|b|>", "<|z|>", "<a>", "</c>"]
        ),
        max_size=30,
    ).map("".join),
)
@example(source=_LEAD_SOURCES[0], text="<|e|>ab <|z|>")
def test_lead_seeker_finds_the_leftmost_match(source: str, text: str) -> None:
    # A proven pattern whose matches start with a lead: one `regex` search from each start gives
    # the leftmost match the finder and `match` would (every start, against the definition).
    d = _opener(source)
    assert _oneshot._kind(d) == _oneshot._LEAD
    for q in range(len(text) + 1):
        sk = _oneshot._factory(d, _oneshot._LEAD)()
        s = sk.first(text, q)
        want = _leftmost(d.module_re, text, q)
        got = (s, sk.end) if s <= len(text) else None
        if want is not None and want[0] == len(text):
            want = None  # a match at the very end of the text is never taken
        assert got == want, (source, text, q)


# --------------------------------------------------------------------------------------------
# `_LeadRunSeek`: `C* REST` with literal leads, found by `str.find` and decided at the run start


class _Scanned(str):
    """A text that counts the characters its `find` calls cover (the C work the count above cannot see)."""

    scanned = 0

    def find(self, sub: str, start: Any = 0, end: Any = None) -> int:  # type: ignore[override]
        r = str.find(self, sub, start) if end is None else str.find(self, sub, start, end)
        _Scanned.scanned += (r + len(sub) if r >= 0 else len(self)) - (start or 0)
        return r


def _lead_seek(source: str, leads: list[str]) -> Any:
    rx = regex.compile(source)
    return _oneshot._LeadRunSeek(rx, list(rx.groupindex), leads, regex.compile(r"\s*", regex.REVERSE))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=" \n<a>zb", max_size=60))
def test_lead_run_seek_finds_the_leftmost_match_at_every_start(text: str) -> None:
    source = r"\s*(?:<a>|<zb>)"
    rx = regex.compile(source)
    sk = _lead_seek(source, ["<a>", "<zb>"])
    for q in range(len(text) + 1):
        m = rx.search(text, q)
        want = m.start() if m is not None and m.start() < len(text) else len(text) + 1
        assert sk.first(text, q) == want, (text, q)
        if m is not None and want <= len(text):
            assert sk.end == m.end()


def test_lead_run_seek_searches_each_lead_once_over_the_text() -> None:
    # A frequent lead and one that occurs only at the end: the rare lead's search is remembered,
    # not repeated from every query (which made each query scan to the end: quadratic).
    def scanned(n: int) -> int:
        text = _Scanned("x  <a>" * n + "<zb>")
        sk = _lead_seek(r"\s*(?:<a>|<zb>)", ["<a>", "<zb>"])
        _Scanned.scanned = 0
        q = 0
        while q <= len(text):
            s = sk.first(text, q)
            if s > len(text):
                break
            q = sk.end
        return _Scanned.scanned

    small, large = scanned(2_000), scanned(4_000)
    assert large <= 2.3 * small, (small, large)


@pure_only
def test_prose_without_the_delimiter_takes_no_pattern_search() -> None:
    # qwen3's `\s*<tool_call>` over long reasoning prose: `str.find` for the lead, no `regex`
    # search stepping through every character (that made 2 KB rows 1.6x slower than before).
    t = CATALOG["qwen3"]
    text = "<think>" + "words and more words " * 500 + "</think>Answer.<|im_end|>"
    assert_same(text, t)
    searches: collections.Counter = collections.Counter()
    classes = (_oneshot._SearchSeek, _oneshot._LeadRunSeek)
    originals = [vars(cls)["_search"] for cls in classes]

    def counter(original: Callable) -> Callable:
        def counted(self: Any, buf: str, q: int) -> Any:
            searches[type(self).__name__] += 1
            if self.rx.pattern.startswith("(?:\\G|"):  # `run_pattern`'s one search
                searches["chars stepped by a run pattern"] += len(buf) - q
            return original(self, buf, q)

        return counted

    for cls, original in zip(classes, originals):
        cls._search = counter(original)  # type: ignore[method-assign]
    try:
        _oneshot.parse_events(text, t, "", None)
    finally:
        for cls, original in zip(classes, originals):
            cls._search = original  # type: ignore[method-assign]
    assert searches["_LeadRunSeek"] >= 1 and searches["chars stepped by a run pattern"] == 0, searches


def test_anchored_openers_are_one_match_at_the_start() -> None:
    # `^\s*<think>` (deepseek_r1_distill): one `match` at position 0, not the streaming cursor
    # (which would send the whole template to the streaming machine); a `^` pattern whose one
    # attempt is not provably linear keeps the cursor.
    for name in ("deepseek_r1_distill",):
        t = chatparse.load_response_template(CATALOG[name])
        d = t.fields["reasoning_content"].opener
        assert _oneshot._kind(d) == _oneshot._ANCHOR, name
    assert _oneshot._kind(_opener("^(?:a+)+b")) == _oneshot._CURSOR
    for text in ("<think>a</think>b", "  \n<think>a</think>b", "x<think>a</think>b", "", "<think"):
        assert_same(text, CATALOG["deepseek_r1_distill"])


# --------------------------------------------------------------------------------------------
# `_CursorSeek`: the streaming matcher, one finder and one context for the whole parse


def _cursor_delimiters() -> dict[str, Any]:
    """Every distinct catalog delimiter no C-search proof covers, by source."""
    out: dict[str, Any] = {}
    for t in CATALOG.values():
        plan = _oneshot.plan_for(chatparse.load_response_template(t))
        for fw in plan.fws:
            for w, kind in zip(fw.entries, fw.kinds):
                if kind == _oneshot._CURSOR:
                    out.setdefault(w.delimiter.source, w.delimiter)
    return out


CURSOR_DELIMITERS = _cursor_delimiters()
_CURSOR_PIECES = [
    " ", "\n", "<", ">", "f", "a", ";", "{", "}", "[", "(", '"name": ', "to=functions.f",
    "<tool_call>", "</tool_call>", "<function=", "</function>", "</parameter>", "<|channel|>",
    "commentary", "<|message|>", "<|start|>assistant", "</think>", "<tool_calls>",
]  # fmt: skip


def _cursor_sample(d: Any) -> list[str]:
    text = sample(d) or ""
    return [text, text[: len(text) // 2], text[len(text) // 2 :]] if text else []


def _groups(m: Any) -> dict[str, str]:
    return {k: v for k, v in m.groupdict().items() if v is not None}


def test_every_catalog_delimiter_has_a_one_shot_seeker() -> None:
    # No catalog template is sent to the streaming machine at the end of the text any more: the
    # shapes no proof covers (qwen3_xml's name-run opener, lookbehind-led closers, ...) get the
    # streaming matcher as a seeker of their own.
    assert len(CURSOR_DELIMITERS) >= 20
    for name, spec in CATALOG.items():
        plan = _oneshot.plan_for(chatparse.load_response_template(spec))
        assert all(len(fw.slots) == len(fw.entries) for fw in plan.fws), name
        for fw in plan.fws:
            for w, kind, slot in zip(fw.entries, fw.kinds, fw.slots):
                if kind == _oneshot._CURSOR:
                    assert isinstance(plan.factories[slot](), _oneshot._CursorSeek), (name, w)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), source=st.sampled_from(sorted(CURSOR_DELIMITERS)))
def test_cursor_seek_finds_the_leftmost_match_across_queries(data: st.DataObject, source: str) -> None:
    # ONE seeker answers a whole parse's queries (increasing, some from one past its last answer,
    # as after a refusal, some from inside its last match, as after a delimiter that started
    # earlier won): each answer is the leftmost match at or after the query, by the definition.
    d = CURSOR_DELIMITERS[source]
    pieces = _CURSOR_PIECES + _cursor_sample(d)
    text = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=24)))
    n = len(text)
    # with the `regex` attempts where no earlier one read (the plan's seeker), and without them
    reads = _oneshot._attempt_reads(d) if data.draw(st.booleans()) else None
    sk = _oneshot._CursorSeek(d, reads)
    q = 0
    while q <= n:
        s = sk.first(text, q)
        want = _leftmost(d.module_re, text, q)
        if want is not None and want[0] == n:
            want = None  # a match at the very end of the text is never taken
        got = (s, sk.end) if s <= n else None
        assert got == want, (source, text, q)
        if got is None:
            break
        assert sk.captures(text) == _groups(d.module_re.match(text, s)), (source, text, s)
        step = data.draw(st.sampled_from(["refused", "inside", "after"]))
        if step == "refused":
            q = s + 1
        elif step == "inside":
            q = data.draw(st.integers(min_value=s + 1, max_value=max(s + 1, sk.end)))
        else:
            q = max(sk.end, s + 1)


@pure_only
def test_qwen3_xml_call_dense_text_takes_the_one_shot_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its name-run opener and lookbehind-led closer used to send the whole template to the
    # streaming machine at the end of the text: now no bail, no `stream_end`, no
    # decision of the streaming scanner; the cursor seekers answer. In the call loop both are
    # decided at the one place the answer can start (the closer at the next `</function>`, the
    # opener at the again step's position right after it: one `_compound` match), without a
    # finder's search: the searches do not grow with the calls, the direct answers (each counted
    # in its seeker by `_found`) are two per call, and neither `match_here` nor
    # `_lead_closer_at` is asked per call.
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    ends = []
    original = _oneshot.stream_end
    monkeypatch.setattr(_oneshot, "stream_end", lambda p, text: ends.append(1) or original(p, text))
    searches = []
    original_search = _oneshot._CursorSeek._search
    monkeypatch.setattr(
        _oneshot._CursorSeek,
        "_search",
        lambda self, buf, q: searches.append(q) or original_search(self, buf, q),
    )
    direct = []
    original_found = _oneshot._CursorSeek._found
    monkeypatch.setattr(
        _oneshot._CursorSeek,
        "_found",
        lambda self, s, e, n: direct.append(s) or original_found(self, s, e, n),
    )
    asked = []
    original_here = _oneshot._CursorSeek.match_here
    monkeypatch.setattr(
        _oneshot._CursorSeek,
        "match_here",
        lambda self, buf, s: asked.append(s) or original_here(self, buf, s),
    )
    original_lead = _oneshot._lead_closer_at
    monkeypatch.setattr(
        _oneshot,
        "_lead_closer_at",
        lambda buf, pos, lead, sk: asked.append(pos) or original_lead(buf, pos, lead, sk),
    )
    per_size = []
    for calls in (30, 60):
        text = _calls_text("qwen3_xml", calls)
        bails = _oneshot.BAILS[0]
        searches.clear()
        direct.clear()
        asked.clear()
        with counting_fast() as counts:
            got = chatparse.parse_response(text, t, prefix="")
        assert len(got["tool_calls"]) == calls
        assert _oneshot.BAILS[0] == bails and not ends
        assert counts["decide"] == 0 and counts["_scan"] == 0, counts
        per_size.append((len(searches), len(direct), len(asked)))
    (s30, d30, a30), (s60, d60, a60) = per_size
    assert s60 == s30, per_size  # finder searches: constant in the calls
    assert d60 - d30 == 2 * 30, per_size  # an opener and a closer per call, decided directly
    assert a60 == a30, per_size  # by the compound match


@pure_only
@pytest.mark.parametrize(
    "make",
    [
        lambda k: "<function=" * k,  # every `<` a candidate inside the name run of the one before
        lambda k: "<function=a" + "\n<function=" * k,  # runs cut by newlines
        lambda k: "<tool_call>\n<function=f>\n" + "<parameter=x>\n" * k + "</function>",
        lambda k: "<tool_call>\n<function=f>\n<parameter=x>\n" + "</parameter>\n </function" * k,
    ],
)
def test_hostile_name_run_openers_are_linear_one_shot(make: Callable[[int], str]) -> None:
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    bails = _oneshot.BAILS[0]
    with counting_fast() as counts:
        _oneshot.parse_events(make(10), t, "", None)
    assert counts["span:_search"] > 0 and counts["decide"] == 0, counts  # the one-shot seekers ran
    small = _fast_work(t, make(10_000))
    large = _fast_work(t, make(20_000))
    assert large <= 2.3 * small + 200, (small, large)
    assert _oneshot.BAILS[0] == bails


@pure_only
def test_cursor_seek_searches_never_go_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # The linear bound of `_CursorSeek` rests on this: one seeker's searches start at strictly
    # increasing positions over a parse (a query at or before a remembered answer is answered from
    # memory), on every catalog template and input shape, call texts and cut delimiters included.
    last: dict[int, int] = {}
    searched = []
    original = _oneshot._CursorSeek._search

    def search(self: Any, buf: str, q: int) -> Any:
        assert q > last.get(id(self), -1), (q, last.get(id(self)))
        last[id(self)] = q
        searched.append(q)
        return original(self, buf, q)

    monkeypatch.setattr(_oneshot._CursorSeek, "_search", search)
    for name, t in TEMPLATES.items():
        texts = [make(300) for make in shapes(t).values()]
        if name in CATALOG:
            texts.append(_calls_text("qwen3_xml", 5) + "x" + _calls_text("qwen3", 5))
        for text in texts:
            last.clear()
            _oneshot.parse_events(text, t, "", None)
    assert len(searched) > 300


_READ_SOURCES = sorted(src for src, d in CURSOR_DELIMITERS.items() if _oneshot._attempt_reads(d) is not None)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), source=st.sampled_from(_READ_SOURCES))
def test_attempt_reads_bound_what_a_regex_attempt_reads(data: st.DataObject, source: str) -> None:
    # `_read_end(s)` is past every character a `regex` attempt at `s` reads: the attempt gives the
    # same answer on the text cut there (a read at the cut would see the end of the text instead),
    # and on the text without what lies more than `_MAX_BEHIND` before `s` (lookbehinds).
    d = CURSOR_DELIMITERS[source]
    assert len(_READ_SOURCES) >= 5  # the name-run openers (qwen3_xml, mimo, seed_oss, ...)
    pieces = _CURSOR_PIECES + _cursor_sample(d) + ["x" * 40, " " * 30, "\n\n"]
    text = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=24)))
    sk = _oneshot._CursorSeek(d, _oneshot._attempt_reads(d))
    for s in range(len(text)):
        cut = sk._read_end(text, s)
        lo = max(0, s - _oneshot._MAX_BEHIND)
        full, part = d.module_re.match(text, s), d.module_re.match(text[lo:], s - lo, cut - lo)
        assert (full and (full.span(), full.groupdict())) == (
            part and ((part.start() + lo, part.end() + lo), part.groupdict())
        ), (source, text, s, cut)


def _reach(buf: str, s: int, reads: list[list[tuple[Any, int]]]) -> int:
    """The furthest position (exclusive) an attempt at `s` with steps `reads` can read, step by
    step (the definition `_oneshot.reach_pattern` compiles)."""
    n = len(buf)
    far = s
    for steps in reads:
        p = s
        for run, w in steps:
            if type(run) is list:  # a lookahead with runs: its body's reads from here
                far = max(far, _reach(buf, p, run))
            elif run is not None:
                p = run.match(buf, p).end() if p < n else p
            elif w >= 0:
                p += w
            else:
                far = max(far, p - w)  # a lookahead body reads on without moving the position
        far = max(far, p)
    return far


@settings(max_examples=200, deadline=None)
@given(data=st.data(), source=st.sampled_from(_READ_SOURCES))
def test_reach_pattern_is_reach(data: st.DataObject, source: str) -> None:
    # The compiled read bound (`reach_pattern`, one match) is the stepwise definition (`_reach`).
    d = CURSOR_DELIMITERS[source]
    reads = _oneshot._attempt_reads(d)
    assert reads is not None
    rx = _oneshot.reach_pattern(reads)
    pieces = _CURSOR_PIECES + _cursor_sample(d) + [" " * 30, "\n\n", "x" * 300]
    text = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=24)))
    for s in range(len(text) + 1):
        assert max(e for _, e in rx.match(text, s).regs) == min(_reach(text, s, reads), len(text))


def test_attempt_reads_take_lookarounds_with_runs() -> None:
    # qwen3_xml's call closer: a bounded lookbehind (read before the candidate only) and a negative
    # lookahead with a forced run; every candidate of it is decided by one `regex` match.
    d = chatparse.load_response_template(CATALOG["qwen3_xml"]).fields["tool_calls"].closer
    assert d.source in _READ_SOURCES
    reads = _oneshot._attempt_reads(d)
    assert reads is not None and any(type(run) is list for steps in reads for run, _ in steps)
    # a lookbehind with an anchor, a lookahead whose run is not forced: not admitted
    for source in ("(?<=^\\s{0,3})b", "b(?=a*a)", "b(?!(?:ab)*a)"):
        t = _opener(source)
        assert _oneshot._attempt_reads(t) is None, source


@pure_only
@pytest.mark.parametrize(
    "text",
    [
        "<function=" * 3000,
        "<tool_call>" * 3000 + "<function=",
        "<function=a" + "\n<function=" * 3000,
        ("<tool_call>\n<function=f>\n" + "<" * 50 + " \n" * 20) * 200,
    ],
)
def test_regex_attempts_of_a_cursor_seeker_never_read_the_same_text_twice(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The `regex` attempts run only where no earlier one read, so the text they read (which is
    # what they cost, `_attempt_reads`) adds up to the text at most; the rest is the streaming
    # matcher's, linear by its memo.
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    windows: list[tuple[int, int]] = []
    original = _oneshot._CursorSeek._read_end

    def read_end(self: Any, buf: str, s: int) -> int:
        r = original(self, buf, s)
        windows.append((s, r))
        return r

    monkeypatch.setattr(_oneshot._CursorSeek, "_read_end", read_end)
    chatparse.parse_response(text, t, prefix="")
    assert windows
    for (_, e0), (s1, _) in zip(windows, windows[1:]):
        assert s1 >= e0, windows
    assert sum(e - s for s, e in windows) <= len(text) + 1


def test_cursor_seek_gives_up_when_queries_rewalk_its_matches() -> None:
    # Queries from inside earlier matches (refusals, one after another) would re-walk the same long
    # matching path each time (`<f=` repeated, one name run to the final `>`): past the text's length
    # in re-walked characters the seeker bails, so the work before the bail stays linear.
    d = _opener("\\s*<f=(?P<name>[^>\\n]+)>")
    assert _oneshot._kind(d) == _oneshot._CURSOR

    def rewalk(k: int) -> int:
        text = "<f=" * k + ">"
        sk = _oneshot._CursorSeek(d)
        with counting() as counts, pytest.raises(_oneshot.Bail):
            q = 0
            while q <= len(text):
                s = sk.first(text, q)
                q = s + 1
        return sum(counts.values())

    small, large = rewalk(2000), rewalk(4000)
    assert large <= 2.3 * small + 200, (small, large)


# --------------------------------------------------------------------------------------------
# `match` at chosen positions: `Delimiter.match_re`, never the `regex` module's required-string
# search (which made a seeker's per-candidate `match` read to the next occurrence of a literal of
# the pattern, or to the end of the text: the again step's test of qwen3's content closer read to
# the final `<|im_end|>` once per call, quadratic in the calls, bench_core's d2)

_ALL_DELIMITERS = {
    d.source: d
    for name in sorted(CATALOG)
    for f in chatparse.load_response_template(CATALOG[name]).fields.values()
    for d in (f.opener, f.closer)
    if d is not None
}


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_match_re_matches_as_the_pattern_does(data: st.DataObject) -> None:
    d = _ALL_DELIMITERS[data.draw(st.sampled_from(sorted(_ALL_DELIMITERS)))]
    sample_text = _rx_sample(d)
    text = data.draw(
        st.lists(
            st.sampled_from([sample_text, sample_text[:-1], " ", "\n", "x", "<", ">", '"', "{"]), max_size=8
        )
    )
    buf = "".join(text)
    for pos in range(len(buf) + 1):
        a, b = d.module_re.match(buf, pos), d.match_re.match(buf, pos)
        assert (a and (a.span(), a.groupdict())) == (b and (b.span(), b.groupdict())), (d.source, buf, pos)


def _rx_sample(d: Any) -> str:
    from .test_linear import sample

    return sample(d) or "x"


class _NoMatch:
    """A delimiter's `module_re` that refuses `match` (searches and attributes pass through)."""

    def __init__(self, rx: Any) -> None:
        self._rx = rx

    def match(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"module_re.match at a chosen position: {self._rx.pattern!r}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rx, name)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_one_shot_matches_at_positions_with_match_re(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = chatparse.load_response_template(CATALOG[name])
    texts = [make(300) for make in shapes(t).values()]
    texts += [_calls_text(family, 5) for family in ("qwen3", "qwen3_xml", "kimi_k2", "deepseek_v3")]
    for f in t.fields.values():
        for d in (f.opener, f.closer):
            if d is not None:  # (delimiters are shared by templates: put back after the test)
                monkeypatch.setattr(d, "module_re", _NoMatch(d.module_re))
    bails = _oneshot.BAILS[0]
    for text in texts:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            _oneshot.parse_events(text, t, "", None)
    assert _oneshot.BAILS[0] == bails


# --------------------------------------------------------------------------------------------
# qwen3_xml's call loop: the closer at its lead, the opener at the again step, the other
# delimiters' tests behind a literal prefilter

_XML_CALL = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n"
_XML_TOOLS = [
    {
        "type": "function",
        "function": {"name": "f", "parameters": {"properties": {"a": {"type": "integer"}}}},
    }
]


@pytest.mark.parametrize(
    "text",
    [
        _XML_CALL * 3,
        # the closer's lead where its pattern fails (a `</function>` inside a value), then the closer
        _XML_CALL + _XML_CALL.replace("\n1\n", "\nx</function>y\n") + _XML_CALL,
        # closers of every branch: bare calls, a closer before the next opener, whitespace runs
        "<function=f>\n</function><function=g>\n<parameter=a>\n2\n</parameter>\n</function>\n",
        _XML_CALL.replace("</function>\n</tool_call>", "</function>" + " " * 80 + "</tool_call>") * 2,
        _XML_CALL.replace("</tool_call>\n", "") * 3,
        _XML_CALL + "<tool_call>\n<function=f>\n<parameter=a>\n1\n",  # cut off: no closer
        _XML_CALL + "<tool_call>\n<function=f\n>" + _XML_CALL,  # the again step's opener fails
        _XML_CALL + "<think>x</think>" + _XML_CALL + "<|im_end|>",  # other top delimiters after a call
        _XML_CALL + "  <|im_end|>",
        _XML_CALL + "\n<think>" + _XML_CALL,
    ],
)
def test_call_loop_cursor_closer_and_opener_agree_with_the_streaming_parser(text: str) -> None:
    assert_same(text, CATALOG["qwen3_xml"])
    assert_same(text, CATALOG["qwen3_xml"], tools=_XML_TOOLS)
    assert_same("<think>\nr</think>\n" + text, CATALOG["qwen3_xml"], prefix="<|im_start|>assistant\n")


@pytest.mark.parametrize(
    "make",
    [
        lambda k: "<tool_call>\n<function=f>\n" + "x</function>" * k,  # the closer fails at each lead
        lambda k: (_XML_CALL.replace("</function>\n", "</function>" + " " * 100)) * k,
        lambda k: "<tool_call>\n<function=f>\n</function>" + "</function>" * k + " " * k,
        lambda k: (_XML_CALL + " " * 100) * k + "x",
        # the again step's opener reads a name run and fails (`_free_opener`), or a long run
        lambda k: (_XML_CALL + "<function=" + "a" * 100 + "\n") * k,
        lambda k: (_XML_CALL + "<function=" + "<function=a" * 20 + "\n") * k,
        lambda k: (_XML_CALL.replace("</tool_call>\n", " " * 100)) * k,
    ],
)
def test_call_loop_cursor_closer_and_opener_are_linear(make: Callable[[int], str]) -> None:
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    assert _oneshot.plan_for(t).again[1].calls.lead == "</function>"  # type: ignore[union-attr]
    small = _fast_work(t, make(300))
    large = _fast_work(t, make(600))
    assert large <= 2.3 * small + 200, (small, large)


def test_lead_closer_needs_runs_that_cannot_hold_the_lead() -> None:
    # qwen3_xml's closer reads whitespace runs only; a closer whose lookahead reads a run of `<`
    # could read across the next occurrences of its lead: no direct decision there.
    def closer(source: str) -> Any:
        t = chatparse.load_response_template(
            {
                "start_anchor": "A",
                "fields": {
                    "tool_calls": {"open": "<f>", "close_pattern": source, "repeats": True},
                    "content": {},
                },
            }
        )
        return t.fields["tool_calls"].closer

    xml = chatparse.load_response_template(CATALOG["qwen3_xml"]).fields["tool_calls"].closer
    assert _oneshot._lead_closer(xml) == "</function>"
    assert _oneshot._lead_closer(closer("</f>\\s*</g>|(?<=</p>\\s{0,4})</f>(?!\\s*</g>)")) == "</f>"
    assert _oneshot._lead_closer(closer("</f>\\s*</g>|(?<=</p>\\s{0,4})</f>(?!<*y)")) is None
    assert _oneshot._lead_closer(closer("(?<=x)</f>(?!\\s*y)")) is None  # (led by its lookbehind)


def test_again_tests_prefilter_agrees_with_the_match() -> None:
    # The other top delimiters' tests decline with a literal check before their `regex` match;
    # every answer they give is the match's, and they give every answer the unfiltered test gives.
    rng = __import__("random").Random(7)
    pieces = ["<think>", "</think>", "<|im_end|>", "<tool_call>", "<function=f>", " ", "\n", "x", "<"]
    for name in ("qwen3_xml", "qwen3", "glm", "kimi_k2", "deepseek_v3"):
        top = _oneshot.plan_for(chatparse.load_response_template(CATALOG[name])).top
        for w, kind in zip(top.entries, top.kinds):
            d = w.delimiter
            test = _oneshot._at_test(d, kind)
            if test is None or kind == _oneshot._LITERAL:
                continue
            runs = _oneshot._branch_runs(d)
            assert runs is not None

            def reference(buf: str, pos: int, lim: int, runs: list[Any] = runs, d: Any = d) -> bool | None:
                # `_at_test` without a prefilter: undecided where a leading run reaches `lim`
                if any(run.match(buf, pos, lim).end() >= lim for run in runs):
                    return None
                return d.match_re.match(buf, pos) is not None

            for _ in range(300):
                buf = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 8)))
                pos = rng.randrange(len(buf))
                lim = rng.randrange(pos + 1, len(buf) + 2)
                got = test(buf, pos, lim)
                if got is not None:
                    assert got == (d.match_re.match(buf, pos) is not None), (name, d.source, buf, pos)
                want = reference(buf, pos, lim)
                if want is not None:
                    assert got == want, (name, d.source, buf, pos, lim)


@pure_only
def test_again_tests_on_a_call_dense_text_run_no_match() -> None:
    # qwen3_xml's `<think>` opener and content closer, tested at each again step: the prefilter
    # declines every one without their `regex` match.
    import copy

    calls = collections.Counter()
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    top = _oneshot.plan_for(t).top
    text = _calls_text("qwen3_xml", 50)
    steps = [m.start() for m in regex.finditer("<tool_call>", text)][1:]
    for w, kind in zip(top.entries, top.kinds):
        if w.field == "tool_calls":
            continue
        d = copy.copy(w.delimiter)
        real = d.match_re

        class Counting:
            def match(self, buf: str, pos: int, _real: Any = real, _source: str = d.source) -> Any:
                calls[_source] += 1
                return _real.match(buf, pos)

        d.match_re = Counting()
        test = _oneshot._at_test(d, kind)
        assert test is not None
        for pos in steps:
            lim = text.index(">", text.index("<function=", pos)) + 2
            assert test(text, pos, lim) is False
    assert not calls, calls
