"""Content parsers and transforms: turn the text of a closed region into a field value.

This is a port of transformers 5.24.0 `utils/chat_parsing/content_parsers.py`. For every input the
reference accepts, every function here returns an equal value; where the reference raises a
`ValueError`, the same message is raised. The deliberate differences are:

* Extensions from transformers.js (`response-template.md` §2.10): `text` accepts `strip_prefix` /
  `strip_suffix`, `json` accepts `prefix` / `suffix`.
* chatparse extensions (keys the reference ignores): `xml-inline` `unescape_keys`, `json_body` and
  `type_parsers`, `json` `single_key_objects`, `python-call-list` `brackets: false` (calls without
  the surrounding list); see `docs/compatibility.md`.
* Hardening: only `ValueError`, `TypeError` and `KeyError` (an undefined transform placeholder, as in
  the reference) leave a parser or a transform. Cases where the reference leaks another exception
  type, or returns a value nobody asked for, become a `ValueError` instead:

  - `xml-inline` with a `value` group that did not take part in a match and a `value_parser`
    (defect D13: the reference crashes inside the `value_parser` with `AttributeError`); without a
    `value_parser` the value is `None`, as in the reference;
  - an invalid `tag_pattern` regex (`regex.error` in the reference);
  - `json` input nested too deeply for `json.loads` (`RecursionError`) or with an integer longer than
    Python's digit limit: a parse failure like any other (so `allow_non_json` applies);
  - content_args of the wrong type (`AttributeError` / `TypeError` deep inside), an unknown parser
    name in `parse_content` or a `value_parser` (`KeyError`), a transform nested too deeply;
  - every `regex` call that runs a user-supplied or region-length-dependent pattern over region text
    has a time limit (`REGEX_TIMEOUT`); running out raises `ValueError` naming the parser and arg.
    A pattern whose cost per position `_rx.backtrack_bound` proves small (`guarded` is False: no
    unbounded repeat, at most `_rx.SAFE_STEPS` steps) runs without one: its scan is linear anyway,
    and a time limit costs a few microseconds per call. An xml-inline `tag_pattern` that is not
    proven so may still scan one body without it: `tag_scan_proof` bounds a scan's work by the
    body's length and the number of occurrences of the pattern's leading literal in it, and a body
    whose bound is at most `_rx.SAFE_STEPS` per character runs unguarded (the catalog's Qwen3 XML
    and DSML calls; a hostile body with many unclosed openers keeps the limit). Such a pattern's
    lazy `(?P<value>.*?)` is scanned in a form that skips, in one possessive run, the characters
    where what follows the value cannot begin (`skipping_value`: the same matches, less work).

* Values are never shared: transform literals are rebuilt, and a placeholder whose container value
  overlaps one already placed in the same result is deep-copied, so no two places in a result are
  the same object (the reference returns looked-up objects by reference).

The python-call-list grammar uses fixed, linear-time patterns, so it needs no time limit.
"""

from __future__ import annotations

import functools
import html
import json
import json.scanner
import math
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import regex

__all__ = [
    "CONTENT_PARSERS",
    "REGEX_TIMEOUT",
    "STREAMABLE_PARSERS",
    "FieldLike",
    "apply_transform",
    "compile_processor",
    "compile_transform",
    "copy_value",
    "is_dirty",
    "parse_content",
    "process_field",
    "validate_transform_strings",
]

#: Seconds any single `regex` call over region text may run before the parse fails with `ValueError`.
#: Read at call time, so tests (and embedders) may change it.
REGEX_TIMEOUT: float = 1.0


