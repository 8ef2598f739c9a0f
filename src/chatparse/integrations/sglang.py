"""chatparse as SGLang's tool-call and reasoning parser: `--tool-call-parser chatparse --reasoning-parser chatparse`.

```sh
pip install 'chatparse[sglang]'
python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tool-call-parser chatparse --reasoning-parser chatparse
```

Installing chatparse adds an `sglang.srt.plugins` entry point; SGLang's `load_plugins()` (run by
`launch_server` before it parses the command line, and in every process it starts) calls
`register`, which puts the detectors into `FunctionCallParser.ToolCallParserEnum` and
`ReasoningParser.DetectorMap` and registers the hooks below with SGLang's `HookRegistry`.
`SGLANG_PLUGINS`, when set, must name `chatparse`.

What runs
---------
SGLang runs the reasoning parser first and the tool-call parser on its normal text, each created
per request and per choice by `OpenAIServingChat`.

* `ChatparseReasoningDetector` splits reasoning out with the whole template and passes everything
  else through verbatim (`chatparse.integrations._split.ReasoningSplitter`), so whichever tool parser
  follows sees the calls as the model wrote them.
* When both are chatparse and tools are parsed, the reasoning detector parses once with the whole
  template and hands each step's content and calls to the tool-call detector (`_OneParse`), which
  then does not parse at all: SGLang creates the two as separate objects, and parsing twice would
  double the cost. The two find each other once, on the first step, through the request context;
  from then on SGLang's per-token calls of both detectors are bound straight to the shared parse
  (`_OneParse.step`, `_OneParse.take`). The step calls the core's per-token `_feed` itself and
  hands `ChatParser` only an answer that can change something there (`ChatParser._answer`): the
  usual step (nothing released, or a chunk of a call being written) goes core, then a shared empty
  result, with no `ChatParser` frame. Everything derived from the template alone (reasoning markers,
  prompt openers, field plans, the compiled variants) is derived once, not per request.
* Otherwise `ChatparseDetector` runs a `chatparse.openai.ChatParser` on that text with the template minus its
  reasoning field (so without `--reasoning-parser chatparse` reasoning markup stays content, as it
  does for SGLang's own parsers). Calls are sent whole when complete (`CHATPARSE_STREAM_TOOL_CALLS`),
  with stable indices in call order; unknown tools are surfaced (`CHATPARSE_UNKNOWN_TOOLS=drop` is
  SGLang's convention); a malformed or cut-off call is never returned. SGLang mints the call ids.
  After its first step, SGLang's per-token call goes straight to the parse's own step
  (`_tool_steps`), which, like `_OneParse.step`, skips `ChatParser` on a step that changes nothing.

The seam where the request is visible
-------------------------------------
SGLang's detectors never see the request: not the rendered prompt (which the parser needs as its
prefix, to see a `<think>` or a call the prompt opened) and not why generation ended (a call cut off
by `max_tokens` must not be returned). Both are visible one level up, in `OpenAIServingChat`, and
`register` hooks exactly there (SGLang `HookRegistry`, `AROUND` hooks that call the original):

* `_requires_response_template_detokenization` answers yes for chatparse too, so SGLang keeps the
  template's delimiters in the detokenized text and stores the decoded prompt on the request
  (`request._response_parser_prefix`), as it does for its own response-template parsers;
* `_process_tool_call_stream` (streaming: `content["meta_info"]["finish_reason"]` on the flushing
  step), `_process_tool_calls` (non-streaming: its `finish_reason` argument),
  `_process_reasoning_stream` (its `finish_reason_type`, the tool-call parser's name and the
  request's tools) and `_build_chat_response` publish the prefix and the finish reason in a
  `contextvars.ContextVar`; the detectors read it. A context variable is
  per asyncio task, i.e. per request: no state is shared between requests;
* `OpenAIServingChat.__init__` resolves the template at startup, so a model without one fails with
  one line instead of on the first request.

`tool_choice="required"` and named choices: `ChatparseDetector.get_structural_tag` returns the
constraint `chatparse.constraints` derives from the template and the tools as XGrammar's
`StructuralTag`, which SGLang's serving code sends as the request's `structural_tag`; because the
detector supports structural tags, SGLang parses the forced output with it (not with its
JSON-array parser). With `--reasoning-parser`, SGLang's reasoning grammar backend applies the
grammar once the reasoning closer is generated, so the grammar then describes only what follows.
SGLang builds the constraint before rendering the prompt: no prefix reaches the derivation. A
template or schema the constraints cannot express raises `ToolChoiceError`, a `ValueError` that
SGLang answers 400 (a hook on `FunctionCallParser.get_structure_constraint`, whose own code would
log the error and fall back to a JSON-array schema). `auto` is not constrained.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import regex

try:
    from sglang.srt.function_call.base_format_detector import BaseFormatDetector
    from sglang.srt.function_call.core_types import StreamingParseResult, ToolCallItem
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import BaseReasoningFormatDetector, ReasoningParser
    from sglang.srt.parser.reasoning_parser import StreamingParseResult as ReasoningResult
except ImportError as e:  # pragma: no cover - exercised only without SGLang
    raise ImportError(
        f"chatparse.integrations.sglang needs SGLang 0.5.23 (pip install 'chatparse[sglang]'): {e}"
    ) from e

from .._parser import ResponseParser
from .._rx import required_literal
from .._template import Template
from ..openai import ChatParser
from ._common import (
    PARSER_NAME,
    REASONING_FIELDS,
    Policy,
    Resolved,
    delimiter_literal,
    describe,
    finish_deltas,
    finish_output,
    forces_tool_calls,
    no_call_id,
    parser_tool_table,
    prebuilt,
    resolve,
    tool_constraint,
)
from ._split import ReasoningSplitter, ToolsOffSplitter

__all__ = ["ChatparseDetector", "ChatparseReasoningDetector", "register", "request_context"]

log = logging.getLogger("chatparse.integrations.sglang")

_SERVING = "sglang.srt.entrypoints.openai.serving_chat.OpenAIServingChat"

#: What the serving layer knows about the request being parsed in this task: `prefix` (the decoded
#: prompt) and `finish_reason` (SGLang's finish dict, or None while generating).
_REQUEST: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "chatparse_request", default=None
)


def request_context() -> dict[str, Any]:
    """The serving layer's view of the current request (empty outside a hooked serving method)."""
    return _REQUEST.get() or {}


