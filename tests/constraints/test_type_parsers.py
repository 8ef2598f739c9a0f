"""xml-inline `type_parsers`: the tag's type group chooses the value's parser, so the grammar writes
each type text with a value in the form that parser reads (GigaChat 3.5, K2 Horizon)."""

from __future__ import annotations

from typing import Any

import pytest

from chatparse import catalog, constraints, parse_response

from . import engines as E

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}, "utc": {"type": "boolean"}},
                "required": ["timezone"],
            },
        },
    }
]


def _gcml(params: str) -> str:
    return (
        '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_time">\n'
        + params
        + "\n</｜GCML｜invoke>\n</｜GCML｜tool_calls>"
    )


def _p(name: str, string: str, value: str) -> str:
    return f'<｜GCML｜parameter name="{name}" string="{string}">{value}</｜GCML｜parameter>'


def _k2(params: str) -> str:
    return (
        "ok\n</ifm|think>\n<ifm|tool_calls>\n<ifm|tool_call>get_time\n"
        + params
        + "</ifm|tool_call>\n</ifm|tool_calls>"
    )


def _kv(key: str, value: str, typ: str | None = None) -> str:
    t = "" if typ is None else f"<ifm|arg_type>{typ}</ifm|arg_type>"
    return f"<ifm|arg_key>{key}</ifm|arg_key>\n{t}<ifm|arg_value>{value}</ifm|arg_value>\n"


CASES = [
    # (template, output, accepted, why)
    ("gigachat35", _gcml(_p("timezone", "true", "false")), True, "a string written as a string"),
    ("gigachat35", _gcml(_p("timezone", "false", '"UTC"')), True, "a string written as JSON"),
    ("gigachat35", _gcml(_p("timezone", "false", "false")), False, "string=false reads JSON: a boolean"),
    (
        "gigachat35",
        _gcml(_p("timezone", "true", "UTC") + "\n" + _p("utc", "false", "true")),
        True,
        "JSON bool",
    ),
    (
        "gigachat35",
        _gcml(_p("timezone", "true", "UTC") + "\n" + _p("utc", "false", "yes")),
        False,
        "not a bool",
    ),
    ("k2_horizon", _k2(_kv("timezone", "UTC", "string")), True, "typed string"),
    ("k2_horizon", _k2(_kv("timezone", "UTC")), True, "untyped: raw text"),
    ("k2_horizon", _k2(_kv("timezone", "UTC", "integer")), False, "a type the schema does not have"),
    ("k2_horizon", _k2(_kv("timezone", "UTC") + _kv("utc", "false", "boolean")), True, "typed boolean"),
    (
        "k2_horizon",
        _k2(_kv("timezone", "UTC") + _kv("utc", "false", "string")),
        False,
        "bool typed as string",
    ),
]


def _forms(c: constraints.Constraint) -> list[tuple[str, Any]]:
    return [
        ("gbnf", lambda t: E.xg_accepts(E.xg_compile(c, "gbnf"), t)),
        ("structural-tag", lambda t: E.xg_accepts(E.xg_compile(c, "structural-tag"), t)),
        ("lark", lambda t: E.llg_accepts(c.lark(), t)),
    ]


@pytest.mark.parametrize(("name", "text", "ok", "why"), CASES)
def test_type_group_is_tied_to_the_schema(name: str, text: str, ok: bool, why: str) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    prompt = str(catalog.describe(name)["generation_prompt"])
    c = constraints.derive(name, TOOLS, tool_choice="required", prefix=prompt)
    for label, accepts in _forms(c):
        assert accepts(text) == ok, (label, why, text)
    if ok:  # and what it accepts parses into a schema-valid call
        calls = parse_response(text, catalog.get(name), prefix=prompt, tools=TOOLS)["tool_calls"]
        assert [x["function"]["name"] for x in calls] == ["get_time"]


def test_step3_text_values_are_stripped_raw_text() -> None:
    """Step 3 reads values with the `text` parser (stripped raw text): a value written with edge
    whitespace is still the schema's string; a length bound, which stripping could break, is refused."""
    E.need("xgrammar")
    prompt = str(catalog.describe("step3")["generation_prompt"])
    c = constraints.derive("step3", TOOLS, tool_choice="required", prefix=prompt)
    text = (
        c.sample_lead + '<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_time">'
        '<steptml:parameter name="timezone">  Asia/Tokyo \n</steptml:parameter></steptml:invoke>'
        "<｜tool_call_end｜><｜tool_calls_end｜>"
    )
    assert E.xg_accepts(E.xg_compile(c, "gbnf"), text)
    calls = parse_response(text, catalog.get("step3"), prefix=prompt, tools=TOOLS)["tool_calls"]
    assert calls[0]["function"]["arguments"] == {"timezone": "Asia/Tokyo"}
    bounded = [
        {
            **TOOLS[0],
            "function": {
                **TOOLS[0]["function"],
                "parameters": {
                    "type": "object",
                    "properties": {"timezone": {"type": "string", "minLength": 3}},
                },
            },
        }
    ]
    with pytest.raises(constraints.ConstraintError, match="timezone.*strips"):
        constraints.derive("step3", bounded, tool_choice="required", prefix=prompt)