class FieldLike(Protocol):
    """The attributes of a compiled template field that `process_field` reads."""

    @property
    def name(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def content_args(self) -> Any: ...

    @property
    def transform(self) -> Any: ...

    @property
    def transform_each(self) -> bool: ...


@functools.lru_cache(maxsize=128)
def _compile(pattern: str, flags: int) -> Any:
    return regex.compile(pattern, flags)


@functools.lru_cache(maxsize=256)
def guarded(pattern: str, flags: int) -> bool:
    """Whether a `regex` call of `pattern` over region text runs with the time limit: unless
    `_rx.is_proven_cheap` proves a bounded cost per position (so a scan is linear in the text)."""
    from ._rx import is_proven_cheap

    return not is_proven_cheap(pattern, flags)


#: Bodies a tag pattern scanned with the time limit (`tag_scan_proof` did not cover them); the
#: tests count them.
TIMED_SCANS = [0]


@functools.lru_cache(maxsize=256)
def tag_scan_proof(pattern: str, flags: int) -> tuple[str, int, int, int, int, int] | None:
    """A per-body bound on the work of one `findall` of a tag pattern `guarded` refuses, or None.

    The result `(lead, overlap, c, f, tail, _rx.SAFE_STEPS)` says: a scan of a text of n
    characters in which the pattern's leading literal `lead` occurs at most `occ` times (`overlap`
    x `text.count(lead)`: `count` skips overlapping occurrences, so a lead that overlaps itself
    counts `len(lead)` for each) makes at most `len(lead) * (n + 1) + occ * (c + f * n) + tail *
    (n + occ)` character tests of a backtracking matcher (`body_within_bound` compares that with `_rx.SAFE_STEPS` per
    character, the bound a pattern proven cheap meets everywhere). Why:

    * A match attempt at a position where `lead` does not occur fails within `len(lead)` tests.
    * The pattern is `lead`, then a sequence of items each either bounded (`_rx`'s steps and ways:
      `backtrack_bound`'s counts) or an unbounded run of one atom. A run is *forced* when what
      follows it must begin with a character the atom cannot match: at every length but the longest
      the next character is in the atom, so the continuation fails within `pre` tests (the steps of
      the continuation up to its first character-consuming item), and only one length goes on. An
      attempt enters such a run once per way of the items before it (`ways`), and it costs at most
      `(1 + pre) * (n + 1)` there.
    * At most one run is *free* (not forced), and everything after it (its continuation X) is
      bounded: `S` steps at each of its at most n + 1 lengths, entered once per way before it. When
      the free run is a lazy `.*?` (DOTALL) and X matches at the end of any text (no lookbehind, no
      assertion about the previous character, and X matches the empty string), an attempt that
      reaches the run always succeeds: it tries lengths only up to its match's value end, so over
      the scan (matches do not overlap) it costs `S * (n + occ)` in all (`tail`), and the items
      before it are never re-entered. Otherwise each attempt may try every length: `(1 + S) * ways`
      per character (in `f`).

    So a body with few occurrences of the lead scans in time linear in its length without a time
    limit; a body with many (a hostile line of `<parameter=` openers without `>`: each attempt
    reads to the line end) is scanned under the limit, as before."""
    from ._rx import (
        _CAP,
        ATOMS,
        SAFE_STEPS,
        Op,
        _inner,
        _Parser,
        _seq_edge,
        _steps,
        _ways,
        nullable,
    )

    try:
        seq = _flat_top(_Parser(pattern, flags).parse())
    except Exception:  # a pattern the scanner's parser does not take: no proof
        return None
    j = 0
    while j < len(seq) and seq[j].op is Op.LIT:
        j += 1
    lead = "".join(str(x.args[0]) for x in seq[:j])
    if not lead:
        return None
    overlap = len(lead) if any(lead[:k] == lead[-k:] for k in range(1, len(lead))) else 1
    c, f, ways = 0, 0, 1
    for i in range(j, len(seq)):
        x = seq[i]
        if x.op is Op.REP and x.args[1] is None:
            atom = x.kids[0]
            if atom.op not in ATOMS:
                return None
            rest = seq[i + 1 :]
            edge = _seq_edge(rest)
            if edge is not None and all(_apart(atom, e) for e in edge):
                k = 0
                while rest[k].op in (Op.ASSERT, Op.LOOK, Op.EMPTY) or nullable(rest[k]):
                    k += 1
                pre = _steps(rest[: k + 1], False)
                if pre >= _CAP:
                    return None
                c, f = c + ways * (1 + pre), f + ways * (1 + pre)
                continue
            s = _steps(rest, False, True)
            if s >= _CAP:
                return None
            if x.args[2] == "lazy" and atom.op is Op.ANY and atom.args[0] and _ends_anywhere(rest):
                return lead, overlap, c, f, s + 1, SAFE_STEPS
            c, f = c + ways * (1 + s), f + ways * (1 + s)
            return lead, overlap, c, f, 0, SAFE_STEPS
        inner, w = _inner(x, False), _ways(x, False)
        if inner >= _CAP or w >= _CAP:
            return None
        c, ways = c + ways * inner, min(_CAP, ways * w)
    return lead, overlap, c + ways, f, 0, SAFE_STEPS


_SIMPLE_SET = regex.compile(r"\[[^\^\\\]\[\-][^\\\]\[\-]*\]")


def _apart(a: Any, b: Any) -> bool:
    """Whether no character matches both atoms (`_rx._disjoint`), cheaply where that can be told
    cheaply: a literal or a class listing its characters (`["']`) is tested character by
    character, `.` shares every character, and a common character (space, a letter, a digit, ...)
    matching both is an answer; only two classes that share none of those go to `_rx._disjoint`,
    which decides over every code point (~30 ms a pair, once: it is cached)."""
    from ._rx import Op, _atom_matches, _disjoint

    for x, y in ((a, b), (b, a)):
        if x.op is Op.LIT:
            return not _atom_matches(y, x.args[0])
        if x.op is Op.CLS and _SIMPLE_SET.fullmatch(x.args[0]) and not x.args[1] & regex.IGNORECASE:
            return not any(_atom_matches(y, ch) for ch in x.args[0][1:-1])
    if a.op is Op.ANY or b.op is Op.ANY:
        return False  # (each class here matches some character other than a line break)
    if any(_atom_matches(a, ch) and _atom_matches(b, ch) for ch in _COMMON):
        return False
    return bool(_disjoint(a, b))


_COMMON = " \n\ta0_-.,:;\"'<>/=()[]{}|"


def _flat_top(node: Any) -> list[Any]:
    from ._rx import _flat

    return _flat(node, [])


def _ends_anywhere(rest: list[Any]) -> bool:
    """Whether the sequence `rest` matches at the end of any text: it reads nothing before its
    position (no lookbehind, no assertion about the previous character) and matches the empty
    string there (`_at_end`)."""
    from ._rx import Op

    stack = list(rest)
    while stack:
        node = stack.pop()
        if node.op is Op.LOOK and not node.args[0]:
            return False
        if node.op is Op.ASSERT and node.args[0] not in ("eos", "eol", "Z"):
            return False
        stack.extend(node.kids)
    return all(_at_end(x) for x in rest)


def _at_end(node: Any) -> bool:
    """Whether `node` (no lookbehind, no assertion but the end-of-text ones) matches at the end of
    a text. Exact: nothing is left to consume, so it must match the empty string, and every
    end-of-text assertion holds there."""
    from ._rx import ATOMS, Op

    op = node.op
    if op in ATOMS:
        return False
    if op is Op.EMPTY or op is Op.ASSERT:
        return True
    if op is Op.LOOK:
        return _at_end(node.kids[0]) != bool(node.args[1])
    if op is Op.CAT:
        return all(_at_end(k) for k in node.kids)
    if op is Op.ALT:
        return any(_at_end(k) for k in node.kids)
    if op is Op.REP:
        return node.args[0] == 0 or _at_end(node.kids[0])
    return _at_end(node.kids[0])  # group, atomic


_NO, _AT_END, _ANYWHERE = 0, 1, 2  # where a pattern node may match without consuming


def _starts(node: Any) -> tuple[list[Any], int]:
    r"""The atoms one of which every match of `node` that consumes begins with, and where it may
    match without consuming: never (`_NO`), only at the end of the text (`_AT_END`: through `\Z`)
    or anywhere. Conservative: a lookaround or another assertion is taken to hold anywhere."""
    from ._rx import ATOMS, Op

    op = node.op
    if op in ATOMS:
        return [node], _NO
    if op is Op.ASSERT:
        return [], _AT_END if node.args[0] == "Z" else _ANYWHERE
    if op is Op.LOOK or op is Op.EMPTY:
        return [], _ANYWHERE
    if op is Op.CAT:
        atoms: list[Any] = []
        where = _ANYWHERE  # (the empty prefix)
        for kid in node.kids:
            more, kid_where = _starts(kid)
            atoms += more
            if kid_where == _NO:
                return atoms, _NO
            where = min(where, kid_where)
        return atoms, where
    if op is Op.ALT:
        atoms, where = [], _NO
        for kid in node.kids:
            more, kid_where = _starts(kid)
            atoms += more
            where = max(where, kid_where)
        return atoms, where
    if op is Op.REP:
        atoms, where = _starts(node.kids[0])
        return atoms, _ANYWHERE if node.args[0] == 0 else where
    return _starts(node.kids[0])  # group, atomic


@functools.lru_cache(maxsize=256)
def skipping_value(pattern: str, flags: int) -> str | None:
    r"""`pattern` with its lazy value `(?P<value>.*?)` (DOTALL) written to skip, in one possessive
    run, the characters where what follows it cannot match; None when that does not apply.

    The value of `.*?X` ends at the first position, from its start, where X matches (X's first
    way there), trying every position in turn: the `regex` module's lazy loop then tries X at each
    character (~45 ns a character on a Qwen3 XML body, most of a closed call's scan). When every
    match of X begins with one of a few literal characters E, or matches nothing only at the end
    of the text (`\Z`), X cannot match at any other position, so the value
    `[^E]*+(?:[E][^E]*+)*?` tries exactly the positions that can succeed, in the same order (each
    character of E, then the end of the text): the same first success, the same groups (the
    groups are non-capturing), and, when no position succeeds, the same failure back into what
    precedes the value. It also does no more work at a position than `.*?` does (a skipped position
    costs one character test instead of one and a failed X), so `tag_scan_proof`'s bound for the
    pattern holds for the rewritten one (counted in tests/core/test_tag_scan.py)."""
    from ._rx import Op, _Parser

    marker = "(?P<value>.*?)"
    at = pattern.find(marker)
    if at < 0 or pattern.find(marker, at + 1) >= 0 or (at and pattern[at - 1] == "\\"):
        return None
    try:
        tree = _Parser(pattern, flags).parse()
    except Exception:  # a pattern the scanner's parser does not take
        return None
    if tree.op is not Op.CAT:
        return None
    kids = tree.kids
    i = next((i for i, k in enumerate(kids) if k.op is Op.GROUP and k.args[0] == "value"), -1)
    if i < 0:
        return None
    run = kids[i].kids[0]
    if (
        run.op is not Op.REP
        or run.args != (0, None, "lazy")
        or run.kids[0].op is not Op.ANY
        or not run.kids[0].args[0]
    ):
        return None
    # The marker's text must be that group: the text before it parses as the i items before the
    # group and the text after it as the rest (it is not inside a class, a group or a comment).
    try:
        before = _Parser(pattern[:at], flags).parse()
        after = _Parser(pattern[at + len(marker) :], flags).parse()
    except Exception:
        return None
    if _top_count(before) != i or _top_count(after) != len(kids) - i - 1:
        return None
    atoms, where = _starts(_cat(kids[i + 1 :]))
    if where == _ANYWHERE or not atoms or any(a.op is not Op.LIT for a in atoms):
        return None
    chars = "".join(sorted({f"\\U{ord(a.args[0]):08x}" for a in atoms}))
    value = f"(?P<value>[^{chars}]*+(?:[{chars}][^{chars}]*+)*?)"
    return pattern[:at] + value + pattern[at + len(marker) :]


def _scanning(pattern: str, compiled: Any) -> Any:
    """The compiled pattern a body is scanned with: `skipping_value`'s form when it applies."""
    faster = skipping_value(pattern, regex.DOTALL)
    if faster is None:
        return compiled
    try:
        return _compile(faster, regex.DOTALL)
    except regex.error:  # pragma: no cover - the rewrite is valid whenever the pattern is
        return compiled


def _top_count(node: Any) -> int:
    """How many items a parsed pattern's top-level sequence has."""
    from ._rx import Op

    return len(node.kids) if node.op is Op.CAT else 0 if node.op is Op.EMPTY else 1


def _cat(kids: list[Any]) -> Any:
    from ._rx import Node, Op

    return Node(Op.CAT, kids=list(kids))


def body_within_bound(proof: tuple[str, int, int, int, int, int], text: str) -> bool:
    """Whether `tag_scan_proof`'s bound for `text` is at most `_rx.SAFE_STEPS` character tests per
    character: then the scan runs without the time limit. (The bound rearranged:
    `occ * (c + tail + f * n) <= (SAFE_STEPS - len(lead) - tail) * (n + 1)`.)"""
    lead, overlap, c, f, tail, safe = proof
    occ = text.count(lead)
    if not occ:
        return True  # (no attempt gets past the lead: len(lead) tests per position)
    n = len(text)
    return occ * overlap * (c + tail + f * n) <= (safe - len(lead) - tail) * (n + 1)


def short_body(proof: tuple[str, int, int, int, int, int]) -> int:
    """The longest body that is within `tag_scan_proof`'s bound however many occurrences of the
    lead it holds (-1 when none is): a body of n characters holds at most `n // len(lead)` of them,
    so `occ * (c + tail + f * n) <= room * n` holds for every such count once
    `overlap * (c + tail + f * n) <= len(lead) * room` (`room = SAFE_STEPS - len(lead) - tail`)."""
    lead, overlap, c, f, tail, safe = proof
    k0, room = c + tail, safe - len(lead) - tail
    spare = len(lead) * room - overlap * k0
    if spare < 0:
        return -1
    return spare // (overlap * f) if f else 1 << 62


def _timed_out(what: str) -> ValueError:
    return ValueError(f"{what}: regex timed out after {REGEX_TIMEOUT} s on the region text")


def _sub(pattern: Any, repl: Callable[[Any], str], text: str, what: str) -> str:
    if not guarded(pattern.pattern, pattern.flags):
        return str(pattern.sub(repl, text))
    try:
        return str(pattern.sub(repl, text, timeout=REGEX_TIMEOUT))
    except TimeoutError:
        raise _timed_out(what) from None


def _optional_str(args: dict[str, Any], key: str, parser: str) -> str:
    value = args.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{parser}: '{key}' content_arg must be a string, got {type(value).__name__}")
    return value


def copy_value(value: Any) -> Any:
    """Deep copy of nested dicts and lists (iterative: parsed JSON can nest up to the recursion limit)."""
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            if isinstance(item, (dict, list)):
                child: Any = {} if isinstance(item, dict) else []
                stack.append((item, child))
                item = child
            if isinstance(target, dict):
                target[key] = item
            else:
                target.append(item)
    return root


# --------------------------------------------------------------------------------------------------
# Scalar parsers


def _strip(text: str, args: dict[str, Any]) -> str:
    return text.strip() if args.get("strip", True) else text


def _text(text: str, args: dict[str, Any]) -> str:
    out = _strip(text, args)
    prefix = _optional_str(args, "strip_prefix", "text")
    suffix = _optional_str(args, "strip_suffix", "text")
    if not prefix and not suffix:
        return out
    if prefix and out.startswith(prefix):
        out = out[len(prefix) :]
    if suffix and out.endswith(suffix):
        out = out[: len(out) - len(suffix)]
    return _strip(out, args)


def _int(text: str, args: dict[str, Any]) -> int:
    return int(_strip(text, args))


def _float(text: str, args: dict[str, Any]) -> float:
    return float(_strip(text, args))


def _bool(text: str, args: dict[str, Any]) -> bool:
    return _strip(text, args).lower() in ("true", "1")


# --------------------------------------------------------------------------------------------------
# json

# Sentinel characters for lax-JSON string pre-extraction: ASCII control characters that should never
# appear in real model output.
_LAX_OPEN, _LAX_CLOSE = "\x01", "\x02"

# The first alternative swallows whole quoted strings (escapes included) and puts them back untouched,
# so that key-like text inside a string value is never rewritten. Only the second one is a bare key.
_UNQUOTED_KEY = regex.compile(r'"(?:\\.|[^"\\])*"|(?<=[{,])(\s*)(\w+)(\s*):')
# chatparse extension (`unquoted_keys: "lenient"`, D12): a key is any run of characters that are not
# JSON punctuation, so `{key with space: 1}` and `{Basic LLM Chain: {...}}` parse. The reference treats
# the string "lenient" as true and applies its own (word-only) rule, so templates stay loadable there.
_UNQUOTED_KEY_LENIENT = regex.compile(r'"(?:\\.|[^"\\])*"|(?<=[{,])(\s*)([^\s{}\[\]:,"][^{}\[\]:,"]*?)(\s*):')


def _quote_key(m: Any) -> str:
    if m.group(2) is None:
        return str(m.group(0))
    return f'{m.group(1)}"{m.group(2)}"{m.group(3)}:'


def _delimiter_pairs(string_delims: Any) -> list[tuple[str, str]]:
    # The reference unpacks `for open_d, close_d in string_delims`; accept exactly what that accepts.
    pairs: list[tuple[str, str]] = []
    try:
        for pair in string_delims:
            open_d, close_d = pair
            if not isinstance(open_d, str) or not isinstance(close_d, str):
                raise TypeError
            pairs.append((open_d, close_d))
    except (TypeError, ValueError):
        raise ValueError(
            f"json: 'string_delims' content_arg must be a list of [open, close] string pairs, got {string_delims!r}"
        ) from None
    return pairs


def _json(text: str, args: dict[str, Any]) -> Any:
    """JSON with optional dialect knobs for model quirks.

    `args`: `unquoted_keys` (quote bare-identifier keys), `string_delims` (`[[open, close], ...]`
    custom string markers, contents taken verbatim), `allow_non_json` (return the stripped text when
    parsing fails), `prefix` / `suffix` (transformers.js: text added around the region first),
    `single_key_objects` (chatparse: `[key_name, value_name]`, see :func:`_single_key_objects`).
    """
    prefix = _optional_str(args, "prefix", "json")
    suffix = _optional_str(args, "suffix", "json")
    if prefix or suffix:
        text = prefix + text + suffix
    string_delims = args.get("string_delims", [])
    unquoted_keys = args.get("unquoted_keys", False)

    if string_delims and (_LAX_OPEN in text or _LAX_CLOSE in text):
        raise ValueError(
            "json: input contains reserved sentinel characters (\\x01/\\x02); cannot parse safely."
        )

    working = text
    captured: list[str] = []
    if string_delims:

        def capture(m: Any) -> str:
            captured.append(m.group(1))
            return f"{_LAX_OPEN}{len(captured) - 1}{_LAX_CLOSE}"

        for open_d, close_d in _delimiter_pairs(string_delims):
            pattern = _compile(regex.escape(open_d) + r"(.*?)" + regex.escape(close_d), regex.DOTALL)
            working = _sub(pattern, capture, working, "json: string_delims")

    if unquoted_keys:
        pattern = _UNQUOTED_KEY_LENIENT if unquoted_keys == "lenient" else _UNQUOTED_KEY
        working = _sub(pattern, _quote_key, working, "json: unquoted_keys")

    for i, s in enumerate(captured):
        working = working.replace(f"{_LAX_OPEN}{i}{_LAX_CLOSE}", json.dumps(s))

    try:
        value = json.loads(working)
    except (ValueError, RecursionError) as e:
        # JSONDecodeError is a ValueError; so is an integer over Python's digit limit. RecursionError is
        # deep nesting. The reference only handles JSONDecodeError and lets the other two escape.
        if args.get("allow_non_json"):
            return _strip(text, args)
        if working == text:
            raise ValueError(
                f"json parser could not parse region as JSON.\nContent: {text!r}\nError: {e}"
            ) from e
        raise ValueError(
            f"json: could not parse after dialect transforms.\n"
            f"Original: {text!r}\nTransformed: {working!r}\nError: {e}"
        ) from e
    names = args.get("single_key_objects")
    return value if names is None else _single_key_objects(value, names, text)


def _single_key_objects(value: Any, names: Any, text: str) -> Any:
    """chatparse extension `single_key_objects: [key_name, value_name]`: each object of a parsed list
    (or the parsed object itself) holds exactly one key, which becomes a value of its own.

    Formats that write the function name as the only key of an object (Apertus:
    `[{"get_weather": {"city": "Paris"}}]`) cannot be reshaped by a transform, which never reads a
    key; with `["name", "arguments"]` the list becomes `[{"name": "get_weather", "arguments":
    {"city": "Paris"}}]`, ready for `transform_each`.

    >>> _single_key_objects([{"f": {"a": 1}}], ["name", "arguments"], "")
    [{'name': 'f', 'arguments': {'a': 1}}]
    """
    if (
        not isinstance(names, (list, tuple))
        or len(names) != 2
        or not all(isinstance(n, str) and n for n in names)
        or names[0] == names[1]
    ):
        raise ValueError(
            f"json: 'single_key_objects' content_arg must be two different non-empty names "
            f'like ["name", "arguments"], got {names!r}'
        )
    key_name, value_name = names

    def convert(item: Any, where: str) -> dict[str, Any]:
        if not isinstance(item, dict) or len(item) != 1:
            shape = f"an object with {len(item)} keys" if isinstance(item, dict) else type(item).__name__
            raise ValueError(
                f"json: single_key_objects expects an object with exactly one key{where}, got {shape}.\n"
                f"Content: {text!r}"
            )
        ((key, inner),) = item.items()
        return {key_name: key, value_name: inner}

    if isinstance(value, list):
        return [convert(item, f" at list index {i}") for i, item in enumerate(value)]
    return convert(value, "")


# --------------------------------------------------------------------------------------------------
# xml-inline and kv-lines


def _sub_parse(raw: str, value_parser: Any, owner: str) -> Any:
    if value_parser is None:
        return raw
    if not isinstance(value_parser, dict):
        raise ValueError(
            f"{owner}: 'value_parser' content_arg must be a dict like "
            f'{{"name": "text", "args": {{}}}}, got {type(value_parser).__name__}'
        )
    return parse_content(raw, value_parser.get("name", "text"), value_parser.get("args", {}))


def _xml_inline(text: str, args: dict[str, Any]) -> dict[str, Any]:
    """Shallow XML-ish tags to a dict. `tag_pattern` must have named groups `key` and `value`;
    optional `value_parser` parses each value; `merge_duplicates` collects repeated keys in a list.
    chatparse extensions: `unescape_keys`, `type_parsers` (a value parser per text of the group `type`)."""
    tag_pattern = args.get("tag_pattern")
    if tag_pattern is None:
        raise ValueError("xml-inline: 'tag_pattern' content_arg is required")
    if not isinstance(tag_pattern, str):
        raise ValueError(
            f"xml-inline: 'tag_pattern' content_arg must be a string, got {type(tag_pattern).__name__}"
        )
    try:
        compiled = _scanning(tag_pattern, _compile(tag_pattern, regex.DOTALL))
    except regex.error as e:
        raise ValueError(f"xml-inline: invalid tag_pattern regex {tag_pattern!r}: {e}") from e
    value_parser = args.get("value_parser")
    merge = args.get("merge_duplicates", False)
    # chatparse extension: `unescape_keys: true` decodes XML/HTML character references in keys
    # (`q&amp;a` -> `q&a`), for formats that escape attribute values (Kimi K3 XTML).
    unescape_keys = args.get("unescape_keys", False)
    # chatparse extension: `type_parsers: {TYPE: value_parser}` picks the value parser of a match by
    # the text of its named group `type` (GigaChat 3.5's `string="false"`, K2 Horizon's
    # `<ifm|arg_type>integer</ifm|arg_type>`); a match without that group, or with a type not listed,
    # uses `value_parser`. The reference ignores the key (every value stays raw text).
    type_parsers = args.get("type_parsers")
    if type_parsers is not None and (
        not isinstance(type_parsers, dict) or not all(isinstance(v, dict) for v in type_parsers.values())
    ):
        raise ValueError(
            "xml-inline: 'type_parsers' content_arg must map type names to value parsers like "
            f'{{"false": {{"name": "json", "args": {{}}}}}}, got {type_parsers!r}'
        )

    # chatparse extension: `json_body: true` reads a body that is a JSON object (after stripping)
    # as the arguments themselves (DeepSeek DSML `<invoke name="f">{"a": 1}</invoke>`, accepted by
    # SGLang), and refuses a body that has text but no tag at all instead of returning `{}`.
    json_body = args.get("json_body", False)
    if json_body and text.strip().startswith("{"):
        try:
            body = json.loads(text.strip())
        except (ValueError, RecursionError) as e:
            raise ValueError(f"xml-inline: the body is not a JSON object ({e}).\nContent: {text!r}") from None
        if not isinstance(body, dict):
            raise ValueError(f"xml-inline: the body is not a JSON object.\nContent: {text!r}")
        return body

    # Collect all matches first: the time limit covers the whole scan, not the value parsers.
    guard = guarded(tag_pattern, regex.DOTALL)
    limit = _scan_limit(guard, tag_scan_proof(tag_pattern, regex.DOTALL) if guard else None, text)
    try:
        matches = list(compiled.finditer(text) if limit is None else compiled.finditer(text, timeout=limit))
    except TimeoutError:
        raise _timed_out(f"xml-inline: tag_pattern {tag_pattern!r}") from None
    if json_body and not matches and text.strip():
        raise ValueError(f"xml-inline: no tag in a body that is not empty.\nContent: {text!r}")

    out: dict[str, Any] = {}
    merged: set[str] = set()
    for m in matches:
        groups = m.groupdict()
        key = groups.get("key")
        if key is None:
            raise ValueError(f"xml-inline: tag_pattern must have a named group 'key'. Pattern: {tag_pattern}")
        raw = groups.get("value", "")
        if raw is None and value_parser is None:
            value = None  # the reference stores None for a group that did not take part
        elif raw is None:
            raise ValueError(
                f"xml-inline: the 'value' group of tag_pattern did not participate in the match for key "
                f"{key!r}. Pattern: {tag_pattern}"
            )
        else:
            parser = value_parser
            if type_parsers:
                kind = groups.get("type")
                if kind is not None and kind in type_parsers:
                    parser = type_parsers[kind]
            value = _sub_parse(raw, parser, "xml-inline")
        if unescape_keys:
            key = html.unescape(key)
        if key in out and merge:
            if key not in merged:
                out[key] = [out[key]]
                merged.add(key)
            out[key].append(value)
        else:
            out[key] = value
    return out


def _kv_lines(text: str, args: dict[str, Any]) -> dict[str, Any]:
    """Line-delimited `key<kv_sep>value` pairs to a dict."""
    line_sep = args.get("line_sep", "\n")
    kv_sep = args.get("kv_sep", ":")
    value_parser = args.get("value_parser")
    if not isinstance(line_sep, str):
        raise ValueError(f"kv-lines: 'line_sep' content_arg must be a string, got {type(line_sep).__name__}")

    out: dict[str, Any] = {}
    for line in text.split(line_sep):
        line = _strip(line, args)
        if not line:
            continue
        # Checked here, not up front: the reference never looks at kv_sep when every line is empty.
        if not isinstance(kv_sep, str):
            raise ValueError(f"kv-lines: 'kv_sep' content_arg must be a string, got {type(kv_sep).__name__}")
        if kv_sep not in line:
            continue
        k, v = line.split(kv_sep, 1)
        k, v = _strip(k, args), _strip(v, args)
        out[k] = _sub_parse(v, value_parser, "kv-lines")
    return out


# --------------------------------------------------------------------------------------------------
# python-call-list (strict 5.24 grammar, response-template.md §2.9)

_CALL_LIST_WHITESPACE = regex.compile(r"[ \t\n\r]*")
_CALL_LIST_NAME = regex.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-.][A-Za-z0-9_]+)*")
_CALL_LIST_NUMBER = regex.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_CALL_LIST_STRING = regex.compile(r"""'((?:[^'\\\n\r]|\\.)*)'|"((?:[^"\\\n\r]|\\.)*)\"""", flags=regex.DOTALL)
_CALL_LIST_UNICODE_ESCAPE = regex.compile(r"u([0-9a-fA-F]{4})")
_CALL_LIST_SURROGATE = regex.compile(r"[\ud800-\udfff]")
_CALL_LIST_LOW_SURROGATE = regex.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})")
_CALL_LIST_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_CALL_LIST_CONSTANTS: dict[str, Any] = {
    "True": True,
    "true": True,
    "False": False,
    "false": False,
    "None": None,
    "null": None,
}
_CALL_LIST_MAX_INTEGER = 2**53 - 1
_CALL_LIST_MAX_DEPTH = 100


