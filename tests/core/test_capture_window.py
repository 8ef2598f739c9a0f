"""The groups of a committed match from one `regex` module match over a window of constant width
(`_rx.capture_window`, used by `_scan._captures`), instead of the exact interpreter's capture run:
the same groups for every pattern the analysis proves, the interpreter for every other pattern,
and for a tail run the window cut short."""

from __future__ import annotations

import random
import time

import pytest
import regex

import chatparse
from chatparse import _rx, _scan, catalog
from tests.core.test_linear import count_calls, stream_chars

GPT_OSS_CALL = catalog.get("gpt_oss")["fields"]["tool_calls"]["open_pattern"]

#: Patterns the analysis proves, chosen against the window: lookaheads reading past the match,
#: tail runs (captured, in and out of lookaheads), runs that are and are not forced by what follows
#: them, optional groups, lookbehinds, end and word-boundary assertions next to the window's edge.
PROVEN = [
    GPT_OSS_CALL,
    r"(?=[^<]{0,8}(?:<c>[^<]{0,8})?to=(?P<name>[^\s<]+))[^<]{0,8}<c>",
    r"(?P<a>x{0,3})(?=(?P<b>[ab]+))",
    r"<(?P<t>[a-c]{1,4})\b(?=[^>]{0,5}>)",
    r"(?P<n>a{1,4})$",
    r"(?P<n>a{0,3})(?=\n?$)",
    r"(?<=q)(?P<n>[ab]{0,3})(?:c|d)?(?P<m>b+)",
    r"(?:a|(?=b)|^)(?=[ab]{0,3}(?P<k>c+))[abc]{0,6}(?P<e>d?)",
    r"(?P<w>[ab]{0,4})(?!a)(?P<r>[^d]*)",
]

#: Patterns it must not prove (an unbounded run before more pattern, exponential repeats, a
#: lookahead's unbounded run before more of its body, too many optional groups to expand).
UNPROVEN = [
    r"(?P<n>a*)b",
    r"(?P<n>(?:a|aa){0,40})b",
    r"(?=(?P<n>a+)b)a",
    r"(?P<n>[ab]{0,3})(?:x)?" * 1 + "".join(f"(?:{c})?" for c in "abababababababababababab") + "(?P<m>c)",
    r"(?:(?P<n>a{1,50})){0,50}b",
]


#: gpt-oss headers (with and without a call), which random text rarely spells.
HEADERS = [
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}",
    "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>",
    "<|channel|>analysis to=functions.x.y<|message|>",
    "to=functions.a <|channel|>commentary<|message|>",
    "<|start|>assistant<|channel|>commentary to=browser.open<|message|>",
    "<|channel|>commentary to=functions." + "n" * 200 + " <|message|>",
    "<|start|>assistant" + " " * 130 + "to=functions.f<|channel|>commentary<|message|>",
]


def _delimiter(src: str) -> _scan.Delimiter:
    d = _scan.Delimiter(src, None)
    d.module_re = regex.compile(src, regex.DOTALL)
    d.match_re = _rx.match_only(src, regex.DOTALL)
    return d


def _interpreter(d: _scan.Delimiter, buf: str, start: int, eos: bool) -> dict[str, str]:
    slots = _rx.capture(d.prog, buf, start, eos)
    return {
        g: buf[slots[s] : slots[s + 1]]
        for g, s in d.group_names.items()
        if slots[s] != -1 and slots[s + 1] != -1
    }


@pytest.mark.parametrize("src", PROVEN)
def test_the_window_gives_the_interpreters_groups(src: str) -> None:
    """At every position of random texts where the pattern matches, the window's groups are the
    interpreter's and the `regex` module's over the whole text (eos), and over a prefix that the
    decision run did not need to see the end of (the interpreter's run is not live there)."""
    tree = _rx._Parser(src, regex.DOTALL).parse()
    assert _rx.capture_window(tree) is not None
    alphabet = list("abcdxq<>\n ") + [
        "<c>",
        "to=",
        "a" * 12,
        "b" * 9,
        "<|channel|>",
        "to=functions.f",
        "<|message|>",
    ]
    rng = random.Random(src)
    full = regex.compile(src, regex.DOTALL)
    checked = 0
    texts = [
        rng.choice(HEADERS) + "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
        for _ in range(60)
    ]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 14))) for _ in range(300)]
    for text in texts:
        for start in range(len(text)):
            m = full.match(text, start)
            if m is None:
                continue
            d = _delimiter(src)
            got = _scan._captures(d, text, start, True)
            assert d.capture_width >= 0
            want = {g: v for g, v in m.groupdict().items() if v is not None}
            assert got == want == _interpreter(d, text, start, True), (text, start)
            checked += 1
            # Streaming: a prefix on which the decision is already final.
            for cut in range(start, len(text)):
                r = _rx.Attempt(d.prog, start, _rx.MatchContext()).run(text[:cut], False)
                if r is None or r == _rx.LIVE:
                    continue
                assert _scan._captures(_delimiter(src), text[:cut], start, False) == want, (text, cut)
    assert checked >= 10


def test_a_tail_run_cut_by_the_window_is_captured_by_the_interpreter() -> None:
    """A captured tail run longer than the window ends at the window's edge: the groups then come
    from the interpreter, whole."""
    d = _delimiter(r"(?P<a>x)(?=(?P<b>a+))")
    text = "x" + "a" * 1000 + "y"
    with count_calls((_rx, "capture")) as c:
        caps = _scan._captures(d, text, 0, True)
    assert caps == {"a": "x", "b": "a" * 1000}
    assert c["capture"] == 1
    with count_calls((_rx, "capture")) as c:
        assert _scan._captures(d, "xaa", 0, True) == {"a": "x", "b": "aa"}
    assert c["capture"] == 0


@pytest.mark.parametrize("src", UNPROVEN)
def test_unproven_patterns_keep_the_interpreter(src: str) -> None:
    """Patterns whose `regex` module cost the analysis cannot bound keep the interpreter; the
    analysis itself stays fast (its expansions are budgeted)."""
    tree = _rx._Parser(src, regex.DOTALL).parse()
    t0 = time.process_time()
    assert _rx.capture_window(tree) is None
    assert time.process_time() - t0 < 5  # a hang guard, not a timing claim
    d = _delimiter(src)
    text = "a" * 30 + "b" + "c" * 3
    m = regex.compile(src, regex.DOTALL).match(text, 0)
    if m is not None:
        with count_calls((_rx, "capture")) as c:
            got = _scan._captures(d, text, 0, True)
        assert got == {g: v for g, v in m.groupdict().items() if v is not None}
        assert d.capture_width < 0  # -2: a walked match, whose groups `_captures` takes as before
        assert c["capture"] == (1 if d.walks is None else 0)


def test_gpt_oss_call_names_come_from_the_window() -> None:
    """gpt-oss's call opener (the name in a lookahead with bounded gaps, a tail run) is proven:
    its committed calls take their names from one `regex` match, never the interpreter's capture
    run (before: one per call), streamed one character per feed and in one feed."""
    t = chatparse.load_response_template(catalog.get("gpt_oss"))
    text = (
        "<|channel|>analysis<|message|>think<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "Paris"}<|call|>'
        "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{}<|call|>"
    )
    with count_calls((_rx, "capture")) as c:
        message = stream_chars(t, text)
        one = chatparse.ResponseParser(t, prefix="")
        one.feed(text)
        whole = one.finalize()[0]
    assert [x["function"]["name"] for x in message["tool_calls"]] == ["get_weather", "lookup"]
    assert message == whole == chatparse.parse_response(text, t, prefix="")
    assert c["capture"] == 0
