"""Properties of one generation's assembly (`_generation.Assembly`), the layer every adapter shares:
any split of the runtime's output gives the same generation, streamed deltas add up to the message,
and arbitrary output never raises."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatparse.catalog import load
from chatparse.openai import merge_deltas
from chatparse.runtime._generation import Assembly

from .conftest import DECOY, GEMMA_BARE, GEMMA_WRAPPED, LOOSE
from .helpers import CALL, MALFORMED, STEPS, WEATHER_SCHEMA, normalize

TOOLS = [WEATHER_SCHEMA]
QWEN3 = load("qwen3")
PROMPT = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"

CONTENTS = [
    "Let me look. " + GEMMA_WRAPPED,
    GEMMA_BARE,
    LOOSE,
    "Calling. " + DECOY,
    "<think>hm</think>It is sunny.",
    '[get_weather(city="Paris")]',
    "Plain answer, no call.",
    '{"name": "get_weather", "parameters": {"city": "Paris"}}',
]


def native(local_parser: Any = "auto") -> Assembly:
    return Assembly(
        adapter="t",
        model="m",
        tools=TOOLS,
        hooks=None,
        streamed=True,
        stream_id="s",
        native=True,
        local_parser=local_parser,
    )


def text(template: Any = QWEN3) -> Assembly:
    return Assembly(
        adapter="t",
        model="m",
        tools=TOOLS,
        hooks=None,
        streamed=True,
        stream_id="s",
        template=template,
        prefix=PROMPT,
    )


def run(asm: Assembly, parts: list[tuple], finish: str = "stop") -> tuple[list[dict], Any]:
    deltas: list[dict] = []
    for part in parts:
        deltas.extend(asm.feed(part))
    last, gen = asm.finish(finish, None)
    return deltas + last, gen


def splits(s: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(s) + 1) for c in cuts})
    return [s[a:b] for a, b in zip([0, *points], [*points, len(s)]) if b > a] or [s]


def summary(gen: Any) -> Any:
    return normalize(
        {"message": gen.message, "finish": gen.finish_reason, "parser": gen.parser, "raw": gen.raw_text}
    )


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CONTENTS), st.lists(st.integers(0, 200), max_size=12), st.booleans())
def test_native_any_split_gives_the_same_generation(content: str, cuts: list[int], with_call: bool) -> None:
    call = [
        (
            "call",
            {
                "index": 0,
                "id": "call_x",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
        )
    ]
    whole_deltas, whole = run(native(), [("content", content), *(call if with_call else [])])
    deltas, gen = run(
        native(), [*[("content", p) for p in splits(content, cuts)], *(call if with_call else [])]
    )
    assert summary(gen) == summary(whole)
    merged = merge_deltas(deltas)
    assert merged["content"] == gen.content and merged.get("tool_calls") == gen.message.get("tool_calls")
    if with_call:  # native calls always win
        assert [c.id for c in gen.tool_calls] == ["call_x"] and gen.parser == "native"


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(STEPS + [CALL.replace("Paris", "Zürich 🙂")]), st.lists(st.integers(0, 400), max_size=16)
)
def test_text_any_split_gives_the_same_generation(output: str, cuts: list[int]) -> None:
    _, whole = run(text(), [("text", output)])
    deltas, gen = run(text(), [("text", p) for p in splits(output, cuts)])
    assert summary(gen) == summary(whole)
    merged = merge_deltas(deltas)
    assert merged["content"] == gen.content and merged.get("reasoning_content") == gen.reasoning
    assert [c["function"] for c in merged.get("tool_calls", [])] == [
        c["function"] for c in gen.message.get("tool_calls", [])
    ]


def test_fallback_off_changes_nothing() -> None:
    for content in CONTENTS:
        deltas, gen = run(native(None), [("content", content)])
        assert gen.content == content and gen.tool_calls == () and gen.report == {} and gen.parser is None
        assert merge_deltas(deltas)["content"] == content


def test_auto_mode_without_a_template() -> None:
    _, gen = run(text(None), [("text", CALL)])
    assert gen.parser == "auto:hermes" and gen.tool_calls[0].arguments == {"city": "Paris"}
    _, gen = run(text(None), [("text", MALFORMED)])
    assert gen.tool_calls == () and gen.malformed_calls and gen.malformed_calls[0]["recognizer"] == "hermes"


def test_cut_off_calls_are_not_calls_nor_mistakes() -> None:
    _, gen = run(text(), [("text", CALL[:-30])], finish="length")
    assert gen.tool_calls == () and gen.finish_reason == "length" and gen.malformed_calls == ()


TOKENS = [*'ab {}[]":,\n', "<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_end|>", "call:"]
TOKENS += ["<|tool_call>", "<tool_call|>", '<|"|>', "get_weather", '"name"', '"arguments"']
texts = st.lists(st.sampled_from(TOKENS), max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=6), st.sampled_from(["stop", "length", "tool_calls"]))
def test_arbitrary_output_never_raises(pieces: list[str], finish: str) -> None:
    for asm, kind in (
        (text(), "text"),
        (text(None), "text"),
        (native(), "content"),
        (native("gemma"), "content"),
    ):
        deltas, gen = run(asm, [(kind, p) for p in pieces], finish)
        for c in gen.tool_calls:
            assert c.arguments is not None and json.loads(c.arguments_text) == c.arguments
        assert gen.finish_reason in ("stop", "length", "tool_calls")
        assert (gen.finish_reason == "tool_calls") == bool(gen.tool_calls) or finish == "length"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "index": st.integers(0, 3) | st.none() | st.text(max_size=2),
                "id": st.text(max_size=5) | st.none(),
                "function": st.fixed_dictionaries(
                    {},
                    optional={
                        "name": st.text(max_size=5) | st.none(),
                        "arguments": st.text(max_size=8)
                        | st.none()
                        | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
                    },
                ),
            },
        ),
        max_size=6,
    )
)
def test_arbitrary_native_call_fragments_never_raise(entries: list[dict]) -> None:
    _, gen = run(native(), [("call", e) for e in entries])
    for c in gen.tool_calls:
        assert (c.arguments is None) == (c.arguments_error is not None)
