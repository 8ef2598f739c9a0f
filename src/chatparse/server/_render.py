"""Chat-template rendering in worker processes with a time budget per prompt.

A chat template comes from a model repository, so it is untrusted code even inside the jinja
sandbox: a template with nested loops can run for minutes, and a thread cannot be stopped. Prompts
are therefore rendered by a small pool of worker processes (`python -m chatparse.server._render`),
and a render that overruns its budget gets its worker killed (SIGKILL) and replaced, while the
server's event loop, `/health` and every other request carry on.

Worker protocol (stdin/stdout of the worker): frames of a 4-byte big-endian length and a JSON
document. The first frame to the worker is the chat template (`ChatTemplate.spec()`); the worker
answers `{"ready": true}`. Each job is `{"messages", "tools", "kwargs"}`; the answer is
`{"prompt": str}` or `{"error": str}`. JSON, not pickle: a worker whose sandbox was broken still
cannot make the server run code.

A worker's stderr (a Python warning, the traceback of a crash, a fatal error of the interpreter)
is a pipe the server reads: each line becomes a `render_worker_output` JSON log line with the
worker's pid (at most `_MAX_OUTPUT_LINES` per worker, `_MAX_LINE` bytes each; what is left out is
counted in one last line), so the server's log stays JSON lines only.

`RenderPool(workers=0)` renders on the event loop itself, with no time budget: only for templates
the operator trusts (`--render-workers 0`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
import sys
import time
from typing import Any

from ._json import dumps
from ._prompt import ChatTemplate, ChatTemplateError

log = logging.getLogger("chatparse.server")

__all__ = ["RenderBusy", "RenderPool", "RenderTimeout"]

_HEADER = struct.Struct(">I")
_MAX_FRAME = 64 * 1024 * 1024
_MAX_OUTPUT_LINES = 100
_MAX_LINE = 4096


class RenderTimeout(ChatTemplateError):
    """The chat template did not finish within the time budget."""


class RenderBusy(Exception):
    """Every render worker stayed busy for the whole time budget."""


async def _log_output(pid: int, stream: asyncio.StreamReader) -> None:
    """Forward a worker's stderr as JSON log lines (bounded in count and length) until it closes."""
    written = dropped = 0
    pending = b""
    while True:
        data = await stream.read(65536)
        if data:
            pending += data
        lines = pending.split(b"\n")
        pending = lines.pop() if data else b""
        if len(pending) > _MAX_LINE:  # a line without an end: cut it here
            lines.append(pending)
            pending = b""
        for raw in lines:
            if not raw.strip():
                continue
            if written < _MAX_OUTPUT_LINES:
                written += 1
                line = raw[:_MAX_LINE].decode("utf-8", "replace").rstrip()
                log.warning(dumps({"event": "render_worker_output", "pid": pid, "line": line}).decode())
            else:
                dropped += 1
        if not data:
            break
    if dropped:
        note = {"event": "render_worker_output", "pid": pid, "dropped_lines": dropped}
        log.warning(dumps(note).decode())


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self.output = asyncio.ensure_future(_log_output(proc.pid, proc.stderr))

    async def call(self, job: bytes) -> dict[str, Any]:
        self.stdin.write(_HEADER.pack(len(job)) + job)
        await self.stdin.drain()
        (size,) = _HEADER.unpack(await self.stdout.readexactly(_HEADER.size))
        if size > _MAX_FRAME:
            raise ChatTemplateError("the render worker sent an oversized answer")
        import orjson

        answer: dict[str, Any] = orjson.loads(await self.stdout.readexactly(size))
        return answer

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()


