"""Shared helpers for the detect tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from chatparse.openai import AutoStream


def split_at(text: str, cuts: list[int]) -> list[str]:
    """`text` cut at the given positions (clamped to its length, each once): the pieces, in order."""
    points = sorted({min(c, len(text)) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(text)]:
        out.append(text[prev:p])
        prev = p
    return out


def counter_ids() -> Callable[[], str]:
    """Deterministic call ids: call_0, call_1, ..."""
    n = iter(range(10**6))
    return lambda: f"call_{next(n)}"


def stream(
    chunks: Iterable[str], tools: Sequence[dict], finish_reason: str = "stop"
) -> tuple[dict, list[dict], str, Any]:
    """Feed `chunks` to an AutoStream; returns (message, all deltas, finish_reason, result)."""
    s = AutoStream(tools=tools, id_factory=counter_ids())
    deltas: list[dict] = []
    for c in chunks:
        deltas += s.feed(c)
    message, last, reason = s.finish(finish_reason)
    return message, deltas + last, reason, s.result


def check_region_events(events: Sequence[dict], input_text: str, result: Any | None = None) -> None:
    """Auto-mode region events are well-formed (`chatparse.detect.AutoParser`'s contract).

    Each region is `region_open`, chunks of the same field, then `region_close` or
    `region_malformed`. Offsets: opener span, then body, then closer span, in order, inside
    `input_text`; a text region's chunks concatenate to its body. Regions follow each other in
    text order, except that a `content` region right after a malformed `tool_calls` region
    re-reads its text. They do not nest, except inside a whole-output shape's `tool_calls` region
    (zero-width opener), which may hold complete reasoning or malformed regions within its span.
    With `result` (the `DetectResult`): content, reasoning and calls agree.
    """
    fields = {"reasoning", "content", "tool_calls"}
    n = len(input_text)
    stack: list[dict] = []  # open regions: at most an outer shape and one inner region
    chunks: list[str] = []
    last_end, last_malformed = 0, None
    contents: list[str] = []
    calls: list[dict] = []
    reasoning: list[str] = []
    for e in events:
        assert e["field"] in fields, e
        assert "recognizer" in e, e
        if e["type"] == "region_open":
            if stack:
                outer = stack[-1]
                assert (
                    len(stack) == 1 and outer["field"] == "tool_calls" and outer["start"] == outer["end"]
                ), f"nested region: {e} inside {outer}"
                assert e["field"] != "content" and e["start"] >= max(last_end, outer["start"]), (e, outer)
            elif e["field"] == "content" and last_malformed is not None:
                assert e["start"] == last_malformed[0], (e, last_malformed)
            else:
                assert e["start"] >= last_end, (e, last_end)
            assert 0 <= e["start"] <= e["end"] <= n, e
            if e["field"] == "content":
                assert e["start"] == e["end"], e
            stack.append(e)
            chunks = []
            continue
        assert stack and stack[-1]["field"] == e["field"], (e, stack)
        open_ = stack[-1]
        if e["type"] == "region_chunk":
            assert e["text"] and e["dirty"] is (e["field"] == "tool_calls"), e
            chunks.append(e["text"])
            continue
        assert e["type"] in ("region_close", "region_malformed"), e
        assert open_["end"] == e["body_start"] <= e["body_end"] <= e["start"] <= e["end"] <= n, (open_, e)
        assert e["end"] >= last_end, (e, last_end)
        body = input_text[e["body_start"] : e["body_end"]]
        if e["field"] != "tool_calls":
            assert "".join(chunks) == body, (chunks, body)
            assert e["type"] == "region_close"
        if e["field"] == "content":
            assert e["value"] == body and e["start"] == e["end"], e
            contents.append(body)
        elif e["field"] == "reasoning":
            assert e["value"] == body.strip(), e
            if e["value"]:
                reasoning.append(e["value"])
        elif e["type"] == "region_close":
            assert isinstance(e["value"], list) and e["value"], e
            calls.extend(e["value"])
        stack.pop()
        last_malformed = (open_["start"], e["end"]) if e["type"] == "region_malformed" and not stack else None
        last_end = e["end"] if last_malformed is None else open_["start"]
    assert not stack, f"region left open: {stack}"
    if result is not None:
        assert "".join(contents).strip() == result.cleaned
        assert reasoning == result.reasoning
        assert calls == result.calls


def auto_events(
    chunks: Iterable[str], finish_reason: str = "stop", **options: Any
) -> tuple[list[dict], str, Any]:
    """Run an AutoParser over `chunks`: (all events, input_text, DetectResult)."""
    from chatparse.detect import AutoParser

    p = AutoParser(**options)
    events = list(p.initial_events)
    for c in chunks:
        events += p.feed(c)
    result, last = p.finalize(finish_reason)
    return events + last, p.input_text, result


def merged_events(events: Sequence[dict]) -> list[dict]:
    """Events with consecutive chunks of one region joined and errors as text (chunking-independent)."""
    out: list[dict] = []
    for e in events:
        e = dict(e)
        if "error" in e:
            e["error"] = str(e["error"])
        if e["type"] == "region_chunk" and out and out[-1]["type"] == "region_chunk":
            out[-1] = {**out[-1], "text": out[-1]["text"] + e["text"]}
            continue
        out.append(e)
    return out
