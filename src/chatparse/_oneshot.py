"""The one-shot fast path: delimiter decisions over a complete text, searched in C.

Theory of operation
-------------------
When the whole text is known (`parse_response`), no decision ever has to wait for more text, so
the streaming scanner's machinery for partial matches (cursors running `_rx.Attempt` step by step,
holds, prefilters) is not needed: the one-shot parse commits, in the current region's watch list,
the match with the smallest key `(start, -length, opener-before-closer, field name)`, where each
delimiter's match is its leftmost match at or after the parser's position. `_decide` answers
exactly that question with the `regex` module's compiled patterns and `str.find` (and, for the
shapes no proof covers, the streaming scanner's matcher, kept for the whole parse), and `run` is
`ResponseParser._process` at the end of the stream with `_decide` as its scanner (the same
routing, the same `_value`, the same events in the same order; `parse_response` asks for no
events at all and gets the first malformed region's error instead), so the message is the
streaming parser's by construction. The differential tests hold both to that.

Each delimiter gets a *seeker* (the `Plan`, once per template, cached on it, keeps one factory
per distinct delimiter), chosen by what can be proven about its cost:

* `_LiteralSeek`: a literal list, `str.find` per literal; the longest literal at the leftmost
  start wins.
* `_SearchSeek`: a pattern whose backtracking per position `_rx.backtrack_bound` proves to be at
  most `_rx.SAFE_STEPS`: one `regex` `search` from the position, which is then linear in the text.
* `_RUN` (a `_SearchSeek` over `run_pattern`): `C* REST` where REST cannot start with a C
  character (`\\s*<tool_call>`): one `regex` search of `(?:\\G|(?<!C))(?:PATTERN)`, whose
  attempts inside a C run fail at the lookbehind (see the comment at `run_pattern`). When every
  match of REST starts with a literal lead (`\\s*<tool_call>`), `_LeadRunSeek` instead: `str.find`
  for the lead, one reverse match for the run before it, the pattern's `match` there (a search of
  the run pattern steps through every character of prose without the delimiter).
* `_LEAD` (a `_SearchSeek` over the pattern itself): a pattern `forced_linear` proves whose every
  match starts with a literal lead or a trigger character and that has no leading run: one
  `regex` search tries exactly the finder's candidates at C speed.
* `_AnchorSeek` (`_ANCHOR`): `^BODY` with BODY of linear cost per attempt (deepseek_r1_distill's
  `^\\s*<think>`): its only candidate is position 0, one `match` there.
* `_LoopSeek`: other patterns with unbounded repeats that `forced_linear` proves (every
  unbounded repeat a single-class run that what follows cannot start, no candidate start possible
  inside such a run): the delimiter's own streaming search strategy proposes candidate starts
  (C speed: literal leads, the start of a `C` run before a place REST can start) and the compiled
  pattern's `match` decides at each; a failure skips what the finder knows it decided.
* `_CursorSeek` (`_CURSOR`): anything else (a name run a candidate can start in, as
  `<function=[^>\\n]+>`; lookbehind-led branches; anchors inside alternations; lookaheads with
  unbounded runs): the streaming scanner's own exact search, run at the end of the stream. ONE
  finder of the delimiter's strategy and ONE `_rx.MatchContext` serve the whole parse (the plan
  makes one seeker per distinct delimiter, shared by every watch list that watches it), so what
  the matcher learned in one region visit holds in every later one. Per-visit cursors were
  quadratic in the number of regions (gpt_oss with text between calls): each visit re-ran the
  attempts the previous ones had decided. When each choice of the pattern is linear per attempt
  (`_attempt_reads`: the name-run openers), a candidate where no earlier `regex` attempt read is
  decided by the compiled pattern's `match` instead, in C; the others by the matcher.

Every seeker remembers its last answer: the leftmost match at or after `q0` starts at `s`, which
stays the answer for every query in `[q0, s]` (a match at a start does not depend on where the
search began), so a delimiter that loses to another one is not searched again and the work of all
region visits together is linear in the text.

The again step (`_Again`): right after a region that a top-list opener opened, in a call-dense
text the next decision is usually that opener again at the very position (the next call). When
the opener matches there (non-empty) and no other top delimiter does, no other match can start
earlier or tie, so that is `_decide`'s answer, found with one `match` per delimiter instead of a
search per seeker. The opener's match is run only for kinds whose attempts the seeker proofs
bound (`_AGAIN_KINDS`), never from inside a leading run an earlier step measured (any other opener,
as qwen3_xml's name run, is asked of its own seeker, whose proof covers every query); the other
delimiters' tests (`_at_test`) cost at most the opener's match plus a constant, and the again
steps' opener matches are disjoint, so the steps add linear work; anything undecided goes to the
seekers. Where the other delimiters' sources join one pattern (`_joinable`), the opener and the
tests are one match, `(?!OTHER|...)(?:OPENER)`, after the leading runs of all of them are measured
(so the lookahead's runs are disjoint from every later step's too). An opener gets an again step
only when its field takes several regions (`repeats` or `join`): after a field written once
(reasoning) the bet is lost and costs a match per top delimiter before `_decide` asks anyway.
Where the call loop stopped, its own again step did not apply, so `run` does not repeat it; at
the end of the text `run` asks nothing (a match there is never taken).

The call loop (`_call_loop`): when the region a top-list opener opened (by the again step, or by
`_decide` with a non-empty match: the first call of a run) is closed by one delimiter alone (its
watch list is its closer: a call body), the text of a call-dense output is closer, value, again
step, closer, ... with no other decision between them; `run` hands that sequence to
a loop that asks the same seekers the same queries and builds the same values and events, without
the general step's routing. Anything else (a refused or missing closer, an again step that does
not apply) goes back to `run`'s general step, which then takes the same decision from the seekers
(they remember their answers), so the loop changes the cost per call, not a single answer. A
closer that is a literal, a `C* LEAD...` run or, searched by one `regex` search, a pattern whose
every match starts with one literal (Kimi K2's `<|tool_call_end|>...`) is found by the loop with
`str.find` and one `match` at the first candidate, the attempt the seeker's search would make
there; when that attempt fails the general step asks the seeker. Where every match of the closer
starts with one literal and the again step's opener and the other top delimiters' tests join one
pattern (Kimi K2, glm, qwen3_xml's cursor closer and opener), the closer and the next again step
are ONE `regex` match at that literal's first occurrence (`_compound`: why that decides what the
two matches decide, and why the again steps then need not measure their leading runs). A plain
JSON call body closed by such a closer outside strings is parsed by `json_loads`'s scanner from
the text itself, without a slice (`_direct_json`: why the scan cannot read past the closer). For
`parse_message` (calls sent complete) the loop appends one record per `tool_calls` region instead
of its open, chunk and close events (`run`'s `kept`): the OpenAI layer keeps those calls in one
pass and rebuilds the events of any it declines, so what it receives is the same.

Why `_CursorSeek` is linear. The queries of one seeker never go back: `run`'s position only grows,
and a refusal asks again from one past the answer just given, so `_Seek.first` calls `_search` with
strictly increasing `q` (a query at or before a remembered answer is answered from memory), and the
finder is asked in increasing order as in one streaming scan. Every candidate runs one
`_rx.Attempt` with `eos=True` in the shared context; its work is of three kinds:
(1) states that fail: a branch point (program counter, position) that failed is in the failure
memo for good (no back-references, and a state's future does not depend on where the attempt
started), so it fails once per parse and costs one step per later entry: O(program x text) in all;
(2) the states of a successful path: a MAIN attempt records the states it enters in the failure
memo while they are in progress, so after a match those on the matching path (`Attempt.path`)
are taken out again, and the memo then holds true failures only (a later attempt that reaches a
state of an earlier matching path matches from there, with the same end). That path is re-walked
only when a later query starts inside an earlier match: when the match lost to a delimiter that
started before it and ended inside it, or was refused. The seeker counts the characters of its
matches that lie before the furthest match end seen so far (`overlap`) and gives up past the
length of the text (`Bail`), so re-walked paths cost O(program x text) too; (3) lookahead bodies,
atomic groups and run ends, which keep their memos (decided outcome per position, the last
maximal run) in the same shared context, each decided once per parse. A refused match inside a
leading run is no special case here: the attempt one position on re-walks only the earlier
matching path, which the overlap count charges. The `regex` attempts: `_attempt_reads` admits a
pattern only when `_linear_sequence` proves each of its choices (an attempt costs at most the
pattern's bound times the characters it reads) and gives, per choice, how far an attempt can read
(bounded parts by their width, forced runs to the end of the maximal run, lookahead bodies by
their width or, with forced runs, by their own reads; a lookbehind reads at most
`_rx.MAX_LOOKBEHIND` characters before the candidate, once per candidate); one is run at a
candidate only at or past where every earlier one could have read (`c_reach`, one match of
`reach_pattern`), so the text they read, and the matches that bound it, are disjoint: linear.
A candidate inside that text (the `<` of `<function=<function=...`) goes to the matcher.

Refusals are those of the streaming scanner: a zero-width match at the position of the previous
zero-width commit, and, in a `close_outside_strings` region, a match inside a string literal of
the body (asked of the same `StringGuard`, or, for plain `"..."` strings, of `_QuoteGuard`: the
same answer from one possessive C match). A refused match of a run pattern inside its C-run
would make the next query re-scan the run: the fast path then gives up (`Bail`) and the caller
parses with the streaming scanner instead, so the worst case stays linear (the fast work before
the bail is at most linear too).

Cursor seekers in the call loop. A call-dense qwen3_xml text asks its two cursor seekers once per
call each, always where the answer can only start, so the loop decides there directly instead
of through a finder. A closer whose every match starts with one literal: at that literal's first
occurrence past the body's start (`_lead_closer_at`: one `str.find` and one `match`, without
`c_reach`; `_lead_closer` says when attempts at distinct occurrences read each character a
constant number of times). The opener, at the again step's position: `_CursorSeek.match_at` (the
seeker's own `regex` decision of a candidate at or past `c_reach`, its read recorded, so the
proof above is unchanged; `_Again.direct`), or, after such a literal-led closer, `match_here`
without the read (`_free_opener`: no run of the opener can hold a whole occurrence of the
closer's literal, and one starts between any two again steps). What fails there goes to the
seeker as before. The other top delimiters' tests at the again step first check the literals a
match must begin with (`_test_leads`), so an again step that meets none of them runs no `regex`
match for them.

Values: a field's body goes through `Field.process` (`_content.compile_processor`, built at
load: the transform as one expression, `json.loads` for plain JSON), then the tools' coercion.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from operator import itemgetter
from typing import Any

import regex

from . import _content, _parser, _rx  # (`_parser` imports this module: its names are read at call time)
from ._content import _always_set
from ._rx import Node
from ._scan import (
    AnchorSearch,
    LoopSearch,
    PrefixSearch,
    PrefixSetSearch,
    StringGuard,
    TriggerSearch,
    UnionSearch,
    Watch,
    WatchList,
    _branches,
    _First,
    _first,
    _flatten,
    _sequence_strategy,
    _unwrap,
)
from ._template import Template
from .errors import RequiredFieldsMissing
from .tools import _coerce_call as coerce_call
from .tools import coerce_tool_calls

__all__ = ["Bail", "FastWatch", "open_event", "parse", "parse_events", "plan_for", "run", "stream_end"]


_SECOND = itemgetter(1)  # (the end of a `(start, end)` span)


class Bail(Exception):
    """The fast path met a shape it does not handle linearly: parse with the streaming scanner."""


# --------------------------------------------------------------------------------------------
# Seekers: the leftmost raw match of one delimiter at or after a position, remembered.


class _Seek:
    """Per-parse search state of one delimiter. `first(buf, q)` is the start of its leftmost match
    at or after `q` (`len(buf) + 1` when there is none); `end` and `captures()` describe it.

    The answers are remembered as the run of consecutive matches found from `q0` on (`_search` from
    `q0`, then from one past each refused match), so any later query inside that run is a bisection,
    never a new search: the searches of one delimiter never overlap."""

    __slots__ = ("q0", "starts", "ends", "ms", "end", "i", "loop")

    def __init__(self) -> None:
        self.q0 = 0
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.ms: list[Any] = []
        self.end = 0
        self.i = 0
        self.loop: Any = None  # the leading loop class of a `_LoopSeek`

    def _search(self, buf: str, q: int) -> tuple[int, int, Any]:
        raise NotImplementedError

    def first(self, buf: str, q: int) -> int:
        starts = self.starts
        if starts:
            last = starts[-1]
            if self.q0 <= q <= last:
                i = self.i
                if not (starts[i] >= q and (i == 0 or starts[i - 1] < q)):
                    i = self.i = bisect_left(starts, q)
                self.end = self.ends[i]
                return starts[i]
            if q != last + 1:
                self.q0 = q
                starts.clear()
                self.ends.clear()
                self.ms.clear()
        else:
            self.q0 = q
        s, e, m = self._search(buf, q)
        self.i = len(starts)
        starts.append(s)
        self.ends.append(e)
        self.ms.append(m)
        self.end = e
        return s

    def captures(self, buf: str) -> dict[str, str]:
        return {}


def _leftmost(buf: str, literals: list[str], found: list[tuple[int, int]], q: int) -> int:
    """The leftmost occurrence at or after `q` of any of `literals` (-1 when none). `found[i]` is
    literal i's last search, `(searched from, occurrence or -1)`, still the answer for a later `q`
    up to that occurrence: the searches of one literal never overlap."""
    best = -1
    for i, lit in enumerate(literals):
        frm, res = found[i]
        if frm > q or 0 <= res < q:
            res = buf.find(lit, q)
            found[i] = (q, res)
        if res >= 0 and (best < 0 or res < best):
            best = res
    return best


class _LiteralSeek(_Seek):
    __slots__ = ("literals", "_found")

    def __init__(self, literals: list[str]) -> None:
        _Seek.__init__(self)  # (a direct call: no `super` object per seeker)
        self.literals = literals  # longest first
        # per literal: (searched from, leftmost occurrence or -1), so that each literal's searches
        # never overlap either
        self._found = [(1, 0)] * len(literals)

    def _search(self, buf: str, q: int) -> tuple[int, int, Any]:
        best = _leftmost(buf, self.literals, self._found, q)
        if best < 0:
            return len(buf) + 1, 0, None
        for lit in self.literals:  # the longest literal at the leftmost start
            if buf.startswith(lit, best):
                return best, best + len(lit), None
        raise AssertionError  # pragma: no cover


class _SearchSeek(_Seek):
    __slots__ = ("rx", "names")

    def __init__(self, rx: Any, names: list[str]) -> None:
        _Seek.__init__(self)
        self.rx = rx
        self.names = names

    def _search(self, buf: str, q: int) -> tuple[int, int, Any]:
        n = len(buf)
        m = self.rx.search(buf, q)
        if m is None or m.start() >= n:  # a match at the very end of the text is never taken
            return n + 1, 0, None
        return m.start(), m.end(), m

    def captures(self, buf: str) -> dict[str, str]:
        names = self.names
        if not names:
            return {}
        m = self.ms[self.i]
        caps: dict[str, str] = {}
        for g in names:
            if m.start(g) != -1:
                caps[g] = m.group(g)
        return caps


class _AnchorSeek(_SearchSeek):
    """`^BODY` (`_anchored_linear`): a match can only start at position 0; one `match` there."""

    __slots__ = ()

    def _search(self, buf: str, q: int) -> tuple[int, int, Any]:
        n = len(buf)
        m = self.rx.match(buf) if q == 0 else None
        if m is None or m.start() >= n:
            return n + 1, 0, None
        return 0, m.end(), m


class _LeadRunSeek(_SearchSeek):
    """`C* REST` where every match of REST starts with one of the literal `leads` (none of which
    starts with a C character): the leftmost lead at or after `q` (`str.find`, C speed, and the
    common case of prose without the delimiter costs no regex step per character), the C run
    before it (one reverse `regex` match, bounded by `q`), and the pattern's `match` at that run's
    start. A match cannot start earlier (its REST starts at a lead at or after this one, and the C
    run before a later lead begins after this lead, which is no C character); when REST fails
    here, the next lead is tried. The runs crossed and the leads found are disjoint: linear."""

    __slots__ = ("leads", "back", "_found")

    def __init__(self, rx: Any, names: list[str], leads: list[str], back: Any) -> None:
        _SearchSeek.__init__(self, rx, names)
        self.leads = leads
        self.back = back
        # per lead: (searched from, leftmost occurrence or -1), so that each lead's searches never
        # overlap (a lead that occurs only far ahead is not searched for again at every query)
        self._found = [(1, 0)] * len(leads)

    def _search(self, buf: str, q: int) -> tuple[int, int, Any]:
        n = len(buf)
        leads = self.leads
        found = self._found
        match = self.rx.match
        back = self.back
        frm = q
        while True:
            p = _leftmost(buf, leads, found, frm)
            if p < 0:
                return n + 1, 0, None
            start = back.match(buf, q, p).start()
            m = match(buf, start)
            if m is not None:
                if start >= n:  # pragma: no cover - a lead is never empty
                    return n + 1, 0, None
                return start, m.end(), m
            frm = p + 1


class _LoopSeek(_SearchSeek):
    """Candidates from the delimiter's own search strategy (C-speed finders), decided by the
    compiled pattern's `match`: for patterns `forced_linear` proves."""

    __slots__ = ("finder",)

    def __init__(self, rx: Any, names: list[str], strategy: Any, loop: Any) -> None:
        _SearchSeek.__init__(self, rx, names)
        self.finder = strategy.finder()
        self.loop = loop  # `_any_loop(strategy)`, decided with the plan

    def _search(self, buf: str, q: int) -> tuple[int, int, Any]:
        n = len(buf)
        finder = self.finder
        rx = self.rx
        s = finder.next(buf, q, True)
        while s < n:
            m = rx.match(buf, s)
            if m is not None:
                return s, m.end(), m
            s = finder.next(buf, finder.failed(buf, s), True)
        return n + 1, 0, None


