"""Render workers: their stderr becomes JSON log lines, and a worker that died while idle is replaced."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from chatparse.server._render import _HEADER, _MAX_OUTPUT_LINES, RenderPool, _log_output

from .conftest import QWEN_TEMPLATE

pytest.importorskip("jinja2")

from chatparse.server._prompt import ChatTemplate  # noqa: E402

MESSAGES = [{"role": "user", "content": "Hi"}]


def _events(caplog: pytest.LogCaptureFixture) -> list[dict]:
    out = []
    for record in caplog.records:
        if record.name == "chatparse.server" and record.getMessage().startswith("{"):
            out.append(json.loads(record.getMessage()))
    return [e for e in out if e.get("event") == "render_worker_output"]


def test_a_crashing_worker_logs_json_lines_and_is_replaced(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="chatparse.server")

    async def main() -> tuple[str, str, int]:
        pool = RenderPool(ChatTemplate(QWEN_TEMPLATE), workers=1, budget=30)
        try:
            first = await pool.render(MESSAGES, tools=None, kwargs={})
            (worker,) = pool._all
            # a frame that is not JSON: the worker dies with a traceback on its stderr
            worker.stdin.write(_HEADER.pack(8) + b"not json")
            await worker.stdin.drain()
            await worker.proc.wait()
            await asyncio.wait_for(worker.output, 10)
            # the dead worker is still in the idle queue: the next render starts another one
            second = await pool.render(MESSAGES, tools=None, kwargs={})
            return first, second, pool.restarts
        finally:
            await pool.close()

    first, second, restarts = asyncio.run(main())
    assert first == second and first.endswith("<|im_start|>assistant\n") and restarts == 1
    lines = _events(caplog)
    assert lines and all(isinstance(e["pid"], int) and "\n" not in e["line"] for e in lines)
    assert any("Traceback" in e["line"] for e in lines)
    assert any("JSONDecodeError" in e["line"] for e in lines)


def test_worker_output_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="chatparse.server")

    async def main() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(b"line %d\n" % i for i in range(_MAX_OUTPUT_LINES + 50)))
        reader.feed_data(b"x" * 100_000)  # and a line that never ends
        reader.feed_eof()
        await _log_output(1234, reader)

    asyncio.run(main())
    lines = _events(caplog)
    assert len(lines) == _MAX_OUTPUT_LINES + 1
    assert lines[0] == {"event": "render_worker_output", "pid": 1234, "line": "line 0"}
    # the 50 extra lines, and the unended one (cut into pieces of at most one read each)
    assert lines[-1]["pid"] == 1234 and lines[-1]["dropped_lines"] > 50
