"""The transformers adapter's incremental decoder (used until chatparse.hf provides one): the text
it releases adds up to tokenizer.decode() of all the ids, and never splits a character."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

transformers = pytest.importorskip("transformers")

from chatparse.runtime._transformers import _SlidingDecoder, _StopCut  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE({c: i for i, c in enumerate(alphabet)}, []))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(
        [AddedToken(s, special=True, normalized=False) for s in ("<tool_call>", "<|im_end|>")]
    )
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend)


texts = st.lists(
    st.sampled_from(["a", "é", "🙂", " ", "\n", "<tool_call>", "<|im_end|>", "中", "x y"]), max_size=30
).map("".join)


@settings(max_examples=100, deadline=None)
@given(texts, st.lists(st.integers(1, 4), max_size=40))
def test_pieces_add_up_and_never_split_a_character(tokenizer: Any, text: str, steps: list[int]) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    d = _SlidingDecoder(tokenizer)
    out, i, k = [], 0, 0
    while i < len(ids):
        n = steps[k % len(steps)] if steps else 1
        piece = d.push(ids[i : i + n])
        assert "\ufffd" not in piece
        out.append(piece)
        i, k = i + n, k + 1
    out.append(d.flush())
    assert "".join(out) == tokenizer.decode(ids, skip_special_tokens=False) == text


@given(
    st.lists(st.sampled_from(["ab", "c", "E", "N", "D", "END", " ", "EN"]), max_size=20),
    st.lists(st.sampled_from(["END", "c E", "x"]), max_size=2),
)
def test_stop_cut_equals_cutting_the_whole_text(pieces: list[str], stops: list[str]) -> None:
    cut = _StopCut(tuple(stops))
    out = "".join(cut.feed(p) for p in pieces) + cut.flush()
    whole = "".join(pieces)
    hits = [i for i in (whole.find(s) for s in stops) if i >= 0]
    assert out == (whole[: min(hits)] if hits else whole)
    assert cut.hit == bool(hits)


def test_download_progress_bar_reports_fractions() -> None:
    from chatparse.runtime._transformers import _progress_bar

    seen: list[tuple[float, Any]] = []
    bar_class = _progress_bar(lambda fraction, raw: seen.append((fraction, raw)))
    with bar_class(total=200, desc="model.safetensors") as bar:  # what huggingface_hub does with tqdm_class
        bar.update(50)
        bar.update(150)
    assert [f for f, _ in seen] == [0.25, 1.0]
    assert seen[-1][1] == {"n": 200, "total": 200, "desc": "model.safetensors"}
