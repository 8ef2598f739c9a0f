"""`chatparse parse --jsonl FILE --field NAME`: one parsed message per line, in several processes.

Every input line is a JSON object; the text in `field` (and the prompt in `prefix_field`, when
given) is parsed, and one JSON line is written per input line, in input order: the message, or
`{"error": {"line": N, "type": ..., "message": ...}}` for a line that cannot be read or parsed (so
output line N always belongs to input line N). A progress bar goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

_BATCH = 256
_PROGRESS_EVERY = 0.25  # seconds between progress-bar updates


@dataclass
class JsonlResult:
    """What `parse_jsonl` did: lines read, lines that failed, and the first failure."""

    lines: int = 0
    failed: int = 0
    first_error: str | None = None
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list, repr=False)


@dataclass
class _Job:
    """Everything a worker needs (picklable): the template as a dict, never compiled objects."""

    field: str
    prefix_field: str | None
    prefix: str
    tools: list | None
    spec: dict | None  # None: --auto (chatparse.detect)
    shape: str = "hf"  # "hf": parse_response's message; "openai": a Chat Completions message


_JOB: _Job | None = None
_TEMPLATE: Any = None


def _init(job: _Job) -> None:
    global _JOB, _TEMPLATE
    _JOB = job
    if job.spec is not None:
        from .._template import load_response_template

        _TEMPLATE = load_response_template(job.spec)


def _lookup(obj: Any, name: str) -> Any:
    if name in obj:
        return obj[name]
    node: Any = obj
    for part in name.split("."):  # a dotted path into nested objects
        if not isinstance(node, dict) or part not in node:
            raise KeyError(name)
        node = node[part]
    return node


def _text(obj: dict, name: str, what: str) -> str:
    try:
        value = _lookup(obj, name)
    except KeyError:
        raise ValueError(f"no {what} field {name!r}") from None
    if not isinstance(value, str):
        raise ValueError(f"{what} field {name!r} holds {type(value).__name__}, not a string")
    return value


def _one(line_no: int, line: str) -> tuple[str, str | None]:
    """`(output JSON line, error text or None)` for one input line."""
    job = _JOB
    assert job is not None
    try:
        if not line.strip():
            raise ValueError("empty line")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"invalid JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
        text = _text(obj, job.field, "text")
        prefix = _text(obj, job.prefix_field, "prefix") if job.prefix_field else job.prefix
        if job.spec is None:
            from ..openai import parse_auto

            message, _ = parse_auto(text, tools=job.tools, prefix=prefix or None)
            if job.shape == "hf":
                from ..openai._wire import to_hf_message

                message = to_hf_message(message)
        elif job.shape == "openai":
            from ..openai import parse_message

            message = parse_message(text, template=_TEMPLATE, prefix=prefix, tools=job.tools)
        else:
            from .._parser import parse_response

            message = parse_response(text, _TEMPLATE, prefix=prefix, tools=job.tools)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        detail = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        error = {"line": line_no, "type": type(e).__name__, "message": detail}
        return json.dumps(
            {"error": error}, ensure_ascii=False
        ), f"line {line_no}: {type(e).__name__}: {detail}"
    return json.dumps(message, ensure_ascii=False, default=repr), None


def _batch(items: Sequence[tuple[int, str]]) -> list[tuple[str, str | None]]:
    return [_one(n, line) for n, line in items]


def _batches(lines: Iterable[str]) -> Iterator[list[tuple[int, str]]]:
    batch: list[tuple[int, str]] = []
    for n, line in enumerate(lines, start=1):
        batch.append((n, line.rstrip("\r\n")))
        if len(batch) >= _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class Progress:
    """A one-line progress bar on a text stream (`\\r`-rewritten; ended by `close`)."""

    def __init__(self, stream: IO[str], total_bytes: int | None, enabled: bool) -> None:
        self.stream = stream
        self.total = total_bytes
        self.enabled = enabled
        self.start = time.monotonic()
        self.last = 0.0
        self.lines = 0
        self.bytes = 0

    def update(self, lines: int, nbytes: int) -> None:
        self.lines += lines
        self.bytes += nbytes
        now = time.monotonic()
        if self.enabled and now - self.last >= _PROGRESS_EVERY:
            self.last = now
            self._draw(now)

    def _draw(self, now: float, end: str = "") -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.lines / elapsed
        if self.total:
            frac = min(self.bytes / self.total, 1.0)
            bar = "#" * int(frac * 24)
            head = f"[{bar:<24}] {frac * 100:5.1f}%"
        else:
            head = "[parsing]"
        self.stream.write(f"\rchatparse: {head} {self.lines:,} lines, {rate:,.0f} lines/s{end}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic(), end="\n")


def parse_jsonl(
    lines: Iterable[str],
    out: IO[str],
    *,
    field: str,
    template: Any = None,
    prefix: str = "",
    prefix_field: str | None = None,
    tools: list | None = None,
    jobs: int = 1,
    progress: bool = False,
    progress_stream: IO[str] | None = None,
    total_bytes: int | None = None,
    shape: str = "hf",
) -> JsonlResult:
    """Parse the `field` text of every JSON line of `lines` and write one JSON line per input line to `out`.

    `template`: a `response_template` dict or compiled `chatparse.Template` (`None`: detect the
    format with `chatparse.detect`, as `parse --auto`); the prefix is `prefix_field` of each line,
    else `prefix`. `jobs > 1` parses in that many processes (output order is kept). `shape`:
    ``"hf"`` writes `parse_response`'s message (with `template=None`, detection's message in that
    shape), ``"openai"`` a Chat Completions message (`chatparse.openai.parse_message`, or detection's).
    """
    from .._template import Template

    spec = template.spec if isinstance(template, Template) else template
    job = _Job(field=field, prefix_field=prefix_field, prefix=prefix, tools=tools, spec=spec, shape=shape)
    bar = Progress(progress_stream or sys.stderr, total_bytes, progress)
    result = JsonlResult()
    start = time.monotonic()

    def write(batch: list[tuple[int, str]], outputs: list[tuple[str, str | None]]) -> None:
        for text, error in outputs:
            out.write(text + "\n")
            if error is not None:
                result.failed += 1
                if result.first_error is None:
                    result.first_error = error
        result.lines += len(outputs)
        bar.update(len(outputs), sum(len(line.encode("utf-8")) + 1 for _, line in batch))

    try:
        if jobs <= 1:
            _init(job)
            for batch in _batches(lines):
                write(batch, _batch(batch))
        else:
            import multiprocessing

            with multiprocessing.get_context().Pool(jobs, initializer=_init, initargs=(job,)) as pool:
                pending = _batches(lines)
                sent: list[list[tuple[int, str]]] = []

                def feed() -> Iterator[list[tuple[int, str]]]:
                    for b in pending:
                        sent.append(b)
                        yield b

                for i, outputs in enumerate(pool.imap(_batch, feed(), chunksize=1)):
                    write(sent[i], outputs)
                    sent[i] = []
    finally:
        bar.close()
        out.flush()
    result.seconds = time.monotonic() - start
    return result


def file_size(path: str) -> int | None:
    """The size of a regular file, for the progress bar (None for stdin and pipes)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    import stat

    return st.st_size if stat.S_ISREG(st.st_mode) else None
