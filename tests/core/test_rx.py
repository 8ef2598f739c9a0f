"""The exact matcher (`chatparse._rx`) against the `regex` module itself.

Two properties, on hypothesis-generated patterns and texts:

* at end of stream, an attempt at every start position returns exactly what `regex.match` returns
  there (span and named groups);
* before end of stream, a decided attempt (fail or match) is final: every continuation of the text
  gives the same result at end of stream. This is what lets the scanner commit early.
"""

from __future__ import annotations

from typing import Any

import pytest
import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import _rx, _scan

from ..support.build import pure_only

ALPHABET = "ab<>/ \n"


def _atoms() -> st.SearchStrategy[str]:
    return st.sampled_from(
        [
            "a",
            "b",
            "<",
            ">",
            "/",
            " ",
            r"\s",
            r"\S",
            r"\w",
            "[ab]",
            "[^<]",
            "[^>\\n]",
            ".",
            r"\<",
            "(?i:A)",
            "\\n",
        ]
    )


def _patterns() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        quant = st.sampled_from(["*", "+", "?", "{0,2}", "{1,3}", "{2}", "*?", "+?", "??", "*+", "++"])
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}|{t[1]}"),
            st.tuples(inner, quant).map(lambda t: f"(?:{t[0]}){t[1]}"),
            inner.map(lambda s: f"(?P<g{abs(hash(s)) % 7}>{s})"),
            inner.map(lambda s: f"(?={s})"),
            inner.map(lambda s: f"(?!{s})"),
            inner.map(lambda s: f"(?>{s})"),
            st.sampled_from(["^", "$", r"\b", r"\Z", "(?<=a)", "(?<!b)"]),
        )

    return st.recursive(_atoms(), extend, max_leaves=6)


def _compile(p: str) -> _rx.Program | None:
    try:
        ref = regex.compile(p, regex.DOTALL)
    except regex.error:
        return None
    if len(ref.groupindex) != len(set(ref.groupindex)):
        return None
    try:
        return _rx.compile_pattern(p)
    except _rx.UnsupportedPattern:
        return None


def _result(prog: _rx.Program, r: object, text: str, start: int = 0, eos: bool = True) -> object:
    if r is None or r is _rx.LIVE:
        return r
    end, _ = r  # type: ignore[misc]
    slots = _rx.capture(prog, text, start, eos)
    groups = {}
    for name, i in prog.names.items():
        s, e = slots[i], slots[i + 1]
        groups[name] = None if s == -1 or e == -1 else text[s:e]
    return (end, groups)


def _ref(p: str, text: str, start: int) -> object:
    m = regex.compile(p, regex.DOTALL).match(text, start)
    return None if m is None else (m.end(), m.groupdict())


@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(_patterns(), st.text(ALPHABET, max_size=10))
def test_end_of_stream_equals_regex_module(p: str, text: str) -> None:
    prog = _compile(p)
    assume(prog is not None)
    assert prog is not None
    for start in range(len(text) + 1):
        got = _result(prog, _rx.Attempt(prog, start).run(text, True), text, start)
        assert got == _ref(p, text, start), (p, text, start)


@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(
    _patterns(),
    st.text(ALPHABET, max_size=10),
    st.lists(st.text(ALPHABET, max_size=4), min_size=1, max_size=3),
)
def test_decided_attempts_are_final(p: str, text: str, continuations: list[str]) -> None:
    prog = _compile(p)
    assume(prog is not None)
    assert prog is not None
    for start in range(len(text) + 1):
        early = _rx.Attempt(prog, start).run(text, False)
        if early is _rx.LIVE:
            continue
        for cont in continuations:
            full = text + cont
            assert _result(prog, early, text, start, False) == _ref(p, full, start), (p, text, cont, start)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(_patterns(), st.text(ALPHABET, max_size=8), st.text(ALPHABET, min_size=1, max_size=6))
