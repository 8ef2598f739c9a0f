"""Linear work for every catalog template, by counting scanner operations (never wall-clock time).

The issue-10 changes gave many templates new delimiter shapes (reasoning closers with lookaheads for
call openers, stray-marker alternatives in content closers, the value-end close of
``close_after_value``). For each catalog template, doubling the input must at most double the work
(with slack for constant terms), one-shot and streamed one character at a time, on: many calls with
text between them, a long reasoning block full of near-miss markers, and a call payload followed by a
long whitespace run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import chatparse
from chatparse import _oneshot, catalog

from ..core.test_linear import counting, work
from ..support.build import pure_only
from .test_bug_classes import call_span, case_for

SLACK = 2.4


def _per_char(name: str, text: str, prefix: str) -> Callable[[], object]:
    def go() -> object:
        p = chatparse.ResponseParser(catalog.load(name), prefix=prefix)
        for ch in text:
            p.feed(ch)
        return p.finalize()

    return go


def _one_shot(name: str, text: str, prefix: str) -> Callable[[], object]:
    def go() -> object:
        try:
            return chatparse.parse_response(text, catalog.load(name), prefix=prefix)
        except ValueError:
            return None

    return go


def _ratio(make: Callable[[int], Callable[[], object]], n: int) -> float:
    small, big = work(make(n)), work(make(2 * n))
    return big / max(small, 1)


WITH_CALL = [n for n in catalog.names() if case_for(n, "one-call") is not None]


@pytest.mark.parametrize("name", WITH_CALL)
def test_many_calls_with_text_between(name: str) -> None:
    case = case_for(name, "one-call")
    assert case is not None
    _, call = call_span(name, case)

    def make(k: int) -> Callable[[], object]:
        return _one_shot(name, (call + " and then <some> [text] (x) ") * k, case["prefix"])

    assert _ratio(make, 40) <= SLACK, name


def _has_cursor_seeker(name: str) -> bool:
    plan = _oneshot.plan_for(catalog.load(name))
    return _oneshot._CURSOR in {k for fw in plan.fws for k in fw.kinds}


WITH_CURSOR = [n for n in WITH_CALL if _has_cursor_seeker(n)]


@pure_only
@pytest.mark.parametrize("name", WITH_CURSOR)
def test_many_calls_one_shot_runs_the_cursor_seekers(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The one-shot case above measures the cursor seekers of these templates (the shapes no C-search
    # proof covers), not the streaming machine at the end of the text: no bail, no decision of the
    # streaming scanner, and the cursor seekers searched.
    case = case_for(name, "one-call")
    assert case is not None
    _, call = call_span(name, case)
    searches = []
    original = _oneshot._CursorSeek._search
    monkeypatch.setattr(
        _oneshot._CursorSeek, "_search", lambda self, buf, q: searches.append(q) or original(self, buf, q)
    )
    bails = _oneshot.BAILS[0]
    with counting() as counts:
        _one_shot(name, (call + " and then <some> [text] (x) ") * 40, case["prefix"])()
    assert _oneshot.BAILS[0] == bails and counts["decide"] == 0, counts
    assert searches, name


@pytest.mark.parametrize("name", catalog.names())
def test_long_reasoning_with_near_miss_markers(name: str) -> None:
    info = catalog.describe(name)
    opener = "[THINK]" if name.startswith("mistral") else "<think>"
    noise = "a <tool_call b <|tool_call [TOOL_CALLS <function <｜DSML｜ x <|channel> y </ z "

    def make(k: int) -> Callable[[], object]:
        return _per_char(name, opener + noise * k, info["generation_prompt"])

    assert _ratio(make, 20) <= SLACK, name


@pytest.mark.parametrize("name", WITH_CALL)
def test_payload_then_long_whitespace(name: str) -> None:
    case = case_for(name, "one-call")
    assert case is not None
    payload, _ = call_span(name, case)

    def make(k: int) -> Callable[[], object]:
        return _per_char(name, payload + " \n" * k + "done", case["prefix"])

    # the first doubling crosses the 256-character window of the scanner's quick path (a constant step)
    assert _ratio(make, 400) <= 2.6, name
