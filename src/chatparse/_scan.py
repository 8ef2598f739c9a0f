"""Delimiters and the multi-delimiter scanner: where the next delimiter is, and what must be held.

Theory of operation
-------------------
For the current region the parser watches a list of delimiters (the closer of an explicit region,
or every opener plus the implicit field's closer). The one-shot parse commits, among all watched
delimiters, the match with the smallest key `(start, -length, opener-before-closer, field name)`,
where each delimiter's match is its leftmost match with the `regex` module's priority semantics.
While streaming, a match may be committed only when that choice is already certain, and text may
be released only before the earliest position whose fate is still open.

Every delimiter gets a `Cursor` for the region visit. A cursor walks start positions from left to
right; positions that cannot start a match are skipped with C-speed searches (`str.find` or a
character-class regex for the delimiter's possible first characters, or, for the common
`\\s*<marker>` shape, for the characters that can follow its leading loop). At a candidate
position it runs an exact `Attempt` (see `_rx`), which answers fail / match / live. A cursor
reports its first position that is not a certain failure. The scanner combines the cursors:
the earliest reported position E wins; if any cursor is live at E the text before E is released
and the rest held; otherwise the best match at E by key is committed.

Everything a cursor learns is monotone in the buffer length (a position that failed without
touching the end fails forever), so cursors and the per-parser search caches keep their progress
across feeds: total work is linear in the stream for every template and every chunking.
"""

from __future__ import annotations

from typing import Any

import regex

from . import _rx


class _Finder:
    """Next position >= q holding one of a set of characters, with a cache that keeps repeated
    queries from the same parser linear (an absent trigger is searched for once per new text)."""

    __slots__ = ("_char", "_re", "_q0", "_res", "_n0")

    def __init__(self, char: str | None, pattern: Any) -> None:
        self._char = char
        self._re = pattern
        self._q0 = -1
        self._res = -1
        self._n0 = -1

    def next(self, buf: str, q: int) -> int:
        n = len(buf)
        if self._q0 <= q <= self._res:
            if self._res < self._n0:
                return self._res
            if n == self._n0:
                return n
            start = max(q, self._n0)
        else:
            start = q
        if self._char is not None:
            r = buf.find(self._char, start)
        else:
            m = self._re.search(buf, start)
            r = -1 if m is None else m.start()
        if r < 0:
            r = n
        self._q0, self._res, self._n0 = q, r, n
        return r


class _CandidateFinder:
    """Next trigger position whose text starts a delimiter's literal prefix, or is cut short of it
    by the end of the buffer. Remembers the range it has rejected for good (a trigger followed by
    enough text that differs from the prefix), so repeated queries from the same parser stay
    linear even when the delimiter never occurs (a `<think>` opener in a tool-call stream)."""

    __slots__ = ("_triggers", "_prefix", "_lo", "_hi")

    def __init__(self, triggers: _Finder, prefix: str) -> None:
        self._triggers = triggers
        self._prefix = prefix
        self._lo = -1
        self._hi = -1

    def next(self, buf: str, q: int, eos: bool) -> int:
        n = len(buf)
        prefix = self._prefix
        size = len(prefix)
        if self._lo <= q <= self._hi:
            lo = self._lo
            q = self._hi
        else:
            lo = q
        t = buf.find(prefix, q)
        if t >= 0:
            self._lo, self._hi = lo, t
            return t
        # No whole occurrence; before end of stream, a tail that begins the prefix is a candidate.
        # Anything else in [q, n) has differed from the prefix within the text already: for good.
        tail = max(q, n - size + 1)
        if not eos:
            j = buf.find(prefix[0], tail)
            while j >= 0:
                if prefix.startswith(buf[j:]):
                    self._lo, self._hi = lo, j
                    return j
                j = buf.find(prefix[0], j + 1)
            self._lo, self._hi = lo, n
        else:
            self._lo, self._hi = lo, tail
        return n


def _atom_src(atom: _rx.Node) -> str:
    """The `regex` source of a one-character atom, with its flags scoped."""
    if atom.op == "lit":
        return regex.escape(atom.args[0])
    if atom.op == "any":
        return r"[\s\S]" if atom.args[0] else r"[^\n]"
    src, flags = atom.args
    on = ""
    if flags & regex.IGNORECASE:
        on += "i"
    if flags & regex.ASCII:
        on += "a"
    return f"(?{on}:{src})" if on else f"(?:{src})"