def _finish_type(finish: Any) -> str:
    kind = finish.get("type") if isinstance(finish, dict) else getattr(finish, "type", finish)
    return "length" if kind == "length" else "stop"


def _prefix_now() -> str:
    prefix = request_context().get("prefix")
    return prefix if isinstance(prefix, str) else ""


# --------------------------------------------------------------------------------------------------
# reasoning


class _CleanSplit:
    """Reasoning and clean content (no tool parser follows): a `ChatParser` without tool parsing,
    so call markup stays in the content verbatim and content framing (channels) is removed."""

    def __init__(self, resolved: Resolved, prefix: str) -> None:
        template = resolved.variant(reasoning=True, tools=False) or resolved.template
        self._parser = ChatParser(
            template=template, prefix=prefix, parse_tool_calls=template is not resolved.template
        )
        self.in_reasoning = False

    def _split(self, deltas: list[dict[str, Any]]) -> tuple[str, str]:
        reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
        content = "".join(d.get("content", "") for d in deltas)
        if content:
            self.in_reasoning = False
        elif reasoning:
            self.in_reasoning = True
        return reasoning, content

    def feed(self, text: str) -> tuple[str, str]:
        return self._split(self._parser.feed(text))

    def finish(self) -> tuple[str, str]:
        return self._split(self._parser.finish("stop")[1])


_NOTHING_SPLIT = ("", "")
"""(reasoning, normal) of a step that releases nothing."""


