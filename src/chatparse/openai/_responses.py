"""The Responses API on top of Chat Completions: request conversion, deltas to events (engines.md §5).

No HTTP here. A server answers `POST /v1/responses` by converting the body with `responses_to_chat`,
running the Chat Completions machinery (`ChatParser`) and feeding its deltas to a `ResponsesStream`,
which turns them into Responses streaming events and the Response object. A non-streaming answer runs
the same `ResponsesStream` and takes `.response`, so both answers are identical by construction.

>>> s = ResponsesStream(response_id="resp_1", model="m", created_at=0, id_factory=lambda p: p + "_1")
>>> events = s.start() + s.feed({"content": "Hi"}) + s.finish("stop")
>>> [e["type"] for e in events]  # doctest: +NORMALIZE_WHITESPACE
['response.created', 'response.in_progress', 'response.output_item.added',
 'response.content_part.added', 'response.output_text.delta', 'response.output_text.done',
 'response.content_part.done', 'response.output_item.done', 'response.completed']
>>> s.response["output"]
[{'type': 'message', 'id': 'msg_1', 'role': 'assistant', 'status': 'completed', 'content': [{'type': 'output_text', 'text': 'Hi', 'annotations': []}]}]
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ._request import InvalidRequest
from ._wire import _item_id

__all__ = ["ResponsesStream", "responses_to_chat"]

# -- request conversion --------------------------------------------------------------------------

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_PARTS = ("input_text", "output_text", "text")
_TOOL_CHOICES = ("auto", "none", "required")
_NO_STATE = "this server keeps no state; send the whole conversation in `input`"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _need_str(obj: dict[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if value is None:
        raise InvalidRequest(f"missing required parameter: '{path}'", path)
    if not isinstance(value, str):
        raise InvalidRequest(f"'{path}' must be a string", path)
    return value


def _parts_text(content: Any, path: str, *, refusal: bool) -> str:
    """A string, or the texts of an array of text parts joined with ""; anything else is refused."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"'{path}' must be a string or an array of content parts", path)
    texts: list[str] = []
    for j, part in enumerate(content):
        p = f"{path}[{j}]"
        if not isinstance(part, dict):
            raise InvalidRequest(f"'{p}' must be an object", p)
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            texts.append(_need_str(part, "text", f"{p}.text"))
        elif kind == "refusal" and refusal:
            texts.append(_need_str(part, "refusal", f"{p}.refusal"))
        else:
            raise InvalidRequest(
                f"unsupported content part type {kind!r}: this server accepts text parts only", f"{p}.type"
            )
    return "".join(texts)


def _reasoning_text(item: dict[str, Any], path: str) -> str:
    """The `reasoning_text` parts joined, else the `summary_text` parts joined."""
    found: dict[str, list[str]] = {}
    for key, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise InvalidRequest(f"'{path}.{key}' must be an array", f"{path}.{key}")
        texts = found.setdefault(key, [])
        for j, part in enumerate(parts):
            p = f"{path}.{key}[{j}]"
            if not isinstance(part, dict):
                raise InvalidRequest(f"'{p}' must be an object", p)
            if part.get("type") != kind:
                raise InvalidRequest(f"'{p}.type' must be '{kind}'", f"{p}.type")
            texts.append(_need_str(part, "text", f"{p}.text"))
    return "".join(found.get("content") or found.get("summary") or ())


