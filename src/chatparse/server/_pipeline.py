"""One request's answer: upstream events in, Chat Completions deltas out (no parsing of its own).

Raw text goes through `chatparse.openai.ChatParser` with the model's template and the rendered
prompt as prefix. Content from an engine that parses calls itself goes through
`ChatParser(auto=True)`, the local fallback of the runtime contract (§9): calls it recovers are held
until the end and sent only if the upstream returned no structured call (native calls always win; the
recovered ones are then reported as dropped). Every call, parsed or native, gets the next index at
its first delta, so indices are contiguous and stable. With `parallel_tool_calls=false` only the first
call is sent; the others are reported.

Both the streamed and the non-streamed answer run the same `Pipeline` over the same events, so they
are identical by construction; the message is the merge of the deltas that were sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._template import Template
from ..openai import ChatParser, merge_deltas
from ._upstream import Call, Content, Event, Finish, Reasoning, Text, UpstreamWarning


class Pipeline:
    """Feeds upstream events (see `_upstream`) and returns the deltas to send."""

    def __init__(
        self,
        *,
        template: Template | None,
        prefix: str | None,
        tools: Sequence[dict] | None,
        tool_choice: Any,
        parallel_tool_calls: bool,
        reasoning_key: str,
    ) -> None:
        self._keys = ("reasoning_content", "reasoning") if reasoning_key == "both" else (reasoning_key,)
        self._parse_calls = tool_choice != "none"
        self._parallel = parallel_tool_calls
        self._tools = list(tools) if tools else None
        self._reasoning_key = reasoning_key
        self._text: ChatParser | None = None
        if template is not None:
            self._text = ChatParser(
                template=template,
                prefix=prefix or "",
                tools=self._tools,
                reasoning_key=reasoning_key,
                parse_tool_calls=self._parse_calls,
            )
        self._fallback: ChatParser | None = None  # created on the first structured content
        self._recovered: list[dict[str, Any]] = []
        self._native = False
        self._index: dict[tuple[str, int], int | None] = {}
        self._next = 0
        self.sent: list[dict[str, Any]] = []
        self.report: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None

    # -- events ------------------------------------------------------------------------------

    def feed(self, event: Event) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if isinstance(event, Text):
            if self._text is None:  # a structured upstream sent raw text: treat it as content
                return self.feed(Content(event.text))
            self._take(self._text.feed(event.text), "parsed", out)
        elif isinstance(event, Reasoning):
            out.append(dict.fromkeys(self._keys, event.text))
        elif isinstance(event, Content):
            text = event.text
            if not self._parse_calls:
                out.append({"content": text})
            else:
                if self._fallback is None:
                    self._fallback = ChatParser(
                        auto=True, tools=self._tools, reasoning_key=self._reasoning_key
                    )
                self._take(self._fallback.feed(text), "fallback", out)
        elif isinstance(event, Call):
            self._native = True
            self._call(dict(event.entry), "native", out)
        elif isinstance(event, UpstreamWarning):
            self.report.setdefault("upstream_warnings", []).append(event.message)
        elif isinstance(event, Finish):
            self.usage = event.usage
            out.extend(self._finish(event.reason))
        if out:
            self.sent.extend(out)
        return out

    def abort(self) -> list[dict[str, Any]]:
        """The upstream failed mid-answer: release held text, keep only finished calls."""
        return self._record(self._finish("length", aborted=True))

    @property
    def calls_sent(self) -> int:
        """How many calls got an index (were sent)."""
        return self._next

    def message(self) -> dict[str, Any]:
        """The assistant message the sent deltas add up to, with the report when there is one."""
        message = merge_deltas(self.sent)
        if self.report:
            message["chatparse"] = self.report
        return message

    # -- internals ---------------------------------------------------------------------------

    def _record(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.sent.extend(out)
        return out

    def _take(self, deltas: list[dict[str, Any]], source: str, out: list[dict[str, Any]]) -> None:
        for d in deltas:
            entries = d.get("tool_calls")
            if not entries:
                out.append(d)
                continue
            for entry in entries:
                if source == "fallback":
                    self._recovered.append(entry)
                else:
                    self._call(entry, source, out)

    def _call(self, entry: dict[str, Any], source: str, out: list[dict[str, Any]]) -> None:
        key = (source, int(entry.get("index", 0)))
        if key not in self._index:
            if self._next >= 1 and not self._parallel:
                self._index[key] = None
                fn = entry.get("function") or {}
                self.report.setdefault("dropped", []).append(
                    {"reason": "parallel_tool_calls is false", "name": fn.get("name"), "id": entry.get("id")}
                )
            else:
                self._index[key] = self._next
                self._next += 1
        index = self._index[key]
        if index is None:
            return
        out.append({"tool_calls": [{**entry, "index": index}]})

    def _finish(self, reason: str, aborted: bool = False) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if aborted:
            reason = "length"
        upstream_reason = reason
        if self._text is not None:
            message, deltas, reason = self._text.finish(upstream_reason)
            self._take(deltas, "parsed", out)
            self._merge_report(message.get("chatparse"))
        if self._fallback is not None:
            message, deltas, _ = self._fallback.finish(upstream_reason)
            self._take(deltas, "fallback", out)
            self._merge_report(message.get("chatparse"))
        if self._recovered:
            if self._native:
                for entry in self._recovered:
                    if entry.get("id"):
                        fn = entry.get("function") or {}
                        self.report.setdefault("dropped", []).append(
                            {
                                "reason": "the upstream returned structured tool calls; calls found in its "
                                "content by the local fallback are not used",
                                "name": fn.get("name"),
                                "arguments": fn.get("arguments"),
                                "id": entry["id"],
                            }
                        )
            else:
                recovered = {e["index"] for e in self._recovered}
                for entry in self._recovered:
                    self._call(entry, "fallback", out)
                self.report["local_fallback"] = {"calls": len(recovered)}
        if upstream_reason in ("stop", "tool_calls"):
            reason = "tool_calls" if self._next else "stop"
        else:
            reason = upstream_reason
        self.finish_reason = reason
        return out

    def _merge_report(self, report: dict[str, Any] | None) -> None:
        for key, value in (report or {}).items():
            if isinstance(value, list):
                self.report.setdefault(key, []).extend(value)
            else:
                self.report[key] = value
