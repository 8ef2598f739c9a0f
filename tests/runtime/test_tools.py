"""ToolRegistry: schemas from callables and dicts, validation messages, dispatch that always answers."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatparse.runtime import Tool, ToolCall, ToolRegistry, not_found_message, validate_arguments


def call(name: str, arguments: object, call_id: str = "call_1") -> ToolCall:
    return ToolCall.from_openai(
        {"id": call_id, "function": {"name": name, "arguments": json.dumps(arguments)}}
    )


def get_weather(city: str, days: int = 1, unit: Literal["c", "f"] = "c") -> dict:
    """Current weather for a city.

    Args:
        city: The city name,
            e.g. Paris.
        days (int): How many days.
        unit: Temperature unit.

    Returns:
        the forecast
    """
    return {"city": city, "days": days, "unit": unit}


def test_schema_from_a_function() -> None:
    schema = Tool.from_function(get_weather).schema()
    fn = schema["function"]
    assert schema["type"] == "function" and fn["name"] == "get_weather"
    assert fn["description"] == "Current weather for a city."
    params = fn["parameters"]
    assert params["required"] == ["city"]
    assert params["properties"]["city"] == {"type": "string", "description": "The city name, e.g. Paris."}
    assert params["properties"]["days"] == {"type": "integer", "description": "How many days."}
    assert params["properties"]["unit"]["enum"] == ["c", "f"]


def test_schema_from_dicts_and_names() -> None:
    reg = ToolRegistry(
        [
            {
                "type": "function",
                "function": {"name": "a", "parameters": {"type": "object", "properties": {}}},
            },
            {"name": "b"},
            get_weather,
        ]
    )
    assert reg.names() == ["a", "b", "get_weather"] and len(reg) == 3 and "a" in reg
    assert [s["function"]["name"] for s in reg.schemas()] == ["a", "b", "get_weather"]
    assert reg.get("b").parameters == {"type": "object", "properties": {}}  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="non-empty string 'name'"):
        Tool.from_schema({"function": {"parameters": {}}})
    with pytest.raises(ValueError, match="get_weather|x"):

        def bad(x) -> None:  # type: ignore[no-untyped-def]
            pass

        Tool.from_function(bad)
    with pytest.raises(TypeError):
        ToolRegistry.coerce("get_weather")


def test_decorator_and_callable_objects() -> None:
    reg = ToolRegistry()

    @reg.tool(name="plus", description="Adds.")
    def add(a: int, b: int) -> int:
        return a + b

    class Echo:
        def __call__(self, text: str) -> str:
            return text

    reg.add(Echo(), name="echo")
    assert reg.get("plus").description == "Adds."  # type: ignore[union-attr]
    assert reg.dispatch(call("plus", {"a": 1, "b": 2})).content == "3"
    assert reg.get("echo").parameters["required"] == ["text"]  # type: ignore[union-attr]
    assert reg.dispatch(call("echo", {"text": "hi"})).content == "hi"


def test_unknown_tool_answer_is_exact() -> None:
    reg = ToolRegistry([get_weather, {"name": "alpha"}])
    r = reg.dispatch(call("fly", {}))
    assert r.content == "Tool not found: fly. Available tools: alpha, get_weather."
    assert r.is_error and r.error == "not_found" and r.call_id == "call_1"
    assert (
        ToolRegistry().dispatch(call("fly", {})).content
        == "Tool not found: fly. No tools are available this turn."
    )
    assert not_found_message("x", ["b", "a", "b"]) == "Tool not found: x. Available tools: a, b."


def test_invalid_arguments_are_named() -> None:
    reg = ToolRegistry([get_weather])
    r = reg.dispatch(call("get_weather", {"days": "3", "unit": "k"}))
    assert r.is_error and r.error == "invalid_arguments"
    assert r.content.startswith("Invalid arguments for get_weather: ")
    assert "missing required property 'city'" in r.content
    assert 'arguments.days: expected integer, got string "3"' in r.content
    assert 'arguments.unit: "k" is not one of ["c", "f"]' in r.content
    assert "Expected parameters: " in r.content
    # not an object / not JSON
    assert "arguments must be a JSON object, got list" in reg.dispatch(call("get_weather", [1])).content
    bad = ToolCall.from_openai({"id": "c", "function": {"name": "get_weather", "arguments": "{oops"}})
    assert bad.arguments is None and "not valid JSON" in reg.dispatch(bad).content
    # an argument the Python function cannot take
    r = reg.dispatch(call("get_weather", {"city": "Paris", "colour": "red"}))
    assert "unexpected argument 'colour'" in r.content


def test_validation_subset() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 0, "exclusiveMaximum": 10},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "maybe": {"type": "string", "nullable": True},
            "choice": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 3},
        },
        "additionalProperties": False,
    }
    assert (
        validate_arguments({"n": 3, "tags": ["a"], "pair": [1, "x"], "maybe": None, "choice": True}, schema)
        == []
    )
    assert validate_arguments({"n": 3.0}, {"properties": {"n": {"type": "integer"}}}) == []
    errors = validate_arguments(
        {"n": 10, "tags": ["a", 2, "c"], "pair": ["1"], "choice": "x", "code": "ab", "zzz": 1}, schema
    )
    text = "\n".join(errors)
    assert "arguments.n: 10 violates exclusiveMaximum 10" in text
    assert "arguments.tags: more than 2 items" in text
    assert "arguments.tags[1]: expected string, got integer 2" in text
    assert 'arguments.pair[0]: expected integer, got string "1"' in text
    assert "matches none of anyOf" in text
    assert "shorter than 3 characters" in text and "does not match the pattern" in text
    assert "unexpected property 'zzz'" in text
    assert validate_arguments({"b": True}, {"properties": {"b": {"type": "integer"}}}) == [
        "arguments.b: expected integer, got boolean true"
    ]


def test_authorization() -> None:
    reg = ToolRegistry([get_weather])
    ok = call("get_weather", {"city": "Paris"})
    assert not reg.dispatch(ok, authorize=lambda c: True).is_error
    assert not reg.dispatch(ok, authorize=lambda c: None).is_error
    denied = reg.dispatch(ok, authorize=lambda c: False)
    assert (denied.content, denied.error) == ("Tool call not authorized: get_weather.", "unauthorized")
    assert reg.dispatch(ok, authorize=lambda c: "Paris is off limits.").content == "Paris is off limits."

    def boom(c: ToolCall) -> bool:
        raise RuntimeError("policy server down")

    failed = reg.dispatch(ok, authorize=boom)  # fails closed
    assert failed.is_error and "policy server down" in failed.content
    # authorization sees validated arguments only: an invalid call never reaches it
    seen = []
    reg.dispatch(call("get_weather", {}), authorize=lambda c: seen.append(c) or True)
    assert seen == []


def test_handler_errors_and_results() -> None:
    def fails(x: int) -> None:
        raise KeyError("nope")

    def obj() -> object:
        return {"a": [1, "é"], "when": __import__("datetime").date(2026, 1, 2)}

    reg = ToolRegistry([fails, obj])
    r = reg.dispatch(call("fails", {"x": 1}))
    assert (r.content, r.is_error, r.error) == ("Error: KeyError: 'nope'", True, "raised")
    r = reg.dispatch(call("obj", {}))
    assert r.content == '{"a": [1, "é"], "when": "2026-01-02"}' and r.value["a"] == [1, "é"]
    assert r.to_message() == {"role": "tool", "tool_call_id": "call_1", "name": "obj", "content": r.content}


def test_async_handlers_and_adispatch() -> None:
    async def slow(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    reg = ToolRegistry([slow, get_weather])
    assert reg.dispatch(call("slow", {"n": 2})).content == "4"  # no loop running: asyncio.run

    async def main() -> list[str]:
        async def allow(c: ToolCall) -> bool:
            return c.name == "slow"

        a = await reg.adispatch(call("slow", {"n": 3}), authorize=allow)
        b = await reg.adispatch(call("get_weather", {"city": "Oslo"}), authorize=allow)
        c = await reg.adispatch(call("nope", {}))
        return [a.content, b.content, c.content]

    assert asyncio.run(main()) == [
        "6",
        "Tool call not authorized: get_weather.",
        "Tool not found: nope. Available tools: get_weather, slow.",
    ]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)
schemas = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object", 5]),
            "enum": st.lists(json_values, max_size=2) | st.integers(),
            "minimum": st.integers() | st.text(max_size=2),
            "pattern": st.sampled_from(["^a", "(", "[", "x+"]),
            "required": st.lists(st.text(max_size=2), max_size=2) | st.none() | st.integers(),
            "allOf": st.integers() | st.just([{"type": "string"}]),
        },
    ),
    lambda children: st.fixed_dictionaries(
        {},
        optional={
            "properties": st.dictionaries(st.text(max_size=2), children, max_size=2) | st.integers(),
            "items": children | st.text(max_size=2),
            "anyOf": st.lists(children, max_size=2),
            "additionalProperties": st.booleans() | children,
        },
    ),
    max_leaves=8,
)


@given(json_values, schemas)
def test_validation_and_dispatch_never_raise(value: object, schema: dict) -> None:
    errors = validate_arguments(value, schema)
    assert isinstance(errors, list) and all(isinstance(e, str) for e in errors)
    reg = ToolRegistry([{"name": "t", "parameters": schema}])
    reg.add({"name": "t", "parameters": schema}, handler=lambda **kw: kw)
    result = reg.dispatch(
        ToolCall.from_openai({"id": "c", "function": {"name": "t", "arguments": json.dumps(value)}})
    )
    assert isinstance(result.content, str)
    assert result.is_error == (not isinstance(value, dict) or bool(errors))
