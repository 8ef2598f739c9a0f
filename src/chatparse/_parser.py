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

Per token, a feed inside an open region asks the scanner once and returns the released text as
a bare string (`_feed`). When the scanner answers that it released everything and that a feed
without its trip characters would be released the same way (`Scanner.quiet`: no lead character
of the watched delimiters in it), the parser releases such next feeds without asking (most tokens
of a call body or of reasoning), until one holds a trip character.

The prefix (the prompt's tail after the last anchor) is processed when the parser is made, once
per request in a server. When that pass routes the whole prefix (nothing held: no match can still
start in it) and every region it closes has a text value (a str: no tool coercion, so the same for
every parser's tools), the state it leaves is the position, the current region, its captures, the
output and the events, and nothing in the scanner: a scanner made afresh at that position decides
what the old one would (the scanner is remade after every commit anyway; its finders are caches).
That state is kept per template and prefix (`_PREFIX_STATES`), so a prompt that ends in
`<think>\n`, or closes its own reasoning (`<think></think>`, Gemma 4's empty thought channel),
costs a lookup instead of a pass of the streaming matcher (~17-27 us). A pass that held its tail
(a delimiter may still start there: Qwen3's no-thinking prompt ends in the content's leading
newlines) is kept too: its parser and every restored one go on with a scanner made afresh at the
held position, which must hold there again on the same text (else nothing is kept). A restored
parser makes that scanner only when it is needed, at its first feed (or at the end when no feed
came): construction is a lookup and copies, and the tail is decided once, with the feed's text.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from . import _oneshot
from ._content import copy_value, process_field
from ._events import Event
from ._scan import Commit, Hold, Scanner, StringGuard, WatchList
from ._template import Field, Template, load_response_template
from .errors import RequiredFieldsMissing
from .tools import ToolTable, build_tool_table, coerce_tool_calls
from .tools import _coerce_call as coerce_call

_PREFIX_REQUIRED = (
    "`ResponseParser`/`parse_response` requires `prefix` (the chat prompt sent to the model before "
    "generation), because chat templates often pre-write part of the assistant message (e.g. an "
    "opening `<think>` tag) that the parser must see to parse the output correctly. If the generation "
    'already contains the complete message, pass `prefix=""` to opt out explicitly.'
)

_MALFORMED = (KeyError, TypeError, ValueError)

#: per template: `{truncated prefix: state after its pass}` (see "Theory of operation"); prefixes
#: up to `_PREFIX_KEY_MAX` characters, at most `_PREFIX_STATES_MAX` per template
_PREFIX_STATES: weakref.WeakKeyDictionary[Template, dict[str, tuple]] = weakref.WeakKeyDictionary()
_PREFIX_KEY_MAX = 512
_PREFIX_STATES_MAX = 64


def _copy_events(events: list[Any]) -> list[Any]:
    """Copies of a prefix pass's events (`region_open`, `region_chunk`, `region_close` of a text
    value: a str, shared safely), each parser its own."""
    return [{**e, "captures": dict(e["captures"])} if "captures" in e else dict(e) for e in events]


def _keepable(events: list[Any]) -> bool:
    """Whether a prefix pass with these events leaves a state every parser of the template can
    share: no malformed region, and every closed region a text value (the same whatever tools
    a parser has: coercion never applies to a str; and immutable, so never copied)."""
    for e in events:
        kind = e["type"]
        if kind == "region_close":
            if type(e["value"]) is not str:
                return False
        elif kind != "region_open" and kind != "region_chunk":
            return False
    return True


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
        tools: list[dict | Callable] | ToolTable | None = None,
    ) -> None:
        # (a parser per request in a server: a compiled template is taken without a call)
        t = (
            response_template
            if type(response_template) is Template
            else load_response_template(response_template)
        )
        self._t = t
        if prefix is None:
            raise ValueError(_PREFIX_REQUIRED)
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        # a table `build_tool_table` made is taken as it is (the engine plugins build it per request)
        self._tools = tools if type(tools) is ToolTable else build_tool_table(tools) if tools else {}
        self._buf = ""
        self._pos = 0
        defaults = t.defaults
        self._output: dict[str, Any] = copy_value(defaults) if defaults else {}
        implicit = t.implicit
        self._current: str | None = implicit
        self._captures: dict[str, str] = {}
        self._body_start = 0  # a region's body is always buf[_body_start : start of its closer]
        self._opened = False
        self._finalized = False
        self._malformed: set[str] = set()
        self._zw = -1  # position of the last zero-width commit: no second zero-width match there
        self._states: dict[int, Any] = {}  # per delimiter: its finder, kept across region visits
        self._cut_off: list[dict[str, Any]] = []
        self._scanner: Scanner | None = None
        # The scanner, while its last answer to `_feed` was a quiet release (see `_feed`)
        self._quiet: Scanner | None = None
        self._emit_from = 0  # chunks never re-emit prefix characters released late (D20)
        self._dirty = implicit is not None and t.fields[implicit].dirty
        self._copy_values = True
        self.initial_events: list[Event] = []
        truncated = t.truncate_past_last_anchor(prefix) if prefix else ""
        if truncated:
            self._start(truncated)
            self._quiet = None  # (the pass may leave no scanner: the first feed asks)
        self._emit_from = len(self._buf)

    def _start(self, truncated: str) -> None:
        """Process the truncated prefix, or restore the state its pass left (`_PREFIX_STATES`)."""
        states = _PREFIX_STATES.get(self._t)
        state = states.get(truncated) if states is not None else None
        if state is not None:
            pos, current, opened, body_start, captures, zw, dirty, events, output = state
            if output is not None:
                self._output = copy_value(output)
            self._buf = truncated
            self._pos = pos
            self._current = current
            self._opened = opened
            self._body_start = body_start
            self._captures = dict(captures)
            self._zw = zw
            self._dirty = dirty
            self.initial_events = _copy_events(events)
            # A held tail (pos < len(truncated)) needs a scanner made afresh at the held position,
            # which holds there again on the tail (the state is kept only when it does): the first
            # feed makes it (`_feed` without a scanner), or `_end` when no feed came. Made here, it
            # would decide the tail once more than that feed does.
            return
        self._buf = truncated
        self._process(self.initial_events, eos=False)
        if len(truncated) <= _PREFIX_KEY_MAX and not self._malformed and _keepable(self.initial_events):
            pos = self._pos
            if pos < len(truncated):
                # The pass held its tail (text a delimiter may still start in: Qwen3's no-thinking
                # prompt ends in the content's leading newlines). This parser, like a restored
                # one, goes on with a scanner made afresh at the held position, which holds there
                # again (no new text); kept only when it does.
                self._scanner = None
                self._states = {}
                more: list[Event] = []
                self._process(more, eos=False)
                if more or self._pos != pos:
                    self.initial_events += more
                    return
            if states is None:
                states = _PREFIX_STATES.setdefault(self._t, {})
            if len(states) >= _PREFIX_STATES_MAX:
                states.clear()
            states[truncated] = (
                self._pos,
                self._current,
                self._opened,
                self._body_start,
                dict(self._captures),
                self._zw,
                self._dirty,
                _copy_events(self.initial_events),
                # the output when a region closed (else the template's defaults: made afresh)
                copy_value(self._output)
                if any(e["type"] == "region_close" for e in self.initial_events)
                else None,
            )
            if pos == len(truncated):
                # the next feed makes its scanner afresh at the same position, as a restored parser's
                self._scanner = None
                self._states = {}

    @property
    def input_text(self) -> str:
        """The truncated prefix followed by everything fed so far (event offsets index into it)."""
        return self._buf

    def feed(self, text: str) -> list[Event]:
        """Append model output and return the events it completes."""
        r = self._feed(text)
        if isinstance(r, str):
            return [{"type": "region_chunk", "field": self._current, "text": r, "dirty": self._dirty}]  # type: ignore[typeddict-item]
        return r

    def _feed(self, text: str) -> str | list[Event]:
        """`feed`, except that a feed whose only event is a chunk of the open region returns that
        chunk's text (the per-token path; the OpenAI layer takes it without an event dict)."""
        sc = self._quiet
        if sc is not None:
            # The last feed released everything as a chunk and its scanner said a feed without
            # its trip characters would too (`Scanner.quiet`): the scanner's decision, without
            # asking it (most tokens of a call body, of reasoning, of a JSON string).
            if text.__class__ is str and sc.trip1 not in text and sc.trip2 not in text and text:
                la = sc.trip_loop
                if la is None or la.cache.get(text[-1]) is False:
                    buf = self._buf
                    self._buf = ""
                    buf += text
                    self._buf = buf
                    # (what that decision sets: all searched and released; the chunk is the new
                    # text, everything before it was released)
                    sc.q = sc._searched = self._pos = len(buf)
                    return text
            self._quiet = None
        if type(text) is not str:
            if not isinstance(text, str):
                raise TypeError(f"feed() takes a str, got {type(text).__name__}")
            text = str(text)
        sc = self._scanner
        if sc is not None:  # (never once finalized: the end of the stream drops the scanner)
            if not text:
                return []  # no new text: the scanner's last hold stands, nothing to route
            # Drop the attribute's reference first so CPython can grow the string in place:
            # `self._buf += text` would copy the whole buffer on every feed (quadratic).
            buf = self._buf
            self._buf = ""
            buf += text
            self._buf = buf
            # The per-token path: a hold inside an open region is one chunk.
            decision = sc.decide(buf, False, self._zw)
            if type(decision) is Hold:
                pos = self._pos
                at = decision.at
                if at <= pos:
                    return []
                if self._opened and self._current is not None and pos >= self._emit_from:
                    self._pos = at
                    if decision is sc.quiet:
                        self._quiet = sc
                    return buf[pos:at]
            del buf
            events: list[Event] = []
            self._process(events, False, decision)
            return events
        if self._finalized:
            raise RuntimeError("ResponseParser already finalized")
        if text:
            buf = self._buf
            self._buf = ""
            buf += text
            self._buf = buf
            del buf
        events = []
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

    @property
    def cut_off(self) -> list[dict[str, Any]]:
        """After `finalize`: the delimiters that were still being written when the stream ended
        (their match was undecided at the end of the text), as `{"field", "opener", "start"}`,
        `start` an offset into `input_text`. A tool-call opener here is a call that a `max_tokens`
        cut-off left unwritten (its text was released as text of the region)."""
        return [dict(c) for c in self._cut_off]

    def _end(self, cut_off: bool = True) -> list[Event]:
        if self._finalized:
            raise RuntimeError("ResponseParser already finalized")
        self._quiet = None  # (a feed after the end goes the checked way)
        events: list[Event] = []
        sc = self._scanner
        if cut_off and self._pos < len(self._buf):
            if sc is None and len(self._buf) == self._emit_from:
                # A restored prompt state whose held tail no feed followed (`_start`; the buffer
                # is still the prompt): the scanner the prefix pass's parser has there, holding on
                # the tail (no events), for its report.
                self._process(events, eos=False)
                sc = self._scanner
            if sc is not None:
                watches, at = sc.undecided(self._buf, self._zw)
                self._cut_off = [{"field": w.field, "opener": w.is_open, "start": at} for w in watches]
        if self._pos == len(self._buf):
            # Nothing left to route: the scanner could only hold (no match is taken at the very end
            # of the text), so the stream ends as on its hold without asking one, or making one
            # when no feed did (an empty output: ~5 us a request; ~1.4 us after a feed).
            self._close_at_end(events)
        else:
            self._process(events, eos=True)
        return events

    def _close_at_end(self, events: list[Event]) -> None:
        """The end of the stream once nothing more can match: route the rest of the text, close
        the open region (incomplete when its field has a closer) and drop the scanner."""
        n = len(self._buf)
        if self._pos < n:
            self._route(events, self._buf, self._pos, n)
            self._pos = n
        cur = self._current
        self._close(events, n, n, cur is None or self._t.fields[cur].closer is None)
        self._scanner = None

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

    def _process(self, events: list[Event], eos: bool, decision: Hold | Commit | None = None) -> None:
        """Route text and regions until the scanner holds (`decision`: the scanner's first answer,
        when the caller already asked for it)."""
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
                scanner = self._scanner = self._watch().scanner(self._pos, self._states, guard)
            if decision is None:
                decision = scanner.decide(buf, eos, self._zw)
            if type(decision) is Hold:
                at = decision.at
                if eos:
                    self._close_at_end(events)
                    return
                pos = self._pos
                if at > pos:
                    self._pos = at
                    name = self._current
                    if name is not None:
                        if self._opened and pos >= self._emit_from:
                            events.append(
                                {
                                    "type": "region_chunk",
                                    "field": name,
                                    "text": buf[pos:at],
                                    "dirty": self._dirty,
                                }
                            )
                            if decision is scanner.quiet:
                                self._quiet = scanner  # (as `_feed`'s own chunk)
                        else:
                            self._route(events, buf, pos, at)
                return
            assert isinstance(decision, Commit)
            w = decision.watch
            start, end = decision.start, decision.end
            if start > self._pos:
                self._route(events, buf, self._pos, start)
            self._pos = end
            self._zw = start if start == end else -1
            caps = decision.captures
            if w.is_open:
                if self._opened:  # (else `_close` would only reset what is set below)
                    self._close(events, start, start, True)
                name = w.field
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
            decision = None

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
            events.append(
                {
                    "type": "region_malformed",
                    "field": name,
                    "start": start,
                    "end": end,
                    "error": e,
                    "body_start": self._body_start,
                    "body_end": start,
                }
            )
            self._reset()
            return
        events.append(
            {
                "type": "region_close",
                "field": name,
                # Events never alias the message (D18); `parse_response` drops its events.
                "value": copy_value(value) if self._copy_values else value,
                "start": start,
                "end": end,
                "complete": complete,
                "body_start": self._body_start,
                "body_end": start,
            }
        )
        self._reset()

    def _value(self, f: Field, body: str) -> Any:
        # (`process_field` and `coerce_tool_calls` without their frames where the field has a
        # compiled value path and the value is one call: the closing feed of every tool call)
        process = f.process
        value = (
            process.fn(body, self._captures)
            if process is not None
            else process_field(body, f, self._captures)
        )
        tools = self._tools
        if tools and type(value) is not str:  # (a text value holds no call to coerce)
            value = coerce_call(value, tools) if type(value) is dict else coerce_tool_calls(value, tools)
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
    return _oneshot.parse(text, response_template, prefix, tools)
