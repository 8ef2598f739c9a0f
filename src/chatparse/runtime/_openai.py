"""`OpenAIRuntime`: any OpenAI-compatible Chat Completions server, through the `openai` client.

vLLM, SGLang, llama.cpp's server, LM Studio, `chatparse serve` and hosted APIs all parse tool
calls themselves and return them as structured `tool_calls`; those are trusted as they are
(native calls always win). When a small model writes a call in a shape the server did not lift,
`local_tool_call_parser` ("auto", a family name of `chatparse.detect`, or a callable) recovers it
from the content, only when the server returned no structured call.

Options mapping (checked on the request the server received, `tests/runtime`): `max_tokens` ->
`max_tokens` (native fallback `max_completion_tokens`); greedy -> `temperature: 0` and no
`top_p` / `top_k`; top-k -> `temperature`, `top_k`; top-p -> `temperature`, `top_p`; `seed`,
`stop` as they are; `enable_thinking` -> `chat_template_kwargs: {"enable_thinking": ...}`, always
(`chat_template_kwargs=False` leaves the field out for APIs that reject it). Other native options
go into the body unchanged (`extra_body`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._base import GenerationError, Prepared, Runtime
from ._generation import LocalParser, check_local_parser
from ._options import ResolvedOptions

__all__ = ["OpenAIRuntime"]

_DROP_KEYS = ("chatparse", "reasoning_content", "reasoning")


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("OpenAIRuntime needs the openai client: pip install 'chatparse[runtime]'") from e
    return openai


def _field(obj: Any, name: str) -> Any:
    """An attribute of an openai SDK object, extra (non-schema) fields included."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, dict):
            value = extra.get(name)
    return value