def _python_call_list(text: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """`[get_weather(city="Paris"), ...]` to `[{"name": ..., "arguments": {...}}, ...]`."""
    position = 0

    def fail(message: str) -> NoReturn:
        raise ValueError(f"python-call-list: {message} at position {position}.\nContent: {text!r}")

    def skip_whitespace() -> None:
        nonlocal position
        position = _CALL_LIST_WHITESPACE.match(text, position).end()

    def at(char: str) -> bool:
        skip_whitespace()
        return text.startswith(char, position)

    def expect(char: str) -> None:
        nonlocal position
        if not at(char):
            fail(f"expected {char!r}")
        position += 1

    def items(close: str, item: Callable[[], Any]) -> list[Any]:
        nonlocal position
        out: list[Any] = []
        if at(close):
            position += 1
            return out
        while True:
            out.append(item())
            if at(close):
                position += 1
                return out
            expect(",")

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                fail(f"repeated name {key!r}")
            out[key] = value
        return out

    def string() -> str:
        nonlocal position
        match = _CALL_LIST_STRING.match(text, position)
        if match is None:
            fail("invalid string")
        body: str = match[1] if match[1] is not None else match[2]
        if _CALL_LIST_SURROGATE.search(body) is not None:
            fail("lone surrogate in the string starting")
        out: list[str] = []
        start = 0
        while (backslash := body.find("\\", start)) != -1:
            out.append(body[start:backslash])
            start = backslash + 2
            if body[backslash + 1] in _CALL_LIST_ESCAPES:
                out.append(_CALL_LIST_ESCAPES[body[backslash + 1]])
                continue
            escape = _CALL_LIST_UNICODE_ESCAPE.match(body, backslash + 1)
            if escape is None:
                fail(f"unsupported escape {body[backslash : backslash + 2]!r} in the string starting")
            code, start = int(escape[1], 16), escape.end()
            if 0xD800 <= code <= 0xDBFF and (low := _CALL_LIST_LOW_SURROGATE.match(body, start)) is not None:
                code, start = 0x10000 + ((code - 0xD800) << 10) + (int(low[1], 16) - 0xDC00), low.end()
            if 0xD800 <= code <= 0xDFFF:
                fail("lone surrogate escape in the string starting")
            out.append(chr(code))
        position = match.end()
        return "".join(out) + body[start:]

    def value(depth: int) -> Any:
        # `depth` is the number of lists and dicts that enclose this value.
        nonlocal position
        if at("'") or at('"'):
            return string()
        if at("[") or at("{"):
            if depth >= _CALL_LIST_MAX_DEPTH:
                fail(f"lists and dicts nested more than {_CALL_LIST_MAX_DEPTH} levels deep")
            position += 1
            if text[position - 1] == "[":
                return items("]", lambda: value(depth + 1))
            return unique(items("}", lambda: pair(depth + 1)))
        if (match := _CALL_LIST_NUMBER.match(text, position)) is not None:
            is_integer = match[1] is None and match[2] is None
            # Check the digit count first so that huge literals never reach `int()`.
            if is_integer and (len(match[0]) > 17 or abs(int(match[0])) > _CALL_LIST_MAX_INTEGER):
                fail("integer outside the range of -(2^53 - 1) to 2^53 - 1")
            if not is_integer and math.isinf(float(match[0])):
                fail("number too large")
            position = match.end()
            return int(match[0]) if is_integer else float(match[0])
        if (match := _CALL_LIST_NAME.match(text, position)) is not None and match[0] in _CALL_LIST_CONSTANTS:
            position = match.end()
            return _CALL_LIST_CONSTANTS[match[0]]
        fail("expected a string, number, list, dict, True, False or None")

    def pair(depth: int) -> tuple[str, Any]:
        if not (at("'") or at('"')):
            fail("dict keys must be strings")
        key = string()
        expect(":")
        return key, value(depth)

    def name(what: str) -> str:
        nonlocal position
        skip_whitespace()
        match = _CALL_LIST_NAME.match(text, position)
        if match is None:
            fail(f"expected {what}")
        position = match.end()
        return str(match[0])

    def argument() -> tuple[str, Any]:
        nonlocal position
        key = name("a keyword argument (positional arguments and trailing commas are not supported)")
        if not at("="):
            fail("expected '=' (positional arguments are not supported)")
        position += 1
        return key, value(0)

    def call() -> dict[str, Any]:
        function_name = name("a function name")
        expect("(")
        return {"name": function_name, "arguments": unique(items(")", argument))}

    brackets = args.get("brackets", True)
    if not isinstance(brackets, bool):
        raise ValueError(
            f"python-call-list: 'brackets' content_arg must be a bool, got {type(brackets).__name__}"
        )
    if not brackets:
        # chatparse extension: calls without the surrounding list, separated by a comma or a line
        # break (Olmo 3 writes one call per line inside `<function_calls>`).
        bare: list[dict[str, Any]] = []
        skip_whitespace()
        while position < len(text):
            bare.append(call())
            after = position
            skip_whitespace()
            if text.startswith(",", position):
                position += 1
                skip_whitespace()
                if position == len(text):
                    fail("expected a function name")
            elif position < len(text) and "\n" not in text[after:position]:
                fail("expected ',' or a line break between calls")
        return bare
    expect("[")
    calls = items("]", call)
    skip_whitespace()
    if position != len(text):
        fail("unexpected content after the closing ']'")
    return calls


# --------------------------------------------------------------------------------------------------
# Registry

CONTENT_PARSERS: dict[str, Callable[[str, dict[str, Any]], Any]] = {
    "text": _text,
    "int": _int,
    "float": _float,
    "bool": _bool,
    "json": _json,
    "xml-inline": _xml_inline,
    "kv-lines": _kv_lines,
    "python-call-list": _python_call_list,
}
"""Parser name -> `(text, content_args) -> value`. Structured parsers raise `ValueError` quoting the text."""

STREAMABLE_PARSERS = frozenset({"text", "int", "float", "bool"})
"""Parsers whose streamed chunks are pieces of the final value (modulo whitespace): `dirty=False`."""


def is_dirty(content: str, content_args: Any) -> bool:
    """Whether chunks streamed for a field with this parser differ from its final value.

    True for structured parsers (their value exists only at close) and for `text` with a non-empty
    `strip_prefix` / `strip_suffix` (the wrapper is streamed but cut from the value).

    >>> is_dirty("text", {}), is_dirty("json", {}), is_dirty("text", {"strip_prefix": "<r>"})
    (False, True, True)
    """
    if content not in STREAMABLE_PARSERS:
        return True
    if content == "text" and isinstance(content_args, dict):
        return bool(content_args.get("strip_prefix")) or bool(content_args.get("strip_suffix"))
    return False


def parse_content(text: str, name: Any, args: Any) -> Any:
    """Run the content parser `name` with `args` (a field's `content_args`) over `text`.

    >>> parse_content(' {"a": 1} ', "json", {})
    {'a': 1}

    Raises `ValueError` for text the parser rejects, an unknown parser name or malformed args.
    """
    parser = CONTENT_PARSERS.get(name) if isinstance(name, str) else None
    if parser is None:
        raise ValueError(f"unknown content parser {name!r}. Available: {sorted(CONTENT_PARSERS)}")
    if not isinstance(args, dict):
        raise ValueError(f"content_args for parser '{name}' must be a dict, got {type(args).__name__}")
    return parser(text, args)


# --------------------------------------------------------------------------------------------------
# Transforms

_PLACEHOLDER = regex.compile(r"\{(\w+(?:\.\w+)*)\}")


def _lookup(path: str, scope: dict[str, Any]) -> Any:
    root, *keys = path.split(".")
    if root not in scope:
        raise KeyError(f"transform placeholder '{{{path}}}' is not defined. Available: {sorted(scope)}")
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict):
            raise ValueError(
                f"transform placeholder '{{{path}}}' cannot index into {type(value).__name__} at '{key}'"
            )
        if key not in value:
            raise ValueError(
                f"transform placeholder '{{{path}}}' is missing key '{key}'. Available: {sorted(value)}"
            )
        value = value[key]
    return value


