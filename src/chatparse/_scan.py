"""Delimiters and the multi-delimiter scanner: where the next delimiter is, and what must be held.

Theory of operation
-------------------
For the current region the parser watches a list of delimiters (the closer of an explicit region,
or every opener plus the implicit field's closer). The one-shot parse commits, among all watched
delimiters, the match with the smallest key `(start, -length, opener-before-closer, field name)`,
where each delimiter's match is its leftmost match with the `regex` module's priority semantics.
While streaming, a match may be committed only when that choice is already certain, and text may
be released only before the earliest position whose fate is still open.

The scanner answers each call with a typed decision: `Hold(at)` (the text before `at` is final
for this region; everything from `at` on is held) or `Commit(watch, start, end, captures)`.

Every delimiter has a *search strategy* (one class per delimiter shape, behind one interface:
`Strategy.finder()` makes the per-scan `Finder` that proposes candidate start positions in C
speed): `LiteralSearch` (a literal list: decided by `str.find` alone, no attempts), `PrefixSearch`
(a pattern that starts with a literal), `PrefixSetSearch` (with one of several literals: one trie
search for all), `TriggerSearch` (a pattern that starts with a character
class), `LoopSearch` (`C* REST`: the start of the `C` run before a place where REST can start),
`AnchorSearch` (only position 0, for `^`), `AfterSearch` (a branch led by a lookbehind: the
positions right after a character its text can end with), `EverySearch` (every position) and
`UnionSearch` (the branches of a leading alternation or optional group, each with its own
strategy; branches with the same literal prefix share one finder). Lookarounds are zero-width:
they never count as the literal lead of a match, except that where what a branch consumes begins
with no literal, a leading lookahead's literal (`(?=<\\|channel\\|>)[^<]{0,128}<\\|channel\\|>`,
`(?=<tool_call>)`), which the text at every match start begins with, leads its search (a
`PrefixSearch`: no candidate at every `<`). At a candidate,
a `Cursor` runs an exact `_rx.Attempt`, which answers fail / match / live; after a failure the
finder skips every start that the failure decided too (a whole `C` run for `LoopSearch`). A cursor
reports its first position that is not a certain failure. The scanner combines the cursors: the
earliest reported position E wins; if any cursor is live at E, the text before E is released and
the rest held; otherwise the best match at E by key is committed. A cursor live at the first open
position itself (a delimiter being written at a region's start) holds there whatever the others
report: they are left undecided (pending) and asked when its attempt is decided, not on this feed
(`undecided`, at the end of the stream, asks every one).

A watch list whose every delimiter has literal or single-class leads also has a `Prefilter`: one
C-speed search of the new text for any lead (literal leads as a stdlib `re` trie, cut to 32
characters; an `AfterSearch` literal or character from its length back), one for a buffer tail
inside a literal lead, plus the trailing run of a leading loop class (the whitespace before
`\\s*<tool_call>`). When it finds nothing, the whole decision is made without touching a cursor;
this is the per-token fast path, inlined in `decide` for a feed without the one character every
lead begins with (a trailing run of a list's only leading loop class read back there, up to 8
characters) (`_per_token_general` for two characters, an `after` literal, an open value close
or a guarded leading loop). A tail that begins a long literal lead is then followed with
`startswith` on later feeds, not searched for again, and while it begins another lead (a marker
streamed in pieces: `<｜DSML｜` then `function`) by one lookup in the set of the tails that begin a
lead with none complete at their start (`Prefilter.open_heads`, what the two tries' anchored
matches would say). In a region with a JSON string guard the prefilter decides only the feeds
with nothing to hold (no lead, no tail of one, no loop run); without a leading loop, a feed with no lead character takes the same
inlined path (with a value close, while the body's value is still open). A region with no text
yet is decided at once, also at the end of the stream (no match is taken at the very end).
An unguarded watch list of one literal lead and no leading loop (qwen3_xml's call bodies, watching
`</function>`) also decides there a feed with the lead's first character but not the lead
(`<parameter=`): a hold at a tail that begins the lead, or nothing held.
Where the per-token path (or a single literal's search, or another path, `_released`) released
everything with nothing in progress, a next feed without the lead characters (inside a quoted
string of a value-closed body, without its quote; with a leading loop, not ending in one of its
characters) takes the per-token path to the same answer: `decide` then returns the scanner's
`quiet` hold with those trip characters (and loop), and the parser releases such next feeds
itself (`ResponseParser._feed`), moving the scanner's position and searched end as that path
would: most tokens of a call body, of reasoning or of a JSON string cost no decision.

While a delimiter is being written, the cursor whose attempt was undecided at the hold point is
asked first whether the new text leaves it undecided where it stopped (`Cursor.still_live`: inside
a literal, a greedy run or a live lookahead body, or a literal cursor's tail); then the hold stays
without running the matcher. Only a feed that moves an attempt on resumes it (without asking
`still_live` a second time). When the resumed attempt matches and it alone was undecided at the
hold point, the scan that set the hold has already decided every other cursor there (a match found
at that position, or a next candidate after it), so the best match there is committed at once
(`Scanner._commit_found`): a delimiter costs one cursor scan, when its lead appears, not two.

A *chain* pattern (`Chain`: literals and single-class runs, every run followed only by what its
class rejects (a literal whose first character it rejects, or a run of a class proven disjoint from
it), such as `\\s*```\\s*<｜tool▁call▁end｜>`; optional groups led by a literal that nothing after the
group can start with at the same place (`(?:<tool_call>\\s*)?<function=`); optional literals that the
next run takes whole (`(?:functions\\.)?[^:<\\s]+`, left out: they change the captures only); perhaps
ending in an optional tail `(?:C{lo,hi}(?=L1|L2))?` whose literals `C` rejects the first character
of, as in Kimi K2's call closer, or in an unbounded greedy run, as GLM's call opener
`\\s*<tool_call>\\s*(?P<name>[^<\\s]+)`) has one way to match at a start: each run takes its whole
maximal run, each group is taken exactly when its lead is there; a chain may be led by a
lookbehind (qwen3's `(?<=^\\s{0,16}...)<think>`), decided where a walk starts by one `regex` match
(`_Behind`, once the rest of the walk has not failed, and only where the text before the start
ends with the literal that the lookbehind's text always ends with). A branch that is one
lookbehind and nothing else walks as that lookbehind alone, a zero-width match (DSML's call closer
`</｜DSML｜ ?invoke>|(?<=<｜DSML｜ ?invoke name=...\\s{0,8}/>)`: its `regex` call is made only right
after a `/>`, never at the `</｜DSML｜parameter>` the first branches fail at; `_behind_chain`); its
cursor refuses it where the scanner forbids a zero-width match, as an attempt does. A delimiter
that is a chain, or a leading alternation whose every branch is one (Kimi K2's call opener, DSML's
call closer), or a leading run before an
alternation spread over its branches, with the alternations of literals and optional literals in
them spelled out, when every sequence that makes is a chain (`_spread_run`: the content closers
`\\s*(?:<|im_end|>|...)`, DSML's `\\s*(?:</?｜DSML｜ ?(?:function_calls|...)>|...)` as 18 chains,
whose whole literals are then its search leads), or a pattern whose spelled-out sequences are
all chains without a leading run (`_spelled`: Gemma 4's `<\\|channel>(?:thought\\n?)?`; runs inside
a spelled-out group are kept in each sequence: gpt-oss's content opener), has walks
(`Delimiter.walks`): its
cursor (`ChainCursor`) decides a candidate by walking the branches in priority order (`startswith`,
one C run match per run; a branch alike to the one before it up to where that one failed goes on
from there, or fails there too: `_shares`) instead of a matcher attempt, stops the walk where the
text ends and resumes it there (a walk that the new text leaves stopped in the same literal, run or tail is kept
without walking: `_stopped_again`, asked by `ChainCursor.still_live` and, for the scanner's own
walk, by `decide` itself); its captures come from one `regex` match at the committed start.

When the leftmost lead the prefilter finds is a lead of chains that no other lead of the watch list
(nor an `after` literal) begins, is begun by or holds, and that no leading loop of the list can
run over (`_chain_leads`),
only the branches of that delimiter with that lead can match at or before it: the scanner walks
them itself (`Scanner._chain_decide`, from the lead the prefilter's search found), with no cursor (a call body's closer, the call openers of
DeepSeek, Kimi K2 and qwen3_xml; under a JSON string guard, from a start outside strings). A
branch whose matches start right after an `after` literal (DSML's self-closing call closer) needs
no walk there: the search reports that literal first, and the cursors decide at it. Where a
branch with that lead is not a chain (qwen3_xml's call closer
`</function>\\s*</tool_call>|</function>(?=...)|(?<=...)</function>(?!...)`), the chains before it
are walked and only their failing leaves the place to the cursors (the matcher). A literal list
takes part as a chain of each of its literals, longest first (its cursor stays a `LiteralCursor`):
call closers under a JSON string guard, literal reasoning openers. Another lead goes to the
cursors. A watch list with a `^` lead (DSML's `^\\s*<think>`) has no such walks, nor the
per-token path of `decide`, while position 0 is undecided; a scanner turns both on once it has
released it (`Scanner._wake`), or, when every such delimiter is `^` and a chain, once their walks
from 0 have failed (`Scanner._anchor_walk`: position 0 is decided without cursors).

Everything a cursor learns is monotone in the buffer length (a position that failed without
touching the end fails forever), so cursors, finders and memos keep their progress across feeds:
the work of a region visit is linear in its text for every template and every chunking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import regex

from . import _rx
from ._rx import Node, Op

# --------------------------------------------------------------------------------------------
# Decisions


class Hold:
    """Decision: release the text before `at`, hold the rest (no delimiter is decided yet).

    A scanner reuses one instance: it is valid until the scanner's next `decide`."""

    __slots__ = ("at",)

    def __init__(self, at: int) -> None:
        self.at = at

    def __repr__(self) -> str:
        return f"Hold({self.at})"


@dataclass(frozen=True)
class Watch:
    """One watched delimiter: an opener of `field` (`is_open`) or the closer of `field`."""

    is_open: bool
    field: str
    delimiter: Delimiter


class Commit:
    """Decision: the delimiter `watch` matched `buf[start:end]` (certain for every continuation);
    `captures` are its named groups that took part in the match. (A slotted class, not a frozen
    dataclass: one is made per delimiter committed, and a frozen init costs four `setattr` calls.)"""

    __slots__ = ("watch", "start", "end", "captures")

    def __init__(self, watch: Watch, start: int, end: int, captures: dict[str, str]) -> None:
        self.watch = watch
        self.start = start
        self.end = end
        self.captures = captures

    def __repr__(self) -> str:
        return f"Commit({self.watch.field!r}, {self.start}, {self.end}, {self.captures!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Commit):
            return NotImplemented
        return (self.watch, self.start, self.end, self.captures) == (
            other.watch,
            other.start,
            other.end,
            other.captures,
        )

    __hash__ = None  # type: ignore[assignment]


# --------------------------------------------------------------------------------------------
# Finders: candidate start positions, linear over repeated queries


class Finder:
    """Per-scan state of a strategy. `next(buf, q, eos)` is the first position >= q where a match
    may start (`len(buf)` when there is none yet, `len(buf) + 1` at end of stream); `failed(buf, s)`
    is told that the attempt at `s` failed and returns the next position worth trying."""

    __slots__ = ()

    def next(self, buf: str, q: int, eos: bool) -> int:
        raise NotImplementedError

    def failed(self, buf: str, s: int) -> int:
        return s + 1


def _none(n: int, eos: bool) -> int:
    return n + 1 if eos else n


class _EveryFinder(Finder):
    __slots__ = ()

    def next(self, buf: str, q: int, eos: bool) -> int:
        n = len(buf)
        return q if q < n else _none(n, eos)


class _AnchorFinder(Finder):
    __slots__ = ()

    def next(self, buf: str, q: int, eos: bool) -> int:
        return 0 if q == 0 and buf else _none(len(buf), eos)

    def failed(self, buf: str, s: int) -> int:
        return len(buf) + 1


class _TriggerFinder(Finder):
    """Next position holding one of a set of characters; an absent one is searched for once per new
    text (the searched range is remembered)."""

    __slots__ = ("char", "pattern", "_q0", "_res", "_n0")

    def __init__(self, char: str | None, pattern: Any) -> None:
        self.char = char
        self.pattern = pattern
        self._q0 = -1
        self._res = -1
        self._n0 = -1

    def next(self, buf: str, q: int, eos: bool) -> int:
        n = len(buf)
        if self._q0 <= q <= self._res:
            if self._res < self._n0:
                return self._res
            if n == self._n0:
                return _none(n, eos)
            start = max(q, self._n0)
        else:
            start = q
        if self.char is not None:
            r = buf.find(self.char, start)
        else:
            m = self.pattern.search(buf, start)
            r = -1 if m is None else m.start()
        if r < 0:
            r = n
        self._q0, self._res, self._n0 = q, r, n
        return r if r < n else _none(n, eos)


class _PrefixFinder(Finder):
    """Next position whose text starts with a literal, or (before end of stream) is a tail of the
    buffer that begins it. Remembers the range rejected for good."""

    __slots__ = ("prefix", "_lo", "_hi")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._lo = -1
        self._hi = -1

    def next(self, buf: str, q: int, eos: bool) -> int:
        n = len(buf)
        prefix = self.prefix
        if self._lo <= q <= self._hi:
            lo = self._lo
            q = self._hi
        else:
            lo = q
        t = buf.find(prefix, q)
        if t >= 0:
            self._lo, self._hi = lo, t
            return t
        tail = max(q, n - len(prefix) + 1)
        if not eos:
            j = buf.find(prefix[0], tail)
            while j >= 0:
                if prefix.startswith(buf[j:]):
                    self._lo, self._hi = lo, j
                    return j
                j = buf.find(prefix[0], j + 1)
            self._lo, self._hi = lo, n
            return n
        self._lo, self._hi = lo, tail
        return n + 1


class _PrefixSetFinder(Finder):
    """`_PrefixFinder` for several literals at once: the next position where one of them occurs or
    (before end of stream) where a tail of the buffer begins one, by two C searches of trie-shaped
    patterns (literals cut to `_LEAD_MAX` characters: a superset of the candidates, which the
    attempts decide). Remembers the range rejected for good."""

    __slots__ = ("search_re", "head_re", "maxlen", "_lo", "_hi")

    def __init__(self, search_re: Any, head_re: Any, maxlen: int) -> None:
        self.search_re = search_re
        self.head_re = head_re
        self.maxlen = maxlen
        self._lo = -1
        self._hi = -1

    def next(self, buf: str, q: int, eos: bool) -> int:
        n = len(buf)
        if self._lo <= q <= self._hi:
            lo = self._lo
            q = self._hi
        else:
            lo = q
        m = self.search_re.search(buf, q)
        t = n if m is None else m.start()
        if not eos:
            tail = n - self.maxlen + 1
            if tail < q:
                tail = q
            if tail < t:
                h = self.head_re.search(buf, tail)
                if h is not None and h.start() < t:
                    t = h.start()
            self._lo, self._hi = lo, t
            return t
        if t < n:
            self._lo, self._hi = lo, t
            return t
        self._lo, self._hi = lo, max(q, n - self.maxlen + 1)
        return n + 1


class _RunTail:
    """The start of the trailing run of one loop class, maintained over the new text only."""

    __slots__ = ("loop", "_n", "_tail")

    def __init__(self, loop: _rx.CharTest) -> None:
        self.loop = loop
        self._n = -1
        self._tail = 0

    def start(self, buf: str, lo: int) -> int:
        """The start of the trailing run, or any position <= lo when the run starts before `lo`."""
        n = len(buf)
        if n == self._n:
            return self._tail
        loop = self.loop
        if n == 0 or not loop(buf[n - 1]):
            t = n
        elif self._n < 0 or n < self._n or self._n < lo:
            t = run_start(loop, buf, lo, n)
        else:
            t = run_start(loop, buf, self._n, n)
            if t == self._n and self._tail < self._n:
                t = self._tail  # the old trailing run goes on
        self._n, self._tail = n, t
        return t


class _LoopFinder(Finder):
    """`C* REST`: the start of the C-run just before a position where REST may start (clipped at q),
    or, before end of stream, the start of the trailing C-run. A failed attempt at `s` decides the
    whole run from `s` (for an unbounded loop): every start up to the run's end fails too."""

    __slots__ = ("loop", "rest", "unbounded", "tail")

    def __init__(self, loop: _rx.CharTest, rest: Finder, unbounded: bool) -> None:
        self.loop = loop
        self.rest = rest
        self.unbounded = unbounded
        self.tail = _RunTail(loop)

    def next(self, buf: str, q: int, eos: bool) -> int:
        n = len(buf)
        if q >= n:
            return _none(n, eos)
        t = self.rest.next(buf, q, eos)
        if t < n:
            return run_start(self.loop, buf, q, t)
        if eos:
            return n + 1
        h = max(q, self.tail.start(buf, q))
        return h if h < n else n

    def failed(self, buf: str, s: int) -> int:
        if not self.unbounded:
            return s + 1
        m = self.loop.run_re.match(buf, s)
        return (m.end() if m is not None else s) + 1


