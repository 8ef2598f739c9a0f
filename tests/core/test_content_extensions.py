"""chatparse's content-parser extensions for the breadth formats: `xml-inline` `type_parsers` and
`json` `single_key_objects` (keys the reference ignores; docs/compatibility.md "Extensions")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chatparse
from chatparse._content import parse_content

GCML = '<p name="(?P<key>[^"]+)" string="(?P<type>true|false)">(?P<value>.*?)</p>'  # the GigaChat 3.5 shape
JSON_VALUE = {"name": "json", "args": {"allow_non_json": True, "strip": False}}


def typed(text: str, **extra: Any) -> dict[str, Any]:
    return parse_content(
        text, "xml-inline", {"tag_pattern": GCML, "type_parsers": {"false": JSON_VALUE}, **extra}
    )


def test_type_parsers_choose_the_value_parser_by_the_type_group() -> None:
    text = (
        '<p name="a" string="false">12</p><p name="b" string="true">12</p>'
        '<p name="c" string="false">{"k": [1, null]}</p><p name="d" string="false">not json</p>'
    )
    assert typed(text) == {"a": 12, "b": "12", "c": {"k": [1, None]}, "d": "not json"}


def test_type_parsers_fall_back_to_value_parser() -> None:
    pattern = '<p name="(?P<key>[^"]+)"(?: t="(?P<type>[a-z]+)")?>(?P<value>.*?)</p>'
    args = {
        "tag_pattern": pattern,
        "type_parsers": {"integer": {"name": "int", "args": {}}},
        "value_parser": {"name": "text", "args": {}},
    }
    text = '<p name="n" t="integer"> 7 </p><p name="s" t="string"> x </p><p name="u"> y </p>'
    assert parse_content(text, "xml-inline", args) == {"n": 7, "s": "x", "u": "y"}


def test_type_parsers_are_ignored_by_the_reference() -> None:
    from transformers.utils.chat_parsing.content_parsers import parse_content as ref_parse_content

    text = '<p name="a" string="false">12</p>'
    args = {"tag_pattern": GCML, "type_parsers": {"false": JSON_VALUE}}
    assert ref_parse_content(text, "xml-inline", args) == {"a": "12"}
    assert parse_content(text, "xml-inline", {"tag_pattern": GCML}) == {"a": "12"}


@pytest.mark.parametrize("bad", [["json"], {"false": "json"}, {"false": None}])
def test_type_parsers_must_map_types_to_value_parsers(bad: Any) -> None:
    with pytest.raises(ValueError, match="'type_parsers' content_arg must map"):
        parse_content(
            '<p name="a" string="false">1</p>', "xml-inline", {"tag_pattern": GCML, "type_parsers": bad}
        )


def test_type_parser_failure_is_a_value_error() -> None:
    args = {"tag_pattern": GCML, "type_parsers": {"false": {"name": "json", "args": {}}}}
    with pytest.raises(ValueError, match="json parser could not parse"):
        parse_content('<p name="a" string="false">{oops</p>', "xml-inline", args)


NAMES = ["name", "arguments"]


def test_single_key_objects_turn_keys_into_names() -> None:
    text = '[{"get_weather": {"city": "Paris"}}, {"list_alarms": {}}]'
    assert parse_content(text, "json", {"single_key_objects": NAMES}) == [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "list_alarms", "arguments": {}},
    ]
    assert parse_content('{"f": 1}', "json", {"single_key_objects": NAMES}) == {"name": "f", "arguments": 1}
    assert parse_content("[]", "json", {"single_key_objects": NAMES}) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"a": 1, "b": 2}]', "exactly one key at list index 0, got an object with 2 keys"),
        ("[{}]", "exactly one key at list index 0, got an object with 0 keys"),
        ('[{"a": 1}, 3]', "exactly one key at list index 1, got int"),
        ('"x"', "exactly one key, got str"),
    ],
)
def test_single_key_objects_reject_other_shapes(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_content(text, "json", {"single_key_objects": NAMES})


@pytest.mark.parametrize("bad", ["name", ["name"], ["name", "name"], ["", "x"], [1, 2], ["a", "b", "c"]])
def test_single_key_objects_needs_two_names(bad: Any) -> None:
    with pytest.raises(ValueError, match="'single_key_objects' content_arg must be two different"):
        parse_content('[{"f": {}}]', "json", {"single_key_objects": bad})


def test_single_key_objects_with_allow_non_json_keeps_the_text() -> None:
    assert (
        parse_content("not json", "json", {"single_key_objects": NAMES, "allow_non_json": True}) == "not json"
    )


def test_single_key_objects_in_a_template_stream_like_one_shot() -> None:
    template = {
        "start_anchor": "<a>",
        "fields": {
            "tool_calls": {
                "open": "<t>",
                "close": "</t>",
                "content": "json",
                "content_args": {"close_outside_strings": True, "single_key_objects": NAMES},
                "transform_each": True,
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}},
            },
            "content": {},
        },
    }
    text = 'Hi <t>[{"f": {"x": "</t>"}}, {"g": {}}]</t>'
    one = chatparse.parse_response(text, template, prefix="<a>")
    assert one["tool_calls"] == [
        {"type": "function", "function": {"name": "f", "arguments": {"x": "</t>"}}},
        {"type": "function", "function": {"name": "g", "arguments": {}}},
    ]
    parser = chatparse.ResponseParser(template, prefix="<a>")
    for char in text:
        parser.feed(char)
    assert parser.finalize()[0] == one


JSONS = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(JSONS)
def test_single_key_objects_on_any_json_raise_only_value_error(value: Any) -> None:
    text = json.dumps(value)
    try:
        out = parse_content(text, "json", {"single_key_objects": NAMES})
    except ValueError:
        items = value if isinstance(value, list) else [value]
        assert not all(isinstance(i, dict) and len(i) == 1 for i in items)
        return
    items = value if isinstance(value, list) else [value]
    expected = [{"name": next(iter(i)), "arguments": next(iter(i.values()))} for i in items]
    assert out == (expected if isinstance(value, list) else expected[0])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='<>/p nam="strigfulse{}[]0123', max_size=60))
def test_type_parsers_on_any_text_raise_only_value_error(text: str) -> None:
    try:
        result = typed(text)
    except ValueError:
        return
    assert isinstance(result, dict)
