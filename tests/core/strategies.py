"""Hypothesis strategies for response templates, texts and chunkings.

Reusable by any test module:

* `templates()` – random valid templates within the `response_template` format (v1).
* `texts_for(template)` / `prefixes_for(template)` – texts built from the template's own vocabulary.
* `chunkings(text, delimiters=())` – a strategy of chunk lists that concatenate to `text`;
  `all_chunkings(text, delimiters)` is the deterministic list used for catalog cases.
* `template_cases()` – a composite drawing ``(template, prefix, text)``.
* `template_literals(template)` / `vocabulary(template)` – plain helpers.

Generated templates avoid the one shape the reference cannot handle at all: an opener and a
closer that can both match the empty string (the reference loops forever, defect D5).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable

import regex
from hypothesis import strategies as st

# --------------------------------------------------------------------------- vocabulary

#: small alphabet so that delimiters of different fields collide and overlap often
_DELIM_ATOMS = ["<", ">", "/", "a", "b", "x", "|", "[", "]", "END", "t", "｜", "é"]
#: ready-made marker-like literals (shared prefixes, self-overlapping pairs)
_MARKERS = [
    "<a>",
    "</a>",
    "<ab>",
    "<a",
    "abcd",
    "b",
    "END",
    "ENDX",
    "<|t|>",
    "<|t|>x",
    "[X]",
    "[/X]",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<｜end｜>",
    "::",
    "\n\n",
]

WHITESPACE = [" ", "\n", "\t", "\u00a0", "\u3000", "  \n", "\r\n", " \u2003 "]
UNICODE = [
    "e\u0301",
    "n\u0303o",
    "😀",
    "👩\u200d💻",
    "🇫🇷",
    "東京",
    "思考",
    "مرحبا",
    "שלום",
    "\u202eRTL\u202c",
    "Zürich",
    "ß",
    "\ufeff",
]
WORDS = [
    "hello",
    "x",
    "yy",
    "Paris",
    "the answer",
    "1",
    "42",
    "-3.5",
    "true",
    "null",
    "a",
    "b",
    "q",
    "z",
    "c",
]
JSON_FRAGMENTS = [
    '{"a": 1}',
    '{"name": "f", "arguments": {"x": 1}}',
    '[{"name": "f", "arguments": {}}]',
    '{"name": "g", "arguments": {"s": "Zürich 😀", "n": [1, 2.5, null, true]}}',
    "[]",
    "{}",
    '"str"',
    "1.5e3",
    "null",
    '{"a": [1, 2',
    '{"unterminated',
    '{"a": "\\u00e9\\n"}',
    "{a: 1}",
    '{"x": NaN}',
]

_EXAMPLES: dict[str, list[str]] = {}


def _key(template: dict) -> str:
    return json.dumps(template, sort_keys=True, ensure_ascii=False)


def _remember(template: dict, examples: Iterable[str]) -> None:
    # assignment (not accumulation): the same template must always give the same vocabulary,
    # or hypothesis sees inconsistent data generation
    _EXAMPLES[_key(template)] = sorted({e for e in examples if e})


def _as_list(v) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else [x for x in v if isinstance(x, str)]


_ESCAPES = {"s": " ", "n": "\n", "t": "\t", "d": "1", "w": "a", "r": "\r"}


def pattern_literals(pattern: str) -> list[str]:
    """Literal runs of a regex source (heuristic, for building texts).

    Character classes, group headers and quantifiers end a run; ``\\s``/``\\n``/``\\d``/``\\w``
    contribute a sample character.  E.g. ``\\s*<tool_call>\\s*<function=(?P<n>[^>]+)>`` gives
    ``[" ", "<tool_call>", " ", "<function=", ">"]``.
    """
    runs: list[str] = []
    cur = ""
    i = 0
    n = len(pattern)

    def flush():
        nonlocal cur
        if cur:
            runs.append(cur)
        cur = ""

    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d in _ESCAPES:
                flush()
                runs.append(_ESCAPES[d])
            elif d.isalnum():
                flush()
            else:
                cur += d
            i += 2
            continue
        if c == "[":
            flush()
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            flush()
            if pattern.startswith("(?P<", i):
                i = pattern.index(">", i) + 1
            elif pattern.startswith("(?P=", i):
                i = pattern.index(")", i) + 1
            elif pattern.startswith("(?<=", i) or pattern.startswith("(?<!", i):
                i += 4
            elif pattern.startswith("(?", i):
                i += 3
            else:
                i += 1
            continue
        if c in "{":
            flush()
            j = pattern.find("}", i)
            i = j + 1 if j > 0 else i + 1
            continue
        if c in ")|^$.":
            flush()
            i += 1
            continue
        if c in "*+?":
            # a quantifier applies to the last character only
            if cur:
                last = cur[-1]
                cur = cur[:-1]
                flush()
                runs.append(last)
            i += 1
            continue
        cur += c
        i += 1
    flush()
    return runs


def template_literals(template: dict) -> list[str]:
    """Every literal delimiter of `template` plus the literal runs of its patterns."""
    out: list[str] = []
    out += _as_list(template.get("start_anchor"))
    if isinstance(template.get("start_anchor_pattern"), str):
        out += pattern_literals(template["start_anchor_pattern"])
    for spec in (template.get("fields") or {}).values():
        if not isinstance(spec, dict):
            continue
        for lit, pat in (("open", "open_pattern"), ("close", "close_pattern")):
            out += _as_list(spec.get(lit))
            if isinstance(spec.get(pat), str):
                out += pattern_literals(spec[pat])
        args = spec.get("content_args") or {}
        for pair in args.get("string_delims") or []:
            out += [x for x in pair if isinstance(x, str)]
        if isinstance(args.get("tag_pattern"), str):
            out += pattern_literals(args["tag_pattern"])
    seen: dict[str, None] = {}
    for s in out:
        if s:
            seen.setdefault(s, None)
    return list(seen)


def delimiter_strings(template: dict) -> list[str]:
    """Marker strings to split around: literal delimiters, pattern runs of length >= 2, examples."""
    lits = [s for s in template_literals(template) if len(s) >= 2 or not s.isspace()]
    return lits + [e for e in _EXAMPLES.get(_key(template), []) if e not in lits]


def vocabulary(template: dict) -> list[str]:
    """Pieces for texts: delimiters, their examples, proper prefixes and suffixes."""
    base = template_literals(template) + _EXAMPLES.get(_key(template), [])
    pieces: dict[str, None] = {}
    for s in base:
        pieces.setdefault(s, None)
        for k in range(1, len(s)):
            pieces.setdefault(s[:k], None)
            pieces.setdefault(s[k:], None)
    return list(pieces) or ["x"]


def texts_for(template: dict, *, max_pieces: int = 14) -> st.SearchStrategy[str]:
    """Texts assembled from the template's own vocabulary mixed with generic material."""
    base = template_literals(template) + _EXAMPLES.get(_key(template), []) or ["x"]
    vocab = vocabulary(template)
    json_pieces = JSON_FRAGMENTS + [json.dumps({"s": "a" + d + "b"}, ensure_ascii=False) for d in base[:6]]
    piece = st.one_of(
        st.sampled_from(base),
        st.sampled_from(base),
        st.sampled_from(vocab),
        st.sampled_from(WHITESPACE),
        st.sampled_from(WORDS),
        st.sampled_from(UNICODE),
        st.sampled_from(json_pieces),
        st.text(alphabet="ab<>/|x \n", max_size=3),
    )
    return st.lists(piece, max_size=max_pieces).map("".join)


