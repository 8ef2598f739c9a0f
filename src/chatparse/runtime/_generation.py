"""One generation: what a runtime produced, turned into deltas, a message, calls and an observation.

Theory of operation
-------------------
Every adapter reduces its runtime's output to a stream of *parts*:

* `("text", piece)`: raw model text (local runtimes), parsed here with the model's response
  template through `chatparse.openai.ChatParser` (prompt as `prefix`, tools for schema typing),
  or, when no template is known, with template-less detection (`ChatParser(auto=True)`);
* `("content", piece)`, `("reasoning", piece)`: text a server already separated;
* `("call", entry)`: a native tool-call fragment in Chat Completions delta form (`index`, `id`,
  `function.name`, `function.arguments` pieces), accumulated per index;
* `("finish", finish_reason, usage)`: the end.

`Assembly` turns them into Chat Completions deltas (`{"content"}`, `{"reasoning_content"}`,
`{"tool_calls": [complete call]}`) and, at the end, a `Generation`. No parsing happens here: text
goes to the public parsing layers and native calls are taken as they are.

The local tool-call fallback (`runtime-contract.md` §9) applies to native-API adapters only: with
`local_tool_call_parser` set, the provider's content streams through `ChatParser(auto=True)`
(template-less detection, `chatparse.detect.AutoParser`, restricted to one family when a family
is named), so call markup is held back and removed from the content as it streams; the calls it
found are used only when the provider returned no structured call, and then look exactly like
native ones (`id`, `type`, `function.name`, `function.arguments` as JSON text). When the provider
did return calls, native calls win and the recovered ones are listed under
`report["local_fallback"]["ignored"]`. A callable parser decides on the whole content, so with one
the content is released at the end, after it ran (and untouched if the provider returned calls,
since it then does not run). Absent (`None`), nothing of this happens and the content is the
provider's, verbatim. Family names are `chatparse.detect.TOOL_RECOGNIZERS`.

The `on_raw_generation` observation carries region events with offsets whenever text was parsed:
the core's events for a template, and `AutoParser`'s (fields `reasoning` / `content` /
`tool_calls`, each with its `recognizer`) for template-less detection and for the local fallback
in auto or family mode. They come from a second run over the same text, made only when an
observer is set (streamed == one-shot, so it is the same parse).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._parser import ResponseParser
from .._template import Template
from ..detect import TOOL_RECOGNIZERS, AutoParser
from ..errors import RequiredFieldsMissing
from ..openai import ChatParser, random_call_id
from ._hooks import Hooks, RawGeneration

__all__ = ["Generation", "ParseContext", "ToolCall", "ToolParseResult"]


_TOOL_FAMILIES = frozenset(TOOL_RECOGNIZERS)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made, ready to dispatch.

    `arguments` is the parsed JSON object, or None when the runtime's arguments were not a JSON
    object (`arguments_error` says why; dispatch answers the model with that error).
    `arguments_text` is the JSON text exactly as it goes into the assistant message.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    arguments_text: str
    arguments_error: str | None = None

    @classmethod
    def from_openai(cls, call: dict[str, Any]) -> ToolCall:
        """From an OpenAI-shaped call `{"id", "type", "function": {"name", "arguments"}}`."""
        fn = call.get("function") or {}
        text = fn.get("arguments")
        if isinstance(text, dict):
            text = json.dumps(text, ensure_ascii=False)
        text = text if isinstance(text, str) and text.strip() else "{}"
        args: dict[str, Any] | None = None
        error = None
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as e:
            error = f"arguments are not valid JSON ({e})"
        else:
            if isinstance(value, dict):
                args = value
            else:
                error = f"arguments must be a JSON object, got {type(value).__name__}"
        return cls(
            id=str(call.get("id") or random_call_id()),
            name=str(fn.get("name") or ""),
            arguments=args,
            arguments_text=text,
            arguments_error=error,
        )

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_text},
        }


@dataclass(frozen=True)
class Generation:
    """The result of one generation.

    `message` is the assistant message to persist (`role`, `content` or None, `reasoning_content`
    when there was reasoning, `tool_calls` when there were calls; no report). `report` holds what
    the parser reported (`errors`, `dropped`, `unknown_tools`, `recognizer`, `local_fallback`).
    `malformed_calls` lists tool-call regions that did not parse (they are not calls).
    """

    message: dict[str, Any]
    finish_reason: str
    tool_calls: tuple[ToolCall, ...]
    raw_text: str
    parser: str | None
    report: dict[str, Any]
    usage: dict[str, Any] | None
    stream_id: str
    malformed_calls: tuple[dict[str, Any], ...] = ()

    @property
    def content(self) -> str | None:
        return self.message.get("content")

    @property
    def reasoning(self) -> str | None:
        return self.message.get("reasoning_content")


@dataclass(frozen=True)
class ParseContext:
    """What a `local_tool_call_parser` callable is told: the tool names offered this turn."""

    tool_names: tuple[str, ...]


@dataclass(frozen=True)
class ToolParseResult:
    """What a `local_tool_call_parser` callable returns: `calls` as `{"name", "arguments"}` dicts
    (arguments a JSON object) and `cleaned_text`, the text without the calls. No match: no calls
    and `cleaned_text` equal to the input."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    cleaned_text: str = ""