#: How deeply `apply_transform` and `validate_transform_strings` descend before "nested too deeply"
#: (a loaded template's transforms nest at most `_template.MAX_NESTING` levels). An explicit bound
#: rather than Python's recursion limit: compiled (mypyc) code does not count its native calls
#: against that limit, and both builds must give the same answer.
_MAX_TRANSFORM_DEPTH = 256


def _apply(transform: Any, scope: dict[str, Any], placed: list[tuple[str, ...]], depth: int) -> Any:
    if isinstance(transform, dict):
        if depth >= _MAX_TRANSFORM_DEPTH:
            raise RecursionError
        return {k: _apply(v, scope, placed, depth + 1) for k, v in transform.items()}
    if isinstance(transform, list):
        if depth >= _MAX_TRANSFORM_DEPTH:
            raise RecursionError
        return [_apply(v, scope, placed, depth + 1) for v in transform]
    if not isinstance(transform, str):
        return transform
    whole = _PLACEHOLDER.fullmatch(transform)
    if not whole:
        return transform
    path: str = whole.group(1)
    value = _lookup(path, scope)
    if isinstance(value, (dict, list)):
        # A container reached by a path that is a prefix of (or equal to, or below) one already placed
        # in this result would be shared by two places of the result: copy it.
        segments = tuple(path.split("."))
        if any(segments[: len(p)] == p or p[: len(segments)] == segments for p in placed):
            return copy_value(value)
        placed.append(segments)
    return value


