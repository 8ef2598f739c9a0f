"""`ChatParser`'s own work on call-dense streams (issue 9 item 4): a feed whose core answer changes
nothing in this layer costs `feed` a check, never a trip through `_answer` and `_process`.

Counted, never timed: on every catalog template with tool calls, streamed in small tokens, `_answer`
is entered exactly for the answers that can change something here (events, pending deltas, or a
chunk of the open region that needs the event path), so its calls per tool call do not grow with
the number of feeds; and the deltas and message are the ones the one-shot parse gives.
"""

from __future__ import annotations

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