class _CursorSeek(_Seek):
    """The streaming scanner's exact search for a delimiter no C-search proof covers (a name run a
    candidate can start in, lookbehind-led branches, anchors inside alternations): ONE finder of
    the delimiter's own strategy and ONE `_rx.MatchContext` for the whole parse, shared by every
    watch list that watches the delimiter, with attempts run at the end of the stream
    (`eos=True`: an attempt is never live). See "Theory of operation" for why the work of all
    region visits together is linear.

    A successful MAIN attempt leaves the states of its matching path in the shared failure memo
    (it records the states it enters there, in progress, see `_rx.Attempt`); they lead to a match,
    so they are taken out again, and the memo then holds only true failures, which stay failures
    for every later attempt (no back-references; a state's future does not depend on where the
    attempt started). What a later attempt re-walks is thus only a matching path over text that an
    earlier match already covered: `overlap` counts those characters, and past a linear budget the
    fast path gives up (`Bail`).

    With `reads` (`_attempt_reads`), a candidate at or past `c_reach` is decided by the compiled
    pattern's `match` (same leftmost-first semantics; the differential tests hold both to that),
    whose cost is the text it can read, `[s, _read_end(s))`: such reads never overlap."""

    __slots__ = ("d", "prog", "finder", "ctx", "reach", "overlap", "reads", "reach_rx", "c_rx", "c_reach")

    def __init__(
        self, d: Any, reads: list[list[tuple[Any, int]]] | None = None, reach_rx: Any = None
    ) -> None:
        _Seek.__init__(self)
        self.d = d
        self.prog = d.scan_prog
        self.finder = d.strategy.finder()
        self.ctx = _rx.MatchContext()
        # (`loop` stays None: a refused match inside a leading run needs no bail here, the
        # overlap count charges the re-walk)
        self.reach = 0  # the furthest end of a match found so far
        self.overlap = 0  # characters of found matches that lie before `reach` (re-walked)
        #: `_attempt_reads(d)`: how far one `regex` attempt can read (None: never in C)
        self.reads = reads
        self.reach_rx = reach_rx if reach_rx is not None else (reach_pattern(reads) if reads else None)
        self.c_rx = d.match_re  # (`match` at candidates: no required-string search)
        self.c_reach = 0  # no `regex` attempt has read at or past this position

    def _read_end(self, buf: str, s: int) -> int:
        """One past the last position a `regex` attempt at `s` can read (see `_attempt_reads`):
        one match of `reach_pattern(reads)` (every step a group end)."""
        far = max(map(_SECOND, self.reach_rx.match(buf, s).regs))  # type: ignore[union-attr]
        n = len(buf)
        return (far if far < n else n) + 1

    def _search(self, buf: str, q: int) -> tuple[int, int, Any]:
        n = len(buf)
        finder = self.finder
        prog = self.prog
        ctx = self.ctx
        s = finder.next(buf, q, True)
        while s < n:  # a match at the very end of the text is never taken (as when streaming)
            if self.reads is not None and s >= self.c_reach:
                # No earlier `regex` attempt read here: this one costs the text it reads, once.
                self.c_reach = self._read_end(buf, s)
                m = self.c_rx.match(buf, s)
                if m is None:
                    s = finder.next(buf, finder.failed(buf, s), True)
                    continue
                return s, self._found(s, m.end(), n), m
            att = _rx.Attempt(prog, s, ctx)
            try:
                r = att.run(buf, True)
            except TimeoutError as exc:  # (as the streaming cursor reports it)
                d = self.d
                raise ValueError(
                    f"{d.scope}: a lookbehind of {d.source!r} took longer than {_rx.REGEX_TIMEOUT}s"
                ) from exc
            if r is not None:
                ctx.memo(prog).fail.difference_update(att.path)
                return s, self._found(s, r[0], n), r[1]
            s = finder.next(buf, finder.failed(buf, s), True)
        return n + 1, 0, None

    def match_at(self, buf: str, s: int) -> Any:
        """The call loop's again step for this opener (`_Again.direct`): the compiled pattern's
        match at `s` (None: no match starts there), decided exactly as `_search` decides a
        candidate at or past `c_reach` (the read it may do is recorded the same way, so the
        `regex` attempts stay disjoint, and a match is counted in `overlap`), or False when only
        the matcher may decide at `s` (no `reads`, or an earlier `regex` attempt read there). A
        match at `s` is the seeker's answer to a query at `s` and none is the end of the again
        step, so no finder is asked. The answer is not remembered: a later `first` searches
        afresh (the answers are facts of the text, so they agree)."""
        if self.reads is None or s < self.c_reach:
            return False
        self.c_reach = self._read_end(buf, s)
        m = self.c_rx.match(buf, s)
        if m is not None:
            self._found(s, m.end(), len(buf))
        return m

    def match_here(self, buf: str, s: int) -> Any:
        """`match_at` without `c_reach`: the compiled pattern's match at `s` (None: none starts
        there), counted in `overlap`. Only where another argument bounds the reads (the call
        loop's again step after a closer that always starts with a literal no run of this
        pattern can cross: `_Calls.free`)."""
        m = self.c_rx.match(buf, s)
        if m is not None:
            self._found(s, m.end(), len(buf))
        return m

    def _found(self, s: int, e: int, n: int) -> int:
        """Count the characters of the match `[s, e)` that an earlier match covered (`overlap`)."""
        reach = self.reach
        if s < reach:
            self.overlap += (e if e < reach else reach) - s
            if self.overlap > n + 64:
                raise Bail("a delimiter's matches overlap too often")
        if e > reach:
            self.reach = e
        return e

    def captures(self, buf: str) -> dict[str, str]:
        d = self.d
        names = d.group_names
        if not names:
            return {}
        got = self.ms[self.i]
        if type(got) is not list:  # a `regex` match
            return {g: got.group(g) for g in names if got.start(g) != -1}
        start = self.starts[self.i]
        slots = got if self.prog is not d.prog else _rx.capture(d.prog, buf, start, True)
        caps: dict[str, str] = {}
        for g, slot in names.items():
            s, e = slots[slot], slots[slot + 1]
            if s != -1 and e != -1:
                caps[g] = buf[s:e]
        return caps


def _any_loop(strategy: Any) -> Any:
    """A test for the leading loop characters of a strategy (of any union branch), or None."""
    loops = strategy.loops if isinstance(strategy, (LoopSearch,)) else None
    if loops is None and hasattr(strategy, "parts"):
        loops = [p.loop for p in strategy.parts if isinstance(p, LoopSearch)]
    if not loops:
        return None
    tests = list(loops)
    return lambda ch: any(t(ch) for t in tests)