class _SuffixFinder(Finder):
    """Positions right after an occurrence of a literal `lit` (a lookbehind's text ends with it:
    `/>` for `(?<=<x name="[^"]{1,8}"\\s{0,2}/>)`), searched from `len(lit)` positions before `q`.
    Remembers the occurrence found, or how far none was (an occurrence may straddle that end)."""

    __slots__ = ("lit", "_lo", "_hit", "_n0")

    def __init__(self, lit: str) -> None:
        self.lit = lit
        self._lo = 0  # the last search started here and found `_hit` (-1: none before `_n0`)
        self._hit = -1
        self._n0 = 0

    def next(self, buf: str, q: int, eos: bool) -> int:
        size = len(self.lit)
        lo = q - size if q > size else 0
        hit = self._hit
        if self._lo <= lo <= hit:
            i = hit
        else:
            start = lo
            if hit < 0 and self._lo <= lo:
                again = self._n0 - size + 1
                if again > start:
                    start = again
            i = buf.find(self.lit, start)
            self._lo, self._hit, self._n0 = lo, i, len(buf)
        if i < 0:
            return _none(len(buf), eos)
        return i + size  # == len(buf): none yet (a match at the end is never taken)


class _AfterFinder(Finder):
    """Positions right after a trigger character (searched from one position before `q`)."""

    __slots__ = ("trig",)

    def __init__(self, trig: _TriggerFinder) -> None:
        self.trig = trig

    def next(self, buf: str, q: int, eos: bool) -> int:
        n = len(buf)
        r = self.trig.next(buf, q - 1 if q > 0 else 0, eos)
        return r + 1 if r < n else r  # r + 1 == n: none yet (a match at the end is never taken)


class _UnionFinder(Finder):
    __slots__ = ("parts", "_qs")

    def __init__(self, parts: list[Finder]) -> None:
        self.parts = parts
        self._qs = [0] * len(parts)

    def next(self, buf: str, q: int, eos: bool) -> int:
        best = len(buf) + 1
        qs = self._qs
        for i, f in enumerate(self.parts):
            c = f.next(buf, max(q, qs[i]), eos)
            if c < best:
                best = c
        return best

    def failed(self, buf: str, s: int) -> int:
        qs = self._qs
        for i, f in enumerate(self.parts):
            if qs[i] <= s:
                qs[i] = f.failed(buf, s)
        return s + 1


# --------------------------------------------------------------------------------------------
# Strategies: one per delimiter shape (immutable, shared by every parser of a template)


class Strategy:
    """How a delimiter's candidate start positions are found (see the module docstring).

    `leads` are what the watch list's `Prefilter` searches for: literal strings and one-character
    class sources; None when the shape has no such leads (every position can start a match).
    `loop` is the leading loop class of a `C* REST` shape (its trailing run is always held)."""

    leads: list[str] | None = None
    classes: list[str] = []
    loops: list[_rx.CharTest] = []
    at0: bool = False
    after: list[str] = []  # characters right after which a (zero-width) match may start

    def finder(self) -> Finder:
        raise NotImplementedError


class LiteralSearch(Strategy):
    """A list of literals: found with `str.find`; the decision needs no attempt (`LiteralCursor`)."""

    def __init__(self, literals: list[str]) -> None:
        self.literals = sorted(literals, key=len, reverse=True)
        self.leads = list(self.literals)
        self.classes = []
        self.loops = []

    def finder(self) -> Finder:  # pragma: no cover - literal delimiters use LiteralCursor
        return _EveryFinder()


class PrefixSearch(Strategy):
    """A pattern whose every match starts with the literal `prefix`."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.leads = [prefix]
        self.classes = []
        self.loops = []

    def finder(self) -> Finder:
        if len(self.prefix) == 1:
            return _TriggerFinder(self.prefix, None)
        return _PrefixFinder(self.prefix)


class PrefixSetSearch(Strategy):
    """A pattern whose every match starts with one of several literals (`</?x>`, the rest of
    `\\s*(?:</s>|<end>)`): one finder searches for all of them at once."""

    def __init__(self, prefixes: list[str]) -> None:
        self.prefixes = prefixes
        self.leads = list(prefixes)
        self.classes = []
        self.loops = []
        cut = sorted({x[:_LEAD_MAX] for x in prefixes}, key=len, reverse=True)
        self._search_re = re.compile(_trie_pattern(cut, False))
        self._head_re = re.compile(_trie_pattern(cut, True) + r"\Z")
        self._maxlen = max(len(x) for x in cut)

    def finder(self) -> Finder:
        return _PrefixSetFinder(self._search_re, self._head_re, self._maxlen)


class TriggerSearch(Strategy):
    """A pattern whose first character belongs to a set (one-character `regex` sources)."""

    def __init__(self, chars: set[str], classes: list[str]) -> None:
        self.chars = chars
        self.classes = classes
        self.leads = sorted(chars)
        self.loops = []
        srcs = [regex.escape(c) for c in sorted(chars)] + classes
        self._single = next(iter(chars)) if len(chars) == 1 and not classes else None
        # (the classes of several delimiters joined: `_rx.module_safe`, as each source alone was)
        self._re = regex.compile(_rx.module_safe("|".join(srcs)) if srcs else "(?!)")

    def finder(self) -> Finder:
        return _TriggerFinder(self._single, None if self._single is not None else self._re)


class LoopSearch(Strategy):
    """`C* REST` (or `C{lo,hi} REST`): candidates are the starts of C-runs before a REST start."""

    def __init__(self, loop: _rx.CharTest, rest: Strategy, unbounded: bool) -> None:
        self.loop = loop
        self.rest = rest
        self.unbounded = unbounded
        self.leads = rest.leads
        self.classes = rest.classes
        self.loops = [loop, *rest.loops]
        self.after = rest.after

    def finder(self) -> Finder:
        return _LoopFinder(self.loop, self.rest.finder(), self.unbounded)


class AnchorSearch(Strategy):
    """A branch that can only match at position 0 (it starts with `^` / `\\A`)."""

    def __init__(self) -> None:
        self.leads = []
        self.classes = []
        self.loops = []
        self.at0 = True

    def finder(self) -> Finder:
        return _AnchorFinder()


class AfterSearch(Strategy):
    """A branch led by a lookbehind (`(?<=...invoke name="x"/>)`, `(?<=;)\\s*(?=\\{)`): candidates
    are the positions right after the literal that the lookbehind's text always ends with (`/>`),
    or else right after one of the characters it can end with. `after` holds that literal or those
    characters: the watch list's prefilter searches them `len` positions back (`Prefilter.back`)."""

    def __init__(self, chars: set[str], suffix: str = "") -> None:
        self.chars = chars
        # At most its last 4 characters (a suffix too): the prefilter searches it from its length
        # before the first undecided position on every feed.
        self.suffix = suffix = suffix[-4:]
        self.leads = []
        self.classes = []
        self.loops = []
        self.after = [suffix] if len(suffix) > 1 else sorted(chars)
        self._single = next(iter(chars)) if len(chars) == 1 else None
        self._re = regex.compile("|".join(regex.escape(c) for c in sorted(chars)))

    def finder(self) -> Finder:
        if len(self.suffix) > 1:
            return _SuffixFinder(self.suffix)
        return _AfterFinder(_TriggerFinder(self._single, None if self._single is not None else self._re))


class EverySearch(Strategy):
    """Every position is a candidate (a nullable pattern, a leading dot or lookbehind...)."""

    def __init__(self) -> None:
        self.leads = None
        self.classes = []
        self.loops = []

    def finder(self) -> Finder:
        return _EveryFinder()


class UnionSearch(Strategy):
    """The branches of a leading alternation (or optional group), each with its own strategy."""

    def __init__(self, parts: list[Strategy]) -> None:
        self.parts = parts
        leads: list[str] | None = []
        classes: list[str] = []
        loops: list[_rx.CharTest] = []
        after: list[str] = []
        for p in parts:
            if p.leads is None or leads is None:
                leads = None
            else:
                leads.extend(p.leads)
            classes.extend(p.classes)
            loops.extend(p.loops)
            after.extend(p.after)
        self.leads = leads
        self.classes = classes
        self.loops = loops
        self.after = after
        self.at0 = any(p.at0 for p in parts)

    def finder(self) -> Finder:
        return _UnionFinder([p.finder() for p in self.parts])


# --------------------------------------------------------------------------------------------
# Pattern analysis (which strategy a pattern gets)


def _unwrap(node: Node) -> Node:
    while node.op is Op.GROUP:
        node = node.kids[0]
    return node


def _flatten(node: Node) -> list[Node]:
    node = _unwrap(node)
    if node.op is Op.CAT:
        out: list[Node] = []
        for k in node.kids:
            out.extend(_flatten(k))
        return out
    if node.op is Op.EMPTY:
        return []
    return [node]


_MAX_BRANCHES = 16


def _branches(items: list[Node], depth: int = 0, ordered: bool = False) -> list[list[Node]] | None:
    """Split a sequence on its leading alternation / optional group into branch sequences.

    With `ordered`, in priority order: the sequences the pattern tries at a start, one after the
    other (a leading alternation's branches in order; a leading greedy optional group taken, then
    skipped, a lazy one skipped, then taken), or None when a possessive one (which never gives
    back what it took) leads. None also when too many branches lead."""
    if not items or depth > 4:
        return [items]
    head = _unwrap(items[0])
    rest = items[1:]
    if head.op is Op.ALT:
        out: list[list[Node]] = []
        for k in head.kids:
            sub = _branches(_flatten(k) + rest, depth + 1, ordered)
            if sub is None:
                return None
            out.extend(sub)
            if len(out) > _MAX_BRANCHES:
                return None
        return out
    if head.op is Op.REP and head.args[:2] == (0, 1) and _unwrap(head.kids[0]).op not in _rx.ATOMS:
        if ordered and head.args[2] == "possessive":
            return None
        a = _branches(_flatten(head.kids[0]) + rest, depth + 1, ordered)
        b = _branches(rest, depth + 1, ordered)
        if a is None or b is None or len(a) + len(b) > _MAX_BRANCHES:
            return None
        return b + a if ordered and head.args[2] == "lazy" else a + b
    return [items]


class _First:
    """What can start a match: literal characters, class sources, or anything."""

    def __init__(self) -> None:
        self.chars: set[str] = set()
        self.classes: list[str] = []
        self.anywhere = False
        self.at0 = False


def _first(items: list[Node], out: _First, at0: bool = False) -> bool:
    """Add the possible first characters of the sequence to `out`; returns whether it is nullable."""
    for node in items:
        if not _first_node(node, out, at0):
            return False
        if _unwrap(node).op is Op.ASSERT and _unwrap(node).args[0] == "bos":
            at0 = True
    return True


def _first_node(node: Node, out: _First, at0: bool) -> bool:
    node = _unwrap(node)
    op = node.op
    if op in _rx.ATOMS:
        if at0:
            out.at0 = True
        elif op is Op.LIT:
            out.chars.add(node.args[0])
        elif op is Op.ANY:
            if node.args[0]:
                out.anywhere = True
            else:
                out.classes.append(r"[^\n]")
        else:
            out.classes.append(_rx.atom_source(node))
        return False
    if op is Op.ASSERT:
        return True
    if op is Op.LOOK:
        ahead, negate = node.args[0], node.args[1]
        if ahead and not negate:
            sub = _First()
            if not _first(_flatten(node.kids[0]), sub, at0):
                out.chars |= sub.chars
                out.classes += sub.classes
                out.anywhere |= sub.anywhere
                out.at0 |= sub.at0
                return False
        return True  # zero-width: the first character comes from what follows
    if op is Op.EMPTY:
        return True
    if op is Op.CAT:
        return _first(node.kids, out, at0)
    if op is Op.ALT:
        res = False
        for k in node.kids:
            if _first_node(k, out, at0):
                res = True
        return res
    if op is Op.REP:
        inner = _first_node(node.kids[0], out, at0)
        return inner or node.args[0] == 0
    return _first_node(node.kids[0], out, at0)  # atomic


def _last_chars(items: list[Node]) -> set[str] | None:
    """The literal characters that every match of `items` ends with one of; None when a match can
    be empty or end with a class character."""
    out: set[str] = set()
    for node in reversed(items):
        res = _last_node(node, out)
        if res is None:
            return None
        if not res:
            return out
    return None  # nullable


def _last_literal(items: list[Node]) -> str:
    """The literal text that every match of the sequence `items` ends with (its trailing literal
    nodes; possibly empty)."""
    out = ""
    for node in reversed(items):
        node = _unwrap(node)
        if node.op is not Op.LIT:
            break
        out = node.args[0] + out
    return out


def _last_node(node: Node, out: set[str]) -> bool | None:
    """Add the node's possible last characters; True when it is nullable, None when unknown."""
    node = _unwrap(node)
    op = node.op
    if op is Op.LIT:
        out.add(node.args[0])
        return False
    if op in _rx.ATOMS:
        return None
    if op in (Op.ASSERT, Op.LOOK, Op.EMPTY):
        return True
    if op is Op.CAT:
        for k in reversed(node.kids):
            res = _last_node(k, out)
            if res is None or not res:
                return res
        return True
    if op is Op.ALT:
        nullable = False
        for k in node.kids:
            res = _last_node(k, out)
            if res is None:
                return None
            nullable |= res
        return nullable
    if op is Op.REP:
        res = _last_node(node.kids[0], out)
        if res is None:
            return None
        return res or node.args[0] == 0
    return None


def _lead_literal(items: list[Node]) -> str:
    """Literal text that every match of the sequence `items` starts with (possibly empty)."""
    leads = _leads(items)
    return _common_prefix(leads) if leads else ""


_MAX_LEADS = 8


def _leads(items: list[Node], limit: int = _MAX_LEADS) -> list[str]:
    """Literal prefixes such that every match of `items` starts with one of them (an optional
    character or an alternation of literals branches the set; at most `limit` prefixes)."""
    out = [""]
    for node in items:
        node = _unwrap(node)
        if node.op is Op.LIT:
            out = [x + node.args[0] for x in out]
            continue
        if node.op is Op.LOOK:
            continue  # zero-width: the text of a match is that of what follows
        alts: list[str] | None = None
        if node.op is Op.ALT:
            kid_leads = [_leads(_flatten(k), limit) for k in node.kids]
            full = all(len(kl) == 1 and _is_literal_seq(_flatten(k)) for kl, k in zip(kid_leads, node.kids))
            flat = [x for kl in kid_leads for x in kl]
            if full and len(flat) * len(out) <= limit and all(flat):
                alts = flat
            else:
                common = _common_prefix(flat) if flat and all(flat) else ""
                return [x + common for x in out]
        elif (
            node.op is Op.REP
            and node.args[0] == 0
            and node.args[1] == 1
            and _unwrap(node.kids[0]).op is Op.LIT
        ):
            alts = ["", _unwrap(node.kids[0]).args[0]]
            if len(out) * 2 > limit:
                return out
        elif node.op is Op.CAT:
            sub = _leads(_flatten(node), limit)
            return [x + y for x in out for y in sub][:limit] if len(sub) * len(out) <= limit else out
        if alts is None:
            return out
        out = [x + a for x in out for a in alts]
    return out


def _is_literal_seq(items: list[Node]) -> bool:
    return all(_unwrap(n).op is Op.LIT for n in items)


def _common_prefix(strings: list[str]) -> str:
    prefix = strings[0]
    for other in strings[1:]:
        k = 0
        while k < min(len(prefix), len(other)) and prefix[k] == other[k]:
            k += 1
        prefix = prefix[:k]
    return prefix


def _first_strategy(items: list[Node]) -> Strategy:
    first = _First()
    nullable = _first(items, first)
    if nullable or first.anywhere:
        return EverySearch()
    if first.at0 and not first.chars and not first.classes:
        return AnchorSearch()
    if first.at0:
        return UnionSearch([AnchorSearch(), TriggerSearch(first.chars, list(dict.fromkeys(first.classes)))])
    return TriggerSearch(first.chars, list(dict.fromkeys(first.classes)))


def _sequence_strategy(items: list[Node]) -> Strategy:
    if not items:
        return EverySearch()
    head = _unwrap(items[0])
    if head.op is Op.ASSERT and head.args[0] == "bos":
        return AnchorSearch()
    if head.op is Op.LOOK and not head.args[0] and not head.args[1]:
        body = _flatten(head.kids[0])
        chars = _last_chars(body)
        if chars:
            return AfterSearch(chars, _last_literal(body))
    leads = [x for x in _leads(items) if x]
    if leads and len(leads) == len(_leads(items)):
        if len(leads) == 1:
            return PrefixSearch(leads[0])
        return PrefixSetSearch(list(dict.fromkeys(leads)))
    ahead = _ahead_literal(items)
    if ahead:
        # (What the match consumes begins with no literal, but the text where it starts must begin
        # with a leading lookahead's literal: gpt-oss's `(?=<\|channel\|>)[^<]{0,128}<\|channel\|>`.
        # Candidates are where that literal is, not every `<`.)
        return PrefixSearch(ahead)
    if (
        head.op is Op.REP
        and head.args[2] in ("greedy", "lazy", "possessive")
        and _unwrap(head.kids[0]).op in (Op.LIT, Op.CLS)
        and len(items) >= 2
        and not _rx.nullable(Node(Op.CAT, kids=items[1:]))
    ):
        rest = _pattern_strategy_items(items[1:])
        atom = _unwrap(head.kids[0])
        # Not before another leading loop (`[^<]*\s*<a>`): the trailing-run holds and the loop
        # finder follow one class, and a match may start at a run of the first class before a
        # run of the second (`b> ` in `<b> <a>`): such a shape is searched by its first characters.
        if rest.leads is not None and not rest.at0 and not rest.loops:
            loop = _rx.CharTest(_rx.atom_source(atom), 0)
            return LoopSearch(loop, rest, head.args[1] is None)
    return _first_strategy(items)


