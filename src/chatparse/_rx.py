"""An exact, resumable, memoised backtracking matcher for delimiter regexes.

Theory of operation
-------------------
A delimiter may only be committed when no continuation of the stream could change which match the
one-shot parse would find. The `regex` module cannot answer that question: its partial matching
prefers a complete match anywhere over a partial one (defects D3/D4 of the reference), and a regex
search restarted from the same place on every feed is quadratic (D1/D2).

This module parses a pattern (the `regex` module's syntax, version 0, minus a few constructs listed
in `UnsupportedPattern`) into a small program and runs it with a backtracking interpreter that has
the same leftmost-first priority semantics as the `regex` module, plus three properties:

* **Touch detection.** Whenever the interpreter needs a character at the end of the buffer (or an
  end-sensitive assertion there) before it has found the first successful path, the attempt is
  *live*: more text could change its outcome. A live attempt is suspended with its whole
  backtracking stack, and resumed when more text arrives, so a long live attempt (a `[^<]*` run in
  a null region, a long whitespace run) costs O(new characters) per feed, not O(held text).
* **Memoisation.** A branch point (program counter, position) that was explored and failed can
  never succeed later (no back-references are supported, so the future of a state does not depend
  on captures), so it is recorded and pruned, across attempts at successive start positions. This
  bounds the work of a whole scan by O(program size x text length), for any pattern: an untrusted
  template cannot make the scanner hang.
* **Exact semantics.** Character classes, case-insensitive characters, word boundaries and
  lookbehinds are delegated to the `regex` module itself, one character or one position at a time,
  so Unicode semantics are those of the reference.
"""

from __future__ import annotations

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
LOOKAHEAD = 7  # arg: (Program, negate)
LOOKBEHIND = 8  # arg: (compiled regex, negate)
ATOMIC = 9  # arg: Program
MATCH = 10
STR = 11  # arg: a run of two or more literal characters, compared with str.startswith

#: Maximum number of instructions a pattern may compile to (bounded repeats are expanded).
MAX_PROGRAM = 10000
#: The memo of failed branch points is cleared past this size (it only prunes work, so clearing
#: never changes a result; it bounds memory on adversarial templates).
MEMO_CAP = 1_000_000
#: Seconds allowed to one `regex` module call made on the text (lookbehinds).
REGEX_TIMEOUT = 1.0

LIVE = "live"


class UnsupportedPattern(ValueError):
    """The pattern uses a construct the exact matcher does not implement."""


class CharTest:
    """A one-character test evaluated by the `regex` module, memoised per character."""

    __slots__ = ("src", "flags", "_re", "cache")

    def __init__(self, src: str, flags: int) -> None:
        self.src = src
        self.flags = flags
        self._re = regex.compile(src, flags)
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


@dataclass
class Node:
    op: str
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
        branches = []
        state = [flags]
        branches.append(self.sequence(state))
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence(state))
        return branches[0] if len(branches) == 1 else Node("alt", kids=branches)

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
        return Node("cat", kids=items)

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
        return Node("rep", (lo, hi, kind), [atom])

    def atom(self, state: list[int]) -> Node | None:
        p = self.p
        flags = state[0]
        c = p[self.i]
        if c == "(":
            return self.group(state)
        if c == "[":
            start = self.i
            self.i = _class_end(p, self.i)
            return Node("cls", (p[start : self.i], flags))
        if c == ".":
            self.i += 1
            return Node("any", (bool(flags & regex.DOTALL),))
        if c == "^":
            self.i += 1
            return Node("assert", ("bol" if flags & regex.MULTILINE else "bos", flags))
        if c == "$":
            self.i += 1
            return Node("assert", ("eol" if flags & regex.MULTILINE else "eos", flags))
        if c == "\\":
            return self.escape(flags)
        if c in "*+?":
            raise self.fail("nothing to repeat")
        self.i += 1
        return self.literal(c, flags)

    def literal(self, ch: str, flags: int) -> Node:
        if flags & regex.IGNORECASE:
            return Node("cls", (regex.escape(ch), flags))
        return Node("lit", (ch,))

    def escape(self, flags: int) -> Node:
        p = self.p
        self.i += 1
        if self.i >= len(p):
            raise self.fail("trailing backslash")
        c = p[self.i]
        self.i += 1
        if c in "dDwWsShH":
            return Node("cls", ("\\" + c, flags))
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
            return Node("cls", (src, flags))
        if c == "A":
            return Node("assert", ("bos", flags))
        if c == "Z":
            return Node("assert", ("Z", flags))
        if c in "bBmM":
            if flags & regex.WORD:
                raise self.fail("the WORD flag")
            return Node("assert", (c, flags))
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
                return self.close(Node("group", (None,), [self.alternation(flags)]))
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
                return self.close(Node("group", (name,), [self.alternation(flags)]))
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
                    node = self.close(Node("look", (ahead, negate, flags), [body]))
                    if not ahead:
                        if _has(body, ("group", "look")) and _named(body):
                            raise self.fail("named groups inside a lookbehind")
                        if _has_end_sensitive(body):
                            raise self.fail("end-of-text assertions inside a lookbehind")
                        node.args = (ahead, negate, flags, p[start : self.i])
                    return node
            if p.startswith(">", self.i):
                self.i += 1
                return self.close(Node("atomic", (), [self.alternation(flags)]))
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
            return self.close(Node("group", (None,), [self.alternation(new)]))
        return self.close(Node("group", (None,), [self.alternation(flags)]))

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