class _First:
    """Over-approximation of what can start a match: one-character atoms, and whether a match can
    start at position 0 only (through `^`/`\\A`) or anywhere without consuming a character."""

    def __init__(self) -> None:
        self.atoms: list[_rx.Node] = []
        self.at0 = False
        self.anywhere = False


def _first(node: _rx.Node, out: _First, at0: bool) -> bool:
    """Add the possible first characters of `node` to `out`; return whether `node` is nullable
    (can be passed without consuming a character). `at0` marks paths that passed a `^`."""
    op = node.op
    if op in ("lit", "cls", "any"):
        if at0:
            out.at0 = True  # this path passed `^`: it can only match at position 0
        else:
            out.atoms.append(node)
        return False
    if op == "assert":
        return True
    if op == "look":
        ahead, negate = node.args[0], node.args[1]
        if ahead and not negate:
            sub = _First()
            if not _first(node.kids[0], sub, at0):
                out.atoms.extend(sub.atoms)
                out.at0 |= sub.at0
                out.anywhere |= sub.anywhere
                return False
        return True
    if op == "empty":
        return True
    if op == "cat":
        for k in node.kids:
            if k.op == "assert" and k.args[0] == "bos":
                at0 = True
                continue
            if not _first(k, out, at0):
                return False
        return True
    if op == "alt":
        res = False
        for k in node.kids:
            if k.op == "assert" and k.args[0] == "bos":
                out.at0 = True
                res = True
                continue
            if _first(k, out, at0):
                res = True
        return res
    if op == "rep":
        inner = _first(node.kids[0], out, at0)
        return inner or node.args[0] == 0
    return _first(node.kids[0], out, at0)  # group, atomic


def _flatten(node: _rx.Node) -> list[_rx.Node]:
    if node.op == "cat":
        out: list[_rx.Node] = []
        for k in node.kids:
            out.extend(_flatten(k))
        return out
    if node.op == "group" and node.args[0] is None:
        return _flatten(node.kids[0])
    return [node]


def _common_prefix(strings: list[str]) -> str:
    prefix = strings[0]
    for other in strings[1:]:
        k = 0
        while k < min(len(prefix), len(other)) and prefix[k] == other[k]:
            k += 1
        prefix = prefix[:k]
    return prefix


def _lead_literal(items: list[_rx.Node]) -> str:
    """Literal text that every match of the sequence `items` starts with (possibly empty)."""
    out = []
    for node in items:
        if node.op == "lit":
            out.append(node.args[0])
            continue
        inner = node
        while inner.op == "group":  # named groups too: they do not change what is matched
            inner = inner.kids[0]
        if inner.op == "alt":
            out.append(_common_prefix([_lead_literal(_flatten(k)) for k in inner.kids]))
        elif inner.op == "cat":
            out.append(_lead_literal(_flatten(inner)))
        break
    return "".join(out)


def _lead_literals(items: list[_rx.Node], limit: int = 16) -> list[str]:
    """Literal texts one of which every match of `items` starts with: one per alternative of a
    leading alternation (so `\\s*(?:<|im_end|>|</think>)` gives `<|im_end|>` and `</think>`, where
    `_lead_literal` gives only their common `<`); `[""]` when nothing is known."""
    prefix: list[str] = []
    for node in items:
        if node.op == "lit":
            prefix.append(node.args[0])
            continue
        inner = node
        while inner.op == "group":
            inner = inner.kids[0]
        head = "".join(prefix)
        if inner.op == "alt":
            out = [head + lead for k in inner.kids for lead in _lead_literals(_flatten(k), limit)]
            return out if len(out) <= limit else [head + _common_prefix(out)[len(head) :]]
        if inner.op == "cat":
            return [head + lead for lead in _lead_literals(_flatten(inner), limit)]
        break
    return ["".join(prefix)]


