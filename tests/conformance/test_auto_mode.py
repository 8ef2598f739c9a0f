"""The canitoolcall corpus in auto mode: no template, the family detected from the output.

Every fixture goes through ``chatparse.openai.parse_message(..., auto=True)`` and
``ChatParser(auto=True)`` with the fixture's tools and prompt (``prefix``, so a pre-opened
``<think>`` is seen) but without ``model=``/``template=``, in every chunking of
``harness.STRATEGIES`` (whole, one character per feed, seeded 1-8 characters, marker cuts).
The measured counts are a ratchet: they may only go up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

pytest.importorskip("canitoolcall", reason="canitoolcall (test extra) is not installed")

from canitoolcall.results import Status  # noqa: E402

from . import harness as H  # noqa: E402

_MISSING = H.missing_layer_reason()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")

#: Measured floors (strict pass, soft pass) per family, over every chunking.
FLOORS: dict[str, tuple[int, int]] = {
    "deepseek": (85, 0),
    "gemma4": (47, 1),
    "glm": (51, 0),
    "gpt-oss": (51, 0),
    "kimi": (42, 7),
    "llama": (33, 1),
    "mistral": (47, 0),
    "qwen3-hermes": (50, 0),
    "qwen3-xml": (53, 0),
}
TOTAL_FLOOR = (459, 9)
#: Known failures (policy: a call written inside unclosed reasoning is reasoning text).
KNOWN_FAILURES = {"qwen3-xml/llamacpp-q35-call-inside-think"}


def _auto(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k not in ("model", "template")} | {"auto": True}


def _auto_layer() -> H.Layer:
    from chatparse import openai

    real = H.load_layer()

    def parse_message(raw: str, **kwargs: Any) -> Mapping[str, Any]:
        return openai.parse_message(raw, **_auto(kwargs))

    def chat_parser(**kwargs: Any) -> Any:
        return openai.ChatParser(**_auto(kwargs))

    return H.Layer(
        resolve_name=real.resolve_name,
        describe=real.describe,
        parse_message=parse_message,
        chat_parser=chat_parser,
        template_for=real.template_for,
    )


@pytest.fixture(scope="module")
def auto_run() -> H.Run:
    return H.run_corpus(_auto_layer())


def test_auto_mode_ratchet(auto_run: H.Run, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print("\nauto mode (no template):\n" + H.format_table(auto_run))
    sup = auto_run.supported()
    assert len(sup) == len(auto_run.cases)
    rows = {r["family"]: r for r in H.family_table(auto_run)}
    for fam, (strict, soft) in {**FLOORS, "total": TOTAL_FLOOR}.items():
        p, s, _ = rows[fam]["all"]
        assert p >= strict and p + s >= strict + soft, (fam, rows[fam]["all"])
    failing = {c.id for c in sup if c.status not in (Status.PASS, Status.SOFT_PASS)}
    assert failing <= KNOWN_FAILURES, sorted(failing - KNOWN_FAILURES)


def test_auto_mode_no_leakage(auto_run: H.Run) -> None:
    leaked = [c.id for c in auto_run.supported() if c.leaked() and c.id not in KNOWN_FAILURES]
    assert leaked == []


def test_auto_mode_no_false_calls(auto_run: H.Run) -> None:
    false_calls = []
    for c in auto_run.supported():
        exp = c.fixture.expected
        if exp is None or exp.tool_calls or c.observation is None:
            continue
        results = [c.observation.nonstream, *c.observation.streams.values()]
        if any(r.tool_calls for r in results):
            false_calls.append(c.id)
    assert false_calls == []


def test_auto_mode_stream_equals_nonstream(auto_run: H.Run) -> None:
    assert [c.id for c in auto_run.supported() if c.message_mismatch] == []
    for c in auto_run.supported():
        assert c.observation is not None
        for sid, r in c.observation.streams.items():
            assert r.tool_calls == c.observation.nonstream.tool_calls, (c.id, sid)
