"""Every deliberate difference from transformers 5.24.0, each shown on both implementations.

One test per entry of docs/compatibility.md (ids follow the defect numbers of
shared/reference/response-template.md §9). The reference runs in-process under a timeout guard.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chatparse
from tests.core.reference import ref_parse, ref_parse_isolated, ref_stream


def stream(template: dict, chunks: list[str], prefix: str = "") -> tuple[dict, list[dict]]:
    p = chatparse.ResponseParser(template, prefix=prefix)
    events = list(p.initial_events)
    for c in chunks:
        events += p.feed(c)
    msg, final = p.finalize()
    return msg, events + final


def test_d3_self_overlapping_alternatives() -> None:
    tpl = {"start_anchor": "S", "fields": {"content": {"open": "x", "close": ["abcd", "b"]}, "rest": {}}}
    one_shot = chatparse.parse_response("xabcdyy", tpl, prefix="")
    assert one_shot == {"rest": "yy"}
    assert ref_parse("xabcdyy", tpl).message == one_shot
    # The reference commits the complete "b" while "abcd" is still partial; chatparse holds.
    assert ref_stream(["xabc", "dyy"], tpl).message == {"content": "a", "rest": "cdyy"}
    assert stream(tpl, ["xabc", "dyy"])[0] == one_shot


@pytest.mark.parametrize(
    "tpl,prefix,text,expected",
    [
        (
            {
                "start_anchor": "S",
                "fields": {
                    "thinking": {"open": "<think>", "close_pattern": "</think>\\s*(?:<response>)?"},
                    "content": {"close_pattern": "\\s*</response>"},
                },
            },
            "<think>",
            "a</think><response>b</response>",
            {"thinking": "a", "content": "b"},
        ),
        (
            {
                "start_anchor": "S",
                "fields": {"thinking": {"open_pattern": "<think>\\s*|^", "close": "</think>"}, "content": {}},
            },
            "",
            "<think>x</think>y",
            {"thinking": "x", "content": "y"},
        ),
    ],
)
def test_d4_optional_tails_and_caret_alternatives(tpl: dict, prefix: str, text: str, expected: dict) -> None:
    assert chatparse.parse_response(text, tpl, prefix=prefix) == expected
    assert ref_parse(text, tpl, prefix).message == expected
    assert ref_stream(list(text), tpl, prefix).message != expected  # the reference diverges
    assert stream(tpl, list(text), prefix)[0] == expected


def test_d5_zero_width_opener_and_closer_terminate() -> None:
    tpl = {"start_anchor": "S", "fields": {"x": {"open_pattern": "(?=q)", "close_pattern": "(?=q)"}}}
    assert ref_parse_isolated("aqb", tpl, timeout=0.5) == "timeout"
    assert chatparse.parse_response("aqb", tpl, prefix="") == {"x": "qb"}
    assert stream(tpl, list("aqb"))[0] == {"x": "qb"}


def test_d6_zero_width_implicit_closer_keeps_the_rest() -> None:
    tpl = {"start_anchor": "S", "fields": {"c": {"close_pattern": "(?=z)"}}}
    assert ref_parse("abzcd", tpl).message == {"c": "ab"}  # "zcd" silently lost
    # chatparse: the second zero-width match at the same place is skipped, so "zcd" is routed
    # (and, as for any non-repeats implicit field, replaces "ab": D7 semantics are kept).
    msg, events = stream(tpl, ["abzcd"])
    assert msg == {"c": "zcd"} == chatparse.parse_response("abzcd", tpl, prefix="")
    assert [e["value"] for e in events if e["type"] == "region_close"] == ["ab", "zcd"]


def test_d7_overwrite_is_kept_and_linted() -> None:
    tpl = {"start_anchor": "A", "fields": {"content": {"close": ["<|im_end|>", "<|endoftext|>"]}}}
    text = "Hello<|im_end|>\n<|endoftext|>"
    assert chatparse.parse_response(text, tpl, prefix="") == ref_parse(text, tpl).message == {}
    assert [w.code for w in chatparse.lint_response_template(tpl)] == ["implicit-closer"]


def test_d10_defaults_of_the_wrong_type_are_region_errors() -> None:
    tpl = {
        "start_anchor": "A",
        "defaults": {"t": "x"},
        "fields": {"t": {"open": "<t>", "close": "</t>", "repeats": True}},
    }
    assert ref_parse("<t>a</t>", tpl).error_type == "AttributeError"
    with pytest.raises(ValueError, match="'repeats' appends to a list"):
        chatparse.parse_response("<t>a</t>", tpl, prefix="")
    # Without a region, the default is returned as the reference does.
    assert chatparse.parse_response("", tpl, prefix="") == ref_parse("", tpl).message == {"t": "x"}
    joined = {
        "start_anchor": "A",
        "defaults": {"t": []},
        "fields": {"t": {"open": "<t>", "close": "</t>", "repeats": True, "join": ""}},
    }
    assert ref_parse("<t>a</t>", joined).error_type == "TypeError"
    with pytest.raises(ValueError, match="'join' appends to a string"):
        chatparse.parse_response("<t>a</t>", joined, prefix="")
    none_default = {**tpl, "defaults": {"t": None}}
    assert ref_parse("<t>a</t>", none_default).error_type == "AttributeError"
    assert chatparse.parse_response("<t>a</t>", none_default, prefix="") == {"t": ["a"]}


def test_d11_malformed_region_is_reported_and_parsing_continues() -> None:
    tpl = {
        "start_anchor": "A",
        "fields": {
            "tool": {"open": "<c>", "close": "</c>", "content": "json", "repeats": True},
            "content": {},
        },
    }
    text = 'hi <c>{bad}</c> more <c>{"a": 1}</c>'
    assert ref_parse(text, tpl).error_type == "ValueError"
    msg, events = stream(tpl, [text[:8], text[8:]])
    assert msg["tool"] == [{"a": 1}]
    bad = [e for e in events if e["type"] == "region_malformed"]
    assert len(bad) == 1 and isinstance(bad[0]["error"], ValueError) and bad[0]["field"] == "tool"
    with pytest.raises(ValueError, match="could not parse region as JSON"):
        chatparse.parse_response(text, tpl, prefix="")


def test_d16_truncated_region_is_flagged_incomplete() -> None:
    tpl = {"start_anchor": "A", "fields": {"tool": {"open": "<c>", "close": "</c>"}, "content": {}}}
    _, events = stream(tpl, ["ok <c>half a ca"])
    closes = [e for e in events if e["type"] == "region_close"]
    assert [(e["field"], e["complete"]) for e in closes] == [("content", True), ("tool", False)]


def test_d18_event_values_do_not_alias_the_message() -> None:
    tpl = {"start_anchor": "A", "fields": {"tool": {"open": "<c>", "close": "</c>", "content": "json"}}}
    p = chatparse.ResponseParser(tpl, prefix="")
    ev = [e for e in p.feed('<c>{"a": [1]}</c>') if e["type"] == "region_close"][0]
    ev["value"]["a"].append(2)
    assert p.finalize()[0] == {"tool": {"a": [1]}}


def test_d20_held_prefix_bytes_are_not_re_emitted() -> None:
    tpl = {
        "start_anchor": "<|im_start|>assistant\n",
        "fields": {
            "tool_calls": {
                "open_pattern": "\\s*<tool_call>",
                "close": "</tool_call>",
                "repeats": True,
                "content": "json",
            },
            "content": {"close_pattern": "\\s*(?:<\\|im_end\\|>|<\\|endoftext\\|>)"},
        },
    }
    prefix = "<|im_start|>assistant\nHello <tool_"
    p = chatparse.ResponseParser(tpl, prefix=prefix)
    assert [e.get("text") for e in p.initial_events if e["type"] == "region_chunk"] == ["Hello"]
    assert [e["text"] for e in p.feed("x") if e["type"] == "region_chunk"] == ["x"]
    assert p.finalize()[0] == {"content": "Hello <tool_x"}
    ref_events = ref_stream(["x"], tpl, prefix).events
    assert any(e.get("text") == " <tool_x" for e in ref_events)


def test_d23_regex_closer_without_possible_growth_is_committed_at_once() -> None:
    tpl = {"start_anchor": "S", "fields": {"x": {"open": "<x>", "close_pattern": "</x>"}, "c": {}}}
    p = chatparse.ResponseParser(tpl, prefix="")
    assert [e["type"] for e in p.feed("<x>a</x>")] == ["region_open", "region_chunk", "region_close"]
    from transformers.utils.chat_parsing import ResponseParser as RefParser

    ref = RefParser(tpl, prefix="")
    assert [e["type"] for e in ref.feed("<x>a</x>")] == ["region_open", "region_chunk"]  # close deferred


def test_zero_width_rule_skips_a_second_empty_match_at_the_same_place() -> None:
    # Mistral v11 style: a zero-width closer lets the next opener start at the same position.
    tpl = {
        "start_anchor": "[/INST]",
        "fields": {
            "tool_calls": {
                "open_pattern": "\\[TOOL_CALLS\\](?P<name>[^\\[\\{]+?)\\[ARGS\\]",
                "close_pattern": "(?=\\[TOOL_CALLS\\])|</s>",
                "repeats": True,
                "content": "json",
                "transform": {"name": "{name}", "arguments": "{content}"},
            },
            "content": {"close": "</s>"},
        },
    }
    text = 'Hi[TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{}</s>'
    expected = {
        "content": "Hi",
        "tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}],
    }
    assert chatparse.parse_response(text, tpl, prefix="") == ref_parse(text, tpl).message == expected
    assert stream(tpl, list(text))[0] == expected


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?P<q>')x(?P=q)", "\\G<x>", "(?:a?)*b", "(a)?(?(1)b|c)"])
def test_unsupported_regex_constructs_are_rejected_at_load(pattern: str) -> None:
    tpl = {"start_anchor": "A", "fields": {"t": {"open_pattern": pattern, "close": "</t>"}}}
    with pytest.raises(ValueError, match="Field 't': open_pattern"):
        chatparse.load_response_template(tpl)


def test_content_args_must_be_a_dict() -> None:
    tpl = {"start_anchor": "A", "fields": {"t": {"content": "json", "content_args": ["x"]}}}
    with pytest.raises(ValueError, match="'content_args' must be a dict"):
        chatparse.load_response_template(tpl)


D17_TEMPLATE = {
    "start_anchor": "A",
    "fields": {
        "tool_calls": {
            "open_pattern": "\\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
        },
        "content": {"close_pattern": "\\s*<\\|im_end\\|>"},
    },
}


def _d17_with(content_args: dict) -> dict:
    """A copy of D17_TEMPLATE whose tool-call field has `content_args`."""
    tpl = json.loads(json.dumps(D17_TEMPLATE))
    tpl["fields"]["tool_calls"]["content_args"] = content_args
    return tpl


def test_d17_closer_inside_a_json_string_with_close_outside_strings() -> None:
    text = 'Hi\n<tool_call>{"name": "w", "arguments": {"s": "a</tool_call>b \\" </tool_call>"}}</tool_call><|im_end|>'
    # Reference and default chatparse: the literal closer inside the string ends the call.
    assert ref_parse(text, D17_TEMPLATE).error_type == "ValueError"
    with pytest.raises(ValueError, match="could not parse region as JSON"):
        chatparse.parse_response(text, D17_TEMPLATE, prefix="")
    # Extension: the field closes only outside JSON string literals.
    tpl = _d17_with({"close_outside_strings": True})
    expected = {
        "content": "Hi",
        "tool_calls": [{"name": "w", "arguments": {"s": 'a</tool_call>b " </tool_call>'}}],
    }
    assert chatparse.parse_response(text, tpl, prefix="") == expected
    assert stream(tpl, list(text))[0] == expected
    # The reference ignores the unknown content_arg, so the template stays loadable there.
    assert ref_parse(text, tpl).error_type == "ValueError"


def test_d17_custom_string_delimiters_are_respected() -> None:
    tpl = {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open_pattern": "<\\|tool_call>call:(?P<name>[\\w.\\-]+)",
                "close": "<tool_call|>",
                "repeats": True,
                "content": "json",
                "content_args": {
                    "unquoted_keys": True,
                    "string_delims": [['<|"|>', '<|"|>']],
                    "close_outside_strings": True,
                },
                "transform": {"name": "{name}", "arguments": "{content}"},
            },
            "content": {"close": ["<turn|>"]},
        },
    }
    text = '<|tool_call>call:f{a:<|"|>x<tool_call|>y<|"|>}<tool_call|>'
    expected = {"tool_calls": [{"name": "f", "arguments": {"a": "x<tool_call|>y"}}]}
    assert chatparse.parse_response(text, tpl, prefix="") == expected
    for size in (1, 2, 3):
        assert stream(tpl, [text[i : i + size] for i in range(0, len(text), size)])[0] == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(['"', "\\", "</tool_call>", "</tool", "x", " ", "{", "}", '\\"', "<tool_call>"]),
        max_size=25,
    ),
    st.data(),
)
def test_d17_guarded_streaming_equals_one_shot(parts: list[str], data: st.DataObject) -> None:
    tpl = _d17_with({"close_outside_strings": True, "allow_non_json": True})
    text = "".join(parts)
    one = chatparse.parse_response(text, tpl, prefix="")
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    assert stream(tpl, chunks)[0] == one


def test_close_outside_strings_needs_json_content() -> None:
    tpl = {
        "start_anchor": "A",
        "fields": {"t": {"open": "<t>", "close": "</t>", "content_args": {"close_outside_strings": True}}},
    }
    with pytest.raises(ValueError, match="needs content 'json'"):
        chatparse.load_response_template(tpl)


def test_d12_lenient_unquoted_keys_accept_keys_with_spaces() -> None:
    from transformers.utils.chat_parsing.content_parsers import parse_content as ref_parse_content

    from chatparse._content import parse_content

    args = {"unquoted_keys": "lenient", "string_delims": [['<|"|>', '<|"|>']]}
    text = '{key with space:1.5e-05,Basic LLM Chain:{main:[<|"|>x,y} "q"<|"|>]},a:1}'
    assert parse_content(text, "json", args) == {
        "key with space": 1.5e-05,
        "Basic LLM Chain": {"main": ['x,y} "q"']},
        "a": 1,
    }
    with pytest.raises(ValueError):  # the reference reads "lenient" as true: word keys only
        ref_parse_content(text, "json", args)
    # Word keys behave exactly as with unquoted_keys: true.
    assert parse_content("{ a : 1, b:[2]}", "json", args) == ref_parse_content(
        "{ a : 1, b:[2]}", "json", args
    )


def test_xml_inline_unescape_keys() -> None:
    from chatparse._content import parse_content

    args = {"tag_pattern": '<a k="(?P<key>[^"]*)">(?P<value>.*?)</a>', "unescape_keys": True}
    assert parse_content(
        '<a k="q&amp;a">fish & chips</a><a k="say &quot;hi&quot;">x</a>', "xml-inline", args
    ) == {
        "q&a": "fish & chips",
        'say "hi"': "x",
    }
