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
from chatparse._parser import _PREFIX_STATES, ResponseParser

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
    """`_lockstep_once` with both parsers made by the prompt's pass, then both restored from the
    prompt state it keeps (`_parser._PREFIX_STATES`). The two are compared only when made the same
    way: a restored state with a held tail makes its scanner at the first feed (`_start`), which
    notes a shorter searched stretch than the pass's scanner (a lower bound either way)."""
    for restored in (False, True):
        _lockstep_once(t, prefix, chunks, restored)


def _made(t: Any, prefix: str, restored: bool) -> ResponseParser:
    if not restored:
        _PREFIX_STATES.pop(t, None)  # (the pass, not a restored state)
    return ResponseParser(t, prefix=prefix)


def _lockstep_once(t: Any, prefix: str, chunks: list[str], restored: bool) -> None:
    """Feed `chunks` to two parsers: one as it is, one that never takes the quiet path (its mark
    cleared before every feed) and asks its scanner on an empty feed too. After every feed both
    returned the same, stand at the same position, and their scanners (when there is one) hold
    the same position and searched end."""
    fast = _made(t, prefix, restored)
    asked = _made(t, prefix, restored)
    emptied = False
    for c in chunks:
        asked._quiet = None
        if c:
            b = asked._feed(c)
        else:
            b = []  # an empty feed, asking the scanner again (what it did before it returned at once)
            asked._process(b, eos=False)
        a, b = _plain(fast._feed(c)), _plain(b)
        assert a == b and type(a) is type(b), (c, a, b)
        assert fast._pos == asked._pos and fast._buf == asked._buf
        emptied = emptied or not c
        sa, sb = fast._scanner, asked._scanner
        assert (sa is None) == (sb is None)
        if sa is not None and sb is not None:
            assert (sa.q, sa._tail_at) == (sb.q, sb._tail_at), c
            # (asked again on an empty feed, a scanner may note a shorter searched stretch: a
            # lower bound either way; after one, only the answers are compared)
            assert emptied or sa._searched == sb._searched, c
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
    empty = data.draw(st.lists(st.integers(0, len(chunks)), max_size=3), label="empty feeds at")
    for i in sorted(empty, reverse=True):
        chunks.insert(i, "")  # (an empty feed: a token that decodes to no text yet)
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
    # a leading loop (`\s*` before the closers): feeds that do not end in whitespace
    "qwen3_xml:content": ("Sure", " word", "<|im_end|>"),
    "deepseek_v3": (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{"q": "',
        " word",
        '"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ),
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
    assert counts[1] <= counts[0] <= 2, counts  # (the first may meet a character not yet in a class cache)


# --------------------------------------------------------------------------------------------
# Held tails: a marker streamed in pieces


def _prefilters() -> list[tuple[str, _scan.Prefilter]]:
    out = []
    for name, spec in sorted(CATALOG.items()):
        t = chatparse.load_response_template(spec)
        lists = [t.watch] + [f.watch for f in t.fields.values()]
        out += [(name, w.prefilter) for w in lists if w.prefilter is not None and not w.prefilter.inner]
    return out


PREFILTERS = _prefilters()


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_open_heads_are_the_tails_the_tries_hold(data: st.DataObject) -> None:
    """`Prefilter.open_heads` holds exactly the tails that begin a lead (`head_re` matches to the
    end) where no lead is complete at their start (`search_re` does not match): the held-tail
    check of `decide` looks a tail up there instead of running both tries."""
    name, pre = data.draw(st.sampled_from(PREFILTERS), label="prefilter")
    lead = data.draw(st.sampled_from(pre.literals), label="lead")
    alphabet = "".join(sorted(set("".join(pre.literals)))) + "x \n"
    tail = data.draw(
        st.one_of(
            st.integers(1, len(lead)).map(lambda k: lead[:k]),
            st.builds(lambda k, s: lead[:k] + s, st.integers(0, len(lead)), st.text(alphabet, max_size=4)),
            st.text(alphabet, min_size=1, max_size=8),
        ),
        label="tail",
    )
    tries = pre.head_re.match(tail) is not None and pre.search_re.match(tail) is None
    assert (tail in pre.open_heads) == tries, (name, tail)


class _Counted:
    """A compiled pattern whose `match` calls are counted."""

    def __init__(self, rx: Any, counts: list[int]) -> None:
        self._rx, self._counts = rx, counts

    def match(self, *args: Any) -> Any:
        self._counts[0] += 1
        return self._rx.match(*args)

    def search(self, *args: Any) -> Any:
        return self._rx.search(*args)


@pure_only
def test_a_marker_streamed_in_pieces_is_held_without_trie_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSeek's DSML markers arrive in pieces (`<`, `｜DSML｜`, `invoke`, ` name`, `="`...): once
    the tail no longer begins the lead it was first taken for, each piece is held by one lookup
    (`Prefilter.open_heads`), not the two tries' anchored matches (before: 2 a piece)."""
    t = chatparse.load_response_template(CATALOG["deepseek_dsml"])
    pre = t.watch.prefilter
    assert pre is not None and pre.open_heads
    matches = [0]
    monkeypatch.setattr(pre, "search_re", _Counted(pre.search_re, matches))
    monkeypatch.setattr(pre, "head_re", _Counted(pre.head_re, matches))
    pieces = ["Hi", " there", "<", "｜DSML｜", "function", "_", "calls", ">", "\n"]
    p = ResponseParser(t, prefix="")
    for piece in pieces[:3]:
        p.feed(piece)
    before = matches[0]
    for piece in pieces[3:7]:
        assert p.feed(piece) == []  # (held: the marker is still being written)
    assert matches[0] == before
    for piece in pieces[7:]:
        p.feed(piece)
    text = "".join(pieces) + '<｜DSML｜invoke name="f">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'
    p.feed(text[len("".join(pieces)) :])
    assert p.finalize()[0] == chatparse.parse_response(text, t, prefix="")


@pure_only
def test_an_empty_feed_does_not_ask_the_scanner(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token that decodes to no text yet (SGLang then steps the parser with "") changes nothing
    once a scanner holds: no processing pass (before: one, asking the scanner again)."""
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    head, word, tail = QUIET_CASES["qwen3_xml"]
    p = ResponseParser(t, prefix="")
    p.feed(head + word)
    passes = calls_of(monkeypatch, ResponseParser, "_process")
    decisions = calls_of(monkeypatch, _scan.Scanner, "decide")
    for piece in ["", "<", "", "/", ""]:
        p.feed(piece)
    assert passes[0] == 0 and decisions[0] == 2
    p.feed("function>\n</tool_call>")
    text = head + word + "</function>\n</tool_call>"
    assert p.finalize()[0] == chatparse.parse_response(text, t, prefix="")


@pure_only
def test_a_dsml_parameter_streamed_in_pieces_asks_the_scanner_at_its_tags_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeepSeek's DSML call body in the pieces its tokenizer makes: the scanner decides the
    pieces of a parameter's two tags that begin with a lead character or follow one (`<`,
    `｜DSML｜`, `</`, `｜DSML｜`, `parameter`), 5 of its 18 pieces; the rest are quiet, also right
    after a tag whose release was found by the prefilter (`Scanner._released`; before: 18)."""
    t = chatparse.load_response_template(CATALOG["deepseek_dsml"])
    head = ["<｜DSML｜function_calls>", "\n", '<｜DSML｜invoke name="f">', "\n"]
    param = ["<", "｜DSML｜", "parameter", " name", '="', "a", '"', " string", '="', "true", '">']
    param += ["some", " value", "</", "｜DSML｜", "parameter", ">", "\n"]
    tail = ["</｜DSML｜invoke>", "\n", "</｜DSML｜function_calls>"]
    decisions = calls_of(monkeypatch, _scan.Scanner, "decide")
    for k in (2, 8):
        p = ResponseParser(t, prefix="")
        for piece in head:
            p.feed(piece)
        before = decisions[0]
        for _ in range(k):
            for piece in param:
                p.feed(piece)
        assert decisions[0] - before == 5 * k
        for piece in tail:
            p.feed(piece)
        text = "".join(head + param * k + tail)
        assert p.finalize()[0] == chatparse.parse_response(text, t, prefix="")


@pure_only
def test_a_short_whitespace_run_is_held_without_the_run_finders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Content before a call often ends in a blank line (`\\n\\n` before `<tool_call>` or a DSML
    marker) that the leading `\\s*` of the call opener may take: the run is held. A run of up to 8
    characters is read back by the per-token path itself (one leading loop class: its run is the
    trailing run), without `_trailing` (before: one call, and its run finders, per such feed);
    a longer run still asks it. The holds are those of a parser that asks the scanner every feed."""
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    trailing = calls_of(monkeypatch, _scan.Scanner, "_trailing")
    prefix = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    for pieces, asked in [
        (["Let me check.", "\n\n"], 0),
        (["Let me check.", "\n", "\n"], 0),
        (["Let me check.", " \n", "\t \n"], 0),
        (["Let me check.", "\n", " " * 12], 1),  # (past 8 characters: asked)
    ]:
        p = ResponseParser(t, prefix=prefix)
        before = trailing[0]
        for piece in pieces:
            p.feed(piece)
        assert trailing[0] - before == asked, pieces
        assert p._pos == len(p.input_text) - len("".join(pieces[1:]))  # (the whole run held)
        _lockstep(t, prefix, [*pieces, "<tool_call>", "\n<function=f>\n</function>\n</tool_call>"])
        p.feed("<tool_call>\n<function=f>\n</function>\n</tool_call>")
        text = "".join(pieces) + "<tool_call>\n<function=f>\n</function>\n</tool_call>"
        assert p.finalize()[0] == chatparse.parse_response(text, t, prefix=prefix)
