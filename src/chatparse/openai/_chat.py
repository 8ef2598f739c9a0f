"""`ChatParser` and `parse_message`: parser events to Chat Completions deltas and messages.

Field mapping: reasoning from fields named `reasoning_content`, `reasoning` or `thinking`; content
from `content`; calls from `tool_calls`; other fields are ignored.

Policies (keyword options, defaults first):

* `stream_tool_calls="complete" | "early"`: `complete` (the default) sends each call once its
  region closed and parsed, so no fragment ever has to be taken back: a call cut off by
  `max_tokens` or malformed never reaches the client. `early` (opt-in, for UIs that want to show
  a call while it is written) announces a call (id, type, name) at its opener when the name is an
  opener capture and streams verbatim-JSON arguments as they arrive; a call that was announced and
  is then dropped cannot be taken back: it is listed in `message["chatparse"]["dropped"]` with
  `"streamed": True` and its index, and clients must discard it.
* `finish(finish_reason="length")` drops every call whose region did not end with its closer; with
  `"stop"` such a call is kept if it parsed (the closer is often the stop token, which engines cut).
* `unknown_tools="surface" | "drop"`: calls to names not in `tools=` are returned and listed in
  `message["chatparse"]["unknown_tools"]`, or dropped and listed in `dropped`. Without `tools=`
  nothing is unknown. `tools=` also takes a `chatparse.tools.ToolTable` (`build_tool_table`'s
  result, what the engine plugins build per request) as the parser's table itself (not with
  `auto=True`).
* malformed regions never raise and never lose the rest of the message: they are listed in
  `message["chatparse"]["errors"]` as `{field, error, text}`.
* tool calls written inside reasoning: whatever the template says (qwen3_xml ends reasoning at
  `<tool_call><function=...`; in other templates a `<tool_call>` inside `<think>` is reasoning
  text; gpt-oss's template accepts calls on the analysis channel).
* `finish(finish_reason="length")` also drops the start of a call opener that the cut-off left at
  the end of the text (`<tool_call>` without its `<function=...>`, a bare `[TOOL_CALLS]`): the
  core releases such held text as content at the end of the output, but it is a call that was
  never written.
* JSON call objects read by key (`{"name", "parameters"}`, llama3_json) accept `arguments` too:
  the transform is relaxed to pass the object through (`_resolve.relax_call_keys`), and the
  calls are typed by `tools=` here.
* `finish_reason` becomes `"tool_calls"` only when it was `"stop"` (or `"tool_calls"`) and at least
  one call was returned; `"length"` and others are passed through.
* `parse_tool_calls=True`: `False` (for `tool_choice="none"`) leaves the template's `tool_calls`
  field out, so call markup the model writes anyway is returned as content, and `finish_reason` is
  never `"tool_calls"`. Not available with `auto=True`.
* `reasoning_key="reasoning_content" | "reasoning" | "both"`: the key of reasoning in deltas and
  the message.
* `missing_anchor="warn" | "error" | "ignore"`: a non-empty `prefix` that holds none of the
  template's start anchors is parsed as output (the core keeps the reference behaviour), which puts
  prompt text in `content`; `warn` emits a `MissingAnchorWarning`, `error` raises
  `MissingAnchorError` (a `ValueError`). See `_resolve.check_prefix`.
* `auto=False`: with `auto=True` and neither `model=` nor `template=`, the family is detected from
  the output itself: `chatparse.detect.AutoParser` (with the same `tools=` and `prefix=`, plus
  `recognizers=` and `orphan_reasoning=`, as `chatparse.detect.detect` takes them) emits region
  events for `reasoning`, `content` and `tool_calls`, and this class builds the deltas from them
  with the same code as for a template's events. The detect layer decides what is a call and
  applies the `finish_reason="length"` cut-off itself; calls are always sent complete
  (`stream_tool_calls="early"` behaves as `"complete"`), only `unknown_tools="surface"` is
  supported, content is stripped around calls (the detect layer's cleaned content), and the
  `chatparse` report is the detect layer's (`recognizer`, `reasoning_recognizers`, `errors`,
  `unknown_tools` as names). With `model=` or `template=`, `auto` is ignored.

Theory of operation: the parser (the core `ResponseParser`, or `AutoParser` in auto mode) gives
region events; `_process` routes each to a `TextStream` (content, reasoning) or the
`ToolCallAssembler` (calls), which commit only what can never be taken back. A feed whose only
event is a clean chunk of the open region comes back from the parser as bare text (`_feed`) and
goes straight to that region's `TextStream` (`_set_sink`): the per-token path, no event dict; a
chunk of a region whose chunks make no delta (`_sink` None: a call body sent at its close) and an
answer without events (the core holds the text) change nothing here at all: `feed` returns for
them after one check, and an adapter that steps the core itself (`_core_feed`, the SGLang plugin)
skips this layer for both, and hands every other answer to `_answer`
(a clean chunk of a text region it may give to that region's `TextStream.piece` itself, as
`_to_sink` does). `finish` is `_end_stream` (the last deltas) and then the message; an adapter
that returns only deltas (the SGLang plugin) calls `_end_stream` and reads `_unreturned`. The end
asks the core for its last events only (`ResponseParser._end`, and the required-field check where
the template has such a field): the core's own final message is never built, and its report of
openers undecided at the end (`cut_off`) is made only for `finish_reason="length"`.
What the layer re-derives from the parser's buffer is limited to two things the events do not
carry: a cut-off call opener at `finish(finish_reason="length")` (from the core's `cut_off`) and
prefix text the core holds and never re-emits (the refill, see `__init__`).

`parse_message` takes the core's one-shot path (`chatparse._oneshot.run`) and, with calls sent
complete, builds the message alone through `_Whole`: the same `TextStream` and assembler state as
`_process`, without deltas; text events take its text branch, calls of the usual shape are kept
whole in one pass (`ToolCallAssembler.keep_records`, from the core call loop's records), and
anything else goes through `_process` itself, in order.

The message: `role`, `content` (a string, or `None` when empty), the reasoning key (omitted when
empty), `tool_calls` (omitted when none; `arguments` a JSON object text), and `chatparse` only when
there is something to report. Content is the concatenation of all content regions (see `_text`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._oneshot import Bail, open_event, plan_for
from .._oneshot import run as run_oneshot
from .._parser import ResponseParser
from .._template import Template
from ..detect import AutoParser
from ..errors import RequiredFieldsMissing
from ..tools import ToolTable, build_tool_table
from ._calls import ToolCallAssembler, random_call_id
from ._resolve import MISSING_ANCHOR_POLICIES, check_prefix, relax_call_keys, resolve_template
from ._text import TextStream

REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
_STREAM_MODES = ("early", "complete")
_UNKNOWN_MODES = ("surface", "drop")
_REASONING_KEYS = ("reasoning_content", "reasoning", "both")
_SLOW = object()  # `ChatParser._sink`: take the event path


def _text_key(name: str) -> bool:
    """Whether a field's text is streamed as content or reasoning (`ChatParser._stream`)."""
    return name == "content" or name in REASONING_FIELDS