class _OneParse:
    """Reasoning, content and calls in one parse, when the chatparse tool parser follows.

    SGLang runs the reasoning parser and then the tool-call parser on its normal text, each its own
    object. When both are chatparse, parsing twice would double the cost: this parses once with
    the whole template and leaves each step's content and call deltas in `handoff`, next to the
    normal text returned for the step, until the tool parser of the same request and choice takes
    them. That parser finds this object in the request context on its first step
    (`ctx["one_parse"]`, published by the reasoning detector that made it), checks that the text it
    received is the very string object returned here, and from then on reads `handoff` directly
    (`linked`) without parsing. Anything else reaching the tool parser (a different string) is
    parsed by it as usual.
    """

    def __init__(self, resolved: Resolved, prefix: str, tools: Any) -> None:
        policy = resolved.policies["sglang"]
        self._parser = ChatParser(
            template=resolved.template,
            prefix=prefix,
            tools=parser_tool_table(tools),
            stream_tool_calls=policy.stream_tool_calls,
            unknown_tools=policy.unknown_tools,
            id_factory=no_call_id,  # SGLang's server mints the ids
        )
        # The step calls the core itself and hands ChatParser only an answer that can change
        # something there (`ChatParser._answer`): most steps of a turn with calls change nothing.
        self._core = self._parser._core_feed
        self._answer = self._parser._answer
        # The parser's text streams: a clean chunk of reasoning or content goes to its stream's
        # `piece` straight from `step` (what `ChatParser._to_sink` does, without its delta dict).
        self._reasoning = self._parser._reasoning
        self._content = self._parser._content
        self.in_reasoning = False
        self.handoff: tuple[str, list[dict[str, Any]]] | None = None
        """This step's normal text (the object returned) and its deltas, until the tool parser takes them."""
        self.linked = False
        """The tool parser took a hand-off: it parses nothing itself and takes one per step."""

    def _split(self, deltas: list[dict[str, Any]], end: bool) -> tuple[str, str]:
        reasoning = "".join(d["reasoning_content"] for d in deltas if "reasoning_content" in d)
        rest = [d for d in deltas if "reasoning_content" not in d]
        if rest:
            self.in_reasoning = False
        elif reasoning:
            self.in_reasoning = True
        handoff = self.handoff
        if end and handoff is not None:
            handoff[1].extend(rest)  # the final step: the same normal text, more deltas
            return reasoning, ""
        if not rest and self.linked and handoff is None:
            return reasoning, ""  # nothing for the tool parser, which took the last hand-off
        normal = "".join(d.get("content", "") for d in rest)
        self.handoff = (normal, rest)
        return reasoning, normal

    def step(self, text: str) -> ReasoningResult:
        """One step's reasoning and normal text as SGLang's result (what the reasoning detector
        returns when it streams reasoning: once per token, so with no intermediate tuple).

        The common steps first, without `_split`'s joins and lists: nothing released (a call
        being written, text held: most steps of a turn with calls), a clean chunk of reasoning or
        content (its stream's piece, as `ChatParser._to_sink` commits it), one reasoning delta,
        one content delta."""
        r = self._core(text)
        if self.linked and self.handoff is None:
            if not r:
                return _NO_TEXT  # the core released nothing
            if r.__class__ is str:
                sink = self._parser._sink
                if sink is None:
                    return _NO_TEXT  # a chunk that makes no delta (a call being written)
                if sink is self._reasoning or sink is self._content:
                    piece = sink.piece(r)  # None (nothing committed): the general path below
                    if piece is not None:
                        if not piece:
                            return _NO_TEXT
                        if sink is self._reasoning:
                            self.in_reasoning = True
                            return ReasoningResult(None, piece)
                        self.in_reasoning = False
                        self.handoff = (piece, [{"content": piece}])
                        return ReasoningResult(piece)
        deltas = self._answer(r)
        if not deltas:
            if self.linked and self.handoff is None:
                return _NO_TEXT
        elif len(deltas) == 1:
            d = deltas[0]
            piece = d.get("content")
            if piece is not None:
                if len(d) == 1:
                    self.in_reasoning = False
                    self.handoff = (piece, deltas)
                    return ReasoningResult(piece)
            elif self.linked and self.handoff is None:
                piece = d.get("reasoning_content")
                if piece is not None:
                    self.in_reasoning = True
                    return ReasoningResult(None, piece)
        reasoning, normal = self._split(deltas, False)
        if not reasoning and not normal:
            return _NO_TEXT
        return ReasoningResult(normal, reasoning)

    def feed(self, text: str) -> tuple[str, str]:
        r = self.step(text)
        return r.reasoning_text, r.normal_text

    def take(self, new_text: str, tools: Any) -> StreamingParseResult:
        """The linked tool-call detector's step: this step's hand-off, when `new_text` is the
        normal text returned for it; nothing otherwise (this parse read the output already)."""
        handoff = self.handoff
        if handoff is None or handoff[0] is not new_text:
            return _NOTHING
        self.handoff = None
        return _step_result(handoff[1])

    def finish(self) -> tuple[str, str]:
        reason = _finish_type(request_context().get("finish_reason"))
        return self._split(finish_deltas(self._parser, reason, "sglang"), end=True)


_NO_TEXT = ReasoningResult()
"""The result of a reasoning step that releases nothing, shared (SGLang only reads it)."""


def _reasoning_markers(resolved: Resolved, tokenizer: Any) -> tuple[str, str]:
    """The reasoning field's opener and closer as text: literals, or the added token a pattern
    delimiter matches (DSML's `^\\s*<think>`); "" where there is none. Once per template and
    tokenizer (a reasoning detector per request asks; `resolve` gives each tokenizer its own
    `Resolved`, so its memo is that tokenizer's)."""
    key = ("sglang.reasoning_markers", id(tokenizer))
    hit: tuple[str, str] | None = resolved.memo.get(key)
    if hit is not None:
        return hit
    field_name = resolved.reasoning_field
    f = resolved.template.fields.get(field_name) if field_name else None
    opener = (delimiter_literal(f.opener, tokenizer) or "") if f is not None else ""
    closer = (delimiter_literal(f.closer, tokenizer) or "") if f is not None else ""
    resolved.memo[key] = (opener, closer)
    return opener, closer


