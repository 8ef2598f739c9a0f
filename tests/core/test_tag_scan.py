"""xml-inline tag patterns scanned without a time limit when a per-body bound holds (issues 9, 13).

Every catalog `tag_pattern` has an unbounded run (`<parameter=(?P<key>[^>\\n]+)>...(?P<value>.*?)`),
so `_rx.backtrack_bound` cannot prove it cheap and the scan ran under the `regex` module's time
limit, which costs ~2 us a call plus ~1 us a match (most of the feed that closes a Qwen3 XML or
DeepSeek DSML call). `_content.tag_scan_proof` bounds the work of one scan per body instead: the
work grows with the number of occurrences of the pattern's leading literal, so a body with few of
them runs without the limit and a hostile one (a line of `<parameter=` openers that never close,
each read to the line's end) keeps it. These tests check

* the bound itself: a naive backtracking matcher (test_guards' one, with lookarounds, end
  assertions and atomic groups) scanning random bodies never makes more character tests than the
  bound, and finds the `regex` module's matches;
* hostile shapes (long key runs, unclosed tags, `<` runs, runs a value scan reads to the end):
  the counted work is linear in the body, and a body past the bound scans under the limit;
* the catalog's Qwen3 XML and DSML calls scan without the limit (counted), streamed and one-shot,
  with the same results as the generic parser.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import _content, _rx, catalog
from chatparse._rx import Node, Op

from .test_guards import _Naive


def _tag_pattern(name: str) -> str:
    pattern: str = catalog.get(name)["fields"]["tool_calls"]["content_args"]["tag_pattern"]
    return pattern


QWEN3_XML = _tag_pattern("qwen3_xml")
DSML = _tag_pattern("deepseek_dsml")

# Patterns of each kind the proof covers: a lazy value whose continuation matches at the end of any
# text (Qwen3 XML's `\n?\Z`), one whose continuation may never match (DSML's closer), a value run
# forced by the character after it, a greedy `.*` value, and a forced run after a multi-way
# optional.
SYNTHETIC = [
    r"<a(?P<key>[^>]+)>(?P<value>.*?)</a>",
    r"<a(?P<key>[^>]+)>(?P<value>.*?)(?:</a>|\Z)",
    r"<a(?P<key>\w+)>(?P<value>[^<]*)<",
    r"<a(?P<key>[^>]+)>(?P<value>.*)</a>",
    r"<a ?(?:x|xy)?(?P<key>[^>\s]+)\s{0,3}>(?P<value>.*?)(?=</a>|<a)",
    r"<a(?P<key>[^\"'>]+)[\"']>(?P<value>.*?)</a>",  # forced by a class that lists its characters
]


class _Naive2(_Naive):
    """test_guards' naive matcher, with lookaheads, end assertions and atomic groups."""

    def m(self, node: Node, pos: int, k: Callable[[int], bool]) -> bool:
        op = node.op
        if op is Op.LOOK:
            assert node.args[0], "no lookbehinds here"
            found = self.m(node.kids[0], pos, lambda p: True)
            return found != bool(node.args[1]) and k(pos)
        if op is Op.ASSERT:
            self.tests += 1
            return _rx.Assertion(node.args[0], node.args[1]).test(self.s, pos, True) is True and k(pos)
        if op is Op.ATOMIC:
            ends: list[int] = []
            if not self.m(node.kids[0], pos, lambda p: ends.append(p) is None):
                return False
            return k(ends[0])
        return super().m(node, pos, k)


@contextmanager
def _deep_recursion() -> Iterator[None]:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 30_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def naive_scan(pattern: str, text: str) -> tuple[list[tuple[int, int]], int]:
    """`findall`'s scan by the naive matcher: the match spans and the character tests made."""
    tree = _rx._Parser(pattern, regex.DOTALL).parse()
    naive = _Naive2(text, False)
    spans: list[tuple[int, int]] = []
    pos = 0
    with _deep_recursion():
        while pos <= len(text):
            ends: list[int] = []
            if naive.m(tree, pos, lambda p, ends=ends: ends.append(p) is None):
                spans.append((pos, ends[0]))
                pos = ends[0] if ends[0] > pos else pos + 1
            else:
                pos += 1
    return spans, naive.tests