LocalParser = str | Callable[[str, ParseContext], Any] | None


def check_local_parser(value: Any) -> LocalParser:
    """Validate a `local_tool_call_parser` option: None, "auto", "none", a family name or a callable."""
    if value is None or callable(value):
        return value
    if not isinstance(value, str):
        raise TypeError(f"local_tool_call_parser must be a string or a callable, not {type(value).__name__}")
    if value in ("auto", "none"):
        return value
    if value not in _TOOL_FAMILIES:
        raise ValueError(
            f"unknown local_tool_call_parser {value!r}; use 'auto', 'none', a callable, or one of: "
            + ", ".join(sorted(_TOOL_FAMILIES))
        )
    return value


def tool_names(tools: Sequence[dict[str, Any]] | None) -> tuple[str, ...]:
    names = []
    for t in tools or ():
        fn = t.get("function", t) if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return tuple(names)


def new_stream_id() -> str:
    return "gen_" + uuid.uuid4().hex[:24]


class Assembly:
    """Turns one generation's parts into deltas and a `Generation` (see the module docstring).

    Text mode: `template` (a `Template`, or None for template-less detection) and `prefix` (the
    rendered prompt). Native mode: `template=None, native=True`, with `local_parser`.
    """

    def __init__(
        self,
        *,
        adapter: str,
        model: str,
        tools: Sequence[dict[str, Any]] | None,
        hooks: Hooks | None,
        streamed: bool,
        stream_id: str,
        native: bool = False,
        template: Template | None = None,
        template_name: str | None = None,
        prefix: str = "",
        local_parser: LocalParser = None,
    ) -> None:
        self.adapter, self.model = adapter, model
        self.tools = list(tools) if tools else None
        self.hooks = hooks
        self.streamed = streamed
        self.stream_id = stream_id
        self.native = native
        self.template = template
        self.template_name = template_name
        self.prefix = prefix
        self._raw: list[str] = []
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._text: ChatParser | None = None
        self._fallback: ChatParser | None = None  # auto mode for a named / "auto" local parser
        self._recognizers: str | None = None  # the auto mode's families (None: all)
        self._callable: Callable[[str, ParseContext], Any] | None = None
        self._finished = False
        self._engine_finish = "stop"  # the finish_reason the runtime gave (for the observation)
        if not native:
            if template is not None:
                self._text = ChatParser(template=template, prefix=prefix, tools=self.tools)
            else:
                self._text = ChatParser(auto=True, prefix=prefix, tools=self.tools)
        elif local_parser is not None and local_parser != "none":
            if callable(local_parser):
                self._callable = local_parser
            else:
                self._recognizers = None if local_parser == "auto" else local_parser
                self._fallback = ChatParser(auto=True, tools=self.tools, recognizers=self._recognizers)

    # -- parts -------------------------------------------------------------------------------

    def feed(self, part: tuple[Any, ...]) -> list[dict[str, Any]]:
        """One part in, the deltas it completes out (`finish` parts go to `finish`)."""
        kind = part[0]
        if kind == "text":
            if self._text is None:
                raise RuntimeError("raw text from a native-API adapter")
            self._raw.append(part[1])
            return self._text_deltas(self._text.feed(part[1]))
        if kind == "content":
            if not part[1]:
                return []
            self._raw.append(part[1])
            if self._fallback is not None:
                return self._fallback_deltas(self._fallback.feed(part[1]))
            if self._callable is not None:
                return []  # decided on the whole content at the end
            self._content.append(part[1])
            return [{"content": part[1]}]
        if kind == "reasoning":
            if not part[1]:
                return []
            self._reasoning.append(part[1])
            return [{"reasoning_content": part[1]}]
        if kind == "call":
            self._native_call(part[1])
            return []
        raise ValueError(f"unknown generation part {kind!r}")

    def _text_deltas(self, deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [d for d in deltas if "tool_calls" not in d or d["tool_calls"]]

    def _fallback_deltas(self, deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for d in deltas:
            if "content" in d:
                self._content.append(d["content"])
                out.append({"content": d["content"]})
            elif "reasoning_content" in d:
                self._reasoning.append(d["reasoning_content"])
                out.append({"reasoning_content": d["reasoning_content"]})
            # recovered calls are held until we know whether the provider returned any
        return out

    def _native_call(self, entry: dict[str, Any]) -> None:
        index = entry.get("index")
        if not isinstance(index, int):
            index = len(self._calls)
        call = self._calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
        if entry.get("id"):
            call["id"] = entry["id"]
        fn = entry.get("function") or {}
        if fn.get("name"):
            call["name"] = fn["name"]
        args = fn.get("arguments")
        if isinstance(args, dict):
            call["arguments"] = json.dumps(args, ensure_ascii=False)
        elif isinstance(args, str):
            call["arguments"] += args

    # -- the end -----------------------------------------------------------------------------

    def finish(
        self, finish_reason: str, usage: dict[str, Any] | None
    ) -> tuple[list[dict[str, Any]], Generation]:
        """The last deltas and the `Generation`; fires `on_raw_generation` if it is set."""
        if self._finished:
            raise RuntimeError("generation already finished")
        self._finished = True
        finish_reason = finish_reason or "stop"
        self._engine_finish = finish_reason
        if self._text is not None:
            deltas, gen = self._finish_text(finish_reason, usage)
        else:
            deltas, gen = self._finish_native(finish_reason, usage)
        if self.hooks is not None and self.hooks.wants("raw_generation"):
            self.hooks.observe("raw_generation", self._observation(gen))
        return deltas, gen

    def _finish_text(self, finish_reason: str, usage: dict[str, Any] | None) -> tuple[list[dict], Generation]:
        assert self._text is not None
        message, last, reason = self._text.finish(finish_reason)
        deltas = self._text_deltas(last)
        report = message.pop("chatparse", None) or {}
        if self.template is not None:
            parser = f"template:{self.template_name}" if self.template_name else "template"
            malformed = [e for e in report.get("errors", []) if e.get("field") == "tool_calls"]
        else:
            rec = report.get("recognizer")
            parser = f"auto:{rec}" if rec else "auto"
            malformed = [e for e in report.get("errors", []) if e.get("recognizer") in _TOOL_FAMILIES]
        if reason == "length":
            malformed = []  # a call cut off by max_tokens was never written: not the model's mistake
        calls = tuple(ToolCall.from_openai(c) for c in message.get("tool_calls") or ())
        gen = Generation(
            message=_clean_message(message),
            finish_reason=reason,
            tool_calls=calls,
            raw_text="".join(self._raw),
            parser=parser,
            report=report,
            usage=usage,
            stream_id=self.stream_id,
            malformed_calls=tuple(malformed),
        )
        return deltas, gen

    def _finish_native(
        self, finish_reason: str, usage: dict[str, Any] | None
    ) -> tuple[list[dict], Generation]:
        deltas: list[dict[str, Any]] = []
        report: dict[str, Any] = {}
        native = [
            {
                "id": c["id"] or random_call_id(),
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"] or "{}"},
            }
            for _, c in sorted(self._calls.items())
        ]
        recovered: list[dict[str, Any]] = []
        parser: str | None = "native" if native else None
        raw = "".join(self._raw)
        if self._fallback is not None:
            fmessage, last, _ = self._fallback.finish(finish_reason)
            deltas.extend(self._fallback_deltas(last))
            freport = fmessage.get("chatparse") or {}
            found = fmessage.get("tool_calls") or []
            if found and native:
                report["local_fallback"] = {
                    "ignored": found,
                    "reason": "the provider returned structured tool calls; native calls win",
                }
            elif found:
                recovered = found
                report["local_fallback"] = {"calls": len(found), "recognizer": freport.get("recognizer")}
                parser = f"local:{freport.get('recognizer')}"
            if freport.get("errors"):
                report["errors"] = freport["errors"]
        elif self._callable is not None:
            if native:
                text = raw
            else:
                text, recovered, parser = self._run_callable(raw, report)
            if text:
                self._content.append(text)
                deltas.append({"content": text})
        calls = native or recovered
        if calls and finish_reason in ("stop", "tool_calls"):
            finish_reason = "tool_calls"
        elif finish_reason == "tool_calls":
            finish_reason = "stop"
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if calls:
            message["tool_calls"] = calls
        deltas.extend({"tool_calls": [{"index": i, **c}]} for i, c in enumerate(calls))
        gen = Generation(
            message=message,
            finish_reason=finish_reason,
            tool_calls=tuple(ToolCall.from_openai(c) for c in calls),
            raw_text=raw,
            parser=parser,
            report=report,
            usage=usage,
            stream_id=self.stream_id,
        )
        return deltas, gen

    def _run_callable(self, raw: str, report: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str | None]:
        assert self._callable is not None
        name = getattr(self._callable, "__name__", type(self._callable).__name__)
        try:
            result = self._callable(raw, ParseContext(tool_names(self.tools)))
            if isinstance(result, dict):
                found, cleaned = result.get("calls") or [], result.get("cleaned_text", raw)
            else:
                found, cleaned = getattr(result, "calls", None) or [], getattr(result, "cleaned_text", raw)
            calls = []
            for c in found:
                args = c.get("arguments")
                if not isinstance(c.get("name"), str) or not c["name"]:
                    raise ValueError(f"a call without a name: {c!r}")
                if not isinstance(args, dict):
                    args = {}  # the contract: a non-object payload becomes {}
                calls.append(
                    {
                        "id": random_call_id(),
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(args, ensure_ascii=False)},
                    }
                )
            if not isinstance(cleaned, str):
                raise ValueError(f"cleaned_text must be a string, got {type(cleaned).__name__}")
        except Exception as e:  # a parser never raises: its failure is "no match", reported
            report["errors"] = [{"parser": name, "error": f"{type(e).__name__}: {e}", "text": raw}]
            return raw, [], None
        if not calls:
            return raw, [], None
        report["local_fallback"] = {"calls": len(calls), "parser": name}
        return cleaned, calls, f"callable:{name}"

    # -- observation -------------------------------------------------------------------------

    def _observation(self, gen: Generation) -> RawGeneration:
        events: list[dict[str, Any]] = []
        input_text = gen.raw_text
        if self._fallback is not None or (self._text is not None and self.template is None):
            # Auto mode: the detect layer's region events, from a run over the same text (for a
            # native-API adapter: the content the provider returned, with the named family).
            auto = AutoParser(
                tools=self.tools,
                recognizers=self._recognizers,
                prefix=self.prefix if self._text is not None else None,
            )
            events = [dict(e) for e in auto.initial_events]
            events.extend(dict(e) for e in auto.feed(gen.raw_text))
            events.extend(dict(e) for e in auto.finalize(self._engine_finish)[1])
            input_text = auto.input_text
        elif self.template is not None:
            # The region events, with offsets, from the core run over the same prompt and text.
            core = ResponseParser(self.template, prefix=self.prefix, tools=list(self.tools or ()) or None)
            events = [dict(e) for e in core.initial_events]
            events.extend(dict(e) for e in core.feed(gen.raw_text))
            try:
                _, last = core.finalize()
            except RequiredFieldsMissing as e:
                last = e.events
            events.extend(dict(e) for e in last)
            input_text = core.input_text
        reasoning = [gen.reasoning] if gen.reasoning else []
        errors = list(gen.report.get("errors", []))
        return RawGeneration(
            adapter=self.adapter,
            model=self.model,
            raw_text=gen.raw_text,
            cleaned_text=gen.content or "",
            reasoning=reasoning,
            tool_calls=[c.to_openai() for c in gen.tool_calls],
            parser=gen.parser,
            events=events,
            input_text=input_text,
            finish_reason=gen.finish_reason,
            streamed=self.streamed,
            stream_id=self.stream_id,
            errors=errors,
        )


def _clean_message(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("reasoning_content"):
        out["reasoning_content"] = message["reasoning_content"]
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out
