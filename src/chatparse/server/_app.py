"""The ASGI app: routes, request checks, the upstream exchange, SSE, errors and the request log.

Theory of operation: a POST handler reads and checks the request (size, auth, JSON, fields, model),
then returns an `_Exchange`, an ASGI callable that does the upstream work while it answers. The
exchange listens for the client's `http.disconnect` next to the work and cancels the work when it
comes, which closes the upstream connection (streamed or not). Errors before the first byte of the
answer are HTTP errors (OpenAI error objects); once a stream has started they are an error event
followed by a clean end of stream.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..openai import InvalidRequest, ResponsesStream, responses_to_chat, validate_chat_request
from ._config import Resolved, ServerConfig, resolve_config
from ._pipeline import Pipeline
from ._upstream import PROMPT_KINDS, Upstream, UpstreamError, build_call

log = logging.getLogger("chatparse.server")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    502: "upstream_error",
    504: "upstream_timeout",
}
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class HTTPError(Exception):
    """An answer with an OpenAI error object."""

    def __init__(self, status: int, message: str, param: str | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.kind = kind or _ERROR_TYPES.get(status, "server_error")


def error_body(
    status: int, message: str, param: str | None = None, kind: str | None = None
) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": kind or _ERROR_TYPES.get(status, "server_error"),
            "param": param,
            "code": status,
        }
    }


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def _send_json(send: Send, status: int, obj: Any) -> None:
    body = _json_bytes(obj)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Exchange:
    """Runs `work(send)` and cancels it when the client disconnects."""

    def __init__(self, work: Callable[[Send], Awaitable[None]], info: dict[str, Any]) -> None:
        self.work = work
        self.info = info

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        if not self.info.get("_done"):
                            self.info["client_disconnected"] = True
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            try:
                await self.work(send)
            finally:
                self.info["_done"] = True
                tg.cancel_scope.cancel()


class _Chat:
    """Per-request plan: the upstream call and how to build the pipeline."""

    def __init__(self, state: _State, req: dict[str, Any]) -> None:
        self.state = state
        self.req = req
        r = state.resolved
        prompt = None
        prefix = r.generation_prompt
        self.note: str | None = None
        if r.chat_template is not None and r.api in (*PROMPT_KINDS, "chat-raw"):
            prompt = self._render(r, req)
            prefix = prompt
            if r.template is not None and r.template.anchor_re.search(prompt) is None:
                # The prompt does not end in the template's assistant header (a template mismatch):
                # parsing it as output would put the prompt into the answer.
                prefix = r.generation_prompt
                self.note = "the rendered prompt does not contain the response template's start anchor"
        self.prefix = prefix
        stop = list(dict.fromkeys((req.get("stop") or []) + r.stop))
        self.call = build_call(
            r.api, req, model=r.upstream_model, prompt=prompt, stop=stop or None, stream=req["stream"]
        )

    @staticmethod
    def _render(r: Resolved, req: dict[str, Any]) -> str:
        from ._prompt import ChatTemplateError

        kwargs = dict(req.get("chat_template_kwargs") or {})
        if req.get("reasoning_effort") is not None:
            kwargs.setdefault("reasoning_effort", req["reasoning_effort"])
        for reserved in ("messages", "tools", "add_generation_prompt"):
            kwargs.pop(reserved, None)
        try:
            return str(r.chat_template.render(req["messages"], tools=req.get("tools") or None, **kwargs))
        except ChatTemplateError as e:
            raise HTTPError(
                400, f"the model's chat template rejected the conversation: {e}", "messages"
            ) from e

    def pipeline(self) -> Pipeline:
        req = self.req
        r = self.state.resolved
        return Pipeline(
            template=r.template,
            prefix=self.prefix,
            tools=req.get("tools"),
            tool_choice=req.get("tool_choice"),
            parallel_tool_calls=req.get("parallel_tool_calls", True),
            reasoning_key=self.state.config.reasoning_key,
        )


class _State:
    def __init__(self, config: ServerConfig, resolved: Resolved) -> None:
        self.config = config
        self.resolved = resolved
        self.client: httpx.AsyncClient | None = None
        self.created = int(time.time())

    def upstream(self) -> Upstream:
        if self.client is None:
            cfg = self.config
            self.client = httpx.AsyncClient(
                timeout=httpx.Timeout(cfg.upstream_timeout, connect=cfg.connect_timeout),
                limits=httpx.Limits(max_connections=4096, max_keepalive_connections=256),
            )
        return Upstream(
            self.resolved.upstream_url,
            self.resolved.api,
            client=self.client,
            api_key=self.config.upstream_api_key,
            read_timeout=self.config.upstream_timeout,
        )


# ------------------------------------------------------------------------------------------------
# request checks


def _info(request: Request) -> dict[str, Any]:
    info = request.scope.get("chatparse_log")
    if info is None:
        info = request.scope["chatparse_log"] = {}
    return info


def _check_auth(state: _State, request: Request) -> None:
    key = state.config.api_key
    if not key:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), key.encode()):
        raise HTTPError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'")


async def _read_json(state: _State, request: Request) -> Any:
    limit = state.config.max_body_bytes
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise HTTPError(413, f"request body of {length} bytes is over the limit of {limit} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        return json.loads(raw)
    except ValueError as e:
        raise HTTPError(400, f"request body is not valid JSON: {e}") from e


def _check_model(state: _State, model: str) -> None:
    if model != state.config.model:
        raise HTTPError(
            404,
            f"the model {model!r} does not exist here; this server serves {state.config.model!r}",
            "model",
            kind="not_found_error",
        )


# ------------------------------------------------------------------------------------------------
# chat completions


def _chunk_prefix(cid: str, created: int, model: str) -> bytes:
    head = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
    return b"data: " + _json_bytes(head)[:-1] + b',"choices":[{"index":0,"delta":'


def _finish_chunk(prefix: bytes, reason: str, report: dict[str, Any] | None) -> bytes:
    tail = b',"logprobs":null,"finish_reason":' + _json_bytes(reason) + b"}]"
    if report:
        tail += b',"chatparse":' + _json_bytes(report)
    return prefix + b"{}" + tail + b"}\n\n"


async def _upstream_failed(send: Send, info: dict[str, Any], e: UpstreamError) -> None:
    """The upstream failed before the answer started: an HTTP error with an OpenAI error object."""
    info.update(status=e.status, error=str(e), upstream_status=e.upstream_status)
    await _send_json(send, e.status, error_body(e.status, str(e), kind=e.kind))


async def _open_stream(
    state: _State, plan: _Chat, info: dict[str, Any], send: Send
) -> AsyncGenerator[list[tuple[Any, ...]], None] | None:
    """The upstream event stream once the upstream accepted the request; None after answering its error."""
    agen = state.upstream().stream(plan.call)
    try:
        await agen.__anext__()
    except UpstreamError as e:
        await agen.aclose()
        await _upstream_failed(send, info, e)
        return None
    except BaseException:
        await agen.aclose()
        raise
    return agen


async def _chat_stream(state: _State, plan: _Chat, info: dict[str, Any], send: Send) -> None:
    req = plan.req
    pipe = plan.pipeline()
    agen = await _open_stream(state, plan, info, send)
    if agen is None:
        return
    try:
        cid = f"chatcmpl-{secrets.token_hex(12)}"
        prefix = _chunk_prefix(cid, int(time.time()), state.config.model)
        tail = b',"logprobs":null,"finish_reason":null}]}\n\n'
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})

        async def emit(deltas: list[dict[str, Any]]) -> None:
            if deltas:
                body = b"".join(prefix + _json_bytes(d) + tail for d in deltas)
                await send({"type": "http.response.body", "body": body, "more_body": True})

        await emit([{"role": "assistant", "content": ""}])
        try:
            async for events in agen:
                out: list[dict[str, Any]] = []
                for event in events:
                    out += pipe.feed(event)
                await emit(out)
        except UpstreamError as e:
            await emit(pipe.abort())
            info.update(error=str(e), upstream_status=e.upstream_status, stream_error=True)
            err = error_body(e.status, str(e), kind=e.kind)
            body = b"data: " + _json_bytes(err) + b"\n\ndata: [DONE]\n\n"
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        reason = pipe.finish_reason or "stop"
        info.update(finish_reason=reason, tool_calls=pipe.calls_sent)
        body = _finish_chunk(prefix, reason, pipe.report)
        if (req.get("stream_options") or {}).get("include_usage"):
            usage = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": state.config.model,
                "choices": [],
                "usage": pipe.usage,
            }
            body += b"data: " + _json_bytes(usage) + b"\n\n"
        body += b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": body, "more_body": False})
    finally:
        await agen.aclose()


async def _chat_once(
    state: _State, plan: _Chat, info: dict[str, Any]
) -> tuple[Pipeline, list[dict[str, Any]]]:
    pipe = plan.pipeline()
    events = await state.upstream().complete(plan.call)
    deltas: list[dict[str, Any]] = []
    for event in events:
        deltas.extend(pipe.feed(event))
    return pipe, deltas


async def _chat_json(state: _State, plan: _Chat, info: dict[str, Any], send: Send) -> None:
    try:
        pipe, _ = await _chat_once(state, plan, info)
    except UpstreamError as e:
        await _upstream_failed(send, info, e)
        return
    message = pipe.message()
    message.setdefault("refusal", None)
    reason = pipe.finish_reason or "stop"
    info.update(finish_reason=reason, tool_calls=len(message.get("tool_calls") or ()))
    body = {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": state.config.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reason}],
        "usage": pipe.usage,
    }
    await _send_json(send, 200, body)


def _prepare_chat(state: _State, body: Any, info: dict[str, Any]) -> _Chat:
    try:
        req = validate_chat_request(body)
    except InvalidRequest as e:
        raise HTTPError(400, str(e), e.param) from e
    info.update(model=req["model"], stream=req["stream"])
    _check_model(state, req["model"])
    if state.resolved.api not in ("chat", "ollama-chat"):
        choice = req["tool_choice"]
        if choice == "required" or isinstance(choice, dict):
            raise HTTPError(
                400,
                "tool_choice 'required' or a named function cannot be guaranteed when the engine generates raw "
                "text (no constrained decoding through this server); use 'auto' or 'none'",
                "tool_choice",
            )
        rf = req.get("response_format")
        if rf is not None and rf.get("type") != "text":
            raise HTTPError(
                400,
                f"response_format {rf.get('type')!r} is not supported with a raw-text upstream",
                "response_format",
            )
    try:
        plan = _Chat(state, req)
    except InvalidRequest as e:
        raise HTTPError(400, str(e), e.param) from e
    if plan.note:
        info["prefix_warning"] = plan.note
    return plan


async def chat_completions(request: Request) -> Any:
    state: _State = request.app.state.chatparse
    info = _info(request)
    _check_auth(state, request)
    body = await _read_json(state, request)
    plan = _prepare_chat(state, body, info)
    work = _chat_stream if plan.req["stream"] else _chat_json
    return _Exchange(lambda send: work(state, plan, info, send), info)


# ------------------------------------------------------------------------------------------------
# responses


async def _responses_work(
    state: _State, plan: _Chat, original: dict[str, Any], info: dict[str, Any], send: Send
) -> None:
    rs = ResponsesStream(
        response_id=f"resp_{secrets.token_hex(12)}",
        model=state.config.model,
        created_at=int(time.time()),
        request=original,
    )
    if not plan.req["stream"]:
        try:
            pipe, deltas = await _chat_once(state, plan, info)
        except UpstreamError as e:
            await _upstream_failed(send, info, e)
            return
        rs.start()
        for d in deltas:
            rs.feed(d)
        rs.finish(pipe.finish_reason or "stop", pipe.usage, pipe.report or None)
        info.update(finish_reason=pipe.finish_reason)
        await _send_json(send, 200, rs.response)
        return
    pipe = plan.pipeline()
    agen = await _open_stream(state, plan, info, send)
    if agen is None:
        return
    try:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})

        async def emit(events: list[dict[str, Any]], more: bool = True) -> None:
            body = b"".join(
                b"event: " + e["type"].encode() + b"\ndata: " + _json_bytes(e) + b"\n\n" for e in events
            )
            if body or not more:
                await send({"type": "http.response.body", "body": body, "more_body": more})

        await emit(rs.start())
        try:
            async for batch in agen:
                out = []
                for event in batch:
                    for d in pipe.feed(event):
                        out.extend(rs.feed(d))
                await emit(out)
        except UpstreamError as e:
            out = []
            for d in pipe.abort():
                out.extend(rs.feed(d))
            info.update(error=str(e), upstream_status=e.upstream_status, stream_error=True)
            await emit(out + rs.fail(str(e), e.kind), more=False)
            return
        info.update(finish_reason=pipe.finish_reason)
        await emit(rs.finish(pipe.finish_reason or "stop", pipe.usage, pipe.report or None), more=False)
    finally:
        await agen.aclose()


async def responses(request: Request) -> Any:
    state: _State = request.app.state.chatparse
    info = _info(request)
    _check_auth(state, request)
    body = await _read_json(state, request)
    try:
        chat_body = responses_to_chat(body)
    except InvalidRequest as e:
        raise HTTPError(400, str(e), e.param) from e
    plan = _prepare_chat(state, chat_body, info)
    return _Exchange(lambda send: _responses_work(state, plan, body, info, send), info)


# ------------------------------------------------------------------------------------------------
# small routes


async def models(request: Request) -> Any:
    state: _State = request.app.state.chatparse
    _check_auth(state, request)
    return JSONResponse(
        {
            "object": "list",
            "data": [
                {
                    "id": state.config.model,
                    "object": "model",
                    "created": state.created,
                    "owned_by": "chatparse",
                }
            ],
        }
    )


async def health(request: Request) -> Any:
    state: _State = request.app.state.chatparse
    return JSONResponse({"status": "ok", **state.resolved.describe()})


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPError)
    info = _info(request)
    info.update(error=str(exc))
    return JSONResponse(error_body(exc.status, str(exc), exc.param, exc.kind), status_code=exc.status)


async def _starlette_error(request: Request, exc: Exception) -> JSONResponse:
    status = getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", None) or "error"
    return JSONResponse(
        error_body(status, f"{request.method} {request.url.path}: {detail}"), status_code=status
    )


class _RequestLog:
    """ASGI middleware: one structured (JSON) log line per HTTP request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        info: dict[str, Any] = {}
        scope["chatparse_log"] = info
        status = {"code": 0}

        async def logged_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                info.setdefault("ttfb_ms", round((time.perf_counter() - start) * 1000, 1))
            await send(message)

        try:
            await self.app(scope, receive, logged_send)
        finally:
            line = {
                "event": "request",
                "method": scope.get("method"),
                "path": scope.get("path"),
                "status": status["code"] or 499,
                "duration_ms": round((time.perf_counter() - start) * 1000, 1),
            }
            line.update({k: v for k, v in info.items() if not k.startswith("_")})
            log.info(json.dumps(line, ensure_ascii=False))


def create_app(config: ServerConfig, *, resolved: Resolved | None = None) -> Any:
    """The ASGI app for `config` (a Starlette app wrapped in the request log).

    Resolves the template, chat template and upstream API first (`ServerConfigError` when it
    cannot). The upstream HTTP client is opened on first use and closed at shutdown.
    """
    from contextlib import asynccontextmanager

    from starlette.exceptions import HTTPException as StarletteHTTPException

    resolved = resolved or resolve_config(config)
    state = _State(config, resolved)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        try:
            yield
        finally:
            if state.client is not None:
                await state.client.aclose()
                state.client = None

    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
        ],
        exception_handlers={HTTPError: _http_error, StarletteHTTPException: _starlette_error},
        lifespan=lifespan,
    )
    app.state.chatparse = state
    return _RequestLog(app)