class ChatparseReasoningDetector(BaseReasoningFormatDetector):
    """Reasoning out; the rest verbatim for the tool-call parser after it, or clean content when
    no tool-call parser runs for the request (SGLang's `tool_call_parser_active`)."""

    def __init__(
        self,
        stream_reasoning: bool = True,
        force_reasoning: bool = False,
        tokenizer: Any = None,
        tool_call_parser_active: bool = False,
        **_kwargs: Any,
    ) -> None:
        self._resolved: Resolved = resolve(tokenizer, model=None)
        opener, closer = _reasoning_markers(self._resolved, tokenizer)
        super().__init__(opener, closer, force_reasoning=force_reasoning, stream_reasoning=stream_reasoning)
        self._opener = opener
        self._verbatim = tool_call_parser_active
        self._splitter: ReasoningSplitter | ToolsOffSplitter | _CleanSplit | _OneParse | None = None
        self._held = ""  # reasoning held back when stream_reasoning is False

    def _prefix(self) -> str:
        prefix = _prefix_now()
        if not prefix and self.force_reasoning and self._opener:
            # No rendered prompt available, but SGLang detected that the prompt opens reasoning.
            anchors = self._resolved.template.anchor_literals or [""]
            prefix = anchors[0] + self._opener
        return prefix

    def _new(self) -> ReasoningSplitter | ToolsOffSplitter | _CleanSplit | _OneParse:
        ctx = request_context()
        if self._verbatim and ctx.get("tool_parser") == PARSER_NAME and "tools" in ctx:
            one = _OneParse(self._resolved, self._prefix(), ctx["tools"])
            ctx["one_parse"] = one  # for the tool parser's first step (see `_OneParse`)
            return one
        if self._verbatim:
            return ReasoningSplitter(self._resolved.template, prefix=self._prefix())
        if self._resolved.has_tools:  # tools off for this turn: calls stay in the content as written
            return ToolsOffSplitter(self._resolved.template, prefix=self._prefix())
        return _CleanSplit(self._resolved, self._prefix())

    def detect_and_parse(self, text: str) -> ReasoningResult:
        splitter = self._new()
        r1, n1 = splitter.feed(text)
        r2, n2 = splitter.finish()
        return ReasoningResult(normal_text=n1 + n2, reasoning_text=r1 + r2)

    def parse_streaming_increment(self, new_text: str) -> ReasoningResult:
        splitter = self._splitter
        if splitter is None:
            splitter = self._splitter = self._new()
            if isinstance(splitter, _OneParse) and self.stream_reasoning:
                # One parse for both parsers, reasoning streamed: every later step of the turn is
                # the parse's own step. Bound on this (per-request) object, it shadows this method,
                # so SGLang's per-token call goes straight to it.
                self.__dict__["parse_streaming_increment"] = splitter.step
                return splitter.step(new_text)
        reasoning, normal = splitter.feed(new_text)
        if self.stream_reasoning:  # `_release`, inlined: this runs once per token
            if not reasoning and not normal:
                return _NO_TEXT
            return ReasoningResult(normal, reasoning)
        return self._release(reasoning, normal, end=False)

    def finish(self) -> ReasoningResult:
        if self._splitter is None:
            return ReasoningResult()
        reasoning, normal = self._splitter.finish()
        return self._release(reasoning, normal, end=True)

    def _release(self, reasoning: str, normal: str, end: bool) -> ReasoningResult:
        if self.stream_reasoning:
            if not reasoning and not normal:
                return _NO_TEXT
            return ReasoningResult(normal_text=normal, reasoning_text=reasoning)
        self._held += reasoning
        assert self._splitter is not None
        if end or (normal and not self._splitter.in_reasoning):  # the answer started
            reasoning, self._held = self._held, ""
            return ReasoningResult(normal_text=normal, reasoning_text=reasoning)
        return ReasoningResult(normal_text=normal)


# --------------------------------------------------------------------------------------------------
# tool calls


def _items(deltas: list[dict[str, Any]]) -> tuple[str, list[ToolCallItem]]:
    text: list[str] = []
    calls: list[ToolCallItem] = []
    for d in deltas:
        if "content" in d:
            text.append(d["content"])
        for entry in d.get("tool_calls") or ():
            fn = entry.get("function") or {}
            calls.append(
                ToolCallItem(
                    tool_index=entry["index"],
                    name=fn.get("name") if entry.get("id") else None,
                    parameters=fn.get("arguments") or "",
                )
            )
    return "".join(text), calls


_normal_result = prebuilt(StreamingParseResult, {"normal_text": "x"})
"""`StreamingParseResult(normal_text=...)`, the result of every content step, without pydantic's
validation, which cost more than the plugin's own work for the step (`prebuilt`)."""

_NOTHING = StreamingParseResult()
"""The result of a step that releases nothing, shared (SGLang only reads a step's result; building
one costs about 2 µs, and most steps of a call release nothing)."""


def _step_result(deltas: list[dict[str, Any]]) -> StreamingParseResult:
    """The tool-call detector's result for one step's deltas."""
    if not deltas:  # most steps: text held, or a call being written
        return _NOTHING
    if len(deltas) == 1:
        piece = deltas[0].get("content")
        if piece is not None and len(deltas[0]) == 1:  # a content step: no item lists
            return cast(StreamingParseResult, _normal_result(normal_text=piece))
    normal, calls = _items(deltas)
    return StreamingParseResult(normal_text=normal, calls=calls)