def bound(pattern: str, text: str) -> int:
    proof = _content.tag_scan_proof(pattern, regex.DOTALL)
    assert proof is not None
    lead, overlap, c, f, tail, _safe = proof
    n, occ = len(text), text.count(lead) * overlap
    return len(lead) * (n + 1) + occ * (c + f * n) + tail * (n + occ)


def check_bound(pattern: str, text: str) -> int:
    spans, tests = naive_scan(pattern, text)
    assert spans == [m.span() for m in regex.finditer(pattern, text, regex.DOTALL)], (pattern, text)
    assert tests <= bound(pattern, text), (pattern, text, tests, bound(pattern, text))
    return tests


# ------------------------------------------------------------------------------------------------
# The proof


def test_the_catalog_call_patterns_have_a_per_body_proof() -> None:
    """Qwen3 XML's value always ends (at the latest at the end of the body, `\\n?\\Z`): its scan
    costs its continuation's steps per character once (`tail`); DSML's closer may never come, so
    each attempt may read the rest of the body (`f` per character and occurrence)."""
    assert _content.guarded(QWEN3_XML, regex.DOTALL) and _content.guarded(DSML, regex.DOTALL)
    q = _content.tag_scan_proof(QWEN3_XML, regex.DOTALL)
    d = _content.tag_scan_proof(DSML, regex.DOTALL)
    assert q is not None and q[0] == "<parameter=" and q[4] > 0
    assert d is not None and d[0] == "<｜DSML｜" and d[4] == 0 and d[3] > 0
    proven = set()
    for name in catalog.names():
        field = catalog.get(name)["fields"].get("tool_calls", {})
        if field.get("content") == "xml-inline":
            pattern = field["content_args"]["tag_pattern"]
            if _content.tag_scan_proof(pattern, regex.DOTALL) is not None:
                proven.add(name)
    assert {"qwen3_xml", "deepseek_dsml", "nemotron3", "seed_oss", "step3p5", "mimo", "step3"} <= proven


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?P<key>[^>]+)>(?P<value>.*?)</a>",  # no leading literal: attempts cannot be counted
        r"<a(?P<key>.+)+>(?P<value>.*?)",  # a repeated group of unbounded runs
        r"<a(?P<key>.*)(?P<value>.*)</a>",  # two free runs: quadratic per attempt
        r"<a(?P<key>[^>]+)>(?P<value>.*?)(?=x*y)",  # an unbounded run after the free run
    ],
)
def test_unprovable_tag_patterns(pattern: str) -> None:
    assert _content.tag_scan_proof(pattern, regex.DOTALL) is None


@pytest.mark.parametrize(
    "pattern",
    [
        r"<a(?P<key>[^>]+)>(?P<value>.*?)(?:</a>|(?<=b)\Z)",  # the continuation reads behind
        r"<a(?P<key>[^>]+)>(?P<value>.*?)(?:</a>|\b\Z)",  # ... or asserts on the previous character
        r"<a(?P<key>[^>]+)>(?P<value>[^<]*?)(?:</a>|\Z)",  # a value that cannot reach the end
        r"<a(?P<key>[^>]+)>(?P<value>.*)(?:</a>|\Z)",  # greedy
    ],
)
def test_values_that_may_not_end_are_bounded_per_attempt(pattern: str) -> None:
    """A lazy `.*?` value whose continuation matches at the end of any text always ends the
    attempt; these may fail after reading the rest of the body, so each occurrence counts `f` per
    character (`tail` is 0)."""
    proof = _content.tag_scan_proof(pattern, regex.DOTALL)
    assert proof is not None and proof[4] == 0 and proof[3] > 0


def test_a_lead_that_overlaps_itself_counts_every_start() -> None:
    proof = _content.tag_scan_proof(r"aa(?P<key>[^>]+)>(?P<value>.*?)</a>", regex.DOTALL)
    assert proof is not None and proof[:2] == ("aa", 2)