def apply_transform(transform: Any, scope: dict[str, Any]) -> Any:
    """Rebuild `transform` with each whole-string placeholder `{name.key...}` replaced from `scope`.

    Dict keys are copied verbatim, dicts and lists rebuilt, other literals returned as they are.

    >>> apply_transform({"type": "function", "function": "{content}"}, {"content": {"name": "f"}})
    {'type': 'function', 'function': {'name': 'f'}}

    Raises `KeyError` for a root name missing from `scope` (as the reference), `ValueError` for a
    path that cannot be followed.
    """
    try:
        return _apply(transform, scope, [], 0)
    except RecursionError:
        raise ValueError("transform is nested too deeply") from None


def _validate(scope: str, transform: Any, depth: int) -> None:
    if isinstance(transform, (dict, list)):
        if depth >= _MAX_TRANSFORM_DEPTH:
            raise RecursionError
        for v in transform.values() if isinstance(transform, dict) else transform:
            _validate(scope, v, depth + 1)
        return
    if not isinstance(transform, str):
        return
    if _PLACEHOLDER.search(transform) and not _PLACEHOLDER.fullmatch(transform):
        raise ValueError(
            f"{scope}: transform string {transform!r} mixes a {{placeholder}} with literal text. "
            'Use either a whole-string placeholder (e.g. "{content}") or a plain literal; '
            "string interpolation is not supported."
        )


