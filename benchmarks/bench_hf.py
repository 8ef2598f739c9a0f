"""chatparse.hf benchmarks: streamer overhead per token, and parse_dataset throughput.

1. Streamers. A forced generation's `put()` calls (the prompt, then one token per step, as
   `generate()` makes them: torch tensors when torch is installed, else numpy arrays of the same
   shapes) are recorded once and replayed into `TextIteratorStreamer` (transformers' baseline, text
   only), `ResponseStreamer` (events) and `ChatDeltaStreamer` (Chat Completions deltas), each
   drained as an iterator. Reported: microseconds per token and what chatparse adds per token over
   `TextIteratorStreamer`. With torch, also the cost per token of the tiny model's `generate()`
   itself, for scale.
2. Datasets. The same N distinct generations (Qwen3 style: reasoning of 200-4,000 characters,
   text, 0-3 tool calls) parsed by a loop over transformers' `tokenizer.parse_response` (every
   row, not a sample), by a loop over `chatparse.hf.parse_response` (the drop-in), and by
   `parse_dataset` over an in-memory and a memory-mapped (saved, reloaded) dataset with 1 and 2
   processes, and over a streaming dataset (iterated to the end). Reported per method: wall time,
   rows/s and its ratio to the transformers loop; CPU time per row (this process plus its worker
   processes, so it shows what a row costs whatever the number of idle cores) and its ratio; and
   the wall-time speedup from 1 to 2 processes. Before timing, a sample of `parse_dataset`'s rows
   is checked against `chatparse.hf.parse_response`.

    python benchmarks/bench_hf.py              # 100,000 rows, about ten minutes
    python benchmarks/bench_hf.py --quick      # 10,000 rows
    python benchmarks/bench_hf.py --only dataset --rounds 3
    python benchmarks/bench_hf.py --only stream

Timings on a shared machine are noisy: every streamer and every dataset method is measured in
several interleaved rounds and the best round is kept (wall and CPU separately); the load average
is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hf.helpers import FAMILIES, build_tokenizer, encode, markers  # noqa: E402

from chatparse import hf  # noqa: E402

PROMPT = "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
WORDS = [
    "the",
    "user",
    "wants",
    "weather",
    "for",
    "Paris",
    "and",
    "Tokyo",
    "so",
    "I",
    "should",
    "call",
    "the",
    "tool",
    "twice",
    ",",
    "then",
    "compare",
    "temperatures",
    ".",
    "Let",
    "me",
    "think",
    "about",
    "units",
    ":",
    "Celsius",
    "is",
    "fine",
    ";",
    "also",
    "check",
    "tomorrow",
]


def generation(rng: random.Random) -> str:
    think = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 600)))
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60)))
    calls = "".join(
        f'\n<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "C{i}", "days": {i}}}}}\n</tool_call>'
        for i in range(rng.randint(0, 3))
    )
    return f"<think>\n{think}\n</think>\n\n{text}{calls}<|im_end|>"


def tokenizer(with_template: bool = True):
    rng = random.Random(1)
    texts = [generation(rng) for _ in range(200)] + [PROMPT]
    tmpl = FAMILIES["QWEN_JSON"]
    tok = build_tokenizer(texts, markers(texts + [json.dumps(tmpl)]), vocab_size=2000)
    tok.response_template = tmpl if with_template else None
    return tok


# ---------------------------------------------------------------------------------------- streamers


def recorded_puts(tok, text: str):
    """The values generate() would hand a streamer: torch tensors if torch is installed, else numpy."""
    prompt, ids = encode(tok, PROMPT), encode(tok, text)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        return [torch.tensor([prompt])] + [torch.tensor([i]) for i in ids], "torch"
    import numpy as np

    return [np.array([prompt])] + [np.array([i]) for i in ids], "numpy"


def replay(streamer, puts) -> float:
    start = time.perf_counter()
    for value in puts:
        streamer.put(value)
    streamer.end()
    for _ in streamer:
        pass
    return time.perf_counter() - start


def bench_stream(rounds: int) -> None:
    from transformers import TextIteratorStreamer

    tok = tokenizer()
    rng = random.Random(7)
    text = "\n".join(generation(rng).replace("<|im_end|>", "") for _ in range(3)) + "<|im_end|>"
    puts, kind = recorded_puts(tok, text)
    n = len(puts) - 1
    makers = {
        "TextIteratorStreamer (transformers)": lambda: TextIteratorStreamer(tok, skip_prompt=True),
        "ResponseStreamer (events)": lambda: hf.ResponseStreamer(tok),
        "ChatDeltaStreamer (deltas)": lambda: hf.ChatDeltaStreamer(tok),
        "ResponseStreamer, window decoding": lambda: _window(hf.ResponseStreamer(tok), tok),
        "floor: IncrementalDecoder only": lambda: _DecodeOnly(tok),
    }
    best = {name: float("inf") for name in makers}
    for _ in range(rounds):
        for name, make in makers.items():
            best[name] = min(best[name], replay(make(), puts))
    base = best["TextIteratorStreamer (transformers)"] / n * 1e6
    print(f"\nstreamers: {n} tokens ({len(text):,} characters, {kind} values), best of {rounds} rounds")
    print(f"{'streamer':40} {'us/token':>9} {'added vs TextIteratorStreamer':>31}")
    for name, seconds in best.items():
        per = seconds / n * 1e6
        print(f"{name:40} {per:9.2f} {per - base:+29.2f} us")
    check = hf.ResponseStreamer(tok)
    replay(check, puts)
    assert check.message == hf.parse_response(tok, text, prefix=PROMPT)
    _generate_cost(tok, text)


class _DecodeOnly:
    """The decoding part alone (what any streamer that keeps special tokens must do)."""

    def __init__(self, tok) -> None:
        self.decoder = hf.IncrementalDecoder(tok)
        self.first = True

    def put(self, value) -> None:
        if self.first:
            self.first = False
            return
        self.decoder.push(value.tolist())

    def end(self) -> None:
        self.decoder.flush()

    def __iter__(self):
        return iter(())


def _window(streamer, tok):
    """The same streamer decoding with the sliding window over tokenizer.decode (slow tokenizers)."""
    streamer._decoder = hf.IncrementalDecoder(tok, native=False)
    return streamer


def _generate_cost(tok, text: str) -> None:
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor, LogitsProcessorList
    except ImportError:
        print("(torch not installed: generate() itself not measured)")
        return
    target = encode(tok, text)[:300]

    class Force(LogitsProcessor):
        def __call__(self, input_ids, scores):
            k = input_ids.shape[1] - n_prompt
            out = torch.full_like(scores, float("-inf"))
            out[:, target[k]] = 0.0
            return out

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, bos_token_id=None, eos_token_id=None, pad_token_id=0,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    prompt = torch.tensor([encode(tok, PROMPT)])
    n_prompt = prompt.shape[1]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(
                input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=len(target),
                logits_processor=LogitsProcessorList([Force()]), do_sample=False, streamer=hf.ResponseStreamer(tok),
            )  # fmt: skip
        times.append(time.perf_counter() - start)
    print(
        f"for scale: the tiny 1-layer model's generate() costs {min(times) / len(target) * 1e6:,.0f} us/token"
    )


# ---------------------------------------------------------------------------------------- datasets


def dataset_rows(rows: int) -> list[str]:
    """`rows` distinct generations (2,000 drawn shapes, each row made unique by a row number in its reasoning)."""
    rng = random.Random(3)
    shapes = [generation(rng) for _ in range(2_000)]
    return [shapes[i % len(shapes)].replace("\n</think>", f" (row {i})\n</think>", 1) for i in range(rows)]


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the `num_proc` workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def bench_dataset(rows: int, rounds: int) -> None:
    import tempfile

    import datasets
    from datasets import Dataset, load_from_disk

    datasets.disable_progress_bars()
    tok = tokenizer()
    template = FAMILIES["QWEN_JSON"]
    texts = dataset_rows(rows)
    chars = sum(len(t) for t in texts)
    memory = Dataset.from_dict({"completion": texts})
    tmp = tempfile.mkdtemp(prefix="bench_hf_")
    memory.save_to_disk(f"{tmp}/ds")
    mapped = load_from_disk(f"{tmp}/ds")
    kwargs = dict(column="completion", prefix=PROMPT, template=template, desc=None)

    def run_map(ds, procs):
        extra = {"load_from_cache_file": False} if ds.cache_files else {}
        return lambda: hf.parse_dataset(ds, num_proc=procs, **kwargs, **extra)

    def run_stream():
        for _ in hf.parse_dataset(mapped.to_iterable_dataset(num_shards=4), **kwargs):
            pass

    methods = {
        "transformers tokenizer.parse_response loop": lambda: [
            tok.parse_response(t, prefix=PROMPT) for t in texts
        ],
        "chatparse.hf.parse_response loop (drop-in)": lambda: [
            hf.parse_response(tok, t, prefix=PROMPT) for t in texts
        ],
        "parse_dataset in-memory, num_proc=1": run_map(memory, 1),
        "parse_dataset in-memory, num_proc=2": run_map(memory, 2),
        "parse_dataset memory-mapped, num_proc=1": run_map(mapped, 1),
        "parse_dataset memory-mapped, num_proc=2": run_map(mapped, 2),
        "parse_dataset streaming (iterated)": run_stream,
    }
    # the rows being timed are the rows a plain loop gives (checked on a sample, before timing)
    out = hf.parse_dataset(mapped.select(range(0, rows, max(1, rows // 300))), num_proc=2, **kwargs)
    for row in out:
        m = hf.parse_response(tok, row["completion"], prefix=PROMPT)
        assert row["content"] == m.get("content") and row["thinking"] == m.get("thinking"), row
        assert [c["function"]["name"] for c in row["tool_calls"]] == [
            c["function"]["name"] for c in m.get("tool_calls", [])
        ]
    load = [os.getloadavg()[0]]
    wall = {name: float("inf") for name in methods}
    cpu = {name: float("inf") for name in methods}
    for _ in range(rounds):  # interleaved rounds, best of each
        for name, fn in methods.items():
            c0, w0 = _cpu(), time.perf_counter()
            fn()
            w, c = time.perf_counter() - w0, _cpu() - c0
            wall[name], cpu[name] = min(wall[name], w), min(cpu[name], c)
        load.append(os.getloadavg()[0])
    shutil.rmtree(tmp, ignore_errors=True)
    ref = "transformers tokenizer.parse_response loop"
    print(
        f"\ndatasets: the same {rows:,} distinct generations ({chars / rows:,.0f} characters on average) for "
        f"every method; best of {rounds} interleaved rounds; load average {min(load):.1f}-{max(load):.1f} "
        f"on {os.cpu_count()} CPUs"
    )
    print(
        "wall = elapsed time; CPU = user+system of this process and its worker processes "
        "(per row, summed over processes)"
    )
    print(
        f"{'method':44} {'wall s':>7} {'rows/s':>8} {'vs transformers':>15} {'CPU us/row':>11} {'CPU vs tf':>9}"
    )
    for name in methods:
        rate = rows / wall[name]
        print(
            f"{name:44} {wall[name]:7.1f} {rate:8,.0f} {wall[ref] / wall[name]:14.2f}x "
            f"{cpu[name] / rows * 1e6:11.0f} {cpu[ref] / cpu[name]:8.2f}x"
        )
    for kind in ("in-memory", "memory-mapped"):
        one, two = wall[f"parse_dataset {kind}, num_proc=1"], wall[f"parse_dataset {kind}, num_proc=2"]
        print(f"scaling, {kind}: num_proc=2 is {one / two:.2f}x num_proc=1 in wall time (2.00x = linear)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 rows, fewer rounds")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--only", choices=["stream", "dataset"])
    parser.add_argument("--rounds", type=int, default=None, help="dataset rounds (best kept)")
    args = parser.parse_args()
    rows = args.rows or (10_000 if args.quick else 100_000)
    print(
        f"chatparse.hf benchmarks (pid {os.getpid()}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f})"
    )
    if args.only in (None, "stream"):
        bench_stream(rounds=3 if args.quick else 7)
    if args.only in (None, "dataset"):
        bench_dataset(rows, rounds=args.rounds or (3 if args.quick else 2))


if __name__ == "__main__":
    main()
