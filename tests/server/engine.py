"""Test infrastructure: a fake inference engine that replays recorded model outputs.

``TestEngine`` speaks the HTTP dialects of vLLM / SGLang / llama.cpp (``/v1/completions``,
``/v1/chat/completions``) and Ollama (``/api/generate``, ``/api/chat``) over real HTTP on loopback.
It streams a registered raw model output (``Script.text``, special tokens included) token by token
and emulates the engine-side knobs a proxy relies on: ``skip_special_tokens`` (default True, as in
vLLM), ``max_tokens`` / ``num_predict`` (finish ``length``), ``stop`` strings (cut at token level,
partial matches withheld), ``stream_options.include_usage``.  Faults can be injected per script
(``error``, ``bad_request``, ``die:N``, ``hang``, ``hang:N``, ``garbage:N``) and every request is
recorded for assertions.

A request selects its script with a ``[case:KEY]`` marker in the prompt (completions / generate) or
in the last user message (chat endpoints); ``TestEngine.default`` answers requests without a known
key.  It is NOT a model and not part of chatparse.

    eng = TestEngine()
    eng.add("hello", Script(text="<think>hm</think>Hi!"))
    with eng:
        httpx.post(eng.url + "/v1/completions", json={"prompt": "[case:hello]", ...})

Run standalone (benchmarks, manual testing)::

    python -m tests.server.engine --port 9000 [--delay 0.02] [--text-file F]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import threading
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .live import LiveServer

__all__ = ["DEFAULT_SPECIAL", "MODEL", "Script", "TestEngine", "tokenize"]

MODEL = "test-model"

# Strings that are single (special) tokens in some model family.  Kept as data; extend freely.
DEFAULT_SPECIAL: tuple[str, ...] = (
    # Qwen / Hermes / ChatML
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    # Mistral
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "[THINK]",
    "[/THINK]",
    "[INST]",
    "[/INST]",
    "<s>",
    "</s>",
    # Llama 3.x
    "<|python_tag|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    # gpt-oss (harmony)
    "<|call|>",
    "<|return|>",
    "<|channel|>",
    "<|message|>",
    "<|start|>",
    "<|end|>",
    "<|constrain|>",
    # Gemma 4
    "<|tool_call>",
    "<tool_call|>",
    '<|"|>',
    "<|turn>",
    "<turn|>",
    "<|channel>",
    "<channel|>",
    "<|tool_response>",
    "<tool_response|>",
    "<start_of_turn>",
    "<end_of_turn>",
    # misc
    "<tool_calls>",
    "</tool_calls>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
)

# Generic special-token shapes: <|anything|> and DeepSeek's fullwidth <｜anything｜>.
_GENERIC_SPECIAL = r"<\|[^<>|\s]{1,40}\|>|<\uff5c[^<>\uff5c\s]{1,40}\uff5c>"
_CASE_RX = re.compile(r"\[case:([A-Za-z0-9_.:/+-]+)\]")
_FAULT_RX = re.compile(r"(error|bad_request|die|hang|garbage)(?::(\d+))?")

_CONTEXT_MSG = (
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
    "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
)


@dataclass
class Script:
    """One recorded model output and how the engine should deliver it."""

    text: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int = 12
    delay: float = 0.0
    first_token_delay: float = 0.0
    # Streams wait before their first token until this many generation requests are active at once
    # (or `gate_timeout` seconds passed): overlap by construction, not by timing.
    gate: int = 0
    gate_timeout: float = 30.0
    fault: str | None = None
    # Structured answer ("mode c": the engine parses tool calls itself); used by the chat endpoints
    # instead of `text` when any of these is set.
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[dict] | None = None

    @property
    def structured(self) -> bool:
        return self.content is not None or self.reasoning is not None or self.tool_calls is not None


Token = tuple[str, bool]  # (text, is_special)


def _special_rx(special_tokens: Iterable[str]) -> re.Pattern[str]:
    literals = sorted({s for s in special_tokens if s}, key=len, reverse=True)
    parts = [re.escape(s) for s in literals] + [_GENERIC_SPECIAL]
    return re.compile("|".join(parts))


def _split_plain(text: str, rng: random.Random, out: list[Token]) -> None:
    i, n = 0, len(text)
    while i < n:
        k = rng.randint(1, 4)
        out.append((text[i : i + k], False))
        i += k


def tokenize(
    text: str, key: str = "", *, seed: int = 0, special_tokens: Iterable[str] = DEFAULT_SPECIAL
) -> list[Token]:
    """Cut `text` into (piece, is_special) tokens: specials whole, other text in 1-4 char pieces."""
    return _tokenize(text, random.Random(seed + zlib.crc32(key.encode())), _special_rx(special_tokens))


def _tokenize(text: str, rng: random.Random, rx: re.Pattern[str]) -> list[Token]:
    out: list[Token] = []
    pos = 0
    for m in rx.finditer(text):
        if m.start() > pos:
            _split_plain(text[pos : m.start()], rng, out)
        out.append((m.group(), True))
        pos = m.end()
    if pos < len(text):
        _split_plain(text[pos:], rng, out)
    return out


def _parse_fault(fault: str | None) -> tuple[str | None, int | None]:
    """ "die:3" -> ("die", 3); "hang" -> ("hang", None); None -> (None, None)."""
    if not fault:
        return None, None
    m = _FAULT_RX.fullmatch(fault)
    if not m:
        raise ValueError(f"unknown fault {fault!r}")
    return m.group(1), None if m.group(2) is None else int(m.group(2))


def _held(buf: str, stops: list[str]) -> int:
    """Length of the longest suffix of `buf` that is a proper prefix of a stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(buf), len(s) - 1), best, -1):
            if buf.endswith(s[:k]):
                best = k
                break
    return best