class OpenAIRuntime(Runtime):
    """A model behind an OpenAI-compatible `/v1/chat/completions`.

    >>> rt = OpenAIRuntime("Qwen/Qwen3-8B", base_url="http://127.0.0.1:8000/v1")  # doctest: +SKIP

    `client` / `async_client` may be given (`openai.OpenAI` / `openai.AsyncOpenAI`); otherwise
    they are made from `base_url`, `api_key` (default `$OPENAI_API_KEY`, else a placeholder for
    local servers), `timeout` and `max_retries` (the client's default retries a failed request
    twice, with backoff). `send_reasoning=True` keeps `reasoning_content` on assistant
    messages of the history (vLLM and SGLang accept it; hosted APIs may not). `include_usage`
    asks streams for a usage chunk (`stream_options`).
    """

    adapter = "openai"
    native_names = {"max_tokens": "max_completion_tokens"}

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        async_client: Any = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        local_tool_call_parser: LocalParser = None,
        chat_template_kwargs: bool = True,
        send_reasoning: bool = False,
        include_usage: bool = True,
        options: Any = None,
        hooks: Any = None,
    ) -> None:
        super().__init__(model=model, options=options, hooks=hooks)
        self.local_tool_call_parser = check_local_parser(local_tool_call_parser)
        self.chat_template_kwargs = chat_template_kwargs
        self.send_reasoning = send_reasoning
        self.include_usage = include_usage
        self._client_args: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key or os.environ.get("OPENAI_API_KEY") or "unused",
        }
        if timeout is not None:
            self._client_args["timeout"] = timeout
        if max_retries is not None:
            self._client_args["max_retries"] = max_retries
        self._client = client
        self._async_client = async_client
        self._owns: list[Any] = []
        self._lock = threading.Lock()
        self._lifecycle("ready", detail=base_url or "client")

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = _import_openai().OpenAI(**self._client_args)
                self._owns.append(self._client)
            return self._client

    @property
    def async_client(self) -> Any:
        with self._lock:
            if self._async_client is None:
                self._async_client = _import_openai().AsyncOpenAI(**self._client_args)
                self._owns.append(self._async_client)
            return self._async_client

    def close(self) -> None:
        """Close the sync client this runtime made (not one that was passed in)."""
        openai = _import_openai() if self._owns else None
        for c in list(self._owns):
            if openai is not None and isinstance(c, openai.OpenAI):
                c.close()
                self._owns.remove(c)
                self._client = None

    async def aclose(self) -> None:
        """Close every client this runtime made."""
        self.close()
        for c in list(self._owns):
            await c.close()
            self._owns.remove(c)
        self._async_client = None

    # -- request -----------------------------------------------------------------------------

    def _messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        drop = ("chatparse",) if self.send_reasoning else _DROP_KEYS
        return [{k: v for k, v in m.items() if k not in drop} for m in messages]

    def _prepare(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        options: ResolvedOptions,
        streamed: bool,
        stream_id: str,
    ) -> Prepared:
        body: dict[str, Any] = {"model": self.model, "messages": self._messages(messages)}
        if tools:
            body["tools"] = tools
        body["max_tokens"] = options.max_tokens
        body["temperature"] = 0.0 if options.greedy else options.temperature
        knobs = options.sampler_knobs()
        knobs.pop("temperature", None)
        body.update(knobs)
        if options.seed is not None:
            body["seed"] = options.seed
        if options.stop:
            body["stop"] = list(options.stop)
        passthrough = dict(options.passthrough)
        if self.chat_template_kwargs:
            kwargs = dict(passthrough.pop("chat_template_kwargs", None) or {})
            if "enable_thinking" in options.given or "enable_thinking" not in kwargs:
                kwargs["enable_thinking"] = options.enable_thinking
            body["chat_template_kwargs"] = kwargs
        body.update(passthrough)
        body["stream"] = streamed
        if streamed and self.include_usage:
            body.setdefault("stream_options", {"include_usage": True})
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

    def _call_args(self, body: dict[str, Any]) -> dict[str, Any]:
        rest = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
        return {
            "model": body["model"],
            "messages": body["messages"],
            "stream": body["stream"],
            "extra_body": rest,
        }

    def _error(self, e: Exception) -> GenerationError:
        openai = _import_openai()
        if isinstance(e, openai.APIStatusError):
            body = e.body
            error = body.get("error", body) if isinstance(body, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            detail = f"HTTP {e.status_code}: {message if isinstance(message, str) and message else e.message}"
        elif isinstance(e, openai.APIConnectionError):
            detail = f"cannot reach {self._client_args.get('base_url') or 'the server'}: {e}"
        else:
            detail = f"{type(e).__name__}: {e}"
        return GenerationError(
            f"openai generation failed for model {self.model!r}: {detail}",
            adapter=self.adapter,
            model=self.model,
        )

    # -- answers -----------------------------------------------------------------------------

    @staticmethod
    def _message_parts(message: Any, finish: str | None, usage: Any) -> list[tuple[Any, ...]]:
        parts: list[tuple[Any, ...]] = []
        reasoning = _field(message, "reasoning_content") or _field(message, "reasoning")
        if reasoning:
            parts.append(("reasoning", reasoning))
        if message.content:
            parts.append(("content", message.content))
        for i, call in enumerate(message.tool_calls or ()):
            fn = call.function
            parts.append(
                (
                    "call",
                    {"index": i, "id": call.id, "function": {"name": fn.name, "arguments": fn.arguments}},
                )
            )
        parts.append(("finish", finish or "stop", _usage(usage)))
        return parts

    @staticmethod
    def _chunk_parts(chunk: Any, state: dict[str, Any]) -> list[tuple[Any, ...]]:
        parts: list[tuple[Any, ...]] = []
        if getattr(chunk, "usage", None) is not None:
            state["usage"] = _usage(chunk.usage)
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                reasoning = _field(delta, "reasoning_content") or _field(delta, "reasoning")
                if reasoning:
                    parts.append(("reasoning", reasoning))
                if delta.content:
                    parts.append(("content", delta.content))
                for call in delta.tool_calls or ():
                    fn = call.function
                    parts.append(
                        (
                            "call",
                            {
                                "index": call.index,
                                "id": call.id,
                                "function": {
                                    "name": fn.name if fn else None,
                                    "arguments": fn.arguments if fn else None,
                                },
                            },
                        )
                    )
            if choice.finish_reason:
                state["finish"] = choice.finish_reason
        return parts

    def _parts(self, p: Prepared, cancel: threading.Event) -> Iterator[tuple[Any, ...]]:
        assert p.body is not None
        try:
            answer = self.client.chat.completions.create(**self._call_args(p.body))
            if not p.streamed:
                choice = answer.choices[0]
                yield from self._message_parts(choice.message, choice.finish_reason, answer.usage)
                return
            state: dict[str, Any] = {"finish": None, "usage": None}
            try:
                for chunk in answer:
                    yield from self._chunk_parts(chunk, state)
                    if cancel.is_set():
                        return
            finally:
                answer.close()
            yield ("finish", state["finish"] or "stop", state["usage"])
        except _import_openai().OpenAIError as e:
            raise self._error(e) from e

    async def _aparts(self, p: Prepared, cancel: threading.Event) -> AsyncIterator[tuple[Any, ...]]:
        assert p.body is not None
        try:
            answer = await self.async_client.chat.completions.create(**self._call_args(p.body))
            if not p.streamed:
                choice = answer.choices[0]
                for part in self._message_parts(choice.message, choice.finish_reason, answer.usage):
                    yield part
                return
            state: dict[str, Any] = {"finish": None, "usage": None}
            try:
                async for chunk in answer:
                    for part in self._chunk_parts(chunk, state):
                        yield part
            finally:
                await answer.close()
            yield ("finish", state["finish"] or "stop", state["usage"])
        except _import_openai().OpenAIError as e:
            raise self._error(e) from e


def _usage(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    dump = getattr(usage, "model_dump", None)
    return dump() if callable(dump) else dict(usage)