def _ahead_literal(items: list[Node]) -> str:
    """The longest literal of a positive lookahead among the sequence's leading lookarounds whose
    body is a literal sequence (`(?=<\\|channel\\|>)`): the text at every match start begins with
    it, though the match need not consume it ("" when there is none). A strategy's leads are
    where a match may start, which such a literal decides as well as a consumed one."""
    best = ""
    for node in items:
        node = _unwrap(node)
        if node.op is not Op.LOOK:
            break
        if node.args[0] and not node.args[1]:
            body = _flatten(node.kids[0])
            if body and _is_literal_seq(body):
                lit = "".join(_unwrap(x).args[0] for x in body)
                if len(lit) > len(best):
                    best = lit
    return best


def _pattern_strategy_items(items: list[Node]) -> Strategy:
    branches = _branches(items)
    if branches is None:
        return _first_strategy(items)
    parts = [_sequence_strategy(b) for b in branches]
    if any(isinstance(p, EverySearch) for p in parts):
        return EverySearch()
    # Branches with the same literal prefix share their candidates: one finder for them.
    seen: set[str] = set()
    unique: list[Strategy] = []
    for p in parts:
        if isinstance(p, PrefixSearch):
            if p.prefix in seen:
                continue
            seen.add(p.prefix)
        unique.append(p)
    parts = unique
    if len(parts) > 1 and all(isinstance(p, PrefixSearch) for p in parts):
        return PrefixSetSearch([p.prefix for p in parts])  # type: ignore[attr-defined]
    return parts[0] if len(parts) == 1 else UnionSearch(parts)


def pattern_strategy(tree: Node) -> Strategy:
    """The search strategy for a compiled pattern's tree."""
    return _pattern_strategy_items(_flatten(tree))


# --------------------------------------------------------------------------------------------
# Delimiters


def _look_captures(prog: _rx.Program) -> bool:
    for op, arg in prog.code:
        if op == _rx.LOOKAHEAD and arg.captures:
            return True
        if op == _rx.ATOMIC and _look_captures(arg):
            return True
    return False


class Delimiter:
    """A compiled opener, closer or anchor: literal list or regex, with its search strategy."""

    def __init__(self, source: str, literals: list[str] | None, scope: str = "delimiter") -> None:
        self.source = source
        self.scope = scope
        self.literals = literals
        self.module_re: Any = None  # the `regex` module's compiled pattern (set by the loader)
        #: the same pattern for `match` at chosen positions, without the `regex` module's
        #: required-string search (`_rx.match_only`; set by the loader)
        self.match_re: Any = None
        self._sorted: list[str] | None = None  # a literal list's literals, longest first
        if literals is not None:
            self.prog = _rx.literal_program(literals)
            self.strategy: Strategy = LiteralSearch(literals)
            self._sorted = self.strategy.literals
        else:
            self.prog = _rx.compile_pattern(source)
            assert self.prog.tree is not None
            self.strategy = pattern_strategy(self.prog.tree)
        # A pattern whose match at a start is decided by a walk (`Chain`), or by walks of the
        # branches of its leading alternation in priority order (`branches`, when every branch is
        # a chain): scanned by a `ChainCursor`, without the matcher (`walks`: what it walks).
        tree = self.prog.tree if literals is None else None
        self.chain = chain_of(tree) if tree is not None else None
        # `^` and then a chain (`^\\s*<think>`): its walk from position 0 (`WatchList.anchors`)
        self.anchored: list[Any] | None = None
        items = _flatten(tree) if tree is not None else []
        head = _unwrap(items[0]) if items else None
        if head is not None and head.op is Op.ASSERT and head.args[0] == "bos" and len(items) > 1:
            c = _chain_of_nodes(items[1:])
            self.anchored = c.full if c is not None else None
        spread = _spread_run(_flatten(tree)) if tree is not None else None
        self.branches = spread or (_branch_chains(tree, self.chain) if tree is not None else None)
        spelled = None
        if (
            tree is not None
            and self.chain is None
            and (self.branches is None or any(b.chain is None for b in self.branches))
        ):
            spelled = _spelled(items)
            if spelled is not None:
                self.branches = spelled
                if isinstance(self.strategy, (PrefixSearch, PrefixSetSearch)):
                    # (as for a spread run below: the spelled-out leads are whole literals)
                    leads = list(dict.fromkeys(x for b in spelled for x in b.leads or ()))
                    self.strategy = PrefixSearch(leads[0]) if len(leads) == 1 else PrefixSetSearch(leads)
        if self._sorted is not None:
            # A literal list: each literal is a chain of itself, in the order its cursor prefers
            # them at one position (longest first), so the scanner's walks (`_chain_decide`)
            # take its leads too. (Its cursor stays a `LiteralCursor`.)
            self.branches = [_Branch(Chain(None, [x], [x], [x]), [x], None) for x in self._sorted]
        self.walks: list[list[Any]] | None = None
        self.walk_shares: list[int] = []  # `_shares(walks)`
        if self.branches is not None and all(b.chain is not None for b in self.branches):
            self.walks = [b.chain.full for b in self.branches]  # type: ignore[union-attr]
            self.walk_shares = _shares(self.walks)
            s = self.strategy
            if spread and isinstance(s, LoopSearch) and all(_same_loop(b.loop, s.loop) for b in spread):
                # `C* (?:...)` spread over its branches (`_spread_run`): every match is the run and
                # one of the branches' leads (whole literals), more precise than the leads read
                # off the pattern (`\\s*(?:</?x ?(?:a|b)>|...)`: `<x`, `</x`...), so the region's
                # prefilter reports the lead of one branch and the scanner walks it.
                leads = list(dict.fromkeys(x for b in self.branches for x in b.leads or ()))
                rest: Strategy = PrefixSearch(leads[0]) if len(leads) == 1 else PrefixSetSearch(leads)
                self.strategy = LoopSearch(s.loop, rest, s.unbounded)
        self.group_names = dict(self.prog.names)
        #: `_rx.capture_window` of the pattern (-1: not proven; -2: not computed yet), computed at
        #: the first commit that needs the groups (`_captures`).
        self.capture_width = -2
        # Scanning runs the program with captures when no group sits inside a lookahead (captures
        # never change which path matches): the committed match then has its slots at once.
        cap = self.prog.capture
        self.scan_prog = cap if cap is not None and not _look_captures(cap) else self.prog
        #: `_oneshot.run_pattern`'s answer, computed on first use (`False`: not yet). An attribute,
        #: not a weak-keyed cache: the compiled build's classes take no weak references.
        self.run_rx: Any = False

    @property
    def loop_test(self) -> _rx.CharTest | None:
        """The class of a leading `C*` loop (`\\s*<tool_call>`), or None."""
        s = self.strategy
        if isinstance(s, LoopSearch):
            return s.loop
        return None

    def cursor(self, states: dict[int, Any], q: int = 0) -> Cursor:
        """A cursor for one region visit, at `q`. `states` (one per parser) keeps each delimiter's
        finder across visits: what it learned about the buffer stays true (the buffer only grows),
        so a delimiter that never occurs is searched for once per new text, not once per visit."""
        key = id(self)
        state = states.get(key)
        lits = self._sorted
        if lits is not None:
            if state is None:
                state = states[key] = [(-1, -1)] * len(lits)
            return LiteralCursor(self, lits, state, q)
        if state is None:
            state = states[key] = self.strategy.finder()
        if self.walks is not None:
            return ChainCursor(self, state, q)
        return PatternCursor(self, state, q)


class _Branch:
    """One branch of a delimiter's leading alternation (in priority order): its `Chain` or None,
    the literals it starts with after its leading run (None: not only literals), and that run's
    class (None: no leading run)."""

    __slots__ = ("chain", "leads", "loop")

    def __init__(self, chain: Chain | None, leads: list[str] | None, loop: _rx.CharTest | None) -> None:
        self.chain = chain
        self.leads = leads
        self.loop = loop


def _branch_chains(tree: Node, chain: Chain | None) -> list[_Branch] | None:
    """The branches of a pattern for walks (`Delimiter.branches`): the chain itself, or the
    branches of its leading alternation when at least one of them is a chain; else None."""
    if chain is not None:
        return [_Branch(chain, chain.leads, chain.loop)]
    branches = _branches(_flatten(tree), ordered=True)
    if branches is None or len(branches) < 2:
        return None
    out = []
    for items in branches:
        c = _chain_of_nodes(items)
        if c is not None:
            out.append(_Branch(c, c.leads, c.loop))
            continue
        c = _behind_chain(items)
        if c is not None:
            out.append(_Branch(c, [], None))
            continue
        st = _sequence_strategy(items)
        out.append(_Branch(None, st.leads, st.loop if isinstance(st, LoopSearch) else None))
    return out if any(b.chain is not None for b in out) else None


_MAX_SPREAD = 32


def _spell_out(items: list[Node], cap: int, inner: bool = False) -> list[list[Node]] | None:
    """The sequence with every alternation of literals and every optional literal in it spelled
    out, nested ones too, in the order the pattern tries them (`<(?:a|b)c>?` -> `<ac>`, `<ac`,
    `<bc>`, `<bc`; `<x>(?:ab?)?` -> `<x>ab`, `<x>a`, `<x>`): the branches' leads are then whole
    literals. None when more than `cap` would come out (or, `inner`, when something else than
    literals, classes and runs is inside: those are kept as they are in each sequence). (Valid
    when every sequence that comes out is a chain: see `_spread_run`.)"""
    out: list[list[Node]] = [[]]
    for node in items:
        u = _unwrap(node)
        alts: list[list[Node]] | None = None
        if u.op is Op.LIT:
            out = [x + [node] for x in out]
            continue
        if u.op is Op.ALT:
            alts = []
            for k in u.kids:
                sub = _spell_out(_flatten(k), cap, True)
                if sub is None:
                    alts = None
                    break
                alts.extend(sub)
        elif u.op is Op.REP and u.args[:2] == (0, 1) and u.args[2] in ("greedy", "lazy"):
            sub = _spell_out(_flatten(u.kids[0]), cap, True)
            if sub is not None:
                alts = [*sub, []] if u.args[2] == "greedy" else [[], *sub]
        elif inner and (u.op in _rx.ATOMS or (u.op is Op.REP and _unwrap(u.kids[0]).op in _rx.ATOMS)):
            # A class or a run inside a spelled-out part (gpt-oss's content opener
            # `(?:[ \t]*<\|constrain\|>[^\s<]{1,32}|[ \t]+json)?`): kept as it is in each
            # sequence; the sequence must still be a chain, as every other one.
            out = [x + [node] for x in out]
            continue
        if alts is None:
            if inner:
                return None
            out = [x + [node] for x in out]
            continue
        if len(out) * len(alts) > cap:
            return None
        out = [x + a for x in out for a in alts]
    return out


def _spelled(items: list[Node]) -> list[_Branch] | None:
    """A pattern that is no chain as it is but whose spelled-out sequences (`_spell_out`, after
    the leading alternation is split) are all chains with no leading run (Gemma 4's
    `<|channel>(?:thought\\n?)?`): those chains, in priority order; else None. (The same
    argument as `_spread_run`'s, without the run.)"""
    rest = _branches(items, ordered=True)
    if rest is None:
        return None
    spread: list[list[Node]] = []
    for branch in rest:
        more = _spell_out(branch, _MAX_SPREAD - len(spread))
        if more is None:
            return None
        spread.extend(more)
    if len(spread) < 2:
        return None
    out = []
    for branch in spread:
        c = _chain_of_nodes(branch) if branch else None
        if c is None:
            c = _behind_chain(branch)
            if c is None:
                return None
            out.append(_Branch(c, [], None))
            continue
        if c.loop is not None:
            return None
        out.append(_Branch(c, c.leads, None))
    return out


def _behind_chain(items: list[Node]) -> Chain | None:
    """A branch that is one lookbehind and nothing else (DSML's call closer
    `</｜DSML｜ ?invoke>|(?<=<｜DSML｜ ?invoke name="[^"]{1,256}"\\s{0,8}/>)`: the region ends right
    after a self-closing opener) as a walk of its `_Behind` alone: a zero-width match wherever the
    lookbehind holds, decided by its tail literal and then one `regex` call (`_walk`). A
    `ChainCursor` walks it at its finder's candidates (`AfterSearch`: right after the tail) after
    the branches before it, and refuses its zero-width match where the scanner forbids one as the
    matcher does. Its `_Branch` has no literal leads (`[]`, as any `AfterSearch` branch): every
    place it can match is right after an `after` literal, which the prefilter's search reports
    first, so at a lead found before any such literal it cannot match (`_chain_leads`). None for
    another shape."""
    if len(items) != 1:
        return None
    node = _unwrap(items[0])
    if node.op is not Op.LOOK or node.args[0]:
        return None
    got = _chain_items([node])
    if got is None or len(got) != 1 or type(got[0]) is not _Behind:
        return None
    return Chain(None, got, [], got)


def _spread_run(items: list[Node]) -> list[_Branch] | None:
    """A leading unbounded run before an alternation (or optional group), `\\s*(?:</s>|<end>)`, as
    the chains `\\s*</s>`, `\\s*<end>` in the alternation's priority order, alternations of
    literals and optional literals in them spelled out (`_spell_out`: `\\s*<x ?y>` is `\\s*<x y>`,
    `\\s*<xy>`), when that makes two or more sequences and every one of them is a chain; else
    None. The pattern tries its branches at the run's end and only then gives
    characters of the run back; a chain's run is forced (what follows the run starts with a
    character its class rejects), so a shorter run fails every branch. Within a branch every run
    and group is forced too, and decided by the text alone (a run takes its maximal run, a group
    is taken when its lead is there), so every match the pattern can find at a start takes the
    same choices outside the spelled-out parts, and the pattern tries those in the order of the
    sequences: walked one after the other, they match where and as the pattern does."""
    if len(items) < 2:
        return None
    head = _unwrap(items[0])
    if not (
        head.op is Op.REP
        and head.args[0] == 0
        and head.args[1] is None
        and head.args[2] in _RUN_MODES
        and _unwrap(head.kids[0]).op in _rx.ATOMS
    ):
        return None
    rest = _branches(items[1:], ordered=True)
    if rest is None:
        return None
    spread: list[list[Node]] = []
    for branch in rest:
        more = _spell_out(branch, _MAX_SPREAD - len(spread))
        if more is None:
            return None
        spread.extend(more)
    if len(spread) < 2:
        return None  # (one chain, or none: `chain_of` decides)
    out = []
    for branch in spread:
        c = _chain_of_nodes([items[0], *branch])
        if c is None or c.loop is None:
            return None
        out.append(_Branch(c, c.leads, c.loop))
    return out


# --------------------------------------------------------------------------------------------
# Cursors: one delimiter during one region visit

NONE, MATCH, LIVE = 0, 1, 2


class Cursor:
    """The scan state of one delimiter during one region visit (see the module docstring).

    `advance(buf, eos, limit, zw_forbid)` returns `(NONE, q, 0)` when every position before `q`
    fails and `q` is past `limit` or the end of the text, `(MATCH, start, end)` for a certain
    match and `(LIVE, start, 0)` when the outcome at `start` is still undecided."""

    __slots__ = ("d", "q", "found", "slots")

    def __init__(self, d: Delimiter) -> None:
        self.d = d
        self.q = 0
        self.found: tuple[int, int] | None = None
        self.slots: list[int] | None = None  # the found match's capture slots, when known

    def peek(self, buf: str, eos: bool) -> int:
        """The next position this cursor would examine (cheap: no attempt is run)."""
        raise NotImplementedError

    def advance(self, buf: str, eos: bool, limit: int, zw_forbid: int) -> tuple[int, int, int]:
        raise NotImplementedError

    def reject(self, pos: int) -> None:
        """The match at `pos` was refused (inside a JSON string): look again from `pos + 1`."""
        self.found = None
        self.slots = None
        self.q = pos + 1

    def resume(self, buf: str, zw_forbid: int) -> bool:
        """Resume an undecided attempt at `self.q` (before end of stream); True while it stays live."""
        return False

    def still_live(self, buf: str) -> bool:
        """Whether this cursor, live at `self.q` at the last decision, is live there again with the
        new text, decided cheaply (False: ask `resume` or scan)."""
        return False

    def captures(self, buf: str, start: int, eos: bool) -> dict[str, str]:
        return _captures(self.d, buf, start, eos, self.slots)


def _captures(
    d: Delimiter,
    buf: str,
    start: int,
    eos: bool,
    slots: list[int] | None = None,
    walked: bool = False,
) -> dict[str, str]:
    """The named groups of the match of `d` at `start` (its capture slots, when known; `walked`:
    the match was found by a walk of one of its branches)."""
    names = d.group_names
    if not names:
        return {}
    if slots is None and (walked or d.walks is not None) and d.module_re is not None:
        # A walked match at `start` is the first branch's to match there, by its only path: the
        # `regex` module's match there is the same one, with its groups in one C call.
        m = (d.match_re or d.module_re).match(buf, start)  # (`_rx.match_only`)
        assert m is not None
        # (values typed `Any`: a group that took no part is None, which the compiled build's
        # `str` checks would reject before the filter)
        got: dict[str, Any] = m.groupdict()
        if None in got.values():  # (usually every group took part: no comprehension, ~0.5 us)
            return {g: v for g, v in got.items() if v is not None}
        return got
    if slots is None:
        width = d.capture_width
        if width == -2:
            tree = d.prog.tree
            found = _rx.capture_window(tree) if tree is not None and d.module_re is not None else None
            width = d.capture_width = -1 if found is None else found
        if width >= 0:
            # Proven (`_rx.capture_window`): the `regex` module's match over a window of constant
            # width after `start` is the committed match, with its groups, in one C call of bounded
            # cost; a group ending at the window's edge may be a tail run the window cut short.
            n = len(buf)
            edge = min(n, start + width + 2)
            m = (d.match_re or d.module_re).match(buf, start, edge)
            if m is not None:
                caps = {}
                for g in names:
                    s, e = m.span(g)
                    if s == -1:
                        continue
                    if e == edge and edge < n:
                        break
                    caps[g] = buf[s:e]
                else:
                    return caps
        slots = _rx.capture(d.prog, buf, start, eos)
    caps = {}
    for g, slot in names.items():
        s, e = slots[slot], slots[slot + 1]
        if s != -1 and e != -1:
            caps[g] = buf[s:e]
    return caps


