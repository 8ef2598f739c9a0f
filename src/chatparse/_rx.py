"""An exact, resumable, memoised backtracking matcher for delimiter regexes.

Theory of operation
-------------------
A delimiter may only be committed when no continuation of the stream could change which match the
one-shot parse would find. The `regex` module cannot answer that question: its partial matching
prefers a complete match anywhere over a partial one (defects D3/D4 of the reference), and a regex
search restarted from the same place on every feed is quadratic (D1/D2).

This module parses a pattern (the `regex` module's syntax, version 0, minus a few constructs listed
in `UnsupportedPattern`) into a tree of `Node`s (typed by `Op`), compiles it into a small program and
runs it with a backtracking interpreter that has the same leftmost-first priority semantics as the
`regex` module, plus these properties:

* **Touch detection.** Whenever the interpreter needs a character at the end of the buffer (or an
  end-sensitive assertion there) before it has found the first successful path, the attempt is
  *live*: more text could change its outcome. A live attempt is suspended with its whole
  backtracking stack, and resumed when more text arrives, so a long live attempt costs
  O(new characters) per feed, not O(held text). Live lookaheads are suspended and resumed too.
  `Attempt.still_live` answers, without setting the interpreter up, the common case where the
  new text leaves a suspended attempt live where it stopped (inside a literal or a run); a caller
  that has just asked it resumes with `run(checked=True)`, which does not ask again.
* **Runs in one call.** A repeated single-character atom (`[^<]*`, `\\s+`, `.*?`, `[^"]{1,256}`,
  and the tempered dot `(?:(?!<lit>).)*`) compiles to one `RUN` instruction: the `regex` module or
  `str.find` consumes the whole run in C, and backtracking into it only visits the positions where
  the rest of the pattern can start (its *follow set*, searched for in C as well).
* **Memoisation.** A branch point (program counter, position) that was explored and failed can
  never succeed later (no back-references, and the future of a state does not depend on captures),
  so it is recorded and pruned, across attempts at successive start positions. For a run, the
  positions where its continuation was tried and failed are kept as one interval, which later
  entries of the run skip in O(1). Lookahead bodies keep failure and success memos of their own
  across positions, and a live lookahead is resumed, not restarted. The memos are never cleared:
  the work of a whole scan is bounded by O(program size x text length) for any pattern, so an
  untrusted template cannot make the scanner hang.
* **Lookaheads without sub-attempts.** A lookahead whose body is a literal is one instruction
  (`PEEK`: `startswith`, live while the text ends inside the literal). A plain body of bounded
  reach (`Look.rx`: literals, classes, groups, alternations, greedy repeats, a tail run) is
  decided by one `regex` module match at the position (`_look_rx`): a match stands for every
  continuation (nothing in the body reads the end of the text), no match and no partial match is
  a failure for every continuation, a partial match is live. Shapes the module's partial match
  gets wrong are left to the interpreter (`_plain`), and a body with named groups is taken so by
  main attempts only, whose match stands once the interpreter would have decided each such
  lookahead too (`Attempt._decided`): the committed groups follow the body's first way to match.
  While undecided, each feed asks the module again over at most the body's window
  (`LOOK_WINDOW`): linear, with that constant.
* **Decide, then capture.** Scanning runs a program without capture instructions; the one match
  that is committed is re-run once with captures (`capture`), or, when `capture_window` proves
  that the `regex` module finds the same groups over a window of constant width after the start
  at a bounded cost, matched once by the `regex` module there (`_scan._captures`).
* **Exact semantics.** Character classes, case-insensitive characters, word boundaries and
  lookbehinds are delegated to the `regex` module itself, so Unicode semantics are those of the
  reference. Lookbehinds must have a bounded width (checked when the pattern is compiled).
"""

from __future__ import annotations

import array
import enum
import functools
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import regex

# Opcodes (small ints for a fast dispatch).
CHAR = 0  # arg: the character
TEST = 1  # arg: CharTest
ANY = 2  # arg: unused (DOTALL dot)
SPLIT = 3  # arg: (first, second) program counters, first preferred
JMP = 4  # arg: target
SAVE = 5  # arg: slot index
ASSERT = 6  # arg: Assertion
LOOKAHEAD = 7  # arg: Look
LOOKBEHIND = 8  # arg: (compiled regex, negate)
ATOMIC = 9  # arg: Program
MATCH = 10
STR = 11  # arg: a run of two or more literal characters, compared with str.startswith
RUN = 12  # arg: Run
PEEK = 13  # arg: (literal, negate): a lookahead whose body is a literal string, `(?=<tool_call>)`

# Backtracking stack entries: (kind, ...).
_BT_SPLIT = 0  # (kind, pc, pos, pathlen)
_BT_RESTORE = 1  # (kind, slot, old, 0)
_BT_GREEDY = 2  # (kind, pc, pos, next_hi, pathlen, run_end)
_BT_LAZY = 3  # (kind, pc, pos, next_lo, pathlen)

#: Maximum number of instructions a pattern may compile to (bounded repeats are expanded).
MAX_PROGRAM = 10000
#: Maximum nesting depth of groups in a pattern (the parser and the analyses recurse on it).
MAX_DEPTH = 64
#: Maximum width of a lookbehind (the `regex` module evaluates it at every position it is tried).
MAX_LOOKBEHIND = 1024
#: Seconds allowed to one `regex` module call made on the text (lookbehinds that `backtrack_bound`
#: cannot prove cheap).
REGEX_TIMEOUT = 1.0
#: The most backtracking steps per position `backtrack_bound` may prove for a pattern that the
#: `regex` module then runs without a time limit (its cost per call is then independent of the text).
SAFE_STEPS = 4096
#: Calls made with a time limit (lookbehinds not proven cheap); the guarded-path tests count them.
GUARDED_CALLS = [0]

LIVE = "live"

#: Branch points entered and alternatives resumed by all attempts (the operation-count tests read
#: it; every other instruction runs a bounded number of times between two of these).
STEPS = [0]

#: Attempt modes (see `Attempt`).
MAIN, SUB, BOOLEAN = 0, 1, 2


class UnsupportedPattern(ValueError):
    """The pattern uses a construct the exact matcher does not implement."""


class Op(enum.Enum):
    """The kind of a pattern `Node`."""

    LIT = "lit"  # args: (char,)
    CLS = "cls"  # args: (class source, flags): a one-character test
    ANY = "any"  # args: (dotall,)
    CAT = "cat"  # kids: the sequence
    ALT = "alt"  # kids: the branches, in priority order
    GROUP = "group"  # args: (name or None,); kids: [body]
    ASSERT = "assert"  # args: (kind, flags): bos, bol, eos, eol, Z, b, B, m, M
    LOOK = "look"  # args: (ahead, negate, flags[, source of a lookbehind]); kids: [body]
    ATOMIC = "atomic"  # kids: [body]
    REP = "rep"  # args: (lo, hi or None, "greedy" | "lazy" | "possessive"); kids: [body]
    EMPTY = "empty"


ATOMS = (Op.LIT, Op.CLS, Op.ANY)


class CharTest:
    """A one-character test evaluated by the `regex` module, memoised per character."""

    __slots__ = ("src", "flags", "_re", "cache", "run_re")

    def __init__(self, src: str, flags: int) -> None:
        self.src = src
        self.flags = flags
        self._re = regex.compile(src, flags)
        # The longest run of matching characters from a position, in one C call.
        self.run_re = regex.compile(f"(?:{src})*", flags)
        self.cache: dict[str, bool] = {}  # read directly by hot loops: cache.get(ch) or test(ch)

    def __call__(self, ch: str) -> bool:
        r = self.cache.get(ch)
        if r is None:
            r = self._re.fullmatch(ch) is not None
            if len(self.cache) < 4096:
                self.cache[ch] = r
        return r


class Assertion:
    """A zero-width assertion; knows when its truth may still depend on text not yet seen."""

    __slots__ = ("kind", "_re")

    def __init__(self, kind: str, flags: int) -> None:
        self.kind = kind
        src = {
            "bos": r"\A",
            "bol": r"(?m:^)",
            "eos": r"(?-m:$)",
            "eol": r"(?m:$)",
            "Z": r"\Z",
            "b": r"\b",
            "B": r"\B",
            "m": r"\m",
            "M": r"\M",
        }[kind]
        self._re = regex.compile(src, flags & (regex.ASCII | regex.UNICODE | regex.WORD))

    def test(self, buf: str, pos: int, eos: bool) -> bool | str:
        kind = self.kind
        n = len(buf)
        if kind == "bos":
            return pos == 0
        if kind == "bol":
            return pos == 0 or buf[pos - 1] == "\n"
        if not eos:
            if pos >= n:
                return LIVE
            if kind == "eos":
                if pos == n - 1 and buf[pos] == "\n":
                    return LIVE
                return False
            if kind == "Z":
                return False
        return self._re.match(buf, pos) is not None


# --------------------------------------------------------------------------------------------
# Syntax


@dataclass(eq=False)
class Node:
    """One node of a parsed pattern."""

    op: Op
    args: tuple = ()
    kids: list[Node] = field(default_factory=list)


_FLAG_BITS = {
    "i": regex.IGNORECASE,
    "m": regex.MULTILINE,
    "s": regex.DOTALL,
    "x": regex.VERBOSE,
    "a": regex.ASCII,
    "u": regex.UNICODE,
}
_SIMPLE_ESCAPES = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_SPECIAL_UNSUPPORTED = {
    "G": "the search anchor \\G",
    "K": "\\K",
    "X": "grapheme clusters \\X",
    "g": "back-references",
    "L": "named lists \\L",
    "Q": "\\Q...\\E quoting",
}