def _tool_steps(parser: ChatParser) -> Callable[[str, Any], StreamingParseResult]:
    """The tool-call detector's step after its first (`parse_streaming_increment`): the core's
    per-token answer, handed to `parser` only when it can change something there (as
    `_OneParse.step` does); most steps of a call being written return the shared empty result
    after the core alone. The first step went through `ChatParser.feed` (the prefix's deltas)."""
    core, answer, content = parser._core_feed, parser._answer, parser._content

    def step(new_text: str, tools: Any) -> StreamingParseResult:
        r = core(new_text)
        if not r:
            return _NOTHING
        if r.__class__ is str:
            sink = parser._sink
            if sink is None:
                return _NOTHING
            if sink is content:  # a clean content chunk: its piece, as `ChatParser._to_sink` gives it
                piece = sink.piece(r)
                if piece is not None:
                    return (
                        cast(StreamingParseResult, _normal_result(normal_text=piece)) if piece else _NOTHING
                    )
        return _step_result(answer(r))

    return step


def _reasoning_openers(resolved: Resolved) -> tuple[str, ...] | None:
    """The literal openers of the template's reasoning fields: None when it has no reasoning field;
    `()` when one opens otherwise (a pattern, or no opener), so only a parse of a prompt tells
    whether the prompt opens reasoning. Derived once per template (every request asks)."""
    memo = resolved.memo
    if "sglang.reasoning_openers" not in memo:
        memo["sglang.reasoning_openers"] = _derive_reasoning_openers(resolved)
    found: tuple[str, ...] | None = memo["sglang.reasoning_openers"]
    return found


def _derive_reasoning_openers(resolved: Resolved) -> tuple[str, ...] | None:
    fields = resolved.template.fields
    names = [n for n in REASONING_FIELDS if n in fields]
    if not names:
        return None
    openers: list[str] = []
    for n in names:
        opener = fields[n].opener
        if opener is None:
            return ()
        if opener.literals is not None:
            openers.extend(opener.literals)
            continue
        # a pattern: a literal every match contains stands for it (absent from the prompt, no match)
        tree = opener.prog.tree
        must = "" if tree is None or opener.module_re.flags & regex.IGNORECASE else required_literal(tree)
        if not must:
            return ()
        openers.append(must)
    return tuple(openers)


_TAIL_KEY_MAX = 256
"""Longest prompt tail (the text past the prompt's last start anchor) whose reasoning-free form
is remembered per template (`ChatparseDetector._prefix`)."""
_TAILS_MAX = 64
"""Tails remembered per template at most (then forgotten all at once)."""


def _without_reasoning(resolved: Resolved, prompt: str) -> str:
    """The part of `prompt` past its last start anchor (the core's `truncate_past_last_anchor`),
    without the reasoning regions it writes or leaves open: found by parsing the prompt as the
    prefix of a parse of the whole template (the probe)."""
    probe = ResponseParser(resolved.template, prefix=prompt)
    text = probe.input_text
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for e in probe.initial_events:
        if e["field"] not in REASONING_FIELDS:
            continue
        if e["type"] == "region_open":
            start = e["start"]
        elif e["type"] in ("region_close", "region_malformed") and start is not None:
            spans.append((start, e["end"]))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    if not spans:
        return text
    out, pos = [], 0
    for a, b in spans:
        out.append(text[pos:a])
        pos = b
    out.append(text[pos:])
    return "".join(out)


