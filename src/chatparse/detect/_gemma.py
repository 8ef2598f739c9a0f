"""Gemma 4 call payloads: a scanner that repairs the Gemma dialect to JSON (runtime-contract §3.1).

The dialect: `{key:<|"|>text<|"|>,n:3}`. Repairs: quote delimiters are canonicalised (`<|"|>`,
`<|“|>`, `<|”|>`, curly quotes and `"`; an opening run of three or more collapses, as does a
closing run), raw control characters inside strings are kept as string content (escaped in the
JSON), `=` is accepted for `:` in key position, bare keys and bare scalar values or array elements
are quoted (JSON numbers, `true`, `false` and `null` keep their type; a UUID is a string), and a
dangling string and missing `}`/`]` are closed at the end of the text (the scan then reports the
payload as not balanced).
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN_QUOTES = ('<|"|>', "<|“|>", "<|”|>")
_CURLY = ("“", "”")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")
_LITERALS = {"true": True, "false": False, "null": None}
_KEY_STOP = frozenset(':=,{}[]\n"“”')
_MAX_DEPTH = 128

#: The head of a bare call: `call:NAME{` or (offered names only) `NAME{`.
_HEAD = re.compile(r"(call:)?([A-Za-z_][\w.\-]*)[ \t]*(?=\{)")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.truncated = False

    def _ws(self, i: int) -> int:
        while i < self.n and self.s[i].isspace():
            i += 1
        return i

    def _quote(self, i: int) -> tuple[str, int] | None:
        """(delimiter class, length) of a quote delimiter at `i`."""
        s = self.s
        if s.startswith("<|", i):
            for q in _TOKEN_QUOTES:
                if s.startswith(q, i):
                    return "token", len(q)
            return None
        if i < self.n:
            if s[i] == '"':
                return "ascii", 1
            if s[i] in _CURLY:
                return "curly", 1
        return None

    def _closes(self, opener: str, i: int) -> int:
        """Length of a delimiter at `i` that closes a string opened with class `opener` (0: none)."""
        q = self._quote(i)
        if q is None:
            return 0
        if q[0] == opener or (opener == "curly" and q[0] == "ascii"):
            return q[1]
        return 0

    def _run(self, opener: str, i: int) -> tuple[int, int]:
        """(count, end) of a run of closing delimiters starting at `i`."""
        count = 0
        while (ln := self._closes(opener, i)) > 0:
            i += ln
            count += 1
        return count, i

    def string(self, i: int) -> tuple[str, int]:
        q = self._quote(i)
        assert q is not None
        opener, i = q[0], i + q[1]
        count, end = self._run(opener, i)
        if count >= 2:  # `"""text"""`: the opening run collapses (`""` stays an empty string)
            i = end
        start = i
        s = self.s
        while True:
            if i >= self.n:  # a dangling string is closed at the end
                self.truncated = True
                return self._text(opener, s[start:i]), i
            if opener == "ascii" and s[i] == "\\" and i + 1 < self.n:
                i += 2
                continue
            if self._closes(opener, i):
                _, end = self._run(opener, i)
                return self._text(opener, s[start:i]), end
            i += 1

    @staticmethod
    def _text(opener: str, raw: str) -> str:
        if opener != "ascii" or "\\" not in raw:
            return raw
        escaped = re.sub(r"[\x00-\x1f]", lambda m: f"\\u{ord(m.group()):04x}", raw)
        try:
            value = json.loads(f'"{escaped}"')
        except ValueError:
            return raw
        return value if isinstance(value, str) else raw

    def _bare(self, i: int, stops: str) -> tuple[Any, int, bool]:
        j = i
        while j < self.n and self.s[j] not in stops:
            j += 1
        text = self.s[i:j].strip()
        if j >= self.n:
            self.truncated = True
        if not text:
            if j >= self.n:
                return None, j, False
            raise ValueError(f"missing value at {i}")
        if "{" in text or "[" in text:
            raise ValueError(f"a bracket in a bare value at {i}")
        if _NUMBER.match(text):
            return json.loads(text), j, True
        if text in _LITERALS:
            return _LITERALS[text], j, True
        return text, j, True

    def value(self, i: int, stops: str, depth: int) -> tuple[Any, int, bool]:
        """(value, end, present): `present` is false when the text ended before a value began."""
        if depth > _MAX_DEPTH:
            raise ValueError("nested too deeply")
        i = self._ws(i)
        if i >= self.n:
            self.truncated = True
            return None, i, False
        c = self.s[i]
        if c == "{":
            obj, i = self.obj(i, depth + 1)
            return obj, i, True
        if c == "[":
            return *self.array(i, depth + 1), True
        if self._quote(i) is not None:
            return *self.string(i), True
        return self._bare(i, stops)

    def _key(self, i: int) -> tuple[str | None, int]:
        if self._quote(i) is not None:
            key, i = self.string(i)
            if i >= self.n:
                return None, i
        else:
            j = i
            while j < self.n and self.s[j] not in _KEY_STOP and not self.s.startswith("<|", j):
                j += 1
            key, i = self.s[i:j].strip(), j
            if i >= self.n:
                self.truncated = True
                return None, i
            if not key:
                raise ValueError(f"missing key at {i}")
        i = self._ws(i)
        if i >= self.n:
            self.truncated = True
            return None, i
        if self.s[i] not in ":=":
            raise ValueError(f"expected ':' after key {key!r}")
        return key, i + 1

    def obj(self, i: int, depth: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        i += 1
        while True:
            i = self._ws(i)
            if i >= self.n:
                self.truncated = True
                return out, i
            c = self.s[i]
            if c == "}":
                return out, i + 1
            if c == ",":
                i += 1
                continue
            key, i = self._key(i)
            if key is None:
                return out, i
            value, i, present = self.value(i, ",}]", depth)
            if present:
                out[key] = value
            i = self._ws(i)
            if i >= self.n:
                self.truncated = True
                return out, i
            if self.s[i] == ",":
                i += 1
            elif self.s[i] != "}":
                raise ValueError(f"expected ',' or '}}' at {i}")

    def array(self, i: int, depth: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        i += 1
        while True:
            i = self._ws(i)
            if i >= self.n:
                self.truncated = True
                return out, i
            c = self.s[i]
            if c == "]":
                return out, i + 1
            if c == ",":
                i += 1
                continue
            value, i, present = self.value(i, ",]}", depth)
            if present:
                out.append(value)
            i = self._ws(i)
            if i >= self.n:
                self.truncated = True
                return out, i
            if self.s[i] == ",":
                i += 1
            elif self.s[i] != "]":
                raise ValueError(f"expected ',' or ']' at {i}")


def scan(text: str, pos: int = 0) -> tuple[dict[str, Any], int, bool]:
    """Parse the Gemma-dialect object at `text[pos]` (a `{`): (arguments, end, balanced).

    `balanced` is false when a string, `}` or `]` had to be closed at the end of `text`.
    Raises ValueError when the text is not such an object.

    >>> scan('{city:<|"|>Paris<|"|>,days=3,id:1f173d33-aa}')
    ({'city': 'Paris', 'days': 3, 'id': '1f173d33-aa'}, 44, True)
    >>> scan('{a:<|"|>x')
    ({'a': 'x'}, 9, False)
    """
    if not text.startswith("{", pos):
        raise ValueError("a Gemma payload starts with '{'")
    sc = _Scanner(text)
    try:
        value, end = sc.obj(pos, 1)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return value, end, not sc.truncated


def repair(body: str) -> tuple[dict[str, Any], bool]:
    """The arguments of a whole payload `body` (surrounding whitespace allowed): (arguments, balanced)."""
    s = body.strip()
    value, end, balanced = scan(s)
    if s[end:].strip():
        raise ValueError("text after the payload")
    return value, balanced


def bare_calls(text: str, tool_names: tuple[str, ...] | list[str]) -> list[dict[str, Any]] | None:
    """The whole `text` as bare Gemma calls: `call:NAME{…}` or, for an offered NAME, `NAME{…}`.

    Each payload must scan as a balanced object; a call starts the output, directly follows the
    previous call (stripped special tokens) or starts a line.
    """
    s = text.strip()
    calls: list[dict[str, Any]] = []
    i = 0
    while i < len(s):
        m = _HEAD.match(s, i)
        if not m or (not m.group(1) and m.group(2) not in tool_names):
            return None
        try:
            args, end, balanced = scan(s, m.end())
        except ValueError:
            return None
        if not balanced:
            return None
        calls.append({"name": m.group(2), "arguments": args})
        j = end
        while j < len(s) and s[j].isspace():
            j += 1
        if j < len(s) and j > end and "\n" not in s[end:j]:
            return None
        i = j
    return calls or None
