"""Event types emitted by `ResponseParser` (plain dicts, typed for readers and type checkers)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union  # noqa: UP035


class _RegionOpenRequired(TypedDict):
    type: Literal["region_open"]
    field: str
    start: int
    end: int


class RegionOpen(_RegionOpenRequired, total=False):
    """A region started. Explicit regions: `start`/`end` span the opener and `captures` holds its
    named groups; the implicit region: zero-width at its first character, no `captures`."""

    captures: dict[str, str]


class RegionChunk(TypedDict):
    """Raw text of the open region. `dirty` is True when the field's value is not the text itself
    (structured parsers, text wrappers): render it as raw bytes, use the close value."""

    type: Literal["region_chunk"]
    field: str
    text: str
    dirty: bool


class RegionClose(TypedDict):
    """A region ended with a parsed `value` (a copy: mutating it does not touch the message).
    `start`/`end` span the closer (zero-width when an opener or the end of stream ended it);
    `complete` is False when a region that has a closer was ended by the end of the stream;
    `input_text[body_start:body_end]` is the region's raw body (what the content parser saw)."""

    type: Literal["region_close"]
    field: str
    value: Any
    start: int
    end: int
    complete: bool
    body_start: int
    body_end: int


class RegionMalformed(TypedDict):
    """A region's content could not be parsed; `error` is the exception, and
    `input_text[body_start:body_end]` the body it came from. Nothing was stored and parsing went on
    after the region."""

    type: Literal["region_malformed"]
    field: str
    start: int
    end: int
    error: Exception
    body_start: int
    body_end: int


#: Any event. (`Union` rather than `|`: this alias is evaluated at import on Python 3.10.)
Event = Union[RegionOpen, RegionChunk, RegionClose, RegionMalformed]  # noqa: UP007
