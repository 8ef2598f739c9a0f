"""Gemma 4 tool calls: wrapped, stripped (`call:NAME{…}`), prefix-less (`NAME{…}`), repairs.

runtime-contract.md §3.1 (`gemma` row) and the §11 fixtures (stripped form, repaired forms,
truncation, cross-family false positives, unicode/emoji).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse.detect import detect
from chatparse.detect._gemma import bare_calls, repair, scan
from chatparse.openai import AutoStream, merge_deltas
from chatparse.openai import parse_auto as parse_message
from tests.detect import helpers

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
    for n in ("get_weather", "get_time", "say_i_dont_know", "echo")
]
Q = '<|"|>'  # Gemma's string delimiter token

# (text, recognizer, calls [(name, arguments)], cleaned)
CASES: list[tuple[str, str | None, list[tuple[str, dict]], str]] = [
    # wrapped Gemma 4 form
    (
        f"<|tool_call>call:get_weather{{city:{Q}Paris{Q},days:3}}<tool_call|>",
        "gemma",
        [("get_weather", {"city": "Paris", "days": 3})],
        "",
    ),
    (
        f"Checking.\n<|tool_call>call:echo{{text:{Q}héllo 🌍 世界{Q}}}<tool_call|>\nDone.",
        "gemma",
        [("echo", {"text": "héllo 🌍 世界"})],
        "Checking.\n\nDone.",
    ),
    # wrapped, repaired: missing outer } (the terminator is the boundary), curly quotes, `=`
    (
        f"<|tool_call>call:echo{{text:{Q}hi{Q}<tool_call|>",
        "gemma",
        [("echo", {"text": "hi"})],
        "",
    ),
    (
        "<|tool_call>call:say_i_dont_know{reason=<|“|>no data<|”|>}<tool_call|>",
        "gemma",
        [("say_i_dont_know", {"reason": "no data"})],
        "",
    ),
    (
        "<|tool_call>call:get_weather{id:1f173d33-90ab-4cde-8f01-23456789abcd,n:-2.5e3,ok:true}<tool_call|>",
        "gemma",
        [("get_weather", {"id": "1f173d33-90ab-4cde-8f01-23456789abcd", "n": -2500.0, "ok": True})],
        "",
    ),
    # wrapped, dangling string: `<tool_call|>` ends the call, what follows is content
    (
        f"<|tool_call>call:echo{{text:{Q}cut<tool_call|> after",
        "gemma",
        [("echo", {"text": "cut"})],
        "after",
    ),
    # wrapped, truncated (no terminator): repaired and fires
    (
        f"<|tool_call>call:get_weather{{city:{Q}Par",
        "gemma",
        [("get_weather", {"city": "Par"})],
        "",
    ),
    (
        '<|tool_call>call:get_weather{cities:[Paris, <|"|>Rome',
        "gemma",
        [("get_weather", {"cities": ["Paris", "Rome"]})],
        "",
    ),
    # the older form
    ('<call:echo{"text": "hi"}>', "gemma", [("echo", {"text": "hi"})], ""),
    ("<call:echo{text:hi there}>", "gemma", [("echo", {"text": "hi there"})], ""),
    # bare `call:NAME{…}` (special tokens stripped by the decoder): any name, surfaced if unknown
    (
        f"call:get_weather{{city:{Q}Paris{Q}}}",
        "gemma",
        [("get_weather", {"city": "Paris"})],
        "",
    ),
    (
        '\n call:get_weather{city:"Paris",days:2}\n',
        "gemma",
        [("get_weather", {"city": "Paris", "days": 2})],
        "",
    ),
    (
        "call:get_weather{city:Paris}call:get_time{}",
        "gemma",
        [("get_weather", {"city": "Paris"}), ("get_time", {})],
        "",
    ),
    (
        "call:get_weather{city:Paris}\ncall:get_time{}",
        "gemma",
        [("get_weather", {"city": "Paris"}), ("get_time", {})],
        "",
    ),
    ("call:lookup{q:🦄 emoji}", "gemma", [("lookup", {"q": "🦄 emoji"})], ""),
    # prefix-less `NAME{…}`: only offered tools
    ("get_time{}", "gemma", [("get_time", {})], ""),
    ('echo{text:"naïve ☕"}', "gemma", [("echo", {"text": "naïve ☕"})], ""),
    ("get_time{}\necho{text:x}", "gemma", [("get_time", {}), ("echo", {"text": "x"})], ""),
    # false positives: the text stays content
    ("call:me{maybe}", None, [], "call:me{maybe}"),
    ("call: get_weather{city:Paris}", None, [], "call: get_weather{city:Paris}"),
    ("You can call:get_time{} to ask.", None, [], "You can call:get_time{} to ask."),
    ("call:get_time{} is how you ask.", None, [], "call:get_time{} is how you ask."),
    ("call:get_time{} call:echo{}", None, [], "call:get_time{} call:echo{}"),
    ("lookup{q:x}", None, [], "lookup{q:x}"),
    ("get_timer{}", None, [], "get_timer{}"),
    ("Config: {city: Paris, days: 3}", None, [], "Config: {city: Paris, days: 3}"),
    ('{"city": "Paris"}', None, [], '{"city": "Paris"}'),
    # a cut-off bare call is not confident
    (f"call:get_weather{{city:{Q}Par", None, [], f"call:get_weather{{city:{Q}Par"),
    ("get_weather{city:Paris", None, [], "get_weather{city:Paris"),
    # a marker recognizer fired: the bare form is not looked for (and the text streamed as content)
    (
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>call:echo{}',
        "hermes",
        [("get_time", {})],
        "call:echo{}",
    ),
]


def _stream(chunks: Iterable[str], finish_reason: str = "stop") -> tuple[dict, list[dict], str, Any]:
    return helpers.stream(chunks, TOOLS, finish_reason)


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c[1]}" for i, c in enumerate(CASES)])
def test_detect(case: tuple) -> None:
    text, recognizer, calls, cleaned = case
    r = detect(text, tools=TOOLS)
    assert r.raw == text
    assert r.recognizer == recognizer
    assert [(c["name"], c["arguments"]) for c in r.calls] == calls
    assert r.cleaned == cleaned


def _check_equal(text: str, chunks: list[str], finish_reason: str = "stop") -> None:
    one, _, one_reason, r1 = _stream([text], finish_reason)
    msg, deltas, reason, r2 = _stream(chunks, finish_reason)
    assert msg == one and reason == one_reason and r1 == r2
    merged = merge_deltas(deltas)
    assert merged.get("content") == msg["content"]
    assert [c["function"] for c in merged.get("tool_calls", [])] == [
        c["function"] for c in msg.get("tool_calls", [])
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CASES),
    cuts=st.lists(st.integers(0, 120), max_size=12),
    finish_reason=st.sampled_from(["stop", "length"]),
)
def test_stream_equals_detect_for_every_chunking(case: tuple, cuts: list[int], finish_reason: str) -> None:
    _check_equal(case[0], helpers.split_at(case[0], cuts), finish_reason)


def test_stream_char_by_char() -> None:
    for text, *_ in CASES:
        _check_equal(text, list(text))


def test_bare_forms_are_held_not_streamed() -> None:
    s = AutoStream(tools=TOOLS, id_factory=lambda: "call_1")
    assert s.feed("call:get_weather{city:") == []
    assert s.feed(f"{Q}Paris{Q}}}") == []
    message, last, reason = s.finish()
    assert reason == "tool_calls" and message["content"] is None
    assert last[0]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    # prose at the start is released as it arrives: a later bare call stays content
    s = AutoStream(tools=TOOLS)
    assert s.feed("Sure.\n") == [{"content": "Sure."}]


def test_unknown_bare_callee_is_surfaced() -> None:
    r = detect("call:lookup{q:x}", tools=TOOLS)
    assert r.recognizer == "gemma" and r.unknown_tools == ["lookup"]
    # prefix-less needs an offered tool; with no tools nothing is offered
    assert detect("get_time{}").calls == []
    assert detect("call:get_time{}").calls == [{"name": "get_time", "arguments": {}}]


def test_recognizers_gate_the_bare_forms() -> None:
    assert detect("call:get_time{}", recognizers=["pythonic"]).calls == []
    assert detect("get_time{}", tools=TOOLS, recognizers=["gemma"]).recognizer == "gemma"


def test_length_never_returns_a_cut_off_call() -> None:
    text = f"Ok <|tool_call>call:get_time{{}}<tool_call|><|tool_call>call:echo{{text:{Q}hel"
    message, reason = parse_message(text, tools=TOOLS, finish_reason="length", id_factory=lambda: "c")
    assert reason == "length" and message["content"] == "Ok"
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_time"]
    assert message["chatparse"]["errors"][-1]["error"] == "truncated call dropped"
    # a terminated call with a missing outer } is not cut off: it is repaired even with "length"
    message, _ = parse_message(
        f"<|tool_call>call:echo{{text:{Q}hi<tool_call|>", tools=TOOLS, finish_reason="length"
    )
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"text": "hi"}
    # the same truncated call without "length" fires (contract: a truncated call is repaired)
    message, reason = parse_message(text, tools=TOOLS, id_factory=lambda: "c")
    assert reason == "tool_calls" and len(message["tool_calls"]) == 2
    # a cut-off bare call is never a call
    message, reason = parse_message("call:echo{text:hel", tools=TOOLS, finish_reason="length")
    assert "tool_calls" not in message and message["content"] == "call:echo{text:hel"


# -- the repair rules, one at a time ----------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        # quote delimiters canonicalised
        (f"{{a:{Q}x{Q}}}", {"a": "x"}),
        ("{a:<|“|>x<|”|>}", {"a": "x"}),
        ("{a:“x”, b:”y“}", {"a": "x", "b": "y"}),
        ('{a:"x"}', {"a": "x"}),
        ('{a:"""x"""}', {"a": "x"}),
        ('{a:""}', {"a": ""}),
        (f"{{a:{Q}{Q}{Q}x{Q}{Q}{Q}}}", {"a": "x"}),
        (f'{{a:{Q}say "hi", {{ok}}{Q}}}', {"a": 'say "hi", {ok}'}),
        ('{a:"tab\\there \\"q\\" \\ud83c\\udf0d"}', {"a": 'tab\there "q" 🌍'}),
        # raw control characters inside strings
        (f"{{a:{Q}line1\nline2\tx{Q}}}", {"a": "line1\nline2\tx"}),
        ('{a:"l1\nl2 \\u00e9"}', {"a": "l1\nl2 é"}),
        # `=` for `:` in key position
        ("{answer=42}", {"answer": 42}),
        (f"{{answer={Q}yes{Q}, n = 1}}", {"answer": "yes", "n": 1}),
        # bare keys, bare scalar values and bare array elements; JSON scalars keep their type
        (
            "{city:Paris, n:3, f:-0.5, e:1e3, t:true, no:false, z:null}",
            {"city": "Paris", "n": 3, "f": -0.5, "e": 1000.0, "t": True, "no": False, "z": None},
        ),
        ("{id:1f173d33-90ab-4cde-8f01-23456789abcd}", {"id": "1f173d33-90ab-4cde-8f01-23456789abcd"}),
        ("{v:007, w:True, x:1.2.3}", {"v": "007", "w": "True", "x": "1.2.3"}),
        (f"{{xs:[a, 2, {Q}c d{Q}, null]}}", {"xs": ["a", 2, "c d", None]}),
        ('{"quoted key":1, nested:{k:[{m:v}]}}', {"quoted key": 1, "nested": {"k": [{"m": "v"}]}}),
        # unicode and emoji
        (f"{{text:{Q}héllo 🌍 世界{Q}, emoji:🎉}}", {"text": "héllo 🌍 世界", "emoji": "🎉"}),
        ("{}", {}),
    ],
)
def test_repair_rules(payload: str, expected: dict) -> None:
    value, balanced = repair(payload)
    assert value == expected and balanced
    assert json.loads(json.dumps(value, ensure_ascii=False)) == expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        # a dangling string and missing } / ] are closed
        (f"{{a:{Q}x", {"a": "x"}),
        ('{a:"x', {"a": "x"}),
        ("{a:[1, 2", {"a": [1, 2]}),
        (f"{{a:{{b:[{Q}x", {"a": {"b": ["x"]}}),
        ("{a:1, b", {"a": 1}),
        ("{a:1, b:", {"a": 1}),
        ("{a:tru", {"a": "tru"}),
    ],
)
def test_repair_closes_truncated_payloads(payload: str, expected: dict) -> None:
    assert repair(payload) == (expected, False)


@pytest.mark.parametrize(
    "payload",
    ["{maybe}", "{a:,b:1}", "{:1}", f"{{a:{Q}x{Q} y}}", "{a:1} trailing", "[1]", "x{a:1}", "{a:[x{]}"],
)
def test_repair_declines(payload: str) -> None:
    with pytest.raises(ValueError):
        repair(payload)


def test_scan_reports_the_end() -> None:
    assert scan("call:f{a:1} rest", 6) == ({"a": 1}, 11, True)
    assert scan("{a:[x", 0) == ({"a": ["x"]}, 5, False)


def test_deep_nesting_declines() -> None:
    for payload in ("{a:" * 1000 + "1" + "}" * 1000, "{a:[" * 1000):
        with pytest.raises(ValueError):
            repair(payload)
    assert detect("call:f" + "{a:" * 1000 + "1" + "}" * 1000).calls == []


def test_bare_calls_directly() -> None:
    assert bare_calls("get_time{}", ["get_time"]) == [{"name": "get_time", "arguments": {}}]
    assert bare_calls("get_time{}", []) is None
    assert bare_calls("call:a.b-c{x:1}", []) == [{"name": "a.b-c", "arguments": {"x": 1}}]
    assert bare_calls("", []) is None
