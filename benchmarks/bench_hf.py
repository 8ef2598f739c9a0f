"""chatparse.hf benchmarks: streamer overhead per token, and parse_dataset throughput.

1. Streamers. A forced generation's `put()` calls (the prompt, then one token per step, as
   `generate()` makes them: torch tensors when torch is installed, else numpy arrays of the same
   shapes) are recorded once and replayed into `TextIteratorStreamer` (transformers' baseline, text
   only), `ResponseStreamer` (events) and `ChatDeltaStreamer` (Chat Completions deltas), each
   drained as an iterator. Reported: microseconds per token and what chatparse adds per token over
   `TextIteratorStreamer`. With torch, also the cost per token of the tiny model's `generate()`
   itself, for scale.
2. Datasets. N generations (Qwen3 style: reasoning of 200-4,000 characters, text, 0-3 tool calls)
   parsed by a loop over transformers' `tokenizer.parse_response`, by a loop over
   `chatparse.hf.parse_response` (the drop-in), and by `parse_dataset` with 1 and 2 processes.
   Reported: rows per second and ratios to the transformers loop.

    python benchmarks/bench_hf.py              # 100,000 rows, a few minutes
    python benchmarks/bench_hf.py --quick      # 10,000 rows
    python benchmarks/bench_hf.py --only stream

Timings on a shared machine are noisy: each streamer is measured in several interleaved rounds and
the best round is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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


def bench_dataset(rows: int) -> None:
    import datasets
    from datasets import Dataset

    datasets.disable_progress_bars()

    tok = tokenizer()
    rng = random.Random(3)
    distinct = [generation(rng) for _ in range(2_000)]
    texts = [distinct[i % len(distinct)] for i in range(rows)]
    chars = sum(len(t) for t in texts)
    print(
        f"\ndatasets: {rows:,} generations, {chars / rows:,.0f} characters on average (best of 2 runs each)"
    )
    results: dict[str, float] = {}

    def timed(name, fn, runs=2):
        best = float("inf")
        for _ in range(runs):
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        results[name] = best

    ref_rows = min(rows, 20_000)

    def ref_loop():
        for t in texts[:ref_rows]:
            tok.parse_response(t, prefix=PROMPT)

    timed("transformers tokenizer.parse_response loop", ref_loop)
    results["transformers tokenizer.parse_response loop"] *= rows / ref_rows  # measured on ref_rows

    def cp_loop():
        for t in texts:
            hf.parse_response(tok, t, prefix=PROMPT)

    timed("chatparse.hf.parse_response loop", cp_loop)
    ds = Dataset.from_dict({"completion": texts})
    for procs in (1, 2):
        timed(
            f"parse_dataset num_proc={procs}",
            lambda p=procs: hf.parse_dataset(
                ds, column="completion", prefix=PROMPT, template=FAMILIES["QWEN_JSON"], num_proc=p, desc=None
            ),
        )
    base = rows / results["transformers tokenizer.parse_response loop"]
    print(f"{'method':45} {'rows/s':>9} {'vs transformers':>16}")
    for name, seconds in results.items():
        rate = rows / seconds
        print(f"{name:45} {rate:9,.0f} {rate / base:15.2f}x")
    if ref_rows < rows:
        print(f"(the transformers loop was timed on {ref_rows:,} of the rows and scaled)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 rows, fewer rounds")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--only", choices=["stream", "dataset"])
    args = parser.parse_args()
    rows = args.rows or (10_000 if args.quick else 100_000)
    print(
        f"chatparse.hf benchmarks (pid {os.getpid()}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f})"
    )
    if args.only in (None, "stream"):
        bench_stream(rounds=3 if args.quick else 7)
    if args.only in (None, "dataset"):
        bench_dataset(rows)


if __name__ == "__main__":
    main()
