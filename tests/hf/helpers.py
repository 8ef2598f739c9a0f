"""Shared material for the `chatparse.hf` tests: family data, and real tokenizers built here.

A family tokenizer is a byte-level BPE trained (with the `tokenizers` library, in memory) on the
family's sample texts, with every token-like marker of the family (`<|im_end|>`, `<think>`,
`[TOOL_CALLS]`, `<｜tool▁call▁begin｜>`, ...) as an added special token, wrapped in
`PreTrainedTokenizerFast`. Byte-level BPE decodes every text exactly, so a recorded output can be
replayed token by token and must come back character for character.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ..core.strategies import template_literals

DATA = Path(__file__).resolve().parent.parent / "data"
FAMILIES: dict[str, dict] = json.loads((DATA / "families.json").read_text(encoding="utf-8"))
CASES: list[dict] = json.loads((DATA / "family_cases.json").read_text(encoding="utf-8"))
CHAT_TEMPLATES = DATA / "chat_templates"

# Marker-shaped strings that chat models have as single (special) tokens.
TOKEN_RX = re.compile(
    r"<\|[^<>|\s]{1,40}\|>"  # <|im_end|>, <|channel|>
    r"|<｜[^｜\s]{1,60}｜>"  # DeepSeek's <｜tool▁call▁begin｜>
    r"|<\|[A-Za-z_]{1,30}>|<[A-Za-z_]{1,30}\|>"  # Gemma 4's <|turn> / <turn|>
    r"|\[/?[A-Z_]{2,30}\]"  # [TOOL_CALLS], [INST]
    r"|</?[A-Za-z_][A-Za-z0-9_]{0,30}>"  # <think>, </tool_call>
)


def family_cases(name: str) -> list[dict]:
    return [c for c in CASES if c["template"] == name]


def markers(texts: list[str]) -> list[str]:
    found: dict[str, None] = {}
    for text in texts:
        for m in TOKEN_RX.finditer(text):
            found.setdefault(m.group(0), None)
    return list(found)


def family_texts(name: str) -> list[str]:
    cases = family_cases(name)
    return [c["text"] for c in cases] + [c["prefix"] for c in cases]


def build_tokenizer(
    texts: list[str],
    special: list[str],
    *,
    vocab_size: int = 600,
    response_template: dict | None = None,
    chat_template: str | None = None,
    name_or_path: str = "",
    eos_token: str | None = None,
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `texts`, with `special` as added special tokens."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(special),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    kwargs: dict[str, Any] = {}
    if eos_token is not None:
        kwargs["eos_token"] = eos_token
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        response_template=response_template,
        chat_template=chat_template,
        clean_up_tokenization_spaces=False,
        **kwargs,
    )
    fast.name_or_path = name_or_path
    return fast


@functools.cache
def family_tokenizer_base(name: str) -> PreTrainedTokenizerFast:
    template = FAMILIES[name]
    texts = family_texts(name)
    special = markers(template_literals(template) + texts)
    return build_tokenizer(texts, special)


def family_tokenizer(name: str, *, with_template: bool = True, **attrs: Any) -> PreTrainedTokenizerFast:
    """A fresh copy of the family's tokenizer (tests may install into it or change it)."""
    import copy

    tok = copy.deepcopy(family_tokenizer_base(name))
    tok.response_template = copy.deepcopy(FAMILIES[name]) if with_template else None
    for key, value in attrs.items():
        setattr(tok, key, value)
    return tok


def encode(tok: PreTrainedTokenizerFast, text: str) -> list[int]:
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text, "the test tokenizer must decode its own encoding exactly"
    return list(ids)