@pytest.mark.parametrize("name", ["qwen3_xml", "deepseek_dsml", "step3", "gigachat35"])
def test_a_short_body_is_within_the_bound_whatever_it_holds(name: str) -> None:
    """`short_body`: the fast path skips counting the lead in bodies up to that length; every
    such body is within the bound, even one made only of leads."""
    proof = _content.tag_scan_proof(_tag_pattern(name), regex.DOTALL)
    assert proof is not None
    short = _content.short_body(proof)
    assert short > 100  # (the catalog's call bodies are usually shorter)
    lead = proof[0]
    for n in list(range(0, min(short, 2000) + 1, 7)) + [short]:
        text = (lead * (n // len(lead) + 1))[:n]
        assert _content.body_within_bound(proof, text), (name, n)


_QWEN_PIECES = ["<parameter=", "k", ">", "\n", "</parameter>", "</function>", " ", "v", "<", "\n" * 3]
_DSML_PIECES = [
    "<｜DSML｜",
    " ",
    'parameter name="',
    "k",
    '"',
    ' string="true"',
    ">",
    "</｜DSML｜parameter>",
    "v",
]
_SYN_PIECES = ["<a", "k", ">", "</a>", "v", "<", " ", "x", "y", '"', "'"]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_bound_counts_every_character_test_of_a_backtracking_scan(data: st.DataObject) -> None:
    pattern, pieces = data.draw(
        st.sampled_from(
            [(QWEN3_XML, _QWEN_PIECES), (DSML, _DSML_PIECES)] + [(p, _SYN_PIECES) for p in SYNTHETIC]
        )
    )
    text = "".join(data.draw(st.lists(st.sampled_from(pieces), max_size=30)))
    check_bound(pattern, text)


# ------------------------------------------------------------------------------------------------
# Hostile bodies: counted work linear in the body; past the bound, the time limit


def _hostile(pattern: str, n: int) -> list[str]:
    if pattern == QWEN3_XML:
        return [
            "<parameter=" + "k" * n,  # a key run to the end of the body
            "<parameter=k>" + "\n" * n,  # a value over line breaks: the continuation at each
            "<parameter=k>" + "</parameter>" + " " * 80 + "<" * n,  # a closer not followed as it must
            "<" * n,
            "<parameter=<parameter=<parameter=" + "x" * n + "\n",  # a few openers in one key run
        ]
    return [
        '<｜DSML｜parameter name="k">' + "v" * n,  # an unclosed tag: the value scan reads to the end
        '<｜DSML｜parameter name="' + "k" * n,
        "<" * n,
        '<｜DSML｜parameter name="k"><｜DSML｜parameter name="k">' + "</｜DSML｜ parameter" * (n // 20),
    ]


@pytest.mark.parametrize("pattern", [QWEN3_XML, DSML], ids=["qwen3_xml", "deepseek_dsml"])
def test_hostile_bodies_scan_in_linear_counted_work(pattern: str) -> None:
    proof = _content.tag_scan_proof(pattern, regex.DOTALL)
    assert proof is not None
    for small, big in zip(_hostile(pattern, 400), _hostile(pattern, 800)):
        assert _content.body_within_bound(proof, small) and _content.body_within_bound(proof, big)
        a, b = check_bound(pattern, small), check_bound(pattern, big)
        assert b <= 2.3 * a, (small[:40], a, b)


@pytest.mark.parametrize("pattern", [QWEN3_XML, DSML], ids=["qwen3_xml", "deepseek_dsml"])
def test_a_body_past_the_bound_scans_under_the_time_limit(pattern: str) -> None:
    """A line of openers that never close: each attempt reads to the body's end, so the work grows
    with the square of the line (checked here on the naive matcher at two sizes); such a body is
    not within the bound, and its scan has the time limit (counted), with the same result."""
    proof = _content.tag_scan_proof(pattern, regex.DOTALL)
    assert proof is not None
    # Qwen3 XML: each key run reads to the end (no `>`); DSML: each value does (no closer)
    opener = "<parameter=" if pattern == QWEN3_XML else '<｜DSML｜parameter name="k">'
    work = [naive_scan(pattern, opener * m)[1] for m in (60, 120)]
    assert work[1] > 3.5 * work[0]  # quadratic: these shapes do need the limit
    for text in (opener * 1000, opener * 2000):
        assert not _content.body_within_bound(proof, text)
        before = _content.TIMED_SCANS[0]
        got = _content.parse_content(text + "\n", "xml-inline", {"tag_pattern": pattern})
        assert _content.TIMED_SCANS[0] == before + 1
        assert got == {}


def test_the_timed_out_scan_still_raises_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_content, "REGEX_TIMEOUT", 0.0)
    text = "<parameter=" * 2000 + "\n"  # past the bound: scanned under the limit
    with pytest.raises(ValueError, match="regex timed out"):
        _content.parse_content(text, "xml-inline", {"tag_pattern": QWEN3_XML})
    field = chatparse.load_response_template(catalog.get("qwen3_xml")).fields["tool_calls"]
    with pytest.raises(ValueError, match="regex timed out"):
        _content.process_field(text, field, {"name": "f"})


# ------------------------------------------------------------------------------------------------
# The catalog's calls: no timed scan, the same results


def _qwen_calls(n: int) -> str:
    return "".join(
        f"<tool_call>\n<function=f{i}>\n<parameter=a>\n{i}\n</parameter>\n<parameter=code>\n"
        f"def g(x):\n    return x < {i}  # </parameter> inside\n</parameter>\n</function>\n</tool_call>\n"
        for i in range(n)
    )


def _dsml_calls(n: int) -> str:
    return (
        "<｜DSML｜function_calls>\n"
        + "".join(
            f'<｜DSML｜invoke name="f{i}">\n<｜DSML｜parameter name="a" string="true">{i} < x</｜DSML｜parameter>\n'
            f'<｜DSML｜parameter name="b" string="false">[{i}]</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
            for i in range(n)
        )
        + "</｜DSML｜function_calls>"
    )


@pytest.mark.parametrize(
    ("name", "text"), [("qwen3_xml", _qwen_calls(12)), ("deepseek_dsml", _dsml_calls(12))]
)
def test_catalog_calls_scan_without_the_time_limit(name: str, text: str) -> None:
    tpl = chatparse.load_response_template(catalog.get(name))
    before = _content.TIMED_SCANS[0]
    one = chatparse.parse_response(text, tpl, prefix="")
    p = chatparse.ResponseParser(tpl, prefix="")
    for i in range(0, len(text), 3):
        p.feed(text[i : i + 3])
    streamed, _ = p.finalize()
    assert _content.TIMED_SCANS[0] == before
    assert streamed == one and len(one["tool_calls"]) == 12
    args = [c["function"]["arguments"] for c in one["tool_calls"]]
    field = tpl.fields["tool_calls"]
    # the generic parser (its own scan, under the time limit) returns the same arguments
    bodies = [
        text[e["body_start"] : e["body_end"]]
        for e in chatparse.ResponseParser(tpl, prefix="").feed(text)
        if e["type"] == "region_close"
    ]
    assert [_content.parse_content(b, "xml-inline", field.content_args) for b in bodies] == args


@pytest.mark.parametrize(
    "body",
    [
        ' {"a": 1} ',  # a JSON object body: the arguments themselves
        "[1]",
        "text without a tag",  # refused
        "",
        "  \n",
        '<｜DSML｜parameter name="a">1</｜DSML｜parameter>',
        '<｜DSML｜parameter name="a">1</｜DSML｜parameter><｜DSML｜parameter name="a">2</｜DSML｜parameter>',
        '{"a": 1',  # JSON that does not parse
    ],
)
def test_the_dsml_fast_path_equals_the_generic_parser(body: str) -> None:
    field = chatparse.load_response_template(catalog.get("deepseek_dsml")).fields["tool_calls"]
    assert field.process is not None
    try:
        expected: Any = _content.parse_content(body, "xml-inline", field.content_args)
    except ValueError as e:
        expected = ("error", str(e))
    try:
        got: Any = _content.process_field(body, field, {"name": "f"})["function"]["arguments"]
    except ValueError as e:
        got = ("error", str(e))
    assert got == expected


# ------------------------------------------------------------------------------------------------
# The value written to skip what cannot end it (`skipping_value`)


def _rewritten() -> list[tuple[str, str]]:
    out = []
    for name in catalog.names():
        field = catalog.get(name)["fields"].get("tool_calls", {})
        if field.get("content") == "xml-inline":
            pattern = field["content_args"]["tag_pattern"]
            faster = _content.skipping_value(pattern, regex.DOTALL)
            if faster is not None:
                out.append((pattern, faster))
    return out


REWRITTEN = _rewritten()


def test_the_catalog_values_that_skip() -> None:
    assert {p for p, _f in REWRITTEN} >= {QWEN3_XML, DSML}
    faster = _content.skipping_value(QWEN3_XML, regex.DOTALL)
    assert faster is not None and "(?P<value>[^\\U0000000a\\U0000003c]*+" in faster


def _pieces(pattern: str) -> list[str]:
    """Pieces of bodies for `pattern`: its literal runs, cut in two, and characters that end
    values, keys and tags."""
    runs = [r for r in regex.split(r"\\.|[()\[\]{}?*+|^$]", pattern) if r]
    return runs + [r[: len(r) // 2] for r in runs if len(r) > 1] + ["<", "\n", " ", "x", '"', ">", "/", "="]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_skipping_value_matches_as_the_pattern_does(data: st.DataObject) -> None:
    pattern, faster = data.draw(st.sampled_from(REWRITTEN))
    text = "".join(data.draw(st.lists(st.sampled_from(_pieces(pattern)), max_size=40)))
    a = [(m.span(), m.groupdict()) for m in regex.finditer(pattern, text, regex.DOTALL)]
    b = [(m.span(), m.groupdict()) for m in regex.finditer(faster, text, regex.DOTALL)]
    assert a == b, (pattern, text)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_skipping_value_keeps_the_bound(data: st.DataObject) -> None:
    """What runs is the rewritten pattern: its counted scan (the naive matcher, which even
    backtracks into the possessive runs) stays within the pattern's bound."""
    pattern, pieces = data.draw(st.sampled_from([(QWEN3_XML, _QWEN_PIECES), (DSML, _DSML_PIECES)]))
    faster = _content.skipping_value(pattern, regex.DOTALL)
    assert faster is not None
    text = "".join(data.draw(st.lists(st.sampled_from(pieces + ["x" * 20, "<" * 5]), max_size=30)))
    spans, tests = naive_scan(faster, text)
    assert spans == [m.span() for m in regex.finditer(pattern, text, regex.DOTALL)]
    assert tests <= bound(pattern, text)


@pytest.mark.parametrize("pattern", [QWEN3_XML, DSML], ids=["qwen3_xml", "deepseek_dsml"])
def test_a_skipping_value_skips(pattern: str) -> None:
    """The speed-up, counted: over a long value with few characters that could end it, the
    rewritten scan makes a fraction of the tests (the continuation is tried only where it can
    begin), and the same work on hostile bodies stays linear."""
    faster = _content.skipping_value(pattern, regex.DOTALL)
    assert faster is not None
    opener = "<parameter=k>\n" if pattern == QWEN3_XML else '<｜DSML｜parameter name="k">'
    closer = "\n</parameter>\n" if pattern == QWEN3_XML else "</｜DSML｜parameter>"
    body = opener + "def f(x):  return x * 2 if x else None;  " * 20 + closer
    slow, fast = naive_scan(pattern, body)[1], naive_scan(faster, body)[1]
    assert fast < 0.6 * slow, (slow, fast)
    for small, big in zip(_hostile(pattern, 400), _hostile(pattern, 800)):
        a, b = naive_scan(faster, small)[1], naive_scan(faster, big)[1]
        assert a <= bound(pattern, small) and b <= 2.3 * a + 50, (small[:40], a, b)


@pytest.mark.parametrize(
    "pattern",
    [
        r"<a>(?P<value>.*?)(?:</a>)?",  # what follows matches nothing anywhere
        r"<a>(?P<value>.*?)(?=</a>)",  # a lookahead alone consumes nothing
        r"<a>(?P<value>.*?)$",  # `$` matches before a final newline too
        r"<a>(?P<value>.*?)\s*</a>",  # not a literal first character
        r"<a>(?P<value>.*)</a>",  # greedy
        r"<a>(?:(?P<value>.*?))</a>",  # not in the top-level sequence
        r"<a>(?-s:(?P<value>.*?))</a>",  # `.` without DOTALL
        r"(?:<a>(?P<value>.*?)</a>|<b>)",
        r"<a>(?<value>.*?)[(?P<value>.*?)]</a>",  # the text `(?P<value>.*?)` is not the group
    ],
)
def test_values_that_do_not_skip(pattern: str) -> None:
    assert _content.skipping_value(pattern, regex.DOTALL) is None


def test_a_value_before_an_end_assertion_skips_to_the_end() -> None:
    faster = _content.skipping_value(r"<a>(?P<value>.*?)(?:</a>|\Z)", regex.DOTALL)
    assert faster == r"<a>(?P<value>[^\U0000003c]*+(?:[\U0000003c][^\U0000003c]*+)*?)(?:</a>|\Z)"
    for text in ["<a>x</a><a>y", "<a>x<b></a>", "<a>", "<a><<</a"]:
        assert regex.findall(faster, text, regex.DOTALL) == regex.findall(
            r"<a>(?P<value>.*?)(?:</a>|\Z)", text, regex.DOTALL
        )
