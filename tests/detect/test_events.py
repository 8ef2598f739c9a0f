"""`AutoParser`'s region events: well-formed, offsets into the raw text, streamed == one-shot."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse.detect import AutoParser, detect
from tests.detect import helpers
from tests.detect.test_detect import CASES, TOOLS

# Pieces a model writes: prose and whitespace runs, the markers of the families (whole and cut
# one character short), payloads that parse and payloads that do not.
PIECES = [
    "Hello ",
    "world.",
    " ",
    "   ",
    "\n",
    "\n\n",
    "<",
    "<think>",
    "</think>",
    "<thi",
    "<tool_call>",
    "</tool_call>",
    "<tool_call",
    '{"name": "get_weather", "arguments": {"city": "SF"}}',
    '{"name": "echo"',
    "{bad}",
    "[",
    "]",
    "get_weather(city='SF')",
    "[TOOL_CALLS]",
    "[TOOL_CALLS]echo[ARGS]",
    '{"text": "hi"}',
    '<|tool_call>call:echo{text:<|"|>hi<|"|>}<tool_call|>',
    '<call:echo{"text": "hi"}>',
    "<|channel|>analysis<|message|>",
    "<|end|>",
    "<|start|>assistant<|channel|>final<|message|>",
    "<|start|>assistant<|channel|>commentary to=functions.get_time<|message|>",
    "<|call|>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
    "<|tool_calls_section_begin|>",
    "<|im_end|>",
    "<function=echo>\n<parameter=text>\nhi\n</parameter>\n</function>",
    "functools[",
    "<|python_tag|>",
    "</s>",
]

PREFIXES = [None, "<|im_start|>assistant\n<think>\n", "<|start|>assistant<|channel|>analysis<|message|>"]


texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=12).map("".join),
    st.sampled_from([c[0] for c in CASES if len(c[0]) < 1000]),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts,
    cuts=st.lists(st.integers(0, 400), max_size=12),
    prefix=st.sampled_from(PREFIXES),
    finish_reason=st.sampled_from(["stop", "length"]),
    tools=st.sampled_from([None, TOOLS]),
)
def test_events_are_well_formed_and_chunking_independent(
    text: str, cuts: list[int], prefix: str | None, finish_reason: str, tools: list | None
) -> None:
    options = {"prefix": prefix, "tools": tools}
    one, input_text, result = helpers.auto_events([text], finish_reason, **options)
    helpers.check_region_events(one, input_text, result)
    assert result.raw == text and input_text.endswith(text)
    streamed, input_text2, result2 = helpers.auto_events(
        helpers.split_at(text, cuts), finish_reason, **options
    )
    assert input_text2 == input_text and result2 == result
    assert helpers.merged_events(streamed) == helpers.merged_events(one)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, cuts=st.lists(st.integers(0, 400), max_size=8))
def test_orphan_reasoning_events_are_chunking_independent(text: str, cuts: list[int]) -> None:
    one, input_text, result = helpers.auto_events([text], orphan_reasoning=True)
    streamed, _, result2 = helpers.auto_events(helpers.split_at(text, cuts), orphan_reasoning=True)
    assert result2 == result
    assert helpers.merged_events(streamed) == helpers.merged_events(one)
    if "<|im_end|>" not in text and "<|tool_calls_section_begin|>" not in text:
        # (a family marker inside text that becomes reasoning is dropped from its chunks)
        helpers.check_region_events(one, input_text, result)


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c[1]}" for i, c in enumerate(CASES)])
def test_every_case_char_by_char(case: tuple) -> None:
    text = case[0]
    chunks = list(text) if len(text) < 1000 else [text[i : i + 97] for i in range(0, len(text), 97)]
    events, input_text, result = helpers.auto_events(chunks, tools=TOOLS)
    helpers.check_region_events(events, input_text, result)
    assert result == detect(text, tools=TOOLS)


def test_offsets_slice_the_raw_text() -> None:
    text = (
        '<think>plan</think>Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "SF"}}'
        "</tool_call> B <tool_call>{bad}</tool_call> C"
    )
    events, input_text, result = helpers.auto_events([text])
    spans = [
        (e["type"], e["field"], e["recognizer"], input_text[e["start"] : e["end"]])
        for e in events
        if e["type"] != "region_chunk"
    ]
    assert spans == [
        ("region_open", "reasoning", "think_tag", "<think>"),
        ("region_close", "reasoning", "think_tag", "</think>"),
        ("region_open", "content", None, ""),
        ("region_close", "content", None, ""),
        ("region_open", "tool_calls", "hermes", "<tool_call>"),
        ("region_close", "tool_calls", "hermes", "</tool_call>"),
        ("region_open", "content", None, ""),
        ("region_close", "content", None, ""),
        ("region_open", "tool_calls", "hermes", "<tool_call>"),
        ("region_malformed", "tool_calls", "hermes", "</tool_call>"),
        ("region_open", "content", None, ""),  # the text that is not a call, then " C"
        ("region_close", "content", None, ""),
    ]
    closes = [e for e in events if e["type"] in ("region_close", "region_malformed")]
    bodies = [input_text[e["body_start"] : e["body_end"]] for e in closes]
    assert bodies[:3] == ["plan", "Sure. ", '{"name": "get_weather", "arguments": {"city": "SF"}}']
    malformed = [e for e in events if e["type"] == "region_malformed"]
    assert (
        len(malformed) == 1 and "{bad}" in input_text[malformed[0]["body_start"] : malformed[0]["body_end"]]
    )
    assert result.cleaned == "Sure.  B <tool_call>{bad}</tool_call> C"
    helpers.check_region_events(events, input_text, result)


def test_prefix_opener_and_cut_off_opener() -> None:
    p = AutoParser(prefix="<|im_start|>assistant\n<think>\n")
    assert [(e["type"], e["field"]) for e in p.initial_events] == [("region_open", "reasoning")]
    assert p.input_text == "<think>"
    events = p.feed("plan</think>Let me check.<tool_call>")
    result, last = p.finalize("length")
    assert result.cleaned == "Let me check." and result.errors[-1]["error"] == "truncated call opener dropped"
    assert result.errors[-1]["text"] == "<tool_call>"
    helpers.check_region_events(p.initial_events + events + last, p.input_text, result)
    with pytest.raises(RuntimeError):
        p.feed("x")


CUT_OPENERS = [
    "[TOOL_CALLS]",
    "<tool_call>",
    "<tool_call>\n",
    "<|tool_call>",
    "<|tool_call>call:get",
    "<|python_tag|>",
    "functools",
    " to=functions.get_time",
    "<|start|>assistant to=functions.get_time<|channel|>commentary",
    "<|start|>assistant<|channel|>commentary",
    "<|start|>assistant",
    "<call:echo",
    "<｜tool▁call▁begin｜>get",
    "<|tool_call_begin|>functions.x:0",
]


@pytest.mark.parametrize("opener", CUT_OPENERS)
def test_a_call_opener_cut_off_by_max_tokens_is_dropped(opener: str) -> None:
    """The core's `cut_off` (an opener undecided at the end of the text) replaces a regex of known
    openers: every family's opener is covered, in every chunking."""
    text = "Let me check. " + opener
    for chunks in ([text], list(text)):
        events, input_text, result = helpers.auto_events(chunks, "length")
        helpers.check_region_events(events, input_text, result)
        assert result.cleaned == "Let me check." and result.calls == []
        assert result.errors[-1]["error"] in ("truncated call opener dropped", "truncated call dropped")
    # not cut off: the text is content, as written
    assert detect(text).cleaned == text.strip()


def test_held_content_costs_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Content that may still be a whole-output shape (it starts with `[`) is held to the end: the
    shape test sees only a bounded head of it (not the whole held text per feed, which was
    quadratic), and the release is one chunk per contiguous run (not one per feed)."""
    from chatparse.detect import _auto

    seen: list[int] = []
    real = _auto._shapes.could_be_shape
    monkeypatch.setattr(
        _auto._shapes, "could_be_shape", lambda text, names: seen.append(len(text)) or real(text, names)
    )
    for n in (2_000, 8_000):
        seen.clear()
        text = "[see below] " + "word " * n
        events, input_text, result = helpers.auto_events([text[i : i + 4] for i in range(0, len(text), 4)])
        helpers.check_region_events(events, input_text, result)
        assert result.cleaned == text.strip() and result.calls == []
        assert len(seen) < 20 and sum(seen) < 400  # independent of n
        assert [e["type"] for e in events if e["field"] == "content"] == [
            "region_open",
            "region_chunk",
            "region_close",
        ]