def _input_messages(items: Any) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise InvalidRequest("'input' must be a string or an array of input items", "input")
    if not items:
        raise InvalidRequest("'input' must not be empty", "input")
    messages: list[dict[str, Any]] = []
    joinable: dict[str, Any] | None = None  # the assistant message a function_call joins
    reasoning: list[str] = []  # reasoning waiting for the next assistant message

    def assistant(message: dict[str, Any]) -> dict[str, Any]:
        if reasoning:
            message["reasoning_content"] = "\n".join(reasoning)
            reasoning.clear()
        messages.append(message)
        return message

    for i, item in enumerate(items):
        path = f"input[{i}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"'{path}' must be an object", path)
        kind = item.get("type")
        if kind is not None and not isinstance(kind, str):
            raise InvalidRequest(f"'{path}.type' must be a string", f"{path}.type")
        if kind is None and "role" in item:
            kind = "message"
        if kind == "message":
            role = item.get("role")
            if not isinstance(role, str) or role not in _ROLES:
                raise InvalidRequest(
                    f"'{path}.role' must be one of 'user', 'assistant', 'system', 'developer'", f"{path}.role"
                )
            if item.get("content") is None:
                raise InvalidRequest(f"missing required parameter: '{path}.content'", f"{path}.content")
            text = _parts_text(item["content"], f"{path}.content", refusal=True)
            if role == "assistant":
                joinable = assistant({"role": "assistant", "content": text})
            else:
                reasoning.clear()
                joinable = None
                messages.append({"role": _ROLES[role], "content": text})
        elif kind == "function_call":
            call = {
                "id": _need_str(item, "call_id", f"{path}.call_id"),
                "type": "function",
                "function": {
                    "name": _need_str(item, "name", f"{path}.name"),
                    "arguments": _need_str(item, "arguments", f"{path}.arguments"),
                },
            }
            if joinable is None:
                joinable = assistant({"role": "assistant", "content": None})
            joinable.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            call_id = _need_str(item, "call_id", f"{path}.call_id")
            if item.get("output") is None:
                raise InvalidRequest(f"missing required parameter: '{path}.output'", f"{path}.output")
            output = _parts_text(item["output"], f"{path}.output", refusal=False)
            reasoning.clear()
            joinable = None
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        elif kind == "reasoning":
            text = _reasoning_text(item, path)
            if text:
                reasoning.append(text)
            joinable = None
        elif kind == "item_reference":
            raise InvalidRequest(f"item_reference is not supported: {_NO_STATE}", f"{path}.type")
        elif kind is None:
            raise InvalidRequest(f"missing required parameter: '{path}.type'", f"{path}.type")
        else:
            raise InvalidRequest(f"unsupported input item type {kind!r}", f"{path}.type")
    return messages


def _chat_tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise InvalidRequest("'tools' must be an array", "tools")
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise InvalidRequest(f"'{path}' must be an object", path)
        if tool.get("type") != "function":
            raise InvalidRequest(
                f"unsupported tool type {tool.get('type')!r}: only function tools are supported",
                f"{path}.type",
            )
        name = _need_str(tool, "name", f"{path}.name")
        if not name:
            raise InvalidRequest(f"'{path}.name' must not be empty", f"{path}.name")
        function: dict[str, Any] = {"name": name}
        for key, check, what in (
            ("description", lambda v: isinstance(v, str), "a string"),
            ("parameters", lambda v: isinstance(v, dict), "an object"),
            ("strict", lambda v: isinstance(v, bool), "a boolean"),
        ):
            value = tool.get(key)
            if value is None:
                continue
            if not check(value):
                raise InvalidRequest(f"'{path}.{key}' must be {what}", f"{path}.{key}")
            function[key] = value
        out.append({"type": "function", "function": function})
    return out


def _chat_tool_choice(choice: Any) -> str | dict[str, Any]:
    if isinstance(choice, str):
        if choice not in _TOOL_CHOICES:
            raise InvalidRequest(
                "'tool_choice' must be 'auto', 'none', 'required' or a function", "tool_choice"
            )
        return choice
    if not isinstance(choice, dict):
        raise InvalidRequest("'tool_choice' must be a string or an object", "tool_choice")
    if choice.get("type") != "function":
        raise InvalidRequest(
            f"unsupported tool_choice type {choice.get('type')!r}: only 'function' is supported",
            "tool_choice.type",
        )
    return {"type": "function", "function": {"name": _need_str(choice, "name", "tool_choice.name")}}