def prefixes_for(template: dict) -> st.SearchStrategy[str]:
    """Prompt prefixes: empty, vocabulary text, or text + start anchor + vocabulary text."""
    anchors = _as_list(template.get("start_anchor")) + [
        e for e in _EXAMPLES.get(_key(template) + "#anchor", [])
    ]
    body = texts_for(template, max_pieces=4)
    with_anchor = (
        st.tuples(st.sampled_from(WORDS + [""]), st.sampled_from(anchors), body).map("".join)
        if anchors
        else body
    )
    return st.one_of(st.just(""), body, with_anchor, with_anchor)


# --------------------------------------------------------------------------- chunkings

FIXED_SIZES = (2, 3, 5, 7, 13)


def _split_at(text: str, cuts: Iterable[int]) -> list[str]:
    pts = sorted({c for c in cuts if 0 < c < len(text)})
    out, last = [], 0
    for p in pts:
        out.append(text[last:p])
        last = p
    out.append(text[last:])
    return out


def marker_cuts(text: str, delimiters: Iterable[str]) -> list[int]:
    """Cut points at -1, 0, +1 around the start and the end of every delimiter occurrence."""
    cuts: set[int] = set()
    for d in delimiters:
        if not d:
            continue
        i = text.find(d)
        while i >= 0:
            for p in (i - 1, i, i + 1, i + len(d) - 1, i + len(d), i + len(d) + 1):
                cuts.add(p)
            i = text.find(d, i + 1)
    return sorted(cuts)