class Delimiter:
    """A compiled opener, closer or anchor: literal list or regex, with its search accelerators."""

    def __init__(self, source: str, literals: list[str] | None, scope: str = "delimiter") -> None:
        self.source = source
        self.scope = scope
        self.literals = literals
        if literals is not None:
            self.prog = _rx.literal_program(literals)
            self.can_extend = any(a != b and a.startswith(b) for a in literals for b in literals)
        else:
            self.prog = _rx.compile_pattern(source)
            self.can_extend = False
        tree: _rx.Node = self.prog.tree  # type: ignore[attr-defined]
        self.group_names = dict(self.prog.names)
        # Literal text every match starts with: a candidate whose text neither starts with it nor
        # is cut short by the end of the buffer fails without running an attempt.
        items = _flatten(tree)
        prefix = _common_prefix(literals) if literals is not None else _lead_literal(items)
        self.lit_prefix = prefix if len(prefix) >= 2 else ""
        #: What text at a trigger position must start with (or be cut short of) for a match to be
        #: possible around it: the literal prefix, or for `C* REST` shapes REST's literal prefix.
        self.anchor_prefix = prefix
        #: The same, one per alternative (`anchor_prefix` is their common part): a trigger needs an
        #: attempt only when the text after it starts (or is cut short of) one of them.
        self.anchor_prefixes: tuple[str, ...] = (prefix,)
        if literals is not None:
            self.anchor_prefixes = tuple(dict.fromkeys(literals))
        elif prefix == "" or len(prefix) < 2:
            leads = _lead_literals(items)
            if all(leads):
                self.anchor_prefixes = tuple(dict.fromkeys(leads))
        # Search strategy.
        self.every = False  # every position is a candidate
        self.at0 = False
        self.loop_test: _rx.CharTest | None = None  # shape C* REST: the loop's class
        self.trigger_char: str | None = None
        self.trigger_re: Any = None
        self.trigger_atoms: list[_rx.Node] = []
        items = _flatten(tree)
        if (
            len(items) >= 2
            and items[0].op == "rep"
            and items[0].args[0] == 0
            and items[0].args[1] is None
            and items[0].args[2] in ("greedy", "lazy")
            and items[0].kids[0].op in ("lit", "cls", "any")
            and not _rx.nullable(_rx.Node("cat", kids=items[1:]))
        ):
            rest = _First()
            _first(_rx.Node("cat", kids=items[1:]), rest, False)
            if not rest.anywhere and not rest.at0:
                atom = items[0].kids[0]
                self.loop_test = _rx.CharTest(_atom_src(atom), 0)
                self._set_triggers(rest.atoms)
                lead = _lead_literal(items[1:])
                self.anchor_prefix = "" if not lead or self.loop_test(lead[0]) else lead
                leads = _lead_literals(items[1:])
                ok = all(lead and not self.loop_test(lead[0]) for lead in leads)
                self.anchor_prefixes = tuple(dict.fromkeys(leads)) if ok else (self.anchor_prefix,)
                return
        first = _First()
        nullable = _first(tree, first, False)
        self.at0 = first.at0
        if nullable or first.anywhere or any(a.op == "any" and a.args[0] for a in first.atoms):
            self.every = True
            return
        self._set_triggers(first.atoms)

    def _set_triggers(self, atoms: list[_rx.Node]) -> None:
        self.trigger_atoms = atoms
        chars = {a.args[0] for a in atoms if a.op == "lit"}
        if len(atoms) == len(chars) == 1:
            self.trigger_char = next(iter(chars))
            return
        srcs = list(dict.fromkeys(_atom_src(a) for a in atoms))
        self.trigger_re = regex.compile("|".join(srcs)) if srcs else regex.compile(r"(?!)")

    def finder(self) -> _Finder | _CandidateFinder:
        triggers = _Finder(self.trigger_char, self.trigger_re)
        if self.lit_prefix and self.loop_test is None and not self.every:
            return _CandidateFinder(triggers, self.lit_prefix)
        return triggers