class _Parser:
    def __init__(self, pattern: str, flags: int) -> None:
        self.p = pattern
        self.i = 0
        self.flags = flags
        self.names: list[str] = []
        self.depth = 0

    def fail(self, what: str) -> UnsupportedPattern:
        return UnsupportedPattern(f"{what} (at position {self.i}) is not supported in delimiters")

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def parse(self) -> Node:
        node = self.alternation(self.flags)
        if self.i != len(self.p):
            raise self.fail(f"unexpected {self.p[self.i]!r}")
        return node

    def alternation(self, flags: int) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise UnsupportedPattern(f"groups nested more than {MAX_DEPTH} deep")
        branches = []
        state = [flags]
        branches.append(self.sequence(state))
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence(state))
        self.depth -= 1
        return branches[0] if len(branches) == 1 else Node(Op.ALT, kids=branches)

    def skip_verbose(self, flags: int) -> None:
        if not flags & regex.VERBOSE:
            return
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c in " \t\n\r\f\v":
                self.i += 1
            elif c == "#":
                while self.i < len(p) and p[self.i] != "\n":
                    self.i += 1
            else:
                break

    def sequence(self, state: list[int]) -> Node:
        items: list[Node] = []
        while True:
            self.skip_verbose(state[0])
            c = self.peek()
            if c == "" or c in "|)":
                break
            atom = self.atom(state)
            if atom is None:
                continue
            self.skip_verbose(state[0])
            atom = self.quantifier(atom)
            items.append(atom)
        if len(items) == 1:
            return items[0]
        if not items:
            return Node(Op.EMPTY)
        return Node(Op.CAT, kids=items)

    def quantifier(self, atom: Node) -> Node:
        p = self.p
        c = self.peek()
        lo: int
        hi: int | None
        if c == "*":
            lo, hi = 0, None
            self.i += 1
        elif c == "+":
            lo, hi = 1, None
            self.i += 1
        elif c == "?":
            lo, hi = 0, 1
            self.i += 1
        elif c == "{":
            m = regex.match(r"\{(\d*)(,?)(\d*)\}", p[self.i :])
            if m is None or (not m.group(1) and not m.group(2)):
                return atom
            lo = int(m.group(1)) if m.group(1) else 0
            if m.group(2):
                hi = int(m.group(3)) if m.group(3) else None
            else:
                hi = lo
            self.i += m.end()
        else:
            return atom
        kind = "greedy"
        if self.peek() == "?":
            kind = "lazy"
            self.i += 1
        elif self.peek() == "+":
            kind = "possessive"
            self.i += 1
        if self.peek() in ("*", "+", "?") or (
            self.peek() == "{" and regex.match(r"\{\d*,?\d*\}", p[self.i :])
        ):
            raise self.fail("nested quantifiers")
        return Node(Op.REP, (lo, hi, kind), [atom])

    def atom(self, state: list[int]) -> Node | None:
        p = self.p
        flags = state[0]
        c = p[self.i]
        if c == "(":
            return self.group(state)
        if c == "[":
            start = self.i
            self.i = _class_end(p, self.i)
            return Node(Op.CLS, (p[start : self.i], flags))
        if c == ".":
            self.i += 1
            return Node(Op.ANY, (bool(flags & regex.DOTALL),))
        if c == "^":
            self.i += 1
            return Node(Op.ASSERT, ("bol" if flags & regex.MULTILINE else "bos", flags))
        if c == "$":
            self.i += 1
            return Node(Op.ASSERT, ("eol" if flags & regex.MULTILINE else "eos", flags))
        if c == "\\":
            return self.escape(flags)
        if c in "*+?":
            raise self.fail("nothing to repeat")
        self.i += 1
        return self.literal(c, flags)

    def literal(self, ch: str, flags: int) -> Node:
        if flags & regex.IGNORECASE:
            return Node(Op.CLS, (regex.escape(ch), flags))
        return Node(Op.LIT, (ch,))

    def escape(self, flags: int) -> Node:
        p = self.p
        self.i += 1
        if self.i >= len(p):
            raise self.fail("trailing backslash")
        c = p[self.i]
        self.i += 1
        if c in "dDwWsShH":
            return Node(Op.CLS, ("\\" + c, flags))
        if c in "pP":
            if self.peek() == "{":
                end = p.find("}", self.i)
                if end < 0:
                    raise self.fail("unterminated property")
                src = p[self.i - 2 : end + 1]
                self.i = end + 1
            else:
                src = p[self.i - 2 : self.i + 1]
                self.i += 1
            return Node(Op.CLS, (src, flags))
        if c == "A":
            return Node(Op.ASSERT, ("bos", flags))
        if c == "Z":
            return Node(Op.ASSERT, ("Z", flags))
        if c in "bBmM":
            if flags & regex.WORD:
                raise self.fail("the WORD flag")
            return Node(Op.ASSERT, (c, flags))
        if c in _SPECIAL_UNSUPPORTED:
            raise self.fail(_SPECIAL_UNSUPPORTED[c])
        if c.isdigit():
            if c == "0":
                m = regex.match(r"[0-7]{0,2}", p[self.i :])
                assert m is not None
                self.i += m.end()
                return self.literal(chr(int("0" + m.group(), 8)), flags)
            # \1.. back-references (or octal escapes like \123): not supported.
            raise self.fail("back-references")
        if c == "x":
            m = regex.match(r"[0-9a-fA-F]{2}", p[self.i :])
            if m is None:
                raise self.fail("bad \\x escape")
            self.i += 2
            return self.literal(chr(int(m.group(), 16)), flags)
        if c in "uU":
            n = 4 if c == "u" else 8
            m = regex.match(f"[0-9a-fA-F]{{{n}}}", p[self.i :])
            if m is None:
                raise self.fail(f"bad \\{c} escape")
            self.i += n
            return self.literal(chr(int(m.group(), 16)), flags)
        if c == "N":
            if self.peek() != "{":
                raise self.fail("bad \\N escape")
            end = p.find("}", self.i)
            try:
                ch = unicodedata.lookup(p[self.i + 1 : end])
            except KeyError as e:
                raise self.fail("unknown character name") from e
            self.i = end + 1
            return self.literal(ch, flags)
        if c in _SIMPLE_ESCAPES:
            return self.literal(_SIMPLE_ESCAPES[c], flags)
        if c.isalnum():
            raise self.fail(f"escape \\{c}")
        return self.literal(c, flags)

    def group(self, state: list[int]) -> Node | None:
        p = self.p
        flags = state[0]
        self.i += 1  # (
        if p.startswith("?", self.i):
            self.i += 1
            if p.startswith("#", self.i):
                end = p.find(")", self.i)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.i = end + 1
                return None
            if p.startswith(":", self.i):
                self.i += 1
                return self.close(Node(Op.GROUP, (None,), [self.alternation(flags)]))
            if p.startswith("P<", self.i) or (
                p.startswith("<", self.i) and not p.startswith(("<=", "<!"), self.i)
            ):
                self.i += 2 if p[self.i] == "P" else 1
                end = p.find(">", self.i)
                name = p[self.i : end]
                self.i = end + 1
                if name in self.names:
                    raise self.fail(f"duplicate group name {name!r}")
                self.names.append(name)
                return self.close(Node(Op.GROUP, (name,), [self.alternation(flags)]))
            for prefix, ahead, negate in (
                ("=", True, False),
                ("!", True, True),
                ("<=", False, False),
                ("<!", False, True),
            ):
                if p.startswith(prefix, self.i):
                    start = self.i - 2
                    self.i += len(prefix)
                    body = self.alternation(flags)
                    node = self.close(Node(Op.LOOK, (ahead, negate, flags), [body]))
                    if not ahead:
                        if _has(body, (Op.GROUP, Op.LOOK)) and _named(body):
                            raise self.fail("named groups inside a lookbehind")
                        if _has_end_sensitive(body):
                            raise self.fail("end-of-text assertions inside a lookbehind")
                        width = max_width(body)
                        if width is None or width > MAX_LOOKBEHIND:
                            raise self.fail(
                                f"a lookbehind that can be wider than {MAX_LOOKBEHIND} characters"
                            )
                        node.args = (ahead, negate, flags, p[start : self.i], backtrack_bound(body, True))
                    return node
            if p.startswith(">", self.i):
                self.i += 1
                return self.close(Node(Op.ATOMIC, (), [self.alternation(flags)]))
            # Flags: (?imsx-imsx) or (?imsx-imsx:...)
            m = regex.match(r"([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])", p[self.i :])
            if m is None:
                raise self.fail("this group syntax")
            on, off = m.group(1), m.group(2) or ""
            new = flags
            for ch in on:
                if ch not in _FLAG_BITS:
                    raise self.fail(f"the inline flag {ch!r}")
                new |= _FLAG_BITS[ch]
            for ch in off:
                if ch not in _FLAG_BITS:
                    raise self.fail(f"the inline flag {ch!r}")
                new &= ~_FLAG_BITS[ch]
            if "a" in on:
                new &= ~regex.UNICODE
            if "u" in on:
                new &= ~regex.ASCII
            self.i += m.end()
            if m.group(3) == ")":
                state[0] = new
                return None
            return self.close(Node(Op.GROUP, (None,), [self.alternation(new)]))
        return self.close(Node(Op.GROUP, (None,), [self.alternation(flags)]))

    def close(self, node: Node) -> Node:
        if self.peek() != ")":
            raise self.fail("missing )")
        self.i += 1
        return node


def _class_end(p: str, i: int) -> int:
    """Index just past the `]` closing the character class that starts at `p[i] == '['` (V0 rules)."""
    j = i + 1
    if j < len(p) and p[j] == "^":
        j += 1
    if j < len(p) and p[j] == "]":
        j += 1
    while j < len(p):
        c = p[j]
        if c == "\\":
            j += 2
            continue
        if c == "[" and p.startswith("[:", j):
            end = p.find(":]", j + 2)
            if end >= 0:
                j = end + 2
                continue
        if c == "]":
            return j + 1
        j += 1
    raise UnsupportedPattern("unterminated character class")


#: The body of a character class that is one character (or an escape for one), as the `regex`
#: module parses `[^<]`: a single negated character.
_ONE_CHAR = regex.compile(
    r"[^\\]|\\(?:[^dDwWsSpPhHvVXRNLUux0-9]|x[0-9a-fA-F]{2}|x\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}"
    r"|U[0-9a-fA-F]{8}|N\{[^}]*\}|0[0-7]{0,2}|[1-7][0-7]{2})"
)


