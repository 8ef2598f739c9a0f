"""`ChatParser`'s own work on call-dense streams (issue 9 item 4): a feed whose core answer changes
nothing in this layer costs `feed` a check, never a trip through `_answer` and `_process`.

Counted, never timed: on every catalog template with tool calls, streamed in small tokens, `_answer`
is entered exactly for the answers that can change something here (events, pending deltas, or a
chunk of the open region that needs the event path), so its calls per tool call do not grow with
the number of feeds; and the deltas and message are the ones the one-shot parse gives.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatparse.openai import ChatParser, parse_message
from chatparse.openai._chat import _SLOW

from ..core.test_call_dense import CALL_TEMPLATES, _calls_text
from ..core.test_linear import TEMPLATES
from ..support.build import pure_only
from .helpers import counter_ids, merged, public

N_CALLS = 12
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def _tokens(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _changes_something(parser: ChatParser, r: Any) -> bool:
    """Whether `_answer` is needed for the core's answer `r` (read before the answer is taken)."""
    if type(r) is str:
        return parser._sink is _SLOW
    return bool(r) or bool(parser._pending)


@pure_only
@pytest.mark.parametrize("name", CALL_TEMPLATES)
@pytest.mark.parametrize("stream_tool_calls", ["complete", "early"])
def test_answer_only_where_something_changes(
    name: str, stream_tool_calls: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = TEMPLATES[name]
    text = _calls_text(t, N_CALLS, 3)
    assert text is not None
    entered = 0
    real_answer = ChatParser._answer

    def answer(self: ChatParser, r: Any) -> Any:
        nonlocal entered
        entered += 1
        return real_answer(self, r)

    monkeypatch.setattr(ChatParser, "_answer", answer)
    for size in (1, 3):
        parser = ChatParser(
            template=t, prefix="", tools=TOOLS, id_factory=counter_ids(), stream_tool_calls=stream_tool_calls
        )
        core = parser._core_feed
        needed = 0

        def recording(chunk: str, _core: Any = core, _parser: ChatParser = parser) -> Any:
            nonlocal needed
            r = _core(chunk)
            needed += _changes_something(_parser, r)
            return r

        parser._core_feed = recording
        entered = 0
        deltas: list[dict[str, Any]] = []
        chunks = _tokens(text, size)
        for c in chunks:
            deltas += parser.feed(c)
        # exactly the answers that can change something, far fewer than the feeds
        assert entered == needed, (name, size, entered, needed)
        if size == 1 and stream_tool_calls == "complete":
            assert entered <= 8 * N_CALLS + 8 < len(chunks) // 2, (name, entered, len(chunks))
        message, last, _ = parser.finish()
        if stream_tool_calls == "complete":  # (early streaming keeps the arguments as written)
            want = parse_message(text, template=t, prefix="", tools=TOOLS, id_factory=counter_ids())
            assert message == want
        assert merged(message, deltas + last) == public(message)


def _family_calls(family: str, n: int) -> str:
    """`n` calls as the family writes them (after a sentence), with valid arguments."""
    if family == "qwen3_xml":
        calls = "".join(
            f"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis{i}\n</parameter>\n"
            "</function>\n</tool_call>\n"
            for i in range(n)
        )
    elif family == "kimi_k2":
        calls = (
            "<|tool_calls_section_begin|>"
            + "".join(
                f"<|tool_call_begin|>functions.get_weather:{i}<|tool_call_argument_begin|>"
                f'{{"city": "Paris{i}"}}<|tool_call_end|>'
                for i in range(n)
            )
            + "<|tool_calls_section_end|>"
        )
    else:
        assert family == "deepseek_v3"
        calls = (
            "<｜tool▁calls▁begin｜>"
            + "".join(
                f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                f'{{"city": "Paris{i}"}}\n```<｜tool▁call▁end｜>'
                for i in range(n)
            )
            + "<｜tool▁calls▁end｜>"
        )
    return "Let me check. \n" + calls


@pure_only
@pytest.mark.parametrize("family", ["deepseek_v3", "kimi_k2", "qwen3_xml"])
def test_a_kept_call_takes_the_short_close(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call of the usual shape, sent whole and kept, is closed without the general value walk
    (`_calls`) or the `_add`/`_keep` steps, and the text before the calls is flushed once, not
    at every call; the deltas and message are unchanged (one-shot, and a known tool's typing)."""
    from chatparse.openai import _calls
    from chatparse.openai._text import TextStream

    counts = dict.fromkeys(("_calls", "_add", "_keep", "flush"), 0)
    for owner, attr in ((_calls, "_calls"),):
        real = getattr(owner, attr)
        monkeypatch.setattr(
            owner, attr, lambda *a, _r=real, _n=attr: counts.__setitem__(_n, counts[_n] + 1) or _r(*a)
        )
    for cls, attr in (
        (_calls.ToolCallAssembler, "_add"),
        (_calls.ToolCallAssembler, "_keep"),
        (TextStream, "flush"),
    ):
        real = vars(cls)[attr]
        monkeypatch.setattr(
            cls, attr, lambda *a, _r=real, _n=attr: counts.__setitem__(_n, counts[_n] + 1) or _r(*a)
        )
    t = TEMPLATES[family]
    text = _family_calls(family, N_CALLS)
    parser = ChatParser(template=t, prefix="", tools=TOOLS, id_factory=counter_ids())
    deltas: list[dict[str, Any]] = []
    for c in _tokens(text, 2):
        deltas += parser.feed(c)
    message, last, reason = parser.finish()
    assert counts["_calls"] == counts["_add"] == counts["_keep"] == 0 and counts["flush"] <= 1, counts
    assert reason == "tool_calls" and message["content"].startswith("Let me check.")
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [
        {"city": f"Paris{i}"} for i in range(N_CALLS)
    ]
    # (Kimi K2 writes its call ids; the others take the id factory's)
    ids = "functions.get_weather:{}" if family == "kimi_k2" else "call_{}"
    assert [c["id"] for c in message["tool_calls"]] == [ids.format(i) for i in range(N_CALLS)]
    assert message == parse_message(text, template=t, prefix="", tools=TOOLS, id_factory=counter_ids())
    assert merged(message, deltas + last) == public(message)