class _Gen:
    """Generation state of one request: per-token visible pieces, the count and the finish reason."""

    __slots__ = ("finish", "n")

    def __init__(self, finish: str) -> None:
        self.finish = finish
        self.n = 0

    def raw(
        self, tokens: list[Token], skip_special: bool, max_tokens: int | None, stops: list[str]
    ) -> Iterator[str]:
        """Yield the text emitted for each generated token ('' when nothing is emitted)."""
        limit = len(tokens)
        truncated = max_tokens is not None and max_tokens < limit
        if truncated:
            limit = max(0, max_tokens)  # type: ignore[arg-type]
        if not stops:
            for i in range(limit):
                tok, special = tokens[i]
                self.n += 1
                yield "" if special and skip_special else tok
            if truncated:
                self.finish = "length"
            return
        buf = ""
        for i in range(limit):
            tok, special = tokens[i]
            self.n += 1
            if special and skip_special:
                tok = ""
            if tok:
                buf += tok
                cut = -1
                for s in stops:
                    j = buf.find(s)
                    if j >= 0 and (cut < 0 or j < cut):
                        cut = j
                if cut >= 0:
                    self.finish = "stop"
                    yield buf[:cut]
                    return
            if i == limit - 1:  # last token: release what was withheld
                out, buf = buf, ""
            else:
                hold = _held(buf, stops) if buf else 0
                out, buf = buf[: len(buf) - hold], buf[len(buf) - hold :]
            yield out
        if truncated:
            self.finish = "length"

    def structured(
        self,
        script: Script,
        tokenize_plain: Callable[[str], list[str]],
        max_tokens: int | None,
        whole_calls: bool,
    ) -> Iterator[tuple[str, Any, Any]]:
        """Yield ("reasoning", piece, None) / ("content", piece, None) / ("call", i, call) /
        ("args", i, fragment) per generated token; with `whole_calls` (Ollama) a call is one event."""
        budget = max_tokens if max_tokens is not None else -1

        def spend(cost: int = 1) -> bool:
            if budget >= 0 and self.n + cost > budget:
                self.finish = "length"
                return False
            self.n += cost
            return True

        for kind, text in (("reasoning", script.reasoning), ("content", script.content)):
            for piece in tokenize_plain(text or ""):
                if not spend():
                    return
                yield kind, piece, None
        calls = script.tool_calls or []
        for i, call in enumerate(calls):
            frags = tokenize_plain(call.get("function", {}).get("arguments") or "")
            if whole_calls:
                if not spend(1 + len(frags)):
                    return
                yield "call", i, call
                continue
            if not spend():
                return
            yield "call", i, call
            for frag in frags:
                if not spend():
                    return
                yield "args", i, frag
        if calls:
            self.finish = "tool_calls"


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _oai_error(status: int, message: str, type_: str, code: Any = None) -> JSONResponse:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return JSONResponse(body, status_code=status)


