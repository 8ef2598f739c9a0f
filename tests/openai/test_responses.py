"""The Responses API layer: `responses_to_chat` and `ResponsesStream`, checked against the openai SDK."""

from __future__ import annotations

import copy
import doctest
import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

import chatparse.openai._responses as responses_module
from chatparse.openai import ChatParser, to_responses_output
from chatparse.openai._request import InvalidRequest
from chatparse.openai._responses import ResponsesStream, responses_to_chat

from .helpers import CASES, FAMILIES, case_kwargs, counter_ids, public

EVENT = TypeAdapter(ResponseStreamEvent)


def ids() -> Callable[[str], str]:
    n = itertools.count()
    return lambda prefix: f"{prefix}_{next(n)}"


def make_stream(request: dict | None = None, **kwargs: Any) -> ResponsesStream:
    kwargs.setdefault("id_factory", ids())
    return ResponsesStream(response_id="resp_1", model="m", created_at=1767225600, request=request, **kwargs)


def run(
    deltas: list[dict],
    finish_reason: str = "stop",
    usage: dict | None = None,
    report: dict | None = None,
    request: dict | None = None,
) -> tuple[ResponsesStream, list[dict]]:
    s = make_stream(request)
    events = s.start()
    for d in deltas:
        events += s.feed(d)
    events += s.finish(finish_reason, usage, report)
    return s, events


def call(index: int, name: str | None = None, arguments: str = "", id: str | None = None) -> dict:
    entry: dict[str, Any] = {"index": index}
    if name is not None:
        entry.update(id=id or f"call_{index}", type="function")
    entry["function"] = {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
    return {"tool_calls": [entry]}


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


# -- checks shared by the tests -------------------------------------------------------------------


def sdk_validate(events: list[dict], final: dict | None = None) -> None:
    for e in events:
        EVENT.validate_python(e)
        if "response" in e:
            Response.model_validate(e["response"])
    if final is not None:
        Response.model_validate(final)


def sdk_state(events: list[dict], tools: list[Any] | None = None) -> ResponseStreamState:
    """The accumulator behind `client.responses.stream()`, fed the events as the SDK parses them."""
    state: ResponseStreamState = ResponseStreamState(
        input_tools=tools if tools is not None else omit, text_format=omit
    )
    for e in events:
        state.handle_event(EVENT.validate_python(e))
    return state


def accumulate(events: list[dict]) -> list[dict]:
    """Output items rebuilt from the events alone, as a client that follows every event does."""
    items: dict[int, dict] = {}
    for e in events:
        kind, index = e["type"], e.get("output_index", -1)
        if kind == "response.output_item.added":
            assert index not in items
            items[index] = copy.deepcopy(e["item"])
        elif kind == "response.content_part.added":
            items[index]["content"].append(copy.deepcopy(e["part"]))
        elif kind in ("response.output_text.delta", "response.reasoning_text.delta"):
            items[index]["content"][e["content_index"]]["text"] += e["delta"]
        elif kind == "response.function_call_arguments.delta":
            items[index]["arguments"] += e["delta"]
        elif kind in ("response.output_text.done", "response.reasoning_text.done"):
            assert items[index]["content"][e["content_index"]]["text"] == e["text"]
        elif kind == "response.function_call_arguments.done":
            assert items[index]["arguments"] == e["arguments"]
        elif kind == "response.output_item.done":
            done = e["item"]
            assert {k: v for k, v in items[index].items() if k != "status"} == {
                k: v for k, v in done.items() if k != "status"
            }
            items[index] = copy.deepcopy(done)
    return [items[i] for i in sorted(items)]


def check_well_formed(events: list[dict]) -> None:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert types(events)[:2] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] in ("response.completed", "response.incomplete", "response.failed")
    assert events[-1]["type"] not in types(events[:-1]), "one terminal event, the last"
    added: dict[int, str] = {}  # output index -> item id
    done: set[int] = set()
    pieces: dict[int, list[str]] = {}
    for e in events:
        kind = e["type"]
        if kind == "response.output_item.added":
            assert e["output_index"] == len(added), "output indices count up"
            added[e["output_index"]] = e["item"]["id"]
            assert e["item"]["status"] == "in_progress"
            pieces[e["output_index"]] = []
        elif "output_index" in e:
            index = e["output_index"]
            assert index in added and index not in done, f"{kind} for an item not open"
            if "item_id" in e:
                assert e["item_id"] == added[index]
            if kind.endswith(".delta"):
                pieces[index].append(e["delta"])
            elif kind in ("response.output_text.done", "response.reasoning_text.done"):
                assert "".join(pieces[index]) == e["text"]
            elif kind == "response.function_call_arguments.done":
                assert "".join(pieces[index]) == e["arguments"]
            elif kind == "response.output_item.done":
                assert e["item"]["id"] == added[index]
                assert e["item"]["status"] in ("completed", "incomplete")
                done.add(index)
    assert done == set(added), "every added item is done"
    final = events[-1]["response"]
    assert [i["id"] for i in final["output"]] == [added[i] for i in sorted(added)]


