"""Validation of OpenAI-style request bodies (Chat Completions, Responses): no HTTP here.

Errors are `InvalidRequest` (a `ValueError`) carrying `param`, the dotted path of the offending field
(`messages[2].role`, `tools[0].function.name`), so a server can answer with an OpenAI error object.
"""

from __future__ import annotations

from typing import Any


class InvalidRequest(ValueError):
    """A request body that does not follow the API: `param` names the field (dotted path) or is None."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


_ROLES = ("system", "developer", "user", "assistant", "tool")
_TOOL_CHOICES = ("none", "auto", "required")
# Fields a Chat Completions request may carry that this layer passes on without looking inside.
_PASS_NUMBERS = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _expect(cond: bool, param: str, what: str, value: Any) -> None:
    if not cond:
        raise InvalidRequest(f"{param} must be {what}, got {_type_name(value)}", param)


def _content(value: Any, param: str, *, optional: bool) -> None:
    if value is None:
        if not optional:
            raise InvalidRequest(f"{param} is required", param)
        return
    if isinstance(value, str):
        return
    _expect(isinstance(value, list), param, "a string or an array of content parts", value)
    for j, part in enumerate(value):
        p = f"{param}[{j}]"
        _expect(isinstance(part, dict), p, "an object", part)
        _expect(isinstance(part.get("type"), str), f"{p}.type", "a string", part.get("type"))
        if part["type"] == "text":
            _expect(isinstance(part.get("text"), str), f"{p}.text", "a string", part.get("text"))


def _tool_calls(value: Any, param: str) -> None:
    _expect(isinstance(value, list), param, "an array", value)
    for j, call in enumerate(value):
        p = f"{param}[{j}]"
        _expect(isinstance(call, dict), p, "an object", call)
        if "id" in call:
            _expect(isinstance(call["id"], str), f"{p}.id", "a string", call["id"])
        fn = call.get("function")
        _expect(isinstance(fn, dict), f"{p}.function", "an object", fn)
        _expect(
            isinstance(fn.get("name"), str) and bool(fn["name"]),
            f"{p}.function.name",
            "a non-empty string",
            fn.get("name"),
        )
        args = fn.get("arguments", "{}")
        _expect(isinstance(args, (str, dict)), f"{p}.function.arguments", "a JSON string", args)


def _messages(value: Any) -> None:
    if value is None:
        raise InvalidRequest("messages is required", "messages")
    _expect(isinstance(value, list), "messages", "an array", value)
    if not value:
        raise InvalidRequest("messages must hold at least one message", "messages")
    for i, m in enumerate(value):
        p = f"messages[{i}]"
        _expect(isinstance(m, dict), p, "an object", m)
        role = m.get("role")
        if role not in _ROLES:
            raise InvalidRequest(f"{p}.role must be one of {', '.join(_ROLES)}, got {role!r}", f"{p}.role")
        if "name" in m and m["name"] is not None:
            _expect(isinstance(m["name"], str), f"{p}.name", "a string", m["name"])
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None:
                _tool_calls(calls, f"{p}.tool_calls")
            _content(m.get("content"), f"{p}.content", optional=True)
            for key in ("reasoning_content", "reasoning", "thinking"):
                if m.get(key) is not None:
                    _expect(isinstance(m[key], str), f"{p}.{key}", "a string", m[key])
        else:
            _content(m.get("content"), f"{p}.content", optional=False)
        if role == "tool":
            _expect(
                isinstance(m.get("tool_call_id"), str), f"{p}.tool_call_id", "a string", m.get("tool_call_id")
            )


def _tools(value: Any) -> list[str]:
    _expect(isinstance(value, list), "tools", "an array", value)
    names = []
    for i, tool in enumerate(value):
        p = f"tools[{i}]"
        _expect(isinstance(tool, dict), p, "an object", tool)
        if tool.get("type", "function") != "function":
            raise InvalidRequest(f"{p}.type must be 'function', got {tool.get('type')!r}", f"{p}.type")
        fn = tool.get("function")
        _expect(isinstance(fn, dict), f"{p}.function", "an object", fn)
        name = fn.get("name")
        _expect(isinstance(name, str) and bool(name), f"{p}.function.name", "a non-empty string", name)
        if fn.get("description") is not None:
            _expect(
                isinstance(fn["description"], str), f"{p}.function.description", "a string", fn["description"]
            )
        if fn.get("parameters") is not None:
            _expect(
                isinstance(fn["parameters"], dict), f"{p}.function.parameters", "an object", fn["parameters"]
            )
        if fn.get("strict") is not None:
            _expect(isinstance(fn["strict"], bool), f"{p}.function.strict", "a boolean", fn["strict"])
        names.append(name)
    return names


def _tool_choice(value: Any, names: list[str]) -> None:
    if isinstance(value, str):
        if value not in _TOOL_CHOICES:
            raise InvalidRequest(
                f"tool_choice must be one of {', '.join(_TOOL_CHOICES)} or a function object, got {value!r}",
                "tool_choice",
            )
        if value == "required" and not names:
            raise InvalidRequest("tool_choice 'required' needs tools", "tool_choice")
        return
    _expect(isinstance(value, dict), "tool_choice", "a string or an object", value)
    fn = value.get("function")
    _expect(isinstance(fn, dict), "tool_choice.function", "an object", fn)
    name = fn.get("name")
    _expect(isinstance(name, str), "tool_choice.function.name", "a string", name)
    if name not in names:
        raise InvalidRequest(
            f"tool_choice names {name!r}, which is not in tools", "tool_choice.function.name"
        )


def validate_chat_request(body: Any) -> dict[str, Any]:
    """Check a Chat Completions request body; return it with defaults filled in.

    Raises `InvalidRequest` naming the first offending field. Defaults: `stream=False`,
    `tool_choice` (`"auto"` with tools, `"none"` without), `parallel_tool_calls=True`.
    `max_completion_tokens` wins over `max_tokens` and is returned as `max_tokens`. `n` other than
    1 is refused. Unknown fields are kept (a server may pass them on or ignore them).

    >>> validate_chat_request({"model": "m", "messages": [{"role": "user", "content": "hi"}]})["tool_choice"]
    'none'
    >>> try:
    ...     validate_chat_request({"model": "m", "messages": [{"role": "robot", "content": "hi"}]})
    ... except InvalidRequest as e:
    ...     print(e.param, "|", e)
    messages[0].role | messages[0].role must be one of system, developer, user, assistant, tool, got 'robot'
    """
    _expect(isinstance(body, dict), "body", "a JSON object", body)
    out = dict(body)
    if body.get("model") is None:
        raise InvalidRequest("model is required", "model")
    _expect(
        isinstance(body.get("model"), str) and bool(body.get("model")),
        "model",
        "a non-empty string",
        body.get("model"),
    )
    _messages(body.get("messages"))
    stream = body.get("stream", False)
    _expect(isinstance(stream, bool) or stream is None, "stream", "a boolean", stream)
    out["stream"] = bool(stream)
    so = body.get("stream_options")
    if so is not None:
        _expect(isinstance(so, dict), "stream_options", "an object", so)
        if "include_usage" in so:
            _expect(
                isinstance(so["include_usage"], bool),
                "stream_options.include_usage",
                "a boolean",
                so["include_usage"],
            )
    n = body.get("n", 1)
    if n is not None:
        _expect(_is_int(n), "n", "an integer", n)
        if n != 1:
            raise InvalidRequest(f"only n=1 is supported, got n={n}", "n")
    names: list[str] = []
    if body.get("tools") is not None:
        names = _tools(body["tools"])
    choice = body.get("tool_choice")
    if choice is None:
        choice = "auto" if names else "none"
    _tool_choice(choice, names)
    out["tool_choice"] = choice
    ptc = body.get("parallel_tool_calls", True)
    _expect(isinstance(ptc, bool) or ptc is None, "parallel_tool_calls", "a boolean", ptc)
    out["parallel_tool_calls"] = ptc is not False
    limit = None
    for key in ("max_tokens", "max_completion_tokens"):
        v = body.get(key)
        if v is not None:
            _expect(_is_int(v), key, "an integer", v)
            if v < 1:
                raise InvalidRequest(f"{key} must be at least 1, got {v}", key)
            limit = v
    out.pop("max_completion_tokens", None)
    out["max_tokens"] = limit
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        _expect(isinstance(stop, list), "stop", "a string or an array of strings", stop)
        for i, s in enumerate(stop):
            _expect(isinstance(s, str) and bool(s), f"stop[{i}]", "a non-empty string", s)
    out["stop"] = stop or None
    for key, (lo, hi) in _PASS_NUMBERS.items():
        v = body.get(key)
        if v is not None:
            _expect(_is_number(v), key, "a number", v)
            if not lo <= v <= hi:
                raise InvalidRequest(f"{key} must be between {lo:g} and {hi:g}, got {v}", key)
    seed = body.get("seed")
    if seed is not None:
        _expect(_is_int(seed), "seed", "an integer", seed)
    ctk = body.get("chat_template_kwargs")
    if ctk is not None:
        _expect(isinstance(ctk, dict), "chat_template_kwargs", "an object", ctk)
    effort = body.get("reasoning_effort")
    if effort is not None:
        _expect(isinstance(effort, str), "reasoning_effort", "a string", effort)
    rf = body.get("response_format")
    if rf is not None:
        _expect(
            isinstance(rf, dict) and isinstance(rf.get("type"), str),
            "response_format",
            "an object with a type",
            rf,
        )
    return out
