"""Delimiters the `regex` module would match wrongly (`_rx.module_safe`): the module (releases up
to 2026.11.19, which the engines' venvs install; fixed in 2026.12.2) merges alternatives that are single negated characters into one wrong set, also after taking a
common literal prefix out of the branches (`[^<]|[^a]`, `x[^<]|x[^a]`, `a(?:[^<]|b)|a[^a]` match
neither "<" nor "a" where they should). chatparse's interpreter matches them as written, so
without the rewrite a streamed parse and a one-shot parse (whose seekers are module-compiled)
disagreed. Checked with the rewrite forced (`merges=True`, whatever the installed module does): it
matches as Python's `re` does; no catalog delimiter is rewritten (the module runs `[^<<]*` ~10x
slower than `[^<]*`); and, with the installed module, streamed == one-shot on templates built from
such patterns (a guard where the installed module has the bug: it fails there without the
rewrite)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import regex

import chatparse
from chatparse import _rx

#: Patterns the module gets wrong as written (each checked below against the module itself).
MERGED = [
    r"[^<]|[^a]",
    r"c(?:[^<]|[^a])",
    r"c[^<]|c[^a]",
    r"[^<]|x|[^a]",
    r"(?:[^<]|y)|[^a]",
    r"[^\x3c]|[^a]",
    r"[^<]{1}|[^a]",
    r"[^<](?:)|[^a]",
    r"a(?:[^<]|b)|a[^a]",
    r"[^]]|[^a]",
    r"[^-]|[^^]|[^[]",
    r"[^\n]|[^a]",
]

#: Patterns left as they are (no alternation of two negated characters, or one character twice).
KEPT = [r"[^<]*<x>", r"[^<]|[^<]", r"[^ab]|[^<]", r"\S|[^a]", r"(?:<\|m\|>)?[^<]*<\|c\|>", r"[^<]x"]

ALPHABET = "<a]-^[\nxybc"


def _spans(compiled: re.Pattern[str] | regex.Pattern[str], text: str) -> list[tuple[int, int] | None]:
    return [(m.span() if (m := compiled.match(text, i)) else None) for i in range(len(text) + 1)]


@pytest.mark.parametrize("pattern", MERGED)
def test_the_module_gets_these_wrong_and_the_rewrite_matches_as_re(pattern: str) -> None:
    rng = random.Random(pattern)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 6))) for _ in range(400)]
    expected = re.compile(pattern, re.DOTALL)
    as_written = regex.compile(pattern, regex.DOTALL)
    if _rx.MODULE_MERGES_NEGATED:
        # (the premise, where the installed module has the bug: as written it differs from `re`)
        assert any(_spans(as_written, t) != _spans(expected, t) for t in texts), pattern
    assert _rx.module_safe(pattern) == (
        _rx.module_safe(pattern, True) if _rx.MODULE_MERGES_NEGATED else pattern
    )
    fixed = regex.compile(_rx.module_safe(pattern, True), regex.DOTALL)
    for t in texts:
        assert _spans(fixed, t) == _spans(expected, t), (pattern, t)


@pytest.mark.parametrize("pattern", KEPT)
def test_patterns_without_the_shape_are_not_rewritten(pattern: str) -> None:
    assert _rx.module_safe(pattern, True) is pattern


def test_no_catalog_delimiter_is_rewritten() -> None:
    """The rewrite costs speed (a set instead of one character in the module): no catalog
    template pays it."""
    root = Path(chatparse.__file__).parent / "catalog" / "templates"
    seen = 0

    def walk(node: object) -> None:
        nonlocal seen
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str) and key.endswith("_pattern") and key != "tag_pattern":
                    seen += 1
                    assert _rx.module_safe(value, True) == value, value
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(root.glob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")))
    assert seen > 100


def _template(opener: str) -> dict:
    return {"start_anchor": "\x00", "fields": {"x": {"open_pattern": opener, "close": "Z"}, "content": {}}}


def _assert_streamed_equals(t: Any, prefix: str, text: str, whole: Any, rng: random.Random) -> None:
    """`text` fed one character at a time and in random 1-3 character chunks gives `whole`."""
    for sizes in ([1] * len(text), [rng.randrange(1, 4) for _ in text]):
        p = chatparse.ResponseParser(t, prefix=prefix)
        i = 0
        for n in sizes:
            if i >= len(text):
                break
            p.feed(text[i : i + n])
            i += n
        assert p.finalize()[0] == whole, (text, sizes)


@pytest.mark.parametrize("pattern", [p for p in MERGED if "\n" not in p])
def test_streamed_equals_one_shot_on_such_openers(pattern: str) -> None:
    """One character per feed and random chunks give `parse_response`'s message (the one-shot
    seekers compile the delimiter with the module, the streamed attempts run the interpreter)."""
    t = chatparse.load_response_template(_template(pattern))
    rng = random.Random(pattern)
    pieces = ["<", "a", "c", "x", "y", "b", " ", "Z", "hi ", "]", "-"]
    opened = 0
    for _ in range(200):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        whole = chatparse.parse_response(text, t, prefix="")
        opened += "x" in whole
        _assert_streamed_equals(t, "", text, whole, rng)
    assert opened > 0  # (the openers do match: `<` and `a` after their prefix included)


def test_the_again_steps_joined_lookahead_is_made_safe() -> None:
    """The one-shot again step after a region of a repeating field joins the other top delimiters
    into one lookahead (`_oneshot._Again`): two of them single negated characters after a common
    `c` (`c[^<]`, `c[^a]`) make the alternation the module merges, though each delimiter alone has
    none. Right after `</c>`, at `c<2`, `y` opens (its match is longer than the opener's `c`), as
    streaming finds; with the joined lookahead as written, the module's one-shot took the opener
    there (and raised on the JSON body `<2`)."""
    t = chatparse.load_response_template(
        {
            "start_anchor": "S",
            "fields": {
                "x": {"open_pattern": "c[^<]", "close_pattern": "!x"},
                "y": {"open_pattern": "c[^a]", "close_pattern": "!y"},
                "tool_calls": {
                    "open_pattern": "T|(?<=</c>)c",
                    "close_pattern": "</c>",
                    "repeats": True,
                    "content": "json",
                    "content_args": {"close_after_value": True},
                },
                "content": {},
            },
        }
    )
    if _rx.MODULE_MERGES_NEGATED:  # the premise, where the installed module has the bug
        assert regex.match(r"(?!(?:c[^<])|(?:c[^a]))(?:c)", "c<2") is not None
    for text in ["T1</c>c<2!y", "T1</c>c2</c>", "T1</c>cb!x", "T1</c>c<2</c>c3"]:
        p = chatparse.ResponseParser(t, prefix="S")
        for ch in text:
            p.feed(ch)
        streamed = p.finalize()[0]
        assert chatparse.parse_response(text, t, prefix="S") == streamed, text
    assert chatparse.parse_response("T1</c>c<2!y", t, prefix="S") == {"tool_calls": [1], "y": "2"}


@pytest.mark.parametrize(
    ("x", "y"),
    [("[^<]!", "[^a]\\?"), ("\\s*[^<]!", "[^a]\\?"), ("[^<]!|b!", "[^a]\\?")],
)
def test_delimiters_whose_leads_are_different_negated_characters(x: str, y: str) -> None:
    """Two top delimiters whose first character is a different negated class: the scanner's lead
    search joins their classes into one pattern (`TriggerSearch`, a prefilter's `search_re`, a
    watch list's leading-run test), which the module merged, so streaming missed `y` at `<?` after
    `aaa` (each delimiter alone has no such alternation). Streamed == one-shot == the message."""
    t = chatparse.load_response_template(
        {
            "start_anchor": "S",
            "fields": {
                "x": {"open_pattern": x, "close": "#"},
                "y": {"open_pattern": y, "close": "%"},
                "content": {},
            },
        }
    )
    rng = random.Random(x + y)
    pieces = ["a", "<", "?", "!", "#", "%", " ", "b"]
    texts = ["aaa<?q%", "aaa<?q%<<a!z#"] + [
        "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14))) for _ in range(150)
    ]
    for text in texts:
        whole = chatparse.parse_response(text, t, prefix="S")
        _assert_streamed_equals(t, "S", text, whole, rng)
    assert chatparse.parse_response("aaa<?q%", t, prefix="S")["y"] == "q"
