"""Markers quoted in free text and in values, where the parser does not read them as markers
(round 5): Hunyuan A13B reasoning quoting `<tool_calls>`, MiniCPM 5's two value forms (CDATA and
bare), and the GLM forced-call opener that must keep the no-argument call's closer readable.
Every form is checked on XGrammar (GBNF and structural tag) and llguidance (Lark), and every
accepted text is parsed back with the template into exactly the calls it was written with."""

from __future__ import annotations

import re
from typing import Any

import pytest

from chatparse import catalog, constraints, load_response_template, parse_response
from chatparse.constraints._grammar import _gbnf

from . import engines as E
from .test_lookarounds import WEATHER

SEND = {
    "type": "function",
    "function": {
        "name": "send",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["a", "b"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string"}},
            "required": ["timezone"],
        },
    },
}


def _accepts(c: constraints.Constraint, text: str) -> bool:
    got = {
        E.xg_accepts(E.xg_compile(c, "gbnf"), text),
        E.xg_accepts(E.xg_compile(c, "structural-tag"), text),
        E.llg_accepts(c.lark(), text),
    }
    assert len(got) == 1, (text, got)  # the three renderings agree
    return got.pop()


def _calls(name: str, text: str, prefix: str, tools: list[Any]) -> list[tuple[str, Any]]:
    msg = parse_response(text, load_response_template(catalog.get(name)), prefix=prefix, tools=tools)
    return [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]


MINICPM_PREFIX = "<|im_start|>assistant\n"


def _minicpm(a: str, b: str) -> str:
    return f'<function name="send"><param name="a">{a}</param><param name="b">{b}</param></function>'


# (value of `a` as written, value the parser reads, accepted?)
MINICPM_VALUES = [
    (
        "<![CDATA[use </param> and </function> or <function name= here]]>",
        "use </param> and </function> or <function name= here",
        True,
    ),
    ("<![CDATA[a ]]> inside]]>", "a ]]> inside", True),
    ("<![CD", "<![CD", True),  # a prefix of the CDATA opener is a bare value
    ("plain text", "plain text", True),
    # bare, starting with the CDATA opener: the regex tries the CDATA form first, which reads on
    # into the next tag where a `]]></param>` follows (the call would lose `b`)
    ("<![CDATA[x", None, False),
    ("use </param> bare", None, False),  # a bare value ends at its first `</param>`
    ("<![CDATA[x]]></param> more]]>", None, False),  # the CDATA form ends at its first `]]></param>`
]


@pytest.mark.parametrize("written,read,ok", MINICPM_VALUES)
def test_minicpm5_value_forms(written: str, read: str | None, ok: bool) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    c = constraints.derive("minicpm5", [SEND], prefix=MINICPM_PREFIX)
    for b in ("y", "<![CDATA[y]]>"):
        text = _minicpm(written, b)
        assert _accepts(c, text) is ok, text
        if ok:
            assert _calls("minicpm5", text, MINICPM_PREFIX, [SEND]) == [("send", {"a": read, "b": "y"})]


def test_minicpm5_a_bare_cdata_opener_would_lose_the_next_parameter() -> None:
    """Why the bare form may not start with `<![CDATA[`: the parser reads the call below as one
    parameter (round 4's grammar accepted it, a call without its required `b`)."""
    text = _minicpm("<![CDATA[x", "<![CDATA[y]]>")
    assert _calls("minicpm5", text, MINICPM_PREFIX, [SEND]) == [
        ("send", {"a": 'x</param><param name="b"><![CDATA[y'})
    ]


HUNYUAN_CALL = '<tool_calls>[{"name": "get_time", "arguments": {"timezone": "UTC"}}]</tool_calls>'


@pytest.mark.parametrize(
    "reasoning,ok",
    [
        ("I would put it in a <tool_calls> block.", True),
        ("quote <tool_calls> then text [ later", True),
        ("<tool_calls>", True),  # at the end of the reasoning, before `</think>`
        ("a call <tool_calls>[ here", False),  # `(?=<tool_calls>\s{0,16}\[)` closes the reasoning
        ("a call <tool_calls>\n  [ here", False),
    ],
)
def test_hunyuan_reasoning_quotes_the_call_marker(reasoning: str, ok: bool) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    c = constraints.derive("hunyuan_a13b", [TIME], prefix="")
    text = f"<think>\n{reasoning}\n</think>\n<answer>\n{HUNYUAN_CALL}\n</answer>"
    assert _accepts(c, text) is ok, text
    if ok:
        msg = parse_response(
            text, load_response_template(catalog.get("hunyuan_a13b")), prefix="", tools=[TIME]
        )
        assert msg["reasoning_content"].strip() == reasoning
        assert _calls("hunyuan_a13b", text, "", [TIME]) == [("get_time", {"timezone": "UTC"})]


def test_glm_call_closing_reasoning_keeps_the_no_argument_opener_tight() -> None:
    """GLM's closer reads `(?<=<tool_call>[^<\\s]+...)</tool_call>` for a call without arguments:
    a gap after `<tool_call>` leaves the call open (the parser then reads the next call's
    arguments into it). The opener of a call that closes the reasoning was re-emitted with a
    16-character gap, past the cap the call was built with; found by the grammar-sampling test."""
    E.need("xgrammar")
    E.need("llguidance")
    alarms = {
        "type": "function",
        "function": {"name": "list_alarms", "parameters": {"type": "object", "properties": {}}},
    }
    weather = WEATHER
    prefix = str(catalog.describe("glm")["generation_prompt"])
    c = constraints.derive("glm", [weather, alarms], tool_choice="required", prefix=prefix, max_whitespace=3)
    bad = (
        "<think><tool_call>\tlist_alarms</tool_call></think></think><tool_call>get_weather"
        "<arg_key>city</arg_key><arg_value></arg_value></tool_call>"
    )
    assert not _accepts(c, bad)
    good = "<think><tool_call>list_alarms</tool_call>"
    assert _accepts(c, good)
    assert _calls("glm", good, prefix, [weather, alarms]) == [("list_alarms", {})]


