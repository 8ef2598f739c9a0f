"""Differential tests of `chatparse.tools` against transformers 5.24.0.

`schema_types` / `coerce` are compared with `response_parser._schema_types` / `_coerce`, the tool
table with what `ResponseParser(tools=...)` builds, function schemas with
`transformers.utils.get_json_schema`, and `coerce_tool_calls` with `ResponseParser._coerce_tool_calls`.
The deliberate differences (D24, D18, hardening, no docstring requirement) have their own tests.
"""

from __future__ import annotations

import copy
import enum
import functools
import json
import typing
from typing import Any, Literal, Optional, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.utils import get_json_schema
from transformers.utils.chat_parsing import ResponseParser
from transformers.utils.chat_parsing.response_parser import _coerce, _schema_types

from chatparse.tools import build_tool_table, coerce, coerce_tool_calls, schema_types
from tests.core.equality import same

from ..support.build import docstring_examples, pure_only

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TEMPLATE = {"start_anchor": "S", "fields": {"content": {}}}


def reference_parser(tools: list[Any]) -> ResponseParser:
    return ResponseParser(TEMPLATE, prefix="", tools=tools)


# --------------------------------------------------------------------------------------------------
# schema_types

TYPE_NAMES = ["string", "integer", "number", "boolean", "null", "object", "array", "image", "custom"]
type_value = st.one_of(
    st.sampled_from(TYPE_NAMES),
    st.lists(st.one_of(st.sampled_from(TYPE_NAMES), st.integers(), st.none()), max_size=3),
    st.integers(),
    st.none(),
)
truthy_or_not = st.one_of(st.booleans(), st.none(), st.integers(0, 1), st.sampled_from(["", "yes"]))


def _schemas(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    union = st.one_of(
        st.lists(children, max_size=3),
        st.none(),
        st.just([]),
        st.dictionaries(st.text(max_size=2), children, max_size=2),
        st.text(max_size=3),
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "type": type_value,
            "anyOf": union,
            "oneOf": union,
            "nullable": truthy_or_not,
            "enum": st.just([1, 2]),
        },
    )


schemas = st.recursive(
    st.one_of(
        st.fixed_dictionaries({}, optional={"type": type_value, "nullable": truthy_or_not}),
        st.integers(),
        st.none(),
        st.text(max_size=3),
    ),
    _schemas,
    max_leaves=8,
)


@FAST
@given(schema=schemas)
def test_schema_types_matches_reference(schema: Any) -> None:
    assert schema_types(schema) == _schema_types(schema)


def test_schema_types_non_iterable_union_is_ignored() -> None:
    # Hardening: the reference iterates any truthy `anyOf`/`oneOf` and raises TypeError on a number.
    with pytest.raises(TypeError):
        _schema_types({"type": "integer", "anyOf": 5})
    assert schema_types({"type": "integer", "anyOf": 5, "oneOf": True, "nullable": True}) == (
        "integer",
        "null",
    )


# --------------------------------------------------------------------------------------------------
# coerce

RAW_EXAMPLES = [
    " 7 ",
    "7",
    "007",
    "-0",
    "1_000",
    "3.0",
    "3.5",
    "1e3",
    "1E3",
    "-1e-3",
    "2.0",
    "nan",
    "NaN",
    "inf",
    "-Infinity",
    "1e400",
    "true",
    " TRUE ",
    "True",
    "1",
    "0",
    "false",
    "yes",
    "null",
    " None ",
    "none",
    "",
    " ",
    '{"a": 1}',
    " [1, 2] ",
    "[]",
    "{}",
    '"str"',
    "{a: 1}",
    "[1,",
    "١٢",
    "٣.٥",
    "0x10",
    "+5",
    "9007199254740992",
    "9007199254740993",
    "-9007199254740993",
    "12345678901234567890",
    "1" * 400,
    "9007199254740993.0",
    "1.7976931348623157e308",
]
raw_strings = st.one_of(
    st.sampled_from(RAW_EXAMPLES),
    st.text(max_size=8),
    st.integers(-(2**70), 2**70).map(str),
    st.floats().map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.tuples(st.sampled_from(["", " ", "\n", "\u2003"]), st.sampled_from(RAW_EXAMPLES)).map(
        lambda t: t[0] + t[1] + t[0]
    ),
)
type_tuples = st.lists(st.sampled_from(TYPE_NAMES), max_size=4).map(tuple)


def _int_or_none(raw: str) -> int | None:
    try:
        return int(raw)
    except ValueError:
        return None


