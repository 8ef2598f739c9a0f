"""`ReasoningSplitter`: reasoning out, everything else through verbatim (for split reasoning/tool APIs).

Both engines also run a reasoning parser *before* a separate tool parser: SGLang always
(`ReasoningParser`, then `FunctionCallParser` on its normal text), vLLM when a legacy
`ReasoningParser` is paired with another tool parser. The reasoning side must then hand the tool
side the rest of the output as it was written, call markup included. The splitter runs the core
`ResponseParser` with the whole template and routes its events by their offsets into
`input_text`: the bodies of reasoning regions become reasoning text (edges stripped, as the
message's reasoning is), everything else (content, tool-call regions with their delimiters) is
passed through raw, except that leading whitespace of the normal text is dropped (the message's
content is stripped anyway, and it is the separator after `</think>`). Reasoning delimiters are
consumed. Text of the prompt (the prefix) is never passed on.
"""

from __future__ import annotations

from typing import Any

from .._parser import ResponseParser
from .._template import Template
from ..errors import RequiredFieldsMissing
from ._common import REASONING_FIELDS


class ReasoningSplitter:
    """Splits one generation into reasoning text and verbatim normal text, incrementally.

    >>> from chatparse import catalog, load_response_template
    >>> s = ReasoningSplitter(load_response_template(catalog.get("qwen3")), prefix="<|im_start|>assistant\\n")
    >>> s.feed("<think>\\nhm\\n</think>\\n\\nHi <tool_call>")
    ('hm', 'Hi <tool_call>')
    >>> s.feed('{"name": "f"}</tool_call>')
    ('', '{"name": "f"}</tool_call>')
    >>> s.finish()
    ('', '')
    """

    def __init__(self, template: Template, prefix: str = "") -> None:
        self._parser = ResponseParser(template, prefix=prefix)
        self._pos = len(self._parser.input_text)  # raw text before this was routed
        self._in_reasoning = False
        self._started = False  # some reasoning text was committed
        self._hold = ""  # trailing whitespace of the reasoning, not yet known to be inside it
        self._finished = False
        self._normal_started = False  # leading whitespace of the normal text is dropped
        self.reasoning_ended = False
        """A reasoning region closed (or a non-reasoning region opened after one)."""
        self.reasoning_seen = False
        self._route(self._parser.initial_events, [], [], initial=True)

    @property
    def in_reasoning(self) -> bool:
        """Whether a reasoning region is open (e.g. the prompt pre-opened `<think>`)."""
        return self._in_reasoning

    def feed(self, text: str) -> tuple[str, str]:
        """`(reasoning text, normal text)` released by `text`."""
        reasoning: list[str] = []
        normal: list[str] = []
        self._route(self._parser.feed(text), reasoning, normal)
        return "".join(reasoning), self._normal(normal)

    def _normal(self, pieces: list[str]) -> str:
        text = "".join(pieces)
        if not self._normal_started:
            text = text.lstrip()
            self._normal_started = bool(text)
        return text

    def finish(self) -> tuple[str, str]:
        """End of the output: what was still held."""
        if self._finished:
            return "", ""
        self._finished = True
        try:
            _, events = self._parser.finalize()
        except RequiredFieldsMissing as e:
            events = e.events
        reasoning: list[str] = []
        normal: list[str] = []
        self._route(events, reasoning, normal)
        buf = self._parser.input_text
        if self._pos < len(buf) and not self._in_reasoning:
            normal.append(buf[self._pos :])
            self._pos = len(buf)
        return "".join(reasoning), self._normal(normal)

    def _reasoning_text(self, text: str, out: list[str]) -> None:
        if not self._started:
            text = text.lstrip()
            if not text:
                return
        whole = self._hold + text
        keep = len(whole.rstrip())
        if keep:
            out.append(whole[:keep])
            self._started = True
        self._hold = whole[keep:]

    def _route(
        self, events: list[Any], reasoning: list[str], normal: list[str], initial: bool = False
    ) -> None:
        buf = self._parser.input_text
        for e in events:
            kind, name = e["type"], e["field"]
            if name in REASONING_FIELDS:
                if kind == "region_open":
                    if self._pos < e["start"]:
                        normal.append(buf[self._pos : e["start"]])
                    self._pos = max(self._pos, e["end"])
                    self._in_reasoning = True
                    self.reasoning_seen = True
                    self._hold = ""
                elif kind == "region_chunk":
                    self._reasoning_text(e["text"], reasoning)
                    if not initial:
                        self._pos += len(e["text"])
                else:  # close or malformed: the closer is consumed too
                    self._pos = max(self._pos, e["end"])
                    self._in_reasoning = False
                    self.reasoning_ended = True
                    self._hold = ""
                continue
            if kind == "region_chunk":
                if not initial:
                    end = self._pos + len(e["text"])
                    normal.append(buf[self._pos : end])
                    self._pos = end
            elif e["end"] > self._pos:
                normal.append(buf[self._pos : e["end"]])
                self._pos = e["end"]
            if kind == "region_open" and self.reasoning_seen:
                self.reasoning_ended = True
