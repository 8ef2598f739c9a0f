"""XGrammar and llguidance matchers for the constraint tests (real engines, CPU wheels)."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import pytest

REQUIRE = os.environ.get("CHATPARSE_REQUIRE_CONSTRAINTS") == "1"


def need(module: str) -> Any:
    """Import an engine package; skip without it, fail under CHATPARSE_REQUIRE_CONSTRAINTS=1."""
    try:
        return __import__(module)
    except ImportError as e:
        if REQUIRE:
            pytest.fail(f"{module} is required here (CHATPARSE_REQUIRE_CONSTRAINTS=1): {e}")
        pytest.skip(f"{module} not installed")


def available() -> set[str]:
    """The engine packages importable here (under CHATPARSE_REQUIRE_CONSTRAINTS=1: all, or fail)."""
    out = set()
    for module in ("xgrammar", "llguidance"):
        try:
            __import__(module)
        except ImportError as e:
            if REQUIRE:
                pytest.fail(f"{module} is required here (CHATPARSE_REQUIRE_CONSTRAINTS=1): {e}")
            continue
        out.add(module)
    return out


@functools.lru_cache(maxsize=1)
def _xg_compiler() -> Any:
    xgr = need("xgrammar")
    return xgr.GrammarCompiler(xgr.TokenizerInfo([]), cache_enabled=False)


def xg_compile(constraint: Any, form: str) -> Any:
    """Compile a GBNF grammar (`form="gbnf"`) or structural tag (`"structural-tag"`) with XGrammar."""
    need("xgrammar")
    if form == "gbnf":
        return _xg_compiled("gbnf", constraint.gbnf())
    return _xg_compiled("tag", json.dumps(constraint.structural_tag()))


@functools.lru_cache(maxsize=128)
def _xg_compiled(kind: str, text: str) -> Any:
    xgr = need("xgrammar")
    comp = _xg_compiler()
    if kind == "gbnf":
        return comp.compile_grammar(xgr.Grammar.from_ebnf(text))
    return comp.compile_grammar(xgr.Grammar.from_structural_tag(text))


def xg_accepts(compiled: Any, text: str) -> bool:
    """Feed `text` byte by byte to a fresh XGrammar matcher; True if all accepted and it can end."""
    xgr = need("xgrammar")
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    for b in text.encode("utf-8"):
        if not m.accept_string(bytes([b])):
            return False
    return bool(m.is_terminated())


@functools.lru_cache(maxsize=1)
def _byte_tokenizer() -> Any:
    llg = need("llguidance")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab["<eos>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<eos>"])
    return llg.LLTokenizer(tok.to_str(), eos_token=vocab["<eos>"], slices=[])


def llg_matcher(lark: str) -> Any:
    """A fresh llguidance matcher for `lark` (a copy of one compiled once per grammar)."""
    return _llg_compiled(lark).deep_copy()


@functools.lru_cache(maxsize=128)
def _llg_compiled(lark: str) -> Any:
    llg = need("llguidance")
    m = llg.LLMatcher(_byte_tokenizer(), llg.LLMatcher.grammar_from_lark(lark), log_level=0)
    if m.is_error():
        raise AssertionError(f"llguidance rejected the grammar: {m.get_error()}")
    return m


def llg_accepts(lark: str, text: str) -> bool:
    """Feed `text` byte by byte to llguidance (a byte-level tokenizer); True if accepted and can end."""
    m = llg_matcher(lark)
    tok = _byte_tokenizer()
    for tid in tok.tokenize_bytes(text.encode("utf-8")):
        if not m.consume_token(tid):
            return False
    return bool(m.is_accepting())
