"""Loading, validating and compiling `response_template` dicts into immutable `Template`s."""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import regex

from . import _rx
from ._content import CONTENT_PARSERS, compile_processor, copy_value, is_dirty, validate_transform_strings
from ._scan import Delimiter, Watch, WatchList

logger = logging.getLogger("chatparse")

#: Seconds allowed to one `regex` module call on untrusted text (start anchors, lookbehinds).
REGEX_TIMEOUT = 1.0

_TOP_KEYS = {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}
_FIELD_KEYS = {
    "open",
    "open_pattern",
    "close",
    "close_pattern",
    "content",
    "content_args",
    "repeats",
    "join",
    "optional",
    "transform",
    "transform_each",
}


@dataclass(frozen=True, eq=False)
class Field:
    """One output field of a template (see `response-template.md` §2.2)."""

    name: str
    opener: Delimiter | None
    closer: Delimiter | None
    content: str
    content_args: dict
    repeats: bool
    join: str | None
    optional: bool
    transform: Any
    transform_each: bool
    dirty: bool
    watch: WatchList = field(repr=False)
    #: JSON-aware closing (`content_args.close_outside_strings` or `close_after_value`, D17): the
    #: string delimiters, or None.
    string_guard: tuple[tuple[str, str], ...] | None = None
    #: The quote characters of string literals for the guard (`'` too for `python-call-list`).
    string_quotes: str = '"'
    #: `content_args.close_after_value`: the region also closes after its first bracketed value.
    value_close: bool = False
    #: `process_field` compiled for this field (`_content.compile_processor`), or None.
    process: Any = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class Template:
    """A validated, compiled `response_template`. Build with `load_response_template`."""

    spec: dict
    defaults: dict
    fields: dict[str, Field]
    implicit: str | None
    anchor_re: Any
    anchor_literals: list[str] | None
    watch: WatchList = field(repr=False)
    #: Whether the start-anchor search runs with a time limit (a pattern not proven cheap).
    anchor_guarded: bool = True
    #: The start anchor when it is one literal that no proper prefix of it also ends
    #: (`_borderless`): its occurrences never overlap, so the last of the leftmost non-overlapping
    #: matches is its last occurrence, found by `str.rfind` from the end (a server's prompt is
    #: searched once per request; a long conversation's prompt is tens of kilobytes). Else None.
    anchor_last: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # A template pickles as the spec it was compiled from (`datasets` workers,
        # multiprocessing) and is compiled again on load: its compiled parts are private, and in
        # the compiled build (`mypyc`) they are native objects that do not pickle.
        return (load_response_template, (self.spec,))

    def regex_guards(self) -> list[tuple[str, str, bool]]:
        """Every `regex` module pattern this template runs over text, as `(where, pattern,
        guarded)`: `guarded` when the call has a time limit because `_rx.backtrack_bound` could
        not prove the pattern's cost per position bounded (see `_rx.SAFE_STEPS`)."""
        from ._content import guarded

        out = [("start_anchor", self.anchor_re.pattern, self.anchor_guarded)]
        for name, f in self.fields.items():
            for key, d in (("open_pattern", f.opener), ("close_pattern", f.closer)):
                if d is None or d.literals is not None:
                    continue
                for src, g in _rx.lookbehinds(d.prog):
                    out.append((f"{name}.{key} lookbehind", src, g))
            tag = f.content_args.get("tag_pattern") if f.content == "xml-inline" else None
            if isinstance(tag, str):
                out.append((f"{name}.content_args.tag_pattern", tag, guarded(tag, regex.DOTALL)))
            delims = f.content_args.get("string_delims") if f.content == "json" else None
            for pair in delims if isinstance(delims, list) else []:
                if (
                    isinstance(pair, (list, tuple))
                    and len(pair) == 2
                    and all(isinstance(x, str) for x in pair)
                ):
                    src = regex.escape(pair[0]) + r"(.*?)" + regex.escape(pair[1])
                    out.append((f"{name}.content_args.string_delims", src, guarded(src, regex.DOTALL)))
        return out

    def truncate_past_last_anchor(self, text: str) -> str:
        """The part of `text` after the last start-anchor match (non-overlapping, leftmost)."""
        last = self.anchor_last
        if last is not None:
            i = text.rfind(last)
            if i >= 0:
                return text[i + len(last) :]
            return self._anchor_missing(text)
        last_end = None
        try:
            if self.anchor_guarded:
                for m in self.anchor_re.finditer(text, timeout=REGEX_TIMEOUT):
                    last_end = m.end()
            else:
                for m in self.anchor_re.finditer(text):
                    last_end = m.end()
        except TimeoutError as e:
            raise ValueError(
                f"response_template: start anchor search timed out after {REGEX_TIMEOUT}s on the prefix"
            ) from e
        if last_end is None:
            return self._anchor_missing(text)
        return text[last_end:]

    def _anchor_missing(self, text: str) -> str:
        kind = "start_anchor" if self.anchor_literals is not None else "start_anchor_pattern"
        logger.info(
            f"response_template defines {kind} but the anchor was not found "
            "in the prefix; the parser will process the entire prefix instead."
        )
        return text