def all_chunkings(
    text: str, delimiters: Iterable[str] = (), *, seeds: Iterable[int] = (1, 2, 3)
) -> list[tuple[str, list[str]]]:
    """Deterministic named chunkings: one, 1-char, fixed sizes, marker ±1 cuts, markers atomic, seeded random."""
    delimiters = [d for d in delimiters if d]
    out: list[tuple[str, list[str]]] = [("one", [text]), ("char", list(text) or [""])]
    for k in FIXED_SIZES:
        out.append((f"fixed{k}", [text[i : i + k] for i in range(0, len(text), k)] or [""]))
    if delimiters:
        out.append(("marker±1", _split_at(text, marker_cuts(text, delimiters))))
        atomic: set[int] = set()
        for d in delimiters:
            i = text.find(d)
            while i >= 0:
                atomic.update((i, i + len(d)))
                i = text.find(d, i + 1)
        out.append(("markers-atomic", _split_at(text, atomic)))
    for seed in seeds:
        rng = random.Random(seed)
        cuts = [i for i in range(1, len(text)) if rng.random() < 0.3]
        out.append((f"rand{seed}", _split_at(text, cuts)))
    return out


def chunkings(text: str, delimiters: Iterable[str] = ()) -> st.SearchStrategy[list[str]]:
    """A strategy of chunk lists whose concatenation is `text`.

    Mixes 1-char, fixed sizes 2/3/5/7/13, splits at ±1 around every delimiter occurrence, and
    random splits (which may include empty chunks).
    """
    delimiters = [d for d in delimiters if d]
    named = [c for _, c in all_chunkings(text, delimiters, seeds=())]
    n = len(text)
    random_split = st.lists(st.integers(0, n), max_size=max(1, min(n, 40))).map(
        lambda cuts: _split_at(text, cuts)
    )

    def with_empties(chunks: list[str]) -> st.SearchStrategy[list[str]]:
        return st.lists(st.integers(0, len(chunks)), max_size=3).map(
            lambda idx: [c for i, ch in enumerate(chunks) for c in ([""] if i in idx else []) + [ch]]
        )

    return st.one_of(st.sampled_from(named), random_split, random_split.flatmap(with_empties))


# --------------------------------------------------------------------------- templates

_FIELD_NAMES = ["thinking", "content", "tool_calls", "a", "b", "zz"]


@st.composite
def literal_delims(draw) -> tuple[str | list[str], list[str]]:
    """A literal delimiter (string or list) -> (spec value, examples)."""

    def one():
        return st.one_of(
            st.sampled_from(_MARKERS),
            st.lists(st.sampled_from(_DELIM_ATOMS), min_size=1, max_size=4).map("".join),
        )

    kind = draw(st.sampled_from(["str", "str", "list", "overlap", "shared"]))
    if kind == "str":
        s = draw(one())
        return s, [s]
    if kind == "list":
        lst = draw(st.lists(one(), min_size=1, max_size=3, unique=True))
        return lst, lst
    if kind == "overlap":
        # self-overlapping alternatives (one occurs inside another, not as its prefix): D3
        big = draw(st.sampled_from(["abcd", "<|t|>", "ENDX", "</a>"]))
        k = draw(st.integers(1, len(big) - 1))
        small = big[k : k + draw(st.integers(1, len(big) - k))]
        lst = [big, small] if draw(st.booleans()) else [small, big]
        return lst, [big, small]
    # shared prefixes: ["END", "ENDX"] (can_extend)
    base = draw(st.sampled_from(["END", "<a", "[X", "<|t|>"]))
    ext = base + draw(st.sampled_from(["X", ">", "]", "x"]))
    lst = [base, ext] if draw(st.booleans()) else [ext, base]
    return lst, lst


def _esc(s: str) -> str:
    return regex.escape(s)


