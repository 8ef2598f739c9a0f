"""Typed tool-call arguments: cast string arguments using the tools' JSON schemas.

Formats such as Qwen3-Coder's XML write every argument as text (`<parameter=n>5</parameter>`); with
the tools that were offered to the model, the declared JSON-schema type of each parameter turns the
text into a value (`"5"` -> `5`). The rules are those of transformers 5.24.0 (`response-template.md`
§6), with one fix: a `number` parameter keeps an integer literal exact (defect D24), and nothing is
mutated in place (defect D18).

Example::

    >>> from chatparse.tools import build_tool_table, coerce_tool_calls
    >>> tools = [{"type": "function", "function": {"name": "add", "parameters": {
    ...     "type": "object", "properties": {"n": {"type": "integer"}, "tag": {"type": "string"}}}}}]
    >>> table = build_tool_table(tools)
    >>> call = {"type": "function", "function": {"name": "add", "arguments": {"n": "5", "tag": "5"}}}
    >>> coerce_tool_calls(call, table)["function"]["arguments"]
    {'n': 5, 'tag': '5'}
    >>> call["function"]["arguments"]  # the input is left alone
    {'n': '5', 'tag': '5'}

Python functions can be passed as tools too; their schema is derived from their type hints the way
`transformers.utils.get_json_schema` does it (docstrings are not required here).
"""

from __future__ import annotations

import enum
import inspect
import json
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["ToolTable", "build_tool_table", "coerce", "coerce_tool_calls", "schema_types"]

# --------------------------------------------------------------------------------------------------
# Schema types and coercion