# --------------------------------------------------------------------------------------------
# Plans: the seeker kind of every delimiter of a template, decided once.

_LITERAL, _SEARCH, _LOOP, _CURSOR, _RUN, _LEAD, _ANCHOR = range(7)

# -- the proof for patterns with unbounded runs ----------------------------------------------
#
# An attempt of the `regex` module's matcher at one position is cheap when every unbounded repeat
# is a run of one character class C that is *forced*: what follows it cannot start with a C
# character (so backtracking into the run fails at once, step by step) or nothing follows it. The
# attempt then costs at most the pattern's bound (its bounded parts) times the characters of the
# runs it crosses. Across attempts, no candidate start lies inside a run that another attempt
# crossed, when every character a candidate can start with is outside every such run's class: a
# character of a run is then crossed only by attempts that start within the bounded parts before
# it, a constant number. A leading loop (`\s*REST`) is the exception that its finder handles: its
# candidates are starts of maximal runs, one per run, and a failure skips the whole run.

_ALL: list[str] = []
_MEMBERS: dict[str, frozenset[str] | None] = {}
_MAX_MEMBERS = 4096
_MAX_EXPANSION = 64


def _members(src: str) -> frozenset[str] | None:
    """Every character of the one-character class `src` (None when there are more than 4096)."""
    if src in _MEMBERS:
        return _MEMBERS[src]
    if not _ALL:
        from array import array

        _ALL.append(
            array("I", range(0xD800)).tobytes().decode("utf-32-le")
            + array("I", range(0xE000, 0x110000)).tobytes().decode("utf-32-le")
        )
    out: set[str] | None = set()
    for m in regex.finditer(src, _ALL[0]):
        out.add(m.group())  # type: ignore[union-attr]
        if len(out) > _MAX_MEMBERS:  # type: ignore[arg-type]
            out = None
            break
    got = _MEMBERS[src] = frozenset(out) if out is not None else None
    return got


def _disjoint(a: str, b: str) -> bool:
    """Whether the one-character classes `a` and `b` share no character (False when unknown)."""
    for small, other in ((a, b), (b, a)):
        members = _members(small)
        if members is not None:
            rx = regex.compile(other)
            return not any(rx.fullmatch(ch) for ch in members)
    return False  # two large classes (complements of small ones) always intersect


def _atom_src(node: Node) -> str | None:
    node = _unwrap(node)
    if node.op in _rx.ATOMS:
        return _rx.atom_source(node)
    return None


def _run_class(node: Node, bounded: bool = False) -> str | None:
    """The class of an unbounded repeat of one character (`\\s*`, `[^>\\n]+`), else None; with
    `bounded`, of any repeat of one character (`[^<]{0,256}`)."""
    node = _unwrap(node)
    if node.op is _rx.Op.REP and (bounded or node.args[1] is None):
        return _atom_src(node.kids[0])
    return None


def _expand(items: list[Node], limit: int = _MAX_EXPANSION) -> list[list[Node]] | None:
    """The flat sequences a sequence can take: alternations and optional groups split into their
    choices (for the proof only; the match itself runs the original pattern). None past `limit`."""
    out: list[list[Node]] = [[]]
    for item in items:
        node = _unwrap(item)
        choices: list[list[Node]] | None = None
        if node.op is _rx.Op.ALT:
            choices = []
            for k in node.kids:
                sub = _expand(_flatten(k), limit)
                if sub is None:
                    return None
                choices.extend(sub)
        elif (
            node.op is _rx.Op.REP
            and node.args[0] == 0
            and node.args[1] == 1
            and _unwrap(node.kids[0]).op not in _rx.ATOMS
        ):
            sub = _expand(_flatten(node.kids[0]), limit)
            if sub is None:
                return None
            choices = [*sub, []]
        elif node.op is _rx.Op.CAT:
            choices = _expand(_flatten(node), limit)
            if choices is None:
                return None
        if choices is None:
            out = [x + [item] for x in out]
        else:
            out = [x + c for x in out for c in choices]
        if len(out) > limit:
            return None
    return out


def _follow_disjoint(follow: list[Node], cls: str) -> bool:
    """Whether no match of `follow` (non-empty) can start with a character of `cls`."""
    first = _First()
    if _first(follow, first) or first.anywhere or first.at0:
        return False
    if any(regex.fullmatch(cls, ch) for ch in first.chars):
        return False
    return all(_disjoint(c, cls) for c in first.classes)


def _linear_sequence(seq: list[Node], runs: list[str], looks: bool = False) -> bool:
    """Check one flat choice of a pattern body: every unbounded repeat a forced run (its class
    added to `runs`), everything else bounded, the whole bounded with each run taken once.

    With `looks` (for `_attempt_reads` only), a lookahead whose body is unbounded is admitted when
    each choice of its body is itself such a sequence (`(?!\\s*</tool_call>)`): it is tried once
    per way of what precedes it and matches once, at the cost of the text its body reads, so it
    counts as one step, as a forced run does."""
    if any(_unwrap(n).op is _rx.Op.ASSERT for n in seq):
        return False
    flat: list[Node] = []
    for i, item in enumerate(seq):
        node = _unwrap(item)
        if looks and node.op is _rx.Op.LOOK and _rx.backtrack_bound(item) is None:
            body = node.kids[0]
            if not node.args[0] or _rx._has(body, (_rx.Op.LOOK, _rx.Op.ASSERT)):
                return False
            choices = _expand(_flatten(body))
            if choices is None or not all(_linear_sequence(c, []) for c in choices):
                return False
            flat.append(_rx.Node(_rx.Op.LOOK, node.args, [_rx.Node(_rx.Op.EMPTY)]))
            continue
        cls = _run_class(item, bounded=True)
        if cls is not None:
            follow = seq[i + 1 :]
            forced = not follow or _follow_disjoint(follow, cls)
            if _unwrap(item).args[1] is None:
                if not forced:
                    return False
                runs.append(cls)  # unbounded: no candidate may start inside it
            if forced:
                # A forced run costs its length, once: count it as one step.
                flat.append(_unwrap(item).kids[0])
                continue
        if _rx.backtrack_bound(item) is None:
            return False
        flat.append(item)
    b = _rx.backtrack_bound(_rx.Node(_rx.Op.CAT, kids=flat))
    return b is not None and b <= _rx.SAFE_STEPS


def _lead_classes(strategy: Any) -> tuple[set[str], list[str]] | None:
    """The characters and classes a candidate of a non-loop strategy starts with."""
    if isinstance(strategy, PrefixSearch):
        return {strategy.prefix[0]}, []
    if isinstance(strategy, PrefixSetSearch):
        return {p[0] for p in strategy.prefixes}, []
    if isinstance(strategy, TriggerSearch):
        return set(strategy.chars), list(strategy.classes)
    if isinstance(strategy, LoopSearch):
        return _lead_classes(strategy.rest)
    if isinstance(strategy, UnionSearch):
        chars: set[str] = set()
        classes: list[str] = []
        for part in strategy.parts:
            got = _lead_classes(part)
            if got is None:
                return None
            chars |= got[0]
            classes += got[1]
        return chars, classes
    return None


def forced_linear(d: Any) -> bool:
    """Whether the pattern delimiter `d` can be searched by its finder and decided by the compiled
    pattern's `match` in linear total time (see the comment above)."""
    if d.module_re is None or d.module_re.flags & (regex.IGNORECASE | regex.MULTILINE):
        return False
    items = _flatten(d.prog.tree)
    branches = _branches(items)
    if not branches:
        return False
    runs: list[str] = []
    leads: list[tuple[set[str], list[str]]] = []
    for branch in branches:
        strategy = _sequence_strategy(branch)
        body = branch
        if isinstance(strategy, LoopSearch):
            if _run_class(branch[0]) is None:
                return False
            body = branch[1:]
            lead = _lead_classes(strategy.rest)
        else:
            lead = _lead_classes(strategy)
        if lead is None:
            return False
        leads.append(lead)
        choices = _expand(body)
        if choices is None:
            return False
        for seq in choices:
            if not _linear_sequence(seq, runs):
                return False
    for chars, classes in leads:
        for cls in dict.fromkeys(runs):
            if any(regex.fullmatch(cls, ch) for ch in chars):
                return False
            if not all(_disjoint(c, cls) for c in classes):
                return False
    return True


def _anchored_linear(d: Any) -> bool:
    """Whether `d` is `^BODY` (start of the text only) with BODY one attempt of linear cost: the
    proof of `forced_linear` for one attempt (every unbounded repeat a forced run, the rest
    bounded). Its only candidate is position 0, so one `match` there decides it (`_AnchorSeek`)."""
    if d.module_re.flags & (regex.MULTILINE | regex.IGNORECASE):
        return False
    items = _flatten(d.prog.tree)
    head = _unwrap(items[0]) if items else None
    if head is None or head.op is not _rx.Op.ASSERT or head.args[0] != "bos":
        return False
    choices = _expand(items[1:])
    if choices is None:
        return False
    runs: list[str] = []
    return all(_linear_sequence(seq, runs) for seq in choices)


#: the widest lookbehind a `regex` attempt of `_CursorSeek` reads (before the candidate, once per
#: candidate): every delimiter's lookbehinds are at most this wide (checked at load)
_MAX_BEHIND = _rx.MAX_LOOKBEHIND


def _attempt_reads(d: Any) -> list[list[tuple[Any, int]]] | None:
    """For a pattern each of whose choices `_linear_sequence` proves (one attempt costs at most the
    pattern's bound times the characters it reads; what `forced_linear` adds, that no candidate
    starts inside a run another attempt crossed, need not hold), how far an attempt can read: per
    choice, its steps `(run, 0)` (a forced unbounded run of one class: to the end of the maximal
    run, found by `run.match`), `(None, w)` (at most `w` characters), `(None, -w)` (a lookahead
    whose body reads at most `w` characters on) and `(reads, -1)` (a lookahead whose body has
    forced runs: the reads of its body, from there, without moving on). A lookbehind (at most
    `_MAX_BEHIND` characters) adds no step: it reads only before the candidate, a bounded amount
    per attempt. None for other shapes (anchors, unbounded bodies), which
    `_CursorSeek` only ever searches with the streaming matcher."""
    rx = d.module_re
    if rx is None or rx.flags & (regex.IGNORECASE | regex.MULTILINE) or d.prog.tree is None:
        return None
    choices = _expand(_flatten(d.prog.tree))
    if choices is None or not all(_linear_sequence(seq, [], looks=True) for seq in choices):
        return None
    return _reads_of(choices, rx.flags)


def _reads_of(choices: list[list[Node]], flags: int) -> list[list[tuple[Any, int]]] | None:
    """The steps of `_attempt_reads` for each proven choice."""
    out: list[list[tuple[Any, int]]] = []
    for seq in choices:
        steps: list[tuple[Any, int]] = []
        for item in seq:
            node = _unwrap(item)
            cls = _run_class(item)
            if cls is not None:
                steps.append((regex.compile(f"(?:{cls})*", flags), 0))
                continue
            if node.op is _rx.Op.LOOK:
                body = node.kids[0]
                if _rx._has(body, (_rx.Op.LOOK, _rx.Op.ASSERT)):
                    return None
                w = _rx.max_width(body)
                if not node.args[0]:  # a lookbehind (bounded when the template loaded)
                    if w is None or w > _MAX_BEHIND:  # pragma: no cover - rejected at load
                        return None
                    continue
                if w is not None:
                    steps.append((None, -w))
                    continue
                sub = _expand(_flatten(body))
                inner = _reads_of(sub, flags) if sub is not None else None
                if inner is None:
                    return None
                steps.append((inner, -1))
                continue
            w = _rx.max_width(node)
            if w is None or _rx._has(node, (_rx.Op.LOOK, _rx.Op.ASSERT)):
                return None
            if steps and steps[-1][0] is None and steps[-1][1] >= 0:
                steps[-1] = (None, steps[-1][1] + w)  # (one step for a literal, not one a character)
            else:
                steps.append((None, w))
        out.append(steps)
    return out


