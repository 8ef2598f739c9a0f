"""The shared llama.cpp test engine works: a written GGUF loads, a grammar forces an exact output.

Several test packages (server, constraints, runtime) build on ``tests.support.llamacpp``; these
tests pin down what they rely on, so a change of llama-cpp-python shows up here first.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from chatparse import catalog, parse_response

from ..support import llamacpp as L

pytestmark = pytest.mark.llamacpp

QWEN3_OUTPUT = (
    "<think>\nThe user wants the weather in Zürich.\n</think>\n\n"
    'Checking "now".\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "°C"}}\n'
    "</tool_call>"
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> L.TinyModel:
    return L.write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def test_grammar_literal_escapes() -> None:
    assert L.gbnf_string('a"b\\c\nd\te\x01') == '"a\\"b\\\\c\\nd\\te\\x01"'
    seq = L.replay_sequence("x<think>y</think>", ["<think>", "</think>"])
    assert seq == '"x" <think> "y" </think>'


def test_forced_completion_is_exact_and_markers_are_single_tokens(model: L.TinyModel) -> None:
    llama_cpp = L.require()[1]
    llm = L.load(model)
    grammar = llama_cpp.LlamaGrammar.from_string(L.replay_grammar(QWEN3_OUTPUT, model), verbose=False)
    out = llm.create_completion(
        "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n",
        grammar=grammar,
        max_tokens=1024,
        temperature=1.0,
        seed=7,
    )
    choice = out["choices"][0]
    assert choice["text"] == QWEN3_OUTPUT
    assert choice["finish_reason"] == "stop"
    ids = llm.tokenize(QWEN3_OUTPUT.encode(), add_bos=False, special=True)
    assert model.token_ids["<tool_call>"] in ids and model.token_ids["<think>"] in ids
    message = parse_response(choice["text"], catalog.get("qwen3"), prefix="<|im_start|>assistant\n")
    assert message["tool_calls"][0]["function"]["arguments"] == {"city": "Zürich", "unit": "°C"}


def test_forced_stream_reconstructs_output(model: L.TinyModel) -> None:
    llama_cpp = L.require()[1]
    llm = L.load(model)
    grammar = llama_cpp.LlamaGrammar.from_string(L.replay_grammar(QWEN3_OUTPUT, model), verbose=False)
    pieces = [
        c["choices"][0]["text"]
        for c in llm.create_completion("hi", grammar=grammar, max_tokens=1024, stream=True, seed=1)
    ]
    assert "".join(pieces) == QWEN3_OUTPUT
    assert len(pieces) > 10


def test_server_completions_stream_with_grammar(model: L.TinyModel) -> None:
    with L.llama_server(model) as base:
        body = {
            "prompt": "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n",
            "grammar": L.replay_grammar(QWEN3_OUTPUT, model),
            "max_tokens": 1024,
            "stream": True,
        }
        req = urllib.request.Request(
            base + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        text, finish = [], None
        with urllib.request.urlopen(req, timeout=60) as r:
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])["choices"][0]
                text.append(chunk["text"])
                finish = chunk.get("finish_reason") or finish
        assert "".join(text) == QWEN3_OUTPUT
        assert finish == "stop"


def test_model_file_is_small(model: L.TinyModel) -> None:
    assert Path(model.path).stat().st_size < 4_000_000


def test_bracket_tokens_by_id_exact_token_count_and_end_of_generation_probe(tmp_path: Path) -> None:
    llama_cpp = L.require()[1]
    specials = ["[TOOL_CALLS]", "[ARGS]", "<|im_end|>", "<|chatparse_eos|>"]
    model = L.write_tiny_gguf(
        tmp_path / "m.gguf", special_tokens=specials, eos_token="<|chatparse_eos|>", merges=L.BYTE_ONLY_MERGES
    )
    # llama.cpp ends a generation on a token named <|im_end|> whatever its type in the file
    assert L.end_of_generation_tokens(model) == {"<|im_end|>"}
    model = L.write_tiny_gguf(
        tmp_path / "m2.gguf", special_tokens=specials[:2] + specials[3:], eos_token="<|chatparse_eos|>",
        merges=L.BYTE_ONLY_MERGES,
    )  # fmt: skip
    assert not L.end_of_generation_tokens(model)
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich"}<|im_end|>'
    assert "<[" in L.replay_grammar(text, model)  # by id: [TOOL_CALLS] unquoted is a character class
    llm = L.load(model)
    n = L.replay_token_count(text, model)
    assert n == 2 + len('get_weather{"city": "Zürich"}<|im_end|>'.encode())
    for max_tokens, finish in ((n + 5, "stop"), (n, "length"), (n - 9, "length")):
        grammar = llama_cpp.LlamaGrammar.from_string(L.replay_grammar(text, model), verbose=False)
        out = llm.create_completion("hi", grammar=grammar, max_tokens=max_tokens)["choices"][0]
        assert out["finish_reason"] == finish
        assert out["text"] == (text if max_tokens >= n else text[: len(text) - 9])
        ids = llm.tokenize(out["text"].encode(), add_bos=False, special=True)
        assert model.token_ids["[TOOL_CALLS]"] in ids
    with pytest.raises(ValueError, match="BYTE_ONLY_MERGES"):
        L.replay_token_count(text, L.write_tiny_gguf(tmp_path / "m3.gguf"))


def test_unrendered_tokens_include_the_ones_llamacpp_leaves_out_of_the_text(tmp_path: Path) -> None:
    eos = "<|chatparse_eos|>"
    mode = "<｜reasoning_mode:opensource｜>"  # Hy3: llama.cpp types it CONTROL and drops its text
    specials = [mode, "<|im_end|>", "[ARGS]", "<tool_call>", eos]
    model = L.write_tiny_gguf(
        tmp_path / "m.gguf", special_tokens=specials, eos_token=eos, merges=L.BYTE_ONLY_MERGES
    )
    assert L.unrendered_tokens(model) == {mode, "<|im_end|>"}
    assert L.end_of_generation_tokens(model) == {"<|im_end|>"}
    llm = L.load(model, n_ctx=256)
    try:
        assert llm.detokenize([model.token_ids[mode]]) == b""
        assert llm.detokenize([model.token_ids["<tool_call>"]]) == b"<tool_call>"
    finally:
        llm.close()