@st.composite
def regex_delims(draw, *, allow_empty: bool, allow_groups: bool) -> tuple[str, list[str], bool, list[str]]:
    """A regex delimiter from a small safe grammar.

    Returns ``(pattern, examples, can_match_empty, named_groups)``.
    """
    lit_a = draw(st.sampled_from(_MARKERS))
    lit_b = draw(st.sampled_from(_MARKERS))
    forms = [
        "lit",
        "ws_lit",
        "lit_ws",
        "ws_plus_lit",
        "class",
        "opt_tail",
        "alt",
        "alt_overlap",
        "lazy",
        "greedy",
        "lookahead_after",
        "neg_lookahead",
        "caret_lit",
        "lookbehind",
        "unbounded_prefix",
    ]
    if allow_groups:
        forms += ["named", "named"]
    if allow_empty:
        forms += ["caret_alt", "lookahead_only", "lit_or_caret"]
    form = draw(st.sampled_from(forms))
    A, B = _esc(lit_a), _esc(lit_b)
    if form == "lit":
        return A, [lit_a], False, []
    if form == "ws_lit":
        return r"\s*" + A, [lit_a, "\n" + lit_a, " \u00a0" + lit_a], False, []
    if form == "lit_ws":
        return A + r"\s*", [lit_a, lit_a + "\n\n"], False, []
    if form == "ws_plus_lit":
        return r"\s+" + A, [" " + lit_a, "\n\t" + lit_a], False, []
    if form == "class":
        return A + r"[xy0-9]" + B, [lit_a + "x" + lit_b, lit_a + "7" + lit_b], False, []
    if form == "opt_tail":
        return A + r"(?:" + B + r")?", [lit_a, lit_a + lit_b], False, []
    if form == "alt":
        return A + "|" + B, [lit_a, lit_b], False, []
    if form == "alt_overlap":
        return "abcd|b" if draw(st.booleans()) else "b|abcd", ["abcd", "b"], False, []
    if form == "lazy":
        return A + r"[^<\n]{0,8}?" + B, [lit_a + lit_b, lit_a + "yy" + lit_b], False, []
    if form == "greedy":
        return A + r"(?:x|y)*" + B, [lit_a + lit_b, lit_a + "xyx" + lit_b], False, []
    if form == "lookahead_after":
        return A + r"(?=" + B + ")", [lit_a + lit_b], False, []
    if form == "neg_lookahead":
        return A + r"(?!" + B + ")", [lit_a, lit_a + "q"], False, []
    if form == "caret_lit":
        return "^" + A, [lit_a], False, []
    if form == "lookbehind":
        return r"(?<=[a-z ])" + A, ["x" + lit_a, " " + lit_a], False, []
    if form == "unbounded_prefix":
        return r"(?:" + A + r")?[^<]*" + B, [lit_a + "xx" + lit_b, "yy" + lit_b], False, []
    if form == "named":
        return (
            A + r"(?P<name>[a-z_.]{1,8})" + B,
            [lit_a + "f" + lit_b, lit_a + "get.w" + lit_b],
            False,
            ["name"],
        )
    if form == "caret_alt":
        return r"(?:^|" + A + ")", [lit_a], True, []
    if form == "lit_or_caret":
        return A + r"\s*|^", [lit_a, lit_a + " "], True, []
    # lookahead only: zero-width
    return r"(?=" + A + ")", [lit_a], True, []


@st.composite
def _delim(draw, *, allow_empty: bool, allow_groups: bool):
    """-> (key kind 'lit'|'pat', value, examples, can_be_empty, groups)"""
    if draw(st.integers(0, 9)) < 5:
        v, ex = draw(literal_delims())
        return "lit", v, ex, False, []
    p, ex, empty, groups = draw(regex_delims(allow_empty=allow_empty, allow_groups=allow_groups))
    return "pat", p, ex, empty, groups


