"""The Qwen3 request both engines' plugin tests send (prompt, tools, outputs), the tokenizers they
build for it, and XGrammar acceptance of an attached structural tag."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .localtok import build_tokenizer

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"


def tool(name: str, param: str) -> dict[str, Any]:
    """A function tool with one required string parameter."""
    schema = {"type": "object", "properties": {param: {"type": "string"}}, "required": [param]}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


def call(name: str, arguments: dict[str, Any]) -> str:
    """A Qwen3 (Hermes) call as the model writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


TOOLS = [tool("get_weather", "city")]
TOOLS2 = [*TOOLS, tool("get_time", "zone")]
CALL = call("get_weather", {"city": "Paris"})
CALL2 = call("get_time", {"zone": "CET"})
OUTPUT = "<think>\nThe user wants the weather.\n</think>\n\nLet me check." + CALL
MARKERS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<|im_start|>"]


def qwen3_tokenizer(*extra: str) -> Any:
    """A byte-level BPE with Qwen3's markers as single tokens, named after Qwen3-8B (so the catalog
    finds the template by model id)."""
    corpus = [OUTPUT, PROMPT, "Hello, how are you today? The weather in Paris is nice.", *extra]
    return build_tokenizer(
        MARKERS,
        corpus * 4,
        stop=["<|im_end|>", "<|endoftext|>"],
        vocab_size=400,
        name_or_path="Qwen/Qwen3-8B",
    )


def harmony_tokenizer() -> Any:
    """A tokenizer no catalog entry matches (select gpt_oss with CHATPARSE_TEMPLATE)."""
    return build_tokenizer(
        ["<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|end|>"],
        ["<|start|>assistant<|channel|>final<|message|>hi<|end|>"] * 4,
        stop=["<|return|>"],
        vocab_size=300,
        name_or_path="acme/harmony-tune",
    )


def xgr_acceptor(tag: str) -> Any:
    """XGrammar compiling a structural tag (JSON text); returns `accepts(text)`: fed byte by byte to
    a fresh matcher, all accepted and the grammar can end there."""
    xgr = pytest.importorskip("xgrammar")
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False).compile_grammar(
        xgr.Grammar.from_structural_tag(tag)
    )

    def accepts(text: str) -> bool:
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return all(m.accept_string(bytes([b])) for b in text.encode()) and bool(m.is_terminated())

    return accepts
