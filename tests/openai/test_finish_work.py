"""The end of a `ChatParser` stream does only what this layer reads: the core's end events, and the
report of openers still undecided at the end (`ResponseParser.cut_off`) only when the output was cut
off (`finish_reason="length"`, where `_drop_cut_opener` reads it). The core's final message
(`ResponseParser._finish`) is never built: `ChatParser` builds its own. Counted, and the results
are the same as the core's `finalize` path gives (`merged` against the one-shot message)."""

from __future__ import annotations

from typing import Any

import pytest

from chatparse import _parser, _scan
from chatparse.openai import ChatParser, parse_message

from ..support.build import pure_only
from ..support.counting import calls_of

TPL = {
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>"},
    },
}
CALL = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
# Each output ends with text the core still holds (a call opener begun, "<tool_c"), so the scanner
# has something undecided to report at the end.
OUTPUTS = ["Hi <tool_c", "<think>x</think>" + CALL + "\n<tool_c", "Hi"]


def _ids() -> Any:
    return lambda: "call_1"


@pure_only  # counts `Scanner.undecided` and `ResponseParser._finish` by patching them
@pytest.mark.parametrize("text", OUTPUTS)
def test_finish_reports_undecided_openers_only_when_cut_off(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    undecided = calls_of(monkeypatch, _scan.Scanner, "undecided")
    core_message = calls_of(monkeypatch, _parser.ResponseParser, "_finish")
    for reason, asked in (("stop", 0), ("length", 1 if text.endswith("<tool_c") else 0)):
        before = undecided[0]
        p = ChatParser(template=TPL, prefix="<|im_start|>assistant\n", id_factory=_ids())
        deltas = p.feed(text)
        message, last, _ = p.finish(reason)
        assert undecided[0] - before == asked
        # the cut-off opener is still dropped at a "length" end, kept as text at a "stop" end
        content = "".join(d.get("content", "") for d in deltas + last)
        if text.endswith("<tool_c"):
            assert content.endswith("<tool_c") == (reason == "stop")
        if reason == "stop":
            assert message == parse_message(
                text, template=TPL, prefix="<|im_start|>assistant\n", id_factory=_ids()
            )
    assert core_message[0] == 0


def test_required_fields_are_still_checked_at_the_end() -> None:
    """A field marked `optional: false` that got no value is still reported by `finish` (the check
    `finalize` made), in both finish reasons."""
    tpl = {
        "start_anchor": "A",
        "fields": {"content": {"close": "<end>", "optional": False}, "x": {"open": "<x>"}},
    }
    for reason in ("stop", "length"):
        p = ChatParser(template=tpl, prefix="A")
        p.feed("<x>only x")
        message, _, _ = p.finish(reason)
        errors = message["chatparse"]["errors"]
        assert [e["field"] for e in errors] == [None] and "content" in errors[0]["error"]
        p = ChatParser(template=tpl, prefix="A")
        p.feed("hello<end>")
        assert "chatparse" not in p.finish(reason)[0]
