"""`ToolCallAssembler`: tool-call regions to Chat Completions `tool_calls` deltas and message entries.

Theory of operation
-------------------
Indices are given in emission order, only to calls that are emitted, so they run 0..k-1 with no
gaps except for a call that was partly streamed and then dropped (it keeps its index; `finish`
reports it). A call's first fragment carries `id`, `type` and `function.name`; later fragments carry
only `function.arguments` pieces.

With `stream="early"` a call whose name is an opener capture is announced at `region_open`, and
its arguments are streamed as they arrive when the region's raw text *is* the arguments JSON
(`content: "json"` without dialect options, transform `"arguments": "{content}"`, and no schema
coercion that could change a value): only the part before trailing whitespace is sent, and only
once the text starts with `{`. Everything else is sent at `region_close`, as one fragment. With
`stream="complete"` nothing of a call is sent before its region closed and parsed.
"""

from __future__ import annotations

import json
import os
import secrets
import string
from collections.abc import Callable
from typing import Any

from .._template import Field
from ..tools import coerce_tool_calls, schema_types

_ALPHABET = string.ascii_letters + string.digits
# Random bytes to id characters in C: a byte below 248 (4 x 62) maps to one of the 62 characters,
# each by exactly 4 byte values (uniform); the 8 bytes above are deleted (rejection sampling).
_ID_TABLE = bytes(ord(_ALPHABET[b % 62]) if b < 248 else 0 for b in range(256))
_ID_REJECT = bytes(range(248, 256))
# `json.dumps(x, ensure_ascii=False)` builds this encoder on every call; one instance does the same.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode
_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
# The C encoder that `JSONEncoder.encode` builds on every call, built once (same options and
# output; no circular-reference check: parsed arguments are trees). About 1 us less per call.
_C_ARGS: Any = (
    _C_MAKE_ENCODER(
        None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True
    )
    if _C_MAKE_ENCODER is not None
    else None
)


def _encode_args(args: dict[str, Any]) -> str:
    """`_ENCODE(args)` for the arguments dict of a call."""
    if _C_ARGS is None:  # pragma: no cover - CPython always has the C encoder
        return _ENCODE(args)
    return "".join(_C_ARGS(args, 0))


def _encode_list(args: dict[str, Any], level: int) -> list[str]:  # pragma: no cover - see above
    """`_C_ARGS`'s answer (chunks) without the C encoder."""
    return [_ENCODE(args)]


_DIALECT_KEYS = ("prefix", "suffix", "string_delims", "unquoted_keys", "allow_non_json")


# Ids are drawn 64 at a time from one `secrets` read (one C call chain instead of four Python
# calls per id); `list.pop` is atomic, so threads sharing the pool never get the same id.
_ID_POOL: list[str] = []
if hasattr(os, "register_at_fork"):  # a forked child draws its own ids, never its parent's
    os.register_at_fork(after_in_child=_ID_POOL.clear)


def random_call_id() -> str:
    """`call_` followed by 24 random alphanumerics (the default tool-call id).

    >>> len(random_call_id()), random_call_id()[:5]
    (29, 'call_')
    """
    try:
        return _ID_POOL.pop()
    except IndexError:
        pass
    # 64 ids need 1,536 accepted bytes: 1,700 random bytes keep fewer with probability far below
    # 1e-15 (each byte is kept with probability 248/256); then the whole draw is made again.
    while True:
        chars = secrets.token_bytes(1700).translate(_ID_TABLE, _ID_REJECT)
        if len(chars) >= 24 * 64:
            break
    text = chars.decode("ascii")
    ids = ["call_" + text[i : i + 24] for i in range(0, 24 * 64, 24)]
    _ID_POOL.extend(ids[1:])
    return ids[0]


def calls_from_value(value: Any) -> list[tuple[dict[str, Any] | None, str | None]]:
    """Normalize a `tool_calls` close value to `[(call, error)]` with `call = {name, arguments, id?}`.

    Accepts `{"type": "function", "function": {"name", "arguments"}}`, `{"name", "arguments"}` or
    `{"name", "parameters"}` (arguments a dict or a JSON string, missing or empty meaning `{}`), an
    optional string `id`, or a list of those.

    >>> calls_from_value({"name": "f", "parameters": '{"a": 1}'})
    [({'name': 'f', 'arguments': {'a': 1}}, None)]
    """
    return [(call, error) for call, error, _ in _calls(value)]


