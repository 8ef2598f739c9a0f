"""Lookarounds in the middle of a delimiter: Harmony's recipient lookahead (gpt-oss) and a
negative lookahead excluding words, checked on the real engines and against the parser."""

from __future__ import annotations

from typing import Any

import pytest

from chatparse import catalog, constraints, parse_response
from chatparse.constraints import ConstraintError

from . import engines as E

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
OTHER = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
PROMPT = "<|start|>user<|message|>hi<|end|><|start|>assistant"
ARGS = '{"city": "Paris"}'


def _forms(c: constraints.Constraint) -> list[tuple[str, Any]]:
    return [
        ("gbnf", lambda t: E.xg_accepts(E.xg_compile(c, "gbnf"), t)),
        ("structural-tag", lambda t: E.xg_accepts(E.xg_compile(c, "structural-tag"), t)),
        ("lark", lambda t: E.llg_accepts(c.lark(), t)),
    ]


def _names(text: str, template: Any, prefix: str = PROMPT) -> list[str]:
    msg = parse_response(text, template, prefix=prefix, tools=[WEATHER, OTHER])
    return [c["function"]["name"] for c in msg.get("tool_calls") or []]


HARMONY_OK = [
    # the recipient in the channel part of the header (what gpt-oss writes)
    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + ARGS,
    "<|channel|>commentary to=functions.get_weather<|message|>" + ARGS,
    # in the role part, with the content type after the channel (the HF chat template's form)
    " to=functions.get_weather<|channel|>commentary json<|message|>" + ARGS,
    " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>" + ARGS,
    # after reasoning, in a new message
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
    "to=functions.get_weather <|constrain|>json<|message|>" + ARGS,
]
HARMONY_BAD = [
    ("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}", "unoffered tool"),
    ("<|channel|>commentary to=functions.get_weatherx<|message|>" + ARGS, "name read past the tool's"),
    (
        " to=functions.get_weather<|channel|>commentary to=functions.get_time<|message|>" + ARGS,
        "a second recipient the lookahead would read instead",
    ),
    ("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}", "missing argument"),
    ("<|channel|>final<|message|>It is sunny.<|end|>", "no call under required"),
]


@pytest.mark.parametrize("text", HARMONY_OK)
def test_harmony_headers_accepted_and_parsed(text: str) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    c = constraints.derive("gpt_oss", [WEATHER, OTHER], tool_choice="required", prefix=PROMPT)
    assert _names(text, catalog.get("gpt_oss")) == ["get_weather"]
    for label, accepts in _forms(c):
        assert accepts(text), (label, text)


@pytest.mark.parametrize(("text", "why"), HARMONY_BAD)
def test_harmony_headers_rejected(text: str, why: str) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    c = constraints.derive("gpt_oss", [WEATHER], tool_choice="required", prefix=PROMPT)
    for label, accepts in _forms(c):
        assert not accepts(text), (label, why, text)


def test_harmony_named_tool_is_the_only_recipient() -> None:
    E.need("xgrammar")
    named = {"type": "function", "function": {"name": "get_time"}}
    c = constraints.derive("gpt_oss", [WEATHER, OTHER], tool_choice=named, prefix=PROMPT)
    compiled = E.xg_compile(c, "gbnf")
    assert E.xg_accepts(
        compiled, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}"
    )
    assert not E.xg_accepts(compiled, HARMONY_OK[0])


# ------------------------------------------------------------------ a word-excluding negative lookahead