#: Whether the installed `regex` module merges alternatives that are single negated characters
#: into one wrong set (releases up to 2026.11.19, which vLLM 0.33.0's and SGLang 0.5.23's venvs
#: install here; fixed in 2026.12.2): see `module_safe`.
MODULE_MERGES_NEGATED = regex.match(r"[^<]|[^a]", "<") is None


def module_safe(pattern: str, merges: bool = MODULE_MERGES_NEGATED) -> str:
    """`pattern`, or the same pattern written so that the `regex` module matches it as this
    module's interpreter (and Python's `re`) do. Releases of the `regex` module up to 2026.11.19
    (`merges`: `MODULE_MERGES_NEGATED`, what the installed one does) merge alternatives that are
    single negated characters into one wrong set, also after taking a common literal prefix out of
    them: `[^<]|[^a]` and `x[^<]|x[^a]` match neither "<" nor "a" after their prefix. Where a
    pattern has such alternatives (`_merges_negated`), every negated one-character class is written
    twice (`[^<]` -> `[^<<]`), which the module does not merge; a delimiter's module-compiled forms
    (one-shot seekers, captures, prefilters) then match as its streamed attempts do. Only there:
    the module runs a set ~10x slower than a single character (`[^<<]*` over 32k characters: 98 us
    against 8.5). (Classes are found by V0 rules; an escaped `[` is skipped; text inside a verbose
    comment may be rewritten too, which changes nothing.)"""
    if not merges or "[^" not in pattern or "|" not in pattern:
        return pattern
    try:
        tree = _Parser(pattern, regex.DOTALL).parse()
    except (UnsupportedPattern, RecursionError, regex.error, ValueError, IndexError):
        return pattern  # (reported where the delimiter is compiled)
    if not _merges_negated(tree):
        return pattern
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif c == "[":
            try:
                j = _class_end(pattern, i)
            except UnsupportedPattern:
                return pattern  # (the parser reports it)
            cls = pattern[i:j]
            if cls.startswith("[^") and _ONE_CHAR.fullmatch(cls, 2, j - i - 1):
                one = cls[2:-1]
                if one in "]-^[":
                    one = "\\" + one  # (`[^]]]` would close after its first `]`)
                cls = "[^" + one + one + "]"
            out.append(cls)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _merges_negated(node: Node) -> bool:
    """Whether an alternation in `node` holds two different negated one-character classes
    anywhere below it: where the `regex` module may merge them wrongly (`module_safe`; it takes
    common literal prefixes out of branches and merges what is left, through nested groups, so
    this asks no more of the shape than that)."""
    if node.op is Op.ALT and len(_negated_chars(node, set())) > 1:
        return True
    return any(_merges_negated(k) for k in node.kids)


def _negated_chars(node: Node, out: set[str]) -> set[str]:
    """The sources of the negated one-character classes in `node`."""
    if node.op is Op.CLS:
        src: str = node.args[0]
        if src.startswith("[^") and _ONE_CHAR.fullmatch(src, 2, len(src) - 1):
            out.add(src)
    for k in node.kids:
        _negated_chars(k, out)
    return out


def _has(node: Node, ops: tuple[Op, ...]) -> bool:
    return node.op in ops or any(_has(k, ops) for k in node.kids)


def _named(node: Node) -> bool:
    if node.op is Op.GROUP and node.args[0] is not None:
        return True
    return any(_named(k) for k in node.kids)


def _has_end_sensitive(node: Node) -> bool:
    if node.op is Op.ASSERT and node.args[0] not in ("bos", "bol"):
        return True
    if node.op is Op.LOOK and node.args[0]:
        return True
    return any(_has_end_sensitive(k) for k in node.kids)


def nullable(node: Node) -> bool:
    """Whether `node` can match the empty string (assertions assumed satisfiable)."""
    op = node.op
    if op in ATOMS:
        return False
    if op in (Op.ASSERT, Op.LOOK, Op.EMPTY):
        return True
    if op is Op.CAT:
        return all(nullable(k) for k in node.kids)
    if op is Op.ALT:
        return any(nullable(k) for k in node.kids)
    if op is Op.REP:
        return node.args[0] == 0 or nullable(node.kids[0])
    return nullable(node.kids[0])  # group, atomic


def max_width(node: Node) -> int | None:
    """The most characters `node` can consume, or None when unbounded."""
    op = node.op
    if op in ATOMS:
        return 1
    if op in (Op.ASSERT, Op.LOOK, Op.EMPTY):
        return 0
    if op in (Op.CAT, Op.ALT):
        widths = [max_width(k) for k in node.kids]
        known = [w for w in widths if w is not None]
        if len(known) < len(widths):
            return None
        return sum(known) if op is Op.CAT else max(known)
    if op is Op.REP:
        hi = node.args[1]
        w = max_width(node.kids[0])
        if hi is None or w is None:
            return None if (hi is None and w != 0) or w is None else 0
        return hi * w
    return max_width(node.kids[0])  # group, atomic


_CAP = 1 << 62


def _flat(node: Node, out: list[Node]) -> list[Node]:
    """The sequence `node` matches, with concatenations and groups spliced in."""
    if node.op is Op.CAT:
        for k in node.kids:
            _flat(k, out)
    elif node.op is Op.GROUP:
        _flat(node.kids[0], out)
    elif node.op is not Op.EMPTY:
        out.append(node)
    return out


def _ways(node: Node, reverse: bool) -> int:
    """An upper bound on the number of ways `node` can match at one position."""
    op = node.op
    if op in (Op.CAT, Op.GROUP):
        return _ways_seq(_flat(node, []), reverse)
    if op is Op.ALT:
        return min(_CAP, sum(_ways_seq(_flat(k, []), reverse) for k in node.kids))
    if op is Op.REP:
        lo, hi, kind = node.args
        if kind == "possessive":
            return 1
        if hi is None:
            return _CAP
        w = _ways(node.kids[0], reverse)
        if w == 1:
            return hi - lo + 1
        total, p = 0, w**lo if lo < 64 else _CAP
        for _ in range(lo, hi + 1):
            total = min(_CAP, total + p)
            p = min(_CAP, p * w)
        return total
    return 1  # atoms, assertions, lookarounds and atomic groups match one way (or not)


def _ways_seq(seq: list[Node], reverse: bool) -> int:
    if reverse:
        seq = seq[::-1]
    r = 1
    for i, x in enumerate(seq):
        if not _forced(x, seq[i + 1] if i + 1 < len(seq) else None, reverse):
            r = min(_CAP, r * _ways(x, reverse))
    return r


def _edge(node: Node, reverse: bool) -> list[Node] | None:
    """The atoms one of which every match of `node` begins with (ends with, for `reverse`), or
    None when that is not known."""
    op = node.op
    if op in ATOMS:
        return [node]
    if op is Op.REP:
        return _edge(node.kids[0], reverse) if node.args[0] >= 1 else None
    if op in (Op.CAT, Op.GROUP):
        seq = _flat(node, [])
        return _edge(seq[-1 if reverse else 0], reverse) if seq else None
    if op is Op.ALT:
        out: list[Node] = []
        for k in node.kids:
            e = _edge(k, reverse)
            if e is None:
                return None
            out += e
        return out
    return None


def _forced(x: Node, nxt: Node | None, reverse: bool) -> bool:
    """A bounded run of one atom directly before (in matching order) a node that must begin with
    a character the atom cannot match: the run's length is forced."""
    if x.op is not Op.REP or x.args[1] is None or x.kids[0].op not in ATOMS or nxt is None:
        return False
    edge = _edge(nxt, reverse)
    return edge is not None and all(_disjoint(x.kids[0], e) for e in edge)


def _disjoint(a: Node, b: Node) -> bool:
    """Whether no character matches both atoms (decided by the `regex` module, over every code
    point when both are classes)."""
    if b.op is Op.LIT:
        return not _atom_matches(a, b.args[0])
    if a.op is Op.LIT:
        return not _atom_matches(b, a.args[0])
    return _classes_disjoint(atom_source(a), atom_source(b))


_EVERY_CHAR: list[str] = []


@functools.lru_cache(maxsize=256)
def _classes_disjoint(a: str, b: str) -> bool:
    if not _EVERY_CHAR:
        codes = array.array("I", range(0xD800))
        codes.extend(range(0xE000, 0x110000))
        _EVERY_CHAR.append(codes.tobytes().decode("utf-32-le" if sys.byteorder == "little" else "utf-32-be"))
    return regex.compile(f"(?={a}){b}").search(_EVERY_CHAR[0]) is None


def _steps(seq: list[Node], reverse: bool, top: bool = False) -> int:
    """An upper bound on the steps a backtracking matcher takes to try every way of matching the
    sequence `seq` at one position (matched right to left when `reverse`, as in a lookbehind); at
    the `top` of a pattern the first way that reaches the end ends the attempt."""
    if reverse:
        seq = seq[::-1]
    total, factor = 0, 1
    for i, x in enumerate(seq):
        if _forced(x, seq[i + 1] if i + 1 < len(seq) else None, reverse):
            # Every count but the longest fails at the next character at once.
            total = min(_CAP, total + factor * 2 * (x.args[1] + 1))
            continue
        total = min(_CAP, total + factor * _inner(x, reverse))
        factor = min(_CAP, factor * _ways(x, reverse))
    return min(_CAP, total + (1 if top else factor))


def _inner(node: Node, reverse: bool) -> int:
    """Steps to enumerate every way `node` matches at one position."""
    op = node.op
    if op in ATOMS or op in (Op.ASSERT, Op.EMPTY):
        return 1
    if op in (Op.CAT, Op.GROUP):
        return _steps(_flat(node, []), reverse)
    if op is Op.ALT:
        return min(_CAP, sum(_steps(_flat(k, []), reverse) for k in node.kids))
    if op is Op.LOOK:
        return _steps(_flat(node.kids[0], []), not node.args[0])
    if op is Op.ATOMIC:
        return _steps(_flat(node.kids[0], []), reverse)
    lo, hi, _kind = node.args  # REP
    if hi is None:
        return _CAP
    body = node.kids[0]
    per = _inner(body, reverse) + 1
    w = _ways(body, reverse)
    total, p = 0, 1
    for _ in range(hi + 1):
        total = min(_CAP, total + p * per)
        p = min(_CAP, p * w)
        if total >= _CAP:
            break
    return total


