"""The parsing bug classes of issue 10 (items 1-8), each checked on every catalog template it concerns.

The corpus-style regression cases live in ``tests/data/own_fixtures/`` (run in every chunking by
``tests/conformance/test_own_fixtures.py``). The tests here state each class once and apply it to
every template, built from each template's own example generations in ``family_cases.json`` and
its catalog metadata (``stop``), so a new template is covered as soon as it has examples; the
tables below must say something about every template that has the fields a class is about.

Every parse is made three ways and must agree: ``parse_message`` on the whole text, ``ChatParser``
fed one character at a time, and ``ChatParser`` fed in seeded random pieces of 1-8 characters.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import chatparse
from chatparse import catalog
from chatparse.openai import ChatParser, parse_message

DATA = Path(__file__).resolve().parents[1] / "data"
CASES = {c["id"]: c for c in json.loads((DATA / "family_cases.json").read_text(encoding="utf-8"))}
_LABELS = {"QWEN_JSON": "qwen3", "QWEN_XML": "qwen3_xml", "GRANITE33_523": "granite33_hf"}


def case_for(name: str, kind: str) -> dict[str, Any] | None:
    for c in CASES.values():
        if _LABELS.get(c["template"], c["template"].lower()) == name and c["id"].endswith(f"-{kind}"):
            return c
    return None


def parse_all_ways(text: str, **kw: Any) -> dict[str, Any]:
    """The message, after checking that one-shot, 1-char and random chunked parses agree."""
    kw = {"id_factory": lambda: "call_0", **kw}
    one = parse_message(text, **kw)
    streams = [list(text)]
    rng = random.Random(len(text))
    pieces, i = [], 0
    while i < len(text):
        n = rng.randint(1, 8)
        pieces.append(text[i : i + n])
        i += n
    streams.append(pieces)
    for chunks in streams:
        p = ChatParser(**kw)
        for c in chunks:
            p.feed(c)
        got, _, _ = p.finish()
        assert got == one, (chunks[:20], got, one)
    return one


def calls_of(message: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]


def call_span(name: str, case: dict[str, Any]) -> tuple[str, str]:
    """`(payload, call)` of the first call region of a catalog example: `call` is the call as written
    (opener, body, own closer); `payload` stops before the closer when that closer is one of the
    template's end-of-turn stop strings (the call then has no closer of its own)."""
    parser = chatparse.ResponseParser(catalog.load(name), prefix=case["prefix"])
    base = len(parser.input_text)
    events = parser.initial_events + parser.feed(case["text"]) + parser.finalize()[1]
    opened = next(e for e in events if e["type"] == "region_open" and e["field"] == "tool_calls")
    closed = next(
        e for e in events if e["type"] in ("region_close", "region_malformed") and e["field"] == "tool_calls"
    )
    assert opened["start"] >= base, "the example's call must be in the generated text"
    buf = parser.input_text
    closer = buf[closed["start"] : closed["end"]]
    stops = catalog.describe(name)["stop"]
    end = closed["start"] if (closer in stops or not closer) else closed["end"]
    return buf[opened["start"] : end], buf[opened["start"] : closed["end"]]


def kw(name: str, case: dict[str, Any]) -> dict[str, Any]:
    return {"template": name, "prefix": case["prefix"], "tools": case.get("tools")}


WITH_CALLS = [
    n for n in catalog.names() if "tool_calls" in catalog.get(n)["fields"] and case_for(n, "one-call")
]


# --------------------------------------------------------------------------------------------------
# item 3: a call payload followed by text, or by a repeated start marker


def _implicit_content(name: str) -> bool:
    spec = catalog.get(name)["fields"].get("content")
    return spec is not None and "open" not in spec and "open_pattern" not in spec


@pytest.mark.parametrize("name", WITH_CALLS)
def test_text_after_a_call_payload_is_content(name: str) -> None:
    case = case_for(name, "one-call")
    assert case is not None
    expected = calls_of(parse_message(case["text"], **kw(name, case)))
    assert expected
    payload, _ = call_span(name, case)
    message = parse_all_ways(payload + " Then some text.", **kw(name, case))
    assert calls_of(message) == expected, name
    if _implicit_content(name):
        assert (message.get("content") or "").endswith("Then some text."), (name, message)
    else:  # content only inside its own blocks: text outside every block is not content
        assert message.get("content") is None, (name, message)