def text_of(item: dict) -> str:
    if item["type"] == "function_call":
        return item["arguments"]
    return "".join(p["text"] for p in item["content"])


def unparsed(value: Any) -> Any:
    """Without the SDK's own `parsed` / `parsed_arguments` additions."""
    if isinstance(value, dict):
        return {k: unparsed(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
    if isinstance(value, list):
        return [unparsed(v) for v in value]
    return value


def check_all(s: ResponsesStream, events: list[dict], tools: list[Any] | None = None) -> None:
    """Everything that must hold of a finished stream."""
    check_well_formed(events)
    sdk_validate(events, s.response)
    assert events[-1]["response"] == s.response
    assert accumulate(events) == s.response["output"]
    state = sdk_state(events, tools)
    snapshot = state._ResponseStreamState__current_snapshot  # type: ignore[attr-defined]
    final = s.response["output"]
    assert [(i.type, i.id) for i in snapshot.output] == [(i["type"], i["id"]) for i in final]
    for got, want in zip(snapshot.output, final):
        if want["type"] == "message":
            assert got.content[0].text == text_of(want)
        elif want["type"] == "function_call":
            assert (got.call_id, got.name, got.arguments) == (
                want["call_id"],
                want["name"],
                want["arguments"],
            )
    completed = state._completed_output
    assert [completed[i].to_dict(exclude_unset=True) for i in sorted(completed)] == final
    if events[-1]["type"] == "response.completed":
        assert state._completed_response is not None
        assert unparsed(state._completed_response.to_dict(exclude_unset=True)["output"]) == final


# -- responses_to_chat ------------------------------------------------------------------------------


def chat(**body: Any) -> dict:
    body.setdefault("model", "m")
    return responses_to_chat(body)


def messages(input: Any, **body: Any) -> list[dict]:
    return chat(input=input, **body)["messages"]


def test_string_input_is_one_user_message() -> None:
    assert chat(input="Hi") == {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}


def test_instructions_come_first_as_system() -> None:
    assert messages("Hi", instructions="Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert messages("Hi", instructions="") == [{"role": "user", "content": "Hi"}]


def test_message_items_with_and_without_type() -> None:
    got = messages(
        [
            {"role": "developer", "content": "Rules."},
            {"type": "message", "role": "system", "content": "More."},
            {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "text", "text": "b"}]},
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "x", "annotations": []},
                    {"type": "refusal", "refusal": "no"},
                ],
            },
        ]
    )
    assert got == [
        {"role": "system", "content": "Rules."},
        {"role": "system", "content": "More."},
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "xno"},
    ]


def test_function_calls_group_into_one_assistant_message() -> None:
    fc = {"type": "function_call", "name": "f", "arguments": "{}"}
    got = messages(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "Calling."},
            {**fc, "call_id": "c1", "id": "fc_1", "status": "completed"},
            {**fc, "call_id": "c2"},
            {"type": "function_call_output", "call_id": "c1", "output": "1"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "output_text", "text": "2"}],
            },
            {**fc, "call_id": "c3"},
        ]
    )
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in (1, 2, 3)
    ]
    assert got == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Calling.", "tool_calls": calls[:2]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
        {"role": "assistant", "content": None, "tool_calls": calls[2:]},
    ]


def test_reasoning_attaches_to_the_next_assistant_message() -> None:
    fc = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    got = messages(
        [
            {"role": "user", "content": "go"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "short"}],
                "content": [
                    {"type": "reasoning_text", "text": "long "},
                    {"type": "reasoning_text", "text": "form"},
                ],
            },
            fc,
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "s1"}, {"type": "summary_text", "text": "s2"}],
            },
            {"role": "assistant", "content": "Done."},
        ]
    )
    assert got[1] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "long form",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    assert got[3] == {"role": "assistant", "content": "Done.", "reasoning_content": "s1s2"}


def test_reasoning_before_a_call_after_an_assistant_message_starts_a_new_message() -> None:
    got = messages(
        [
            {"role": "assistant", "content": "a"},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        ]
    )
    assert [m.get("reasoning_content") for m in got] == [None, "r"]
    assert got[1]["content"] is None and len(got[1]["tool_calls"]) == 1


