"""JSON for the server: orjson on the hot paths, and errors that name the offending field.

orjson (a `server` extra dependency) parses and serialises several times faster than the standard
library and is strict where the server must be: it refuses `NaN`/`Infinity`, lone surrogates,
invalid UTF-8 and nesting deeper than 1,024 levels. When it refuses a request body, the body is
parsed again leniently (standard library, iteratively walked) only to say *where* the problem is,
so a client gets `tools[0].function.parameters.properties.x.default: NaN is not valid JSON`
instead of a character offset.

Upstream lines are handled the other way round: text a model wrote is never thrown away, so a line
with lone surrogates or invalid UTF-8 is decoded leniently with U+FFFD in place of the bad code
points, and the caller reports that it happened.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

__all__ = ["BodyError", "dumps", "loads_body", "loads_upstream"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_DEPTH = 1024


class BodyError(ValueError):
    """A request body that is not valid JSON; `param` is the field path, or `body`."""

    def __init__(self, message: str, param: str = "body") -> None:
        super().__init__(message)
        self.param = param


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON. Values orjson cannot write (integers over 64 bits, lone surrogates that
    slipped through) fall back to the standard library, ASCII-escaped, so serialising never fails."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=repr).encode("ascii")


def _path(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def _find_bad(value: Any) -> tuple[str, str] | None:
    """The first lone surrogate or non-finite number in `value`: `(path, problem)`. Iterative, so
    any depth is fine."""
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            m = _SURROGATE.search(v)
            if m:
                code = f"\\u{ord(m.group()):04x}"
                return _path(path), f"contains a lone surrogate ({code}), which is not valid Unicode"
        elif isinstance(v, float) and not math.isfinite(v):
            return _path(path), f"{v!r}".replace("inf", "Infinity").replace(
                "nan", "NaN"
            ) + " is not valid JSON"
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                if isinstance(k, str) and _SURROGATE.search(k):
                    return _path(path), f"has a key with a lone surrogate: {k!r}"
                stack.append((item, [*path, k]))
        elif isinstance(v, list):
            stack.extend((item, [*path, i]) for i, item in reversed(list(enumerate(v))))
    return None


def loads_body(raw: bytes) -> Any:
    """Parse a request body; `BodyError` names what is wrong and where."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        strict = str(e)
    if "depth limit" in strict:
        raise BodyError(f"request body is nested too deeply (limit {_MAX_DEPTH} levels)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyError(f"request body is not valid UTF-8 (byte {e.start}: {e.reason})") from None
    try:
        lenient = json.loads(text)
    except RecursionError:
        raise BodyError(f"request body is nested too deeply (limit {_MAX_DEPTH} levels)") from None
    except ValueError as e:
        raise BodyError(f"request body is not valid JSON: {e}") from None
    bad = _find_bad(lenient)
    if bad is None:  # orjson refused something the standard library accepts and we cannot place
        raise BodyError(f"request body is not valid JSON: {strict}")
    param, problem = bad
    raise BodyError(f"request body is not valid JSON: {param} {problem}", param)


def _clean(value: Any, changed: list[bool]) -> Any:
    if isinstance(value, str):
        if _SURROGATE.search(value):
            changed.append(True)
            return _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, dict):
        return {_clean(k, changed): _clean(v, changed) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, changed) for v in value]
    return value


def loads_upstream(payload: bytes) -> tuple[Any, str | None]:
    """Parse one JSON document from the upstream: `(value, warning)`.

    Raises `ValueError` when it is not JSON at all. Lone surrogates (`"\\ud800"`) and invalid UTF-8
    become U+FFFD, with a warning saying so; `NaN`/`Infinity` are accepted (they only ever appear in
    numbers the server does not use as text).
    """
    try:
        return orjson.loads(payload), None
    except orjson.JSONDecodeError:
        pass
    try:
        text = payload.decode("utf-8")
        changed: list[bool] = []
    except UnicodeDecodeError:
        text = payload.decode("utf-8", "replace")
        changed = [True]
    try:
        value = _clean(json.loads(text), changed)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not changed:
        return value, None
    return value, (
        "the upstream sent text that is not valid Unicode (lone surrogates or invalid UTF-8); "
        "each bad code point was replaced by U+FFFD"
    )
