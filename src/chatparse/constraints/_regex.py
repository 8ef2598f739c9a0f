"""Delimiter regexes to grammar expressions, and the literals every match of a regex contains.

`emit` turns a template delimiter (the `regex` module syntax, read through `parse`)
into the language of strings the constraint lets the model write for it: a subset of what the
regex matches, with named groups replaced (`name` by the tool's name, `key` by a parameter name,
`value` by a typed value). Constructs that only decide *where* a match may happen are left out
of the emitted language and checked afterwards by parsing sample calls with the template itself:
a trailing lookahead (what follows is written by the grammar), a lookbehind alternative, an
end-of-text alternative. Anything else a grammar cannot write raises `ConstraintError`.

`necessary` gives a set of literals such that every match of the pattern, including the text its
lookarounds inspect, contains one of them: free text that contains none of them can never be
mistaken for that delimiter.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import regex

from .. import _rx
from ._grammar import (
    ANY_CHAR,
    EMPTY,
    MAX_CODEPOINT,
    NOTHING,
    Chars,
    Expr,
    Grammar,
    Lit,
    alt,
    class_ranges,
    opt,
    ranges_complement,
    ranges_contain,
    ranges_intersect,
    ranges_minus,
    ranges_of,
    rep,
    seq,
)
from ._schema import ConstraintError

# -- the seam to the core's pattern parser ---------------------------------------------------------
#
# The core parses delimiter regexes into its own tree (`chatparse.Node`, typed by `_rx.Op`),
# which is private and changes with the scanner. This package reads patterns only through `parse`,
# which converts that tree into `Node` below: the one place that names the core's private parser,
# so a change of the core's tree is a change here and nowhere else.


@dataclass(frozen=True)
class Node:
    """A parsed delimiter pattern, as this package reads it.

    `op`: `lit` (args: the character), `cls` (args: class source, flags: one character), `any`
    (args: dotall), `cat`, `alt` (kids in priority order), `group` (args: name or None), `assert`
    (args: kind: bos, bol, eos, eol, Z, b, B, m, M), `look` (args: ahead, negate), `atomic`,
    `rep` (args: lo, hi or None, greedy | lazy | possessive), `empty`.
    """

    op: str
    args: tuple[Any, ...] = ()
    kids: tuple[Node, ...] = ()


_BACKREF = regex.compile(r"(?<!\\)\(\?P=(\w+)\)")
_NAMED = regex.compile(r"(?<!\\)\(\?P<(\w+)>")
_REF_MARK, _DUP_MARK = "__chatparse_ref_", "__chatparse_dup"


@functools.lru_cache(maxsize=1024)
def parse(pattern: str) -> Node:
    """The tree of a template pattern (`regex` syntax, DOTALL, as the parser compiles it).

    Two constructs the core's delimiter parser refuses but `xml-inline` tag patterns use (the
    `regex` module compiles those) are read here too: a back-reference `(?P=key)` (MiniMax M3's
    `<key>...</key>`) becomes a `backref` node, which the grammar writes as the group's text; a
    group name used again in another branch (MiniCPM's `(?P<value>...)` twice) keeps its name.
    """
    source = _BACKREF.sub(lambda m: f"(?P<{_REF_MARK}{m.group(1)}>)", pattern)
    seen: dict[str, int] = {}

    def rename(m: Any) -> str:
        name = m.group(1)
        seen[name] = seen.get(name, 0) + 1
        return m.group(0) if seen[name] == 1 else f"(?P<{name}{_DUP_MARK}{seen[name]}>"

    source = _NAMED.sub(rename, source)
    try:
        tree = _rx._Parser(source, regex.DOTALL).parse()
    except _rx.UnsupportedPattern as e:
        raise ConstraintError(f"the pattern {pattern!r} uses {e}") from e
    return _convert(tree)


def _convert(n: Any) -> Node:
    op = n.op.value if hasattr(n.op, "value") else str(n.op)
    args = tuple(n.args)
    if op == "look":
        args = args[:2]
    elif op == "assert":
        args = args[:1]
    elif op == "group" and isinstance(args[0], str):
        name = args[0]
        if name.startswith(_REF_MARK):
            return Node("backref", (name[len(_REF_MARK) :],))
        if _DUP_MARK in name:
            args = (name.split(_DUP_MARK)[0], *args[1:])
    return Node(op, args, tuple(_convert(k) for k in n.kids))


def literal_tree(literals: list[str] | tuple[str, ...]) -> Node:
    """The tree of a literal delimiter (its alternatives)."""
    return Node(
        "alt", kids=tuple(Node("cat", kids=tuple(Node("lit", (c,)) for c in lit)) for lit in literals)
    )


def leading_negative_lookbehinds(tree: Node) -> tuple[Node, tuple[Node, ...]]:
    """The pattern without the negative lookbehinds it starts with, and their bodies.

    `(?<!B)X` (Harmony's `(?<!to=[^\\s<]{1,256}[ \\t]{0,16})<|channel|>...`) only says what may not
    precede X. The grammar writes X after a delimiter it writes itself or after free text; the
    caller keeps the literals every match of B contains out of free text, so B never holds there.
    """
    bodies: list[Node] = []
    if tree.op == "cat":
        kids = list(tree.kids)
        while kids and kids[0].op == "look" and kids[0].args[:2] == (False, True):
            bodies.append(kids.pop(0).kids[0])
        if bodies:
            tree = Node("cat", kids=tuple(kids))
    return tree, tuple(bodies)


def cat(kids: Any) -> Node:
    return Node("cat", kids=tuple(kids))


def _cls(node: Node) -> Chars:
    src, flags = node.args
    return Chars(class_ranges(src, flags & ~regex.DOTALL | regex.DOTALL))


class Emitter:
    """Converts one pattern. `subst` maps group names to expressions; `at_start` says whether
    the match can begin at buffer position 0 (so `^` may match)."""

    def __init__(
        self,
        grammar: Grammar,
        where: str,
        *,
        subst: dict[str, Expr] | None = None,
        at_start: bool = False,
        max_repeat: int | None = None,
        peek: bool = False,
        drop_optional: tuple[str, ...] = (),
        behind: str | None = None,
        force_group: str | None = None,
        omit_group: str | None = None,
    ) -> None:
        self.force_group = force_group  # an optional part holding this group is always written
        self.omit_group = omit_group  # ... never written
        self.peek = peek
        self.behind = behind  # the text known to precede (a lookbehind on it holds)
        self.drop_optional = drop_optional
        self.g = grammar
        self.where = where
        self.subst = subst or {}
        self.at_start = at_start
        self.max_repeat = max_repeat
        self.used: set[str] = set()

    def _behind_holds(self, node: Node) -> bool:
        """`node` is a lookbehind `(?<=LIT)` and the known preceding text ends with LIT."""
        while node.op == "group" and node.args[0] is None and node.kids:
            node = node.kids[0]
        if node.op != "look" or node.args[:2] != (False, False) or self.behind is None:
            return False
        lit = _literal_text(node.kids[0])
        return lit is not None and lit != "" and self.behind.endswith(lit)

    def _placed(self, look: Node, rest: tuple[Node, ...], trailing: bool) -> Expr:
        """`(?=L)R` in the middle of a pattern (Harmony's `(?=[^<]{0,128}to=functions\\.(?P<name>...))`
        before the header it reads): the strings of R written with L's fixed tail (`to=functions.NAME`
        once the name is substituted) placed, between whitespace, in one of R's gaps (a repetition of
        a class that holds it), each placement kept only where every string it writes satisfies L
        (exact: `violates_prefix` on L's automaton, with the character after a substituted greedy
        group kept out of that group's class so the group reads exactly the substituted text)."""
        tail, guard, name_len = self._fixed_tail(look)
        if not tail:
            raise self.fail("a lookahead in the middle of a pattern without a fixed ending")
        from ._grammar import violates_prefix

        exact = Emitter(self.g, self.where, subst=self.subst, at_start=self.at_start, peek=True)
        check = seq(exact.emit(look), guard)
        self.used |= exact.used
        parts = [
            self.emit(k, trailing and all(_zero_width(x) for x in rest[i + 1 :])) for i, k in enumerate(rest)
        ]
        ws_cap = self.max_repeat if self.max_repeat is not None else 16
        fixed = tail[: len(tail) - name_len]
        cut = next((c for c in fixed if not c.isalnum() and not c.isspace()), fixed[-1:] or tail[0])
        gaps: dict[int, tuple[tuple[tuple[int, int], ...], int, int]] = {}
        for j, k in enumerate(rest):
            if k.op == "rep" and k.kids[0].op == "cls":
                ranges = _cls(k.kids[0]).ranges
                if all(ranges_contain(ranges, ord(c)) for c in tail):
                    hi = k.args[1] if k.args[1] is not None else len(tail) + 2 * ws_cap
                    gaps[j] = (ranges, k.args[0], hi)
        placements: list[Expr] = []
        for j, (ranges, lo, hi) in gaps.items():
            if hi < len(tail) or lo > len(tail):
                continue

            def pad_of(r: tuple[tuple[int, int], ...], room: int) -> Expr:
                return rep(Chars(ranges_intersect(r, ranges_of(" \t"))), 0, min(ws_cap, max(0, room)))

            # the other gaps L could read hold at most one short word between whitespace (the
            # ` json` content type of `<|channel|>commentary json`), never the tail's `=`, so the
            # text L reads (a greedy gap finds the last match it can) is the placed tail and
            # nothing else; a gap too short for that keeps its class without `=`
            cand_parts = list(parts)
            for o, (r2, lo2, hi2) in gaps.items():
                if o == j:
                    continue
                word = Chars(ranges_minus(ranges_intersect(r2, _WORD), ranges_of(cut)))
                if lo2 == 0 and hi2 >= 2 * ws_cap + 16 and word.ranges:
                    cand_parts[o] = seq(
                        pad_of(r2, ws_cap), rep(seq(rep(word, 1, 16), pad_of(r2, ws_cap)), 0, 1)
                    )
                else:
                    cand_parts[o] = rep(Chars(ranges_minus(r2, ranges_of(cut))), lo2, hi2)
            room = (hi - len(tail)) // 2
            cand_parts[j] = seq(pad_of(ranges, room), Lit(tail), pad_of(ranges, room))
            cand = seq(*cand_parts)
            try:
                ok = not violates_prefix(self.g, cand, check)
            except ValueError:
                ok = False
            if ok:
                placements.append(cand)
        if not placements:
            raise self.fail("a lookahead in the middle of a pattern (no gap of what follows holds its text)")
        return alt(*placements)

    def _word_not_in(self, look: Node, rest: tuple[Node, ...], trailing: bool) -> Expr:
        """`(?!(?:w1|w2|...)X)C{lo,hi}R` where neither X nor R starts with a character of C (MuSE
        Glimmer's recipient `to=(?!(?:self|user|...)<)[A-Za-z0-9_.\\-]{1,256}<|message|>`): the
        lookahead can then only match where the run of C is exactly one of the wi, so the words of
        C{lo,hi} other than those are written (a trie; exact)."""
        body = look
        while body.op == "group" and body.args[0] is None:
            body = body.kids[0]
        kids = list(body.kids) if body.op == "cat" else [body]
        head = kids[0] if kids else body
        while head.op == "group" and head.args[0] is None:
            head = head.kids[0]
        words = [_literal_text(a) for a in (head.kids if head.op == "alt" else [head])]
        after = cat(kids[1:]) if len(kids) > 1 else Node("empty")
        first = rest[0] if rest else None
        if (
            first is None
            or first.op != "rep"
            or first.kids[0].op != "cls"
            or any(w is None or w == "" for w in words)
        ):
            raise self.fail("a negative lookahead in the middle of a pattern")
        cls = _cls(first.kids[0]).ranges
        lo, hi = first.args[0], first.args[1]
        follow = Emitter(self.g, self.where, peek=True).emit(after)
        firsts, nullable = self.g.first_chars(follow)
        nexts, next_nullable = self.g.first_chars(
            seq(*(self.emit(k, False) for k in rest[1:])) if len(rest) > 1 else EMPTY
        )
        if (
            nullable
            or next_nullable
            or ranges_intersect(firsts, cls)
            or ranges_intersect(nexts, cls)
            or any(not all(ranges_contain(cls, ord(c)) for c in w) for w in words if w)
        ):
            raise self.fail("a negative lookahead in the middle of a pattern (not a word exclusion)")
        bad = {w for w in words if w is not None}
        if hi is None and self.max_repeat is not None:
            hi = max(lo, self.max_repeat, max(len(w) for w in bad) + 1)
        word = self._not_words(bad, cls, lo, hi, "")
        tail = [
            self.emit(k, trailing and all(_zero_width(x) for x in rest[j + 1 :])) for j, k in enumerate(rest)
        ]
        return seq(word, *tail[1:])

    def _not_words(
        self, bad: set[str], cls: tuple[tuple[int, int], ...], lo: int, hi: int | None, p: str
    ) -> Expr:
        """Words of `cls` with lo..hi characters that start with p and are not in `bad`."""
        n = len(p)
        forms: list[Expr] = []
        if p not in bad and n >= lo:
            forms.append(EMPTY)
        if hi is not None and n >= hi:
            return alt(*forms) if forms else NOTHING
        nxt = sorted({w[n] for w in bad if len(w) > n and w.startswith(p)})
        others = ranges_minus(cls, ranges_of("".join(nxt)))
        if others:
            tail_hi = None if hi is None else hi - n - 1
            forms.append(seq(Chars(others), rep(Chars(cls), max(0, lo - n - 1), tail_hi)))
        for c in nxt:
            forms.append(seq(Lit(c), self._not_words(bad, cls, lo, hi, p + c)))
        return alt(*forms) if forms else NOTHING

    def _fixed_tail(self, look: Node) -> tuple[str, Expr, int]:
        """The literal text a lookahead body ends with once its groups are substituted, what the
        next character must be (outside the class of a greedy substituted group at the very end),
        and how many of the text's characters are substituted at its end."""
        kids = list(look.kids) if look.op == "cat" else [look]
        text = ""
        guard: Expr = EMPTY
        subst_len = 0
        for idx in range(len(kids) - 1, -1, -1):
            k = kids[idx]
            lt = _literal_text(k)
            if lt is not None:
                text = lt + text
                continue
            if k.op == "group" and k.args[0] in self.subst and isinstance(self.subst[k.args[0]], Lit):
                sub = self.subst[k.args[0]]
                assert isinstance(sub, Lit)
                if idx == len(kids) - 1:
                    body = k.kids[0]
                    if body.op == "rep" and body.kids[0].op == "cls" and body.args[2] != "lazy":
                        guard = Chars(ranges_complement(_cls(body.kids[0]).ranges))
                    else:
                        return "", EMPTY, 0
                    subst_len = len(sub.text)
                text = sub.text + text
                continue
            break
        return text, guard, subst_len

    def fail(self, what: str) -> ConstraintError:
        return ConstraintError(f"{self.where}: {what} cannot be written by a grammar")

    def emit(self, node: Node, trailing: bool = True) -> Expr:
        op = node.op
        if op == "empty":
            return EMPTY
        if op == "lit":
            return Lit(node.args[0])
        if op == "cls":
            return _cls(node)
        if op == "any":
            if not node.args[0]:
                return Chars(class_ranges(".", 0))
            return ANY_CHAR
        if op == "cat":
            kids = node.kids
            out: list[Expr] = []
            for i, k in enumerate(kids):
                rest_zero = all(_zero_width(x) for x in kids[i + 1 :])
                if i == 0 and self.at_start and not self.peek and _start_lookbehind(k) is not None:
                    # `(?<=^B)X` leading a delimiter written at the start of the output (Qwen3's
                    # reasoning opener `(?<=^\s{0,16}(?:<think>\s{0,16}</think>\s{0,16})?)<think>`):
                    # the lookbehind reads everything from the buffer's start, so writing a string
                    # of B, then X, is exactly what makes it hold.
                    body = _start_lookbehind(k)
                    assert body is not None
                    out.append(
                        Emitter(
                            self.g, self.where, subst=self.subst, at_start=True, max_repeat=self.max_repeat
                        ).emit(body)
                    )
                    continue
                if k.op == "look" and k.args[:2] == (True, False) and not rest_zero and not self.peek:
                    out.append(self._placed(k.kids[0], kids[i + 1 :], trailing))
                    break
                if k.op == "look" and k.args[:2] == (True, True) and not rest_zero:
                    out.append(self._word_not_in(k.kids[0], kids[i + 1 :], trailing))
                    break
                out.append(self.emit(k, trailing and rest_zero))
            return seq(*out)
        if op == "alt":
            forms = list(node.kids)
            held = [k for k in forms if self.behind is not None and self._behind_holds(k)]
            if held:
                forms = held  # right after the known text: the form that reads it
            elif not self.peek:
                # a form that needs a lookaround to hold is only written when it is the only one
                plain = [k for k in forms if not _has_look(k)]
                if plain:
                    forms = plain
                else:
                    # all need one: keep the forms that write the longest fixed marker themselves
                    # (a closing tag), not the ones that only look ahead for one
                    def score_of(k: Node) -> int:
                        lits = _nec(_without_looks(k))
                        return max((len(x) for x in lits), default=0) if isinstance(lits, set) else 0

                    score = [score_of(k) for k in forms]
                    forms = [k for k, sc in zip(forms, score) if sc == max(score)]
            branches = [self.emit(k, trailing) for k in forms]
            return (
                alt(*[b for b in branches if b != NOTHING])
                if any(b != NOTHING for b in branches)
                else NOTHING
            )
        if op == "backref":
            name = node.args[0]
            if name not in self.subst:
                raise self.fail(f"the back-reference to {name!r}")
            return self.subst[name]
        if op == "group":
            name = node.args[0]
            if name is not None and name in self.subst:
                self.used.add(name)
                return self.subst[name]
            return self.emit(node.kids[0], trailing)
        if op == "atomic":
            return self.emit(node.kids[0], trailing)
        if op == "rep":
            lo, hi, _kind = node.args
            body = node.kids[0]
            tempered = _tempered_dot(body)
            if tempered is not None and lo == 0 and hi is None:
                return self.g.text_excluding([tempered], hint="tempered")
            if lo == 0 and _has_look(body) and not self.peek:
                return EMPTY
            if lo == 0 and hi == 1 and _literal_text(body) in self.drop_optional:
                return EMPTY
            if lo == 0 and hi == 1 and self.force_group is not None and _holds_group(body, self.force_group):
                return self.emit(body, trailing)
            if lo == 0 and hi == 1 and self.omit_group is not None and _holds_group(body, self.omit_group):
                return EMPTY
            inner = self.emit(body, trailing and hi == 1)
            if hi is None and self.max_repeat is not None:
                hi = max(lo, self.max_repeat)
            return rep(inner, lo, hi)
        if op == "assert":
            kind = node.args[0]
            if kind in ("bos", "bol"):
                return EMPTY if self.at_start else NOTHING
            if kind in ("eos", "eol", "Z"):
                return NOTHING  # end-of-text alternatives: the grammar always writes the literal form
            raise self.fail(f"the assertion \\{kind}")
        if op == "look":
            ahead, negate = node.args[0], node.args[1]
            if not ahead and not negate:
                if self.behind is not None and self._behind_holds(node):
                    return EMPTY
                return NOTHING  # a lookbehind alternative: only used after text the grammar never writes
            if ahead and self.peek:
                return self.emit(node.kids[0], trailing)
            if ahead and trailing:
                return EMPTY  # checked on sample calls
            raise self.fail("a lookaround in the middle of a pattern")
        raise self.fail(f"the construct {op!r}")


_WORD = ranges_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _holds_group(node: Node, name: str) -> bool:
    if node.op == "group" and node.args[0] == name:
        return True
    return any(_holds_group(k, name) for k in node.kids)


def _has_look(node: Node) -> bool:
    if node.op in ("look",) or (node.op == "assert" and node.args[0] in ("eos", "eol", "Z")):
        return True
    return any(_has_look(k) for k in node.kids)


def _without_looks(node: Node) -> Node:
    """The node with its lookarounds and end assertions taken out (what it consumes)."""
    if node.op == "look" or (node.op == "assert" and node.args[0] in ("eos", "eol", "Z")):
        return Node("empty")
    return Node(node.op, node.args, tuple(_without_looks(k) for k in node.kids))


def _start_lookbehind(node: Node) -> Node | None:
    """The body B of a positive lookbehind `(?<=^B)` anchored at the buffer's start, else None."""
    while node.op == "group" and node.args[0] is None and len(node.kids) == 1:
        node = node.kids[0]
    if node.op != "look" or node.args[:2] != (False, False):
        return None
    body = node.kids[0]
    while body.op == "group" and body.args[0] is None and len(body.kids) == 1:
        body = body.kids[0]
    first = body.kids[0] if body.op == "cat" and body.kids else body
    return body if first.op == "assert" and first.args[0] == "bos" else None


def _zero_width(node: Node) -> bool:
    if node.op in ("look", "assert", "empty"):
        return True
    if node.op in ("group", "atomic") and node.kids:
        return _zero_width(node.kids[0])
    if node.op == "cat":
        return all(_zero_width(k) for k in node.kids)
    return False


def _tempered_dot(node: Node) -> str | None:
    """`(?:(?!LIT).)` -> LIT."""
    while node.op == "group" and node.args[0] is None:
        node = node.kids[0]
    if node.op != "cat" or len(node.kids) != 2:
        return None
    look, dot = node.kids
    if look.op != "look" or look.args[:2] != (True, True) or dot.op != "any":
        return None
    lit = _literal_text(look.kids[0])
    return lit


def _literal_text(node: Node) -> str | None:
    if node.op == "empty":
        return ""
    if node.op == "lit":
        return str(node.args[0])
    if node.op == "group" and node.args[0] is None:
        return _literal_text(node.kids[0])
    if node.op == "cat":
        parts = [_literal_text(k) for k in node.kids]
        if all(p is not None for p in parts):
            return "".join(p for p in parts if p is not None)
    return None


# --------------------------------------------------------------------------------------------------
# Necessary literals

_END_ONLY = "end-only"


def necessary(node: Node, avoid: frozenset[str] = frozenset()) -> set[str] | None:
    """Literals one of which every match contains (None: no such set; an empty set: the pattern
    can only match at the end of the text). Where a sequence offers several such sets, one
    without a literal of `avoid` is preferred (markers the grammar writes itself next to free
    text, so that excluding them from the text would not keep the delimiter out)."""
    r = _nec(node, avoid)
    if r == _END_ONLY:
        return set()
    return r


def _best(cands: list[set[str]], avoid: frozenset[str] = frozenset()) -> set[str] | None:
    cands = [c for c in cands if c]
    if not cands:
        return None
    clean = [c for c in cands if not c & avoid]
    return max(clean or cands, key=lambda c: (min(len(x) for x in c), -len(c)))


def _nec(node: Node, avoid: frozenset[str] = frozenset()) -> Any:
    op = node.op
    if op == "lit":
        return {node.args[0]}
    if op in ("group", "atomic"):
        return _nec(node.kids[0], avoid)
    if op == "alt":
        acc: set[str] = set()
        for k in node.kids:
            r = _nec(k, avoid)
            if r == _END_ONLY:
                continue
            if r is None:
                return None
            acc |= r
        return acc or _END_ONLY
    if op == "cat":
        # a run of literal characters is one literal; otherwise the best child set
        cands: list[set[str]] = []
        run = ""
        for k in node.kids:
            lt = _literal_text(k)
            if lt is not None:
                run += lt
                continue
            if run:
                cands.append({run})
                run = ""
            r = _nec(k, avoid)
            if r == _END_ONLY:
                return _END_ONLY
            if r:
                cands.append(r)
        if run:
            cands.append({run})
        return _best(cands, avoid)
    if op == "rep":
        lo = node.args[0]
        return _nec(node.kids[0], avoid) if lo >= 1 else None
    if op == "look":
        _ahead, negate = node.args[0], node.args[1]
        if negate:
            return None
        return _nec(node.kids[0], avoid)
    if op == "assert" and node.args[0] in ("eos", "Z", "bos"):
        return _END_ONLY  # only at an edge of the text (the start is handled by the caller)
    return None


def first_literal(expr: Expr) -> str:
    """The literal every string of `expr` starts with (may be empty)."""
    from ._grammar import Alt, Seq

    if isinstance(expr, Lit):
        return expr.text
    if isinstance(expr, Seq) and expr.items and isinstance(expr.items[0], Lit):
        return expr.items[0].text
    if isinstance(expr, Alt) and expr.items:
        firsts = [first_literal(i) for i in expr.items]
        common = firsts[0]
        for f in firsts[1:]:
            while not f.startswith(common):
                common = common[:-1]
        return common
    return ""


__all__ = [
    "Emitter",
    "Node",
    "cat",
    "first_literal",
    "leading_negative_lookbehinds",
    "literal_tree",
    "necessary",
    "parse",
    "ranges_of",
]


END_MARK = chr(MAX_CODEPOINT)  # stands for `\Z` in a pattern of matches (`as_match_pattern`)


def as_match_pattern(node: Node, subst: dict[str, Expr] | None = None) -> Expr | None:
    """The strings every match of `node` spans together with what its lookarounds read, as one
    regular expression (None: a construct that cannot be read so).

    A positive lookahead or lookbehind is written in line (`</p>(?=\\s*<p=)` spans `</p>\\s*<p=`),
    a negative one and `^` / `\\b` are dropped and long repetition bounds lifted (more strings: a
    superset), and `\\Z` is `END_MARK`,
    a character the text around it never holds at the end, so a match that needs the end of the
    text is one still under way where the text stops. Text that contains no string of the result
    therefore contains no match of `node`, wherever it is placed.
    """
    subst = subst or {}

    def go(n: Node, first: bool = True, last: bool = True) -> Expr:
        op = n.op
        if op == "empty":
            return EMPTY
        if op == "lit":
            return Lit(n.args[0])
        if op == "cls":
            return _cls(n)
        if op == "any":
            return ANY_CHAR if n.args[0] else Chars(class_ranges(".", 0))
        if op == "cat":
            k = n.kids
            return seq(*(go(x, first and i == 0, last and i == len(k) - 1) for i, x in enumerate(k)))
        if op == "alt":
            return alt(*(go(k, first, last) for k in n.kids))
        if op == "group":
            name = n.args[0]
            if name is not None and name in subst:
                return subst[name]
            return go(n.kids[0], first, last)
        if op == "atomic":
            return go(n.kids[0], first, last)
        if op == "backref":
            if n.args[0] not in subst:
                raise _Unreadable
            return subst[n.args[0]]
        if op == "rep":
            lo, hi, _kind = n.args
            # a long bound (`[^"]{1,256}`, `\\s{0,64}`) is read as unbounded: more matches, and an
            # automaton that does not count
            if hi is not None and hi > 4:
                hi = None
            return rep(go(n.kids[0], False, False), min(lo, 4), hi)
        if op == "assert":
            kind = n.args[0]
            if kind in ("eos", "Z"):
                return Lit(END_MARK)
            if kind == "eol":
                return seq(opt(Lit("\n")), Lit(END_MARK))
            if kind in ("bos", "bol", "b", "B"):
                return EMPTY
            raise _Unreadable
        if op == "look":
            ahead, negate = n.args[0], n.args[1]
            # in line only where it reads past the match's edge (a lookbehind first, a lookahead
            # last); a negative one, or one that overlaps the match, is dropped (only adds matches)
            if negate or not (last if ahead else first):
                return EMPTY
            if not ahead:
                return go(_behind_tail(n.kids[0]), first, last)
            return go(n.kids[0], first, last)
        raise _Unreadable

    try:
        return go(node)
    except _Unreadable:
        return None


class _Unreadable(Exception):
    pass


def _behind_tail(node: Node) -> Node:
    """What a lookbehind reads, cut to its last literal character and the repetitions after it
    (`</parameter>\\s{0,64}` -> `>\\s{0,64}`): every match ends with a match of the cut form, so
    keeping the cut form out of a text keeps the whole out too, with a far smaller automaton. A
    branch that does not end that way is kept whole."""
    while node.op == "group" and node.args[0] is None and node.kids:
        node = node.kids[0]
    if node.op == "alt":
        return Node("alt", kids=tuple(_behind_tail(k) for k in node.kids))
    kids = list(node.kids) if node.op == "cat" else [node]
    i = len(kids) - 1
    while i >= 0 and kids[i].op == "rep":
        i -= 1
    if 0 <= i < len(kids) - 1 and kids[i].op == "lit":
        return cat(kids[i:])  # a literal character, then whitespace-like repetitions
    return node