def reach_pattern(reads: list[list[tuple[Any, int]]]) -> Any:
    """How far an attempt at `s` with steps `reads` can read, as one compiled pattern, whose match
    at `s` always succeeds and whose furthest group end is that position (clamped to the text):
    per choice, where its steps end (a run to the end of its maximal run, a bounded step by its
    width), and each lookahead's read. Each choice, and each lookahead's read, is a group inside a
    lookahead at `s`; a run is possessive (`(?:C)*+`, its maximal run), a
    bounded step takes what is there of its width (`.{0,w}+`). A bounded step counted as its full
    width still gives an upper bound: a run's end never decreases with its start."""

    def source(reads: list[list[tuple[Any, int]]]) -> str:
        parts = []
        for steps in reads:
            seq = []
            for run, w in steps:
                if type(run) is list:
                    seq.append(f"(?={source(run)})")
                elif run is not None:
                    seq.append(run.pattern + "+")
                elif w >= 0:
                    seq.append(f"(?:.{{0,{w}}}+)")
                else:
                    seq.append(f"(?=(.{{0,{-w}}}+))")
            parts.append(f"(?=({''.join(seq)}))")
        return "".join(parts)

    return regex.compile(source(reads), regex.DOTALL)


def _kind(d: Any) -> int:
    if d.literals is not None:
        return _LITERAL
    tree = d.prog.tree
    if tree is None or d.module_re is None:
        return _CURSOR
    bound = _rx.backtrack_bound(tree)
    if bound is not None and bound <= _rx.SAFE_STEPS:
        return _SEARCH
    s = d.strategy
    if isinstance(s, AnchorSearch) and _anchored_linear(d):
        return _ANCHOR
    loop = False
    if isinstance(s, LoopSearch) and s.unbounded:
        # `C* REST` with REST bounded: its finder proposes maximal run starts only.
        items = _flatten(tree)
        if _run_class(items[0]) is not None and len(items) >= 2:
            rest = _rx.backtrack_bound(_rx.Node(_rx.Op.CAT, kids=items[1:]))
            loop = rest is not None and rest <= _rx.SAFE_STEPS
    if not loop and not forced_linear(d):
        return _CURSOR
    if type(s) in (PrefixSearch, PrefixSetSearch, TriggerSearch, UnionSearch) and not s.loops:
        # Every match starts with a lead the finder would propose, and no run of the pattern
        # can hold a lead (the proof above): one `regex` search tries the same candidates (any
        # other position fails within the lead) and finds the same leftmost match, in C.
        return _LEAD
    return _RUN if run_pattern(d) is not None else _LOOP


# -- one C search for a leading run ----------------------------------------------------------
#
# `C* REST` where no match of REST can start with a C character (`\s*<tool_call>`): the leftmost
# match at or after `q` starts at `q` or at the start of a maximal C run (a match starting inside
# a run, after a C character, extends to the left by that character), and a match at a run start
# takes the whole run (REST cannot begin inside it). So `(?:\G|(?<!C))(?:PATTERN)`, searched
# from `q`, finds the same match, in C: attempts inside a run fail at the lookbehind in one step,
# an attempt at a run start crosses the run once, and an attempt elsewhere does real work only at
# a character REST can start with, which the linear proof of the pattern (`_kind`: REST bounded,
# or `forced_linear`) keeps outside every run another attempt crosses. Linear, as `_LoopSeek`,
# without a Python finder.


def run_pattern(d: Any) -> Any:
    """The compiled `(?:\\G|(?<!C))(?:PATTERN)` of a pattern delimiter `C* REST` whose REST
    cannot start with a C character, or None (other shapes, or a source that does not compose).
    Kept on the delimiter (`Delimiter.run_rx`)."""
    if d.run_rx is not False:
        return d.run_rx
    got = None
    rx = d.module_re
    items = _flatten(d.prog.tree) if d.prog.tree is not None else []
    cls = _run_class(items[0]) if items else None
    if (
        rx is not None
        and not rx.flags & (regex.IGNORECASE | regex.MULTILINE | regex.VERBOSE)
        and cls is not None
        and len(items) >= 2
        and _follow_disjoint(items[1:], cls)
        and not d.source.startswith("(?")
    ):
        try:
            got = regex.compile(f"(?:\\G|(?<!{cls}))(?:{d.source})", rx.flags)
        except regex.error:  # pragma: no cover - a source that does not compose
            got = None
        if got is not None and got.groupindex != rx.groupindex:  # pragma: no cover
            got = None
    d.run_rx = got
    return got


def _literal_leads(d: Any) -> list[str] | None:
    """For a `C* REST` delimiter, the literals every match of REST starts with, or None when
    REST can also start with a character class (then `run_pattern`'s one search is used)."""
    s = d.strategy
    if not isinstance(s, LoopSearch):
        return None
    rest = s.rest
    if isinstance(rest, PrefixSearch):
        leads = [rest.prefix]
    elif isinstance(rest, PrefixSetSearch):
        leads = list(rest.prefixes)
    elif isinstance(rest, TriggerSearch) and not rest.classes:
        leads = list(rest.leads or [])
    else:  # unions (an anchored or lookbehind-led branch has no lead), class-led shapes
        return None
    if not leads or any(not lead for lead in leads):
        return None
    return leads


class FastWatch:
    """The one-shot view of a `WatchList`: each entry with its seeker kind."""

    __slots__ = ("entries", "kinds", "keys", "single", "index", "slots")

    def __init__(self, watch: WatchList) -> None:
        self.entries: list[Watch] = watch.entries
        self.kinds = [_kind(w.delimiter) for w in self.entries]
        self.keys = [(0 if w.is_open else 1, w.field) for w in self.entries]
        #: one delimiter only (a region's closer): no key comparisons
        self.single = len(self.entries) == 1
        self.index = 0  #: this watch list's number in its plan
        self.slots: list[int] = []  #: each entry's seeker, by number in its plan


def _factory(d: Any, kind: int) -> Any:
    """A function making a fresh seeker for delimiter `d` (everything it needs decided now)."""
    if kind == _CURSOR:
        reads = _attempt_reads(d)
        reach_rx = reach_pattern(reads) if reads else None
        return lambda: _CursorSeek(d, reads, reach_rx)
    if kind == _LITERAL:
        literals = d.strategy.literals
        return lambda: _LiteralSeek(literals)
    names = list(d.module_re.groupindex)
    if kind in (_SEARCH, _LEAD):
        rx = d.module_re
        return lambda: _SearchSeek(rx, names)
    if kind == _ANCHOR:
        rx = d.match_re  # one `match` (`_rx.match_only`: no required-string search)
        return lambda: _AnchorSeek(rx, names)
    if kind == _RUN:
        loop = _any_loop(d.strategy)
        leads = _literal_leads(d)
        if leads is not None:
            plain = d.match_re  # `match` at each run start (`_rx.match_only`)
            cls = _run_class(_flatten(d.prog.tree)[0])
            assert cls is not None  # `run_pattern` accepted this shape
            back = regex.compile(cls + "*", regex.REVERSE)

            def make_lead() -> _SearchSeek:
                sk = _LeadRunSeek(plain, names, leads, back)
                sk.loop = loop
                return sk

            return make_lead
        rx = run_pattern(d)

        def make() -> _SearchSeek:
            sk = _SearchSeek(rx, names)
            sk.loop = loop
            return sk

        return make
    strategy = d.strategy
    rx = d.match_re  # `match` at each candidate (`_rx.match_only`)
    loop = _any_loop(strategy)
    return lambda: _LoopSeek(rx, names, strategy, loop)


def _branch_runs(d: Any) -> list[Any] | None:
    """`_leading_runs(d)` when every branch of the pattern delimiter `d` (`_branches`: the leading
    alternation and optional groups split) is bounded or `C* REST` with REST bounded and unable to
    start with a C character; else None.

    One `match` attempt of such a pattern at a position costs at most the C runs it starts with
    plus a constant: a bounded branch costs at most `SAFE_STEPS`, and a `C* REST` branch crosses
    its run once (backtracking into the run fails at REST's first character, one step per
    character)."""
    rx = d.module_re
    if rx is None or rx.flags & (regex.IGNORECASE | regex.MULTILINE) or d.prog.tree is None:
        return None
    branches = _branches(_flatten(d.prog.tree))
    if not branches:
        return None
    for branch in branches:
        cls = _run_class(branch[0]) if branch else None
        body = branch[1:] if cls is not None else branch
        if cls is not None and body and not _follow_disjoint(body, cls):
            return None
        if body:
            bound = _rx.backtrack_bound(_rx.Node(_rx.Op.CAT, kids=body))
            if bound is None or bound > _rx.SAFE_STEPS:
                return None
    return _leading_runs(d)


def _at_test(d: Any, kind: int) -> Any:
    """For an again step (see `run`): a test `(buf, pos, lim) -> bool | None` of whether delimiter
    `d` has a match starting at `pos`, costing at most `lim - pos` plus a constant, or None when
    `_branch_runs` cannot prove that. `lim` is one past the end of the again step's opener's match at
    `pos`; the test answers None (undecided: the caller asks the seekers) when a leading run of
    `d` reaches `lim`. Over a parse, the opener matches of the again steps are disjoint, so the
    tests cost linear time in total."""
    if kind == _LITERAL:
        literals = d.strategy.literals
        return lambda buf, pos, lim: any(buf.startswith(lit, pos) for lit in literals)
    runs = _branch_runs(d)
    if runs is None:
        return None
    match = d.match_re.match  # (`_rx.match_only`: bounded by the attempt itself)
    head, after = _test_leads(d)

    def test(buf: str, pos: int, lim: int) -> bool | None:
        if head is not None and not buf.startswith(head, pos):
            return False  # no match starts here without one of its leads
        for run in runs:
            e = run.match(buf, pos, lim).end()
            if e >= lim:
                return None  # a leading run reaching past the opener: not bounded by it
            if after is not None and not buf.startswith(after, e):
                return False  # no lead where the rest after the run must start
        return match(buf, pos) is not None

    return test


def _test_check(d: Any, kind: int, test: Any) -> tuple[Any, tuple[str, ...] | None, Any, Any, bool]:
    """`_at_test(d, kind)` (`test`) with its first, C-speed step spelled out for the call loop,
    which runs it inline, without the test's frame: `(test, head, run, after, decided)`. `head`:
    no match starts at the position without one of these literals (False without them; with
    `decided`, a literal delimiter: True with one); else `run` and `after`: the one leading run's
    `match` and the literals one must start where that run ends (`e >= lim`: undecided, None; no
    lead there: False). What the step does not decide, `test` decides (it repeats the step)."""
    if kind == _LITERAL:
        return test, tuple(d.strategy.literals), None, None, True
    head, after = _test_leads(d)
    runs = _branch_runs(d) or []
    if head is None and after is not None and len(runs) == 1:
        return test, None, runs[0].match, after, False
    return test, head, None, None, False


def _test_leads(d: Any) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """Literal prefilters for `_at_test`'s test of pattern delimiter `d` at a position, in C
    (`str.startswith`) before its `regex` match (most again steps meet none of the other
    delimiters, qwen3_xml's `<think>` opener and `\\s*(?:<|im_end|>|...)` closer among them):
    `(head, None)` when every match starts with one of the literals `head` (`PrefixSearch`,
    `PrefixSetSearch`); `(None, after)` when every branch starts with the same unbounded run of
    one class C and the rest with one of the literals `after` (`_literal_leads`), none of which
    starts with a C character: the rest then starts exactly where the maximal C run from the
    position ends (before it is a C character, which no lead starts with; the run cannot go past
    it), so no lead there means no match; `(None, None)` otherwise."""
    s = d.strategy
    if type(s) in (PrefixSearch, PrefixSetSearch):
        heads: list[str] = list(s.leads)
        return (tuple(heads), None) if heads and all(heads) else (None, None)
    leads = _literal_leads(d)
    rx = d.module_re
    if leads is None or rx is None or d.prog.tree is None:
        return None, None
    branches = _branches(_flatten(d.prog.tree))
    classes = {_run_class(b[0]) if b else None for b in branches or []}
    if len(classes) != 1:
        return None, None
    cls = classes.pop()
    if cls is None:
        return None, None
    first = regex.compile(f"(?:{cls})", rx.flags)
    if any(first.match(lead[0]) is not None for lead in leads):
        return None, None
    return None, tuple(leads)


class _Found:
    """An again step's opener match, in the seeker interface `run` reads (`end`, `captures`)."""

    __slots__ = ("m", "names", "end")

    def __init__(self, m: Any, names: list[str], end: int) -> None:
        self.m = m
        self.names = names
        self.end = end

    def captures(self, buf: str) -> dict[str, str]:
        m = self.m
        names = self.names
        if m is None or not names:
            return {}
        return {g: m.group(g) for g in names if m.start(g) != -1}


