"""The breadth families: which template, which model, which cases (data for ``breadth_fixtures``).

Each family renders a standard set of assistant messages (:func:`standard`) through its real chat
template, plus family-specific cases (prompt prefills, engine-test shapes). The expected message of
a rendered case is the message itself; truncated cases say what must survive the cut.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .breadth_fixtures import (
    LLAMA_CPP,
    LLAMA_CPP_TEMPLATES,
    LLAMA_CPP_TESTS,
    Case,
    Family,
    assistant,
    call,
)

# --------------------------------------------------------------------------------------------------
# the standard cases

THINK_FACT = assistant("Paris is the capital of France.", "Simple fact.")
SINGLE = assistant(
    "Let me check.", "The user wants the weather.", [call("get_weather", city="Paris", days=3)]
)
PARALLEL = assistant(
    None,
    "Two lookups are needed.",
    [call("get_weather", city="Paris"), call("get_time", timezone="Asia/Tokyo", utc=False)],
)
UNICODE = assistant(
    None,
    "Send it.",
    [call("send_message", to="Zoë", text='Grüße aus München 🌧️\n東京は晴れ — "quoted" & <b>bold</b>')],
)
NESTED = assistant(
    "Creating it.",
    "An event with attendees.",
    [call("create_event", title="Standup", attendees=["ana", "bo"], options={"room": "4F", "remote": True})],
)
EMPTY = assistant(None, "No arguments needed.", [call("list_alarms")])
LONG_REASONING = assistant(
    "Done.", "The user wants the current weather in Paris and the time in Tokyo first."
)
HISTORY = (
    assistant(None, "Call the tool.", [call("get_weather", city="Paris")]),
    {
        "role": "tool",
        "name": "get_weather",
        "tool_call_id": "call_0",
        "content": '{"temperature": 21, "sky": "sunny"}',
    },
)
AFTER_TOOL = assistant("It is sunny and 21 °C in Paris.", "The tool answered.")


def markers_message(inside: str) -> dict[str, Any]:
    return assistant(
        None, "Quote the markers.", [call("send_message", to="dev", text=f"use {inside} in the text")]
    )


def standard(
    *,
    markers_inside: str,
    cut_second_call: str,
    cut_reasoning: str = " in Paris and the time",
    reasoning: bool = True,
    kwargs: dict[str, Any] | None = None,
    skip: tuple[str, ...] = (),
    known: dict[str, str] | None = None,
    notes: dict[str, str] | None = None,
    call_content: bool = True,
    list_format: bool = False,
) -> list[Case]:
    """The cases every family renders. ``markers_inside``: format markers quoted in an argument;
    ``cut_second_call``: text inside the second call of :data:`PARALLEL` the output is cut before."""
    kw = kwargs or {}

    def strip(message: dict[str, Any]) -> dict[str, Any]:
        if not reasoning:
            message = {k: v for k, v in message.items() if k != "reasoning_content"}
        if not call_content and message.get("tool_calls"):
            message = {**message, "content": None}
        return message

    cases = [
        Case("thinking-content", ("reasoning", "no-call"), strip(THINK_FACT), kwargs=kw),
        Case(
            "text-single-call",
            ("single-call", "reasoning", "text-before-call", "numeric-arguments"),
            strip(SINGLE),
            kwargs=kw,
        ),
        Case("parallel-calls", ("parallel-calls", "reasoning"), strip(PARALLEL), kwargs=kw),
        Case(
            "unicode-value",
            ("single-call", "unicode", "string-escapes", "reasoning"),
            strip(UNICODE),
            kwargs=kw,
        ),
        Case(
            "markers-in-arguments",
            ("single-call", "marker-in-arguments", "reasoning"),
            strip(markers_message(markers_inside)),
            kwargs=kw,
        ),
        Case(
            "nested-arguments",
            ("single-call", "nested-json", "text-before-call", "reasoning"),
            strip(NESTED),
            kwargs=kw,
        ),
        Case("empty-arguments", ("single-call", "empty-arguments", "reasoning"), strip(EMPTY), kwargs=kw),
        Case(
            "truncated-second-call",
            ("truncated", "parallel-calls", "reasoning"),
            strip(PARALLEL),
            kwargs=kw,
            cut_before=cut_second_call,
            expected=None
            if list_format
            else {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            expected_error="max_tokens cut the call list; the list is one JSON document, so no call can be recovered"
            if list_format
            else None,
            notes="Cut by max_tokens inside the second call: "
            + (
                "a cut list is not valid JSON, so not even the first call is returned."
                if list_format
                else "the first, complete call is kept."
            ),
        ),
        Case(
            "after-tool-result",
            ("multi-turn", "no-call", "reasoning", "unicode"),
            strip(AFTER_TOOL),
            history=tuple(strip(m) if m["role"] == "assistant" else m for m in HISTORY),
            kwargs=kw,
        ),
    ]
    if reasoning:
        text = LONG_REASONING["reasoning_content"]
        cases.append(
            Case(
                "truncated-in-reasoning",
                ("truncated", "reasoning"),
                LONG_REASONING,
                kwargs=kw,
                cut_before=cut_reasoning,
                expected={"content": None, "reasoning_content": text[: text.index(cut_reasoning)]},
                notes="Cut by max_tokens inside the reasoning: the reasoning so far is kept, nothing else.",
            )
        )
    known, notes = known or {}, notes or {}
    out = []
    for c in cases:
        if not reasoning:
            name = "content-only" if c.name == "thinking-content" else c.name
            c = dataclasses.replace(
                c, name=name, tags=tuple(t for t in c.tags if t != "reasoning") or ("no-call",)
            )
        if c.name in skip:
            continue
        if c.name in known:
            c = dataclasses.replace(c, known_failure=known[c.name])
        if c.name in notes:
            c = dataclasses.replace(c, notes=(c.notes + " " + notes[c.name]).strip())
        out.append(c)
    return out


def shape_case(
    name: str,
    tags: tuple[str, ...],
    raw: str,
    prompt: str,
    where: str,
    expected: dict[str, Any],
    notes: str = "",
) -> Case:
    """An output shape the template cannot render (a model skipping a block, an empty reasoning, ...),
    written for chatparse after the engine code or test at ``where`` (which shows the shape; no text
    of it is copied)."""
    return Case(name, tags, raw=raw, generation_prompt=prompt, expected=expected, source=where, notes=notes)


# --------------------------------------------------------------------------------------------------
# MiniMax M2

MINIMAX_M2 = Family(
    slug="minimax-m2",
    name="MiniMax M2 (<minimax:tool_call> invoke/parameter)",
    entry="minimax_m2",
    models=("MiniMaxAI/MiniMax-M2", "MiniMaxAI/MiniMax-M2.1"),
    template="MiniMaxAI-MiniMax-M2.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "MiniMax-M2.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/MiniMaxAI/MiniMax-M2",
    markers=(
        "]~b]ai",
        "[e~[",
        "<think>",
        "</think>",
        "<minimax:tool_call>",
        "</minimax:tool_call>",
        "<invoke name=",
        "</invoke>",
        "<parameter name=",
        "</parameter>",
    ),
    stops=("[e~[",),
    has_reasoning=True,
    stop="[e~[",
    cases=(
        *standard(
            markers_inside="</parameter> and </invoke> or <minimax:tool_call>",
            cut_second_call=">Asia/Tokyo</parameter>",
        ),
        shape_case(
            "empty-reasoning",
            ("no-call", "reasoning-prefilled"),
            "\n</think>\n\nSure, the meeting is at noon.\nAnything else?",
            "]~b]ai\n<think>\n",
            LLAMA_CPP_TESTS + "#L5443",
            {
                "content": "Sure, the meeting is at noon.\nAnything else?",
                "reasoning_content": None,
                "tool_calls": [],
            },
            notes="The model closes the pre-opened block at once (no reasoning).",
        ),
        shape_case(
            "empty-reasoning-call",
            ("single-call", "numeric-arguments", "reasoning-prefilled"),
            '\n</think>\n\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
            '<parameter name="days">2</parameter>\n</invoke>\n</minimax:tool_call>',
            "]~b]ai\n<think>\n",
            LLAMA_CPP_TESTS + "#L5454",
            {
                "content": None,
                "reasoning_content": None,
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}],
            },
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# MiniMax M3

NO_REASONING = assistant("Hello! How can I help?")
NO_REASONING_CALL = assistant(None, None, [call("get_time", timezone="Europe/Paris", utc=True)])

MINIMAX_M3 = Family(
    slug="minimax-m3",
    name="MiniMax M3 (]<]minimax[>[ namespaced invoke)",
    entry="minimax_m3",
    models=("MiniMaxAI/MiniMax-M3",),
    template="MiniMaxAI-MiniMax-M3.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "MiniMax-M3.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/MiniMaxAI/MiniMax-M3",
    markers=("]~b]ai", "[e~[", "<mm:think>", "</mm:think>", "]<]minimax[>["),
    stops=("[e~[",),
    has_reasoning=True,
    stop="[e~[",
    cases=(
        *standard(
            markers_inside="<tool_call> and </invoke> or </mm:think>",
            cut_second_call="Asia/Tokyo]<]minimax[>[</timezone>",
            known={
                "nested-arguments": "list and object arguments are namespaced child elements "
                "(<item>, <key>); xml-inline keeps them as raw text (no recursive XML values yet)"
            },
        ),
        Case(
            "adaptive-no-thinking",
            ("no-call",),
            NO_REASONING,
            notes="Adaptive mode (the default): a turn without reasoning starts with a bare </mm:think>.",
        ),
        Case(
            "thinking-enabled-prefill",
            ("single-call", "reasoning", "reasoning-prefilled"),
            SINGLE,
            kwargs={"thinking_mode": "enabled"},
            notes="thinking_mode='enabled': the prompt pre-writes <mm:think>.",
        ),
        Case(
            "thinking-disabled-prefill",
            ("single-call", "reasoning-prefilled"),
            NO_REASONING_CALL,
            kwargs={"thinking_mode": "disabled"},
            notes="thinking_mode='disabled': the prompt pre-writes </mm:think>.",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# Qwen3-Coder XML variants: Seed-OSS, Step 3.5, Nemotron 3

SPECIAL_1 = [{"name": "special_function", "arguments": {"arg1": 1}}]

SEED_OSS = Family(
    slug="seed-oss",
    name="ByteDance Seed-OSS (<seed:tool_call> with Qwen3-Coder XML)",
    entry="seed_oss",
    models=("ByteDance-Seed/Seed-OSS-36B-Instruct",),
    template="ByteDance-Seed-Seed-OSS-36B-Instruct.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "ByteDance-Seed-OSS.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/ByteDance-Seed/Seed-OSS-36B-Instruct",
    markers=(
        "<seed:bos>",
        "<seed:eos>",
        "<seed:think>",
        "</seed:think>",
        "<seed:tool_call>",
        "</seed:tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
    ),
    stops=("<seed:eos>",),
    has_reasoning=True,
    stop="<seed:eos>",
    cases=(
        *standard(
            markers_inside="<seed:tool_call> and </parameter> or </function>",
            cut_second_call=">Asia/Tokyo</parameter>",
            known={
                "nested-arguments": "the template writes list and dict arguments with Jinja's string filter "
                "(Python literals ['ana', 'bo'], {'room': '4F', 'remote': True}), which tool coercion "
                "cannot read as JSON"
            },
        ),
        Case(
            "content-only",
            ("no-call",),
            NO_REASONING,
            notes="No reasoning: the answer follows the role line.",
        ),
        shape_case(
            "no-reasoning-parallel",
            ("parallel-calls", "numeric-arguments"),
            "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Lima</parameter>\n</function>\n</seed:tool_call>\n"
            "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Quito</parameter>\n<parameter=days>4</parameter>\n"
            "</function>\n</seed:tool_call>",
            "<seed:bos>assistant\n",
            LLAMA_CPP_TESTS + "#L3464",
            {
                "content": None,
                "reasoning_content": None,
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Lima"}},
                    {"name": "get_weather", "arguments": {"city": "Quito", "days": 4}},
                ],
            },
            notes="Calls without a think block.",
        ),
        shape_case(
            "json-list-value",
            ("single-call", "nested-json"),
            "<seed:tool_call>\n<function=create_event>\n<parameter=title>Retro</parameter>\n"
            '<parameter=attendees>["kim", "lee"]</parameter>\n</function>\n</seed:tool_call>',
            "<seed:bos>assistant\n",
            LLAMA_CPP_TESTS + "#L3486",
            {
                "content": None,
                "reasoning_content": None,
                "tool_calls": [
                    {"name": "create_event", "arguments": {"title": "Retro", "attendees": ["kim", "lee"]}}
                ],
            },
            notes="A list value written as JSON (the engines' tests feed this shape; the template itself writes Python literals).",
        ),
    ),
)

STEP3P5 = Family(
    slug="step3p5",
    name="StepFun Step 3.5 (Qwen3-Coder XML, <think> pre-opened)",
    entry="step3p5",
    models=("stepfun-ai/Step-3.5-Flash",),
    template="stepfun-ai-Step-3.5-Flash.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "StepFun3.5-Flash.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/stepfun-ai/Step-3.5-Flash",
    markers=(
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
    ),
    stops=("<|im_end|>",),
    has_reasoning=True,
    stop="<|im_end|>",
    cases=(
        *standard(
            markers_inside="<tool_call> and </parameter> or </function>",
            cut_second_call="Asia/Tokyo\n</parameter>",
        ),
        Case(
            "empty-reasoning",
            ("no-call", "reasoning-prefilled"),
            NO_REASONING,
            notes="A turn without reasoning still closes the pre-opened block: '<think>\\n\\n</think>\\n'.",
        ),
        shape_case(
            "numeric-looking-string",
            ("single-call", "reasoning-prefilled", "numeric-arguments"),
            "Send the code.\n</think>\n<tool_call>\n<function=send_message>\n<parameter=to>\n0042\n</parameter>\n"
            "<parameter=text>\n5123123\n</parameter>\n</function>\n</tool_call>",
            "<|im_start|>assistant\n<think>\n",
            LLAMA_CPP_TESTS + "#L6615",
            {
                "content": None,
                "reasoning_content": "Send the code.",
                "tool_calls": [{"name": "send_message", "arguments": {"to": "0042", "text": "5123123"}}],
            },
            notes="Numeric-looking values stay strings when the schema says string.",
        ),
    ),
)

NEMOTRON3 = Family(
    slug="nemotron3",
    name="NVIDIA Nemotron 3 (Qwen3-Coder XML, <think> pre-opened)",
    entry="nemotron3",
    models=("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8"),
    template="nvidia-NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    markers=(
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
    ),
    stops=("<|im_end|>",),
    has_reasoning=True,
    stop="<|im_end|>",
    cases=(
        *standard(
            markers_inside="<tool_call> and </parameter> or </function>",
            cut_second_call="Asia/Tokyo\n</parameter>",
        ),
        Case(
            "thinking-off-call",
            ("single-call", "reasoning-prefilled"),
            NO_REASONING_CALL,
            kwargs={"enable_thinking": False},
            notes="enable_thinking=false pre-writes '<think></think>'.",
        ),
        Case(
            "thinking-off-content",
            ("no-call", "reasoning-prefilled"),
            NO_REASONING,
            kwargs={"enable_thinking": False},
        ),
        shape_case(
            "reasoning-then-call",
            ("single-call", "reasoning-prefilled"),
            "Check the clock.\n</think>\n<tool_call>\n<function=get_time>\n<parameter=timezone>\nUTC\n</parameter>\n</function>\n</tool_call>\n",
            "<|im_start|>assistant\n<think>\n",
            LLAMA_CPP_TESTS + "#L2728",
            {
                "content": None,
                "reasoning_content": "Check the clock.",
                "tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}],
            },
        ),
        Case(
            "repeated-think-opener",
            ("no-call", "reasoning-prefilled", "x-repeated-opener"),
            raw="<think>\nAlready open.\n</think>\nHello!",
            generation_prompt="<|im_start|>assistant\n<think>\n",
            expected={"content": "Hello!", "reasoning_content": "Already open.", "tool_calls": []},
            source="https://github.com/ollama/ollama/blob/fb30760996871fa9460115c753afd2c60d4ab0f7/model/parsers/nemotron3nano.go",
            source_revision="fb30760996871fa9460115c753afd2c60d4ab0f7",
            notes="The model writes <think> again although the prompt opened it; Ollama's parser skips it "
            "(maybeThinkingOpenAtBOL), so the marker never reaches the reasoning.",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# GLM-style <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>: Ling 3, Laguna, Hy3

GLM_MARKERS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
)

LING3 = Family(
    slug="ling3",
    name="inclusionAI Ling 3.0 (GLM-style calls)",
    entry="ling3",
    models=("inclusionAI/Ling-3.0-flash", "inclusionAI/Ling-3.0-tiny"),
    template="inclusionAI-Ling-3.0-flash.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "inclusionai-ling-3.0-flash.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/inclusionAI/Ling-3.0-flash",
    markers=("<role>", "</role>", "<|role_end|>", *GLM_MARKERS),
    stops=("<|role_end|>",),
    has_reasoning=True,
    stop="<|role_end|>",
    cases=(
        *standard(
            markers_inside="</arg_value> and </tool_call> or <arg_key>",
            cut_second_call=">Asia/Tokyo</arg_value>",
        ),
        Case(
            "thinking-off",
            ("single-call", "reasoning-prefilled"),
            NO_REASONING_CALL,
            kwargs={"enable_thinking": False},
            notes="Thinking off: the prompt pre-writes '<think></think>'.",
        ),
    ),
)

LAGUNA_XS2 = "poolside-Laguna-XS.2.jinja"
LAGUNA = Family(
    slug="poolside-laguna",
    name="Poolside Laguna (GLM-style calls in <assistant>)",
    entry="poolside_v1",
    models=("poolside/Laguna-S-2.1", "poolside/Laguna-XS.2"),
    template="poolside-Laguna-S-2.1.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "poolside-Laguna-S-2.1.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/poolside/Laguna-S-2.1",
    markers=("<assistant>", "</assistant>", "<user>", *GLM_MARKERS),
    stops=("</assistant>",),
    has_reasoning=True,
    stop="</assistant>",
    cases=(
        *standard(
            markers_inside="</arg_value> and </tool_call> or <arg_key>",
            cut_second_call=">Asia/Tokyo</arg_value>",
        ),
        Case(
            "xs2-thinking-call",
            ("single-call", "reasoning", "reasoning-prefilled", "text-before-call"),
            SINGLE,
            kwargs={"enable_thinking": True},
            template=LAGUNA_XS2,
            template_url=LLAMA_CPP_TEMPLATES + LAGUNA_XS2,
            notes="Laguna-XS.2 layout (newlines between the parts), thinking on: the prompt pre-writes '<think>'.",
        ),
        Case(
            "xs2-parallel",
            ("parallel-calls", "reasoning", "reasoning-prefilled"),
            PARALLEL,
            kwargs={"enable_thinking": True},
            template=LAGUNA_XS2,
            template_url=LLAMA_CPP_TEMPLATES + LAGUNA_XS2,
        ),
        Case(
            "xs2-default-no-thinking",
            ("no-call", "reasoning-prefilled"),
            NO_REASONING,
            template=LAGUNA_XS2,
            template_url=LLAMA_CPP_TEMPLATES + LAGUNA_XS2,
            notes="Laguna-XS.2 thinks only on request: the default prompt pre-writes '</think>'.",
        ),
        Case(
            "s21-thinking-off",
            ("single-call", "reasoning-prefilled"),
            NO_REASONING_CALL,
            kwargs={"enable_thinking": False},
            notes="Laguna-S-2.1 with thinking off: the prompt pre-writes '</think>'.",
        ),
    ),
)

HY3 = Family(
    slug="hy3",
    name="Tencent Hy3 (:opensource-suffixed tokens)",
    entry="hy3",
    models=("tencent/Hy3",),
    template="tencent-Hy3.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "tencent-Hy3.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/tencent/Hy3",
    markers=(
        "<｜hy_Assistant:opensource｜>",
        "<｜hy_eos:opensource｜>",
        "<think:opensource>",
        "</think:opensource>",
        "<tool_calls:opensource>",
        "</tool_calls:opensource>",
        "<tool_call:opensource>",
        "</tool_call:opensource>",
        "<tool_sep:opensource>",
        "<arg_key:opensource>",
        "</arg_key:opensource>",
        "<arg_value:opensource>",
        "</arg_value:opensource>",
        "<｜reasoning_mode:opensource｜>",
    ),
    stops=("<｜hy_eos:opensource｜>",),
    has_reasoning=True,
    stop="<｜hy_eos:opensource｜>",
    stop_optional=True,
    kwargs={"reasoning_effort": "high"},
    cases=(
        *standard(
            markers_inside="<tool_call> and </arg_value> or <tool_sep>",
            cut_second_call=">Asia/Tokyo</arg_value:opensource>",
        ),
        Case(
            "no-think-call",
            ("single-call", "reasoning-prefilled"),
            NO_REASONING_CALL,
            kwargs={"reasoning_effort": "no_think"},
            notes="reasoning_effort 'no_think' (the template's default) pre-writes an empty think block.",
        ),
        Case(
            "no-think-content",
            ("no-call", "reasoning-prefilled"),
            NO_REASONING,
            kwargs={"reasoning_effort": "no_think"},
        ),
        Case(
            "reasoning-mode-after-calls",
            ("single-call", "reasoning-prefilled", "x-trailer"),
            raw="Call it.</think:opensource><tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n"
            "<arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Paris</arg_value:opensource>\n"
            "</tool_call:opensource>\n</tool_calls:opensource><｜reasoning_mode:opensource｜>reasoning_effort:high",
            generation_prompt="<｜hy_Assistant:opensource｜><think:opensource>",
            expected={
                "content": None,
                "reasoning_content": "Call it.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
            },
            source=LLAMA_CPP_TEMPLATES + "tencent-Hy3.jinja#L116",
            source_revision=LLAMA_CPP,
            notes="With a reasoning effort and tools, the system prompt tells the model to end its calls with "
            "'</tool_calls:opensource><｜reasoning_mode:opensource｜>reasoning_effort:high' (template line 116); "
            "the trailer is not content. Composed from that instruction and a render of the call.",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# MiniCPM 5, Muse Glimmer

MINICPM5 = Family(
    slug="minicpm5",
    name="OpenBMB MiniCPM 5 (<function name=...><param name=...>)",
    entry="minicpm5",
    models=("openbmb/MiniCPM5-1B",),
    template="openbmb-MiniCPM5-1B.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "openbmb-MiniCPM5-1B.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/openbmb/MiniCPM5-1B",
    markers=(
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<function name=",
        "</function>",
        "<param name=",
        "</param>",
        "<![CDATA[",
        "]]>",
    ),
    stops=("<|im_end|>",),
    has_reasoning=True,
    stop="<|im_end|>",
    cases=(
        *standard(
            markers_inside="</param> and </function> or <function name=",
            cut_second_call=">Asia/Tokyo</param>",
            known={
                "nested-arguments": "the template writes list and dict arguments with Jinja's string filter "
                "(Python literals), which tool coercion cannot read as JSON"
            },
            notes={
                "unicode-value": "The value holds '<' and a newline, so the template wraps it in CDATA.",
                "markers-in-arguments": "The value holds '<', so the template wraps it in CDATA.",
            },
        ),
        Case("content-only", ("no-call",), NO_REASONING),
        Case(
            "thinking-on-prefill",
            ("single-call", "reasoning", "reasoning-prefilled", "text-before-call"),
            SINGLE,
            kwargs={"enable_thinking": True},
            notes="enable_thinking=true pre-writes '<think>\\n'.",
        ),
        Case(
            "thinking-off-prefill",
            ("single-call", "reasoning-prefilled"),
            NO_REASONING_CALL,
            kwargs={"enable_thinking": False},
            prefill_not_in_turn="<think>\n\n</think>\n\n",
            notes="enable_thinking=false pre-writes an empty think block (history turns omit it).",
        ),
    ),
)

GLIMMER = Family(
    slug="muse-glimmer",
    name="Meta Muse Glimmer (ATEM messages)",
    entry="muse_glimmer",
    models=("meta-models/Muse-Glimmer-30B",),
    template="meta-models-Muse-Glimmer-30B.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "muse-glimmer.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/meta-models/Muse-Glimmer-30B",
    markers=(
        "<|start|>",
        "<|message|>",
        "<|eom|>",
        "<|eot|>",
        "to=self",
        "<atem:function_calls>",
        "</atem:function_calls>",
        "<atem:invoke",
        "</atem:invoke>",
        "<atem:parameter",
        "</atem:parameter>",
    ),
    stops=("<|eot|>",),
    has_reasoning=True,
    stop="<|eot|>",
    cases=(
        *standard(
            markers_inside="</atem:parameter> and </atem:invoke> or <|eom|>",
            cut_second_call=">Asia/Tokyo</atem:parameter>",
            call_content=False,
            notes={"thinking-content": "The answer goes to=user; the reasoning to=self."},
        ),
        Case(
            "invoke-quoted-in-reasoning",
            ("no-call", "reasoning", "marker-in-arguments"),
            assistant("Paris, as usual.", 'I could write <atem:invoke name="get_weather"> but I know it.'),
            expected={"reasoning_content": 'I could write <atem:invoke name="get_weather"> but I know it.'},
            notes="An invoke quoted in the to=self channel is reasoning text, not a call (channel scoping).",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# GigaChat 3 / 3.1

GIGACHAT31 = "ai-sage-GigaChat3.1-10B-A1.8B.jinja"
GIGA_TRUNC = assistant("Checking.", None, [call("get_time", timezone="Asia/Tokyo", utc=False)])

GIGACHAT3 = Family(
    slug="gigachat3",
    name="Sber GigaChat 3 / 3.1 (one JSON call per turn)",
    entry="gigachat3",
    models=("ai-sage/GigaChat3-10B-A1.8B", "ai-sage/GigaChat3.1-10B-A1.8B"),
    template="ai-sage-GigaChat3-10B-A1.8B.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "GigaChat3-10B-A1.8B.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/ai-sage/GigaChat3-10B-A1.8B",
    markers=("<|role_sep|>", "<|message_sep|>", "<|function_call|>", "function call<|role_sep|>", "</s>"),
    stops=("<|message_sep|>",),
    has_reasoning=False,
    stop="<|message_sep|>",
    single_call=True,
    cases=(
        *standard(
            reasoning=False,
            markers_inside="<|message_sep|> and <|function_call|>",
            cut_second_call="",
            skip=("parallel-calls", "truncated-second-call"),
        ),
        Case("call-only", ("single-call",), NO_REASONING_CALL),
        Case(
            "truncated-in-arguments",
            ("truncated", "single-call", "text-before-call"),
            GIGA_TRUNC,
            cut_before='/Tokyo", "utc"',
            expected={"content": "Checking.", "tool_calls": []},
            notes="Cut by max_tokens inside the arguments: the text is kept, no call.",
        ),
        *(
            dataclasses.replace(
                c,
                name="v31-" + c.name,
                template=GIGACHAT31,
                template_url=LLAMA_CPP_TEMPLATES + "GigaChat3.1-10B-A1.8B.jinja",
            )
            for c in standard(
                reasoning=False,
                markers_inside="<|function_call|> and <|message_sep|>",
                cut_second_call="",
                skip=(
                    "parallel-calls",
                    "truncated-second-call",
                    "after-tool-result",
                    "nested-arguments",
                    "empty-arguments",
                ),
            )
        ),
        Case(
            "v31-truncated-in-arguments",
            ("truncated", "single-call", "text-before-call"),
            GIGA_TRUNC,
            cut_before='/Tokyo", "utc"',
            expected={"content": "Checking.", "tool_calls": []},
            template=GIGACHAT31,
            template_url=LLAMA_CPP_TEMPLATES + "GigaChat3.1-10B-A1.8B.jinja",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# Apriel 1.5 / 1.6

APRIEL15 = "ServiceNow-AI-Apriel-1.5-15b-Thinker.jinja"
APRIEL15_URL = LLAMA_CPP_TEMPLATES + "unsloth-Apriel-1.5.jinja"

APRIEL = Family(
    slug="apriel",
    name="ServiceNow Apriel 1.5 / 1.6 Thinker",
    entry="apriel",
    models=("ServiceNow-AI/Apriel-1.6-15b-Thinker", "ServiceNow-AI/Apriel-1.5-15b-Thinker"),
    template="ServiceNow-AI-Apriel-1.6-15b-Thinker.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "Apriel-1.6-15b-Thinker-fixed.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/ServiceNow-AI/Apriel-1.6-15b-Thinker",
    markers=(
        "<|begin_assistant|>",
        "<|assistant|>",
        "<|end|>",
        "[BEGIN FINAL RESPONSE]",
        "[END FINAL RESPONSE]",
        "<tool_calls>",
        "</tool_calls>",
    ),
    stops=("<|end|>",),
    has_reasoning=True,
    stop="<|end|>",
    stop_optional=True,
    prefill_not_in_turn="Here are my reasoning steps:\n",
    special={"bos_token": "<s>", "eos_token": "</s>"},  # Apriel's Mistral-style tokenizer
    cases=(
        *standard(
            markers_inside="</tool_calls> and [BEGIN FINAL RESPONSE]",
            cut_second_call='"Asia/Tokyo"',
            list_format=True,
        ),
        Case(
            "v15-content",
            ("no-call",),
            NO_REASONING,
            template=APRIEL15,
            template_url=APRIEL15_URL,
            prefill_not_in_turn="",
        ),
        Case(
            "v15-text-parallel",
            ("parallel-calls", "text-before-call"),
            assistant(
                "Checking both.",
                None,
                [call("get_weather", city="Paris"), call("get_time", timezone="UTC", utc=True)],
            ),
            template=APRIEL15,
            template_url=APRIEL15_URL,
            prefill_not_in_turn="",
        ),
        shape_case(
            "v16-reasoning-call",
            ("single-call", "reasoning-prefilled"),
            'Look it up.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{"name": "get_time", "arguments": {"timezone": "UTC"}}]</tool_calls>',
            "\n<|begin_assistant|>\nHere are my reasoning steps:\n",
            LLAMA_CPP_TESTS + "#L6219",
            {
                "content": None,
                "reasoning_content": "Look it up.",
                "tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}],
            },
            notes="llama.cpp keeps the prompt's 'Here are my reasoning steps:' in the reasoning; here the prompt text is not reasoning.",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# Nemotron Nano v2

NANO_V2 = Family(
    slug="nemotron-nano-v2",
    name="NVIDIA Nemotron Nano v2 (<TOOLCALL> JSON list)",
    entry="nemotron_nano_v2",
    models=("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "nvidia/NVIDIA-Nemotron-Nano-12B-v2"),
    template="nvidia-NVIDIA-Nemotron-Nano-9B-v2.jinja",
    template_url=LLAMA_CPP_TEMPLATES + "NVIDIA-Nemotron-Nano-v2.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    markers=(
        "<SPECIAL_10>",
        "<SPECIAL_11>",
        "<SPECIAL_12>",
        "<think>",
        "</think>",
        "<TOOLCALL>",
        "</TOOLCALL>",
    ),
    stops=("<SPECIAL_12>",),
    has_reasoning=True,
    stop="<SPECIAL_12>",
    prefill_not_in_turn="<think>\n",
    history_reasoning="{reasoning}\n</think>\n\n",
    cases=(
        *standard(
            markers_inside="</TOOLCALL> and </think> or <TOOLCALL>[",
            cut_second_call='"Asia/Tokyo"',
            list_format=True,
            skip=("truncated-in-reasoning",),
        ),
        Case(
            "truncated-in-reasoning",
            ("truncated", "reasoning", "reasoning-prefilled"),
            raw="The user wants the current weather",
            generation_prompt="<SPECIAL_11>Assistant\n<think>\n",
            expected={
                "content": None,
                "reasoning_content": "The user wants the current weather",
                "tool_calls": [],
            },
            source=f"{LLAMA_CPP_TESTS}#L5852",
            source_revision=LLAMA_CPP,
            notes="Cut by max_tokens inside the pre-opened reasoning.",
        ),
        shape_case(
            "reasoning-then-call",
            ("single-call", "reasoning-prefilled"),
            'Check the clock.\n</think>\n<TOOLCALL>[{"name": "get_time", "arguments": {"timezone": "UTC"}}]</TOOLCALL>',
            "<SPECIAL_11>Assistant\n<think>\n",
            LLAMA_CPP_TESTS + "#L5852",
            {
                "content": None,
                "reasoning_content": "Check the clock.",
                "tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}],
            },
            notes="A single newline after </think>, as the engine tests have it.",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# Llama 4 JSON

VLLM_EXAMPLES = "https://github.com/vllm-project/vllm/blob/{commit}/examples/{name}"

LLAMA4_JSON = Family(
    slug="llama4-json",
    name="Llama 4 JSON tool calls",
    entry="llama4_json",
    models=("meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8"),
    template="vllm-tool_chat_template_llama4_json.jinja",
    template_url=VLLM_EXAMPLES.format(
        commit="97ce4234ca0d8ba7c8c8d25ce42fb371fb7e735b", name="tool_chat_template_llama4_json.jinja"
    ),
    template_revision="97ce4234ca0d8ba7c8c8d25ce42fb371fb7e735b",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E-Instruct",
    markers=(
        "<|header_start|>",
        "<|header_end|>",
        "<|eot|>",
        "<|eom|>",
        "<|python_start|>",
        "<|python_end|>",
    ),
    stops=("<|eot|>", "<|eom|>"),
    has_reasoning=False,
    stop="<|eot|>",
    special={"bos_token": "<|begin_of_text|>"},
    by_template_only=True,
    cases=(
        *standard(
            reasoning=False,
            markers_inside='<|eot|> and }{"name": "x", "parameters": {}}',
            cut_second_call='"Asia/Tokyo"',
        ),
        Case(
            "semicolon-separated",
            ("parallel-calls", "x-separator"),
            raw='{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {"timezone": "UTC"}}',
            generation_prompt="<|header_start|>assistant<|header_end|>\n\n",
            expected={
                "content": None,
                "reasoning_content": None,
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Paris"}},
                    {"name": "get_time", "arguments": {"timezone": "UTC"}},
                ],
            },
            source="https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/tool_parsers/llama_tool_parser.py",
            source_revision="v0.33.0",
            notes="vLLM's llama JSON parser also splits calls at ';' (its docstring: 'multiple JSONs separated by semicolons').",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# Granite 20B function calling

GRANITE_20B_FC = Family(
    slug="granite-20b-fc",
    name="IBM Granite 20B Function Calling (<function_call> JSON)",
    entry="granite_20b_fc",
    models=("ibm-granite/granite-20b-functioncalling",),
    template="vllm-tool_chat_template_granite_20b_fc.jinja",
    template_url=VLLM_EXAMPLES.format(
        commit="1a7f9e3b75fcf32628278cc578b863d2753ebe15", name="tool_chat_template_granite_20b_fc.jinja"
    ),
    template_revision="1a7f9e3b75fcf32628278cc578b863d2753ebe15",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/ibm-granite/granite-20b-functioncalling",
    markers=("ASSISTANT:", "USER:", "<function_call>", "<function_response>", "<|endoftext|>"),
    stops=("<|endoftext|>",),
    has_reasoning=False,
    stop="<|endoftext|>",
    prefill_not_in_turn=" \n",
    special={"bos_token": ""},
    cases=tuple(
        standard(
            reasoning=False,
            call_content=False,
            markers_inside="<function_call> and <|endoftext|>",
            cut_second_call='"Asia/Tokyo"',
            notes={"content-only": "The template writes '\\nASSISTANT: ' + the answer + ' <|endoftext|>'."},
        )
    ),
)

# --------------------------------------------------------------------------------------------------
# InternLM / Intern-S1

SGLANG = (
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/function_call/internlm_detector.py"
)

INTERNLM = Family(
    slug="internlm",
    name="InternLM 2 / 3, Intern-S1 (<|action_start|><|plugin|>)",
    entry="internlm",
    models=("internlm/internlm2_5-7b-chat", "internlm/internlm3-8b-instruct", "internlm/Intern-S1"),
    template="vllm-tool_chat_template_internlm2_tool.jinja",
    template_url=VLLM_EXAMPLES.format(
        commit="87b63520aba48bae9d55663edf0d8f65d3d43ac2", name="tool_chat_template_internlm2_tool.jinja"
    ),
    template_revision="87b63520aba48bae9d55663edf0d8f65d3d43ac2",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/internlm/internlm2_5-7b-chat",
    markers=(
        "<|im_start|>",
        "<|im_end|>",
        "<|action_start|>",
        "<|action_end|>",
        "<|plugin|>",
        "<think>",
        "</think>",
    ),
    stops=("<|im_end|>",),
    has_reasoning=True,
    stop="<|im_end|>",
    json_arguments=True,
    special={"bos_token": "<s>"},
    cases=(
        *standard(
            reasoning=False,
            markers_inside="<|action_end|> and <|action_start|><|plugin|>",
            cut_second_call='"Asia/Tokyo"',
        ),
        Case(
            "spaced-marker-parameters-key",
            ("single-call", "text-before-call"),
            raw='Checking Rome.<|action_start|> <|plugin|>\n{"name": "get_weather", "parameters": {"city": "Rome"}}<|action_end|>',
            generation_prompt="<|im_start|>assistant\n",
            expected={
                "content": "Checking Rome.",
                "reasoning_content": None,
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}],
            },
            source=SGLANG + "#L36",
            source_revision="v0.5.23",
            notes="The form SGLang's InternlmDetector documents: a space after <|action_start|> and the 'parameters' key.",
        ),
        Case(
            "intern-s1-thinking",
            ("single-call", "reasoning"),
            raw='<think>\nThe user wants Tokyo.\n</think>\n\n<|action_start|><|plugin|>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}<|action_end|>',
            generation_prompt="<|im_start|>assistant\n",
            expected={
                "content": None,
                "reasoning_content": "The user wants Tokyo.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Tokyo"}}],
            },
            source="https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/parser/reasoning_parser.py#L2302",
            source_revision="v0.5.23",
            notes="Intern-S1 reasons in <think> (SGLang's interns1 reasoning parser is the qwen3 one); composed from the two parsers' documented forms.",
        ),
    ),
)

# --------------------------------------------------------------------------------------------------
# Round 2 (breadth2): GigaChat 3.5, Apertus, Hunyuan-A13B, xLAM (rendered from real templates), and
# LongCat, Jamba, Step 3, MiMo-V2, K2 Horizon (no reachable template: written after the engines' code)

VLLM_CODE = "https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/"
SGLANG_CODE = "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/"


def _value(value: Any) -> str:
    """An argument value as XML-ish formats write it: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _calls(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or ()]