class LiteralCursor(Cursor):
    """A literal list: the leftmost occurrence (longest literal at a start) decides, or a tail of
    the buffer that begins a literal holds; `str.find` only, with the searched range remembered."""

    __slots__ = ("literals", "_found", "_maxlen")

    def __init__(self, d: Delimiter, literals: list[str], found: list[tuple[int, int]], q: int = 0) -> None:
        # (`Cursor.__init__` inlined: a cursor is made per delimiter per region visit)
        self.d = d
        self.q = q
        self.found: tuple[int, int] | None = None
        self.slots: list[int] | None = None
        self.literals = literals  # longest first
        self._found = found  # per literal: (searched from, result); shared across region visits
        self._maxlen = len(literals[0])

    def _first(self, buf: str, q: int) -> tuple[int, int]:
        """Leftmost full occurrence at or after q: (position, literal length), or (-1, 0)."""
        best, size = -1, 0
        found = self._found
        n = len(buf)
        for i, lit in enumerate(self.literals):
            frm, res = found[i]
            if frm == -1 or q < frm or (res >= 0 and res < q):
                res = buf.find(lit, q)
                found[i] = (q, res if res >= 0 else -2 - n)
            elif res < -1:  # not found in a shorter buffer: search only the new text
                last_n = -2 - res
                if last_n != n:
                    res = buf.find(lit, max(q, last_n - len(lit) + 1))
                    found[i] = (q, res if res >= 0 else -2 - n)
                else:
                    res = -1
            if res < -1:
                res = -1
            if res >= 0 and (best < 0 or res < best):
                best, size = res, len(lit)
        return best, size

    def _tail(self, buf: str, q: int, before: int) -> int:
        """Earliest j in [q, before) such that buf[j:] is a proper prefix of a literal, or -1."""
        n = len(buf)
        lo = max(q, n - self._maxlen + 1)
        best = -1
        for lit in self.literals:
            j = buf.find(lit[0], max(lo, n - len(lit) + 1), min(before, n))
            while j >= 0:
                if lit.startswith(buf[j:]) and n - j < len(lit):
                    if best < 0 or j < best:
                        best = j
                    break
                j = buf.find(lit[0], j + 1, min(before, n))
        return best

    def peek(self, buf: str, eos: bool) -> int:
        if self.found is not None:
            return self.found[0]
        return self.q

    def still_live(self, buf: str) -> bool:
        # A tail that is still a proper prefix of a literal: `advance` answers LIVE at `q` (a
        # shorter literal complete at `q` waits for the longer one, as the reference prefers it).
        tail = buf[self.q :]
        return self.found is None and any(
            len(lit) > len(tail) and lit.startswith(tail) for lit in self.literals
        )

    def advance(self, buf: str, eos: bool, limit: int, zw_forbid: int) -> tuple[int, int, int]:
        if self.found is not None:
            return (MATCH, self.found[0], self.found[1])
        n = len(buf)
        q = self.q
        i, size = self._first(buf, q)
        if not eos:
            j = self._tail(buf, q, i if i >= 0 else n)
            if j >= 0:
                self.q = j
                return (LIVE, j, 0) if j <= limit else (NONE, j, 0)
        if i < 0:
            self.q = n
            return (NONE, n + 1 if eos else n, 0)
        if i > limit:
            self.q = i
            return (NONE, i, 0)
        # The longest literal at i (longest first: the first that occurs at i); before end of stream
        # a longer literal that the buffer ends inside of is still possible.
        for lit in self.literals:
            if buf.startswith(lit, i):
                size = len(lit)
                break
            if not eos and len(lit) > size and n - i < len(lit) and lit.startswith(buf[i:]):
                self.q = i
                return (LIVE, i, 0)
        self.q = i
        self.found = (i, i + size)
        return (MATCH, i, i + size)


class PatternCursor(Cursor):
    """A regex delimiter: candidates from its strategy's finder, decided by exact attempts."""

    __slots__ = ("finder", "att", "ctx", "_asked")

    def __init__(self, d: Delimiter, finder: Finder, q: int = 0) -> None:
        # (`Cursor.__init__` inlined: a cursor is made per delimiter per region visit)
        self.d = d
        self.q = q
        self.found: tuple[int, int] | None = None
        self.slots: list[int] | None = None
        self.finder = finder
        self.att: _rx.Attempt | None = None
        self.ctx = _rx.MatchContext()
        # `(q, 2 * len(buf) + eos)` when `q` is the finder's answer for that buffer (set by `peek`):
        # `advance` right after it takes `q` without asking the finder again.
        self._asked = (-1, -1)

    def peek(self, buf: str, eos: bool) -> int:
        if self.found is not None:
            return self.found[0]
        if self.att is not None:
            return self.att.start
        self.q = q = self.finder.next(buf, self.q, eos)
        self._asked = (q, 2 * len(buf) + eos)
        return q

    def reject(self, pos: int) -> None:
        super().reject(pos)
        self.att = None
        self.ctx = _rx.MatchContext()  # the memos saw a successful path: start afresh

    def still_live(self, buf: str) -> bool:
        att = self.att
        return att is not None and self.found is None and att.still_live(buf)

    def resume(self, buf: str, zw_forbid: int) -> bool:
        """`advance` for the live attempt, which the caller has just seen not `still_live`."""
        att = self.att
        if att is None or self.found is not None:
            return False
        status, _, _ = self.advance(buf, False, att.start, zw_forbid, True)
        return status == LIVE

    def advance(
        self, buf: str, eos: bool, limit: int, zw_forbid: int, checked: bool = False
    ) -> tuple[int, int, int]:
        if self.found is not None:
            return (MATCH, self.found[0], self.found[1])
        n = len(buf)
        while True:
            att = self.att
            if att is None:
                q = self.q
                if self._asked != (q, 2 * n + eos):
                    q = self.q = self.finder.next(buf, q, eos)
                # Like the reference, a match starting at the very end of the text is never taken.
                if q > limit or q >= n:
                    return (NONE, q, 0)
                att = self.att = _rx.Attempt(self.d.scan_prog, q, self.ctx)
            try:
                r = att.run(buf, eos, checked)
            except TimeoutError as e:
                raise ValueError(
                    f"{self.d.scope}: a lookbehind of {self.d.source!r} took longer than {_rx.REGEX_TIMEOUT}s"
                ) from e
            if r is _rx.LIVE:
                return (LIVE, att.start, 0)
            checked = False
            self.att = None
            if r is not None and not (r[0] == att.start == zw_forbid):
                self.found = (att.start, r[0])
                if att.prog is not self.d.prog:  # the scan ran with captures
                    self.slots = r[1]
                return (MATCH, att.start, r[0])
            if r is not None:  # a refused zero-width match: its path is not a failure
                self.ctx = _rx.MatchContext()
                self.q = att.start + 1
            else:
                self.q = self.finder.failed(buf, att.start)


class ChainCursor(Cursor):
    """A delimiter decided by walks (`Delimiter.walks`: a `Chain`, or the chains of its leading
    alternation's branches in priority order): candidates from its strategy's finder, each decided
    by walking the branches in order (leading run, lead, then the rest: `startswith` and one C run
    match per run) instead of a matcher attempt; the first that matches is the match there. A walk
    that reaches the end of the text stops there and resumes from where it stopped, so a delimiter
    written in tokens costs its new text only."""

    __slots__ = ("finder", "walk", "_walks", "_shares")

    def __init__(self, d: Delimiter, finder: Finder, q: int = 0) -> None:
        self.d = d
        self.q = q
        self.found: tuple[int, int] | None = None
        self.slots: list[int] | None = None
        self.finder = finder
        walks = d.walks
        assert walks is not None
        # `(start, branch, element, position, start of the run in progress or -1)` of a walk in
        # progress
        self.walk: tuple[int, int, int, int, int] | None = None
        self._walks = walks
        self._shares = d.walk_shares

    def peek(self, buf: str, eos: bool) -> int:
        if self.found is not None:
            return self.found[0]
        if self.walk is not None:
            return self.walk[0]
        self.q = q = self.finder.next(buf, self.q, eos)
        return q

    def reject(self, pos: int) -> None:
        super().reject(pos)
        self.walk = None

    def still_live(self, buf: str) -> bool:
        walk = self.walk
        if walk is None or self.found is not None:
            return False
        s, b, k, p, r = walk
        e = _stopped_again(self._walks[b][k], buf, p, r)
        if e < 0:
            return False
        if e != p:
            # The walk goes on from the end of the run: a long run streamed in costs its new text
            # only, however many feeds keep it live.
            self.walk = (s, b, k, e, r)
        return True

    def resume(self, buf: str, zw_forbid: int) -> bool:
        if self.walk is None or self.found is not None:
            return False
        return self.advance(buf, False, self.walk[0], zw_forbid)[0] == LIVE

    def advance(self, buf: str, eos: bool, limit: int, zw_forbid: int) -> tuple[int, int, int]:
        if self.found is not None:
            return (MATCH, self.found[0], self.found[1])
        n = len(buf)
        walks = self._walks
        while True:
            walk = self.walk
            if walk is None:
                s = self.q = self.finder.next(buf, self.q, eos)
                # Like the reference, a match starting at the very end of the text is never taken.
                if s > limit or s >= n:
                    return (NONE, s, 0)
                b, k, p, r = 0, 0, s, -1
            else:
                s, b, k, p, r = walk
                self.walk = None
            status, k, p, r = _walk(walks[b], buf, k, p, r, eos)
            if status == NONE and b + 1 < len(walks):
                # the next branches, from the start or from where this one failed (`_shares`)
                status, b, k, p, r = _walk_next(walks, self._shares, b, buf, k, p, r, s, eos)
            if status == LIVE:
                self.walk = (s, b, k, p, r)
                return (LIVE, s, 0)
            if status == MATCH:
                if p == s == zw_forbid:
                    # A zero-width match (a lookbehind branch's) where the last zero-width commit
                    # was: refused, as the matcher's attempt refuses it (every branch before it
                    # failed here; a refusal is not a failure, so the finder is not told).
                    self.q = s + 1
                    continue
                self.found = (s, p)
                return (MATCH, s, p)
            self.q = self.finder.failed(buf, s)


def _stopped_again(el: Any, buf: str, p: int, r: int) -> int:
    """Where a walk that stopped at the end of the text at element `el`, position `p` (`r`: where
    the run in progress started, or -1), stops again with the new text (before end of stream),
    when it does so without moving to another element: inside a literal or an optional group's
    lead that the text still only begins, or in a run that the new text extends to its end, or in
    the optional tail waiting for one of its literals. The new position, or -1 (`_walk` decides)."""
    n = len(buf)
    if type(el) is str:
        return p if n - p < len(el) and el.startswith(buf[p:]) else -1
    if len(el) == 2:
        lead = el[0]
        return p if n - p < len(lead) and lead.startswith(buf[p:]) else -1
    e = el[0].run_re.match(buf, p).end()
    hi = el[2]
    if hi is not None and e - r > hi:
        return -1
    if e == n:
        return e
    if len(el) == 4 and e - r >= el[1]:
        # (`_walk`'s order: a literal complete at `e` takes the tail; one begun there waits)
        lits = el[3]
        for lit in lits:
            if buf.startswith(lit, e):
                return -1
        for lit in lits:
            if n - e < len(lit) and lit.startswith(buf[e:]):
                return e
    return -1


def _walk(elements: list[Any], buf: str, k: int, p: int, r: int, eos: bool) -> tuple[int, int, int, int]:
    """Walk a chain's `elements` from element `k` at position `p` (`r`: where the run in progress
    started, or -1): `(MATCH, k, end, r)`, `(LIVE, k, p, r)` (stopped at the end of the text, to be
    resumed from there) or `(NONE, ...)`. A leading lookbehind (`_Behind`) is decided once the rest
    of the walk has not failed, and only then (a walk resumed past it has passed it): it reads only
    text before `p`, so the outcome is the same, and a branch that fails after it, as five of the
    six spelled-out branches of gpt-oss's content opener at each header, costs no `regex` call."""
    if k == 0 and elements and type(elements[0]) is _Behind:
        status, k2, p2, r2 = _walk_on(elements, buf, 1, p, r, eos)
        if status != NONE and not elements[0].holds(buf, p):
            return (NONE, 0, p, r)
        return (status, k2, p2, r2)
    return _walk_on(elements, buf, k, p, r, eos)


def _walk_on(elements: list[Any], buf: str, k: int, p: int, r: int, eos: bool) -> tuple[int, int, int, int]:
    """`_walk` past a leading lookbehind."""
    n = len(buf)
    while k < len(elements):
        el = elements[k]
        if type(el) is str:
            if buf.startswith(el, p):
                p += len(el)
                k += 1
                continue
            if not eos and n - p < len(el) and el.startswith(buf[p:]):
                return (LIVE, k, p, -1)
            return (NONE, k, p, r)
        if type(el) is _Behind:  # (only ever first: `_walk` decides it)
            k += 1
            continue
        size = len(el)
        if size == 3:  # a run
            if r < 0:
                r = p
            e = el[0].run_re.match(buf, p).end()
            hi = el[2]
            if hi is not None and e - r > hi:
                return (NONE, k, p, r)  # the run stops at `hi` before a character of its class
            if e == n and not eos:
                return (LIVE, k, e, r)
            if e - r < el[1]:
                return (NONE, k, p, r)
            p, r = e, -1
            k += 1
            continue
        if size == 2:
            # An optional group's lead `(L, index after the group)`: taken when the text begins
            # with L (nothing after the group can start there), else skipped.
            lead = el[0]
            if buf.startswith(lead, p):
                p += len(lead)
                k += 1
                continue
            if not eos and n - p < len(lead) and lead.startswith(buf[p:]):
                return (LIVE, k, p, -1)
            k = el[1]
            continue
        if r < 0:
            r = p
        e = el[0].run_re.match(buf, p).end()
        hi = el[2]
        # The optional tail `(?:C{lo,hi}(?=L1|L2...))?`, last: taken when the whole run is followed
        # by one of the literals (a shorter run leaves a class character there, which none starts
        # with), else the match ends before it.
        if hi is None or e - r <= hi:
            if e == n and not eos:
                return (LIVE, k, e, r)
            if e - r >= el[1]:
                for lit in el[3]:
                    if buf.startswith(lit, e):
                        return (MATCH, k, e, r)
                if not eos:
                    for lit in el[3]:
                        if n - e < len(lit) and lit.startswith(buf[e:]):
                            return (LIVE, k, e, r)
        return (MATCH, k, r, r)
    return (MATCH, k, p, r)


def _same_element(x: Any, y: Any) -> bool:
    """Whether two walk elements are walked alike (a literal, a run, an optional group's lead, the
    optional tail): equal parts, a run's class by its source and flags. Never a lookbehind (`_walk`
    decides one only from the walk's first element)."""
    if type(x) is str or type(y) is str:
        return type(x) is type(y) and x == y
    if type(x) is not tuple or type(y) is not tuple or len(x) != len(y):
        return False
    for a, b in zip(x, y):
        if type(a) is _rx.CharTest:
            if type(b) is not _rx.CharTest or a.src != b.src or a.flags != b.flags:
                return False
        elif a != b:
            return False
    return True


def _shares(walks: list[list[Any]]) -> list[int]:
    """For each branch `b` but the last: how many leading elements `walks[b]` and `walks[b + 1]`
    have alike (`_same_element`; none when the first is a lookbehind). A walk is a function of the
    elements it has walked and the text, so a walk of `b` that failed at element `k` with state
    `(k, p, r)` tells what `b + 1` does: with `k` below that count, it fails at `k` too (the same
    state); with `k` equal to it, it reaches element `k` in the same state and goes on from there.
    (DSML's call opener `...name="[^"]+"\\s*/?>` spelled out as `/>` then `>`: the second branch
    goes on from the `>` instead of walking the name again.)"""
    out = []
    for a, b in zip(walks, walks[1:]):
        k = 0
        while k < len(a) and k < len(b) and type(a[k]) is not _Behind and _same_element(a[k], b[k]):
            k += 1
        out.append(k)
    return out


def _walk_next(
    walks: list[list[Any]], shares: list[int], b: int, buf: str, k: int, p: int, r: int, s: int, eos: bool
) -> tuple[int, int, int, int, int]:
    """After the walk of branch `b` failed at element `k` (state `p`, `r`): the walks of the next
    branches from `s` in priority order until one does not fail, `(status, branch, k, p, r)`; each
    goes on from the failed walk's state where the branches' shared elements allow (`_shares`)."""
    status = NONE
    while b + 1 < len(walks):
        c = shares[b]
        b += 1
        if k < c:
            continue  # (fails at the same element, in the same state)
        if k == c:
            status, k, p, r = _walk(walks[b], buf, k, p, r, eos)
        else:
            status, k, p, r = _walk(walks[b], buf, 0, s, -1, eos)
        if status != NONE:
            break
    return (status, b, k, p, r)


# --------------------------------------------------------------------------------------------
# JSON string guard (close_outside_strings)


_GUARD_OPENERS: dict[tuple, Any] = {}
_STRING_STOPS: dict[str, Any] = {}
# Whitespace around a `close_after_value` value: JSON's four (Python's literals take the same
# ones), not `str.isspace`'s Unicode set, so a character the value's parser would reject (`\x85`,
# U+2028, ...) is text after the value, never part of its body.
_VALUE_SPACE = frozenset(" \t\n\r")


