"""The streaming `ResponseParser` state machine and one-shot `parse_response`.

Theory of operation
-------------------
The parser owns a buffer (the truncated prefix followed by everything fed), a position `pos`
(the first character not yet routed), the output message, and the current region: the implicit
field, an explicit field, or `None` (the null sink). Everything that affects the state machine
lives in this file; where the next delimiter is lies with `_scan`.

A processing pass asks the current region's `Scanner` for a decision: commit a delimiter match
(route the text before it, close/open regions, switch watch list, repeat) or hold from a position
(route the text before it and stop). At end of stream nothing is held: remaining text is routed
and the open region is closed, flagged `complete: False` when its closer never came.

The result of a pass depends only on the buffer, never on how it was split, because a scanner
commits a match only when every continuation of the text would make the one-shot parse commit the
same one. Hence streamed == one-shot for every chunking.
"""

from __future__ import annotations

from collections.abc import Callable
from copy import deepcopy
from typing import Any

from ._content import process_field
from ._events import Event
from ._scan import Scanner, StringGuard, WatchList, fast_hold
from ._template import Field, Template, load_response_template
from .errors import RequiredFieldsMissing
from .tools import build_tool_table, coerce_tool_calls

_PREFIX_REQUIRED = (
    "`ResponseParser`/`parse_response` requires `prefix` (the chat prompt sent to the model before "
    "generation), because chat templates often pre-write part of the assistant message (e.g. an "
    "opening `<think>` tag) that the parser must see to parse the output correctly. If the generation "
    'already contains the complete message, pass `prefix=""` to opt out explicitly.'
)

_MALFORMED = (KeyError, TypeError, ValueError)