class ChatparseDetector(BaseFormatDetector):
    """SGLang tool-call detector driven by a chatparse `ChatParser` (one per request and choice)."""

    def __init__(self, tokenizer: Any = None) -> None:
        super().__init__()
        resolved = self._resolved = resolve(tokenizer, model=None)
        # (policy, template parsed with, whole template): once per template (a detector per
        # request and choice asks)
        setup: tuple[Policy, Template, Template] | None = resolved.memo.get("sglang.tool_detector")
        if setup is None:
            whole = resolved.template
            template = resolved.variant(reasoning=False, tools=True)
            setup = (resolved.policies["sglang"], whole if template is None else template, whole)
            resolved.memo["sglang.tool_detector"] = setup
        self._policy, self._template, self._whole = setup
        self._stream: ChatParser | None = None
        self._done = False
        self._tools_seen: list[Any] | None = None  # FunctionCallParser passes tools to the parse calls only

    def _prefix(self, ctx: dict[str, Any] | None = None) -> str:
        """The prompt without the reasoning regions it writes or leaves open (`<think>`, or an
        empty `<think></think>` when thinking is disabled). `ctx`: the request context, when the
        caller has it at hand.

        The reasoning parser runs first and consumes reasoning, so that text is not this parser's:
        kept, it would read as content (the template used here has no reasoning field). Every other
        region the prompt opens (a pre-opened answer section, a call) stays in view.
        """
        if ctx is None:
            ctx = _REQUEST.get()
        prompt = ctx.get("prefix") if ctx else None
        if not prompt or not isinstance(prompt, str):
            return ""
        openers = _reasoning_openers(self._resolved)
        if openers is None:
            return prompt
        if openers:
            for o in openers:
                if o in prompt:
                    break
            else:
                # No reasoning opener in the prompt: it opens no reasoning region (the probe
                # below would find none), and its parse would cost more than a short turn's steps.
                return prompt
        # Only the prompt past its last start anchor is parsed (the probe's `input_text`), and
        # what the probe keeps of it depends on that text and the template alone: remembered per
        # template for short tails (a server's prompts end in the same few generation prompts,
        # e.g. Qwen3's `<think>\n\n</think>\n\n` when thinking is off), so the probe's parse
        # runs once per tail, not per request.
        tail = self._whole.truncate_past_last_anchor(prompt)
        tails: dict[str, str] | None = self._resolved.memo.get("sglang.prompt_tails")
        if tails is None:
            tails = self._resolved.memo["sglang.prompt_tails"] = {}
        kept = tails.get(tail)
        if kept is None:
            kept = _without_reasoning(self._resolved, prompt)  # (the probe parses `tail` too)
            if len(tail) <= _TAIL_KEY_MAX:
                if len(tails) >= _TAILS_MAX:  # bounded: forget the tails remembered so far
                    tails.clear()
                tails[tail] = kept
        if kept == tail:
            return prompt
        return prompt[: len(prompt) - len(tail)] + kept

    def _parser(self, tools: list[Any] | None, ctx: dict[str, Any] | None = None) -> ChatParser:
        return ChatParser(
            template=self._template,
            prefix=self._prefix(ctx),
            tools=parser_tool_table(tools),
            stream_tool_calls=self._policy.stream_tool_calls,
            unknown_tools=self._policy.unknown_tools,
            id_factory=no_call_id,  # SGLang's server mints the ids
        )

    def has_tool_call(self, text: str) -> bool:
        """Whether the parse changes `text`: it holds a call (complete or not), or template framing
        around the content (Harmony channels, Kimi K3 sections, a cut-off call opener) that the
        parse removes. SGLang's non-streaming path returns the text untouched when this is False
        (and logs that no complete call was found when it is True and no call parses)."""
        result = self._parse_whole(text, self._tools_seen or [], report=False)
        return bool(result.calls) or result.normal_text != text

    def detect_and_parse(self, text: str, tools: list[Any]) -> StreamingParseResult:
        return self._parse_whole(text, tools, report=True)

    def _parse_whole(self, text: str, tools: list[Any], *, report: bool) -> StreamingParseResult:
        """One-shot parse; `report`: warn about regions not returned (not when only probing)."""
        self._tools_seen = tools
        parser = self._parser(tools)
        deltas = parser.feed(text)
        _, last, _ = finish_output(
            parser, _finish_type(request_context().get("finish_reason")), "sglang", report=report
        )
        normal, calls = _items(deltas + last)
        merged: dict[int, ToolCallItem] = {}
        for c in calls:  # one item per call, as non-streaming callers expect
            if c.tool_index in merged:
                merged[c.tool_index].parameters += c.parameters
            else:
                merged[c.tool_index] = c.model_copy()
        return StreamingParseResult(normal_text=normal, calls=list(merged.values()))

    def parse_streaming_increment(self, new_text: str, tools: list[Any]) -> StreamingParseResult:
        if self._done:
            return _NOTHING
        if self._stream is not None:
            return _step_result(self._stream.feed(new_text))
        ctx = _REQUEST.get()
        one = ctx.get("one_parse") if ctx else None
        handoff = one.handoff if one is not None else None
        if one is not None and handoff is not None and handoff[0] is new_text:
            # The first step of a turn the chatparse reasoning parser parses: take its hand-offs
            # from now on. Bound on this (per-request) object, `_OneParse.take` shadows this method
            # until `finish`, so SGLang's per-token call goes straight to it.
            one.linked = True
            self.__dict__["parse_streaming_increment"] = one.take
            return one.take(new_text, tools)
        stream = self._stream = self._parser(tools, ctx)
        result = _step_result(stream.feed(new_text))
        # This detector parses the turn itself: SGLang's per-token call goes straight to the
        # parse's own step from now on (bound on this per-request object, until `finish`).
        self.__dict__["parse_streaming_increment"] = _tool_steps(stream)
        return result

    def finish(self, tools: list[Any]) -> StreamingParseResult:
        if self._done:
            return _NOTHING
        self._done = True
        # `_OneParse.take` when linked, `_tool_steps` when parsing: the class's method again
        self.__dict__.pop("parse_streaming_increment", None)
        if self._stream is None:  # nothing parsed here (or everything handed over)
            return _NOTHING
        reason = _finish_type(request_context().get("finish_reason"))
        return _step_result(finish_deltas(self._stream, reason, "sglang"))

    def supports_structural_tag(self) -> bool:
        """True: forced calls (`required`, named) are constrained to the template's own syntax, so
        SGLang's serving code parses their output with this detector (`owns_tool_format`), not with
        its JSON-array parser."""
        return True

    def get_structural_tag(
        self,
        tools: list[Any] | None = None,
        tool_choice: Any = "auto",
        thinking_mode: bool = False,
        parallel_tool_calls: bool = True,
    ) -> Any:
        """XGrammar's `StructuralTag` for `tool_choice="required"` or a named tool, derived by
        `chatparse.constraints` from the template and the tools; None under `auto` (chatparse does
        not constrain free generation).

        `thinking_mode` is SGLang's: True when no reasoning parser runs and the request thinks, so
        the grammar also covers an optional reasoning block first; False when SGLang's reasoning
        grammar backend applies the grammar after the reasoning ends (`--reasoning-parser`), or
        thinking is off. SGLang builds the constraint before it renders the prompt, so the
        derivation has no prefix. Raises `ToolChoiceError` (a `ValueError`: SGLang's 400) naming
        the template and the field the constraints cannot express.
        """
        if not forces_tool_calls(tool_choice, tools):
            return None
        from xgrammar import StructuralTag

        template = self._resolved.template if thinking_mode else self._template
        c = tool_constraint(
            self._resolved,
            template,
            tool_choice,
            tools,
            parallel_tool_calls=parallel_tool_calls,
            reasoning=None if thinking_mode else False,
        )
        return StructuralTag.model_validate(c.structural_tag())

    def get_auto_tool_call_structural_tag(self, *args: Any, **kwargs: Any) -> None:
        """None: `auto` is not constrained."""
        return None

    def structure_info(self) -> Callable[[str], Any]:
        raise NotImplementedError(
            "chatparse: legacy structure_info tags are not offered (get_structural_tag gives the whole constraint)"
        )