class StringGuard:
    """Where string literals are in a region body, for fields that close only outside them
    (`content_args: {"close_outside_strings": true}`, the fix for defect D17), and, with
    `close_after_value`, where the body's first complete bracketed value ends.

    Strings are `"..."` with backslash escapes (also `'...'` for `python-call-list` bodies), plus
    the field's `string_delims` pairs (no escapes). The answer for a position depends only on the
    text before it, so streaming and one-shot parsing agree; the body is scanned once, left to
    right, string contents in C (positions are asked in increasing order; an earlier one restarts
    the scan).

    Value end (`close_after_value`): when the first non-whitespace character (JSON whitespace:
    space, tab, newline, carriage return) of the body opens a
    bracket (`[`, `{`, or `(`), the value ends right after the bracket that brings the nesting
    depth back to zero, counted outside strings. The field then also closes, zero-width, at the
    first non-whitespace character after that value (`value_close_at`), so text or a repeated
    call marker written after a call payload is not swallowed by the call."""

    __slots__ = (
        "start",
        "delims",
        "quotes",
        "value_close",
        "_i",
        "_close",
        "_escape",
        "_opener_re",
        "_value_re",
        "_maxdelim",
        "_vi",
        "_vclose",
        "_vescape",
        "_depth",
        "_vend",
        "_wi",
    )

    def __init__(
        self,
        start: int,
        delims: tuple[tuple[str, str], ...],
        quotes: str = '"',
        value_close: bool = False,
    ) -> None:
        self.start = start
        self.delims = delims
        self.quotes = quotes
        self.value_close = value_close
        self._i = start
        self._close: str | None = None  # the text that ends the current string, or None
        self._escape = False
        key = (quotes, delims)
        opener = _GUARD_OPENERS.get(key)
        if opener is None:
            srcs = [regex.escape(q) for q in quotes] + [regex.escape(o) for o, _ in delims]
            opener = _GUARD_OPENERS[key] = regex.compile("|".join(srcs))
        self._opener_re = opener
        vkey = ("value", quotes, delims)
        value_re = _GUARD_OPENERS.get(vkey)
        if value_re is None:
            srcs = [r"[\[\]{}()]"] + [regex.escape(q) for q in quotes] + [regex.escape(o) for o, _ in delims]
            value_re = _GUARD_OPENERS[vkey] = regex.compile("|".join(srcs))
        self._value_re = value_re
        self._maxdelim = max((len(o) for o, _ in delims), default=1)
        # value-end tracking: its own cursor, so that `inside` queries never restart it
        self._vi = start
        self._vclose: str | None = None
        self._vescape = False
        self._depth = -1  # -1: the first non-whitespace character has not been seen yet
        self._vend = -1  # position right after the value, once known; -2: the body holds no value
        self._wi = -1

    def _run(
        self, buf: str, i: int, p: int, close: str | None, escape: bool
    ) -> tuple[int, str | None, bool, bool]:
        """Advance the string scanner from `i` (< `p`) to its next event before `p`: the new
        `(i, close, escape, more)`. `i` stops right after a string opener, an escape or a string's
        end (`more`); with no event before `p`, at `p`, or at the start of a tail that may begin a
        multi-character opener or closer not complete before `p` (`more` False)."""
        if close is None:
            m = self._opener_re.search(buf, i, p)
            if m is None:
                return max(i, p - self._maxdelim + 1), None, False, False
            i = m.start()
            ch = buf[i]
            if ch in self.quotes:
                return i + 1, ch, False, True
            for o, c in self.delims:
                if buf.startswith(o, i) and i + len(o) <= p:
                    return i + len(o), c, False, True
            return i + 1, None, False, True  # pragma: no cover - the search matched an opener
        if len(close) == 1 and close in self.quotes:
            if escape:
                return i + 1, close, False, True
            stop = _STRING_STOPS.get(close)
            if stop is None:
                stop = _STRING_STOPS[close] = regex.compile(f"[{regex.escape(close)}\\\\]")
            m = stop.search(buf, i, p)
            if m is None:
                return p, close, False, False
            i = m.start()
            if buf[i] == "\\":
                return i + 1, close, True, True
            return i + 1, None, False, True
        j = buf.find(close, i, p)
        if j < 0:
            return max(i, p - len(close) + 1), close, False, False
        return j + len(close), None, False, True

    def inside(self, buf: str, p: int) -> bool:
        if p < self._i:
            self._i, self._close, self._escape = self.start, None, False
        i, close, escape = self._i, self._close, self._escape
        run = self._run
        more = True
        while more and i < p:
            i, close, escape, more = run(buf, i, p, close, escape)
        self._i, self._close, self._escape = i, close, escape
        return close is not None

    def value_close_at(self, buf: str, eos: bool) -> tuple[int, int] | None:
        """`(v, w)` once the body's first value has ended at `v`, with `w` the first
        non-whitespace position at or after `v` (`len(buf)` when only whitespace follows so far);
        `None` while the value is still open, or when the body does not start with a bracket.
        Before the end of the stream, a tail that may begin a `string_delims` opener is undecided:
        `(s, len(buf))` with `s` its start."""
        n = len(buf)
        if self._vend == -2:
            return None
        if self._vend < 0:
            i, close, escape, depth = self._vi, self._vclose, self._vescape, self._depth
            if close is not None and not escape and len(close) == 1 and close in self.quotes:
                # Inside a quoted string (most feeds of a call body's value): its next quote or
                # backslash, one C search; none in the new text decides the feed.
                stop = _STRING_STOPS.get(close)
                if stop is None:
                    stop = _STRING_STOPS[close] = regex.compile(f"[{regex.escape(close)}\\\\]")
                m = stop.search(buf, i, n)
                if m is None:
                    self._vi = n
                    return None
                i = m.end()
                if buf[i - 1] == "\\":
                    escape = True
                else:
                    close = None
            run = self._run
            value_re = self._value_re
            stall = -1
            while i < n:
                if close is not None:
                    i, close, escape, more = run(buf, i, n, close, escape)
                    if not more:
                        break
                    continue
                if depth < 0:
                    ch = buf[i]
                    if ch in _VALUE_SPACE:
                        i += 1
                        continue
                    if ch not in "[{(":
                        self._vend = -2
                        return None
                    depth = 0
                m = value_re.search(buf, i, n)
                k = n if m is None else m.start()
                if self.delims and not eos and k > n - self._maxdelim:
                    # A string opener cut off by the end of the text may start before `k`.
                    for s in range(max(i, n - self._maxdelim + 1), k):
                        tail = buf[s:]
                        if any(o.startswith(tail) for o, _ in self.delims):
                            stall = s
                            break
                    if stall >= 0:
                        i = stall
                        break
                if m is None:
                    i = n
                    break
                i = k
                ch = buf[i]
                if ch in "[{(":
                    depth += 1
                    i += 1
                elif ch in "]})":
                    depth -= 1
                    i += 1
                    if depth == 0:
                        self._vend = i
                        break
                else:
                    i, close, escape, _ = run(buf, i, n, None, False)  # a string opener
            self._vi, self._vclose, self._vescape, self._depth = i, close, escape, depth
            if stall >= 0:
                return stall, n
            if self._vend < 0:
                return None
            self._wi = self._vend
        w = self._wi
        while w < n and buf[w] in _VALUE_SPACE:
            w += 1
        self._wi = w
        return self._vend, w


# --------------------------------------------------------------------------------------------
# Watch lists, prefilters and the scanner


_LEAD_MAX = 32


class Prefilter:
    """The per-token fast path of a watch list: one C search of the new text for any delimiter's
    lead (literal or one-character class), a check of the buffer's tail for the start of a literal
    lead, and the trailing run of a leading loop class. Only for watch lists whose every delimiter
    has leads (no `EverySearch`)."""

    def __init__(self, strategies: list[Strategy]) -> None:
        literals: list[str] = []
        classes: list[str] = []
        loops: dict[tuple[str, int], _rx.CharTest] = {}
        after: list[str] = []
        for s in strategies:
            assert s.leads is not None
            literals.extend(s.leads)
            classes.extend(s.classes)
            after.extend(s.after)
            for loop in s.loops:
                loops[(loop.src, loop.flags)] = loop
        # Leads are cut to `_LEAD_MAX` characters: a prefix of a lead is a lead too (quick rejection
        # only needs "no lead occurs", and a buffer tail inside a long lead contains its cut lead).
        # A literal (or character) right after which a zero-width match may start is a lead
        # searched from its length before the first undecided position (`back`).
        self.back = max((len(x) for x in after), default=0)
        self.literals = sorted({x[:_LEAD_MAX] for x in literals + after}, key=len, reverse=True)
        # The earliest start of a tail of the buffer that is a prefix of a literal lead: one search
        # of a trie-shaped pattern anchored at the end (`\Z`). Not of an `after` literal: the match
        # it leads to starts after it, so a tail that begins one holds nothing (the search from
        # `back` before `q` finds it once it is complete).
        only_after = {x[:_LEAD_MAX] for x in after} - {x[:_LEAD_MAX] for x in literals}
        heads = [x for x in self.literals if x not in only_after]
        self.head_re = re.compile(_trie_pattern(heads, True) + r"\Z" if heads else "(?!)")
        self.classes = list(dict.fromkeys(classes))
        self.maxlen = max((len(x) for x in self.literals), default=1)
        firsts = self.firsts = {x[0] for x in self.literals}
        # One character that starts every lead, when there is one (most templates: "<").
        self.char = next(iter(firsts)) if len(firsts) == 1 and not self.classes and not self.back else None
        # One C search for any lead: a trie of the literals in `re` when there are no class leads.
        self.search_re: Any
        if self.classes:
            srcs = [regex.escape(x) for x in self.literals] + self.classes
            self.search_re = regex.compile(_rx.module_safe("|".join(srcs)))
        else:
            self.search_re = re.compile(_trie_pattern(self.literals, False) if self.literals else "(?!)")
        # The leads that hold another lead after their first character: a buffer tail that begins
        # one of them may hold a complete lead too (the held-tail shortcut of `Scanner` is off).
        self.inner = {x for x in self.literals if any(y in x[1:] for y in self.literals)}
        # Without such leads: the tails `head_re` matches where `search_re` matches nothing (a
        # tail that begins a lead, no lead complete at its start), for the held-tail check of
        # `Scanner.decide` by one lookup instead of those two matches.
        self.open_heads = (
            frozenset(
                h[:k] for h in heads for k in range(1, len(h) + 1) if self.search_re.match(h[:k]) is None
            )
            if not self.inner
            else frozenset()
        )
        self.loops = list(loops.values())
        self.loop_any = (
            _rx.CharTest(_rx.module_safe("|".join(f"(?:{t.src})" for t in self.loops)), 0)
            if self.loops
            else None
        )
        self.at0 = any(s.at0 for s in strategies)


def _trie_pattern(literals: list[str], prefixes: bool) -> str:
    """A stdlib `re` pattern for the `literals` shaped as a trie (`<(?:think>|/think>)`), much
    faster than a flat alternation; with `prefixes`, every non-empty prefix matches too
    (`t(?:o(?:=)?)?`). Literals are at most `_LEAD_MAX` long, so the nesting is bounded."""
    end = ""  # a key that cannot be a character: "a literal ends here"
    trie: dict[str, Any] = {}
    for lit in literals:
        node = trie
        for ch in lit:
            node = node.setdefault(ch, {})
        node[end] = {}

    def alt(node: dict[str, Any]) -> str:
        parts = []
        for ch, child in node.items():
            if ch == end:
                parts.append("")
                continue
            rest = {k: v for k, v in child.items() if k != end}
            if not rest:
                parts.append(re.escape(ch))
            elif prefixes:
                parts.append(f"{re.escape(ch)}(?:{alt(rest)})?")
            else:
                parts.append(f"{re.escape(ch)}(?:{alt(child)})")
        return "|".join(parts)

    return f"(?:{alt(trie)})"


class Chain:
    """A pattern whose match at a start has one way to go, decided by a walk (no matcher): literals
    and single-class runs, every run followed only by what its class rejects (a literal whose first
    character it rejects, or a run of a disjoint class), optionally led by an unbounded run
    (`\\s*```\\s*<｜tool▁call▁end｜>`): each run must take its whole maximal run (stopping earlier
    leaves a class character where what follows must start). Two more shapes keep the walk
    deterministic:

    * an optional group led by a literal `L` that no continuation after the group can start with
      at the same place (`(?:<tool_call>\\s*)?<function=`: `<tool_call>` and `<function=` differ
      before either ends; `(?::\\d+)?\\s*<`): the group is taken exactly when the text there begins
      with `L` (skipping it would then fail), else skipped;
    * an optional literal whose every character the run right after it accepts
      (`(?:functions\\.)?[^:<\\s]+`): taking it or not leaves that run ending at the same place, so
      whether and where the pattern matches do not depend on it (the captures, which do, come from
      the `regex` module's match at the committed start); the walk leaves it out.

    Last, perhaps an optional tail `(?:C{lo,hi}(?=L1|L2))?` whose literals `C` rejects the first
    character of (Kimi K2's call closer). The leftmost match starts at the leading run before the
    first occurrence of a lead (clipped at the first undecided position) where the walk matches.

    `elements` (after the leading run) are what `_walk` reads: a literal (str), a run
    `(CharTest, lo, hi or None)`, an optional group's lead `(L, index after the group)` followed by
    the rest of the group, and last perhaps the tail `(CharTest, lo, hi, (L1, L2...))`. `leads` are
    the literals a match can begin with after the leading run; `full` are the elements with the
    leading run first (what a cursor walks from a candidate start)."""

    __slots__ = ("loop", "elements", "leads", "full")

    def __init__(
        self, loop: _rx.CharTest | None, elements: list[Any], leads: list[str], full: list[Any]
    ) -> None:
        self.loop = loop  # the leading run's class (an unbounded `C*`), or None
        self.elements = elements
        self.leads = leads
        self.full = full


def _chain_tail(node: Node) -> tuple[Any, ...] | None:
    """`(?:C{lo,hi}(?=L1|L2...))?` (greedy, with literal `L`s that `C` rejects the first character
    of) as a chain's optional tail `(test, lo, hi, (L1, L2...))`, or None."""
    if node.op is not Op.REP or node.args[:3] != (0, 1, "greedy"):
        return None
    body = _flatten(node.kids[0])
    if len(body) != 2 or body[0].op is not Op.REP or body[1].op is not Op.LOOK:
        return None
    run, look = body
    atom = _unwrap(run.kids[0])
    if atom.op not in _rx.ATOMS or run.args[2] not in ("greedy", "lazy", "possessive"):
        return None
    if not look.args[0] or look.args[1]:
        return None  # a lookbehind or a negative lookahead
    inner = _flatten(look.kids[0])
    branches = (
        _unwrap(inner[0]).kids if len(inner) == 1 and _unwrap(inner[0]).op is Op.ALT else [look.kids[0]]
    )
    lits = []
    for b in branches:
        seq = _flatten(b)
        if not seq or not _is_literal_seq(seq):
            return None
        lits.append("".join(_unwrap(x).args[0] for x in seq))
    test = _rx.CharTest(_rx.atom_source(atom), 0)
    if any(test(x[0]) for x in lits):
        return None
    return (test, run.args[0], run.args[1], tuple(lits))


class _Behind:
    """A chain's leading lookbehind (`(?<=^\\s{0,16})<think>`): decided at the walk's start by one
    `regex` match there (it reads only text before it), with the time limit the matcher gives a
    lookbehind not proven cheap."""

    __slots__ = ("rx", "guarded", "tail")

    def __init__(self, rx: Any, guarded: bool, tail: str = "") -> None:
        self.rx = rx
        self.guarded = guarded
        #: the literal that every text a positive lookbehind accepts ends with (`/>` for DSML's
        #: `(?<=<｜DSML｜ ?invoke name="[^"]{1,256}"\s{0,8}/>)`): where the text before the walk's
        #: start does not end with it, the lookbehind fails without a `regex` call
        self.tail = tail

    def holds(self, buf: str, p: int) -> bool:
        tail = self.tail
        if tail and (p < len(tail) or not buf.startswith(tail, p - len(tail))):
            return False
        if self.guarded:
            _rx.GUARDED_CALLS[0] += 1
            return self.rx.match(buf, p, timeout=_rx.REGEX_TIMEOUT) is not None
        return self.rx.match(buf, p) is not None


class _Opt:
    """An optional group while a chain is analysed (its items: literals, runs, groups)."""

    __slots__ = ("items", "mode")

    def __init__(self, items: list[Any], mode: str) -> None:
        self.items = items
        self.mode = mode


_RUN_MODES = ("greedy", "lazy", "possessive")


