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
from ._common import REASONING_FIELDS, TOOL_FIELD


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
        # The core's end events only: its final message (`finalize`'s, which also checks required
        # fields and reports cut-off openers) is never read here.
        events = self._parser._end(False)
        self._parser._finalized = True
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


class ToolsOffSplitter(ReasoningSplitter):
    """A turn whose tool calls are not parsed (`tool_choice="none"`, no tools offered, no auto tool
    choice): reasoning out, every call written into the content verbatim, incrementally.

    Parses with the whole template, so the content field closes where the model's calls start
    exactly as in a turn with tools, and routes the events by their offsets: a tool-call region
    goes to the content raw, delimiters included, and so do the text that belongs to no region
    (Kimi's call-section markers) and the content's closers (DeepSeek's `<｜tool▁calls▁begin｜>`);
    only a region's non-empty opener, with the text before it, is dropped as framing (Harmony's
    `<|start|>assistant<|channel|>final<|message|>`), unless a call precedes it; reasoning is split out as by
    `ReasoningSplitter`, or, with `split_reasoning=False` (no reasoning parser), stays in the
    content raw like a call. Nothing the model wrote outside the reasoning and the content's own
    framing is dropped.

    >>> from chatparse import catalog, load_response_template
    >>> t = load_response_template(catalog.get("deepseek_v31"))
    >>> s = ToolsOffSplitter(t, prefix="<｜Assistant｜></think>")
    >>> s.feed("Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>")
    ('', 'Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>')
    >>> s.feed("<｜tool▁calls▁end｜>")
    ('', '')
    >>> s.finish()
    ('', '<｜tool▁calls▁end｜>')
    """

    def __init__(self, template: Template, prefix: str = "", *, split_reasoning: bool = True) -> None:
        self._split_reasoning = split_reasoning
        self._after_raw = False  # the last region was written raw (a call): the gap after it is too
        super().__init__(template, prefix=prefix)

    def _route(
        self, events: list[Any], reasoning: list[str], normal: list[str], initial: bool = False
    ) -> None:
        buf = self._parser.input_text
        for e in events:
            kind, name = e["type"], e["field"]
            split = name in REASONING_FIELDS and self._split_reasoning
            raw = name == TOOL_FIELD or (name in REASONING_FIELDS and not self._split_reasoning)
            if initial:  # the prompt's own regions: state only, nothing is passed on
                if split and kind != "region_chunk":
                    self._in_reasoning = kind == "region_open"
                    self.reasoning_seen = True
                    self.reasoning_ended = self.reasoning_ended or kind != "region_open"
                continue
            if kind == "region_chunk":
                end = self._pos + len(e["text"])
                if split:
                    self._reasoning_text(e["text"], reasoning)
                else:
                    normal.append(buf[self._pos : end])
                self._pos = end
                continue
            opening = kind == "region_open"
            gap = buf[self._pos : e["start"]] if e["start"] > self._pos else ""
            delim = buf[max(self._pos, e["start"]) : e["end"]]
            if raw:
                normal.append(gap + delim)
                self._after_raw = not opening
                self._pos = max(self._pos, e["end"])
                continue
            if opening:
                # A region's opener is framing (Harmony's `<|channel|>final<|message|>`), dropped with
                # the text that led up to it, unless it follows a call (then it is written as-is,
                # like the call); an empty opener drops nothing (the text before it is the model's).
                if self._after_raw:
                    normal.append(gap if split else gap + delim)
                elif not delim:
                    normal.append(gap)
            elif not split:  # a content closer is where calls start (`<｜tool▁calls▁begin｜>`): kept
                normal.append(gap + delim)
            self._after_raw = False
            if split:
                self._in_reasoning = opening
                self._hold = ""
                if opening:
                    self.reasoning_seen = True
                else:
                    self.reasoning_ended = True
            elif opening and self.reasoning_seen:
                self.reasoning_ended = True
            self._pos = max(self._pos, e["end"])


class PassthroughChat:
    """`ToolsOffSplitter` behind the part of `chatparse.openai.ChatParser`'s interface the plugins
    use: `feed` returns OpenAI deltas (`reasoning_content` / `content`), `finish(reason)` returns
    `(message, deltas, reason)`."""

    def __init__(self, template: Template, prefix: str = "", *, split_reasoning: bool = True) -> None:
        self._splitter = ToolsOffSplitter(template, prefix=prefix, split_reasoning=split_reasoning)
        self._reasoning: list[str] = []
        self._content: list[str] = []

    def _deltas(self, reasoning: str, content: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if reasoning:
            self._reasoning.append(reasoning)
            out.append({"reasoning_content": reasoning})
        if content:
            self._content.append(content)
            out.append({"content": content})
        return out

    def feed(self, text: str) -> list[dict[str, Any]]:
        return self._deltas(*self._splitter.feed(text))

    def finish(self, reason: str = "stop") -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        deltas = self._deltas(*self._splitter.finish())
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        return message, deltas, reason