def schema_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a parameter schema declares, in the order `coerce` tries them.

    `type` (a string or the strings of a list), then each `anyOf` / `oneOf` choice recursively, then
    `"null"` if `nullable` is set (as `get_json_schema` marks `Optional`). Anything else
    (`allOf`, `$ref`, `enum`, ...) is ignored; a non-dict schema declares nothing.

    >>> schema_types({"type": "integer", "nullable": True})
    ('integer', 'null')
    >>> schema_types({"anyOf": [{"type": "array"}, {"type": ["string", "number"]}]})
    ('array', 'string', 'number')
    """
    if not isinstance(schema, dict):
        return ()
    declared = schema.get("type")
    if type(declared) is str and not ("anyOf" in schema or "oneOf" in schema or "nullable" in schema):
        return (declared,)  # the usual `{"type": T, ...}` (a parse asks once per parameter)
    found = [declared] if isinstance(declared, str) else []
    if isinstance(declared, list):
        found.extend(t for t in declared if isinstance(t, str))
    for union_name in ("anyOf", "oneOf"):
        choices = schema.get(union_name) or []
        try:
            iterator = iter(choices)
        except TypeError:
            continue  # e.g. `"anyOf": 5`: the reference raises TypeError, here it declares nothing
        for choice in iterator:
            found.extend(schema_types(choice))
    if schema.get("nullable") and "null" not in found:
        found.append("null")
    return tuple(found)


def coerce(raw: str, types: tuple[str, ...]) -> Any:
    """Cast the text `raw` to the first of `types` (JSON-schema type names) it is valid for.

    * `integer`: `int(raw)`, or an integral `float(raw)` (`"3.0"` -> 3);
    * `number`: `int(raw)` when Python accepts it as an integer literal (exact, unlike the reference,
      which goes through `float`), else `float(raw)` if finite, kept as an `int` when integral and
      written without a `"."` (`"1e3"` -> 1000);
    * `boolean`: `true`/`1`/`false`/`0`, case-insensitive, surrounding whitespace ignored;
    * `null`: `null` or `None`;
    * `object` / `array`: `json.loads(raw)` giving a dict / list.

    `string` and unknown types never cast. When nothing fits, `raw` itself is returned.

    >>> coerce(" 7 ", ("integer",)), coerce("9007199254740993", ("number",)), coerce("x", ("integer",))
    (7, 9007199254740993, 'x')
    """
    for type_name in types:
        try:
            if type_name == "integer":
                try:
                    return int(raw)
                except ValueError:
                    # JSON Schema integers include whole numbers written as floats, e.g. "3.0"
                    number = float(raw)
                    if not number.is_integer():
                        continue
                    return int(number)
            if type_name == "number":
                try:
                    return int(raw)  # D24: exact, where float() would round beyond 2**53
                except ValueError:
                    pass
                number = float(raw)
                if number != number or number in (float("inf"), float("-inf")):
                    continue  # NaN / inf are not valid JSON numbers
                # Preserve ints when the source text had no fractional part.
                return int(number) if number.is_integer() and "." not in raw else number
            if type_name == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            if type_name == "null" and raw.strip() in ("null", "None"):
                return None
            if type_name in ("object", "array"):
                decoded = json.loads(raw)
                if isinstance(decoded, dict if type_name == "object" else list):
                    return decoded
        except (ValueError, RecursionError):
            # RecursionError: JSON nested too deeply; the reference lets it escape.
            continue
    return raw  # `string` params, unknown types and failed casts all keep the original text


# --------------------------------------------------------------------------------------------------
# Tool table


class _SchemaError(Exception):
    pass


_JSON_SCALAR_TYPES: dict[type, str] = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    type(None): "null",
}


def _basic_type_schema(hint: Any) -> dict[str, Any] | None:
    # Mirrors transformers' `_get_json_schema_type`, including its PIL / torch entries, which are
    # recognised by name so that neither library is imported here.
    if hint in (int, float, str, bool, type(None), list, tuple, dict):
        return {
            int: {"type": "integer"},
            float: {"type": "number"},
            str: {"type": "string"},
            bool: {"type": "boolean"},
            type(None): {"type": "null"},
            list: {"type": "array"},
            tuple: {"type": "array"},
            dict: {"type": "object"},
        }[hint]
    if hint is Any:
        return {}
    if isinstance(hint, type):
        qualified = (hint.__module__, hint.__qualname__)
        if qualified == ("PIL.Image", "Image"):
            return {"type": "image"}
        if qualified == ("torch", "Tensor"):
            return {"type": "audio"}
    return None


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    value_types = list(dict.fromkeys(_JSON_SCALAR_TYPES[type(value)] for value in values))
    return {"type": value_types[0] if len(value_types) == 1 else value_types, "enum": values}


def _hint_schema(hint: Any) -> dict[str, Any]:
    """transformers' `_parse_type_hint`: a type hint to a JSON schema."""
    origin = get_origin(hint)
    args = get_args(hint)

    if origin is None and isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        if not values:
            raise _SchemaError(f"the Enum {hint.__name__} has no members")
        if any(type(value) not in _JSON_SCALAR_TYPES for value in values):
            raise _SchemaError(f"the Enum {hint.__name__} has member values that are not JSON scalars")
        return _enum_schema(values)

    if origin is None:
        schema = _basic_type_schema(hint)
        if schema is None:
            raise _SchemaError(f"cannot convert the type hint {hint!r} to a JSON schema")
        return schema

    if origin is Union or origin is types.UnionType:
        subtypes = [_hint_schema(t) for t in args if t is not type(None)]
        if len(subtypes) == 1:
            out = subtypes[0]
        elif all(s.keys() == {"type"} and isinstance(s["type"], str) for s in subtypes):
            names = sorted({s["type"] for s in subtypes})
            out = {"type": names[0] if len(names) == 1 else names}
        else:
            out = {"anyOf": subtypes}
        if type(None) in args:
            out["nullable"] = True
        return out

    if origin is Literal and len(args) > 0:
        if any(type(arg) not in _JSON_SCALAR_TYPES for arg in args):
            raise _SchemaError("only JSON scalar values can be listed in typing.Literal")
        return _enum_schema(list(args))

    if origin is list:
        return {"type": "array", "items": _hint_schema(args[0])} if args else {"type": "array"}

    if origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 1:
            raise _SchemaError(f"the type hint {hint!r} is a tuple with a single element")
        if ... in args:
            raise _SchemaError(f"'...' is not supported in tuple type hints ({hint!r})")
        return {"type": "array", "prefixItems": [_hint_schema(t) for t in args]}

    if origin is dict:
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = _hint_schema(args[1])
        return out

    raise _SchemaError(f"cannot convert the type hint {hint!r} to a JSON schema")


