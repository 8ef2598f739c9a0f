"""Tokenizers built in the test process (nothing from the hub): byte-level BPE plus a family's markers.

Each canitoolcall family gets a tokenizer trained on its own fixture outputs (so ordinary text
splits into multi-character tokens, as a real model's does) with the family's markers and stop
tokens as single added tokens (so a marker is one token, as in the real vocabularies). Stop tokens
are special; the other markers are plain added tokens that decoding always keeps, like Qwen's
`<tool_call>`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any


def build_tokenizer(
    markers: Sequence[str],
    corpus: Sequence[str],
    *,
    stop: Sequence[str] = (),
    vocab_size: int = 1200,
    name_or_path: str = "local/test-model",
    chat_template: str | None = None,
) -> Any:
    """A `transformers.PreTrainedTokenizerFast` with `markers` and `stop` as single tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    stops = list(dict.fromkeys(stop))
    plain = [m for m in dict.fromkeys(markers) if m not in stops]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=stops,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    tok.add_tokens([AddedToken(m, special=False, normalized=False) for m in plain])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=stops[0] if stops else None,
        additional_special_tokens=stops[1:] or None,
        clean_up_tokenization_spaces=False,
    )
    fast.name_or_path = name_or_path
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast


@functools.cache
def family_tokenizer(family: str) -> Any:
    """The tokenizer for a canitoolcall family (cached per process)."""
    from canitoolcall.fixtures import load_families, load_fixtures

    fam = load_families()[family]
    stops: list[str] = []
    for ref in fam.reference_models:
        for s in ref.stop_tokens or ():
            if s not in stops:
                stops.append(s)
    corpus = [fx.raw_output for fx in load_fixtures() if fx.family == family]
    return build_tokenizer(list(fam.markers), corpus, stop=stops, name_or_path=f"local/{family}")
