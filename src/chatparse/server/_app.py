"""The ASGI app: routes, request checks, the upstream exchange, SSE, errors, metrics and the log.

Theory of operation: `App.__call__` gives every HTTP request a `RequestLog` and answers it with a
handler. A handler reads and checks the request (size, time, auth, JSON, fields, model), renders
the prompt in a render worker (`_render`), and returns either a finished `_Reply` or an `_Exchange`,
which does the upstream work while it answers and cancels that work when the client disconnects.
Errors before the first byte of an answer are HTTP errors with an OpenAI error object (JSON, always:
no code path answers text/plain); once a stream has started they are an error event followed by a
clean end of stream.

One stream driver (`_stream`) serves both APIs: it opens the upstream (`Upstream.open`, which fails
before the first byte), feeds the `Pipeline` and hands the deltas to an encoder, `_ChatEncoder` or
`_ResponsesEncoder`, which turn them into the bytes of their API's event stream.

Shutdown (`App.drain`): new requests get 503, running answers may finish until the deadline, then
their upstream answers are aborted and each stream ends with a `server_shutting_down` error event.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from ..openai import InvalidRequest, ResponsesStream, responses_to_chat, validate_chat_request
from . import _http
from ._config import Resolved, ServerConfig, resolve_config
from ._constrain import ConstraintPlanner, ConstraintRefused, needs_constraint
from ._json import BodyError, dumps, loads_body
from ._log import RequestLog
from ._metrics import Metrics
from ._pipeline import Pipeline
from ._upstream import PROMPT_KINDS, STRUCTURED_KINDS, Upstream, UpstreamAnswer, UpstreamError, build_call

log = logging.getLogger("chatparse.server")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "request_timeout",
    413: "request_too_large",
    500: "server_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "upstream_timeout",
}
_JSON = (b"content-type", b"application/json")
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_BIG_BODY = 256 * 1024  # bodies larger than this are parsed off the event loop
_KNOWN_PATHS = ("/health", "/v1/models", "/v1/chat/completions", "/v1/responses", "/metrics", "/openapi.json")


class HTTPError(Exception):
    """An answer with an OpenAI error object."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        kind: str | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.kind = kind or _ERROR_TYPES.get(status, "server_error")
        self.headers = headers or []


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


class _Reply:
    """A finished answer: status, body and headers."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers if headers is not None else [_JSON]

    @classmethod
    def json(cls, status: int, obj: Any, headers: list[tuple[bytes, bytes]] | None = None) -> _Reply:
        return cls(status, dumps(obj), [_JSON, *(headers or [])])

    async def send(self, send: Send, rlog: RequestLog) -> None:
        headers = [*self.headers, (b"content-length", str(len(self.body)).encode())]
        rlog.started_response(self.status)
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


async def _send_start(send: Send, rlog: RequestLog, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    rlog.started_response(status)
    await send({"type": "http.response.start", "status": status, "headers": headers})


def _error_reply(e: UpstreamError | HTTPError) -> _Reply:
    kind = e.kind
    param = getattr(e, "param", None)
    return _Reply.json(e.status, error_body(e.status, str(e), param, kind), getattr(e, "headers", None))


# ------------------------------------------------------------------------------------------------
# encoders: deltas in, the bytes of one API's event stream out


class _ChatEncoder:
    """Chat Completions chunks (`data: {...}` lines, `[DONE]`)."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.cid = f"chatcmpl-{secrets.token_hex(12)}"
        self.model = model
        self.include_usage = include_usage
        head = {
            "id": self.cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        self.prefix = b"data: " + dumps(head)[:-1] + b',"choices":[{"index":0,"delta":'
        self.tail = b',"logprobs":null,"finish_reason":null}]}\n\n'

    def start(self) -> bytes:
        return self.deltas([{"role": "assistant", "content": ""}])

    def deltas(self, deltas: list[dict[str, Any]]) -> bytes:
        prefix, tail = self.prefix, self.tail
        return b"".join(prefix + dumps(d) + tail for d in deltas)

    def finish(self, pipe: Pipeline) -> bytes:
        reason = pipe.finish_reason or "stop"
        tail = b',"logprobs":null,"finish_reason":' + dumps(reason) + b"}]"
        if pipe.report:
            tail += b',"chatparse":' + dumps(pipe.report)
        body = self.prefix + b"{}" + tail + b"}\n\n"
        if self.include_usage:
            usage = {
                "id": self.cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": [],
                "usage": pipe.usage,
            }
            body += b"data: " + dumps(usage) + b"\n\n"
        return body + b"data: [DONE]\n\n"

    def fail(self, deltas: list[dict[str, Any]], e: UpstreamError) -> bytes:
        return (
            self.deltas(deltas)
            + b"data: "
            + dumps(error_body(e.status, str(e), kind=e.kind))
            + b"\n\ndata: [DONE]\n\n"
        )

    def whole(self, pipe: Pipeline) -> dict[str, Any]:
        message = pipe.message()
        message.setdefault("refusal", None)
        return {
            "id": self.cid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": pipe.finish_reason or "stop",
                }
            ],
            "usage": pipe.usage,
        }


