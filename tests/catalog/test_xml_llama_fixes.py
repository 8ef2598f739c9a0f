"""Qwen3 XML / GLM / Llama 3.x JSON robustness: bare `<function=`, missing value closers, markers in
values, calls inside `<think>`, the `arguments` key, and openers cut off by `max_tokens`.

Every case is checked one-shot and streamed one character per feed (the two must agree), through
the core (`parse_response` / `ResponseParser`) and through the OpenAI layer (`parse_message` /
`ChatParser`).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import chatparse
from chatparse import catalog
from chatparse.openai import ChatParser, merge_deltas, parse_message
from chatparse.openai._resolve import relax_call_keys

QWEN_PROMPT = "<|im_start|>assistant\n"
QWEN_THINK = "<|im_start|>assistant\n<think>\n"
GLM_PROMPT = "<|assistant|></think>"
LLAMA_PROMPT = "<|start_header_id|>assistant<|end_header_id|>\n\n"


def fn(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def msg(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", **fields}


def core_streamed(name: str, prefix: str, text: str) -> dict[str, Any]:
    parser = chatparse.ResponseParser(catalog.load(name), prefix=prefix)
    for char in text:
        parser.feed(char)
    message, _ = parser.finalize()
    return message


def openai_calls(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls", [])
    ]


def openai_streamed(name: str, prefix: str, text: str, finish_reason: str = "stop") -> dict[str, Any]:
    parser = ChatParser(template=name, prefix=prefix, id_factory=lambda: "call_x")
    deltas: list[dict[str, Any]] = []
    for char in text:
        deltas += parser.feed(char)
    message, last, _ = parser.finish(finish_reason)
    deltas += last
    merged = merge_deltas(deltas)
    assert (merged.get("content") or None) == message["content"]
    assert (merged.get("reasoning_content") or None) == message.get("reasoning_content")
    assert openai_calls(merged) == openai_calls(message)
    return message


CORE_CASES = [
    pytest.param(
        "qwen3_xml",
        QWEN_PROMPT,
        "<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>",
        msg(tool_calls=[fn("special_function", {"arg1": "1"})]),
        id="qwen-bare-function",
    ),
    pytest.param(
        "qwen3_xml",
        QWEN_PROMPT,
        "<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n"
        "<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
        msg(tool_calls=[fn("f", {"a": "1"}), fn("g", {"b": "2"})]),
        id="qwen-bare-function-then-normal",
    ),
    pytest.param(
        "qwen3_xml",
        QWEN_PROMPT,
        "Checking.\n\n<function=glob>\n<parameter=pattern>\n**/*.md\n</parameter>\n</function>\n</tool_call>",
        msg(content="Checking.", tool_calls=[fn("glob", {"pattern": "**/*.md"})]),
        id="qwen-text-then-bare-function",
    ),
    pytest.param(
        "qwen3_xml",
        QWEN_PROMPT,
        "<tool_call>\n<function=w>\n<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n"
        "</function>\n</tool_call>",
        msg(tool_calls=[fn("w", {"city": "Dallas", "state": "TX"})]),
        id="qwen-missing-close-parameter-before-parameter",
    ),
    pytest.param(
        "qwen3_xml",
        QWEN_PROMPT,
        '<tool_call>\n<function=w>\n<parameter=body>\n{"a": 1}\n</function>\n</tool_call>',
        msg(tool_calls=[fn("w", {"body": '{"a": 1}'})]),
        id="qwen-missing-close-parameter-before-function",
    ),
    pytest.param(
        "qwen3_xml",
        QWEN_THINK,
        "Write.\n</think>\n\n<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.md\n</parameter>\n"
        "<parameter=content>\nTags: </parameter> and </function> and <parameter=path> are text.\n</parameter>\n"
        "</function>\n</tool_call>",
        msg(
            reasoning_content="Write.",
            tool_calls=[
                fn(
                    "write_file",
                    {
                        "path": "notes.md",
                        "content": "Tags: </parameter> and </function> and <parameter=path> are text.",
                    },
                )
            ],
        ),
        id="qwen-markers-in-value",
    ),
    pytest.param(
        "qwen3_xml",
        QWEN_THINK,
        "Need the directory.\n<tool_call>\n<function=run>\n<parameter=command>\npwd\n</parameter>\n</function>\n"
        "</tool_call>",
        msg(reasoning_content="Need the directory.", tool_calls=[fn("run", {"command": "pwd"})]),
        id="qwen-call-inside-think",
    ),
    pytest.param(
        "qwen3_xml",
        QWEN_THINK,
        "I could write <tool_call> here.\n</think>\n\nNo call.<|im_end|>",
        msg(reasoning_content="I could write <tool_call> here.", content="No call."),
        id="qwen-tool-call-text-in-think-stays",
    ),
    pytest.param(
        "glm",
        GLM_PROMPT,
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Berlin</arg_value><arg_key>unit</arg_key>"
        "<arg_value>celsius</tool_call>",
        msg(tool_calls=[fn("get_weather", {"city": "Berlin", "unit": "celsius"})]),
        id="glm-missing-last-close-arg-value",
    ),
    pytest.param(
        "glm",
        GLM_PROMPT,
        "<tool_call>f<arg_key>a</arg_key><arg_value>1<arg_key>b</arg_key><arg_value>2</arg_value></tool_call>",
        msg(tool_calls=[fn("f", {"a": "1", "b": "2"})]),
        id="glm-missing-close-arg-value-before-key",
    ),
    pytest.param(
        "glm",
        "<|assistant|><think>",
        "Plan.</think><tool_call>write_file<arg_key>path</arg_key><arg_value>a.md</arg_value><arg_key>content"
        "</arg_key><arg_value>Use <tool_call> and </tool_call>; keys in <arg_key>.</arg_value></tool_call>",
        msg(
            reasoning_content="Plan.",
            tool_calls=[
                fn(
                    "write_file",
                    {"path": "a.md", "content": "Use <tool_call> and </tool_call>; keys in <arg_key>."},
                )
            ],
        ),
        id="glm-markers-in-value",
    ),
    pytest.param(
        "glm",
        GLM_PROMPT,
        "<tool_call>get_time</tool_call>Done.<|user|>",
        msg(content="Done.", tool_calls=[fn("get_time", {})]),
        id="glm-no-argument-call-then-text",
    ),
    pytest.param(
        "glm",
        GLM_PROMPT,
        "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>after tool<|user|>",
        msg(content="after tool", tool_calls=[fn("f", {"a": "1"})]),
        id="glm-text-after-call",
    ),
    pytest.param(
        "llama3_json",
        LLAMA_PROMPT,
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>',
        msg(tool_calls=[fn("get_weather", {"city": "Paris"})]),
        id="llama-core-output-unchanged",
    ),
]


@pytest.mark.parametrize(("name", "prefix", "text", "expected"), CORE_CASES)
def test_core_parse_and_stream(name: str, prefix: str, text: str, expected: dict[str, Any]) -> None:
    assert chatparse.parse_response(text, catalog.get(name), prefix=prefix) == expected
    assert core_streamed(name, prefix, text) == expected


@pytest.mark.parametrize(("name", "prefix", "text", "expected"), CORE_CASES)
def test_openai_layer_agrees(name: str, prefix: str, text: str, expected: dict[str, Any]) -> None:
    message = parse_message(text, template=name, prefix=prefix)
    assert message["content"] == expected.get("content")
    assert message.get("reasoning_content") == expected.get("reasoning_content")
    want = [(c["function"]["name"], c["function"]["arguments"]) for c in expected.get("tool_calls", [])]
    assert openai_calls(message) == want
    streamed = openai_streamed(name, prefix, text)
    assert openai_calls(streamed) == want
    assert streamed["content"] == message["content"]


@pytest.mark.parametrize("key", ["parameters", "arguments"])
@pytest.mark.parametrize("name", ["llama3_json", "llama3_json_args"])
def test_llama_accepts_both_keys(name: str, key: str) -> None:
    tools = [{"type": "function", "function": {"name": "s", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}, "n": {"type": "integer"}}}}}]  # fmt: skip
    for text in (
        f'{{"name": "s", "{key}": {{"q": "x", "n": "3"}}}}',
        f'Looking. <|python_tag|>{{"name": "s", "{key}": {{"q": "x", "n": 3}}}}; {{"name": "s", "{key}": {{}}}}',
    ):
        message = parse_message(text, template=name, prefix=LLAMA_PROMPT, tools=tools)
        calls = openai_calls(message)
        assert calls[0] == ("s", {"q": "x", "n": 3})  # typed by the tools' schema
        assert "chatparse" not in message
        streamed = openai_streamed(name, LLAMA_PROMPT, text)
        assert [c[0] for c in openai_calls(streamed)] == [c[0] for c in calls]


def test_relax_call_keys_leaves_the_spec_alone() -> None:
    spec = catalog.get("llama3_json")
    before = json.dumps(spec, sort_keys=True)
    relaxed = relax_call_keys(spec)
    assert json.dumps(spec, sort_keys=True) == before
    assert relaxed["fields"]["tool_calls"]["transform"] == {"type": "function", "function": "{content}"}
    other = catalog.get("qwen3")
    assert relax_call_keys(other) is other


@pytest.mark.parametrize(
    ("name", "prefix", "text", "content", "reasoning"),
    [
        ("qwen3_xml", QWEN_THINK, "Need it.\n</think>\n\n<tool_call>", None, "Need it."),
        ("qwen3_xml", QWEN_PROMPT, "Let me look.\n<tool_call>\n<function=get_w", "Let me look.", None),
        ("mistral_v13", "[/INST]", "[THINK]Need it.[/THINK]Checking.[TOOL_CALLS]", "Checking.", "Need it."),
    ],
)
def test_cut_off_opener_is_not_content(
    name: str, prefix: str, text: str, content: str | None, reasoning: str | None
) -> None:
    message = parse_message(text, template=name, prefix=prefix, finish_reason="length")
    assert message["content"] == content
    assert message.get("reasoning_content") == reasoning
    assert "tool_calls" not in message
    streamed = openai_streamed(name, prefix, text, finish_reason="length")
    assert streamed["content"] == content


def test_ordinary_text_is_kept_when_cut_off() -> None:
    text = "<think>\n\n</think>\n\nThe answer is 4"
    message = parse_message(text, template="qwen3_xml", prefix=QWEN_PROMPT, finish_reason="length")
    assert message["content"] == "The answer is 4"


@pytest.mark.parametrize(
    ("name", "prefix", "head", "unit", "tail"),
    [
        (
            "qwen3_xml",
            QWEN_PROMPT,
            "<tool_call>\n<function=f>\n<parameter=a>\n",
            "x </parameter> y <parameter=b> z </function> ",
            "\n</parameter>\n</function>\n</tool_call>",
        ),
        (
            "glm",
            GLM_PROMPT,
            "<tool_call>f<arg_key>a</arg_key><arg_value>",
            "x </tool_call> y <arg_key>b z <tool_call>g ",
            "</arg_value></tool_call>",
        ),
    ],
)
def test_markers_in_long_values_stay_linear(name: str, prefix: str, head: str, unit: str, tail: str) -> None:
    def run(n: int) -> float:
        text = head + unit * n + tail
        start = time.perf_counter()
        message = chatparse.parse_response(text, catalog.get(name), prefix=prefix)
        took = time.perf_counter() - start
        assert message["tool_calls"][0]["function"]["arguments"]["a"].strip() == (unit * n).strip()
        return took

    small, large = run(500), run(4000)
    assert large < max(small, 0.01) * 8 * 4  # 8x the text: far from 64x
