#!/usr/bin/env python3
"""Per-token parser cost inside vLLM and SGLang: the chatparse plugin against each engine's built-in
parser for the same family, measured in the same run.

Per family, every canitoolcall fixture of the family is replayed as one request through the
engine's parser API with one token per delta (the server's per-step calls only: vLLM
`parse_delta`, SGLang `ReasoningParser.parse_stream_chunk` then `FunctionCallParser.parse_stream_chunk`,
and the end-of-stream calls), after the deltas were detokenized once outside the timed region. A
request's time includes creating its parser objects (the server creates them per request). The
figure is microseconds per output token; rounds of plugin and built-in are interleaved and the
best round of each is kept (the machine is shared: ratios within one run are what counts). The
clock is the process's CPU time by default (`--clock cpu`: time the scheduler gives other
processes on a loaded machine is not counted; the parsers do no I/O), `--clock wall` for
`perf_counter`.
Target: the plugin at least 2x faster than the built-in parser in every family.

  python benchmarks/bench_engines.py                      # whichever engine is importable here
  python benchmarks/bench_engines.py --engine vllm --rounds 5
  python benchmarks/bench_engines.py --engine sglang --family qwen3-hermes
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import logging
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integrations import replay as R  # noqa: E402

TARGET = 2.0
CLOCK = time.process_time  # see --clock


# --------------------------------------------------------------------------------------------------
# one request, timed


def vllm_turn(parser_cls: Any) -> Callable[[R.Setup, list[str], list[list[int]]], float]:
    def turn(su: R.Setup, texts: list[str], groups: list[list[int]]) -> float:
        request = su.bench_request  # type: ignore[attr-defined]
        t0 = CLOCK()
        parser = parser_cls(R.vllm_tok(su), request.tools, chat_template_kwargs={}, model_config=None)
        last = len(groups) - 1
        for i, (text, ids) in enumerate(zip(texts, groups)):
            parser.parse_delta(text, ids, request, prompt_token_ids=su.prompt_ids, finished=i == last)
        return CLOCK() - t0

    return turn


def sglang_turn(tool: str, reasoning: str | None) -> Callable[[R.Setup, list[str], list[list[int]]], float]:
    from types import SimpleNamespace

    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    from chatparse.integrations.sglang import _REQUEST, _hook_reasoning_stream, _publish_tool_step

    def no_op(*args: Any, **kwargs: Any) -> None:
        return None

    def turn(su: R.Setup, texts: list[str], groups: list[list[int]]) -> float:
        tools = su.bench_tools  # type: ignore[attr-defined]
        # The server and the request exist before the first step; the serving hooks run per step.
        serving = SimpleNamespace(
            tool_call_parser=tool,
            _tool_call_parsing_active=lambda request: bool(tools),
            _effective_tools=lambda request: tools,
        )
        request = SimpleNamespace(_response_parser_prefix=su.prefix)
        token = _REQUEST.set(None)
        try:
            t0 = CLOCK()
            fp = rp = None
            last = len(texts) - 1
            for i, text in enumerate(texts):
                finish = {"type": "stop"} if i == last else None
                normal = text
                if reasoning:  # the serving hook of `_process_reasoning_stream`, around nothing
                    _hook_reasoning_stream(no_op, serving, 0, "", {}, {}, request, "stop" if finish else None)
                    if rp is None:
                        rp = ReasoningParser(
                            reasoning,
                            True,
                            False,
                            None,
                            tokenizer=su.tokenizer,
                            tool_call_parser_active=bool(tools),
                        )
                    _, normal = rp.parse_stream_chunk(text)
                    if i == last:
                        end = rp.parse_stream_end()[1]
                        if end:
                            normal = (normal or "") + end
                if tools:
                    _publish_tool_step(request, finish)  # the serving hook of `_process_tool_call_stream`
                    if fp is None:
                        fp = FunctionCallParser(tools, tool, tokenizer=su.tokenizer)
                    fp.parse_stream_chunk(normal or "")
                    if i == last:
                        fp.parse_stream_end()
            return CLOCK() - t0
        finally:
            _REQUEST.reset(token)

    return turn


# --------------------------------------------------------------------------------------------------


def prepare(
    engine: str, families: set[str] | None
) -> dict[str, list[tuple[R.Setup, list[str], list[list[int]]]]]:
    by_family: dict[str, list[tuple[R.Setup, list[str], list[list[int]]]]] = defaultdict(list)
    for fx in R.corpus():
        if families and fx.family not in families:
            continue
        su = R.setup_for(fx)
        if su is None:
            continue
        groups = R.groups(su.ids, "token")
        if engine == "vllm":
            request = R.vllm_request(su, stream=True)
            request.skip_special_tokens = False
            request.spaces_between_special_tokens = False
            su.bench_request = request  # type: ignore[attr-defined]
            texts = R.vllm_detokenize(su, request, groups)
        else:
            su.bench_tools = R._sglang_tools(su)  # type: ignore[attr-defined]
            texts = R.sglang_texts(su, groups)
        by_family[fx.family].append((su, texts, groups))
    return by_family


def contenders(engine: str, family: str, su: R.Setup) -> dict[str, tuple[str, Any]]:
    """`{"plugin": (label, turn), "builtin": (label, turn)}` for the family of `su`."""
    out: dict[str, tuple[str, Any]] = {}
    if engine == "vllm":
        from canitoolcall.adapters import vllm as cv

        with R.plugin_env(su):
            out["plugin"] = ("chatparse", vllm_turn(R.vllm_parser_cls(su, "chatparse", "chatparse")))
        rule = cv.resolve_parsers(family, su.fixture.reference_model)
        if rule is not None and rule.choice is not None:
            label = f"{rule.choice.tool_parser}/{rule.choice.reasoning_parser or '-'}"
            out["builtin"] = (
                label,
                vllm_turn(R.vllm_parser_cls(su, rule.choice.tool_parser, rule.choice.reasoning_parser)),
            )
    else:
        from canitoolcall.adapters import sglang as cs

        out["plugin"] = ("chatparse", sglang_turn("chatparse", "chatparse"))
        rule = cs.resolve_parsers(family, su.fixture.reference_model)
        if rule is not None and rule.tool_call_parser is not None:
            out["builtin"] = (
                f"{rule.tool_call_parser}/{rule.reasoning_parser or '-'}",
                sglang_turn(rule.tool_call_parser, rule.reasoning_parser),
            )
    return out


def measure(engine: str, families: set[str] | None, rounds: int) -> list[dict[str, Any]]:
    data = prepare(engine, families)
    rows = []
    for family in sorted(data):
        cases = data[family]
        best: dict[str, float] = {}
        labels: dict[str, set[str]] = defaultdict(set)
        tokens = sum(len(g) for _, _, g in cases)
        per_case = []
        for su, texts, groups in cases:
            try:
                per_case.append((su, texts, groups, contenders(engine, family, su)))
            except Exception as e:  # a built-in parser that cannot start with this tokenizer
                print(f"  {su.fixture.id}: skipped ({type(e).__name__}: {e})", file=sys.stderr)
        for _ in range(rounds):
            for side in ("plugin", "builtin"):
                total = 0.0
                measured = 0
                gc.disable()
                try:
                    for su, texts, groups, sides in per_case:
                        if side not in sides:
                            continue
                        label, turn = sides[side]
                        labels[side].add(label)
                        env = R.plugin_env(su) if side == "plugin" else R.environ()
                        with env:
                            try:
                                total += turn(su, texts, groups)
                            except Exception:
                                continue
                        measured += len(groups)
                finally:
                    gc.enable()
                if measured:
                    per_token = total / measured * 1e6
                    best[side] = min(best.get(side, float("inf")), per_token)
        rows.append(
            {
                "family": family,
                "fixtures": len(cases),
                "tokens": tokens,
                "plugin": best.get("plugin"),
                "builtin": best.get("builtin"),
                "builtin_name": ", ".join(sorted(labels["builtin"])) or "-",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("vllm", "sglang", "auto"), default="auto")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per side; the best is kept")
    ap.add_argument("--family", action="append", help="only these canitoolcall families (repeatable)")
    ap.add_argument(
        "--clock", choices=("cpu", "wall"), default="cpu", help="process CPU time (default) or perf_counter"
    )
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    engine = args.engine
    if engine == "auto":
        engine = (
            "vllm"
            if importlib.util.find_spec("vllm")
            else "sglang"
            if importlib.util.find_spec("sglang")
            else ""
        )
    if not engine:
        print("bench_engines: neither vllm nor sglang is importable here (see README: Inside vLLM / SGLang)")
        return 2
    if engine == "vllm":
        import chatparse.integrations.vllm  # noqa: F401
    else:
        import chatparse.integrations.sglang as plugin

        plugin.register()
    logging.disable(logging.WARNING)
    version = importlib.import_module(engine).__version__
    print(
        f"{engine} {version}: one token per delta, µs per output token ({args.clock} clock, "
        f"best of {args.rounds} interleaved rounds)"
    )
    rows = measure(engine, set(args.family) if args.family else None, args.rounds)
    print(
        "| family | fixtures | tokens | built-in parser | built-in µs/token | chatparse µs/token | speed-up |"
    )
    print("|---|---:|---:|---|---:|---:|---:|")
    failed = []
    for r in rows:
        p, b = r["plugin"], r["builtin"]
        ratio = b / p if p and b else None
        if ratio is not None and ratio < TARGET:
            failed.append(r["family"])
        print(
            f"| {r['family']} | {r['fixtures']} | {r['tokens']} | {r['builtin_name']} | "
            f"{b:.2f} | {p:.2f} | {ratio:.2f}x |"
            if ratio is not None
            else f"| {r['family']} | {r['fixtures']} | {r['tokens']} | {r['builtin_name']} | - | "
            f"{p if p is None else round(p, 2)} | - |"
        )
    verdict = "PASS" if not failed else "FAIL"
    print(
        f"{verdict}: plugin >= {TARGET:.0f}x faster than the built-in parser in every family"
        + (f" (below target: {', '.join(failed)})" if failed else "")
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