def _atom_matches(atom: Node, ch: str) -> bool:
    if atom.op is Op.LIT:
        return bool(atom.args[0] == ch)
    if atom.op is Op.ANY:
        return bool(atom.args[0]) or ch != "\n"
    return regex.fullmatch(atom.args[0], ch, atom.args[1]) is not None


def backtrack_bound(node: Node, reverse: bool = False) -> int | None:
    """An upper bound on the backtracking steps of one match attempt of `node` at one position, or
    None when no bound exists (an unbounded repeat).

    The bound is a proof, for the `regex` module's backtracking matcher: a sequence multiplies the
    ways of its elements, an alternation adds its branches, a bounded repeat expands to its counts,
    a lookaround or atomic group matches once. A bounded single-atom run directly before a literal
    character the atom cannot match (`\\s{0,64}>`) adds instead of multiplying: its length is
    forced. A pattern with a bound of at most `SAFE_STEPS` costs a bounded time per position tried,
    whatever the text, so it can run without a time limit."""
    b = _steps(_flat(node, []), reverse, top=True)
    return None if b >= _CAP else b


#: The most steps `capture_window` may prove for one `regex` module match made at a commit (one
#: call per committed delimiter, on a window of constant width: a constant cost per commit).
CAPTURE_STEPS = 1 << 14
#: How many sequence analyses `capture_window` may make for one pattern (gpt-oss's call opener
#: needs 25): its expansions of optional groups may otherwise multiply on a hostile pattern, and
#: each analysis may walk a subtree; past it the pattern is unproven.
_CAPTURE_BUDGET = 1024


def capture_window(node: Node) -> int | None:
    """A width W such that the `regex` module's `match` of the pattern `node` at a position p,
    given the text up to p + W + 2 (`endpos`) instead of all of it, costs at most `CAPTURE_STEPS`
    steps (each reading a bounded number of characters) and finds the same match with the same
    groups, unless a group ends at that `endpos` (a cut tail run, see below); or None when that is
    not proven (`capture` then runs the exact interpreter).

    Why the window keeps the result: every path reads at most W characters past p (`_reach`),
    except an unbounded run of one atom that ends the pattern or a lookahead body (a *tail run*),
    whose path succeeds at any length once its minimum is read: cutting the text can only shorten
    such a run, and then the group around it ends at `endpos`. End-sensitive assertions tested at
    most W characters past p see two real characters after them (`$` before a final newline).

    Why the cost is bounded (`_csteps`, a finer count than `backtrack_bound`'s, for one match with
    its whole continuation known): a literal string is one step; a lookaround or atomic group
    matches once (the `regex` module does not backtrack into them); an optional group expands to
    its two paths; a bounded run of one atom A tried before a continuation X ends at most once at
    a character outside A (or the end of the text), and at every other length the next character
    is in A, where a branch of X that must begin outside A fails in one step; a tail run is one
    step (the module's loop reads at most the window)."""
    budget = [_CAPTURE_BUDGET]
    seq = _flat(node, [])
    steps = _csteps(seq, budget)
    if steps > CAPTURE_STEPS:
        return None
    return _reach(seq, True)


def _is_tail_run(x: Node) -> bool:
    return x.op is Op.REP and x.args[1] is None and x.kids[0].op in ATOMS


def _csteps(seq: list[Node], budget: list[int]) -> int:
    """Steps to find the first way `seq` (a whole continuation: what follows it always succeeds)
    matches at one position, or to fail there."""
    budget[0] -= 1
    if budget[0] < 0:
        return _CAP
    if not seq:
        return 1
    x, rest = seq[0], seq[1:]
    op = x.op
    if op is Op.LIT:
        j = 1
        while j < len(seq) and seq[j].op is Op.LIT:
            j += 1
        return min(_CAP, 1 + _csteps(seq[j:], budget))
    if op in (Op.CLS, Op.ANY, Op.ASSERT, Op.EMPTY):
        return min(_CAP, 1 + _csteps(rest, budget))
    if op is Op.LOOK:
        if x.args[0]:
            inner = _csteps(_flat(x.kids[0], []), budget)
        else:
            inner = _steps(_flat(x.kids[0], []), True)  # a lookbehind: the general bound
        return min(_CAP, inner + _csteps(rest, budget))
    if op is Op.ATOMIC:
        return min(_CAP, _csteps(_flat(x.kids[0], []), budget) + _csteps(rest, budget))
    if op is Op.REP:
        lo, hi, kind = x.args
        body = x.kids[0]
        if body.op in ATOMS:
            if hi is None:
                return 2 if not rest else _CAP  # a tail run: one loop, then success
            n = hi - lo + 1  # the lengths the run can end at
            if kind == "possessive":
                return min(_CAP, 1 + _csteps(rest, budget))
            if _must_begin_outside(rest, body):
                return min(_CAP, 2 * n + _csteps(rest, budget))
            return min(_CAP, n + n * _csteps_inside(rest, body, budget) + _csteps(rest, budget))
        if lo == 0 and hi == 1:
            both = _csteps(_flat(body, []) + rest, budget)
            return min(_CAP, 1 + both + _csteps(rest, budget))
    # Anything else (alternations, general repeats): `backtrack_bound`'s counts, each way of `x`
    # followed by the whole continuation.
    inner = _inner(x, False)
    ways = _ways(x, False)
    if inner >= _CAP or ways >= _CAP:
        return _CAP
    return min(_CAP, inner + ways * _csteps(rest, budget))


def _seq_edge(seq: list[Node]) -> list[Node] | None:
    """Atoms one of which every nonempty match of `seq` begins with (zero-width elements
    skipped), or None when not known or when `seq` can match nothing at all."""
    out: list[Node] = []
    for x in seq:
        if x.op in (Op.ASSERT, Op.LOOK, Op.EMPTY):
            continue
        if x.op is Op.REP and x.args[0] == 0:
            e = _edge(x.kids[0], False)
        else:
            e = _edge(x, False)
        if e is None:
            return None
        out += e
        if not nullable(x):
            return out
    return None


def _must_begin_outside(seq: list[Node], atom: Node) -> bool:
    edge = _seq_edge(seq)
    return edge is not None and all(_disjoint(atom, e) for e in edge)


def _csteps_inside(seq: list[Node], atom: Node, budget: list[int]) -> int:
    """`_csteps(seq)` when the character at the position is known to match `atom`."""
    if not seq:
        return 1
    x = seq[0]
    if x.op in (Op.ASSERT, Op.LOOK, Op.EMPTY):
        return _csteps(seq, budget)
    if nullable(x):
        if x.op is Op.REP and x.args[0] == 0:
            e = _edge(x.kids[0], False)
            if e is not None and all(_disjoint(atom, a) for a in e):
                # Its body cannot begin here: zero repetitions, the rest at the same character.
                return min(_CAP, 1 + _csteps_inside(seq[1:], atom, budget))
        return _csteps(seq, budget)
    e = _edge(x, False)
    if e is not None and all(_disjoint(atom, a) for a in e):
        return 1
    return _csteps(seq, budget)


def _reach(seq: list[Node], tail: bool) -> int | None:
    """How many characters past its position any path of `seq` reads (lookaheads included), a
    tail run (allowed when `tail`: `seq` ends the pattern or a lookahead body) counted at its
    minimum; None when unbounded."""
    w = best = 0
    for i, x in enumerate(seq):
        if tail and i == len(seq) - 1 and _is_tail_run(x):
            return max(best, w + x.args[0] + 1)
        if x.op is Op.LOOK:
            if x.args[0]:
                r = _reach(_flat(x.kids[0], []), True)
                if r is None:
                    return None
                best = max(best, w + r)
            continue
        if x.op is Op.ASSERT:
            best = max(best, w + 1)  # \b, $: the character at the position
            continue
        mw = max_width(x)
        if mw is None:
            return None
        extra = _look_reach(x)
        if extra is None:
            return None
        w += mw
        best = max(best, w + extra, w + 1)
    return best


def _look_reach(node: Node) -> int | None:
    """The most characters a lookahead or assertion inside `node` (not spliced into a sequence)
    reads past the end of `node`'s own widest match: a bound, not exact."""
    out = 0
    for k in node.kids:
        if k.op is Op.LOOK and k.args[0]:
            r = _reach(_flat(k.kids[0], []), False)
        else:
            r = _look_reach(k)
        if r is None:
            return None
        out = max(out, r)
    if node.op is Op.ASSERT:
        out = max(out, 1)
    return out


def proven_bound(pattern: str, flags: int) -> int | None:
    """`backtrack_bound` of `pattern` (a `regex` module pattern), or None when the pattern is
    unbounded or uses a construct this module does not parse (e.g. back-references)."""
    try:
        return backtrack_bound(_Parser(pattern, flags).parse())
    except (UnsupportedPattern, RecursionError, regex.error, ValueError, IndexError):
        return None


def match_only(pattern: str, flags: int) -> Any:
    """`pattern` compiled for `match` at chosen positions. Before it tries a position, the `regex`
    module searches the rest of the string for a literal that every match contains (its "required
    string"), even for `match`: an attempt at a position can then read up to the next occurrence
    of that literal, or to the end of the text when there is none (`\\s*<\\|im_end\\|>` at a
    position followed by 1 MB without `<|im_end|>`: 250 us instead of 0.3), which makes a seeker's
    per-candidate `match` quadratic. An alternative that never matches (`|(?!)`, appended at the
    top level so that inline flags and groups are untouched) leaves no literal that every match
    contains: the same matches and groups, at the cost of the attempt itself. (A verbose pattern
    gets a line break first, so that a trailing comment does not swallow the alternative.)"""
    compiled = regex.compile(pattern, flags)
    tail = "\n|(?!)" if compiled.flags & regex.VERBOSE else "|(?!)"
    return regex.compile(pattern + tail, flags)


def is_proven_cheap(pattern: str, flags: int) -> bool:
    """Whether `pattern` provably costs at most `SAFE_STEPS` steps per position tried."""
    b = proven_bound(pattern, flags)
    return b is not None and b <= SAFE_STEPS