def _json_call(name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a family without a reachable chat template writes an assistant message (its ``writer``):
    ``head`` (the reasoning and its closer), the text, ``gap`` when text comes before calls, then the
    calls: ``calls_open`` + each ``call`` joined by ``calls_sep`` + ``calls_close``.

    ``call`` may use ``{name}``, ``{json}`` (``{"name": ..., "arguments": ...}``) and ``{params}``,
    each argument written as ``param`` (``{key}``, ``{value}``: strings as they are, else JSON).
    ``head`` uses ``{reasoning}``; with ``head_always`` it is written even without reasoning (the
    prompt pre-opened the block, so the model always closes it).
    """

    call: str
    param: str = ""
    calls_open: str = ""
    calls_sep: str = ""
    calls_close: str = ""
    head: str = ""
    head_always: bool = False
    lead: str = ""
    gap: str = ""

    def __call__(self, message: dict[str, Any]) -> str:
        reasoning = message.get("reasoning_content") or ""
        out = self.head.format(reasoning=reasoning) if reasoning or self.head_always else ""
        out += self.lead + (message.get("content") or "")
        calls = [
            self.call.format(
                name=name,
                json=_json_call(name, arguments),
                params="".join(self.param.format(key=k, value=_value(v)) for k, v in arguments.items()),
            )
            for name, arguments in _calls(message)
        ]
        if not calls:
            return out
        return (
            out + (self.gap if out else "") + self.calls_open + self.calls_sep.join(calls) + self.calls_close
        )


GC35 = "ai-sage-GigaChat3.5.jinja"
GC35_URL = "https://github.com/ajpqs/test_llama.cpp/blob/ba78d0e11b1d767383f65b6213b5645bcffb6b4d/models/templates/GigaChat3.5.jinja"

GIGACHAT35 = Family(
    slug="gigachat35",
    name="Sber GigaChat 3.5 (GCML invoke/parameter)",
    entry="gigachat35",
    models=("ai-sage/GigaChat3.5",),
    template=GC35,
    template_url=GC35_URL,
    template_revision="ba78d0e11b1d767383f65b6213b5645bcffb6b4d",
    template_license="MIT",
    publisher="https://huggingface.co/ai-sage",
    markers=(
        "<|role_sep|>",
        "<|message_sep|>",
        "<think>",
        "</think>",
        "<｜GCML｜tool_calls>",
        "</｜GCML｜tool_calls>",
        "<｜GCML｜invoke",
        "</｜GCML｜invoke>",
        "<｜GCML｜parameter",
        "</｜GCML｜parameter>",
    ),
    stops=("<|message_sep|>", "</s>"),
    has_reasoning=True,
    stop="</s>",
    kwargs={"reasoning": True},
    special={"bos_token": "<s>", "eos_token": "</s>"},
    cases=(
        *standard(
            markers_inside="</｜GCML｜parameter> and </｜GCML｜invoke> or <|message_sep|>",
            cut_second_call=">Asia/Tokyo</｜GCML｜parameter>",
            notes={
                "nested-arguments": 'Non-string values are written as JSON with string="false" and read back as JSON.',
                "thinking-content": "reasoning=true: the prompt pre-writes '<think>'.",
            },
        ),
        Case(
            "instant-content",
            ("no-call",),
            NO_REASONING,
            kwargs={"reasoning": False},
            notes="reasoning=false (the template's default): the prompt is 'assistant<|role_sep|>\\n', no think block.",
        ),
        Case(
            "instant-call",
            ("single-call", "numeric-arguments"),
            NO_REASONING_CALL,
            kwargs={"reasoning": False},
        ),
        shape_case(
            "gcml-opened-in-reasoning",
            ("single-call", "reasoning-prefilled", "x-unclosed-reasoning"),
            'Check Tokyo.\n<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_time">\n'
            '<｜GCML｜parameter name="timezone" string="true">Asia/Tokyo</｜GCML｜parameter>\n'
            "</｜GCML｜invoke>\n</｜GCML｜tool_calls>",
            "assistant<|role_sep|>\n<think>",
            SGLANG_CODE + "function_call/gigachat35_detector.py",
            {
                "content": None,
                "reasoning_content": "Check Tokyo.",
                "tool_calls": [{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}],
            },
            notes="The model skips '</think>' and starts the call block: the block ends the reasoning (SGLang finds calls anywhere after the opener).",
        ),
    ),
)

APERTUS_T = "swiss-ai-Apertus-8B-Instruct-2509.jinja"


def _blocks(*blocks: tuple[str, str]) -> dict[str, Any]:
    return {"blocks": [{"type": kind, "text": text} for kind, text in blocks]}


APERTUS = Family(
    slug="apertus",
    name="Swiss AI Apertus (function name as the JSON key)",
    entry="apertus",
    models=("swiss-ai/Apertus-8B-Instruct-2509", "swiss-ai/Apertus-70B-Instruct-2509"),
    template=APERTUS_T,
    template_url=LLAMA_CPP_TEMPLATES + "Apertus-8B-Instruct.jinja",
    template_revision=LLAMA_CPP,
    template_license="MIT",
    publisher="https://huggingface.co/swiss-ai/Apertus-8B-Instruct-2509",
    markers=(
        "<|assistant_start|>",
        "<|assistant_end|>",
        "<|user_start|>",
        "<|inner_prefix|>",
        "<|inner_suffix|>",
        "<|tools_prefix|>",
        "<|tools_suffix|>",
    ),
    stops=("<|assistant_end|>",),
    has_reasoning=True,
    stop="<|assistant_end|>",
    stop_optional=True,
    special={"bos_token": "<s>"},
    cases=(
        *standard(
            reasoning=False,
            markers_inside='<|tools_suffix|> and [{"x": {}}]',
            cut_second_call='"Asia/Tokyo"',
            list_format=True,
            skip=("after-tool-result",),
        ),
        Case(
            "deliberation-content",
            ("reasoning", "no-call"),
            {
                "role": "assistant",
                "content": _blocks(
                    ("thoughts", "Simple fact."), ("response", "Paris is the capital of France.")
                ),
            },
            kwargs={"enable_thinking": True},
            expected={"content": "Paris is the capital of France.", "reasoning_content": "Simple fact."},
            notes="Reasoning exists only in the template's 'blocks' content: thoughts after <|inner_prefix|>, the response after <|inner_suffix|>.",
        ),
        Case(
            "deliberation-call",
            ("reasoning", "single-call", "numeric-arguments"),
            {
                "role": "assistant",
                "content": _blocks(("thoughts", "The user wants the weather.")),
                "tool_calls": [call("get_weather", city="Paris", days=3)],
            },
            kwargs={"enable_thinking": True},
            expected={"content": None, "reasoning_content": "The user wants the weather."},
            notes="A call made while thinking follows the thoughts directly (no <|inner_suffix|>).",
        ),
        Case(
            "deliberation-truncated",
            ("reasoning", "truncated"),
            {
                "role": "assistant",
                "content": _blocks(("thoughts", LONG_REASONING["reasoning_content"]), ("response", "Done.")),
            },
            kwargs={"enable_thinking": True},
            cut_before=" in Paris and the time",
            expected={"content": None, "reasoning_content": "The user wants the current weather"},
            notes="Cut by max_tokens inside the thoughts.",
        ),
        shape_case(
            "after-tool-result",
            ("multi-turn", "no-call", "unicode"),
            "It is sunny and 21 °C in Paris.",
            '<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>[{"temperature": 21, "sky": "sunny"}]<|assistant_start|>',
            LLAMA_CPP_TEMPLATES + "Apertus-8B-Instruct.jinja",
            {"content": "It is sunny and 21 °C in Paris.", "reasoning_content": None, "tool_calls": []},
            notes="The template writes tool results inside the assistant turn and ends the prompt with another <|assistant_start|> (a render of this turn does not continue the prompt, so it is written out).",
        ),
    ),
)

HUNYUAN_T = "tencent-Hunyuan-A13B-Instruct.jinja"
HUNYUAN_SRC = "https://github.com/Tencent-Hunyuan/Hunyuan-A13B/blob/2798f3c8b6a69e0ce93950b0d2417203cf950fa0/"
HUNYUAN_CALL = '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}]</tool_calls>'
PARIS_TOKYO = [
    {"name": "get_weather", "arguments": {"city": "Paris"}},
    {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}},
]

HUNYUAN_A13B = Family(
    slug="hunyuan-a13b",
    name="Tencent Hunyuan-A13B (<think>/<answer>, JSON list in <tool_calls>)",
    entry="hunyuan_a13b",
    models=("tencent/Hunyuan-A13B-Instruct",),
    template=HUNYUAN_T,
    template_url=HUNYUAN_SRC + "models/tokenizer_config.json",
    template_revision="2798f3c8b6a69e0ce93950b0d2417203cf950fa0",
    template_license="LicenseRef-tencent-hunyuan-a13b",
    publisher="https://huggingface.co/tencent/Hunyuan-A13B-Instruct",
    markers=(
        "<|extra_0|>",
        "<|extra_4|>",
        "<|eos|>",
        "<think>",
        "</think>",
        "<answer>",
        "</answer>",
        "<tool_calls>",
        "</tool_calls>",
        "助手：",
    ),
    stops=("<|eos|>",),
    has_reasoning=True,
    stop="<|eos|>",
    cases=(
        *standard(
            reasoning=False,
            markers_inside="</tool_calls> and 助手： or </answer>",
            cut_second_call='"Asia/Tokyo"',
            list_format=True,
            notes={
                "content-only": "The template renders a text answer as '助手：' + the text (history form, no think block).",
            },
        ),
        shape_case(
            "think-answer",
            ("reasoning", "no-call", "unicode"),
            "<think>\nThe user asks for a fact.\n</think>\n<answer>\n助手：巴黎是法国的首都。\n</answer>",
            "",
            HUNYUAN_SRC + "train/README.md",
            {
                "content": "巴黎是法国的首都。",
                "reasoning_content": "The user asks for a fact.",
                "tool_calls": [],
            },
            notes="The documented slow-thinking layout '<think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>', with the '助手：' prefix the tool system prompt asks for: both are cut.",
        ),
        shape_case(
            "think-answer-calls",
            ("reasoning", "parallel-calls"),
            "<think>\nTwo lookups.\n</think>\n<answer>\n" + HUNYUAN_CALL + "\n</answer>",
            "",
            VLLM_CODE + "tool_parsers/hunyuan_a13b_tool_parser.py",
            {"content": None, "reasoning_content": "Two lookups.", "tool_calls": PARIS_TOKYO},
            notes="Calls in the answer block (vLLM detects 'answer>\\n<').",
        ),
        shape_case(
            "no-think-prefill",
            ("reasoning-prefilled", "no-call"),
            "<answer>\n助手：Hello! How can I help?\n</answer>",
            "<|extra_0|><think>\n\n</think>\n",
            HUNYUAN_SRC + "models/tokenizer_config.json",
            {"content": "Hello! How can I help?", "reasoning_content": None, "tool_calls": []},
            notes="enable_thinking=false: the prompt pre-writes '<think>\\n\\n</think>\\n'; the reply starts with <answer>.",
        ),
        shape_case(
            "fast-think-call",
            ("single-call", "text-before-call"),
            '<think>\n\n</think>\n<answer>\nLet me check.<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}]</tool_calls>\n</answer>',
            "",
            HUNYUAN_SRC + "train/README.md",
            {
                "content": "Let me check.",
                "reasoning_content": None,
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}],
            },
            notes="'/no_think' in the prompt: the model writes an empty think block itself.",
        ),
        shape_case(
            "truncated-in-reasoning",
            ("reasoning", "truncated"),
            "<think>\nThe user wants the current weather",
            "",
            VLLM_CODE + "reasoning/hunyuan_a13b_reasoning_parser.py",
            {"content": None, "reasoning_content": "The user wants the current weather", "tool_calls": []},
            notes="Cut by max_tokens inside the think block.",
        ),
        shape_case(
            "call-quoted-in-reasoning",
            ("reasoning", "single-call", "marker-in-arguments"),
            '<think>\nI would put it in a <tool_calls> block.\n</think>\n<answer>\n<tool_calls>[{"name": "get_time", "arguments": {"timezone": "UTC"}}]</tool_calls>\n</answer>',
            "",
            VLLM_CODE + "tool_parsers/hunyuan_a13b_tool_parser.py",
            {
                "content": None,
                "reasoning_content": "I would put it in a <tool_calls> block.",
                "tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}],
            },
            notes="A <tool_calls> that is not followed by a JSON list inside the think block stays reasoning text (vLLM ignores calls inside <think>; here a <tool_calls>[ in the reasoning would end it, the unclosed-reasoning rule).",
        ),
    ),
)

XLAM_QWEN = "vllm-tool_chat_template_xlam_qwen.jinja"
XLAM_QWEN_URL = VLLM_EXAMPLES.format(
    commit="31106f4f486decd092d235ea4b8a729ce5342158", name=XLAM_QWEN[len("vllm-") :]
)

XLAM = Family(
    slug="xlam",
    name="Salesforce xLAM-2 (bare JSON call list)",
    entry="xlam",
    models=("Salesforce/Llama-xLAM-2-8b-fc-r", "Salesforce/xLAM-2-32b-fc-r"),
    template="vllm-tool_chat_template_xlam_llama.jinja",
    template_url=VLLM_EXAMPLES.format(
        commit="466716c2bb5f3d191eeaf25459ec6c3bb09f11d7", name="tool_chat_template_xlam_llama.jinja"
    ),
    template_revision="466716c2bb5f3d191eeaf25459ec6c3bb09f11d7",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/Salesforce/Llama-xLAM-2-8b-fc-r",
    markers=("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>", "```"),
    stops=("<|eot_id|>", "<|im_end|>"),
    has_reasoning=False,
    stop="<|eot_id|>",
    special={"bos_token": "<|begin_of_text|>"},
    cases=(
        *standard(
            reasoning=False,
            call_content=False,
            markers_inside='<|eot_id|> and }, {"name": "x"}]',
            cut_second_call='"Asia/Tokyo"',
            list_format=True,
            notes={
                "content-only": "A text answer is the text; with calls the template writes only the list."
            },
        ),
        Case(
            "empty-call-list",
            ("no-call", "x-empty-list"),
            {"role": "assistant", "content": None, "tool_calls": []},
            expected={"content": None, "tool_calls": []},
            notes="An assistant turn with an empty tool_calls list renders as '[]\\n': no call, no content.",
        ),
        shape_case(
            "fenced-list",
            ("single-call", "x-fenced"),
            '```json\n[{"name": "get_time", "arguments": {"timezone": "UTC"}}]\n```',
            "<|im_start|>assistant\n",
            VLLM_CODE + "tool_parsers/xlam_tool_parser.py",
            {
                "content": None,
                "reasoning_content": None,
                "tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}],
            },
            notes="vLLM's xlam parser also reads the list inside a ```json fence.",
        ),
        shape_case(
            "bracket-text",
            ("no-call",),
            "[1] Paris is the capital of France.",
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
            VLLM_CODE + "tool_parsers/xlam_tool_parser.py",
            {"content": "[1] Paris is the capital of France.", "reasoning_content": None, "tool_calls": []},
            notes="A reply that starts with '[' but not with a call list is text.",
        ),
    ),
)


write_longcat = Layout(call="<longcat_tool_call>\n{json}\n</longcat_tool_call>", gap="\n")
"""LongCat-Flash-Chat: the text, then each call as '<longcat_tool_call>\\nJSON\\n</longcat_tool_call>'
back to back (the model card's format note)."""


LONGCAT = Family(
    slug="longcat",
    name="Meituan LongCat-Flash (<longcat_tool_call> JSON)",
    entry="longcat",
    models=("meituan-longcat/LongCat-Flash-Chat", "meituan-longcat/LongCat-Flash-Thinking"),
    template=None,
    template_url=VLLM_CODE + "tool_parsers/longcat_tool_parser.py",
    template_revision="v0.33.0",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/meituan-longcat/LongCat-Flash-Chat",
    markers=(
        "ASSISTANT:",
        "<longcat_tool_call>",
        "</longcat_tool_call>",
        "<longcat_think>",
        "</longcat_think>",
        "</longcat_s>",
    ),
    stops=("</longcat_s>",),
    has_reasoning=True,
    writer=write_longcat,
    writer_prompt=" ASSISTANT:",
    cases=(
        *standard(
            reasoning=False,
            markers_inside="</longcat_tool_call> and <longcat_tool_call>",
            cut_second_call='"Asia/Tokyo"',
        ),
        shape_case(
            "thinking-prefill",
            ("reasoning", "reasoning-prefilled", "single-call"),
            "The user wants the weather.\n</longcat_think>\nChecking.\n<longcat_tool_call>\n"
            '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</longcat_tool_call>',
            "<longcat_user>Weather in Paris?<longcat_assistant><longcat_think>\n",
            "https://huggingface.co/meituan-longcat/LongCat-Flash-Thinking",
            {
                "content": "Checking.",
                "reasoning_content": "The user wants the weather.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
            },
            notes="The thinking checkpoints' prompt ends '<longcat_assistant><longcat_think>\\n'; the reasoning ends with </longcat_think>.",
        ),
        shape_case(
            "thinking-truncated",
            ("reasoning", "reasoning-prefilled", "truncated"),
            "The user wants the current weather",
            "<longcat_assistant><longcat_think>\n",
            "https://huggingface.co/meituan-longcat/LongCat-Flash-Thinking",
            {"content": None, "reasoning_content": "The user wants the current weather", "tool_calls": []},
        ),
    ),
)


write_jamba = Layout(
    call="    {json}", calls_open="<tool_calls>[\n", calls_sep=",\n", calls_close="\n]</tool_calls>", lead=" "
)
"""Jamba: a space after the role token, the text, then '<tool_calls>[\\n    {...},\\n    {...}\\n]</tool_calls>'
(the layout of vLLM's jamba tests)."""


JAMBA = Family(
    slug="jamba",
    name="AI21 Jamba 1.5-1.7 (<tool_calls> JSON list)",
    entry="jamba",
    models=("ai21labs/AI21-Jamba-Mini-1.7", "ai21labs/AI21-Jamba-1.5-Large"),
    template=None,
    template_url=VLLM_CODE + "tool_parsers/jamba_tool_parser.py",
    template_revision="v0.33.0",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/ai21labs/AI21-Jamba-Mini-1.7",
    markers=("<|bom|>", "<|eom|>", "<|assistant|>", "<tool_calls>", "</tool_calls>"),
    stops=("<|eom|>",),
    has_reasoning=False,
    writer=write_jamba,
    writer_prompt="<|bom|><|assistant|>",
    cases=tuple(
        standard(
            reasoning=False,
            markers_inside="</tool_calls> and <|eom|>",
            cut_second_call='"Asia/Tokyo"',
            list_format=True,
        )
    ),
)


write_step3 = Layout(
    call='<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{name}">\n{params}'
    "</steptml:invoke><｜tool_call_end｜>",
    param='<steptml:parameter name="{key}">{value}</steptml:parameter>\n',
    calls_open="<｜tool_calls_begin｜>\n",
    calls_sep="\n",
    calls_close="\n<｜tool_calls_end｜>",
    head="{reasoning}\n</think>\n",
    head_always=True,
)
"""Step 3 after the pre-opened '<think>\\n': the reasoning, '\\n</think>\\n', the text and the steptml
block (the layout SGLang's Step3Detector documents)."""


STEP3 = Family(
    slug="step3",
    name="StepFun Step 3 (steptml invoke)",
    entry="step3",
    models=("stepfun-ai/step3",),
    template=None,
    template_url=VLLM_CODE + "tool_parsers/step3_tool_parser.py",
    template_revision="v0.33.0",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/stepfun-ai/step3",
    markers=(
        "<|BOT|>",
        "<|EOT|>",
        "<think>",
        "</think>",
        "<｜tool_calls_begin｜>",
        "<｜tool_calls_end｜>",
        "<｜tool_call_begin｜>",
        "<｜tool_call_end｜>",
        "<｜tool_sep｜>",
        "<steptml:invoke",
        "</steptml:invoke>",
        "<steptml:parameter",
        "</steptml:parameter>",
    ),
    stops=("<|EOT|>",),
    has_reasoning=True,
    writer=write_step3,
    writer_prompt="<|BOT|>assistant\n<think>\n",
    cases=(
        *standard(
            markers_inside="</steptml:parameter> and </steptml:invoke><｜tool_call_end｜>",
            cut_second_call=">Asia/Tokyo</steptml:parameter>",
            notes={
                "thinking-content": "The prompt pre-writes '<think>\\n' (vLLM's step3 reasoning: everything before </think>)."
            },
        ),
        Case(
            "empty-reasoning",
            ("no-call", "reasoning-prefilled"),
            NO_REASONING,
            notes="The model closes the pre-opened think block at once.",
        ),
    ),
)


write_mimo = Layout(
    call="<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>",
    param="<parameter={key}>{value}</parameter>\n",
    calls_sep="\n",
    head="<think>{reasoning}</think>\n",
    gap="\n",
)
"""MiMo-V2: '<think>REASONING</think>' (when it reasons), the text, then Qwen3-Coder XML calls with
each value verbatim between '<parameter=K>' and '</parameter>' (SGLang's MiMoDetector layout)."""


MIMO = Family(
    slug="mimo",
    name="Xiaomi MiMo-V2 (compact Qwen3-Coder XML)",
    entry="mimo",
    models=("XiaomiMiMo/MiMo-V2-Flash",),
    template=None,
    template_url=VLLM_CODE + "parser/mimo.py",
    template_revision="v0.33.0",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/XiaomiMiMo/MiMo-V2-Flash",
    markers=(
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "</function>",
        "<parameter=",
        "</parameter>",
    ),
    stops=("<|im_end|>",),
    has_reasoning=True,
    writer=write_mimo,
    writer_prompt="<|im_start|>assistant\n",
    cases=(
        *standard(
            markers_inside="</parameter> and </function> or <tool_call>",
            cut_second_call=">Asia/Tokyo</parameter>",
        ),
        shape_case(
            "verbatim-multiline-value",
            ("single-call", "x-whitespace"),
            "<tool_call>\n<function=send_message>\n<parameter=to>dev</parameter>\n"
            "<parameter=text>\n  first line\nsecond line\n</parameter>\n</function>\n</tool_call>",
            "<|im_start|>assistant\n",
            VLLM_CODE + "parser/mimo.py",
            {
                "content": None,
                "reasoning_content": None,
                "tool_calls": [
                    {
                        "name": "send_message",
                        "arguments": {"to": "dev", "text": "\n  first line\nsecond line\n"},
                    }
                ],
            },
            notes="MiMo's values are verbatim: the newlines around a value are kept (qwen3_xml would trim one on each side).",
        ),
        shape_case(
            "no-thinking-prefill",
            ("no-call", "reasoning-prefilled"),
            "Hello! How can I help?",
            "<|im_start|>assistant\n<think></think>",
            SGLANG_CODE + "parser/reasoning_parser.py",
            {"content": "Hello! How can I help?", "reasoning_content": None, "tool_calls": []},
            notes="Thinking off: the prompt closes the think block at once; the start anchor swallows it.",
        ),
    ),
)


write_k2_horizon = Layout(
    call="<ifm|tool_call>{name}\n{params}</ifm|tool_call>",
    param="<ifm|arg_key>{key}</ifm|arg_key>\n<ifm|arg_value>{value}</ifm|arg_value>\n",
    calls_open="<ifm|tool_calls>\n",
    calls_sep="\n",
    calls_close="\n</ifm|tool_calls>",
    head="{reasoning}\n</ifm|think>\n",
    head_always=True,
)
"""K2 Horizon after the pre-opened '<ifm|think>\\n': the reasoning, '\\n</ifm|think>\\n', the text and
the call group in the default xml format (vLLM's K2HorizonToolParser)."""


K2_HORIZON = Family(
    slug="k2-horizon",
    name="MBZUAI-IFM K2 Horizon (<ifm|tool_call> key/value)",
    entry="k2_horizon",
    models=("MBZUAI-IFM/K2-Horizon-MoVA-36B-A4B",),
    template=None,
    template_url=VLLM_CODE + "tool_parsers/k2_horizon_tool_parser.py",
    template_revision="v0.33.0",
    template_license="Apache-2.0",
    publisher="https://huggingface.co/MBZUAI-IFM",
    markers=(
        "<|ifm|im_start|>",
        "<|ifm|im_end|>",
        "<ifm|think>",
        "</ifm|think>",
        "<ifm|think_fast>",
        "</ifm|think_fast>",
        "<ifm|tool_calls>",
        "</ifm|tool_calls>",
        "<ifm|tool_call>",
        "</ifm|tool_call>",
        "<ifm|arg_key>",
        "</ifm|arg_key>",
        "<ifm|arg_type>",
        "</ifm|arg_type>",
        "<ifm|arg_value>",
        "</ifm|arg_value>",
    ),
    stops=("<|ifm|im_end|>",),
    has_reasoning=True,
    writer=write_k2_horizon,
    writer_prompt="<|ifm|im_start|>assistant\n<ifm|think>\n",
    cases=(
        *standard(
            markers_inside="</ifm|arg_value> and </ifm|tool_call> or <ifm|arg_key>",
            cut_second_call=">Asia/Tokyo</ifm|arg_value>",
        ),
        shape_case(
            "xml-typed",
            ("single-call", "reasoning-prefilled", "numeric-arguments"),
            "Look it up.\n</ifm|think>\n<ifm|tool_calls>\n<ifm|tool_call>get_weather\n"
            "<ifm|arg_key>city</ifm|arg_key>\n<ifm|arg_type>string</ifm|arg_type>\n<ifm|arg_value>0042</ifm|arg_value>\n"
            "<ifm|arg_key>days</ifm|arg_key>\n<ifm|arg_type>integer</ifm|arg_type>\n<ifm|arg_value>4</ifm|arg_value>\n"
            "</ifm|tool_call>\n</ifm|tool_calls>",
            "<|ifm|im_start|>assistant\n<ifm|think>\n",
            SGLANG_CODE + "function_call/k2_v3_detector.py",
            {
                "content": None,
                "reasoning_content": "Look it up.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "0042", "days": 4}}],
            },
            notes="tool_call_format='xml_typed': an <ifm|arg_type> between key and value; a string stays text, an integer is read as JSON.",
        ),
        shape_case(
            "medium-effort",
            ("no-call", "reasoning", "reasoning-prefilled"),
            "Quick check.</ifm|think_fast>\nParis.",
            "<|ifm|im_start|>assistant\n<ifm|think_fast>\n",
            VLLM_CODE + "reasoning/k2_horizon_reasoning_parser.py",
            {"content": "Paris.", "reasoning_content": "Quick check.", "tool_calls": []},
            notes="reasoning_effort='medium': the prompt opens <ifm|think_fast> and the model closes it.",
        ),
        shape_case(
            "call-group-ends-reasoning",
            ("single-call", "reasoning-prefilled", "x-unclosed-reasoning"),
            "Ping it.\n<ifm|tool_calls>\n<ifm|tool_call>list_alarms</ifm|tool_call>\n</ifm|tool_calls>",
            "<|ifm|im_start|>assistant\n<ifm|think>\n",
            SGLANG_CODE + "parser/reasoning_parser.py",
            {
                "content": None,
                "reasoning_content": "Ping it.",
                "tool_calls": [{"name": "list_alarms", "arguments": {}}],
            },
            notes="A tool-call group closes reasoning that was never closed (SGLang's tool_start_token '<ifm|tool_call').",
        ),
    ),
)

XLAM_QWEN_FAMILY = dataclasses.replace(
    XLAM,
    slug="xlam-qwen",
    name="Salesforce xLAM-2 on Qwen 2.5 (bare JSON call list)",
    models=("Salesforce/xLAM-2-32b-fc-r", "Salesforce/xLAM-2-3b-fc-r"),
    template=XLAM_QWEN,
    template_url=XLAM_QWEN_URL,
    template_revision="31106f4f486decd092d235ea4b8a729ce5342158",
    publisher="https://huggingface.co/Salesforce/xLAM-2-32b-fc-r",
    stop="<|im_end|>",
    special={},
    cases=tuple(
        standard(
            reasoning=False,
            call_content=False,
            markers_inside='<|im_end|> and }, {"name": "x"}]',
            cut_second_call='"Asia/Tokyo"',
            list_format=True,
        )
    ),
)

ROUND2: tuple[Family, ...] = (
    GIGACHAT35,
    APERTUS,
    HUNYUAN_A13B,
    XLAM,
    XLAM_QWEN_FAMILY,
    LONGCAT,
    JAMBA,
    STEP3,
    MIMO,
    K2_HORIZON,
)
"""The families added with the remaining breadth formats (breadth2)."""

# --------------------------------------------------------------------------------------------------

FAMILIES: tuple[Family, ...] = (
    MINIMAX_M2,
    MINIMAX_M3,
    SEED_OSS,
    STEP3P5,
    NEMOTRON3,
    LING3,
    LAGUNA,
    HY3,
    MINICPM5,
    GLIMMER,
    GIGACHAT3,
    APRIEL,
    NANO_V2,
    LLAMA4_JSON,
    GRANITE_20B_FC,
    INTERNLM,
    *ROUND2,
)

FAMILY_META: dict[str, tuple[str, bool, list[str], list[str]]] = {
    f.slug: (f.name, f.has_reasoning, list(f.markers), list(f.stops)) for f in FAMILIES
}
"""slug -> (name, has_reasoning, leakage markers, stop tokens), the shape of test_own_fixtures.FAMILIES."""


def _llama_cpp(model: str, name: str) -> dict[str, str]:
    return {
        "model": model,
        "repo": "ggml-org/llama.cpp",
        "path": f"models/templates/{name}",
        "commit": LLAMA_CPP,
    }


def _vllm(model: str, name: str, commit: str) -> dict[str, str]:
    # vLLM's own tool template for the model, not the publisher's: the facts file says so in its name
    return {
        "model": model,
        "repo": "vllm-project/vllm",
        "path": f"examples/{name}",
        "commit": commit,
        "variant": "vllm-tool-template",
    }


TEMPLATE_SOURCES: dict[str, dict[str, str]] = {
    "MiniMaxAI-MiniMax-M2.jinja": _llama_cpp("MiniMaxAI/MiniMax-M2", "MiniMax-M2.jinja"),
    "MiniMaxAI-MiniMax-M3.jinja": _llama_cpp("MiniMaxAI/MiniMax-M3", "MiniMax-M3.jinja"),
    "ByteDance-Seed-Seed-OSS-36B-Instruct.jinja": _llama_cpp(
        "ByteDance-Seed/Seed-OSS-36B-Instruct", "ByteDance-Seed-OSS.jinja"
    ),
    "stepfun-ai-Step-3.5-Flash.jinja": _llama_cpp("stepfun-ai/Step-3.5-Flash", "StepFun3.5-Flash.jinja"),
    "nvidia-NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": _llama_cpp(
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"
    ),
    "inclusionAI-Ling-3.0-flash.jinja": _llama_cpp(
        "inclusionAI/Ling-3.0-flash", "inclusionai-ling-3.0-flash.jinja"
    ),
    "poolside-Laguna-S-2.1.jinja": _llama_cpp("poolside/Laguna-S-2.1", "poolside-Laguna-S-2.1.jinja"),
    "poolside-Laguna-XS.2.jinja": _llama_cpp("poolside/Laguna-XS.2", "poolside-Laguna-XS.2.jinja"),
    "tencent-Hy3.jinja": _llama_cpp("tencent/Hy3", "tencent-Hy3.jinja"),
    "openbmb-MiniCPM5-1B.jinja": _llama_cpp("openbmb/MiniCPM5-1B", "openbmb-MiniCPM5-1B.jinja"),
    "meta-models-Muse-Glimmer-30B.jinja": _llama_cpp("meta-models/Muse-Glimmer-30B", "muse-glimmer.jinja"),
    "ai-sage-GigaChat3-10B-A1.8B.jinja": _llama_cpp(
        "ai-sage/GigaChat3-10B-A1.8B", "GigaChat3-10B-A1.8B.jinja"
    ),
    "ai-sage-GigaChat3.1-10B-A1.8B.jinja": _llama_cpp(
        "ai-sage/GigaChat3.1-10B-A1.8B", "GigaChat3.1-10B-A1.8B.jinja"
    ),
    "ServiceNow-AI-Apriel-1.6-15b-Thinker.jinja": _llama_cpp(
        "ServiceNow-AI/Apriel-1.6-15b-Thinker", "Apriel-1.6-15b-Thinker-fixed.jinja"
    ),
    "ServiceNow-AI-Apriel-1.5-15b-Thinker.jinja": _llama_cpp(
        "ServiceNow-AI/Apriel-1.5-15b-Thinker", "unsloth-Apriel-1.5.jinja"
    ),
    "nvidia-NVIDIA-Nemotron-Nano-9B-v2.jinja": _llama_cpp(
        "nvidia/NVIDIA-Nemotron-Nano-9B-v2", "NVIDIA-Nemotron-Nano-v2.jinja"
    ),
    "vllm-tool_chat_template_llama4_json.jinja": _vllm(
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "tool_chat_template_llama4_json.jinja",
        "97ce4234ca0d8ba7c8c8d25ce42fb371fb7e735b",
    ),
    "vllm-tool_chat_template_granite_20b_fc.jinja": _vllm(
        "ibm-granite/granite-20b-functioncalling",
        "tool_chat_template_granite_20b_fc.jinja",
        "1a7f9e3b75fcf32628278cc578b863d2753ebe15",
    ),
    "vllm-tool_chat_template_internlm2_tool.jinja": _vllm(
        "internlm/internlm2_5-7b-chat",
        "tool_chat_template_internlm2_tool.jinja",
        "87b63520aba48bae9d55663edf0d8f65d3d43ac2",
    ),
    GC35: {
        "model": "ai-sage/GigaChat3.5",
        "repo": "ajpqs/test_llama.cpp",
        "path": "models/templates/GigaChat3.5.jinja",
        "commit": "ba78d0e11b1d767383f65b6213b5645bcffb6b4d",
    },
    APERTUS_T: _llama_cpp("swiss-ai/Apertus-8B-Instruct-2509", "Apertus-8B-Instruct.jinja"),
    HUNYUAN_T: {
        "model": "tencent/Hunyuan-A13B-Instruct",
        "repo": "Tencent-Hunyuan/Hunyuan-A13B",
        "path": "models/tokenizer_config.json",
        "commit": "2798f3c8b6a69e0ce93950b0d2417203cf950fa0",
    },
    "vllm-tool_chat_template_xlam_llama.jinja": _vllm(
        "Salesforce/Llama-xLAM-2-8b-fc-r",
        "tool_chat_template_xlam_llama.jinja",
        "466716c2bb5f3d191eeaf25459ec6c3bb09f11d7",
    ),
    XLAM_QWEN: _vllm(
        "Salesforce/xLAM-2-32b-fc-r",
        "tool_chat_template_xlam_qwen.jinja",
        "31106f4f486decd092d235ea4b8a729ce5342158",
    ),
}
"""Local template file -> where it was read (the facts records' ``source``) and the model it is for."""


def template_entries() -> dict[str, str]:
    """Every template a family renders -> the entry it must resolve to."""
    out: dict[str, str] = {}
    for family in FAMILIES:
        for name in (family.template, *(case.template for case in family.cases if case.template)):
            if name is not None:
                assert out.setdefault(name, family.entry) == family.entry, name
    return out


BY_TEMPLATE_ONLY: dict[str, str] = {f.slug: f.entry for f in FAMILIES if f.by_template_only}
"""slug -> entry of the families whose entry is chosen by chat template (their model ids resolve elsewhere)."""

KNOWN_FAILURES: dict[str, str] = {
    f"{f.slug}/{c.name}": c.known_failure for f in FAMILIES for c in f.cases if c.known_failure
}
"""Fixture id -> why chatparse cannot parse it yet (strict xfails in test_own_fixtures)."""
