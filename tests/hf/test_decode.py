"""`IncrementalDecoder`: for any token ids, grouped any way, the pieces concatenate to `decode(ids)`.

Three real tokenizer designs (built here with `tokenizers`): byte-level BPE (GPT-2 / Qwen / Llama 3
style), SentencePiece-style BPE with byte fallback and a Metaspace `▁` (Llama 2 / Mistral / Gemma
style), and WordPiece; both the native `DecodeStream` path and the sliding window.
"""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from chatparse.hf import IncrementalDecoder

from .helpers import CASES, family_tokenizer_base

SAMPLE = [c["text"] for c in CASES] + ["héllo wörld 🙂 日本語のテキスト ça va? naïve café – “quotes”"] * 3
SPECIAL = ["<|im_end|>", "<think>", "</think>"]


@functools.cache
def byte_fallback_tokenizer() -> PreTrainedTokenizerFast:
    """Llama 2 style: `▁` for spaces, byte tokens `<0xNN>` for what the vocabulary lacks."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    bytes_ = [f"<0x{i:02X}>" for i in range(256)]
    trainer = trainers.BpeTrainer(
        vocab_size=700, special_tokens=["<unk>", *bytes_], limit_alphabet=60, show_progress=False
    )
    tok.train_from_iterator([t for t in SAMPLE if t], trainer=trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL])
    return PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)


@functools.cache
def wordpiece_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=500, special_tokens=["[UNK]", *SPECIAL], show_progress=False
    )
    tok.train_from_iterator([t for t in SAMPLE if t], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)


TOKENIZERS = {
    "byte-level": lambda: family_tokenizer_base("QWEN_JSON"),
    "byte-fallback": byte_fallback_tokenizer,
    "wordpiece": wordpiece_tokenizer,
}


def groups(draw, ids: list[int]) -> list[list[int]]:
    out, i = [], 0
    while i < len(ids):
        n = draw(st.integers(1, 4))
        out.append(ids[i : i + n])
        i += n
    return out


@st.composite
def cases(draw):
    name = draw(st.sampled_from(sorted(TOKENIZERS)))
    tok = TOKENIZERS[name]()
    if draw(st.booleans()):
        text = draw(st.sampled_from(SAMPLE))
        ids = tok.encode(text, add_special_tokens=False)
        if ids and draw(st.booleans()):
            cut = draw(st.integers(0, len(ids)))
            ids = ids[:cut]  # cut anywhere, also inside a multi-byte character
        encoded = True
    else:
        ids = draw(st.lists(st.integers(0, len(tok) - 1), max_size=40))  # any ids at all
        encoded = False
    return name, tok, ids, groups(draw, ids), draw(st.booleans()), encoded


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_pieces_concatenate_to_the_full_decode(case):
    name, tok, ids, grouped, native, encoded = case
    d = IncrementalDecoder(tok, native=native)
    assert d.native == native
    pieces = [d.push(g) for g in grouped]
    pieces.append(d.flush())
    full = tok.decode(ids, skip_special_tokens=False)
    assert d.ids == ids
    joined = "".join(pieces)
    if encoded and name == "byte-fallback" and joined != full:
        # Cut inside a character: `decode` replaces the whole byte-token run (also characters
        # already streamed); the decoder keeps what it streamed and marks each dangling byte
        # (docs/compatibility.md, "Incremental decoding of a cut byte run").
        k = max(i for i in range(len(ids) + 1) if "\ufffd" not in tok.decode(ids[:i]))
        assert all(tok.convert_ids_to_tokens(i).startswith("<0x") for i in ids[k:])
        assert joined == tok.decode(ids[:k], skip_special_tokens=False) + "\ufffd" * (len(ids) - k)
    elif encoded or "\ufffd" not in full:
        assert joined == full
    # Random ids may hold invalid byte runs: with byte fallback, `<0x00>` then `<0x80>` decodes
    # as "\x00" and then as "\ufffd\ufffd" (the run is replaced whole), so text that was
    # already released can change; no streaming decoder can follow that. Models write valid UTF-8.


@pytest.mark.parametrize("native", [True, False])
def test_a_cut_byte_run_keeps_the_streamed_characters(native):
    """Regression (CI): ids ending inside a character after a character spelled in byte tokens."""
    tok = TOKENIZERS["byte-fallback"]()
    text = "思考 ok 思考"
    ids = tok.encode(text, add_special_tokens=False)
    tokens = tok.convert_ids_to_tokens(ids)
    cut = max(i for i, t in enumerate(tokens) if t.startswith("<0xE")) + 1  # one byte of the last 考
    assert tokens[cut - 2].startswith("<0x")  # the run holds complete characters before the cut
    d = IncrementalDecoder(tok, native=native)
    pieces = [d.push([i]) for i in ids[:cut]] + [d.flush()]
    assert "\ufffd" not in "".join(pieces[:-1])
    assert "".join(pieces) == tok.decode(ids[: cut - 1]) + "\ufffd"
    assert tok.decode(ids[:cut]).endswith("\ufffd" * 4)  # the reference replaces the whole run


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["byte-level", "byte-fallback"]), st.sampled_from(SAMPLE), st.booleans())
def test_no_piece_splits_a_character(name, text, native):
    """Pieces before the end never end inside a character (no U+FFFD) when the text has none."""
    tok = TOKENIZERS[name]()
    ids = tok.encode(text, add_special_tokens=False)
    d = IncrementalDecoder(tok, native=native)
    for i in ids:
        assert "\ufffd" not in d.push([i])
    assert "\ufffd" not in d.flush()


def test_reset_starts_over():
    tok = TOKENIZERS["byte-level"]()
    d = IncrementalDecoder(tok)
    ids = tok.encode("abc <think>", add_special_tokens=False)
    first = "".join(d.push([i]) for i in ids) + d.flush()
    d.reset()
    assert d.ids == []
    assert "".join(d.push([i]) for i in ids) + d.flush() == first == "abc <think>"


def test_special_tokens_kept_or_skipped():
    tok = TOKENIZERS["byte-fallback"]()
    ids = tok.encode("hi <think>x</think>", add_special_tokens=False)
    for skip in (False, True):
        for native in (True, False):
            d = IncrementalDecoder(tok, skip_special_tokens=skip, native=native)
            text = "".join(d.push([i]) for i in ids) + d.flush()
            assert text == tok.decode(ids, skip_special_tokens=skip)
    assert "<think>" in tok.decode(ids) and "<think>" not in tok.decode(ids, skip_special_tokens=True)


def test_native_decoder_errors_fall_back_to_the_window():
    """`DecodeStream` raises for a byte run that rewrites released text ('A', then a lone
    continuation byte and <unk>); the decoder goes on with the sliding window instead of failing
    inside generate()."""
    tok = TOKENIZERS["byte-fallback"]()
    byte = lambda value: tok.convert_tokens_to_ids(f"<0x{value:02X}>")  # noqa: E731
    ids = [byte(0x41), byte(0x80), tok.convert_tokens_to_ids("<unk>")]
    d = IncrementalDecoder(tok)
    assert d.native
    pieces = [d.push([i]) for i in ids] + [d.flush()]
    assert not d.native  # switched
    assert all(isinstance(p, str) for p in pieces)
    more = tok.encode(" hello", add_special_tokens=False)
    tail = "".join(d.push([i]) for i in more) + d.flush()
    assert tail.endswith("hello")