def _compile_delimiter(scope: str, spec: dict, literal_key: str, pattern_key: str) -> Delimiter | None:
    if literal_key in spec and pattern_key in spec:
        raise ValueError(f"{scope}: cannot specify both '{literal_key}' and '{pattern_key}'")
    if literal_key in spec:
        raw = spec[literal_key]
        if isinstance(raw, str):
            literals = [raw]
        elif isinstance(raw, list):
            if not raw:
                raise ValueError(f"{scope}: '{literal_key}' list must contain at least one literal")
            if not all(isinstance(s, str) for s in raw):
                raise ValueError(f"{scope}: '{literal_key}' list must contain only strings")
            literals = list(dict.fromkeys(raw))
        else:
            raise ValueError(
                f"{scope}: '{literal_key}' must be a string or list of strings, got {type(raw).__name__}"
            )
        if any(s == "" for s in literals):
            raise ValueError(f"{scope}: '{literal_key}' literals cannot be empty strings")
        ordered = sorted(literals, key=len, reverse=True)
        d = Delimiter("|".join(regex.escape(s) for s in ordered), literals, f"{scope}: '{literal_key}'")
        d.module_re = regex.compile(d.source, regex.DOTALL)
        d.match_re = _rx.match_only(d.source, regex.DOTALL)
        return d
    if pattern_key in spec:
        given = spec[pattern_key]
        # (the `regex` module's own forms must match as the interpreter does: `_rx.module_safe`)
        src = _rx.module_safe(given) if isinstance(given, str) else given
        try:
            compiled = regex.compile(src, regex.DOTALL)
        except (regex.error, TypeError, OverflowError) as e:
            raise ValueError(f"{scope}: invalid {pattern_key} regex: {e}") from e
        except RecursionError as e:
            raise ValueError(f"{scope}: invalid {pattern_key} regex: nested too deeply") from e
        try:
            d = Delimiter(src, None, f"{scope}: '{pattern_key}'")
        except _rx.UnsupportedPattern as e:
            raise ValueError(f"{scope}: {pattern_key} {given!r} uses {e}") from e
        except RecursionError as e:
            raise ValueError(f"{scope}: {pattern_key} is nested too deeply") from e
        d.module_re = compiled
        d.match_re = _rx.match_only(src, regex.DOTALL)
        return d
    return None


def _build_field(name: str, spec: Any) -> tuple[Field, dict]:
    scope = f"Field '{name}'"
    if not isinstance(spec, dict):
        raise ValueError(f"{scope} must be a dict")
    if unknown := set(spec) - _FIELD_KEYS:
        raise ValueError(f"{scope}: unknown keys {sorted(unknown)}")
    content = spec.get("content", "text")
    if not isinstance(content, str) or content not in CONTENT_PARSERS:
        raise ValueError(f"{scope}: unknown content parser '{content}'. Available: {sorted(CONTENT_PARSERS)}")
    opener = _compile_delimiter(scope, spec, "open", "open_pattern")
    closer = _compile_delimiter(scope, spec, "close", "close_pattern")
    join = spec.get("join")
    if join is not None and not isinstance(join, str):
        raise ValueError(f"{scope}: 'join' must be a string, got {type(join).__name__}")
    if join is not None and not spec.get("repeats", False):
        raise ValueError(f"{scope}: 'join' requires 'repeats': true")
    transform = spec.get("transform")
    transform_each = spec.get("transform_each", False)
    if not isinstance(transform_each, bool):
        raise ValueError(f"{scope}: transform_each must be a bool, got {type(transform_each).__name__}")
    if transform_each and transform is None:
        raise ValueError(f"{scope}: transform_each is set but no transform was provided")
    if transform is not None:
        validate_transform_strings(scope, transform)
    else:
        names: set[str] = set()
        for d in (opener, closer):
            if d is not None and d.literals is None:
                names |= set(d.module_re.groupindex)
        if names:
            raise ValueError(
                f"{scope}: open_pattern/close_pattern declares named group(s) "
                f"{sorted(names)}, but the field has no 'transform'. Named captures "
                f"are only surfaced through a 'transform' template (where they appear "
                f"alongside 'content'). Either add a 'transform' that uses the captures, or "
                f"remove the named groups from the pattern."
            )
    content_args = spec.get("content_args", {})
    if not isinstance(content_args, dict):
        raise ValueError(f"{scope}: 'content_args' must be a dict, got {type(content_args).__name__}")
    guard = None
    value_close = bool(content_args.get("close_after_value"))
    if value_close and opener is None:
        raise ValueError(f"{scope}: 'close_after_value' needs an explicit field (an opener)")
    if value_close and closer is None:
        raise ValueError(f"{scope}: 'close_after_value' needs a closer ('close' or 'close_pattern')")
    if content_args.get("close_outside_strings") or value_close:
        key = "close_after_value" if value_close else "close_outside_strings"
        if content not in ("json", "python-call-list"):
            raise ValueError(f"{scope}: '{key}' needs content 'json' or 'python-call-list', got '{content}'")
        delims = content_args.get("string_delims", []) if content == "json" else []
        if not isinstance(delims, list) or not all(
            isinstance(d, (list, tuple)) and len(d) == 2 and all(isinstance(x, str) and x for x in d)
            for d in delims
        ):
            raise ValueError(f"{scope}: 'string_delims' must be a list of [open, close] non-empty strings")
        guard = tuple((o, c) for o, c in delims)
    transform = copy_value(transform)
    content_args = copy_value(content_args)
    f = Field(
        name=name,
        opener=opener,
        closer=closer,
        content=content,
        content_args=content_args,
        repeats=bool(spec.get("repeats", False)),
        join=join,
        optional=bool(spec.get("optional", True)),
        transform=transform,
        transform_each=transform_each,
        dirty=is_dirty(content, content_args),
        watch=WatchList([Watch(False, name, closer)] if closer is not None else []),
        string_guard=guard,
        string_quotes="\"'" if content == "python-call-list" else '"',
        value_close=value_close,
        process=compile_processor(name, content, content_args, transform, transform_each),
    )
    return f, spec


