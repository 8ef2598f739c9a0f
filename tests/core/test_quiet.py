"""Quiet feeds: `ResponseParser._feed` releasing a feed without asking its scanner.

When the scanner's last answer released everything through a path that a feed without its trip
characters takes again (`Scanner.quiet`: no lead character in the new text, no literal's first
character, no quote or backslash inside a JSON string of a value-closed body), the parser moves
the scanner's position to the end itself. These tests check that this is exactly the scanner's
own answer (the same return value, position and scanner state after every feed as a parser that
asks the scanner every time, for every catalog template and random templates, texts and splits),
and count what it removes: the scanner's decisions on the ordinary feeds of a call body, a JSON
string and a reasoning block.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import _scan, catalog
from chatparse._parser import ResponseParser

from ..support.build import pure_only
from ..support.counting import calls_of
from . import strategies as cst

CATALOG = {name: catalog.get(name) for name in catalog.names()}

# Text rich in what trips a quiet scanner (lead characters, quotes, backslashes, brackets) and in
# what does not, so quiet stretches and their ends both occur often.
_NOISE = st.lists(
    st.sampled_from(
        ['"', "\\", "<", ">", "/", "{", "}", "[", "]", " ", "\n", "a", "word", "'", "|", "=", ":"]
    ),
    max_size=12,
).map("".join)


def _plain(r: Any) -> Any:
    """A feed's answer with its events' errors as (type, message): exceptions compare by identity."""
    if isinstance(r, str):
        return r
    return [{**e, "error": (type(e["error"]).__name__, str(e["error"]))} if "error" in e else e for e in r]


def _lockstep(t: Any, prefix: str, chunks: list[str]) -> None:
    """Feed `chunks` to two parsers: one as it is, one that never takes the quiet path (its mark
    cleared before every feed). After every feed both returned the same, stand at the same
    position, and their scanners (when there is one) hold the same position and searched end."""
    fast = ResponseParser(t, prefix=prefix)
    asked = ResponseParser(t, prefix=prefix)
    for c in chunks:
        asked._quiet = None
        a, b = _plain(fast._feed(c)), _plain(asked._feed(c))
        assert a == b and type(a) is type(b), (c, a, b)
        assert fast._pos == asked._pos and fast._buf == asked._buf
        sa, sb = fast._scanner, asked._scanner
        assert (sa is None) == (sb is None)
        if sa is not None and sb is not None:
            assert (sa.q, sa._searched, sa._tail_at) == (sb.q, sb._searched, sb._tail_at), c
    asked._quiet = None
    try:
        ma, ea = fast.finalize()
    except ValueError as e:  # RequiredFieldsMissing: the same either way
        with pytest.raises(ValueError, match="."):
            asked.finalize()
        assert str(e)
        return
    mb, eb = asked.finalize()
    assert ma == mb and _plain(ea) == _plain(eb)
    with pytest.raises(RuntimeError):
        fast.feed("x")  # finalized: a quiet mark left from the last feed is no way around it


@pytest.mark.parametrize("name", sorted(CATALOG))
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_quiet_feed_is_the_scanners_own_answer(name: str, data: st.DataObject) -> None:
    spec = CATALOG[name]
    t = chatparse.load_response_template(spec)
    prefix = data.draw(cst.prefixes_for(spec), label="prefix")
    pieces = data.draw(
        st.lists(st.one_of(cst.texts_for(spec, max_pieces=6), _NOISE), max_size=5), label="text"
    )
    text = "".join(pieces)
    chunks = data.draw(cst.chunkings(text, cst.delimiter_strings(spec)), label="chunks")
    _lockstep(t, prefix, chunks)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cst.chunked_cases())
def test_a_quiet_feed_is_the_scanners_own_answer_for_random_templates(case: tuple) -> None:
    spec, prefix, _, chunks = case
    try:
        t = chatparse.load_response_template(spec)
    except ValueError:
        return
    _lockstep(t, prefix, chunks)


# The ordinary feeds of a region, word by word: (template, text before, one feed, text after).
QUIET_CASES = {
    # qwen3_xml's call body watches `</function>` (one lead, `<`): parameter values
    "qwen3_xml": (
        "<tool_call>\n<function=f>\n<parameter=a>\n",
        " word",
        "\n</parameter>\n</function>\n</tool_call>",
    ),
    # gpt-oss's JSON call body (a value close, a string guard): inside an argument string
    "gpt_oss": (
        '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"q": "',
        " word",
        '"}<|call|>',
    ),
    # DeepSeek's DSML call body (two lead characters and an `after` literal)
    "deepseek_dsml": (
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">',
        " word",
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    ),
    # a literal closer (gpt-oss's analysis channel ends at `<|end|>`)
    "gpt_oss:reasoning": ("<|channel|>analysis<|message|>", " word", "<|end|>"),
}


@pure_only
@pytest.mark.parametrize("case", sorted(QUIET_CASES))
def test_ordinary_feeds_do_not_ask_the_scanner(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A region's ordinary feeds (no lead character; inside a JSON string, no quote or backslash
    either) are released by the parser without a scanner decision: the decisions of a region fed
    word by word do not grow with its words (before: one per feed)."""
    t = chatparse.load_response_template(CATALOG[case.split(":")[0]])
    head, word, tail = QUIET_CASES[case]
    decisions = calls_of(monkeypatch, _scan.Scanner, "decide")
    counts = []
    for words in (10, 60):
        p = ResponseParser(t, prefix="")
        p.feed(head)
        before = decisions[0]
        for _ in range(words):
            p.feed(word)
        counts.append(decisions[0] - before)
        p.feed(tail)
        message = p.finalize()[0]
        assert message == chatparse.parse_response(head + word * words + tail, t, prefix="")
    assert counts[0] == counts[1] <= 2, counts
