#!/usr/bin/env python3
"""Per-request cost of a derived constraint: `chatparse.constraints.derive` plus XGrammar's compile
of the structural tag, for 1, 10 and 100 tools, against XGrammar compiling the equivalent input it
would get without chatparse, measured in the same run.

Per template and tool count:

* **ours cold**: the derivation cache emptied, `derive(...)` + `structural_tag()` + XGrammar's
  `compile_structural_tag` with its compiler cache off (what the first request with a new tool set
  costs);
* **ours cached**: the same request again: `derive` is answered from its cache (keyed by template and
  every request argument) and XGrammar's compiler cache (on, keyed by the tag's text) returns the
  compiled grammar;
* **xgr json cold / cached**: XGrammar's `compile_json_schema` of the JSON schema vLLM builds for
  `tool_choice="required"` (an array of `{"name": const, "parameters": schema}` objects, at least one),
  cache off / on;
* **xgr builtin cold**: where XGrammar ships a structural tag for the model family
  (`xgrammar.get_builtin_structural_tag`: `qwen_3`, `qwen_3_coder`, `glm_4_7`, ...), that tag's compile
  with the cache off (XGrammar's own hand-written format for the same model).

The tokenizer is a byte-level BPE trained here on the Python standard library's sources
(`--vocab` tokens, default 32000; no download): XGrammar's compile cost grows with the vocabulary,
so an empty vocabulary would hide most of it. Each figure is the best of `--repeat` runs in CPU
time (`time.process_time`: the machine is shared, and wall clock under load inflated round 4's
figures several-fold; XGrammar compiles with `max_threads=1`, so the figures are one core's).
Compare ratios within one run.

  python benchmarks/bench_constraints.py                       # qwen3, qwen3_xml, glm, minimax_m2, mistral_v13
  python benchmarks/bench_constraints.py --template qwen3 --tools 1 --tools 10 --repeat 5
  python benchmarks/bench_constraints.py --quick               # vocab 4000, 1 and 10 tools, 2 repeats
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chatparse import constraints
from chatparse.constraints import _constraint

# chatparse template -> XGrammar builtin structural-tag model for the same family
BUILTIN = {"qwen3": "qwen_3", "qwen3_xml": "qwen_3_coder", "glm": "glm_4_7", "kimi_k2": "kimi"}
DEFAULT_TEMPLATES = ["qwen3", "qwen3_xml", "glm", "minimax_m2", "mistral_v13"]


def make_tools(n: int) -> list[dict[str, Any]]:
    """`n` distinct tools with small realistic schemas (string, integer, enum, boolean, array,
    nested object; some optional)."""
    tools = []
    for i in range(n):
        props: dict[str, Any] = {
            "query": {"type": "string", "description": "what to look up"},
            "limit": {"type": "integer"},
            "mode": {"type": "string", "enum": ["fast", "exact", f"m{i}"]},
        }
        if i % 2:
            props["tags"] = {"type": "array", "items": {"type": "string"}, "maxItems": 4}
        if i % 3 == 0:
            props["where"] = {
                "type": "object",
                "properties": {"city": {"type": "string"}, "exact": {"type": "boolean"}},
                "required": ["city"],
            }
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": f"tool_{i:03d}",
                    "description": f"tool number {i}",
                    "parameters": {"type": "object", "properties": props, "required": ["query", "mode"]},
                },
            }
        )
    return tools


def vllm_required_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema vLLM's OpenAI server builds for `tool_choice="required"`."""
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "anyOf": [
                {
                    "properties": {
                        "name": {"type": "string", "enum": [t["function"]["name"]]},
                        "parameters": t["function"]["parameters"],
                    },
                    "required": ["name", "parameters"],
                }
                for t in tools
            ],
        },
    }


