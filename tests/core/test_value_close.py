"""chatparse content_args extensions added for issue 10 (keys the reference ignores).

* `close_after_value` (`json`, `python-call-list`): the region also closes, zero-width, at the first
  non-whitespace character after its first bracketed value (brackets counted outside strings), so
  text or a repeated call marker after a call payload is not swallowed by the call.
* `close_outside_strings` now also for `python-call-list` (single- and double-quoted strings).
* `python-call-list` `brackets: false`: calls without the surrounding list, one per line or
  separated by commas (Olmo 3).
* `xml-inline` `json_body: true`: a body that is a JSON object is the arguments; a body with text but
  no tag is an error instead of `{}`.

Streamed == one-shot is checked for every split on hypothesis texts built from the catalog
templates that use these options.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse import ResponseParser, catalog, load_response_template, parse_response
from chatparse._content import parse_content
from chatparse._scan import StringGuard

VALUE = {
    "start_anchor": "S",
    "fields": {
        "calls": {
            "open": "<c>",
            "close": "</s>",
            "content": "json",
            "content_args": {"close_after_value": True},
        },
        "content": {"close": "</s>"},
    },
}


def stream(template: dict, text: str, chunks: list[str], prefix: str = "") -> dict:
    p = ResponseParser(template, prefix=prefix)
    for c in chunks:
        p.feed(c)
    return p.finalize()[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<c>{"a": 1} after', {"calls": {"a": 1}, "content": "after"}),
        ('<c> [1, {"b": "x]}"}]\n\ntail</s>', {"calls": [1, {"b": "x]}"}], "content": "tail"}),
        ('<c>{"a": 1}</s>', {"calls": {"a": 1}}),  # the closer right after the value is consumed
        ('<c>{"a": 1}  \n', {"calls": {"a": 1}}),  # only whitespace after the value
        ('<c>{"a": "\\"}"} x', {"calls": {"a": '"}'}, "content": "x"}),  # escaped quote in a string
        ('<c>{"a": 1}<c>{"b": 2}', {"calls": {"b": 2}}),  # repeated opener (not repeats: last wins)
        ("<c>nope</s>", None),  # no bracket first: the closer decides, as without the option
        # whitespace around the value is JSON's: a Unicode space json.loads rejects is text after it
        ('<c>{"a": 1}\x85tail', {"calls": {"a": 1}, "content": "tail"}),
        ('<c>{"a": 1}\u2028', {"calls": {"a": 1}}),  # content strips it, as str.strip
        ('<c>\t\r\n{"a": 1}\r\n</s>', {"calls": {"a": 1}}),
        ('<c>\x85{"a": 1}</s>', None),  # not JSON whitespace before the value: the closer decides
    ],
)
def test_close_after_value(text: str, expected: dict | None) -> None:
    if expected is None:
        with pytest.raises(ValueError):
            parse_response(text, VALUE, prefix="")
        return
    assert parse_response(text, VALUE, prefix="") == expected
    assert stream(VALUE, text, list(text)) == expected


def test_close_after_value_events_are_zero_width_and_complete() -> None:
    p = ResponseParser(VALUE, prefix="")
    events = p.feed('<c>{"a": 1} after') + p.finalize()[1]
    close = next(e for e in events if e["type"] == "region_close" and e["field"] == "calls")
    assert close["start"] == close["end"] == len('<c>{"a": 1} ')
    assert close["complete"] is True


def test_close_after_value_holds_whitespace_until_decided() -> None:
    p = ResponseParser(VALUE, prefix="")
    events = p.feed('<c>{"a": 1}\n')
    assert not [e for e in events if e["type"] == "region_close"]
    events = p.feed("x")
    assert [e["field"] for e in events if e["type"] == "region_close"] == ["calls"]


def test_close_after_value_python_strings() -> None:
    t = {
        "start_anchor": "S",
        "fields": {
            "calls": {
                "open": "<c>",
                "close": "</s>",
                "content": "python-call-list",
                "content_args": {"close_after_value": True},
            },
            "content": {"close": "</s>"},
        },
    }
    text = "<c>[f(a='x)]'), g(b=\"]\")] rest"
    expected = {
        "calls": [{"name": "f", "arguments": {"a": "x)]"}}, {"name": "g", "arguments": {"b": "]"}}],
        "content": "rest",
    }
    assert parse_response(text, t, prefix="") == expected
    assert stream(t, text, list(text)) == expected


def test_close_after_value_string_delims_cut_by_a_feed() -> None:
    """A `string_delims` opener split across feeds: the bracket inside its string is not the end of
    the value (the tail that may begin the opener waits for the next feed)."""
    t = {
        "start_anchor": "S",
        "fields": {
            "calls": {
                "open": "<c>",
                "close": "</s>",
                "content": "json",
                "content_args": {"close_after_value": True, "string_delims": [["<|s|>", "<|e|>"]]},
            },
            "content": {"close": "</s>"},
        },
    }
    text = "<c>{<|s|>a<|e|>: <|s|>x]}<|e|>} after"
    expected = parse_response(text, t, prefix="")
    assert expected == {"calls": {"a": "x]}"}, "content": "after"}
    assert stream(t, text, list(text)) == expected
    for i in range(1, len(text)):
        assert stream(t, text, [text[:i], text[i:]]) == expected, i
    # the guard itself: before the end of the stream, a tail that may begin an opener is undecided
    # (held from its start); at the end it is text, and `]` ends the value
    delims = (("<|s|>", "<|e|>"),)
    assert StringGuard(3, delims, '"', True).value_close_at("<c>[<|s", False) == (4, 7)
    assert StringGuard(3, delims, '"', True).value_close_at("<c>[<|s", True) is None
    assert StringGuard(3, delims, '"', True).value_close_at("<c>[<|s]", False) == (8, 8)


def test_close_outside_strings_for_python_call_lists() -> None:
    t = {
        "start_anchor": "S",
        "fields": {
            "calls": {
                "open": "<c>",
                "close": "</c>",
                "content": "python-call-list",
                "content_args": {"close_outside_strings": True, "brackets": False},
            },
            "content": {},
        },
    }
    text = "<c>f(a='</c>')\ng(b=\"</c>\")</c>done"
    expected = {
        "calls": [{"name": "f", "arguments": {"a": "</c>"}}, {"name": "g", "arguments": {"b": "</c>"}}],
        "content": "done",
    }
    assert parse_response(text, t, prefix="") == expected
    assert stream(t, text, list(text)) == expected


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"open": "<c>", "content": "json", "content_args": {"close_after_value": True}}, "needs a closer"),
        (
            {"close": "x", "content": "json", "content_args": {"close_after_value": True}},
            "needs an explicit field",
        ),
        (
            {"open": "<c>", "close": "x", "content": "text", "content_args": {"close_after_value": True}},
            "needs content 'json' or 'python-call-list'",
        ),
    ],
)
def test_close_after_value_validation(field: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_response_template({"start_anchor": "S", "fields": {"f": field}})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("f(a=1)\ng(b='x')", [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {"b": "x"}}]),
        ("f(a=1), g()", [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]),
        ("  \n f(a=null, b=true)\n\n", [{"name": "f", "arguments": {"a": None, "b": True}}]),
        ("", []),
    ],
)
def test_python_call_list_without_brackets(text: str, expected: list) -> None:
    assert parse_content(text, "python-call-list", {"brackets": False}) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("f() g()", "expected ',' or a line break between calls"),
        ("[f()]", "expected a function name"),
        ("f(a=1),", "expected a function name"),
    ],
)
def test_python_call_list_without_brackets_errors(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_content(text, "python-call-list", {"brackets": False})
    with pytest.raises(ValueError, match="must be a bool"):
        parse_content("f()", "python-call-list", {"brackets": "no"})


TAGS = {"tag_pattern": r'<p n="(?P<key>[^"]+)">(?P<value>.*?)</p>', "json_body": True}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('\n{"a": [1, 2], "b": "x"}\n', {"a": [1, 2], "b": "x"}),
        ('<p n="a">1</p>\n<p n="b">x</p>', {"a": "1", "b": "x"}),
        ("  \n ", {}),
    ],
)
def test_xml_inline_json_body(body: str, expected: dict) -> None:
    assert parse_content(body, "xml-inline", TAGS) == expected


@pytest.mark.parametrize(
    ("body", "error"), [("{bad", "not a JSON object"), ("[1]", "no tag"), ("words", "no tag")]
)
def test_xml_inline_json_body_errors(body: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_content(body, "xml-inline", TAGS)
    # without the option the reference behaviour stands: no tag, no error
    assert parse_content(body, "xml-inline", {"tag_pattern": TAGS["tag_pattern"]}) == {}


def test_reference_ignores_the_new_keys() -> None:
    """The reference loads every catalog template that uses them (it ignores unknown content_args)."""
    rt = pytest.importorskip("transformers.utils.chat_parsing.response_templates")
    for name in USING:
        rt.load_response_template(catalog.get(name))


def _uses_new_keys(name: str) -> bool:
    keys = {"close_after_value", "brackets", "json_body"}
    return any(keys & set(f.get("content_args") or {}) for f in catalog.get(name)["fields"].values())


USING = [n for n in catalog.names() if _uses_new_keys(n)]

# the vocabulary every split and combination is drawn from: each template's own markers, JSON and
# Python fragments with brackets and quotes, whitespace and prose
_PIECES = [
    "{", "}", "[", "]", "(", ")", '"', "'", "\\", ",", ":", "=", " ", "\n", "x", "Paris", '"a"', "1",
    '{"name": "f", "arguments": {"a": 1}}', "f(a=1)", "[f(a='x')]", "null", "text",
]  # fmt: skip
_MARKERS = {
    name: sorted(
        {
            m
            for m in (
                "[TOOL_CALLS]", "[ARGS]", "</s>", "[THINK]", "[/THINK]", "<|python_tag|>", "<|eot_id|>",
                "<|eom_id|>", ";", "<|python_start|>", "<|python_end|>", "<|tool_call|>", "<tool_call>",
                "<|end_of_text|>", "functools", "<|end|>", "<|call|>", "<|message|>", "<|channel|>",
                "commentary to=functions.f", "<function_calls>", "</function_calls>", "<think>", "</think>",
                '<｜DSML｜invoke name="f">', "</｜DSML｜invoke>", '<｜DSML｜parameter name="a" string="true">',
                "</｜DSML｜parameter>", "<｜DSML｜tool_calls>", "<|im_end|>",
            )
        }
    )
    for name in USING
}  # fmt: skip


@st.composite
def _case(draw):
    name = draw(st.sampled_from(USING))
    pieces = draw(st.lists(st.sampled_from(_PIECES + _MARKERS[name]), min_size=1, max_size=16))
    text = "".join(pieces)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=8)))
    return name, text, cuts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_catalog_templates_with_the_new_options_stream_exactly(case: tuple[str, str, list[int]]) -> None:
    name, text, cuts = case
    template = catalog.load(name)
    prefix = catalog.describe(name)["generation_prompt"]
    try:
        one = parse_response(text, template, prefix=prefix)
    except (ValueError, KeyError) as e:
        one = type(e)
    bounds = [0, *[c for c in cuts if 0 < c < len(text)], len(text)]
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    p = ResponseParser(template, prefix=prefix)
    events = list(p.initial_events)
    for c in chunks:
        events += p.feed(c)
    message, last = p.finalize()
    events += last
    malformed = [e for e in events if e["type"] == "region_malformed"]
    if malformed:  # one-shot raises the first malformed region's error (D11)
        assert one is type(malformed[0]["error"])
    else:
        assert message == one


def test_alternation_closers_keep_the_trigger_quick_path() -> None:
    """`\\s*(?:<|im_end|>|</think>)` shares only `<` between its alternatives: the scanner checks
    the text after each `<` against every alternative's own literal, so prose full of `<` runs no
    more attempts than with one literal closer (the stray-marker closers of the catalog, issue 10
    item 8)."""
    from chatparse import _rx

    def attempts(close_pattern: str) -> int:
        t = {
            "start_anchor": "S",
            "fields": {
                "think": {"open": "<think>", "close": "</think>"},
                "content": {"close_pattern": close_pattern},
            },
        }
        calls = 0
        run = _rx.Attempt.run

        def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            return run(self, *args, **kwargs)

        _rx.Attempt.run = counted  # type: ignore[method-assign]
        try:
            p = ResponseParser(t, prefix="")
            text = "a <b> c <x d " * 200 + "</think>end"
            for i in range(0, len(text), 3):
                p.feed(text[i : i + 3])
            message = p.finalize()[0]
        finally:
            _rx.Attempt.run = run  # type: ignore[method-assign]
        assert message["content"] == "end"
        return calls

    one = attempts(r"\s*</think>")
    alternation = attempts(r"\s*(?:<\|im_end\|>|<\|endoftext\|>|</think>|</tool_call>)")
    # `\s*</think>` is a chain (`_scan.Chain`): decided by walks, it runs no attempt at all; the
    # alternation runs one, where it matches, however many `<` the prose holds.
    assert one == 0 and alternation <= 1, (alternation, one)
