"""The start anchor's last match in a prompt (`Template.truncate_past_last_anchor`): a single
literal anchor that no two occurrences can overlap is found by `str.rfind` (`anchor_last`); the
answer is the last of the leftmost non-overlapping matches either way (transformers' `finditer`)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import catalog
from chatparse._template import _borderless

ALPHABET = "ab<|>\n"


def _template(anchor: str) -> chatparse.Template:
    return chatparse.load_response_template(
        {"start_anchor": anchor, "fields": {"content": {}, "x": {"open": "<x>", "close": "</x>"}}}
    )


def _reference(anchor: str, text: str) -> str:
    last = None
    for m in re.finditer(re.escape(anchor), text):
        last = m.end()
    return text if last is None else text[last:]


def test_borderless() -> None:
    assert _borderless("<|im_start|>assistant\n")
    assert _borderless("ab") and _borderless("a") and _borderless("aab")
    assert not _borderless("aa") and not _borderless("abab") and not _borderless("aba")


@settings(max_examples=400, deadline=None)
@given(st.text(ALPHABET, min_size=1, max_size=4), st.text(ALPHABET, max_size=40))
def test_the_last_match_is_the_reference_s(anchor: str, text: str) -> None:
    t = _template(anchor)
    assert (t.anchor_last is not None) == _borderless(anchor)
    assert t.truncate_past_last_anchor(text) == _reference(anchor, text)


def test_overlapping_occurrences_follow_finditer() -> None:
    # "aa" in "aaa": finditer matches at 0 only (its next search starts at 2), rfind would say 1
    t = _template("aa")
    assert t.anchor_last is None
    assert t.truncate_past_last_anchor("aaa") == "a"
    assert t.truncate_past_last_anchor("xaaaay") == "y"


def test_catalog_literal_anchors_take_rfind() -> None:
    taken = 0
    for name in catalog.names():
        t = chatparse.load_response_template(catalog.get(name))
        lits = t.anchor_literals
        if lits is not None and len(lits) == 1:
            assert t.anchor_last == lits[0], name  # every catalog literal anchor is borderless
            taken += 1
            prompt = "sys" + lits[0] + "one" + lits[0] + "two"
            assert t.truncate_past_last_anchor(prompt) == "two"
    assert taken >= 20
