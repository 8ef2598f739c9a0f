"""Upstream engines: one request-body builder per API, and their answers as typed events.

Every upstream answer, streamed or not, becomes the same small event vocabulary (frozen dataclasses
below), so the streamed and the non-streamed paths share one pipeline:

* `Text`: raw model output (special tokens included) to be parsed with the template;
* `Reasoning` / `Content`: text the upstream already separated (structured chat APIs);
* `Call`: a tool-call delta entry in Chat Completions shape (`index`, `id`, `function`);
* `UpstreamWarning`: something the upstream sent that could not be used (reported, never dropped silently);
* `Finish`: the end, with the upstream's finish reason and Chat-shaped usage or None.

`Upstream.open(call)` is an async context manager: it sends the request and returns once the
engine accepted it (status and headers in), so every failure before the first byte of the answer is
an `UpstreamError` raised on entry, which the server answers with an HTTP error. Iterating the opened
answer yields lists of events, one list per network read. Failures after that raise `UpstreamError`
from the iteration: the server then ends the stream it already started with an error event.

Status mapping: 502 when the upstream refused the connection, answered with an error or broke the
stream, 504 when it timed out, 400 when it rejected the request itself (e.g. a prompt longer than the
context), 503 when this server is shutting down. Messages never contain the upstream's URL (clients
of a proxy have no business knowing it); the request log line has it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from ..openai import random_call_id
from . import _http
from ._json import dumps, loads_upstream

API_KINDS = ("completions", "ollama-generate", "chat-raw", "chat", "ollama-chat")
"""`completions` and `ollama-generate` take a prompt chatparse renders (mode a); `chat-raw` is a chat
endpoint returning raw text (mode b); `chat` and `ollama-chat` parse calls themselves (mode c)."""

PROMPT_KINDS = ("completions", "ollama-generate")
STRUCTURED_KINDS = ("chat", "ollama-chat")

_PATHS = {
    "completions": "/v1/completions",
    "chat-raw": "/v1/chat/completions",
    "chat": "/v1/chat/completions",
    "ollama-generate": "/api/generate",
    "ollama-chat": "/api/chat",
}
_SAMPLING = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")
_CLIENT_ERRORS = (400, 413, 422)
_ERROR_BODY_LIMIT = 64 * 1024


# ------------------------------------------------------------------------------------------------
# events


@dataclass(frozen=True, slots=True)
class Text:
    """Raw model output, special tokens included."""

    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning the upstream already separated."""

    text: str


@dataclass(frozen=True, slots=True)
class Content:
    """Content the upstream already separated (structured chat APIs)."""

    text: str


@dataclass(frozen=True, slots=True)
class Call:
    """A tool-call delta entry in Chat Completions shape (`index`, `id`, `type`, `function`)."""

    entry: dict[str, Any]


@dataclass(frozen=True, slots=True)
class UpstreamWarning:
    """Something the upstream sent that could not be used."""

    message: str


@dataclass(frozen=True, slots=True)
class Finish:
    """The end of the answer: the upstream's finish reason and its usage (Chat shape) or None."""

    reason: str
    usage: dict[str, int] | None


Event = Text | Reasoning | Content | Call | UpstreamWarning | Finish


