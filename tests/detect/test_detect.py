"""chatparse.detect: recognizers, auto driver, streaming equivalence, local fallback."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse.detect import detect
from chatparse.openai import AutoStream, local_fallback, merge_deltas
from chatparse.openai import parse_auto as parse_message
from tests.detect import helpers

TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
    for n in ("get_weather", "get_time", "say_i_dont_know", "echo")
]
BIG = "x" * 20_000

# (text, recognizer, calls [(name, arguments)], cleaned, reasoning)
CASES: list[tuple[str, str | None, list[tuple[str, dict]], str, list[str]]] = [
    # hermes: embedded terminator and brackets inside strings, prose kept around the call
    (
        'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "</tool_call> }]"}}\n</tool_call>\nDone.',
        "hermes",
        [("get_weather", {"city": "</tool_call> }]"})],
        "Sure.\n\nDone.",
        [],
    ),
    (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>\n'
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
        "hermes",
        [("get_weather", {"city": "SF"}), ("get_time", {})],
        "",
        [],
    ),
    # argument shapes: empty, missing, unicode/emoji, 20k characters
    ('<tool_call>{"name": "get_time"}</tool_call>', "hermes", [("get_time", {})], "", []),
    (
        '<tool_call>{"name": "echo", "arguments": {"text": "héllo 🌍 世界"}}</tool_call>',
        "hermes",
        [("echo", {"text": "héllo 🌍 世界"})],
        "",
        [],
    ),
    (
        '<tool_call>{"name": "echo", "arguments": {"text": "' + BIG + '"}}</tool_call>',
        "hermes",
        [("echo", {"text": BIG})],
        "",
        [],
    ),
    # truncation declines: the raw text stays content
    (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}',
        None,
        [],
        '<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}',
        [],
    ),
    ('<tool_call>{"name": "get_weather", "argu', None, [], '<tool_call>{"name": "get_weather", "argu', []),
    # case variants and spoofed markers decline
    (
        '<TOOL_CALL>{"name": "x", "arguments": {}}</TOOL_CALL>',
        None,
        [],
        '<TOOL_CALL>{"name": "x", "arguments": {}}</TOOL_CALL>',
        [],
    ),
    (
        '[tool_calls] [{"name": "x", "arguments": {}}]',
        None,
        [],
        '[tool_calls] [{"name": "x", "arguments": {}}]',
        [],
    ),
    ('<tool_call >{"name": "x"}</tool_call>', None, [], '<tool_call >{"name": "x"}</tool_call>', []),
    # prose mentioning JSON or functools declines
    (
        'Use JSON like {"name": "x", "arguments": {}} to call a tool.',
        None,
        [],
        'Use JSON like {"name": "x", "arguments": {}} to call a tool.',
        [],
    ),
    (
        "The functools module is handy: functools.partial and functools[0] are examples.",
        None,
        [],
        "The functools module is handy: functools.partial and functools[0] are examples.",
        [],
    ),
    # phi: prose around the call is kept
    (
        'Calling: functools[{"name": "get_weather", "arguments": {"city": "SF"}}] now.',
        "phi",
        [("get_weather", {"city": "SF"})],
        "Calling:  now.",
        [],
    ),
    # mistral, both forms
    (
        '[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]',
        "mistral_list",
        [("a", {"x": 1}), ("b", {})],
        "",
        [],
    ),
    ("[TOOL_CALLS] []", None, [], "[TOOL_CALLS] []", []),
    (
        '[TOOL_CALLS]get_weather[ARGS]{"city": "SF"}[TOOL_CALLS]get_time[ARGS]{}',
        "mistral_args",
        [("get_weather", {"city": "SF"}), ("get_time", {})],
        "",
        [],
    ),
    # gemma: wrapped Gemma 4 form, parallel, legacy <call:...>
    (
        '<|tool_call>call:get_weather{city:<|"|>Paris, "FR"<|"|>,days:3}<tool_call|>'
        "<|tool_call>call:get_time{}<tool_call|>",
        "gemma",
        [("get_weather", {"city": 'Paris, "FR"', "days": 3}), ("get_time", {})],
        "",
        [],
    ),
    ('<call:echo{"text": "hi"}>', "gemma", [("echo", {"text": "hi"})], "", []),
    # a truncated wrapped Gemma call is repaired and fires (runtime-contract §3.1); with
    # finish_reason="length" it is dropped instead (test_gemma_forms.py)
    (
        '<|tool_call>call:get_weather{city:<|"|>Par',
        "gemma",
        [("get_weather", {"city": "Par"})],
        "",
        [],
    ),
    # qwen3_coder with metacharacters
    (
        "<tool_call>\n<function=echo>\n<parameter=text>\na < b && c > d {}\n</parameter>\n</function>\n</tool_call>",
        "qwen3_coder",
        [("echo", {"text": "a < b && c > d {}"})],
        "",
        [],
    ),
    # gpt-oss harmony
    (
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_weather <|constrain|>json<|message|>{"city": "SF"}<|call|>',
        "gpt_oss",
        [("get_weather", {"city": "SF"})],
        "",
        ["Need weather."],
    ),
    (
        "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        None,
        [],
        "Hi there.",
        ["Easy."],
    ),
    # llama: <|python_tag|>, bare JSON (whole output), fenced JSON
    (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "SF"}}<|eom_id|>',
        "llama_tag",
        [("get_weather", {"city": "SF"})],
        "",
        [],
    ),
    (
        '{"name": "get_weather", "parameters": {"city": "SF"}}; {"name": "get_time", "arguments": {}}',
        "llama3_json",
        [("get_weather", {"city": "SF"}), ("get_time", {})],
        "",
        [],
    ),
    (
        '```json\n{"name": "get_weather", "parameters": {"city": "SF"}}\n```',
        "llama3_json",
        [("get_weather", {"city": "SF"})],
        "",
        [],
    ),
    (
        'Here: {"name": "get_weather", "parameters": {"city": "SF"}}',
        None,
        [],
        'Here: {"name": "get_weather", "parameters": {"city": "SF"}}',
        [],
    ),
    # pythonic: unknown callees surfaced, literals
    (
        "[get_weather(city='SF', days=[1, 2], ok=True), totally_fake(x='y')]",
        "pythonic",
        [("get_weather", {"city": "SF", "days": [1, 2], "ok": True}), ("totally_fake", {"x": "y"})],
        "",
        [],
    ),
    ("[eval(code='rm -rf /')]", "pythonic", [("eval", {"code": "rm -rf /"})], "", []),
    ("[1, 2, 3]", None, [], "[1, 2, 3]", []),
    ("Call [get_weather(city='SF')] now", None, [], "Call [get_weather(city='SF')] now", []),
    # bare_pythonic and loose_keyed: gated on offered names
    ("get_weather(city='SF')", "bare_pythonic", [("get_weather", {"city": "SF"})], "", []),
    ("/get_time()", "bare_pythonic", [("get_time", {})], "", []),
    ("unknown_tool(city='SF')", None, [], "unknown_tool(city='SF')", []),
    (
        "say_i_dont_know\nreason: no idea\nconfidence: 0.2",
        "loose_keyed",
        [("say_i_dont_know", {"reason": "no idea", "confidence": 0.2})],
        "",
        [],
    ),
    ("say_i_dont_know", None, [], "say_i_dont_know", []),
    ("do_thing\narg: 42", None, [], "do_thing\narg: 42", []),
    ('```tool_code\nget_weather(city="SF")\n```', "tool_code", [("get_weather", {"city": "SF"})], "", []),
    # reasoning before tools: a call drafted inside reasoning is not executed
    (
        '<think>maybe <tool_call>{"name": "get_time", "arguments": {}}</tool_call></think>The answer.',
        None,
        [],
        "The answer.",
        ['maybe <tool_call>{"name": "get_time", "arguments": {}}</tool_call>'],
    ),
    ("<thinking>hmm</thinking>Answer", None, [], "Answer", ["hmm"]),
    ("<|channel>thought\nplan<channel|>Answer", None, [], "Answer", ["plan"]),
    ("<think>cut off by max_tokens", None, [], "", ["cut off by max_tokens"]),
    # orphan markers: without a prefix and orphan_reasoning=False a lone closer is dropped
    ("A </think> B </think> C", None, [], "A  B  C", []),
    (
        'pre-written reasoning</think>\n\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
        "hermes",
        [("get_time", {})],
        "pre-written reasoning",
        [],
    ),
    ("</think>Just the answer.", None, [], "Just the answer.", []),
    # reasoning then a marker-free shape
    ("<think>x</think>[get_time()]", "pythonic", [("get_time", {})], "", ["x"]),
    # more surface forms: [THINK], <|python_start|>, recipient in the role header, bare <function=
    (
        "[THINK]plan[/THINK]Let me check.[TOOL_CALLS]get_time[ARGS]{}",
        "mistral_args",
        [("get_time", {})],
        "Let me check.",
        ["plan"],
    ),
    ("<|python_start|>[get_time()]<|python_end|>", "pythonic", [("get_time", {})], "", []),
    (
        "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.get_weather"
        '<|channel|>commentary<|constrain|>json<|message|>{"city": "SF"}',
        "gpt_oss",
        [("get_weather", {"city": "SF"})],
        "Checking.",
        [],
    ),
    (
        "<function=get_time>\n</function>\n</tool_call>",
        "qwen3_coder",
        [("get_time", {})],
        "",
        [],
    ),
    (
        " to=functions.get_time<|channel|>commentary json<|message|>{}",
        "gpt_oss",
        [("get_time", {})],
        "",
        [],
    ),
    (
        "<|channel|>analysis<|message|>quote it<|end|><|start|>assistant<|channel|>final<|message|>"
        '{"name": "get_time", "arguments": {}}',
        None,
        [],
        '{"name": "get_time", "arguments": {}}',
        ["quote it"],
    ),
    # DeepSeek V3 / V3.1 / DSML
    (
        "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": "SF"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        "deepseek",
        [("get_weather", {"city": "SF"})],
        "Checking.",
        [],
    ),
    (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "SF"}<｜tool▁call▁end｜>'
        "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "deepseek",
        [("get_weather", {"city": "SF"}), ("get_time", {})],
        "",
        [],
    ),
    (
        '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" '
        'string="true">SF</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
        "deepseek_dsml",
        [("get_weather", {"city": "SF"})],
        "",
        [],
    ),
    (
        '<｜DSML｜ tool_calls><｜DSML｜ invoke name="get_time"/></｜DSML｜ tool_calls>',
        "deepseek_dsml",
        [("get_time", {})],
        "",
        [],
    ),
    # Kimi K2 / K3
    (
        "Before. <|tool_calls_section_begin|> noise <|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "SF"}<|tool_call_end|><|tool_calls_section_end|> After.',
        "kimi_k2",
        [("get_weather", {"city": "SF"})],
        "Before.  After.",
        [],
    ),
    (
        "<think>plan</think><|open|>response<|sep|>On it.<|close|>response<|sep|><|open|>tools<|sep|>"
        '<|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>'
        "SF<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>",
        "kimi_k3",
        [("get_weather", {"city": "SF"})],
        "On it.",
        ["plan"],
    ),
    # GLM (a body not starting with `{`); hermes keeps `<tool_call>{`
    (
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>SF</arg_value></tool_call>",
        "glm",
        [("get_weather", {"city": "SF"})],
        "",
        [],
    ),
    ("Done.<tool_call>get_time</tool_call>", "glm", [("get_time", {})], "Done.", []),
    # content only
    ("Hello world", None, [], "Hello world", []),
    ("", None, [], "", []),
    ("  \n  ", None, [], "", []),
    ("Use <tool_call> tags to call tools.", None, [], "Use <tool_call> tags to call tools.", []),
    ("Math: [a(b) for b in c] and {x: 1}", None, [], "Math: [a(b) for b in c] and {x: 1}", []),
]


def _stream(chunks: Iterable[str], finish_reason: str = "stop") -> tuple[dict, list[dict], str, Any]:
    return helpers.stream(chunks, TOOLS, finish_reason)


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c[1]}" for i, c in enumerate(CASES)])
def test_detect(case: tuple) -> None:
    text, recognizer, calls, cleaned, reasoning = case
    r = detect(text, tools=TOOLS)
    assert r.raw == text
    assert r.recognizer == recognizer
    assert [(c["name"], c["arguments"]) for c in r.calls] == calls
    assert r.cleaned == cleaned
    assert r.reasoning == reasoning


def test_non_object_arguments_are_errors() -> None:
    for text in (
        '<tool_call>{"name": "echo", "arguments": [1, 2]}</tool_call>',
        '<tool_call>{"name": "echo", "arguments": "not json"}</tool_call>',
        '[TOOL_CALLS]echo[ARGS]"text"',
    ):
        r = detect(text, tools=TOOLS)
        assert r.calls == [] and r.cleaned == text.strip()
        assert r.errors and "JSON object" in r.errors[0]["error"]
    r = detect('<tool_call>{"name": "echo", "arguments": "{\\"text\\": \\"hi\\"}"}</tool_call>')
    assert r.calls == [{"name": "echo", "arguments": {"text": "hi"}}]


def test_malformed_region_goes_back_to_content_in_place() -> None:
    text = 'A <tool_call>{bad}</tool_call> B <tool_call>{"name": "echo", "arguments": {}}</tool_call> C'
    r = detect(text)
    assert r.recognizer == "hermes"
    assert r.calls == [{"name": "echo", "arguments": {}}]
    assert r.cleaned == "A <tool_call>{bad}</tool_call> B  C"
    assert r.errors[0]["text"] == "<tool_call>{bad}</tool_call>"


def test_first_family_wins_no_merging() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call>[TOOL_CALLS]b[ARGS]{}'
    r = detect(text)
    assert r.recognizer == "hermes" and [c["name"] for c in r.calls] == ["a"]
    assert r.cleaned == "[TOOL_CALLS]b[ARGS]{}"
    assert "not merged" in r.errors[0]["error"]


def test_length_drops_a_truncated_call() -> None:
    text = 'Ok <tool_call>{"name": "get_time", "arguments": {}}</tool_call><tool_call>{"name": "echo", "argu'
    message, reason = parse_message(text, finish_reason="length", id_factory=lambda: "call_1")
    assert reason == "length" and message["content"] == "Ok"
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_time"]
    assert message["chatparse"]["errors"][0]["error"] == "truncated call dropped"
    message, _ = parse_message("Let me check.[TOOL_CALLS]", finish_reason="length")
    assert message["content"] == "Let me check."
    # detect (no finish_reason): the no-match contract, the raw text stays content
    assert detect(text).cleaned == 'Ok <tool_call>{"name": "echo", "argu'


def test_qwen3_coder_values_typed_by_offered_schema() -> None:
    tools = [{"name": "f", "parameters": {"properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}]
    text = "<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n<parameter=s>\n3\n</parameter>\n</function>\n</tool_call>"
    assert detect(text, tools=tools).calls == [{"name": "f", "arguments": {"n": 3, "s": "3"}}]
    assert detect(text).calls == [{"name": "f", "arguments": {"n": "3", "s": "3"}}]


def test_recognizers_override() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    assert detect(text, recognizers="none").calls == []
    assert detect(text, recognizers=["mistral_list"]).cleaned == text
    assert detect(text, recognizers=["hermes"]).recognizer == "hermes"
    assert detect("[a()]", recognizers=["hermes"]).calls == []
    assert detect("A </think> B", recognizers=["hermes"]).cleaned == "A </think> B"
    with pytest.raises(ValueError, match="unknown recognizer"):
        detect("x", recognizers=["nope"])


def test_unknown_tools_surfaced() -> None:
    message, reason = parse_message("[totally_fake(x='y')]", tools=TOOLS, id_factory=lambda: "call_1")
    assert reason == "tool_calls"
    assert message["tool_calls"][0]["function"] == {"name": "totally_fake", "arguments": '{"x": "y"}'}
    assert message["chatparse"]["unknown_tools"] == ["totally_fake"]
    assert message["chatparse"]["recognizer"] == "pythonic"


def test_message_shape() -> None:
    message, reason = parse_message(
        '<think>r</think>Hi <tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
        tools=TOOLS,
        id_factory=lambda: "call_1",
    )
    assert reason == "tool_calls"
    assert message == {
        "role": "assistant",
        "content": "Hi",
        "reasoning_content": "r",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
        ],
        "chatparse": {"recognizer": "hermes", "reasoning_recognizers": ["think_tag"]},
    }
    message, reason = parse_message("Hello", finish_reason="length")
    assert message == {"role": "assistant", "content": "Hello"} and reason == "length"


def test_content_streams_before_the_end() -> None:
    s = AutoStream(tools=TOOLS)
    assert s.feed("<think>r</think>The answer is ") == [
        {"reasoning_content": "r"},
        {"content": "The answer is"},
    ]
    assert s.feed("42 <tool_") == [{"content": " 42"}]  # a possible marker prefix is held back
    # a possible whole-output shape is held until the end
    s = AutoStream(tools=TOOLS)
    assert s.feed("[get_weather(city='SF')") == []
    message, deltas, reason = s.finish()
    assert message["content"] == "[get_weather(city='SF')" and deltas == [
        {"content": "[get_weather(city='SF')"}
    ]


def test_orphan_reasoning_and_prefix() -> None:
    # opt-in orphan recovery
    r = detect("A </think> B </think> C", orphan_reasoning=True)
    assert (r.reasoning, r.cleaned) == (["A", "B"], "C")
    # a prompt ending with an opener: the output starts inside reasoning
    for prefix, text in (
        ("<|im_start|>assistant\n<think>\n", "plan</think>Answer"),
        ("[INST]q[/INST][THINK]", "plan[/THINK]Answer"),
        ("<|turn>model\n<|channel>thought", "\nplan<channel|>Answer"),
        ("<|start|>assistant<|channel|>analysis<|message|>", "plan<|end|>Answer"),
        ('<|open|>message role="assistant"<|sep|><|open|>think<|sep|>', "plan<|close|>think<|sep|>Answer"),
    ):
        r = detect(text, prefix=prefix)
        assert (r.reasoning, r.cleaned) == (["plan"], "Answer"), prefix
        assert r.raw == text
    # a prompt that closed reasoning (or none): a lone closer is dropped, not reasoning
    r = detect("plan</think>Answer", prefix="<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert (r.reasoning, r.cleaned) == ([], "planAnswer") and r.errors
    # local_fallback keeps orphan recovery on by default
    m, fb = local_fallback({"role": "assistant", "content": "plan</think>Answer"})
    assert fb is not None and fb.reasoning == ["plan"] and m["content"] == "plan</think>Answer"


def test_harmony_builtin_recipient_is_dropped() -> None:
    text = (
        "<|channel|>analysis<|message|>run it<|end|><|start|>assistant<|channel|>commentary to=python "
        '<|constrain|>code<|message|>print("hi")'
    )
    r = detect(text)
    assert (r.reasoning, r.cleaned, r.calls) == (["run it"], "", [])
    assert r.errors and "non-function recipient" in r.errors[0]["error"]
    # a Harmony header cut off by max_tokens is not content
    message, reason = parse_message(
        "<|start|>assistant to=functions.get_time<|channel|>commentary", finish_reason="length"
    )
    assert message["content"] is None and reason == "length"


def test_prose_streams_as_it_arrives() -> None:
    s = AutoStream()
    assert s.feed("Hello ") == [{"content": "Hello"}]
    assert s.feed("world. ") == [{"content": " world."}]
    text = "Thinking aloud</think> then the answer."
    one = detect(text)
    for n in (1, 2, 3, 5):
        s = AutoStream(id_factory=helpers.counter_ids())
        deltas = [d for i in range(0, len(text), n) for d in s.feed(text[i : i + n])]
        message, last, _ = s.finish()
        got = "".join(d.get("content", "") for d in deltas + last)
        assert got == one.cleaned == message["content"]


def test_local_fallback() -> None:
    native = {
        "role": "assistant",
        "content": '<tool_call>{"name": "decoy", "arguments": {}}</tool_call>',
        "tool_calls": [{"id": "x", "type": "function", "function": {"name": "echo", "arguments": "{}"}}],
    }
    assert local_fallback(native) == (native, None)
    msg = {"role": "assistant", "content": 'Ok. <call:echo{"text": "hi"}>'}
    out, r = local_fallback(msg, tools=TOOLS, id_factory=lambda: "call_1")
    assert r is not None and r.recognizer == "gemma" and r.raw == msg["content"]
    assert out["content"] == "Ok."
    assert out["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": '{"text": "hi"}'}}
    ]
    assert msg["content"] == 'Ok. <call:echo{"text": "hi"}>'  # not mutated
    plain = {"role": "assistant", "content": "Just text."}
    out, r = local_fallback(plain)
    assert out is plain and r is not None and r.calls == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from([c for c in CASES if len(c[0]) < 1000]),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_stream_equals_detect_for_every_chunking(case: tuple, cuts: list[int]) -> None:
    text = case[0]
    one, one_deltas, one_reason, r1 = _stream([text])
    msg, deltas, reason, r2 = _stream(helpers.split_at(text, cuts))
    assert msg == one and reason == one_reason and r1 == r2
    merged = merge_deltas(deltas)
    assert merged.get("content") == msg["content"]
    assert merged.get("reasoning_content") == msg.get("reasoning_content")
    assert [c["function"] for c in merged.get("tool_calls", [])] == [
        c["function"] for c in msg.get("tool_calls", [])
    ]


def test_stream_char_by_char_on_every_case() -> None:
    for text, *_ in CASES:
        chunks = list(text) if len(text) < 1000 else [text[i : i + 97] for i in range(0, len(text), 97)]
        one = _stream([text])
        got = _stream(chunks)
        assert got[0] == one[0] and got[3] == one[3], text[:80]
        assert json.dumps(merge_deltas(got[1]).get("content")) == json.dumps(one[0]["content"])
