"""A small context-free grammar IR and its renderings (GBNF / XGrammar EBNF, Lark for llguidance).

Theory of operation
-------------------
Everything the constraints layer emits is built once as a `Grammar`: named rules over six kinds of
expression (`Lit`, `Chars`, `Seq`, `Alt`, `Rep`, `Ref`). Each output format is a pure rendering of
the same rules, so the GBNF grammar llama.cpp runs, the EBNF inside an XGrammar structural tag and
the Lark grammar llguidance runs accept the same language by construction.

Free text that must not contain certain strings (a marker the parser would react to) is built by
`Grammar.text_excluding`: an Aho-Corasick automaton over the forbidden strings whose states become
right-linear rules. Leaving the text is allowed only in states where the characters that can
follow cannot complete a forbidden string across the boundary. Text that must hold no match of a
pattern (a marker followed by what its lookahead reads) is `Grammar.text_avoiding`: the minimised
substring automaton of the pattern, built the same way.

The GBNF rendering writes those automata with their wide character-class edges routed through
shared rules (`Grammar._share_wide_edges`): XGrammar's compile costs about a pass over the
vocabulary for every place a class is read, and nearly every state has such an edge. Same
language; the IR and the Lark form keep the plain rules.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import regex

from . import _budget

MAX_CODEPOINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)


# --------------------------------------------------------------------------------------------------
# Expressions


@dataclass(frozen=True)
class Lit:
    """A literal string."""

    text: str


@dataclass(frozen=True)
class Chars:
    """One character from a set of inclusive code point ranges (sorted, disjoint, non-adjacent)."""

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Rep:
    item: Expr
    lo: int
    hi: int | None  # None: unbounded


@dataclass(frozen=True)
class Ref:
    name: str


Expr = Union[Lit, Chars, Seq, Alt, Rep, Ref]  # noqa: UP007 (a runtime alias on 3.10)

EMPTY = Lit("")
NOTHING = Alt(())  # the empty language


def seq(*items: Expr) -> Expr:
    """A sequence, flattened, with empty literals dropped and adjacent literals merged."""
    out: list[Expr] = []
    for it in items:
        parts = it.items if isinstance(it, Seq) else (it,)
        for p in parts:
            if p == NOTHING:
                return NOTHING
            if isinstance(p, Lit):
                if not p.text:
                    continue
                if out and isinstance(out[-1], Lit):
                    out[-1] = Lit(out[-1].text + p.text)
                    continue
            out.append(p)
    if not out:
        return EMPTY
    return out[0] if len(out) == 1 else Seq(tuple(out))


def alt(*items: Expr) -> Expr:
    """An alternation, flattened, without duplicates or empty-language members."""
    out: list[Expr] = []
    for it in items:
        parts = it.items if isinstance(it, Alt) else (it,)
        for p in parts:
            if p not in out:
                out.append(p)
    if len(out) == 1:
        return out[0]
    return Alt(tuple(out))


def opt(item: Expr) -> Expr:
    return rep(item, 0, 1)


def rep(item: Expr, lo: int, hi: int | None) -> Expr:
    if item == NOTHING:
        return EMPTY if lo == 0 else NOTHING
    if hi == 0 or item == EMPTY:
        return EMPTY
    if lo == 1 and hi == 1:
        return item
    return Rep(item, lo, hi)


# --------------------------------------------------------------------------------------------------
# Character sets


def ranges_union(*sets: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    pairs = sorted(r for s in sets for r in s)
    out: list[list[int]] = []
    for lo, hi in pairs:
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def ranges_complement(s: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in s:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODEPOINT:
        out.append((nxt, MAX_CODEPOINT))
    return ranges_minus(tuple(out), (_SURROGATES,))


def ranges_minus(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    b = ranges_union(b)
    out: list[tuple[int, int]] = []
    for lo, hi in ranges_union(a):
        cur = lo
        for blo, bhi in b:
            if bhi < cur or blo > hi:
                continue
            if blo > cur:
                out.append((cur, blo - 1))
            cur = max(cur, bhi + 1)
            if cur > hi:
                break
        if cur <= hi:
            out.append((cur, hi))
    return tuple(out)


def ranges_intersect(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    return ranges_minus(a, ranges_complement(b))


def ranges_of(chars: str) -> tuple[tuple[int, int], ...]:
    return ranges_union(*(((ord(c), ord(c)),) for c in chars)) if chars else ()


def ranges_contain(s: tuple[tuple[int, int], ...], cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in s)


@functools.lru_cache(maxsize=1)
def _all_chars() -> str:
    return "".join(map(chr, range(_SURROGATES[0]))) + "".join(
        map(chr, range(_SURROGATES[1] + 1, MAX_CODEPOINT + 1))
    )


@functools.lru_cache(maxsize=256)
def class_ranges(source: str, flags: int) -> tuple[tuple[int, int], ...]:
    """The code points a one-character `regex` class (e.g. `[^\\s<]`, `\\w`) matches, as ranges."""
    pattern = regex.compile(f"(?:{source})+", flags)
    text = _all_chars()
    out: list[tuple[int, int]] = []
    for m in pattern.finditer(text):
        # Runs are contiguous in `text`, which skips the surrogates: split a run that spans them.
        lo, hi = ord(text[m.start()]), ord(text[m.end() - 1])
        if lo < _SURROGATES[0] < hi:
            out.append((lo, _SURROGATES[0] - 1))
            out.append((_SURROGATES[1] + 1, hi))
        else:
            out.append((lo, hi))
    return ranges_union(tuple(out))


ANY_CHAR = Chars(ranges_complement(()))


@dataclass(frozen=True)
class Avoid:
    """A deterministic automaton over code points, for text that must not match it.

    `edges[q]`: `(ranges, target)` pairs; characters in none of them lead to `DEAD` (the text can
    no longer match, anything may follow); a target `BLOCK` forbids the character there.
    """

    name: str
    start: int
    accepting: frozenset[int]
    edges: tuple[tuple[tuple[tuple[tuple[int, int], ...], int], ...], ...]

    DEAD = -1
    BLOCK = -2

    def split(
        self, q: int, part: tuple[tuple[int, int], ...]
    ) -> list[tuple[tuple[tuple[int, int], ...], int]]:
        """`part` cut by the outgoing edges of `q`: (characters, next state) pairs."""
        out = []
        rest = part
        for ranges, target in self.edges[q]:
            inter = ranges_intersect(rest, ranges)
            if inter:
                out.append((inter, target))
                rest = ranges_minus(rest, ranges)
        if rest:
            out.append((rest, self.DEAD))
        return out


@functools.lru_cache(maxsize=1)
def json_scalar_automaton() -> Avoid:
    """What `json.loads` reads as a whole document, except objects and arrays (which it blocks):
    whitespace, then a number, a string, `true` / `false` / `null` / `NaN` / `Infinity` /
    `-Infinity`, then whitespace."""
    ws = ranges_of(" \t\n\r")
    digit = ranges_of("0123456789")
    states: list[list[tuple[tuple[tuple[int, int], ...], int]]] = []

    def new() -> int:
        states.append([])
        return len(states) - 1

    start, tail = new(), new()  # leading whitespace; trailing whitespace (accepting)
    zero, intg, dot, frac, exp, sign, expd = (new() for _ in range(7))
    minus, string, esc = new(), new(), new()
    accepting = {tail, zero, intg, frac, expd}

    def keyword(src: int, word: str) -> None:
        q = src
        for ch in word[:-1]:
            nxt = new()
            states[q].append((ranges_of(ch), nxt))
            q = nxt
        states[q].append((ranges_of(word[-1]), tail))

    states[start] += [(ws, start), (ranges_of("{["), Avoid.BLOCK), (ranges_of('"'), string)]
    states[start] += [(ranges_of("-"), minus), (ranges_of("0"), zero), (ranges_of("123456789"), intg)]
    for w in ("true", "false", "null", "NaN", "Infinity"):
        keyword(start, w)
    states[minus] += [(ranges_of("0"), zero), (ranges_of("123456789"), intg)]
    keyword(minus, "Infinity")
    number_end = [(ranges_of("."), dot), (ranges_of("eE"), exp), (ws, tail)]
    states[zero] += number_end
    states[intg] += [(digit, intg), *number_end]
    states[dot] += [(digit, frac)]
    states[frac] += [(digit, frac), (ranges_of("eE"), exp), (ws, tail)]
    states[exp] += [(ranges_of("+-"), sign), (digit, expd)]
    states[sign] += [(digit, expd)]
    states[expd] += [(digit, expd), (ws, tail)]
    states[tail] += [(ws, tail)]
    hexd = ranges_of("0123456789abcdefABCDEF")
    states[string] += [(ranges_of('"'), tail), (ranges_of("\\"), esc), (((0, 0x1F),), Avoid.DEAD)]
    states[string] += [(ranges_complement(()), string)]
    states[esc] += [(ranges_of('"\\/bfnrt'), string)]
    u1, u2, u3, u4 = (new() for _ in range(4))
    states[esc] += [(ranges_of("u"), u1)]
    states[u1] += [(hexd, u2)]
    states[u2] += [(hexd, u3)]
    states[u3] += [(hexd, u4)]
    states[u4] += [(hexd, string)]
    return Avoid("json-scalar", start, frozenset(accepting), tuple(tuple(e) for e in states))


WS_CHARS = Chars(ranges_of(" \t\n\r"))


# --------------------------------------------------------------------------------------------------
# Grammar


class Grammar:
    """Named rules; `root` is the start rule. Build with `rule`, render with `gbnf` / `lark`."""

    def __init__(self) -> None:
        self.rules: dict[str, Expr] = {}
        self._by_expr: dict[Expr, str] = {}
        self.root: str | None = None
        self._version = 0  # bumped whenever a rule is added or redefined
        self._shortest: tuple[int, dict[str, str | None]] | None = None
        # free-text automata: start rule -> all its state rules (right-linear: `s ::= c t | ""`)
        self.automata: dict[str, list[str]] = {}
        # lookahead/lookbehind checks: automata by expression and reversed rules, reused across
        # tools (emptied when a rule is redefined, since both read rules as they are)
        self._nfas: dict[Expr, _Nfa] = {}
        self._suffixes: dict[str, int] = {}
        self._reversed: dict[str, str] = {}
        self._substring_dfas: dict[Expr, SubstringDfa] = {}
        # the GBNF form of free-text automaton states whose wide edges go through shared rules
        # (`_share_wide_edges`); the IR keeps the plain right-linear rules
        self._gbnf_forms: dict[str, Expr] = {}

    def rule(self, hint: str, expr: Expr) -> Ref:
        """A reference to a rule for `expr` (an equal expression reuses its rule)."""
        _budget.check()
        if isinstance(expr, Ref):
            return expr
        name = self._by_expr.get(expr)
        if name is None:
            name = self._fresh(hint)
            self.rules[name] = expr
            self._by_expr[expr] = name
            self._version += 1
        return Ref(name)

    def declare(self, hint: str) -> str:
        """Reserve a rule name for a (possibly recursive) rule defined later with `define`."""
        name = self._fresh(hint)
        self.rules[name] = NOTHING
        self._version += 1
        return name

    def define(self, name: str, expr: Expr) -> Ref:
        self.rules[name] = expr
        self._version += 1
        if not name.startswith("rev-"):
            self._nfas.clear()
            self._reversed.clear()
        return Ref(name)

    def _fresh(self, hint: str) -> str:
        base = regex.sub(r"[^a-z0-9]+", "-", hint.lower()).strip("-") or "r"
        if base[0].isdigit():
            base = "r-" + base
        name, i = base, self._suffixes.get(base, 1)
        if i > 1:
            name = f"{base}-{i}"
        while name in self.rules or name == "root":
            i += 1
            name = f"{base}-{i}"
        self._suffixes[base] = i  # the next fresh name of this base starts here (linear, not quadratic)
        return name

    # -- free text ---------------------------------------------------------------------------

    def text_excluding(
        self,
        forbidden: list[str] | tuple[str, ...],
        *,
        allowed: tuple[tuple[int, int], ...] | None = None,
        follow: tuple[tuple[int, int], ...] | None = None,
        min_len: int = 0,
        trim: tuple[tuple[int, int], ...] | None = None,
        lead: tuple[tuple[int, int], ...] | None = None,
        after: str = "",
        avoid: Avoid | None = None,
        hint: str = "text",
    ) -> Ref:
        """Any string of `allowed` characters (default: all) that contains none of `forbidden`.

        `follow`: the characters that may come right after the text (None: unknown, anything);
        the text may only end where none of them could complete a forbidden string that began
        inside the text. `min_len` 1 makes the text non-empty. `trim`: characters the text may
        neither start nor end with (e.g. whitespace a parser would strip). `lead`: characters the
        text may not start with. `after`: text the caller writes right before this one (a
        forbidden string may not be completed across it). `avoid`: an automaton that must not
        accept the whole text (text that is not a JSON scalar, say).
        """
        key = (tuple(sorted(set(forbidden))), allowed, follow, min_len, trim, lead, after, avoid)
        cached = self._by_expr.get(("text",) + key)  # type: ignore[call-overload]
        if cached is not None:
            return Ref(cached)
        allowed_r = allowed if allowed is not None else ANY_CHAR.ranges
        pats = sorted({p for p in forbidden if p})
        # Aho-Corasick automaton: goto / fail / out
        goto: list[dict[str, int]] = [{}]
        out: list[bool] = [False]
        for p in pats:
            s = 0
            for ch in p:
                if ch not in goto[s]:
                    goto.append({})
                    out.append(False)
                    goto[s][ch] = len(goto) - 1
                s = goto[s][ch]
            out[s] = True
        fail = [0] * len(goto)
        queue = list(goto[0].values())
        order: list[int] = []
        while queue:
            s = queue.pop(0)
            order.append(s)
            for ch, t in goto[s].items():
                f = fail[s]
                while f and ch not in goto[f]:
                    f = fail[f]
                fail[t] = goto[f].get(ch, 0) if goto[f].get(ch, 0) != t else 0
                out[t] = out[t] or out[fail[t]]
                queue.append(t)
        alphabet = sorted({ch for p in pats for ch in p})

        def delta(s: int, ch: str) -> int:
            while s and ch not in goto[s]:
                s = fail[s]
            return goto[s].get(ch, 0)

        special = ranges_of("".join(alphabet))
        other = ranges_minus(allowed_r, special)
        trim_r = trim or ()
        lead_r = lead or ()
        follow_special = [ch for ch in alphabet if follow is None or ranges_contain(follow, ord(ch))]

        def can_end(s: int) -> bool:
            return all(delta(s, ch) == delta(0, ch) for ch in follow_special)

        # States: (automaton state, length so far capped at min_len, last char trimmed?, state of
        # `avoid`, -1 once it can no longer accept)
        names: dict[tuple[int, int, bool, int], str] = {}
        pending: list[tuple[int, int, bool, int]] = []

        def state_name(st: tuple[int, int, bool, int]) -> str:
            if st not in names:
                names[st] = self.declare(f"{hint}-s{len(names)}")
                pending.append(st)
            return names[st]

        def split(q: int, part: tuple[tuple[int, int], ...]) -> list[tuple[tuple[tuple[int, int], ...], int]]:
            if avoid is None or q < 0:
                return [(part, -1)] if part else []
            return [(r, t) for r, t in avoid.split(q, part) if r and t != Avoid.BLOCK]

        s0 = 0
        for ch in after:  # the text continues `after`, which the caller writes before it
            s0 = delta(s0, ch)
            if out[s0]:
                raise ValueError(f"text_excluding: {after!r} already contains a forbidden string")
        start = state_name((s0, 0, False, avoid.start if avoid is not None else -1))
        while pending:
            s, n, last_trim, q = pending.pop()
            choices: list[Expr] = []
            ends_ok = avoid is None or q < 0 or q not in avoid.accepting
            if n >= min_len and can_end(s) and not last_trim and ends_ok:
                choices.append(EMPTY)
            n2 = min(n + 1, max(min_len, 1))
            # one edge per target state, labelled with all the characters that lead there (few
            # edges keep the grammar small and llguidance's Earley rows short)
            edges: dict[tuple[int, int, bool, int], tuple[tuple[int, int], ...]] = {}
            # characters outside the forbidden strings' alphabet: back to the root
            for part, is_trim in (
                (ranges_minus(other, trim_r), False),
                (ranges_intersect(other, trim_r), True),
            ):
                if n == 0 and lead_r:
                    part = ranges_minus(part, lead_r)
                if not part or (is_trim and n == 0 and trim is not None):
                    continue
                for piece, q2 in split(q, part):
                    tgt = (0, n2, is_trim, q2)
                    edges[tgt] = ranges_union(edges.get(tgt, ()), piece)
            for ch in alphabet:
                if not ranges_contain(allowed_r, ord(ch)):
                    continue
                t = delta(s, ch)
                if out[t]:
                    continue
                is_trim = ranges_contain(trim_r, ord(ch))
                if is_trim and n == 0:
                    continue
                if n == 0 and ranges_contain(lead_r, ord(ch)):
                    continue
                for piece, q2 in split(q, ranges_of(ch)):
                    tgt = (t, n2, is_trim, q2)
                    edges[tgt] = ranges_union(edges.get(tgt, ()), piece)
            for tgt, label in edges.items():
                one = label[0][0] if len(label) == 1 and label[0][0] == label[0][1] else None
                edge: Expr = Lit(chr(one)) if one is not None else Chars(label)
                choices.append(seq(edge, Ref(state_name(tgt))))
            self.rules[names[(s, n, last_trim, q)]] = alt(*choices) if choices else NOTHING
            self._version += 1
        self._by_expr[("text",) + key] = start  # type: ignore[index]
        self.automata[start] = list(names.values())
        self._share_wide_edges(start)
        return Ref(start)

    def text_avoiding(
        self,
        pattern: Expr,
        *,
        context: Expr | None = None,
        follow: Expr | None = None,
        avoid: Avoid | None = None,
        hint: str = "text",
    ) -> Ref:
        """Any string that contains no match of the regular `pattern` (an expression of this grammar).

        Where `text_excluding` keeps fixed strings out, this keeps out every substring the pattern
        matches: a closing tag followed by what its lookahead reads (`</parameter>\\s*<parameter=`),
        while the same tag followed by other text stays writable. `context`: what is written right
        before the text (a match may begin there); `follow`: what is written right after it. The text
        may end only where no match under way can complete in `follow` or outlive it. `avoid`: an automaton that must not accept the
        whole text. The automaton is built once per pattern and shared by every value that uses it.
        """
        dfa = self._substring_dfas.get(pattern)
        if dfa is None:
            dfa = self._substring_dfas[pattern] = SubstringDfa(self, pattern)
        d0 = dfa.start
        if context is not None:
            reached = dfa.after(d0, context)
            d0 = frozenset().union(*reached) if reached else dfa.start
        # keyed by the state the context leaves, not the context: every value after a context in
        # which no match is under way (all of them, in practice) shares one automaton
        key = ("avoiding", pattern, d0, follow, avoid)
        cached = self._by_expr.get(key)  # type: ignore[call-overload]
        if cached is not None:
            return Ref(cached)

        def split(q: int, part: tuple[tuple[int, int], ...]) -> list[tuple[tuple[tuple[int, int], ...], int]]:
            if avoid is None or q < 0:
                return [(part, -1)] if part else []
            return [(r, t) for r, t in avoid.split(q, part) if r and t != Avoid.BLOCK]

        # explore the product automaton (substring DFA x `avoid`)
        St = tuple[frozenset[int], int]
        first: St = (d0, avoid.start if avoid is not None else -1)
        index: dict[St, int] = {first: 0}
        order: list[St] = [first]
        ends: list[bool] = []
        out_edges: list[dict[int, tuple[tuple[int, int], ...]]] = []
        i = 0
        while i < len(order):
            _budget.check()
            d, q = order[i]
            i += 1
            ends.append(dfa.may_end(d, follow) and (avoid is None or q < 0 or q not in avoid.accepting))
            edges: dict[int, tuple[tuple[int, int], ...]] = {}
            for part, d2 in dfa.moves(d):
                if dfa.final in d2:
                    continue  # the character would complete a match: not written
                for piece, q2 in split(q, part):
                    tgt = (d2, q2)
                    if tgt not in index:
                        index[tgt] = len(order)
                        order.append(tgt)
                    j = index[tgt]
                    edges[j] = ranges_union(edges.get(j, ()), piece)
            out_edges.append(edges)
        # minimise (Moore): states that accept the same continuations share one rule, which keeps
        # the grammar (and XGrammar's per-rule token masks) small
        block = [1 if e else 0 for e in ends]
        while True:
            sigs: dict[tuple[object, ...], int] = {}
            new_block = []
            for st in range(len(order)):
                cuts: dict[int, list[tuple[tuple[int, int], ...]]] = {}
                for j, rs in out_edges[st].items():
                    cuts.setdefault(block[j], []).append(rs)
                sig = (
                    block[st],
                    tuple(
                        sorted((b, rs[0] if len(rs) == 1 else ranges_union(*rs)) for b, rs in cuts.items())
                    ),
                )
                new_block.append(sigs.setdefault(sig, len(sigs)))
            if len(sigs) == len(set(block)):
                break
            block = new_block
        renumber: dict[int, int] = {}
        block = [renumber.setdefault(b, len(renumber)) for b in block]
        n_blocks = len(renumber)
        names = [self.declare(f"{hint}-s{k}") for k in range(n_blocks)]
        rep_of: dict[int, int] = {}
        for st, b in enumerate(block):
            rep_of.setdefault(b, st)
        for b, st in rep_of.items():
            choices: list[Expr] = [EMPTY] if ends[st] else []
            merged: dict[int, tuple[tuple[int, int], ...]] = {}
            for j, rs in out_edges[st].items():
                merged[block[j]] = ranges_union(merged.get(block[j], ()), rs)
            for tb, label in merged.items():
                one = label[0][0] if len(label) == 1 and label[0][0] == label[0][1] else None
                edge: Expr = Lit(chr(one)) if one is not None else Chars(label)
                choices.append(seq(edge, Ref(names[tb])))
            self.rules[names[b]] = alt(*choices) if choices else NOTHING
            self._version += 1
        start = names[block[0]]
        # the start rule first: the Lark rendering starts its left-linear form there
        names.sort(key=lambda n: n != start)
        self._by_expr[key] = start  # type: ignore[index]
        self.automata[start] = names
        self._share_wide_edges(start)
        return Ref(start)

    GROUP = 6  # single shared characters per rule in `_share_wide_edges`

    def _share_wide_edges(self, start: str) -> None:
        """Give the automaton at `start` a GBNF form in which the characters that many states send
        to one state are read by one shared rule (`hub ::= [^<>\\n] value-s1`).

        XGrammar precomputes a token mask for every place in the grammar where a character class
        is read, by running the vocabulary through the grammar from there; a wide class costs
        about a pass over the vocabulary. In a substring automaton nearly every state has a wide
        edge back to the state where no match is under way (`[^<p] s1`, `[^<a] s1`, ...), each a
        class of its own, so the compile grew with the number of states. Here the edges of all
        states into one target are cut into atoms (the characters with the same membership in
        every edge); an atom of several characters that two or more edges share becomes one rule,
        referenced by each of those states, and only the rest (single characters) stays in line.
        The language is unchanged: each state still reads exactly the characters it read, into
        the same state. GBNF only: the Lark form (llguidance's lazy masks do not pay this) and
        every analysis read the plain rules.
        """
        states = self.automata[start]
        # target -> [(state, ranges)] over the character-class edges
        into: dict[str, list[tuple[str, tuple[tuple[int, int], ...]]]] = {}
        for st in states:
            rule = self.rules[st]
            for choice in rule.items if isinstance(rule, Alt) else (rule,):
                if isinstance(choice, Seq) and len(choice.items) == 2:
                    edge, target = choice.items
                    if isinstance(edge, Chars) and isinstance(target, Ref):
                        into.setdefault(target.name, []).append((st, edge.ranges))
        shared: dict[tuple[str, str], list[Expr]] = {}  # (state, target) -> what replaces its edge
        for dest, edges in into.items():
            if len(edges) < 2:
                continue
            cuts = sorted(
                {lo for _, rs in edges for lo, _ in rs} | {hi + 1 for _, rs in edges for _, hi in rs}
            )
            atoms: dict[frozenset[int], list[tuple[int, int]]] = {}
            for a, b in zip(cuts, cuts[1:]):
                members = frozenset(i for i, (_, rs) in enumerate(edges) if ranges_contain(rs, a))
                if members:
                    atoms.setdefault(members, []).append((a, b - 1))
            # shared atoms: wide ones (and whitespace, which starts many tokens) get a rule each;
            # single characters are grouped in code point order, GROUP to a rule, and a group is
            # used by the edges holding all of it (few references per state: XGrammar's matcher
            # visits each at every step)
            units: list[tuple[tuple[tuple[int, int], ...], frozenset[int]]] = []
            singles: list[tuple[tuple[tuple[int, int], ...], frozenset[int]]] = []
            for members, rs in atoms.items():
                atom = ranges_union(tuple(rs))
                if len(members) < 2:
                    continue
                if sum(hi - lo + 1 for lo, hi in atom) >= 2 or ranges_intersect(atom, WS_CHARS.ranges):
                    units.append((atom, members))
                else:
                    singles.append((atom, members))
            singles.sort()
            for k in range(0, len(singles), self.GROUP):
                chunk = singles[k : k + self.GROUP]
                members = frozenset.intersection(*(m for _, m in chunk))
                if len(members) >= 2:
                    units.append((ranges_union(*(a for a, _ in chunk)), members))
            rest: dict[int, tuple[tuple[int, int], ...]] = {i: rs for i, (_, rs) in enumerate(edges)}
            via: dict[int, list[Expr]] = {i: [] for i in range(len(edges))}
            for atom, members in units:
                hub = self.rule(f"{dest}-via", seq(Chars(atom), Ref(dest)))
                for i in members:
                    via[i].append(hub)
                    rest[i] = ranges_minus(rest[i], atom)
            for i, (st, _) in enumerate(edges):
                if via[i]:
                    parts = list(via[i])
                    if rest[i]:
                        parts.append(seq(Chars(rest[i]), Ref(dest)))
                    shared[(st, dest)] = parts
        if not shared:
            return
        for st in states:
            rule = self.rules[st]
            choices: list[Expr] = []
            changed = False
            for choice in rule.items if isinstance(rule, Alt) else (rule,):
                if isinstance(choice, Seq) and len(choice.items) == 2:
                    edge, target = choice.items
                    if isinstance(edge, Chars) and isinstance(target, Ref) and (st, target.name) in shared:
                        choices.extend(shared[(st, target.name)])
                        changed = True
                        continue
                choices.append(choice)
            if changed:
                self._gbnf_forms[st] = Alt(tuple(choices))

    # -- analysis ----------------------------------------------------------------------------

    def can_end_with(self, expr: Expr, suffix: str) -> bool:
        """Whether some string of `expr` ends with `suffix`, or could, given the text before it.

        Works right to left on the set of parts of `suffix` still to be matched (each a prefix of
        `suffix`), so it is exact and finite for any grammar; a part left over when `expr` is
        consumed means the text before `expr` could complete the suffix, which counts as yes.
        """
        if not suffix:
            return True
        memo: dict[tuple[str, frozenset[str]], frozenset[str]] = {}

        def back(e: Expr, pending: frozenset[str], stack: frozenset[str]) -> frozenset[str]:
            # the prefixes of `suffix` still unmatched after reading `e` backwards ("" = matched)
            if not pending or pending == {""}:
                return pending
            out: set[str] = {""} if "" in pending else set()
            live = pending - {""}
            if isinstance(e, Lit):
                for p in live:
                    if p.endswith(e.text):
                        out.add(p[: len(p) - len(e.text)])
                    elif e.text.endswith(p):
                        out.add("")
            elif isinstance(e, Chars):
                out |= {p[:-1] for p in live if ranges_contain(e.ranges, ord(p[-1]))}
            elif isinstance(e, Seq):
                cur = frozenset(live)
                for it in reversed(e.items):
                    cur = back(it, cur, stack)
                out |= cur
            elif isinstance(e, Alt):
                for it in e.items:
                    out |= back(it, frozenset(live), stack)
            elif isinstance(e, Rep):
                cur, seen = frozenset(live), set(live) if e.lo == 0 else set()
                for i in range(1, (e.hi if e.hi is not None else len(suffix) + 1) + 1):
                    cur = back(e.item, cur, stack)
                    if i >= e.lo:
                        if cur <= seen and i > e.lo:
                            break
                        seen |= cur
                    if not cur:
                        break
                out |= seen
            else:
                key = (e.name, frozenset(live))
                if key in memo:
                    out |= memo[key]
                elif e.name in stack:
                    out.add("")  # a recursive rule: answer conservatively
                else:
                    r = back(self.rules[e.name], frozenset(live), stack | {e.name})
                    memo[key] = r
                    out |= r
            return frozenset(out)

        return bool(back(expr, frozenset({suffix}), frozenset()))

    def shortest(self, expr: Expr) -> str | None:
        """A shortest string of `expr` (None: `expr` accepts nothing).

        The shortest string of every rule is computed once per version of the grammar, by a
        fixed-point iteration over the rules, so sampling and self-checks cost one evaluation
        of `expr` each.
        """
        if self._shortest is None or self._shortest[0] != self._version:
            # a worklist in rule order: a rule is evaluated again only when one it refers to got
            # shorter (the rounds over every rule this replaces took seconds at 100 tools)
            best: dict[str, str | None] = dict.fromkeys(self.rules)
            users: dict[str, list[str]] = {n: [] for n in self.rules}
            for n, r in self.rules.items():
                for ref in _refs(r):
                    users[ref].append(n)
            work = collections.deque(self.rules)
            queued = set(self.rules)
            while work:
                n = work.popleft()
                queued.discard(n)
                v = _shortest_of(self.rules[n], best)
                cur = best[n]
                if v is not None and (cur is None or len(v) < len(cur)):
                    best[n] = v
                    for u in users[n]:
                        if u not in queued:
                            queued.add(u)
                            work.append(u)
            self._shortest = (self._version, best)
        return _shortest_of(expr, self._shortest[1])

    def first_chars(self, expr: Expr) -> tuple[tuple[tuple[int, int], ...], bool]:
        """(characters a string of `expr` can start with, whether `expr` matches the empty string)."""
        memo: dict[str, tuple[tuple[tuple[int, int], ...], bool]] = {}

        def go(e: Expr, stack: frozenset[str]) -> tuple[tuple[tuple[int, int], ...], bool]:
            if isinstance(e, Lit):
                return (ranges_of(e.text[0]), False) if e.text else ((), True)
            if isinstance(e, Chars):
                return e.ranges, False
            if isinstance(e, Seq):
                acc: tuple[tuple[int, int], ...] = ()
                for it in e.items:
                    f, nullable = go(it, stack)
                    acc = ranges_union(acc, f)
                    if not nullable:
                        return acc, False
                return acc, True
            if isinstance(e, Alt):
                acc = ()
                any_null = False
                for it in e.items:
                    f, nullable = go(it, stack)
                    acc = ranges_union(acc, f)
                    any_null = any_null or nullable
                return acc, any_null
            if isinstance(e, Rep):
                f, nullable = go(e.item, stack)
                return f, nullable or e.lo == 0
            if e.name in memo:
                return memo[e.name]
            if e.name in stack:
                return (), False
            r = go(self.rules[e.name], stack | {e.name})
            memo[e.name] = r
            return r

        return go(expr, frozenset())

    # -- rendering ---------------------------------------------------------------------------

    def _reachable(self, forms: dict[str, Expr] | None = None) -> list[str]:
        """The rules reachable from the root, reading a rule as `forms` gives it where it does."""
        assert self.root is not None
        forms = forms or {}
        seen: list[str] = []
        done: set[str] = set()
        todo = [self.root]
        while todo:
            n = todo.pop()
            if n in done:
                continue
            done.add(n)
            seen.append(n)
            todo.extend(_ref_list(forms.get(n, self.rules[n])))
        return seen

    def gbnf(self) -> str:
        """llama.cpp GBNF (also XGrammar's EBNF): `root ::= ...` first."""
        lines = []
        forms = self._gbnf_forms
        for n in self._reachable(forms):
            name = "root" if n == self.root else n
            lines.append(f"{name} ::= {_gbnf(forms.get(n, self.rules[n]), self.root)}")
        return "\n".join(lines) + "\n"

    def lark(self) -> str:
        """Lark for llguidance: `start: ...` first; character classes are regex terminals.

        Free-text automata are written left-linear (`t ::= s c`): llguidance's Earley parser keeps
        one item per pending right-recursive rule, so right-linear text would grow every row with
        the text's length (it stops at 2,000 items), while left recursion keeps rows constant.
        GBNF keeps them right-linear: llama.cpp's grammar engine cannot run left recursion.
        """
        lines = []
        inner: set[str] = set()
        for start, states in self.automata.items():
            inner.update(x for x in states if x != start)
        for n in self._reachable():
            if n in inner:
                continue
            name = "start" if n == self.root else _lark_name(n)
            if n in self.automata:
                lines.extend(self._lark_left_linear(n, name))
                continue
            lines.append(f"{name}: {_lark(self.rules[n], self.root)}")
        return "\n".join(lines) + "\n"

    def _lark_left_linear(self, start: str, name: str) -> list[str]:
        """The automaton at `start` as left-linear rules: `L_t` matches what leads from start to t."""
        incoming: dict[str, list[str]] = {x: [] for x in self.automata[start]}
        accepting: list[str] = []
        for st in self.automata[start]:
            rule = self.rules[st]
            for choice in rule.items if isinstance(rule, Alt) else (rule,):
                if choice == EMPTY:
                    accepting.append(st)
                    continue
                assert isinstance(choice, Seq) and len(choice.items) == 2, choice
                edge, target = choice.items
                assert isinstance(target, Ref), choice
                incoming[target.name].append(f"{_lark_name(st)}_l {_render_atom(edge, self.root, _LARK)}")
        out = []
        for st in self.automata[start]:
            alts = incoming[st] + (['""'] if st == start else [])
            if alts:
                out.append(f"{_lark_name(st)}_l: " + " | ".join(alts))
        body = " | ".join(f"{_lark_name(x)}_l" for x in accepting if incoming[x] or x == start)
        out.insert(0, f"{name}: {body or _lark(NOTHING, None)}")
        return out


def representative_char(ranges: tuple[tuple[int, int], ...]) -> str:
    """A readable member of a character set (`a`, `0`, another letter or digit, else the first)."""
    for pref in "a0":
        if ranges_contain(ranges, ord(pref)):
            return pref
    for a, b in ranges:
        for cp in range(a, min(b, a + 200) + 1):
            if chr(cp).isalnum():
                return chr(cp)
    return chr(ranges[0][0])


def _refs(x: Expr) -> set[str]:
    """The rule names an expression refers to directly."""
    return set(_ref_list(x))


def _ref_list(x: Expr) -> list[str]:
    """The rule names an expression refers to directly, in a fixed order (last item first)."""
    out: list[str] = []
    stack = [x]
    while stack:
        e = stack.pop()
        if isinstance(e, Ref):
            out.append(e.name)
        elif isinstance(e, (Seq, Alt)):
            stack.extend(e.items)
        elif isinstance(e, Rep):
            stack.append(e.item)
    return out


def _shortest_of(x: Expr, best: dict[str, str | None]) -> str | None:
    if isinstance(x, Lit):
        return x.text
    if isinstance(x, Seq):
        parts = []
        for i in x.items:
            v = _shortest_of(i, best)
            if v is None:
                return None
            parts.append(v)
        return "".join(parts)
    if isinstance(x, Alt):
        vals = [v for v in (_shortest_of(i, best) for i in x.items) if v is not None]
        return min(vals, key=len) if vals else None
    if isinstance(x, Rep):
        if x.lo == 0:
            return ""
        v = _shortest_of(x.item, best)
        return None if v is None else v * x.lo
    if isinstance(x, Chars):
        return representative_char(x.ranges) if x.ranges else None
    return best.get(x.name)


# --------------------------------------------------------------------------------------------------
# Renderers


def _esc_cp(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if ch == "\\":
        return "\\\\"
    if in_class and ch in "]^-[":
        return "\\" + ch
    if not in_class and ch == '"':
        return '\\"'
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if cp < 0x20 or cp == 0x7F or 0x80 <= cp < 0xA0 or ch.isspace() and cp > 0x7F:
        return f"\\x{cp:02X}" if cp < 0x100 else (f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}")
    if cp > 0x7F and not ch.isprintable():
        return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"
    return ch


@functools.lru_cache(maxsize=4096)
def _gbnf_class(ranges: tuple[tuple[int, int], ...]) -> str:
    comp = ranges_complement(ranges)
    neg = len(comp) < len(ranges)
    body_ranges = comp if neg else ranges
    if neg:
        body_ranges = ranges_minus(body_ranges, ())
    parts = []
    for lo, hi in body_ranges:
        if lo == hi:
            parts.append(_esc_cp(lo, True))
        else:
            parts.append(f"{_esc_cp(lo, True)}-{_esc_cp(hi, True)}")
    if neg:
        # A negated class must not exclude the surrogates' absence: they are not characters anyway.
        parts = [p for p in parts]
        return "[^" + "".join(parts) + "]" if parts else "[\\x00-\\U0010FFFF]"
    return "[" + "".join(parts) + "]"


@dataclass(frozen=True)
class _Syntax:
    """How one grammar language writes the IR's atoms; `_render` writes the structure for both."""

    lit: Callable[[str], str]
    chars: Callable[[tuple[tuple[int, int], ...]], str]
    nothing: str  # a class no character matches
    root: str  # the name of the start rule
    name: Callable[[str], str]
    bounded: Callable[[str, int, int | None], str]  # inner{lo,hi} (hi None: at least lo)
    group: Callable[[str], str]  # a parenthesised sequence or alternation


def _render(e: Expr, root: str | None, syn: _Syntax) -> str:
    if isinstance(e, Lit):
        return syn.lit(e.text)
    if isinstance(e, Chars):
        return syn.chars(e.ranges)
    if isinstance(e, Seq):
        return " ".join(_render_atom(i, root, syn) for i in e.items)
    if isinstance(e, Alt):
        if not e.items:
            return syn.nothing
        return " | ".join(_render(i, root, syn) for i in e.items)
    if isinstance(e, Rep):
        inner = _render_atom(e.item, root, syn)
        suffix = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((e.lo, e.hi))
        return inner + suffix if suffix else syn.bounded(inner, e.lo, e.hi)
    return syn.root if e.name == root else syn.name(e.name)


def _render_atom(e: Expr, root: str | None, syn: _Syntax) -> str:
    s = _render(e, root, syn)
    return syn.group(s) if _grouped(e) else s


def _grouped(e: Expr) -> bool:
    return isinstance(e, (Seq, Alt)) and (not isinstance(e, Alt) or bool(e.items))


def _gbnf_lit(text: str) -> str:
    return '"' + "".join(_esc_cp(ord(c), False) for c in text) + '"'


_GBNF = _Syntax(
    lit=_gbnf_lit,
    chars=lambda r: _gbnf_class(r) if r else "( )",
    nothing="[^\\x00-\\U0010FFFF]",  # matches nothing
    root="root",
    name=lambda n: n,
    bounded=lambda inner, lo, hi: f"{inner}{{{lo},{'' if hi is None else hi}}}",
    group=lambda s: f"( {s} )",
)


def _gbnf(e: Expr, root: str | None) -> str:
    return _render(e, root, _GBNF)


def _lark_name(n: str) -> str:
    return n.replace("-", "_")


@functools.lru_cache(maxsize=4096)
def _lark_class(ranges: tuple[tuple[int, int], ...]) -> str:
    comp = ranges_complement(ranges)
    neg = len(comp) < len(ranges)
    body = comp if neg else ranges

    def esc(cp: int) -> str:
        ch = chr(cp)
        if ch in "\\]^-[/":
            return "\\" + ch
        if cp < 0x20 or cp == 0x7F or not ch.isprintable() or ch.isspace():
            return f"\\x{{{cp:X}}}"
        return ch

    parts = "".join(esc(lo) if lo == hi else f"{esc(lo)}-{esc(hi)}" for lo, hi in body)
    if neg:
        return f"/[^{parts}]/" if parts else "/(?s:.)/"
    return f"/[{parts}]/"


def _lark_lit(text: str) -> str:
    out = []
    for c in text:
        cp = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _lark_text(text: str) -> str:
    # One lexeme per character: llguidance's lexer takes the longest lexeme the parser allows,
    # so a multi-character literal would win over a one-character one that the correct parse
    # needs (`"<"` then `"｜DSML｜"` versus `"<｜DSML｜"`). Single characters never compete.
    if not text:
        return '""'
    parts = [_lark_lit(c) for c in text]
    return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"


_LARK = _Syntax(
    lit=_lark_text,
    chars=_lark_class,
    nothing="/[^\\x00-\\x{10FFFF}]/",
    root="start",
    name=_lark_name,
    bounded=lambda inner, lo, hi: f"{inner}~{lo} {inner}*" if hi is None else f"{inner}~{lo}..{hi}",
    group=lambda s: f"({s})",
)


def _lark(e: Expr, root: str | None) -> str:
    return _render(e, root, _LARK)


# --------------------------------------------------------------------------------------------------
# Lookahead checks: does every string of a grammar expression start with a string of a regular one?


class _Nfa:
    """A Thompson NFA for a regular expression of the IR (rules are inlined; recursion refused)."""

    def __init__(self, g: Grammar, expr: Expr) -> None:
        self.g = g
        self.trans: list[list[tuple[tuple[tuple[int, int], ...] | None, int]]] = []
        self._steps: dict[tuple[frozenset[int], tuple[tuple[int, int], ...]], frozenset[frozenset[int]]] = {}
        self.start = self._new()
        self.final = self._build(expr, self.start, frozenset())

    def _new(self) -> int:
        self.trans.append([])
        return len(self.trans) - 1

    def _edge(self, a: int, label: tuple[tuple[int, int], ...] | None) -> int:
        b = self._new()
        self.trans[a].append((label, b))
        return b

    def _build(self, e: Expr, s: int, stack: frozenset[str]) -> int:
        if isinstance(e, Lit):
            for ch in e.text:
                s = self._edge(s, ranges_of(ch))
            return s
        if isinstance(e, Chars):
            return self._edge(s, e.ranges)
        if isinstance(e, Seq):
            for it in e.items:
                s = self._build(it, s, stack)
            return s
        if isinstance(e, Alt):
            end = self._new()
            for it in e.items:
                self.trans[self._build(it, self._edge(s, None), stack)].append((None, end))
            return end
        if isinstance(e, Rep):
            for _ in range(e.lo):
                s = self._build(e.item, s, stack)
            if e.hi is None:
                loop = self._edge(s, None)
                back = self._build(e.item, loop, stack)
                self.trans[back].append((None, loop))
                return loop
            end = self._new()
            self.trans[s].append((None, end))
            for _ in range(e.hi - e.lo):
                s = self._build(e.item, s, stack)
                self.trans[s].append((None, end))
            return end
        if e.name in stack:
            raise ValueError(f"the rule {e.name!r} is recursive: not a regular expression")
        return self._build(self.g.rules[e.name], s, stack | {e.name})

    def closure(self, states: set[int]) -> frozenset[int]:
        todo, seen = list(states), set(states)
        while todo:
            for label, t in self.trans[todo.pop()]:
                if label is None and t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)

    def step(self, d: frozenset[int], ranges: tuple[tuple[int, int], ...]) -> set[frozenset[int]]:
        """The DFA states reached from `d` on each character of `ranges` (one per class of them)."""
        key = (d, ranges)
        hit = self._steps.get(key)
        if hit is None:
            hit = self._steps[key] = frozenset(self._step(d, ranges))
        return set(hit)

    def _step(self, d: frozenset[int], ranges: tuple[tuple[int, int], ...]) -> set[frozenset[int]]:
        labels = [(lab, t) for s in d for lab, t in self.trans[s] if lab is not None]
        cuts = {lo for lo, _ in ranges} | {hi + 1 for _, hi in ranges}
        for lab, _ in labels:
            cuts |= {lo for lo, _ in lab} | {hi + 1 for _, hi in lab}
        points = sorted(cuts)
        out: set[frozenset[int]] = set()
        for a, b in zip(points, points[1:]):
            if not ranges_contain(ranges, a):
                continue
            del b
            out.add(self.closure({t for lab, t in labels if ranges_contain(lab, a)}))
        return out


class SubstringDfa:
    """The subset automaton of `.*P` for a regular expression P: a state is the set of NFA states of
    the matches under way; a state holding P's final state has just completed a match."""

    def __init__(self, g: Grammar, pattern: Expr) -> None:
        self.nfa = _Nfa(g, pattern)
        self.final = self.nfa.final
        self.start = self.nfa.closure({self.nfa.start})
        # a match under way never comes back to the states a match starts in: the states of `d`
        # outside `start` are then exactly the matches that began in the text read so far
        self.tagged = all(
            not (self.nfa.closure({t}) & self.start)
            for tr in self.nfa.trans
            for lab, t in tr
            if lab is not None
        )
        self._ends: dict[tuple[frozenset[int], Expr], bool] = {}
        self._moves: dict[frozenset[int], list[tuple[tuple[tuple[int, int], ...], frozenset[int]]]] = {}

    def moves(self, d: frozenset[int]) -> list[tuple[tuple[tuple[int, int], ...], frozenset[int]]]:
        """A partition of all characters into (characters, next state)."""
        hit = self._moves.get(d)
        if hit is not None:
            return hit
        labels = [(lab, t) for s in d for lab, t in self.nfa.trans[s] if lab is not None]
        cuts = {0, MAX_CODEPOINT + 1}
        for lab, _ in labels:
            cuts |= {lo for lo, _ in lab} | {hi + 1 for _, hi in lab}
        points = sorted(cuts)
        by_target: dict[frozenset[int], list[tuple[int, int]]] = {}
        for a, b in zip(points, points[1:]):
            t = self.nfa.closure({t for lab, t in labels if ranges_contain(lab, a)}) | self.start
            by_target.setdefault(t, []).append((a, b - 1))
        out = []
        for t, rs in by_target.items():
            part = ranges_minus(ranges_union(tuple(rs)), (_SURROGATES,))
            if part:
                out.append((part, t))
        self._moves[d] = out
        return out

    def may_end(self, d: frozenset[int], follow: Expr | None) -> bool:
        """Whether text whose automaton stands at `d` may end where `follow` is written next: no
        match under way survives `follow` or completes inside it (without `follow`, or where the
        matches under way cannot be told apart, only where none is under way)."""
        if d == self.start:
            return True
        if follow is None or not self.tagged:
            return False
        key = (d, follow)
        hit = self._ends.get(key)
        if hit is None:
            pending = d - self.start
            try:
                hit = not self._raw(
                    {frozenset(self.nfa.closure(set(pending)) - self.start) or frozenset()}, follow, 0
                )
            except _Completed:
                hit = False
            self._ends[key] = hit
        return hit

    def _raw_step(self, d: frozenset[int], ranges: tuple[tuple[int, int], ...]) -> set[frozenset[int]]:
        out = set()
        for t in self.nfa.step(d, ranges):
            if self.final in t:
                raise _Completed
            if t:
                out.add(t)
        return out

    def _raw(self, ds: set[frozenset[int]], e: Expr, depth: int) -> set[frozenset[int]]:
        """The matches under way after `e` (no new ones start); `_Completed` if one completes."""
        return self._walk(ds, e, depth, self._raw_step, raw=True)

    def after(self, d: frozenset[int], expr: Expr, depth: int = 0) -> set[frozenset[int]]:
        """The states reached from `d` by the strings of `expr` (a small, non-recursive expression)."""
        return self._walk({d}, expr, depth, self._move, raw=False)

    def _move(self, d: frozenset[int], ranges: tuple[tuple[int, int], ...]) -> set[frozenset[int]]:
        return {t for r, t in self.moves(d) if ranges_intersect(r, ranges)}

    def _walk(
        self,
        ds: set[frozenset[int]],
        e: Expr,
        depth: int,
        step: Callable[[frozenset[int], tuple[tuple[int, int], ...]], set[frozenset[int]]],
        raw: bool,
    ) -> set[frozenset[int]]:
        """The states `step` leads the states `ds` to over the strings of `e`. `raw`: only the
        matches under way (empty sets dropped, and a walk too deep to follow counts as a completed
        match, so the text may not end); else a walk too deep is an error."""
        if raw:
            ds = {d for d in ds if d}
            if not ds:
                return ds
        if depth > 50:
            if raw:
                raise _Completed
            raise ValueError("SubstringDfa.after: expression too deep")
        if isinstance(e, Lit):
            for ch in e.text:
                ds = {t for d in ds for t in step(d, ranges_of(ch))}
            return ds
        if isinstance(e, Chars):
            return {t for d in ds for t in step(d, e.ranges)} if e.ranges else set()
        if isinstance(e, Seq):
            for it in e.items:
                ds = self._walk(ds, it, depth + 1, step, raw)
            return ds
        if isinstance(e, Alt):
            return (
                set().union(*(self._walk(ds, it, depth + 1, step, raw) for it in e.items))
                if e.items
                else set()
            )
        if isinstance(e, Rep):
            cur, acc = set(ds), set(ds) if e.lo == 0 else set()
            i = 0
            while e.hi is None or i < e.hi:
                _budget.check()
                i += 1
                cur = self._walk(cur, e.item, depth + 1, step, raw)
                if i >= e.lo:
                    if cur <= acc:
                        break
                    acc |= cur
                if not cur:
                    break
            return acc
        return self._walk(ds, self.nfa.g.rules[e.name], depth + 1, step, raw)


class _Completed(Exception):
    pass


def violates_prefix(g: Grammar, expr: Expr, prefix: Expr) -> bool:
    """True if some string of `expr` does not start with a string of the regular `prefix`.

    Exact: runs `prefix`'s automaton (subset construction on the fly) over the grammar, rule by
    rule, to a fixed point. A string of `expr` that ends before `prefix` is complete counts as a
    violation (what follows is not known here).
    """
    nfa = g._nfas.get(prefix)
    if nfa is None:
        nfa = g._nfas[prefix] = _Nfa(g, prefix)
    start = nfa.closure({nfa.start})
    done = nfa.final
    table: dict[tuple[str, frozenset[int]], frozenset[frozenset[int]]] = {}
    changed = True

    def settled(d: frozenset[int]) -> bool:
        return done in d or not d

    def go(e: Expr, d: frozenset[int]) -> frozenset[frozenset[int]]:
        nonlocal changed
        if settled(d):
            return frozenset({d})
        if isinstance(e, Lit):
            for ch in e.text:
                (d,) = nfa.step(d, ranges_of(ch)) or {frozenset()}
                if settled(d):
                    break
            return frozenset({d})
        if isinstance(e, Chars):
            return frozenset(nfa.step(d, e.ranges)) if e.ranges else frozenset()
        if isinstance(e, Seq):
            cur = frozenset({d})
            for it in e.items:
                cur = frozenset(x for c in cur for x in go(it, c))
            return cur
        if isinstance(e, Alt):
            return frozenset(x for it in e.items for x in go(it, d))
        if isinstance(e, Rep):
            cur = frozenset({d})
            acc: set[frozenset[int]] = set(cur) if e.lo == 0 else set()
            i = 0
            while e.hi is None or i < e.hi:
                _budget.check()
                i += 1
                cur = frozenset(x for c in cur for x in go(e.item, c))
                if i >= e.lo:
                    if cur <= acc and i > e.lo:
                        break
                    acc |= cur
                if not cur:
                    break
            return frozenset(acc)
        key = (e.name, d)
        if fresh.get(key) != rounds:  # each round re-derives every rule once from the last values
            fresh[key] = rounds
            old = table.get(key, frozenset())
            table[key] = old
            val = go(g.rules[e.name], d) | old
            if val != old:
                table[key] = val
                changed = True
        return table[key]

    fresh: dict[tuple[str, frozenset[int]], int] = {}
    rounds = 0
    result: frozenset[frozenset[int]] = frozenset()
    while changed:
        _budget.check()
        changed = False
        rounds += 1
        result = go(expr, start)
    return any(done not in d for d in result)


def reversed_expr(g: Grammar, expr: Expr, memo: dict[str, str] | None = None) -> Expr:
    """The expression of the reversed strings (rules are reversed into new, unreachable rules)."""
    memo = {} if memo is None else memo
    if isinstance(expr, Lit):
        return Lit(expr.text[::-1])
    if isinstance(expr, Chars):
        return expr
    if isinstance(expr, Seq):
        return seq(*(reversed_expr(g, it, memo) for it in reversed(expr.items)))
    if isinstance(expr, Alt):
        return alt(*(reversed_expr(g, it, memo) for it in expr.items)) if expr.items else expr
    if isinstance(expr, Rep):
        return Rep(reversed_expr(g, expr.item, memo), expr.lo, expr.hi)
    if expr.name not in memo:
        memo[expr.name] = g.declare(f"rev-{expr.name}")
        g.define(memo[expr.name], reversed_expr(g, g.rules[expr.name], memo))
    return Ref(memo[expr.name])


def violates_suffix(g: Grammar, expr: Expr, suffix: Expr) -> bool:
    """True if some string of `expr` does not end with a string of the regular `suffix`."""
    return violates_prefix(g, reversed_expr(g, expr, g._reversed), reversed_expr(g, suffix, g._reversed))
