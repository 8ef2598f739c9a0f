"""Logging: one JSON object per line, for the request log and for everything else.

`RequestLog` is the record of one HTTP request: the ASGI app creates it when the request arrives,
the handlers fill it in (model, finish reason, calls, errors), and it is written once, when the
answer is finished or abandoned. It is only a record: tasks coordinate through their own state,
never through the log.

`configure_logging()` (used by `chatparse serve`) sends every logger through `JSONFormatter`:
uvicorn's and asyncio's messages become `{"event": "log", "logger", "level", "message"}` lines,
tracebacks go into an `exc` field instead of onto stderr as text, and httpx/httpcore's per-request
`HTTP Request:` lines are silenced. Repeated identical messages from the libraries (e.g. `accept()`
failing while file descriptors are exhausted) are written at most once per second, with a count.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from ._json import dumps

log = logging.getLogger("chatparse.server")

__all__ = ["JSONFormatter", "RequestLog", "configure_logging", "log_event"]


def log_event(event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Write one structured line on the `chatparse.server` logger."""
    log.log(level, dumps({"event": event, **fields}).decode())


@dataclass
class RequestLog:
    """The request log line of one HTTP request (see the module docstring)."""

    method: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    status: int = 0
    ttfb_ms: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    written: bool = False

    def set(self, **fields: Any) -> None:
        self.fields.update(fields)

    def started_response(self, status: int) -> None:
        if not self.status:
            self.status = status
            self.ttfb_ms = round((time.perf_counter() - self.started) * 1000, 1)

    @property
    def duration(self) -> float:
        return time.perf_counter() - self.started

    def line(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "event": "request",
            "method": self.method,
            "path": self.path,
            "status": self.status or 499,
            "duration_ms": round(self.duration * 1000, 1),
        }
        if self.ttfb_ms is not None:
            out["ttfb_ms"] = self.ttfb_ms
        out.update(self.fields)
        return out

    def write(self) -> None:
        if not self.written:
            self.written = True
            log.info(dumps(self.line()).decode())


class JSONFormatter(logging.Formatter):
    """Every record as one JSON line; `chatparse.server` messages are JSON already and pass as is."""

    def __init__(self) -> None:
        super().__init__()
        self._last: tuple[str, str] | None = None
        self._last_time = 0.0
        self._repeats = 0

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.name == "chatparse.server" and message.startswith("{") and not record.exc_info:
            return message
        out: dict[str, Any] = {
            "event": "log",
            "logger": record.name,
            "level": record.levelname.lower(),
            "message": message,
        }
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            out["exc"] = {
                "type": type(exc).__name__,
                "message": str(exc)[:2000],
                "traceback": "".join(traceback.format_exception(*record.exc_info))[-8000:],
            }
        return dumps(out).decode()


class _Throttle(logging.Filter):
    """Drops a library record identical to the previous one within a second (counted, then noted)."""

    def __init__(self) -> None:
        super().__init__()
        self._last: tuple[str, str] | None = None
        self._since = 0.0
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "chatparse.server":
            return True
        key = (record.name, str(record.msg))
        now = time.monotonic()
        if key == self._last and now - self._since < 1.0:
            self._dropped += 1
            return False
        if self._dropped and key == self._last:
            record.msg = f"{record.msg} (and {self._dropped} more like it in the last second)"
        self._last, self._since, self._dropped = key, now, 0
        return True


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is at the time of the record (as `logging.lastResort` does),
    not to the stream that was current when logging was configured: embedding code and tests that
    swap stderr (and close the old one) then never meet a closed file."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr for every logger (see the module docstring)."""
    handler = _StderrHandler()
    handler.setFormatter(JSONFormatter())
    handler.addFilter(_Throttle())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "asyncio"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
