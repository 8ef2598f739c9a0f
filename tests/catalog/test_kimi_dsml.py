"""Examples for the Kimi K3 (XTML), Kimi K2 (tool-section noise) and DeepSeek DSML (self-closing
invoke) catalog templates, checked one-shot and one character per feed (the canitoolcall corpus in
tests/conformance covers the rendered fixtures; these pin the shapes the templates were written for)."""

from __future__ import annotations

from typing import Any

import pytest

import chatparse
from chatparse import catalog
from chatparse.openai import parse_message

K3 = '<|open|>message role="assistant"<|sep|>'
K3_THINK = K3 + "<|open|>think<|sep|>"
K3_NO_THINK = K3 + "<|open|>response<|sep|>"
K2 = "<|im_assistant|>assistant<|im_middle|>"
DSML = "<｜Assistant｜></think>"


def fn(name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**extra, "type": "function", "function": {"name": name, "arguments": arguments}}


def msg(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", **fields}


def arg(key: str, typ: str, value: str) -> str:
    return f'<|open|>argument key="{key}" type="{typ}"<|sep|>{value}<|close|>argument<|sep|>'


def call(name: str, index: int, *args: str) -> str:
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>{"".join(args)}<|close|>call<|sep|>'


def tools(*calls: str) -> str:
    return (
        "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>"
        + "".join(calls)
        + ("<|close|>tools<|sep|><|close|>message<|sep|>")
    )


CASES = [
    pytest.param(
        "kimi_k3",
        K3_THINK,
        "Paris weather.<|close|>think<|sep|>"
        + tools(call("get_weather", 1, arg("city", "string", "Paris"), arg("unit", "string", "celsius"))),
        msg(
            reasoning_content="Paris weather.",
            tool_calls=[fn("get_weather", {"city": "Paris", "unit": "celsius"})],
        ),
        id="k3-thinking-call",
    ),
    pytest.param(
        "kimi_k3",
        K3_THINK,
        "Two.<|close|>think<|sep|><|open|>response<|sep|>Checking both.<|close|>response<|sep|>"
        "<|open|>tools<|sep|>"
        + call("get_weather", 1, arg("city", "string", "Paris"))
        + call("get_weather", 2, arg("city", "string", "Tokyo"))
        + "<|close|>tools<|sep|><|close|>message<|sep|>",
        msg(
            reasoning_content="Two.",
            content="Checking both.",
            tool_calls=[fn("get_weather", {"city": "Paris"}), fn("get_weather", {"city": "Tokyo"})],
        ),
        id="k3-content-and-parallel-calls",
    ),
    pytest.param(
        "kimi_k3",
        K3_NO_THINK,
        "<|close|>response<|sep|><|open|>tools<|sep|>"
        + call(
            "create_event",
            1,
            arg("n", "number", "1"),
            arg("x", "number", "21.5"),
            arg("b", "boolean", "false"),
            arg("z", "null", "null"),
            arg("l", "array", '["a", 2]'),
            arg("o", "object", '{"k": {"v": 1}}'),
            arg("s", "string", " two words \n"),
        )
        + "<|close|>tools<|sep|>",
        msg(
            tool_calls=[
                fn(
                    "create_event",
                    {
                        "n": 1,
                        "x": 21.5,
                        "b": False,
                        "z": None,
                        "l": ["a", 2],
                        "o": {"k": {"v": 1}},
                        "s": " two words \n",
                    },
                )
            ]
        ),
        id="k3-typed-values-without-tools",
    ),
    pytest.param(
        "kimi_k3",
        K3_THINK,
        "Marker text.<|close|>think<|sep|>"
        + tools(
            call(
                "write_file",
                1,
                arg("path", "string", "x.txt"),
                arg("content", "string", "<|close|>argument<|sep|> is how args end"),
            )
        ),
        msg(
            reasoning_content="Marker text.",
            tool_calls=[
                fn("write_file", {"path": "x.txt", "content": "<|close|>argument<|sep|> is how args end"})
            ],
        ),
        id="k3-marker-text-inside-a-value",
    ),
    pytest.param(
        "kimi_k3",
        K3_THINK,
        "<|close|>think<|sep|>" + tools(call("get_time", 1)),
        msg(tool_calls=[fn("get_time", {})]),
        id="k3-empty-think-empty-arguments",
    ),
    pytest.param(
        "kimi_k3",
        K3_THINK,
        "<|open|>response<|sep|>Hello world<|close|>response<|sep|><|close|>message<|sep|>",
        msg(content="Hello world"),
        id="k3-model-skips-the-think-section",
    ),
    pytest.param(
        "kimi_k3",
        K3_NO_THINK,
        "Hello! How can I help?<|close|>response<|sep|><|close|>message<|sep|>",
        msg(content="Hello! How can I help?"),
        id="k3-no-thinking-no-call",
    ),
    pytest.param(
        "kimi_k3",
        K3_NO_THINK,
        '<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="calc" index="1"',
        msg(),
        id="k3-truncated-call-opener-does-not-leak",
    ),
    pytest.param(
        "kimi_k2",
        K2,
        "Reasoning. <|tool_calls_section_begin|> spurious noise <|tool_call_begin|>functions.test:0 "
        '<|tool_call_argument_begin|>{"k": "v"} <|tool_call_end|> between <|tool_call_begin|>functions.t2:1'
        "<|tool_call_argument_begin|>{}<|tool_call_end|> trailing <|tool_calls_section_end|><|im_end|>",
        msg(
            content="Reasoning.",
            tool_calls=[fn("test", {"k": "v"}, id="functions.test:0"), fn("t2", {}, id="functions.t2:1")],
        ),
        id="k2-noise-inside-the-tool-section-is-dropped",
    ),
    pytest.param(
        "deepseek_dsml",
        DSML,
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="submit"/>\n</｜DSML｜tool_calls>',
        msg(tool_calls=[fn("submit", {})]),
        id="dsml-self-closing-invoke",
    ),
    pytest.param(
        "deepseek_dsml",
        DSML,
        'Two.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="a"/>\n<｜DSML｜invoke name="b">\n'
        '<｜DSML｜parameter name="html" string="true">x<br/>y</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
        '<｜DSML｜ invoke name="c" />\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>',
        msg(content="Two.", tool_calls=[fn("a", {}), fn("b", {"html": "x<br/>y"}), fn("c", {})]),
        id="dsml-self-closing-next-to-a-normal-invoke",
    ),
]


@pytest.mark.parametrize(("name", "prefix", "text", "expected"), CASES)
def test_parses(name: str, prefix: str, text: str, expected: dict[str, Any]) -> None:
    assert chatparse.parse_response(text, catalog.get(name), prefix=prefix) == expected


@pytest.mark.parametrize(("name", "prefix", "text", "expected"), CASES)
def test_streams_one_character_per_feed(name: str, prefix: str, text: str, expected: dict[str, Any]) -> None:
    parser = chatparse.ResponseParser(catalog.load(name), prefix=prefix)
    for char in text:
        parser.feed(char)
    message, _ = parser.finalize()
    assert message == expected


def test_k2_content_before_and_after_the_tool_section_is_kept() -> None:
    text = (
        "Before. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0 "
        '<|tool_call_argument_begin|>{"city": "Tokyo"} <|tool_call_end|><|tool_calls_section_end|> After tools.'
    )
    message = parse_message(text, template="kimi_k2", prefix=K2)
    assert message["content"] == "Before.  After tools."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
