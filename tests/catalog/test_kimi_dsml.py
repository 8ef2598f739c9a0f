"""Examples for the Kimi K3 (XTML), Kimi K2 (tool-section noise) and DeepSeek DSML (self-closing
invoke) catalog templates, checked one-shot and one character per feed (the canitoolcall corpus in
tests/conformance covers the rendered fixtures; these pin the shapes the templates were written for)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import chatparse
from chatparse import catalog
from chatparse.openai import ChatParser, parse_message

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


# --------------------------------------------------------------------------------------------------
# DSML: reasoning opens only at the start of the message (the own fixtures, against transformers)

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "own_fixtures" / "deepseek.jsonl"
ANCHORED = [
    "deepseek/cf-dsml-empty-think-then-opener",
    "deepseek/cf-dsml-think-opener-in-answer",
    "deepseek/cf-dsml-think-opener-before-call",
    "deepseek/cf-dsml-think-after-leading-newline",
]


def _fixture(fixture_id: str) -> dict[str, Any]:
    for line in FIXTURES.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == fixture_id:
            return record
    raise LookupError(fixture_id)


def _without_extensions(template: dict[str, Any]) -> dict[str, Any]:
    """The template as transformers can load it: json_body (a chatparse extension) only reads an
    <invoke> body that holds no parameter tag, which none of these outputs has."""
    out = copy.deepcopy(template)
    out["fields"]["tool_calls"]["content_args"].pop("json_body")
    return out


def _splits(text: str) -> list[list[str]]:
    return [[text]] + [[text[:i], text[i:]] for i in range(1, len(text))] + [list(text)]


def test_dsml_reasoning_opener_is_anchored() -> None:
    field = catalog.get("deepseek_dsml")["fields"]["reasoning_content"]
    assert (
        field["open_pattern"]
        == catalog.get("deepseek_r1_distill")["fields"]["reasoning_content"]["open_pattern"]
    )
    assert "open" not in field


@pytest.mark.parametrize("fixture_id", ANCHORED)
def test_dsml_anchored_opener_agrees_with_transformers(fixture_id: str) -> None:
    """chatparse's core and transformers 5.24.0 parse the fixture alike with the catalog template, one
    shot and in every split (each cut into two pieces, and one character per feed), while the old
    literal opener opens a second reasoning region in the reference too: the fix is the template's."""
    pytest.importorskip("transformers")
    from ..core.reference import ref_parse, ref_stream

    record = _fixture(fixture_id)
    text, prefix = record["raw_output"], record["generation_prompt"]
    template = catalog.get("deepseek_dsml")
    plain = _without_extensions(template)
    ours = chatparse.parse_response(text, template, prefix=prefix)
    assert chatparse.parse_response(text, plain, prefix=prefix) == ours
    reference = ref_parse(text, plain, prefix)
    assert reference.ok and reference.message == ours, reference.describe()
    assert "<think>" in ours["content"]  # the later opener is answer text
    for chunks in _splits(text):
        parser = chatparse.ResponseParser(catalog.load("deepseek_dsml"), prefix=prefix)
        for chunk in chunks:
            parser.feed(chunk)
        assert parser.finalize()[0] == ours, chunks
        streamed = ref_stream(chunks, plain, prefix)
        assert streamed.ok and streamed.message == ours, (chunks, streamed.describe())
    literal = copy.deepcopy(plain)
    literal["fields"]["reasoning_content"] = {
        "open": "<think>",
        "close_pattern": plain["fields"]["reasoning_content"]["close_pattern"],
    }
    before = ref_parse(text, literal, prefix)
    assert before.ok and before.message != ours and before.message.get("reasoning_content")


@pytest.mark.parametrize("fixture_id", ANCHORED)
def test_dsml_anchored_opener_chat_parser(fixture_id: str) -> None:
    """ChatParser (which joins repeated regions) gives the fixture's expected message in every split."""
    record = _fixture(fixture_id)
    text, prefix = record["raw_output"], record["generation_prompt"]
    expected = record["expected"]
    want = {
        "content": expected["content"],
        "reasoning_content": expected["reasoning_content"],
        "calls": [(c["name"], c["arguments"]) for c in expected["tool_calls"]],
    }
    for chunks in _splits(text):
        parser = ChatParser(template="deepseek_dsml", prefix=prefix, tools=record["tools"])
        for chunk in chunks:
            parser.feed(chunk)
        message, _, _ = parser.finish()
        got = {
            "content": message.get("content"),
            "reasoning_content": message.get("reasoning_content"),
            "calls": [
                (c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in message.get("tool_calls") or ()
            ],
        }
        assert got == want, chunks
