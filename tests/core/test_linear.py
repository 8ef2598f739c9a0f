"""Linear work, proved by counting operations (never wall-clock time).

Every catalog template (new entries join automatically) and the union template of auto mode, on
every input shape a model can produce (runs of spaces and newlines in content and in reasoning,
prose with no marker, runs of `<`, the template's own delimiters cut one character short and
repeated, long arguments, long reasoning), fed one character at a time and in token-sized chunks:
doubling the input must at most multiply the scanner's operation count by 2.3 (plus a small
constant). The count covers every scanner call (decisions, finders, cursors, attempts, runs,
character tests, the JSON string guard), every branch point the matcher enters or resumes, and
the characters covered by the C-speed scans that have no cache of their own (runs, run starts).

The adversarial shapes of spec D1/D2 (unbounded prefix-less openers, many delimiters) and hostile
patterns (nested quantifiers, lookaheads over the whole text) are checked the same way.
"""

from __future__ import annotations

import collections
import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import regex

import chatparse
from chatparse import _rx, _scan, catalog
from chatparse._rx import Node, Op
from chatparse.detect import RECOGNIZERS
from chatparse.detect._union import union_template

from ..support.build import pure_only, skip_if_compiled

INKLING_UNBOUNDED = {
    "start_anchor": "<|message_model|>",
    "fields": {
        kind: {
            "open_pattern": f"(?:<\\|message_model\\|>)?[^<]*<\\|content_{tag}\\|>",
            "close": ["<|end_message|>", "<|content_model_end_sampling|>"],
            "repeats": True,
            **({"join": ""} if kind != "tool_calls" else {"content": "json"}),
        }
        for kind, tag in (("thinking", "thinking"), ("content", "text"), ("tool_calls", "invoke_tool_json"))
    },
}
QWEN_JSON = json.loads((Path(__file__).parent.parent / "data" / "families.json").read_text())["QWEN_JSON"]

# Everything the scanner does goes through one of these (plus `_rx.STEPS`, the matcher's branch
# points).
_COUNTED: list[tuple[Any, str]] = [
    (_scan.Scanner, "decide"),
    (_scan.Scanner, "_scan"),
    (_scan.Scanner, "_prefiltered"),
    (_scan.Scanner, "_trailing"),
    (_scan._RunTail, "start"),
    (_scan.LiteralCursor, "advance"),
    (_scan.LiteralCursor, "_first"),
    (_scan.LiteralCursor, "_tail"),
    (_scan.PatternCursor, "advance"),
    (_scan.PatternCursor, "peek"),
    (_scan.StringGuard, "inside"),
    (_rx.Attempt, "run"),
    (_rx.Attempt, "_look"),
    (_rx.Attempt, "_decided"),
    (_rx.Run, "end"),
    (_rx.CharTest, "__call__"),
] + [
    (cls, name)
    for cls in (
        _scan._EveryFinder,
        _scan._AnchorFinder,
        _scan._TriggerFinder,
        _scan._PrefixFinder,
        _scan._LoopFinder,
        _scan._UnionFinder,
    )
    for name in ("next", "failed")
    if name in vars(cls)
]


@contextmanager
def count_calls(*targets: tuple[Any, str]) -> Iterator[collections.Counter]:
    """Count the calls of each `(owner, method name)` by the method's name, then put them back."""
    skip_if_compiled()
    counts: collections.Counter = collections.Counter()
    originals = [(owner, name, vars(owner)[name]) for owner, name in targets]

    def counter(name: str, original: Callable) -> Callable:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(*args, **kwargs)

        return counted

    try:
        for owner, name, original in originals:
            setattr(owner, name, counter(name, original))
        yield counts
    finally:
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)


def stream_chars(template: Any, text: str) -> dict:
    """The message of `text` fed to a `ResponseParser` one character per feed."""
    p = chatparse.ResponseParser(template, prefix="")
    for ch in text:
        p.feed(ch)
    return p.finalize()[0]