class Cursor:
    """The scan state of one delimiter during one region visit (see the module docstring)."""

    __slots__ = ("d", "q", "att", "memo", "looks", "finder", "found", "run")

    def __init__(self, d: Delimiter, q: int, finder: _Finder | _CandidateFinder | None) -> None:
        self.d = d
        self.q = q
        self.att: _rx.Attempt | None = None
        self.memo: set[int] = set()
        self.looks: dict = {}
        self.finder = finder
        self.found: tuple[int, Any] | None = None
        self.run: tuple[int, int] = (-1, -1)

    def _candidate(self, buf: str, q: int, eos: bool) -> int:
        """The first position >= q where an attempt is not trivially a failure; len(buf) or more
        when there is none (len(buf) + 1 at end of stream)."""
        d = self.d
        n = len(buf)
        if q == 0 and d.at0:
            return 0
        if d.every:
            return q
        assert self.finder is not None
        if d.loop_test is not None:
            lo, hi = self.run
            if lo <= q <= hi:
                return q
            triggers = self.finder
            assert isinstance(triggers, _Finder)  # shapes never use a _CandidateFinder
            t = triggers.next(buf, q)
            p = t
            test = d.loop_test
            while p > q and test(buf[p - 1]):
                p -= 1
            if t < n:
                self.run = (p, t)
                return p
            if not eos and p < n:
                self.run = (p, n - 1)
                return p
            return n if not eos else n + 1
        finder = self.finder
        if isinstance(finder, _CandidateFinder):
            t = finder.next(buf, q, eos)
        else:
            t = finder.next(buf, q)
        if t >= n:
            return n + 1 if eos else t
        return t

    def peek(self, buf: str, eos: bool) -> int:
        """The next position this cursor would examine (cheap: no attempt is run)."""
        if self.found is not None:
            return self.found[0]
        if self.att is not None:
            return self.att.start
        self.q = q = self._candidate(buf, self.q, eos)
        return q

    def step(self, buf: str, eos: bool, limit: int, zw_forbid: int) -> tuple[int, int, Any]:
        """Advance to this delimiter's first position that is not a certain failure.

        Returns `(0, q, None)` when every position before `q` fails and `q` is past `limit` or the
        end of the text, `(1, start, (end, slots))` for a certain match, `(2, start, None)` when
        the attempt at `start` is still undecided."""
        if self.found is not None:
            return (1, self.found[0], self.found[1])
        n = len(buf)
        while True:
            att = self.att
            if att is None:
                q = self._candidate(buf, self.q, eos)
                self.q = q
                # Like the reference, a match starting at the very end of the text is never taken.
                if q > limit or q >= n:
                    return (0, q, None)
                att = self.att = _rx.Attempt(self.d.prog, q, self.memo, self.looks)
            try:
                r = att.run(buf, eos)
            except TimeoutError as e:
                raise ValueError(
                    f"{self.d.scope}: a lookbehind of {self.d.source!r} took longer than {_rx.REGEX_TIMEOUT}s"
                ) from e
            if r is _rx.LIVE:
                return (2, att.start, None)
            self.att = None
            if r is not None and not (r[0] == att.start == zw_forbid):
                self.found = (att.start, r)
                return (1, att.start, r)
            self.q = att.start + 1