def test_resumed_attempts_equal_fresh_ones(p: str, text: str, more: str) -> None:
    prog = _compile(p)
    assume(prog is not None)
    assert prog is not None
    full = text + more
    for start in range(len(text) + 1):
        att = _rx.Attempt(prog, start)
        r = att.run(text, False)
        if r is _rx.LIVE:
            r = att.run(full, True)
        assert _result(prog, r, full, start) == _ref(p, full, start), (p, text, more, start)


def test_memo_is_shared_across_starts_and_linear() -> None:
    # A failing unbounded loop tried at every start: memoisation makes the whole scan linear.
    prog = _rx.compile_pattern(r"[^<]*<c>")
    text = "x" * 20000 + "<b>"
    ctx = _rx.MatchContext()
    for start in range(len(text)):
        assert _rx.Attempt(prog, start, ctx).run(text, True) is None
    assert ctx.size() < 3 * len(text)


def test_live_attempt_resumes_without_rescanning() -> None:
    prog = _rx.compile_pattern(r"(?:<\|message_model\|>)?[^<]*<\|content_text\|>")
    att = _rx.Attempt(prog, 0)
    buf = ""
    for _ in range(5000):
        buf += "x"
        assert att.run(buf, False) is _rx.LIVE
    buf += "<|content_text|>"
    assert att.run(buf, False) == (len(buf), [])


def test_unsupported_constructs_are_named() -> None:
    for p, what in [
        (r"(a)\1", "back-references"),
        (r"(?P<x>a)(?P=x)", "group syntax"),
        (r"\G", "\\G"),
        (r"(?:a?)*", "empty"),
    ]:
        try:
            _rx.compile_pattern(p)
        except _rx.UnsupportedPattern as e:
            assert what in str(e)
        else:  # pragma: no cover
            raise AssertionError(p)


# ------------------------------------------------------------------------------------------------
# One delimiter's cursor (candidate skipping: first sets, `\s*X` shapes, literal prefixes) against
# a brute-force `regex.search`.


def _cursor(p: str) -> tuple[_scan.Cursor, _scan.Delimiter] | None:
    if _compile(p) is None:
        return None
    d = _scan.Delimiter(p, None)
    return d.cursor({}), d


def _leftmost(p: str, text: str) -> tuple[int, int, dict] | None:
    """The leftmost match that does not start at the very end of the text (never taken)."""
    m = regex.compile(p, regex.DOTALL).search(text)
    while m is not None and m.start() >= len(text):
        return None
    return None if m is None else (m.start(), m.end(), m.groupdict())


def _as_match(d: _scan.Delimiter, text: str, pos: int, end: int, eos: bool) -> tuple[int, int, dict]:
    slots = _rx.capture(d.prog, text, pos, eos)
    groups = {
        n: (None if slots[i] == -1 or slots[i + 1] == -1 else text[slots[i] : slots[i + 1]])
        for n, i in d.group_names.items()
    }
    return (pos, end, groups)


