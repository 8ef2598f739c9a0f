#!/usr/bin/env python3
"""Where the SGLang plugin's time per token goes, by layer (companion of `bench_engines.py`).

Per family, the fixtures and turns of `bench_engines.py --engine sglang` (one token per delta, the
plugin's serving hooks charged to it), timed in interleaved rounds of these variants (CPU clock,
best round of each, µs per output token):

* `builtin`: SGLang's own parsers for the family (the reference of the 2x target);
* `plugin`: the chatparse plugin as `bench_engines.py` times it;
* `no-op core`: the same, with the core's per-token `ResponseParser._feed` answering "nothing"
  (parsers are still built, prompts still parsed, outputs still finished);
* `hooks only`: chatparse's serving hooks, with both detectors answering a shared empty result;
* `stub`: the harness and SGLang's `ReasoningParser` / `FunctionCallParser` wrappers around
  detectors that answer a shared empty result (what any parser pays; the detectors are built).

So `plugin - no-op core` is the core's per-token work and what `ChatParser` does with its answers,
`no-op core - hooks only` the detectors' glue, `ChatParser`'s set-up and end, and the core's
per-request prompt and end of output; `hooks only - stub` the hooks. A second table replays what
the plugin fed each `ChatParser` outside SGLang: the core alone (set-up with the prompt, per-token
`_feed`, `finalize`) and `ChatParser` over it, stepped as the plugin steps it (`_core_feed`, and
`_answer` only for answers that change something there).

  python benchmarks/bench_engine_split.py --family qwen3-xml --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integrations import replay as R  # noqa: E402

import bench_engines as B  # noqa: E402

CLOCK = time.process_time
VARIANTS = ("builtin", "plugin", "no-op core", "hooks only", "stub")


def _cases(family: str) -> tuple[list[tuple[Any, ...]], int]:
    from canitoolcall.adapters import sglang as cs

    import chatparse.integrations.sglang as plugin

    def no_op(*args: Any, **kwargs: Any) -> None:
        return None

    cases = []
    for su, texts, groups in B.prepare("sglang", {family}).get(family, []):
        sides = B.contenders("sglang", family, su)
        if not sides:
            continue
        rule = cs.resolve_parsers(family, su.fixture.reference_model)
        reasoning = "chatparse" if rule.reasoning_parser else None
        hooks = plugin._hook_reasoning_stream, plugin._publish_tool_step
        plugin._hook_reasoning_stream = plugin._publish_tool_step = no_op  # type: ignore[assignment]
        try:
            sides["stub"] = ("stub", B.sglang_turn("chatparse", reasoning))
        finally:
            plugin._hook_reasoning_stream, plugin._publish_tool_step = hooks
        sides["hooks only"] = ("hooks only", B.sglang_turn("chatparse", reasoning))
        try:  # warm-up, untimed (as bench_engines: both sides must run the fixture)
            for side in ("plugin", "builtin"):
                with R.plugin_env(su) if side == "plugin" else R.environ():
                    sides[side][1](su, texts, groups)
        except Exception:
            continue
        cases.append((su, texts, groups, sides))
    return cases, sum(len(g) for _, _, g, _ in cases)


class _Variant:
    """Patches the plugin for one variant, and undoes it."""

    def __init__(self) -> None:
        import chatparse.integrations.sglang as plugin
        from chatparse._parser import ResponseParser

        self.plugin, self.core = plugin, ResponseParser
        self.feed = ResponseParser._feed
        r, t = plugin.ChatparseReasoningDetector, plugin.ChatparseDetector
        self.saved = [(c, k, c.__dict__[k]) for c in (r, t) for k in ("parse_streaming_increment", "finish")]

    def set(self, name: str) -> None:
        plugin = self.plugin
        self.core._feed = (lambda parser, text: []) if name == "no-op core" else self.feed  # type: ignore[method-assign]
        for c, k, f in self.saved:
            setattr(c, k, f)
        if name in ("hooks only", "stub"):
            r, t = plugin.ChatparseReasoningDetector, plugin.ChatparseDetector
            r.parse_streaming_increment = lambda self, text: plugin._NO_TEXT  # type: ignore[method-assign]
            r.finish = lambda self: plugin._NO_TEXT  # type: ignore[method-assign]
            t.parse_streaming_increment = lambda self, text, tools: plugin._NOTHING  # type: ignore[method-assign]
            t.finish = lambda self, tools: plugin._NOTHING  # type: ignore[method-assign]


def split(family: str, rounds: int) -> dict[str, float]:
    cases, tokens = _cases(family)
    variant = _Variant()
    best = dict.fromkeys(VARIANTS, float("inf"))
    try:
        for _ in range(rounds):
            for name in VARIANTS:
                variant.set(name)
                side = {"builtin": "builtin", "hooks only": "hooks only", "stub": "stub"}.get(name, "plugin")
                total = 0.0
                gc.disable()
                try:
                    for su, texts, groups, sides in cases:
                        with R.environ() if side == "builtin" else R.plugin_env(su):
                            total += sides[side][1](su, texts, groups)
                finally:
                    gc.enable()
                best[name] = min(best[name], total / tokens * 1e6)
    finally:
        variant.set("plugin")
    return best


def standalone(family: str, rounds: int) -> dict[str, float]:
    """The core alone and `ChatParser` over it, on what the plugin fed each `ChatParser`."""
    from chatparse._parser import ResponseParser
    from chatparse.openai import ChatParser

    recorded: list[dict[str, Any]] = []
    init, chat_init, feed = ResponseParser.__init__, ChatParser.__init__, ResponseParser._feed

    def core_init(self: Any, t: Any, prefix: Any = None, tools: Any = None, **kw: Any) -> None:
        self._bench = {"template": t, "prefix": prefix, "tools": tools, "kw": kw, "texts": []}
        init(self, t, prefix=prefix, tools=tools, **kw)

    def chat(self: Any, **kw: Any) -> None:
        chat_init(self, **kw)
        recorded.append({"chat": kw, **self._parser._bench})

    def core_feed(self: Any, text: str) -> Any:
        self._bench["texts"].append(text)
        return feed(self, text)

    ResponseParser.__init__, ChatParser.__init__ = core_init, chat  # type: ignore[method-assign]
    ResponseParser._feed = core_feed  # type: ignore[method-assign]
    try:
        cases, tokens = _cases(family)  # the warm-up runs record one turn per fixture
    finally:
        ResponseParser.__init__, ChatParser.__init__, ResponseParser._feed = init, chat_init, feed  # type: ignore[method-assign]

    def core(stage: int) -> None:
        for r in recorded:
            p = ResponseParser(r["template"], prefix=r["prefix"], tools=r["tools"], **r["kw"])
            p._copy_values = False  # as ChatParser runs it
            if stage > 0:
                step = p._feed
                for text in r["texts"]:
                    step(text)
            if stage > 1:
                with contextlib.suppress(ValueError):  # a required field missing: ends all the same
                    p.finalize()

    def chatparser(stage: int) -> None:
        for r in recorded:
            p = ChatParser(**r["chat"])
            if stage > 0:
                step, answer = p._core_feed, p._answer
                for text in r["texts"]:
                    a = step(text)
                    if (a or p._pending) and not (type(a) is str and p._sink is None):
                        answer(a)
            if stage > 1:
                p.finish("stop")

    out: dict[str, float] = {}
    for _ in range(rounds):
        for name, run in (("core", core), ("ChatParser", chatparser)):
            for stage in range(3):
                gc.disable()
                t0 = CLOCK()
                run(stage)
                t = (CLOCK() - t0) / tokens * 1e6
                gc.enable()
                key = f"{name}:{stage}"
                out[key] = min(out.get(key, float("inf")), t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", action="append", required=True, help="canitoolcall family (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    import chatparse.integrations.sglang as plugin

    plugin.register()
    logging.disable(logging.WARNING)
    print("SGLang, one token per delta, µs per output token (cpu clock, best round)")
    print(
        "| family | built-in | plugin | speed-up | harness + SGLang wrappers | hooks "
        "| detectors, set-up, prompt, end (no-op core) | core feeds + ChatParser on them |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    alone = {}
    for family in args.family:
        b = split(family, args.rounds)
        print(
            f"| {family} | {b['builtin']:.2f} | {b['plugin']:.2f} | {b['builtin'] / b['plugin']:.2f}x "
            f"| {b['stub']:.2f} | {b['hooks only'] - b['stub']:.2f} "
            f"| {b['no-op core'] - b['hooks only']:.2f} | {b['plugin'] - b['no-op core']:.2f} |"
        )
        alone[family] = standalone(family, args.rounds)
    print("\nOutside SGLang, what the plugin fed each ChatParser (µs per output token):")
    print(
        "| family | core set-up | core feeds | core finalize | ChatParser set-up | ChatParser steps | ChatParser finish |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for family, s in alone.items():
        core = [s["core:0"], s["core:1"] - s["core:0"], s["core:2"] - s["core:1"]]
        chat = [
            s["ChatParser:0"],
            s["ChatParser:1"] - s["ChatParser:0"],
            s["ChatParser:2"] - s["ChatParser:1"],
        ]
        own = [c - k for c, k in zip(chat, core)]
        print(f"| {family} | " + " | ".join(f"{v:.2f}" for v in core + own) + " |")
    print("(ChatParser columns: over the core's own figure in the same column)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