_PLANS: dict[tuple[int, str], tuple[Template, tuple[str, ...], frozenset[str], bool]] = {}
_PLANS_MAX = 256


def _field_plan(t: Template, stream_tool_calls: str) -> tuple[tuple[str, ...], frozenset[str], bool]:
    """`(text fields, silent fields, required)` of `t` for a `ChatParser`: the fields whose clean
    chunks are content or reasoning text, those whose chunks make no delta, and whether some field
    is `optional: false` (checked at the end). Derived once per template and streaming mode (a
    parser per request asks; templates are compiled once and kept)."""
    key = (id(t), stream_tool_calls)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is t:
        return hit[1], hit[2], hit[3]
    fields = t.fields
    text = tuple(name for name, f in fields.items() if _text_key(name) and not f.dirty)
    silent = frozenset(
        name
        for name, f in fields.items()
        if (name == "tool_calls" and stream_tool_calls != "early")
        or (name != "tool_calls" and (not _text_key(name) or f.dirty))
    )
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    required = any(not f.optional for f in fields.values())
    _PLANS[key] = (t, text, silent, required)  # the template is kept with its plan: its id stays its own
    return text, silent, required


_AS_GIVEN: dict[int, tuple[Template, bool]] = {}


def _as_given(t: Template) -> bool:
    """Whether `resolve_template` returns the compiled `t` itself (its call transform needs no
    relaxing, `_resolve.relax_call_keys`). Once per template (a parser per request asks)."""
    hit = _AS_GIVEN.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    spec = t.spec
    found = isinstance(spec, dict) and relax_call_keys(spec) is spec
    if len(_AS_GIVEN) >= _PLANS_MAX:
        _AS_GIVEN.clear()
    _AS_GIVEN[id(t)] = (t, found)  # the template is kept with its answer: its id stays its own
    return found