def _function_schema(func: Callable[..., Any]) -> dict[str, Any]:
    """An OpenAI-style tool dict for a Python function, with the parameter types that
    `transformers.utils.get_json_schema` gives it (descriptions are left out)."""
    name = getattr(func, "__name__", "operation")
    try:
        hints = get_type_hints(func)
        signature = inspect.signature(func)
        # A first parameter named self/cls without a hint is an implicit receiver.
        first = next(iter(signature.parameters), None)
        implicit = (
            first
            if first in {"self", "cls"} and signature.parameters[first].annotation == inspect.Parameter.empty
            else None
        )
        required = []
        for param_name, param in signature.parameters.items():
            if param_name == implicit:
                continue
            if param.annotation == inspect.Parameter.empty:
                raise _SchemaError(f"argument {param_name} has no type hint")
            if param.default == inspect.Parameter.empty:
                required.append(param_name)
        properties = {
            param_name: _hint_schema(hint)
            for param_name, hint in hints.items()
            if param_name != implicit and param_name != "return"
        }
    except (_SchemaError, NameError, TypeError, ValueError, AttributeError, KeyError, RecursionError) as e:
        raise ValueError(f"Cannot build a JSON schema for the tool function {name!r}: {e}") from e
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def build_tool_table(tools: Iterable[Any] | None) -> dict[str, dict[str, Any]]:
    """Map each tool name to its parameters' JSON-schema `properties`.

    Accepts what `apply_chat_template(tools=...)` accepts: OpenAI-style dicts
    (`{"type": "function", "function": {"name": ..., "parameters": {...}}}`), bare function dicts
    (`{"name": ..., "parameters": {...}}`), and Python functions or bound methods (typed from their
    hints). A dict without a string name, and anything else, is ignored; a missing or malformed
    `parameters` / `properties` gives `{}` (no coercion); a later tool with the same name replaces an
    earlier one.

    >>> def get_weather(city: str, days: int = 1): ...
    >>> build_tool_table([get_weather, {"name": "ping"}])
    {'get_weather': {'city': {'type': 'string'}, 'days': {'type': 'integer'}}, 'ping': {}}

    Raises `ValueError` naming a function whose parameters cannot be described in JSON schema (a
    missing type hint, a custom class, ...).
    """
    table = ToolTable()
    for tool in tools or []:
        if type(tool) is not dict and (inspect.isfunction(tool) or inspect.ismethod(tool)):
            tool = _function_schema(tool)
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            parameters = fn.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            table[fn["name"]] = properties if isinstance(properties, dict) else {}
    return table


# --------------------------------------------------------------------------------------------------
# Coercing parsed calls


class ToolTable(dict):
    """`build_tool_table`'s result: a dict `{tool name: properties}`, which also keeps each tool's
    `schema_types` per parameter once asked (`types_of`), so coercing many calls of one tool
    derives its parameter types once. The types are those of the schemas when first asked."""

    __slots__ = ("_types",)

    def __init__(self) -> None:
        super().__init__()
        self._types: dict[str, dict[Any, tuple[str, ...]]] = {}

    def types_of(self, name: str) -> dict[Any, tuple[str, ...]]:
        """`{parameter: schema_types(its schema)}` of the tool `name` (which must be in the table),
        for the parameters at least one of whose types casts (`string` and unknown types: `coerce`
        returns its text unchanged, so the call is not made, and the parameter is left out)."""
        got = self._types.get(name)
        if got is None:
            got = self._types[name] = _casting_types(self[name])
        return got