# Bare-list formats recognised only at the very start of the reply: a second list is text.
REPEAT_AT_START_ONLY = {"granite30", "llama3_json", "llama3_json_args", "pythonic"}
# Inkling: every block starts with its message marker (the prompt pre-wrote the first one).
REPEAT_JOINER = {"inkling": "<|message_model|>"}


@pytest.mark.parametrize("name", WITH_CALLS)
def test_a_repeated_call_marker_starts_another_call(name: str) -> None:
    case = case_for(name, "one-call")
    assert case is not None
    expected = calls_of(parse_message(case["text"], **kw(name, case)))
    payload, call = call_span(name, case)
    text = (call if call != payload else payload) + REPEAT_JOINER.get(name, "") + payload
    message = parse_all_ways(text, **kw(name, case))
    if name in REPEAT_AT_START_ONLY and not payload.startswith("<"):
        assert calls_of(message) == expected, name
    else:
        assert calls_of(message) == expected * 2, (name, message)


# --------------------------------------------------------------------------------------------------
# item 1: a call opener inside an unclosed reasoning block ends the reasoning

# template -> (reasoning opener as the model writes it, whether a call written before the reasoning
# closer ends the reasoning). False: the family closes its reasoning before calling and the engines
# keep a call marker inside reasoning as reasoning (Mistral: llama.cpp's 'fake tool call marker in
# reasoning' test and the canitoolcall corpus), or reasoning and calls are separate messages.
REASONING_THEN_CALL: dict[str, tuple[str, bool]] = {
    "qwen3": ("<think>", True),
    "qwen3_xml": ("<think>", True),
    "smollm3": ("<think>", True),
    "granite4": ("<think>", True),
    "deepseek_v3": ("<think>", True),
    "deepseek_v31": ("<think>", True),
    "deepseek_dsml": ("<think>", True),
    "kimi_k2": ("<think>", True),
    "glm": ("<think>", True),
    "gemma4": ("<|channel>thought\n", True),
    "olmo3": ("<think>", True),
    "kimi_k3": ("<|open|>think<|sep|>", True),
    "mistral_v11": ("[THINK]", False),
    "mistral_v11_call_id": ("[THINK]", False),
    "mistral_v13": ("[THINK]", False),
    "granite33": ("<think>", False),
    "granite33_hf": ("<think>", False),
    "lfm2": ("<think>", False),
    "lfm2_json": ("<think>", False),
    "ernie": ("<think>", False),
    "cohere": ("<|START_THINKING|>", False),
    "gpt_oss": ("<|channel|>analysis<|message|>", False),
    "inkling": ("<|content_thinking|>", False),
    # entries added on catalog-breadth (their call openers end the reasoning in their templates)
    "hy3": ("<think>", True),
    "internlm": ("<think>", True),
    "ling3": ("<think>", True),
    "minicpm5": ("<think>", True),
    "minimax_m2": ("<think>", True),
    "minimax_m3": ("<mm:think>", True),
    "nemotron3": ("<think>", True),
    "nemotron_nano_v2": ("<think>", True),
    "poolside_v1": ("<think>", True),
    "seed_oss": ("<seed:think>", True),
    "step3p5": ("<think>", True),
    "apriel": ("Here are my reasoning steps:", False),
    "muse_glimmer": ("<|start|>assistant to=self<|message|>", False),
    "apertus": ("<|inner_prefix|>", True),
    "gigachat35": ("<think>", True),
    "hunyuan_a13b": ("<think>", True),
    "k2_horizon": ("<ifm|think>", True),
    "longcat": ("<longcat_think>", True),
    "mimo": ("<think>", True),
    "step3": ("<think>", True),
}


def test_the_reasoning_table_covers_every_template_with_reasoning_and_calls() -> None:
    both = {
        n for n in catalog.names() if {"reasoning_content", "tool_calls"} <= set(catalog.get(n)["fields"])
    }
    assert both == set(REASONING_THEN_CALL)


