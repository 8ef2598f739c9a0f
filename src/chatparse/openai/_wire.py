"""Client-side helpers: merging stream deltas, Responses API output items, and Chat Completions
messages in the shape of `parse_response`."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable, Container, Iterable
from typing import Any


def merge_deltas(deltas: Iterable[dict[str, Any]], *, discard: Container[int] = ()) -> dict[str, Any]:
    """Accumulate Chat Completions deltas into a message, as a client does.

    Text keys (`content`, `reasoning_content`, `reasoning`) concatenate; `tool_calls` entries
    accumulate per `index` (`id`, `type`, `function.name` from their first fragment, `arguments`
    concatenated) and come out in index order without the index. `discard` lists indices to leave
    out (the calls `finish` reported as dropped after they were streamed).

    >>> merge_deltas([{"content": "Hi"}, {"content": "!"},
    ...               {"tool_calls": [{"index": 0, "id": "c", "type": "function",
    ...                                "function": {"name": "f", "arguments": "{"}}]},
    ...               {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}])
    {'role': 'assistant', 'content': 'Hi!', 'tool_calls': [{'id': 'c', 'type': 'function', 'function': {'name': 'f', 'arguments': '{}'}}]}
    """
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        for key in ("content", "reasoning_content", "reasoning"):
            piece = delta.get(key)
            if piece is not None:
                message[key] = (message.get(key) or "") + piece
        if delta.get("role"):
            message["role"] = delta["role"]
        for entry in delta.get("tool_calls") or ():
            call = calls.setdefault(
                entry["index"], {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
            )
            if entry.get("id"):
                call["id"] = entry["id"]
            if entry.get("type"):
                call["type"] = entry["type"]
            fn = entry.get("function") or {}
            if fn.get("name"):
                call["function"]["name"] = fn["name"]
            call["function"]["arguments"] += fn.get("arguments") or ""
    kept = [calls[i] for i in sorted(calls) if i not in discard]
    if kept:
        message["tool_calls"] = kept
    return message


def to_hf_message(message: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions message in the shape `parse_response` gives with the catalog's templates:
    tool-call `arguments` as JSON values, no call ids; a `chatparse` report is kept.

    >>> to_hf_message({"role": "assistant", "content": "Hi", "tool_calls": [{"id": "call_1",
    ...     "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]})
    {'role': 'assistant', 'content': 'Hi', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', 'arguments': {'a': 1}}}]}
    """
    out: dict[str, Any] = {"role": message.get("role", "assistant")}
    for key in ("reasoning_content", "content"):
        if message.get(key):
            out[key] = message[key]
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments)
        calls.append({"type": "function", "function": {"name": function.get("name"), "arguments": arguments}})
    if calls:
        out["tool_calls"] = calls
    if message.get("chatparse"):
        out["chatparse"] = message["chatparse"]
    return out


def _item_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def to_responses_output(
    message: dict[str, Any], *, id_factory: Callable[[str], str] | None = None
) -> list[dict[str, Any]]:
    """Responses API `output` items for a Chat Completions message (engines.md §5).

    Order: a `reasoning` item, then a `message` item with one `output_text` part, then one
    `function_call` item per call (`call_id` is the call's id). `id_factory(prefix)` makes item
    ids (`rs`, `msg`, `fc`); random by default.

    >>> items = to_responses_output({"role": "assistant", "content": "Hi", "tool_calls": [
    ...     {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ...     id_factory=lambda p: p + "_1")
    >>> [(i["type"], i["id"]) for i in items]
    [('message', 'msg_1'), ('function_call', 'fc_1')]
    """
    make = id_factory or _item_id
    items: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": make("rs"),
                "summary": [],
                "content": [{"type": "reasoning_text", "text": reasoning}],
                "status": "completed",
            }
        )
    if message.get("content"):
        items.append(
            {
                "type": "message",
                "id": make("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": message["content"], "annotations": []}],
            }
        )
    for call in message.get("tool_calls") or ():
        items.append(
            {
                "type": "function_call",
                "id": make("fc"),
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    return items
