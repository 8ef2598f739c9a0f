"""Shared data and checks for the runtime tests: recorded outputs, tools, normalization."""

from __future__ import annotations

import json
import re
from typing import Any

from chatparse.openai import merge_deltas
from chatparse.runtime import (
    ContentDelta,
    ReasoningDelta,
    StepFinished,
    ToolCallEvent,
    ToolResultEvent,
    TurnFinished,
)

# Recorded Qwen3 / Hermes outputs (special tokens included, as the model writes them).
CALL = (
    "<think>\nThe user wants the weather in Paris.\n</think>\n\nChecking.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
)
UNKNOWN = '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call><|im_end|>'
MALFORMED = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"</tool_call><|im_end|>'
INVALID = '<tool_call>\n{"name": "get_weather", "arguments": {"days": "2"}}\n</tool_call><|im_end|>'
ANSWER = "<think>\nI have the forecast.\n</think>\n\nIt is sunny in Paris, 21 °C.<|im_end|>"

STEPS = [CALL, UNKNOWN, MALFORMED, INVALID, ANSWER]

UNKNOWN_ANSWER = "Tool not found: get_time. Available tools: get_weather."


def get_weather(city: str, days: int = 1) -> str:
    """Current weather.

    Args:
        city: The city.
        days: How many days.
    """
    return f"Sunny in {city}, 21 °C"


WEATHER_SCHEMA = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

_ID = re.compile(r"\b(call_[A-Za-z0-9]{24}|chatcmpl-tool-[0-9a-f]+)\b")


def normalize(value: Any) -> Any:
    """`value` with tool-call ids replaced by their order of appearance (ids are random)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    seen: dict[str, str] = {}
    return json.loads(_ID.sub(lambda m: seen.setdefault(m.group(), f"id{len(seen)}"), text))


def check_events(events: list[Any]) -> None:
    """The turn's events are well-formed: steps in order, calls before their results, content deltas
    that add up to each step's message, one TurnFinished at the end."""
    assert isinstance(events[-1], TurnFinished)
    assert sum(isinstance(e, TurnFinished) for e in events) == 1
    result = events[-1].result
    step, deltas, calls = 1, [], {}
    for e in events[:-1]:
        assert e.step >= step
        if e.step > step:
            step, deltas = e.step, []
        if isinstance(e, ContentDelta):
            assert e.text
            deltas.append({"content": e.text})
        elif isinstance(e, ReasoningDelta):
            assert e.text
            deltas.append({"reasoning_content": e.text})
        elif isinstance(e, ToolCallEvent):
            calls[e.call.id] = e.step
        elif isinstance(e, ToolResultEvent):
            assert calls.get(e.result.call_id) == e.step  # a result answers a call of its step
        elif isinstance(e, StepFinished):
            merged = merge_deltas(deltas)
            assert merged.get("content") == e.generation.content
            assert merged.get("reasoning_content") == e.generation.reasoning
            assert e.generation is result.generations[e.step - 1]
    assert len([e for e in events if isinstance(e, StepFinished)]) == result.steps