def _all_set(d: Any, names: list[str]) -> bool:
    """Whether every match of pattern delimiter `d` sets each of its named groups `names` (and
    they are all its named groups, so its matches' `groupdict()` holds exactly those)."""
    rx = d.module_re
    return (
        bool(names)
        and rx is not None
        and set(rx.groupindex) == set(names)
        and _always_set(d.source, tuple(names))
    )


def _leading_runs(d: Any) -> list[Any]:
    """The unbounded single-class runs that branches of a pattern delimiter start with, each
    compiled as a forward `C*` (`\\s*<tool_call>`: `\\s*`)."""
    runs: dict[str, Any] = {}
    for branch in _branches(_flatten(d.prog.tree)) or []:
        cls = _run_class(branch[0]) if branch else None
        if cls is not None and cls not in runs:
            runs[cls] = regex.compile(f"(?:{cls})*")
    return list(runs.values())


#: seeker kinds whose match attempts an again step may run at any position outside their runs:
#: bounded attempts, and the patterns `forced_linear` or `run_pattern` proves (an attempt that
#: starts at no character of a run crosses each run character together with a bounded number of
#: other attempts, the proof of `forced_linear`); `_ANCHOR` never matches after position 0
_AGAIN_KINDS = (_LITERAL, _SEARCH, _LEAD, _RUN, _LOOP)


_BASE_FLAGS = regex.compile("", regex.DOTALL).flags  # what every delimiter is compiled with


def _joinable(d: Any) -> bool:
    """Whether delimiter `d`'s source can be placed inside a larger pattern with the same meaning:
    no inline flag that applies to the whole pattern, no named group (back-references are never
    accepted in delimiters, so numbered groups cannot change meaning)."""
    rx = d.module_re
    return rx is not None and rx.flags == _BASE_FLAGS and not rx.groupindex


class _Again:
    """The again step of one top-list opener: its own match at a position (`open_at`, or, for an
    opener whose attempts only its seeker's proof bounds, the seeker's answer: `seeker`) and the
    tests of every other top delimiter (`_at_test`).

    When every other top delimiter's source can join one pattern (`_joinable`), the opener and
    the tests are one `regex` match, `(?!OTHER|...)(?:OPENER)` (`joined`), after the leading runs
    of all of them are measured; `others` is then empty. The lookahead's attempts then cost at most
    those runs (measured, so disjoint from every later step's: `open_at`) plus a constant each
    (`_branch_runs`' proof), as the separate tests do."""

    __slots__ = (
        "j",
        "seeker",
        "literals",
        "match",
        "runs",
        "names",
        "others",
        "calls",
        "joined",
        "all_set",
        "direct",
        "source",
        "look_runs",
        "checks",
    )

    def __init__(self, j: int, d: Any, kind: int, others: list[Any], other_ds: list[Any]) -> None:
        self.j = j
        #: the joined pattern's source (`joined`), else None (for the call loop's `_compound`)
        self.source: str | None = None
        #: the leading runs `source`'s lookahead and opener can cross (`_compound`)
        self.look_runs: list[Any] = []
        #: `others` as the call loop runs them (`_test_check`; set by the plan)
        self.checks: list[tuple[Any, tuple[str, ...] | None, Any, Any, bool]] = []
        #: the region's facts for the call loop (`_Calls`), set by the plan when it applies
        self.calls: _Calls | None = None
        #: the opener's match comes from its own seeker (`first` at the position: linear by the
        #: seeker's proof, as every query of `run` is), not from `open_at`
        self.seeker = kind not in _AGAIN_KINDS
        #: a `_CursorSeek` opener whose attempts `_attempt_reads` bounds: the call loop asks its
        #: seeker's `match_at` at the position (its names and `all_set` read that match)
        self.direct = self.seeker and kind == _CURSOR and _attempt_reads(d) is not None
        joinable = d.module_re is not None and d.module_re.flags == _BASE_FLAGS
        if not self.seeker and joinable and all(_joinable(o) for o in other_ds):
            lookahead = "|".join(f"(?:{o.source})" for o in other_ds)
            opener = f"(?:{d.source})"
            pattern = f"(?!{lookahead}){opener}" if lookahead else opener
            self.literals = None
            self.source = pattern
            # (joined, the other delimiters' sources are alternatives of one lookahead: where two
            # of them are single negated characters, the `regex` module may merge them wrongly,
            # which each source alone, made safe at load, does not show: `_rx.module_safe`)
            self.match: Any = _rx.match_only(_rx.module_safe(pattern), regex.DOTALL).match
            runs = {r.pattern: r for x in (d, *other_ds) if x.prog.tree is not None for r in _leading_runs(x)}
            self.runs = list(runs.values())
            self.look_runs = self.runs
            self.names = list(d.module_re.groupindex)
            self.others: list[Any] = []
            self.joined = len(other_ds)  #: how many other delimiters the opener's match tests
            self.all_set = _all_set(d, self.names)
            return
        if self.direct and joinable and all(_joinable(o) for o in other_ds):
            # (for `_compound` only: this opener's own match is its seeker's, and its tests are
            # `others`; `look_runs`, the leading runs the joined pattern's lookahead can cross)
            lookahead = "|".join(f"(?:{o.source})" for o in other_ds)
            opener = f"(?:{d.source})"
            self.source = f"(?!{lookahead}){opener}" if lookahead else opener
            runs = {r.pattern: r for x in other_ds if x.prog.tree is not None for r in _leading_runs(x)}
            self.look_runs = list(runs.values())
        self.literals = d.strategy.literals if kind == _LITERAL else None
        own = kind != _LITERAL and not self.seeker  # `open_at` runs the compiled pattern
        self.match = d.match_re.match if own else None  # (`_rx.match_only`)
        self.runs = _leading_runs(d) if own else []
        self.names = list(d.module_re.groupindex) if own or self.direct else []
        self.others = others
        self.joined = 0
        #: every named group of the opener takes part in each of its matches: the captures are
        #: the match's `groupdict()` (one C call)
        self.all_set = _all_set(d, self.names)

    def open_at(self, buf: str, pos: int, run_end: list[int]) -> _Found | None:
        """`open_end` as a `_Found` (the seeker interface `run` reads), or None."""
        got = self.open_end(buf, pos, run_end)
        return None if got is None else _Found(got[1], self.names, got[0])

    def open_end(self, buf: str, pos: int, run_end: list[int]) -> tuple[int, Any] | None:
        """The opener's match at `pos` when it is non-empty, as `(end, match)` (the match None for
        a literal; `captures` reads it), else None. Its leading runs are measured first:
        `run_end[0]` is the furthest end of a run measured in this parse, and no step starts
        inside it (one attempt would cross the rest of that run again), so the measured runs are
        disjoint and the attempts cost linear time in total."""
        lits = self.literals
        if lits is not None:
            for lit in lits:  # longest first: the literal list's own match
                if buf.startswith(lit, pos):
                    return pos + len(lit), None
            return None
        if pos < run_end[0]:
            return None
        for run in self.runs:
            e = run.match(buf, pos).end()
            if e > run_end[0]:
                run_end[0] = e
        m = self.match(buf, pos)
        if m is None:
            return None
        e = m.end()
        return (e, m) if e > pos else None

    def captures(self, m: Any) -> dict[str, str]:
        """The named groups of `open_end`'s match `m` that took part (`_Found.captures`)."""
        names = self.names
        if m is None or not names:
            return {}
        if self.all_set:
            return m.groupdict()
        return {g: m.group(g) for g in names if m.start(g) != -1}


class _Calls:
    """The call loop of one again step (`_call_loop`): the region its opener opens is closed by one
    delimiter (the region's watch list is its closer alone, no close after the value), so the
    regions of a call-dense text go closer, value, again step, closer, ... with no other decision
    between them. What the loop needs of that region, decided with the plan."""

    __slots__ = (
        "field",
        "name",
        "slot",
        "quote",
        "strings",
        "close_caps",
        "lead",
        "free",
        "prefix",
        "prefix_match",
        "closer",
        "compound",
        "group",
        "apply",
    )

    def __init__(self, f: Any, fw: FastWatch) -> None:
        self.field = f
        self.name: str = f.name
        self.slot = fw.slots[0]  # the closer's seeker, by number in the plan
        #: the region's string guard: plain `"..."` strings (`_QuoteGuard`), a `StringGuard`, none
        self.quote = f.string_guard is not None and not f.string_guard and f.string_quotes == '"'
        self.strings = f.string_guard is not None and not self.quote
        #: the closer has named groups (their captures join the region's before its value)
        d = fw.entries[0].delimiter
        self.close_caps = d.module_re is None or bool(d.module_re.groupindex)
        #: `_lead_closer(d)`: the literal every match of a `_CursorSeek` closer starts with,
        #: whose first occurrence the loop decides with one `regex` match (`_call_loop`)
        self.lead = _lead_closer(d) if fw.kinds[0] == _CURSOR and not self.close_caps else None
        #: a closer searched by one `regex` search (`_SEARCH`, `_LEAD`) whose every match starts
        #: with one literal (`PrefixSearch`: Kimi K2's `<|tool_call_end|>...`): the loop finds
        #: that literal with `str.find` and runs the pattern's `match` there, the attempt the
        #: seeker's search would make at that candidate (it fails at the literal everywhere
        #: before), without the seeker's frames; when that attempt fails, the general step
        #: decides from the seeker
        strategy = d.strategy
        prefix = strategy.prefix if type(strategy) is PrefixSearch else None
        plain = fw.kinds[0] in (_SEARCH, _LEAD) and not self.close_caps
        self.prefix: str | None = prefix if plain and prefix else None
        self.prefix_match: Any = d.match_re.match if self.prefix is not None else None
        self.closer = d
        #: `_compound`: the closer's match at its lead and the again step's joined match after it,
        #: one `regex` match (set by the plan); `group`: the number of the again step's group
        self.compound: Any = None
        self.group = 0
        #: `_direct_json`: the field's compiled transform, when its value is a plain JSON body
        #: (the loop then parses it from the text itself, without a slice)
        self.apply: Any = _direct_json(f, self.prefix) if self.quote else None
        #: the again step's cursor opener is decided by `match_here`, without `c_reach` (set by
        #: the plan: `_free_opener`)
        self.free = False


def _runs_of(reads: list[list[tuple[Any, int]]]) -> list[Any]:
    """The compiled runs (`(?:C)*`) of `_attempt_reads` steps, lookahead reads included."""
    out: list[Any] = []
    for steps in reads:
        for run, _w in steps:
            if type(run) is list:
                out.extend(_runs_of(run))
            elif run is not None:
                out.append(run)
    return out


def _free_opener(d: Any, lead: str | None) -> bool:
    """Whether the call loop may decide its again step's `_CursorSeek` opener `d` at the position
    by `match_here`, without the seeker's `c_reach`, when the region's closer always starts with
    the literal `lead` (`_Calls.lead`): `_attempt_reads` proves the opener's attempts, and each
    class of the runs they read misses some character of `lead` (qwen3_xml: `\\s` and `[^>\\n]`
    against `</function>`), so no run holds a whole occurrence of it.

    Why that is linear: the loop's opener attempts start at positions `a1 < a2 < ...`, and an
    occurrence of `lead` starts in each `[ai, ai+1]` (the closer that ended the call, found at or
    after the opener's match), so attempt i+m starts past m whole occurrences after attempt i's
    start. An attempt reads bounded steps and maximal runs; a run cannot hold an occurrence, so
    to read past one the attempt needs a step boundary or a bounded step over it, of which it has
    a constant number. An attempt thus reads past a constant number of the later attempts'
    starts, every character is read by a constant number of the loop's attempts, and the seeker's
    own `regex` attempts stay disjoint among themselves (`c_reach`)."""
    if lead is None:
        return False
    reads = _attempt_reads(d)
    return reads is not None and all(run.match(lead).end() < len(lead) for run in _runs_of(reads))