def train_tokenizer(vocab: int) -> Any:
    """A byte-level BPE of `vocab` tokens trained on the standard library's sources."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:400]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([str(f) for f in files], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            fn()
            times.append(time.process_time() - t0)
        finally:
            gc.enable()
    return min(times)


def measure(xgr: Any, info: Any, cold: Any, name: str, n: int, repeat: int) -> dict[str, Any] | None:
    """One row: template `name` with `n` tools under `tool_choice="required"` (None: refused)."""
    tools = make_tools(n)

    def derive_only() -> Any:
        _constraint._CACHE.clear()
        return constraints.derive(name, tools, tool_choice="required").structural_tag()

    def ours_cold() -> Any:
        _constraint._CACHE.clear()
        tag = constraints.derive(name, tools, tool_choice="required").structural_tag()
        return cold.compile_structural_tag(json.dumps(tag))

    warm = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=True)

    def ours_cached() -> Any:
        tag = constraints.derive(name, tools, tool_choice="required").structural_tag()
        return warm.compile_structural_tag(json.dumps(tag))

    schema_text = json.dumps(vllm_required_schema(tools))

    def json_cold() -> Any:
        return cold.compile_json_schema(schema_text)

    def json_cached() -> Any:
        return warm.compile_json_schema(schema_text)

    try:
        d = best(derive_only, repeat)
    except constraints.ConstraintError as e:
        print(f"{name:<12} {n:>5} not constrainable: {e}")
        return None
    oc = best(ours_cold, repeat)
    ours_cached()
    ocached = best(ours_cached, max(repeat, 5))
    jc = best(json_cold, repeat)
    json_cached()
    jcached = best(json_cached, max(repeat, 5))
    bt = None
    if name in BUILTIN:
        stag = xgr.get_builtin_structural_tag(BUILTIN[name], tools=tools, tool_choice="required")
        bt = best(lambda: cold.compile_structural_tag(stag), repeat)
    return {
        "template": name,
        "tools": n,
        "derive_ms": d * 1e3,
        "ours_cold_ms": oc * 1e3,
        "ours_cached_ms": ocached * 1e3,
        "xgr_json_cold_ms": jc * 1e3,
        "xgr_json_cached_ms": jcached * 1e3,
        "xgr_builtin_cold_ms": None if bt is None else bt * 1e3,
        "cold_over_json": oc / jc,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--template", action="append", help="catalog template (repeatable)")
    ap.add_argument("--tools", action="append", type=int, help="tool count (repeatable; default 1 10 100)")
    ap.add_argument("--vocab", type=int, default=None, help="tokenizer vocabulary size (default 32000)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per figure, best kept (default 3)")
    ap.add_argument("--quick", action="store_true", help="vocab 4000, 1 and 10 tools, 2 repeats")
    ap.add_argument("--json", action="store_true", help="also print one JSON line per row")
    a = ap.parse_args()
    try:
        import xgrammar as xgr
    except ImportError:
        print(
            "xgrammar is not installed: pip install -e '.[constraints]' (torch==2.13.0 first)",
            file=sys.stderr,
        )
        return 2
    templates = a.template or DEFAULT_TEMPLATES
    counts = a.tools or ([1, 10] if a.quick else [1, 10, 100])
    vocab = a.vocab or (4000 if a.quick else 32000)
    repeat = a.repeat or (2 if a.quick else 3)

    t0 = time.perf_counter()
    hf_tok = train_tokenizer(vocab)
    info = xgr.TokenizerInfo.from_huggingface(hf_tok, vocab_size=len(hf_tok))
    print(f"tokenizer: byte-level BPE, {len(hf_tok)} tokens (trained in {time.perf_counter() - t0:.1f} s)")
    cold = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    header = (
        f"{'template':<12} {'tools':>5} {'derive':>9} {'ours cold':>10} {'ours cached':>12} "
        f"{'xgr json cold':>14} {'xgr json cached':>16} {'xgr builtin':>12} {'cold/json':>10}"
    )
    print("CPU times in ms, best of", repeat, "(machine shared: compare ratios)")
    print(header)
    print("-" * len(header))
    for name in templates:
        for n in counts:
            row = measure(xgr, info, cold, name, n, repeat)
            if row is None:
                continue
            bt = row["xgr_builtin_cold_ms"]
            bts = "-" if bt is None else f"{bt:.1f}"
            print(
                f"{name:<12} {n:>5} {row['derive_ms']:>9.1f} {row['ours_cold_ms']:>10.1f} "
                f"{row['ours_cached_ms']:>12.3f} {row['xgr_json_cold_ms']:>14.1f} "
                f"{row['xgr_json_cached_ms']:>16.3f} {bts:>12} {row['cold_over_json']:>9.2f}x"
            )
            if a.json:
                print(json.dumps({"vocab": len(hf_tok), **row}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