def _wide_class_sites(gbnf: str) -> int:
    return sum(
        1
        for cls in re.findall(r"\[(?:\\.|[^\]\\])*\]", gbnf)
        if cls.startswith("[^")  # a complemented class: most of Unicode
    )


@pytest.mark.parametrize("name", ["qwen3_xml", "glm", "minimax_m2", "qwen3"])
def test_wide_classes_are_shared_between_automaton_states(name: str) -> None:
    """XGrammar's compile costs about one pass over the vocabulary per place a wide class is read.
    The free-text and value automata have one state per position inside a marker, each with a wide
    edge back to the free state; the GBNF routes those through shared rules, so the number of
    places stays a small constant while the automata have dozens of states."""
    c = constraints.derive(name, [SEND, TIME], tool_choice="required")
    g = c._p["grammar"]
    states = sum(len(v) for v in g.automata.values())
    sites = _wide_class_sites(c.gbnf())
    plain = sum(_wide_class_sites(_gbnf(g.rules[s], None)) for v in g.automata.values() for s in v)
    assert sites < plain / 3, (name, sites, plain, states)


HARMONY_PREFIX = "<|start|>user<|message|>hi<|end|><|start|>assistant"
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
HARMONY_CALL = (
    '<|start|>assistant to=functions.search<|channel|>commentary<|constrain|>json<|message|>{"query": "v"}'
)


@pytest.mark.parametrize(
    "text,calls,content",
    [
        ("<|channel|>final<|message|>Hello", [], "Hello"),
        (
            "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Hello",
            [],
            "Hello",
        ),
        (
            "<|channel|>analysis<|message|>R<|end|>" + HARMONY_CALL + "<|call|><|start|>assistant"
            "<|channel|>final<|message|>Done",
            [("search", {"query": "v"})],
            "Done",
        ),
        # inside the open final message a call opener is text, for the parser as for the grammar
        ("<|channel|>final<|message|>Hello" + HARMONY_CALL, [], "Hello" + HARMONY_CALL),
    ],
)
def test_a_block_closed_by_a_stop_string_may_end_the_output(
    text: str, calls: list[Any], content: str
) -> None:
    """gpt-oss ends its final message with `<|return|>`, a stop string the engine leaves out: under
    `auto` the message may end the output unclosed (round 4 demanded `<|end|>` after it)."""
    E.need("xgrammar")
    E.need("llguidance")
    c = constraints.derive("gpt_oss", [SEARCH], prefix=HARMONY_PREFIX)
    assert _accepts(c, text)
    assert _calls("gpt_oss", text, HARMONY_PREFIX, [SEARCH]) == calls
    msg = parse_response(
        text, load_response_template(catalog.get("gpt_oss")), prefix=HARMONY_PREFIX, tools=[SEARCH]
    )
    assert msg["content"] == content
    # not where text is not allowed: the final message is text
    r = constraints.derive("gpt_oss", [SEARCH], prefix=HARMONY_PREFIX, tool_choice="required")
    assert not _accepts(r, text)


# --------------------------------------------------------------------------- reasoning the model writes


def _reasoning_templates() -> list[str]:
    out = []
    for name in catalog.names():
        t = load_response_template(catalog.get(name))
        f = next((t.fields[n] for n in ("reasoning_content", "reasoning", "thinking") if n in t.fields), None)
        if f is not None and f.opener is not None and f.closer is not None and "tool_calls" in t.fields:
            out.append(name)
    return out


@pytest.mark.parametrize("name", _reasoning_templates())
def test_reasoning_the_model_writes_is_in_the_grammar(name: str) -> None:
    # With reasoning on (or possible), a whole output that starts with the template's reasoning
    # block and then makes the forced call is accepted by every rendering and parses to that call.
    # (A reasoning opener written as a lookbehind-only form was once derived as "nothing": the
    # grammar for reasoning=True accepted no output at all.)
    from tests.core.test_linear import sample

    E.need("xgrammar")
    E.need("llguidance")
    t = load_response_template(catalog.get(name))
    f = next(t.fields[n] for n in ("reasoning_content", "reasoning", "thinking") if n in t.fields)
    opener = f.opener.literals[0] if f.opener.literals else sample(f.opener)
    closer = f.closer.literals[0] if f.closer.literals else sample(f.closer)
    if not opener or not closer:
        pytest.skip("no literal sample of the reasoning delimiters")
    for reasoning in (True, None):
        try:
            c = constraints.derive(name, [TIME], tool_choice="required", reasoning=reasoning)
        except constraints.ConstraintError as e:
            pytest.skip(f"no constraint for this template: {e}")
        call = c.sample_calls[0]
        text = opener + "The user wants the time." + closer + call
        if not _calls(name, text, "", [TIME]):
            pytest.skip("the template does not read a call right after its reasoning block")
        assert _accepts(c, text), (reasoning, text)