class UpstreamError(Exception):
    """The upstream could not give an answer: `status` is what the client gets (400/502/503/504)."""

    def __init__(self, status: int, message: str, kind: str, upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.upstream_status = upstream_status


@dataclass
class UpstreamCall:
    """One request to send: the URL path and the JSON body."""

    path: str
    body: dict[str, Any]


def base_url(url: str) -> str:
    """The engine's root URL: `http://h:8000/v1/` and `http://h:8000` both give `http://h:8000`."""
    url = url.strip().rstrip("/")
    for suffix in ("/v1", "/api"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--upstream must be an http:// or https:// URL, got {url!r}")
    return url


# ------------------------------------------------------------------------------------------------
# request bodies: one function per upstream API


def _ollama_options(req: dict[str, Any], stop: list[str] | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if req.get("max_tokens") is not None:
        options["num_predict"] = req["max_tokens"]
    if stop:
        options["stop"] = stop
    for key in _SAMPLING:
        if req.get(key) is not None:
            options[key] = req[key]
    return options


def _openai_common(req: dict[str, Any], model: str, stop: list[str] | None, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "stream": stream}
    if req.get("max_tokens") is not None:
        body["max_tokens"] = req["max_tokens"]
    if stop:
        body["stop"] = stop
    for key in _SAMPLING:
        if req.get(key) is not None:
            body[key] = req[key]
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _ollama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        m = dict(m)
        content = m.get("content")
        if isinstance(content, list):
            m["content"] = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
        elif content is None:
            m["content"] = ""
        calls = m.get("tool_calls")
        if calls:
            converted = []
            for c in calls:
                fn = dict(c.get("function") or {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    with contextlib.suppress(ValueError):
                        fn["arguments"] = json.loads(args)
                converted.append({"function": fn})
            m["tool_calls"] = converted
        for key in ("reasoning_content", "reasoning"):
            if m.get(key) and not m.get("thinking"):
                m["thinking"] = m[key]
            m.pop(key, None)
        out.append(m)
    return out


def completions_body(
    req: dict[str, Any], *, model: str, prompt: str | None, stop: list[str] | None, stream: bool
) -> dict[str, Any]:
    """`/v1/completions` (vLLM, SGLang, llama.cpp, LM Studio): the rendered prompt, raw output.

    Asks for the text with special tokens kept (`skip_special_tokens: false`, honoured by vLLM and
    SGLang, ignored elsewhere) and tells vLLM not to add a BOS token the prompt already has."""
    body = _openai_common(req, model, stop, stream)
    body.update(prompt=prompt, skip_special_tokens=False, spaces_between_special_tokens=False)
    body["add_special_tokens"] = False
    return body


def ollama_generate_body(
    req: dict[str, Any], *, model: str, prompt: str | None, stop: list[str] | None, stream: bool
) -> dict[str, Any]:
    """Ollama `/api/generate` with `raw: true` (no template of Ollama's own) and the rendered prompt."""
    body: dict[str, Any] = {"model": model, "prompt": prompt, "raw": True, "stream": stream}
    options = _ollama_options(req, stop)
    if options:
        body["options"] = options
    return body


def chat_raw_body(
    req: dict[str, Any], *, model: str, prompt: str | None, stop: list[str] | None, stream: bool
) -> dict[str, Any]:
    """A chat endpoint asked for raw text: its own tool parser stays off (`tool_choice: "none"`
    keeps the tools in the prompt without parsing them) and special tokens are kept."""
    body = _openai_common(req, model, stop, stream)
    body["messages"] = req["messages"]
    if req.get("chat_template_kwargs"):
        body["chat_template_kwargs"] = req["chat_template_kwargs"]
    if req.get("reasoning_effort") is not None:
        body["reasoning_effort"] = req["reasoning_effort"]
    if req.get("tools"):
        body["tools"] = req["tools"]
        body["tool_choice"] = "none"
    body.update(skip_special_tokens=False, spaces_between_special_tokens=False)
    return body


def chat_body(
    req: dict[str, Any], *, model: str, prompt: str | None, stop: list[str] | None, stream: bool
) -> dict[str, Any]:
    """A chat endpoint that parses calls itself: tools, tool_choice and response_format pass through."""
    body = _openai_common(req, model, stop, stream)
    body["messages"] = req["messages"]
    if req.get("chat_template_kwargs"):
        body["chat_template_kwargs"] = req["chat_template_kwargs"]
    if req.get("reasoning_effort") is not None:
        body["reasoning_effort"] = req["reasoning_effort"]
    for key in ("tools", "tool_choice", "parallel_tool_calls", "response_format"):
        if req.get(key) is not None and (key != "tool_choice" or req.get("tools")):
            body[key] = req[key]
    return body


def ollama_chat_body(
    req: dict[str, Any], *, model: str, prompt: str | None, stop: list[str] | None, stream: bool
) -> dict[str, Any]:
    """Ollama `/api/chat` (Ollama parses calls): messages converted to Ollama's shape."""
    body: dict[str, Any] = {"model": model, "messages": _ollama_messages(req["messages"]), "stream": stream}
    if req.get("tools") and req.get("tool_choice") != "none":
        body["tools"] = req["tools"]
    options = _ollama_options(req, stop)
    if options:
        body["options"] = options
    think = (req.get("chat_template_kwargs") or {}).get("enable_thinking")
    if isinstance(think, bool):
        body["think"] = think
    return body


BODY_BUILDERS: dict[str, Callable[..., dict[str, Any]]] = {
    "completions": completions_body,
    "ollama-generate": ollama_generate_body,
    "chat-raw": chat_raw_body,
    "chat": chat_body,
    "ollama-chat": ollama_chat_body,
}
"""The request-body builder of each upstream API (keyword arguments `model`, `prompt`, `stop`,
`stream`); a generation constraint for a request is attached in these functions."""


def build_call(
    kind: str,
    req: dict[str, Any],
    *,
    model: str,
    prompt: str | None,
    stop: list[str] | None,
    stream: bool,
    passthrough: dict[str, Any] | None = None,
    constraint: Any = None,
) -> UpstreamCall:
    """The upstream request for a validated Chat Completions request `req`: `BODY_BUILDERS[kind]`,
    the generation `constraint` in that API's fields (`_constrain.CONSTRAINT_FIELDS`), plus the
    request fields the operator allowed through verbatim (`--passthrough`)."""
    body = BODY_BUILDERS[kind](req, model=model, prompt=prompt, stop=stop, stream=stream)
    if constraint is not None:
        from ._constrain import CONSTRAINT_FIELDS

        body.update(CONSTRAINT_FIELDS[kind](constraint))
    for key, value in (passthrough or {}).items():
        body.setdefault(key, value)
    return UpstreamCall(_PATHS[kind], body)


# ------------------------------------------------------------------------------------------------
# answers


def _usage(data: Any) -> dict[str, int] | None:
    if not isinstance(data, dict):
        return None
    p, c = data.get("prompt_tokens"), data.get("completion_tokens")
    if not isinstance(p, int) or not isinstance(c, int):
        return None
    total = data.get("total_tokens")
    return {
        "prompt_tokens": p,
        "completion_tokens": c,
        "total_tokens": total if isinstance(total, int) else p + c,
    }


def _ollama_usage(data: dict[str, Any]) -> dict[str, int] | None:
    p, c = data.get("prompt_eval_count"), data.get("eval_count")
    if not isinstance(p, int) and not isinstance(c, int):
        return None
    p = p if isinstance(p, int) else 0
    c = c if isinstance(c, int) else 0
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _error_text(data: Any) -> str | None:
    """The message of an error object (OpenAI `{"error": {"message"}}`, Ollama `{"error"}`, FastAPI `detail`)."""
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:500]
    return None


def _error_message(raw: bytes) -> str:
    try:
        data, _ = loads_upstream(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:500] or "(empty body)"
    return _error_text(data) or raw.decode("utf-8", "replace").strip()[:500]


def status_error(status: int, raw: bytes) -> UpstreamError:
    """The error for an upstream HTTP error answer."""
    message = _error_message(raw)
    if status in _CLIENT_ERRORS:
        return UpstreamError(
            400, f"the upstream rejected the request: {message}", "upstream_rejected", status
        )
    return UpstreamError(502, f"the upstream answered HTTP {status}: {message}", "upstream_error", status)


def _short(data: Any) -> str:
    return dumps(data)[:200].decode("utf-8", "replace")


class _ChoiceReader:
    """Turns Chat Completions or Completions `choices[0]` objects (or Ollama lines) into events."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.finish: str | None = None
        self.usage: dict[str, int] | None = None
        self._ollama_index = 0

    def openai(self, data: Any, out: list[Event], *, streamed: bool) -> None:
        if not isinstance(data, dict):
            out.append(UpstreamWarning(f"the upstream sent a non-object JSON value: {_short(data)}"))
            return
        if "error" in data and not data.get("choices"):
            raise UpstreamError(
                502,
                f"the upstream reported an error: {_error_text(data) or _short(data)}",
                "upstream_error",
            )
        if "usage" in data:
            usage = _usage(data["usage"])
            if usage is not None:
                self.usage = usage
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return
        choice = choices[0]
        if not isinstance(choice, dict):
            return
        if self.kind == "completions":
            text = choice.get("text")
            if isinstance(text, str) and text:
                out.append(Text(text))
        else:
            part = choice.get("delta" if streamed else "message")
            if isinstance(part, dict):
                self._message_part(part, out)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self.finish = reason

    def _message_part(self, part: dict[str, Any], out: list[Event]) -> None:
        reasoning = part.get("reasoning_content")
        if reasoning is None:
            reasoning = part.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            out.append(Reasoning(reasoning))
        content = part.get("content")
        if isinstance(content, str) and content:
            out.append(Text(content) if self.kind == "chat-raw" else Content(content))
        calls = part.get("tool_calls")
        if isinstance(calls, list):
            for i, entry in enumerate(calls):
                if isinstance(entry, dict):
                    entry = dict(entry)
                    entry.setdefault("index", i)
                    fn = entry.get("function")
                    if isinstance(fn, dict) and isinstance(fn.get("arguments"), dict):
                        entry["function"] = {**fn, "arguments": dumps(fn["arguments"]).decode()}
                    out.append(Call(entry))

    def ollama(self, data: Any, out: list[Event]) -> None:
        if not isinstance(data, dict):
            out.append(UpstreamWarning(f"the upstream sent a non-object JSON value: {_short(data)}"))
            return
        if data.get("error"):
            raise UpstreamError(502, f"the upstream reported an error: {data['error']}", "upstream_error")
        if self.kind == "ollama-generate":
            text = data.get("response")
            if isinstance(text, str) and text:
                out.append(Text(text))
            thinking = data.get("thinking")
            if isinstance(thinking, str) and thinking:
                out.append(Reasoning(thinking))
        else:
            msg = data.get("message")
            if isinstance(msg, dict):
                thinking = msg.get("thinking")
                if isinstance(thinking, str) and thinking:
                    out.append(Reasoning(thinking))
                content = msg.get("content")
                if isinstance(content, str) and content:
                    out.append(Content(content))
                for call in msg.get("tool_calls") or ():
                    fn = call.get("function") if isinstance(call, dict) else None
                    if not isinstance(fn, dict):
                        continue
                    args = fn.get("arguments", {})
                    entry = {
                        "index": self._ollama_index,
                        "id": call.get("id") or random_call_id(),
                        "type": "function",
                        "function": {
                            "name": fn.get("name"),
                            "arguments": args if isinstance(args, str) else dumps(args).decode(),
                        },
                    }
                    self._ollama_index += 1
                    out.append(Call(entry))
        if data.get("done"):
            reason = data.get("done_reason")
            self.finish = reason if isinstance(reason, str) and reason else "stop"
            self.usage = _ollama_usage(data) or self.usage

    def end(self, out: list[Event]) -> None:
        if self.finish is None:
            raise UpstreamError(
                502,
                "the upstream answer ended without a finish reason (connection closed mid-response)",
                "upstream_disconnected",
            )
        reason = self.finish
        if reason == "eos" or reason == "stop_sequence":
            reason = "stop"
        out.append(Finish(reason, self.usage))


def _translate(
    e: _http.TransportError, timeout: float | None, connect_timeout: float | None
) -> UpstreamError:
    if isinstance(e, _http.ConnectTimeout):
        return UpstreamError(
            504, f"the upstream timed out while connecting (limit {connect_timeout:g} s)", "upstream_timeout"
        )
    if isinstance(e, _http.ReadTimeout):
        return UpstreamError(
            504,
            f"the upstream timed out while waiting for the answer (limit {timeout:g} s)",
            "upstream_timeout",
        )
    if isinstance(e, _http.ConnectFailed):
        return UpstreamError(502, "cannot connect to the upstream", "upstream_unreachable")
    return UpstreamError(502, f"the upstream broke the connection mid-response: {e}", "upstream_disconnected")


class _LineSplitter:
    """Lines of a byte stream, each found by searching only bytes not searched before (linear in
    the stream), and each at most `limit` bytes (`UpstreamError` past it: memory stays bounded)."""

    __slots__ = ("limit", "pending", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending: list[bytes] = []
        self.size = 0

    def feed(self, data: bytes, lines: list[bytes]) -> None:
        start = 0
        end = data.find(b"\n")
        while end >= 0:
            if self.pending:
                self.pending.append(data[start:end])
                line = b"".join(self.pending)
                self.pending = []
                self.size = 0
            else:
                line = data[start:end]
            if len(line) > self.limit:
                self._too_long()
            lines.append(line)
            start = end + 1
            end = data.find(b"\n", start)
        if start < len(data):
            rest = data[start:] if start else data
            self.size += len(rest)
            if self.size > self.limit:
                self._too_long()
            self.pending.append(rest)

    def tail(self) -> bytes:
        line = b"".join(self.pending)
        self.pending = []
        self.size = 0
        return line

    def _too_long(self) -> None:
        raise UpstreamError(
            502,
            f"the upstream sent a line longer than the limit of {self.limit} bytes (--max-upstream-line)",
            "upstream_line_too_long",
        )


class UpstreamAnswer:
    """An answer the upstream accepted; iterate it for event lists (see the module docstring)."""

    def __init__(self, upstream: Upstream, response: _http.Response) -> None:
        self._upstream = upstream
        self.response = response

    def abort(self, error: UpstreamError) -> None:
        """End the answer from outside (shutdown): the iteration raises `error` at its next wait."""
        self.response.abort(error)

    async def read_whole(self) -> list[Event]:
        """A non-streamed answer (one JSON document), as the event list a stream would have given."""
        up = self._upstream
        try:
            raw = await self.response.read(up.max_line)
        except _http.TransportError as e:
            raise _translate(e, up.read_timeout, up.connect_timeout) from None
        try:
            data, warning = loads_upstream(raw)
        except ValueError:
            text = raw.decode("utf-8", "replace")[:200]
            raise UpstreamError(502, f"the upstream answer is not JSON: {text!r}", "upstream_error") from None
        reader = _ChoiceReader(up.kind)
        out: list[Event] = [] if warning is None else [UpstreamWarning(warning)]
        if up.ollama:
            reader.ollama(data, out)
        else:
            reader.openai(data, out, streamed=False)
        reader.end(out)
        return out

    async def __aiter__(self) -> AsyncIterator[list[Event]]:
        up = self._upstream
        reader = _ChoiceReader(up.kind)
        lines_of = _LineSplitter(up.max_line)
        handle = up._line
        done = False
        try:
            async for pieces in self.response.chunks():
                lines: list[bytes] = []
                for piece in pieces:
                    lines_of.feed(piece, lines)
                if not lines:
                    continue
                out: list[Event] = []
                for line in lines:
                    if handle(line, reader, out):
                        done = True
                        break
                if out:
                    yield out
                if done:
                    break
            if not done:
                rest = lines_of.tail()
                if rest.strip():
                    out = []
                    handle(rest, reader, out)
                    if out:
                        yield out
        except _http.TransportError as e:
            raise _translate(e, up.read_timeout, up.connect_timeout) from None
        out = []
        reader.end(out)
        yield out


class Upstream:
    """An engine endpoint reached through a shared `_http.HTTPClient`."""

    def __init__(
        self,
        url: str,
        kind: str,
        *,
        client: _http.HTTPClient,
        api_key: str | None = None,
        read_timeout: float | None = None,
        connect_timeout: float | None = None,
        max_line: int = 16 * 1024 * 1024,
    ) -> None:
        if kind not in API_KINDS:
            raise ValueError(f"upstream API must be one of {', '.join(API_KINDS)}, got {kind!r}")
        self.url = base_url(url)
        self.kind = kind
        self.client = client
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self.max_line = max_line
        self.headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ]
        if api_key:
            self.headers.append(("Authorization", f"Bearer {api_key}"))
        self.ollama = kind.startswith("ollama")

    async def _send(self, call: UpstreamCall) -> _http.Response:
        try:
            return await self.client.request("POST", self.url + call.path, dumps(call.body), self.headers)
        except _http.TransportError as e:
            raise _translate(e, self.read_timeout, self.connect_timeout) from None

    @contextlib.asynccontextmanager
    async def open(self, call: UpstreamCall) -> AsyncIterator[UpstreamAnswer]:
        """Send `call`; enter once the upstream accepted it (`UpstreamError` on entry otherwise)."""
        response = await self._send(call)
        try:
            if response.status >= 400:
                try:
                    raw = await response.read(_ERROR_BODY_LIMIT)
                except _http.TransportError:
                    raw = b""
                raise status_error(response.status, raw)
            yield UpstreamAnswer(self, response)
        finally:
            response.close()

    async def complete(self, call: UpstreamCall) -> list[Event]:
        """A non-streamed answer, as the event list a stream would have given."""
        async with self.open(call) as answer:
            return await answer.read_whole()

    def _line(self, raw: bytes, reader: _ChoiceReader, out: list[Event]) -> bool:
        """Handle one line of the upstream's answer; True at its end (`[DONE]`, Ollama's `done`)."""
        if self.ollama:
            payload = raw.strip()
            if not payload:
                return False
        else:
            if not raw.startswith(b"data:"):
                return False  # SSE comments, event names, blank separators
            payload = raw[5:].strip()
            if payload == b"[DONE]":
                return True
        try:
            data, warning = loads_upstream(payload)
        except ValueError:
            text = payload.decode("utf-8", "replace")
            out.append(UpstreamWarning(f"the upstream sent a line that is not JSON: {text[:200]!r}"))
            return False
        if warning is not None:
            out.append(UpstreamWarning(warning))
        if self.ollama:
            reader.ollama(data, out)
            return reader.finish is not None
        reader.openai(data, out, streamed=True)
        return False