@pytest.mark.parametrize("name", sorted(set(REASONING_THEN_CALL) & set(WITH_CALLS)))
def test_a_call_inside_unclosed_reasoning(name: str) -> None:
    opener, ends = REASONING_THEN_CALL[name]
    case = case_for(name, "one-call")
    assert case is not None
    expected = calls_of(parse_message(case["text"], **kw(name, case)))
    _, call = call_span(name, case)
    # an empty no-thinking prefill would close the reasoning at once: keep only the role header
    prefix = catalog.describe(name)["generation_prompt"]
    message = parse_all_ways(
        opener + "Let me think." + call, template=name, prefix=prefix, tools=case.get("tools")
    )
    if ends:
        assert message.get("reasoning_content") == "Let me think.", (name, message)
        assert calls_of(message) == expected, (name, message)
    else:
        assert not calls_of(message), (name, message)


# --------------------------------------------------------------------------------------------------
# item 8: the template's own special tokens never pass through into content or reasoning

# template -> its markers that, written where they mean nothing (after the region they close has
# ended), must be dropped from the content.
STRAY_IN_CONTENT: dict[str, list[str]] = {
    "qwen3": ["</think>", "</tool_call>"],
    "qwen3_xml": ["</think>", "</tool_call>"],
    "smollm3": ["</think>", "</tool_call>"],
    "granite4": ["</think>", "</tool_call>"],
    "deepseek_r1_distill": ["</think>"],
    "deepseek_v3": ["</think>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "<｜tool▁calls▁end｜>"],
    "deepseek_v31": ["</think>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "<｜tool▁calls▁end｜>"],
    "deepseek_dsml": ["</think>", "</｜DSML｜invoke>", "</｜DSML｜parameter>", "</｜DSML｜tool_calls>"],
    "kimi_k2": [
        "</think>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
        "<|tool_calls_section_end|>",
    ],
    "glm": ["</think>", "</tool_call>"],
    "gemma4": ["<channel|>", "<tool_call|>"],
    "lfm2": ["</think>", "<|tool_call_end|>"],
    "lfm2_json": ["</think>", "<|tool_call_end|>"],
    "mistral_v11": ["[/THINK]", "</think>"],
    "mistral_v11_call_id": ["[/THINK]", "</think>"],
    "mistral_v13": ["[/THINK]"],
    "olmo3": ["</think>", "</function_calls>"],
    # no stray markers of their own in content: the end-of-turn markers are stops
    "granite30": [],
    "granite33": [],
    "granite33_hf": [],
    "ernie": [],
    "lfm2_math": [],
    "llama3_json": [],
    "llama3_json_args": [],
    "mistral_v3": [],
    "phi4_mini": [],
    "pythonic": [],
    "functiongemma": [],
    # entries added on catalog-breadth
    "internlm": ["</think>"],
    "ling3": ["</think>"],
    "minicpm5": ["</think>"],
    "minimax_m2": ["</think>"],
    "minimax_m3": ["</mm:think>"],
    "nemotron3": ["</think>"],
    "nemotron_nano_v2": ["</think>"],
    "poolside_v1": ["</think>"],
    "seed_oss": ["</seed:think>"],
    "step3p5": ["</think>"],
    "hy3": ["</think>"],
    "apriel": [],
    "gigachat3": [],
    "granite_20b_fc": [],
    "llama4_json": [],
    "apertus": ["<|inner_suffix|>", "<|tools_suffix|>"],
    "gigachat35": ["</think>", "</｜GCML｜tool_calls>", "</｜GCML｜invoke>", "</｜GCML｜parameter>"],
    "hunyuan_a13b": ["</think>", "</tool_calls>", "</answer>"],
    "jamba": ["</tool_calls>"],
    "k2_horizon": ["</ifm|think>", "</ifm|tool_call>", "</ifm|tool_calls>"],
    "longcat": ["</longcat_think>", "</longcat_tool_call>"],
    "mimo": ["</think>", "</tool_call>"],
    "step3": ["</think>", "<｜tool_calls_end｜>", "<｜tool_call_end｜>", "</steptml:invoke>"],
    "xlam": [],
}


def test_the_stray_table_covers_every_template_with_implicit_content() -> None:
    assert {n for n in catalog.names() if _implicit_content(n)} == set(STRAY_IN_CONTENT)


@pytest.mark.parametrize(
    ("name", "stray"), [(n, s) for n, strays in sorted(STRAY_IN_CONTENT.items()) for s in strays]
)
def test_stray_marker_in_content_is_dropped(name: str, stray: str) -> None:
    info = catalog.describe(name)
    prefix = info["generation_prompt"].removesuffix(info["prefills"].get("thinking") or "\0")
    message = parse_all_ways(f"The answer{stray} is 42.", template=name, prefix=prefix)
    assert message.get("content") == "The answer is 42.", (name, message)
    assert stray not in json.dumps(message, ensure_ascii=False)


@pytest.mark.parametrize(
    "name", [n for n in catalog.names() if catalog.describe(n)["prefills"].get("thinking")]
)
def test_reasoning_opened_by_the_prompt_is_open_at_once(name: str) -> None:
    """A prompt that pre-writes the reasoning opener opens the reasoning region before any output
    (the engine integrations ask this of the prompt alone). This is why a doubled opener, the model
    writing it again right after the prompt did, stays in the reasoning text: absorbing it would
    hold the prompt's opener until the next character."""
    info = catalog.describe(name)
    parser = chatparse.ResponseParser(
        catalog.load(name), prefix=info["generation_prompt"] + info["prefills"]["thinking"]
    )
    opened = [e["field"] for e in parser.initial_events if e["type"] == "region_open"]
    assert opened and opened[-1] == "reasoning_content", (name, parser.initial_events)


# --------------------------------------------------------------------------------------------------
# items 2, 4-7 and 9: the families they concern


def test_qwen3_coder_bare_functions_are_separate_calls() -> None:
    text = (
        "<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n"
        "<function=b>\n<parameter=y>\n2\n</parameter>\n</function>"
    )
    message = parse_all_ways(text, template="qwen3_xml", prefix="")
    assert calls_of(message) == [("a", {"x": "1"}), ("b", {"y": "2"})]


def test_gemma4_bare_opener_and_empty_thought() -> None:
    message = parse_all_ways(
        "<|channel>thought<channel|><|tool_call>:f{a:1}<tool_call|>",
        template="gemma4",
        prefix="<|turn>model\n",
    )
    assert calls_of(message) == [("f", {"a": 1})]
    assert message.get("content") is None and "reasoning_content" not in message


def test_granite30_tool_call_text_prefix() -> None:
    message = parse_all_ways(
        '<tool_call>[{"name": "f", "arguments": {"a": 1}}]', template="granite30", prefix=""
    )
    assert calls_of(message) == [("f", {"a": 1})]


def test_r1_distill_newline_before_think() -> None:
    message = parse_all_ways("\n<think>\nhm\n</think>\n\nok", template="deepseek_r1_distill", prefix="")
    assert message.get("reasoning_content") == "hm" and message.get("content") == "ok"


def test_dsml_json_object_inside_invoke() -> None:
    text = '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n{"a": [1, 2]}\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    assert calls_of(parse_all_ways(text, template="deepseek_dsml", prefix="")) == [("f", {"a": [1, 2]})]
    prose = (
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\nno tags\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    )
    message = parse_all_ways(prose, template="deepseek_dsml", prefix="")
    assert not calls_of(message)
    assert "no tag" in message["chatparse"]["errors"][0]["error"]


@pytest.mark.parametrize(
    ("header", "content"),
    [
        ("<|channel|>final <|constrain|>json<|message|>", '{"a": 1}'),
        ("<|channel|>final<|constrain|>json<|message|>", '{"a": 1}'),
        ("<|channel|>final json<|message|>", '{"a": 1}'),
        ("<|channel|>commentary <|constrain|>json<|message|>", '{"a": 1}'),
        # built-in tools: neither content nor a function call (vLLM and llama.cpp drop them)
        ("<|channel|>commentary to=container.exec <|constrain|>json<|message|>", None),
        ("<|start|>assistant to=container.exec<|channel|>commentary<|message|>", None),
        ("<|start|>assistant to=browser.search<|channel|>analysis<|message|>", None),
        ("<|channel|>analysis to=python code<|message|>", None),
    ],
)
def test_gpt_oss_headers(header: str, content: str | None) -> None:
    message = parse_all_ways(header + '{"a": 1}<|end|>', template="gpt_oss", prefix="<|start|>assistant")
    assert message.get("content") == content
    assert not calls_of(message) and "reasoning_content" not in message


# ------------------------------------------------------------------------------------------------
# qwen3: reasoning opens only before the answer. A literal `<think>` in the answer (a model
# explaining its own format) used to reopen reasoning there: the answer was cut at it, and its rest
# replaced the real reasoning. vLLM's and SGLang's Qwen3 parsers keep everything after `</think>` as
# content. The opener may follow whitespace and one empty think block (the block a prompt with
# enable_thinking=False pre-writes, which some models follow with their own), nothing else.

QWEN3_THINK_IN_ANSWER = [
    # (prefix, text, reasoning, content)
    (
        "",
        "<think>plan</think>Wrap your reasoning in <think> tags, then answer.<|im_end|>",
        "plan",
        "Wrap your reasoning in <think> tags, then answer.",
    ),
    ("", "\n<think>plan</think>\n\nUse <think> in prompts.<|im_end|>", "plan", "Use <think> in prompts."),
    ("<|im_start|>assistant\n<think>\n", "plan</think>\n\nok <think> x<|im_end|>", "plan", "ok <think> x"),
    (
        "<|im_start|>assistant\n",
        "<think>\n\n</think>\n\nHi <think> there<|im_end|>",
        None,
        "Hi <think> there",
    ),
    (
        "<|im_start|>assistant\n",
        "Answer first. <think>not reasoning<|im_end|>",
        None,
        "Answer first. <think>not reasoning",
    ),
    # enable_thinking=False pre-wrote an empty block; the model thinks anyway
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", "<think>plan</think>\n\nok<|im_end|>", "plan", "ok"),
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", "ok <think>x</think><|im_end|>", None, "ok <think>x"),
]


@pytest.mark.parametrize("template", ["qwen3", "qwen3_xml"])
@pytest.mark.parametrize("prefix, text, reasoning, content", QWEN3_THINK_IN_ANSWER)
def test_qwen3_think_in_the_answer_stays_content(
    template: str, prefix: str, text: str, reasoning: str | None, content: str
) -> None:
    _assert_reasoning_and_content(template, prefix, text, reasoning, content)


def _assert_reasoning_and_content(
    template: str, prefix: str, text: str, reasoning: str | None, content: str
) -> None:
    """`text` after `prefix` gives this reasoning and content one-shot, at every split of the core's
    streaming parser, and all ways (`parse_all_ways`)."""
    spec = catalog.get(template)
    msg = chatparse.parse_response(text, spec, prefix=prefix)
    assert msg.get("reasoning_content") == reasoning and msg.get("content") == content, msg
    for i in range(len(text) + 1):  # every split, the core's streaming parser
        p = chatparse.ResponseParser(spec, prefix=prefix)
        p.feed(text[:i])
        p.feed(text[i:])
        assert p.finalize()[0] == msg, i
    one = parse_all_ways(text, template=spec, prefix=prefix)
    assert one.get("reasoning_content") == reasoning and one.get("content") == content, one


# The same rule for every catalog family whose engines keep a later reasoning opener as content:
# the opener is recognised only at the start of the output (after whitespace and, where the family's
# non-thinking prompt pre-writes an empty think block, after at most one such block). Per template:
# (opener, closer, empty block: the non-thinking prefill is an empty block a model may follow with
# its own). The cases are built from each entry's generation prompt, prefills and first stop string.
# Left out on purpose (see the closing report of the change): glm and ling3 (vLLM's GLM-4.7 engine
# reopens reasoning at a later <think>), mistral_v11/_call_id/v13 (vLLM's Mistral parser does too),
# apertus (a turn interleaves thought, call and result blocks across the prompt), cohere and kimi_k3
# (the answer is its own delimited section, so an opener inside it is already content).
REASONING_AT_START = {
    "apriel": ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]", False),
    "deepseek_v3": ("<think>", "</think>", False),
    "deepseek_v31": ("<think>", "</think>", False),
    "gigachat35": ("<think>", "</think>", False),
    "granite33": ("<think>", "</think>", False),
    "granite33_hf": ("<think>", "</think>", False),
    "granite4": ("<think>", "</think>", False),
    "internlm": ("<think>", "</think>", False),
    "kimi_k2": ("<think>", "</think>", False),
    "lfm2": ("<think>", "</think>", False),
    "lfm2_json": ("<think>", "</think>", False),
    "lfm2_math": ("<|cot_start|>", "<|cot_end|>", False),
    "longcat": ("<longcat_think>", "</longcat_think>", False),
    "mimo": ("<think>", "</think>", True),
    "minicpm5": ("<think>", "</think>", True),
    "minimax_m2": ("<think>", "</think>", False),
    "nemotron_nano_v2": ("<think>", "</think>", True),
    "olmo3": ("<think>", "</think>", False),
    "poolside_v1": ("<think>", "</think>", False),
    "qwen3": ("<think>", "</think>", True),
    "qwen3_xml": ("<think>", "</think>", True),
    "seed_oss": ("<seed:think>", "</seed:think>", False),
    "smollm3": ("<think>", "</think>", True),
    "step3": ("<think>", "</think>", False),
    "step3p5": ("<think>", "</think>", False),
}


def _reasoning_at_start_cases(name: str) -> list[tuple[str, str, str | None, str]]:
    """(prefix, text, reasoning, content) for `name`, from its catalog metadata."""
    opener, closer, empty_block = REASONING_AT_START[name]
    info = catalog.describe(name)
    prefills = {k: v for k, v in info["prefills"].items() if v}
    base = info["generation_prompt"]
    for prefill in prefills.values():  # the generation prompt may end with the default prefill
        base = base.removesuffix(prefill)
    stop = info["stop"][0]
    cases = [
        (base, f"{opener}plan{closer}Wrap your reasoning in {opener} tags.{stop}", "plan",
         f"Wrap your reasoning in {opener} tags."),
        (base, f"\n{opener}plan{closer}\n\nUse {opener} in prompts.{stop}", "plan", f"Use {opener} in prompts."),
        (base, f"Answer first. {opener}not reasoning{stop}", None, f"Answer first. {opener}not reasoning"),
    ]  # fmt: skip
    if "thinking" in prefills:  # the prompt opened the reasoning; the answer mentions the opener
        cases.append(
            (base + prefills["thinking"], f"plan{closer}\n\nok {opener} x{stop}", "plan", f"ok {opener} x")
        )
    if "no_thinking" in prefills:  # reasoning off: an opener in the answer stays content
        cases.append((base + prefills["no_thinking"], f"ok {opener} x{stop}", None, f"ok {opener} x"))
    if empty_block:  # the prompt pre-wrote an empty block and the model thinks anyway
        no_thinking = prefills["no_thinking"]
        assert no_thinking.strip().startswith(opener) and no_thinking.strip().endswith(closer), name
        cases.append((base + no_thinking, f"{opener}plan{closer}\n\nok{stop}", "plan", "ok"))
    return cases


def test_reasoning_at_start_table_covers_every_anchored_opener() -> None:
    anchored = {
        n
        for n in catalog.names()
        if catalog.get(n)["fields"].get("reasoning_content", {}).get("open_pattern", "").startswith("(?<=^")
    }
    assert anchored == set(REASONING_AT_START)


@pytest.mark.parametrize(
    ("name", "prefix", "text", "reasoning", "content"),
    [(n, *case) for n in sorted(REASONING_AT_START) for case in _reasoning_at_start_cases(n)],
)
def test_reasoning_opener_in_the_answer_stays_content(
    name: str, prefix: str, text: str, reasoning: str | None, content: str
) -> None:
    _assert_reasoning_and_content(name, prefix, text, reasoning, content)