class _ResponsesEncoder:
    """Responses API events (`event: ...` / `data: {...}`) via `chatparse.openai.ResponsesStream`."""

    def __init__(self, model: str, request: dict[str, Any]) -> None:
        self.rs = ResponsesStream(
            response_id=f"resp_{secrets.token_hex(12)}",
            model=model,
            created_at=int(time.time()),
            request=request,
        )

    @staticmethod
    def _events(events: list[dict[str, Any]]) -> bytes:
        return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + dumps(e) + b"\n\n" for e in events)

    def start(self) -> bytes:
        return self._events(self.rs.start())

    def deltas(self, deltas: list[dict[str, Any]]) -> bytes:
        rs = self.rs
        out: list[dict[str, Any]] = []
        for d in deltas:
            out.extend(rs.feed(d))
        return self._events(out)

    def finish(self, pipe: Pipeline) -> bytes:
        return self._events(self.rs.finish(pipe.finish_reason or "stop", pipe.usage, pipe.report or None))

    def fail(self, deltas: list[dict[str, Any]], e: UpstreamError) -> bytes:
        return self.deltas(deltas) + self._events(self.rs.fail(str(e), e.kind))

    def whole(self, pipe: Pipeline) -> dict[str, Any]:
        self.rs.start()
        for d in pipe.sent:
            self.rs.feed(d)
        self.rs.finish(pipe.finish_reason or "stop", pipe.usage, pipe.report or None)
        return self.rs.response


Encoder = _ChatEncoder | _ResponsesEncoder


# ------------------------------------------------------------------------------------------------
# the exchange


class _Exchange:
    """Runs `work(send)` as a task and cancels it when the client disconnects."""

    def __init__(self, work: Callable[[Send], Awaitable[None]], rlog: RequestLog) -> None:
        self.work = work
        self.rlog = rlog

    async def __call__(self, receive: Receive, send: Send) -> None:
        task = asyncio.ensure_future(self.work(send))

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    if not task.done():
                        self.rlog.set(client_disconnected=True)
                        task.cancel()
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            await task
        except asyncio.CancelledError:
            if not self.rlog.fields.get("client_disconnected"):
                raise
        finally:
            watcher.cancel()


class _Plan:
    """One chat request, checked and rendered: the upstream call and how to build its pipeline."""

    def __init__(
        self,
        req: dict[str, Any],
        call: Any,
        prefix: str | None,
        note: str | None,
        default_max_tokens: int | None = None,
    ) -> None:
        self.req = req
        self.call = call
        self.prefix = prefix
        self.note = note
        self.default_max_tokens = default_max_tokens
        """The `max_tokens` this server chose for the engine because the request set none."""

    def explain(self, e: UpstreamError) -> UpstreamError:
        """`e`, with the hint that this server chose `max_tokens` when the engine rejected the request."""
        if e.status != 400 or self.default_max_tokens is None:
            return e
        hint = (
            f" (the request set no max_tokens, so chatparse asked for {self.default_max_tokens}: send "
            "max_tokens, or start the server with a smaller --default-max-tokens)"
        )
        return UpstreamError(e.status, str(e) + hint, e.kind, e.upstream_status)