def atom_source(atom: Node) -> str:
    """The `regex` source of a one-character atom, with its flags scoped."""
    if atom.op is Op.LIT:
        return regex.escape(atom.args[0])
    if atom.op is Op.ANY:
        return r"[\s\S]" if atom.args[0] else r"[^\n]"
    src, flags = atom.args
    on = ""
    if flags & regex.IGNORECASE:
        on += "i"
    if flags & regex.ASCII:
        on += "a"
    return f"(?{on}:{src})" if on else f"(?:{src})"


def tempered_literal(body: Node) -> tuple[str, bool] | None:
    """`(?:(?!LIT).)` (the tempered dot): `(LIT, dotall)`, else None."""
    inner = body
    while inner.op is Op.GROUP and inner.args[0] is None:
        inner = inner.kids[0]
    if inner.op is not Op.CAT or len(inner.kids) != 2:
        return None
    look, dot = inner.kids
    if look.op is not Op.LOOK or not look.args[0] or not look.args[1] or dot.op is not Op.ANY:
        return None
    lit = _literal_text(look.kids[0])
    if not lit:
        return None
    return lit, bool(dot.args[0])


def required_literal(node: Node) -> str:
    """The longest literal text every match of `node` contains ("" when none is known): a run of
    literal characters in the pattern's top-level sequence (groups entered, never an alternation,
    a repeat or a lookaround). Case-sensitive patterns only (the caller checks the flags)."""
    best = ""
    run: list[str] = []
    for item in _flat(node, []):
        if item.op is Op.LIT:
            run.append(str(item.args[0]))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(run) > len(best):
        best = "".join(run)
    return best


def _literal_text(node: Node) -> str | None:
    if node.op is Op.LIT:
        return str(node.args[0])
    if node.op is Op.GROUP and node.args[0] is None:
        return _literal_text(node.kids[0])
    if node.op is Op.CAT:
        parts = [_literal_text(k) for k in node.kids]
        if any(p is None for p in parts):
            return None
        return "".join(parts)  # type: ignore[arg-type]
    return None


# --------------------------------------------------------------------------------------------
# Compilation


class Run:
    """A repeated single-character atom, consumed in one C call (see the module docstring).

    `test` is the character class (None for a DOTALL dot); `tempered` is the literal of a tempered
    dot (`(?:(?!LIT).)`), with `dotall`. `follow` is filled in after compilation: the characters
    that can start what comes after the run (None: any)."""

    __slots__ = ("test", "tempered", "dotall", "lo", "hi", "mode", "follow", "follow_chars")

    def __init__(
        self,
        test: CharTest | None,
        lo: int,
        hi: int | None,
        mode: str,
        tempered: str | None = None,
        dotall=True,
    ) -> None:
        self.test = test
        self.tempered = tempered
        self.dotall = dotall
        self.lo = lo
        self.hi = hi
        self.mode = mode
        self.follow: Any = None  # compiled forward class regex, or None (any character)
        self.follow_chars: str | None = None  # the follow set when it is a few literal characters

    def end(self, buf: str, pos: int, eos: bool, cache: dict[int, Any]) -> tuple[int, bool]:
        """End of the longest run from `pos` (capped at `hi`), and whether more text could extend it.

        `cache` (per matching context) remembers the last maximal run, so that a run that is
        entered again, or resumed after more text arrived, is only extended over the new text."""
        n = len(buf)
        key = id(self)
        got = cache.get(key)
        if got is not None and pos < got[0] and self._reaches(buf, pos, got[0]):
            got = cache[key] = (pos, *got[1:])  # entered just before the known run: same end
        if got is not None and got[0] <= pos <= got[1]:
            lo, e, n_at, opened = got
            if opened and n > n_at:
                e, opened = self._extend(buf, e)
                cache[key] = (lo, e, n, opened)
        else:
            e, opened = self._extend(buf, pos)
            cache[key] = (pos, e, n, opened)
        if opened and eos:
            opened = False
            if e < n:  # a tail that began a tempered run's literal: at the end it is not the literal
                e = n
                if not self.dotall:
                    nl = buf.find("\n", pos, n)
                    if nl >= 0:
                        e = nl
        hi = self.hi
        if hi is not None and e >= pos + hi:
            return pos + hi, False
        return e, opened

    def _reaches(self, buf: str, pos: int, lo: int) -> bool:
        """Whether the run from `pos` goes on at least to `lo` (where a known run starts)."""
        lit = self.tempered
        if lit is None:
            test = self.test
            if test is None:
                return True
            m = test.run_re.match(buf, pos, lo)
            return m is not None and m.end() == lo
        if buf.find(lit, pos, lo + len(lit) - 1) >= 0:
            return False
        return self.dotall or buf.find("\n", pos, lo) < 0

    def _extend(self, buf: str, pos: int) -> tuple[int, bool]:
        """The maximal run from `pos` in `buf`: its end, and whether more text could move it. For a
        tempered dot: the first occurrence of its literal, else the start of a tail that begins it."""
        lit = self.tempered
        n = len(buf)
        if lit is None:
            test = self.test
            if test is None:
                return n, True
            m = test.run_re.match(buf, pos)
            e = m.end() if m is not None else pos
            return e, e >= n
        e = buf.find(lit, pos)
        opened = False
        if e < 0:
            e = n
            opened = True
            j = buf.find(lit[0], max(pos, n - len(lit) + 1))
            while j >= 0:
                if lit.startswith(buf[j:]):
                    e = j
                    break
                j = buf.find(lit[0], j + 1)
        if not self.dotall:
            nl = buf.find("\n", pos, e)
            if nl >= 0:
                return nl, False
        return e, opened


class Look:
    """A lookahead: its sub-program, its sign and an index into a matching context's memos.

    `rx` (else None): the body compiled for the `regex` module, which decides the lookahead at a
    position in one call (`_look_rx`) instead of a sub-attempt, when the body is run without
    captures, is made of literals, classes, groups, alternations and greedy or lazy repeats only
    (no lookaround, assertion, atomic group or lazy repeat: the module's partial match, which the
    decision reads, is then exact; `test_look_rx` checks it against the interpreter), and
    `capture_window` proves it reads at most `width - 2` <= `LOOK_WINDOW` characters past the
    position but a tail run, at a bounded cost.

    `sure`: the body has no named group, so only whether it matches counts, and the module's
    answer is taken whole. Else (gpt-oss's call opener, `(?=...to=functions\\.(?P<name>...))`)
    the module may find a match through a later branch while an earlier one is still being
    written, and the groups of the committed match come from that earlier one (as in the
    one-shot parse, and in `capture`'s run, which waits for it): a main attempt takes the
    module's answer and notes the lookahead (`Attempt.unsure`), and its match stands once the
    interpreter decides each noted lookahead too (`Attempt._decided`: at the match, once per
    commit, not on every feed); other attempts take only the module's failures."""

    __slots__ = ("prog", "negate", "key", "captures", "rx", "width", "sure")

    def __init__(self, prog: Program, negate: bool, key: int, body: Node | None = None) -> None:
        self.prog = prog
        self.negate = negate
        self.key = key
        self.captures = not negate and has_saves(prog)
        self.rx: Any = None
        self.width = 0
        self.sure = False
        if body is not None and not self.captures and _plain(body):
            w = capture_window(body)
            if w is not None and w <= LOOK_WINDOW:
                # (`|(?!)`: no required-string search past the window, see `match_only`)
                self.rx = regex.compile(_source(body) + "|(?!)")
                self.width = w + 2
                self.sure = not _named(body)


#: The widest lookahead body the `regex` module decides (`Look.rx`): while such a lookahead is
#: undecided, each feed runs it again, over at most this many characters.
LOOK_WINDOW = 1024

_PLAIN_OPS = (Op.LIT, Op.CLS, Op.ANY, Op.CAT, Op.ALT, Op.GROUP, Op.REP, Op.EMPTY)


def _plain(node: Node) -> bool:
    """Whether `node` holds only literals, classes, groups, alternations and greedy repeats (what
    `_look_rx` decides by the `regex` module's partial match; not a lazy repeat: the module
    reports `x{0,3}?y` on "xq" as a partial match)."""
    if node.op not in _PLAIN_OPS or (node.op is Op.REP and node.args[2] != "greedy"):
        return False
    if node.op is Op.ALT and sum(_class_led(b) for b in _alt_branches(node, [])) > 1:
        # (the module merges such branches, wrongly: `[^<]|[^a]` fails on "<"; nested
        # alternations are merged too)
        return False
    return all(_plain(k) for k in node.kids)


def _alt_branches(node: Node, out: list[Node]) -> list[Node]:
    """The branches of an alternation, those of alternations nested as whole branches spliced."""
    for k in node.kids:
        while k.op is Op.GROUP:
            k = k.kids[0]
        if k.op is Op.ALT:
            _alt_branches(k, out)
        else:
            out.append(k)
    return out


def _class_led(node: Node) -> bool:
    """Whether a match of `node` may begin with a class or a dot (an alternation: may)."""
    op = node.op
    if op is Op.LIT or op is Op.EMPTY:
        return False
    if op is Op.GROUP or op is Op.REP:
        return _class_led(node.kids[0])
    if op is Op.CAT:
        for k in node.kids:
            if _class_led(k):
                return True
            if not nullable(k):
                return False
        return False
    return True


def _source(node: Node) -> str:
    """The `regex` module source of a `_plain` tree (groups uncaptured: a boolean lookahead)."""
    op = node.op
    if op in ATOMS:
        return atom_source(node)
    if op is Op.CAT:
        return "".join(_source(k) for k in node.kids)
    if op is Op.ALT:
        return "(?:" + "|".join(_source(k) for k in node.kids) + ")"
    if op is Op.GROUP:
        return "(?:" + _source(node.kids[0]) + ")"
    if op is Op.EMPTY:
        return ""
    lo, hi = node.args[0], node.args[1]
    count = f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}"
    return "(?:" + _source(node.kids[0]) + ")" + count


