"""Call-dense streams: the feeds where a call's delimiters are completed (issue 9 item 4).

In a call-dense stream fed in tokens most of the scanner's time goes to the few feeds of a call
that complete a delimiter or its long literal lead, not to the feeds in between. These tests count,
never time, what keeps those feeds cheap, for every catalog template with tool calls (new entries
join automatically), and check that the messages streamed that way equal the one-shot parse.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import pytest

import chatparse

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