@contextmanager
def counting() -> Iterator[collections.Counter]:
    skip_if_compiled()
    counts: collections.Counter = collections.Counter()
    patched: list[tuple[Any, str, Callable]] = []

    def wrap(owner: Any, name: str) -> None:
        original = vars(owner)[name]

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(*args, **kwargs)

        patched.append((owner, name, original))
        setattr(owner, name, counted)

    def wrap_span(owner: Any, name: str, span: Callable[[tuple, Any], int]) -> None:
        # C-speed scans count by the characters they cover, so a quadratic scan in C shows too.
        original = vars(owner)[name]
        is_static = isinstance(original, staticmethod)
        fn = original.__func__ if is_static else original

        def counted(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            counts["span:" + name] += max(0, span(args, result))
            return result

        patched.append((owner, name, original))
        setattr(owner, name, staticmethod(counted) if is_static else counted)

    for owner, name in _COUNTED:
        wrap(owner, name)
    wrap_span(_rx.Run, "_extend", lambda a, r: r[0] - a[2])
    wrap_span(_rx.Run, "_reaches", lambda a, r: a[3] - a[2])
    wrap_span(_scan._LoopFinder, "failed", lambda a, r: r - a[2])
    wrap_span(_rx.Attempt, "_viable", lambda a, r: r - a[2])
    wrap_span(_rx.Attempt, "_prev_viable", lambda a, r: a[3] - max(r, a[2]))
    # (a lookahead decided by the `regex` module: one call over at most its window)
    wrap_span(_rx, "_look_rx", lambda a, r: min(len(a[1]), a[2] + a[0].width) - a[2])

    original_run_start = _scan.run_start

    def run_start(loop: Any, buf: str, lo: int, hi: int) -> int:
        r = original_run_start(loop, buf, lo, hi)
        counts["span:run_start"] += hi - r
        return r

    _scan.run_start = run_start  # type: ignore[assignment]
    steps0 = _rx.STEPS[0]
    try:
        yield counts
    finally:
        counts["steps"] = _rx.STEPS[0] - steps0
        _scan.run_start = original_run_start  # type: ignore[assignment]
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def work(run: Callable[[], Any]) -> int:
    with counting() as counts:
        run()
    return sum(counts.values())


# ------------------------------------------------------------------------------------------------
# Sample text for a delimiter (the shortest match a simple walk of its pattern finds)

_CLASS_CANDIDATES = ["x", " ", "a", "0", "_", "\n", "f", "t", "1", ":", ".", "-", '"', "<", ">", "{", "["]


def _sample_node(node: Node) -> str | None:
    op = node.op
    if op is Op.LIT:
        return str(node.args[0])
    if op is Op.CLS:
        rx = regex.compile(node.args[0], node.args[1])
        for c in _CLASS_CANDIDATES:
            if rx.fullmatch(c):
                return c
        return None
    if op is Op.ANY:
        return "x"
    if op is Op.CAT:
        parts = [_sample_node(k) for k in node.kids]
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]
    if op is Op.ALT:
        for k in node.kids:
            got = _sample_node(k)
            if got is not None and (got or k is node.kids[-1]):
                return got
        return None
    if op is Op.REP:
        lo = node.args[0]
        body = _sample_node(node.kids[0])
        return None if body is None else body * max(lo, 0)
    if op in (Op.GROUP, Op.ATOMIC):
        return _sample_node(node.kids[0])
    return ""  # assertions, lookarounds, empty


# Delimiters the simple walk cannot satisfy (a lookahead that needs text of its own).
_OVERRIDES = [
    "<|channel|>commentary to=functions.f<|message|>",
    " to=functions.f<|channel|>commentary<|message|>",
]


def sample(d: Any) -> str | None:
    """A string the delimiter matches at position 0 (verified with the `regex` module), or None."""
    if d is None:
        return None
    if d.literals is not None:
        return str(d.literals[0])
    for text in (_sample_node(d.prog.tree), *_OVERRIDES):
        if text:
            for tail in (
                "",
                "{",
                "[{",
                "[",
                '{"name":',
                "[f(",
                '"name": "f", "arguments":',
            ):  # what a trailing lookahead may ask for
                m = d.module_re.match(text + tail)
                if m is not None and m.end() == len(text):
                    return text
    return None


