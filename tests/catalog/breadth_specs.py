"""The breadth families: which template, which model, which cases (data for ``breadth_fixtures``).

Each family renders a standard set of assistant messages (:func:`standard`) through its real chat
template, plus family-specific cases (prompt prefills, engine-test shapes). The expected message of
a rendered case is the message itself; truncated cases say what must survive the cut.
"""

from __future__ import annotations

import dataclasses
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
}
"""Local template file -> where it was read (the facts records' ``source``) and the model it is for."""


def template_entries() -> dict[str, str]:
    """Every template a family renders -> the entry it must resolve to."""
    out: dict[str, str] = {}
    for family in FAMILIES:
        for name in (family.template, *(case.template for case in family.cases if case.template)):
            assert out.setdefault(name, family.entry) == family.entry, name
    return out


BY_TEMPLATE_ONLY: dict[str, str] = {f.slug: f.entry for f in FAMILIES if f.by_template_only}
"""slug -> entry of the families whose entry is chosen by chat template (their model ids resolve elsewhere)."""

KNOWN_FAILURES: dict[str, str] = {
    f"{f.slug}/{c.name}": c.known_failure for f in FAMILIES for c in f.cases if c.known_failure
}
"""Fixture id -> why chatparse cannot parse it yet (strict xfails in test_own_fixtures)."""
