"""`POST /v1/responses` through `chatparse serve`, with the real `openai` client, streamed and not."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from .conftest import MODEL, client
from .engine import Script, TestEngine
from .test_chat import TWO_CALLS

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module", autouse=True)
def scripts(engine: TestEngine) -> None:
    engine.add("r-two-calls", Script(text=TWO_CALLS))
    engine.add("r-plain", Script(text="<think>\nshort\n</think>\n\nIt is sunny.<|im_end|>"))
    engine.add("r-die", Script(text="<think>a long thought that never ends", fault="die:4"))


def summary(resp: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for item in resp.output:
        if item.type == "reasoning":
            out.append(("reasoning", "".join(c.text for c in item.content or [])))
        elif item.type == "message":
            out.append(("message", "".join(c.text for c in item.content)))
        elif item.type == "function_call":
            out.append(("function_call", (item.name, json.loads(item.arguments))))
    return out


@pytest.mark.parametrize("api", ["completions", "chat-raw"])
def test_reasoning_text_and_calls(server_factory: Any, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    kwargs: dict[str, Any] = {"model": MODEL, "input": "[case:r-two-calls] weather?", "tools": [TOOL]}
    resp = c.responses.create(**kwargs)
    assert resp.status == "completed"
    expected = [
        ("reasoning", "let me see"),
        ("message", "Sure."),
        ("function_call", ("get_weather", {"city": "Paris"})),
        ("function_call", ("get_weather", {"city": "Oslo"})),
    ]
    assert summary(resp) == expected
    assert resp.usage is not None and resp.usage.output_tokens > 0
    with c.responses.stream(**kwargs) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert summary(final) == expected
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert types.count("response.output_item.added") == types.count("response.output_item.done") == 4
    calls = [i for i in final.output if i.type == "function_call"]
    assert len({i.call_id for i in calls}) == 2


def test_conversation_with_tool_results(server_factory: Any, engine: TestEngine) -> None:
    c = client(server_factory(upstream_api="completions"))
    resp = c.responses.create(
        model=MODEL,
        instructions="Be brief.",
        input=[
            {"role": "user", "content": "[case:r-plain] weather in Paris?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        ],
        tools=[TOOL],
    )
    assert summary(resp) == [("reasoning", "short"), ("message", "It is sunny.")]
    prompt = [q for q in engine.requests if "[case:r-plain]" in json.dumps(q["body"])][-1]["body"]["prompt"]
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert "<tool_response>\nsunny\n</tool_response>" in prompt


def test_max_output_tokens_gives_incomplete(server_factory: Any) -> None:
    c = client(server_factory(upstream_api="completions"))
    resp = c.responses.create(model=MODEL, input="[case:r-two-calls] x", tools=[TOOL], max_output_tokens=14)
    assert resp.status == "incomplete"
    assert resp.incomplete_details is not None and resp.incomplete_details.reason == "max_output_tokens"
    events = list(
        c.responses.create(
            model=MODEL, input="[case:r-two-calls] x", tools=[TOOL], max_output_tokens=14, stream=True
        )
    )
    assert events[-1].type == "response.incomplete"
    assert summary(events[-1].response) == summary(resp)


def test_errors(server_factory: Any) -> None:
    c = client(server_factory(upstream_api="completions"))
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model=MODEL, input=[{"type": "web_search_call"}])
    assert e.value.param == "input[0].type"
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model=MODEL, input="x", tools=[{"type": "web_search"}])
    assert e.value.param == "tools[0].type"
    events = list(c.responses.create(model=MODEL, input="[case:r-die] x", stream=True))
    assert events[-1].type == "response.failed"
    assert "mid-response" in events[-1].response.error.message
    assert any(ev.type == "response.reasoning_text.delta" for ev in events)