@settings(
    max_examples=800, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(
    st.one_of(
        _patterns(),
        st.sampled_from(
            [
                r"\s*<tool_call>",
                r"\s*(?:<\|a\|>|<\|b\|>)",
                r"</f>\s*</t>",
                r"[^<]*<c>",
                r"(?:^|<m>)[^<]{0,3}<c>",
                r"^<t>",
                r"^\s*(?=<)",
                r"(?:a|^b)c",
                r"^(?:<a>|b)",
                r"(?:x|(?:^|y)z)",
            ]
        ),
    ),
    st.text(ALPHABET + "|cmftab", max_size=14),
    st.lists(st.text(ALPHABET + "|c", max_size=5), min_size=1, max_size=3),
)
def test_cursor_finds_the_leftmost_match_and_never_skips_one(p: str, text: str, conts: list[str]) -> None:
    made = _cursor(p)
    assume(made is not None)
    assert made is not None
    cur, d = made
    # End of stream: exactly the leftmost match of regex.search.
    status, pos, end = cur.advance(text, True, len(text) + 1, -1)
    expected = _leftmost(p, text)
    got = None if status == _scan.NONE else _as_match(d, text, pos, end, True)
    assert got == expected, (p, text)
    # Before end of stream: a match is final, and nothing starts before a reported position.
    cur2 = d.cursor({})
    status, pos, end = cur2.advance(text, False, len(text) + 1, -1)
    for cont in conts:
        full = _leftmost(p, text + cont)
        if status == _scan.MATCH:
            assert full == _as_match(d, text, pos, end, False), (p, text, cont)
        elif full is not None:
            assert full[0] >= min(pos, len(text)), (p, text, cont, status, pos)


@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
@given(_patterns(), st.text(ALPHABET, max_size=12), st.booleans())
def test_memos_shared_across_starts_keep_results_exact(p: str, text: str, eos: bool) -> None:
    # As a cursor runs them: successive starts share one context until a match is found.
    prog = _compile(p)
    assume(prog is not None)
    assert prog is not None
    ctx = _rx.MatchContext()
    for start in range(len(text) + 1):
        r = _rx.Attempt(prog, start, ctx).run(text, eos)
        if r is _rx.LIVE:
            ctx = _rx.MatchContext()
            continue
        if r is not None:
            ctx = _rx.MatchContext()
        if eos:
            assert _result(prog, r, text, start) == _ref(p, text, start), (p, text, start)
        elif r is not None:
            assert _result(prog, r, text, start, False) == _ref(p, text + "ab<", start), (p, text, start)


@pure_only
def test_a_live_attempt_inside_a_literal_resumes_without_work(monkeypatch: Any) -> None:
    """A long literal streamed in tokens (`<｜tool▁call▁begin｜>function...`): each resume that the
    new text still only begins is answered live at once (no interpreter set-up: no memo lookup),
    and the result is the same."""
    setups = [0]
    memo = _rx.MatchContext.memo

    def counting(self: Any, prog: Any) -> Any:
        setups[0] += 1
        return memo(self, prog)

    monkeypatch.setattr(_rx.MatchContext, "memo", counting)
    prog = _rx.compile_pattern(r"\s*<｜tool▁call▁begin｜>function<｜tool▁sep｜>(?P<name>[^\n<]+)\n")
    text = "  <｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\nrest"
    att = _rx.Attempt(prog, 0)
    for end in range(1, len(text) + 1):
        r = att.run(text[:end], False)
        if r is not _rx.LIVE:
            break
    assert r is not None and r is not _rx.LIVE and r[0] == text.index("\n") + 1
    # Inside the two literals (33 characters) no resume sets the interpreter up.
    assert setups[0] <= len(text) - 33


@pytest.mark.parametrize(
    "source, literal",
    [
        (r"^\s*<think>", "<think>"),
        (r"<tool_call>\s*(?:[^<\s]+)", "<tool_call>"),
        (r"(?:<a>|<b>)x", "x"),  # an alternation's literals are not required
        (r"(?:<think>)?[^<]*<\|content\|>", "<|content|>"),  # nor an optional group's
        (r"\s*", ""),
        (r"(?=<x>)", ""),  # a lookahead consumes nothing
    ],
)
def test_required_literal_is_in_every_match(source: str, literal: str) -> None:
    t = chatparse.load_response_template(
        {"start_anchor": "A", "fields": {"x": {"open_pattern": source, "close": "</x>"}, "c": {}}}
    )
    tree = t.fields["x"].opener.prog.tree
    assert tree is not None
    assert _rx.required_literal(tree) == literal
    for text in ("<think>", "a <tool_call> f", "<b>x", "<think>zz<|content|>", "  "):
        m = regex.search(source, text)
        if m is not None:
            assert literal in m.group(), (source, text)