# SGLang's `ReasoningParser` and `FunctionCallParser` ask `inspect.signature(detector_class)` which
# keyword arguments to pass, on every request (three calls; ~50-150 µs each for these classes,
# most of a short turn's parser set-up). The signature, computed once, is what inspect returns.
ChatparseReasoningDetector.__signature__ = inspect.signature(ChatparseReasoningDetector)
ChatparseDetector.__signature__ = inspect.signature(ChatparseDetector)


# --------------------------------------------------------------------------------------------------
# hooks and registration


def _ours(serving: Any) -> bool:
    return PARSER_NAME in (
        getattr(serving, "tool_call_parser", None),
        getattr(serving, "reasoning_parser", None),
    )


def _hook_init(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    result = original(self, *args, **kwargs)
    if _ours(self):
        manager = getattr(self, "tokenizer_manager", None)
        tokenizer = getattr(manager, "tokenizer", None)
        resolved = resolve(tokenizer)
        log.info("%s", describe(resolved, "sglang"))
    return result


def _hook_detokenization(original: Callable[..., Any], self: Any, request: Any) -> bool:
    if original(self, request):
        return True
    if getattr(self, "reasoning_parser", None) == PARSER_NAME:
        return True
    return (
        getattr(self, "tool_call_parser", None) == PARSER_NAME
        and getattr(request, "tool_choice", None) != "none"
        and bool(self._effective_tools(request))
    )


def _run_with(context: dict[str, Any], original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    token = _REQUEST.set(context)
    try:
        return original(*args, **kwargs)
    finally:
        _REQUEST.reset(token)


def _prefix_of(request: Any) -> str:
    prefix = getattr(request, "_response_parser_prefix", "")
    return prefix if isinstance(prefix, str) else ""


def _hook_tool_calls(
    original: Callable[..., Any],
    self: Any,
    text: str,
    tools: Any,
    finish_reason: Any,
    *args: Any,
    **kwargs: Any,
) -> Any:
    prefix = kwargs.get("response_parser_prefix", args[2] if len(args) > 2 else None)
    context = {**request_context(), "finish_reason": finish_reason}
    if isinstance(prefix, str) and prefix:
        context["prefix"] = prefix
    return _run_with(context, original, self, text, tools, finish_reason, *args, **kwargs)


def _hook_build_response(
    original: Callable[..., Any], self: Any, request: Any, *args: Any, **kwargs: Any
) -> Any:
    return _run_with({"prefix": _prefix_of(request)}, original, self, request, *args, **kwargs)


def _hook_reasoning_stream(
    original: Callable[..., Any],
    self: Any,
    index: int,
    delta: str,
    parsers: Any,
    content: Any,
    request: Any,
    finish_reason_type: Any = None,
    *args: Any,
    **kwargs: Any,
) -> Any:
    """Publish the prompt, the finish reason (`finish_reason_type` on the final step) and, when the
    chatparse tool parser follows for this request, its name and tools: the reasoning detector then
    parses once for both (`_OneParse`) and publishes itself for the tool-call detector's first step.
    Set for the whole step, not reset: it is read by `_process_tool_call_stream` right after, in the
    same task (one request). Runs on every step of every request, so the steps between the first
    and the last (the context already this request's) take the shortest path."""
    previous = _REQUEST.get()
    if finish_reason_type is None and previous is not None and previous.get("ongoing") is request:
        # A step like the last one of this request: the context is already what it should be.
        if args or kwargs:
            return original(self, index, delta, parsers, content, request, None, *args, **kwargs)
        return original(self, index, delta, parsers, content, request, None)  # (no argument unpacking)
    if previous is None or previous.get("request") is not request:
        previous = {}  # another request's context (or none): nothing of it carries over
    context: dict[str, Any] = {
        "prefix": _prefix_of(request),
        "finish_reason": finish_reason_type,
        "one_parse": previous.get("one_parse"),
        "request": request,
        # this request, while it is generating: what the steps between the first and the last check
        "ongoing": request if finish_reason_type is None else None,
    }
    if getattr(self, "tool_call_parser", None) == PARSER_NAME:
        if "tools" in previous:
            context["tool_parser"], context["tools"] = PARSER_NAME, previous["tools"]  # once per request
        elif _tool_parsing_active(self, request):
            context["tool_parser"], context["tools"] = PARSER_NAME, self._effective_tools(request)
    _REQUEST.set(context)
    return original(self, index, delta, parsers, content, request, finish_reason_type, *args, **kwargs)


def _tool_parsing_active(serving: Any, request: Any) -> bool:
    active = getattr(serving, "_tool_call_parsing_active", None)
    if active is not None:
        return bool(active(request))
    return getattr(request, "tool_choice", None) != "none" and bool(serving._effective_tools(request))


def _publish_tool_step(request: Any, finish: Any) -> None:
    """What `_process_tool_call_stream`'s hook publishes for one step: the prompt and the finish
    reason (None before the flushing step), over the reasoning step's hand-off and tools."""
    previous = _REQUEST.get()
    if finish is None and previous is not None and previous.get("ongoing") is request:
        return  # already this request's context for a step before the last
    if previous is None or previous.get("request") is not request:
        previous = {}  # another request's context (or none): nothing of it carries over
    _REQUEST.set(
        {
            **previous,
            "prefix": _prefix_of(request),
            "finish_reason": finish,
            "request": request,
            "ongoing": request if finish is None else None,
        }
    )


def _hook_tool_stream(
    original: Callable[..., Any],
    self: Any,
    index: int,
    delta: str,
    parsers: Any,
    content: Any,
    request: Any,
    *args: Any,
    **kwargs: Any,
) -> AsyncIterator[Any]:
    """Publish the step's context, then hand back the original's own async generator: the server
    iterates it right away in the same task, so no generator of ours wraps it (one layer less on
    every chunk of every step)."""
    flush = kwargs.get("flush", args[3] if len(args) > 3 else False)
    finish = None
    if flush and isinstance(content, dict):  # (the flushing step only: the others have none)
        finish = content.get("meta_info", {}).get("finish_reason")
    # Set for this step only (no reset: the generator may be finalised in another context);
    # every step of this request sets it afresh, and a context variable is per task.
    _publish_tool_step(request, finish)
    iterator: AsyncIterator[Any] = original(self, index, delta, parsers, content, request, *args, **kwargs)
    return iterator


def _hook_structure_constraint(
    original: Callable[..., Any], self: Any, tool_choice: Any, *args: Any, **kwargs: Any
) -> Any:
    """`FunctionCallParser.get_structure_constraint` for the chatparse detector and a forced call:
    the structural tag, or the `ToolChoiceError` that SGLang answers 400. SGLang's own method logs
    and swallows a detector's exception, then falls back to its JSON-array schema, whose output
    this detector would not read as calls."""
    detector = getattr(self, "detector", None)
    if isinstance(detector, ChatparseDetector) and forces_tool_calls(tool_choice, self.tools):
        parallel = kwargs.get("parallel_tool_calls", args[0] if args else True)
        thinking = kwargs.get("thinking_mode", args[1] if len(args) > 1 else False)
        tag = detector.get_structural_tag(
            tools=self.structural_tag_tools(),
            tool_choice=tool_choice,
            thinking_mode=bool(thinking),
            parallel_tool_calls=parallel is not False,
        )
        return ("structural_tag", tag)
    return original(self, tool_choice, *args, **kwargs)


_PARSER = "sglang.srt.function_call.function_call_parser.FunctionCallParser"

_HOOKS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("__init__", _hook_init),
    ("_requires_response_template_detokenization", _hook_detokenization),
    ("_process_tool_calls", _hook_tool_calls),
    ("_build_chat_response", _hook_build_response),
    ("_process_reasoning_stream", _hook_reasoning_stream),
    ("_process_tool_call_stream", _hook_tool_stream),
)


def register() -> None:
    """Register `chatparse` with SGLang (idempotent; the `sglang.srt.plugins` entry point).

    Puts the detectors into the registries and registers the serving hooks with SGLang's
    `HookRegistry`; `sglang.srt.plugins.load_plugins()` applies them.
    """
    FunctionCallParser.ToolCallParserEnum[PARSER_NAME] = ChatparseDetector
    ReasoningParser.DetectorMap[PARSER_NAME] = ChatparseReasoningDetector
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    registered = {
        (t, getattr(h, "__name__", "")) for t, entries in HookRegistry._hooks.items() for _, h, _ in entries
    }
    for target, hook in [(f"{_SERVING}.{name}", h) for name, h in _HOOKS] + [
        (f"{_PARSER}.get_structure_constraint", _hook_structure_constraint)
    ]:
        if (target, hook.__name__) not in registered:
            HookRegistry.register(target, hook, HookType.AROUND)