class StringGuard:
    """Where string literals are in a region body, for fields that close only outside them
    (`content_args: {"close_outside_strings": true}`, the fix for defect D17), and, with
    `close_after_value`, where the body's first complete bracketed value ends.

    Strings are `"..."` with backslash escapes (also `'...'` for `python-call-list` bodies), plus
    the field's `string_delims` pairs (no escapes). The answer for a position depends only on the
    text before it, so streaming and one-shot parsing agree; the body is scanned once, left to
    right (positions are asked in increasing order; an earlier one restarts the scan).

    Value end (`close_after_value`): when the first non-whitespace character of the body opens a
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
        # value-end tracking: its own cursor, so that `inside` queries never restart it
        self._vi = start
        self._vclose: str | None = None
        self._vescape = False
        self._depth = -1  # -1: the first non-whitespace character has not been seen yet
        self._vend = -1  # position right after the value, once known; -2: the body holds no value
        self._wi = -1

    def _step(
        self, buf: str, i: int, p: int, close: str | None, escape: bool
    ) -> tuple[int, str | None, bool]:
        """One step of the string scanner at `i` (< `p`): the new `(i, close, escape)`."""
        if close is None:
            ch = buf[i]
            if ch in self.quotes:
                return i + 1, ch, False
            for o, c in self.delims:
                if buf.startswith(o, i) and i + len(o) <= p:
                    return i + len(o), c, False
            return i + 1, None, False
        if len(close) == 1 and close in self.quotes:
            if escape:
                return i + 1, close, False
            ch = buf[i]
            if ch == "\\":
                return i + 1, close, True
            if ch == close:
                return i + 1, None, False
            return i + 1, close, False
        if buf.startswith(close, i) and i + len(close) <= p:
            return i + len(close), None, False
        return i + 1, close, False

    def inside(self, buf: str, p: int) -> bool:
        if p < self._i:
            self._i, self._close, self._escape = self.start, None, False
        i, close, escape = self._i, self._close, self._escape
        step = self._step
        while i < p:
            i, close, escape = step(buf, i, p, close, escape)
        self._i, self._close, self._escape = i, close, escape
        return close is not None

    def value_close_at(self, buf: str) -> tuple[int, int] | None:
        """`(v, w)` once the body's first value has ended at `v`, with `w` the first
        non-whitespace position at or after `v` (`len(buf)` when only whitespace follows so far);
        `None` while the value is still open, or when the body does not start with a bracket."""
        n = len(buf)
        if self._vend == -2:
            return None
        if self._vend < 0:
            i, close, escape, depth = self._vi, self._vclose, self._vescape, self._depth
            step = self._step
            while i < n:
                if close is None:
                    ch = buf[i]
                    if depth < 0:
                        if ch.isspace():
                            i += 1
                            continue
                        if ch not in "[{(":
                            self._vend = -2
                            return None
                        depth = 0
                    if ch in "[{(":
                        depth += 1
                        i += 1
                        continue
                    if ch in "]})":
                        depth -= 1
                        i += 1
                        if depth == 0:
                            self._vend = i
                            break
                        continue
                i, close, escape = step(buf, i, n, close, escape)
            self._vi, self._vclose, self._vescape, self._depth = i, close, escape, depth
            if self._vend < 0:
                return None
            self._wi = self._vend
        w = self._wi
        while w < n and buf[w].isspace():
            w += 1
        self._wi = w
        return self._vend, w


def fast_hold(buf: str, q: int, t: int, fc: str, anchors: tuple[tuple[str, Any], ...]) -> int:
    """Decide a window with trigger characters without running attempts, when possible.

    `t` is the first trigger `fc` at or after `q`; `anchors` pairs each delimiter's anchor prefix
    with its leading loop class (or None). Returns -1 when some trigger is followed by a whole
    anchor prefix (an attempt is needed), else the hold point: the earliest start of a delimiter
    cut short by the end of the buffer (the loop run before it for `C* REST` shapes), or
    `len(buf)` when every trigger is followed by text that starts no delimiter."""
    n = len(buf)
    h = n
    while t >= 0:
        tail = buf[t:]
        for pre, loop in anchors:
            if tail.startswith(pre):
                return -1
            if pre.startswith(tail):
                p = t
                if loop is not None:
                    while p > q and loop(buf[p - 1]):
                        p -= 1
                if p < h:
                    h = p
        t = buf.find(fc, t + 1)
    return h


class Scanner:
    """Combines the cursors of a watch list into one decision (see the module docstring).

    `entries` are `(is_open, field_name, delimiter)`; `finders` maps delimiters to the parser's
    cached `_Finder`s; `fast` is the watch list's precomputed quick-rejection data."""

    __slots__ = (
        "entries",
        "_cursors",
        "_finders",
        "fast",
        "fast_char",
        "fast_q",
        "loop_any",
        "loop_tests",
        "at0",
        "lit",
        "prefixes",
        "live",
        "guard",
    )

    def __init__(
        self, watch: WatchList, q: int, finders: dict[int, Any], guard: StringGuard | None = None
    ) -> None:
        self.entries = watch.entries
        self.guard = guard
        self.fast = None if watch.fast is None else finders.get(id(watch))
        if watch.fast is not None and self.fast is None:
            self.fast = finders[id(watch)] = _Finder(*watch.fast)
        # The single trigger character of the watch list, or "" when there is none.
        self.fast_char: str = (watch.fast[0] or "") if watch.fast is not None else ""
        self.loop_any = watch.loop_any
        self.loop_tests = watch.loop_tests
        self.at0 = watch.at0
        self.lit = watch.lit
        self.prefixes = watch.prefixes
        self.fast_q = q
        self._finders = finders
        self._cursors: list[Cursor] | None = None
        self.live: Cursor | None = None  # the cursor whose undecided attempt set the last hold
        if guard is not None:  # every candidate must be checked against the guard: no shortcuts
            self.fast = None
            self.fast_char = ""
            self.lit = None

    @property
    def cursors(self) -> list[Cursor]:
        cursors = self._cursors
        if cursors is None:
            q = self.fast_q
            finders = self._finders
            cursors = self._cursors = [
                Cursor(d, q, None if d.every else finders.setdefault(id(d), d.finder()))
                for _, _, d in self.entries
            ]
        return cursors

    def still_held(self, buf: str, zw_forbid: int) -> bool:
        """Resume the undecided attempt that set the current hold (before end of stream).

        Everything before the hold point failed for every cursor, so while that attempt stays
        undecided the hold stands and nothing else needs a look. Returns False (and records the
        attempt's outcome in its cursor) once it is decided."""
        held = self.live
        self.live = None
        if held is None or held.att is None or held.att.start != self.fast_q:
            return False
        status, _, _ = held.step(buf, False, self.fast_q, zw_forbid)
        if status == 2:
            self.live = held
            return True
        return False

    def _scan_literal(self, buf: str, lit: str, eos: bool) -> tuple[int, int, int, Any]:
        """The whole decision for a watch list of one literal (most explicit regions): the leftmost
        occurrence is final at once; otherwise hold the longest tail that begins the literal."""
        n = len(buf)
        q = self.fast_q
        i = buf.find(lit, q)
        if i >= 0:
            return (1, 0, i, (i + len(lit), []))
        if eos:
            return (0, n, 0, None)
        j = buf.find(lit[0], max(q, n - len(lit) + 1))
        while j >= 0:
            if lit.startswith(buf[j:]):
                self.fast_q = j
                return (0, j, 0, None)
            j = buf.find(lit[0], j + 1)
        self.fast_q = n
        return (0, n, 0, None)

    def scan(self, buf: str, eos: bool, zw_forbid: int) -> tuple[int, int, int, Any]:
        """Returns `(kind, a, b, c)`: kind 0 = hold from `a` (release text before it); kind 1 =
        commit entry `a` matched at `b` with `(end, slots)` = `c`."""
        lit = self.lit
        if lit is not None:
            return self._scan_literal(buf, lit, eos)
        n = len(buf)
        q = self.fast_q
        if self.live is not None and not eos and self.still_held(buf, zw_forbid):
            return (0, q, 0, None)
        fast = self.fast
        if fast is not None and not eos and q < n and (q or not self.at0):
            # Quick rejection: no trigger character in the unresolved text and no loop class at its
            # end means every unresolved position fails for every delimiter of this list.
            fc = self.fast_char
            if fc and n - q < 256:
                t = buf.find(fc, q)
                if t >= 0 and self.prefixes is not None:
                    h = fast_hold(buf, q, t, fc, self.prefixes)
                    if h >= 0:
                        if h < n:
                            self.fast_q = h
                            return (0, h, 0, None)
                        t = -1
                clear = t < 0
            else:
                clear = fast.next(buf, q) >= n
            if clear:
                if self.loop_any is None or not self.loop_any(buf[n - 1]):
                    self.fast_q = n
                    return (0, n, 0, None)
                # Only the trailing run of a leading loop class (`\s*` of `\s*<tool_call>`) can
                # still start a delimiter: hold from its start, release the rest.
                h = self.trailing_hold(buf, q, n)
                self.fast_q = h
                return (0, h, 0, None)
        for c in self.cursors:
            if c.q < q:
                # Positions before fast_q were rejected wholesale: drop stale per-cursor state.
                c.q = q
                if c.att is not None and c.att.start < q:
                    c.att = None
                c.run = (-1, -1)
        # Examine candidates of all cursors in position order, so that no cursor scans past the
        # earliest event: total work per scan is bounded by the text up to that event.
        cursors = self.cursors
        peeks = [c.peek(buf, eos) for c in cursors]
        best: tuple | None = None
        e_pos = n + 1
        live = False
        live_cursor: Cursor | None = None
        if self.guard is not None and self.guard.value_close and self.entries:
            # `close_after_value`: a zero-width close of the region at the first non-whitespace
            # character after its value, unless a watched closer starts earlier or at the same
            # place (a real closer such as `<|eot_id|>` after the value is consumed, not left
            # for the next region). Whitespace up to the end of the text is still undecided.
            found = self.guard.value_close_at(buf)
            if found is not None:
                v, w = found
                if w < n:
                    d = self.entries[0][2]
                    slots = [-1] * (2 * len(d.group_names))
                    e_pos = w
                    best = ((0, 1, self.entries[0][1]), 0, (w, slots))
                elif not eos:
                    e_pos = v
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
            status, pos, r = cursors[j].step(buf, eos, peeks[j], zw_forbid)
            if status == 0:
                peeks[j] = pos
                continue
            if self.guard is not None and self.guard.inside(buf, pos):
                cur = cursors[j]  # inside a string literal of the body: not a delimiter here
                cur.found = cur.att = None
                cur.q = pos + 1
                peeks[j] = cur.peek(buf, eos)
                continue
            peeks[j] = n + 1
            if pos < e_pos:
                e_pos = pos
                best = None
                live = False
            if status == 2:
                if not live:
                    live_cursor = cursors[j]
                live = True
            elif not live:
                is_open, name, _ = self.entries[j]
                key = (-(r[0] - pos), 0 if is_open else 1, name)
                if best is None or key < best[0]:
                    best = (key, j, r)
        if live:
            self.fast_q = e_pos
            self.live = live_cursor
            return (0, e_pos, 0, None)
        if best is not None:
            return (1, best[1], e_pos, best[2])
        self.fast_q = n
        return (0, n, 0, None)

    def trailing_hold(self, buf: str, q: int, n: int) -> int:
        """Start of the earliest trailing run, within `buf[q:n]`, of a loop class."""
        h = n
        for test in self.loop_tests:
            p = n
            while p > q and test(buf[p - 1]):
                p -= 1
            if p < h:
                h = p
        return h


