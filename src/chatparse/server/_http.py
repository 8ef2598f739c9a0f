"""A small HTTP/1.1 client for upstream engines, on asyncio protocols and httptools' C parser.

Theory of operation: the server spends most of its CPU per token in reading the engine's stream, so
this client does the least work per network read. A `_Connection` is an `asyncio.Protocol`;
`data_received` feeds httptools' response parser, whose `on_body` callback only appends the bytes to
a list and wakes the one waiting reader. `Response.chunks()` then hands over *everything* received
since the last wake-up as one list, so a batch of tokens that arrived together is handled (and
answered) together. There is no per-read timer object either: the read deadline is checked by one
timer per connection that re-arms itself from the time of the last read.

Bounded by construction: at most `max_pending` bytes are buffered per response (the transport is
paused beyond that and resumed when the reader catches up), error bodies are read up to a limit,
and every wait has a deadline (`connect_timeout`, `read_timeout`). `Response.abort(exc)` ends a
response from outside (graceful shutdown): the reader gets `exc` at its next wait.

Connections are kept alive in a small pool per (scheme, host, port); a request that fails on a
reused connection before any byte of the answer came back is retried once on a fresh one (the engine
may have closed the idle connection just then). Proxies from the environment are not used: an engine
is reached directly.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httptools

__all__ = ["ConnectFailed", "ConnectTimeout", "HTTPClient", "ProtocolFailed", "ReadTimeout", "Response"]

_KEEPALIVE_EXPIRY = 4.0  # seconds an idle pooled connection is trusted (engines close after ~5 s)


class TransportError(Exception):
    """Base of the client's errors (`reused`: the request went out on a pooled connection)."""

    reused = False
    answered = False


class ConnectFailed(TransportError):
    """The connection could not be made (refused, unknown host, TLS failure)."""


class ConnectTimeout(TransportError):
    """The connection was not made within the connect timeout."""


class ReadTimeout(TransportError):
    """The upstream sent nothing for `read_timeout` seconds."""


class ProtocolFailed(TransportError):
    """The connection broke, or the upstream sent something that is not HTTP/1.1."""