def _check_prefix(t: Template, prefix: str, policy: str) -> None:
    """`check_prefix` one call deep, as `resolve_template` calls it (its warning names the frame
    that made the parser)."""
    check_prefix(t, prefix, None, policy)


class ChatParser:
    """Streams one assistant message as Chat Completions `choices[0].delta` dicts.

    >>> tpl = {"start_anchor": "<|im_start|>assistant\\n",
    ...        "fields": {"thinking": {"open": "<think>", "close": "</think>"},
    ...                   "tool_calls": {"open_pattern": "\\\\s*<tool_call>", "close": "</tool_call>",
    ...                                  "repeats": True, "content": "json",
    ...                                  "transform": {"type": "function", "function": "{content}"}},
    ...                   "content": {"close_pattern": "\\\\s*<\\\\|im_end\\\\|>"}}}
    >>> p = ChatParser(template=tpl, id_factory=lambda: "call_1")
    >>> p.feed("<think>hm</think>Hi ")
    [{'reasoning_content': 'hm'}, {'content': 'Hi'}]
    >>> p.feed('<tool_call>{"name": "f", "arguments": {}}</tool_call>')
    [{'tool_calls': [{'index': 0, 'id': 'call_1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{}'}}]}]
    >>> message, deltas, reason = p.finish()
    >>> message["content"], reason
    ('Hi', 'tool_calls')
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        template: dict | Template | str | None = None,
        prefix: str | None = None,
        tools: Sequence[dict | Callable] | ToolTable | None = None,
        stream_tool_calls: str = "complete",
        unknown_tools: str = "surface",
        reasoning_key: str = "reasoning_content",
        id_factory: Callable[[], str] | None = None,
        auto: bool = False,
        parse_tool_calls: bool = True,
        missing_anchor: str = "warn",
        recognizers: str | Sequence[str] | None = None,
        orphan_reasoning: bool = False,
    ) -> None:
        if stream_tool_calls not in _STREAM_MODES:
            raise ValueError(f"stream_tool_calls must be one of {_STREAM_MODES}, got {stream_tool_calls!r}")
        if unknown_tools not in _UNKNOWN_MODES:
            raise ValueError(f"unknown_tools must be one of {_UNKNOWN_MODES}, got {unknown_tools!r}")
        if reasoning_key not in _REASONING_KEYS:
            raise ValueError(f"reasoning_key must be one of {_REASONING_KEYS}, got {reasoning_key!r}")
        self._reasoning_keys = (
            ("reasoning_content", "reasoning") if reasoning_key == "both" else (reasoning_key,)
        )
        self._auto: AutoParser | None = None
        self._parser: ResponseParser | AutoParser
        # A `ToolTable` (`chatparse.tools.build_tool_table`'s result, which the engine plugins build
        # straight from the request's tools) is the core's table as it is.
        table = tools if type(tools) is ToolTable else None
        tool_list = None if table is not None or tools is None else list(tools)
        offered: dict[str, dict[str, Any]] | None
        if auto and model is None and template is None:
            if table is not None:
                raise ValueError("auto=True takes tools as a list, not a tool table")
            if unknown_tools != "surface":
                raise ValueError("auto=True supports unknown_tools='surface' only")
            if not parse_tool_calls:
                raise ValueError("auto=True cannot be combined with parse_tool_calls=False")
            # The detect layer decides what is a call (typed by the offered schemas where its
            # family's values are untyped text) and reports unknown tools itself.
            self._parser = self._auto = AutoParser(
                tools=tool_list, prefix=prefix, recognizers=recognizers, orphan_reasoning=orphan_reasoning
            )
            self._t = self._auto.template
            offered, stream_tool_calls = None, "complete"
        else:
            check = False
            if model is None and type(template) is Template and parse_tool_calls and _as_given(template):
                # A compiled template used as it is (what the engine plugins pass, per request):
                # `resolve_template` would return it unchanged; only the prefix check remains.
                if missing_anchor not in MISSING_ANCHOR_POLICIES:
                    _check_prefix(template, prefix or "", missing_anchor)  # (raises: an unknown policy)
                self._t, prefix, check = template, "" if prefix is None else prefix, True
            else:
                self._t, prefix = resolve_template(
                    model, template, prefix, parse_tool_calls=parse_tool_calls, missing_anchor=missing_anchor
                )
            self._parser = ResponseParser(self._t, prefix=prefix, tools=table or tool_list or None)
            if check and len(self._parser.input_text) == len(prefix):
                # The core found no start anchor in the prefix (it cut nothing off the prompt), or
                # one ending at its very start: the check searches the prompt. When the core cut
                # the prompt at an anchor, the check would only search it again to find one (a scan
                # of the whole prompt per request).
                _check_prefix(self._t, prefix, missing_anchor)
            # The core's close events carry its values uncopied: this layer only reads them (calls
            # and text are rebuilt here) and never returns the core's own message.
            self._parser._copy_values = False
            # The table the core built from the same tools (one table per parser, not two).
            offered = (
                None if tools is None else self._parser._tools if table or tool_list else build_tool_table(())
            )
        self._content = TextStream()
        self._reasoning = TextStream()
        text_names, silent, required = _field_plan(self._t, stream_tool_calls)
        self._required = required  # (some field is `optional: false`: checked at the end)
        # Fields whose clean chunks are content or reasoning text (the per-token path of `feed`).
        text_fields: dict[str, TextStream] = {}
        for name in text_names:  # (a loop: a comprehension is a frame, on every request)
            text_fields[name] = self._content if name == "content" else self._reasoning
        self._text_fields = text_fields
        self._calls = ToolCallAssembler(
            stream=stream_tool_calls,
            offered=offered,
            unknown_tools=unknown_tools,
            id_factory=id_factory or random_call_id,
            core_typed=self._auto is None,
        )
        self._errors: list[dict[str, Any]] = []
        # Fields whose chunks produce no delta (the per-token path of `feed` skips them).
        self._silent_fields = silent
        # End of the current region's text seen so far, exact while it is below `_emit_from` (the
        # refill); once past it, the per-token path stops moving it (only the refill reads it).
        self._region_pos = 0
        self._open_field: str | None = None  # the region open in the core (from its events)
        self._sink: Any = _SLOW  # a TextStream, None or _SLOW (see `_set_sink`)
        # The core's per-token `_feed`, bound once (see `_answer`).
        self._core_feed: Callable[[str], Any] = self._parser._feed
        self._finished = False
        self._emit_from = 0
        initial = self._parser.initial_events
        self._pending = self._process(initial, truncated_drops=False) if initial else []
        # The core never re-emits prefix characters it held and released late (D20, the reference's
        # behaviour): they are taken from `input_text` before the next chunk or close of the region
        # they belong to. This refill stays here because a chunk event carries no offset and the
        # region's body span arrives only with its close, too late to stream the text in order.
        # (Auto mode feeds no prefix to the core: nothing to refill.)
        self._emit_from = 0 if self._auto is not None else len(self._parser.input_text)
        self._set_sink()

    # -- public ------------------------------------------------------------------------------

    def feed(self, text: str) -> list[dict[str, Any]]:
        """Append model output; return the deltas it completes (possibly none)."""
        if self._finished:
            raise RuntimeError("ChatParser already finished")
        r = self._core_feed(text)
        if r.__class__ is str:
            sink = self._sink
            if sink is None:
                return []  # a call body while calls are sent complete, or an unmapped field
            if sink is not _SLOW:
                return self._to_sink(sink, r)
        elif not r and not self._pending:
            # The core holds everything (most feeds of a call-dense stream): nothing changed here,
            # and a check is all it costs (`_answer` decides the same, one call later).
            return []
        return self._answer(r)

    def finish(self, finish_reason: str = "stop") -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """End the stream: `(message, last deltas, finish_reason)`.

        `finish_reason` is the engine's (`"stop"`, `"length"`, ...); the returned one is
        `"tool_calls"` when it was `"stop"` and calls were returned.
        """
        deltas = self._end_stream(finish_reason)
        message = self._message()
        if finish_reason in ("stop", "tool_calls"):
            finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
        return message, deltas, finish_reason

    # -- internals ---------------------------------------------------------------------------

    def _end_stream(self, finish_reason: str) -> list[dict[str, Any]]:
        """`finish` without the message: the last deltas. (The SGLang plugin's detectors return
        only deltas; `_unreturned` gives what the message's report would list as not returned.)"""
        if self._finished:
            raise RuntimeError("ChatParser already finished")
        self._finished = True
        events: list[Any]
        if self._auto is not None:
            # The detect layer applies the cut-off policy itself (it knows its families' openers).
            _, events = self._auto.finalize(finish_reason)
        else:
            core = self._parser
            assert isinstance(core, ResponseParser)
            # The core's `finalize` without what this layer never reads: the core's final message
            # (this layer builds its own) and, unless the output was cut off, the report of the
            # openers still undecided at the end (`cut_off`, read only by `_drop_cut_opener`).
            events = core._end(finish_reason == "length")
            if self._required:  # (some field is `optional: false`)
                try:
                    core._check_required(events)
                except RequiredFieldsMissing as e:
                    self._errors.append({"field": None, "error": str(e), "text": None})
            core._finalized = True
            if finish_reason == "length":
                events = self._drop_cut_opener(events)
        # (most outputs end with nothing left to route: no events)
        deltas = self._process(events, truncated_drops=finish_reason == "length") if events else []
        if self._pending:
            deltas = self._pending + deltas
            self._pending = []
        return deltas

    def _unreturned(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """`(errors, dropped)` as the message's `chatparse` report lists them (template mode)."""
        return self._errors + self._calls.errors, self._calls.dropped

    def _drop_cut_opener(self, events: list[Any]) -> list[Any]:
        """Drop the start of a call opener that a cut-off output left at the end of a text region.

        The core holds text that may still become a `tool_calls` opener and releases it as text at
        the end of the output. When the output was cut off (`finish_reason="length"`), such a tail
        (`<tool_call>` with its `<function=...>` never written, a bare `[TOOL_CALLS]`) is the start
        of a call that was never written, not text: it is removed from the final text chunks.
        """
        assert isinstance(self._parser, ResponseParser)
        buf = self._parser.input_text
        # the text chunks that end the output, as (event index, start in buf)
        tail: list[tuple[int, int]] = []
        end = len(buf)
        for i in range(len(events) - 1, -1, -1):
            e = events[i]
            if e["type"] == "region_close" and e["start"] == end:
                continue
            if e["type"] != "region_chunk" or self._stream(e["field"]) is None or e["dirty"]:
                break
            end -= len(e["text"])
            tail.append((i, end))
        if not tail:
            return events
        # The core reports the delimiters that were still being written when the output ended.
        starts = [c["start"] for c in self._parser.cut_off if c["field"] == "tool_calls" and c["opener"]]
        cut = min(starts) if starts else None
        if cut is not None and cut < end:
            cut = None  # an opener that began before the final text chunks: not cut off there
        if cut is None:
            return events
        out = list(events)
        for i, start in tail:
            if start + len(out[i]["text"]) > cut:
                out[i] = {**out[i], "text": out[i]["text"][: max(0, cut - start)]}
        return out

    def _set_sink(self) -> None:
        """Where the per-token path of `feed` sends a chunk of the open region: its `TextStream`,
        None (the chunk makes no delta), or `_SLOW` (the event path: prefix text to refill first,
        deltas pending, early call streaming, or no region open)."""
        name = self._open_field
        if name is None or self._pending or self._region_pos < self._emit_from:
            self._sink = _SLOW
        elif name in self._silent_fields:
            self._sink = None
        else:
            self._sink = self._text_fields.get(name, _SLOW)

    def _answer(self, r: str | list[Any]) -> list[dict[str, Any]]:
        """The deltas of one answer of the core's per-token `_feed` (`feed` after the core).

        Adapters that step the core themselves (`_core_feed`) hand its answer here, except a
        chunk while `_sink` is None (it changes nothing in this layer) or no events at all
        (nothing changed) once the first feed is behind them."""
        if isinstance(r, str):
            sink = self._sink
            if sink is None:
                return []
            if sink is not _SLOW:
                return self._to_sink(sink, r)
            name = self._open_field
            assert name is not None
            events: list[Any] = [
                {"type": "region_chunk", "field": name, "text": r, "dirty": self._t.fields[name].dirty}
            ]
        elif not r and not self._pending:
            return []  # the core holds everything: nothing changed here
        else:
            events = r
        deltas = self._process(events, truncated_drops=False)
        if self._pending:  # (the initial events' deltas, returned with the first answer)
            deltas = self._pending + deltas
            self._pending = []
        self._set_sink()
        return deltas

    def _to_sink(self, sink: TextStream, r: str) -> list[dict[str, Any]]:
        """The per-token path: a clean chunk of the open region, which `_process` saw open, to its
        `TextStream`. (`_region_pos` is not moved: the sink is set only once it reached
        `_emit_from`, and past it nothing reads the position before the next region opens.)"""
        piece = sink.piece(r)
        if piece is not None:
            if not piece:
                return []
            if sink is self._content:
                return [{"content": piece}]
            return [dict.fromkeys(self._reasoning_keys, piece)]
        pieces: list[str] = []
        sink.chunk(r, pieces)
        if not pieces:
            return []
        deltas: list[dict[str, Any]] = []
        self._text_deltas("content" if sink is self._content else "reasoning_content", pieces, deltas)
        return deltas

    def _stream(self, name: str) -> TextStream | None:
        if name == "content":
            return self._content
        if name in REASONING_FIELDS:
            return self._reasoning
        return None

    def _text_deltas(self, name: str, pieces: list[str], deltas: list[dict[str, Any]]) -> None:
        keys = ("content",) if name == "content" else self._reasoning_keys
        piece = pieces[0] if len(pieces) == 1 else "".join(pieces)  # one copy, however many pieces
        last = deltas[-1] if deltas else None
        if last is not None and len(last) == len(keys) and all(k in last for k in keys):
            for k in keys:  # coalesce with the previous delta of the same kind
                last[k] += piece
        else:
            deltas.append(dict.fromkeys(keys, piece))

    def _process(self, events: list[Any], truncated_drops: bool) -> list[dict[str, Any]]:
        deltas: list[dict[str, Any]] = []
        fields = self._t.fields
        calls = self._calls
        silent = self._silent_fields
        # One list of each per answer, emptied after each event that filled it.
        pieces: list[str] = []
        entries: list[dict[str, Any]] = []
        for e in events:
            kind, name = e["type"], e["field"]
            if kind == "region_open":
                self._open_field = name
            elif kind != "region_chunk":
                self._open_field = None
            f = fields.get(name)
            if f is None:
                continue
            if kind == "region_chunk" and name in silent and self._region_pos >= self._emit_from:
                # A chunk that makes no delta and needs no refill (a call's body, sent at its
                # close): only the position moves. (One-shot texts are mostly such chunks.)
                self._region_pos += len(e["text"])
                continue
            if kind == "region_chunk" or kind == "region_close":
                emit = self._emit_from
                stop = e["start"] if kind == "region_close" else emit
                if self._region_pos < emit and self._region_pos < stop:
                    fill = self._parser.input_text[self._region_pos : min(stop, emit)]
                    self._region_pos += len(fill)
                    if name == "tool_calls":
                        calls.chunk(fill, entries)
                    elif (s := self._stream(name)) is not None and not f.dirty:
                        s.chunk(fill, pieces)
            if kind == "region_open":
                self._region_pos = e["end"]
                if name == "tool_calls":
                    calls.open(f, e.get("captures") or {}, e["end"], entries)
                elif (s := self._stream(name)) is not None:
                    s.open(f)
            elif kind == "region_chunk":
                self._region_pos += len(e["text"])
                if name == "tool_calls":
                    calls.chunk(e["text"], entries)
                elif not e["dirty"] and (s := self._stream(name)) is not None:
                    s.chunk(e["text"], pieces)
            elif kind == "region_close":
                if name == "tool_calls":
                    body = self._parser.input_text[e["body_start"] : e["body_end"]]
                    calls.close(e["value"], e["complete"], truncated_drops, body, entries)
                elif (s := self._stream(name)) is not None:
                    s.close(e["value"], f.dirty, pieces)
            elif kind == "region_malformed":
                text = self._parser.input_text[e["body_start"] : e["body_end"]]
                if name == "tool_calls":
                    calls.malformed(e["error"], text, truncated_drops)
                else:
                    self._errors.append({"field": name, "error": str(e["error"]), "text": text})
                    if (s := self._stream(name)) is not None:
                        s.abandon()
            if pieces:
                self._text_deltas(name, pieces, deltas)
                pieces.clear()
            if entries:
                if self._auto is None and self._content._hold:
                    # A call follows the text: keep the text before it as written (its trailing
                    # whitespace too), as canitoolcall's content-around-calls rule says. (Auto
                    # mode keeps the cleaned content of `chatparse.detect`: stripped around calls.)
                    # (`flush` does nothing when nothing is held: the check spares its call.)
                    held: list[str] = []
                    self._content.flush(held)
                    if held:
                        self._text_deltas("content", held, deltas)
                for entry in entries:  # (a loop, not a comprehension: no frame per call)
                    deltas.append({"tool_calls": [entry]})
                entries.clear()
        return deltas

    def _message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self._content.text or None}
        reasoning = self._reasoning.text
        if reasoning:
            for k in self._reasoning_keys:
                message[k] = reasoning
        calls = self._calls
        if calls.calls:
            # (recorded in index order: one call region at a time, indices given as they open)
            message["tool_calls"] = list(calls.calls.values())
        if self._auto is not None:  # what the detect layer found, in its own words
            found = self._auto.report()
            if found:
                message["chatparse"] = found
            return message
        report: dict[str, Any] = {}
        errors = self._errors + calls.errors
        if errors:
            report["errors"] = errors
        if calls.dropped:
            report["dropped"] = calls.dropped
        if calls.unknown:
            report["unknown_tools"] = calls.unknown
        if report:
            message["chatparse"] = report
        return message


class _Whole:
    """A one-shot parse's events to the message alone (`parse_message`, calls sent complete and
    typed by the core): `_process`'s state from the same events, without deltas and with calls
    kept whole. It runs after the core's parse (a parse that bails changes nothing here).

    A call region's chunks make nothing (`ToolCallAssembler.chunk` takes them only to stream
    arguments early), so they are dropped, and its close of the usual call shape is kept by
    `ToolCallAssembler.keep_records` without a region or delta entry (which also commits the held
    end of the content before the call, as `_process` does). The core's call loop puts one record
    per call among the events instead of its events (`_oneshot.run`'s `kept`); a run of records is
    kept in one pass. A text region's events take `_process`'s text branch without building
    deltas (`_text`); every other event, and a call the assembler declines (with its open event),
    goes through `_process` in order: the events before a call region are processed when it
    opens."""

    __slots__ = ("chat", "rest", "opened", "scratch")

    def __init__(self, chat: ChatParser) -> None:
        self.chat = chat
        self.rest: list[Any] = []  # events for `_process`, not yet processed
        self.opened: dict[str, Any] | None = None  # the open event of the call region open here
        self.scratch: list[str] = []  # (the pieces text streams commit: no delta is made of them)
        chat._calls.text_before = chat._content

    def take(self, events: list[Any]) -> None:
        """Take the events (and call-loop records) of one parse, in order, and process the rest.

        The events of a content or reasoning region take `_process`'s text branch here, inline
        (the same `TextStream` calls and position, no deltas): while nothing waits in `rest`, an
        open, or a chunk or close once no prefix text waits to be refilled (`_emit_from`); any
        other such event (a malformed region, the refill) goes to `_process`."""
        chat = self.chat
        calls = chat._calls
        pieces = self.scratch
        # per text field: its stream and field (`_process`'s `_stream(name)` and `fields[name]`)
        texts = {name: (s, f) for name, f in chat._t.fields.items() if (s := chat._stream(name)) is not None}
        emit_from = chat._emit_from
        i = 0
        n = len(events)
        while i < n:
            e = events[i]
            if type(e) is not tuple:
                i += 1
                name = e["field"]
                if name == "tool_calls":
                    self._call_event(e)
                    continue
                got = texts.get(name) if not self.rest else None
                if got is not None:
                    kind = e["type"]
                    if kind == "region_open":
                        chat._open_field = name
                        chat._region_pos = e["end"]
                        got[0].open(got[1])
                        continue
                    if chat._region_pos >= emit_from:
                        if kind == "region_chunk":
                            text = e["text"]
                            chat._region_pos += len(text)
                            if not e["dirty"]:
                                got[0].chunk(text, pieces)
                                pieces.clear()
                            continue
                        if kind == "region_close":
                            chat._open_field = None
                            got[0].close(e["value"], got[1].dirty, pieces)
                            pieces.clear()
                            continue
                self.rest.append(e)
                continue
            # a run of records `(value, start, end, body_start, opening)`: the first one's open
            # event is `opened` when `opening` is None (the open `run` gave before its loop)
            self._drain()
            i = calls.keep_records(events, i)
            while i < n and type(events[i]) is tuple:  # a call the assembler declines
                value, start, end, body_start, opening = events[i]
                opened = open_event("tool_calls", opening) if opening is not None else self.opened
                close = {
                    "type": "region_close",
                    "field": "tool_calls",
                    "value": value,
                    "start": start,
                    "end": end,
                    "complete": True,
                    "body_start": body_start,
                    "body_end": start,
                }
                self.opened = None
                chat._process([opened, close], truncated_drops=False)
                i = calls.keep_records(events, i + 1)
            self.opened = None
        if self.opened is not None:
            self.rest.append(self.opened)
            self.opened = None
        self._drain()

    def _call_event(self, e: dict[str, Any]) -> None:
        """An event of a `tool_calls` region: its open waits (`opened`) for its close, which
        `keep_records` keeps when it can; its chunks make nothing; anything else goes to `rest`."""
        kind = e["type"]
        if kind == "region_open":
            self._drain()
            self.opened = e
            return
        opened = self.opened
        if opened is not None:
            if kind == "region_chunk":
                return  # (`_process` would only move `_region_pos`, reset at the next open)
            if kind == "region_close" and self.chat._calls.keep_records([(e["value"],)], 0) == 1:
                self.opened = None
                return
            self.rest.append(opened)
            self.opened = None
        self.rest.append(e)

    def _drain(self) -> None:
        if self.rest:
            rest, self.rest = self.rest, []
            self.chat._process(rest, truncated_drops=False)


def _keeps_whole(chat: ChatParser) -> bool:
    """Whether a one-shot parse for `chat` keeps calls whole (`_Whole`): calls are sent complete
    (nothing of a call region but its close makes anything) and typed by the core."""
    calls = chat._calls
    return calls.stream == "complete" and calls.core_typed and "tool_calls" in chat._t.fields


def parse_message(
    text: str,
    *,
    model: str | None = None,
    template: dict | Template | str | None = None,
    prefix: str | None = None,
    tools: Sequence[dict | Callable] | None = None,
    finish_reason: str = "stop",
    auto: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """The non-streaming assistant message for a complete output (what merging the deltas gives).

    Takes `ChatParser`'s options; `finish_reason="length"` applies the cut-off policy; `auto=True`
    without `model=`/`template=` detects the family from the output (`chatparse.detect`).

    >>> tpl = {"start_anchor": "A", "fields": {"content": {"close": "<end>"}}}
    >>> parse_message(" Hello <end>", template=tpl)
    {'role': 'assistant', 'content': 'Hello'}
    """
    parser = ChatParser(model=model, template=template, prefix=prefix, tools=tools, auto=auto, **options)
    if parser._auto is None and finish_reason != "length" and type(text) is str:
        # The one-shot path: the core decides the whole text at the end of the stream with C
        # searches (`chatparse._oneshot`), and the message is built from those events, as
        # `finish` builds it (a parse the fast path gives up on is fed to a fresh parser). A
        # cut-off output ("length") needs the streaming scanner's report of undecided openers,
        # and auto mode is the detect layer's: both take the streaming path.
        core = parser._parser
        assert isinstance(core, ResponseParser)
        whole = _Whole(parser) if _keeps_whole(parser) else None
        events: list[Any] = []
        try:
            # (with calls kept whole, the call loop's records go among the events, in order)
            run_oneshot(core, text, events, events if whole is not None else None)
        except Bail:
            parser = ChatParser(
                model=model, template=template, prefix=prefix, tools=tools, auto=auto, **options
            )
        else:
            parser._finished = True
            if plan_for(core._t).required:  # (some field is `optional: false`)
                try:
                    core._check_required(events)
                except RequiredFieldsMissing as e:
                    parser._errors.append({"field": None, "error": str(e), "text": None})
            if whole is not None:
                whole.take(events)
            else:
                parser._process(events, truncated_drops=False)
            return parser._message()
    parser.feed(text)
    return parser.finish(finish_reason)[0]
