"""Linear work, measured by counting operations (never wall-clock time).

For each adversarial shape of spec D1/D2 (unbounded prefix-less openers, many delimiters, long
held whitespace, long text with a trigger character everywhere), doubling the input must at most
double the number of scanner operations (with a little slack for constant terms), one-shot and
streamed one character at a time.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import chatparse
from chatparse import _rx, _scan

INKLING_UNBOUNDED = {
    "start_anchor": "<|message_model|>",
    "fields": {
        kind: {
            "open_pattern": f"(?:<\\|message_model\\|>)?[^<]*<\\|content_{tag}\\|>",
            "close": ["<|end_message|>", "<|content_model_end_sampling|>"],
            "repeats": True,
            **({"join": ""} if kind != "tool_calls" else {"content": "json"}),
        }
        for kind, tag in (("thinking", "thinking"), ("content", "text"), ("tool_calls", "invoke_tool_json"))
    },
}
QWEN_JSON = json.loads((Path(__file__).parent.parent / "data" / "families.json").read_text())["QWEN_JSON"]


@contextmanager
def counting() -> Iterator[collections.Counter]:
    counts: collections.Counter = collections.Counter()
    patched: list[tuple[Any, str, Callable]] = []

    def wrap(owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return original(*args, **kwargs)

        patched.append((owner, name, original))
        setattr(owner, name, counted)

    wrap(_rx.Attempt, "run")
    wrap(_scan._Finder, "next")
    wrap(_scan.Cursor, "step")
    wrap(_scan.Scanner, "scan")
    try:
        yield counts
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


def work(run: Callable[[], Any]) -> int:
    with counting() as counts:
        run()
    return sum(counts.values())


def one_shot(
    template: dict, make: Callable[[int], str], prefix: str = ""
) -> Callable[[int], Callable[[], Any]]:
    return lambda n: lambda: chatparse.parse_response(make(n), template, prefix=prefix)


def per_char(
    template: dict, make: Callable[[int], str], prefix: str = ""
) -> Callable[[int], Callable[[], Any]]:
    def run(n: int) -> Callable[[], Any]:
        def go() -> Any:
            p = chatparse.ResponseParser(template, prefix=prefix)
            for ch in make(n):
                p.feed(ch)
            return p.finalize()

        return go

    return run


CASES = {
    "d1-one-shot": one_shot(INKLING_UNBOUNDED, lambda n: "<|content_text|>" + "x" * n + "<|end_message|>"),
    "d1-per-char": per_char(
        INKLING_UNBOUNDED, lambda n: "x" * n + "<|content_text|>hi<|end_message|>", prefix="<|message_model|>"
    ),
    "d1-null-region-one-shot": one_shot(
        INKLING_UNBOUNDED, lambda n: "ab<x>" * (n // 5) + "<|content_text|>hi"
    ),
    "d2-many-calls": one_shot(
        QWEN_JSON,
        lambda n: (
            "".join(
                f'<tool_call>\n{{"name": "f", "arguments": {{"i": {k}}}}}\n</tool_call>\n'
                for k in range(n // 50)
            )
            + "<|im_end|>"
        ),
    ),
    "whitespace-one-shot": one_shot(QWEN_JSON, lambda n: "a" + " " * n + "b<|im_end|>"),
    "whitespace-per-char": per_char(QWEN_JSON, lambda n: "a" + " \n" * (n // 2) + "<|im_end|>"),
    "angle-brackets-per-char": per_char(QWEN_JSON, lambda n: "a <b> c</d>" * (n // 11) + "<|im_end|>"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_doubling_the_input_at_most_doubles_the_work(name: str) -> None:
    make = CASES[name]
    small, large = work(make(4000)), work(make(8000))
    assert large <= 2.3 * small + 50, (name, small, large)