class App:
    """The ASGI application of `chatparse serve` (see the module docstring)."""

    def __init__(self, config: ServerConfig, resolved: Resolved) -> None:
        self.config = config
        self.resolved = resolved
        self.metrics = Metrics()
        self.created = int(time.time())
        self.client: _http.HTTPClient | None = None
        self.renderer: Any = None
        self.constraint_planner: ConstraintPlanner | None = None
        self.draining = False
        self._answers: weakref.WeakSet[UpstreamAnswer] = weakref.WeakSet()
        self._template_label = resolved.template_name or resolved.api
        if resolved.template_name and "/" in resolved.template_name:
            self._template_label = "file:" + resolved.template_name.rsplit("/", 1)[-1]
        self._routes: dict[str, dict[str, Callable[..., Awaitable[Any]]]] = {
            "/health": {"GET": self.health},
            "/v1/models": {"GET": self.models},
            "/metrics": {"GET": self.metrics_route},
            "/openapi.json": {"GET": self.openapi_route},
            "/v1/chat/completions": {"POST": self.chat_completions},
            "/v1/responses": {"POST": self.responses},
        }

    # -- lifecycle -----------------------------------------------------------------------------

    async def startup(self) -> None:
        if self.resolved.chat_template is not None and self.renderer is None:
            from ._render import RenderPool

            self.renderer = RenderPool(
                self.resolved.chat_template,
                workers=self.config.render_workers,
                budget=self.config.render_timeout,
            )
            await self.renderer.start()

    async def shutdown(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
        if self.renderer is not None:
            await self.renderer.close()
        if self.constraint_planner is not None:
            self.constraint_planner.close()

    async def drain(self, timeout: float) -> None:
        """Refuse new requests; after `timeout` seconds end the answers still running."""
        self.draining = True
        deadline = time.monotonic() + timeout
        while self._answers and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for answer in list(self._answers):
            answer.abort(
                UpstreamError(
                    503,
                    f"the server is shutting down (the answer was still running after {timeout:g} s)",
                    "server_shutting_down",
                )
            )

    def upstream(self) -> Upstream:
        cfg = self.config
        if self.client is None:
            self.client = _http.HTTPClient(
                connect_timeout=cfg.connect_timeout, read_timeout=cfg.upstream_timeout
            )
        return Upstream(
            self.resolved.upstream_url,
            self.resolved.api,
            client=self.client,
            api_key=cfg.upstream_api_key,
            read_timeout=cfg.upstream_timeout,
            connect_timeout=cfg.connect_timeout,
            max_line=cfg.max_upstream_line,
        )

    # -- ASGI ----------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":  # websockets: not served
            return
        rlog = RequestLog(scope.get("method", ""), scope.get("path", ""))
        metrics = self.metrics
        metrics.in_flight.inc(by=1)
        try:
            await self._handle(scope, receive, send, rlog)
        finally:
            metrics.in_flight.inc(by=-1)
            path = rlog.path if rlog.path in _KNOWN_PATHS else "other"
            status = rlog.status or 499
            metrics.requests.inc(path, str(status))
            metrics.duration.observe(rlog.duration, path)
            rlog.write()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as e:
                    await send({"type": "lifespan.startup.failed", "message": str(e)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _handle(self, scope: Scope, receive: Receive, send: Send, rlog: RequestLog) -> None:
        try:
            methods = self._routes.get(rlog.path)
            if methods is None:
                raise HTTPError(404, f"{rlog.method} {rlog.path}: no such endpoint", kind="not_found_error")
            handler = methods.get(rlog.method)
            if handler is None:
                allow = ", ".join(methods).encode()
                raise HTTPError(
                    405, f"{rlog.method} {rlog.path}: method not allowed", headers=[(b"allow", allow)]
                )
            result = await handler(scope, receive, rlog)
        except HTTPError as e:
            rlog.set(error=str(e))
            if e.status == 408:
                e.headers = [*e.headers, (b"connection", b"close")]
            await _error_reply(e).send(send, rlog)
            return
        except Exception as e:  # a bug: still a JSON answer, and a JSON log line with the traceback
            log.exception(
                dumps({"event": "internal_error", "path": rlog.path, "error": repr(e)[:500]}).decode()
            )
            rlog.set(error=f"internal error: {type(e).__name__}")
            if not rlog.status:
                await _Reply.json(500, error_body(500, f"internal server error ({type(e).__name__})")).send(
                    send, rlog
                )
            return
        if isinstance(result, _Reply):
            await result.send(send, rlog)
            return
        try:
            await result(receive, send)
        except Exception as e:
            log.exception(
                dumps({"event": "internal_error", "path": rlog.path, "error": repr(e)[:500]}).decode()
            )
            rlog.set(error=f"internal error: {type(e).__name__}")
            if not rlog.status:
                await _Reply.json(500, error_body(500, f"internal server error ({type(e).__name__})")).send(
                    send, rlog
                )

    # -- request checks ------------------------------------------------------------------------

    def _check_auth(self, scope: Scope) -> None:
        key = self.config.api_key
        if not key:
            return
        header = b""
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                header = value
                break
        scheme, _, token = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), key.encode()):
            raise HTTPError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'")

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.config.max_body_bytes
        for name, value in scope.get("headers") or ():
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                raise HTTPError(
                    413,
                    f"request body of {int(value)} bytes is over the limit of {limit} bytes (--max-body-bytes)",
                )
        chunks: list[bytes] = []
        size = 0

        async def read() -> None:
            nonlocal size
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise HTTPError(400, "the client went away before sending the whole body")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise HTTPError(
                        413, f"request body is over the limit of {limit} bytes (--max-body-bytes)"
                    )
                chunks.append(chunk)
                if not message.get("more_body"):
                    return

        timeout = self.config.body_timeout
        try:
            await asyncio.wait_for(read(), timeout)
        except asyncio.TimeoutError:
            raise HTTPError(
                408, f"the request body did not arrive within {timeout:g} s (--body-timeout)"
            ) from None
        return b"".join(chunks)

    async def _read_json(self, scope: Scope, receive: Receive) -> Any:
        raw = await self._read_body(scope, receive)
        try:
            if len(raw) > _BIG_BODY:
                return await asyncio.get_running_loop().run_in_executor(None, loads_body, raw)
            return loads_body(raw)
        except BodyError as e:
            raise HTTPError(400, str(e), e.param) from None

    def _check_model(self, model: str) -> None:
        if model != self.config.model:
            raise HTTPError(
                404,
                f"the model {model!r} does not exist here; this server serves {self.config.model!r}",
                "model",
                kind="not_found_error",
            )

    def _refuse_if_draining(self) -> None:
        if self.draining:
            raise HTTPError(503, "the server is shutting down", kind="server_shutting_down")

    # -- planning ------------------------------------------------------------------------------

    async def _render(self, req: dict[str, Any]) -> str:
        from ._prompt import ChatTemplateError
        from ._render import RenderBusy, RenderTimeout

        kwargs = dict(req.get("chat_template_kwargs") or {})
        if req.get("reasoning_effort") is not None:
            kwargs.setdefault("reasoning_effort", req["reasoning_effort"])
        for reserved in ("messages", "tools", "add_generation_prompt", "documents", "continue_final_message"):
            kwargs.pop(reserved, None)
        try:
            return await self.renderer.render(req["messages"], tools=req.get("tools") or None, kwargs=kwargs)
        except RenderTimeout as e:
            self.metrics.render_timeouts.inc()
            raise HTTPError(400, str(e), "messages", kind="render_timeout") from None
        except RenderBusy as e:
            raise HTTPError(503, str(e), kind="server_busy") from None
        except ChatTemplateError as e:
            raise HTTPError(
                400, f"the model's chat template rejected the conversation: {e}", "messages"
            ) from None

    async def _plan(self, body: Any, rlog: RequestLog) -> _Plan:
        try:
            req = validate_chat_request(body)
        except InvalidRequest as e:
            raise HTTPError(400, str(e), e.param) from None
        rlog.set(model=req["model"], stream=req["stream"])
        self._check_model(req["model"])
        r = self.resolved
        if r.api not in STRUCTURED_KINDS:
            rf = req.get("response_format")
            if rf is not None and rf.get("type") != "text":
                raise HTTPError(
                    400,
                    f"response_format {rf.get('type')!r} is not supported with a raw-text upstream",
                    "response_format",
                )
        prompt = None
        prefix = r.generation_prompt
        note = None
        if r.chat_template is not None and r.api in (*PROMPT_KINDS, "chat-raw"):
            prompt = await self._render(req)
            prefix = prompt
            if r.template is not None and r.template.anchor_re.search(prompt) is None:
                # The prompt does not end in the template's assistant header (a template mismatch):
                # parsing it as output would put the prompt into the answer.
                prefix = r.generation_prompt
                note = "the rendered prompt does not contain the response template's start anchor"
                rlog.set(prefix_warning=note)
        stop = list(dict.fromkeys((req.get("stop") or []) + r.stop))
        passthrough = {k: body[k] for k in self.config.passthrough if k in body}
        upstream_req, default_max = req, None
        if r.api == "completions" and req.get("max_tokens") is None and self.config.default_max_tokens:
            # the completions endpoints default to 16 tokens (vLLM, SGLang, llama-cpp-python)
            default_max = self.config.default_max_tokens
            upstream_req = {**req, "max_tokens": default_max}
        try:
            constraint = None
            if needs_constraint(req):  # required / named / strict / non-parallel (derived off the loop)
                try:
                    constraint = await self._constraints().plan(
                        r.api,
                        req,
                        template=r.template,
                        template_name=r.template_name,
                        prefix=prefix,
                        stop=stop,
                    )
                except ConstraintRefused as e:
                    raise HTTPError(e.status, str(e), e.param, kind=e.kind) from None
                rlog.set(constraint=constraint is not None)
            call = build_call(
                r.api,
                upstream_req,
                model=r.upstream_model,
                prompt=prompt,
                stop=stop or None,
                stream=req["stream"],
                passthrough=passthrough,
                constraint=constraint,
            )
        except InvalidRequest as e:
            raise HTTPError(400, str(e), e.param) from None
        return _Plan(req, call, prefix, note, default_max)

    def _constraints(self) -> ConstraintPlanner:
        if self.constraint_planner is None:
            c = self.config
            self.constraint_planner = ConstraintPlanner(
                workers=c.constraint_workers,
                timeout=c.constraint_timeout,
                max_tools=c.constraint_max_tools,
                max_tools_bytes=c.constraint_max_tools_bytes,
            )
        return self.constraint_planner

    def _pipeline(self, plan: _Plan) -> Pipeline:
        req = plan.req
        return Pipeline(
            template=self.resolved.template,
            prefix=plan.prefix,
            tools=req.get("tools"),
            tool_choice=req.get("tool_choice"),
            parallel_tool_calls=req.get("parallel_tool_calls", True),
            reasoning_key=self.config.reasoning_key,
        )

    # -- answering -----------------------------------------------------------------------------

    def _account(self, pipe: Pipeline, rlog: RequestLog) -> None:
        label = self._template_label
        m = self.metrics
        rlog.set(finish_reason=pipe.finish_reason, tool_calls=pipe.calls_sent)
        if pipe.calls_sent:
            m.tool_calls.inc(label, by=pipe.calls_sent)
        if pipe.usage:
            m.prompt_tokens.inc(label, by=pipe.usage.get("prompt_tokens") or 0)
            m.completion_tokens.inc(label, by=pipe.usage.get("completion_tokens") or 0)
        errors = pipe.report.get("errors") or ()
        if errors:
            m.parse_errors.inc(label, by=len(errors))
        for d in pipe.report.get("dropped") or ():
            m.dropped.inc(label, str(d.get("reason", "unknown"))[:80])

    def _upstream_failed(self, e: UpstreamError, rlog: RequestLog) -> None:
        self.metrics.upstream_errors.inc(e.kind)
        rlog.set(error=str(e), upstream_status=e.upstream_status, upstream=self.resolved.upstream_url)

    async def _once(self, plan: _Plan, encoder: Encoder, rlog: RequestLog, send: Send) -> None:
        pipe = self._pipeline(plan)
        try:
            async with self.upstream().open(plan.call) as answer:
                self._answers.add(answer)
                events = await answer.read_whole()
        except UpstreamError as e:
            e = plan.explain(e)
            self._upstream_failed(e, rlog)
            await _error_reply(e).send(send, rlog)
            return
        for event in events:
            pipe.feed(event)
        self._account(pipe, rlog)
        await _Reply.json(200, encoder.whole(pipe)).send(send, rlog)

    async def _stream(self, plan: _Plan, encoder: Encoder, rlog: RequestLog, send: Send) -> None:
        """The stream driver for both APIs (see the module docstring)."""
        pipe = self._pipeline(plan)
        started = rlog.started
        first = True
        try:
            async with self.upstream().open(plan.call) as answer:
                self._answers.add(answer)
                await _send_start(send, rlog, 200, _SSE_HEADERS)
                await send({"type": "http.response.body", "body": encoder.start(), "more_body": True})
                try:
                    async for events in answer:
                        out: list[dict[str, Any]] = []
                        for event in events:
                            out += pipe.feed(event)
                        if out:
                            if first:
                                first = False
                                self._first_token(started)
                            await send(
                                {"type": "http.response.body", "body": encoder.deltas(out), "more_body": True}
                            )
                except UpstreamError as e:
                    self._upstream_failed(e, rlog)
                    rlog.set(stream_error=True)
                    body = encoder.fail(pipe.abort(), e)
                    if first and pipe.sent:
                        self._first_token(started)
                    self._account(pipe, rlog)
                    await send({"type": "http.response.body", "body": body, "more_body": False})
                    return
        except UpstreamError as e:  # raised on entry: nothing was sent yet
            e = plan.explain(e)
            self._upstream_failed(e, rlog)
            await _error_reply(e).send(send, rlog)
            return
        body = encoder.finish(pipe)
        if first and pipe.sent:
            self._first_token(started)
        self._account(pipe, rlog)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    def _first_token(self, started: float) -> None:
        self.metrics.ttft.observe(time.perf_counter() - started, self._template_label)

    def _exchange(self, plan: _Plan, encoder: Encoder, rlog: RequestLog) -> _Exchange:
        work = self._stream if plan.req["stream"] else self._once
        return _Exchange(lambda send: work(plan, encoder, rlog, send), rlog)

    # -- routes --------------------------------------------------------------------------------

    async def chat_completions(self, scope: Scope, receive: Receive, rlog: RequestLog) -> Any:
        self._check_auth(scope)
        self._refuse_if_draining()
        body = await self._read_json(scope, receive)
        plan = await self._plan(body, rlog)
        include_usage = bool((plan.req.get("stream_options") or {}).get("include_usage"))
        return self._exchange(plan, _ChatEncoder(self.config.model, include_usage), rlog)

    async def responses(self, scope: Scope, receive: Receive, rlog: RequestLog) -> Any:
        self._check_auth(scope)
        self._refuse_if_draining()
        body = await self._read_json(scope, receive)
        try:
            chat_body = responses_to_chat(body)
        except InvalidRequest as e:
            raise HTTPError(400, str(e), e.param) from None
        except (TypeError, AttributeError, KeyError) as e:  # a field of an unexpected JSON type
            raise HTTPError(400, f"the request does not follow the Responses API: {e}", "input") from None
        plan = await self._plan(chat_body, rlog)
        return self._exchange(plan, _ResponsesEncoder(self.config.model, body), rlog)

    async def models(self, scope: Scope, receive: Receive, rlog: RequestLog) -> Any:
        self._check_auth(scope)
        return _Reply.json(
            200,
            {
                "object": "list",
                "data": [
                    {
                        "id": self.config.model,
                        "object": "model",
                        "created": self.created,
                        "owned_by": "chatparse",
                    }
                ],
            },
        )

    async def health(self, scope: Scope, receive: Receive, rlog: RequestLog) -> Any:
        if self.draining:
            return _Reply.json(503, {"status": "shutting_down"})
        return _Reply.json(200, {"status": "ok"})

    async def metrics_route(self, scope: Scope, receive: Receive, rlog: RequestLog) -> Any:
        self._check_auth(scope)
        return _Reply(
            200, self.metrics.render(), [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]
        )

    async def openapi_route(self, scope: Scope, receive: Receive, rlog: RequestLog) -> Any:
        from ._openapi import openapi

        return _Reply.json(200, openapi(self.config.model, auth=bool(self.config.api_key)))


def create_app(config: ServerConfig, *, resolved: Resolved | None = None) -> App:
    """The ASGI app for `config`.

    Resolves the template, chat template and upstream API first (`ServerConfigError` when it
    cannot). Render workers start with the ASGI lifespan (or on the first request); the upstream
    HTTP client is opened on first use; both are closed at shutdown.
    """
    return App(config, resolved or resolve_config(config))
