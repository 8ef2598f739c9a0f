#!/usr/bin/env python3
"""chatparse vs transformers 5.24.0 (the reference ``response_template`` parser): core timings.

Cases (see benchmarks/README.md):

  tokens  token-sized chunks (1-4 characters, seeded) through a Qwen3.5-style XML template (QWEN_XML) with
          thinking, content and tool calls: microseconds per ``feed``; target chatparse >= 3x faster.
  d1      defect D1, unbounded prefix-less openers (Inkling template with upstream openers): one-shot and
          one-character-per-feed streaming for n = 32k/64k/128k; targets <= 2.3x per doubling and >= 100x
          faster than the reference at 128k.  The streaming reference is measured up to --ref-max and
          extrapolated quadratically beyond (labelled "extrapolated"), unless --full.
  d2      defect D2, many delimiters: one-shot of n Qwen3 JSON tool calls for n = 2000/8000/16000; target
          <= 2.3x per doubling.  The reference is measured up to --ref-max-calls, extrapolated beyond.
  plain   1 MB of plain content in 4-character chunks through QWEN_JSON, against a "floor" loop (one method
          call + one str.find + one event dict per feed) and the reference.  Informational.

Both libraries get a pre-compiled template (template loading is not timed).  Usage:

  python benchmarks/bench_core.py              # full default run (a few minutes, mostly the reference)
  python benchmarks/bench_core.py --quick      # smaller sizes, smoke run (~30 s)
  python benchmarks/bench_core.py --only d1 --full
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
logging.getLogger("transformers").setLevel(logging.ERROR)

from transformers.utils.chat_parsing import ResponseParser as RefParser  # noqa: E402
from transformers.utils.chat_parsing import parse_response as ref_parse_response  # noqa: E402
from transformers.utils.chat_parsing.response_templates import (  # noqa: E402
    load_response_template as ref_load_template,
)

import chatparse  # noqa: E402

CASES = ("tokens", "d1", "d2", "plain")

# --------------------------------------------------------------------------------------------------
# templates (families.md)

QWEN_JSON: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open_pattern": "\\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": "\\s*(?:<\\|im_end\\|>|<\\|endoftext\\|>)"},
    },
}

QWEN_XML: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open_pattern": "\\s*<tool_call>\\s*<function=(?P<name>[^>\\n]+)>",
            "close_pattern": "</function>\\s*</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": "<parameter=(?P<key>[^>\\n]+)>\\n?(?P<value>.*?)\\n?</parameter>"
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close_pattern": "\\s*(?:<\\|im_end\\|>|<\\|endoftext\\|>)"},
    },
}

_INKLING_CLOSE = ["<|end_message|>", "<|content_model_end_sampling|>"]


def _inkling_opener(kind: str) -> str:
    # The UNBOUNDED upstream opener (defect D1), not the bounded catalog one.
    return "(?:<\\|message_model\\|>)?[^<]*<\\|content_" + kind + "\\|>"


INKLING_UNBOUNDED: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|message_model|>",
    "fields": {
        "thinking": {
            "open_pattern": _inkling_opener("thinking"),
            "close": _INKLING_CLOSE,
            "repeats": True,
            "join": "",
            "content_args": {"strip": False},
        },
        "content": {
            "open_pattern": _inkling_opener("text"),
            "close": _INKLING_CLOSE,
            "repeats": True,
            "join": "",
            "content_args": {"strip": False},
        },
        "tool_calls": {
            "open_pattern": _inkling_opener("invoke_tool_json"),
            "close": _INKLING_CLOSE,
            "repeats": True,
            "content": "json",
            "transform": {
                "type": "function",
                "function": {"name": "{content.name}", "arguments": "{content.args}"},
            },
        },
    },
}

# --------------------------------------------------------------------------------------------------
# the two implementations behind one interface


class Impl:
    def __init__(
        self,
        name: str,
        parser_cls: Callable[..., Any],
        parse: Callable[..., dict[str, Any]],
        load: Callable[[Any], Any],
    ) -> None:
        self.name = name
        self.parser_cls = parser_cls
        self.parse = parse
        self.load = load
        self._cache: dict[int, Any] = {}

    def template(self, spec: dict[str, Any]) -> Any:
        key = id(spec)
        if key not in self._cache:
            self._cache[key] = self.load(spec)
        return self._cache[key]

    def stream(self, spec: dict[str, Any], prefix: str, chunks: Sequence[str]) -> dict[str, Any]:
        parser = self.parser_cls(self.template(spec), prefix=prefix)
        feed = parser.feed
        for chunk in chunks:
            feed(chunk)
        message, _ = parser.finalize()
        return dict(message)

    def one_shot(self, spec: dict[str, Any], prefix: str, text: str) -> dict[str, Any]:
        return self.parse(text, self.template(spec), prefix=prefix)


def _chatparse_impl() -> Impl:
    missing = [
        n for n in ("ResponseParser", "parse_response", "load_response_template") if not hasattr(chatparse, n)
    ]
    if missing:
        sys.exit(f"bench_core: chatparse does not provide {', '.join(missing)} yet")
    return Impl(
        "chatparse",
        chatparse.ResponseParser,
        chatparse.parse_response,
        chatparse.load_response_template,
    )


REF = Impl("transformers", RefParser, ref_parse_response, ref_load_template)


class FloorParser:
    """The floor: one method call + one ``str.find`` + one event dict per feed."""

    def __init__(self) -> None:
        self.held = -1

    def feed(self, text: str) -> list[dict[str, Any]]:
        self.held = text.find("<")
        return [{"type": "region_chunk", "field": "content", "text": text, "dirty": False}]


# --------------------------------------------------------------------------------------------------
# timing


def timed(fn: Callable[[], Any], *, repeat: int = 3, min_total: float = 0.2, max_runs: int = 50) -> float:
    """Best wall time (seconds) of ``repeat`` runs; short runs are repeated until ``min_total`` elapsed."""
    best = float("inf")
    total = 0.0
    runs = 0
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while runs < repeat or (total < min_total and runs < max_runs):
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            best = min(best, elapsed)
            total += elapsed
            runs += 1
            if elapsed > 5.0 and runs >= 1:  # a long (reference) run: one is enough
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return best


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def fmt_n(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


class Report:
    def __init__(self) -> None:
        self.verdicts: list[tuple[str, bool | None, str]] = []

    def target(self, label: str, ok: bool | None, detail: str) -> None:
        self.verdicts.append((label, ok, detail))

    def print_verdicts(self) -> bool:
        print()
        print("=" * 100)
        all_ok = True
        for label, ok, detail in self.verdicts:
            word = "INFO" if ok is None else ("PASS" if ok else "FAIL")
            all_ok = all_ok and ok is not False
            print(f"{word}  {label}: {detail}")
        return all_ok


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def doubling_ratios(sizes: Sequence[int], times: Sequence[float]) -> list[float]:
    """Time growth per doubling of the input between consecutive sizes."""
    out = []
    for (n0, t0), (n1, t1) in zip(zip(sizes, times), zip(sizes[1:], times[1:])):
        doublings = math.log2(n1 / n0)
        out.append((t1 / t0) ** (1 / doublings) if t0 > 0 and doublings > 0 else float("nan"))
    return out


def reference_series(
    sizes: Sequence[int], limit: int, full: bool, measure: Callable[[int], float]
) -> tuple[list[tuple[float, bool]], int, float]:
    """Reference times for ``sizes``: measured up to ``limit`` (all with ``full``), extrapolated
    quadratically beyond from the largest measured size.  Returns ``([(seconds, extrapolated)], base_n,
    base_t)`` where ``base_n``/``base_t`` is the measurement used for extrapolation."""
    measured = {n: measure(n) for n in sizes if full or n <= limit}
    if not measured:  # every size is above the limit: measure at the limit itself
        measured[limit] = measure(limit)
    base_n = max(measured)
    base_t = measured[base_n]
    series = [(measured[n], False) if n in measured else (base_t * (n / base_n) ** 2, True) for n in sizes]
    return series, base_n, base_t


def check_equal(label: str, ours: Any, ref: Any) -> None:
    if ours != ref:
        print(f"  WARNING: {label}: chatparse and transformers results differ", file=sys.stderr)
        print(f"    chatparse:    {str(ours)[:300]}", file=sys.stderr)
        print(f"    transformers: {str(ref)[:300]}", file=sys.stderr)


# --------------------------------------------------------------------------------------------------
# inputs

_VOCABULARY = (
    "the user wants weather for two cities so I should call the tool once per city and then compare "
    "results before answering carefully with units in celsius maybe also check the forecast days"
)
_WORDS = _VOCABULARY.split()


def words(rnd: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        w = rnd.choice(_WORDS)
        if rnd.random() < 0.08:
            w += "."
        if rnd.random() < 0.03:
            w += "\n"
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def qwen_xml_generation(rnd: random.Random) -> str:
    """A Qwen3.5-style generation (prefix pre-writes ``<think>\\n``): reasoning, text, 3 XML tool calls."""
    calls = []
    for city, days in (("Paris", 3), ("Tokyo", 5), ("São Paulo", 2)):
        calls.append(
            "<tool_call>\n<function=get_weather>\n"
            f"<parameter=city>\n{city}\n</parameter>\n"
            f"<parameter=days>\n{days}\n</parameter>\n"
            f"<parameter=note>\n{words(rnd, 120)}\n</parameter>\n"
            "</function>\n</tool_call>"
        )
    return words(rnd, 1500) + "\n</think>\n\n" + words(rnd, 600) + "\n" + "\n".join(calls) + "<|im_end|>"


def token_chunks(text: str, rnd: random.Random) -> list[str]:
    chunks = []
    i = 0
    while i < len(text):
        k = rnd.randint(1, 4)
        chunks.append(text[i : i + k])
        i += k
    return chunks


def qwen_json_calls(n: int) -> str:
    return (
        "".join(f'<tool_call>\n{{"name": "f", "arguments": {{"i": {k}}}}}\n</tool_call>\n' for k in range(n))
        + "<|im_end|>"
    )


# --------------------------------------------------------------------------------------------------
# cases


def case_tokens(ours: Impl, args: argparse.Namespace, report: Report) -> None:
    messages = 5 if args.quick else 20
    rnd = random.Random(20240601)
    prefix = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n"
    inputs = []
    for _ in range(messages):
        text = qwen_xml_generation(rnd)
        inputs.append(token_chunks(text, rnd))
    n_feeds = sum(len(c) for c in inputs)
    n_chars = sum(len("".join(c)) for c in inputs)

    for chunks in inputs[:2]:
        check_equal("tokens", ours.stream(QWEN_XML, prefix, chunks), REF.stream(QWEN_XML, prefix, chunks))

    def run(impl: Impl) -> Callable[[], None]:
        def go() -> None:
            for chunks in inputs:
                impl.stream(QWEN_XML, prefix, chunks)

        return go

    # Best of many interleaved rounds: per-feed costs of ~1 us are sensitive to machine noise.
    t_ours = t_ref = float("inf")
    for _ in range(3):
        t_ours = min(t_ours, timed(run(ours), repeat=5, min_total=0.3))
        t_ref = min(t_ref, timed(run(REF), repeat=3, min_total=0.3))
    us_ours = t_ours / n_feeds * 1e6
    us_ref = t_ref / n_feeds * 1e6
    ratio = t_ref / t_ours
    print(f"\n[tokens] QWEN_XML, {messages} generations, {n_chars} chars, {n_feeds} feeds of 1-4 chars")
    table(
        ["impl", "total", "us/feed"],
        [
            ["chatparse", fmt_time(t_ours), f"{us_ours:.2f}"],
            ["transformers", fmt_time(t_ref), f"{us_ref:.2f}"],
            ["ratio (ref/ours)", "", f"{ratio:.2f}x"],
        ],
    )
    report.target(
        "tokens: token-chunk streaming, chatparse >= 3x faster",
        ratio >= 3.0,
        f"{us_ours:.2f} vs {us_ref:.2f} us/feed = {ratio:.2f}x",
    )


def case_d1(ours: Impl, args: argparse.Namespace, report: Report) -> None:
    sizes = [8_000, 16_000, 32_000] if args.quick else [32_000, 64_000, 128_000]
    ref_max = args.ref_max if args.ref_max is not None else (4_000 if args.quick else 16_000)
    top = sizes[-1]
    note = " (quick sizes: indicative only)" if args.quick else ""

    def one_shot_text(n: int) -> str:
        return "<|content_text|>" + "x" * n + "<|end_message|>"

    def stream_chunks(n: int) -> list[str]:
        return list("x" * n + "<|content_text|>hi<|end_message|>")

    prefix = "<|message_model|>"
    check_equal(
        "d1 one-shot",
        ours.one_shot(INKLING_UNBOUNDED, "", one_shot_text(2000)),
        REF.one_shot(INKLING_UNBOUNDED, "", one_shot_text(2000)),
    )
    check_equal(
        "d1 stream",
        ours.stream(INKLING_UNBOUNDED, prefix, stream_chunks(2000)),
        REF.stream(INKLING_UNBOUNDED, prefix, stream_chunks(2000)),
    )

    # one-shot: chatparse and the reference, measured at every size
    os_ours, os_ref = [], []
    for n in sizes:
        text = one_shot_text(n)
        os_ours.append(timed(partial(ours.one_shot, INKLING_UNBOUNDED, "", text)))
        os_ref.append(timed(partial(REF.one_shot, INKLING_UNBOUNDED, "", text), repeat=1, min_total=0))

    # streaming: chatparse at every size; the reference up to ref_max, extrapolated beyond
    st_ours = []
    for n in sizes:
        chunks = stream_chunks(n)
        st_ours.append(
            timed(partial(ours.stream, INKLING_UNBOUNDED, prefix, chunks), repeat=5, min_total=1.0)
        )
    st_ref, base_n, base_t = reference_series(
        sizes,
        ref_max,
        args.full,
        lambda n: timed(lambda: REF.stream(INKLING_UNBOUNDED, prefix, stream_chunks(n)), repeat=1),
    )
    ref_label = ""
    if any(e for _, e in st_ref):
        ref_label = f" (reference measured at n={fmt_n(base_n)}: {fmt_time(base_t)})"

    r_os = doubling_ratios(sizes, os_ours)
    r_st = doubling_ratios(sizes, st_ours)
    print(f"\n[d1] Inkling, unbounded openers (D1){note}")
    rows = []
    for i, n in enumerate(sizes):
        t_ref_st, extrapolated = st_ref[i]
        rows.append(
            [
                fmt_n(n),
                fmt_time(os_ours[i]),
                "" if i == 0 else f"{r_os[i - 1]:.2f}x",
                fmt_time(os_ref[i]),
                f"{os_ref[i] / os_ours[i]:.0f}x",
                fmt_time(st_ours[i]),
                "" if i == 0 else f"{r_st[i - 1]:.2f}x",
                fmt_time(t_ref_st) + (" extrapolated" if extrapolated else ""),
                f"{t_ref_st / st_ours[i]:.0f}x" + (" (extrap.)" if extrapolated else ""),
            ]
        )
    table(
        [
            "n",
            "one-shot ours",
            "per 2x",
            "one-shot ref",
            "speedup",
            "stream ours",
            "per 2x",
            "stream ref",
            "speedup",
        ],
        rows,
    )
    if ref_label:
        print(f"  streaming reference beyond --ref-max {ref_max} extrapolated quadratically{ref_label}")
    report.target(
        f"d1: one-shot <= 2.3x per doubling{note}",
        max(r_os) <= 2.3,
        ", ".join(f"{r:.2f}x" for r in r_os),
    )
    report.target(
        f"d1: streaming <= 2.3x per doubling{note}",
        max(r_st) <= 2.3,
        ", ".join(f"{r:.2f}x" for r in r_st),
    )
    sp_os = os_ref[-1] / os_ours[-1]
    sp_st = st_ref[-1][0] / st_ours[-1]
    report.target(
        f"d1: one-shot >= 100x faster at {fmt_n(top)}{note}",
        sp_os >= 100,
        f"{fmt_time(os_ours[-1])} vs {fmt_time(os_ref[-1])} = {sp_os:.0f}x",
    )
    report.target(
        f"d1: streaming >= 100x faster at {fmt_n(top)}{note}",
        sp_st >= 100,
        f"{fmt_time(st_ours[-1])} vs {fmt_time(st_ref[-1][0])}"
        + (" (extrapolated)" if st_ref[-1][1] else "")
        + f" = {sp_st:.0f}x",
    )


def case_d2(ours: Impl, args: argparse.Namespace, report: Report) -> None:
    sizes = [500, 1000, 2000] if args.quick else [2000, 8000, 16000]
    ref_max = args.ref_max_calls if args.ref_max_calls is not None else (1000 if args.quick else 2000)
    note = " (quick sizes: indicative only)" if args.quick else ""
    check_equal(
        "d2",
        ours.one_shot(QWEN_JSON, "", qwen_json_calls(50)),
        REF.one_shot(QWEN_JSON, "", qwen_json_calls(50)),
    )

    t_ours = []
    for n in sizes:
        text = qwen_json_calls(n)
        t_ours.append(timed(partial(ours.one_shot, QWEN_JSON, "", text), repeat=5))
    t_ref, base_n, base_t = reference_series(
        sizes,
        ref_max,
        args.full,
        lambda n: timed(lambda: REF.one_shot(QWEN_JSON, "", qwen_json_calls(n)), repeat=1, min_total=0),
    )
    ratios = doubling_ratios(sizes, t_ours)
    print(f"\n[d2] QWEN_JSON, one-shot of n tool calls (D2){note}")
    rows = []
    for i, n in enumerate(sizes):
        tr, extrapolated = t_ref[i]
        rows.append(
            [
                str(n),
                f"{len(qwen_json_calls(n)) / 1e6:.2f} MB",
                fmt_time(t_ours[i]),
                "" if i == 0 else f"{ratios[i - 1]:.2f}x",
                fmt_time(tr) + (" extrapolated" if extrapolated else ""),
                f"{tr / t_ours[i]:.0f}x" + (" (extrap.)" if extrapolated else ""),
            ]
        )
    table(["calls", "size", "ours", "per 2x", "reference", "speedup"], rows)
    if any(e for _, e in t_ref):
        print(
            f"  reference beyond --ref-max-calls {ref_max} extrapolated quadratically "
            f"(measured at {base_n}: {fmt_time(base_t)})"
        )
    report.target(
        f"d2: many delimiters <= 2.3x per doubling{note}",
        max(ratios) <= 2.3,
        ", ".join(f"{r:.2f}x" for r in ratios)
        + f"; speedup at {sizes[-1]} calls {t_ref[-1][0] / t_ours[-1]:.0f}x"
        + (" (extrapolated reference)" if t_ref[-1][1] else ""),
    )


def case_plain(ours: Impl, args: argparse.Namespace, report: Report) -> None:
    size = 256 * 1024 if args.quick else 1024 * 1024
    rnd = random.Random(7)
    text = words(rnd, size)[:size]
    chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
    n = len(chunks)
    check_equal("plain", ours.stream(QWEN_JSON, "", chunks[:5000]), REF.stream(QWEN_JSON, "", chunks[:5000]))

    def floor() -> None:
        parser = FloorParser()
        feed = parser.feed
        for chunk in chunks:
            feed(chunk)

    t_floor = timed(floor)
    t_ours = timed(lambda: ours.stream(QWEN_JSON, "", chunks))
    t_ref = timed(lambda: REF.stream(QWEN_JSON, "", chunks), repeat=1 if not args.quick else 3)
    print(f"\n[plain] QWEN_JSON, {len(text) / 1e6:.2f} MB of plain content, {n} feeds of 4 chars")
    table(
        ["impl", "total", "us/feed", "vs floor"],
        [
            ["floor loop", fmt_time(t_floor), f"{t_floor / n * 1e6:.3f}", "1.00x"],
            ["chatparse", fmt_time(t_ours), f"{t_ours / n * 1e6:.3f}", f"{t_ours / t_floor:.2f}x"],
            ["transformers", fmt_time(t_ref), f"{t_ref / n * 1e6:.3f}", f"{t_ref / t_floor:.2f}x"],
        ],
    )
    report.target(
        "plain: streaming plain text (informational)",
        None,
        f"chatparse {t_ours / n * 1e6:.2f} us/feed = {t_ours / t_floor:.1f}x the floor; "
        f"{t_ref / t_ours:.1f}x faster than the reference",
    )


# --------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="chatparse vs transformers 5.24.0 core timings (see benchmarks/README.md).",
    )
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for smoke runs (targets indicative)")
    ap.add_argument("--only", choices=CASES, action="append", help="run only this case (repeatable)")
    ap.add_argument(
        "--full",
        action="store_true",
        help="measure the quadratic reference for real at every size instead of extrapolating "
        "(adds minutes: ~2 min for d1 streaming at 128k, ~3 min for d2 at 16000 calls)",
    )
    ap.add_argument(
        "--ref-max",
        type=int,
        default=None,
        metavar="N",
        help="d1: largest n for which the streaming reference is measured (default 16000; --quick 4000)",
    )
    ap.add_argument(
        "--ref-max-calls",
        type=int,
        default=None,
        metavar="N",
        help="d2: largest number of calls for which the reference is measured (default 2000; --quick 1000)",
    )
    args = ap.parse_args(argv)

    ours = _chatparse_impl()
    import transformers

    print(
        f"chatparse {getattr(chatparse, '__version__', '?')} vs transformers {transformers.__version__}; "
        f"Python {platform.python_version()} on {platform.machine()} ({platform.system()}); "
        f"{'quick' if args.quick else 'default'} sizes{', --full' if args.full else ''}"
    )
    report = Report()
    runners = {"tokens": case_tokens, "d1": case_d1, "d2": case_d2, "plain": case_plain}
    for name in CASES:
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        runners[name](ours, args, report)
        print(f"  ({name}: {time.perf_counter() - start:.1f} s wall)")
    return 0 if report.print_verdicts() else 1


if __name__ == "__main__":
    raise SystemExit(main())
