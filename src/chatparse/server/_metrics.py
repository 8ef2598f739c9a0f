"""Prometheus metrics for `GET /metrics` (text exposition format 0.0.4), with no dependency.

The server runs one event loop, so the metrics are plain counters updated in place; rendering
walks them. Label values are escaped as the format requires. Names:

| metric | type | labels |
|---|---|---|
| `chatparse_requests_total` | counter | `path`, `status` |
| `chatparse_request_duration_seconds` | histogram | `path` |
| `chatparse_time_to_first_token_seconds` | histogram | `template` (streamed answers: first text or call) |
| `chatparse_requests_in_flight` | gauge | |
| `chatparse_prompt_tokens_total`, `chatparse_completion_tokens_total` | counter | `template` (from the engine's usage) |
| `chatparse_tool_calls_total` | counter | `template` (calls sent) |
| `chatparse_parse_errors_total` | counter | `template` (malformed regions reported) |
| `chatparse_dropped_tool_calls_total` | counter | `template`, `reason` |
| `chatparse_upstream_errors_total` | counter | `kind` |
| `chatparse_render_timeouts_total` | counter | |
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["Metrics"]

_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_TTFT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _num(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(labels)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help, labels)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str, by: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + by

    def render(self) -> list[str]:
        out = self.header()
        for labels, v in sorted(self.values.items()):
            out.append(f"{self.name}{_labels(self.label_names, labels)} {_num(v)}")
        return out


class Gauge(Counter):
    kind = "gauge"

    def render(self) -> list[str]:
        if not self.values:
            self.values[()] = 0.0
        return super().render()


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help: str, labels: Sequence[str], buckets: Sequence[float]) -> None:
        super().__init__(name, help, labels)
        self.buckets = tuple(buckets)
        self.series: dict[tuple[str, ...], list[float]] = {}  # bucket counts..., sum, count

    def observe(self, value: float, *labels: str) -> None:
        s = self.series.get(labels)
        if s is None:
            s = self.series[labels] = [0.0] * (len(self.buckets) + 2)
        s[bisect.bisect_left(self.buckets, value)] += 1 if value <= self.buckets[-1] else 0
        s[-2] += value
        s[-1] += 1

    def render(self) -> list[str]:
        out = self.header()
        for labels, s in sorted(self.series.items()):
            cumulative = 0.0
            name = self.name
            for bound, n in zip(self.buckets, s):
                cumulative += n
                le = 'le="' + _num(bound) + '"'
                out.append(f"{name}_bucket{_labels(self.label_names, labels, le)} {_num(cumulative)}")
            inf = 'le="+Inf"'
            out.append(f"{name}_bucket{_labels(self.label_names, labels, inf)} {_num(s[-1])}")
            out.append(f"{name}_sum{_labels(self.label_names, labels)} {s[-2]!r}")
            out.append(f"{name}_count{_labels(self.label_names, labels)} {_num(s[-1])}")
        return out


class Metrics:
    """The server's metrics (see the module docstring)."""

    def __init__(self) -> None:
        self.requests = Counter("chatparse_requests_total", "HTTP requests answered.", ("path", "status"))
        self.duration = Histogram(
            "chatparse_request_duration_seconds",
            "Time to answer a request, in seconds.",
            ("path",),
            _DURATION_BUCKETS,
        )
        self.ttft = Histogram(
            "chatparse_time_to_first_token_seconds",
            "Streamed answers: time from the request to the first text or tool call sent, in seconds.",
            ("template",),
            _TTFT_BUCKETS,
        )
        self.in_flight = Gauge("chatparse_requests_in_flight", "Requests being answered now.")
        self.prompt_tokens = Counter(
            "chatparse_prompt_tokens_total", "Prompt tokens, as the engine reported them.", ("template",)
        )
        self.completion_tokens = Counter(
            "chatparse_completion_tokens_total",
            "Completion tokens, as the engine reported them.",
            ("template",),
        )
        self.tool_calls = Counter("chatparse_tool_calls_total", "Tool calls sent to clients.", ("template",))
        self.parse_errors = Counter(
            "chatparse_parse_errors_total",
            "Malformed regions in model output (reported, text kept).",
            ("template",),
        )
        self.dropped = Counter(
            "chatparse_dropped_tool_calls_total", "Tool calls not sent, by reason.", ("template", "reason")
        )
        self.upstream_errors = Counter(
            "chatparse_upstream_errors_total", "Upstream failures, by kind.", ("kind",)
        )
        self.render_timeouts = Counter(
            "chatparse_render_timeouts_total", "Chat template renders stopped at the time budget."
        )
        self._all: list[_Metric] = [
            self.requests,
            self.duration,
            self.ttft,
            self.in_flight,
            self.prompt_tokens,
            self.completion_tokens,
            self.tool_calls,
            self.parse_errors,
            self.dropped,
            self.upstream_errors,
            self.render_timeouts,
        ]

    def render(self) -> bytes:
        lines: list[str] = []
        for m in self._all:
            lines.extend(m.render())  # type: ignore[attr-defined]
        return ("\n".join(lines) + "\n").encode("utf-8")