class _Connection(asyncio.Protocol):
    """One TCP connection; at most one response in flight."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_pending: int) -> None:
        self.loop = loop
        self.max_pending = max_pending
        self.transport: asyncio.Transport | None = None
        self.parser: Any = None
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done: asyncio.Future[None] | None = None
        self.body: list[bytes] = []
        self.pending = 0
        self.paused = False
        self.complete = False
        self.keep_alive = False
        self.close_delimited = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.last_read = 0.0
        self.read_timeout: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.idle_since = 0.0
        self.lost = False
        self.got_bytes = False

    # -- lifecycle ---------------------------------------------------------------------------

    def begin(self, read_timeout: float | None) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers = []
        self.headers_done = self.loop.create_future()
        self.body = []
        self.pending = 0
        self.complete = False
        self.keep_alive = False
        self.close_delimited = False
        self.error = None
        self.got_bytes = False
        self.read_timeout = read_timeout
        self.last_read = self.loop.time()
        if read_timeout is not None:
            self.timer = self.loop.call_later(read_timeout, self._check_deadline)

    def end(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
        self.paused = False

    def close(self) -> None:
        self.end()
        if self.transport is not None:
            self.transport.close()

    def reusable(self) -> bool:
        return (
            self.complete
            and self.keep_alive
            and not self.lost
            and self.transport is not None
            and not self.transport.is_closing()
        )

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment] # uvloop's transports are not asyncio's classes

    def data_received(self, data: bytes) -> None:
        self.last_read = self.loop.time()
        self.got_bytes = True
        if self.parser is None:  # bytes while idle in the pool: the connection is unusable
            self.lost = True
            if self.transport is not None:
                self.transport.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # pragma: no cover - we never ask to upgrade
            self._fail(ProtocolFailed("the upstream switched protocols"))
        except httptools.HttpParserError as e:
            self._fail(ProtocolFailed(f"the upstream sent invalid HTTP: {e}"))

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.parser is None or self.complete:
            return
        if self.close_delimited and self.headers_done is not None and self.headers_done.done():
            self.complete = True
            self._wake()
            return
        what = f": {exc}" if exc else ""
        self._fail(ProtocolFailed(f"the connection was closed mid-response{what}"))

    # -- httptools callbacks -----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = bool(self.parser.should_keep_alive())
        names = {n for n, _ in self.headers}
        self.close_delimited = b"content-length" not in names and not any(
            n == b"transfer-encoding" and b"chunked" in v.lower() for n, v in self.headers
        )
        if self.headers_done is not None and not self.headers_done.done():
            self.headers_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.pending += len(body)
        if self.pending > self.max_pending and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self._wake()

    # -- internals ---------------------------------------------------------------------------

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        if self.headers_done is not None and not self.headers_done.done():
            self.headers_done.set_exception(exc)
            self.headers_done.exception()  # mark retrieved: the waiter may be gone
        self._wake()
        if self.transport is not None:
            self.transport.close()

    def _check_deadline(self) -> None:
        self.timer = None
        if self.complete or self.error is not None or self.read_timeout is None:
            return
        left = self.last_read + self.read_timeout - self.loop.time()
        if left > 0:
            self.timer = self.loop.call_later(left, self._check_deadline)
            return
        self._fail(ReadTimeout(f"no data for {self.read_timeout:g} s"))

    def take(self) -> list[bytes]:
        chunks, self.body, self.pending = self.body, [], 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return chunks


class Response:
    """An upstream answer whose status line and headers have arrived.

    Read it once, with `chunks()` (batches of body bytes as they arrive) or `read(limit)`; then
    `close()` it (the connection goes back to the pool if the answer was complete).
    """

    def __init__(self, client: HTTPClient, key: tuple[str, str, int], conn: _Connection) -> None:
        self._client = client
        self._key = key
        self._conn = conn
        self.status = conn.status
        self.headers = conn.headers
        self._closed = False

    def header(self, name: bytes) -> bytes | None:
        for n, v in self.headers:
            if n == name:
                return v
        return None

    async def chunks(self) -> AsyncIterator[list[bytes]]:
        """Yield every body byte received since the previous yield, as a list of pieces."""
        conn = self._conn
        loop = conn.loop
        while True:
            if conn.body:
                yield conn.take()
                continue
            if conn.error is not None:
                raise conn.error
            if conn.complete:
                return
            conn.waiter = waiter = loop.create_future()
            try:
                await waiter
            finally:
                conn.waiter = None

    async def read(self, limit: int) -> bytes:
        """The whole body; `ProtocolFailed` past `limit` bytes."""
        out: list[bytes] = []
        size = 0
        async for pieces in self.chunks():
            for p in pieces:
                size += len(p)
                out.append(p)
            if size > limit:
                raise ProtocolFailed(f"the upstream answer is longer than {limit} bytes")
        return b"".join(out)

    def abort(self, exc: BaseException) -> None:
        """End the answer from outside: the reader gets `exc` at its next wait."""
        self._conn._fail(exc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        conn.end()
        conn.parser = None
        if conn.reusable():
            self._client._release(self._key, conn)
        else:
            conn.close()


class HTTPClient:
    """Connection pool and request sending; see the module docstring."""

    def __init__(
        self,
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        max_pending: int = 1 << 20,
        max_idle: int = 256,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_pending = max_pending
        self.max_idle = max_idle
        self._idle: dict[tuple[str, str, int], collections.deque[_Connection]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    async def _connect(self, key: tuple[str, str, int]) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ctx = self._ssl_context() if scheme == "https" else None
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(loop, self.max_pending),
                    host,
                    port,
                    ssl=ctx,
                    server_hostname=host if ctx else None,
                ),
                self.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise ConnectTimeout(f"no connection within {self.connect_timeout:g} s") from None
        except (OSError, ssl.SSLError) as e:
            raise ConnectFailed(str(e) or type(e).__name__) from None
        return conn

    def _checkout(self, key: tuple[str, str, int]) -> _Connection | None:
        pool = self._idle.get(key)
        now = time.monotonic()
        while pool:
            conn = pool.pop()
            if conn.lost or conn.transport is None or conn.transport.is_closing():
                continue
            if now - conn.idle_since > _KEEPALIVE_EXPIRY:
                conn.close()
                continue
            return conn
        return None

    def _release(self, key: tuple[str, str, int], conn: _Connection) -> None:
        if self._closed:
            conn.close()
            return
        pool = self._idle.setdefault(key, collections.deque())
        if len(pool) >= self.max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        pool.append(conn)

    async def request(self, method: str, url: str, body: bytes, headers: list[tuple[str, str]]) -> Response:
        """Send a request; return once the status line and headers of the answer arrived."""
        parts = urlsplit(url)
        scheme = parts.scheme
        host = parts.hostname or ""
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        host_header = host if parts.port is None else f"{host}:{parts.port}"
        if ":" in host and not host.startswith("["):
            host_header = f"[{host}]" if parts.port is None else f"[{host}]:{parts.port}"
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host_header}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        for attempt in (0, 1):
            conn = self._checkout(key) if attempt == 0 else None
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key)
            conn.begin(self.read_timeout)
            assert conn.transport is not None
            conn.transport.write(head + body)
            try:
                assert conn.headers_done is not None
                await conn.headers_done
            except TransportError as e:
                conn.close()
                if reused and not conn.got_bytes and isinstance(e, ProtocolFailed):
                    continue  # the pooled connection was closed by the engine: try a fresh one
                e.reused = reused
                raise
            except BaseException:
                conn.close()
                raise
            return Response(self, key, conn)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        self._closed = True
        for pool in self._idle.values():
            for conn in pool:
                with contextlib.suppress(Exception):
                    conn.close()
        self._idle.clear()
