#!/usr/bin/env python3
"""What the runtime layer costs on top of the parsing layers and the clients it builds on.

Measured in one run, best of ``--rounds`` (the machine is shared: compare ratios, not absolutes):

  text path (local runtimes: transformers, llama.cpp, replay), a Qwen3 output of reasoning, content
  and ``--calls`` tool calls fed in 3-character pieces:
    floor      chatparse.openai.ChatParser.feed() per piece + finish()   (what the runtime builds on)
    assembly   the runtime's per-generation assembly over the same pieces (runtime._generation)
    observed   the same with an on_raw_generation observer (one extra core pass + a deep copy)
    replay     ReplayRuntime.stream(): the whole generation path (options, hooks, generator, parse)

  native path (servers: OpenAI-compatible, Ollama), the same text as provider content:
    floor      appending the pieces to a list (nothing parsed)
    assembly   local_tool_call_parser off (the default)
    detection  chatparse.openai.AutoStream alone over the pieces (what the fallback builds on)
    fallback   local_tool_call_parser="auto" (detection on the content as it streams)

  over HTTP (loopback, the test engine replaying structured content and calls), per streamed chunk:
    openai     the bare openai client iterating the stream
    runtime    OpenAIRuntime.stream() over the same request (client CPU time per chunk)

  python benchmarks/bench_runtime.py            # default sizes
  python benchmarks/bench_runtime.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from chatparse import catalog  # noqa: E402
from chatparse.openai import AutoStream, ChatParser  # noqa: E402
from chatparse.runtime import Hooks, OpenAIRuntime, ReplayRuntime  # noqa: E402
from chatparse.runtime._generation import Assembly  # noqa: E402

PROMPT = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def output(calls: int) -> str:
    text = "<think>\n" + "Let me think about the weather in these cities. " * 20 + "\n</think>\n\n"
    text += "Here is what I found, city by city. " * 20
    for i in range(calls):
        text += f'\n<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "City number {i}"}}}}\n</tool_call>'
    return text + "<|im_end|>"


CHUNK = 3  # characters per piece: about a token, and what ReplayRuntime is given


def pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]


def compare(
    fns: list[Callable[[], Any]], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> list[float]:
    """Best time of each function; the rounds interleave them, so a change of the machine's load
    hits all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t = clock()
            fn()
            best[i] = min(best[i], clock() - t)
    return best


def text_path(calls: int, rounds: int) -> list[tuple[str, float]]:
    chunks = pieces(output(calls))
    template = catalog.load("qwen3")

    def floor() -> None:
        p = ChatParser(template=template, prefix=PROMPT, tools=TOOLS)
        for c in chunks:
            p.feed(c)
        p.finish("stop")

    def assembly(hooks: Hooks | None = None) -> Callable[[], None]:
        def run() -> None:
            a = Assembly(
                adapter="bench", model="m", tools=TOOLS, hooks=hooks, streamed=True, stream_id="s",
                template=template, template_name="qwen3", prefix=PROMPT,
            )  # fmt: skip
            for c in chunks:
                a.feed(("text", c))
            a.finish("stop", None)

        return run

    replay = ReplayRuntime(
        [output(calls)] * (rounds + 1),
        model="Qwen/Qwen3-8B",
        prompt=PROMPT,
        chunk_size=CHUNK,
        options={"max_tokens": 10**6},
    )

    def through_replay() -> None:
        for _ in replay.stream([{"role": "user", "content": "Weather?"}], tools=TOOLS):
            pass

    n = len(chunks)
    names = ["floor (ChatParser)", "assembly", "assembly + observer", "ReplayRuntime.stream (the whole path)"]
    fns = [floor, assembly(), assembly(Hooks(on_raw_generation=lambda o: None)), through_replay]
    return [(name, t / n) for name, t in zip(names, compare(fns, rounds))]


def native_path(calls: int, rounds: int) -> list[tuple[str, float]]:
    chunks = pieces(output(calls).replace("<|im_end|>", ""))

    def floor() -> None:
        out: list[str] = []
        for c in chunks:
            out.append(c)
        "".join(out)

    def assembly(parser: Any) -> Callable[[], None]:
        def run() -> None:
            a = Assembly(
                adapter="bench", model="m", tools=TOOLS, hooks=None, streamed=True, stream_id="s",
                native=True, local_parser=parser,
            )  # fmt: skip
            for c in chunks:
                a.feed(("content", c))
            a.finish("stop", None)

        return run

    def detection() -> None:
        d = AutoStream(tools=TOOLS)
        for c in chunks:
            d.feed(c)
        d.finish("stop")

    n = len(chunks)
    names = [
        "floor (append)",
        "assembly, no fallback",
        "openai.AutoStream alone",
        "assembly, local_tool_call_parser='auto'",
    ]
    fns = [floor, assembly(None), detection, assembly("auto")]
    return [(name, t / n) for name, t in zip(names, compare(fns, rounds))]


def http_path(rounds: int, words: int) -> list[tuple[str, float]]:
    import openai
    from tests.server.engine import Script, TestEngine

    eng = TestEngine()
    calls = [
        {"type": "function", "function": {"name": "get_weather", "arguments": f'{{"city": "City {i}"}}'}}
        for i in range(3)
    ]
    eng.add("bench", Script(reasoning="Thinking. " * words, content="Answer. " * words, tool_calls=calls))
    messages = [{"role": "user", "content": "Weather? [case:bench]"}]
    with eng:
        client = openai.OpenAI(base_url=eng.url + "/v1", api_key="x", max_retries=0)
        rt = OpenAIRuntime("m", client=client, include_usage=False, options={"max_tokens": 10**6})
        counted = []

        def bare() -> None:
            n = 0
            for _ in client.chat.completions.create(
                model="m", messages=messages, stream=True, tools=TOOLS, max_tokens=10**6
            ):
                n += 1
            counted.append(n)

        def runtime() -> None:
            s = rt.stream(messages, tools=TOOLS)
            for _ in s:
                pass
            assert s.result is not None and len(s.result.tool_calls) == 3

        bare()
        n = counted[-1]
        # CPU time of this thread: the in-process test engine runs in another one
        t_bare, t_rt = compare([bare, runtime], rounds, clock=time.thread_time)
    return [
        ("openai client alone (CPU per chunk)", t_bare / n),
        ("OpenAIRuntime.stream (CPU per chunk)", t_rt / n),
    ]


def table(title: str, rows: list[tuple[str, float]], base_row: int = 0) -> None:
    print(f"\n{title}")
    base = rows[base_row][1]
    for name, t in rows:
        print(f"  {name:<44} {t * 1e6:9.2f} µs   {t / base:6.2f}x")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-http", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.calls, args.rounds = 5, 2
    print(f"chatparse runtime benchmark; Python {platform.python_version()} on {platform.machine()}")
    print(f"best of {args.rounds} rounds; {len(pieces(output(args.calls)))} pieces of {CHUNK} characters")
    table("text path (local runtimes), per piece", text_path(args.calls, args.rounds))
    rows = native_path(args.calls, args.rounds)
    table("native path (servers), per content piece; ratios to openai.AutoStream", rows, base_row=2)
    if not args.no_http:
        table("over loopback HTTP, per streamed chunk", http_path(args.rounds, 30 if args.quick else 300))


if __name__ == "__main__":
    main()