def _lead_closer(d: Any) -> str | None:
    """For a `_CursorSeek` closer (qwen3_xml's lookbehind-led `</function>...`): the literal
    every one of its matches starts with (`PrefixSearch`), when `_attempt_reads` proves its
    attempts and the literal's first character is in none of the classes of the runs they read
    (none of them can then hold the start of an occurrence); else None.

    The call loop then decides the closer at the first occurrence of the literal at or after the
    body's start with the compiled pattern's `match` there (no earlier start is possible), without
    the finder or the seeker's `c_reach` bookkeeping; when that fails, the seeker answers from one
    past it. Why that is linear: those attempts start at distinct occurrences (the loop's
    queries only grow), and so do the seeker's, which are the finder's candidates, the same
    occurrences. An attempt reads a bounded lookbehind before its start, and after it bounded
    steps and maximal runs; no run holds an occurrence's start, so a run it reads lies between two
    consecutive occurrences, and to reach the gap between two occurrences an attempt crosses
    every occurrence between its start and that gap with its bounded steps. Only the attempts at
    the last few occurrences before a gap (as many as the bounded steps' total width and count
    allow, a constant of the pattern) read into it: every character is read a constant number of
    times."""
    s = d.strategy
    if type(s) is not PrefixSearch or not s.prefix:
        return None
    reads = _attempt_reads(d)
    if reads is None:
        return None
    head = s.prefix[0]
    return s.prefix if all(run.match(head).end() == 0 for run in _runs_of(reads)) else None


def _calls_for(t: Template, fw_of: dict[str, FastWatch], w: Watch) -> _Calls | None:
    """The call loop's facts for the region that top-list opener `w` opens, or None when its watch
    list is not its closer alone (then every decision in it goes through `_decide`)."""
    f = t.fields[w.field]
    fw = fw_of[w.field]
    if not fw.single or fw.entries[0].is_open or f.value_close:
        return None
    return _Calls(f, fw)


_JSON_WS = _content._JSON_WS

#: characters a JSON text may hold outside strings (tokens, the starts of numbers and literals,
#: whitespace): a closer lead starting with none of them ends every JSON value before it
_JSON_CHARS = frozenset('{}[],:"+-.0123456789 \t\n\r') | frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


def _direct_json(f: Any, lead: str | None) -> Any:
    """For the call loop (`_Calls.apply`): the compiled transform of field `f` when its value is
    `apply({**captures, "content": json_loads(body)})` (`_content.compile_processor`'s plain
    JSON call) and every closer match starts with the literal `lead`, whose first character
    cannot continue a JSON text; else None. Only for a region whose closer is refused inside
    `"..."` strings (`_Calls.quote`).

    The loop then runs `json_loads`'s scanner on the text itself at the body's start (no slice):
    the body ends at an occurrence of `lead` outside every string (the closer's quote guard), so
    a scan that does not fail stops at or before it (what it read is the body's), and a value
    that ends there, or before JSON whitespace only, is `json_loads(body)`'s. Anything else
    (leading whitespace, a failed scan, other text after the value) goes to `process` with the
    body, whose answer or error is the general one."""
    proc = f.process
    if lead is None or lead[0] in _JSON_CHARS or proc is None or not f.repeats or f.join is not None:
        return None
    _name, content, content_args, transform, each = proc._args
    if each or transform is None or not _content._plain_json(content, content_args):
        return None
    return _content.compile_transform(transform)


def _compound(again: _Again, calls: _Calls) -> tuple[Any, int] | None:
    """The closer and the next again step as one `regex` match at the closer's lead:
    `(?>CLOSER)((?:JOINED))?`, JOINED the again step's joined pattern (`(?!OTHER|...)(?:OPENER)`),
    with the number of its group; None when the shape is not the one proved here.

    Why it decides what the two matches decide: the atomic group takes CLOSER's first match at
    the position in the module's own backtracking order, which is what CLOSER's `match` there
    answers, and never gives it back; the optional group after it is the end of the pattern, so
    it holds JOINED's first match at the closer's end when there is one (what `again.match`
    answers there) and is empty otherwise (the empty choice always succeeds: nothing after it can
    make the module backtrack into the closer). Both parts see the same text at the same
    positions (lookbehinds, `^`); `\\G`, the one assertion that depends on where a match was
    started, is refused, and so are sources with inline flags or (for the closer) named groups
    (`_joinable`).

    Why the again steps need not measure their leading runs (`_Again.open_end`): every such run's
    class misses a character of the closer's lead (checked here), so a run measured at one again
    step ends before the end of the next occurrence of the lead, and every later again step is at
    the end of a closer match, which starts with an occurrence of the lead after that step: no
    again step can start inside a run measured earlier. The loop measures the runs of the last
    again step it took or tried when it leaves (`run_end` then holds what measuring at every step
    gives: the runs of the last step reach furthest), for the general step's later again steps.

    The same holds for a `_CursorSeek` closer whose matches start with the literal `calls.lead`
    (`_lead_closer`) and a `_CursorSeek` opener the loop decides by `match_here` (`calls.free`),
    as qwen3_xml's: JOINED is then the opener behind the other top delimiters' lookahead
    (`_Again.source`, when every source joins), which decides what the tests (`others`) decide,
    whether or not their leading runs reach past the opener's match: that bound is replaced by
    the lead, which no run of the lookahead can cross (checked here), so what the lookahead reads
    at one again step lies before the next one, and after the last one a loop takes. The closer's
    and the opener's reads are their `_lead_closer` and `_free_opener` proofs' (the same
    attempts, at the same positions), and the loop counts both matches in their seekers'
    `overlap` as `_lead_closer_at` and `match_here` do. Where the closer fails at the lead's first
    occurrence, the loop asks `_lead_closer_at` (the seeker then answers from one past it)."""
    d = calls.closer
    src = again.source
    if calls.prefix is not None:
        lead = calls.prefix
        if again.others:
            return None
    elif calls.lead is not None and calls.free:
        lead = calls.lead
    else:
        return None
    if src is None or not _joinable(d) or "\\G" in d.source or "\\G" in src:
        return None
    if any(run.match(lead).end() >= len(lead) for run in again.look_runs):
        return None
    pattern = _rx.module_safe(f"(?>{d.source})((?:{src}))?")
    return _rx.match_only(pattern, regex.DOTALL).match, d.module_re.groups + 1


def _measure(buf: str, pos: int, runs: list[Any], run_end: list[int]) -> None:
    """Measure the again step's leading runs at `pos` into `run_end` (`_Again.open_end`)."""
    for run in runs:
        e = run.match(buf, pos).end()
        if e > run_end[0]:
            run_end[0] = e


def _call_loop(
    parser: Any,
    buf: str,
    again: _Again,
    opener: Any,
    sk: Any,
    pos: int,
    caps: dict,
    run_end: list[int],
    append: Any,
    kept: list[Any] | None = None,
) -> tuple[bool, int, dict, int, BaseException | None]:
    """From the start of the body of a region that `again`'s opener opened (`pos`): close it at its
    closer's first match and take the again step, as long as both are the plain case; that is
    `run`'s loop specialised to this sequence (the same decisions, from the seekers or, for a
    literal or one-lead closer, from the same searches done here (`_closer_at`); the same values
    and events in the same order: with `append`, each call's `region_chunk`, `region_close` or
    `region_malformed`, and the next `region_open`), without its per-iteration routing.

    Returns `(inside, pos, caps, zw, error)`. `inside`: stopped in the region, whose body starts at
    `pos` (its closer is not the plain case: refused, missing); else stopped after a close, at
    `pos`, where the again step did not apply. In both cases `run`'s loop takes the same decision
    again from its general path, which gives the same answer (the seekers remember theirs). `error`:
    the first malformed region's error (its field is added to the parser's malformed set).

    `kept` (a list: the region is `tool_calls` and the consumer takes calls whole, `run`'s `kept`):
    a call region's chunks are not appended, and a region that closes with a value is appended to
    `kept` as the record `(value, start, end, body_start, opening)` instead of its close event,
    `opening` being its open `(start, end, captures)` (`open_event`), or None for the loop's first
    region, whose open event `run` appended. An open is appended as an event only when the loop
    stops inside its region or the region is malformed. (`kept` is usually the events list
    itself: the records sit in order among the events.)"""
    calls = again.calls
    assert calls is not None
    n = len(buf)
    f = calls.field
    quote = calls.quote
    strings = calls.strings
    close_caps = calls.close_caps
    value_of = parser._value
    checks = again.checks  # (`again.others`, the call loop's form)
    own = not again.seeker
    first_error: BaseException | None = None
    name = calls.name
    dirty = f.dirty
    emit_from = parser._emit_from
    # A repeating field's value joins its list (`ResponseParser._value` without its frames: the
    # compiled value path, the tools' coercion, the append); other fields go through `_value`.
    process = f.process.fn if f.process is not None and f.repeats and f.join is None else None
    tools = parser._tools
    output = parser._output
    # A one-literal closer is found with `str.find` itself, a one-lead `C* REST` closer
    # (`_LeadRunSeek`) with its first lead's candidate: the seeker's answer without its memory
    # (each search starts past the previous match, so they never overlap); a lead where the
    # pattern fails goes to the seeker, which tries the next ones.
    lit = sk.literals[0] if type(sk) is _LiteralSeek and len(sk.literals) == 1 else None
    lead = sk.leads[0] if type(sk) is _LeadRunSeek and len(sk.leads) == 1 and not close_caps else None
    # A `_CursorSeek` closer whose every match starts with the literal `clead` (`_lead_closer`:
    # why this is linear): its leftmost match at or after `pos` can start only at an occurrence
    # of `clead`, so the first occurrence is decided directly, by the pattern's `match` there
    # (counted in the seeker's `overlap` as its own matches are); when it fails there, the seeker
    # answers from one past it. No occurrence: no match.
    clead = calls.lead
    # A closer searched by one `regex` search whose every match starts with one literal
    # (`_Calls.prefix`): that literal's first occurrence and the pattern's `match` there.
    prefix_match = calls.prefix_match
    if prefix_match is not None:
        lead = calls.prefix
    # the again step's own pattern match and leading runs (`_Again.open_end`; None: a literal
    # opener, or one its seeker decides)
    own_match = again.match if own and again.literals is None else None
    own_runs = again.runs
    names = again.names
    all_set = again.all_set
    direct = again.direct
    free = calls.free
    # The closer and the again step as one match at the closer's lead (`_compound`, which proves
    # that its answers are the two matches' and why the again steps' runs need no measuring):
    # `cm`, the last one, its again step's group `group` (-1 start: the again step did not
    # match); `unmeasured`, the last again step taken from it without measuring its runs.
    compound = calls.compound
    group = calls.group
    cstart = clead if clead is not None else lead  # (the closer's lead, for `compound`)
    cm: Any = None
    unmeasured = -1
    # a plain JSON value parsed from the text itself (`_direct_json`): the transform
    apply = calls.apply if process is not None else None
    scan = _content._JSON_SCAN
    zw = -1
    # the region's open `(start, end, captures)`, not appended as an event (with `kept`)
    opening: tuple[int, int, dict] | None = None
    while True:
        # -- the closer: its first match, unless refused (the general path decides those) --------
        if compound is not None:
            s = buf.find(cstart, pos)  # type: ignore[arg-type]
            cm = compound(buf, s) if s >= 0 else None
            if cm is not None:
                end = cm.start(group)
                if end < 0:
                    end = cm.end()
                if clead is not None:
                    sk._found(s, end, n)  # (as `_lead_closer_at` counts its direct match)
            elif clead is None or s < 0:
                s = -1  # (no lead, or the closer fails at its first one: `_closer_at`'s -1)
            else:
                # a cursor closer that fails at its lead's first occurrence: the seeker answers
                s, end = _lead_closer_at(buf, pos, clead, sk)
                if s >= n or s == end == zw:
                    s = -1
        elif lit is not None or lead is not None:
            s, end = _closer_at(buf, pos, lit, lead, sk, prefix_match)
        elif clead is not None:
            s, end = _lead_closer_at(buf, pos, clead, sk)
            if s >= n or s == end == zw:
                s = -1
        else:
            s = sk.first(buf, pos)
            end = sk.end
            if s >= n or s == end == zw:
                s = -1
        if s >= 0:
            if quote:
                # (`_QuoteGuard(pos).inside(buf, s)`: `_outside_end`, its usual case inline)
                if buf.find("\\", pos, s) < 0:
                    if buf.count('"', pos, s) & 1:
                        s = -1
                elif _outside_end(buf, pos, s) != s:
                    s = -1
            elif strings and StringGuard(pos, f.string_guard, f.string_quotes, False).inside(buf, s):
                s = -1
        if s < 0:
            if opening is not None:
                append(open_event(name, opening))
            if unmeasured >= 0:
                _measure(buf, unmeasured, own_runs, run_end)
            return True, pos, caps, zw, first_error
        if close_caps:
            new_caps = sk.captures(buf)
            if new_caps:
                caps.update(new_caps)
        if append is not None and kept is None:
            a = pos if pos >= emit_from else emit_from
            if a < s:
                append({"type": "region_chunk", "field": name, "text": buf[a:s], "dirty": dirty})
        try:
            values = output.get(name) if process is not None else False
            if values is None or isinstance(values, list):
                value = None
                if apply is not None and pos < s and buf[pos] not in _JSON_WS:
                    # (`_direct_json`: `json_loads(body)` from the text itself, else `process`)
                    try:
                        parsed, stop = scan(buf, pos)
                    except (StopIteration, ValueError, RecursionError):
                        stop = s + 1
                    if stop == s or (stop < s and not buf[stop:s].strip(_JSON_WS)):
                        value = apply({**caps, "content": parsed})
                if value is None:
                    value = process(buf[pos:s], caps)  # type: ignore[misc]
                if tools:
                    value = (
                        coerce_call(value, tools) if type(value) is dict else coerce_tool_calls(value, tools)
                    )
                if values is None:
                    output[name] = [value]
                else:
                    values.append(value)
            else:
                parser._captures = caps
                value = value_of(f, buf[pos:s])
        except _MALFORMED as e:
            parser._malformed.add(name)
            if opening is not None:
                append(open_event(name, opening))
                opening = None
            if append is None:
                if first_error is None:
                    first_error = e
            else:
                append(
                    {
                        "type": "region_malformed",
                        "field": name,
                        "start": s,
                        "end": end,
                        "error": e,
                        "body_start": pos,
                        "body_end": s,
                    }
                )
        else:
            if kept is not None:
                kept.append((value, s, end, pos, opening))
                opening = None
            elif append is not None:
                append(
                    {
                        "type": "region_close",
                        "field": name,
                        "value": value,
                        "start": s,
                        "end": end,
                        "complete": True,
                        "body_start": pos,
                        "body_end": s,
                    }
                )
        pos = end
        zw = s if s == end else -1
        # -- the again step (see `run`) ------------------------------------------------------
        if pos >= n:
            if unmeasured >= 0:
                _measure(buf, unmeasured, own_runs, run_end)
            return False, pos, {}, zw, first_error
        if cm is not None:
            # (the again step's joined match, taken by `compound` at the closer's lead)
            if cm.start(group) < 0 or pos < run_end[0]:
                _measure(buf, pos, own_runs, run_end)
                return False, pos, {}, zw, first_error
            found_end = cm.end()
            if clead is not None:
                opener._found(pos, found_end, n)  # (as `match_here` counts its match)
            if found_end <= pos:
                _measure(buf, pos, own_runs, run_end)
                return False, pos, {}, zw, first_error
            m = cm
            unmeasured = pos
        elif own_match is not None:
            # (`again.open_end` for a pattern opener, inline: its leading runs measured first)
            if pos < run_end[0]:
                return False, pos, {}, zw, first_error
            for run in own_runs:
                run_e = run.match(buf, pos).end()
                if run_e > run_end[0]:
                    run_end[0] = run_e
            m = own_match(buf, pos)
            if m is None or (found_end := m.end()) <= pos:
                return False, pos, {}, zw, first_error
        elif own:
            got = again.open_end(buf, pos, run_end)
            if got is None:
                return False, pos, {}, zw, first_error
            found_end, m = got
        elif free:
            m = opener.match_here(buf, pos)
            if m is None or m.end() <= pos:
                return False, pos, {}, zw, first_error
            found_end = m.end()
        elif direct and (m := opener.match_at(buf, pos)) is not False:
            # (the seeker's own decision at the position: no other start can be the answer)
            if m is None or m.end() <= pos:
                return False, pos, {}, zw, first_error
            found_end = m.end()
        else:
            if opener.first(buf, pos) != pos or opener.end <= pos:
                return False, pos, {}, zw, first_error
            found_end, m = opener.end, None
        lim = found_end + 1
        for test, head, run, after, decided in checks if cm is None else ():
            # (`test(buf, pos, lim) is not False`, its first step inline: `_test_check`)
            if head is not None:
                if not buf.startswith(head, pos):
                    continue
                if decided:
                    return False, pos, {}, zw, first_error
            elif run is not None:
                stop = run(buf, pos, lim).end()
                if stop >= lim:
                    return False, pos, {}, zw, first_error
                if not buf.startswith(after, stop):
                    continue
            if test(buf, pos, lim) is not False:
                return False, pos, {}, zw, first_error
        if own or m is not None:
            # (`again.captures(m)`, inline)
            caps = {} if m is None or not names else m.groupdict() if all_set else again.captures(m)
        else:
            caps = opener.captures(buf)
        if kept is not None:
            # (the captures are copied now only when the closer's captures may join them later)
            opening = (pos, found_end, dict(caps) if close_caps else caps)
        elif append is not None:
            append(
                {"type": "region_open", "field": name, "start": pos, "end": found_end, "captures": dict(caps)}
            )
        pos = found_end
        zw = -1


