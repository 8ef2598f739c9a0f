"""Invariants of `ChatParser` over every family case and every chunking (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse.openai import parse_message

from .helpers import CASES, FAMILIES, case_kwargs, markers, merged, public, stream, streamed_dropped

MODES = ("early", "complete")
REASONS = ("stop", "length")


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _core_text_values(case: dict) -> list[str]:
    """The string values of content/reasoning regions, as the core parses them."""
    p = chatparse.ResponseParser(FAMILIES[case["template"]], prefix=case["prefix"], tools=case["tools"])
    events = p.initial_events + p.feed(case["text"])
    try:
        events += p.finalize()[1]
    except chatparse.RequiredFieldsMissing as e:
        events += e.events
    return [
        e["value"]
        for e in events
        if e["type"] == "region_close"
        and e["field"] in ("content", "thinking", "reasoning", "reasoning_content")
        and isinstance(e["value"], str)
    ]


def check(case: dict, chunks: list[str], finish_reason: str, mode: str) -> None:
    kwargs = case_kwargs(case, stream_tool_calls=mode)
    expected = parse_message(
        case["text"], finish_reason=finish_reason, **case_kwargs(case, stream_tool_calls=mode)
    )
    message, deltas, reason = stream(chunks, finish_reason, **kwargs)

    # (1) streamed == one-shot, and merging the deltas gives the message
    assert message == expected
    assert public(merged(message, deltas)) == public(message)
    calls = message.get("tool_calls", [])
    assert reason == ("tool_calls" if calls and finish_reason == "stop" else finish_reason)

    # (2) argument fragments concatenate to JSON objects equal to the final arguments
    dropped = streamed_dropped(message)
    texts: dict[int, str] = {}
    for d in deltas:
        for entry in d.get("tool_calls", []):
            texts[entry["index"]] = texts.get(entry["index"], "") + entry["function"].get("arguments", "")
    kept = [i for i in sorted(texts) if i not in dropped]
    assert [texts[i] for i in kept] == [c["function"]["arguments"] for c in calls]
    for c in calls:
        arguments = c["function"]["arguments"]
        assert isinstance(json.loads(arguments), dict) and arguments == arguments.strip()
    errors = message.get("chatparse", {}).get("errors", [])
    assert not any(e["error"] == "streamed arguments diverged" for e in errors)

    # (3) id/type/name on the first fragment of an index only; indices 0..k-1 in order
    seen: list[int] = []
    for d in deltas:
        assert len(d.get("tool_calls", [])) <= 1
        for entry in d.get("tool_calls", []):
            first = entry["index"] not in seen
            assert ("id" in entry) == first and ("type" in entry) == first
            assert ("name" in entry["function"]) == first
            if first:
                assert entry["id"] and entry["function"]["name"] and entry["type"] == "function"
                seen.append(entry["index"])
    assert seen == list(range(len(seen)))

    # (4) no empty delta, no empty text
    for d in deltas:
        assert d
        for key in ("content", "reasoning_content"):
            if key in d:
                assert isinstance(d[key], str) and d[key]
        assert not ({"content", "reasoning_content"} <= set(d))

    # (5) no family marker in content or reasoning unless the core's own region text holds it
    allowed = " ".join(_core_text_values(case))
    for key in ("content", "reasoning_content"):
        value = message.get(key) or ""
        for m in markers(case["template"]):
            assert m not in value or m in allowed, (key, m, value)
    assert message["content"] is None or message["content"] == message["content"].strip()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_case_one_char_and_whole(case: dict) -> None:
    for mode in MODES:
        for reason in REASONS:
            check(case, [case["text"]], reason, mode)
            check(case, list(case["text"]), reason, mode)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CASES),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    reason=st.sampled_from(REASONS),
    mode=st.sampled_from(MODES),
)
def test_random_chunkings(case: dict, cuts: list[int], reason: str, mode: str) -> None:
    check(case, _chunks(case["text"], cuts), reason, mode)


def test_single_region_content_matches_core() -> None:
    """With one content region, the message content is the core's value (or None when empty)."""
    for case in CASES:
        values = [
            v
            for v in _core_text_values(case)
            if v is not None
            and any(e == "content" for e in FAMILIES[case["template"]]["fields"])
            and "join" not in FAMILIES[case["template"]]["fields"]["content"]
        ]
        message = parse_message(case["text"], **case_kwargs(case))
        core = chatparse.ResponseParser(
            FAMILIES[case["template"]], prefix=case["prefix"], tools=case["tools"]
        )
        events = core.initial_events + core.feed(case["text"])
        try:
            events += core.finalize()[1]
        except chatparse.RequiredFieldsMissing:
            continue
        content_regions = [e for e in events if e["type"] == "region_close" and e["field"] == "content"]
        if len(content_regions) == 1 and values:
            assert message["content"] == (content_regions[0]["value"] or None), case["id"]


_PIECES = [
    " ",
    "  ",
    "\n",
    "a",
    "Hi there",
    "get_weather",
    '{"city": "Paris"}',
    '{"city": ',
    '"Par',
    'is"}',
    "[",
    "]",
    "{",
    "}",
    ",",
    '"name": "get_weather", "arguments": {}',
    "<parameter=city>",
    "</parameter>",
]


@st.composite
def fuzz_outputs(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    family = draw(st.sampled_from(sorted(FAMILIES)))
    pieces = _PIECES + sorted(markers(family))
    text = "".join(draw(st.lists(st.sampled_from(pieces), max_size=25)))
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=12))
    return family, text, _chunks(text, cuts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzz_outputs(), st.sampled_from(REASONS), st.sampled_from(MODES))
def test_fuzzed_outputs_keep_the_invariants(
    drawn: tuple[str, str, list[str]], reason: str, mode: str
) -> None:
    family, text, chunks = drawn
    case = {"template": family, "prefix": "", "tools": None, "text": text}
    kwargs = case_kwargs(case, stream_tool_calls=mode)
    expected = parse_message(text, finish_reason=reason, **case_kwargs(case, stream_tool_calls=mode))
    message, deltas, _ = stream(chunks, reason, **kwargs)
    assert message == expected
    assert public(merged(message, deltas)) == public(message)
    fields = FAMILIES[family]["fields"]
    for key, name in (("content", "content"), ("reasoning_content", "thinking")):
        value = message.get(key)
        stripped = (fields.get(name, {}).get("content_args") or {}).get("strip", True)
        assert value is None or (value and (value == value.strip() or not stripped))
    for d in deltas:
        assert d and all(d[k] for k in ("content", "reasoning_content") if k in d)


def test_trailing_whitespace_before_a_literal_closer_is_never_sent() -> None:
    text = "<think> a  </think> Hi  \n<｜end▁of▁sentence｜>"
    message, deltas, _ = stream(list(text), template=FAMILIES["DEEPSEEK_R1_DISTILL"], prefix="")
    assert deltas == [{"reasoning_content": "a"}, {"content": "H"}, {"content": "i"}]
    assert message == {"role": "assistant", "content": "Hi", "reasoning_content": "a"}