# ------------------------------------------------------------------------------------------------
# Shapes


_VOCAB = tuple("the user wants weather for two cities so I should call a tool and then compare".split())  # noqa: SIM905


def _words(n: int) -> str:
    rnd = random.Random(n)
    vocab = _VOCAB
    out: list[str] = []
    size = 0
    while size < n:
        w = rnd.choice(vocab) + (".\n" if rnd.random() < 0.05 else " ")
        out.append(w)
        size += len(w)
    return "".join(out)[:n]


def _field_sample(t: Any, names: tuple[str, ...], attr: str) -> str | None:
    for name in names:
        f = t.fields.get(name)
        if f is not None:
            d = getattr(f, attr)
            if d is None and attr == "opener":
                return ""  # the implicit field: no opener needed
            return sample(d)
    return None


REASONING = ("reasoning_content", "thinking", "reasoning_think_tag")
CONTENT = ("content",)
CALLS = ("tool_calls", "tool_calls_hermes")


def shapes(t: Any) -> dict[str, Callable[[int], str]]:
    """Input shapes for template `t`, as functions of the size n."""
    out: dict[str, Callable[[int], str]] = {}
    c_open = _field_sample(t, CONTENT, "opener")
    r_open = _field_sample(t, REASONING, "opener")
    r_close = _field_sample(t, REASONING, "closer") or ""
    k_open = _field_sample(t, CALLS, "opener")
    k_close = _field_sample(t, CALLS, "closer") or ""
    out["prose"] = _words
    out["prose-sentence"] = lambda n: ("The answer is simple. " * (n // 22 + 1))[:n]
    if c_open is not None:
        out["content-spaces"] = lambda n: c_open + "Hi" + " " * n + "ok"
        out["content-newlines"] = lambda n: c_open + "Hi" + "\n" * n + "ok"
        out["content-angles"] = lambda n: c_open + "<" * n
        out["content-prose"] = lambda n: c_open + _words(n)
    if r_open is not None:
        out["reasoning-spaces"] = lambda n: r_open + "Hm" + " " * n + "ok"
        out["reasoning-newlines"] = lambda n: r_open + "Hm" + "\n" * n + "ok"
        out["reasoning-long"] = lambda n: r_open + _words(n) + r_close
    if k_open is not None:
        out["long-arguments"] = lambda n: (
            k_open + '{"name": "f", "arguments": {"a": "' + _words(n).replace('"', "") + '"}}' + k_close
        )
        out["long-arguments-list"] = lambda n: (
            k_open + '[{"name": "f", "arguments": {"a": "' + _words(n).replace('"', "") + '"}}]' + k_close
        )
    pieces = []
    for f in t.fields.values():
        for d in (f.opener, f.closer):
            s = sample(d)
            if s and len(s) >= 2:
                pieces.append(s[:-1])
    if pieces:
        cut = "".join(dict.fromkeys(pieces))
        lead = c_open or ""
        out["cut-delimiters"] = lambda n: lead + (cut * (n // len(cut) + 1))[:n]
        out["cut-delimiters-spaced"] = lambda n: lead + ((cut + " ") * (n // (len(cut) + 1) + 1))[:n]
    return out


def _templates() -> dict[str, Any]:
    out: dict[str, Any] = {
        name: chatparse.load_response_template(catalog.get(name)) for name in catalog.names()
    }
    out["auto-union"] = union_template(RECOGNIZERS)
    return out


TEMPLATES = _templates()
CASES = [(name, shape) for name, t in TEMPLATES.items() for shape in shapes(t)]


def _feed(t: Any, text: str, size: int) -> Callable[[], Any]:
    def go() -> Any:
        p = chatparse.ResponseParser(t, prefix="")
        if size == 0:
            p.feed(text)
        else:
            rnd = random.Random(7)
            i = 0
            while i < len(text):
                k = size if size > 0 else rnd.randint(1, 4)
                p.feed(text[i : i + k])
                i += k
        return p.finalize()

    return go


N = 1500


@pytest.mark.parametrize("feed", ["one-char", "tokens"])
@pytest.mark.parametrize(("template", "shape"), CASES, ids=[f"{a}-{b}" for a, b in CASES])
def test_every_template_and_shape_is_linear(template: str, shape: str, feed: str) -> None:
    t = TEMPLATES[template]
    make = shapes(t)[shape]
    size = 1 if feed == "one-char" else -1
    small = work(_feed(t, make(N), size))
    large = work(_feed(t, make(2 * N), size))
    assert large <= 2.3 * small + 200, (template, shape, feed, small, large)


def test_every_template_gets_its_shapes() -> None:
    # The sample generator must understand every catalog template's content and reasoning fields,
    # so that no template escapes the linearity test with only the prose shape.
    for name, t in TEMPLATES.items():
        got = shapes(t)
        assert "content-spaces" in got, name
        if any(f in t.fields for f in REASONING):
            assert "reasoning-spaces" in got, name
        if any(f in t.fields for f in CALLS):
            assert "long-arguments" in got, name


def test_one_shot_shapes_are_linear() -> None:
    for name, t in TEMPLATES.items():
        for shape, make in shapes(t).items():
            small = work(_feed(t, make(4 * N), 0))
            large = work(_feed(t, make(8 * N), 0))
            assert large <= 2.3 * small + 200, (name, shape, small, large)


# ------------------------------------------------------------------------------------------------
# D1 / D2 and hostile patterns


def one_shot(
    template: dict, make: Callable[[int], str], prefix: str = ""
) -> Callable[[int], Callable[[], Any]]:
    return lambda n: lambda: chatparse.parse_response(make(n), template, prefix=prefix)


def per_char(
    template: dict, make: Callable[[int], str], prefix: str = ""
) -> Callable[[int], Callable[[], Any]]:
    def run(n: int) -> Callable[[], Any]:
        def go() -> Any:
            p = chatparse.ResponseParser(template, prefix=prefix)
            for ch in make(n):
                p.feed(ch)
            return p.finalize()

        return go

    return run


def _hostile(pattern: str) -> dict:
    return {"start_anchor": "\x00", "fields": {"x": {"open_pattern": pattern, "close": "Z"}, "content": {}}}


CASES_D = {
    "d1-one-shot": one_shot(INKLING_UNBOUNDED, lambda n: "<|content_text|>" + "x" * n + "<|end_message|>"),
    "d1-header-one-shot": one_shot(
        INKLING_UNBOUNDED, lambda n: "x" * n + "<|content_text|>hi<|end_message|>"
    ),
    "d1-per-char": per_char(
        INKLING_UNBOUNDED, lambda n: "x" * n + "<|content_text|>hi<|end_message|>", prefix="<|message_model|>"
    ),
    "d1-null-region-one-shot": one_shot(
        INKLING_UNBOUNDED, lambda n: "ab<x>" * (n // 5) + "<|content_text|>hi"
    ),
    "d2-many-calls": one_shot(
        QWEN_JSON,
        lambda n: (
            "".join(
                f'<tool_call>\n{{"name": "f", "arguments": {{"i": {k}}}}}\n</tool_call>\n'
                for k in range(n // 50)
            )
            + "<|im_end|>"
        ),
    ),
    "whitespace-one-shot": one_shot(QWEN_JSON, lambda n: "a" + " " * n + "b<|im_end|>"),
    "whitespace-per-char": per_char(QWEN_JSON, lambda n: "a" + " \n" * (n // 2) + "<|im_end|>"),
    "angle-brackets-per-char": per_char(QWEN_JSON, lambda n: "a <b> c</d>" * (n // 11) + "<|im_end|>"),
    "hostile-nested-plus-one-shot": one_shot(_hostile("(a+)+$"), lambda n: "a" * n + "b"),
    "hostile-nested-plus-per-char": per_char(_hostile("(a+)+$"), lambda n: "a" * n + "b"),
    "hostile-lookahead-one-shot": one_shot(_hostile("(?=(a+)+$)b"), lambda n: "a" * n),
    "hostile-lookahead-per-char": per_char(_hostile("(?=(a+)+$)b"), lambda n: "a" * n),
    "hostile-alternation-star": one_shot(_hostile("(?:a|aa)*c"), lambda n: "a" * n),
    "hostile-lookahead-loop": one_shot(_hostile("(?=(?:ab|a)*$)x"), lambda n: "ab" * (n // 2)),
    "hostile-tempered": per_char(_hostile("(?:(?!END).)*?STOP"), lambda n: "ENx" * (n // 3)),
    # Lookaheads the `regex` module decides (`_rx.Look.rx`): a window of 500 characters asked
    # again on every feed while undecided, candidates all along; a named tail run that the match
    # waits for (`Attempt._decided`: its sub-attempt resumed, not restarted).
    "hostile-window-lookahead-per-char": per_char(
        _hostile("x(?=[^<]{0,500}y)"), lambda n: ("x" + "a" * 40) * (n // 41)
    ),
    "hostile-named-lookahead-per-char": per_char(
        {
            "start_anchor": "\x00",
            "fields": {
                "x": {"open_pattern": "x(?=(?P<k>a+))", "close": "Z", "transform": {"k": "{k}"}},
                "content": {},
            },
        },
        lambda n: "x" + "a" * n + "bZ",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES_D))
def test_doubling_the_input_at_most_doubles_the_work(name: str) -> None:
    make = CASES_D[name]
    small, large = work(make(4000)), work(make(8000))
    assert large <= 2.3 * small + 200, (name, small, large)


def test_memo_memory_is_linear_for_nested_quantifiers() -> None:
    # The failure memo is never cleared (clearing it made backtracking exponential) and stays linear.
    prog = _rx.compile_pattern("(a+)+$")
    for n in (20_000, 40_000):
        ctx = _rx.MatchContext()
        text = "a" * n + "b"
        for s in range(len(text)):
            assert _rx.Attempt(prog, s, ctx).run(text, True) is None
        assert ctx.size() <= 4 * n


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_watch_list_has_a_prefilter(template: str) -> None:
    """Per-token speed (issue 9): every watch list of every catalog template and of the union
    template has leads, so the per-token path decides most feeds with C searches only. A delimiter
    without leads (`EverySearch`) makes every feed in its region run an attempt per character
    (a closer alternative led by a lookbehind once made qwen3_xml's call bodies 5x slower)."""
    t = TEMPLATES[template]
    lists = [("(start)", t.watch)] + [(n, f.watch) for n, f in t.fields.items() if f.watch is not None]
    # exempt: no delimiters (an implicit field), or a closer that matches at once (`(?=)`)
    missing = [
        n
        for n, w in lists
        if w.prefilter is None and w.entries and any(e.delimiter.source != "(?=)" for e in w.entries)
    ]
    assert not missing, f"{template}: watch lists without a prefilter: {missing}"


@pure_only
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_prose_is_decided_by_the_prefilter(template: str) -> None:
    """Per-token speed (issue 9: no family far above the median): 4,000 characters of prose in
    token-sized feeds ask the cursors of a template's first region a bounded number of times (a
    lookbehind-led branch once gave minimax_m2 and llama3_json a `\\s` lead: every space a scan)."""
    t = TEMPLATES[template]
    text = _words(4000)
    scan = _scan.Scanner._scan
    count = [0]

    def counted(self, *a):  # type: ignore[no-untyped-def]
        count[0] += 1
        return scan(self, *a)

    _scan.Scanner._scan = counted  # type: ignore[method-assign]
    try:
        p = chatparse.ResponseParser(t, prefix="")
        rnd = random.Random(5)
        i = 0
        while i < len(text):
            k = rnd.randint(1, 4)
            p.feed(text[i : i + k])
            i += k
    finally:
        _scan.Scanner._scan = scan  # type: ignore[method-assign]
    assert count[0] <= 10, f"{template}: {count[0]} cursor scans on prose"