def _look_rx(look: Look, buf: str, pos: int, eos: bool) -> Any:
    """A `Look.rx` lookahead body at `pos`: `(end, [])` (it matches for every continuation),
    None (it fails for every continuation) or LIVE, from one `regex` match. The body has no
    construct that reads the end of the text, so a match found now stays a match whatever
    follows; with no match, the module's partial match (a path that reached the end of the text
    unfailed) is what more text could still complete. Past `width` characters no path but a tail
    run (already past its minimum: a match) reads, so a longer text is cut there (a bounded cost
    per call) and decided at once."""
    end = pos + look.width
    if end < len(buf):
        m = look.rx.match(buf, pos, end)
    else:
        m = look.rx.match(buf, pos, partial=not eos)
    if m is None:
        return None
    if m.partial:
        return LIVE
    return (m.end(), [])


@dataclass(eq=False)
class Program:
    code: list[tuple[int, Any]]
    nslots: int
    names: dict[str, int]  # group name -> slot index of its start (end = start + 1)
    key: int = 0  # index of this program's memos in a MatchContext
    tree: Node | None = None
    #: The same program with capture instructions (for `capture`), or None when it has none.
    capture: Program | None = None


def lookbehinds(prog: Program) -> list[tuple[str, bool]]:
    """Every lookbehind `prog` runs (sub-programs included), as `(source, guarded)`: `guarded`
    when `backtrack_bound` could not prove it cheap and it runs with a time limit."""
    out: list[tuple[str, bool]] = []
    stack = [prog]
    while stack:
        for op, arg in stack.pop().code:
            if op == LOOKBEHIND:
                out.append((arg[0].pattern, arg[2]))
            elif op == LOOKAHEAD:
                stack.append(arg.prog)
            elif op == ATOMIC:
                stack.append(arg)
    return out


def has_saves(prog: Program) -> bool:
    """Whether `prog` (or a group inside it) records captures."""
    for op, arg in prog.code:
        if op == SAVE:
            return True
        if op == ATOMIC and has_saves(arg):
            return True
        if op == LOOKAHEAD and arg.captures:
            return True
    return False


class _Compiler:
    def __init__(self, names: list[str], captures: bool, counter: list[int]) -> None:
        self.code: list[tuple[int, Any]] = []
        self.names = {n: 2 * i for i, n in enumerate(names)}
        self.captures = captures
        self.counter = counter  # shared: program and lookahead keys
        self.tests: dict[tuple[str, int], CharTest] = {}
        self.runs: list[tuple[int, Program]] = []  # (pc, program) of every RUN, for follow sets

    def emit(self, op: int, arg: Any = None) -> int:
        self.code.append((op, arg))
        if len(self.code) > MAX_PROGRAM:
            raise UnsupportedPattern(f"pattern compiles to more than {MAX_PROGRAM} instructions")
        return len(self.code) - 1

    def patch(self, at: int, op: int, arg: Any) -> None:
        self.code[at] = (op, arg)

    def test(self, src: str, flags: int) -> CharTest:
        key = (src, flags)
        t = self.tests.get(key)
        if t is None:
            t = self.tests[key] = CharTest(src, flags)
        return t

    def next_key(self) -> int:
        self.counter[0] += 1
        return self.counter[0]

    def sub(self, node: Node) -> Program:
        c = _Compiler([], self.captures, self.counter)
        c.names = self.names
        c.tests = self.tests
        c.node(node)
        c.emit(MATCH)
        prog = Program(c.code, 2 * len(self.names), self.names, key=self.next_key())
        _set_follows(prog, c.runs)
        return prog

    def node(self, n: Node) -> None:
        op = n.op
        if op is Op.LIT:
            self.emit(CHAR, n.args[0])
        elif op is Op.CLS:
            self.emit(TEST, self.test(n.args[0], n.args[1]))
        elif op is Op.ANY:
            if n.args[0]:
                self.emit(ANY)
            else:
                self.emit(TEST, self.test(r"[^\n]", 0))
        elif op is Op.CAT:
            run: list[str] = []
            for k in n.kids:
                if k.op is Op.LIT:
                    run.append(k.args[0])
                    continue
                self._literal_run(run)
                run = []
                self.node(k)
            self._literal_run(run)
        elif op is Op.ALT:
            jumps = []
            for k in n.kids[:-1]:
                split = self.emit(SPLIT, None)
                self.node(k)
                jumps.append(self.emit(JMP, None))
                self.patch(split, SPLIT, (split + 1, len(self.code)))
            self.node(n.kids[-1])
            for j in jumps:
                self.patch(j, JMP, len(self.code))
        elif op is Op.GROUP:
            name = n.args[0]
            if name is not None and self.captures:
                slot = self.names[name]
                self.emit(SAVE, slot)
                self.node(n.kids[0])
                self.emit(SAVE, slot + 1)
            else:
                self.node(n.kids[0])
        elif op is Op.ASSERT:
            self.emit(ASSERT, Assertion(n.args[0], n.args[1]))
        elif op is Op.LOOK:
            ahead, negate = n.args[0], n.args[1]
            if ahead:
                lit = _literal_text(n.kids[0])
                if lit:
                    # A literal body is decided by one `startswith` (no sub-attempt, no memo): the
                    # lookahead of a branch led by it, `(?=<\\|channel\\|>)`, is tried at every
                    # candidate of the branch.
                    self.emit(PEEK, (lit, negate))
                    return
                sub = self.sub(n.kids[0])
                self.emit(LOOKAHEAD, Look(sub, negate, sub.key, n.kids[0]))
            else:
                bound = n.args[4]
                guarded = bound is None or bound > SAFE_STEPS
                self.emit(LOOKBEHIND, (regex.compile(n.args[3], n.args[2]), negate, guarded))
        elif op is Op.ATOMIC:
            self.emit(ATOMIC, self.sub(n.kids[0]))
        elif op is Op.REP:
            self.rep(n)
        elif op is Op.EMPTY:
            pass
        else:  # pragma: no cover
            raise AssertionError(op)

    def _literal_run(self, run: list[str]) -> None:
        if len(run) == 1:
            self.emit(CHAR, run[0])
        elif run:
            self.emit(STR, "".join(run))

    def _run_of(self, body: Node, lo: int, hi: int | None, kind: str) -> Run | None:
        inner = body
        while inner.op is Op.GROUP and (inner.args[0] is None or not self.captures):
            inner = inner.kids[0]
        if inner.op is Op.LIT:
            return Run(self.test(regex.escape(inner.args[0]), 0), lo, hi, kind)
        if inner.op is Op.CLS:
            return Run(self.test(inner.args[0], inner.args[1]), lo, hi, kind)
        if inner.op is Op.ANY:
            if inner.args[0]:
                return Run(None, lo, hi, kind)
            return Run(self.test(r"[^\n]", 0), lo, hi, kind)
        tempered = tempered_literal(inner)
        if tempered is not None:
            return Run(None, lo, hi, kind, tempered=tempered[0], dotall=tempered[1])
        return None

    def rep(self, n: Node) -> None:
        lo, hi, kind = n.args
        body = n.kids[0]
        if hi is not None and hi < lo:
            raise UnsupportedPattern("a repeat whose maximum is below its minimum")
        if hi != 1 or kind == "possessive":
            spec = self._run_of(body, lo, hi, kind)
            if spec is not None:
                pc = self.emit(RUN, spec)
                self.runs.append((pc, None))  # type: ignore[arg-type]
                return
        if kind == "possessive":
            self.emit(ATOMIC, self.sub(Node(Op.REP, (lo, hi, "greedy"), [body])))
            return
        if (hi is None or hi > 1) and nullable(body):
            raise UnsupportedPattern("a repeated group that can match the empty string")
        greedy = kind == "greedy"
        for _ in range(lo):
            self.node(body)
        if hi is None:
            loop = self.emit(SPLIT, None)
            self.node(body)
            self.emit(JMP, loop)
            out = len(self.code)
            self.patch(loop, SPLIT, (loop + 1, out) if greedy else (out, loop + 1))
            return
        splits = []
        for _ in range(hi - lo):
            splits.append(self.emit(SPLIT, None))
            self.node(body)
        out = len(self.code)
        for s in splits:
            self.patch(s, SPLIT, (s + 1, out) if greedy else (out, s + 1))


def _first_of(code: list[tuple[int, Any]], pc: int, chars: set[str], srcs: list[str]) -> bool:
    """Collect what can be consumed first from `pc`: literal characters into `chars`, class sources
    (flags scoped) into `srcs`. Returns False when any character can (a dot, the end of the program,
    an atomic group, a tempered run)."""
    stack = [pc]
    seen: set[int] = set()
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        op, arg = code[pc]
        if op == CHAR:
            chars.add(arg)
        elif op == STR:
            chars.add(arg[0])
        elif op == TEST:
            srcs.append(_scoped(arg))
        elif op == RUN:
            if arg.test is None:
                return False
            srcs.append(_scoped(arg.test))
            if arg.lo == 0:
                stack.append(pc + 1)
        elif op == SPLIT:
            stack.extend(arg)
        elif op == JMP:
            stack.append(arg)
        elif op in (SAVE, ASSERT, LOOKBEHIND, LOOKAHEAD, PEEK):
            stack.append(pc + 1)
        else:  # MATCH, ANY, ATOMIC
            return False
    return True


def _scoped(test: CharTest) -> str:
    on = ""
    if test.flags & regex.IGNORECASE:
        on += "i"
    if test.flags & regex.ASCII:
        on += "a"
    return f"(?{on}:{test.src})" if on else f"(?:{test.src})"


def _set_follows(prog: Program, runs: list[tuple[int, Any]]) -> None:
    code = prog.code
    for pc, _ in runs:
        spec: Run = code[pc][1]
        chars: set[str] = set()
        srcs: list[str] = []
        if not _first_of(code, pc + 1, chars, srcs):
            spec.follow = None
            continue
        if not srcs and len(chars) <= 4:
            spec.follow_chars = "".join(sorted(chars))
        parts = [regex.escape(c) for c in sorted(chars)] + list(dict.fromkeys(srcs))
        spec.follow = regex.compile(module_safe("|".join(parts)) if parts else "(?!)")