def assert_coerce_matches(raw: str, types: tuple[str, ...]) -> None:
    ours, theirs = coerce(raw, types), _coerce(raw, types)
    if same(ours, theirs):
        return
    # The only allowed difference is D24: `number` reached with an integer literal keeps it exact
    # where the reference rounds it (beyond 2**53) or gives up on it (beyond the float range).
    exact = _int_or_none(raw)
    assert "number" in types and exact is not None, (raw, types, ours, theirs)
    assert same(ours, exact), (raw, types, ours, theirs)


@settings(max_examples=500, deadline=None)
@given(raw=raw_strings, types=type_tuples)
def test_coerce_matches_reference(raw: str, types: tuple[str, ...]) -> None:
    assert_coerce_matches(raw, types)


@pytest.mark.parametrize("raw", RAW_EXAMPLES)
@pytest.mark.parametrize(
    "types",
    [
        ("integer",),
        ("number",),
        ("boolean",),
        ("null",),
        ("object",),
        ("array",),
        ("string", "integer"),
        ("number", "null", "boolean"),
    ],
)
def test_coerce_examples_match_reference(raw: str, types: tuple[str, ...]) -> None:
    assert_coerce_matches(raw, types)


def test_d24_number_keeps_integer_literals_exact() -> None:
    # D24: the reference converts `number` through float(), rounding integers beyond 2**53 and
    # leaving integers beyond the float range as strings.
    assert _coerce("9007199254740993", ("number",)) == 9007199254740992
    assert coerce("9007199254740993", ("number",)) == 9007199254740993
    assert coerce("-9007199254740993", ("number",)) == -9007199254740993
    assert coerce(" 12345678901234567890 ", ("number",)) == 12345678901234567890
    assert _coerce("1" * 400, ("number",)) == "1" * 400
    assert coerce("1" * 400, ("number",)) == int("1" * 400)
    # Non-integer literals still follow the reference rule.
    for raw in ("1e3", "2.0", "9007199254740993.0", "1e400", "nan", "3.5"):
        assert same(coerce(raw, ("number",)), _coerce(raw, ("number",)))
    # Beyond Python's int digit limit int() refuses: the float rule applies (infinite -> next type).
    assert coerce("1" * 5000, ("number",)) == "1" * 5000


def test_coerce_deeply_nested_json_is_not_an_error() -> None:
    # Hardening: json.loads raises RecursionError on deep nesting; the reference leaks it.
    raw = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        _coerce(raw, ("array",))
    assert coerce(raw, ("array", "integer")) == raw


# --------------------------------------------------------------------------------------------------
# build_tool_table from dicts

