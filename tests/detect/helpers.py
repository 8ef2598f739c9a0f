"""Shared helpers for the detect tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from chatparse.detect import AutoStream


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