def validate_transform_strings(scope: str, transform: Any) -> None:
    """Reject (at template load time) a transform string that mixes a `{placeholder}` with other text.

    `scope` prefixes the error message, e.g. `"Field 'tool_calls'"`.
    """
    try:
        _validate(scope, transform, 0)
    except RecursionError:
        raise ValueError(f"{scope}: transform is nested too deeply") from None


# -- compiled value paths -----------------------------------------------------------------------
#
# `process_field` runs once per closed region; generically it walks the transform tree and matches
# every string against `_PLACEHOLDER` (5-10 us a tool call, more than the JSON parse). A field's
# value path is therefore compiled once at template load (`compile_processor`): the transform
# becomes one Python expression building the same containers, and a `json` field without dialect
# options parses with `json.loads` directly. Any failure re-runs the generic code, so errors
# (types and messages) are the generic ones; the compiled code has no side effects to undo.

_MAX_COMPILED_DEPTH = 24

_JSON_SCAN: Any = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # what `json.loads` runs
_JSON_WS = " \t\n\r"  # JSON whitespace: what `json.decoder.WHITESPACE` matches, around a value


def json_loads(text: str) -> Any:
    """`json.loads(text)` for a `str`, without its Python layers (`loads`, `decode`, `raw_decode`:
    ~0.5 us of the 1.3 a small call object costs): the same scanner on the same span. Any text it
    does not take whole goes to `json.loads`, which raises its own error for it. (The whitespace
    around the value is stripped with `str` methods: cheaper than `json`'s own `re` matches.)"""
    n = len(text)
    try:
        value, end = _JSON_SCAN(text, n - len(text.lstrip(_JSON_WS)))
    except StopIteration:
        return json.loads(text)
    if end != n and text[end:].strip(_JSON_WS):
        return json.loads(text)
    return value