def test_reasoning_not_followed_by_an_assistant_message_is_dropped() -> None:
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "r"}]}
    got = messages(
        [reasoning, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}, reasoning]
    )
    assert got == [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    empty = {"type": "reasoning", "summary": [], "encrypted_content": "xyz"}
    assert messages([empty, {"role": "assistant", "content": "a"}]) == [{"role": "assistant", "content": "a"}]


def test_tools_and_tool_choice() -> None:
    got = chat(
        input="x",
        tools=[
            {
                "type": "function",
                "name": "f",
                "description": "d",
                "parameters": {"type": "object"},
                "strict": True,
            },
            {"type": "function", "name": "g", "strict": None},
        ],
        tool_choice={"type": "function", "name": "f"},
    )
    assert got["tools"] == [
        {
            "type": "function",
            "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True},
        },
        {"type": "function", "function": {"name": "g"}},
    ]
    assert got["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    for choice in ("auto", "none", "required"):
        assert chat(input="x", tool_choice=choice)["tool_choice"] == choice
    assert "tools" not in chat(input="x", tools=[])


def test_sampling_options_are_copied_and_the_rest_left_out() -> None:
    got = chat(
        input="x",
        max_output_tokens=64,
        temperature=0.5,
        top_p=1,
        parallel_tool_calls=False,
        stream=True,
        seed=7,
        reasoning={"effort": "low"},
        text={"format": {"type": "text"}},
        store=True,
        metadata={"k": "v"},
        truncation="auto",
        user="u",
        include=["reasoning.encrypted_content"],
        background=False,
        previous_response_id=None,
        stream_options={"include_obfuscation": False},
    )
    assert got == {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 64,
        "temperature": 0.5,
        "top_p": 1,
        "parallel_tool_calls": False,
        "stream": True,
        "seed": 7,
        "reasoning_effort": "low",
    }
    assert "reasoning_effort" not in chat(input="x", reasoning={"summary": "auto"})


def test_text_format_becomes_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    fmt = {"type": "json_schema", "name": "out", "schema": schema, "strict": True, "description": "d"}
    assert chat(input="x", text={"format": fmt, "verbosity": "low"})["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "out", "schema": schema, "strict": True, "description": "d"},
    }
    fmt = {"type": "json_schema", "name": "out", "schema": schema, "strict": None}
    assert chat(input="x", text={"format": fmt})["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "out", "schema": schema},
    }
    assert chat(input="x", text={"format": {"type": "json_object"}})["response_format"] == {
        "type": "json_object"
    }
    assert "response_format" not in chat(input="x", text={"format": {"type": "text"}})
    assert "response_format" not in chat(input="x", text={"verbosity": "high"})


def test_converted_requests_pass_chat_validation() -> None:
    from chatparse.openai._request import validate_chat_request

    body = {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "call it"}]},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}]},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": TOOLS,
        "tool_choice": {"type": "function", "name": "get_weather"},
        "max_output_tokens": 100,
        "temperature": 0.2,
        "top_p": 0.9,
        "parallel_tool_calls": False,
        "stream": True,
        "seed": 1,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_object"}},
    }
    got = validate_chat_request(responses_to_chat(body))
    assert got["max_tokens"] == 100 and got["stream"] is True and got["parallel_tool_calls"] is False