def open_event(name: str, opening: tuple[int, int, dict]) -> dict[str, Any]:
    """The `region_open` event of a region of field `name` that the call loop opened without an
    event (`opening`: its start, end and captures; see `_call_loop`'s `kept`)."""
    start, end, caps = opening
    return {"type": "region_open", "field": name, "start": start, "end": end, "captures": dict(caps)}


def _closer_at(
    buf: str, pos: int, lit: str | None, lead: str | None, sk: Any, prefix_match: Any = None
) -> tuple[int, int]:
    """`_call_loop`'s own closer search from `pos`: the first occurrence of the literal `lit`, or
    the match of `_LeadRunSeek` `sk` at its first `lead` (the run before the lead, the pattern
    there), or, with `prefix_match` (`_Calls.prefix_match`: every match starts with the literal
    `lead`), that `match` at the first `lead`; `(start, end)`, or `(-1, read)` when that is not
    the answer (no lead, or the pattern fails at the first one: the seeker then decides), `read`
    the end of the text searched."""
    if lit is not None:
        s = buf.find(lit, pos)
        return (s, s + len(lit)) if s >= 0 else (-1, len(buf))
    p = buf.find(lead, pos)  # type: ignore[arg-type]
    if p < 0:
        return -1, len(buf)
    if prefix_match is not None:
        m = prefix_match(buf, p)
        return (p, m.end()) if m is not None else (-1, p + len(lead))  # type: ignore[arg-type]
    s = sk.back.match(buf, pos, p).start()
    m = sk.rx.match(buf, s)
    return (s, m.end()) if m is not None else (-1, p + len(lead))  # type: ignore[arg-type]


def _lead_closer_at(buf: str, pos: int, lead: str, sk: Any) -> tuple[int, int]:
    """`_call_loop`'s closer from `pos` for a `_CursorSeek` `sk` whose every match starts with the
    literal `lead` (`_lead_closer`): the pattern's `match` at the first occurrence of `lead` (no
    match can start earlier), or, when it fails there, the seeker's answer from one past it;
    `(start, end)`, the start `len(buf) + 1` when there is no match (no occurrence: `-1`)."""
    s = buf.find(lead, pos)
    if s < 0:
        return -1, len(buf)
    m = sk.c_rx.match(buf, s)
    if m is not None:
        return s, sk._found(s, m.end(), len(buf))  # (counted as the seeker's own matches)
    s = sk.first(buf, s + 1)
    if sk.q0 > pos:
        # No match starts from `pos` up to the lead where it failed either, so the seeker's
        # remembered answers hold from `pos` on: when the loop leaves this region to the general
        # step, its query at `pos` is answered from memory, not by a search that goes back (the
        # queries of a `_CursorSeek` only grow; see "Theory of operation").
        sk.q0 = pos
    return s, sk.end


class Plan:
    """The `FastWatch` of every watch list of a template, and whether the one-shot path applies."""

    __slots__ = ("top", "by_field", "watches", "factories", "fws", "again", "required")

    def __init__(self, t: Template) -> None:
        self.top = FastWatch(t.watch)
        #: some field is `optional: false` (else `parse` has no required field to check)
        self.required = any(not f.optional for f in t.fields.values())
        #: the watch list of each explicit field (the implicit field's region watches `top`)
        self.by_field = {
            name: FastWatch(f.watch) if f.watch is not t.watch else self.top for name, f in t.fields.items()
        }
        #: every `FastWatch`, by `id` of its `WatchList`
        self.watches = {id(t.watch): self.top}
        for name, f in t.fields.items():
            self.watches.setdefault(id(f.watch), self.by_field[name])
        #: the seeker factory of every distinct delimiter (a delimiter watched in two lists has
        #: one seeker per parse: what it learned holds in both)
        self.factories: list[Any] = []
        self.fws = list(self.watches.values())
        #: per entry of the top list: the tests of every other entry (`_at_test`), when all have
        #: one, for the again step of `run` after a region that entry opened; else None
        self.again: list[_Again | None] = []
        top = self.top
        tests = [_at_test(w.delimiter, k) for w, k in zip(top.entries, top.kinds)]
        for j, (w, k) in enumerate(zip(top.entries, top.kinds)):
            others = [t for i, t in enumerate(tests) if i != j]
            # (only for a field that takes several regions: the again step is a bet on the same
            # opener right after its region, which a field written once, as reasoning, loses,
            # and every lost bet is a match per top delimiter before `_decide` asks anyway)
            opens = t.fields[w.field] if w.is_open else None
            ok = (
                opens is not None
                and (opens.repeats or opens.join is not None)
                and all(t is not None for t in others)
            )
            other_ds = [x.delimiter for i, x in enumerate(top.entries) if i != j]
            ag = _Again(j, w.delimiter, k, others, other_ds) if ok else None
            if ag is not None and ag.others:
                ag.checks = [
                    _test_check(x.delimiter, kx, tests[i])
                    for i, (x, kx) in enumerate(zip(top.entries, top.kinds))
                    if i != j
                ]
            self.again.append(ag)
        slot_of: dict[int, int] = {}
        for i, fw in enumerate(self.fws):
            fw.index = i
            for w, k in zip(fw.entries, fw.kinds):
                d = w.delimiter
                if id(d) not in slot_of:
                    slot_of[id(d)] = len(self.factories)
                    self.factories.append(_factory(d, k))
                fw.slots.append(slot_of[id(d)])
        for ag in self.again:
            if ag is not None:
                ag.calls = calls = _calls_for(t, self.by_field, top.entries[ag.j])
                if calls is not None and ag.direct:
                    calls.free = _free_opener(top.entries[ag.j].delimiter, calls.lead)
                got = _compound(ag, calls) if calls is not None else None
                if got is not None:
                    calls.compound, calls.group = got  # type: ignore[union-attr]


_PLANS: weakref.WeakKeyDictionary[Template, Plan] = weakref.WeakKeyDictionary()


def plan_for(t: Template) -> Plan:
    """The template's one-shot plan (built on first use, then cached with the template)."""
    p = _PLANS.get(t)
    if p is None:
        p = _PLANS[t] = Plan(t)
    return p


# --------------------------------------------------------------------------------------------
# The decision


# Text outside JSON strings, possessively (no backtracking): it stops right before the opening
# quote of a string that is not closed before the end of the searched range.
_OUTSIDE_STRINGS = regex.compile(r'(?:[^"]++|"(?:[^"\\]++|\\.)*+")*+', regex.DOTALL)


class _QuoteGuard:
    """`StringGuard.inside` for `"..."` strings with backslash escapes only (no `string_delims`,
    no `close_after_value`): one possessive C match from the last position known to be outside
    a string, so asking in increasing order is linear, as for `StringGuard`."""

    __slots__ = ("start", "i")
    value_close = False

    def __init__(self, start: int) -> None:
        self.start = start
        self.i = start  # a position outside every string of the body

    def inside(self, buf: str, p: int) -> bool:
        e = self.i = _outside_end(buf, self.i if self.i <= p else self.start, p)
        return e != p