def _chat_response_format(text: Any) -> dict[str, Any] | None:
    """`text.format` as a Chat `response_format` (None for plain text)."""
    if not isinstance(text, dict):
        raise InvalidRequest("'text' must be an object", "text")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise InvalidRequest("'text.format' must be an object", "text.format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise InvalidRequest(
            f"unsupported text.format type {kind!r}: use 'text', 'json_object' or 'json_schema'",
            "text.format.type",
        )
    schema: dict[str, Any] = {"name": _need_str(fmt, "name", "text.format.name")}
    if not isinstance(fmt.get("schema"), dict):
        raise InvalidRequest("'text.format.schema' must be an object", "text.format.schema")
    schema["schema"] = fmt["schema"]
    for key, kind_ok, what in (("description", str, "a string"), ("strict", bool, "a boolean")):
        value = fmt.get(key)
        if value is None:
            continue
        if not isinstance(value, kind_ok):
            raise InvalidRequest(f"'text.format.{key}' must be {what}", f"text.format.{key}")
        schema[key] = value
    return {"type": "json_schema", "json_schema": schema}


def _chat_reasoning_effort(reasoning: Any) -> str | None:
    if not isinstance(reasoning, dict):
        raise InvalidRequest("'reasoning' must be an object", "reasoning")
    effort = reasoning.get("effort")
    if effort is not None and not isinstance(effort, str):
        raise InvalidRequest("'reasoning.effort' must be a string", "reasoning.effort")
    return effort


# Accepted and not passed on: (check, what it must be).
_IGNORED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "store": (lambda v: isinstance(v, bool), "a boolean"),
    "metadata": (lambda v: isinstance(v, dict), "an object"),
    "truncation": (lambda v: v in ("auto", "disabled"), "'auto' or 'disabled'"),
    "user": (lambda v: isinstance(v, str), "a string"),
    "include": (lambda v: isinstance(v, list), "an array"),
    "background": (lambda v: v is False, "false (background responses are not supported)"),
}
# Copied as they are: (check, what it must be).
_COPIED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "temperature": (_is_number, "a number"),
    "top_p": (_is_number, "a number"),
    "parallel_tool_calls": (lambda v: isinstance(v, bool), "a boolean"),
    "stream": (lambda v: isinstance(v, bool), "a boolean"),
    "seed": (_is_int, "an integer"),
}
_STATEFUL = ("previous_response_id", "conversation", "prompt")


def responses_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request body for a Responses request body; `InvalidRequest` names a bad field.

    `input` (a string, or message / function_call / function_call_output / reasoning items) becomes
    `messages` (`instructions` first, as a system message; `developer` is `system`; consecutive
    function_call items, and those right after an assistant message, share one assistant message; a
    reasoning item's text is the `reasoning_content` of the next assistant message, and is dropped
    when a user, system or tool message comes first). Function `tools` and `tool_choice` take the Chat
    shape; `max_output_tokens` is `max_tokens`; `reasoning.effort` is `reasoning_effort`;
    `text.format` (`json_object`, `json_schema`) is `response_format`; `temperature`, `top_p`,
    `parallel_tool_calls`, `stream` and `seed` are copied; `store`, `metadata`, `truncation`, `user`
    and `include` are checked and left out. Anything that needs server state
    (`previous_response_id`, `conversation`, `prompt`, `item_reference`), `background: true`,
    non-function tools and non-text content parts are refused.

    >>> responses_to_chat({"model": "m", "instructions": "Be brief.", "input": "Hi", "max_output_tokens": 9})
    {'model': 'm', 'messages': [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}], 'max_tokens': 9}
    """
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    model = _need_str(body, "model", "model")
    for key in _STATEFUL:
        if body.get(key) is not None:
            raise InvalidRequest(f"'{key}' is not supported: {_NO_STATE}", key)
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise InvalidRequest("'instructions' must be a string", "instructions")
        if instructions:
            messages.append({"role": "system", "content": instructions})
    if body.get("input") is None:
        raise InvalidRequest("missing required parameter: 'input'", "input")
    messages += _input_messages(body["input"])
    chat: dict[str, Any] = {"model": model, "messages": messages}
    if body.get("tools") is not None:
        tools = _chat_tools(body["tools"])
        if tools:
            chat["tools"] = tools
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _chat_tool_choice(body["tool_choice"])
    limit = body.get("max_output_tokens")
    if limit is not None:
        if not _is_int(limit) or limit < 1:
            raise InvalidRequest("'max_output_tokens' must be a positive integer", "max_output_tokens")
        chat["max_tokens"] = limit
    if body.get("reasoning") is not None:
        effort = _chat_reasoning_effort(body["reasoning"])
        if effort is not None:
            chat["reasoning_effort"] = effort
    if body.get("text") is not None:
        response_format = _chat_response_format(body["text"])
        if response_format is not None:
            chat["response_format"] = response_format
    for table, copy_it in ((_COPIED, True), (_IGNORED, False)):
        for key, (check, what) in table.items():
            value = body.get(key)
            if value is None:
                continue
            if not check(value):
                raise InvalidRequest(f"'{key}' must be {what}", key)
            if copy_it:
                chat[key] = value
    return chat


# -- deltas to events ----------------------------------------------------------------------------

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _responses_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Chat Completions usage (`prompt_tokens`, `completion_tokens`, `total_tokens`) in Responses shape."""
    if usage is None:
        return None
    if "input_tokens" in usage:  # already in Responses shape
        return copy.deepcopy(usage)
    prompt = usage.get("prompt_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    total = usage.get("total_tokens")
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + completion if total is None else total,
    }


