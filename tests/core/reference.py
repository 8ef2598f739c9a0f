"""Oracle wrapper around transformers 5.24.0's response-template parser.

The reference implementation is `transformers.utils.chat_parsing` (see
/work/shared/reference/conformance.md §2).  Every call goes through a timeout guard
(`signal.setitimer` in the main thread): some inputs never terminate in the reference
(defect D5), and a timed-out call is reported as a distinct outcome instead of hanging
the test session.

Outcomes are `Outcome` objects with a `status` of ``"ok"``, ``"error"`` or ``"timeout"``.
`Outcome` unpacks as ``(message, events)`` so ``message, events = ref_stream(...)`` works
for the common case.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import resource
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from transformers.utils.chat_parsing import ResponseParser as _RefParser
from transformers.utils.chat_parsing import parse_response as _ref_parse_response
from transformers.utils.chat_parsing.response_templates import load_response_template as ref_load

DEFAULT_TIMEOUT = 3.0
#: address space an isolated reference call may add to the test process's (`ref_parse_isolated`)
ISOLATED_MEMORY = 1 << 30

#: keys chatparse adds to events (enriched contract, response-template.md §4.2)
ENRICHED_KEYS = ("start", "end", "captures", "complete", "body_start", "body_end")


class ReferenceTimeout(BaseException):
    """Raised inside a guarded call when the time limit is hit.

    Derives from BaseException so that `except Exception` blocks inside the code under
    test cannot swallow it.
    """


@dataclass
class Outcome:
    """Result of one guarded parse (reference or chatparse)."""

    status: str  # "ok" | "error" | "timeout"
    message: dict | None = None
    events: list[dict] = field(default_factory=list)
    error: BaseException | None = None
    #: reference only: the field whose close raised (None when the error is not a region error)
    failed_field: str | None = None
    #: reference only: truncated-prefix characters held back after the prefix pass (D20)
    held_prefix: str = ""
    #: reference only: number of events that came from `initial_events`
    n_initial: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def error_type(self) -> str | None:
        return type(self.error).__name__ if self.error is not None else None

    def __iter__(self) -> Iterator[Any]:
        yield self.message
        yield self.events

    def describe(self) -> str:
        if self.status == "ok":
            return f"ok {self.message!r}"
        if self.status == "timeout":
            return "timeout"
        return f"raises {self.error_type}: {str(self.error)[:300]}"


def call_with_timeout(fn: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT) -> Any:
    """Run `fn()`; raise `ReferenceTimeout` after `timeout` seconds (main thread only).

    Outside the main thread no guard can be installed and `fn` runs unguarded.
    """
    if timeout is None or timeout <= 0 or threading.current_thread() is not threading.main_thread():
        return fn()

    def _on_alarm(signum, frame):  # pragma: no cover - only fires on a hang
        raise ReferenceTimeout(f"call exceeded {timeout}s")

    previous = signal.signal(signal.SIGALRM, _on_alarm)
    # The interval re-fires the alarm until the guard is left: one alarm that lands where it cannot
    # interrupt (inside a C call, or while the handler of another one runs) is not the only one.
    # Half a second apart: an alarm that lands in a finaliser becomes an "unraisable" exception,
    # whose hook (pytest's: it imports tracemalloc) must finish before the next one fires, or the
    # hook itself fails and pytest fails the test instead of the guard reporting a timeout.
    signal.setitimer(signal.ITIMER_REAL, timeout, 0.5)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def truncated_prefix(template: Any, prefix: str | None) -> str:
    """The part of `prefix` the reference keeps (after the last start-anchor match)."""
    if not prefix:
        return ""
    return ref_load(template).truncate_past_last_anchor(prefix)


def ref_parse(
    text: str,
    template: Any,
    prefix: str | None = "",
    tools: list | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> Outcome:
    """One-shot `transformers.utils.chat_parsing.parse_response` under the timeout guard."""
    tmpl = copy.deepcopy(template)
    try:
        message = call_with_timeout(
            lambda: _ref_parse_response(text, tmpl, prefix=prefix, tools=tools), timeout
        )
    except ReferenceTimeout:
        return Outcome("timeout")
    except Exception as exc:  # noqa: BLE001 - any exception type is an outcome
        return Outcome("error", error=exc)
    return Outcome("ok", message=copy.deepcopy(message))


def _isolated_child(conn: Any, text: str, template: Any, prefix: str | None, timeout: float) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = current + ISOLATED_MEMORY
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        out = ref_parse(text, template, prefix, timeout=timeout)
        status = out.status
        detail = None if out.ok else out.describe()
    except MemoryError:  # the cap: the reference did not terminate within it
        status, detail = "timeout", "memory cap"
    conn.send((status, detail))
    conn.close()


def ref_parse_isolated(
    text: str, template: Any, prefix: str | None = "", *, timeout: float = DEFAULT_TIMEOUT
) -> str:
    """The status of a one-shot reference parse run in a forked child process, for inputs on which
    the reference does not terminate (defect D5) and allocates without bound while it loops: the
    child's address space is capped (`ISOLATED_MEMORY` above the test process's), it is killed
    after `timeout` + 10 s whatever it is doing, and either counts as ``"timeout"``. The test process
    itself never runs the loop, so a missed alarm cannot exhaust the machine's memory."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_isolated_child, args=(child, text, template, prefix, timeout), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(timeout + 10):
            status, _ = parent.recv()
            return str(status)
        return "timeout"
    except EOFError:  # the child died (killed by the kernel at the cap): it did not terminate
        return "timeout"
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()


