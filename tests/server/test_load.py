"""Load: 100 concurrent streaming chat completions through one chatparse server, real async client.

The engine paces every stream (a few ms per token, a few hundred tokens), so the streams really
overlap in the engine; every one of them must still arrive complete and exactly right.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from chatparse.openai import merge_deltas

from .conftest import MODEL, WEATHER, running
from .engine import Script, TestEngine

STREAMS = 100
OVERLAP = 50
DELAY = 0.003  # seconds per token: ~330 tokens/s per stream

PLAIN_TEXT = " ".join(
    f"Point {i}: the forecast for the coming days stays mild, with light wind and some sun."
    for i in range(1, 8)
)
REASONING = " ".join(
    f"Step {i}: the user asks about two cities, so I need the weather for each of them." for i in range(1, 5)
)
CALLS_CONTENT = "I will look up both cities for you right away."
CALLS_TEXT = (
    f"<think>\n{REASONING}\n</think>\n\n{CALLS_CONTENT}\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", '
    '"days": 3}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius", '
    '"days": 5}}\n</tool_call><|im_end|>'
)
CUT_CONTENT = "Let me check the weather in a city with a rather long name first."
CUT_TEXT = (
    f"{CUT_CONTENT}\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch", '
    '"unit": "celsius", "days": 7, "note": "' + "very " * 40 + 'long"}}\n</tool_call><|im_end|>'
)


def _expected_calls(*cities: tuple[str, int]) -> list[dict[str, Any]]:
    return [
        {"name": "get_weather", "arguments": {"city": c, "unit": "celsius", "days": d}} for c, d in cities
    ]


CASES: dict[str, tuple[Script, dict[str, Any], dict[str, Any], str]] = {
    # key: (script, extra request arguments, expected message (plain form), finish reason)
    "load-plain": (
        Script(text=PLAIN_TEXT + "<|im_end|>", delay=DELAY),
        {},
        {"role": "assistant", "content": PLAIN_TEXT},
        "stop",
    ),
    "load-calls": (
        Script(text=CALLS_TEXT, delay=DELAY),
        {},
        {
            "role": "assistant",
            "content": CALLS_CONTENT,
            "reasoning_content": REASONING,
            "tool_calls": _expected_calls(("Paris", 3), ("Oslo", 5)),
        },
        "tool_calls",
    ),
    "load-cut": (
        Script(text=CUT_TEXT, delay=DELAY),
        {},  # max_tokens set below, from the engine's tokenization: the cut falls inside the call
        {"role": "assistant", "content": CUT_CONTENT},
        "length",
    ),
}


def _cut_max_tokens(engine: TestEngine) -> int:
    """A max_tokens budget that stops the `load-cut` generation in the middle of the arguments."""
    tokens = engine.tokens("load-cut", CUT_TEXT)
    text = ""
    for i, (piece, _) in enumerate(tokens):
        text += piece
        if "very very very" in text:
            return i + 1
    raise AssertionError("unreachable")


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """The merged message without ids, tool calls as {name, parsed arguments}."""
    out = {k: v for k, v in message.items() if k not in ("refusal", "chatparse")}
    calls = out.pop("tool_calls", None)
    if calls:
        out["tool_calls"] = [
            {"name": t["function"]["name"], "arguments": json.loads(t["function"]["arguments"])}
            for t in calls
        ]
    return out


class _PeakActive:
    """Samples `engine.active` in a background thread and keeps the maximum."""

    def __init__(self, engine: TestEngine) -> None:
        self.engine = engine
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-active", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.engine.active)
            time.sleep(0.002)

    def __enter__(self) -> _PeakActive:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def load_engine() -> Iterator[TestEngine]:
    """An engine of its own, so that `active` counts only this module's streams."""
    with TestEngine() as eng:
        for key, (script, _, _, _) in CASES.items():
            eng.add(key, script)
        yield eng


async def _one(c: openai.AsyncOpenAI, key: str, extra: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    stream = await c.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"[case:{key}] weather in Paris and Oslo?"}],
        tools=[WEATHER],
        stream=True,
        **extra,
    )
    deltas: list[dict[str, Any]] = []
    reasons: list[str] = []
    async for chunk in stream:
        if chunk.choices:
            deltas.append(chunk.choices[0].delta.model_dump(exclude_none=True))
            if chunk.choices[0].finish_reason:
                reasons.append(chunk.choices[0].finish_reason)
    return merge_deltas(deltas), reasons


async def _run_all(url: str, jobs: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    # The SDK's default pool (1000 connections) lets all streams run at once; a start barrier
    # is not needed: creating the tasks costs far less than one stream lasts.
    c = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
    try:
        return await asyncio.gather(*(_one(c, key, extra) for key, extra in jobs), return_exceptions=True)
    finally:
        await c.close()


def test_100_concurrent_streams(load_engine: TestEngine, qwen_dir: Path) -> None:
    extras = {key: dict(extra) for key, (_, extra, _, _) in CASES.items()}
    extras["load-cut"]["max_tokens"] = _cut_max_tokens(load_engine)
    keys = list(CASES)
    jobs = [(keys[i % len(keys)], extras[keys[i % len(keys)]]) for i in range(STREAMS)]
    # Each stream waits for OVERLAP streams to be open at the engine before its first token, so the
    # overlap does not depend on how fast a loaded machine starts the clients (30 s at most).
    for key, (script, _, _, _) in CASES.items():
        load_engine.add(key, dataclasses.replace(script, gate=OVERLAP))
    try:
        with running(
            upstream=load_engine.url, model=MODEL, tokenizer=str(qwen_dir), upstream_api="completions"
        ) as srv:
            with _PeakActive(load_engine) as peak:
                t0 = time.monotonic()
                results = asyncio.run(_run_all(srv.url, jobs))
                elapsed = time.monotonic() - t0
            errors = [(key, r) for (key, _), r in zip(jobs, results) if isinstance(r, BaseException)]
            assert not errors, f"{len(errors)} of {STREAMS} streams failed, first: {errors[0]!r}"
            for (key, _), (merged, reasons) in zip(jobs, results):
                _, _, want, want_reason = CASES[key]
                assert reasons == [want_reason], (key, reasons)
                assert _plain(merged) == want, key
            assert load_engine.wait_for(lambda e: e.active == 0, timeout=5.0), load_engine.active
    finally:
        for key, (script, _, _, _) in CASES.items():
            load_engine.add(key, script)
    assert load_engine.completed == STREAMS and load_engine.cancelled == 0
    assert peak.peak >= OVERLAP, f"only {peak.peak} streams overlapped in the engine ({elapsed:.1f} s)"
