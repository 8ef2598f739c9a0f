#!/usr/bin/env python3
"""Per-token parser cost inside vLLM and SGLang: the chatparse plugin against each engine's built-in
parser for the same family, measured in the same run.

Per family, every canitoolcall fixture of the family that the engine has a built-in parser for
(canitoolcall's own choice of tool and reasoning parser per reference model) is replayed as one
request through the engine's parser API, by both sides over the same fixtures and in the same
configuration: chatparse is also the reasoning parser exactly when the built-in pair has one
(otherwise one side would parse reasoning that the other leaves in the content), with one token
per delta (the server's per-step calls only: vLLM `parse_delta`, SGLang
`ReasoningParser.parse_stream_chunk` then `FunctionCallParser.parse_stream_chunk`, and the
end-of-stream calls), after the deltas were detokenized once outside the timed region. A request's
time includes creating its parser objects (the server creates them per request) and, for
chatparse under SGLang, chatparse's serving hooks (a built-in parser runs without them). The
figure is microseconds per output token; rounds of plugin and built-in are interleaved and the
best round of each is kept (the machine is shared: ratios within one run are what counts). The clock is the
process's CPU time by default (`--clock cpu`: time the scheduler gives other processes on a loaded
machine is not counted; the parsers do no I/O), `--clock wall` for `perf_counter`.
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

    # chatparse's serving hooks run only where chatparse is installed: they are the plugin's cost
    # (a server running a built-in parser has none of them).
    hooked = "chatparse" in (tool, reasoning)

    def turn(su: R.Setup, texts: list[str], groups: list[list[int]]) -> float:
        tools = su.bench_tools  # type: ignore[attr-defined]
        # The server and the request exist before the first step; the serving hooks run per step.
        serving = SimpleNamespace(
            tool_call_parser=tool,
            _tool_call_parsing_active=lambda request: bool(tools),
            _effective_tools=lambda request: tools,
        )
        request = SimpleNamespace(_response_parser_prefix=su.prefix)
        # The server's per-request dicts the hook is handed (its reasoning parsers, its content
        # so far): they exist per request in the server, not per step.
        parsers: dict[Any, Any] = {}
        content: dict[Any, Any] = {}
        token = _REQUEST.set(None)
        try:
            t0 = CLOCK()
            fp = rp = None
            last = len(texts) - 1
            for i, text in enumerate(texts):
                finish = {"type": "stop"} if i == last else None
                normal = text
                if reasoning:
                    if hooked:  # the serving hook of `_process_reasoning_stream`, around nothing
                        _hook_reasoning_stream(
                            no_op, serving, 0, "", parsers, content, request, "stop" if finish else None
                        )
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
                    if hooked:
                        _publish_tool_step(request, finish)  # the hook of `_process_tool_call_stream`
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
    """`{"plugin": (label, turn), "builtin": (label, turn)}` for the family of `su`, or `{}` when the
    engine has no built-in parser for it.

    Both sides run the same configuration: the plugin is the reasoning parser too exactly when the
    built-in pair has one (`--tool-call-parser chatparse` alone otherwise, as an operator replacing
    `qwen3_coder` without `--reasoning-parser` would run it), so neither side parses reasoning the
    other leaves in the content."""
    if engine == "vllm":
        from canitoolcall.adapters import vllm as cv

        rule = cv.resolve_parsers(family, su.fixture.reference_model)
        if rule is None or rule.choice is None:
            return {}
        reasoning = rule.choice.reasoning_parser
        plugin_reasoning = "chatparse" if reasoning else None
        with R.plugin_env(su):
            plugin = vllm_turn(R.vllm_parser_cls(su, "chatparse", plugin_reasoning))
        builtin = vllm_turn(R.vllm_parser_cls(su, rule.choice.tool_parser, reasoning))
        return {
            "plugin": (f"chatparse/{plugin_reasoning or '-'}", plugin),
            "builtin": (f"{rule.choice.tool_parser}/{reasoning or '-'}", builtin),
        }
    from canitoolcall.adapters import sglang as cs

    srule = cs.resolve_parsers(family, su.fixture.reference_model)
    if srule is None or srule.tool_call_parser is None:
        return {}
    plugin_reasoning = "chatparse" if srule.reasoning_parser else None
    return {
        "plugin": (f"chatparse/{plugin_reasoning or '-'}", sglang_turn("chatparse", plugin_reasoning)),
        "builtin": (
            f"{srule.tool_call_parser}/{srule.reasoning_parser or '-'}",
            sglang_turn(srule.tool_call_parser, srule.reasoning_parser),
        ),
    }


def measure(engine: str, families: set[str] | None, rounds: int) -> list[dict[str, Any]]:
    """Per family, µs per token of each side over the same fixtures: those the built-in parser runs
    for (a family's fixtures without a built-in pair, or where either side raises in the untimed
    warm-up, are left out of both sides and counted in `left_out`)."""
    data = prepare(engine, families)
    rows = []
    for family in sorted(data):
        cases = data[family]
        best: dict[str, float] = {}
        labels: dict[str, set[str]] = defaultdict(set)
        per_case = []
        for su, texts, groups in cases:
            try:
                sides = contenders(engine, family, su)
            except Exception as e:  # a built-in parser that cannot start with this tokenizer
                print(f"  {su.fixture.id}: skipped ({type(e).__name__}: {e})", file=sys.stderr)
                continue
            if not sides:
                continue
            try:  # warm-up, untimed: both sides must run this fixture
                for side in ("plugin", "builtin"):
                    with R.plugin_env(su) if side == "plugin" else R.environ():
                        sides[side][1](su, texts, groups)
            except Exception as e:
                print(f"  {su.fixture.id}: skipped ({side}: {type(e).__name__}: {e})", file=sys.stderr)
                continue
            per_case.append((su, texts, groups, sides))
            for side, (label, _) in sides.items():
                labels[side].add(label)
        tokens = sum(len(g) for _, _, g, _ in per_case)
        for _ in range(rounds):
            if not tokens:
                break
            for side in ("plugin", "builtin"):
                total = 0.0
                gc.disable()
                try:
                    for su, texts, groups, sides in per_case:
                        with R.plugin_env(su) if side == "plugin" else R.environ():
                            total += sides[side][1](su, texts, groups)
                finally:
                    gc.enable()
                best[side] = min(best.get(side, float("inf")), total / tokens * 1e6)
        rows.append(
            {
                "family": family,
                "fixtures": len(per_case),
                "left_out": len(cases) - len(per_case),
                "tokens": tokens,
                "plugin": best.get("plugin"),
                "builtin": best.get("builtin"),
                "builtin_name": ", ".join(sorted(labels["builtin"])) or "-",
                "plugin_name": ", ".join(sorted(labels["plugin"])) or "-",
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
        "| family | fixtures (left out) | tokens | built-in parser | chatparse as | built-in µs/token "
        "| chatparse µs/token | speed-up |"
    )
    print("|---|---:|---:|---|---|---:|---:|---:|")
    failed = []
    for r in rows:
        p, b = r["plugin"], r["builtin"]
        ratio = b / p if p and b else None
        if ratio is not None and ratio < TARGET:
            failed.append(r["family"])
        head = (
            f"| {r['family']} | {r['fixtures']} ({r['left_out']}) | {r['tokens']} | {r['builtin_name']} "
            f"| {r['plugin_name']} |"
        )
        print(f"{head} {b:.2f} | {p:.2f} | {ratio:.2f}x |" if ratio is not None else f"{head} - | - | - |")
    verdict = "PASS" if not failed else "FAIL"
    print(
        f"{verdict}: plugin >= {TARGET:.0f}x faster than the built-in parser in every family"
        + (f" (below target: {', '.join(failed)})" if failed else "")
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