def _ollama_error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _last_user_text(messages: Any) -> str:
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "user":
                return _text_of(m.get("content"))
    return ""


def _stops(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [s for s in value if isinstance(s, str) and s]


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


Send = Callable[[dict], Awaitable[None]]
Receive = Callable[[], Awaitable[dict]]

_DIED = object()


class _Answer:
    """ASGI response running `body(send, receive)` while watching for the client going away.

    On ``http.disconnect`` the body task is cancelled (the body counts it in ``cancelled``).
    A body returning ``_DIED`` has closed the connection itself; we wait until uvicorn notices, so
    that it does not log "returned without completing response".
    """

    def __init__(self, engine: TestEngine, body: Callable[[Send, Receive], Awaitable[Any]]) -> None:
        self.engine = engine
        self.body = body

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        eng = self.engine
        with eng._lock:
            eng.active += 1
        body = asyncio.ensure_future(self.body(send, receive))
        watch = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            await asyncio.wait((body, watch), return_when=asyncio.FIRST_COMPLETED)
            if body.done():
                if body.result() is _DIED:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(watch, 2.0)
            else:
                body.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await body
        finally:
            for t in (body, watch):
                if not t.done():
                    t.cancel()
            with eng._lock:
                eng.active -= 1


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _close_connection(receive: Receive) -> bool:
    """Abruptly close the client connection.  ASGI has no such operation; with uvicorn's h11 and
    httptools protocols `receive` is a bound method of the request cycle, which holds the transport."""
    transport = getattr(getattr(receive, "__self__", None), "transport", None)
    if transport is None or not hasattr(transport, "close"):
        return False
    transport.close()
    return True


class TestEngine:
    """Fake vLLM/SGLang/llama.cpp/Ollama server replaying `Script`s; see the module docstring.

    Observation (updated on the server thread, safe to read from tests):
      requests   {"path", "body" (parsed JSON or None), "headers" (lower-case)} per request received
      active     generation requests being answered right now
      completed  generation answers (streamed or not) whose last byte was sent
      cancelled  generation answers abandoned because the client went away (or, at server
                 shutdown, were cut by uvicorn); `die` and hangs released by `stop()` count in neither
      released   hung requests whose connection `stop()` dropped (so shutdown did not wait for them)

    Faults (``Script.fault``):
      error        500 before anything is sent (OpenAI error body; Ollama: {"error": ...})
      bad_request  400 "maximum context length" error
      die:N        stream N token chunks, then close the TCP connection (no finish chunk, no [DONE],
                   chunked body unterminated -> httpx.RemoteProtocolError "incomplete chunked read");
                   non-streaming: close before the status line ("Server disconnected without
                   sending a response").  N >= the number of chunks: dies right before the finish.
      hang         never send anything; hang:N: stream N chunks then stall.  Cancelled (and counted)
                   when the client disconnects; `stop()` drops hung connections to stop quickly.
      garbage:N    after N chunks send one non-JSON line (SSE ``data: {not json``), then continue.
    Chunks are counted without chat's initial role chunk; tokens that emit no text don't count.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        special_tokens: Iterable[str] = DEFAULT_SPECIAL,
        seed: int = 0,
        reasoning_key: str = "reasoning_content",
        model: str = MODEL,
    ) -> None:
        self.special_tokens = tuple(special_tokens)
        self.seed = seed
        self.reasoning_key = reasoning_key
        self.model = model
        self.scripts: dict[str, Script] = {}
        self.default: Script | None = None
        self.requests: list[dict] = []
        self.active = 0
        self.completed = 0
        self.cancelled = 0
        self.released = 0
        self._lock = threading.Lock()
        self._rx = _special_rx(self.special_tokens)
        self._cache: dict[tuple[str, str], list[Token]] = {}
        self._server: LiveServer | None = None
        self._release = asyncio.Event()  # set when the engine stops: hung requests give up
        self.app = Starlette(
            routes=[
                Route("/health", self._health, methods=["GET"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/completions", self._completions, methods=["POST"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/api/generate", self._generate, methods=["POST"]),
                Route("/api/chat", self._ollama_chat, methods=["POST"]),
            ]
        )

    # ------------------------------------------------------------------ public API

    def add(self, key: str, script: Script) -> None:
        _parse_fault(script.fault)  # validate early
        self.scripts[key] = script

    def wait_for(self, predicate: Callable[[TestEngine], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if predicate(self):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def start(self) -> LiveServer:
        if self._server is None:
            self._release = asyncio.Event()
            self._server = LiveServer(self.app).start()
        return self._server

    def stop(self) -> None:
        srv = self._server
        if srv is None:
            return
        loop = getattr(srv.server, "_loop", None)
        if loop is not None:  # release hung requests
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._release.set)
        srv.stop()
        self._server = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("TestEngine not started")
        return self._server.url

    def __enter__(self) -> TestEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def tokens(self, key: str, text: str) -> list[Token]:
        """Tokenization of `text` for case `key` (cached; deterministic for a given seed)."""
        toks = self._cache.get((key, text))
        if toks is None:
            rng = random.Random(self.seed + zlib.crc32(key.encode()))
            toks = self._cache[(key, text)] = _tokenize(text, rng, self._rx)
        return toks

    # ------------------------------------------------------------------ plumbing

    async def _record(self, request: Request, ollama: bool) -> tuple[dict | None, Response | None]:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            body = None
            err: str | None = f"Invalid JSON body: {exc}"
        else:
            err = None if isinstance(body, dict) else "Request body must be a JSON object"
        self.requests.append({"path": request.url.path, "body": body, "headers": dict(request.headers)})
        if err is not None:
            if ollama:
                return None, _ollama_error(400, err)
            return None, _oai_error(400, err, "BadRequestError", 400)
        return body, None

    def _lookup(self, text: str, ollama: bool) -> tuple[str, Script | None, Response | None]:
        m = _CASE_RX.search(text)
        key = m.group(1) if m else ""
        script = self.scripts.get(key) if m else None
        if script is None:
            if self.default is not None:
                return "", self.default, None
            msg = f"no script registered for case {key!r}" if m else "request names no [case:KEY]"
            if ollama:
                return key, None, _ollama_error(404, msg)
            return key, None, _oai_error(404, msg, "not_found_error")
        return key, script, None

    def _fault_response(self, kind: str | None, ollama: bool) -> Response | None:
        if kind == "error":
            if ollama:
                return _ollama_error(500, "engine exploded")
            return _oai_error(500, "engine exploded", "internal_error", 500)
        if kind == "bad_request":
            if ollama:
                return _ollama_error(400, _CONTEXT_MSG)
            return _oai_error(400, _CONTEXT_MSG, "BadRequestError", 400)
        return None

    def _plain_pieces(self, key: str) -> Callable[[str], list[str]]:
        return lambda text: [t for t, _ in self.tokens(key, text)]

    def _stream(
        self,
        script: Script,
        steps: Iterator[str | None],
        head: list[str],
        tail: Callable[[], list[str]],
        garbage: str,
        media_type: str,
    ) -> _Answer:
        """Answer a streaming request.  `steps` yields, per generated token, the encoded chunk to
        send or None (token generated, nothing to send); `head` is sent before the first token,
        `tail()` after the last one."""
        kind, n = _parse_fault(script.fault)
        if kind not in ("die", "hang", "garbage"):
            kind = None
        never_answer = kind == "hang" and n is None
        n_fault = n or 0
        delay, first_delay = script.delay, script.first_token_delay
        headers = [
            (b"content-type", media_type.encode()),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]

        async def body(send: Send, receive: Receive) -> Any:
            try:
                if never_answer:
                    return await self._hang(receive, send)
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                if script.gate:
                    deadline = time.monotonic() + script.gate_timeout
                    while self.active < script.gate and time.monotonic() < deadline:
                        await asyncio.sleep(0.005)
                await asyncio.sleep(first_delay)
                for chunk in head:
                    await send({"type": "http.response.body", "body": chunk.encode(), "more_body": True})
                sent = 0
                first = True
                for chunk in steps:
                    if first:
                        first = False
                    else:
                        await asyncio.sleep(delay)
                    if chunk is None:
                        continue
                    if kind is not None and sent == n_fault:
                        if kind == "die":
                            return self._die(receive, send)
                        if kind == "hang":
                            return await self._hang(receive, send)
                        if kind == "garbage":
                            await send(
                                {"type": "http.response.body", "body": garbage.encode(), "more_body": True}
                            )
                    await send({"type": "http.response.body", "body": chunk.encode(), "more_body": True})
                    sent += 1
                if kind is not None and sent <= n_fault:
                    # fewer chunks than N: the fault hits right before the finish chunk
                    if kind == "die":
                        return self._die(receive, send)
                    if kind == "hang":
                        return await self._hang(receive, send)
                    await send({"type": "http.response.body", "body": garbage.encode(), "more_body": True})
                out = "".join(tail())
                await send({"type": "http.response.body", "body": out.encode(), "more_body": False})
                with self._lock:
                    self.completed += 1
                return None
            except (asyncio.CancelledError, GeneratorExit):
                with self._lock:
                    self.cancelled += 1
                raise

        return _Answer(self, body)

    async def _hang(self, receive: Receive, send: Send) -> Any:
        """Stall until the client goes away (the task is then cancelled) or the engine stops
        (then the connection is dropped, so that shutdown does not wait for the hung request)."""
        await self._release.wait()
        self.released += 1
        return self._die(receive, send)

    def _die(self, receive: Receive, send: Send) -> Any:
        if _close_connection(receive):
            return _DIED
        return None  # fallback: return mid-body, uvicorn closes the connection (and logs an error)

    def _whole(self, script: Script, payload: dict, n_tokens: int) -> _Answer:
        """Answer a non-streaming request: sleep like the generation would, then send one JSON."""
        kind, _ = _parse_fault(script.fault)

        async def body(send: Send, receive: Receive) -> Any:
            try:
                if kind == "hang":
                    return await self._hang(receive, send)
                wait = script.first_token_delay + script.delay * max(0, n_tokens - 1)
                await asyncio.sleep(wait)
                if kind == "die":
                    if _close_connection(receive):
                        return _DIED
                    # fallback: promise a body we never send; uvicorn closes the connection
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 200,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")],
                        }
                    )
                    return None
                data = json.dumps(payload).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": data, "more_body": False})
                with self._lock:
                    self.completed += 1
                return None
            except (asyncio.CancelledError, GeneratorExit):
                with self._lock:
                    self.cancelled += 1
                raise

        return _Answer(self, body)

    # ------------------------------------------------------------------ endpoints

    async def _health(self, request: Request) -> Response:
        self.requests.append({"path": request.url.path, "body": None, "headers": dict(request.headers)})
        return JSONResponse({"status": "ok"})

    async def _models(self, request: Request) -> Response:
        self.requests.append({"path": request.url.path, "body": None, "headers": dict(request.headers)})
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "test-engine"}],
            }
        )

    def _prepare(self, text: str, ollama: bool) -> tuple[str, Script | None, Response | None]:
        key, script, err = self._lookup(text, ollama)
        if err is not None or script is None:
            return key, None, err
        fault = self._fault_response(_parse_fault(script.fault)[0], ollama)
        return key, script, fault

    async def _completions(self, request: Request) -> Response:
        body, err = await self._record(request, ollama=False)
        if body is None:
            return err  # type: ignore[return-value]
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = next((p for p in prompt if isinstance(p, str)), "")
        key, script, err = self._prepare(prompt if isinstance(prompt, str) else "", ollama=False)
        if script is None or err is not None:
            return err  # type: ignore[return-value]
        model = body.get("model") or self.model
        gen = _Gen(script.finish_reason)
        pieces = gen.raw(
            self.tokens(key, script.text),
            body.get("skip_special_tokens") is not False,
            _int_or_none(body.get("max_tokens")),
            _stops(body.get("stop")),
        )
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())

        def usage() -> dict:
            return {
                "prompt_tokens": script.prompt_tokens,
                "completion_tokens": gen.n,
                "total_tokens": script.prompt_tokens + gen.n,
            }

        if not body.get("stream"):
            text = "".join(pieces)
            payload = {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": gen.finish}],
                "usage": usage(),
            }
            return self._whole(script, payload, gen.n)

        env = json.dumps({"id": rid, "object": "text_completion", "created": created, "model": model})[:-1]
        pre = "data: " + env + ', "choices": [{"index": 0, "text": '
        post = ', "logprobs": null, "finish_reason": null}]}\n\n'
        want_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def steps() -> Iterator[str | None]:
            for p in pieces:
                yield pre + json.dumps(p) + post if p else None

        def tail() -> list[str]:
            out = [pre + '"", "logprobs": null, "finish_reason": ' + json.dumps(gen.finish) + "}]}\n\n"]
            if want_usage:
                out.append("data: " + env + ', "choices": [], "usage": ' + json.dumps(usage()) + "}\n\n")
            out.append("data: [DONE]\n\n")
            return out

        return self._stream(script, steps(), [], tail, "data: {not json\n\n", "text/event-stream")

    async def _chat(self, request: Request) -> Response:
        body, err = await self._record(request, ollama=False)
        if body is None:
            return err  # type: ignore[return-value]
        key, script, err = self._prepare(_last_user_text(body.get("messages")), ollama=False)
        if script is None or err is not None:
            return err  # type: ignore[return-value]
        model = body.get("model") or self.model
        max_tokens = _int_or_none(body.get("max_completion_tokens"))
        if max_tokens is None:
            max_tokens = _int_or_none(body.get("max_tokens"))
        gen = _Gen(script.finish_reason)
        rkey = self.reasoning_key
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

        def usage() -> dict:
            return {
                "prompt_tokens": script.prompt_tokens,
                "completion_tokens": gen.n,
                "total_tokens": script.prompt_tokens + gen.n,
            }

        def call_id(i: int, call: dict) -> str:
            return call.get("id") or f"chatcmpl-tool-{zlib.crc32(f'{key}/{i}'.encode()):08x}"

        if script.structured:
            events = gen.structured(script, self._plain_pieces(key), max_tokens, whole_calls=False)
            pieces: Iterator[str] | None = None
        else:
            events = None
            pieces = gen.raw(
                self.tokens(key, script.text),
                body.get("skip_special_tokens") is not False,
                max_tokens,
                _stops(body.get("stop")),
            )

        if not body.get("stream"):

            def make() -> dict:
                message: dict[str, Any] = {"role": "assistant"}
                if pieces is not None:
                    message["content"] = "".join(pieces)
                else:
                    reasoning: list[str] = []
                    content: list[str] = []
                    calls: list[dict] = []
                    for kind, a, b in events:  # type: ignore[union-attr]
                        if kind == "reasoning":
                            reasoning.append(a)
                        elif kind == "content":
                            content.append(a)
                        elif kind == "call":
                            fn = b.get("function", {})
                            calls.append(
                                {
                                    "id": call_id(a, b),
                                    "type": "function",
                                    "function": {"name": fn.get("name"), "arguments": ""},
                                }
                            )
                        else:
                            calls[-1]["function"]["arguments"] += b
                    message["content"] = "".join(content) or None
                    if reasoning:
                        message[rkey] = "".join(reasoning)
                    if calls:
                        message["tool_calls"] = calls
                return {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {"index": 0, "message": message, "logprobs": None, "finish_reason": gen.finish}
                    ],
                    "usage": usage(),
                }

            return self._whole(script, make(), gen.n)

        env = json.dumps({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model})[
            :-1
        ]
        pre = "data: " + env + ', "choices": [{"index": 0, "delta": '
        post = ', "logprobs": null, "finish_reason": null}]}\n\n'
        want_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        head = [pre + '{"role": "assistant", "content": ""}' + post]
        rkey_json = json.dumps(rkey)

        def steps() -> Iterator[str | None]:
            if pieces is not None:
                for p in pieces:
                    yield pre + '{"content": ' + json.dumps(p) + "}" + post if p else None
                return
            for kind, a, b in events:  # type: ignore[union-attr]
                if kind == "reasoning":
                    yield pre + "{" + rkey_json + ": " + json.dumps(a) + "}" + post
                elif kind == "content":
                    yield pre + '{"content": ' + json.dumps(a) + "}" + post
                elif kind == "call":
                    fn = b.get("function", {})
                    delta = {
                        "tool_calls": [
                            {
                                "index": a,
                                "id": call_id(a, b),
                                "type": "function",
                                "function": {"name": fn.get("name"), "arguments": ""},
                            }
                        ]
                    }
                    yield pre + json.dumps(delta) + post
                else:
                    delta = {"tool_calls": [{"index": a, "function": {"arguments": b}}]}
                    yield pre + json.dumps(delta) + post

        def tail() -> list[str]:
            out = [pre + '{}, "logprobs": null, "finish_reason": ' + json.dumps(gen.finish) + "}]}\n\n"]
            if want_usage:
                out.append("data: " + env + ', "choices": [], "usage": ' + json.dumps(usage()) + "}\n\n")
            out.append("data: [DONE]\n\n")
            return out

        return self._stream(script, steps(), head, tail, "data: {not json\n\n", "text/event-stream")

    def _ollama_final(self, model: str, created_at: str, gen: _Gen, script: Script, t0: float) -> dict:
        return {
            "model": model,
            "created_at": created_at,
            "done": True,
            "done_reason": "length" if gen.finish == "length" else "stop",
            "total_duration": int((time.monotonic() - t0) * 1e9),
            "load_duration": 0,
            "prompt_eval_count": script.prompt_tokens,
            "prompt_eval_duration": 0,
            "eval_count": gen.n,
            "eval_duration": 0,
        }

    async def _generate(self, request: Request) -> Response:
        t0 = time.monotonic()
        body, err = await self._record(request, ollama=True)
        if body is None:
            return err  # type: ignore[return-value]
        prompt = body.get("prompt")
        key, script, err = self._prepare(prompt if isinstance(prompt, str) else "", ollama=True)
        if script is None or err is not None:
            return err  # type: ignore[return-value]
        model = body.get("model") or self.model
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        num_predict = _int_or_none(options.get("num_predict"))
        if num_predict is not None and num_predict < 0:
            num_predict = None
        gen = _Gen(script.finish_reason)
        pieces = gen.raw(self.tokens(key, script.text), False, num_predict, _stops(options.get("stop")))
        created_at = _now_iso()

        if body.get("stream") is False:

            def make() -> dict:
                text = "".join(pieces)
                final = self._ollama_final(model, created_at, gen, script, t0)
                return {"model": model, "created_at": created_at, "response": text, **final}

            return self._whole(script, make(), gen.n)

        pre = json.dumps({"model": model, "created_at": created_at})[:-1] + ', "response": '
        post = ', "done": false}\n'

        def steps() -> Iterator[str | None]:
            for p in pieces:
                yield pre + json.dumps(p) + post if p else None

        def tail() -> list[str]:
            final = self._ollama_final(model, _now_iso(), gen, script, t0)
            return [
                json.dumps({"model": model, "created_at": final["created_at"], "response": "", **final})
                + "\n"
            ]

        return self._stream(script, steps(), [], tail, "{not json\n", "application/x-ndjson")

    async def _ollama_chat(self, request: Request) -> Response:
        t0 = time.monotonic()
        body, err = await self._record(request, ollama=True)
        if body is None:
            return err  # type: ignore[return-value]
        key, script, err = self._prepare(_last_user_text(body.get("messages")), ollama=True)
        if script is None or err is not None:
            return err  # type: ignore[return-value]
        model = body.get("model") or self.model
        options = body.get("options") if isinstance(body.get("options"), dict) else {}
        num_predict = _int_or_none(options.get("num_predict"))
        if num_predict is not None and num_predict < 0:
            num_predict = None
        gen = _Gen(script.finish_reason)
        created_at = _now_iso()

        def ollama_call(call: dict) -> dict:
            fn = call.get("function", {})
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    args = {}
            return {"function": {"name": fn.get("name"), "arguments": args if args is not None else {}}}

        if script.structured:
            events = gen.structured(script, self._plain_pieces(key), num_predict, whole_calls=True)
            pieces: Iterator[str] | None = None
        else:
            events = None
            pieces = gen.raw(self.tokens(key, script.text), False, num_predict, _stops(options.get("stop")))

        if body.get("stream") is False:

            def make() -> dict:
                message: dict[str, Any] = {"role": "assistant", "content": ""}
                if pieces is not None:
                    message["content"] = "".join(pieces)
                else:
                    thinking: list[str] = []
                    content: list[str] = []
                    calls: list[dict] = []
                    for kind, a, b in events:  # type: ignore[union-attr]
                        if kind == "reasoning":
                            thinking.append(a)
                        elif kind == "content":
                            content.append(a)
                        else:
                            calls.append(ollama_call(b))
                    message["content"] = "".join(content)
                    if thinking:
                        message["thinking"] = "".join(thinking)
                    if calls:
                        message["tool_calls"] = calls
                final = self._ollama_final(model, created_at, gen, script, t0)
                return {"model": model, "created_at": created_at, "message": message, **final}

            return self._whole(script, make(), gen.n)

        pre = (
            json.dumps({"model": model, "created_at": created_at})[:-1]
            + ', "message": {"role": "assistant", '
        )
        post = '}, "done": false}\n'

        def steps() -> Iterator[str | None]:
            if pieces is not None:
                for p in pieces:
                    yield pre + '"content": ' + json.dumps(p) + post if p else None
                return
            for kind, a, b in events:  # type: ignore[union-attr]
                if kind == "reasoning":
                    yield pre + '"content": "", "thinking": ' + json.dumps(a) + post
                elif kind == "content":
                    yield pre + '"content": ' + json.dumps(a) + post
                else:
                    yield pre + '"content": "", "tool_calls": ' + json.dumps([ollama_call(b)]) + post

        def tail() -> list[str]:
            final = self._ollama_final(model, _now_iso(), gen, script, t0)
            msg = {"role": "assistant", "content": ""}
            return [
                json.dumps({"model": model, "created_at": final["created_at"], "message": msg, **final})
                + "\n"
            ]

        return self._stream(script, steps(), [], tail, "{not json\n", "application/x-ndjson")


_DEFAULT_TEXT = (
    "<think>The user wants the weather in Paris. I should call the tool.</think>"
    "Let me check that for you.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description="Fake inference engine (test infrastructure).")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9000)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between streamed tokens")
    ap.add_argument("--first-token-delay", type=float, default=0.0)
    ap.add_argument("--text-file", help="raw model output to replay (default: a small tool-call sample)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    text = _DEFAULT_TEXT
    if args.text_file:
        with open(args.text_file, encoding="utf-8") as f:
            text = f.read()
    eng = TestEngine(seed=args.seed)
    eng.default = Script(text=text, delay=args.delay, first_token_delay=args.first_token_delay)
    uvicorn.run(eng.app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