class RenderPool:
    """Renders `ChatTemplate` prompts with a per-prompt time budget (see the module docstring)."""

    def __init__(self, template: ChatTemplate, *, workers: int = 2, budget: float = 10.0) -> None:
        self.template = template
        self.workers = workers
        self.budget = budget
        self._spec = dumps(template.spec())
        self._idle: asyncio.Queue[_Worker] | None = None
        self._all: set[_Worker] = set()
        self._closed = False
        self.restarts = 0
        self.timeouts = 0

    async def start(self) -> None:
        """Start the workers and wait until each has compiled the template."""
        if self.workers <= 0 or self._idle is not None:
            return
        self._idle = asyncio.Queue()
        for _ in range(self.workers):
            self._idle.put_nowait(await self._spawn())

    async def _spawn(self) -> _Worker:
        env = dict(os.environ)
        path = os.pathsep.join(p for p in sys.path if p)
        env["PYTHONPATH"] = path
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "chatparse.server._render",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        worker = _Worker(proc)
        self._all.add(worker)
        try:
            ready = await asyncio.wait_for(worker.call(self._spec), 60)
        except BaseException:
            worker.kill()
            self._all.discard(worker)
            raise
        if not ready.get("ready"):
            worker.kill()
            self._all.discard(worker)
            raise ChatTemplateError(
                f"the render worker could not load the chat template: {ready.get('error')}"
            )
        return worker

    async def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with contextlib.suppress(Exception):
            await worker.proc.wait()
        self._all.discard(worker)
        if self._closed or self._idle is None:
            return
        self.restarts += 1
        try:
            self._idle.put_nowait(await self._spawn())
        except Exception as e:  # pragma: no cover - the machine is out of processes
            log.error(dumps({"event": "render_worker_failed", "error": str(e)}).decode())

    async def render(
        self, messages: Any, *, tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]
    ) -> str:
        """The prompt; `ChatTemplateError` for a template error or an overrun (`RenderTimeout`),
        `RenderBusy` when no worker became free within the budget."""
        if self.workers <= 0:
            return self.template.render(messages, tools=tools, **kwargs)
        if self._idle is None:
            await self.start()
        assert self._idle is not None
        deadline = time.monotonic() + self.budget
        try:
            worker = await asyncio.wait_for(self._idle.get(), self.budget)
        except asyncio.TimeoutError:
            raise RenderBusy(
                f"every render worker stayed busy for the render time budget of {self.budget:g} s "
                "(--render-timeout)"
            ) from None
        if worker.proc.returncode is not None:  # it died while idle (crashed, killed): start another
            self._all.discard(worker)
            self.restarts += 1
            try:
                worker = await asyncio.wait_for(self._spawn(), max(0.001, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise RenderBusy("no render worker could be started within the render time budget") from None
        job = dumps({"messages": messages, "tools": tools, "kwargs": kwargs})
        left = max(0.001, deadline - time.monotonic())
        try:
            answer = await asyncio.wait_for(worker.call(job), left)
        except asyncio.TimeoutError:
            self.timeouts += 1
            asyncio.ensure_future(self._replace(worker))
            raise RenderTimeout(
                f"the chat template did not finish rendering within the time budget of {self.budget:g} s "
                "(--render-timeout)"
            ) from None
        except (OSError, EOFError, asyncio.IncompleteReadError, ValueError) as e:
            asyncio.ensure_future(self._replace(worker))
            raise ChatTemplateError(f"the render worker failed: {type(e).__name__}") from None
        except BaseException:  # cancelled: the worker may be mid-job, so it cannot be reused
            asyncio.ensure_future(self._replace(worker))
            raise
        self._idle.put_nowait(worker)
        if "error" in answer:
            raise ChatTemplateError(str(answer["error"]))
        return str(answer["prompt"])

    async def close(self) -> None:
        self._closed = True
        for worker in list(self._all):
            worker.kill()
            with contextlib.suppress(Exception):
                await worker.proc.wait()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.output, 1)
        self._all.clear()


# ------------------------------------------------------------------------------------------------
# the worker process


def _read_frame(stream: Any) -> bytes | None:
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    data: bytes = stream.read(size)
    return data if len(data) == size else None


def _write_frame(stream: Any, obj: Any) -> None:
    data = dumps(obj)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def worker_main() -> None:
    """Serve render jobs on stdin/stdout until stdin closes."""
    import orjson

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing a template does may write into the protocol stream
    frame = _read_frame(stdin)
    if frame is None:
        return
    try:
        template = ChatTemplate.from_spec(orjson.loads(frame))
    except Exception as e:
        _write_frame(stdout, {"ready": False, "error": str(e)})
        return
    _write_frame(stdout, {"ready": True})
    while True:
        frame = _read_frame(stdin)
        if frame is None:
            return
        job = orjson.loads(frame)
        try:
            prompt = template.render(job["messages"], tools=job.get("tools"), **(job.get("kwargs") or {}))
        except ChatTemplateError as e:
            _write_frame(stdout, {"error": str(e)})
        except Exception as e:  # anything else the template provoked is its error too
            _write_frame(stdout, {"error": f"chat template {template.source}: {type(e).__name__}: {e}"})
        else:
            _write_frame(stdout, {"prompt": prompt})


if __name__ == "__main__":
    worker_main()
