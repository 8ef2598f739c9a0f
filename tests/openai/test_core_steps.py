"""Adapters that step the core themselves (`ChatParser._core_feed` + `ChatParser._answer`, as the
SGLang plugin's one parse does) get exactly `feed`'s deltas, step by step, while skipping the
answers that change nothing in `ChatParser` (no events, or a chunk while `_sink` is None)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse.openai import ChatParser

from .helpers import CASES, case_kwargs

MODES = ("early", "complete")


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _skippable(parser: ChatParser, r: Any) -> bool:
    return (not r and not parser._pending) or (type(r) is str and parser._sink is None)


def check(case: dict, chunks: list[str], mode: str, reason: str = "stop") -> int:
    """Both ways side by side; returns how many steps skipped `ChatParser` altogether."""
    fed = ChatParser(**case_kwargs(case, stream_tool_calls=mode))
    stepped = ChatParser(**case_kwargs(case, stream_tool_calls=mode))
    skipped = 0
    for c in chunks:
        want = fed.feed(c)
        r = stepped._core_feed(c)
        if _skippable(stepped, r):
            skipped += 1
            assert want == []
        else:
            assert stepped._answer(r) == want
    assert stepped.finish(reason) == fed.finish(reason)
    return skipped


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_case_one_char(case: dict) -> None:
    for mode in MODES:
        for reason in ("stop", "length"):
            check(case, list(case["text"]), mode, reason)


def test_the_skipped_steps_are_most_steps_of_a_call() -> None:
    """One character at a time, the steps inside a call sent whole never reach `ChatParser`."""
    skipped = total = 0
    for case in CASES:
        if case["tools"] is None and "tool_call" not in case["text"]:
            continue
        total += len(case["text"])
        skipped += check(case, list(case["text"]), "complete")
    assert total and skipped > total // 3


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CASES),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    mode=st.sampled_from(MODES),
    reason=st.sampled_from(("stop", "length")),
)
def test_random_chunkings(case: dict, cuts: list[int], mode: str, reason: str) -> None:
    check(case, _chunks(case["text"], cuts), mode, reason)