class ResponsesStream:
    """Chat Completions deltas in, Responses streaming events and the Response object out.

    `start()` gives `response.created` and `response.in_progress`; `feed(delta)` the events for one
    delta; `finish(finish_reason, usage, report)` closes what is open and gives `response.completed`
    (or `response.incomplete` for `"length"` / `"content_filter"`, with `incomplete_details`);
    `fail(message, code)` closes what is open as incomplete and gives `response.failed`. `feed`,
    `finish` and `fail` start the stream themselves when `start` was not called. Every event has a
    `sequence_number` counting from 0; `response` is a snapshot of the Response object, after the end
    the one the last event carries.

    Items follow the deltas: reasoning text (`reasoning_content`, else `reasoning`) opens a
    `reasoning` item (a `reasoning_text` content part), content opens a `message` item (an
    `output_text` part), and each opening closes the other kind. A tool call (an entry with a new
    `index`, carrying `function.name`) closes the open text item and adds a `function_call` item
    (`call_id` is the call's id); later entries with the same index are argument fragments (a
    repeated id or name is ignored), and the call is done when text or another call arrives, or at
    the end.
    A call announced and then reported dropped (`report["dropped"]`, `"streamed": True`) that is still
    open at `finish` ends `status: "incomplete"`; so does the open text item when the output was cut
    off. Malformed deltas (an entry without an integer index, a call's first entry without a name,
    arguments for a call already done) raise `ValueError`; anything after the end raises `RuntimeError`.

    `request` is the Responses request body: the Response echoes its `instructions`, `tools`,
    `tool_choice`, `temperature`, `top_p`, `max_output_tokens`, `parallel_tool_calls`, `metadata`,
    `text`, `reasoning`, `truncation` and `user`. `report` (chatparse's diagnostics) is added as a
    top-level `chatparse` key when not empty. `id_factory(prefix)` makes the item ids (`rs`, `msg`,
    `fc`; `call` for a call that came without an id); random by default.
    """

    def __init__(
        self,
        *,
        response_id: str,
        model: str,
        created_at: int,
        request: dict[str, Any] | None = None,
        id_factory: Callable[[str], str] | None = None,
    ) -> None:
        self._id = response_id
        self._model = model
        self._created_at = created_at
        self._request: dict[str, Any] = copy.deepcopy(request) if request else {}
        self._make = id_factory or _item_id
        self._seq = 0
        self._started = False
        self._items: list[dict[str, Any]] = []
        self._pieces: dict[int, list[str]] = {}  # output index -> text of an open item, in pieces
        self._text: int | None = None  # output index of the open reasoning or message item
        self._open_calls: dict[int, int] = {}  # chat call index -> output index, calls not done
        self._done_calls: set[int] = set()  # chat call indices whose item is done
        self._final: dict[str, Any] | None = None

    # -- public ---------------------------------------------------------------------------------

    def start(self) -> list[dict[str, Any]]:
        if self._started:
            raise RuntimeError("ResponsesStream.start() was already called")
        self._started = True
        events: list[dict[str, Any]] = []
        snapshot = self._snapshot("in_progress")
        self._emit(events, "response.created", response=snapshot)
        self._emit(events, "response.in_progress", response=copy.deepcopy(snapshot))
        return events

    def feed(self, delta: dict[str, Any]) -> list[dict[str, Any]]:
        events = self._begin()
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if reasoning:
            self._text_piece("reasoning", reasoning, events)
        if delta.get("content"):
            self._text_piece("message", delta["content"], events)
        for entry in delta.get("tool_calls") or ():
            self._call_entry(entry, events)
        return events

    def finish(
        self, finish_reason: str, usage: dict[str, Any] | None = None, report: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        events = self._begin()
        reason = _INCOMPLETE.get(finish_reason)
        dropped = {
            d["index"]
            for d in (report or {}).get("dropped") or ()
            if isinstance(d, dict) and d.get("streamed") and _is_int(d.get("index"))
        }
        self._close_calls(events, dropped=dropped)
        self._close_text(events, "incomplete" if reason else "completed")
        status = "incomplete" if reason else "completed"
        final = self._snapshot(status)
        if reason:
            final["incomplete_details"] = {"reason": reason}
        final["usage"] = _responses_usage(usage)
        if report:
            final["chatparse"] = copy.deepcopy(report)
        self._final = final
        self._emit(events, f"response.{status}", response=copy.deepcopy(final))
        return events

    def fail(self, message: str, code: str = "server_error") -> list[dict[str, Any]]:
        events = self._begin()
        self._close_calls(events, status="incomplete")
        self._close_text(events, "incomplete")
        final = self._snapshot("failed")
        final["error"] = {"code": code, "message": message}
        self._final = final
        self._emit(events, "response.failed", response=copy.deepcopy(final))
        return events

    @property
    def response(self) -> dict[str, Any]:
        """The Response object now (status `in_progress` until the end), a copy."""
        if self._final is not None:
            return copy.deepcopy(self._final)
        return self._snapshot("in_progress")

    # -- events ---------------------------------------------------------------------------------

    def _begin(self) -> list[dict[str, Any]]:
        if self._final is not None:
            raise RuntimeError("the response already ended")
        return [] if self._started else self.start()

    def _emit(self, events: list[dict[str, Any]], kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": self._seq, **fields})
        self._seq += 1

    def _add_item(self, item: dict[str, Any], events: list[dict[str, Any]]) -> int:
        index = len(self._items)
        self._items.append(item)
        self._pieces[index] = []
        self._emit(events, "response.output_item.added", output_index=index, item=copy.deepcopy(item))
        return index

    def _text_piece(self, kind: str, text: str, events: list[dict[str, Any]]) -> None:
        self._close_calls(events)
        if self._text is not None and self._items[self._text]["type"] != kind:
            self._close_text(events, "completed")
        if self._text is None:
            if kind == "reasoning":
                item = {"type": "reasoning", "id": self._make("rs"), "summary": [], "content": []}
                item["status"] = "in_progress"
            else:
                item = {"type": "message", "id": self._make("msg"), "role": "assistant"}
                item.update(status="in_progress", content=[])
            self._text = self._add_item(item, events)
            self._emit(
                events,
                "response.content_part.added",
                item_id=item["id"],
                output_index=self._text,
                content_index=0,
                part=self._part(kind, ""),
            )
        index = self._text
        self._pieces[index].append(text)
        ids = {"item_id": self._items[index]["id"], "output_index": index, "content_index": 0}
        if kind == "reasoning":
            self._emit(events, "response.reasoning_text.delta", **ids, delta=text)
        else:
            self._emit(events, "response.output_text.delta", **ids, delta=text, logprobs=[])

    @staticmethod
    def _part(kind: str, text: str) -> dict[str, Any]:
        if kind == "reasoning":
            return {"type": "reasoning_text", "text": text}
        return {"type": "output_text", "text": text, "annotations": []}

    def _close_text(self, events: list[dict[str, Any]], status: str) -> None:
        index = self._text
        if index is None:
            return
        self._text = None
        item = self._items[index]
        text = "".join(self._pieces.pop(index))
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        if item["type"] == "reasoning":
            self._emit(events, "response.reasoning_text.done", **ids, text=text)
        else:
            self._emit(events, "response.output_text.done", **ids, text=text, logprobs=[])
        part = self._part(item["type"], text)
        self._emit(events, "response.content_part.done", **ids, part=copy.deepcopy(part))
        item["content"] = [part]
        item["status"] = status
        self._emit(events, "response.output_item.done", output_index=index, item=copy.deepcopy(item))

    def _call_entry(self, entry: Any, events: list[dict[str, Any]]) -> None:
        if not isinstance(entry, dict) or not _is_int(entry.get("index")):
            raise ValueError(f"a tool_calls entry needs an integer 'index': {entry!r}")
        call = entry["index"]
        function = entry.get("function") or {}
        arguments = function.get("arguments") or ""
        if call in self._open_calls:
            index = self._open_calls[call]
        elif call in self._done_calls:
            raise ValueError(f"tool call {call} continued after it was done")
        else:
            name = function.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"the first entry of tool call {call} has no function name")
            self._close_calls(events)
            self._close_text(events, "completed")
            item = {
                "type": "function_call",
                "id": self._make("fc"),
                "call_id": entry.get("id") or self._make("call"),
                "name": name,
                "arguments": "",
                "status": "in_progress",
            }
            index = self._open_calls[call] = self._add_item(item, events)
        if arguments:
            self._pieces[index].append(arguments)
            self._emit(
                events,
                "response.function_call_arguments.delta",
                item_id=self._items[index]["id"],
                output_index=index,
                delta=arguments,
            )

    def _close_calls(
        self,
        events: list[dict[str, Any]],
        *,
        status: str = "completed",
        dropped: set[int] | frozenset[int] = frozenset(),
    ) -> None:
        for call, index in sorted(self._open_calls.items(), key=lambda kv: kv[1]):
            item = self._items[index]
            item["arguments"] = "".join(self._pieces.pop(index))
            item["status"] = "incomplete" if call in dropped else status
            self._emit(
                events,
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
                name=item["name"],
            )
            self._emit(events, "response.output_item.done", output_index=index, item=copy.deepcopy(item))
            self._done_calls.add(call)
        self._open_calls.clear()

    # -- the Response object ---------------------------------------------------------------------

    def _output(self) -> list[dict[str, Any]]:
        output = copy.deepcopy(self._items)
        for index, pieces in self._pieces.items():
            item = output[index]
            if item["type"] == "function_call":
                item["arguments"] = "".join(pieces)
            else:
                item["content"] = [self._part(item["type"], "".join(pieces))]
        return output

    def _snapshot(self, status: str) -> dict[str, Any]:
        req = self._request
        text = req.get("text")
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": req.get("instructions"),
            "max_output_tokens": req.get("max_output_tokens"),
            "model": self._model,
            "output": self._output(),
            "parallel_tool_calls": req.get("parallel_tool_calls") is not False,
            "previous_response_id": None,
            "reasoning": copy.deepcopy(req.get("reasoning")),
            "store": False,
            "background": False,
            "temperature": req.get("temperature"),
            "text": copy.deepcopy(text) if isinstance(text, dict) else {"format": {"type": "text"}},
            "tool_choice": copy.deepcopy(req.get("tool_choice") or "auto"),
            "tools": copy.deepcopy(req.get("tools") or []),
            "top_p": req.get("top_p"),
            "truncation": req.get("truncation") or "disabled",
            "usage": None,
            "user": req.get("user"),
            "metadata": copy.deepcopy(req.get("metadata") or {}),
        }
