"""`auto=True` in the OpenAI layer: template-less detection through `chatparse.detect`."""

from __future__ import annotations

import json

import pytest

from chatparse.openai import ChatParser, merge_deltas, parse_message

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]

OUTPUTS = [
    '<think>plan</think>Sure.<tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}</tool_call>',
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>SF</arg_value>"
    "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "SF"}<|tool_call_end|><|tool_calls_section_end|>',
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "SF"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "Just prose, no calls.",
]


def _ids():
    n = iter(range(1000))
    return lambda: f"call_{next(n)}"


def test_parse_message_auto() -> None:
    m = parse_message(OUTPUTS[0], auto=True, tools=TOOLS, id_factory=lambda: "call_1")
    assert m["content"] == "Sure." and m["reasoning_content"] == "plan"
    assert m["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "SF"}'},
        }
    ]
    # GLM values are typed by the offered schemas
    m = parse_message(OUTPUTS[1], auto=True, tools=TOOLS)
    assert json.loads(m["tool_calls"][0]["function"]["arguments"]) == {"city": "SF", "days": 2}
    assert parse_message(OUTPUTS[4], auto=True)["content"] == "Just prose, no calls."


def test_finish_reason_semantics() -> None:
    p = ChatParser(auto=True, tools=TOOLS)
    p.feed(OUTPUTS[2])
    _, _, reason = p.finish("stop")
    assert reason == "tool_calls"
    p = ChatParser(auto=True)
    p.feed("Hello")
    assert p.finish("tool_calls")[2] == "stop"
    p = ChatParser(auto=True)
    p.feed("Hello")
    assert p.finish("length")[2] == "length"
    with pytest.raises(RuntimeError):
        p.finish()


@pytest.mark.parametrize("text", OUTPUTS)
def test_stream_equals_nonstream(text: str) -> None:
    whole = parse_message(text, auto=True, tools=TOOLS, id_factory=_ids())
    for n in (1, 3, 7):
        p = ChatParser(auto=True, tools=TOOLS, id_factory=_ids())
        deltas = [d for i in range(0, len(text), n) for d in p.feed(text[i : i + n])]
        message, last, _ = p.finish()
        assert message == whole
        merged = merge_deltas(deltas + last)
        assert merged.get("content") == whole.get("content")
        assert merged.get("tool_calls") == whole.get("tool_calls")


def test_prefix_and_reasoning_key() -> None:
    m = parse_message(
        "plan</think>Answer", auto=True, prefix="<|im_start|>assistant\n<think>\n", reasoning_key="both"
    )
    assert (m["content"], m["reasoning"], m["reasoning_content"]) == ("Answer", "plan", "plan")
    # without the prompt, a lone closer is not reasoning (prose streams as it arrives)
    p = ChatParser(auto=True)
    assert p.feed("plan ") == [{"content": "plan"}]


def test_template_wins_and_auto_needs_opt_in() -> None:
    tpl = {"start_anchor": "A", "fields": {"content": {"close": "<end>"}}}
    assert parse_message(" Hi <end>", template=tpl, auto=True) == {"role": "assistant", "content": "Hi"}
    with pytest.raises(ValueError):
        parse_message("Hi")
    with pytest.raises(ValueError):
        ChatParser(auto=True, unknown_tools="drop")
