"""chatparse.constraints: derivation over the whole catalog, engine compilation and acceptance.

Engines are real: XGrammar's `GrammarCompiler` / `GrammarMatcher` (fed byte by byte) for the GBNF
grammar and the structural tag, llguidance's `LLMatcher` for the Lark grammar. Without them the
engine tests skip; `CHATPARSE_REQUIRE_CONSTRAINTS=1` (the CI step) turns those skips into failures.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from chatparse import catalog, constraints, load_response_template, parse_response
from chatparse.constraints import ConstraintError
from chatparse.openai._calls import calls_from_value

from . import engines as E
from .strings import grammar_strings

# Templates whose call syntax the derivation cannot express exactly (checked below: they raise).
UNSUPPORTED: dict[str, str] = {
    "muse_glimmer": "the argument tag_pattern uses word-boundary assertions (`\\b`) between its "
    "parts, which the grammar does not write (the opener's negative lookahead on the recipient is "
    "written as a word exclusion)",
    # catalog round 3 (landed 16:15): content features the derivation does not write yet
}
NO_TOOLS = {"deepseek_r1_distill", "lfm2_math"}  # templates without a tool_calls field

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
NESTED = {
    "type": "function",
    "function": {
        "name": "create_event",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "attendees": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"email": {"type": "string"}, "optional": {"type": "boolean"}},
                        "required": ["email"],
                    },
                },
                "where": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                },
                "note": {"type": ["string", "null"]},
            },
            "required": ["title", "attendees"],
        },
    },
}
UNICODE = {
    "type": "function",
    "function": {
        "name": "météo_日本",
        "parameters": {"type": "object", "properties": {"ville": {"type": "string"}}, "required": ["ville"]},
    },
}
NOARGS = {
    "type": "function",
    "function": {"name": "list_alarms", "parameters": {"type": "object", "properties": {}}},
}
TOOL_SETS = {"weather": [WEATHER], "mixed": [WEATHER, NESTED, NOARGS], "unicode": [UNICODE, NOARGS]}


def tool_templates() -> list[str]:
    return [n for n in catalog.names() if n not in NO_TOOLS]


def prompt(name: str) -> str:
    return str(catalog.describe(name)["generation_prompt"])


def derive_or_skip_schema(name: str, tools: list[Any], **kw: Any) -> constraints.Constraint:
    try:
        return constraints.derive(name, tools, prefix=prompt(name), **kw)
    except ConstraintError as e:
        if name in UNSUPPORTED:
            pytest.skip(f"{name}: unsupported ({UNSUPPORTED[name]})")
        # A schema feature a text format cannot carry exactly is a documented, named refusal.
        if "tool '" in str(e) and ("cannot" in str(e)):
            pytest.skip(str(e))
        raise


# --------------------------------------------------------------------------- pure derivation


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_templates_raise_naming_the_field(name: str) -> None:
    with pytest.raises(ConstraintError, match="Field 'tool_calls'"):
        constraints.derive(name, [WEATHER], prefix=prompt(name))


@pytest.mark.parametrize("name", sorted(NO_TOOLS))
def test_templates_without_tool_field(name: str) -> None:
    with pytest.raises(ConstraintError, match="no 'tool_calls' field"):
        constraints.derive(name, [WEATHER], tool_choice="required")
    c = constraints.derive(name, [], tool_choice="none", prefix=prompt(name))
    assert c.gbnf().startswith("root ::=")


@pytest.mark.parametrize("name", tool_templates())
@pytest.mark.parametrize("tools", sorted(TOOL_SETS))
@pytest.mark.parametrize("choice", ["auto", "required", "named", "none"])
def test_every_catalog_template_derives(name: str, tools: str, choice: str) -> None:
    if name in UNSUPPORTED:
        pytest.skip(UNSUPPORTED[name])
    ts = TOOL_SETS[tools]
    tc: Any = (
        {"type": "function", "function": {"name": ts[0]["function"]["name"]}} if choice == "named" else choice
    )
    try:
        c = constraints.derive(name, ts, tool_choice=tc, prefix=prompt(name))
    except ConstraintError as e:
        msg = str(e)
        # the only refusals allowed here name the tool and the schema keyword / value
        assert "tool '" in msg and "cannot" in msg, msg
        return
    assert c.gbnf().startswith("root ::=")
    assert c.lark().startswith("start:")
    assert c.structural_tag()["type"] == "structural_tag"
    for sample in c.sample_calls:
        msg = parse_response(c.sample_lead + sample, c.template, prefix=prompt(name), tools=ts)
        assert msg.get("tool_calls"), sample


def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(ConstraintError, match="not among the offered tools"):
        constraints.derive("qwen3", [WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(ConstraintError, match="needs at least one tool"):
        constraints.derive("qwen3", [], tool_choice="required")
    bad = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
        },
    }
    with pytest.raises(ConstraintError, match="'minimum'"):
        constraints.derive("qwen3", [bad])
    with pytest.raises(ConstraintError, match="no JSON schema is exact"):
        constraints.derive("qwen3", [WEATHER], tool_choice="required").json_schema()


def test_json_schema_where_exact() -> None:
    # Granite 3.0 writes a bare JSON list at the start of the reply: the whole output is JSON.
    c = constraints.derive("granite30", [WEATHER], tool_choice="required", prefix=prompt("granite30"))
    schema = c.json_schema()
    assert schema["type"] == "array" and schema["minItems"] == 1
    assert c.ollama_format() == schema


def test_cache_returns_same_object() -> None:
    a = constraints.derive("qwen3", [WEATHER], tool_choice="required")
    b = constraints.derive("qwen3", [WEATHER], tool_choice="required")
    assert a is b


def test_cache_keys_on_what_the_prompt_leaves_open() -> None:
    """Prompts that differ only before the last start anchor share one constraint (the server
    derives per request, with the rendered prompt as prefix); a different open region does not."""
    head = "<|im_start|>assistant\n"
    one = "<|im_start|>user\nhi<|im_end|>\n" + head + "<think>\n"
    two = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nyo<|im_end|>\n" + head + "<think>\n"
    a = constraints.derive("qwen3", [WEATHER], tool_choice="required", prefix=one)
    b = constraints.derive("qwen3", [WEATHER], tool_choice="required", prefix=two)
    assert a is b
    closed = constraints.derive("qwen3", [WEATHER], tool_choice="required", prefix=head)
    assert closed is not a and closed.sample_lead == "" and a.sample_lead.startswith("</think>")


# --------------------------------------------------------------------------- random strings of the grammar


def _valid(value: Any, schema: Any) -> bool:
    if not isinstance(schema, dict) or not schema:
        return True
    if "enum" in schema:
        return value in schema["enum"]
    if "anyOf" in schema:
        return any(_valid(value, s) for s in schema["anyOf"])
    t = schema.get("type")
    types = t if isinstance(t, list) else [t] if t else []
    if not types:
        return True
    for ty in types:
        if ty == "string" and isinstance(value, str):
            return True
        if ty == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if ty == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if ty == "boolean" and isinstance(value, bool):
            return True
        if ty == "null" and value is None:
            return True
        if ty == "array" and isinstance(value, list):
            return all(_valid(v, schema.get("items", {})) for v in value)
        if ty == "object" and isinstance(value, dict):
            props = schema.get("properties")
            if props is None:
                return True
            if set(value) - set(props) or any(r not in value for r in schema.get("required", [])):
                return False
            return all(_valid(v, props[k]) for k, v in value.items())
    return False


def check_parse(
    c: Any, name: str, text: str, tools: list[Any], lo: int, hi: int | None, prefix: str | None = None
) -> None:
    """`text` parses, with `c`'s template (a Constraint or a Template), into between `lo` and `hi`
    calls to `tools`, each valid for its schema (after the prompt `prefix`, default the catalog's)."""
    template = c.template if isinstance(c, constraints.Constraint) else c
    msg = parse_response(text, template, prefix=prompt(name) if prefix is None else prefix, tools=tools)
    value = msg.get("tool_calls")
    items = value if isinstance(value, list) else ([] if value is None else [value])
    flat: list[Any] = []
    for it in items:
        flat.extend(it if isinstance(it, list) else [it])
    got = calls_from_value(flat) if flat else []
    assert lo <= len(got) and (hi is None or len(got) <= hi), (text, got)
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    for call, err in got:
        assert err is None and call is not None, (text, err)
        assert call["name"] in by_name, (text, call)
        assert _valid(call["arguments"], by_name[call["name"]]), (text, call)


def _derive_for_strings(name: str, choice: str) -> constraints.Constraint | None:
    kw: dict[str, Any] = {"tool_choice": "auto" if choice == "auto" else "required"}
    if choice == "single":
        kw["parallel_tool_calls"] = False
    try:
        return constraints.derive(name, STRING_TOOLS, prefix=prompt(name), max_whitespace=3, **kw)
    except ConstraintError:
        return None


STRING_TOOLS = [WEATHER, NESTED, NOARGS]


@pytest.mark.parametrize("name", tool_templates())
@pytest.mark.parametrize("choice", ["auto", "required", "single"])
def test_strings_of_the_grammar_parse_into_valid_calls(name: str, choice: str) -> None:
    """Hypothesis draws strings of the grammar choice by choice (failures shrink to short strings)."""
    if name in UNSUPPORTED:
        pytest.skip(UNSUPPORTED[name])
    c = _derive_for_strings(name, choice)
    if c is None:
        pytest.skip("a schema feature this format cannot carry exactly")
    lo, hi = (0 if choice == "auto" else 1), (1 if choice == "single" else None)

    engines = E.available()
    xg = E.xg_compile(c, "gbnf") if "xgrammar" in engines else None

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(text=grammar_strings(c))
    def run(text: str) -> None:
        check_parse(c, name, text, STRING_TOOLS, lo, hi)
        # the renderings hold the same language as the grammar the strings were drawn from
        if xg is not None:
            assert E.xg_accepts(xg, text), ("xgrammar", text)
        if "llguidance" in engines:
            assert E.llg_accepts(c.lark(), text), ("llguidance", text)

    run()


# --------------------------------------------------------------------------- engines: compile everything


@pytest.mark.parametrize("name", tool_templates())
@pytest.mark.parametrize("tools", sorted(TOOL_SETS))
@pytest.mark.parametrize("choice", ["auto", "required", "single"])
def test_xgrammar_and_llguidance_compile_every_form(name: str, tools: str, choice: str) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    if name in UNSUPPORTED:
        pytest.skip(UNSUPPORTED[name])
    kw: dict[str, Any] = {
        "tool_choice": "auto" if choice == "auto" else "required",
        "parallel_tool_calls": choice != "single",
    }
    try:
        c = constraints.derive(name, TOOL_SETS[tools], prefix=prompt(name), **kw)
    except ConstraintError as e:
        assert "tool '" in str(e), str(e)
        return
    E.xg_compile(c, "gbnf")
    E.xg_compile(c, "structural-tag")
    E.llg_matcher(c.lark())


# --------------------------------------------------------------------------- engines: acceptance and rejection


def _full(name: str, c: constraints.Constraint, calls: str) -> str:
    """A whole output around `calls`: the reasoning a template requires first, then the calls."""
    if name == "ernie":
        return "ok</think>" + calls
    return c.sample_lead + calls


def _forms(c: constraints.Constraint) -> list[tuple[str, Any]]:
    return [
        ("gbnf", lambda t: E.xg_accepts(E.xg_compile(c, "gbnf"), t)),
        ("structural-tag", lambda t: E.xg_accepts(E.xg_compile(c, "structural-tag"), t)),
        ("lark", lambda t: E.llg_accepts(c.lark(), t)),
    ]


@pytest.mark.parametrize("name", tool_templates())
def test_acceptance_and_rejection(name: str) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    if name in UNSUPPORTED:
        pytest.skip(UNSUPPORTED[name])
    tools = [WEATHER, NOARGS]
    auto = derive_or_skip_schema(name, tools)
    req = derive_or_skip_schema(name, tools, tool_choice="required")
    single = derive_or_skip_schema(name, tools, tool_choice="required", parallel_tool_calls=False)
    other = derive_or_skip_schema(
        name,
        [
            {
                "type": "function",
                "function": {"name": "other_tool", "parameters": {"type": "object", "properties": {}}},
            }
        ],
    )
    weather = next(s for s in auto.sample_calls if "get_weather" in s)
    good = _full(name, auto, weather)
    for label, accepts in _forms(auto):
        assert accepts(good), (label, good)
    for label, accepts in _forms(req):
        assert accepts(good), (label, good)
        assert not accepts(_full(name, req, "")), (label, "required accepted no call")
    # an unoffered tool
    bad_name = _full(name, other, next(s for s in other.sample_calls))
    for label, accepts in _forms(auto):
        assert not accepts(bad_name), (label, bad_name)
    # a second call under parallel_tool_calls=false (where the template can write two)
    two = _full(name, single, weather + weather)
    if len(_calls(name, two, tools)) == 2:
        for label, accepts in _forms(single):
            assert not accepts(two), (label, two)


def _calls(name: str, text: str, tools: list[Any]) -> list[Any]:
    try:
        msg = parse_response(text, catalog.get(name), prefix=prompt(name), tools=tools)
    except ValueError:
        return []
    v = msg.get("tool_calls") or []
    flat: list[Any] = []
    for it in v if isinstance(v, list) else [v]:
        flat.extend(it if isinstance(it, list) else [it])
    return flat


WRONG = [
    ("qwen3", '<tool_call>{"name": "get_weather", "arguments": {"days": 3}}</tool_call>', "missing required"),
    ("qwen3", '<tool_call>{"name": "get_weather", "arguments": {"city": 3}}</tool_call>', "wrong type"),
    (
        "qwen3",
        '<tool_call>{"name": "get_weather", "arguments": {"city": "x", "unit": "kelvin"}}</tool_call>',
        "enum",
    ),
    ("qwen3", '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>', "unoffered"),
    ("gemma4", "<|tool_call>call:get_weather{days:3}<tool_call|>", "missing required"),
    ("gemma4", "<|tool_call>call:get_weather{city:3}<tool_call|>", "wrong type"),
    (
        "qwen3_xml",
        "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
        "wrong type",
    ),
    (
        "glm",
        "<tool_call>get_weather<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
        "missing required",
    ),
    ("mistral_v13", '[TOOL_CALLS]get_weather[ARGS]{"city": true}', "wrong type"),
    (
        "deepseek_v31",
        "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
        "missing required",
    ),
]


@pytest.mark.parametrize(("name", "text", "why"), WRONG)
def test_invalid_calls_rejected(name: str, text: str, why: str) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    c = constraints.derive(name, [WEATHER], prefix=prompt(name))
    for label, accepts in _forms(c):
        assert not accepts(text), (label, why)


# Strings hypothesis found the grammar accepting while the template read them differently (each
# shrunk by hypothesis, then fixed): they must stay rejected, and the template confirms why.
REGRESSIONS = [
    # the opener looks ahead for `name(`: whitespace before "(" hides the call
    ("pythonic", "required", "[list_alarms\t()]", "no call"),
    # \x01 / \x02 are the parser's sentinels for delimited strings: the region fails to parse
    ("functiongemma", "auto", "<start_function_call>call:list_alarms{}<end_function_call>"
     "<start_function_call>call:get_weather{city:<escape>\x01<escape>}<end_function_call>", "error"),
    # `/>` closes the invoke before its parameters (the closer's lookbehind)
    ("deepseek_dsml", "required", '<｜DSML｜invoke name="get_weather"/><｜DSML｜parameter name="city">'
     "x</｜DSML｜parameter></｜DSML｜invoke>", "no valid call"),
    # GLM's `</tool_call>` closes only after `</arg_value>` or right after `<tool_call>NAME`
    ("glm", "auto", "<tool_call>\tlist_alarms</tool_call><think></think><tool_call>get_weather"
     "<arg_key>city</arg_key><arg_value></arg_value></tool_call>", "wrong arguments"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "choice", "text", "why"), REGRESSIONS)
def test_regressions_rejected(name: str, choice: str, text: str, why: str) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    tools = [WEATHER, NOARGS]
    c = constraints.derive(name, tools, tool_choice=choice, prefix=prompt(name))
    for label, accepts in _forms(c):
        assert not accepts(text), (label, why)
    with pytest.raises((AssertionError, ValueError)):  # the template does not read valid calls there
        check_parse(c, name, text, tools, 1, None)


# --------------------------------------------------------------------------- engines: corpus


# Valid outputs the constraint deliberately does not admit, each with its reason. The corpus test
# checks this list exactly: a rejection not listed fails, and so does a listed case accepted.
# Raw values exclude only matches of what would end them (the tag's tail, the call's closer, their
# lookarounds read in line): `</parameter> and` is text. MiniCPM 5's tag reads a value in two forms
# (inside `<![CDATA[...]]>`, where `</param>` is text, and bare): each form is written with its own
# value text, and a bare value may not start with `<![CDATA[` (the regex would try that form first).
# Reasoning text excludes only matches of its closer: Hunyuan's `(?=<tool_calls>\s{0,16}\[)` reads
# `<tool_calls>` then `[`, so `<tool_calls> block` in prose is reasoning.
MISSING_CLOSER = (
    "a closing tag the template's call syntax requires is missing (the parser recovers the value at "
    "the next tag or the end; the constraint writes every closer)"
)
# Text after a call that closes after its bracketed value (`close_after_value`: Mistral `[ARGS]{...}`,
# Llama JSON / pythonic, Granite lists) is the answer's text again, and is admitted.
# A second call in the same section through the closer's lookahead form (GigaChat 3.5, K2 Horizon,
# Step 3: `X(?:A|(?=LA))`) is admitted.
# DSML arguments as one JSON object inside `invoke` (`json_body`), and a self-closing invoke for a
# tool whose arguments may be empty, are admitted.
# Calls that start inside unclosed reasoning, which the reasoning closer's lookahead closes
# (`</think>|(?=<tool_call>)`), are admitted (catalog round 2's leniency, written as the template reads it).
# Leniencies of catalog round 2 (issue 10): outputs the parser reads, written in a form the
# constraint does not write (a decision each: the constraint writes one canonical form).
REPEATED_BLOCK = (
    "a second `[TOOL_CALLS]` list: the field does not repeat, so the parser keeps only the last "
    "block's calls (the first call is lost); the constraint writes one block"
)
# A block whose closer is a stop string may end the output unclosed (gpt-oss's final message ends
# with `<|return|>`, which the engine stops on and leaves out), so a final message after a call is
# admitted.
NOT_ADMITTED: dict[str, str] = {
    "mistral/cf-v3-repeated-tool-calls": REPEATED_BLOCK,
    "glm/glm47-missing-last-close-arg-value": MISSING_CLOSER,
    "qwen3-xml/vllm-coder-missing-close-parameter": MISSING_CLOSER,
    "qwen3-xml/bug-missing-close-parameter-before-function": MISSING_CLOSER,
}
# Fixtures the template itself does not read into schema-valid calls: not valid outputs of it.
# llama3_json reads `parameters` (these write `arguments`, which llama3_json_args reads); the
# harness runs the llama4-json fixtures with `pythonic`; MiniCPM, MiniMax M3 and Seed-OSS
# fixtures write Python literals for array arguments, which stay strings; Kimi K3's writes an
# argument its tool does not declare (`properties: {}`). Rejected, or accepted as plain text.
NOT_PARSED = {
    "kimi/k3-vllm-call-thinking-disabled",
    "llama/l3-bug-whole-call-single-delta",
    "llama/l3-sglang-python-tag-call",
    "llama/l3-sglang-text-before-python-tag",
    "llama/l3-vllm-arguments-key",
    "minicpm5/nested-arguments",
    "minimax-m3/nested-arguments",
    "seed-oss/nested-arguments",
    "llama4-json/markers-in-arguments",
    "llama4-json/empty-arguments",
    "llama4-json/nested-arguments",
    "llama4-json/parallel-calls",
    "llama4-json/semicolon-separated",
    "llama4-json/text-single-call",
    "llama4-json/unicode-value",
    "olmo3/python-literals",  # `limit=None` for an integer parameter: not schema-valid
}


def _parser_reads_valid_calls(case: Any) -> bool:
    """The template reads at least one call from the output, each valid for its tool's schema."""
    try:
        template = load_response_template(catalog.get(case.template))
        check_parse(template, case.template, case.output, case.tools, 1, None, case.prefix)
    except (AssertionError, ValueError):
        return False
    return True


def test_corpus_outputs_under_auto(record_property: Any) -> None:
    """Every valid tool-calling output of the canitoolcall corpus and the own fixtures, under `auto`
    with the fixture's tools and prompt: accepted by the GBNF grammar (XGrammar), the Lark grammar
    (llguidance) and the structural tag (XGrammar), which agree on every case, and parsed into the
    calls the parser reads; rejected exactly where `NOT_ADMITTED` / `NOT_PARSED` say why.
    """
    E.need("xgrammar")
    E.need("llguidance")
    pytest.importorskip("canitoolcall")
    from .corpus import cases

    accepted: list[str] = []
    rejected: set[str] = set()
    not_parsed: set[str] = set()
    underived: dict[str, int] = {}
    for case in cases():
        try:
            c = constraints.derive(case.template, case.tools, prefix=case.prefix)
        except ConstraintError as e:
            assert case.template in UNSUPPORTED, (case.id, str(e))
            underived[case.template] = underived.get(case.template, 0) + 1
            continue
        lark_ok = E.llg_accepts(c.lark(), case.output)
        xg_ok = E.xg_accepts(E.xg_compile(c, "gbnf"), case.output)
        tag_ok = E.xg_accepts(E.xg_compile(c, "structural-tag"), case.output)
        assert lark_ok == xg_ok == tag_ok, (case.id, lark_ok, xg_ok, tag_ok)
        if not _parser_reads_valid_calls(case):
            not_parsed.add(case.id)
            if xg_ok:  # accepted as text: whatever the template reads is still valid
                check_parse(c, case.template, case.output, case.tools, 0, None, case.prefix)
            continue
        if not xg_ok:
            rejected.add(case.id)
            continue
        accepted.append(case.id)
        check_parse(c, case.template, case.output, case.tools, 1, None, case.prefix)
    record_property("accepted", len(accepted))
    print(
        json.dumps(
            {
                "accepted": len(accepted),
                "rejected": len(rejected),
                "not_parsed": len(not_parsed),
                "underived": underived,
            }
        )
    )
    assert rejected == set(NOT_ADMITTED)
    assert not_parsed == NOT_PARSED
    assert set(underived) <= set(UNSUPPORTED)


def test_cache_keys_a_loaded_template_by_its_content() -> None:
    """A loaded `Template` is keyed by its spec, not by `id()`: two loads of one spec (the
    template cache evicted it in between, as a server with many templates does) share one
    constraint, and different specs never do."""
    from chatparse import _template, catalog, load_response_template

    first = load_response_template(catalog.get("qwen3"))
    _template._CACHE.clear()
    second = load_response_template(catalog.get("qwen3"))
    assert first is not second
    a = constraints.derive(first, [WEATHER], tool_choice="required")
    assert constraints.derive(second, [WEATHER], tool_choice="required") is a
    other = constraints.derive(load_response_template(catalog.get("glm")), [WEATHER], tool_choice="required")
    assert other is not a and other.gbnf() != a.gbnf()