#: How deeply a template's values (defaults, transforms, content_args) may nest.
MAX_NESTING = 64


def _check_nesting(spec: Any) -> None:
    """Reject values nested deeper than MAX_NESTING (iteratively: no RecursionError), naming where."""
    stack: list[tuple[Any, str, int]] = [(spec, "response_template", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ValueError(f"{where} is nested more than {MAX_NESTING} levels deep")
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}" if depth < 4 else where, depth + 1) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, where, depth + 1) for v in value)


def _compile(spec: Any) -> Template:
    if not isinstance(spec, dict):
        raise ValueError(f"response_template must be a dict, got {type(spec).__name__}")
    _check_nesting(spec)
    version = spec.get("version", 1)
    if version != 1:
        raise ValueError(f"Unsupported response_template version: {version}")
    if unknown := set(spec) - _TOP_KEYS:
        raise ValueError(f"Unknown keys in response_template: {sorted(unknown)}")
    if not isinstance(spec.get("defaults", {}), dict):
        raise ValueError("response_template.defaults must be a dict")
    fields_raw = spec.get("fields", {})
    if not isinstance(fields_raw, dict) or not fields_raw:
        raise ValueError("response_template.fields must be a non-empty dict")
    fields = {name: _build_field(name, raw)[0] for name, raw in fields_raw.items()}
    implicit = [name for name, f in fields.items() if f.opener is None]
    if len(implicit) > 1:
        raise ValueError(
            "At most one field may omit 'open'/'open_pattern' (that field becomes the "
            f"implicit-open / leftover sink). Found: {', '.join(implicit)}"
        )
    anchor = _compile_delimiter("response_template", spec, "start_anchor", "start_anchor_pattern")
    if anchor is None:
        raise ValueError("response_template must define 'start_anchor' or 'start_anchor_pattern'.")
    defaults = copy_value(spec.get("defaults", {}))
    implicit_name = implicit[0] if implicit else None
    entries: list[Watch] = [Watch(True, n, f.opener) for n, f in fields.items() if f.opener is not None]
    if implicit_name is not None and fields[implicit_name].closer is not None:
        closer = fields[implicit_name].closer
        assert closer is not None
        entries.append(Watch(False, implicit_name, closer))
    return Template(
        spec=copy_value(spec),
        defaults=defaults,
        fields=fields,
        implicit=implicit_name,
        anchor_re=anchor.module_re,
        anchor_literals=anchor.literals,
        watch=WatchList(entries),
        anchor_guarded=anchor.literals is None and not _rx.is_proven_cheap(anchor.source, regex.DOTALL),
        anchor_last=(
            anchor.literals[0]
            if anchor.literals is not None and len(anchor.literals) == 1 and _borderless(anchor.literals[0])
            else None
        ),
    )


def _borderless(s: str) -> bool:
    """Whether no proper non-empty prefix of `s` is also a suffix of it (then no two occurrences
    of `s` in a text overlap)."""
    return all(s[:k] != s[len(s) - k :] for k in range(1, len(s)))


def _compile_guarded(spec: Any) -> Template:
    try:
        return _compile(spec)
    except RecursionError as e:
        raise ValueError("response_template is nested too deeply") from e


_CACHE: OrderedDict[str, Template] = OrderedDict()
_CACHE_SIZE = 128


def load_response_template(spec: dict | Template) -> Template:
    """Validate and compile a `response_template` dict (a `Template` is returned unchanged).

    Raises `ValueError` naming the field and key for every problem (same messages as
    transformers 5.24.0 where the reference has one). Compiled templates are cached by content,
    so calling this (or constructing parsers) repeatedly with the same dict is cheap.

    >>> t = load_response_template({"start_anchor": "A", "fields": {"content": {}}})
    >>> t.implicit
    'content'
    """
    if isinstance(spec, Template):
        return spec
    try:
        key = json.dumps(spec, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return _compile_guarded(spec)
    t = _CACHE.get(key)
    if t is None:
        t = _compile_guarded(spec)
        _CACHE[key] = t
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return t
