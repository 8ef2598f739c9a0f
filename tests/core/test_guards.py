"""Which `regex` module calls run without a time limit, and why that is safe.

A `regex` call with `timeout=` costs a few microseconds more than one without (measured in
`benchmarks/bench_core.py`), so a pattern runs unguarded only where `_rx.backtrack_bound` proves at
load time that one match attempt takes a bounded number of character tests whatever the text: then
a scan costs O(text) and cannot hang. These tests check

* the proof itself: for random patterns and texts, a naive backtracking matcher (no memo, the
  `regex` module's priority order) never makes more character tests than the bound;
* every catalog template (new entries join automatically): every lookbehind is proven (a catalog
  lookbehind that is not is a performance bug: it would run guarded), and the guarded calls that
  remain are the ones listed here;
* the guarded path for a hostile lookbehind still does work linear in the text, counted in calls.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import regex
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chatparse import ResponseParser, _content, _rx, catalog, load_response_template
from chatparse._rx import Node, Op

# ------------------------------------------------------------------------------------------------
# The bound is sound: a naive backtracking matcher counts its character tests


class _Naive:
    """A backtracking matcher over `_rx` trees (no memo), matching right to left for a lookbehind."""

    def __init__(self, text: str, reverse: bool) -> None:
        self.s = text
        self.reverse = reverse
        self.tests = 0

    def atom(self, node: Node, pos: int) -> int | None:
        s = self.s
        if self.reverse:
            if pos == 0:
                return None
            ch, nxt = s[pos - 1], pos - 1
        else:
            if pos >= len(s):
                return None
            ch, nxt = s[pos], pos + 1
        self.tests += 1
        return nxt if _rx._atom_matches(node, ch) else None

    def m(self, node: Node, pos: int, k: Callable[[int], bool]) -> bool:
        op = node.op
        if op in _rx.ATOMS:
            p = self.atom(node, pos)
            return p is not None and k(p)
        if op in (Op.CAT, Op.GROUP):
            seq = _rx._flat(node, [])
            if self.reverse:
                seq = seq[::-1]
            return self.seq(seq, 0, pos, k)
        if op is Op.ALT:
            return any(self.m(kid, pos, k) for kid in node.kids)
        if op is Op.EMPTY:
            return k(pos)
        assert op is Op.REP
        lo, hi, kind = node.args
        body = node.kids[0]

        def rep(count: int, p: int) -> bool:
            more = hi is None or count < hi
            if kind == "lazy":
                if count >= lo and k(p):
                    return True
                return more and self.m(body, p, lambda q: (q != p or count < lo) and rep(count + 1, q))
            if more and self.m(body, p, lambda q: (q != p or count < lo) and rep(count + 1, q)):
                return True
            return count >= lo and k(p)

        return rep(0, pos)

    def seq(self, seq: list[Node], i: int, pos: int, k: Callable[[int], bool]) -> bool:
        if i == len(seq):
            return k(pos)
        return self.m(seq[i], pos, lambda p: self.seq(seq, i + 1, p, k))


_ATOM_SRC = st.sampled_from(["a", "b", "<", "[ab]", r"\s", "[^<]", r"[^a\s]", "."])
_QUANT = st.sampled_from(["", "?", "{0,3}", "{1,4}", "{2}", "{0,5}?", "{1,3}?"])


@st.composite
def _patterns(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            branches = [draw(_patterns(depth + 1)) for _ in range(draw(st.integers(1, 3)))]
            item = "(?:" + "|".join(branches) + ")"
        else:
            item = draw(_ATOM_SRC)
        parts.append(item + draw(_QUANT))
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(_patterns(), st.text(alphabet="ab< x", max_size=24), st.booleans())
def test_the_bound_counts_every_character_test_of_a_backtracking_matcher(
    pattern: str, text: str, reverse: bool
) -> None:
    tree = _rx._Parser(pattern, regex.DOTALL).parse()
    bound = _rx.backtrack_bound(tree, reverse)
    # Every repeat here is bounded; a bound past the cap (nested repeats) proves nothing to check.
    assume(bound is not None and bound <= 10**6)
    for pos in range(len(text) + 1):
        naive = _Naive(text, reverse)
        matched = naive.m(tree, pos, lambda p: True)
        assert naive.tests <= bound, (pattern, text, pos, naive.tests, bound)
        # The naive matcher is a real one: it agrees with the `regex` module.
        if reverse:
            expected = regex.compile(f"(?<={pattern})", regex.DOTALL).match(text, pos) is not None
        else:
            expected = regex.compile(pattern, regex.DOTALL).match(text, pos) is not None
        assert matched == expected, (pattern, text, pos)


@pytest.mark.parametrize(
    ("pattern", "reverse", "expected"),
    [
        ("</invoke>", True, 10),  # literals: one test each, plus the end
        (";", True, 2),
        # A bounded run before a character it cannot match is forced: it adds, not multiplies.
        (r"</parameter>\s{0,64}", True, 143),
        # ... including before a class it cannot match (decided over every code point).
        (r"to=[^\s<]{1,256}[ \t]{0,16}", True, 1317),
    ],
)
def test_bound_values(pattern: str, reverse: bool, expected: int) -> None:
    assert _rx.backtrack_bound(_rx._Parser(pattern, regex.DOTALL).parse(), reverse) == expected


@pytest.mark.parametrize(
    "pattern",
    [
        r"a*b",  # unbounded
        r"(?:a|aa){1,200}b",  # exponential in the repeat count: beyond any bound
        r"\1",  # back-references: not parsed, never proven
        r"(?P<x>a)(?P=x)",
    ],
)
def test_unprovable_patterns_have_no_bound(pattern: str) -> None:
    assert _rx.proven_bound(pattern, regex.DOTALL) is None
    assert not _rx.is_proven_cheap(pattern, regex.DOTALL)


def test_overlapping_runs_multiply() -> None:
    b = _rx.proven_bound(r"\s{0,64}\s{0,64}\s{0,64}x", regex.DOTALL)
    assert b is not None and b > _rx.SAFE_STEPS


# ------------------------------------------------------------------------------------------------
# The catalog: what runs guarded

#: Guarded calls that remain in catalog templates (an unbounded repeat in the pattern): the start
#: anchors below, every xml-inline `tag_pattern` (they all end a value with `.*?` or a `[^<]*` run)
#: and every json `string_delims` pair (`OPEN(.*?)CLOSE`).
GUARDED_ANCHORS = {"granite33", "granite33_hf", "granite_20b_fc", "hy3"}


@pytest.mark.parametrize("name", catalog.names())
def test_catalog_guards(name: str) -> None:
    t = load_response_template(catalog.get(name))
    for where, src, guarded in t.regex_guards():
        if "lookbehind" in where:
            assert not guarded, f"{name}: {where} {src!r} is not proven cheap: it would run with a time limit"
        elif where == "start_anchor":
            assert guarded == (name in GUARDED_ANCHORS), (name, src)
            if t.anchor_literals is not None:
                assert not guarded
        else:
            assert guarded, (name, where, src)  # every catalog content pattern has an unbounded run
        bound = _rx.proven_bound(src, regex.DOTALL)
        assert guarded == (bound is None or bound > _rx.SAFE_STEPS) or "lookbehind" in where


def test_catalog_lookbehinds_exist() -> None:
    """The catalog test above is not vacuous: lookbehinds that used to run guarded are proven."""
    seen = {
        name
        for name in catalog.names()
        for where, _src, _g in load_response_template(catalog.get(name)).regex_guards()
        if "lookbehind" in where
    }
    assert {"qwen3_xml", "glm", "gpt_oss", "deepseek_dsml", "minimax_m2", "llama3_json"} <= seen


def test_a_bounded_tag_pattern_runs_unguarded_and_parses_the_same() -> None:
    bounded = r"<(?P<key>[a-z]{1,8})>(?P<value>[0-9]{1,6})</[a-z]{1,8}>"
    unbounded = r"<(?P<key>[a-z]+)>(?P<value>[0-9]+)</[a-z]+>"
    assert not _content.guarded(bounded, regex.DOTALL)
    assert _content.guarded(unbounded, regex.DOTALL)
    text = "<a>1</a> <bb>22</bb>\n<c>333</c>"
    for pat in (bounded, unbounded):
        got = _content.parse_content(text, "xml-inline", {"tag_pattern": pat})
        assert got == {"a": "1", "bb": "22", "c": "333"}


# ------------------------------------------------------------------------------------------------
# The guarded path on a hostile lookbehind: still linear, counted in calls


def _hostile_template() -> dict:
    return {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open_pattern": r"(?<=(?:a|aa){1,200}b)X",
                "close": "Y",
                "repeats": True,
            },
            "content": {},
        },
    }


def _guarded_calls(n: int) -> int:
    text = "aab" * (n // 3) + "XcallY"
    before = _rx.GUARDED_CALLS[0]
    p = ResponseParser(_hostile_template(), prefix="")
    for ch in text:
        p.feed(ch)
    msg, _ = p.finalize()
    assert msg["tool_calls"] == ["call"]
    return _rx.GUARDED_CALLS[0] - before


def test_hostile_lookbehind_runs_guarded_and_linear() -> None:
    t = load_response_template(_hostile_template())
    [(where, _src, guarded)] = [g for g in t.regex_guards() if "lookbehind" in g[0]]
    assert guarded and where == "tool_calls.open_pattern lookbehind"
    small, big = _guarded_calls(2_000), _guarded_calls(4_000)
    assert small > 0 and big <= 2.3 * small + 10
