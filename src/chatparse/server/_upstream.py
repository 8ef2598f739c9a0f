"""Upstream engines: request bodies for each raw or structured API, and their answers as events.

Every upstream answer, streamed or not, becomes the same small event vocabulary, so the streamed and
the non-streamed paths share one pipeline:

* `("text", s)`: raw model output (special tokens included) to be parsed with the template;
* `("reasoning", s)`: reasoning the upstream already separated;
* `("content", s)`: content the upstream already separated (structured chat APIs only);
* `("call", entry)`: a tool-call delta entry in Chat Completions shape (`index`, `id`, `function`);
* `("warning", s)`: something the upstream sent that could not be used (reported, never dropped silently);
* `("finish", reason, usage)`: the end, with the upstream's finish reason and Chat-shaped usage or None.

Transport failures become `UpstreamError` with the status the client should get: 502 when the upstream
refused the connection, answered with an error or broke the stream, 504 when it timed out; 400 when it
rejected the request itself (e.g. a prompt longer than the context).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import httpx

from ..openai import random_call_id

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


class UpstreamError(Exception):
    """The upstream could not give an answer: `status` is what the client gets (400/502/504)."""

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


def _ollama_options(req: dict[str, Any], stop: list[str] | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if req.get("max_tokens") is not None:
        options["num_predict"] = req["max_tokens"]
    if stop:
        options["stop"] = stop
    for key in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
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


def build_call(
    kind: str,
    req: dict[str, Any],
    *,
    model: str,
    prompt: str | None,
    stop: list[str] | None,
    stream: bool,
) -> UpstreamCall:
    """The upstream request for a validated Chat Completions request `req`.

    Raw kinds ask for the text with special tokens kept (`skip_special_tokens: false`, honoured by
    vLLM and SGLang, ignored elsewhere) and never let the engine parse tools; prompt kinds also
    tell vLLM not to add a BOS token the rendered prompt already has (`add_special_tokens: false`).
    """
    path = _PATHS[kind]
    if kind == "completions":
        body = _openai_common(req, model, stop, stream)
        body.update(prompt=prompt, skip_special_tokens=False, spaces_between_special_tokens=False)
        body["add_special_tokens"] = False
        return UpstreamCall(path, body)
    if kind == "ollama-generate":
        body = {"model": model, "prompt": prompt, "raw": True, "stream": stream}
        options = _ollama_options(req, stop)
        if options:
            body["options"] = options
        return UpstreamCall(path, body)
    if kind == "ollama-chat":
        body = {"model": model, "messages": _ollama_messages(req["messages"]), "stream": stream}
        if req.get("tools") and req.get("tool_choice") != "none":
            body["tools"] = req["tools"]
        options = _ollama_options(req, stop)
        if options:
            body["options"] = options
        think = (req.get("chat_template_kwargs") or {}).get("enable_thinking")
        if isinstance(think, bool):
            body["think"] = think
        return UpstreamCall(path, body)
    body = _openai_common(req, model, stop, stream)
    body["messages"] = req["messages"]
    if req.get("chat_template_kwargs"):
        body["chat_template_kwargs"] = req["chat_template_kwargs"]
    if req.get("reasoning_effort") is not None:
        body["reasoning_effort"] = req["reasoning_effort"]
    if kind == "chat-raw":
        # The engine must return the text as generated: its own tool parser stays off
        # (tool_choice "none" keeps tools in the prompt without parsing them).
        if req.get("tools"):
            body["tools"] = req["tools"]
            body["tool_choice"] = "none"
        body.update(skip_special_tokens=False, spaces_between_special_tokens=False)
        return UpstreamCall(path, body)
    for key in ("tools", "tool_choice", "parallel_tool_calls", "response_format"):
        if req.get(key) is not None and (key != "tool_choice" or req.get("tools")):
            body[key] = req[key]
    return UpstreamCall(path, body)


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
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500] or "(empty body)"
    return _error_text(data) or text[:500]


def status_error(status: int, raw: bytes) -> UpstreamError:
    """The error for an upstream HTTP error answer."""
    message = _error_message(raw)
    if status in _CLIENT_ERRORS:
        return UpstreamError(
            400, f"the upstream rejected the request: {message}", "upstream_rejected", status
        )
    return UpstreamError(502, f"the upstream answered HTTP {status}: {message}", "upstream_error", status)


class _ChoiceReader:
    """Turns Chat Completions or Completions `choices[0]` objects into events."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.finish: str | None = None
        self.usage: dict[str, int] | None = None
        self._ollama_index = 0

    def openai(self, data: Any, out: list[tuple[Any, ...]], *, streamed: bool) -> None:
        if not isinstance(data, dict):
            out.append(("warning", f"the upstream sent a non-object JSON value: {json.dumps(data)[:200]}"))
            return
        if "error" in data and not data.get("choices"):
            raise UpstreamError(
                502,
                f"the upstream reported an error: {_error_text(data) or json.dumps(data)[:500]}",
                "upstream_error",
            )
        usage = _usage(data.get("usage"))
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
                out.append(("text", text))
        else:
            part = choice.get("delta" if streamed else "message")
            if isinstance(part, dict):
                self._message_part(part, out)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self.finish = reason

    def _message_part(self, part: dict[str, Any], out: list[tuple[Any, ...]]) -> None:
        reasoning = part.get("reasoning_content")
        if reasoning is None:
            reasoning = part.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            out.append(("reasoning", reasoning))
        content = part.get("content")
        if isinstance(content, str) and content:
            out.append(("text" if self.kind == "chat-raw" else "content", content))
        calls = part.get("tool_calls")
        if isinstance(calls, list):
            for i, entry in enumerate(calls):
                if isinstance(entry, dict):
                    entry = dict(entry)
                    entry.setdefault("index", i)
                    fn = entry.get("function")
                    if isinstance(fn, dict) and isinstance(fn.get("arguments"), dict):
                        entry["function"] = {
                            **fn,
                            "arguments": json.dumps(fn["arguments"], ensure_ascii=False),
                        }
                    out.append(("call", entry))

    def ollama(self, data: Any, out: list[tuple[Any, ...]]) -> None:
        if not isinstance(data, dict):
            out.append(("warning", f"the upstream sent a non-object JSON value: {json.dumps(data)[:200]}"))
            return
        if data.get("error"):
            raise UpstreamError(502, f"the upstream reported an error: {data['error']}", "upstream_error")
        if self.kind == "ollama-generate":
            text = data.get("response")
            if isinstance(text, str) and text:
                out.append(("text", text))
            thinking = data.get("thinking")
            if isinstance(thinking, str) and thinking:
                out.append(("reasoning", thinking))
        else:
            msg = data.get("message")
            if isinstance(msg, dict):
                thinking = msg.get("thinking")
                if isinstance(thinking, str) and thinking:
                    out.append(("reasoning", thinking))
                content = msg.get("content")
                if isinstance(content, str) and content:
                    out.append(("content", content))
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
                            "arguments": args
                            if isinstance(args, str)
                            else json.dumps(args, ensure_ascii=False),
                        },
                    }
                    self._ollama_index += 1
                    out.append(("call", entry))
        if data.get("done"):
            reason = data.get("done_reason")
            self.finish = reason if isinstance(reason, str) and reason else "stop"
            self.usage = _ollama_usage(data) or self.usage

    def end(self, out: list[tuple[Any, ...]]) -> None:
        if self.finish is None:
            raise UpstreamError(
                502,
                "the upstream answer ended without a finish reason (connection closed mid-response)",
                "upstream_disconnected",
            )
        reason = self.finish
        if reason == "eos" or reason == "stop_sequence":
            reason = "stop"
        out.append(("finish", reason, self.usage))


