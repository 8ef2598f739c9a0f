"""Running the app: the listening socket, connection limits, timeouts and graceful shutdown.

uvicorn runs the ASGI app with `_Protocol`, its httptools protocol plus what a server facing
untrusted clients needs:

* a **header timeout**: a connection must deliver a request's headers within `header_timeout`
  seconds from its opening (or from the first byte of the next request on a kept-alive
  connection), else it gets a JSON 408 and is closed, so idle and slow-header (slowloris) clients
  cannot hold connections; the body has its own deadline in the app (`body_timeout`);
* a **connection cap**: past `max_connections` open connections a new one gets an immediate JSON
  503 and is closed, before a byte of it is read. The cap is kept below the process's
  file-descriptor limit (raised to its hard limit first), with room for one upstream connection per
  client connection, so `accept()` never fails with EMFILE;
* **graceful shutdown** on SIGTERM/SIGINT: the app stops taking requests (`App.drain`), running
  answers get `shutdown_timeout` seconds, then streams end with an error event; render workers are
  killed.

The socket is bound before anything is announced, so a busy port is a clear startup error, and the
`listening` log line only appears once the server really listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ._app import App
from ._json import dumps
from ._log import log_event

__all__ = ["BindError", "StartupError", "bind", "fd_budget", "make_protocol", "run"]

_RESERVED_FDS = 64  # log files, render worker pipes, the listening socket, ...


class BindError(OSError):
    """The address could not be bound (in use, not available, no permission)."""


def fd_budget(max_connections: int) -> tuple[int, int | None]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the connection cap that fits in it and
    the limit (None where there is no such limit)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return max_connections, None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    fits = max(1, (soft - _RESERVED_FDS) // 2)  # a client connection and its upstream connection
    return min(max_connections, fits), soft


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket for `host:port` (IPv6 when `host` is an IPv6 address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise BindError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.setblocking(False)
    return sock


def _json_response(status: int, reason: str, kind: str, message: str) -> bytes:
    body = dumps({"error": {"message": message, "type": kind, "param": None, "code": status}})
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    return head + body


class _Protocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header timeout and a connection cap (module docstring)."""

    header_timeout: float = 10.0
    max_connections: int = 1000

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        if len(self.connections) > self.max_connections:
            transport.write(
                _json_response(
                    503,
                    "Service Unavailable",
                    "server_busy",
                    f"the server has the most connections it takes ({self.max_connections}, --max-connections); "
                    "retry later",
                )
            )
            transport.close()
            return
        self._arm()

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(
                _json_response(
                    408,
                    "Request Timeout",
                    "request_timeout",
                    f"no complete request headers within {self.header_timeout:g} s (--header-timeout)",
                )
            )
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # a new request on a kept-alive connection
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def timeout_keep_alive_handler(self) -> None:
        self._disarm()
        super().timeout_keep_alive_handler()


class StartupError(RuntimeError):
    """The app could not start (e.g. the render workers could not load the chat template)."""


class _Server(uvicorn.Server):
    """uvicorn.Server that announces itself once listening, drains the app before uvicorn's own
    shutdown, and exits normally (status 0) after a signal instead of re-raising it."""

    app_ref: App | None = None
    drain_timeout: float = 10.0
    on_started: Any = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None:
            self.on_started()

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        with super().capture_signals():
            yield
            self._captured_signals.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        if self.app_ref is not None:
            log_event(
                "shutting_down", drain_timeout_s=self.drain_timeout, in_flight=len(self.server_state.tasks)
            )
            await self.app_ref.drain(self.drain_timeout)
        await super().shutdown(sockets)


def make_protocol(header_timeout: float, max_connections: int) -> type[_Protocol]:
    """The uvicorn `http` protocol class with these limits."""
    return type(
        "ChatparseProtocol",
        (_Protocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )


def run(app: App, sock: socket.socket, *, max_connections: int) -> None:
    """Serve `app` on the bound `sock` until SIGTERM/SIGINT (see the module docstring)."""
    cfg = app.config
    protocol = make_protocol(cfg.header_timeout, max_connections)
    config = uvicorn.Config(
        app,
        http=protocol,
        lifespan="on",
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=max(1, round(cfg.keep_alive_timeout)),
        timeout_graceful_shutdown=max(1, round(cfg.shutdown_timeout + 2)),
        ws="none",
    )
    server = _Server(config)
    server.app_ref = app
    server.drain_timeout = cfg.shutdown_timeout
    host, port = sock.getsockname()[:2]

    def announce() -> None:
        log_event(
            "listening",
            url=f"http://{host}:{port}/v1",
            max_connections=max_connections,
            **app.resolved.describe(),
        )

    server.on_started = announce
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is optional
        runner = asyncio.run
    try:
        runner(server.serve(sockets=[sock]))
    except SystemExit as e:  # uvicorn's exit after a failed lifespan startup
        raise StartupError(f"the server could not start (exit {e.code}); see the log above") from None
