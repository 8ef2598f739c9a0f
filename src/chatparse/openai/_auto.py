"""Auto mode in Chat Completions form: `AutoStream`, `parse_auto` and `local_fallback`.

These were `chatparse.detect`'s own delta builders; the detect layer now emits region events
(`chatparse.detect.AutoParser`) and `ChatParser(auto=True)` builds the deltas, the same code path
as template mode. The names stay importable from `chatparse.detect` (source compatibility).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..detect import DetectResult
from ._calls import random_call_id
from ._chat import ChatParser

__all__ = ["AutoStream", "local_fallback", "parse_auto"]


class AutoStream:
    """Streams one assistant message as Chat Completions deltas, detecting the family on the fly.

    `ChatParser(auto=True, ...)` with `detect`'s options; `result` is the `DetectResult` after
    `finish`.

    >>> s = AutoStream(id_factory=lambda: "call_1")
    >>> s.feed("<think>hm</think>Hi ")
    [{'reasoning_content': 'hm'}, {'content': 'Hi'}]
    >>> s.feed('<tool_call>{"name": "f", "arguments": {}}</tool_call>')
    [{'tool_calls': [{'index': 0, 'id': 'call_1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{}'}}]}]
    >>> message, deltas, reason = s.finish()
    >>> message["content"], reason, s.result.recognizer
    ('Hi', 'tool_calls', 'hermes')
    """

    def __init__(
        self,
        *,
        tools: Sequence[dict | Callable] | None = None,
        recognizers: str | Sequence[str] | None = None,
        id_factory: Callable[[], str] | None = None,
        prefix: str | None = None,
        orphan_reasoning: bool = False,
    ) -> None:
        self._chat = ChatParser(
            auto=True,
            tools=tools,
            recognizers=recognizers,
            id_factory=id_factory or random_call_id,
            prefix=prefix,
            orphan_reasoning=orphan_reasoning,
        )
        self.parser = self._chat._auto
        assert self.parser is not None
        self.result: DetectResult | None = None

    @property
    def _parser(self) -> Any:
        """The core parser running the union template (for tests and benchmarks)."""
        assert self.parser is not None
        return self.parser._parser

    def feed(self, text: str) -> list[dict[str, Any]]:
        """Append model output; return the Chat Completions deltas it completes."""
        return self._chat.feed(text)

    def finish(self, finish_reason: str = "stop") -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """End the stream: `(message, last deltas, finish_reason)`."""
        out = self._chat.finish(finish_reason)
        assert self.parser is not None
        self.result = self.parser.result
        return out


def parse_auto(
    text: str,
    *,
    tools: Sequence[dict | Callable] | None = None,
    recognizers: str | Sequence[str] | None = None,
    finish_reason: str = "stop",
    id_factory: Callable[[], str] | None = None,
    prefix: str | None = None,
    orphan_reasoning: bool = False,
) -> tuple[dict[str, Any], str]:
    """The message and finish_reason for a complete output (`chatparse.openai.parse_auto`)."""
    s = AutoStream(
        tools=tools,
        recognizers=recognizers,
        id_factory=id_factory,
        prefix=prefix,
        orphan_reasoning=orphan_reasoning,
    )
    s.feed(text)
    message, _, reason = s.finish(finish_reason)
    return message, reason


def local_fallback(
    provider_message: dict,
    *,
    tools: Sequence[dict | Callable] | None = None,
    recognizers: str | Sequence[str] | None = None,
    id_factory: Callable[[], str] | None = None,
    orphan_reasoning: bool = True,
) -> tuple[dict, DetectResult | None]:
    """Recover calls written as text by a provider with native tool calling (§9).

    Runs only when the provider returned no structured calls; native calls always win. Returns the
    message (recovered calls appended with minted ids, content cleaned) and the detection report,
    or the message unchanged and None.

    >>> m, r = local_fallback({"role": "assistant", "content": '<call:echo{"text": "hi"}>'},
    ...                       id_factory=lambda: "call_1")
    >>> m["tool_calls"], m["content"], r.recognizer
    ([{'id': 'call_1', 'type': 'function', 'function': {'name': 'echo', 'arguments': '{"text": "hi"}'}}], None, 'gemma')
    """
    content = provider_message.get("content")
    if provider_message.get("tool_calls") or not isinstance(content, str) or not content:
        return provider_message, None
    s = AutoStream(
        tools=tools, recognizers=recognizers, id_factory=id_factory, orphan_reasoning=orphan_reasoning
    )
    s.feed(content)
    message, _, _ = s.finish()
    result = s.result
    assert result is not None
    if not result.calls:
        return provider_message, result
    out = dict(provider_message)
    out["content"] = message["content"]
    out["tool_calls"] = message["tool_calls"]
    if "reasoning_content" in message and not out.get("reasoning_content"):
        out["reasoning_content"] = message["reasoning_content"]
    return out, result
