"""`OllamaRuntime`: Ollama's native chat API (`POST /api/chat`), over `httpx`.

Ollama parses tool calls itself and returns them as `message.tool_calls` (`{"function": {"name",
"arguments": {...}}}`, arguments an object, no ids): they are trusted as they are and get
`call_<24>` ids. Reasoning arrives in `message.thinking`. `local_tool_call_parser` recovers a call
the model wrote in a shape Ollama did not lift, only when Ollama returned no structured call
(Ollama's own parsing is known to miss small models' calls: ollama/ollama#7824, #17274).

Options mapping: `max_tokens` -> `options.num_predict` (native fallback `num_predict`); greedy ->
`options.temperature: 0` and no `top_k` / `top_p`; top-k -> `temperature`, `top_k`; top-p ->
`temperature`, `top_p`; `seed`, `stop` -> `options`; `enable_thinking` -> top-level `think`,
always (native fallback `think`). Other native options go into `options`, except the top-level
request fields `format` and `keep_alive`.

History conversion: assistant `tool_calls` get object arguments, `reasoning_content` becomes
`thinking`, tool results carry `tool_name`; content parts are joined as text.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._base import GenerationError, Prepared, Runtime
from ._generation import LocalParser, check_local_parser
from ._options import ResolvedOptions

__all__ = ["OllamaRuntime"]

_TOP_LEVEL = ("format", "keep_alive")


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("OllamaRuntime needs httpx: pip install 'chatparse[runtime]'") from e
    return httpx


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


class OllamaRuntime(Runtime):
    """A model served by Ollama, through its native chat API.

    >>> rt = OllamaRuntime("qwen3:8b")  # doctest: +SKIP

    `base_url` defaults to `http://127.0.0.1:11434`; `client` / `async_client` may be given
    (`httpx.Client` / `httpx.AsyncClient`), else they are made with `timeout` (seconds; None
    waits as long as the model takes).
    """

    adapter = "ollama"
    native_names = {"max_tokens": "num_predict", "enable_thinking": "think"}

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:11434",
        client: Any = None,
        async_client: Any = None,
        timeout: float | None = None,
        local_tool_call_parser: LocalParser = None,
        options: Any = None,
        hooks: Any = None,
    ) -> None:
        super().__init__(model=model, options=options, hooks=hooks)
        base = base_url.strip().rstrip("/")
        if base.endswith("/api"):
            base = base[: -len("/api")]
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        self.base_url = base
        self.local_tool_call_parser = check_local_parser(local_tool_call_parser)
        self.timeout = timeout
        self._client = client
        self._async_client = async_client
        self._owns: list[Any] = []
        self._lock = threading.Lock()
        self._lifecycle("ready", detail=self.base_url)

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = _import_httpx().Client(timeout=self.timeout)
                self._owns.append(self._client)
            return self._client

    @property
    def async_client(self) -> Any:
        with self._lock:
            if self._async_client is None:
                self._async_client = _import_httpx().AsyncClient(timeout=self.timeout)
                self._owns.append(self._async_client)
            return self._async_client

    def close(self) -> None:
        """Close the sync client this runtime made."""
        if self._client is not None and self._client in self._owns:
            self._client.close()
            self._owns.remove(self._client)
            self._client = None

    async def aclose(self) -> None:
        """Close every client this runtime made."""
        self.close()
        if self._async_client is not None and self._async_client in self._owns:
            await self._async_client.aclose()
            self._owns.remove(self._async_client)
            self._async_client = None

    # -- request -----------------------------------------------------------------------------

    @staticmethod
    def _messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names: dict[str, str] = {}
        out = []
        for m in messages:
            role = m.get("role")
            msg: dict[str, Any] = {"role": role, "content": _text(m.get("content"))}
            if m.get("images"):
                msg["images"] = m["images"]
            reasoning = m.get("thinking") or m.get("reasoning_content") or m.get("reasoning")
            if role == "assistant" and reasoning:
                msg["thinking"] = reasoning
            calls = []
            for c in m.get("tool_calls") or ():
                fn = dict(c.get("function") or {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        fn["arguments"] = json.loads(args) if args.strip() else {}
                    except ValueError:
                        fn["arguments"] = {}
                calls.append({"function": {"name": fn.get("name"), "arguments": fn.get("arguments") or {}}})
                if c.get("id") and fn.get("name"):
                    names[c["id"]] = fn["name"]
            if calls:
                msg["tool_calls"] = calls
            if role == "tool":
                name = m.get("tool_name") or m.get("name") or names.get(m.get("tool_call_id") or "")
                if name:
                    msg["tool_name"] = name
            out.append(msg)
        return out

    def _prepare(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        options: ResolvedOptions,
        streamed: bool,
        stream_id: str,
    ) -> Prepared:
        body: dict[str, Any] = {"model": self.model, "messages": self._messages(messages), "stream": streamed}
        if tools:
            body["tools"] = tools
        body["think"] = options.enable_thinking
        opts: dict[str, Any] = {"num_predict": options.max_tokens}
        opts["temperature"] = 0.0 if options.greedy else options.temperature
        knobs = options.sampler_knobs()
        knobs.pop("temperature", None)
        opts.update(knobs)
        if options.seed is not None:
            opts["seed"] = options.seed
        if options.stop:
            opts["stop"] = list(options.stop)
        for key, value in options.passthrough.items():
            if key in _TOP_LEVEL:
                body[key] = value
            elif key == "options" and isinstance(value, dict):
                opts.update(value)
            else:
                opts[key] = value
        body["options"] = opts
        return Prepared(
            messages=messages,
            tools=tools,
            options=options,
            streamed=streamed,
            stream_id=stream_id,
            native=True,
            body=body,
            local_parser=self.local_tool_call_parser,
        )

    # -- answers -----------------------------------------------------------------------------

    def _error(self, status: int | None, detail: str) -> GenerationError:
        where = f"HTTP {status}: " if status is not None else ""
        return GenerationError(
            f"ollama generation failed for model {self.model!r} at {self.base_url}: {where}{detail}",
            adapter=self.adapter,
            model=self.model,
        )

    def _status_error(self, status: int, raw: bytes) -> GenerationError:
        detail = raw.decode("utf-8", "replace").strip()
        with contextlib.suppress(ValueError):
            data = json.loads(detail)
            if isinstance(data, dict) and isinstance(data.get("error"), str):
                detail = data["error"]
        return self._error(status, detail[:500] or "(empty body)")

    def _line_parts(self, data: Any, state: dict[str, Any]) -> list[tuple[Any, ...]]:
        if not isinstance(data, dict):
            raise self._error(None, f"unexpected answer {str(data)[:200]!r}")
        if isinstance(data.get("error"), str):
            raise self._error(None, data["error"])
        parts: list[tuple[Any, ...]] = []
        message = data.get("message") or {}
        if message.get("thinking"):
            parts.append(("reasoning", message["thinking"]))
        if message.get("content"):
            parts.append(("content", message["content"]))
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            args = fn.get("arguments")
            parts.append(
                (
                    "call",
                    {
                        "index": state["calls"],
                        "id": call.get("id"),
                        "function": {
                            "name": fn.get("name"),
                            "arguments": args if isinstance(args, (dict, str)) else {},
                        },
                    },
                )
            )
            state["calls"] += 1
        if data.get("done"):
            state["finish"] = "length" if data.get("done_reason") == "length" else "stop"
            p, c = data.get("prompt_eval_count"), data.get("eval_count")
            if isinstance(p, int) and isinstance(c, int):
                state["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        return parts

    def _parts(self, p: Prepared, cancel: threading.Event) -> Iterator[tuple[Any, ...]]:
        httpx = _import_httpx()
        state: dict[str, Any] = {"finish": None, "usage": None, "calls": 0}
        url = self.base_url + "/api/chat"
        try:
            if not p.streamed:
                r = self.client.post(url, json=p.body)
                if r.status_code != 200:
                    raise self._status_error(r.status_code, r.content)
                yield from self._line_parts(r.json(), state)
            else:
                with self.client.stream("POST", url, json=p.body) as r:
                    if r.status_code != 200:
                        raise self._status_error(r.status_code, r.read())
                    for line in r.iter_lines():
                        if line.strip():
                            yield from self._line_parts(_json(line, self), state)
                        if cancel.is_set():
                            return
        except httpx.HTTPError as e:
            raise self._error(None, f"{type(e).__name__}: {e}") from e
        if state["finish"] is None:
            raise self._error(None, "the answer ended before Ollama said it was done")
        yield ("finish", state["finish"], state["usage"])

    async def _aparts(self, p: Prepared, cancel: threading.Event) -> AsyncIterator[tuple[Any, ...]]:
        httpx = _import_httpx()
        state: dict[str, Any] = {"finish": None, "usage": None, "calls": 0}
        url = self.base_url + "/api/chat"
        try:
            if not p.streamed:
                r = await self.async_client.post(url, json=p.body)
                if r.status_code != 200:
                    raise self._status_error(r.status_code, r.content)
                for part in self._line_parts(r.json(), state):
                    yield part
            else:
                async with self.async_client.stream("POST", url, json=p.body) as r:
                    if r.status_code != 200:
                        raise self._status_error(r.status_code, await r.aread())
                    async for line in r.aiter_lines():
                        if line.strip():
                            for part in self._line_parts(_json(line, self), state):
                                yield part
        except httpx.HTTPError as e:
            raise self._error(None, f"{type(e).__name__}: {e}") from e
        if state["finish"] is None:
            raise self._error(None, "the answer ended before Ollama said it was done")
        yield ("finish", state["finish"], state["usage"])


def _json(line: str, rt: OllamaRuntime) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        raise rt._error(None, f"not a JSON line: {line[:200]!r}") from None