def _calls(value: Any) -> list[tuple[dict[str, Any] | None, str | None, bool]]:
    """`calls_from_value`, each call flagged when its arguments were a dict at
    `function.arguments`: the shape whose values the core's schema coercion already typed."""
    out: list[tuple[dict[str, Any] | None, str | None, bool]] = []
    if type(value) is dict:
        # The usual shape (a transform's `{"type", "function": {"name", "arguments"}}`), decided
        # without the general walk below.
        fn = value.get("function")
        if type(fn) is dict:
            name = fn.get("name")
            args = fn.get("arguments")
            if type(name) is str and name and type(args) is dict:
                call: dict[str, Any] = {"name": name, "arguments": args}
                call_id = value.get("id")
                if isinstance(call_id, str) and call_id:
                    call["id"] = call_id
                return [(call, None, True)]
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, dict):
            out.append((None, f"tool call is a {type(item).__name__}, not an object", False))
            continue
        fn = item.get("function")
        src = fn if isinstance(fn, dict) else item
        name = src.get("name")
        args = src.get("arguments", src.get("parameters"))
        # `tools.coerce_tool_calls` types exactly `function.arguments` when it is a dict.
        typed = isinstance(fn, dict) and isinstance(fn.get("arguments"), dict)
        if not isinstance(name, str) or not name:
            out.append((None, "tool call has no name", False))
            continue
        if args is None or (isinstance(args, str) and not args.strip()):
            args = {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError as e:
                out.append((None, f"arguments of {name!r} are not valid JSON: {e}", False))
                continue
        if not isinstance(args, dict):
            out.append((None, f"arguments of {name!r} are a {type(args).__name__}, not a JSON object", False))
            continue
        call = {"name": name, "arguments": args}
        call_id = item.get("id")
        if isinstance(call_id, str) and call_id:
            call["id"] = call_id
        out.append((call, None, typed))
    return out


def _verbatim_arguments(f: Field) -> bool:
    """Whether the region's raw text is the arguments JSON itself (incremental streaming possible)."""
    args = f.content_args if isinstance(f.content_args, dict) else {}
    if f.content != "json" or f.transform_each or any(args.get(k) for k in _DIALECT_KEYS):
        return False
    t = f.transform
    fn = t.get("function") if isinstance(t, dict) else None
    return isinstance(fn, dict) and fn.get("arguments") == "{content}"


class _Region:
    __slots__ = ("field", "captures", "body_start", "index", "call_id", "name", "sent", "raw", "live", "drop")

    def __init__(self, f: Field, captures: dict[str, str], body_start: int) -> None:
        self.field = f
        self.captures = captures
        self.body_start = body_start
        self.index: int | None = None  # set once the call was announced
        self.call_id = ""
        self.name = ""
        self.sent = ""  # argument text sent so far
        self.raw: list[str] | None = None  # raw chunks, when arguments stream incrementally
        self.live = False  # arguments are being streamed incrementally
        self.drop: str | None = None  # reason decided at open (unknown tool)


class ToolCallAssembler:
    """Turns `tool_calls` region events into delta entries and final message calls."""

    def __init__(
        self,
        *,
        stream: str,
        offered: dict[str, dict[str, Any]] | None,
        unknown_tools: str,
        id_factory: Callable[[], str],
        core_typed: bool = False,
    ) -> None:
        self.stream = stream
        # The core was given the same `offered` tools: the calls it typed are not coerced again.
        self.core_typed = core_typed
        self.offered = offered
        self.unknown_tools = unknown_tools
        self.id_factory = id_factory
        self.calls: dict[int, dict[str, Any]] = {}  # index -> message entry, in index order
        self.dropped: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.unknown: list[dict[str, Any]] = []
        self._next = 0
        self._region: _Region | None = None
        #: the content stream whose held text `keep_records` commits before a call it keeps
        self.text_before: Any = None

    # -- helpers ---------------------------------------------------------------------------------

    def _is_unknown(self, name: str) -> bool:
        return self.offered is not None and name not in self.offered

    def _coercible(self, name: str) -> bool:
        """Whether the core's schema coercion might change this tool's argument values."""
        props = self.offered.get(name) if self.offered else None
        return bool(props) and any(set(schema_types(p)) - {"string"} for p in props.values())  # type: ignore[union-attr]

    def _announce(self, r: _Region, name: str, call_id: str | None, arguments: str) -> dict[str, Any]:
        r.index = self._next
        self._next += 1
        r.call_id = call_id or self.id_factory()
        r.name = name
        r.sent = arguments
        return {
            "index": r.index,
            "id": r.call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    def _add(self, name: str, call_id: str | None, arguments: str, out: list[dict]) -> None:
        """A call sent whole at its close: `_announce` then `_store`, with no region of its own."""
        index = self._next
        self._next += 1
        call_id = call_id or self.id_factory()
        out.append(
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        )
        self._keep(index, call_id, name, arguments)

    # -- events ----------------------------------------------------------------------------------

    def open(self, f: Field, captures: dict[str, str], body_start: int, out: list[dict]) -> None:
        r = self._region = _Region(f, captures, body_start)
        if self.stream != "early":
            return
        name = captures.get("name")
        if not name or f.transform_each:
            return
        if self._is_unknown(name) and self.unknown_tools == "drop":
            r.drop = "unknown_tool"
            return
        out.append(self._announce(r, name, captures.get("id") or None, ""))
        if _verbatim_arguments(f) and not self._coercible(name):
            r.raw = []
            r.live = True

    def chunk(self, text: str, out: list[dict]) -> None:
        r = self._region
        if r is None or r.raw is None or not r.live:
            return
        r.raw.append(text)
        body = "".join(r.raw).lstrip()
        if not body:
            return
        if body[0] != "{":
            r.live = False  # not an object: whatever it is, it is sent (or reported) at close
            return
        final = body.rstrip()
        if len(final) > len(r.sent):
            out.append({"index": r.index, "function": {"arguments": final[len(r.sent) :]}})
            r.sent = final

    def _report(self, r: _Region, reason: str, name: str | None, error: str | None = None) -> None:
        entry: dict[str, Any] = {
            "index": r.index,
            "name": name,
            "reason": reason,
            "streamed": r.index is not None,
        }
        if r.index is not None:
            entry["id"] = r.call_id
        if error:
            entry["error"] = error
        self.dropped.append(entry)

    def close(self, value: Any, complete: bool, truncated_drops: bool, text: str, out: list[dict]) -> None:
        r = self._region
        self._region = None
        if r is None:
            return
        if not complete and truncated_drops:
            self._report(r, "truncated", r.name or r.captures.get("name"))
            return
        if r.drop:
            self._report(r, r.drop, r.captures.get("name"))
            return
        offered = self.offered
        # The usual value (one call `{"function": {"name", "arguments": dict}, "id"?}`, typed by
        # the core, not announced, kept): what the loop below does for it through `_calls`, `_add`
        # and `_keep`, without the intermediate list, tuple and call dict or their frames.
        fn = value.get("function") if type(value) is dict else None
        if type(fn) is dict and r.index is None and (self.core_typed or not offered):
            name = fn.get("name")
            args = fn.get("arguments")
            if type(name) is str and name and type(args) is dict:
                unknown = offered is not None and name not in offered
                if not unknown or self.unknown_tools != "drop":
                    arguments = _encode_args(args)
                    index = self._next
                    self._next = index + 1
                    call_id = value.get("id")
                    if not isinstance(call_id, str) or not call_id:
                        call_id = self.id_factory()
                    out.append(
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                    )
                    if unknown:
                        self.unknown.append({"index": index, "name": name})
                    self.calls[index] = {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                    return
        first = True
        for call, error, typed in _calls(value):
            if call is None:
                self.errors.append({"field": r.field.name, "error": error, "text": text})
                if first and r.index is not None:
                    self._report(r, "malformed", r.name, error)
                    first = False
                continue
            name, args = call["name"], call["arguments"]
            if offered and not (typed and self.core_typed):
                # a call the core could not type (a passed-through call object)
                args = coerce_tool_calls({"function": {"name": name, "arguments": args}}, offered)
                args = args["function"]["arguments"]
            if first and r.index is not None:
                first = False
                self._finish_announced(r, args, out)
                continue
            first = False
            if offered is not None and name not in offered and self.unknown_tools == "drop":
                self.dropped.append(
                    {"index": None, "name": name, "reason": "unknown_tool", "streamed": False}
                )
                continue
            self._add(name, call.get("id"), _encode_args(args), out)

    def keep_records(self, records: list[Any], i: int) -> int:
        """`open` and `close` of complete tool-calls regions for the message alone (a one-shot parse
        with calls sent complete and typed by the core: no region, no delta entry), for the values
        `records[i][0]`, `records[i + 1][0]`, ... (the core's call-loop records, `_oneshot.run`'s
        `kept`) as long as each is one call of the usual shape (`{"function": {"name", "arguments":
        dict}, "id"?}`) that is kept: the same entry (and unknown-tool report) as `close` with
        `_add`, after committing the held end of `text_before` (as `ChatParser._process` does when
        a call follows text). Returns the index of the first value it declines (`open` and
        `close` decide that one) or of the first item that is not a record (a tuple: the records
        sit among the parse's events), or `len(records)`."""
        offered = self.offered
        drop = self.unknown_tools == "drop"
        calls = self.calls
        make_id = self.id_factory
        pooled = make_id is random_call_id
        pop = _ID_POOL.pop
        encode = _C_ARGS if _C_ARGS is not None else _encode_list
        join = "".join
        text = self.text_before
        index = self._next
        n = len(records)
        try:
            for j in range(i, n):
                record = records[j]
                if type(record) is not tuple:
                    return j
                value = record[0]
                if type(value) is not dict:
                    return j
                fn = value.get("function")
                if type(fn) is not dict:
                    return j
                name = fn.get("name")
                args = fn.get("arguments")
                if type(args) is not dict or type(name) is not str or not name:
                    return j
                unknown = offered is not None and name not in offered
                if unknown and drop:
                    return j
                arguments = join(encode(args, 0))  # (`_encode_args`)
                call_id = value.get("id")
                if not isinstance(call_id, str) or not call_id:
                    if pooled:
                        try:  # (`random_call_id`'s own first step, without its call)
                            call_id = pop()
                        except IndexError:
                            call_id = random_call_id()
                    else:
                        call_id = make_id()
                if text is not None and text._hold:
                    text.flush([])
                if unknown:
                    self.unknown.append({"index": index, "name": name})
                calls[index] = {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                index += 1
        finally:
            self._next = index
        return n

    def _finish_announced(self, r: _Region, args: dict[str, Any], out: list[dict]) -> None:
        text = _encode_args(args)
        if r.live and r.raw is not None:
            final = "".join(r.raw).strip()
            try:
                same = json.loads(final) == args
            except ValueError:
                same = False
            if same and final.startswith(r.sent):
                text = final
        if text.startswith(r.sent):
            rest = text[len(r.sent) :]
            if rest:
                out.append({"index": r.index, "function": {"arguments": rest}})
        else:  # pragma: no cover - the streamed prefix is checked against the final JSON above
            self.errors.append(
                {"field": r.field.name, "error": "streamed arguments diverged", "text": r.sent}
            )
            text = r.sent
        r.sent = text
        self._store(r)

    def _store(self, r: _Region) -> None:
        assert r.index is not None
        self._keep(r.index, r.call_id, r.name, r.sent)

    def _keep(self, index: int, call_id: str, name: str, arguments: str) -> None:
        """Record a finished call for the message (and an unknown tool for the report). Calls are
        recorded in index order (`calls` is read in insertion order): a call's index is given when
        it is announced or added, and an announced call is recorded at its region's close, before
        the next region opens."""
        if self._is_unknown(name):
            self.unknown.append({"index": index, "name": name})
        self.calls[index] = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    def malformed(self, error: Exception, text: str, truncated: bool) -> None:
        """A region that did not parse; at the end of a cut-off stream it counts as truncated."""
        r = self._region
        self._region = None
        if r is None:
            return
        if truncated:
            self._report(r, "truncated", r.name or r.captures.get("name"), str(error))
            return
        self.errors.append({"field": r.field.name, "error": str(error), "text": text})
        if r.index is not None:
            self._report(r, "malformed", r.name, str(error))