WORDS = {
    "start_anchor": "<a>",
    "fields": {
        "tool_calls": {
            "open_pattern": r"<send to=(?!(?:self|user)>)[a-z]{1,12}> (?P<name>\w+)\n",
            "close": "</send>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        }
    },
}


@pytest.mark.parametrize(
    ("recipient", "ok"),
    [("tools", True), ("sel", True), ("selfie", True), ("users", True), ("self", False), ("user", False)],
)
def test_negative_lookahead_excludes_exactly_its_words(recipient: str, ok: bool) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    c = constraints.derive(WORDS, [WEATHER], tool_choice="required", prefix="<a>")
    text = f"<send to={recipient}> get_weather\n{ARGS}</send>"
    parsed = parse_response(text, WORDS, prefix="<a>", tools=[WEATHER]).get("tool_calls") or []
    assert bool(parsed) == ok  # the parser reads the call exactly where the lookahead holds
    for label, accepts in _forms(c):
        assert accepts(text) == ok, (label, text)


def test_negative_lookahead_that_is_not_a_word_exclusion_is_refused() -> None:
    t = {
        "start_anchor": "<a>",
        "fields": {
            "tool_calls": {
                **WORDS["fields"]["tool_calls"],  # type: ignore[index]
                "open_pattern": r"<send to=(?!(?:self|user))[a-z]{1,12}> (?P<name>\w+)\n",
            }
        },
    }
    with pytest.raises(ConstraintError, match="negative lookahead"):
        constraints.derive(t, [WEATHER], tool_choice="required", prefix="<a>")


# ------------------------------------------------------------------ the time budget


def test_a_derivation_past_its_time_budget_raises_and_is_not_cached() -> None:
    tools = [{**WEATHER, "function": {**WEATHER["function"], "name": f"tool_{i}"}} for i in range(100)]
    with pytest.raises(constraints.ConstraintTimeout, match="time budget of 0.001 s"):
        constraints.derive("glm", tools, tool_choice="required", time_budget=0.001)
    assert issubclass(constraints.ConstraintTimeout, ConstraintError)
    # not cached: with room, the same request derives
    small = constraints.derive("glm", tools[:2], tool_choice="required", time_budget=600)
    assert "tool_1" in small.gbnf()


# ------------------------------------------------------------------ the whitespace cap


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("qwen3", '<tool_call>\n{"name": "get_weather",WS"arguments": {"city": "Paris"}}\n</tool_call>'),
        ("gemma4", '<|tool_call>call:get_weather{city:WS<|"|>Paris<|"|>}<tool_call|>'),
        ("lfm2", '<|tool_call_start|>[get_weather(city=WS"Paris")]<|tool_call_end|>'),
    ],
)
@pytest.mark.parametrize("cap", [None, 4])
def test_whitespace_runs_inside_calls_are_capped(name: str, call: str, cap: int | None) -> None:
    """The default cap (`DEFAULT_MAX_WHITESPACE`) and a configured one: a run of that length is
    accepted, one longer is rejected, in every rendering."""
    E.need("xgrammar")
    E.need("llguidance")
    prompt = str(catalog.describe(name)["generation_prompt"])
    kw = {} if cap is None else {"max_whitespace": cap}
    c = constraints.derive(name, [WEATHER], tool_choice="required", prefix=prompt, **kw)
    limit = constraints.DEFAULT_MAX_WHITESPACE if cap is None else cap
    ok, long = call.replace("WS", " " * limit), call.replace("WS", " " * (limit + 1))
    assert _names(ok, catalog.get(name), prompt) == ["get_weather"]
    for label, accepts in _forms(c):
        assert accepts(c.sample_lead + ok), (label, ok)
        assert not accepts(c.sample_lead + long), (label, long)


def test_max_whitespace_none_is_unbounded() -> None:
    E.need("xgrammar")
    c = constraints.derive("qwen3", [WEATHER], tool_choice="required", max_whitespace=None)
    text = '<tool_call>\n{"name": "get_weather",' + " " * 200 + '"arguments": {"city": "P"}}\n</tool_call>'
    assert E.xg_accepts(E.xg_compile(c, "gbnf"), c.sample_lead + text)


# ------------------------------------------------------------------ a reasoning opener anchored by a lookbehind
# `(?<=^\s{0,16})<think>` (and Qwen3's form with one empty block): reasoning opens only at the start
# of the output. The grammar writes the block there, with what the lookbehind reads before it, and
# each string it accepts parses into that reasoning. (Before, the lookbehind was written as nothing
# matching, so the grammar had no reasoning block at all.)
START_REASONING = [
    # (template, opener, closer, with an empty block first)
    ("qwen3", "<think>", "</think>", True),
    ("qwen3_xml", "<think>", "</think>", True),
    ("smollm3", "<think>", "</think>", True),
    ("kimi_k2", "<think>", "</think>", False),
    ("deepseek_v31", "<think>", "</think>", False),
    ("seed_oss", "<seed:think>", "</seed:think>", False),
    ("longcat", "<longcat_think>", "</longcat_think>", False),
]


@pytest.mark.parametrize(("name", "opener", "closer", "empty_block"), START_REASONING)
@pytest.mark.parametrize("reasoning", [True, None], ids=["reasoning", "optional"])
def test_reasoning_opener_anchored_at_the_start_is_written(
    name: str, opener: str, closer: str, empty_block: bool, reasoning: bool | None
) -> None:
    E.need("xgrammar")
    E.need("llguidance")
    info = catalog.describe(name)
    prompt = str(info["generation_prompt"])
    for prefill in info["prefills"].values():  # the prompt without a pre-written block
        prompt = prompt.removesuffix(prefill) if prefill else prompt
    assert catalog.get(name)["fields"]["reasoning_content"]["open_pattern"].startswith("(?<=^")
    c = constraints.derive(name, [WEATHER], tool_choice="auto", reasoning=reasoning, prefix=prompt)
    texts = [f"{opener}plan{closer}It is sunny.", f"\n{opener}plan{closer}\n\nIt is sunny."]
    if empty_block:
        texts.append(f"{opener}\n\n{closer}\n\n{opener}plan{closer}\n\nIt is sunny.")
    for text in texts:
        msg = parse_response(text, catalog.get(name), prefix=prompt)
        assert (msg.get("reasoning_content"), msg.get("content")) == ("plan", "It is sunny."), (text, msg)
        for label, accepts in _forms(c):
            assert accepts(text), (label, text)
        # the opener quoted in the answer is the answer's text: writable, and it opens nothing
        quoted = f"{text} Wrap it in {opener} tags."
        assert parse_response(quoted, catalog.get(name), prefix=prompt).get("reasoning_content") == "plan"
        for label, accepts in _forms(c):
            assert accepts(quoted), (label, quoted)
