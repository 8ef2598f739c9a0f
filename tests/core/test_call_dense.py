"""Call-dense streams: the scanner's work per call is bounded (issue 9 item 4; issue 13's speed).

Streams of many tool calls in token-sized feeds once cost several times SGLang's detectors per feed,
because the scanner ran a full cursor scan on most feeds of a call: in call bodies whose closer
only counts outside JSON strings (every feed), while an opener or closer was being written (every
feed resumed its attempt through the matcher, however little the new text changed), and while a
long literal lead such as `<｜tool▁call▁begin｜>function<｜tool▁sep｜>` streamed in (a trie search
per feed). Each of those now has a fast path; these tests count, never time, what keeps them:

* cursor scans per call do not grow with the length of the arguments;
* attempt resumptions per call are bounded however finely the text is split;
* a long lead streamed one character at a time is searched for once, then followed by `startswith`;

for every catalog template with tool calls (new entries join automatically), and the messages
streamed that way equal the one-shot parse.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import _rx, _scan, catalog

from ..support.build import skip_if_compiled
from .test_linear import CALLS, TEMPLATES, _field_sample, count_calls, stream_chars

N_CALLS = 10


def _calls_text(t: Any, n_calls: int, words: int) -> str | None:
    """`n_calls` calls written with the template's own call opener and closer (their shortest
    matches), arguments of `words` words (no whitespace: whitespace has its own linear tests)."""
    k_open = _field_sample(t, CALLS, "opener")
    if not k_open:
        return None
    k_close = _field_sample(t, CALLS, "closer") or ""
    body = '{"name":"get_weather","arguments":{"city":"' + "Paris-" * words + '"}}'
    return "Sure.\n" + "".join(k_open + body + k_close + "\n" for _ in range(n_calls))


CALL_TEMPLATES = sorted(name for name, t in TEMPLATES.items() if _calls_text(t, 1, 1) is not None)


@contextmanager
def _counting() -> Iterator[collections.Counter]:
    skip_if_compiled()
    counts: collections.Counter = collections.Counter()
    patched = []
    for owner, name in (
        (_scan.Scanner, "_scan"),
        (_scan.PatternCursor, "resume"),
        (_scan.LiteralCursor, "advance"),
    ):
        original = vars(owner)[name]

        def counted(*a: Any, _o: Any = original, _n: str = name, **k: Any) -> Any:
            counts[_n] += 1
            return _o(*a, **k)

        patched.append((owner, name, original))
        setattr(owner, name, counted)
    try:
        yield counts
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


def _stream(t: Any, text: str, size: int) -> tuple[dict, collections.Counter]:
    with _counting() as counts:
        p = chatparse.ResponseParser(t, prefix="")
        for i in range(0, len(text), size):
            p.feed(text[i : i + size])
        message, _ = p.finalize()
    return message, counts


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_cursor_scans_per_call_do_not_grow_with_the_arguments(template: str) -> None:
    """In a call body only the closer's own text asks the cursors: with a JSON-string guard
    (`close_outside_strings`, `close_after_value`) the prefilter decides every feed with no lead in
    it, as it does without one (before: one scan per feed in 29 of 55 templates' call bodies)."""
    t = TEMPLATES[template]
    short, long_ = _calls_text(t, N_CALLS, 2), _calls_text(t, N_CALLS, 24)
    assert short is not None and long_ is not None
    _, a = _stream(t, short, 1)
    _, b = _stream(t, long_, 1)
    assert b["_scan"] <= a["_scan"] + 2, (template, a["_scan"], b["_scan"])
    assert a["_scan"] <= 8 * N_CALLS, (template, a["_scan"])


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_live_attempts_are_not_resumed_on_every_feed(template: str) -> None:
    """While a delimiter is being written, a feed that leaves its attempt live where it stopped
    (inside a literal, a run, a lookahead's body, a literal cursor's tail) is decided by
    `still_live`, not by resuming the matcher (before: up to 137 resumptions per call, one per
    character of the opener and closer)."""
    t = TEMPLATES[template]
    text = _calls_text(t, N_CALLS, 2)
    assert text is not None
    _, one = _stream(t, text, 1)
    _, four = _stream(t, text, 4)
    assert one["resume"] <= 16 * N_CALLS, (template, one["resume"])
    # One character per feed asks barely more than four: the resumptions follow the delimiters'
    # structure, not the number of feeds.
    assert one["resume"] <= 2 * four["resume"] + 5 * N_CALLS, (template, one["resume"], four["resume"])
    assert one["advance"] <= 16 * N_CALLS, (template, one["advance"])


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_call_dense_streams_equal_one_shot(template: str) -> None:
    t = TEMPLATES[template]
    text = _calls_text(t, 4, 3)
    assert text is not None
    try:
        want: Any = chatparse.parse_response(text, t, prefix="")
    except ValueError as e:
        want = type(e)
    for size in (1, 2, 3, 5, 7):
        p = chatparse.ResponseParser(t, prefix="")
        for i in range(0, len(text), size):
            p.feed(text[i : i + size])
        try:
            got: Any = p.finalize()[0]
        except ValueError as e:
            got = type(e)
        if isinstance(want, dict) and isinstance(got, dict):
            assert got == want, (template, size)


@pytest.mark.parametrize("family", ["deepseek_v3", "kimi_k2"])
def test_a_long_lead_streamed_in_is_searched_for_once(family: str) -> None:
    """`<｜tool▁call▁begin｜>function<｜tool▁sep｜>` streamed one character at a time: the tail that
    begins it is found by one trie search, then followed with `startswith` (before: a search of
    the trie per feed)."""
    t = chatparse.load_response_template(catalog.get(family))
    pre = t.watch.prefilter
    assert pre is not None
    opener = _field_sample(t, CALLS, "opener")
    assert opener is not None and len(opener) > 16
    counts = collections.Counter()

    class Counting:
        def __init__(self, rx: Any) -> None:
            self.rx = rx

        def search(self, *a: Any) -> Any:
            counts["head"] += 1
            return self.rx.search(*a)

        def match(self, *a: Any) -> Any:
            return self.rx.match(*a)

    head = pre.head_re
    pre.head_re = Counting(head)
    try:
        p = chatparse.ResponseParser(t, prefix="")
        for ch in "Sure." + opener:
            p.feed(ch)
    finally:
        pre.head_re = head
    assert counts["head"] <= 3, counts


# ------------------------------------------------------------------------------------------------
# `still_live` answers only what the full matcher would answer


_LIVE_PATTERNS = [
    r"<tool_call>\s*(?P<n>[^<\s]+)\s*<x>",
    r"\s*<｜a｜>function<｜b｜>(?P<name>[^\n<]+)\n```json\n",
    r"<\|end\|>(?:[^<]{0,16}(?=<\|begin\|>|<\|stop\|>))?",
    r"\{(?=\s*\"name\")",
    r"ab+?c",
    r"(?:x|xy)*z",
]
_LIVE_TEXT = '<tool_call> nm<x>｜a｜>function<｜b｜>get\n```json\n<|end|> t<|begin|>{ "name"abbbcxyz'


@pytest.mark.parametrize("pattern", _LIVE_PATTERNS)
@settings(max_examples=200, deadline=None)
@given(
    start=st.integers(0, 40),
    cut=st.integers(0, 30),
    more=st.integers(1, 12),
    data=st.data(),
)
def test_still_live_implies_the_matcher_stays_live(
    pattern: str, start: int, cut: int, more: int, data: Any
) -> None:
    prog = _rx.compile_pattern(pattern)
    pieces = data.draw(
        st.sampled_from([_LIVE_TEXT, _LIVE_TEXT.replace(" ", ""), "<|end|>abc<|begi", "  <｜a｜>func"])
    )
    text = pieces[start % max(1, len(pieces)) :]
    first = text[: cut + 1]
    second = text[: cut + 1 + more]
    att = _rx.Attempt(prog, 0)
    if att.run(first, False) is not _rx.LIVE:
        return
    if att.still_live(second):
        twin = _rx.Attempt(prog, 0)
        twin.run(first, False)
        assert twin.run(second, False) is _rx.LIVE, (pattern, first, second)


@settings(max_examples=300, deadline=None)
@given(
    lits=st.lists(st.text("ab<|>", min_size=1, max_size=5), min_size=1, max_size=3),
    text=st.text("ab<|>", max_size=8),
    more=st.text("ab<|>", min_size=1, max_size=3),
)
def test_literal_still_live_implies_advance_is_live(lits: list[str], text: str, more: str) -> None:
    d = _scan.Delimiter("|".join(lits), lits)
    c = d.cursor({})
    status, pos, _ = c.advance(text, False, len(text) + 1, -1)
    if status != _scan.LIVE:
        return
    c.q = pos
    if c.still_live(text + more):
        fresh = d.cursor({})
        fresh.q = pos
        assert fresh.advance(text + more, False, pos, -1)[:2] == (_scan.LIVE, pos)


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_closing_a_call_walks_no_transform_tree(template: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every catalog transform is compiled once into one function (`_content.compile_transform`): closing
    a call no longer walks the transform with a regex test per string (~40 Python calls a call)."""
    from chatparse import _content

    walks = collections.Counter()
    original = _content._apply

    def counted(*a: Any) -> Any:
        walks["depth"] += 1
        try:
            value = original(*a)
        finally:
            walks["depth"] -= 1
        # (a transform that fails is walked again, for the reference's error: not counted)
        walks["apply"] += walks["depth"] == 0
        return value

    monkeypatch.setattr(_content, "_apply", counted)
    t = TEMPLATES[template]
    text = _calls_text(t, N_CALLS, 2)
    assert text is not None
    _stream(t, text, 3)
    assert walks["apply"] == 0, template


def test_every_catalog_transform_is_compiled() -> None:
    from chatparse import _content

    transforms = [(n, f.name, f.transform) for n, t in TEMPLATES.items() for f in t.fields.values()]
    assert [x for x in transforms if x[2] is not None and _content.compile_transform(x[2]) is None] == []


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_a_resumed_attempt_is_not_asked_still_live_again(template: str) -> None:
    """`decide` asks a live attempt `still_live` first; when that says no, the matcher resumes it
    without asking again (`Attempt.run(checked=True)`), and a new attempt is not asked either (the
    interpreter finds the same at its first instruction): before, every resumption and every new
    attempt paid for a second `still_live`."""
    asked: collections.Counter = collections.Counter()
    running: list[tuple[Any, bool]] = []
    still_live = _rx.Attempt.still_live
    resume = _scan.PatternCursor.resume
    run = _rx.Attempt.run

    def counted_still_live(self: Any, buf: str) -> bool:
        if running and running[-1][0] is self and running[-1][1]:
            asked["again"] += 1
        return still_live(self, buf)

    def counted_resume(self: Any, buf: str, zw: int) -> bool:
        asked["resume"] += 1
        return resume(self, buf, zw)

    def counted_run(self: Any, buf: str, eos: bool, checked: bool = False) -> Any:
        # asked again: a resumption right after `still_live` said no, or a new attempt
        running.append((self, checked or self.pc == 0))
        asked["checked"] += checked
        try:
            return run(self, buf, eos, checked)
        finally:
            running.pop()

    t = TEMPLATES[template]
    text = _calls_text(t, N_CALLS, 2)
    assert text is not None
    try:
        _rx.Attempt.still_live = counted_still_live  # type: ignore[method-assign]
        _scan.PatternCursor.resume = counted_resume  # type: ignore[method-assign]
        _rx.Attempt.run = counted_run  # type: ignore[method-assign]
        message, _ = _stream(t, text, 2)
    finally:
        _rx.Attempt.still_live = still_live  # type: ignore[method-assign]
        _scan.PatternCursor.resume = resume  # type: ignore[method-assign]
        _rx.Attempt.run = run  # type: ignore[method-assign]
    assert asked["again"] == 0, (template, asked)
    assert asked["checked"] > 0 or asked["resume"] == 0, (template, asked)
    try:
        want: Any = chatparse.parse_response(text, t, prefix="")
    except ValueError:
        return
    assert message == want, template


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_a_delimiter_ended_by_a_feed_is_committed_without_a_scan(template: str) -> None:
    """When the attempt that alone held the text matches, the scan that set the hold has already
    decided every other cursor at that position, so `decide` commits the best match there at once
    (`Scanner._commit_found`, also under a JSON string guard; before, a full cursor scan per
    opener and closer: 4 scans a call on qwen3_xml, kimi_k2 and deepseek_v3, now 2)."""
    seen: collections.Counter = collections.Counter()
    state: dict[str, Any] = {}
    decide, scan, resume = _scan.Scanner.decide, _scan.Scanner._scan, _scan.PatternCursor.resume

    def counted_decide(self: Any, buf: str, eos: bool, zw: int = -1) -> Any:
        state.clear()
        state["scanner"] = self
        guard = self.guard
        state["single"] = (guard is None or not guard.value_close) and len(self.pending[0]) == 1
        return decide(self, buf, eos, zw)

    def counted_resume(self: Any, buf: str, zw: int) -> bool:
        live = resume(self, buf, zw)
        state["matched"] = not live and self.found is not None
        return live

    def counted_scan(self: Any, buf: str, eos: bool, zw: int) -> Any:
        if state.get("scanner") is self and state.get("matched") and state.get("single"):
            seen["scan after a match"] += 1
        seen["scan"] += 1
        return scan(self, buf, eos, zw)

    t = TEMPLATES[template]
    text = _calls_text(t, N_CALLS, 2)
    assert text is not None
    try:
        _scan.Scanner.decide = counted_decide  # type: ignore[method-assign]
        _scan.Scanner._scan = counted_scan  # type: ignore[method-assign]
        _scan.PatternCursor.resume = counted_resume  # type: ignore[method-assign]
        p = chatparse.ResponseParser(t, prefix="")
        for i in range(0, len(text), 2):
            p.feed(text[i : i + 2])
        message, _ = p.finalize()
    finally:
        _scan.Scanner.decide = decide  # type: ignore[method-assign]
        _scan.Scanner._scan = scan  # type: ignore[method-assign]
        _scan.PatternCursor.resume = resume  # type: ignore[method-assign]
    assert seen["scan after a match"] == 0, (template, seen)
    if template in ("qwen3_xml", "deepseek_v3", "kimi_k2"):
        assert seen["scan"] <= 2 * N_CALLS + 3, (template, seen)
    try:
        want: Any = chatparse.parse_response(text, t, prefix="")
    except ValueError:
        return
    assert message == want, template


def test_guarded_call_bodies_take_the_inlined_path() -> None:
    """Kimi K2's call bodies close outside JSON strings only (a string guard, no leading loop): a
    feed with no `<` releases everything through `decide`'s inlined per-token path, as in unguarded
    bodies, without calling the prefilter (before: one `_prefiltered` call per feed)."""
    t = chatparse.load_response_template(catalog.get("kimi_k2"))

    def stream(words: int) -> int:
        call = '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": "' + "x " * words + '"}'
        text = (
            "<|tool_calls_section_begin|>" + (call + "<|tool_call_end|>") * 3 + "<|tool_calls_section_end|>"
        )
        with count_calls((_scan.Scanner, "_prefiltered")) as counts:
            message = stream_chars(t, text)
        assert len(message["tool_calls"]) == 3
        return counts["_prefiltered"]

    assert stream(200) == stream(2)
