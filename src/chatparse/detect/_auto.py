"""`AutoParser`: template-less parsing as a stream of region events with offsets.

Theory of operation
-------------------
The marker recognizers are fields of one union template (`_union.py`) run on the core
`ResponseParser`. `AutoParser` reads the core's events for the union fields
(``<kind>_<recognizer>``) and re-segments the raw text into the three fields of an assistant
message, emitting its own events in the core's shape (`region_open` / `region_chunk` /
`region_close` / `region_malformed`, offsets into `input_text`), each with a `recognizer` key:

* ``reasoning``: a reasoning region of a family (its chunks stream as the core releases them;
  the close `value` is the stripped text), or content held since the start of the output that a
  lone closer turned into reasoning (`orphan_reasoning=True`);
* ``content``: one region per contiguous run of released content (zero-width open at the run's
  first character, zero-width close at its end; the close `value` is the run's raw text);
* ``tool_calls``: an accepted call region, emitted whole once decided (open span = the opener,
  close span = the closer, zero-width where the payload was cut from the text after it); the
  close `value` is the list of calls `{"name", "arguments"}` (arguments a JSON object, typed by
  the offered schemas where the family's values are untyped text);
* a rejected call is `region_open` + `region_malformed` (``tool_calls``, the error as a
  `ValueError`), followed by its raw text as a ``content`` region over the same span (the
  policy: the text of a region that is not a call goes back into the content at its place).

Regions are emitted in text order and do not nest, with two exceptions: the text of a rejected
call is re-read as content (above), and a marker-free whole-output shape (decided at `finalize`
on the held content) is one ``tool_calls`` region over the content's span, so a region held
between its pieces (a reasoning block) comes nested inside it. Text
the message drops (section and end-of-turn markers, lone closers, messages to built-in
recipients, a call opener cut off by `max_tokens`) is in no region. Everything the family
decisions need (held content, the first family that wins, repairs) lives here; the state of the
scan lives in the core. The result is the same for every chunking because each decision is
taken on core events, which are chunking-independent, and content is released only when no later
text can change what it is.

Content is held (released later, in order) while (a) with `orphan_reasoning=True`, it may still
become reasoning, and (b) while no call was found and nothing was released, it may still be a
marker-free whole-output shape (`_shapes.could_be_shape`), decided at `finalize`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._parser import ResponseParser
from .._template import Template, load_response_template
from ..tools import build_tool_table, coerce_tool_calls
from . import _gemma, _shapes
from ._union import (
    ALIASES,
    NEVER_ANCHOR,
    ORPHAN_FIELDS,
    PREFIX_OPENERS,
    REASONING_RECOGNIZERS,
    TOOL_FIELDS,
    TOOL_RECOGNIZERS,
    UNTERMINATED,
    union_template,
)

#: Every recognizer name, tool families in the documented `auto` precedence, then reasoning.
RECOGNIZERS: tuple[str, ...] = (*TOOL_RECOGNIZERS, *REASONING_RECOGNIZERS)

#: The fields of `AutoParser`'s events, as a template (what layers above read `Field` options from:
#: reasoning regions are joined by a blank line, content is stripped at its edges).
OUTPUT_TEMPLATE: Template = load_response_template(
    {
        "start_anchor": NEVER_ANCHOR,
        "fields": {
            "reasoning": {"open": "\x00r", "close": "\x00/r", "repeats": True, "join": "\n\n"},
            "tool_calls": {"open": "\x00t", "close": "\x00/t", "repeats": True, "content": "json"},
            "content": {},
        },
    }
)

#: Recognizers whose argument values are untyped text: typed by the offered schemas.
_STRING_VALUED = frozenset({"qwen3_coder", "glm", "deepseek_dsml"})

#: Gemma fields whose failed or unterminated payload is repaired (runtime-contract §3.1), with their closers.
_GEMMA = {"gemma": "<tool_call|>", "gemma_legacy": ">"}

#: Union fields whose opener, left undecided at the end of a cut-off output, is a call never written.
_CUT_KINDS = ("tool_calls_", "drop_", "content_")

_NAMED = frozenset(
    n for n, spec in TOOL_FIELDS.items() if "transform" in spec and not spec.get("transform_each")
)

Event = dict[str, Any]


@dataclass
class DetectResult:
    """What detection found: the raw-vs-cleaned report."""

    recognizer: str | None
    raw: str
    cleaned: str
    reasoning: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    reasoning_recognizers: list[str] = field(default_factory=list)
    unknown_tools: list[str] = field(default_factory=list)


def resolve_recognizers(recognizers: str | Sequence[str] | None) -> tuple[str, ...]:
    """`"auto"`/None: all; `"none"`: none; a name or names: those (ValueError for unknown ones)."""
    if recognizers is None or recognizers == "auto":
        return RECOGNIZERS
    if recognizers == "none":
        return ()
    names = (recognizers,) if isinstance(recognizers, str) else tuple(recognizers)
    unknown = [n for n in names if n not in RECOGNIZERS]
    if unknown:
        raise ValueError(f"unknown recognizer(s) {unknown}; available: {list(RECOGNIZERS)}")
    return tuple(n for n in RECOGNIZERS if n in names)


def _prefix_opener(prefix: str | None, names: Sequence[str]) -> str | None:
    """The reasoning opener that `prefix` (the prompt) ends with, if its family is enabled."""
    if not prefix:
        return None
    tail = prefix.rstrip()
    for opener, family in PREFIX_OPENERS.items():
        if family in names and tail.endswith(opener):
            return opener
    return None


class _Reject(ValueError):
    pass


def _arguments(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise _Reject("arguments must be a JSON object, got a non-JSON string") from None
    if not isinstance(value, dict):
        raise _Reject(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _calls_from_objects(value: Any, *, allow_single: bool) -> list[dict[str, Any]]:
    objs = [value] if allow_single and isinstance(value, dict) else value
    if not isinstance(objs, list) or not objs:
        raise _Reject("expected a non-empty list of call objects")
    calls = []
    for o in objs:
        if not isinstance(o, dict) or not isinstance(o.get("name"), str) or not o["name"]:
            raise _Reject("a call object needs a string 'name'")
        args = o.get("arguments", o.get("parameters"))
        calls.append({"name": o["name"], "arguments": _arguments(args)})
    return calls


def _to_calls(rec: str, value: Any, captures: dict[str, str]) -> list[dict[str, Any]]:
    if rec in _NAMED:
        args = value.get("arguments") if isinstance(value, dict) else value
        return [{"name": captures.get("name", "").strip(), "arguments": _arguments(args)}]
    return _calls_from_objects(value, allow_single=rec in ("hermes", "llama_tag"))


# -- event constructors ----------------------------------------------------------------------


def _open(name: str, start: int, end: int, rec: str | None, captures: dict[str, str] | None = None) -> Event:
    e: Event = {"type": "region_open", "field": name, "start": start, "end": end, "recognizer": rec}
    if captures:
        e["captures"] = dict(captures)
    return e


def _chunk(name: str, text: str, rec: str | None) -> Event:
    return {
        "type": "region_chunk",
        "field": name,
        "text": text,
        "dirty": name == "tool_calls",
        "recognizer": rec,
    }


def _close(name: str, value: Any, start: int, end: int, body: tuple[int, int], rec: str | None) -> Event:
    return {
        "type": "region_close",
        "field": name,
        "value": value,
        "start": start,
        "end": end,
        "complete": True,
        "body_start": body[0],
        "body_end": body[1],
        "recognizer": rec,
    }


def _malformed(name: str, error: str, start: int, end: int, body: tuple[int, int], rec: str | None) -> Event:
    return {
        "type": "region_malformed",
        "field": name,
        "start": start,
        "end": end,
        "error": ValueError(error),
        "body_start": body[0],
        "body_end": body[1],
        "recognizer": rec,
    }


class AutoParser:
    """Template-less streaming parser: region events for reasoning, content and tool calls.

    The same methods as the core `ResponseParser` (`initial_events`, `feed`, `finalize`,
    `input_text`), with events in its shape plus a `recognizer` key (see the module docstring);
    `finalize(finish_reason)` applies the cut-off policy of `"length"`, and `result` is the
    `DetectResult` after it. `template` describes the three event fields.

    >>> p = AutoParser()
    >>> [(e["type"], e["field"]) for e in p.feed('<think>hm</think>Hi <tool_call>{"name": "f"}</tool_call>')]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('region_open', 'reasoning'), ('region_chunk', 'reasoning'), ('region_close', 'reasoning'),
     ('region_open', 'content'), ('region_chunk', 'content'), ('region_close', 'content'),
     ('region_open', 'tool_calls'), ('region_close', 'tool_calls')]
    >>> _, events = p.finalize()
    >>> p.result.recognizer, p.result.calls, p.result.cleaned
    ('hermes', [{'name': 'f', 'arguments': {}}], 'Hi')
    """

    template: Template = OUTPUT_TEMPLATE

    def __init__(
        self,
        *,
        tools: Sequence[dict | Callable] | None = None,
        recognizers: str | Sequence[str] | None = None,
        prefix: str | None = None,
        orphan_reasoning: bool = False,
    ) -> None:
        self._names = resolve_recognizers(recognizers)
        self._table = build_tool_table(list(tools)) if tools else {}
        self._tool_names = tuple(self._table)
        self._longest_lead = max(len(lead) for lead in (*_shapes.STARTS, *self._tool_names)) + len("call:")
        self._finish_reason = "stop"
        self._parser = ResponseParser(union_template(self._names), prefix="")
        self._orphan = orphan_reasoning and any(f in self._names for f, _ in ORPHAN_FIELDS.values())
        self._reasoning: list[str] = []
        self._reasoning_recs: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._errors: list[dict[str, Any]] = []
        self._recognizer: str | None = None
        # content not yet released, in text order: ("text", start, text) or ("events", [events])
        self._held: list[tuple[Any, ...]] = []
        self._reset_held()
        self._released: list[str] = []  # content released, raw (DetectResult.cleaned, stripped)
        self._committed = False  # released content holds more than whitespace
        self._explicit_content = False  # a content channel (Harmony final) was seen: no whole-output shape
        self._segment = True  # inside a segment that an orphan closer would turn into reasoning
        self._run: list[int] | None = None  # the open content run: [start, end]
        self._cut: int | None = None  # finalize(length): where a cut-off call opener starts
        # the core region being read
        self._field: str | None = None
        self._start = 0
        self._open_end = 0
        self._pos = 0  # where the core's next chunk of the current region starts
        self._captures: dict[str, str] = {}
        self._body: list[str] = []
        self._finalized = False
        self.result: DetectResult | None = None
        self.initial_events: list[Event] = []
        opener = _prefix_opener(prefix, self._names)
        self._opener_len = len(opener or "")
        if opener:  # the prompt pre-opened reasoning: the output starts inside it
            for e in self._parser.feed(opener):
                self._event(e, self.initial_events)

    @property
    def input_text(self) -> str:
        """The reasoning opener the prompt ended with (if any) followed by everything fed."""
        return self._parser.input_text

    # -- content -----------------------------------------------------------------------------

    def _commit(self, text: str) -> None:
        # The cleaned content is the released text with its edges stripped (`finalize`).
        self._released.append(text)
        if not self._committed and not text.isspace():
            self._committed = True

    def _close_run(self, out: list[Event]) -> None:
        run = self._run
        if run is not None:
            self._run = None
            start, end = run
            out.append(_close("content", self.input_text[start:end], end, end, (start, end), None))

    def _emit_text(self, start: int, text: str, out: list[Event]) -> None:
        run = self._run
        if run is None or run[1] != start:
            self._close_run(out)
            out.append(_open("content", start, start, None))
            run = self._run = [start, start]
        out.append(_chunk("content", text, None))
        run[1] = start + len(text)
        self._commit(text)

    def _release(self, out: list[Event]) -> None:
        held = self._held
        self._reset_held()
        run: list[str] = []  # contiguous held text goes out as one chunk
        end = -1
        for item in held:
            if item[0] == "text" and item[1] == end:
                run.append(item[2])
                end += len(item[2])
                continue
            if run:
                self._emit_text(end - sum(map(len, run)), "".join(run), out)
                run = []
            if item[0] == "text":
                run, end = [item[2]], item[1] + len(item[2])
            else:
                end = -1
                self._close_run(out)
                out.extend(item[1])
        if run:
            self._emit_text(end - sum(map(len, run)), "".join(run), out)

    def _hold_reason(self) -> bool:
        if self._segment and self._orphan:
            return True
        return not self._calls and not self._committed and self._shape_possible

    def _reset_held(self) -> None:
        self._held = []
        self._held_lead = ""  # the held text without its leading whitespace, while undecided
        self._shape_possible = True  # the held text may still be a whole-output shape
        self._shape_decided = False  # ... and no later text can change that (prefix-closed test)

    def _hold_text(self, start: int, text: str) -> None:
        self._held.append(("text", start, text))
        if self._shape_decided:
            return
        # `could_be_shape` is prefix-closed: once false it stays false, and once the text is
        # longer than every lead it cannot change; so it is asked only of a short head (linear).
        self._held_lead += text if self._held_lead else text.lstrip()
        self._shape_possible = _shapes.could_be_shape(self._held_lead, self._tool_names)
        if not self._shape_possible or len(self._held_lead) > self._longest_lead:
            self._shape_decided = True

    def _held_text(self) -> str:
        return "".join(item[2] for item in self._held if item[0] == "text")

    def _content(self, start: int, text: str, out: list[Event]) -> None:
        if not text:
            return
        run = self._run
        if (
            not self._held
            and run is not None
            and run[1] == start
            and self._committed
            and not (self._segment and self._orphan)
        ):
            self._emit_text(start, text, out)  # the common case: prose after prose
            return
        self._hold_text(start, text)
        if not self._hold_reason():
            self._release(out)

    def _add_reasoning(self, text: str, rec: str) -> None:
        text = text.strip()
        if not text:
            return
        self._reasoning.append(text)
        if rec not in self._reasoning_recs:
            self._reasoning_recs.append(rec)

    # -- calls -------------------------------------------------------------------------------

    def _reject(self, rec: str, error: str, span: tuple[int, int, int, int], out: list[Event]) -> None:
        """A region that is not a call: reported, and its raw text goes back into the content."""
        start, body_start, body_end, end = span
        name = ALIASES.get(rec, rec)
        raw = self.input_text[start:end]
        self._errors.append({"recognizer": name, "error": error, "text": raw})
        events = [
            _open("tool_calls", start, body_start, name, self._captures),
            _malformed("tool_calls", error, body_end, end, (body_start, body_end), name),
        ]
        if self._held:
            self._held.append(("events", events))
        else:
            self._close_run(out)
            out.extend(events)
        self._content(start, raw, out)

    def _accept(
        self, key: str, calls: list[dict[str, Any]], span: tuple[int, int, int, int], out: list[Event]
    ) -> None:
        rec = ALIASES.get(key, key)
        if key in _STRING_VALUED and self._table:  # untyped XML values: typed by the offered schemas
            wrapped = [{"type": "function", "function": c} for c in calls]
            calls = [w["function"] for w in coerce_tool_calls(wrapped, self._table)]
        if self._recognizer is not None and self._recognizer != rec:
            self._reject(
                rec, f"calls of '{rec}' after calls of '{self._recognizer}' are not merged", span, out
            )
            return
        self._recognizer = rec
        self._emit_calls(rec, calls, span, out)

    def _emit_calls(
        self, rec: str, calls: list[dict[str, Any]], span: tuple[int, int, int, int], out: list[Event]
    ) -> None:
        # A call follows: content held so far is released (a shape is no longer possible).
        self._release(out)
        self._close_run(out)
        start, body_start, body_end, end = span
        self._calls.extend(calls)
        value = [{"name": c["name"], "arguments": c["arguments"]} for c in calls]
        out.append(_open("tool_calls", start, body_start, rec, self._captures))
        out.append(_close("tool_calls", value, body_end, end, (body_start, body_end), rec))

    def _truncated(self, rec: str, start: int, end: int) -> None:
        self._errors.append(
            {
                "recognizer": ALIASES.get(rec, rec),
                "error": "truncated call dropped",
                "text": self.input_text[start:end],
            }
        )

    def _tool_end(
        self, value: Any, ok: bool, complete: bool, error: str, close: tuple[int, int], out: list[Event]
    ) -> None:
        rec = (self._field or "")[len("tool_calls_") :]
        body_end, end = close
        span = (self._start, self._open_end, body_end, end)
        if rec in _GEMMA and (not ok or not complete) and self._gemma_repair(rec, span, out):
            return
        if rec in UNTERMINATED and not ok:
            # No terminator of its own: cut the region at the end of its first JSON value.
            body = "".join(self._body)
            stripped = body.lstrip()
            try:
                value, used = json.JSONDecoder().raw_decode(stripped)
            except (ValueError, RecursionError):
                pass
            else:
                if rec in _NAMED:
                    value = {"arguments": value}
                head = self._open_end + len(body) - len(stripped) + used
                rest = stripped[used:]
                try:
                    calls = _to_calls(rec, value, self._captures)
                except _Reject as e:
                    self._reject(rec, str(e), span, out)
                    return
                self._accept(rec, calls, (self._start, self._open_end, head, head), out)
                if rest:  # the prose after the payload (after the rejected payload too)
                    self._content(head, rest, out)
                return
        if not ok and end == len(self.input_text) and self._finish_reason == "length":
            self._truncated(rec, self._start, end)  # cut off by max_tokens: a call never written
            return
        if not ok:
            self._reject(rec, error, span, out)
            return
        if not complete and rec not in UNTERMINATED:
            if self._finish_reason == "length":
                self._truncated(rec, self._start, end)
                return
            self._reject(rec, "the call's terminator is missing (truncated output)", span, out)
            return
        try:
            calls = _to_calls(rec, value, self._captures)
        except _Reject as e:
            self._reject(rec, str(e), span, out)
            return
        self._accept(rec, calls, span, out)

    def _gemma_repair(self, rec: str, span: tuple[int, int, int, int], out: list[Event]) -> bool:
        """Repair a Gemma payload the JSON dialect rejected; True when the call was accepted.

        The wrapped form takes `<tool_call|>` as the boundary even inside an unclosed string, and a
        call without its terminator (cut off) is repaired and fires, except with
        finish_reason="length" (left to the truncation rule). The older `<call:NAME{…}>` form is
        repaired only when its payload is balanced.
        """
        text = self.input_text
        start, open_end, body_end, end = span
        close = _GEMMA[rec]
        body = "".join(self._body)
        head_end = open_end + len(body)
        terminated = text[head_end:end] == close and text[open_end:head_end] == body
        rest = ""
        cut = body.find(close) if rec == "gemma" else -1
        if cut >= 0:
            body, rest, terminated = body[:cut], body[cut + len(close) :], True
            body_end, end = open_end + cut, open_end + cut + len(close)
        if not terminated and self._finish_reason == "length":
            return False
        try:
            args, balanced = _gemma.repair(body)
        except ValueError:
            return False
        if rec != "gemma" and not balanced:
            return False
        name = self._captures.get("name", "").strip()
        self._accept(rec, [{"name": name, "arguments": args}], (start, open_end, body_end, end), out)
        if rest:
            self._content(end, rest, out)
        return True

    # -- core events -------------------------------------------------------------------------

    def _event(self, e: Any, out: list[Event]) -> None:
        kind, name = e["type"], e["field"]
        if kind == "region_chunk":
            text = e["text"]
            start = self._pos
            self._pos += len(text)
            if name.startswith("content"):
                if self._cut is not None and start + len(text) > self._cut:
                    text = text[: max(0, self._cut - start)]
                self._content(start, text, out)
            else:
                self._body.append(text)
                if name.startswith("reasoning_") and self._run is None and not self._held:
                    out.append(_chunk("reasoning", text, name[len("reasoning_") :]))
                elif name.startswith("reasoning_"):
                    self._held.append(("events", [_chunk("reasoning", text, name[len("reasoning_") :])]))
            return
        if kind == "region_open":
            self._field, self._start, self._open_end = name, e["start"], e["end"]
            self._pos = e["end"]
            self._captures = dict(e.get("captures", {}))
            self._body = []
            if name.startswith("orphan_"):
                rec = name[len("orphan_") :]
                if self._segment and self._orphan:
                    held = self._held
                    self._reset_held()
                    self._close_run(out)
                    texts = [item for item in held if item[0] == "text"]
                    first = texts[0][1] if texts else e["start"]
                    out.append(_open("reasoning", first, first, rec))
                    out.extend(_chunk("reasoning", item[2], rec) for item in texts)
                    joined = "".join(item[2] for item in texts)
                    out.append(
                        _close("reasoning", joined.strip(), e["start"], e["end"], (first, e["start"]), rec)
                    )
                    self._add_reasoning(joined, rec)
                else:
                    self._errors.append(
                        {"recognizer": rec, "error": "stray reasoning closer dropped", "text": ""}
                    )
            elif name.startswith("marker_") or name == "content":
                pass
            elif name.startswith("content_"):
                self._explicit_content = True
            else:
                self._segment = False
                # Whitespace cannot start a shape's text that matters (it is stripped): released,
                # so that the region after it streams at once.
                if self._held and (not self._held_lead or not self._hold_reason()):
                    self._release(out)
                if name.startswith("reasoning_"):
                    rec = name[len("reasoning_") :]
                    ev = _open("reasoning", e["start"], e["end"], rec)
                    if self._held:
                        self._held.append(("events", [ev]))
                    else:
                        self._close_run(out)
                        out.append(ev)
            return
        if kind == "region_close":
            if name.startswith("reasoning_"):
                rec = name[len("reasoning_") :]
                self._add_reasoning(e["value"] or "", rec)
                ev = _close(
                    "reasoning", e["value"] or "", e["start"], e["end"], (e["body_start"], e["body_end"]), rec
                )
                if self._held:
                    self._held.append(("events", [ev]))
                else:
                    out.append(ev)
            elif name.startswith("tool_calls_"):
                self._tool_end(e["value"], True, e["complete"], "", (e["start"], e["end"]), out)
            elif name.startswith("drop_"):
                self._errors.append(
                    {
                        "recognizer": name[len("drop_") :],
                        "error": "message to a non-function recipient dropped",
                        "text": self.input_text[self._start : e["end"]],
                    }
                )
            elif name.startswith("orphan_") and self._errors and self._errors[-1]["text"] == "":
                self._errors[-1]["text"] = self.input_text[self._start : e["end"]]
            self._field = None
            return
        if kind == "region_malformed":
            if name.startswith("tool_calls_"):
                error = str(e["error"]).split("\n")[0]
                self._tool_end(None, False, False, error, (e["start"], e["end"]), out)
            elif not name.startswith("drop_"):  # a text field cannot fail; keep its text as content
                self._content(self._start, self.input_text[self._start : e["end"]], out)
            self._field = None

    # -- API ---------------------------------------------------------------------------------

    def feed(self, text: str) -> list[Event]:
        """Append model output; return the events it completes."""
        r = self._feed(text)
        if isinstance(r, str):
            return [_chunk("content", r, None)]
        return r

    def _feed(self, text: str) -> str | list[Event]:
        """`feed`, except that a feed whose only event is a chunk of the open content run returns
        that chunk's text (the per-token path)."""
        if self._finalized:
            raise RuntimeError("AutoParser already finalized")
        r = self._parser._feed(text)
        if type(r) is str:
            run = self._run
            # the per-token path: prose after released prose, in the content region being read
            if run is not None and run[1] == self._pos and self._committed and not self._held:
                f = self._field
                if f is not None and f.startswith("content"):
                    self._pos = run[1] = self._pos + len(r)
                    self._released.append(r)
                    return r
            r = [{"type": "region_chunk", "field": self._field or "content", "text": r, "dirty": False}]
        out: list[Event] = []
        for e in r:
            self._event(e, out)
        return out

    def finalize(self, finish_reason: str = "stop") -> tuple[DetectResult, list[Event]]:
        """End the stream: `(result, last events)`. With `finish_reason="length"`, a call cut off by
        `max_tokens` is dropped (reported in `errors`), and so is a call opener left undecided at
        the end of the text (the core's `cut_off`)."""
        if self._finalized:
            raise RuntimeError("AutoParser already finalized")
        self._finalized = True
        out: list[Event] = []
        self._finish_reason = finish_reason
        _, events = self._parser.finalize()
        if finish_reason == "length":
            starts = [
                c["start"] for c in self._parser.cut_off if c["opener"] and c["field"].startswith(_CUT_KINDS)
            ]
            if starts:
                self._cut = min(starts)
                self._errors.append(
                    {
                        "recognizer": None,
                        "error": "truncated call opener dropped",
                        "text": self.input_text[self._cut :],
                    }
                )
        for e in events:
            self._event(e, out)
        self._segment = False
        if self._held:
            claimed = None
            if not self._calls and not self._committed and not self._explicit_content:
                enabled = [n for n in TOOL_RECOGNIZERS if n in self._names]
                claimed = _shapes.whole_output(self._held_text(), self._tool_names, enabled)
            if claimed is not None:
                # The content is the call. Regions that were held behind it (a reasoning block
                # between its pieces) are emitted nested inside the call's region, in order.
                held = self._held
                last = max(i for i, item in enumerate(held) if item[0] == "text")
                texts = [item for item in held if item[0] == "text"]
                inner = [e for item in held[:last] if item[0] == "events" for e in item[1]]
                after = [e for item in held[last:] if item[0] == "events" for e in item[1]]
                start, end = texts[0][1], texts[-1][1] + len(texts[-1][2])
                self._reset_held()
                self._recognizer = rec = claimed[0]
                self._close_run(out)
                self._calls.extend(claimed[1])
                value = [{"name": c["name"], "arguments": c["arguments"]} for c in claimed[1]]
                out.append(_open("tool_calls", start, start, rec))
                out.extend(inner)
                out.append(_close("tool_calls", value, end, end, (start, end), rec))
                out.extend(after)
            else:
                self._release(out)
        self._close_run(out)
        unknown = []
        if self._tool_names:
            unknown = sorted({c["name"] for c in self._calls if c["name"] not in self._tool_names})
        self.result = DetectResult(
            recognizer=self._recognizer,
            raw=self.input_text[self._opener_len :],
            cleaned="".join(self._released).strip(),
            reasoning=list(self._reasoning),
            calls=[{"name": c["name"], "arguments": c["arguments"]} for c in self._calls],
            errors=list(self._errors),
            reasoning_recognizers=list(self._reasoning_recs),
            unknown_tools=unknown,
        )
        return self.result, out

    def report(self) -> dict[str, Any]:
        """After `finalize`: what the layers above put under `message["chatparse"]` (`recognizer`,
        `reasoning_recognizers`, `errors`, `unknown_tools`; empty when nothing was recognized)."""
        r = self.result
        if r is None:
            raise RuntimeError("report() before finalize()")
        report: dict[str, Any] = {"recognizer": r.recognizer}
        if r.reasoning_recognizers:
            report["reasoning_recognizers"] = r.reasoning_recognizers
        if r.errors:
            report["errors"] = r.errors
        if r.unknown_tools:
            report["unknown_tools"] = r.unknown_tools
        return report if r.recognizer is not None or len(report) > 1 else {}
