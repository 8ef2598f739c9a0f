"""Delimiter regexes to grammar expressions, and the literals every match of a regex contains.

`emit` turns a template delimiter (the `regex` module syntax, parsed by the core's `_rx` parser)
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

from typing import Any

import regex

from .. import _rx
from ._grammar import (
    ANY_CHAR,
    EMPTY,
    NOTHING,
    Chars,
    Expr,
    Grammar,
    Lit,
    alt,
    class_ranges,
    ranges_of,
    rep,
    seq,
)
from ._schema import ConstraintError


def parse(pattern: str) -> _rx.Node:
    try:
        return _rx._Parser(pattern, regex.DOTALL).parse()
    except _rx.UnsupportedPattern as e:
        raise ConstraintError(f"the pattern {pattern!r} uses {e}") from e


def _cls(node: _rx.Node) -> Chars:
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
    ) -> None:
        self.peek = peek
        self.drop_optional = drop_optional
        self.g = grammar
        self.where = where
        self.subst = subst or {}
        self.at_start = at_start
        self.max_repeat = max_repeat
        self.used: set[str] = set()

    def fail(self, what: str) -> ConstraintError:
        return ConstraintError(f"{self.where}: {what} cannot be written by a grammar")

    def emit(self, node: _rx.Node, trailing: bool = True) -> Expr:
        op = node.op
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
                out.append(self.emit(k, trailing and rest_zero))
            return seq(*out)
        if op == "alt":
            kids = node.kids
            if not self.peek:
                # a form that needs a lookaround to hold is only written when it is the only one
                plain = [k for k in kids if not _has_look(k)]
                if plain:
                    kids = plain
                else:
                    # all need one: keep the forms with the longest fixed marker (e.g. a closing tag)
                    score = [
                        max((len(x) for x in (_nec(k) if isinstance(_nec(k), set) else set())), default=0)
                        for k in kids
                    ]
                    kids = [k for k, sc in zip(kids, score) if sc == max(score)]
            branches = [self.emit(k, trailing) for k in kids]
            return (
                alt(*[b for b in branches if b != NOTHING])
                if any(b != NOTHING for b in branches)
                else NOTHING
            )
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
                return NOTHING  # a lookbehind alternative: only used after text the grammar never writes
            if ahead and self.peek:
                return self.emit(node.kids[0], trailing)
            if ahead and trailing:
                return EMPTY  # checked on sample calls
            raise self.fail("a lookaround in the middle of a pattern")
        raise self.fail(f"the construct {op!r}")


def _has_look(node: _rx.Node) -> bool:
    if node.op in ("look",) or (node.op == "assert" and node.args[0] in ("eos", "eol", "Z")):
        return True
    return any(_has_look(k) for k in node.kids)


def _zero_width(node: _rx.Node) -> bool:
    if node.op in ("look", "assert"):
        return True
    if node.op in ("group", "atomic") and node.kids:
        return _zero_width(node.kids[0])
    if node.op == "cat":
        return all(_zero_width(k) for k in node.kids)
    return False


def _tempered_dot(node: _rx.Node) -> str | None:
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


def _literal_text(node: _rx.Node) -> str | None:
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


def necessary(node: _rx.Node) -> set[str] | None:
    """Literals one of which every match contains (None: no such set; an empty set: the pattern
    can only match at the end of the text)."""
    r = _nec(node)
    if r == _END_ONLY:
        return set()
    return r


def _best(cands: list[set[str]]) -> set[str] | None:
    cands = [c for c in cands if c]
    if not cands:
        return None
    return max(cands, key=lambda c: (min(len(x) for x in c), -len(c)))


def _nec(node: _rx.Node) -> Any:
    op = node.op
    if op == "lit":
        return {node.args[0]}
    if op in ("group", "atomic"):
        return _nec(node.kids[0])
    if op == "alt":
        acc: set[str] = set()
        for k in node.kids:
            r = _nec(k)
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
            r = _nec(k)
            if r == _END_ONLY:
                return _END_ONLY
            if r:
                cands.append(r)
        if run:
            cands.append({run})
        return _best(cands)
    if op == "rep":
        lo = node.args[0]
        return _nec(node.kids[0]) if lo >= 1 else None
    if op == "look":
        _ahead, negate = node.args[0], node.args[1]
        if negate:
            return None
        return _nec(node.kids[0])
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


__all__ = ["Emitter", "first_literal", "necessary", "parse", "ranges_of"]