def _outside_end(buf: str, i: int, p: int) -> int:
    """From `i`, outside every `"..."` string, how far the text up to `p` stays outside strings:
    `p` when `p` is outside, else where the string holding `p` opens."""
    if buf.find("\\", i, p) < 0:
        # no escapes: the quotes pair up in order, so `p` is inside a string exactly when an
        # odd number of them lies before it, the last one opening that string (C calls; the
        # possessive match below is ~2 us on a small call object)
        return buf.rfind('"', i, p) if buf.count('"', i, p) & 1 else p
    m = _OUTSIDE_STRINGS.match(buf, i, p)
    return m.end() if m is not None else i


def _decide(
    fw: FastWatch, seekers: list[Any], buf: str, q: int, guard: Any, zw: int
) -> tuple[int, int, int, Any]:
    """`Scanner.decide` at the end of the text, from seekers: `(j, start, end, seeker)` to commit
    entry `j` of `fw` (`j == -1`: the close after the value of a `close_after_value` region), or
    `j == -2` to hold (route the rest of the text and close)."""
    n = len(buf)
    if fw.single and (guard is None or not guard.value_close):
        # one delimiter (a region's closer): its first match that is not refused
        sk = seekers[0]
        s = sk.first(buf, q)
        while s < n:
            if s == sk.end == zw:
                s = sk.first(buf, s + 1)
                continue
            if guard is not None and guard.inside(buf, s):
                loop = sk.loop
                if loop is not None and loop(buf[s]):
                    raise Bail("a refused match inside a loop run")
                s = sk.first(buf, s + 1)
                continue
            return 0, s, sk.end, sk
        return -2, n + 1, 0, None
    best = n + 1
    bkey: tuple | None = None
    bj = -2
    bend = 0
    bsk: Any = None
    if guard is not None and guard.value_close and fw.entries:
        found = guard.value_close_at(buf, True)
        if found is not None and found[1] < n:
            best = bend = found[1]
            bkey = (0, 1, fw.entries[0].field)
            bj = -1
    keys = fw.keys
    for j, sk in enumerate(seekers):
        s = sk.first(buf, q)
        while s <= best and s < n:
            if s == sk.end == zw:
                s = sk.first(buf, s + 1)  # no second zero-width match at the same place
                continue
            if guard is not None and guard.inside(buf, s):
                loop = sk.loop
                if loop is not None and loop(buf[s]):
                    raise Bail("a refused match inside a loop run")
                s = sk.first(buf, s + 1)
                continue
            break
        if s >= n or s > best:
            continue
        if s < best:  # the keys are compared only on a tie of starts
            best, bkey, bj, bend, bsk = s, None, j, sk.end, sk
            continue
        if bkey is None:
            bkey = (best - bend, *keys[bj])
        key = (s - sk.end, *keys[j])
        if key < bkey:
            best, bkey, bj, bend, bsk = s, key, j, sk.end, sk
    return bj, best, bend, bsk


# --------------------------------------------------------------------------------------------
# The one-shot parse


#: How many one-shot parses fell back to the streaming scanner (`Bail`); read by tests.
BAILS = [0]

_MALFORMED = (KeyError, TypeError, ValueError)


def run(
    parser: Any, text: str, events: list[Any] | None, kept: list[Any] | None = None
) -> BaseException | None:
    """Append the rest of the output `text` to a `ResponseParser` that has been fed nothing and end
    the stream with C-searched decisions: `ResponseParser._process(eos=True)` with `_decide` as
    its scanner (the one-chunk case of the streaming parser, so the same message). The events of
    `_end(cut_off=False)` are appended to `events` (values uncopied); with `events=None` none are
    built and the first error of a malformed region is returned instead (what `parse_response`
    raises). Raises `Bail` when the fast path gives up (the parser is then unusable).

    `kept` (a list, with events; for `parse_message` with calls sent complete): the call loop of
    a `tool_calls` region appends to `kept` a record (a tuple) per call region that closes with a
    value, in place of its events, and appends no chunk event (see `_call_loop`): for a consumer
    whose calls' chunks make nothing. With `kept` the events list itself, the records sit in order
    among the events."""
    t = parser._t
    plan = plan_for(t)
    if parser._finalized:
        raise RuntimeError("ResponseParser already finalized")
    buf = parser._buf + text
    parser._buf = buf
    n = len(buf)
    fields = t.fields
    implicit = t.implicit
    implicit_dirty = implicit is not None and fields[implicit].dirty
    all_seekers = [make() for make in plan.factories]
    lists: list[Any] = [None] * len(plan.fws)
    top = plan.top
    by_field = plan.by_field
    value_of = parser._value
    malformed = parser._malformed
    emit_from = parser._emit_from
    pos = parser._pos
    cur = parser._current
    opened = parser._opened
    body_start = parser._body_start
    caps = parser._captures
    zw = parser._zw
    dirty = parser._dirty
    first_error: BaseException | None = None
    append = events.append if events is not None else None
    agains = plan.again
    again: _Again | None = None  # after a region a top opener opened: that opener's again step
    run_end = [0]  # the furthest run the again steps measured (`_Again.open_at`)

    while True:
        explicit = cur is not None and cur != implicit
        fw = by_field[cur] if explicit else top
        seekers = lists[fw.index]
        if seekers is None:
            seekers = lists[fw.index] = [all_seekers[i] for i in fw.slots]
        guard: Any = None
        if explicit:
            f = fields[cur]
            if f.string_guard is not None:
                if not f.string_guard and f.string_quotes == '"' and not f.value_close:
                    guard = _QuoteGuard(body_start)
                else:
                    guard = StringGuard(body_start, f.string_guard, f.string_quotes, f.value_close)
        j = -3
        if again is not None and fw is top and pos < n:
            # The again step: right after a region that a top opener opened (the next call of a
            # call-dense text), that opener matching here with no other top delimiter matching
            # here is the decision `_decide` would take (its leftmost match is here, no other
            # can start earlier, none ties), so the seekers are not asked.
            found: Any
            if again.seeker:
                found = seekers[again.j]
                if found.first(buf, pos) != pos or found.end <= pos:
                    found = None
            else:
                found = again.open_at(buf, pos, run_end)
            if found is not None:
                lim = found.end + 1
                for test in again.others:
                    if test(buf, pos, lim) is not False:
                        break
                else:
                    j, start, end, sk = again.j, pos, found.end, found
        if j == -3:
            if pos < n:
                j, start, end, sk = _decide(fw, seekers, buf, pos, guard, zw)
            else:
                j = -2  # (what `_decide` answers at the end: a match there is never taken)
        if j == -2:  # nothing more: route the rest and close
            start = end = n
        # -- route buf[pos:start] ----------------------------------------------------------
        if start > pos and cur is not None:
            a = pos
            if not opened:
                if append is not None:
                    append({"type": "region_open", "field": cur, "start": a, "end": a})
                opened = True
                body_start = a
            if append is not None:
                if a < emit_from:
                    a = emit_from
                if a < start:
                    append({"type": "region_chunk", "field": cur, "text": buf[a:start], "dirty": dirty})
        pos = end
        if j == -2:
            complete = cur is None or fields[cur].closer is None
            close_at = close_end = n
        else:
            zw = start if start == end else -1
            is_open = j >= 0 and fw.entries[j].is_open
            if not is_open:
                new_caps = sk.captures(buf) if sk is not None else {}
                if new_caps:
                    caps.update(new_caps)
            complete = True
            close_at, close_end = start, (start if is_open else end)
        # -- close the current region ----------------------------------------------------------
        if cur is not None and opened:
            f = fields[cur]
            parser._captures = caps  # `_value` reads the region's captures from the parser
            try:
                value = value_of(f, buf[body_start:close_at])
            except _MALFORMED as e:
                malformed.add(cur)
                if append is not None:
                    append(
                        {
                            "type": "region_malformed",
                            "field": cur,
                            "start": close_at,
                            "end": close_end,
                            "error": e,
                            "body_start": body_start,
                            "body_end": close_at,
                        }
                    )
                elif first_error is None:
                    first_error = e
            else:
                if append is not None:
                    append(
                        {
                            "type": "region_close",
                            "field": cur,
                            "value": value,
                            "start": close_at,
                            "end": close_end,
                            "complete": complete,
                            "body_start": body_start,
                            "body_end": close_at,
                        }
                    )
        cur = implicit
        dirty = implicit_dirty
        caps = {}
        opened = False
        if j == -2:
            break
        if fw is top:
            again = agains[j] if is_open else None
        if is_open:
            w = fw.entries[j]
            cur = w.field
            dirty = fields[cur].dirty
            caps = sk.captures(buf)
            body_start = end
            opened = True
            if append is not None:
                append(
                    {"type": "region_open", "field": cur, "start": start, "end": end, "captures": dict(caps)}
                )
            if fw is top and again is not None and again.calls is not None and end > start:
                # a call-dense run: the next regions go through the call loop until it meets
                # a decision that is not the plain case, which the next iteration takes (from
                # the first call of a run, whether the again step or `_decide` opened it; a
                # non-empty open leaves no zero-width commit for the loop to refuse)
                inside, pos, caps, zw, error = _call_loop(
                    parser,
                    buf,
                    again,
                    seekers[again.j],
                    all_seekers[again.calls.slot],
                    pos,
                    caps,
                    run_end,
                    append,
                    kept if append is not None and cur == "tool_calls" else None,
                )
                if error is not None and first_error is None:
                    first_error = error
                if inside:
                    body_start = pos
                else:
                    cur = implicit
                    dirty = implicit_dirty
                    opened = False
                    # the loop's own again step did not apply here (or the text ended): the
                    # general one would only repeat it before `_decide`
                    again = None
    parser._pos = pos
    parser._current = cur
    parser._opened = opened
    parser._body_start = body_start
    parser._captures = caps
    parser._zw = zw
    parser._dirty = dirty
    parser._scanner = None
    return first_error


def parse_events(
    text: str, response_template: Any, prefix: str | None, tools: Any, *, fast: bool = True
) -> tuple[Any, list[Any]]:
    """Parse a complete text: `(parser, events)`, the events of the prefix and of the end of the
    stream, exactly as the streaming parser gives them when the text is fed at once and finalized
    (the parser is ready for `_check_required` and `_finish`). Event values are not copied.

    A parse the fast path gives up on (`Bail`) takes the streaming machine at the end of the
    text (`stream_end`)."""
    parser, text = _start(text, response_template, prefix, tools)
    initial = parser.initial_events
    if fast:
        events = list(initial)
        try:
            run(parser, text, events)
        except Bail:
            BAILS[0] += 1
            return parse_events(text, response_template, prefix, tools, fast=False)
        return parser, events
    return parser, initial + stream_end(parser, text)


def _start(text: Any, response_template: Any, prefix: str | None, tools: Any) -> tuple[Any, str]:
    """A `ResponseParser` for a one-shot parse (values uncopied) and the text, checked to be a str."""
    parser = _parser.ResponseParser(response_template, prefix=prefix, tools=tools)
    if type(text) is not str:
        if not isinstance(text, str):
            raise TypeError(f"parse_response() takes a str, got {type(text).__name__}")
        text = str(text)
    parser._copy_values = False
    return parser, text


def stream_end(parser: Any, text: str) -> list[Any]:
    """The streaming machine at the end of the text: append the rest of the output `text` to a
    `ResponseParser` that has been fed nothing and end the stream (no cut-off report); its events
    (the path of a `Bail`)."""
    parser._buf += text
    return parser._end(cut_off=False)


def parse(text: str, response_template: Any, prefix: str | None, tools: Any) -> dict:
    """`parse_response`: the message, or the exception the streaming parse's events give (the
    first malformed region's error, then `RequiredFieldsMissing` with the events)."""
    parser, text = _start(text, response_template, prefix, tools)
    for e in parser.initial_events:
        if e["type"] == "region_malformed":
            raise e["error"]
    try:
        error = run(parser, text, None)
    except Bail:
        BAILS[0] += 1
    else:
        if error is not None:
            raise error
        if not plan_for(parser._t).required:
            return parser._finish()
        try:
            parser._check_required([])
        except RequiredFieldsMissing:
            pass  # the exception carries the events: build them (a rare path)
        else:
            return parser._finish()
    parser, events = parse_events(text, response_template, prefix, tools, fast=False)
    for e in events:
        if e["type"] == "region_malformed":
            raise e["error"]
    parser._check_required(events)
    return parser._finish()