def _copy(value: Any) -> Any:
    """A copy of a parsed value (JSON-like data) so events never alias the message (D18)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _is_empty(v: Any) -> bool:
    return v is None or (isinstance(v, (list, dict, str)) and not v)


class ResponseParser:
    """Streaming parser for one assistant message, driven by a `response_template`.

    Drop-in for `transformers.utils.chat_parsing.ResponseParser` with the enriched event contract
    of vLLM/SGLang: every `region_open`/`region_close`/`region_malformed` carries `start`/`end`
    offsets into `input_text`; an explicit `region_open` carries the opener's named `captures`;
    `region_close` carries `complete` (False when a region that has a closer was ended by the end
    of the stream); content that cannot be parsed produces `region_malformed` (with the exception
    as `error`) instead of raising, and parsing goes on.

    >>> tpl = {"start_anchor": "<|im_start|>assistant\\n",
    ...        "fields": {"thinking": {"open": "<think>", "close": "</think>"},
    ...                   "content": {"close": "<|im_end|>"}}}
    >>> p = ResponseParser(tpl, prefix="<|im_start|>assistant\\n")
    >>> [e["type"] for e in p.feed("<think>hm</think>Hi")]
    ['region_open', 'region_chunk', 'region_close', 'region_open', 'region_chunk']
    >>> p.finalize()[0]
    {'thinking': 'hm', 'content': 'Hi'}
    """

    def __init__(
        self,
        response_template: dict | Template,
        prefix: str | None = None,
        *,
        tools: list[dict | Callable] | None = None,
    ) -> None:
        self._t = load_response_template(response_template)
        if prefix is None:
            raise ValueError(_PREFIX_REQUIRED)
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        self._tools = build_tool_table(tools) if tools else {}
        self._buf = ""
        self._pos = 0
        self._output: dict[str, Any] = deepcopy(self._t.defaults)
        self._current: str | None = self._t.implicit
        self._captures: dict[str, str] = {}
        self._body_start = 0  # a region's body is always buf[_body_start : start of its closer]
        self._opened = False
        self._finalized = False
        self._malformed: set[str] = set()
        self._zw = -1  # position of the last zero-width commit: no second zero-width match there
        self._finders: dict[int, Any] = {}
        self._scanner: Scanner | None = None
        self._fast: Scanner | None = None  # the scanner, when feed() may use its fast path
        self._emit_from = 0  # chunks never re-emit prefix characters released late (D20)
        self._dirty = self._t.implicit is not None and self._t.fields[self._t.implicit].dirty
        self.initial_events: list[Event] = []
        truncated = self._t.truncate_past_last_anchor(prefix) if prefix else ""
        if truncated:
            self._buf = truncated
            self._process(self.initial_events, eos=False)
        self._emit_from = len(self._buf)
        if self._pos < self._emit_from:
            self._fast = None  # held prefix characters must go through _route (D20)

    @property
    def input_text(self) -> str:
        """The truncated prefix followed by everything fed so far (event offsets index into it)."""
        return self._buf

    def feed(self, text: str) -> list[Event]:
        """Append model output and return the events it completes."""
        sc = self._fast
        if sc is None or type(text) is not str or not text:
            return self._feed(text)
        # Drop the attribute's reference first so CPython can grow the string in place:
        # `self._buf += text` would copy the whole buffer on every feed (quadratic).
        buf = self._buf
        self._buf = ""
        buf += text
        self._buf = buf
        # Fast path (the common token): no trigger character of the watched delimiters in the
        # unresolved text (or none followed by a delimiter's literal start) means only a trailing
        # run of a leading loop class (the `\s*` of `\s*<tool_call>`) can still start a
        # delimiter; everything before it is released. `_fast` is armed only when this is valid.
        n = len(buf)
        q = sc.fast_q
        if n - q < 256:
            t = buf.find(sc.fast_char, q)
            if t < 0 and self._opened and (sc.loop_any is None or sc.loop_any.cache.get(buf[-1]) is False):
                # The tightest case: no trigger, and the last character cannot start a delimiter's
                # leading loop (or there is none): release everything.
                sc.fast_q = n
                pos = self._pos
                self._pos = n
                return [
                    {"type": "region_chunk", "field": self._current, "text": buf[pos:], "dirty": self._dirty}  # type: ignore[typeddict-item]
                ]
            if t < 0:
                h = n
            elif sc.prefixes is None:
                h = -1
            else:
                h = fast_hold(buf, q, t, sc.fast_char, sc.prefixes)
            if h == n:
                la = sc.loop_any
                if la is not None:
                    last = buf[-1]
                    hit = la.cache.get(last)
                    if hit is None:
                        hit = la(last)
                    if hit:
                        h = sc.trailing_hold(buf, q, n)
            if h >= 0:
                sc.fast_q = h
                pos = self._pos
                if h <= pos:
                    return []
                self._pos = h
                name = self._current
                if name is None:
                    return []
                if self._opened:
                    return [{"type": "region_chunk", "field": name, "text": buf[pos:h], "dirty": self._dirty}]
                opened: list[Event] = []
                self._route(opened, buf, pos, h)
                return opened
            if sc.live is not None and sc.still_held(buf, self._zw):
                return []  # a delimiter is still being written at the hold point
        del buf
        events: list[Event] = []
        self._process(events, eos=False)
        return events

    def _feed(self, text: str) -> list[Event]:
        if self._finalized:
            raise RuntimeError("ResponseParser already finalized")
        if text:
            if not isinstance(text, str):
                raise TypeError(f"feed() takes a str, got {type(text).__name__}")
            buf = self._buf
            self._buf = ""
            buf += text
            self._buf = buf
            del buf
        events: list[Event] = []
        self._process(events, eos=False)
        return events

    def finalize(self) -> tuple[dict, list[Event]]:
        """End the stream: returns the final message and the last events.

        Raises `RequiredFieldsMissing` (a `ValueError` carrying the final `events`) when a field
        marked `optional: false` got no value; the parser then stays unfinalized, as in the
        reference."""
        events = self._end()
        self._check_required(events)
        return self._finish(), events

    # -- internals --------------------------------------------------------------------------

    def _end(self) -> list[Event]:
        if self._finalized:
            raise RuntimeError("ResponseParser already finalized")
        events: list[Event] = []
        self._process(events, eos=True)
        return events

    def _check_required(self, events: list[Event]) -> None:
        missing = [
            n
            for n, f in self._t.fields.items()
            if not f.optional and n not in self._output and n not in self._malformed
        ]
        if missing:
            raise RequiredFieldsMissing(missing, events)

    def _finish(self) -> dict:
        defaults = self._t.defaults
        self._output = {k: v for k, v in self._output.items() if k in defaults or not _is_empty(v)}
        self._finalized = True
        return self._output

    def _watch(self) -> WatchList:
        cur = self._current
        if cur is not None and cur != self._t.implicit:
            return self._t.fields[cur].watch
        return self._t.watch

    def _process(self, events: list[Event], eos: bool) -> None:
        buf = self._buf
        while True:
            scanner = self._scanner
            if scanner is None:
                guard = None
                cur = self._current
                if cur is not None and cur != self._t.implicit:
                    f = self._t.fields[cur]
                    if f.string_guard is not None:
                        guard = StringGuard(self._body_start, f.string_guard, f.string_quotes, f.value_close)
                scanner = self._scanner = self._watch().scanner(self._pos, self._finders, guard)
            kind, a, b, c = scanner.scan(buf, eos, self._zw)
            if kind == 1:
                is_open, name, _ = scanner.entries[a]
                start, (end, slots) = b, c
                if start > self._pos:
                    self._route(events, buf, self._pos, start)
                self._pos = end
                self._zw = start if start == end else -1
                d = scanner.entries[a][2]
                caps = {}
                for g, slot in d.group_names.items():
                    s, e = slots[slot], slots[slot + 1]
                    if s != -1 and e != -1:
                        caps[g] = buf[s:e]
                if is_open:
                    self._close(events, start, start, True)
                    self._current = name
                    self._dirty = self._t.fields[name].dirty
                    self._captures = caps
                    self._body_start = end
                    self._opened = True
                    events.append(
                        {
                            "type": "region_open",
                            "field": name,
                            "start": start,
                            "end": end,
                            "captures": dict(caps),
                        }
                    )
                else:
                    self._captures.update(caps)
                    self._close(events, start, end, True)
                self._scanner = None
                self._fast = None
                continue
            if eos:
                n = len(buf)
                if self._pos < n:
                    self._route(events, buf, self._pos, n)
                    self._pos = n
                cur = self._current
                complete = cur is None or self._t.fields[cur].closer is None
                self._close(events, n, n, complete)
                self._scanner = self._fast = None
                return
            if a > self._pos:
                self._route(events, buf, self._pos, a)
                self._pos = a
            # Arm the fast path of `feed` when its shortcuts are valid for the current state.
            self._fast = (
                scanner
                if scanner.fast_char and self._pos >= self._emit_from and (scanner.fast_q or not scanner.at0)
                else None
            )
            return

    def _route(self, events: list[Event], buf: str, a: int, b: int) -> None:
        name = self._current
        if name is None:
            return
        if not self._opened:
            events.append({"type": "region_open", "field": name, "start": a, "end": a})
            self._opened = True
            self._body_start = a
        if a < self._emit_from:
            a = self._emit_from
            if a >= b:
                return
        text = buf[a:b]
        events.append({"type": "region_chunk", "field": name, "text": text, "dirty": self._dirty})

    def _close(self, events: list[Event], start: int, end: int, complete: bool) -> None:
        name = self._current
        if name is None or not self._opened:
            self._reset()
            return
        f = self._t.fields[name]
        try:
            value = self._value(f, self._buf[self._body_start : start])
        except _MALFORMED as e:
            self._malformed.add(name)
            events.append({"type": "region_malformed", "field": name, "start": start, "end": end, "error": e})
            self._reset()
            return
        events.append(
            {
                "type": "region_close",
                "field": name,
                "value": _copy(value),
                "start": start,
                "end": end,
                "complete": complete,
            }
        )
        self._reset()

    def _value(self, f: Field, body: str) -> Any:
        value = process_field(body, f, self._captures)
        if self._tools:
            value = coerce_tool_calls(value, self._tools)
        out = self._output
        name = f.name
        if f.join is not None:
            if not isinstance(value, str):
                raise ValueError(
                    f"Field '{name}': 'join' requires each match to parse to a string, got {type(value).__name__}."
                )
            previous = out.get(name)
            if previous is not None and not isinstance(previous, str):
                raise ValueError(
                    f"Field '{name}': 'join' appends to a string, but the field already holds a {type(previous).__name__} (from defaults)"
                )
            out[name] = value if previous is None else previous + f.join + value
        elif f.repeats:
            previous = out.get(name)
            if previous is None:  # a `None` default behaves as absent (D10)
                out[name] = [value]
            elif isinstance(previous, list):
                previous.append(value)
            else:
                raise ValueError(
                    f"Field '{name}': 'repeats' appends to a list, but the field already holds a {type(previous).__name__} (from defaults)"
                )
        else:
            out[name] = value
        return value

    def _reset(self) -> None:
        self._current = self._t.implicit
        self._dirty = self._t.implicit is not None and self._t.fields[self._t.implicit].dirty
        self._captures = {}
        self._opened = False


def parse_response(
    text: str,
    response_template: dict | Template,
    *,
    prefix: str | None = None,
    tools: list[dict | Callable] | None = None,
) -> dict:
    """Parse a complete model output into a message dict (transformers-compatible).

    Unlike streaming, a region whose content cannot be parsed raises its original exception (the
    first one in text order, including regions that came from the prefix), as the reference does.

    >>> parse_response("<think>hm</think>Hi<|im_end|>",
    ...     {"start_anchor": "A", "fields": {"thinking": {"open": "<think>", "close": "</think>"},
    ...                                      "content": {"close": "<|im_end|>"}}}, prefix="")
    {'thinking': 'hm', 'content': 'Hi'}
    """
    parser = ResponseParser(response_template, prefix=prefix, tools=tools)
    events = parser.initial_events + parser.feed(text) + parser._end()
    for e in events:
        if e["type"] == "region_malformed":
            raise e["error"]
    parser._check_required(events)
    return parser._finish()
