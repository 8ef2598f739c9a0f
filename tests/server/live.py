"""Test infrastructure: run an ASGI app with uvicorn on loopback in a background thread.

    with LiveServer(app) as srv:
        httpx.get(srv.url + "/health")

The server binds 127.0.0.1 on an ephemeral port (port 0); ``.port`` and ``.url`` are valid once
``start()`` (or ``__enter__``) has returned.  Used for the fake inference engine, for the chatparse
server itself and by benchmark scripts, so starting one is fast (a few milliseconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import uvicorn

__all__ = ["LiveServer"]


class _Server(uvicorn.Server):
    """uvicorn.Server whose main loop wakes up as soon as ``request_exit()`` is called.

    Stock uvicorn polls ``should_exit`` every 0.1 s; tests start and stop many servers, so the
    wake-up is made immediate (shutdown itself still costs uvicorn's fixed ~0.1 s pause).
    """

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def request_exit(self) -> None:
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(wake.set)


class LiveServer:
    """A uvicorn server for ``app`` running in a daemon thread with its own event loop."""

    def __init__(self, app: Any, *, start_timeout: float = 10.0, **config: Any) -> None:
        options: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": 0,
            "log_level": "warning",
            "lifespan": "auto",
            "timeout_graceful_shutdown": 1,
        }
        options.update(config)
        self.app = app
        self.config = uvicorn.Config(app, **options)
        self.server = _Server(self.config)
        self.start_timeout = start_timeout
        self.port: int = 0
        self.url: str = ""
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.server.run()
        except BaseException as exc:  # SystemExit on startup failure, bind errors, ...
            self._error = exc

    def start(self) -> LiveServer:
        if self._thread is not None:
            raise RuntimeError("LiveServer already started")
        self._thread = threading.Thread(target=self._run, name="live-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"server failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server did not start within {self.start_timeout} s")
            time.sleep(0.001)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self.server.request_exit()
        thread.join(timeout=10)
        if thread.is_alive():  # pragma: no cover - only when something is badly stuck
            self.server.force_exit = True
            thread.join(timeout=5)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LiveServer({self.url or 'not started'})"