class WatchList:
    """The delimiters watched in one kind of region, with their combined quick-rejection data."""

    __slots__ = ("entries", "fast", "loop_any", "loop_tests", "at0", "lit", "prefixes")

    def __init__(self, entries: list[tuple[bool, str, Delimiter]]) -> None:
        self.entries = entries
        self.prefixes: tuple[tuple[str, Any], ...] | None = None
        lits = entries[0][2].literals if len(entries) == 1 else None
        self.lit = lits[0] if lits is not None and len(lits) == 1 else None
        self.fast: tuple[str | None, Any] | None = None
        ds = [d for _, _, d in entries]
        tests = {d.loop_test.src: d.loop_test for d in ds if d.loop_test is not None}
        self.loop_tests = list(tests.values())
        self.loop_any = _rx.CharTest("|".join(tests), 0) if tests else None
        self.at0 = any(d.at0 for d in ds)
        if ds and not any(d.every for d in ds):
            atoms: list[_rx.Node] = []
            for d in ds:
                atoms.extend(d.trigger_atoms)
            chars = {a.args[0] for a in atoms if a.op == "lit"}
            if len(chars) == 1 and all(a.op == "lit" for a in atoms):
                self.fast = (next(iter(chars)), None)
                fc = next(iter(chars))
                anchors = [(pre, d.loop_test) for d in ds for pre in d.anchor_prefixes]
                if all(a and a[0] == fc for a, _ in anchors):
                    self.prefixes = tuple(dict.fromkeys(anchors))
            else:
                srcs = list(dict.fromkeys(_atom_src(a) for a in atoms))
                self.fast = (None, regex.compile("|".join(srcs)) if srcs else regex.compile("(?!)"))

    def scanner(self, q: int, finders: dict[int, Any], guard: StringGuard | None = None) -> Scanner:
        return Scanner(self, q, finders, guard)