#: content_args keys that do not change what the `json` parser returns (they steer the scanner)
_SCANNER_ARGS = frozenset({"close_outside_strings", "close_after_value"})


def compile_transform(transform: Any) -> Callable[[dict[str, Any]], Any] | None:
    """`apply_transform(transform, scope)` as one compiled function, or None when the transform
    places two related paths (one a prefix of the other: the generic code copies containers there)
    or nests too deeply.

    >>> compile_transform({"type": "function", "function": "{content}"})({"content": {"name": "f"}})
    {'type': 'function', 'function': {'name': 'f'}}
    """
    consts: dict[str, Any] = {}
    paths: list[tuple[str, ...]] = []

    def const(v: Any) -> str:
        name = f"_c{len(consts)}"
        consts[name] = v
        return name

    def gen(node: Any, depth: int) -> str | None:
        if depth > _MAX_COMPILED_DEPTH:
            return None
        if isinstance(node, dict):
            items = []
            for k, v in node.items():
                sub = gen(v, depth + 1)
                if sub is None:
                    return None
                items.append(f"{const(k)}: {sub}")
            return "{" + ", ".join(items) + "}"
        if isinstance(node, list):
            subs = [gen(v, depth + 1) for v in node]
            if any(x is None for x in subs):
                return None
            return "[" + ", ".join(subs) + "]"  # type: ignore[arg-type]
        if isinstance(node, str):
            whole = _PLACEHOLDER.fullmatch(node)
            if whole:
                path: str = whole.group(1)
                paths.append(tuple(path.split(".")))
                if "." in path:
                    return f"_lookup({const(path)}, scope)"
                return f"scope[{const(path)}]"
        return const(node)

    try:
        expr = gen(transform, 0)
    except RecursionError:  # pragma: no cover - bounded by _MAX_COMPILED_DEPTH
        return None
    if expr is None:
        return None
    for i, p in enumerate(paths):
        for q in paths[:i]:
            if p[: len(q)] == q or q[: len(p)] == p:
                return None
    src = f"def _compiled(scope):\n    try:\n        return {expr}\n    except KeyError:\n        return _slow(_t, scope)\n"
    namespace: dict[str, Any] = {"_lookup": _lookup, "_slow": apply_transform, "_t": transform, **consts}
    exec(src, namespace)  # noqa: S102 - source built above from constants' names only
    fn: Callable[[dict[str, Any]], Any] = namespace["_compiled"]
    return fn


def _plain_json(content: str, content_args: Any) -> bool:
    return content == "json" and isinstance(content_args, dict) and set(content_args) <= _SCANNER_ARGS