def _has(node: Node, ops: tuple[str, ...]) -> bool:
    return node.op in ops or any(_has(k, ops) for k in node.kids)


def _named(node: Node) -> bool:
    if node.op == "group" and node.args[0] is not None:
        return True
    return any(_named(k) for k in node.kids)


def _has_end_sensitive(node: Node) -> bool:
    if node.op == "assert" and node.args[0] not in ("bos", "bol"):
        return True
    if node.op == "look" and node.args[0]:
        return True
    return any(_has_end_sensitive(k) for k in node.kids)


def nullable(node: Node) -> bool:
    """Whether `node` can match the empty string (assertions assumed satisfiable)."""
    op = node.op
    if op in ("lit", "cls", "any"):
        return False
    if op in ("assert", "look", "empty"):
        return True
    if op == "cat":
        return all(nullable(k) for k in node.kids)
    if op == "alt":
        return any(nullable(k) for k in node.kids)
    if op == "rep":
        return node.args[0] == 0 or nullable(node.kids[0])
    return nullable(node.kids[0])  # group, atomic


# --------------------------------------------------------------------------------------------
# Compilation


@dataclass
class Program:
    code: list[tuple[int, Any]]
    nslots: int
    names: dict[str, int]  # group name -> slot index of its start (end = start + 1)


class _Compiler:
    def __init__(self, names: list[str]) -> None:
        self.code: list[tuple[int, Any]] = []
        self.names = {n: 2 * i for i, n in enumerate(names)}
        self.tests: dict[tuple[str, int], CharTest] = {}

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

    def sub(self, node: Node) -> Program:
        c = _Compiler([])
        c.names = self.names
        c.tests = self.tests
        c.node(node)
        c.emit(MATCH)
        return Program(c.code, 2 * len(self.names), self.names)

    def node(self, n: Node) -> None:
        op = n.op
        if op == "lit":
            self.emit(CHAR, n.args[0])
        elif op == "cls":
            self.emit(TEST, self.test(n.args[0], n.args[1]))
        elif op == "any":
            if n.args[0]:
                self.emit(ANY)
            else:
                self.emit(TEST, self.test(r"[^\n]", 0))
        elif op == "cat":
            run: list[str] = []
            for k in n.kids:
                if k.op == "lit":
                    run.append(k.args[0])
                    continue
                self._literal_run(run)
                run = []
                self.node(k)
            self._literal_run(run)
        elif op == "alt":
            jumps = []
            for k in n.kids[:-1]:
                split = self.emit(SPLIT, None)
                self.node(k)
                jumps.append(self.emit(JMP, None))
                self.patch(split, SPLIT, (split + 1, len(self.code)))
            self.node(n.kids[-1])
            for j in jumps:
                self.patch(j, JMP, len(self.code))
        elif op == "group":
            name = n.args[0]
            if name is not None:
                slot = self.names[name]
                self.emit(SAVE, slot)
                self.node(n.kids[0])
                self.emit(SAVE, slot + 1)
            else:
                self.node(n.kids[0])
        elif op == "assert":
            self.emit(ASSERT, Assertion(n.args[0], n.args[1]))
        elif op == "look":
            ahead, negate = n.args[0], n.args[1]
            if ahead:
                self.emit(LOOKAHEAD, (self.sub(n.kids[0]), negate))
            else:
                self.emit(LOOKBEHIND, (regex.compile(n.args[3], n.args[2]), negate))
        elif op == "atomic":
            self.emit(ATOMIC, self.sub(n.kids[0]))
        elif op == "rep":
            self.rep(n)
        elif op == "empty":
            pass
        else:  # pragma: no cover
            raise AssertionError(op)

    def _literal_run(self, run: list[str]) -> None:
        if len(run) == 1:
            self.emit(CHAR, run[0])
        elif run:
            self.emit(STR, "".join(run))

    def rep(self, n: Node) -> None:
        lo, hi, kind = n.args
        body = n.kids[0]
        if kind == "possessive":
            self.emit(ATOMIC, self.sub(Node("rep", (lo, hi, "greedy"), [body])))
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


