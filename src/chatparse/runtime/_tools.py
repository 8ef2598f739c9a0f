"""The tool registry: tools as Python callables or JSON schemas, argument validation, dispatch.

Theory of operation
-------------------
A `ToolRegistry` holds `Tool`s: a name, a description, a JSON schema for the parameters and,
usually, a handler. A Python function becomes a tool from its signature and type hints (the types
`chatparse.tools` derives, the way `transformers.utils.get_json_schema` does; parameters without a
default are required) and its docstring (first paragraph: the description; a Google-style
`Args:` section: the parameter descriptions). A dict in the `tools=` format of the Chat
Completions API (or a bare `{"name", "parameters"}`) is a tool as it is.

Dispatching a call answers it, always, with a `ToolResult` the model can read on the next step;
nothing is dropped silently and nothing raises (`runtime-contract.md` §5):

1. unknown name -> `Tool not found: NAME. Available tools: a, b.` (sorted, or `No tools are
   available this turn.`);
2. arguments that are not a JSON object, or that do not satisfy the schema -> `Invalid arguments
   for NAME: ...` naming each problem and where it is (`arguments.days: expected integer, got
   string "3"`);
3. the authorization hook says no -> `Tool call not authorized: NAME.` (or the hook's message);
4. the handler raises -> `Error: <ExceptionType>: <message>`.

Each of these is a result with `is_error=True`; a handler's return value is the content (a string
as it is, anything else as JSON). Parsers never veto: recognition is not authorization, and the
decision of what may run is the authorization hook's alone.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..tools import build_tool_table
from ._generation import ToolCall

__all__ = ["Tool", "ToolRegistry", "ToolResult", "not_found_message", "validate_arguments"]

logger = logging.getLogger("chatparse.runtime")

_MAX_ERRORS = 8  # validation problems listed per call
_MAX_DEPTH = 64  # schema / value nesting followed by the validator


# ------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool call.

    `content` is what the model reads; `is_error` marks every failure (`error` is then one of
    `"not_found"`, `"invalid_arguments"`, `"unauthorized"`, `"raised"`); `value` is what the
    handler returned (None on failure).
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    error: str | None = None
    value: Any = None

    def to_message(self) -> dict[str, Any]:
        """The `role: "tool"` message for the conversation history."""
        return {"role": "tool", "tool_call_id": self.call_id, "name": self.name, "content": self.content}


def not_found_message(name: str, available: Iterable[str]) -> str:
    """The answer to a call of an unknown tool (runtime-contract.md §5).

    >>> not_found_message("fly", ["walk", "swim"])
    'Tool not found: fly. Available tools: swim, walk.'
    >>> not_found_message("fly", [])
    'Tool not found: fly. No tools are available this turn.'
    """
    names = sorted(set(available))
    if not names:
        return f"Tool not found: {name}. No tools are available this turn."
    return f"Tool not found: {name}. Available tools: {', '.join(names)}."


# ------------------------------------------------------------------------------------------------
# JSON schema validation (the subset tool schemas use)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    actual = _type_name(value)
    if name == "number":
        return actual in ("integer", "number")
    if name == "integer":
        return actual == "integer" or (actual == "number" and math.isfinite(value) and value == int(value))
    return actual == name


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _list(value: Any) -> list[Any]:
    """A schema keyword that must be a list, or [] (a malformed schema checks nothing there)."""
    return value if isinstance(value, list) else []


def _validate(value: Any, schema: Any, path: str, errors: list[str], depth: int) -> None:
    if len(errors) >= _MAX_ERRORS or not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return
    types = schema.get("type")
    names = [types] if isinstance(types, str) else [t for t in _list(types) if isinstance(t, str)]
    if schema.get("nullable") and value is None:
        return
    if names and not any(_is_type(value, t) for t in names):
        errors.append(f"{path}: expected {' or '.join(names)}, got {_type_name(value)} {_show(value)}")
        return
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        errors.append(f"{path}: {_show(value)} is not one of {_show(schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: must be {_show(schema['const'])}")
    for key in ("anyOf", "oneOf"):
        choices = schema.get(key)
        if isinstance(choices, list) and choices:
            ok = 0
            for choice in choices:
                sub: list[str] = []
                _validate(value, choice, path, sub, depth + 1)
                ok += not sub
            if ok == 0 or (key == "oneOf" and ok > 1):
                errors.append(
                    f"{path}: {_show(value)} matches {'none' if ok == 0 else 'more than one'} of {key}"
                )
    for sub_schema in _list(schema.get("allOf")):
        _validate(value, sub_schema, path, errors, depth + 1)
    if isinstance(value, str):
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                if re.search(pattern, value) is None:
                    errors.append(f"{path}: does not match the pattern {pattern!r}")
            except re.error:
                pass  # a pattern Python cannot compile is not the model's fault
    if _type_name(value) in ("integer", "number"):
        for key, bad in (
            ("minimum", lambda v, b: v < b),
            ("maximum", lambda v, b: v > b),
            ("exclusiveMinimum", lambda v, b: v <= b),
            ("exclusiveMaximum", lambda v, b: v >= b),
        ):
            bound = schema.get(key)
            if _type_name(bound) in ("integer", "number") and bad(value, bound):
                errors.append(f"{path}: {value} violates {key} {bound}")
    if isinstance(value, list):
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        prefix_items = schema.get("prefixItems")
        prefix: list[Any] = prefix_items if isinstance(prefix_items, list) else []
        for i, item in enumerate(value):
            item_schema = prefix[i] if i < len(prefix) else schema.get("items")
            _validate(item, item_schema, f"{path}[{i}]", errors, depth + 1)
    if isinstance(value, dict):
        properties = schema.get("properties")
        props: dict[str, Any] = properties if isinstance(properties, dict) else {}
        for name in _list(schema.get("required")):
            if isinstance(name, str) and name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            where = (
                f"{path}.{key}"
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(key))
                else f"{path}[{_show(key)}]"
            )
            if key in props:
                _validate(item, props[key], where, errors, depth + 1)
            elif extra is False:
                errors.append(f"{path}: unexpected property {key!r}")
            elif isinstance(extra, dict):
                _validate(item, extra, where, errors, depth + 1)


def validate_arguments(arguments: Any, parameters: Any) -> list[str]:
    """The problems with `arguments` for a tool whose parameters schema is `parameters` (JSON
    Schema: `type`, `properties`, `required`, `additionalProperties`, `items`, `prefixItems`,
    `enum`, `const`, `anyOf` / `oneOf` / `allOf`, `nullable`, length, size and range bounds,
    `pattern`); `[]` when they are valid. `$ref` and formats are not checked.

    >>> schema = {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["city"]}
    >>> validate_arguments({"days": "3"}, schema)
    ["arguments: missing required property 'city'", 'arguments.days: expected integer, got string "3"']
    """
    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {_type_name(arguments)}"]
    errors: list[str] = []
    _validate(arguments, parameters if isinstance(parameters, dict) else {}, "arguments", errors, 0)
    return errors


# ------------------------------------------------------------------------------------------------
# tools


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _docstring_parts(func: Callable[..., Any]) -> tuple[str | None, dict[str, str]]:
    """The description (the docstring's first paragraph) and `Args:` entries of a function."""
    doc = inspect.getdoc(func)
    if not doc:
        return None, {}
    lines = doc.splitlines()
    first: list[str] = []
    for line in lines:
        if not line.strip() or _ARGS_HEADER.match(line):
            break
        first.append(line.strip())
    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if not in_args:
            continue
        if line.strip() and not line.startswith((" ", "\t")) and line.rstrip().endswith(":"):
            break  # the next section (Returns:, Raises:, ...)
        m = _ARG_LINE.match(line)
        if m and line[: len(line) - len(line.lstrip())].count(" ") <= 4:
            current = m.group(1).lstrip("*")
            params[current] = m.group(2).strip()
        elif current and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
    return (" ".join(first) or None), params


def _function_parameters(func: Callable[..., Any], docs: Mapping[str, str]) -> dict[str, Any]:
    table = build_tool_table([func])  # raises ValueError naming a parameter without a usable type hint
    properties = {k: dict(v) for k, v in next(iter(table.values()), {}).items()}
    required = []
    for name, param in inspect.signature(func).parameters.items():
        if name in properties:
            if param.default is inspect.Parameter.empty:
                required.append(name)
            if docs.get(name):
                properties[name]["description"] = docs[name]
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


@dataclass(frozen=True)
class Tool:
    """One tool: `name`, `description`, `parameters` (a JSON schema object) and its `handler`.

    A tool without a handler is offered to the model but not run: a call to it ends the turn with
    the call pending, for the caller to execute.
    """

    name: str
    parameters: Mapping[str, Any]
    description: str | None = None
    handler: Callable[..., Any] | None = None

    def schema(self) -> dict[str, Any]:
        """The Chat Completions `tools` entry."""
        fn: dict[str, Any] = {"name": self.name}
        if self.description:
            fn["description"] = self.description
        fn["parameters"] = json.loads(json.dumps(self.parameters))
        return {"type": "function", "function": fn}

    @classmethod
    def from_function(
        cls, func: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool from a Python function (sync or async): schema from its type hints and docstring."""
        if not callable(func):
            raise TypeError(f"a tool function must be callable, got {type(func).__name__}")
        # a callable object is described by its __call__ (bound: `self` is not a parameter)
        target = func if inspect.isfunction(func) or inspect.ismethod(func) else func.__call__  # type: ignore[operator]
        doc_description, docs = _docstring_parts(target)
        tool_name = name or getattr(func, "__name__", None) or type(func).__name__
        return cls(
            name=tool_name,
            parameters=_function_parameters(target, docs),
            description=description if description is not None else doc_description,
            handler=func,
        )

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any], handler: Callable[..., Any] | None = None) -> Tool:
        """A tool from a Chat Completions tool dict (or a bare function dict), with an optional handler."""
        if not isinstance(schema, Mapping):
            raise TypeError(f"a tool schema must be a mapping, got {type(schema).__name__}")
        fn = schema.get("function", schema)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ValueError(f"a tool schema needs a non-empty string 'name': {schema!r}")
        params = fn.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, Mapping):
            raise ValueError(f"tool {fn['name']!r}: 'parameters' must be a JSON schema object")
        description = fn.get("description")
        return cls(
            name=fn["name"],
            parameters=dict(params),
            description=description if isinstance(description, str) else None,
            handler=handler,
        )


Authorize = Callable[[ToolCall], Any]


class ToolRegistry:
    """Tools by name, and the dispatch of calls to them.

    >>> registry = ToolRegistry()
    >>> @registry.tool
    ... def add(a: int, b: int = 0) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> registry.schemas()[0]["function"]["parameters"]["required"]
    ['a']
    >>> registry.dispatch(ToolCall("c1", "add", {"a": 2, "b": 3}, '{"a": 2, "b": 3}')).content
    '5'
    >>> registry.dispatch(ToolCall("c2", "mul", {}, "{}")).content
    'Tool not found: mul. Available tools: add.'
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any] | Mapping[str, Any]] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools or ():
            self.add(t)

    @classmethod
    def coerce(cls, tools: Any) -> ToolRegistry:
        """`tools` as a registry: a registry, None (empty), or an iterable of functions / schemas / `Tool`s."""
        if isinstance(tools, ToolRegistry):
            return tools
        if tools is None:
            return cls()
        if isinstance(tools, (Mapping, str)) or callable(tools):
            raise TypeError("tools must be a ToolRegistry or a list of functions, tool dicts or Tools")
        return cls(tools)

    def add(
        self,
        tool: Tool | Callable[..., Any] | Mapping[str, Any],
        *,
        handler: Callable[..., Any] | None = None,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """Register a function, a tool dict (with an optional `handler`) or a `Tool`; returns the
        `Tool`. A later tool with the same name replaces the earlier one."""
        if isinstance(tool, Tool):
            t = tool
        elif isinstance(tool, Mapping):
            t = Tool.from_schema(tool, handler)
        elif callable(tool):
            t = Tool.from_function(tool, name=name, description=description)
        else:
            raise TypeError(f"cannot make a tool from {type(tool).__name__}")
        if name and t.name != name:
            t = Tool(name=name, parameters=t.parameters, description=t.description, handler=t.handler)
        self._tools[t.name] = t
        return t

    def tool(
        self,
        func: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Any:
        """Decorator: register the function as a tool (usable bare or with `name=` / `description=`)."""

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            self.add(f, name=name, description=description)
            return f

        return register(func) if func is not None else register

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The Chat Completions `tools` list, in registration order."""
        return [t.schema() for t in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()})"

    # -- dispatch ----------------------------------------------------------------------------

    def check(self, call: ToolCall) -> ToolResult | None:
        """The error result for a call that must not run (unknown tool, bad arguments), else None."""
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolResult(
                call.id, call.name, not_found_message(call.name, self._tools), True, "not_found"
            )
        if call.arguments is None:
            problems = [call.arguments_error or "arguments must be a JSON object"]
        else:
            problems = validate_arguments(call.arguments, tool.parameters)
            if not problems and tool.handler is not None:
                problems = _signature_problems(tool.handler, call.arguments)
        if problems:
            text = f"Invalid arguments for {call.name}: " + "; ".join(problems) + "."
            text += " Expected parameters: " + json.dumps(tool.parameters, ensure_ascii=False)
            return ToolResult(call.id, call.name, text, True, "invalid_arguments")
        return None

    def dispatch(self, call: ToolCall, *, authorize: Authorize | None = None) -> ToolResult:
        """Answer one call (see the module docstring); never raises for the call's own faults.

        An async handler is run with `asyncio.run` when no event loop is running in this thread;
        inside one, use `adispatch`.
        """
        failed = self.check(call)
        if failed is not None:
            return failed
        denied = _authorization(authorize, call, None)
        if denied is not None:
            return denied
        tool = self._tools[call.name]
        if tool.handler is None:
            raise LookupError(f"tool {call.name!r} has no handler")
        try:
            value = tool.handler(**(call.arguments or {}))
            if inspect.isawaitable(value):
                value = _run_awaitable(value)
        except Exception as e:
            return _raised(call, e)
        return _success(call, value)

    async def adispatch(self, call: ToolCall, *, authorize: Authorize | None = None) -> ToolResult:
        """`dispatch` for asyncio: async handlers are awaited, sync ones run in a worker thread (so
        a slow tool never blocks the event loop); an async `authorize` is awaited."""
        failed = self.check(call)
        if failed is not None:
            return failed
        verdict: Any = None
        if authorize is not None:
            try:
                verdict = authorize(call)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as e:
                verdict = _Raised(e)
        denied = _authorization(None, call, verdict) if authorize is not None else None
        if denied is not None:
            return denied
        tool = self._tools[call.name]
        if tool.handler is None:
            raise LookupError(f"tool {call.name!r} has no handler")
        try:
            if inspect.iscoroutinefunction(tool.handler):
                value = await tool.handler(**(call.arguments or {}))
            else:
                value = await asyncio.to_thread(tool.handler, **(call.arguments or {}))
                if inspect.isawaitable(value):
                    value = await value
        except Exception as e:
            return _raised(call, e)
        return _success(call, value)


class _Raised:
    def __init__(self, error: Exception) -> None:
        self.error = error


def _authorization(authorize: Authorize | None, call: ToolCall, verdict: Any) -> ToolResult | None:
    """The denial for a call, or None when it may run. `verdict` is a precomputed answer (async)."""
    if authorize is not None:
        try:
            verdict = authorize(call)
            if inspect.isawaitable(verdict):
                verdict = _run_awaitable(verdict)
        except Exception as e:
            verdict = _Raised(e)
    if isinstance(verdict, _Raised):  # fail closed
        logger.exception(
            "chatparse.runtime: authorize raised for %s; the call is denied",
            call.name,
            exc_info=verdict.error,
        )
        return ToolResult(
            call.id,
            call.name,
            f"Tool call not authorized: {call.name}. The authorization check failed: "
            f"{type(verdict.error).__name__}: {verdict.error}",
            True,
            "unauthorized",
        )
    if verdict is None or verdict is True:
        return None
    message = verdict if isinstance(verdict, str) and verdict else f"Tool call not authorized: {call.name}."
    return ToolResult(call.id, call.name, message, True, "unauthorized")


def _signature_problems(handler: Callable[..., Any], arguments: Mapping[str, Any]) -> list[str]:
    """Arguments a Python handler cannot take (the schema allowed them)."""
    try:
        sig = inspect.signature(handler)
    except (TypeError, ValueError):
        return []
    params = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return []
    takes = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    problems = [f"unexpected argument {k!r}" for k in arguments if k not in takes]
    missing = [
        n
        for n, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty and n not in arguments
    ]
    problems.extend(f"missing required argument {n!r}" for n in missing)
    return problems


def _run_awaitable(value: Awaitable[Any]) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> Any:
            return await value

        return asyncio.run(wait())
    if inspect.iscoroutine(value):
        value.close()
    raise RuntimeError(
        "an async tool or authorize hook inside a running event loop: use arun_turn / adispatch"
    )


def _raised(call: ToolCall, e: Exception) -> ToolResult:
    return ToolResult(call.id, call.name, f"Error: {type(e).__name__}: {e}", True, "raised")


def _success(call: ToolCall, value: Any) -> ToolResult:
    if isinstance(value, str):
        content = value
    else:
        try:
            content = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            content = str(value)
    return ToolResult(call.id, call.name, content, False, None, value)