tool_names = st.sampled_from(["f", "get_weather", "g"])
properties = st.dictionaries(st.sampled_from(["a", "b", "city"]), schemas, max_size=3)
parameters = st.one_of(
    st.fixed_dictionaries({"type": st.just("object"), "properties": properties}),
    st.fixed_dictionaries(
        {}, optional={"properties": st.one_of(properties, st.none(), st.lists(st.integers()))}
    ),
    st.none(),
    st.text(max_size=2),
)
function_dicts = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(tool_names, st.integers(), st.none()),
        "parameters": parameters,
        "description": st.text(max_size=3),
    },
)
tool_dicts = st.one_of(
    st.fixed_dictionaries({"type": st.just("function"), "function": function_dicts}),
    function_dicts,
    st.fixed_dictionaries({"function": st.one_of(st.none(), st.text(max_size=2), st.integers())}),
    st.integers(),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@FAST
@given(tools=st.lists(tool_dicts, max_size=5))
def test_build_tool_table_matches_reference_for_dicts(tools: list[Any]) -> None:
    assert build_tool_table(tools) == reference_parser(tools)._tool_params


def test_build_tool_table_examples() -> None:
    tools: list[Any] = [
        {
            "type": "function",
            "function": {"name": "a", "parameters": {"properties": {"x": {"type": "integer"}}}},
        },
        {"name": "b", "parameters": {"type": "object", "properties": {"y": {"type": "number"}}}},
        {"name": "c"},
        {"name": "d", "parameters": {"properties": []}},
        {"type": "function", "function": {"name": 5}},
        "junk",
        None,
        {"name": "a", "parameters": {"properties": {"z": {"type": "boolean"}}}},  # replaces the first "a"
    ]
    table = build_tool_table(tools)
    assert table == reference_parser(tools)._tool_params
    assert table == {"a": {"z": {"type": "boolean"}}, "b": {"y": {"type": "number"}}, "c": {}, "d": {}}
    assert build_tool_table(None) == {} == build_tool_table([])


# --------------------------------------------------------------------------------------------------
# build_tool_table from Python functions


class Color(enum.Enum):
    RED = "red"
    ONE = 1


class Flag(enum.IntEnum):
    OFF = 0
    ON = 1


def scalars(s: str, i: int, f: float, b: bool, n: None, a: Any) -> None:
    """Scalars.

    Args:
        s: a
        i: a
        f: a
        b: a
        n: a
        a: a
    """


def containers(
    l1: list,
    l2: list[int],
    l3: typing.List[str],  # noqa: UP006
    d1: dict,
    d2: dict[str, float],
    t1: tuple,
    t2: tuple[int, str],
) -> dict:
    """Containers.

    Args:
        l1: a
        l2: a
        l3: a
        d1: a
        d2: a
        t1: a
        t2: a
    """
    return {}


def unions(
    o1: Optional[int],  # noqa: UP045
    o2: int | None,
    u1: Union[int, str],  # noqa: UP007
    u2: int | float | None,
    u3: list[int] | str,
    u4: Optional[list[dict[str, float]]] = None,  # noqa: UP045
    u5: list | tuple | None = None,
    u6: Any | None = None,
    u7: Literal["a", "b"] | None = None,
) -> str:
    """Unions.

    Args:
        o1: a
        o2: a
        u1: a
        u2: a
        u3: a
        u4: a
        u5: a
        u6: a
        u7: a
    """
    return ""


def literals_and_enums(
    l1: Literal["a", "b"], l2: Literal[1, "a", True, None], c: Color, fl: Flag, lc: list[Color]
) -> None:
    """Literals.

    Args:
        l1: a
        l2: a
        c: a
        fl: a
        lc: a
    """


def forward_refs(x: int, y: list[str] | None = None) -> bool:
    """Forward references.

    Args:
        x: a
        y: a
    """
    return True


def no_params() -> int:
    """Nothing."""
    return 1


def varargs(*args: int, **kwargs: str) -> None:
    """Varargs.

    Args:
        args: a
        kwargs: a
    """


class Toolbox:
    def method(self, q: str, limit: int = 10) -> list[str]:
        """Search.

        Args:
            q: a
            limit: a
        """
        return []

    @classmethod
    def klass(cls, when: float) -> None:
        """Class method.

        Args:
            when: a
        """

    @staticmethod
    def static(v: bool) -> None:
        """Static.

        Args:
            v: a
        """


FUNCTIONS: list[Any] = [
    scalars,
    containers,
    unions,
    literals_and_enums,
    forward_refs,
    no_params,
    varargs,
    Toolbox().method,
    Toolbox.klass,
    Toolbox.static,
]


def _strip_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_strip_descriptions(v) for v in schema]
    return schema


@pytest.mark.parametrize("func", FUNCTIONS, ids=lambda f: getattr(f, "__qualname__", repr(f)))
def test_build_tool_table_function_properties_match_get_json_schema(func: Any) -> None:
    name = func.__name__
    table = build_tool_table([func])
    expected = get_json_schema(func)["function"]["parameters"]["properties"]
    assert list(table) == [name]
    assert table[name] == _strip_descriptions(expected)
    assert list(table[name]) == list(expected)
    # What matters for coercion: the same declared types as the reference's table.
    reference_table = reference_parser([func])._tool_params
    assert {k: schema_types(v) for k, v in table[name].items()} == {
        k: _schema_types(v) for k, v in reference_table[name].items()
    }


def test_build_tool_table_function_examples() -> None:
    table = build_tool_table([unions])
    assert table["unions"]["o1"] == {"type": "integer", "nullable": True}
    assert table["unions"]["u2"] == {"type": ["integer", "number"], "nullable": True}
    assert table["unions"]["u3"] == {
        "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]
    }
    assert schema_types(table["unions"]["u4"]) == ("array", "null")


def test_build_tool_table_mixes_functions_and_dicts() -> None:
    tools: list[Any] = [scalars, {"name": "scalars", "parameters": {"properties": {}}}, Toolbox().method]
    assert build_tool_table(tools) == {
        "scalars": {},
        "method": build_tool_table([Toolbox().method])["method"],
    }


def test_non_function_callables_are_ignored_like_the_reference() -> None:
    class Callable_:
        def __call__(self, x: int) -> None: ...

    tools: list[Any] = [len, functools.partial(scalars, "s"), Callable_(), Toolbox]
    assert build_tool_table(tools) == reference_parser(tools)._tool_params == {}


