"""Lookaheads decided without a sub-attempt of the interpreter: a literal body by one `startswith`
(`_rx.PEEK`), a plain body by one `regex` module match (`_rx.Look.rx`, `_rx._look_rx`): its
answer taken whole when the body has no named group, else taken by a main attempt whose match
stands once the interpreter would decide the same (`Attempt._decided`). Each: the interpreter's
decisions, streamed == one-shot over adversarial bodies (bounded and tail runs, alternations
whose later branch matches first, optional and lazy groups, named groups, negative lookaheads),
and counted on gpt-oss's headers."""

from __future__ import annotations

import random

import pytest
import regex

import chatparse
from chatparse import _rx, catalog
from tests.core.test_linear import count_calls, stream_chars

#: Plain lookahead bodies (what `Look.rx` takes), chosen against the module's partial match: a
#: later branch that completes while an earlier one is still being written (`ab|a`), greedy and
#: lazy bounded runs before a literal, tail runs, optional groups, named groups, classes.
PLAIN_BODIES = [
    r"ab|a",
    r"a|ab",
    r"[^<]{0,6}(?:<c>[^<]{0,6})?to=(?P<name>[^\s<]+)",
    r"[^<]{0,6}(?:<c>[^<]{0,6})?to=[^\s<]+",
    r"(?:ab){1,3}c?",
    r"[ab]{2,4}b",
    r"(?P<k>a+)",
    r"a(?:bc|b)?d",
    r"\s{0,2}<(?:x|xy)>",
    r"(?i:ab)c",
]

#: Bodies that keep the sub-attempt: a lookaround or an assertion inside, an unbounded run before
#: more of the body, a window wider than `LOOK_WINDOW`, and two shapes the module's partial match
#: gets wrong (a lazy repeat: `x{0,3}?y` on "xq" is reported partial; two classes as branches:
#: `[^<]|[^a]` fails on "<", the module merges them into one set).
NOT_PLAIN = [r"a(?=b)", r"a$", r"\ba", r"a*b", r"[^<]{0,2000}x", r"(?>ab)c", r"x{0,3}?y", r"c(?:[^<]|[^a])"]

ALPHABET = list("abcdxy<> \n") + ["<c>", "to=", "ab", "<x", "<xy>", "AB"]


def _look(body: str) -> _rx.Look:
    prog = _rx.compile_pattern(f"(?={body})")
    op, look = prog.code[0]
    assert op == _rx.LOOKAHEAD
    return look


def _interpreter(look: _rx.Look, buf: str, pos: int, eos: bool) -> object:
    return _rx.Attempt(look.prog, pos, _rx.MatchContext(), _rx.BOOLEAN).run(buf, eos)


@pytest.mark.parametrize("body", PLAIN_BODIES)
def test_a_plain_body_is_decided_as_the_interpreter_decides_it(body: str) -> None:
    """At every position of every prefix of random texts: no match from the module exactly where
    the interpreter fails; a match where the interpreter, told that the text ends there, matches
    (a certain match: the body reads nothing at the end); undecided only where the interpreter is
    (it may stay undecided where the module already has a match: `ab|a` on "a"). At the end of the
    text both agree."""
    look = _look(body)
    assert look.rx is not None
    assert look.sure == ("?P<" not in body)
    rng = random.Random(body)
    seen = set()
    for _ in range(300):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 12)))
        for cut in range(1, len(text) + 1):
            buf = text[:cut]
            for pos in range(cut):
                got = _rx._look_rx(look, buf, pos, False)
                live = _interpreter(look, buf, pos, False)
                if got is None:
                    assert live is None, (body, buf, pos)
                elif got is _rx.LIVE:
                    assert live is _rx.LIVE, (body, buf, pos)
                else:
                    assert live is not None, (body, buf, pos)
                    assert _interpreter(look, buf, pos, True) is not None, (body, buf, pos)
                    assert _interpreter(look, text, pos, True) is not None, (body, text, pos)
                ended = _rx._look_rx(look, buf, pos, True)
                assert (ended is None) == (_interpreter(look, buf, pos, True) is None), (body, buf, pos)
                seen.add("fail" if got is None else "live" if got is _rx.LIVE else "match")
    assert {"fail", "match"} <= seen


