"""`python-call-list` with the chatparse extension `bare_calls: true` (Olmo 3's `<function_calls>`).

The calls are not wrapped in `[` `]` and are separated by a line break or a comma. Everything else
is the strict 5.24 grammar, so a bare list must parse exactly like the same calls in brackets.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatparse._content import parse_content

BARE = {"bare_calls": True}

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}(?:[.\-][A-Za-z0-9_]{1,4})?", fullmatch=True)
scalars = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=8),
    st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
calls = st.lists(st.tuples(names, st.dictionaries(names, values, max_size=3)), max_size=4)


def render(name: str, arguments: dict) -> str:
    return (
        name + "(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items()) + ")"
    )


@settings(max_examples=200, deadline=None)
@given(calls, st.sampled_from(["\n", ",", ", ", " ,\n", "\n\n", "\r\n"]))
def test_bare_list_parses_like_the_bracketed_list(items: list, separator: str) -> None:
    texts = [render(n, a) for n, a in items]
    bracketed = parse_content("[" + ", ".join(texts) + "]", "python-call-list", {})
    assert parse_content(separator.join(texts), "python-call-list", BARE) == bracketed
    assert parse_content("\n  " + separator.join(texts) + " \n", "python-call-list", BARE) == bracketed


def test_examples() -> None:
    text = 'get_weather(city="Paris")\nget_time(timezone="CET", utc=true)'
    assert parse_content(text, "python-call-list", BARE) == [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_time", "arguments": {"timezone": "CET", "utc": True}},
    ]
    assert parse_content("", "python-call-list", BARE) == []
    assert parse_content("f()", "python-call-list", BARE) == [{"name": "f", "arguments": {}}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f(a=1) g(b=2)", "expected ',' or a line break between calls"),
        ("[f(a=1)]", "expected a function name"),
        ("f(a=1),", "expected a function name"),
        ("f(a=1)\nnot a call", "expected '('"),
        ("f(1)", "positional arguments"),
    ],
)
def test_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="python-call-list") as info:
        parse_content(text, "python-call-list", BARE)
    assert message in str(info.value)


def test_bare_calls_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="'bare_calls' content_arg must be a bool"):
        parse_content("f()", "python-call-list", {"bare_calls": "yes"})


def test_default_is_the_strict_bracketed_grammar() -> None:
    with pytest.raises(ValueError, match="expected '\\['"):
        parse_content("f(a=1)", "python-call-list", {})