def test_function_without_docstring_is_accepted() -> None:
    # Difference: transformers' get_json_schema requires a Google-style docstring describing every
    # argument; the types alone are enough for coercion, so chatparse does not.
    def undocumented(x: int, y: list[float] | None = None) -> None:
        pass

    with pytest.raises(Exception, match="no docstring"):
        reference_parser([undocumented])
    assert build_tool_table([lambda: None]) == {"<lambda>": {}}
    assert build_tool_table([undocumented]) == {
        "undocumented": {
            "x": {"type": "integer"},
            "y": {"type": "array", "items": {"type": "number"}, "nullable": True},
        }
    }


class Custom:
    pass


class EmptyEnum(enum.Enum):
    pass


def missing_hint(x, y: int) -> None:  # type: ignore[no-untyped-def]
    """Missing.

    Args:
        x: a
        y: a
    """


def custom_class(x: Custom) -> None:
    """Custom.

    Args:
        x: a
    """


def single_tuple(x: tuple[int]) -> None:
    """Tuple.

    Args:
        x: a
    """


def ellipsis_tuple(x: tuple[int, ...]) -> None:
    """Tuple.

    Args:
        x: a
    """


def bad_literal(x: Literal[Color.RED]) -> None:
    """Literal.

    Args:
        x: a
    """


def empty_enum(x: EmptyEnum) -> None:
    """Enum.

    Args:
        x: a
    """


def unresolvable(x: Nope) -> None:  # type: ignore[name-defined]  # noqa: F821
    """Unresolvable.

    Args:
        x: a
    """


@pytest.mark.parametrize(
    "func",
    [missing_hint, custom_class, single_tuple, ellipsis_tuple, bad_literal, empty_enum, unresolvable],
    ids=lambda f: f.__name__,
)
def test_function_without_a_schema_is_value_error(func: Any) -> None:
    # The reference raises TypeHintParsingException / NameError; chatparse a ValueError naming the function.
    with pytest.raises(Exception):  # noqa: B017
        reference_parser([func])
    with pytest.raises(
        ValueError, match=f"Cannot build a JSON schema for the tool function '{func.__name__}'"
    ):
        build_tool_table([func])


def test_unconvertible_return_hint_is_ignored() -> None:
    def returns_custom(x: int) -> Custom:
        """Returns custom.

        Args:
            x: a
        """
        return Custom()

    reference_table = reference_parser([returns_custom])._tool_params
    assert (
        build_tool_table([returns_custom])
        == _strip_descriptions(reference_table)
        == {"returns_custom": {"x": {"type": "integer"}}}
    )


# --------------------------------------------------------------------------------------------------
# coerce_tool_calls

TABLE_TOOLS: list[Any] = [
    {
        "name": "f",
        "parameters": {
            "properties": {
                "n": {"type": "integer"},
                "x": {"type": "number"},
                "flag": {"type": ["boolean", "null"]},
                "obj": {"type": "object"},
                "arr": {"type": "array"},
                "s": {"type": "string"},
                "u": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "none": {},
            }
        },
    },
    {"name": "g", "parameters": {"properties": {}}},
    {
        "name": "h",
        "parameters": {
            "properties": {"n": {"type": "number"}, "tags": {"type": "array", "items": {"type": "integer"}}}
        },
    },
]
ARG_KEYS = ["n", "x", "flag", "obj", "arr", "s", "u", "none", "tags", "other"]
arg_values = st.one_of(
    st.sampled_from(RAW_EXAMPLES),
    st.lists(st.one_of(st.sampled_from(RAW_EXAMPLES), st.integers(), st.none()), max_size=3),
    st.integers(),
    st.none(),
    st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2),
)
calls = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["f", "g", "h", "unknown"]),
                    "arguments": st.dictionaries(st.sampled_from(ARG_KEYS), arg_values, max_size=5),
                }
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "function": st.one_of(
                st.none(),
                st.text(max_size=2),
                st.fixed_dictionaries({"name": st.integers(), "arguments": st.just({})}),
            )
        }
    ),
    st.fixed_dictionaries(
        {"function": st.fixed_dictionaries({"name": st.just("f"), "arguments": st.text(max_size=3)})}
    ),
    st.text(max_size=3),
    st.integers(),
)
values = st.recursive(calls, lambda c: st.lists(c, max_size=3), max_leaves=6)


def _avoid_d24(value: Any) -> bool:
    """True when no string argument could hit D24 (integer literal not exact as a float)."""
    text = json.dumps(value)
    return not any(raw in text for raw in ("9007199254740993", "12345678901234567890", "1" * 400))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=values)