def compile_pattern(pattern: str, flags: int = regex.DOTALL) -> Program:
    """Compile `pattern` (already known to be valid for the `regex` module) into a Program.

    The returned program has no capture instructions; `.capture` is the one with them (None when
    the pattern has no named groups)."""
    parser = _Parser(pattern, flags)
    tree = parser.parse()
    counter = [0]
    progs = []
    for captures in (False, True) if parser.names else (False,):
        comp = _Compiler(parser.names, captures, counter)
        comp.node(tree)
        comp.emit(MATCH)
        prog = Program(comp.code, 2 * len(parser.names), comp.names, key=0, tree=tree)
        _set_follows(prog, comp.runs)
        progs.append(prog)
    if len(progs) == 2:
        progs[0].capture = progs[1]
    return progs[0]


def literal_program(literals: list[str]) -> Program:
    """Program for an alternation of literals, longest first (the reference's order)."""
    ordered = sorted(literals, key=len, reverse=True)
    tree = Node(Op.ALT, kids=[Node(Op.CAT, kids=[Node(Op.LIT, (c,)) for c in lit]) for lit in ordered])
    if len(ordered) == 1:
        tree = tree.kids[0]
    comp = _Compiler([], False, [0])
    comp.node(tree)
    comp.emit(MATCH)
    return Program(comp.code, 0, {}, key=0, tree=tree)


# --------------------------------------------------------------------------------------------
# Execution


class _ProgMemo:
    """What one matching context has learned about one program (see `MatchContext`)."""

    __slots__ = ("fail", "succ", "runs", "done", "live")

    def __init__(self) -> None:
        self.fail: set[int] = set()  # (pos * ncode + pc) of states that lead to no match
        self.succ: set[int] = set()  # states that lead to a match (lookahead bodies only)
        self.runs: dict[int, tuple[int, int]] = {}  # RUN pc -> [a, b]: continuations that fail
        self.done: dict[int, Any] = {}  # lookaheads: position -> decided outcome
        self.live: dict[int, Attempt] = {}  # lookaheads: position -> suspended attempt


class MatchContext:
    """The memos of one scan (one delimiter, one region visit): shared by the attempts at
    successive start positions and by every evaluation of the pattern's lookaheads."""

    __slots__ = ("progs", "atomic", "run_ends")

    def __init__(self) -> None:
        self.progs: dict[int, _ProgMemo] = {}
        self.atomic: dict[tuple[int, int], Any] = {}
        self.run_ends: dict[int, Any] = {}  # Run -> its last maximal run (see `Run.end`)

    def memo(self, prog: Program) -> _ProgMemo:
        m = self.progs.get(prog.key)
        if m is None:
            m = self.progs[prog.key] = _ProgMemo()
        return m

    def size(self) -> int:
        """Number of memo entries (tests use it to check that memory stays linear)."""
        return sum(len(m.fail) + len(m.succ) + len(m.done) for m in self.progs.values())


