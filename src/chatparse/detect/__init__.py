"""Template-less detection of tool calls and reasoning (runtime-contract.md §2-§5, §9).

The marker-anchored recognizers (hermes, gemma, gpt_oss, phi, llama `<|python_tag|>`, mistral in
both forms, qwen3_coder, glm, deepseek V3/V3.1, deepseek_dsml, kimi_k2, kimi_k3 XTML) and the
reasoning recognizers (think_tag, harmony_analysis, gemma_channel, xtml_think) are fields of one
union `response_template` run on the streaming core (`_union.py`). Marker-free shapes (Gemma's
bare `call:NAME{…}` and, for an offered NAME, `NAME{…}`; pythonic, bare_pythonic, llama3_json,
fenced tool_code, loose_keyed) are decided on the whole cleaned content at the end of the stream,
and only when no marker recognizer produced a call (`_shapes.py`). Gemma payloads the JSON dialect
rejects are repaired to JSON (`_gemma.py`); a wrapped Gemma call without its terminator is repaired
and fires unless finish_reason is "length".

Policies:

* A marker-anchored call needs its marker, a payload that parses, and (where the family has one)
  its terminator. A region that fails any of these is not a call: its raw text goes back into the
  content at its place and the failure is listed in `errors`. Arguments that are not a JSON object
  are such a failure (never a silently empty call).
* Reasoning is separated before calls are looked for: a call drafted inside `<think>` is
  reasoning text.
* Reasoning pre-opened by the prompt: when `prefix` (the prompt) ends, ignoring whitespace, with
  a reasoning opener (`<think>`, `<thinking>`, `[THINK]`, `<|channel>thought`,
  `<|channel|>analysis<|message|>`, `<|open|>think<|sep|>`), the output starts inside reasoning.
* Orphan closers (`</think>`, `</thinking>`, `<|close|>think<|sep|>`): off by default
  (`orphan_reasoning=False` for `detect`, `parse_message` and `AutoStream`), so prose streams as
  it arrives and the streamed message equals `detect` for every chunking; a lone closer is then
  dropped from the content and reported in `errors`. With `orphan_reasoning=True` (the default of
  the non-streaming `local_fallback`), content since the start of the output (or since the
  previous orphan closer) up to a lone closer is reasoning, as long as no other region opened in
  between; that text is held back while it may still become reasoning. A lone opener runs to the
  end.
* Section and end-of-turn markers of the recognized families (`<｜tool▁calls▁begin｜>`,
  `<｜DSML｜function_calls>`, `<|tool_calls_section_begin|>`, XTML `<|open|>tools<|sep|>`, ...) are
  dropped from the content.
* The first marker family that produces a call wins: calls of another marker family later in the
  same output are reported in `errors` and their text stays content (no merging across families).
* Unknown tool names are surfaced (`unknown_tools` lists them when `tools=` is given).

Streaming (`AutoStream`): the same message for every chunking. Content is released as the core
releases it, except that text is held while (a) with `orphan_reasoning=True`, it may still turn
out to be reasoning (the start of the output, or text after an orphan closer, until another region
opens) and (b) while no call was found, nothing was released and the content so far could still
be a marker-free whole-output shape (starts with `[`, `{`, a fence, `/`, `call:` or an offered
tool name).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._parser import ResponseParser
from ..tools import build_tool_table, coerce_tool_calls
from . import _gemma, _shapes
from ._union import (
    ALIASES,
    ORPHAN_FIELDS,
    PREFIX_OPENERS,
    REASONING_RECOGNIZERS,
    TOOL_FIELDS,
    TOOL_RECOGNIZERS,
    UNTERMINATED,
    union_template,
)

__all__ = [
    "RECOGNIZERS",
    "AutoStream",
    "DetectResult",
    "detect",
    "local_fallback",
]

#: Call openers that a `max_tokens` cut-off can leave at the very end of the output.
_CUT_OPENER = re.compile(
    r"(?:\[TOOL_CALLS\]|<tool_call>|<\|tool_call>|<\|python_tag\|>|<\|python_start\|>|functools"
    r"|(?:<\|start\|>assistant)?\s*to=functions\.[^<]*(?:<\|channel\|>[^<]*(?:<\|constrain\|>[^<]*)?)?"
    r"|<\|start\|>assistant(?:<\|channel\|>[^<]*(?:<\|constrain\|>[^<]*)?)?)\s*\Z"
)

#: Every recognizer name, tool families in the documented `auto` precedence, then reasoning.
RECOGNIZERS: tuple[str, ...] = (*TOOL_RECOGNIZERS, *REASONING_RECOGNIZERS)

#: Recognizers whose argument values are untyped text: typed by the offered schemas.
_STRING_VALUED = frozenset({"qwen3_coder", "glm", "deepseek_dsml"})

#: Gemma fields whose failed or unterminated payload is repaired (runtime-contract §3.1), with their closers.
_GEMMA = {"gemma": "<tool_call|>", "gemma_legacy": ">"}

_NAMED = frozenset(
    n for n, spec in TOOL_FIELDS.items() if "transform" in spec and not spec.get("transform_each")
)


@dataclass
class DetectResult:
    """What detection found: the raw-vs-cleaned report."""

    recognizer: str | None
    raw: str
    cleaned: str
    reasoning: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    reasoning_recognizers: list[str] = field(default_factory=list)
    unknown_tools: list[str] = field(default_factory=list)


def _resolve(recognizers: str | Sequence[str] | None) -> tuple[str, ...]:
    if recognizers is None or recognizers == "auto":
        return RECOGNIZERS
    if recognizers == "none":
        return ()
    names = (recognizers,) if isinstance(recognizers, str) else tuple(recognizers)
    unknown = [n for n in names if n not in RECOGNIZERS]
    if unknown:
        raise ValueError(f"unknown recognizer(s) {unknown}; available: {list(RECOGNIZERS)}")
    return tuple(n for n in RECOGNIZERS if n in names)


def _prefix_opener(prefix: str | None, names: Sequence[str]) -> str | None:
    """The reasoning opener that `prefix` (the prompt) ends with, if its family is enabled."""
    if not prefix:
        return None
    tail = prefix.rstrip()
    for opener, family in PREFIX_OPENERS.items():
        if family in names and tail.endswith(opener):
            return opener
    return None


def _random_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


class _Reject(ValueError):
    pass


def _arguments(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise _Reject("arguments must be a JSON object, got a non-JSON string") from None
    if not isinstance(value, dict):
        raise _Reject(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _calls_from_objects(value: Any, *, allow_single: bool) -> list[dict[str, Any]]:
    objs = [value] if allow_single and isinstance(value, dict) else value
    if not isinstance(objs, list) or not objs:
        raise _Reject("expected a non-empty list of call objects")
    calls = []
    for o in objs:
        if not isinstance(o, dict) or not isinstance(o.get("name"), str) or not o["name"]:
            raise _Reject("a call object needs a string 'name'")
        args = o.get("arguments", o.get("parameters"))
        calls.append({"name": o["name"], "arguments": _arguments(args)})
    return calls


def _to_calls(rec: str, value: Any, captures: dict[str, str]) -> list[dict[str, Any]]:
    if rec in _NAMED:
        args = value.get("arguments") if isinstance(value, dict) else value
        return [{"name": captures.get("name", "").strip(), "arguments": _arguments(args)}]
    return _calls_from_objects(value, allow_single=rec in ("hermes", "llama_tag"))


class AutoStream:
    """Streams one assistant message as Chat Completions deltas, detecting the family on the fly.

    >>> s = AutoStream(id_factory=lambda: "call_1")
    >>> s.feed("<think>hm</think>Hi ")
    [{'reasoning_content': 'hm'}, {'content': 'Hi'}]
    >>> s.feed('<tool_call>{"name": "f", "arguments": {}}</tool_call>')
    [{'tool_calls': [{'index': 0, 'id': 'call_1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{}'}}]}]
    >>> message, deltas, reason = s.finish()
    >>> message["content"], reason, s.result.recognizer
    ('Hi', 'tool_calls', 'hermes')
    """

    def __init__(
        self,
        *,
        tools: Sequence[dict | Callable] | None = None,
        recognizers: str | Sequence[str] | None = None,
        id_factory: Callable[[], str] | None = None,
        prefix: str | None = None,
        orphan_reasoning: bool = False,
    ) -> None:
        self._names = _resolve(recognizers)
        self._table = build_tool_table(list(tools)) if tools else {}
        self._tool_names = tuple(self._table)
        self._finish_reason = "stop"
        self._parser = ResponseParser(union_template(self._names), prefix="")
        self._ids = id_factory or _random_id
        self._orphan = orphan_reasoning and any(f in self._names for f, _ in ORPHAN_FIELDS.values())
        self._raw: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_recs: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._ids_out: list[str] = []
        self._errors: list[dict[str, Any]] = []
        self._recognizer: str | None = None
        # content
        self._held = ""  # content not yet committed (raw)
        self._committed: list[str] = []
        self._ws = ""  # trailing whitespace of committed content, not yet known to be inside
        self._explicit_content = False  # a content channel (Harmony final) was seen: no whole-output shape
        self._segment = True  # inside a segment that an orphan closer would turn into reasoning
        # current region
        self._field: str | None = None
        self._start = 0
        self._open_end = 0
        self._captures: dict[str, str] = {}
        self._body: list[str] = []
        self._finished = False
        self.result: DetectResult | None = None
        opener = _prefix_opener(prefix, self._names)
        if opener:  # the prompt pre-opened reasoning: the output starts inside it
            for e in self._parser.feed(opener):
                self._event(dict(e), [])

    # -- content -----------------------------------------------------------------------------

    def _commit(self, text: str, out: list[dict]) -> None:
        if not self._committed:
            text = (self._ws + text).lstrip()
            self._ws = ""
        else:
            text = self._ws + text
        keep = len(text.rstrip())
        body, self._ws = text[:keep], text[keep:]
        if body:
            self._committed.append(body)
            out.append({"content": body})

    def _hold_reason(self) -> bool:
        if self._segment and self._orphan:
            return True
        return (
            not self._calls and not self._committed and _shapes.could_be_shape(self._held, self._tool_names)
        )

    def _content(self, text: str, out: list[dict]) -> None:
        self._held += text
        if not self._hold_reason():
            held, self._held = self._held, ""
            self._commit(held, out)

    def _add_reasoning(self, text: str, rec: str, out: list[dict]) -> None:
        text = text.strip()
        if not text:
            return
        delta = ("\n\n" if self._reasoning else "") + text
        self._reasoning.append(text)
        if rec not in self._reasoning_recs:
            self._reasoning_recs.append(rec)
        out.append({"reasoning_content": delta})

    # -- events ------------------------------------------------------------------------------

    def _reject(self, rec: str, error: str, raw: str, out: list[dict]) -> None:
        self._errors.append({"recognizer": ALIASES.get(rec, rec), "error": error, "text": raw})
        self._content(raw, out)

    def _accept(self, key: str, calls: list[dict[str, Any]], raw: str, out: list[dict]) -> None:
        rec = ALIASES.get(key, key)
        if key in _STRING_VALUED and self._table:  # untyped XML values: typed by the offered schemas
            wrapped = [{"type": "function", "function": c} for c in calls]
            calls = [w["function"] for w in coerce_tool_calls(wrapped, self._table)]
        if self._recognizer is not None and self._recognizer != rec:
            self._reject(
                rec, f"calls of '{rec}' after calls of '{self._recognizer}' are not merged", raw, out
            )
            return
        self._recognizer = rec
        self._emit_calls(calls, out)

    def _emit_calls(self, calls: list[dict[str, Any]], out: list[dict]) -> None:
        # A call follows: content held so far is released (a shape is no longer possible).
        held, self._held = self._held, ""
        self._commit(held, out)
        deltas = []
        for c in calls:
            call_id = self._ids()
            index = len(self._calls)
            self._calls.append(c)
            self._ids_out.append(call_id)
            deltas.append(
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": json.dumps(c["arguments"], ensure_ascii=False),
                    },
                }
            )
        if deltas:
            out.append({"tool_calls": deltas})

    def _tool_end(self, value: Any, ok: bool, complete: bool, error: str, end: int, out: list[dict]) -> None:
        rec = (self._field or "")[len("tool_calls_") :]
        raw = self._parser.input_text[self._start : end]
        if rec in _GEMMA and (not ok or not complete) and self._gemma_repair(rec, end, out):
            return
        if rec in UNTERMINATED and not ok:
            # No terminator of its own: cut the region at the end of its first JSON value.
            body = "".join(self._body)
            stripped = body.lstrip()
            try:
                value, used = json.JSONDecoder().raw_decode(stripped)
            except (ValueError, RecursionError):
                pass
            else:
                ok, complete = True, True
                if rec in _NAMED:
                    value = {"arguments": value}
                head = self._parser.input_text[
                    self._start : self._open_end + len(body) - len(stripped) + used
                ]
                rest = stripped[used:]
                try:
                    calls = _to_calls(rec, value, self._captures)
                except _Reject as e:
                    self._reject(rec, str(e), raw, out)
                    return
                self._accept(rec, calls, head, out)
                if rest:  # the prose after the payload (after the rejected payload too)
                    self._content(rest, out)
                return
        if not ok and end == len(self._parser.input_text) and self._finish_reason == "length":
            # cut off by max_tokens at the end of the output: a call that was never written
            self._errors.append(
                {"recognizer": ALIASES.get(rec, rec), "error": "truncated call dropped", "text": raw}
            )
            return
        if not ok:
            self._reject(rec, error, raw, out)
            return
        if not complete and rec not in UNTERMINATED:
            if self._finish_reason == "length":
                self._errors.append(
                    {"recognizer": ALIASES.get(rec, rec), "error": "truncated call dropped", "text": raw}
                )
                return
            self._reject(rec, "the call's terminator is missing (truncated output)", raw, out)
            return
        try:
            calls = _to_calls(rec, value, self._captures)
        except _Reject as e:
            self._reject(rec, str(e), raw, out)
            return
        self._accept(rec, calls, raw, out)

    def _gemma_repair(self, rec: str, end: int, out: list[dict]) -> bool:
        """Repair a Gemma payload the JSON dialect rejected; True when the call was accepted.

        The wrapped form takes `<tool_call|>` as the boundary even inside an unclosed string, and a
        call without its terminator (cut off) is repaired and fires, except with
        finish_reason="length" (left to the truncation rule). The older `<call:NAME{…}>` form is
        repaired only when its payload is balanced.
        """
        text = self._parser.input_text
        close = _GEMMA[rec]
        body = "".join(self._body)
        head_end = self._open_end + len(body)
        terminated = text[head_end:end] == close and text[self._open_end : head_end] == body
        rest = ""
        cut = body.find(close) if rec == "gemma" else -1
        if cut >= 0:
            body, rest, terminated = body[:cut], body[cut + len(close) :], True
            end = self._open_end + cut + len(close)
        if not terminated and self._finish_reason == "length":
            return False
        try:
            args, balanced = _gemma.repair(body)
        except ValueError:
            return False
        if rec != "gemma" and not balanced:
            return False
        name = self._captures.get("name", "").strip()
        self._accept(rec, [{"name": name, "arguments": args}], text[self._start : end], out)
        if rest:
            self._content(rest, out)
        return True

    def _event(self, e: dict, out: list[dict]) -> None:
        kind, name = e["type"], e["field"]
        if kind == "region_open":
            self._field, self._start, self._open_end = name, e["start"], e["end"]
            self._captures = dict(e.get("captures", {}))
            self._body = []
            if name.startswith("orphan_"):
                rec = name[len("orphan_") :]
                if self._segment and self._orphan:
                    held, self._held = self._held, ""
                    self._add_reasoning(held, rec, out)
                else:
                    self._errors.append(
                        {"recognizer": rec, "error": "stray reasoning closer dropped", "text": ""}
                    )
            elif name.startswith("marker_"):
                pass
            elif name.startswith("content_"):
                self._explicit_content = True
            elif name != "content":
                self._segment = False
                if not self._hold_reason() and self._held:
                    held, self._held = self._held, ""
                    self._commit(held, out)
        elif kind == "region_chunk":
            if name.startswith("content"):
                self._content(e["text"], out)
            else:
                self._body.append(e["text"])
        elif kind == "region_close":
            if name.startswith("reasoning_"):
                self._add_reasoning(e["value"] or "", name[len("reasoning_") :], out)
            elif name.startswith("tool_calls_"):
                self._tool_end(e["value"], True, e["complete"], "", e["end"], out)
            elif name.startswith("drop_"):
                self._errors.append(
                    {
                        "recognizer": name[len("drop_") :],
                        "error": "message to a non-function recipient dropped",
                        "text": self._parser.input_text[self._start : e["end"]],
                    }
                )
            elif name.startswith("orphan_") and self._errors and self._errors[-1]["text"] == "":
                self._errors[-1]["text"] = self._parser.input_text[self._start : e["end"]]
            self._field = None
        elif kind == "region_malformed":
            if name.startswith("tool_calls_"):
                self._tool_end(None, False, False, str(e["error"]).split("\n")[0], e["end"], out)
            elif name.startswith("drop_"):
                pass
            else:  # a text field cannot fail; keep its text as content to be safe
                self._content(self._parser.input_text[self._start : e["end"]], out)
            self._field = None

    # -- API ---------------------------------------------------------------------------------

    def feed(self, text: str) -> list[dict]:
        """Append model output; return the Chat Completions deltas it completes."""
        if self._finished:
            raise RuntimeError("AutoStream already finished")
        self._raw.append(text)
        out: list[dict] = []
        for e in self._parser.feed(text):
            self._event(dict(e), out)
        return out

    def finish(self, finish_reason: str = "stop") -> tuple[dict, list[dict], str]:
        """End the stream: (message, last deltas, finish_reason)."""
        if self._finished:
            raise RuntimeError("AutoStream already finished")
        out: list[dict] = []
        self._finish_reason = finish_reason
        _, events = self._parser.finalize()
        if finish_reason == "length":
            chunks = [e for e in events if e["type"] == "region_chunk" and e["field"] == "content"]
            m = _CUT_OPENER.search(chunks[-1]["text"]) if chunks else None
            if m is not None:
                chunks[-1]["text"] = chunks[-1]["text"][: m.start()]
                self._errors.append(
                    {"recognizer": None, "error": "truncated call opener dropped", "text": m.group()}
                )
        for e in events:
            self._event(dict(e), out)
        self._finished = True
        self._segment = False
        if self._held:
            claimed = None
            if not self._calls and not self._committed and not self._explicit_content:
                enabled = [n for n in TOOL_RECOGNIZERS if n in self._names]
                claimed = _shapes.whole_output(self._held, self._tool_names, enabled)
            if claimed is not None:
                self._held = ""
                self._recognizer = claimed[0]
                self._emit_calls(claimed[1], out)
            else:
                held, self._held = self._held, ""
                self._commit(held, out)
        self._ws = ""
        unknown = []
        if self._tool_names:
            unknown = sorted({c["name"] for c in self._calls if c["name"] not in self._tool_names})
        self.result = DetectResult(
            recognizer=self._recognizer,
            raw="".join(self._raw),
            cleaned="".join(self._committed),
            reasoning=list(self._reasoning),
            calls=[{"name": c["name"], "arguments": c["arguments"]} for c in self._calls],
            errors=list(self._errors),
            reasoning_recognizers=list(self._reasoning_recs),
            unknown_tools=unknown,
        )
        message = self._message()
        if self._calls and finish_reason in ("stop", "tool_calls"):
            finish_reason = "tool_calls"
        return message, out, finish_reason

    def _message(self) -> dict[str, Any]:
        r = self.result
        assert r is not None
        message: dict[str, Any] = {"role": "assistant", "content": r.cleaned or None}
        if r.reasoning:
            message["reasoning_content"] = "\n\n".join(r.reasoning)
        if r.calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": json.dumps(c["arguments"], ensure_ascii=False),
                    },
                }
                for call_id, c in zip(self._ids_out, r.calls)
            ]
        report: dict[str, Any] = {"recognizer": r.recognizer}
        if r.reasoning_recognizers:
            report["reasoning_recognizers"] = r.reasoning_recognizers
        if r.errors:
            report["errors"] = r.errors
        if r.unknown_tools:
            report["unknown_tools"] = r.unknown_tools
        if r.recognizer is not None or len(report) > 1:
            message["chatparse"] = report
        return message


def detect(
    text: str,
    *,
    tools: Sequence[dict | Callable] | None = None,
    recognizers: str | Sequence[str] | None = None,
    prefix: str | None = None,
    orphan_reasoning: bool = False,
) -> DetectResult:
    """Detect reasoning and tool calls in a complete model output.

    >>> r = detect('[get_weather(city="SF")]')
    >>> r.recognizer, r.calls, r.cleaned
    ('pythonic', [{'name': 'get_weather', 'arguments': {'city': 'SF'}}], '')
    """
    s = AutoStream(
        tools=tools,
        recognizers=recognizers,
        id_factory=lambda: "",
        prefix=prefix,
        orphan_reasoning=orphan_reasoning,
    )
    s.feed(text)
    s.finish()
    assert s.result is not None
    return s.result


def parse_message(
    text: str,
    *,
    tools: Sequence[dict | Callable] | None = None,
    recognizers: str | Sequence[str] | None = None,
    finish_reason: str = "stop",
    id_factory: Callable[[], str] | None = None,
    prefix: str | None = None,
    orphan_reasoning: bool = False,
) -> tuple[dict, str]:
    """The Chat Completions message and finish_reason for a complete output (auto detection)."""
    s = AutoStream(
        tools=tools,
        recognizers=recognizers,
        id_factory=id_factory,
        prefix=prefix,
        orphan_reasoning=orphan_reasoning,
    )
    s.feed(text)
    message, _, reason = s.finish(finish_reason)
    return message, reason


def local_fallback(
    provider_message: dict,
    *,
    tools: Sequence[dict | Callable] | None = None,
    recognizers: str | Sequence[str] | None = None,
    id_factory: Callable[[], str] | None = None,
    orphan_reasoning: bool = True,
) -> tuple[dict, DetectResult | None]:
    """Recover calls written as text by a provider with native tool calling (§9).

    Runs only when the provider returned no structured calls; native calls always win. Returns the
    message (recovered calls appended with minted ids, content cleaned) and the detection report,
    or the message unchanged and None.

    >>> m, r = local_fallback({"role": "assistant", "content": '<call:echo{"text": "hi"}>'},
    ...                       id_factory=lambda: "call_1")
    >>> m["tool_calls"], m["content"], r.recognizer
    ([{'id': 'call_1', 'type': 'function', 'function': {'name': 'echo', 'arguments': '{"text": "hi"}'}}], None, 'gemma')
    """
    content = provider_message.get("content")
    if provider_message.get("tool_calls") or not isinstance(content, str) or not content:
        return provider_message, None
    s = AutoStream(
        tools=tools, recognizers=recognizers, id_factory=id_factory, orphan_reasoning=orphan_reasoning
    )
    s.feed(content)
    message, _, _ = s.finish()
    result = s.result
    assert result is not None
    if not result.calls:
        return provider_message, result
    out = dict(provider_message)
    out["content"] = message["content"]
    out["tool_calls"] = message["tool_calls"]
    if "reasoning_content" in message and not out.get("reasoning_content"):
        out["reasoning_content"] = message["reasoning_content"]
    return out, result