def _random_body(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(8 if depth < 3 else 3)
    if kind <= 2:
        return rng.choice(["a", "b", "x", "<", "[ab]", "[^<]", r"\s", ".", "[^a]", "ab", "<c>"])
    if kind == 3:
        return _random_body(rng, depth + 1) + _random_body(rng, depth + 1)
    if kind == 4:
        return f"(?:{_random_body(rng, depth + 1)}|{_random_body(rng, depth + 1)})"
    if kind == 5:
        return f"(?:{_random_body(rng, depth + 1)})?"
    if kind == 6:
        lo = rng.randrange(3)
        return f"(?:{_random_body(rng, depth + 1)}){{{lo},{lo + rng.randrange(3)}}}"
    return f"(?P<g{depth}{rng.randrange(100)}>{_random_body(rng, depth + 1)})"


def test_random_plain_bodies_decide_as_the_interpreter_decides_them() -> None:
    """The same comparison over bodies drawn from a grammar of the shapes `Look.rx` takes (and
    tail runs): found the two shapes the module gets wrong."""
    rng = random.Random(13)
    tested = 0
    while tested < 120:
        body = _random_body(rng) + _random_body(rng) + rng.choice(["", r"[^\s<]+", "a+", "[ab]*"])
        try:
            prog = _rx.compile_pattern(f"(?={body})")
        except _rx.UnsupportedPattern:
            continue
        op, look = prog.code[0]
        if op != _rx.LOOKAHEAD or look.rx is None:
            continue
        tested += 1
        for _ in range(12):
            text = "".join(rng.choice("abx< \nc>") for _ in range(rng.randrange(1, 9)))
            for cut in range(1, len(text) + 1):
                buf = text[:cut]
                for pos in range(cut):
                    got = _rx._look_rx(look, buf, pos, False)
                    live = _interpreter(look, buf, pos, False)
                    ended = _interpreter(look, buf, pos, True)
                    if got is None or got is _rx.LIVE:
                        assert live is got, (body, buf, pos)
                    else:
                        assert live is not None and ended is not None, (body, buf, pos)
                    assert (_rx._look_rx(look, buf, pos, True) is None) == (ended is None), (body, buf, pos)
                    if look.rx.fullmatch(buf, pos, partial=True) is None:
                        # (`Attempt._decided`'s test: no way of matching reaches the end, so
                        # the interpreter's first way to match is decided without more text)
                        assert live is not _rx.LIVE, (body, buf, pos)


@pytest.mark.parametrize("body", NOT_PLAIN)
def test_other_bodies_keep_the_sub_attempt(body: str) -> None:
    assert _look(body).rx is None


def test_literal_lookaheads_are_one_instruction() -> None:
    """`(?=<x>)` and `(?!<x>)` compile to `PEEK` (no sub-program, no sub-attempt); a body with a
    named group or anything but literals stays a lookahead."""
    assert [op for op, _ in _rx.compile_pattern(r"(?=<x>)<x>y").code][0] == _rx.PEEK
    assert [op for op, _ in _rx.compile_pattern(r"a(?!<\|y\|>)").code][1] == _rx.PEEK
    assert _rx.compile_pattern(r"(?=(?P<n><x>))<x>").code[0][0] == _rx.LOOKAHEAD
    assert _rx.compile_pattern(r"(?=<x>|y)y").code[0][0] == _rx.LOOKAHEAD


#: Delimiters with lookaheads of every kind above, in and out of the match's groups.
LOOKAHEAD_DELIMITERS = [
    r"<o>(?=[^<]{0,6}(?:<c>[^<]{0,6})?to=(?P<name>[^\s<]+))[^<]{0,6}<c>",
    r"(?:<s>|(?=<c>)|^)(?=[^<]{0,5}(?:<c>[^<]{0,5})?to=(?P<n>[^\s<]+))[^<]{0,5}<c>(?:ab|a)[^<]{0,5}<m>",
    r"x(?=(?P<k>a+))",
    r"x(?=ab|a)(?P<r>a+)?",
    r"<c>(?=(?P<a>ab|a))",
    r"y(?!ab|a)(?P<t>[a-c]{0,2})",
    r"(?=<x>)<x>(?P<v>[a-z]{0,3})",
    r"q(?!<y>)",
    r"<c>(?=x{0,3}?y)",
]

TEXT_PIECES = ["<o>", "<c>", "<s>", "<m>", "to=", "a", "ab", "x", "y", "q", "<x>", "<y>", " ", "b", "<", "Z"]


def _template(pattern: str) -> dict:
    """A field opened by `pattern` whose value carries the opener's groups and its body."""
    names = regex.compile(pattern).groupindex
    transform = {**{g: "{" + g + "}" for g in names}, "body": "{content}"}
    return {
        "start_anchor": "\x00",
        "fields": {"x": {"open_pattern": pattern, "close": "Z", "transform": transform}, "content": {}},
    }


@pytest.mark.parametrize("pattern", LOOKAHEAD_DELIMITERS)
def test_lookahead_delimiters_stream_as_one_shot(pattern: str) -> None:
    """One character per feed and random chunks: the same events (opener groups included) and
    message as one feed and as `parse_response`."""
    t = chatparse.load_response_template(_template(pattern))
    rng = random.Random(pattern)
    for _ in range(150):
        text = "".join(rng.choice(TEXT_PIECES) for _ in range(rng.randrange(1, 14)))
        whole = chatparse.ResponseParser(t, prefix="")
        events = whole.feed(text)
        message, last = whole.finalize()
        events += last
        assert message == chatparse.parse_response(text, t, prefix=""), (pattern, text)
        opens = [(e["start"], e["end"], e.get("captures")) for e in events if e["type"] == "region_open"]
        for sizes in ([1] * len(text), [rng.randrange(1, 5) for _ in text]):
            p = chatparse.ResponseParser(t, prefix="")
            got: list = []
            i = 0
            for size in sizes:
                if i >= len(text):
                    break
                got += p.feed(text[i : i + size])
                i += size
            streamed, tail = p.finalize()
            got += tail
            assert streamed == message, (pattern, text, sizes)
            assert [
                (e["start"], e["end"], e.get("captures")) for e in got if e["type"] == "region_open"
            ] == opens


def test_a_named_body_waits_for_its_first_way_to_match() -> None:
    """`x(?=(?P<k>a+))`: the module matches the body at the first `a`, but the group's run is
    still being written: the match stands only once the run ends (the interpreter's answer),
    never with a group shorter than the one-shot parse's."""
    t = chatparse.load_response_template(_template(r"x(?=(?P<k>a+))"))
    p = chatparse.ResponseParser(t, prefix="")
    events = []
    for ch in "xaaaa":
        events += p.feed(ch)
    assert not [e for e in events if e["type"] == "region_open"]
    events += p.feed("b")
    assert [e["captures"] for e in events if e["type"] == "region_open"] == [{"k": "aaaa"}]


GPT_OSS_TOKENS = [
    "<|channel|>", "analysis", "<|message|>", "think", "<|end|>",
    "<|start|>", "assistant", "<|channel|>", "commentary", " to", "=", "functions", ".", "get_weather",
    " ", "<|constrain|>", "json", "<|message|>", '{"city": "Paris"}', "<|call|>",
    "<|start|>", "assistant", " to", "=", "functions", ".", "lookup", "<|channel|>", "commentary",
    " json", "<|message|>", "{}", "<|call|>",
    "<|start|>", "assistant", "<|channel|>", "final", "<|message|>", "Done.", "<|return|>",
]  # fmt: skip


def test_gpt_oss_headers_run_no_lookahead_sub_attempt() -> None:
    """gpt-oss's headers streamed token by token (reasoning, two calls, a final answer): the call
    opener's lookaheads are decided by `startswith` and the `regex` module (no sub-attempt: 7
    before), the content opener is walked, so 14 attempt runs instead of 30; the message is the
    one-shot parse's."""
    t = chatparse.load_response_template(catalog.get("gpt_oss"))
    text = "".join(GPT_OSS_TOKENS)
    modes: list[int] = []
    real_init = _rx.Attempt.__init__

    def init(self: _rx.Attempt, prog: _rx.Program, start: int, ctx: object = None, mode: int = 0) -> None:
        modes.append(mode)
        real_init(self, prog, start, ctx, mode)  # type: ignore[arg-type]

    with count_calls((_rx.Attempt, "run"), (_rx, "_look_rx")) as c:
        _rx.Attempt.__init__ = init  # type: ignore[method-assign]
        try:
            p = chatparse.ResponseParser(t, prefix="<|start|>assistant")
            for tok in GPT_OSS_TOKENS:
                p.feed(tok)
            message = p.finalize()[0]
        finally:
            _rx.Attempt.__init__ = real_init  # type: ignore[method-assign]
    assert message == chatparse.parse_response(text, t, prefix="<|start|>assistant")
    assert [x["function"]["name"] for x in message["tool_calls"]] == ["get_weather", "lookup"]
    assert modes.count(_rx.BOOLEAN) == 0 and modes.count(_rx.SUB) == 0
    assert c["run"] <= 14
    assert c["_look_rx"] >= 1
    assert stream_chars(t, text) == chatparse.parse_response(text, t, prefix="")


def test_the_module_decides_what_the_window_bounds() -> None:
    """A body read past its window is cut there (one call of bounded cost): a tail run past its
    minimum is a match, and no other way of matching reads that far."""
    look = _look(r"to=(?P<n>[^\s<]+)")
    assert look.rx is not None and look.width <= 8
    buf = "to=" + "n" * 10_000
    assert _rx._look_rx(look, buf, 0, False) == (look.width, [])
    assert _rx._look_rx(look, "x" + buf, 1, True) == (1 + look.width, [])
    assert _rx._look_rx(look, "to=" + " " * 10_000, 0, False) is None
