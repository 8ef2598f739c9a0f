"""`TextStream`: the content or reasoning of a message, streamed as deltas that never need taking back.

Theory of operation
-------------------
The core strips a `text` field's value (`str.strip`) at close, but streams its chunks raw. A
`TextStream` commits text as soon as it is known to belong to the final string and holds the rest:

* a field with `join` (gpt-oss channels, Inkling): each region contributes its own value (stripped
  unless `strip: false`), regions are separated by `join`, exactly as the core's message;
* any other field (the usual single `content`/`thinking` region, or text before and after tool
  calls): regions are concatenated verbatim (the core keeps only the last region; canitoolcall and
  clients expect all of the text), and only the edges of the whole concatenation are stripped.

Leading whitespace is dropped while nothing has been committed; trailing whitespace is held until
non-whitespace follows it. A region whose chunks are dirty (a structured parser, or `text` with
`strip_prefix`/`strip_suffix`) contributes its close value instead of its chunks. Everything
committed is emitted as a delta, so the deltas concatenate to the final string by construction.
"""

from __future__ import annotations

import json
from typing import Any

from .._template import Field


def _stripping(f: Field) -> bool:
    args = f.content_args if isinstance(f.content_args, dict) else {}
    return f.content != "text" or bool(args.get("strip", True))


class TextStream:
    """Commits the text of one message key (content or reasoning) from region events."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._hold = ""  # trailing whitespace not yet known to be inside the final string
        self._closed: dict[str, int] = {}  # regions closed per join field
        # current region
        self._field: Field | None = None
        self._strip = True  # the current field's value is stripped
        self._started = False  # the region committed something (join fields)
        self._sep_done = False

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def open(self, f: Field) -> None:
        self._field = f
        self._strip = _stripping(f)
        self._started = False
        self._sep_done = False
        if f.join is not None:
            self._hold = ""

    def _commit(self, out: list[str], s: str) -> None:
        if s:
            self.parts.append(s)
            out.append(s)

    def _sep(self, out: list[str], f: Field) -> None:
        if not self._sep_done:
            self._sep_done = True
            if self._closed.get(f.name, 0) and f.join:  # a previous non-empty region
                self._commit(out, f.join)

    def chunk(self, text: str, out: list[str]) -> None:
        """Feed raw region text (clean chunks, or a dirty region's value at close)."""
        f = self._field
        if f is None or not text:
            return
        strip = self._strip
        if f.join is not None:
            if strip and not self._started:
                text = text.lstrip()
                if not text:
                    return
            self._sep(out, f)
            self._started = True
        elif strip and not self.parts:
            text = (self._hold + text).lstrip()
            self._hold = ""
            if not text:
                return
        if not strip:
            self._commit(out, self._hold + text)
            self._hold = ""
            return
        whole = self._hold + text
        keep = len(whole.rstrip())
        self._commit(out, whole[:keep])
        self._hold = whole[keep:]

    def piece(self, text: str) -> str | None:
        """`chunk` for the common case (a stripped field without `join`, after the first committed
        text): the piece committed (possibly ""), or None when the general `chunk` must run."""
        f = self._field
        if f is None or f.join is not None or not self.parts or not self._strip:
            return None
        whole = self._hold + text if self._hold else text
        if whole[-1:].isspace():
            keep = len(whole.rstrip())
            self._hold = whole[keep:]
            whole = whole[:keep]
        else:
            self._hold = ""
        if whole:
            self.parts.append(whole)
        return whole

    def close(self, value: Any, dirty: bool, out: list[str]) -> None:
        """End the current region; `value` is its parsed value (used when its chunks were dirty)."""
        f = self._field
        if f is None:
            return
        if dirty and value is not None:
            self.chunk(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), out)
        if f.join is not None:
            self._hold = ""
            if self._started:
                self._closed[f.name] = self._closed.get(f.name, 0) + 1
        self._field = None

    def flush(self, out: list[str]) -> None:
        """Commit held trailing whitespace: a tool call follows, so the text before it is kept
        verbatim (canitoolcall: content around calls is concatenated as written)."""
        if self._hold and self.parts:
            self._commit(out, self._hold)
        self._hold = ""

    def abandon(self) -> None:
        """End the current region without a value (malformed): what was committed stays."""
        f = self._field
        if f is not None and f.join is not None:
            self._hold = ""
        self._field = None