def _chain_items(nodes: list[Node], depth: int = 0) -> list[Any] | None:
    """The nodes as chain items (str, `(CharTest, lo, hi)`, `_Opt`), adjacent literals merged, or
    None for another construct."""
    items: list[Any] = []
    for node in nodes:
        node = _unwrap(node)
        if node.op is Op.LIT:
            if items and type(items[-1]) is str:
                items[-1] += node.args[0]
            else:
                items.append(node.args[0])
            continue
        if node.op is Op.LOOK and not node.args[0] and not items and depth == 0:
            bound = node.args[4]
            # (a negative lookbehind holds where its text is absent: no tail test; a literal node
            # is exact, case-insensitive characters are classes)
            tail = "" if node.args[1] else _last_literal(_flatten(node.kids[0]))
            behind = _Behind(
                regex.compile(node.args[3], node.args[2]), bound is None or bound > _rx.SAFE_STEPS, tail
            )
            items.append(behind)  # (a leading lookbehind: zero-width, decided where the walk starts)
            continue
        if node.op is not Op.REP:
            return None
        lo, hi, mode = node.args[0], node.args[1], node.args[2]
        body = _unwrap(node.kids[0])
        if body.op is Op.LIT and (lo, hi) == (0, 1) and mode in _RUN_MODES:
            items.append(_Opt([body.args[0]], mode))  # an optional character: a group of one
            continue
        if body.op in _rx.ATOMS:
            if mode not in _RUN_MODES:
                return None
            items.append((_rx.CharTest(_rx.atom_source(body), 0), lo, hi))
            continue
        if (lo, hi) != (0, 1) or mode not in _RUN_MODES or depth > 4:
            return None
        sub = _chain_items(_flatten(body), depth + 1)
        if not sub:
            return None
        items.append(_Opt(sub, mode))
    # An optional literal that the run right after it takes whole (`(?:functions\.)?[^:<\s]+`)
    # changes neither whether nor where the pattern matches: left out (see `Chain`). (Not with a
    # possessive group, which would not give the literal back, nor with a bounded run.)
    out: list[Any] = []
    for k, it in enumerate(items):
        nxt = items[k + 1] if k + 1 < len(items) else None
        if (
            type(it) is _Opt
            and len(it.items) == 1
            and type(it.items[0]) is str
            and it.mode != "possessive"
            and type(nxt) is tuple
            and nxt[2] is None
            and all(nxt[0](ch) for ch in it.items[0])
        ):
            continue
        out.append(it)
    return out


def _firsts(items: list[Any]) -> tuple[list[Any], bool]:
    """What a match of `items` can start with (literals, and the `CharTest`s of runs) and whether
    it can be empty."""
    out: list[Any] = []
    for it in items:
        if type(it) is str:
            out.append(it)
            return out, False
        if type(it) is _Behind:
            continue  # (zero-width)
        if type(it) is tuple:
            out.append(it[0])
            if it[1] > 0:
                return out, False
            continue
        out.extend(_firsts(it.items)[0])
    return out, True


def _escape_of(test: _rx.CharTest) -> str | None:
    src = test.src
    if src.startswith("(?:") and src.endswith(")") and src[3:-1] in (r"\s", r"\d", r"\w"):
        return src[3:-1]
    return None


def _negated_items(test: _rx.CharTest) -> set[str] | None:
    """The items of a negated class `[^...]` (single characters and `\\X` escapes), or None when its
    body holds anything else (a range, a nested set, a numbered or property escape...)."""
    src = test.src
    if not (src.startswith("(?:[^") and src.endswith("])")):
        return None
    body = src[5:-2]
    out: set[str] = set()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            tok = body[i : i + 2]
            if len(tok) < 2 or tok[1] in "xuUNpP0123456789":
                return None
            out.add(tok)
            i += 2
            continue
        if ch in "[]-&|~" or (ch == "^" and i == 0):
            return None
        out.add(ch)
        i += 1
    return out


# Escape classes with no character in common (Unicode whitespace is neither a word character nor
# a decimal digit).
_DISJOINT_ESCAPES = {frozenset((r"\s", r"\d")), frozenset((r"\s", r"\w"))}


def _disjoint(a: _rx.CharTest, b: _rx.CharTest) -> bool:
    """Whether no character belongs to both classes, proven from their sources (False: not proven):
    an escape class and a negated class that lists it (`\\s` and `[^:<\\s]`), or two escape classes
    known to be disjoint."""
    ea, eb = _escape_of(a), _escape_of(b)
    if ea is not None and eb is not None:
        return frozenset((ea, eb)) in _DISJOINT_ESCAPES
    for e, other in ((ea, b), (eb, a)):
        if e is not None:
            items = _negated_items(other)
            if items is not None and e in items:
                return True
    # A class that lists its characters (`[ \t]`) against any class: each character tested
    # (`[ \t]` and `[^\s<]` in gpt-oss's content opener).
    for x, other in ((a, b), (b, a)):
        chars = _listed_chars(x)
        if chars is not None:
            return not any(other(ch) for ch in chars)
    return False


_CHAR_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v"}


def _listed_chars(test: _rx.CharTest) -> set[str] | None:
    """The characters of a class that lists them one by one (`[ \\t]`, `[,;]`), or None when its
    body holds anything else (a negation, a range, a class escape, a nested set...)."""
    src = test.src
    if not (src.startswith("(?:[") and src.endswith("])")) or src.startswith("(?:[^"):
        return None
    body = src[4:-2]
    out: set[str] = set()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1 : i + 2]
            if nxt in _CHAR_ESCAPES:
                out.add(_CHAR_ESCAPES[nxt])
            elif nxt and not nxt.isalnum() and nxt.isascii():
                out.add(nxt)
            else:
                return None
            i += 2
            continue
        if ch in "[]-&|~":
            return None
        out.add(ch)
        i += 1
    return out or None


def _compatible(lit: str, thing: Any) -> bool:
    """Whether a match of what starts with `thing` (a literal or a run's class) could start where
    the text begins with the literal `lit`."""
    if type(thing) is str:
        return thing.startswith(lit) or lit.startswith(thing)
    return bool(thing(lit[0]))


def _forced(items: list[Any], after: list[Any], after_nullable: bool) -> bool:
    """Whether every run and optional group of `items` has one way to go, `after` being what can
    follow the items (see `Chain`)."""
    for k, it in enumerate(items):
        if type(it) is str or type(it) is _Behind:
            continue
        follow, nullable = _firsts(items[k + 1 :])
        if nullable:
            follow = follow + after
            nullable = after_nullable
        if nullable:
            return False  # a run or a group at the end: where the match ends is not forced
        if type(it) is tuple:
            test = it[0]
            for thing in follow:
                if test(thing[0]) if type(thing) is str else not _disjoint(test, thing):
                    return False
            continue
        lead = it.items[0]
        if type(lead) is not str or any(_compatible(lead, thing) for thing in follow):
            return False
        if not _forced(it.items, follow, False):
            return False
    return True


def _encode(items: list[Any], out: list[Any]) -> None:
    """Append the chain items as `_walk` elements (an optional group: its lead with the index after
    the group, then the rest of the group)."""
    for it in items:
        if type(it) is _Opt:
            at = len(out)
            out.append(None)
            _encode(it.items[1:], out)
            out[at] = (it.items[0], len(out))
        else:
            out.append(it)


def chain_of(tree: Node) -> Chain | None:
    """The `Chain` form of a pattern's tree, or None when it is not one."""
    return _chain_of_nodes(_flatten(tree))


def _chain_of_nodes(nodes: list[Node]) -> Chain | None:
    tail = _chain_tail(_unwrap(nodes[-1])) if nodes else None
    if tail is not None:
        nodes = nodes[:-1]
    items = _chain_items(nodes)
    if not items:
        return None
    loop = None
    if type(items[0]) is tuple:
        test, lo, hi = items[0]
        if lo != 0 or hi is not None:
            return None
        loop = test
        items = items[1:]
    firsts, nullable = _firsts(items)
    if nullable or not all(type(x) is str for x in firsts):
        return None  # a match must begin with a literal after the leading run
    # The last item is a literal (a run or a group right before the end or the tail would leave
    # where the match ends open), so `_forced` sees a literal after every run and group; or an
    # unbounded greedy run of at least one character (`\\s*<tool_call>\\s*(?P<name>[^<\\s]+)`),
    # which takes its whole maximal run: what comes before it is forced with the run's class after.
    head = [(loop, 0, None)] if loop is not None else []
    last = items[-1]
    if type(last) is tuple and tail is None and _greedy_end(nodes[-1]):
        if len(items) < 2 or not _forced(head + items[:-1], [last[0]], False):
            return None
    elif type(last) is not str or not _forced(head + items, [], True):
        return None
    elements: list[Any] = []
    full: list[Any] = []
    _encode(items, elements)
    _encode(head + items, full)  # (the groups' indices count the leading run)
    if tail is not None:
        elements.append(tail)
        full.append(tail)
    return Chain(loop, elements, list(dict.fromkeys(firsts)), full)


def _greedy_end(node: Node) -> bool:
    """Whether the node is `C+` (or `C{n,}`, n >= 1), greedy or possessive: as a chain's last item
    it ends the match at the end of its maximal run."""
    node = _unwrap(node)
    return (
        node.op is Op.REP
        and node.args[0] >= 1
        and node.args[1] is None
        and node.args[2] in ("greedy", "possessive")
        and _unwrap(node.kids[0]).op in _rx.ATOMS
    )


def _same_loop(a: _rx.CharTest | None, b: _rx.CharTest | None) -> bool:
    return a is b or (a is not None and b is not None and (a.src, a.flags) == (b.src, b.flags))


def _chain_leads(
    entries: list[Watch], pre: Prefilter | None, late: bool = False
) -> dict[str, tuple[int, _rx.CharTest | None, list[list[Any]], bool, list[int]]] | None:
    """For `Scanner._chain_decide`: the leads, as the prefilter's search reports them (cut to
    `_LEAD_MAX`), that only walks can decide: `{cut lead: (entry index, leading run's class, the
    walks, exhaustive, the walks' `_shares`)}`. A lead qualifies when no other lead of the list is
    a prefix of it, begins with it or holds it after its first character (no other delimiter, nor another lead of its
    own, can match from there, nor from a tail before it that begins a longer lead: `b` in
    `b|abcd` is found at 1 in `ab` while `abcd` may still match at 0), no
    leading loop of the list takes its first character (no other delimiter's run can reach over
    it), and the branches of its delimiter that start with it share one leading run: then at the
    leftmost lead in the text only those branches can match at or before it, in their priority
    order. The walks are the chains of those branches up to the first that is not one;
    `exhaustive` when all are (their failing decides that nothing matches there: otherwise the
    cursors decide). An `after` literal (DSML's `/>`) is searched as a lead too, so a match right
    after one is preceded by that literal's hit; a lead that one may begin at the same place does
    not qualify. None when no lead qualifies (or the list has class or `^` leads, which the
    prefilter does not find as literals; `^` leads only until the first position is released:
    with `late`, as if they were not there)."""
    if pre is None or pre.classes or (pre.at0 and not late):
        return None
    leads: list[tuple[int, str]] = []
    # `after` literals (DSML's `/>`): a zero-width match may start right after one, and the
    # prefilter's search reports it where it starts, before any lead found after that: a branch
    # found that way (leads `[]`) cannot match at or before a lead the search finds first, unless
    # an `after` literal may start at the same place (one begins the other: then not walked).
    afters: list[str] = []
    for j, w in enumerate(entries):
        assert w.delimiter.strategy.leads is not None  # (a prefilter exists)
        leads.extend((j, x[:_LEAD_MAX]) for x in w.delimiter.strategy.leads)
        afters.extend(x[:_LEAD_MAX] for x in w.delimiter.strategy.after)
    out: dict[str, tuple[int, _rx.CharTest | None, list[list[Any]], bool, list[int]]] = {}
    for j, w in enumerate(entries):
        branches = w.delimiter.branches
        if branches is None:
            continue
        # The leads of its own branches (what a match of each starts with after its leading run;
        # the prefilter's leads also spell out optional characters after them: `<a>x` for
        # `<a>(?:x)?[a-z]+`, which the trie may report instead).
        mine = [y[:_LEAD_MAX] for x in branches for y in (x.leads or ())]
        for b in branches:
            if b.chain is None:
                continue
            for lead in b.chain.leads:
                cut = lead[:_LEAD_MAX]
                if cut in out or _lead_clashes(cut, j, mine, leads, pre):
                    continue
                if any(a.startswith(cut) or cut.startswith(a) for a in afters):
                    continue
                # Its branches that may match where it is found (a lead of each begins the other:
                # `<a>` and `<a>b` in `<a>|<a>b`), in their priority order.
                own = _compatible_branches(branches, cut)
                if any(x.leads is None or not _same_loop(x.loop, b.loop) for x in own):
                    continue
                walks: list[list[Any]] = []
                for x in own:
                    if x.chain is None:
                        break
                    walks.append(x.chain.elements)
                if walks:
                    got = (j, b.loop, walks, len(walks) == len(own), _shares(walks))
                    for k, y in leads:
                        # (A shorter lead the prefilter may report instead maps to these walks only
                        # when the same branches are all that can match where it is found.)
                        # It must qualify itself too: another delimiter's lead may begin with
                        # it (`<a` of `<aX|<a` against `<a>`), which the longer lead does not.
                        if (
                            k == j
                            and (y.startswith(cut) or cut.startswith(y))
                            and y not in out
                            and (
                                y == cut
                                or (
                                    _compatible_branches(branches, y) == own
                                    and not _lead_clashes(y, j, mine, leads, pre)
                                    and not any(a.startswith(y) or y.startswith(a) for a in afters)
                                )
                            )
                        ):
                            out[y] = got
    return out or None


def _lead_clashes(cut: str, j: int, mine: list[str], leads: list[tuple[int, str]], pre: Prefilter) -> bool:
    """Whether the (cut) lead `cut` of entry `j` fails `_chain_leads`'s conditions: another entry's
    lead is a prefix of it, begins with it or holds it after its first character, one of its own
    (`mine`) holds it after its first character, or a leading loop of the list takes its first
    character."""
    return (
        any(k != j and (y.startswith(cut) or cut.startswith(y) or cut in y[1:]) for k, y in leads)
        or any(cut in y[1:] for y in mine)
        or any(loop(cut[0]) for loop in pre.loops)
    )


def _compatible_branches(branches: list[_Branch], lead: str) -> list[_Branch]:
    """The branches whose match may start where the text begins with the (cut) lead."""
    return [
        x
        for x in branches
        if x.leads is None
        or any(y[:_LEAD_MAX].startswith(lead) or lead.startswith(y[:_LEAD_MAX]) for y in x.leads)
    ]


class WatchList:
    """The delimiters watched in one kind of region, with their combined quick-rejection data."""

    __slots__ = ("entries", "prefilter", "lit", "chains", "late_chains", "anchors", "plans")

    def __init__(self, entries: list[Watch]) -> None:
        self.entries = entries
        strategies = [w.delimiter.strategy for w in entries]
        self.prefilter = (
            Prefilter(strategies) if strategies and all(s.leads is not None for s in strategies) else None
        )
        # A single literal closer (most explicit regions): the whole decision is one str.find.
        d = entries[0].delimiter if len(entries) == 1 else None
        self.lit = (
            d.literals[0] if d is not None and d.literals is not None and len(d.literals) == 1 else None
        )
        # Chains whose lead, as the prefilter finds it, can begin no other delimiter's match there
        # (`Scanner._chain_decide`): by the lead the prefilter finds, `{cut lead: (index, walk)}`.
        self.chains = _chain_leads(entries, self.prefilter)
        # Once the first position is released, a delimiter that can match only there (`^`) is out
        # of the race: the chains as if it were not watched (`Scanner._wake`).
        pre = self.prefilter
        self.late_chains = _chain_leads(entries, pre, True) if pre is not None and pre.at0 else self.chains
        # When every delimiter that can match only at 0 is `^` and a chain: their walks from 0
        # (`Scanner._anchor_walk`), which decide whether position 0 is out without cursors.
        self.anchors: list[list[Any]] | None = None
        if pre is not None and pre.at0:
            walks: list[list[Any]] = []
            for w in entries:
                st = w.delimiter.strategy
                if st.at0:
                    if not isinstance(st, AnchorSearch) or w.delimiter.anchored is None:
                        walks = []
                        break
                    walks.append(w.delimiter.anchored)
            self.anchors = walks or None
        # A scanner's derived settings, made once (`Scanner.__init__`): unguarded after 0, at 0;
        # guarded without, with a value close.
        self.plans: list[tuple | None] = [None, None, None, None]

    def scanner(self, q: int, states: dict[int, Any], guard: StringGuard | None = None) -> Scanner:
        return Scanner(self, q, states, guard)


def _one_lead(pre: Prefilter | None) -> str | None:
    """A prefilter's lead when it has exactly one, of one first character and no leading loop
    (`Scanner._lead1`), else None."""
    if pre is None or pre.char is None or len(pre.literals) != 1 or pre.loops:
        return None
    lead: str = pre.literals[0]
    return lead