def compile_pattern(pattern: str, flags: int = regex.DOTALL) -> Program:
    """Compile `pattern` (already known to be valid for the `regex` module) into a Program."""
    parser = _Parser(pattern, flags)
    tree = parser.parse()
    comp = _Compiler(parser.names)
    comp.node(tree)
    comp.emit(MATCH)
    prog = Program(comp.code, 2 * len(parser.names), comp.names)
    prog.tree = tree  # type: ignore[attr-defined]
    return prog


def literal_program(literals: list[str]) -> Program:
    """Program for an alternation of literals, longest first (the reference's order)."""
    ordered = sorted(literals, key=len, reverse=True)
    tree = Node("alt", kids=[Node("cat", kids=[Node("lit", (c,)) for c in lit]) for lit in ordered])
    if len(ordered) == 1:
        tree = tree.kids[0]
    comp = _Compiler([])
    comp.node(tree)
    comp.emit(MATCH)
    prog = Program(comp.code, 0, {})
    prog.tree = tree  # type: ignore[attr-defined]
    return prog


# --------------------------------------------------------------------------------------------
# Execution


class Attempt:
    """One match attempt at a fixed start position, resumable when it runs out of text.

    `run(buf, eos)` returns `None` (fail: no match at this start, for every continuation), a tuple
    `(end, slots)` (the match the `regex` module would return at this start, for every
    continuation), or `LIVE` (the outcome still depends on text not seen yet; call again with a
    longer buffer). `memo` is a set of failed branch points shared with other attempts of the same
    scan.
    """

    __slots__ = ("prog", "start", "memo", "pc", "pos", "slots", "stack", "looks")

    def __init__(self, prog: Program, start: int, memo: set[int], looks: dict) -> None:
        self.prog = prog
        self.start = start
        self.memo = memo
        self.pc = 0
        self.pos = start
        self.slots: list[int] = [-1] * prog.nslots
        self.stack: list[tuple[int, int, int]] = []
        self.looks = looks

    def run(self, buf: str, eos: bool) -> Any:
        code = self.prog.code
        memo = self.memo
        stack = self.stack
        slots = self.slots
        pc = self.pc
        pos = self.pos
        n = len(buf)
        ncode = len(code) + 1
        while True:
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
                key = pos * ncode + pc
                if key not in memo:
                    if len(memo) >= MEMO_CAP:
                        memo.clear()
                    memo.add(key)
                    stack.append((arg[1], pos, -1))
                    pc = arg[0]
                    continue
            elif op == JMP:
                pc = arg
                continue
            elif op == SAVE:
                stack.append((-1, arg, slots[arg]))
                slots[arg] = pos
                pc += 1
                continue
            elif op == MATCH:
                self.pc, self.pos = pc, pos
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
                # The compiled source includes the sign of the lookbehind.
                ok = arg[0].match(buf, pos, timeout=REGEX_TIMEOUT) is not None
                if ok:
                    pc += 1
                    continue
            else:  # LOOKAHEAD / ATOMIC: a sub-search run to its first success
                sub = arg[0] if op == LOOKAHEAD else arg
                r = self._sub(sub, pos, buf, eos)
                if r is LIVE:
                    self.pc, self.pos = pc, pos
                    return LIVE
                if op == LOOKAHEAD:
                    if (r is not None) != arg[1]:
                        if r is not None and not arg[1]:
                            self._merge(r[1])
                        pc += 1
                        continue
                elif r is not None:
                    self._merge(r[1])
                    pos = r[0]
                    pc += 1
                    continue
            # Failure: backtrack.
            while True:
                if not stack:
                    self.pc, self.pos = pc, pos
                    return None
                tpc, tpos, old = stack.pop()
                if tpc == -1:
                    slots[tpos] = old
                    continue
                pc, pos = tpc, tpos
                break

    def _merge(self, sub_slots: list[int]) -> None:
        slots = self.slots
        for i, v in enumerate(sub_slots):
            if v != -1 and v != slots[i]:
                self.stack.append((-1, i, slots[i]))
                slots[i] = v

    def _sub(self, prog: Program, pos: int, buf: str, eos: bool) -> Any:
        key = (id(prog), pos)
        cached = self.looks.get(key)
        if cached is not None:
            return cached[0]
        sub = Attempt(prog, pos, set(), self.looks)
        r = sub.run(buf, eos)
        if r is not LIVE:
            self.looks[key] = (r,)
        return r