def _translate(e: httpx.HTTPError, url: str, timeout: float | None) -> UpstreamError:
    if isinstance(e, httpx.TimeoutException):
        what = "connecting" if isinstance(e, httpx.ConnectTimeout) else "waiting for the answer"
        return UpstreamError(
            504, f"the upstream {url} timed out while {what} (limit {timeout} s)", "upstream_timeout"
        )
    if isinstance(e, httpx.ConnectError):
        return UpstreamError(502, f"cannot connect to the upstream {url}: {e}", "upstream_unreachable")
    return UpstreamError(
        502,
        f"the upstream {url} broke the connection mid-response: {type(e).__name__}: {e}",
        "upstream_disconnected",
    )


class Upstream:
    """An engine endpoint reached through a shared `httpx.AsyncClient`."""

    def __init__(
        self,
        url: str,
        kind: str,
        *,
        client: httpx.AsyncClient,
        api_key: str | None = None,
        read_timeout: float | None = None,
    ) -> None:
        if kind not in API_KINDS:
            raise ValueError(f"upstream API must be one of {', '.join(API_KINDS)}, got {kind!r}")
        self.url = base_url(url)
        self.kind = kind
        self.client = client
        self.read_timeout = read_timeout
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    @property
    def ollama(self) -> bool:
        return self.kind.startswith("ollama")

    async def complete(self, call: UpstreamCall) -> list[tuple[Any, ...]]:
        """A non-streamed answer, as the event list a stream would have given."""
        url = self.url + call.path
        try:
            resp = await self.client.post(url, json=call.body, headers=self.headers)
        except httpx.HTTPError as e:
            raise _translate(e, url, self.read_timeout) from e
        if resp.status_code >= 400:
            raise status_error(resp.status_code, resp.content)
        try:
            data = resp.json()
        except ValueError as e:
            raise UpstreamError(
                502, f"the upstream answer is not JSON: {resp.text[:200]!r}", "upstream_error"
            ) from e
        reader = _ChoiceReader(self.kind)
        out: list[tuple[Any, ...]] = []
        if self.ollama:
            reader.ollama(data, out)
        else:
            reader.openai(data, out, streamed=False)
        reader.end(out)
        return out

    def _line(self, raw: bytes, reader: _ChoiceReader, out: list[tuple[Any, ...]]) -> bool:
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
            data = json.loads(payload)
        except ValueError:
            text = payload.decode("utf-8", "replace")
            out.append(("warning", f"the upstream sent a line that is not JSON: {text[:200]!r}"))
            return False
        if self.ollama:
            reader.ollama(data, out)
            return reader.finish is not None
        reader.openai(data, out, streamed=True)
        return False

    async def stream(self, call: UpstreamCall) -> AsyncGenerator[list[tuple[Any, ...]], None]:
        """Yields `[("open",)]` once the upstream accepted the request, then event batches per line."""
        url = self.url + call.path
        reader = _ChoiceReader(self.kind)
        try:
            async with self.client.stream("POST", url, json=call.body, headers=self.headers) as resp:
                if resp.status_code >= 400:
                    raise status_error(resp.status_code, await resp.aread())
                yield [("open",)]
                # Lines are split here from the raw bytes, and every line of one network read is
                # handled as one batch (one write to the client), which matters under load.
                pending = b""
                done = False
                async for data in resp.aiter_bytes():
                    pending += data
                    if b"\n" not in data:
                        continue
                    lines = pending.split(b"\n")
                    pending = lines.pop()
                    out: list[tuple[Any, ...]] = []
                    for line in lines:
                        done = self._line(line, reader, out)
                        if done:
                            break
                    if out:
                        yield out
                    if done:
                        break
                if not done and pending.strip():
                    out = []
                    self._line(pending, reader, out)
                    if out:
                        yield out
        except httpx.HTTPError as e:
            raise _translate(e, url, self.read_timeout) from e
        out = []
        reader.end(out)
        yield out