class Scanner:
    """Decides, for one region visit, where the next delimiter is (see the module docstring).

    `decide(buf, eos)` returns `Hold` or `Commit`; `q` (read-only outside) is the first position
    whose fate is still open: everything before it was released."""

    __slots__ = (
        "entries",
        "q",
        "guard",
        "_cursors",
        "_states",
        "_pre",
        "_gpre",
        "_tails",
        "_searched",
        "_hold",
        "live",
        "lit",
        "pending",
        "_pend_idx",
        "_every",
        "_char",
        "_chars",
        "_rare",
        "_quietable",
        "_vguard",
        "_gloops",
        "_maxlen",
        "_loop_any",
        "_tail_at",
        "_tail_lead",
        "chains",
        "_catt",
        "_cwalks",
        "_lead1",
        "_late",
        "_awalks",
        "_lead_at",
        "_lead",
        "quiet",
        "trip1",
        "trip2",
        "trip_loop",
    )

    _cwalks: tuple[int, Any, list[list[Any]], bool, list[int]]
    # `_prefiltered`'s leftmost lead and its start, when it answered -1 (read by `_chain_decide`;
    # not the match object: it would hold the buffer, which `_feed` grows in place)
    _lead_at: int
    _lead: str
    # (settings: `_configure`)
    _pre: Prefilter | None
    _gpre: Prefilter | None
    lit: str | None
    _late: WatchList | None
    _char: str | None
    _chars: tuple[str, str | None, int] | None
    _rare: bool | None
    _quietable: bool
    _maxlen: int
    _loop_any: _rx.CharTest | None
    _gloops: bool
    _vguard: StringGuard | None
    _lead1: str | None
    chains: dict[str, tuple[int, _rx.CharTest | None, list[list[Any]], bool, list[int]]] | None

    def __init__(
        self, watch: WatchList, q: int, states: dict[int, Any], guard: StringGuard | None = None
    ) -> None:
        self.entries = watch.entries
        self.q = q
        self._states = states
        self.guard = guard
        self._cursors: list[Cursor] | None = None
        self._searched = q  # the prefilter searched buf[q:_searched] and found no lead
        self._awalks: list[list[Any]] | None = None  # `_anchor_walk`'s walks: elements, k, p, r
        self._tails: list[_RunTail] = []
        self._tail_at = -1  # `_prefiltered`: where the held tail that begins a lead starts
        self._tail_lead = ""  # and the lead it begins
        # `_chain_decide`'s walk in progress: (entry, the walked branch's elements, start, lead
        # position, element, position, start of the run in progress or -1); `_cwalks` (set with
        # it) is what the lead it started at maps to in `chains` (the branches to walk next if it
        # fails)
        self._catt: tuple[int, list[Any], int, int, int, int, int] | None = None
        self._hold = Hold(q)
        # A release of everything after which a feed with none of the trip characters releases
        # everything too, by the same path (see `ResponseParser._feed`, which then does not ask):
        # returned in place of `_hold` there. ("" trips nothing is ever without.)
        self.quiet = Hold(q)
        self.trip1 = self.trip2 = ""
        # With a leading loop: the released text ended with none of its characters, and a next
        # feed that ends with one holds its trailing run (the parser asks then).
        self.trip_loop: _rx.CharTest | None = None
        self.live: Cursor | None = None  # the cursor whose undecided attempt set the last hold
        self.pending: tuple[list[Watch], int] = ([], -1)  # what was undecided at the last hold
        self._pend_idx: list[int] = []  # the indices of those cursors
        self._every = False  # `undecided`: no early hold (`_scan`)
        # The settings depend on the watch list and, unguarded, on whether q is 0, guarded, on
        # whether the guard has a value close (`_configure` reads nothing else of `q` or the
        # guard; the guard itself is kept as `_vguard` exactly when that flag is set): made once
        # per watch list and case (a scanner is made at every commit), immutable once made.
        k = (2 + guard.value_close) if guard is not None else int(q == 0)
        plan = watch.plans[k]
        if plan is None:
            self._configure(watch, q, guard)
            watch.plans[k] = (
                self._pre,
                self._gpre,
                self.lit,
                self._late,
                self._char,
                self._chars,
                self._rare,
                self._maxlen,
                self._loop_any,
                self._gloops,
                self._vguard is not None,  # (a flag: the plan keeps no visit's guard)
                self._lead1,
                self.chains,
                self._quietable,
            )
            return
        (
            self._pre,
            self._gpre,
            self.lit,
            self._late,
            self._char,
            self._chars,
            self._rare,
            self._maxlen,
            self._loop_any,
            self._gloops,
            vguard,
            self._lead1,
            self.chains,
            self._quietable,
        ) = plan
        self._vguard = guard if vguard else None  # (this visit's guard)

    def _configure(self, watch: WatchList, q: int, guard: StringGuard | None) -> None:
        """The scanner's settings for its watch list, guard and start (see `__init__`)."""
        # The prefilter and the single-literal shortcut skip the guard's checks: not with a guard.
        self._pre = watch.prefilter if guard is None else None
        # With a string guard the prefilter only decides feeds with nothing to hold (no lead, no
        # tail of one, no loop run): then no candidate exists, inside a string or not (with
        # `close_after_value`, while the body's value is still open: its zero-width close needs
        # no lead).
        self._gpre = watch.prefilter if guard is not None else None
        self.lit = watch.lit if guard is None else None
        pre = self._pre
        # A `^` lead keeps the per-token path and the chain walks off while the first position is
        # undecided (`q == 0`): `_wake` turns them on once it is released.
        at0 = pre is not None and pre.at0 and q == 0
        self._late = watch if at0 and self.lit is None else None
        # The inlined per-token path of `decide`: one or two lead characters, no `^` to care about.
        # (`_char` is set in one branch or the other, never set to None before `_per_token` sets
        # it: a type checker, and mypyc's compiled code, would take it for None after that call.)
        self._chars = None
        self._maxlen = pre.maxlen - 1 if pre is not None else 0
        if pre is not None and self.lit is None and not at0:
            self._per_token(pre)
        else:
            self._char = None
        if self.lit is not None:
            self._maxlen = len(self.lit)
        self._loop_any = pre.loop_any if pre is not None else None
        self._gloops = False  # guarded, with a leading loop: a trailing loop character goes on
        gpre = self._gpre
        self._vguard = None
        if gpre is not None and guard is not None and not gpre.at0:
            # Under a string guard (Kimi's JSON call bodies), a feed with no lead character
            # releases everything as well (the guarded prefilter's answer there): the same inlined
            # path. With `close_after_value` (gpt-oss), only while the body's value is still open
            # (`_vguard`); with a leading loop (Llama's `\\s*;(?=\\s*\\{)`), only when the last
            # character is not the loop's (`_gloops`: else the guarded path, as before).
            self._maxlen = gpre.maxlen - 1
            self._per_token(gpre)
            self._loop_any = gpre.loop_any
            self._gloops = bool(gpre.loops)
            if guard.value_close:
                self._vguard = guard
        # One literal lead and no leading loop, unguarded: the per-token path also decides a feed
        # with the lead's first character but not the lead (see `decide`).
        # (Under a string guard without a value close too (Gemma 4's call bodies: `<|"|>` against
        # `<tool_call|>`), where a tail that begins the lead goes on to the guarded paths.)
        lp = pre if pre is not None else gpre if guard is not None and not guard.value_close else None
        self._lead1 = _one_lead(lp) if self._char is not None else None
        # Under a JSON string guard too, when no value close competes and no leading loop can
        # run up to a lead (Kimi K2's call closer): a walk's start is checked outside strings.
        self.chains = watch.chains if at0 or pre is None else watch.late_chains
        if self.lit is not None:
            self.chains = None  # (one literal: its own shortcut below, one `str.find`)
        if guard is not None and self.chains is not None:
            gp = watch.prefilter
            if guard.value_close or gp is None or gp.loops or gp.at0:
                self.chains = None
        self._split_paths()

    def _split_paths(self) -> None:
        """The inlined per-token path of `decide` takes one lead character and nothing else to
        check (`_char`); the other per-token cases go to `_per_token_general` (`_chars`: the one or
        two characters and the `after` literals' length; `_per_token` sets it for two characters or
        an `after` literal)."""
        if self._char is not None and (self._vguard is not None or self._gloops):
            self._chars = (self._char, None, 0)
            self._char = None
        self._rare = True if self._chars is not None or self._late is not None else None
        # Whether a release of everything by another path may be quiet (`_released`): there is
        # a per-token path to take the next feeds, and no guarded loop.
        self._quietable = (self._char is not None or self._chars is not None) and not self._gloops

    def _anchor_walk(self, buf: str, watch: WatchList) -> Hold | None:
        """While position 0 is undecided (before end of stream): walk the `^` delimiters' chains
        from 0 (resumed where the text ended). All failing: 0 is out for them, `_wake` now and the
        caller decides as for a watch list without them (None). One still walking: hold at 0, as
        the cursors would (a longer match may start there). One matching: None, the cursors
        decide."""
        walks = self._awalks
        if walks is None:
            assert watch.anchors is not None
            walks = self._awalks = [[elements, 0, 0, -1] for elements in watch.anchors]
        live = False
        for a in walks:
            if a[1] < 0:
                if a[1] == -2:
                    return None  # (matched)
                continue
            status, k, p, r = _walk(a[0], buf, a[1], a[2], a[3], False)
            if status == MATCH:
                a[1] = -2
                return None
            if status == LIVE:
                a[1], a[2], a[3] = k, p, r
                live = True
            else:
                a[1] = -1
        if live:
            return self._hold_at(0)
        self._wake(watch)
        return None

    def _rare_paths(self, buf: str) -> Hold | None:
        """`decide`'s per-token steps that few watch lists need (`_rare`), before end of stream and
        with no attempt live: a `^` lead's phase (`_late`: wake once 0 is released, or decide 0 by
        the anchors' walks) and the per-token path's other forms (`_chars`). None: not decided
        here."""
        late = self._late
        if late is not None:
            if self.q:
                self._wake(late)  # (the per-token path and the walks from now on)
            elif late.anchors is not None:
                held = self._anchor_walk(buf, late)
                if held is not None:
                    return held
        if self._chars is not None:
            return self._per_token_general(buf)
        return None

    def _per_token_general(self, buf: str) -> Hold | None:
        """`decide`'s per-token path for the watch lists its inlined form leaves out (`_chars`):
        two lead characters, an `after` literal searched `back` before `q`, a value close still
        open (`_vguard`), a guarded leading loop (`_gloops`: a trailing loop character goes on to
        the guarded paths). None: not decided here."""
        assert self._chars is not None
        char, char2, back = self._chars
        q = self.q
        n = len(buf)
        start = self._searched - self._maxlen
        lo = start if start > q else q - back
        if lo < 0:
            lo = 0  # (`str.find` counts a negative start from the end)
        if n <= q or buf.find(char, lo) >= 0 or (char2 is not None and buf.find(char2, lo) >= 0):
            return None
        vg = self._vguard
        if vg is not None and vg.value_close_at(buf, False) is not None:
            return None
        la = self._loop_any
        h = self._hold
        if la is not None and la(buf[n - 1]):
            if self._gloops:
                return None
            if q == n - 1 or not la(buf[n - 2]):
                n -= 1  # (the new character alone, or a run clipped at `q`)
            else:
                n = self._trailing(buf, self._pre)  # type: ignore[arg-type]
        elif vg is None or vg._vend == -2:
            # Everything released, nothing held: a next feed without the lead characters (that
            # does not end in a loop character) comes here again (searched from `back` before
            # the end, which holds neither) and releases everything (no value close to find:
            # none, or no value in the body).
            self.trip1, self.trip2 = char, char2 or char
            self.trip_loop = la
            h = self.quiet
        elif (
            char2 is None
            and (close := vg._vclose) is not None
            and not vg._vescape
            and len(close) == 1
            and close in vg.quotes
        ):
            # Inside a quoted string of the body's value (a JSON call body's argument, the most
            # feeds of one): without its quote, the new text leaves the value open. (The guard's
            # value scan is not moved: its next call scans the text from where it stopped, so it
            # sees a backslash such a feed ends with.)
            self.trip1, self.trip2 = char, close
            self.trip_loop = la
            h = self.quiet
        self._searched = n
        self.q = n
        h.at = n
        return h

    def _per_token(self, pre: Prefilter) -> None:
        """Set up the inlined per-token path for a prefilter: its lead character, or the two
        (`</x>` and an `after` literal `/>`: DSML's call bodies; `;` and `<|eot_id|>`: Llama's),
        searched from `_maxlen` before the last searched end and `back` before `q` (an `after`
        literal that ends there or runs over it)."""
        self._char = pre.char
        if pre.char is None and not pre.classes and 1 <= len(pre.firsts) <= 2:
            self._char, *more = sorted(pre.firsts)
            self._chars = (self._char, more[0] if more else None, pre.back)
            self._char = None
            self._maxlen = pre.maxlen - 1 + pre.back

    def _wake(self, watch: WatchList) -> None:
        """The first position is released (`q > 0`): a `^` lead can no longer match, so the
        per-token path and the chain walks decide as for a watch list without it (unguarded)."""
        self._late = None
        pre = self._pre
        assert pre is not None
        self._per_token(pre)
        self._lead1 = _one_lead(pre)
        self.chains = watch.late_chains
        self._split_paths()

    @property
    def cursors(self) -> list[Cursor]:
        cursors = self._cursors
        if cursors is None:
            q = self.q
            states = self._states
            # (each cursor starts at `q`: made there, not set after)
            cursors = self._cursors = [w.delimiter.cursor(states, q) for w in self.entries]
        return cursors

    def _hold_at(self, at: int) -> Hold:
        self.q = at
        h = self._hold
        h.at = at
        return h

    def _released(self, buf: str, n: int) -> Hold:
        """`_hold_at(n)` for a hold that releases everything (`n` the end of `buf`, searched to
        it), found by a path other than the per-token path, in a scanner that has one
        (`_quietable`): the `quiet` hold when a next feed
        without the per-token path's lead characters would be released by that path (nothing
        in progress, no loop run to hold, the `after` literals' reach back clean, the value
        close's scan inside a string or absent)."""
        self.q = n
        h = self._hold
        char = self._char
        chars = self._chars
        if (
            self._searched == n
            and self.live is None
            and self._catt is None
            and self._tail_at < 0
            and self._late is None
            and ((la := self._loop_any) is None or not la(buf[n - 1]))
        ):
            if char is not None:
                self.trip1 = self.trip2 = char
                self.trip_loop = la
                h = self.quiet
            elif chars is not None:
                char, char2, back = chars
                lo = n - back if n > back else 0
                if buf.find(char, lo) < 0 and (char2 is None or buf.find(char2, lo) < 0):
                    vg = self._vguard
                    if vg is None or vg._vend == -2:
                        self.trip1, self.trip2 = char, char2 or char
                        self.trip_loop = la
                        h = self.quiet
                    elif (
                        char2 is None
                        and vg._vend == -1
                        and (close := vg._vclose) is not None
                        and not vg._vescape
                        and len(close) == 1
                        and close in vg.quotes
                    ):
                        self.trip1, self.trip2 = char, close
                        self.trip_loop = la
                        h = self.quiet
        h.at = n
        return h

    # -- the fast paths -----------------------------------------------------------------------

    def undecided(self, buf: str, zw_forbid: int) -> tuple[list[Watch], int]:
        """The delimiters whose match at the hold point is still undecided, and that point (asks
        every cursor; for the end of the stream, where such a match is cut off)."""
        self.pending = ([], -1)
        self.live = None
        self._every = True  # (every cursor asked at the hold point: no early hold in `_scan`)
        self._scan(buf, False, zw_forbid)
        return self.pending

    def _trailing(self, buf: str, pre: Prefilter) -> int:
        """Start of the earliest trailing run of a leading loop class (>= q), over new text only."""
        tails = self._tails
        if not tails:
            tails = self._tails = [_RunTail(loop) for loop in pre.loops]
        h = len(buf)
        q = self.q
        for t in tails:
            s = t.start(buf, q)
            if s < h:
                h = s
        return max(self.q, h)

    def _loop_hold(self, buf: str, pre: Prefilter) -> int:
        """`_trailing`, with the usual cases found without a call: the last character is in no
        leading loop class (hold nothing), or only it is ("word ")."""
        n = len(buf)
        la = self._loop_any
        if la is not None:
            last = buf[n - 1]
            hit = la.cache.get(last)
            if hit is None:
                hit = la(last)
            if not hit:
                return n
            if n >= 2 and self.q < n - 1 and not la(buf[n - 2]):
                return n - 1
        return self._trailing(buf, pre)

    def _prefiltered(self, buf: str, pre: Prefilter) -> int:
        """-1 when a lead occurs in the unresolved text (the cursors must look); else the hold
        point: the start of a tail of the buffer that begins a lead, or of a leading loop's run
        before it (the trailing run when there is no such tail), or the end of the buffer."""
        n = len(buf)
        q = self.q
        self._tail_at = -1
        # An `after` lead that ended at the last searched position makes the position right after
        # it (then the end of the buffer, never a candidate) one now: search it again.
        start = self._searched - pre.maxlen + 1 - pre.back
        lo = q - pre.back if q else 0
        if start < lo:
            start = lo
        if pre.char is not None and buf.find(pre.char, start) < 0:
            # The character that starts every lead is absent (one `str.find`).
            self._searched = n
            return self._loop_hold(buf, pre) if pre.loops else n
        m = pre.search_re.search(buf, start)
        if m is not None:
            self._lead_at = m.start()
            self._lead = m.group()
            return -1
        self._searched = n
        # A tail that begins a literal lead: nothing can start before it (or before a loop run
        # that reaches it), so hold from there without asking the cursors.
        lo = n - pre.maxlen + 1
        m = pre.head_re.search(buf, lo if lo > q else q)
        if m is not None:
            h = j = m.start()
            for loop in pre.loops:
                r = run_start(loop, buf, q, j)
                if r < h:
                    h = r
            if not pre.classes and len(pre.firsts) <= 2 and pre is self._pre:
                tail = buf[j:]
                for lead in pre.literals:
                    if lead.startswith(tail):
                        if lead not in pre.inner:
                            self._tail_at, self._tail_lead = j, lead
                        break
            return h
        return self._loop_hold(buf, pre) if pre.loops else n

    def decide(self, buf: str, eos: bool, zw_forbid: int = -1) -> Hold | Commit:
        """The decision for the buffer `buf` (see the class docstring)."""
        j = self._tail_at
        if j >= 0 and not eos:
            # The last hold was a tail that begins the lead `_tail_lead` (a long opener streamed in
            # tokens; set by `_prefiltered`). While the tail still begins it, no lead can occur:
            # every position before the tail failed for good, the lead holds no other lead after
            # its first character (`Prefilter.inner`), and the loop run before the tail (where
            # the hold is) is unchanged.
            n = len(buf)
            lead = self._tail_lead
            if n - j < len(lead) and lead.startswith(buf[j:]):
                self._searched = n
                return self._hold  # still at `q`, where that tail (or the loop run before it) starts
            # Or it now begins another lead (`<｜DSML｜` + `function` leaves `<｜DSML｜ function_calls>`
            # for `<｜DSML｜function_calls>`): the same holds when no lead holds another after its
            # first character, and none is complete at the tail's start: the tail is one of the
            # prefilter's `open_heads` (one lookup; the two trie matches it stands for cost
            # ~0.4 us a token of a marker streamed in pieces).
            pre = self._pre
            if pre is None:
                pre = self._gpre
            if pre is not None and buf[j:] in pre.open_heads:
                self._searched = n
                return self._hold
            self._tail_at = -1
        elif self.q >= len(buf) and (not eos or self.guard is None):
            # No text in the region yet (a region that opened at the end of the buffer): no match
            # is taken at the very end, so nothing is decided before the end of the stream, nor
            # at it (without a guard's zero-width close: nothing for the cursors to scan).
            return self._hold_at(self.q)
        catt = self._catt
        walked = False
        if catt is not None and not eos and self.live is None:
            # A chain walk stopped at the end of the text (a long marker or a name streamed in
            # tokens): while the new text leaves it stopped at the same element (`_stopped_again`),
            # `_walk` would stop there too (`_chain_decide`'s hold at the walk's start): asked
            # without the two calls.
            el = catt[1][catt[4]]
            p = catt[5]
            if type(el) is str:
                if len(buf) - p < len(el) and el.startswith(buf[p:]):
                    return self._hold_at(catt[2])
            else:
                # (a group's lead, a run that the new text extends to its end, or the optional
                # tail waiting for one of its literals)
                e = _stopped_again(el, buf, p, catt[6])
                if e >= 0:
                    if e != p:
                        self._catt = catt[:5] + (e, catt[6])
                    return self._hold_at(catt[2])
            if self._rare is None:
                # The walk moves on: resumed at once. (The per-token paths below decide nothing
                # while it is in progress: the lead it started at is in the text not released.)
                chained = self._chain_decide(buf)
                if chained is not None:
                    return chained
                walked = True
        char = self._char
        if char is not None and not eos and self.live is None:
            # The per-token path, inlined: no lead character in the new text, and the last
            # character cannot continue a leading loop (or there is none): release everything.
            q = self.q
            n = len(buf)
            start = self._searched - self._maxlen
            if n > q and buf.find(char, start if start > q else q) < 0:
                self._searched = n
                la = self._loop_any
                h = self._hold
                if la is None or not la(buf[n - 1]):
                    # Everything released, nothing held: a next feed without `char` (that does
                    # not end in a loop character) comes here again and releases everything (the
                    # search starts at `q`, now the end).
                    self.trip1 = self.trip2 = char
                    self.trip_loop = la
                    h = self.quiet
                else:
                    # Hold the trailing run of a leading loop class; usually just the last
                    # character ("word "), found without a call.
                    if q == n - 1:
                        n -= 1  # (a run clipped at `q`)
                    else:
                        cache = la.cache
                        prev = cache.get(buf[n - 2])
                        if prev is None:
                            prev = la(buf[n - 2])
                        if not prev:
                            n -= 1
                        else:
                            # A run of two or more ("\n\n"): read back up to 8 characters, clipped
                            # at `q` (with one leading loop class, its run is the trailing run
                            # `_trailing` finds); a longer run, or several classes, ask it.
                            i = n - 2
                            stop = n - 8 if n - 8 > q else q
                            while i > stop:
                                hit = cache.get(buf[i - 1])
                                if hit is None:
                                    hit = la(buf[i - 1])
                                if not hit:
                                    break
                                i -= 1
                            pre = self._pre
                            assert pre is not None
                            if (i > stop or i == q) and len(pre.loops) == 1:
                                n = i
                            else:
                                n = self._trailing(buf, pre)
                self.q = n
                h.at = n
                return h
            one = self._lead1
            if one is not None and n > q:
                # A watch list with one literal lead and no leading loop (a call body's closer,
                # `</function>`): the lead's first character without the lead (`<parameter=`)
                # holds at a tail that begins the lead, else releases everything, as the
                # prefilter would, without it.
                c = buf.find(char, start if start > q else q)
                if buf.find(one, c) < 0:
                    j = n - len(one) + 1
                    j = buf.find(char, j if j > c else c)
                    while j >= 0 and not one.startswith(buf[j:]):
                        j = buf.find(char, j + 1)
                    if j < 0 or self.guard is None:
                        self._searched = n
                        h = self._hold
                        if j >= 0:
                            self._tail_at, self._tail_lead = j, one
                            n = j
                        elif self._loop_any is None:
                            # Everything released: a next feed without `char` releases
                            # everything above (no tail can begin the lead before it).
                            self.trip1 = self.trip2 = char
                            self.trip_loop = None
                            h = self.quiet
                        self.q = n
                        h.at = n
                        return h
        elif self._rare is not None and not eos and self.live is None:
            # (No `^` phase left, only the general per-token path: called directly, one frame
            # less on every feed of a JSON call body or a DSML call body.)
            held = self._per_token_general(buf) if self._late is None else self._rare_paths(buf)
            if held is not None:
                return held
        if self.chains is not None and not eos and self.live is None and not walked:
            chained = self._chain_decide(buf)
            if chained is not None:
                return chained
        lit = self.lit
        if lit is not None:
            # A watch list of one literal (most explicit regions): the leftmost occurrence is final
            # at once; otherwise hold the longest tail that begins the literal.
            n = len(buf)
            q = self.q
            k = self._maxlen
            start = self._searched - k + 1
            i = buf.find(lit, start if start > q else q)
            if i >= 0:
                return Commit(self.entries[0], i, i + k, {})
            self._searched = n
            h = self._hold
            if not eos:
                start = n - k + 1
                j = buf.find(lit[0], start if start > q else q)
                while j >= 0:
                    if lit.startswith(buf[j:]):
                        self.q = h.at = j
                        return h
                    j = buf.find(lit[0], j + 1)
                # Everything released, no tail begins the literal: a next feed without its first
                # character cannot complete one, nor leave a tail that begins it.
                self.trip1 = self.trip2 = lit[0]
                self.trip_loop = None
                h = self.quiet
            self.q = h.at = n
            return h
        q = self.q
        live = self.live
        if live is not None:
            if not eos:
                self.live = None
                if live.q == q:
                    if type(live) is PatternCursor:  # (`PatternCursor.still_live`, inlined)
                        att = live.att
                        again = att is not None and live.found is None and att.still_live(buf)
                    else:
                        again = live.still_live(buf)
                    if again:
                        # Still undecided where it was (the earliest open position): the hold stays.
                        self.live = live
                        h = self._hold
                        h.at = q
                        return h
                    if live.resume(buf, zw_forbid):
                        self.live = live
                        return self._hold_at(q)
                    # (Under a JSON string guard `q` was found outside strings when the attempt
                    # went live there; a value close competes at other places: then scan.)
                    guard = self.guard
                    if live.found is not None and (guard is None or not guard.value_close):
                        commit = self._commit_found(buf, q, eos, zw_forbid, live)
                        if commit is not None:
                            return commit
        elif not eos:
            pre = self._pre
            if pre is not None and q < len(buf) and (q or not pre.at0):
                h2 = self._prefiltered(buf, pre)
                if h2 >= 0:
                    return (
                        self._released(buf, h2) if self._quietable and h2 == len(buf) else self._hold_at(h2)
                    )
            else:
                pre = self._gpre
                if pre is not None and q < len(buf) and (q or not pre.at0):
                    n = len(buf)
                    guard = self.guard
                    assert guard is not None
                    if (not guard.value_close or guard.value_close_at(buf, False) is None) and (
                        self._prefiltered(buf, pre) == n
                    ):
                        return self._released(buf, n) if self._quietable else self._hold_at(n)
        return self._scan(buf, eos, zw_forbid)

    def _chain_decide(self, buf: str) -> Hold | Commit | None:
        """The decision (before end of stream) when the leftmost lead is one of `chains` (see
        `_chain_leads`), without cursors: the prefilter holds while no lead occurs; at the
        leftmost lead, only the walks of its delimiter can match at or before it, and walking
        them in priority order from the leading run before it matches (commit), fails (every
        start up to the lead fails, for every delimiter: look again after it) or reaches the end
        of the text (hold from its start; the walk resumes where it stopped on the next feed, so
        a long run being written costs its new text only). None when the leftmost lead is another
        delimiter's, or when the walks fail but a branch that is not a chain is left to try, or,
        under a JSON string guard, when the place is inside a string: the caller scans. While a
        walk is in progress the hold starts at or before a lead, which keeps the per-token path
        of `decide` (no lead character in the new text) off."""
        chains = self.chains
        pre = self._pre
        if pre is None:
            pre = self._gpre  # (under a guard)
        assert chains is not None and pre is not None
        att = self._catt
        while True:
            if att is None:
                guard = self.guard
                h = self._prefiltered(buf, pre)
                if h >= 0:
                    if guard is not None and h < len(buf):
                        # A tail that begins a lead (the guarded watch lists here have no leading
                        # loop): held as the cursors would hold it, unless it is inside a string.
                        if guard.inside(buf, h):
                            return None
                        self._guarded_tail(buf, pre, h)
                    return self._released(buf, h) if self._quietable and h == len(buf) else self._hold_at(h)
                q = self.q
                i, lead = self._lead_at, self._lead  # (the leftmost lead: `_prefiltered` found it)
                if i < q:
                    # (With `after` literals the search starts `back` before `q`: a lead there is
                    # decided already, e.g. the one whose walks just failed. An `after` literal
                    # after it may still make a candidate at or after `q`: the cursors decide.)
                    return None
                got = chains.get(lead)
                if got is None:
                    return None
                j, loop, walks, exhaustive, _ = got
                s = run_start(loop, buf, q, i) if loop is not None else i
                if guard is not None and guard.inside(buf, s):
                    return None
                elements = walks[0]
                self._cwalks = got  # (the other branches, read when a walk fails)
                k, p, r = 0, i, -1
            else:
                j, elements, s, i, k, p, r = att
                att = self._catt = None
            status, k, p, r = _walk(elements, buf, k, p, r, False)
            if status == NONE:
                walks = self._cwalks[2]
                if len(walks) > 1:
                    # the next branches with this lead, from the lead or from where this one
                    # failed (`_shares`)
                    b = next(x for x, w in enumerate(walks) if w is elements)
                    status, b, k, p, r = _walk_next(walks, self._cwalks[4], b, buf, k, p, r, i, False)
                    elements = walks[b]
            if status == LIVE:
                self._catt = (j, elements, s, i, k, p, r)
                self._searched = s
                return self._hold_at(s)
            if status == MATCH:
                w = self.entries[j]
                return Commit(w, s, p, _captures(w.delimiter, buf, s, False, None, True))
            if not self._cwalks[3]:
                return None  # a branch that is not a chain may match there: the cursors decide
            # No match starts at or before the lead at `i`: look for the next one after it.
            self.q = self._searched = i + 1

    def _guarded_tail(self, buf: str, pre: Prefilter, j: int) -> None:
        """`_prefiltered`'s note of a held tail that begins a lead (`_tail_at`), for a guarded watch
        list once the tail is known to be outside strings (it stays so while it grows)."""
        if pre.char is None:
            return
        tail = buf[j:]
        for lead in pre.literals:
            if lead.startswith(tail):
                if lead not in pre.inner:
                    self._tail_at, self._tail_lead = j, lead
                break

    def _commit_found(self, buf: str, q: int, eos: bool, zw_forbid: int, live: Cursor) -> Commit | None:
        """The attempt `live`, undecided at the hold point `q`, has matched there. The scan that set
        the hold decided every other cursor at `q` (a match found there, or its next candidate
        after `q`; a failure is final) except those that were undecided there too: those are
        advanced to `q` alone. Then the best match at `q` by key is certain without scanning again
        (a delimiter being written is committed by the feed that ends it); None when one of them is
        still undecided (the caller scans)."""
        cursors = self.cursors
        for k in self._pend_idx:
            c = cursors[k]
            if c is not live and c.found is None and c.advance(buf, eos, q, zw_forbid)[0] == LIVE:
                return None
        best: tuple | None = None
        for j, c in enumerate(cursors):
            f = c.found
            if f is not None and f[0] == q:
                w = self.entries[j]
                key = (-(f[1] - q), 0 if w.is_open else 1, w.field)
                if best is None or key < best[0]:
                    best = (key, j, f[1])
        assert best is not None
        j = best[1]
        return Commit(self.entries[j], q, best[2], cursors[j].captures(buf, q, eos))

    def _scan(self, buf: str, eos: bool, zw_forbid: int) -> Hold | Commit:
        """The general path: every cursor's candidates in position order up to the earliest event
        (`_every`: ask every cursor at the hold point, for `undecided`)."""
        n = len(buf)
        q = self.q
        cursors = self.cursors
        for c in cursors:
            if c.q < q and c.found is None:
                # Positions before q were rejected wholesale: drop stale per-cursor state.
                c.q = q
                if isinstance(c, PatternCursor) and c.att is not None and c.att.start < q:
                    c.att = None
                elif type(c) is ChainCursor and c.walk is not None and c.walk[0] < q:
                    c.walk = None
        # Examine candidates of all cursors in position order, so that no cursor scans past the
        # earliest event: total work per scan is bounded by the text up to that event.
        peeks = [c.peek(buf, eos) for c in cursors]
        best: tuple | None = None
        e_pos = n + 1
        live = False
        pending: list[Watch] = []
        pend_idx: list[int] = []
        live_cursor: Cursor | None = None
        guard = self.guard
        vbest: tuple | None = None
        if guard is not None and guard.value_close and self.entries:
            # `close_after_value`: a zero-width close of the region at the first non-whitespace
            # character after its value, unless a watched closer starts earlier or at the same
            # place (a real closer such as `<|eot_id|>` after the value is consumed, not left
            # for the next region). Whitespace up to the end of the text is still undecided.
            found = guard.value_close_at(buf, eos)
            if found is not None:
                vend, wpos = found
                if wpos < n:
                    e_pos = wpos
                    best = vbest = ((0, 1, self.entries[0].field), 0, wpos)
                elif not eos:
                    e_pos = vend
                    live = True
        while True:
            j = -1
            m = e_pos if e_pos < n else n - 1
            for i, pk in enumerate(peeks):
                if pk <= m:
                    m = pk
                    j = i
            if j < 0:
                break
            cur = cursors[j]
            status, pos, end = cur.advance(buf, eos, peeks[j], zw_forbid)
            if status == NONE:
                peeks[j] = pos
                continue
            if self.guard is not None and self.guard.inside(buf, pos):
                cur.reject(pos)  # inside a string literal of the body: not a delimiter here
                peeks[j] = cur.peek(buf, eos)
                continue
            peeks[j] = n + 1
            if pos < e_pos:
                e_pos = pos
                best = None
                live = False
            if status == LIVE:
                if pos == q and not live and not self._every:
                    # Undecided at the first open position: the hold is there whatever the other
                    # cursors find (nothing starts before `q`). A delimiter being written at a
                    # region's start (`<|channel|>` of `<|channel|>analysis<|message|>`) is thus
                    # followed by this cursor alone; the others not yet decided at `q` are left
                    # pending, asked at `q` once this attempt is decided (`_commit_found`), or by
                    # the scan after it. (The cursors stay monotone: nothing is asked twice.) Those
                    # are the ones whose next position is `q` (a cursor asked before this one
                    # failed there: its next position is past `q`).
                    self.live = cur
                    idx = [j] + [i for i, pk in enumerate(peeks) if pk <= q and i != j]
                    self._pend_idx = idx
                    self.pending = ([self.entries[i] for i in idx], q)
                    return self._hold_at(q)
                if not live:
                    live_cursor = cur
                    pending = []
                    pend_idx = []
                live = True
                pending.append(self.entries[j])
                pend_idx.append(j)
            elif not live:
                w = self.entries[j]
                key = (-(end - pos), 0 if w.is_open else 1, w.field)
                if best is None or key < best[0]:
                    best = (key, j, end)
        if live:
            self.live = live_cursor
            self.pending = (pending, e_pos)
            self._pend_idx = pend_idx
            return self._hold_at(e_pos)
        if best is not None:
            j, end = best[1], best[2]
            if best is vbest:
                return Commit(self.entries[0], e_pos, e_pos, {})  # the close after the value
            return Commit(self.entries[j], e_pos, end, cursors[j].captures(buf, e_pos, eos))
        self._searched = n
        return self._released(buf, n) if self._quietable else self._hold_at(n)


_REV_RUN: dict[int, Any] = {}


def run_start(loop: _rx.CharTest, buf: str, lo: int, hi: int) -> int:
    """Start (>= lo) of the run of `loop` characters that ends at `hi`: one reverse C match."""
    if hi <= lo or not loop(buf[hi - 1]):
        return hi
    # A short run ("word \n") is read back a character at a time: the reverse match costs about
    # a microsecond however short the run.
    cache = loop.cache
    i = hi - 1
    stop = hi - 8 if hi - 8 > lo else lo
    while i > stop:
        hit = cache.get(buf[i - 1])
        if hit is None:
            hit = loop(buf[i - 1])
        if not hit:
            return i
        i -= 1
    if i == lo:
        return lo
    hi = i
    got = _REV_RUN.get(id(loop))
    if got is None or got[0] is not loop:
        got = _REV_RUN[id(loop)] = (loop, regex.compile(f"(?:{loop.src})*", loop.flags | regex.REVERSE))
    m = got[1].match(buf, lo, hi)
    return hi if m is None else m.start()