class Attempt:
    """One match attempt at a fixed start position, resumable when it runs out of text.

    `run(buf, eos)` returns `None` (fail: no match at this start, for every continuation), a tuple
    `(end, slots)` (the match the `regex` module would return at this start, for every
    continuation), or `LIVE` (the outcome still depends on text not seen yet; call again with a
    longer buffer). `ctx` holds the memos shared with other attempts of the same scan.
    """

    __slots__ = (
        "prog",
        "start",
        "ctx",
        "pc",
        "pos",
        "slots",
        "stack",
        "path",
        "local",
        "boolean",
        "_back",
        "unsure",
    )

    def __init__(self, prog: Program, start: int, ctx: MatchContext | None = None, mode: int = 0) -> None:
        self.prog = prog
        self.start = start
        self.ctx = ctx if ctx is not None else MatchContext()
        self.pc = 0
        self.pos = start
        self.slots: list[int] = [-1] * prog.nslots
        self.stack: list[tuple] = []
        # A MAIN attempt records the states it enters straight into the shared failure memo (a state
        # in progress is never re-entered on its own path, and a later attempt runs only after this
        # one failed). SUB and BOOLEAN attempts (atomic groups, lookahead bodies) run repeatedly at
        # positions of one scan, also after a success: they keep their states apart and add them
        # to the failures only when they fail. BOOLEAN ones also record the states of a successful
        # path (for a lookahead only the outcome matters).
        self.boolean = mode == BOOLEAN
        self.local: set[int] | None = set() if mode != MAIN else None
        self.path: list[int] = []
        self._back = False  # resume by backtracking (suspended inside a lazy run's alternatives)
        self.unsure: list[tuple[Look | None, int, Attempt | None]] | None = None  # (see `Look`)

    def still_live(self, buf: str) -> bool:
        """Whether this suspended attempt is live again where it stopped, decided without setting
        the interpreter up (before end of stream): inside a literal that the new text still only
        begins, or in a greedy or possessive run that the new text extends to its end (a long
        opener or a name streamed in tokens), or in a lookahead whose body is live again so.
        `run` would return `LIVE` at the same place."""
        if self._back:
            return False
        code = self.prog.code
        op, arg = code[self.pc]
        pos = self.pos
        if op == STR:
            return len(buf) - pos < len(arg) and arg.startswith(buf[pos:])
        if op == PEEK:
            lit = arg[0]
            return len(buf) - pos < len(lit) and lit.startswith(buf[pos:])
        if op == RUN and arg.mode != "lazy":
            # The interpreter's checks on entering the run, in its order.
            pm = self.ctx.memo(self.prog)
            key = pos * (len(code) + 1) + self.pc
            local = self.local
            if key in pm.fail or (local is not None and key in local) or (self.boolean and key in pm.succ):
                return False
            if arg.end(buf, pos, False, self.ctx.run_ends)[1]:
                STEPS[0] += 1  # the step the interpreter counts for the run
                return True
        elif op == LOOKAHEAD:
            # Suspended on a live lookahead body (`(?=<|tool_call_begin|>)` being written).
            pm = self.ctx.memo(arg.prog)
            if arg.rx is not None and (arg.sure or self.local is None):
                if pos in pm.done:
                    return False
                r = _look_rx(arg, buf, pos, False)
                if r is LIVE:
                    return True
                if arg.sure or r is None:
                    pm.done[pos] = r  # (decided: `run` reads it; a match to note, `_look` notes)
                return False
            sub = pm.live.get(pos)
            return sub is not None and pos not in pm.done and sub.still_live(buf)
        return False

    def run(self, buf: str, eos: bool, checked: bool = False) -> Any:
        """The outcome at this start with `buf` (see the class docstring). `checked`: the caller
        has just seen `still_live` answer False, so it is not asked again; a fresh attempt (at
        its first instruction) is not asked either, since the interpreter finds the same at once."""
        code = self.prog.code
        if not eos and not checked and self.pc and self.still_live(buf):
            return LIVE
        pm = self.ctx.memo(self.prog)
        fail = pm.fail
        boolean = self.boolean
        local = self.local if self.local is not None else fail
        run_ends = self.ctx.run_ends
        succ = pm.succ
        runs = pm.runs
        stack = self.stack
        path = self.path
        slots = self.slots
        pc = self.pc
        pos = self.pos
        n = len(buf)
        ncode = len(code) + 1
        backtrack = self._back
        self._back = False
        steps = STEPS
        while True:
            if not backtrack:
                op, arg = code[pc]
                if op == STR:
                    if buf.startswith(arg, pos):
                        pc += 1
                        pos += len(arg)
                        continue
                    if not eos and n - pos < len(arg) and arg.startswith(buf[pos:]):
                        self.pc, self.pos = pc, pos
                        return LIVE
                elif op == CHAR:
                    if pos < n:
                        if buf[pos] == arg:
                            pc += 1
                            pos += 1
                            continue
                    elif not eos:
                        self.pc, self.pos = pc, pos
                        return LIVE
                elif op == RUN:
                    steps[0] += 1
                    key = pos * ncode + pc
                    if not (key in local or key in fail):
                        if boolean and key in succ:
                            return self._succeed(pos, succ)
                        e, more = arg.end(buf, pos, eos, run_ends)
                        iv = runs.get(pc)  # continuation positions already known to fail
                        mode = arg.mode
                        if mode != "lazy":
                            if more:
                                self.pc, self.pos = pc, pos
                                return LIVE
                            if e - pos >= arg.lo:
                                x = e
                                if iv is not None and iv[0] <= x <= iv[1]:
                                    x = (
                                        self._prev_viable(arg, buf, pos + arg.lo, iv[0])
                                        if mode == "greedy"
                                        else -1
                                    )
                                if x >= 0:
                                    local.add(key)
                                    path.append(key)
                                    if mode == "greedy":
                                        stack.append((_BT_GREEDY, pc, pos, x, len(path), e))
                                    pc += 1
                                    pos = x
                                    continue
                                if mode == "greedy":
                                    _conts_failed(runs, pc, pos + arg.lo, e)
                        else:
                            first = pos + arg.lo
                            lo = first
                            if iv is not None and iv[0] <= lo <= iv[1]:
                                lo = iv[1] + 1  # skip the continuations known to fail
                            x = self._viable(arg, buf, lo, e, more) if lo <= e else e + 1
                            if iv is not None and iv[0] <= x <= iv[1]:
                                x = self._viable(arg, buf, iv[1] + 1, e, more) if iv[1] < e else e + 1
                            if x <= e:
                                local.add(key)
                                path.append(key)
                                stack.append((_BT_LAZY, pc, pos, x + 1, len(path)))
                                pc += 1
                                pos = x
                                continue
                            if more:
                                self.pc, self.pos = pc, pos
                                return LIVE
                            _conts_failed(runs, pc, first, e)
                elif op == TEST:
                    if pos < n:
                        if arg(buf[pos]):
                            pc += 1
                            pos += 1
                            continue
                    elif not eos:
                        self.pc, self.pos = pc, pos
                        return LIVE
                elif op == ANY:
                    if pos < n:
                        pc += 1
                        pos += 1
                        continue
                    if not eos:
                        self.pc, self.pos = pc, pos
                        return LIVE
                elif op == SPLIT:
                    steps[0] += 1
                    key = pos * ncode + pc
                    if key not in local and key not in fail:
                        if boolean and key in succ:
                            return self._succeed(pos, succ)
                        local.add(key)
                        path.append(key)
                        stack.append((_BT_SPLIT, arg[1], pos, len(path)))
                        pc = arg[0]
                        continue
                elif op == JMP:
                    pc = arg
                    continue
                elif op == SAVE:
                    stack.append((_BT_RESTORE, arg, slots[arg], 0))
                    slots[arg] = pos
                    pc += 1
                    continue
                elif op == MATCH:
                    self.pc, self.pos = pc, pos
                    if boolean:
                        return self._succeed(pos, succ)
                    if self.unsure is not None and not eos and not self._decided(buf):
                        return LIVE  # (resumed here: `run` answers again at the match)
                    return (pos, list(slots))
                elif op == ASSERT:
                    r = arg.test(buf, pos, eos)
                    if r is LIVE:
                        self.pc, self.pos = pc, pos
                        return LIVE
                    if r:
                        pc += 1
                        continue
                elif op == LOOKBEHIND:
                    # The compiled source includes the sign of the lookbehind. A lookbehind
                    # proven cheap at load time (`backtrack_bound`) runs without a time limit.
                    if arg[2]:
                        GUARDED_CALLS[0] += 1
                        if arg[0].match(buf, pos, timeout=REGEX_TIMEOUT) is not None:
                            pc += 1
                            continue
                    elif arg[0].match(buf, pos) is not None:
                        pc += 1
                        continue
                elif op == LOOKAHEAD:
                    r = self._look(arg, buf, pos, eos)
                    if r is LIVE:
                        self.pc, self.pos = pc, pos
                        return LIVE
                    if (r is not None) != arg.negate:
                        if r is not None and r[1]:
                            self._merge(r[1])
                        pc += 1
                        continue
                elif op == PEEK:
                    lit, negate = arg
                    if buf.startswith(lit, pos):
                        if not negate:
                            pc += 1
                            continue
                    elif not eos and n - pos < len(lit) and lit.startswith(buf[pos:]):
                        self.pc, self.pos = pc, pos
                        return LIVE
                    elif negate:
                        pc += 1
                        continue
                else:  # ATOMIC: a sub-search run to its first success
                    r = self._atomic(arg, pos, buf, eos)
                    if r is LIVE:
                        self.pc, self.pos = pc, pos
                        return LIVE
                    if r is not None:
                        self._merge(r[1])
                        pos = r[0]
                        pc += 1
                        continue
            backtrack = False
            # Failure: backtrack.
            while True:
                if not stack:
                    self.pc, self.pos = pc, pos
                    if self.local is not None:
                        fail.update(local)
                    return None
                entry = stack.pop()
                steps[0] += 1
                kind = entry[0]
                if kind == _BT_SPLIT:
                    del path[entry[3] :]
                    pc, pos = entry[1], entry[2]
                    break
                if kind == _BT_RESTORE:
                    slots[entry[1]] = entry[2]
                    continue
                spec_pc, start = entry[1], entry[2]
                spec = code[spec_pc][1]
                del path[entry[4] :]
                iv = runs.get(spec_pc)
                if kind == _BT_GREEDY:
                    hi = entry[3]
                    if iv is not None and iv[0] < hi <= iv[1] + 1:
                        hi = iv[0]  # skip the continuations known to fail
                    p = self._prev_viable(spec, buf, start + spec.lo, hi)
                    if iv is not None and iv[0] <= p <= iv[1]:
                        p = self._prev_viable(spec, buf, start + spec.lo, iv[0])
                    if p >= 0:
                        stack.append((_BT_GREEDY, spec_pc, start, p, entry[4], entry[5]))
                        pc, pos = spec_pc + 1, p
                        break
                    _conts_failed(runs, spec_pc, start + spec.lo, entry[5])
                    continue
                # _BT_LAZY
                e, more = spec.end(buf, start, eos, run_ends)
                lo = entry[3]
                if iv is not None and iv[0] <= lo <= iv[1]:
                    lo = iv[1] + 1
                p = self._viable(spec, buf, lo, e, more) if lo <= e else e + 1
                if iv is not None and iv[0] <= p <= iv[1]:
                    p = self._viable(spec, buf, iv[1] + 1, e, more) if iv[1] < e else e + 1
                if p <= e:
                    stack.append((_BT_LAZY, spec_pc, start, p + 1, entry[4]))
                    pc, pos = spec_pc + 1, p
                    break
                if more:
                    stack.append(entry)
                    self._back = True
                    self.pc, self.pos = pc, pos
                    return LIVE
                _conts_failed(runs, spec_pc, start + spec.lo, e)

    @staticmethod
    def _viable(spec: Run, buf: str, lo: int, e: int, more: bool) -> int:
        """The first position in [lo, e] where what follows the run can start (e itself always)."""
        if lo >= e:
            return e
        chars = spec.follow_chars
        if chars is not None:
            best = e
            for c in chars:
                i = buf.find(c, lo, best)
                if i >= 0:
                    best = i
            return best
        follow = spec.follow
        if follow is None:
            return lo
        m = follow.search(buf, lo, e)
        return e if m is None else m.start()

    @staticmethod
    def _prev_viable(spec: Run, buf: str, lo: int, hi: int) -> int:
        """The last position in [lo, hi) where what follows the run can start, or -1."""
        if hi <= lo:
            return -1
        chars = spec.follow_chars
        if chars is not None:
            best = -1
            for c in chars:
                i = buf.rfind(c, lo, hi)
                if i > best:
                    best = i
            return best
        follow = spec.follow
        if follow is None:
            return hi - 1
        return _rsearch(follow, buf, lo, hi)

    def _decided(self, buf: str) -> bool:
        """Whether every lookahead this attempt took a match of from the `regex` module although
        its body has named groups (`unsure`: those of abandoned paths too, which `capture`'s run
        walks as well) is decided as the interpreter decides it: its first way to match, in
        priority order, found before the end of the text. Certain when no way of matching the
        body reaches the end of the text (the module's `fullmatch` up to the end, partial
        included, finds none: one call over at most the body's window, once per match); else
        asked of a sub-attempt, kept and resumed while it is live (linear, as any attempt)."""
        unsure = self.unsure
        assert unsure is not None
        n = len(buf)
        for k, (look, pos, att) in enumerate(unsure):
            if look is None:
                continue
            if att is None:
                if n - pos <= look.width and look.rx.fullmatch(buf, pos, partial=True) is None:
                    unsure[k] = (None, pos, None)
                    continue
                att = Attempt(look.prog, pos, MatchContext(), BOOLEAN)
            if att.run(buf, False) is LIVE:
                unsure[k] = (look, pos, att)
                return False
            unsure[k] = (None, pos, None)
        return True

    def _succeed(self, pos: int, succ: set[int]) -> Any:
        succ.update(self.path)
        self.stack.clear()
        return (pos, [])

    def _merge(self, sub_slots: list[int]) -> None:
        slots = self.slots
        for i, v in enumerate(sub_slots):
            if v != -1 and v != slots[i]:
                self.stack.append((_BT_RESTORE, i, slots[i], 0))
                slots[i] = v

    def _look(self, look: Look, buf: str, pos: int, eos: bool) -> Any:
        """The lookahead body's match at `pos` (`(end, slots)`), None, or LIVE. Bodies without
        captures only need an outcome (BOOLEAN attempts, with success memos)."""
        pm = self.ctx.memo(look.prog)
        if pos in pm.done:
            return pm.done[pos]
        if look.rx is not None:
            r = _look_rx(look, buf, pos, eos)
            if look.sure:
                if r is not LIVE:
                    pm.done[pos] = r
                return r
            if r is None:
                # (a failure is certain, groups or not: the sub-attempt, if any, is dropped)
                pm.live.pop(pos, None)
                pm.done[pos] = None
                return None
            if self.local is None and not eos:
                if r is not LIVE:
                    # A match of a body with groups: noted (see `Look`), not remembered (an
                    # attempt at another start that meets it notes it too).
                    if self.unsure is None:
                        self.unsure = []
                    self.unsure.append((look, pos, None))
                return r
        att = pm.live.pop(pos, None)
        if att is None:
            att = Attempt(look.prog, pos, self.ctx, SUB if look.captures else BOOLEAN)
        r = att.run(buf, eos)
        if r is LIVE:
            pm.live[pos] = att
            return LIVE
        pm.done[pos] = r
        return r

    def _atomic(self, prog: Program, pos: int, buf: str, eos: bool) -> Any:
        key = (prog.key, pos)
        cached = self.ctx.atomic.get(key)
        if cached is not None:
            return cached[0]
        sub = Attempt(prog, pos, self.ctx, SUB)
        r = sub.run(buf, eos)
        if r is not LIVE:
            self.ctx.atomic[key] = (r,)
        return r


def _conts_failed(runs: dict[int, tuple[int, int]], pc: int, a: int, b: int) -> None:
    """Every alternative of the run at `pc` that continues in [a, b] failed: the continuation
    fails from each of those positions (it does not depend on how the run was entered), so later
    entries of the run skip them. One interval per run, grown while the failures are contiguous."""
    if a > b:
        return
    iv = runs.get(pc)
    if iv is not None and a <= iv[1] + 1 and b >= iv[0] - 1:
        runs[pc] = (min(a, iv[0]), max(b, iv[1]))
    else:
        runs[pc] = (a, b)


_REVERSE_CACHE: dict[int, Any] = {}


def _rsearch(follow: Any, buf: str, lo: int, hi: int) -> int:
    """The last match start of the one-character class `follow` in buf[lo:hi], or -1."""
    rev = _REVERSE_CACHE.get(id(follow))
    if rev is None or rev[0] is not follow:
        rev = _REVERSE_CACHE[id(follow)] = (
            follow,
            regex.compile(follow.pattern, follow.flags | regex.REVERSE),
        )
    m = rev[1].search(buf, lo, hi)
    return -1 if m is None else m.start()


def capture(prog: Program, buf: str, start: int, eos: bool) -> list[int]:
    """The capture slots of the match at `start` (which the decide program already found)."""
    cap = prog.capture
    if cap is None:
        return [-1] * prog.nslots
    r = Attempt(cap, start, MatchContext()).run(buf, eos)
    assert r is not None and r is not LIVE, "the capture run disagrees with the decide run"
    return list(r[1])