@st.composite
def templates(draw, *, max_fields: int = 4) -> dict:
    """Random valid response templates (version 1) that the reference can load.

    Covers literal and list delimiters with shared prefixes and self-overlapping alternatives,
    regex delimiters (``\\s*``/``\\s+``, classes, optional tails, alternations, lazy/greedy loops,
    named groups used by a transform, ``^`` alternatives, lookaheads), an implicit field or a
    null sink, `repeats`/`join`, `optional`, `text`/`json` content and transforms.  Never both a
    zero-width-capable opener and a zero-width-capable closer (D5).
    """
    n = draw(st.integers(1, max_fields))
    names = draw(st.lists(st.sampled_from(_FIELD_NAMES), min_size=n, max_size=n, unique=True))
    has_implicit = draw(st.booleans())
    implicit = draw(st.sampled_from(names)) if has_implicit else None
    # only one side (openers or closers) may contain zero-width-capable delimiters (D5)
    empty_side = draw(st.sampled_from(["none", "none", "open", "close"]))
    fields: dict[str, dict] = {}
    examples: list[str] = []
    for name in names:
        spec: dict = {}
        groups: list[str] = []
        if name != implicit:
            kind, v, ex, _, g = draw(_delim(allow_empty=empty_side == "open", allow_groups=True))
            spec["open" if kind == "lit" else "open_pattern"] = v
            examples += ex
            groups += g
        if draw(st.integers(0, 9)) < 8:
            kind, v, ex, _, g = draw(_delim(allow_empty=empty_side == "close", allow_groups=True))
            spec["close" if kind == "lit" else "close_pattern"] = v
            examples += ex
            groups += g
        content = draw(st.sampled_from(["text"] * 12 + ["json"] * 3 + ["xml-inline", "int", "bool"]))
        if content != "text":
            spec["content"] = content
        if content == "xml-inline":
            spec["content_args"] = {
                "tag_pattern": draw(
                    st.sampled_from(
                        [
                            r"<(?P<key>\w+)>(?P<value>[^<]*)</(?P=key)>",
                            r"<(?P<key>\w+)>(?:v=(?P<value>[^<]*))?</(?P=key)>",
                        ]
                    )
                ),
                **({"value_parser": {"name": "text"}} if draw(st.booleans()) else {}),
            }
            examples += ["<k>v</k>", "<k>v=1</k><j></j>"]
        elif content == "json" and draw(st.integers(0, 3)) == 2:
            spec["content_args"] = {"allow_non_json": True}
        elif content == "text" and draw(st.integers(0, 4)) == 3:
            spec["content_args"] = {"strip": False}
        if draw(st.integers(0, 2)) == 1:
            spec["repeats"] = True
            if draw(st.booleans()) and content in ("text",):
                spec["join"] = draw(st.sampled_from(["", "|", "\n\n"]))
        if draw(st.integers(0, 24)) == 13:
            spec["optional"] = False
        if groups or draw(st.integers(0, 5)) == 4:
            tr: dict = {"v": "{content}"}
            for g in dict.fromkeys(groups):
                tr[g] = "{" + g + "}"
            if draw(st.booleans()):
                tr = {
                    "type": "function",
                    "function": {"name": tr.get("name", "lit"), "arguments": "{content}"},
                }
            spec["transform"] = tr
        fields[name] = spec
    template: dict = {}
    if draw(st.integers(0, 3)) > 0:
        defaults: dict = {"role": "assistant"}
        if draw(st.integers(0, 5)) == 3:
            defaults[draw(st.sampled_from(names))] = draw(st.sampled_from(["", "x", [], None]))
        template["defaults"] = defaults
    anchor_kind = draw(st.sampled_from(["lit", "lit", "list", "pat"]))
    anchor_examples: list[str] = []
    if anchor_kind == "lit":
        template["start_anchor"] = draw(
            st.sampled_from(["S", "<|im_start|>assistant\n", "Assistant:", "<a>"])
        )
    elif anchor_kind == "list":
        template["start_anchor"] = draw(
            st.sampled_from([["<A></think>", "<A>"], ["aa", "a"], ["<|turn>model\n", "<tool_response|>"]])
        )
    else:
        template["start_anchor_pattern"] = r"<\|start\|>(?:assistant|model)\n?"
        anchor_examples = ["<|start|>assistant\n", "<|start|>model"]
    template["fields"] = fields
    _remember(template, examples)
    _EXAMPLES[_key(template) + "#anchor"] = sorted(set(anchor_examples))
    return template


def zero_width_capable(template: dict) -> tuple[bool, bool]:
    """(some opener can match empty, some closer can match empty), probed on sample strings."""
    probes = ["", "q", "ab", "\n", "x<a>y"] + template_literals(template)

    def can_empty(p: str) -> bool:
        try:
            rx = regex.compile(p, regex.DOTALL)
        except regex.error:
            return False
        for s in probes:
            for i in range(len(s) + 1):
                m = rx.match(s, i)
                if m is not None and m.end() == i:
                    return True
        return False

    o = c = False
    for spec in template.get("fields", {}).values():
        if isinstance(spec.get("open_pattern"), str) and can_empty(spec["open_pattern"]):
            o = True
        if isinstance(spec.get("close_pattern"), str) and can_empty(spec["close_pattern"]):
            c = True
    return o, c


@st.composite
def template_cases(draw, templates_strategy=None) -> tuple[dict, str, str]:
    """Draw ``(template, prefix, text)`` with prefix and text from the template's vocabulary."""
    template = draw(templates_strategy if templates_strategy is not None else templates())
    prefix = draw(prefixes_for(template))
    text = draw(texts_for(template))
    return template, prefix, text


@st.composite
def chunked_cases(draw, templates_strategy=None) -> tuple[dict, str, str, list[str]]:
    """``(template, prefix, text, chunks)``."""
    template, prefix, text = draw(template_cases(templates_strategy))
    chunks = draw(chunkings(text, delimiter_strings(template)))
    return template, prefix, text, chunks