def _plain_xml_inline(content: str, content_args: Any) -> Callable[[str], dict[str, Any] | None] | None:
    """`_xml_inline` for a `tag_pattern` alone (no value parser or other option but `json_body`):
    the matches' raw values by key, or None for a body the generic code must take (a key group
    that did not take part: its error; a repeated key: the generic code's last value; with
    `json_body`, a body that is a JSON object or has text but no tag). The same scan, under the
    same time limit when neither the pattern's cost nor the body's (`tag_scan_proof`) is proven
    bounded. None when the arguments are not that plain case."""
    if content != "xml-inline" or not isinstance(content_args, dict):
        return None
    keys = set(content_args)
    if keys != {"tag_pattern"} and keys != {"tag_pattern", "json_body"}:
        return None
    pattern = content_args["tag_pattern"]
    if not isinstance(pattern, str):
        return None
    json_body = bool(content_args.get("json_body", False))
    try:
        compiled = _scanning(pattern, _compile(pattern, regex.DOTALL))
    except regex.error:
        return None
    if {"key", "value"} - set(compiled.groupindex):
        return None
    guard = guarded(pattern, regex.DOTALL)
    proof = tag_scan_proof(pattern, regex.DOTALL) if guard else None
    always = _always_set(pattern, ("key", "value"))
    what = f"xml-inline: tag_pattern {pattern!r}"
    if compiled.groups == 2 and compiled.groupindex == {"key": 1, "value": 2} and always:
        # `findall`'s own tuples are the `(key, value)` pairs (two groups, both always set: no
        # group that did not take part), so the dict is built from them at once; a repeated key
        # shows as fewer keys than pairs (`tags` below returns None for it: the generic code).
        pairs_of = compiled.findall
        # `body_within_bound`, inline (one call per closed call region), without counting the
        # lead in a body too short to hold enough of them (`short_body`)
        lit, overlap, c, f, tail, safe = proof if proof is not None else ("", 1, 0, 0, 0, 0)
        k0, room = c + tail, safe - len(lit) - tail
        short = short_body(proof) if proof is not None else -1

        def pairs_dict(text: str) -> dict[str, Any] | None:
            lead = text.lstrip() if json_body else ""
            if lead.startswith("{"):
                return None  # (`json_body`: the generic code reads the JSON object)
            try:
                n = len(text)
                if (
                    not guard
                    or n <= short
                    or (
                        proof is not None
                        and (not (occ := text.count(lit)) or occ * overlap * (k0 + f * n) <= room * (n + 1))
                    )
                ):
                    pairs = pairs_of(text)
                else:
                    TIMED_SCANS[0] += 1
                    pairs = pairs_of(text, timeout=REGEX_TIMEOUT)
            except TimeoutError:
                raise _timed_out(what) from None
            out = dict(pairs)
            if len(out) != len(pairs) or (not pairs and lead):
                return None
            return out

        return pairs_dict
    scan: Callable[[str, float | None], list[tuple[Any, Any]]]
    if guard and always:
        # Under the time limit, `findall` costs about half of `finditer` (the `regex` module
        # checks its clock per match, and more dearly per iterator step); its "" for a group that
        # did not take part cannot be told from an empty value, so only when both always do.
        findall = compiled.findall
        k, v = compiled.groupindex["key"] - 1, compiled.groupindex["value"] - 1

        def found(text: str, limit: float | None) -> list[tuple[Any, Any]]:
            # (no `timeout=None`: the keyword alone costs the `regex` module ~1 us a call)
            got = findall(text) if limit is None else findall(text, timeout=limit)
            return [(groups[k], groups[v]) for groups in got]

        scan = found
    else:
        finditer = compiled.finditer

        def matched(text: str, limit: float | None) -> list[tuple[Any, Any]]:
            got = finditer(text) if limit is None else finditer(text, timeout=limit)
            return [(m.group("key"), m.group("value")) for m in got]

        scan = matched

    def tags(text: str) -> dict[str, Any] | None:
        lead = text.lstrip() if json_body else ""
        if lead.startswith("{"):
            return None
        out: dict[str, Any] = {}
        try:
            pairs = scan(text, _scan_limit(guard, proof, text))
        except TimeoutError:
            raise _timed_out(what) from None
        if not pairs and lead:
            return None
        for key, value in pairs:
            if key is None or key in out:
                return None
            out[key] = value  # (None for a value group that did not take part, as there)
        return out

    return tags


def _scan_limit(guard: bool, proof: tuple[str, int, int, int, int, int] | None, text: str) -> float | None:
    """The time limit for a scan of `text` by a tag pattern: none when the pattern's cost is proven
    bounded (`guard` False) or the body's (`tag_scan_proof`), else `REGEX_TIMEOUT` (counted)."""
    if not guard or (proof is not None and body_within_bound(proof, text)):
        return None
    TIMED_SCANS[0] += 1
    return REGEX_TIMEOUT


def _always_set(pattern: str, names: tuple[str, ...]) -> bool:
    """Whether every match of `pattern` sets each group of `names`: each is reached from the top
    through sequences, groups and atomic groups only (no alternation, repeat or lookaround on the
    way), so it takes part in every match."""
    from ._rx import Op, _Parser

    try:
        tree = _Parser(pattern, regex.DOTALL).parse()
    except Exception:  # a pattern the scanner's parser does not take: say no
        return False
    found: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.op is Op.GROUP:
            if node.args[0] in names:
                found.add(node.args[0])
            stack.extend(node.kids)
        elif node.op is Op.CAT or node.op is Op.ATOMIC:
            stack.extend(node.kids)
    return found == set(names)


class CompiledProcessor:
    """`compile_processor`'s result: `fn(body, captures) -> value`. It pickles (and so does the
    template holding it) as the field description it is compiled from."""

    __slots__ = ("fn", "_args")

    def __init__(self, fn: Callable[[str, dict[str, Any]], Any], args: tuple) -> None:
        self.fn = fn
        self._args = args

    def __reduce__(self) -> tuple[Any, ...]:
        return (compile_processor, self._args)


def compile_processor(
    name: str, content: str, content_args: Any, transform: Any, transform_each: bool
) -> CompiledProcessor | None:
    """`process_field` for one field, compiled (see above), or None when only the generic path
    applies (`transform_each`, transforms `compile_transform` declines)."""
    fn = _compile_processor(content, content_args, transform, transform_each)
    if fn is None:
        return None
    return CompiledProcessor(fn, (name, content, content_args, transform, transform_each))


def _compile_processor(
    content: str, content_args: Any, transform: Any, transform_each: bool
) -> Callable[[str, dict[str, Any]], Any] | None:
    if transform_each:
        return None
    if content == "text" and isinstance(content_args, dict) and not content_args and transform is None:
        return lambda body, captures: body.strip()  # `_text` with no arguments
    compiled = compile_transform(transform) if transform is not None else None
    if transform is not None and compiled is None:
        return None
    plain = _plain_json(content, content_args)
    loads = json_loads
    tags = _plain_xml_inline(content, content_args)

    def parse(body: str) -> Any:
        if plain:
            try:
                return loads(body)
            except (ValueError, RecursionError):
                pass  # the generic parser raises its own error for the same text
        elif tags is not None:
            got = tags(body)
            if got is not None:
                return got
        return parse_content(body, content, content_args)

    if compiled is None:
        return lambda body, captures: parse(body)
    apply = compiled
    if tags is not None:
        # (the call objects of xml-inline templates: `parse` inline, one frame less per call)
        xml_tags = tags

        def xml_call(body: str, captures: dict[str, Any]) -> Any:
            value = xml_tags(body)
            if value is None:
                value = parse_content(body, content, content_args)
            return apply({**captures, "content": value})

        return xml_call
    if plain:
        # (the call objects of most templates: `parse` inline, one frame less per call)
        def plain_call(body: str, captures: dict[str, Any]) -> Any:
            try:
                value = loads(body)
            except (ValueError, RecursionError):
                value = parse_content(body, content, content_args)
            return apply({**captures, "content": value})

        return plain_call
    return lambda body, captures: apply({**captures, "content": parse(body)})


def process_field(body: str, field: FieldLike, captures: dict[str, Any]) -> Any:
    """Parse a closed region's `body` with the field's content parser, then apply its transform.

    With `transform_each`, the parsed value must be a list of dicts and the transform is applied to
    each element, with the element's keys (over the regex `captures`) as the scope; otherwise the
    scope is the captures plus `content` (the parsed value).
    """
    compiled = getattr(field, "process", None)
    if compiled is not None:
        return compiled.fn(body, captures)
    value = parse_content(body, field.content, field.content_args)
    if field.transform is None:
        return value
    if field.transform_each:
        if not isinstance(value, list):
            raise ValueError(
                f"Field '{field.name}': transform_each requires the parsed content to be a list, "
                f"got {type(value).__name__}."
            )
        out = []
        for item in value:
            if not isinstance(item, dict):
                raise ValueError(
                    f"Field '{field.name}': transform_each requires each list element to be a dict, "
                    f"got {type(item).__name__}."
                )
            out.append(apply_transform(field.transform, {**captures, **item}))
        return out
    return apply_transform(field.transform, {**captures, "content": value})
