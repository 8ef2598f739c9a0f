"""Call-dense streams: the feeds where a call's delimiters are completed (issue 9 item 4).

In a call-dense stream fed in tokens most of the scanner's time goes to the few feeds of a call
that complete a delimiter or its long literal lead, not to the feeds in between. These tests count,
never time, what keeps those feeds cheap, for every catalog template with tool calls (new entries
join automatically), and check that the messages streamed that way equal the one-shot parse.
"""

from __future__ import annotations

import collections
import contextlib
import random
from typing import Any

import pytest

import chatparse
from chatparse import _parser, _scan

from ..support.build import skip_if_compiled
from .test_call_dense import CALL_TEMPLATES, _calls_text
from .test_linear import TEMPLATES


def _tokens(text: str, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    i = 0
    while i < len(text):
        k = rnd.randint(1, 4)
        out.append(text[i : i + k])
        i += k
    return out


class _CountingHead:
    """A prefilter's head trie (`Prefilter.head_re`) that counts the `match` calls made where a
    complete lead of the prefilter starts (where its lead trie matches)."""

    def __init__(self, head: Any, search: Any, counts: collections.Counter) -> None:
        self.head = head
        self.search_re = search
        self.counts = counts

    def match(self, buf: str, j: int) -> Any:
        self.counts["match"] += 1
        if self.search_re.match(buf, j) is not None:
            self.counts["at a complete lead"] += 1
        return self.head.match(buf, j)

    def search(self, *a: Any) -> Any:
        return self.head.search(*a)


@pytest.mark.parametrize("template", CALL_TEMPLATES)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_completed_lead_is_not_matched_against_the_head_trie(template: str, seed: int) -> None:
    """A held tail that begins a long literal lead (`<｜tool▁call▁begin｜>function<｜too`, cut to the
    prefilter's 32 characters) usually leaves the held-tail path by being written to its end.
    There the lead trie answers at once, while the head trie (every prefix of every lead, anchored
    at the end of the text) fails only after backtracking through each of its optional levels
    (~3 us for a 32-character lead, once per call): it is not asked where a lead is complete."""
    skip_if_compiled()
    t = TEMPLATES[template]
    text = _calls_text(t, 8, 3)
    assert text is not None
    counts: collections.Counter = collections.Counter()
    patched = []
    for watch in {id(w): w for w in [t.watch, *(f.watch for f in t.fields.values())]}.values():
        pre = watch.prefilter
        if pre is not None and not isinstance(pre.head_re, _CountingHead):
            patched.append((pre, pre.head_re))
            pre.head_re = _CountingHead(pre.head_re, pre.search_re, counts)
    try:
        p = chatparse.ResponseParser(t, prefix="")
        for piece in _tokens(text, seed):
            p.feed(piece)
        got = p.finalize()[0]
    finally:
        for pre, head in patched:
            pre.head_re = head
    assert counts["at a complete lead"] == 0, (template, counts)
    try:
        want = chatparse.parse_response(text, t, prefix="")
    except ValueError:
        return
    assert got == want


def _stream_counting(t: Any, text: str, seed: int, counts: collections.Counter) -> dict:
    """Stream `text` in 1-4 character tokens, counting (in `counts`) the searches of a
    prefilter's lead trie made outside `_prefiltered` (where there is no `back` to search)."""
    skip_if_compiled()
    scanner = _scan.Scanner
    prefiltered = vars(scanner)["_prefiltered"]
    inside = [0]

    def counted_prefiltered(self: Any, buf: str, pre: Any) -> Any:
        inside[0] += 1
        try:
            return prefiltered(self, buf, pre)
        finally:
            inside[0] -= 1

    class Search:
        def __init__(self, rx: Any, back: int) -> None:
            self.rx = rx
            self.back = back

        def search(self, *a: Any) -> Any:
            if not inside[0] and not self.back:
                counts["lead search outside _prefiltered"] += 1
            return self.rx.search(*a)

        def match(self, *a: Any) -> Any:
            return self.rx.match(*a)

    patched = []
    for watch in {id(w): w for w in [t.watch, *(f.watch for f in t.fields.values())]}.values():
        pre = watch.prefilter
        if pre is not None and not isinstance(pre.search_re, Search):
            patched.append((pre, pre.search_re))
            pre.search_re = Search(pre.search_re, pre.back)
    scanner._prefiltered = counted_prefiltered  # type: ignore[method-assign]
    try:
        p = chatparse.ResponseParser(t, prefix="")
        for piece in _tokens(text, seed):
            p.feed(piece)
        return p.finalize()[0]
    finally:
        scanner._prefiltered = prefiltered  # type: ignore[method-assign]
        for pre, rx in patched:
            pre.search_re = rx


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_a_walk_starts_at_the_lead_the_prefilter_found(template: str) -> None:
    """`_chain_decide` walks from the leftmost lead that `_prefiltered` has just found, without
    searching the lead trie for it a second time (once per call opener and closer)."""
    t = TEMPLATES[template]
    text = _calls_text(t, 8, 3)
    assert text is not None
    counts: collections.Counter = collections.Counter()
    got = _stream_counting(t, text, 1, counts)
    assert counts["lead search outside _prefiltered"] == 0, counts
    try:
        want = chatparse.parse_response(text, t, prefix="")
    except ValueError:
        return
    assert got == want


def test_walked_captures_leave_out_groups_that_took_no_part() -> None:
    """The captures of a walked match come from one `regex` match: its `groupdict()` as it is when
    every group took part, without the groups that did not otherwise (an optional group)."""
    t = chatparse.load_response_template(
        {
            "start_anchor": "A",
            "fields": {
                "tool_calls": {
                    "open_pattern": r"<c>(?:(?P<ns>ns)\.)?(?P<name>[^\n<]+)\n",
                    "close": "</c>",
                    "repeats": True,
                    "transform": {"name": "{name}", "ns": "{ns}"},
                },
                "content": {},
            },
        }
    )
    opener = t.fields["tool_calls"].opener
    assert opener.walks is not None
    assert _scan._captures(opener, "x<c>ns.f\n", 1, False, None, True) == {"ns": "ns", "name": "f"}
    assert _scan._captures(opener, "x<c>f\n", 1, False, None, True) == {"name": "f"}
    for text in ("<c>ns.f\n{}</c><c>g\n{}</c>", "<c>g\n{}</c>"):
        p = chatparse.ResponseParser(t, prefix="")
        events = [e for ch in text for e in p.feed(ch)]
        opens = [e["captures"] for e in events if e["type"] == "region_open" and e["field"] == "tool_calls"]
        want = [{"ns": "ns", "name": "f"}, {"name": "g"}] if text.startswith("<c>ns") else [{"name": "g"}]
        assert opens == want


@pytest.mark.parametrize("template", CALL_TEMPLATES)
def test_an_opener_commit_does_not_close_an_unopened_region(template: str) -> None:
    """Between two calls the implicit region holds no text (it never opened): the next call's
    opener commit opens the call without a `_close` call for it (before: one per call, which only
    reset what the opener then sets). Counted as `_close` calls on an unopened region at one place
    (`start == end`): they do not grow with the number of calls."""
    skip_if_compiled()
    t = TEMPLATES[template]
    close = vars(_parser.ResponseParser)["_close"]
    counts: collections.Counter = collections.Counter()

    def counted(self: Any, events: list, start: int, end: int, complete: bool) -> None:
        if not self._opened and start == end:
            counts["unopened"] += 1
        close(self, events, start, end, complete)

    def unopened(n_calls: int) -> int:
        text = _calls_text(t, n_calls, 3)
        assert text is not None
        counts.clear()
        _parser.ResponseParser._close = counted  # type: ignore[method-assign]
        try:
            p = chatparse.ResponseParser(t, prefix="")
            for piece in _tokens(text, 2):
                p.feed(piece)
            got = p.finalize()[0]
        finally:
            _parser.ResponseParser._close = close  # type: ignore[method-assign]
        with contextlib.suppress(ValueError):  # (a template whose one-shot parse raises here)
            assert got == chatparse.parse_response(text, t, prefix="")
        return counts["unopened"]

    assert unopened(8) == unopened(2), template