def ref_stream(
    chunks: Iterable[str],
    template: Any,
    prefix: str | None = "",
    tools: list | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> Outcome:
    """Stream `chunks` through the reference `ResponseParser`.

    Returns an `Outcome` whose `events` are ``initial_events + feed events + final events``
    (deep copies taken at the end; values are not mutated after their close event).  On an
    error the events produced before the exception are kept (the reference discards them,
    D11) and `failed_field` names the region being closed when it raised (None for the
    required-fields check of `finalize` and for template errors).  `n_initial` is the number
    of events that came from `initial_events`.
    """
    chunks = list(chunks)
    tmpl = copy.deepcopy(template)
    lists: list[list[dict]] = []
    state: dict[str, Any] = {"parser": None, "held": "", "n_initial": 0}

    class Spy(_RefParser):
        def _process(self, events, eos):  # observe only
            if not any(lst is events for lst in lists):
                lists.append(events)
            state["parser"] = self
            return super()._process(events, eos)

    def run():
        parser = Spy(tmpl, prefix=prefix, tools=tools)
        state["parser"] = parser
        state["n_initial"] = len(parser.initial_events)
        state["held"] = parser._buffer[parser._pos :]
        for chunk in chunks:
            parser.feed(chunk)
        message, _ = parser.finalize()
        return message

    def collect() -> list[dict]:
        return copy.deepcopy([ev for lst in lists for ev in lst])

    try:
        message = call_with_timeout(run, timeout)
    except ReferenceTimeout:
        return Outcome("timeout", events=collect(), held_prefix=state["held"], n_initial=state["n_initial"])
    except Exception as exc:  # noqa: BLE001 - any exception type is an outcome
        parser = state["parser"]
        failed = None
        if parser is not None and not str(exc).startswith("Required response_template fields missing"):
            failed = parser._current
        return Outcome(
            "error",
            events=collect(),
            error=exc,
            failed_field=failed,
            held_prefix=state["held"],
            n_initial=state["n_initial"],
        )
    return Outcome(
        "ok",
        message=copy.deepcopy(message),
        events=collect(),
        held_prefix=state["held"],
        n_initial=state["n_initial"],
    )


def ref_events_oneshot(
    text: str, template: Any, prefix: str | None = "", tools: list | None = None, **kw
) -> Outcome:
    """Events of a one-shot feed: ``ResponseParser(prefix)`` + ``feed(text)`` + ``finalize()``."""
    return ref_stream([text], template, prefix, tools, **kw)


# --------------------------------------------------------------------------- events


def _strip_event(ev: dict) -> dict:
    out = {k: v for k, v in ev.items() if k not in ENRICHED_KEYS}
    if out.get("type") == "region_malformed":
        err = out.get("error")
        return {"type": "region_malformed", "field": out.get("field"), "error_type": type(err).__name__}
    return out


def normalize_events(events: Iterable[dict]) -> list[dict]:
    """Normalise an event sequence for comparison between implementations.

    * drops the enriched keys chatparse adds (`start`, `end`, `captures`, `complete`, body spans);
    * maps `region_malformed` to a marker ``{"type": "region_malformed", "field", "error_type"}``;
    * joins consecutive `region_chunk` events of the same field (chunk boundaries legitimately
      differ, D23); empty chunks are dropped.
    """
    out: list[dict] = []
    for ev in events:
        ev = _strip_event(ev)
        if ev.get("type") == "region_chunk":
            if not ev.get("text"):
                continue
            last = out[-1] if out else None
            if (
                last is not None
                and last.get("type") == "region_chunk"
                and last.get("field") == ev.get("field")
            ):
                last["text"] += ev["text"]
                continue
            ev = dict(ev)
        out.append(ev)
    return out


def malformed_marker(field_name: str | None, error: BaseException) -> dict:
    """The marker `normalize_events` produces for a `region_malformed` event."""
    return {"type": "region_malformed", "field": field_name, "error_type": type(error).__name__}


def reference_event_view(outcome: Outcome) -> list[dict]:
    """Normalised reference events, with the exception turned into the malformed marker.

    When the reference raised while closing a region (D11), the normalised events are
    followed by the marker chatparse's streaming parser would emit at that point.
    """
    evs = normalize_events(outcome.events)
    if outcome.status == "error" and outcome.failed_field is not None:
        evs.append(malformed_marker(outcome.failed_field, outcome.error))
    return evs


def truncate_at_first_malformed(events: list[dict]) -> list[dict]:
    """Normalised events up to and including the first malformed marker."""
    for i, ev in enumerate(events):
        if ev.get("type") == "region_malformed":
            return events[: i + 1]
    return events


def strip_held_prefix(events: list[dict], held: str, n_initial: int) -> list[dict]:
    """Reference events with the held prefix bytes removed from the first feed chunk (D20).

    `n_initial` is the number of raw events that came from `initial_events`.
    """
    if not held:
        return list(events)
    out = [dict(e) for e in events]
    for i in range(n_initial, len(out)):
        ev = out[i]
        if ev.get("type") == "region_chunk":
            if ev["text"].startswith(held):
                ev["text"] = ev["text"][len(held) :]
                if not ev["text"]:
                    del out[i]
            break
    return out