FC = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"input": "x"}, "model", "model"),
        ({"model": 3, "input": "x"}, "model", "string"),
        ({"model": "m"}, "input", "input"),
        ({"model": "m", "input": 3}, "input", "string or an array"),
        ({"model": "m", "input": []}, "input", "empty"),
        ({"model": "m", "input": ["hi"]}, "input[0]", "object"),
        ({"model": "m", "input": [{"content": "x"}]}, "input[0].type", "type"),
        ({"model": "m", "input": [{"role": "tool", "content": "x"}]}, "input[0].role", "role"),
        ({"model": "m", "input": [{"role": "user"}]}, "input[0].content", "content"),
        ({"model": "m", "input": [{"role": "user", "content": 3}]}, "input[0].content", "string or an array"),
        ({"model": "m", "input": [{"role": "user", "content": ["x"]}]}, "input[0].content[0]", "object"),
        (
            {
                "model": "m",
                "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}],
            },
            "input[0].content[0].type",
            "unsupported content part type 'input_image'",
        ),
        (
            {
                "model": "m",
                "input": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "user",
                        "content": [{"type": "input_text", "text": "b"}, {"type": "input_file"}],
                    },
                ],
            },
            "input[1].content[1].type",
            "unsupported content part type 'input_file'",
        ),
        (
            {
                "model": "m",
                "input": [{"role": "user", "content": [{"type": "refusal", "refusal": "no"}, {"type": "x"}]}],
            },
            "input[0].content[1].type",
            "unsupported content part type 'x'",
        ),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": 1}]}]},
            "input[0].content[0].text",
            "string",
        ),
        ({"model": "m", "input": [{**FC, "call_id": None}]}, "input[0].call_id", "call_id"),
        ({"model": "m", "input": [{**FC, "name": 1}]}, "input[0].name", "string"),
        ({"model": "m", "input": [{**FC, "arguments": {"a": 1}}]}, "input[0].arguments", "string"),
        (
            {"model": "m", "input": [{"type": "function_call_output", "output": "x"}]},
            "input[0].call_id",
            "call_id",
        ),
        (
            {"model": "m", "input": [{"type": "function_call_output", "call_id": "c"}]},
            "input[0].output",
            "output",
        ),
        (
            {
                "model": "m",
                "input": [
                    {
                        "type": "function_call_output",
                        "call_id": "c",
                        "output": [{"type": "refusal", "refusal": "r"}],
                    }
                ],
            },
            "input[0].output[0].type",
            "unsupported content part type 'refusal'",
        ),
        (
            {
                "model": "m",
                "input": [{"type": "reasoning", "summary": [{"type": "reasoning_text", "text": "r"}]}],
            },
            "input[0].summary[0].type",
            "summary_text",
        ),
        ({"model": "m", "input": [{"type": "reasoning", "summary": "r"}]}, "input[0].summary", "array"),
        (
            {
                "model": "m",
                "input": [{"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text"}]}],
            },
            "input[0].content[0].text",
            "text",
        ),
        ({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "no state"),
        (
            {"model": "m", "input": [{"type": "web_search_call", "id": "ws"}]},
            "input[0].type",
            "web_search_call",
        ),
        ({"model": "m", "input": "x", "instructions": ["x"]}, "instructions", "string"),
        ({"model": "m", "input": "x", "tools": {"type": "function"}}, "tools", "array"),
        ({"model": "m", "input": "x", "tools": ["f"]}, "tools[0]", "object"),
        ({"model": "m", "input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type", "web_search"),
        (
            {
                "model": "m",
                "input": "x",
                "tools": [{"type": "function", "name": "f"}, {"type": "file_search"}],
            },
            "tools[1].type",
            "only function tools",
        ),
        ({"model": "m", "input": "x", "tools": [{"type": "function"}]}, "tools[0].name", "name"),
        ({"model": "m", "input": "x", "tools": [{"type": "function", "name": ""}]}, "tools[0].name", "empty"),
        (
            {"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": "{}"}]},
            "tools[0].parameters",
            "object",
        ),
        (
            {"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "description": 1}]},
            "tools[0].description",
            "string",
        ),
        (
            {"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "strict": "yes"}]},
            "tools[0].strict",
            "boolean",
        ),
        ({"model": "m", "input": "x", "tool_choice": "any"}, "tool_choice", "tool_choice"),
        ({"model": "m", "input": "x", "tool_choice": 1}, "tool_choice", "tool_choice"),
        ({"model": "m", "input": "x", "tool_choice": {"type": "web_search"}}, "tool_choice.type", "function"),
        ({"model": "m", "input": "x", "tool_choice": {"type": "function"}}, "tool_choice.name", "name"),
        ({"model": "m", "input": "x", "max_output_tokens": "9"}, "max_output_tokens", "positive integer"),
        ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens", "positive integer"),
        ({"model": "m", "input": "x", "max_output_tokens": True}, "max_output_tokens", "positive integer"),
        ({"model": "m", "input": "x", "temperature": "hot"}, "temperature", "number"),
        ({"model": "m", "input": "x", "top_p": False}, "top_p", "number"),
        ({"model": "m", "input": "x", "parallel_tool_calls": 1}, "parallel_tool_calls", "boolean"),
        ({"model": "m", "input": "x", "stream": "yes"}, "stream", "boolean"),
        ({"model": "m", "input": "x", "seed": 1.5}, "seed", "integer"),
        ({"model": "m", "input": "x", "reasoning": "high"}, "reasoning", "object"),
        ({"model": "m", "input": "x", "text": "plain"}, "text", "object"),
        ({"model": "m", "input": "x", "reasoning": {"effort": 1}}, "reasoning.effort", "string"),
        ({"model": "m", "input": "x", "text": {"format": "json"}}, "text.format", "object"),
        (
            {"model": "m", "input": "x", "text": {"format": {"type": "grammar"}}},
            "text.format.type",
            "grammar",
        ),
        (
            {"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}},
            "text.format.name",
            "name",
        ),
        (
            {"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "o"}}},
            "text.format.schema",
            "object",
        ),
        (
            {
                "model": "m",
                "input": "x",
                "text": {"format": {"type": "json_schema", "name": "o", "schema": {}, "strict": "yes"}},
            },
            "text.format.strict",
            "boolean",
        ),
        ({"model": "m", "input": "x", "store": "no"}, "store", "boolean"),
        ({"model": "m", "input": "x", "metadata": []}, "metadata", "object"),
        ({"model": "m", "input": "x", "truncation": "always"}, "truncation", "auto"),
        ({"model": "m", "input": "x", "user": 1}, "user", "string"),
        ({"model": "m", "input": "x", "include": "all"}, "include", "array"),
        ({"model": "m", "input": "x", "background": True}, "background", "background"),
        ({"model": "m", "input": "x", "previous_response_id": "resp_0"}, "previous_response_id", "no state"),
        ({"model": "m", "input": "x", "conversation": "conv_1"}, "conversation", "no state"),
        ({"model": "m", "input": "x", "prompt": {"id": "pmpt_1"}}, "prompt", "not supported"),
    ],
)
def test_bad_requests_name_the_field(body: dict, param: str, words: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        responses_to_chat(body)
    assert info.value.param == param
    assert words in str(info.value)


def test_a_body_that_is_not_an_object() -> None:
    with pytest.raises(InvalidRequest) as info:
        responses_to_chat([])  # type: ignore[arg-type]
    assert info.value.param is None


# -- ResponsesStream: the event sequence -----------------------------------------------------------


def test_docstring_examples() -> None:
    assert doctest.testmod(responses_module).failed == 0


def test_reasoning_content_and_a_complete_call() -> None:
    s, events = run(
        [
            {"role": "assistant"},
            {"reasoning_content": "Think"},
            {"reasoning_content": "ing."},
            {"content": "Hi"},
            call(0, "f", '{"a": 1}', id="call_x"),
        ],
        "tool_calls",
    )
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[2]["item"] == {
        "type": "reasoning",
        "id": "rs_0",
        "summary": [],
        "content": [],
        "status": "in_progress",
    }
    assert events[4] == {
        "type": "response.reasoning_text.delta",
        "sequence_number": 4,
        "item_id": "rs_0",
        "output_index": 0,
        "content_index": 0,
        "delta": "Think",
    }
    assert events[9]["item"] == {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    assert events[10]["part"] == {"type": "output_text", "text": "", "annotations": []}
    assert events[11] == {
        "type": "response.output_text.delta",
        "sequence_number": 11,
        "item_id": "msg_1",
        "output_index": 1,
        "content_index": 0,
        "delta": "Hi",
        "logprobs": [],
    }
    assert events[15]["item"] == {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_x",
        "name": "f",
        "arguments": "",
        "status": "in_progress",
    }
    assert events[17] == {
        "type": "response.function_call_arguments.done",
        "sequence_number": 17,
        "item_id": "fc_2",
        "output_index": 2,
        "arguments": '{"a": 1}',
        "name": "f",
    }
    final = s.response
    assert final["status"] == "completed" and final["incomplete_details"] is None
    assert [text_of(i) for i in final["output"]] == ["Thinking.", "Hi", '{"a": 1}']
    assert all(i["status"] == "completed" for i in final["output"])
    check_all(s, events)


def test_argument_fragments_and_call_completion_points() -> None:
    s = make_stream()
    s.start()
    events = s.feed(call(0, "f", '{"a"', id="c0"))
    assert types(events) == ["response.output_item.added", "response.function_call_arguments.delta"]
    assert types(s.feed(call(0, arguments=": 1}"))) == ["response.function_call_arguments.delta"]
    assert types(s.feed({})) == [], "an empty delta does not complete the call"
    assert s.response["output"][0]["arguments"] == '{"a": 1}'
    assert s.response["output"][0]["status"] == "in_progress"
    events = s.feed(call(1, "g", "", id="c1"))
    assert types(events) == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
    ], "a new call completes the previous one; empty arguments send no delta"
    events = s.feed({"content": "after"})
    assert types(events)[:2] == ["response.function_call_arguments.done", "response.output_item.done"]
    assert events[0]["arguments"] == ""
    with pytest.raises(ValueError, match="after it was done"):
        s.feed(call(0, arguments="x"))
    events = s.finish("stop")
    assert [(i["type"], text_of(i)) for i in s.response["output"]] == [
        ("function_call", '{"a": 1}'),
        ("function_call", ""),
        ("message", "after"),
    ]


def test_a_call_open_at_finish_is_completed_there() -> None:
    s, events = run([call(0, "f", "{", id="c"), call(0, arguments="}")], "tool_calls")
    assert types(events)[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert s.response["output"][0]["arguments"] == "{}"
    check_all(s, events)


def test_reasoning_after_content_opens_a_new_item_and_empty_text_is_ignored() -> None:
    s, events = run(
        [
            {"reasoning_content": "a"},
            {"content": ""},
            {"reasoning_content": "b"},
            {"content": "c"},
            {"reasoning": "d"},
            {"reasoning_content": "e", "reasoning": "e"},
            {"content": None, "reasoning_content": None},
        ]
    )
    assert [(i["type"], text_of(i)) for i in s.response["output"]] == [
        ("reasoning", "ab"),
        ("message", "c"),
        ("reasoning", "de"),
    ]
    check_all(s, events)


def test_a_call_without_an_id_gets_one() -> None:
    s, events = run([{"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}])
    assert s.response["output"][0]["call_id"] == "call_1"
    check_all(s, events)


def test_several_calls_in_one_delta() -> None:
    entries = [
        {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x"'}},
        {"index": 0, "function": {"arguments": ": 1}"}},
        {"index": 1, "id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]
    s, events = run([{"tool_calls": entries}])
    assert [(i["call_id"], i["arguments"]) for i in s.response["output"]] == [("a", '{"x": 1}'), ("b", "{}")]
    check_all(s, events)


@pytest.mark.parametrize(
    ("delta", "match"),
    [
        ({"tool_calls": [{"function": {"name": "f"}}]}, "integer 'index'"),
        ({"tool_calls": [{"index": "0", "function": {"name": "f"}}]}, "integer 'index'"),
        ({"tool_calls": ["x"]}, "integer 'index'"),
        ({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}, "no function name"),
    ],
)
def test_malformed_call_entries_raise(delta: dict, match: str) -> None:
    s = make_stream()
    with pytest.raises(ValueError, match=match):
        s.feed(delta)


def test_start_is_implicit_and_once() -> None:
    s = make_stream()
    events = s.feed({"content": "x"})
    assert types(events)[:2] == ["response.created", "response.in_progress"]
    assert events[0]["sequence_number"] == 0
    with pytest.raises(RuntimeError):
        s.start()
    s.finish("stop")
    for after in (lambda: s.feed({"content": "y"}), lambda: s.finish("stop"), lambda: s.fail("x")):
        with pytest.raises(RuntimeError):
            after()


def test_start_events_and_snapshot_echo_the_request() -> None:
    request = {
        "model": "m",
        "input": "x",
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
        "tool_choice": {"type": "function", "name": "f"},
        "temperature": 0.3,
        "top_p": 0.9,
        "max_output_tokens": 50,
        "parallel_tool_calls": False,
        "metadata": {"k": "v"},
        "text": {"format": {"type": "text"}, "verbosity": "low"},
        "reasoning": {"effort": "high"},
        "truncation": "auto",
        "user": "u1",
    }
    s = make_stream(copy.deepcopy(request))
    events = s.start()
    assert types(events) == ["response.created", "response.in_progress"]
    for e in events:
        r = e["response"]
        assert r["status"] == "in_progress" and r["output"] == []
        assert r["id"] == "resp_1" and r["object"] == "response" and r["created_at"] == 1767225600
        assert r["model"] == "m" and r["error"] is None and r["usage"] is None
        for key in ("instructions", "tools", "tool_choice", "temperature", "top_p", "max_output_tokens"):
            assert r[key] == request[key]
        for key in ("parallel_tool_calls", "metadata", "text", "reasoning", "truncation", "user"):
            assert r[key] == request[key]
    sdk_validate(events)
    defaults = make_stream().response
    assert defaults["tool_choice"] == "auto" and defaults["parallel_tool_calls"] is True
    assert (
        defaults["tools"] == []
        and defaults["metadata"] == {}
        and defaults["text"] == {"format": {"type": "text"}}
    )
    assert defaults["instructions"] is None and defaults["reasoning"] is None
    Response.model_validate(defaults)


def test_snapshot_mid_stream_is_a_valid_response() -> None:
    s = make_stream()
    s.start()
    s.feed({"reasoning_content": "r1"})
    s.feed({"reasoning_content": "r2"})
    mid = s.response
    assert mid["status"] == "in_progress"
    assert mid["output"] == [
        {
            "type": "reasoning",
            "id": "rs_0",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "r1r2"}],
            "status": "in_progress",
        }
    ]
    Response.model_validate(mid)
    mid["output"].clear()
    assert s.response["output"], "the snapshot is a copy"


def test_length_is_incomplete_and_usage_is_converted() -> None:
    s, events = run(
        [{"reasoning_content": "r"}, {"content": "cut"}],
        "length",
        usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    )
    assert events[-1]["type"] == "response.incomplete"
    final = s.response
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [i["status"] for i in final["output"]] == ["completed", "incomplete"]
    assert final["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    assert "chatparse" not in final
    check_all(s, events)


def test_usage_details_are_carried_over() -> None:
    s, _ = run(
        [{"content": "x"}],
        usage={
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 3},
        },
    )
    usage = s.response["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] == 4
    assert usage["output_tokens_details"]["reasoning_tokens"] == 3


def test_content_filter_is_incomplete() -> None:
    s, events = run([{"content": "x"}], "content_filter")
    assert s.response["incomplete_details"] == {"reason": "content_filter"}
    check_all(s, events)


@pytest.mark.parametrize("reason", ["stop", "tool_calls"])
def test_other_reasons_complete(reason: str) -> None:
    s, events = run([{"content": "x"}], reason)
    assert events[-1]["type"] == "response.completed" and s.response["status"] == "completed"
    assert s.response["output"][0]["status"] == "completed"


def test_report_goes_into_the_response_only_when_not_empty() -> None:
    report = {"errors": [{"field": "tool_calls", "error": "bad JSON", "text": "{"}]}
    s, events = run([{"content": "x"}], report=report)
    assert s.response["chatparse"] == report == events[-1]["response"]["chatparse"]
    check_all(s, events)
    s, _ = run([{"content": "x"}], report={})
    assert "chatparse" not in s.response


def test_a_streamed_call_reported_dropped_ends_incomplete() -> None:
    report = {"dropped": [{"index": 0, "name": "f", "reason": "truncated", "streamed": True}]}
    s, events = run([{"content": "x"}, call(0, "f", '{"a": ', id="c")], "length", report=report)
    assert [i["status"] for i in s.response["output"]] == ["completed", "incomplete"]
    check_all(s, events)


def test_fail_closes_open_items_as_incomplete() -> None:
    s = make_stream()
    events = s.start() + s.feed({"content": "x"}) + s.feed(call(0, "f", "{", id="c")) + s.fail("engine died")
    assert types(events)[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.failed",
    ]
    final = s.response
    assert final["status"] == "failed"
    assert final["error"] == {"code": "server_error", "message": "engine died"}
    assert [i["status"] for i in final["output"]] == ["completed", "incomplete"]
    check_well_formed(events)
    sdk_validate(events, final)
    assert events[-1]["response"] == final and accumulate(events) == final["output"]
    sdk_state(events)


def test_fail_before_anything() -> None:
    s = make_stream()
    events = s.fail("no engine", "rate_limit_exceeded")
    assert types(events) == ["response.created", "response.in_progress", "response.failed"]
    sdk_validate(events, s.response)


def test_events_do_not_share_state() -> None:
    s = make_stream()
    events = s.start() + s.feed({"content": "a"})
    added = copy.deepcopy(events)
    events += s.feed({"content": "b"}) + s.finish("stop")
    assert events[: len(added)] == added
    events[-1]["response"]["output"].clear()
    assert s.response["output"]


def test_final_output_equals_to_responses_output() -> None:
    message = {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "Need the weather.",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    deltas = [
        {"reasoning_content": "Need the "},
        {"reasoning_content": "weather."},
        {"content": "Check"},
        {"content": "ing."},
        call(0, "get_weather", '{"city": ', id="call_0"),
        call(0, arguments='"Paris"}'),
    ]
    s, events = run(deltas, "tool_calls")
    assert s.response["output"] == to_responses_output(message, id_factory=ids())
    check_all(s, events)


# -- the openai client itself ----------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    }
]
DELTAS = [
    {"reasoning_content": "Weather, so "},
    {"reasoning_content": "a call."},
    {"content": "Checking."},
    call(0, "get_weather", '{"city": "Par', id="call_0"),
    call(0, arguments='is"}'),
]


def client_for(body: Callable[[dict], httpx2.Response]) -> openai.OpenAI:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return body(json.loads(request.content))

    return openai.OpenAI(
        api_key="x",
        base_url="http://test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def serve(request: dict) -> tuple[ResponsesStream, list[dict]]:
    return run(
        DELTAS, "tool_calls", {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}, None, request
    )


def test_client_responses_stream_builds_the_same_response() -> None:
    def answer(request: dict) -> httpx2.Response:
        assert responses_to_chat(request)["tools"][0]["function"]["name"] == "get_weather"
        _, events = serve(request)
        sse = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return httpx2.Response(200, text=sse, headers={"content-type": "text/event-stream"})

    client = client_for(answer)
    with client.responses.stream(model="m", input="Weather in Paris?", tools=TOOLS) as stream:  # type: ignore[arg-type]
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    assert seen[0] == "response.created" and seen[-1] == "response.completed"
    s, _ = serve({"model": "m", "input": "Weather in Paris?", "tools": TOOLS})
    assert unparsed(final.to_dict(exclude_unset=True)["output"]) == s.response["output"]
    assert final.output_text == "Checking."
    fc = final.output[2]
    assert fc.type == "function_call" and fc.parsed_arguments == {"city": "Paris"}
    assert final.usage is not None and final.usage.total_tokens == 7


def test_client_responses_create_parses_the_final_response() -> None:
    def answer(request: dict) -> httpx2.Response:
        s, _ = serve(request)
        return httpx2.Response(200, json=s.response)

    response = client_for(answer).responses.create(model="m", input="Weather in Paris?", tools=TOOLS)  # type: ignore[arg-type]
    assert response.output_text == "Checking."
    assert [i.type for i in response.output] == ["reasoning", "message", "function_call"]
    assert response.output[0].content[0].text == "Weather, so a call."  # type: ignore[union-attr,index]


# -- with ChatParser's deltas -------------------------------------------------------------------


def _kinds(deltas: list[dict]) -> list[str]:
    out = []
    for d in deltas:
        if d.get("reasoning_content"):
            out.append("reasoning")
        if d.get("content"):
            out.append("message")
        if d.get("tool_calls"):
            out.append("function_call")
    return out


@pytest.mark.parametrize("mode", ["complete", "early"])
def test_every_family_case_through_chat_parser(mode: str) -> None:
    order = {"reasoning": 0, "message": 1, "function_call": 2}
    compared = 0
    for case in CASES:
        for reason in ("stop", "length"):
            kwargs = case_kwargs(case, stream_tool_calls=mode)
            parser = ChatParser(**kwargs)
            text = case["text"]
            deltas: list[dict] = []
            for i in range(0, len(text), 7):
                deltas += parser.feed(text[i : i + 7])
            message, last, finish_reason = parser.finish(reason)
            deltas += last
            report = message.get("chatparse")
            s, events = run(deltas, finish_reason, report=report)
            check_all(s, events, TOOLS)
            dropped = [d for d in (report or {}).get("dropped", []) if d.get("streamed")]
            kinds = [order[k] for k in _kinds(deltas)]
            if not dropped and kinds == sorted(kinds) and finish_reason != "length":
                assert s.response["output"] == to_responses_output(public(message), id_factory=ids()), case[
                    "id"
                ]
                compared += 1
    assert compared > 100


def test_mistral_early_call_cut_off_is_incomplete() -> None:
    parser = ChatParser(
        template=FAMILIES["MISTRAL_V13"], prefix="", id_factory=counter_ids(), stream_tool_calls="early"
    )
    deltas = parser.feed('[TOOL_CALLS]get_weather[ARGS]{"ci')
    message, last, reason = parser.finish("length")
    s, events = run(deltas + last, reason, report=message.get("chatparse"))
    assert message["chatparse"]["dropped"][0]["streamed"] is True
    assert [(i["type"], i["status"]) for i in s.response["output"]] == [("function_call", "incomplete")]
    assert s.response["status"] == "incomplete"
    check_all(s, events)


# -- hypothesis -------------------------------------------------------------------------------------

TEXT = st.text(alphabet='ab \n{}"é', max_size=6)
STEP = st.one_of(
    st.tuples(st.just("reasoning"), TEXT),
    st.tuples(st.just("content"), TEXT),
    st.tuples(st.just("call"), st.sampled_from(["f", "g"]), st.lists(TEXT, min_size=1, max_size=4)),
)


def _deltas_and_expected(steps: list[tuple]) -> tuple[list[dict], list[tuple[str, str]]]:
    deltas: list[dict] = []
    expected: list[list[str]] = []  # [type, text or arguments, (name, call_id)]
    calls = 0
    for step in steps:
        if step[0] == "call":
            _, name, fragments = step
            deltas.append(call(calls, name, fragments[0], id=f"call_{calls}"))
            deltas += [call(calls, arguments=f) for f in fragments[1:]]
            expected.append(["function_call", "".join(fragments), f"{name} call_{calls}"])
            calls += 1
            continue
        kind, text = step
        deltas.append({"reasoning_content" if kind == "reasoning" else "content": text})
        if not text:
            continue
        kind = "reasoning" if kind == "reasoning" else "message"
        if expected and expected[-1][0] == kind:
            expected[-1][1] += text
        else:
            expected.append([kind, text, ""])
    return deltas, [tuple(e) for e in expected]  # type: ignore[misc]


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=12), st.sampled_from(["stop", "tool_calls", "length", "content_filter"]))
def test_random_delta_sequences(steps: list[tuple], reason: str) -> None:
    deltas, expected = _deltas_and_expected(steps)
    s, events = run(deltas, reason)
    check_all(s, events)
    got = [
        (i["type"], text_of(i), f"{i['name']} {i['call_id']}" if i["type"] == "function_call" else "")
        for i in s.response["output"]
    ]
    assert got == expected
    assert s.response["status"] == ("completed" if reason in ("stop", "tool_calls") else "incomplete")
    statuses = [i["status"] for i in s.response["output"]]
    if reason in ("stop", "tool_calls"):
        assert set(statuses) <= {"completed"}
    elif statuses:
        last_text = expected[-1][0] != "function_call"
        assert statuses[:-1] == ["completed"] * (len(statuses) - 1)
        assert statuses[-1] == ("incomplete" if last_text else "completed")


@settings(max_examples=100, deadline=None)
@given(st.lists(STEP, max_size=8))
def test_random_sequences_that_fail(steps: list[tuple]) -> None:
    deltas, expected = _deltas_and_expected(steps)
    s = make_stream()
    events = s.start()
    for d in deltas:
        events += s.feed(d)
    events += s.fail("boom")
    check_well_formed(events)
    sdk_validate(events, s.response)
    assert accumulate(events) == s.response["output"]
    assert [text_of(i) for i in s.response["output"]] == [e[1] for e in expected]
    if expected:
        assert s.response["output"][-1]["status"] == "incomplete"