def test_coerce_tool_calls_matches_reference(value: Any) -> None:
    parser = reference_parser(TABLE_TOOLS)
    table = build_tool_table(TABLE_TOOLS)
    before = copy.deepcopy(value)
    ours = coerce_tool_calls(value, table)
    assert same(value, before)  # D18: the input is not mutated
    theirs = parser._coerce_tool_calls(copy.deepcopy(value))
    if _avoid_d24(value):
        assert same(ours, theirs)


def test_d18_coerce_tool_calls_does_not_mutate() -> None:
    # D18: the reference casts the arguments dict in place; chatparse returns new objects.
    table = build_tool_table(TABLE_TOOLS)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": {"n": "5", "s": "5", "arr": ["1"]}},
    }
    untouched = {"type": "function", "function": {"name": "f", "arguments": {"s": "x", "n": 3}}}
    value = [call, untouched, [call], "text"]
    snapshot = copy.deepcopy(value)

    theirs_input = copy.deepcopy(value)
    reference_parser(TABLE_TOOLS)._coerce_tool_calls(theirs_input)
    assert theirs_input[0]["function"]["arguments"]["n"] == 5  # the reference mutated its input

    out = coerce_tool_calls(value, table)
    assert value == snapshot
    assert out == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "f", "arguments": {"n": 5, "s": "5", "arr": ["1"]}},
        },
        untouched,
        [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "f", "arguments": {"n": 5, "s": "5", "arr": ["1"]}},
            }
        ],
        "text",
    ]
    assert out[0] is not call and out[0]["function"] is not call["function"]
    assert out[0]["function"]["arguments"] is not call["function"]["arguments"]
    # Unchanged parts are shared, not copied.
    assert out[1] is untouched and out[3] == "text"
    assert out[0]["function"]["arguments"]["arr"] is call["function"]["arguments"]["arr"]
    unchanged = [untouched, [untouched]]
    assert coerce_tool_calls(unchanged, table) is unchanged


def test_coerce_tool_calls_merge_duplicates_lists() -> None:
    table = build_tool_table(TABLE_TOOLS)
    call = {"function": {"name": "h", "arguments": {"n": ["1", "2.5", 3, "x"], "tags": ["1", "2"]}}}
    out = coerce_tool_calls(call, table)
    assert out == {"function": {"name": "h", "arguments": {"n": [1, 2.5, 3, "x"], "tags": ["1", "2"]}}}
    assert call["function"]["arguments"]["n"] == ["1", "2.5", 3, "x"]


def test_coerce_tool_calls_deeply_nested_lists() -> None:
    table = build_tool_table(TABLE_TOOLS)
    call = {"function": {"name": "f", "arguments": {"n": "1"}}}
    value: Any = [call]
    for _ in range(5000):
        value = [value]
    out = coerce_tool_calls(value, table)
    for _ in range(5001):
        out = out[0]
    assert out == {"function": {"name": "f", "arguments": {"n": 1}}}


def test_coerce_tool_calls_empty_table_is_identity() -> None:
    value = [{"function": {"name": "f", "arguments": {"n": "1"}}}]
    assert coerce_tool_calls(value, {}) is value


def test_docstring_examples() -> None:
    import chatparse.tools

    result = docstring_examples(chatparse.tools)
    assert result.attempted > 0 and result.failed == 0


@pure_only
def test_text_of_parameters_that_cannot_cast_is_not_coerced(monkeypatch: pytest.MonkeyPatch) -> None:
    # `coerce` keeps the text of `string` and unknown types: coercing a call does not ask it for
    # them (one call per string argument was most of the coercion's cost on call-dense output).
    from chatparse import tools as tools_module

    asked: list[Any] = []
    original = tools_module.coerce

    def counted(raw: str, types: tuple[str, ...]) -> Any:
        asked.append((raw, types))
        return original(raw, types)

    monkeypatch.setattr(tools_module, "coerce", counted)
    table = tools_module.build_tool_table(
        [
            {
                "name": "f",
                "parameters": {
                    "properties": {
                        "city": {"type": "string"},
                        "note": {"type": "x-unknown"},
                        "days": {"type": "integer"},
                        "either": {"type": ["string", "integer"]},
                    }
                },
            }
        ]
    )
    call = {"function": {"name": "f", "arguments": {"city": "7", "note": "1", "days": "3", "either": "4"}}}
    got = tools_module.coerce_tool_calls(call, table)
    assert got["function"]["arguments"] == {"city": "7", "note": "1", "days": 3, "either": 4}
    assert sorted(raw for raw, _ in asked) == ["3", "4"]