def _casting_types(properties: Mapping[Any, Any]) -> dict[Any, tuple[str, ...]]:
    """`{parameter: schema_types(its schema)}` for the parameters of `properties` at least one of
    whose types casts (see `ToolTable.types_of`)."""
    got: dict[Any, tuple[str, ...]] = {}
    for k, v in properties.items():
        types = schema_types(v)
        if not _CASTING.isdisjoint(types):
            got[k] = types
    return got


#: the JSON-schema types `coerce` casts text to (any other type keeps the text)
_CASTING = frozenset({"integer", "number", "boolean", "null", "object", "array"})
_ABSENT = object()


def _coerce_call(value: Any, table: Mapping[str, dict[str, Any]]) -> Any:
    # (`type(x) is dict` first: the parsed values are plain dicts, and a subclass still passes)
    fn = value.get("function") if type(value) is dict or isinstance(value, dict) else None
    if type(fn) is not dict and not isinstance(fn, dict):
        return value
    name, arguments = fn.get("name"), fn.get("arguments")
    if not (type(name) is str or isinstance(name, str)) or not (
        type(arguments) is dict or isinstance(arguments, dict)
    ):
        return value
    # Only the parameters whose types cast can change (`coerce` returns any other text as it is),
    # each looked up in the arguments: the same assignments in any order (a new arguments dict
    # keeps the old order). A tool with none (no properties, only strings) changes nothing.
    if type(table) is ToolTable:
        casting = table._types.get(name)  # (`types_of`, asked directly once it answered)
        if casting is None:
            if not table.get(name):
                return value
            casting = table.types_of(name)
    else:
        properties = table.get(name)
        if not properties:
            return value
        casting = _casting_types(properties)
    if not casting:
        return value
    new_arguments: dict[Any, Any] | None = None
    for key, declared in casting.items():
        argument = arguments.get(key, _ABSENT)
        if type(argument) is int:
            continue  # (the usual typed JSON value: nothing to cast)
        if isinstance(argument, str):
            new = coerce(argument, declared)
            changed = new is not argument
        elif isinstance(argument, list) and "array" not in declared:
            # duplicate keys collected by `merge_duplicates`
            new = [coerce(item, declared) if isinstance(item, str) else item for item in argument]
            changed = any(a is not b for a, b in zip(new, argument))
        else:
            continue
        if changed:
            if new_arguments is None:
                new_arguments = dict(arguments)
            new_arguments[key] = new
    if new_arguments is None:
        return value
    return {**value, "function": {**fn, "arguments": new_arguments}}


def coerce_tool_calls(value: Any, table: Mapping[str, dict[str, Any]]) -> Any:
    """Cast the string arguments of parsed tool calls to their declared types, without mutating `value`.

    `value` is a field value as parsed: a call `{"function": {"name": str, "arguments": dict}, ...}`,
    a (nested) list of them, or anything else (returned as it is). For a call whose tool has
    properties in `table` (from `build_tool_table`), each argument declared there with at least one
    type is cast with `coerce` if it is a string; a list argument (as `merge_duplicates` makes) whose
    schema does not allow `array` is cast item by item. Values that are already typed are kept.

    The result shares every unchanged part with `value`; changed calls, their `function` and
    `arguments` dicts, and lists containing them are new objects.
    """
    if not table:
        return value
    if not isinstance(value, list):
        return _coerce_call(value, table)
    # Lists can nest as deep as parsed JSON can: walk them without recursion.
    # Frame: [source list, rebuilt items, changed?, next index]
    frames: list[list[Any]] = [[value, [], False, 0]]
    while True:
        frame = frames[-1]
        source, rebuilt, _, index = frame
        if index < len(source):
            frame[3] = index + 1
            item = source[index]
            if isinstance(item, list):
                frames.append([item, [], False, 0])
                continue
            new = _coerce_call(item, table)
            rebuilt.append(new)
            frame[2] = frame[2] or new is not item
            continue
        frames.pop()
        result = rebuilt if frame[2] else source
        if not frames:
            return result
        parent = frames[-1]
        parent[1].append(result)
        parent[2] = parent[2] or result is not source
