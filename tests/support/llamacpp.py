"""A real llama.cpp engine for tests, with no downloads.

Theory of operation
-------------------
``llama-cpp-python`` runs any GGUF file, so a test writes its own: a two-layer ``llama`` model with
random weights and a byte-level vocabulary (the 256 GPT-2 byte tokens first, so any UTF-8 text can
be spelled, then the family's special tokens as single tokens). Random weights write nonsense, so
the output is *forced* by a GBNF grammar: :func:`replay_grammar` admits exactly one string, with
every special token of the model written as a token reference (``<think>``), the way a trained
model emits markers. The engine then produces that string byte for byte, streamed or not, and ends
with ``stop`` (end-of-generation is blocked until the grammar completes). A grammar that admits a
*language* (JSON, a tool-call syntax) makes the same random model sample from it instead.

Token types decide what a client sees: llama.cpp drops CONTROL tokens from returned text and keeps
USER_DEFINED ones, so every marker a parser must see is USER_DEFINED and only the end-of-turn token
is CONTROL.

Everything here needs the optional test stack ``gguf`` + ``llama-cpp-python`` (CI step
``.ci/steps/llamacpp.sh``); import it through :func:`require`, which skips the calling test when the
stack is absent, unless ``CHATPARSE_REQUIRE_LLAMACPP=1`` (set in that CI step) turns the skip into a
failure.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REQUIRE_ENV = "CHATPARSE_REQUIRE_LLAMACPP"

# ChatML, enough for prompt-mode tests; families pass their own chat template when it matters.
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHATML_SPECIALS = ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>")


# Tools for a random-weight model generating under a constraint: every value is bounded (an
# integer, a boolean, an enum), so an output ends well within `max_tokens` (a random model writes a
# free string until it happens to sample its end). Used by tests/constraints and tests/server.
ALARM_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "set_alarm",
            "parameters": {
                "type": "object",
                "properties": {
                    "hour": {"type": "integer"},
                    "repeat": {"type": "boolean"},
                    "tone": {"type": "string", "enum": ["bell", "chime"]},
                },
                "required": ["hour", "tone"],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "stop_all", "parameters": {"type": "object", "properties": {}}},
    },
]


def check_alarm_call(name: str, args: dict[str, Any]) -> None:
    """An `ALARM_TOOLS` call is schema-valid."""
    if name == "set_alarm":
        assert isinstance(args["hour"], int) and not isinstance(args["hour"], bool), args
        assert args["tone"] in ("bell", "chime") and set(args) <= {"hour", "repeat", "tone"}, args
    else:
        assert name == "stop_all" and args == {}, (name, args)


def require() -> tuple[ModuleType, ModuleType]:
    """Import ``(gguf, llama_cpp)``, or skip the test (fail under ``CHATPARSE_REQUIRE_LLAMACPP=1``)."""
    try:
        import gguf
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but the llama.cpp test stack is missing: {exc}")
        pytest.skip(f"llama.cpp test stack not installed ({exc}); see .ci/steps/llamacpp.sh")
    return gguf, llama_cpp


@functools.lru_cache(maxsize=1)
def _byte_alphabet() -> tuple[str, ...]:
    """GPT-2's byte-to-unicode table: the printable stand-in character of each byte value."""
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in visible}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


# llama.cpp refuses a BPE vocabulary without merges; a few real ones (GPT-2 spelling, "Ġ" is a space).
_MERGES = (("Ġ", "t"), ("h", "e"), ("i", "n"), ("e", "r"))

BYTE_ONLY_MERGES = (("\u0100", "\u0101"),)
"""A single merge of the bytes 0x00 0x01, which no text contains: with it, ordinary text has exactly
one spelling (one token per UTF-8 byte), so a forced output has a known token count
(:func:`replay_token_count`), e.g. to cut it with ``max_tokens`` at an exact place."""


@dataclass(frozen=True)
class TinyModel:
    """A GGUF file written by :func:`write_tiny_gguf` and what a test needs to know about it."""

    path: Path
    special_tokens: tuple[str, ...]
    eos_token: str
    vocab_size: int
    chat_template: str | None = None
    token_ids: dict[str, int] = field(default_factory=dict)
    merges: tuple[tuple[str, str], ...] = _MERGES


def write_tiny_gguf(
    path: str | os.PathLike[str],
    *,
    special_tokens: Sequence[str] = CHATML_SPECIALS,
    eos_token: str = "<|im_end|>",
    chat_template: str | None = CHATML_TEMPLATE,
    context_length: int = 8192,
    seed: int = 0,
    merges: Sequence[tuple[str, str]] = _MERGES,
) -> TinyModel:
    """Write a two-layer random-weight ``llama`` GGUF (about 1 MB) that can spell any text.

    ``special_tokens`` become single USER_DEFINED tokens after the 256 byte tokens and four merged
    ones (``eos_token``, which must be among them, is CONTROL and is the end-of-generation token).
    Ordinary text is about one token per UTF-8 byte: keep prompts and outputs to a few thousand
    bytes (``context_length`` and the ``n_ctx`` of :func:`load` / :func:`llama_server`).
    ``merges`` (pairs of byte-alphabet tokens) default to four real GPT-2 merges; pass
    :data:`BYTE_ONLY_MERGES` for text with exactly one spelling.
    """
    gguf, _ = require()
    import numpy as np

    specials = list(dict.fromkeys(special_tokens))
    if eos_token not in specials:
        raise ValueError(f"eos_token {eos_token!r} must be one of special_tokens")
    pairs = tuple((a, b) for a, b in merges)
    if not pairs:
        raise ValueError("llama.cpp needs at least one merge")
    tokens = list(_byte_alphabet()) + ["".join(pair) for pair in pairs] + specials
    types = [gguf.TokenType.NORMAL] * (256 + len(pairs)) + [
        gguf.TokenType.CONTROL if t == eos_token else gguf.TokenType.USER_DEFINED for t in specials
    ]
    ids = {t: 256 + len(pairs) + i for i, t in enumerate(specials)}
    n_vocab, n_embd, n_ff, n_head, n_layer = len(tokens), 64, 128, 4, 2

    out = Path(path)
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name("chatparse-tiny")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_vocab_size(n_vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([" ".join(pair) for pair in pairs])
    writer.add_bos_token_id(ids[eos_token])
    writer.add_eos_token_id(ids[eos_token])
    writer.add_add_bos_token(False)
    if chat_template is not None:
        writer.add_chat_template(chat_template)

    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", weight(n_vocab, n_embd))
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return TinyModel(out, tuple(specials), eos_token, n_vocab, chat_template, ids, pairs)


def gbnf_string(text: str) -> str:
    """``text`` as a GBNF string literal (escapes for quote, backslash and control characters)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _pieces(text: str, special_tokens: Sequence[str]) -> list[tuple[str, bool]]:
    """``text`` as ``(piece, is_special)``: special tokens where they occur (the longest wins where
    two start at the same place), the text between them as literal pieces."""
    specials = sorted(set(special_tokens), key=len, reverse=True)
    pieces: list[tuple[str, bool]] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        hit = next((s for s in specials if s and text.startswith(s, i)), None)
        if hit is None:
            literal.append(text[i])
            i += 1
            continue
        if literal:
            pieces.append(("".join(literal), False))
            literal = []
        pieces.append((hit, True))
        i += len(hit)
    if literal:
        pieces.append(("".join(literal), False))
    return pieces


def replay_sequence(
    text: str, special_tokens: Sequence[str], token_ids: Mapping[str, int] | None = None
) -> str:
    """A GBNF sequence that spells ``text``: special tokens as token references, the rest as literals.

    The longest special token wins where two start at the same place. A special token is referenced
    by its text (``<think>``) or, when ``token_ids`` has it, by its id (``<[262]>``): GBNF reads an
    unquoted ``[TOOL_CALLS]`` as a character class, so tokens that are not ``<...>`` need their id.
    """
    ids = token_ids or {}
    parts = [
        (f"<[{ids[piece]}]>" if piece in ids else piece) if special else gbnf_string(piece)
        for piece, special in _pieces(text, special_tokens)
    ]
    return " ".join(parts) if parts else '""'


def replay_grammar(text: str, model: TinyModel) -> str:
    """A GBNF grammar that admits exactly ``text`` (markers as single tokens of ``model``, by id)."""
    specials = [t for t in model.special_tokens if t != model.eos_token]
    return "root ::= " + replay_sequence(text, specials, model.token_ids)


def _probe_special_tokens(model: TinyModel) -> tuple[frozenset[str], frozenset[str]]:
    """(the special tokens llama.cpp ends a generation on, those whose detokenized text is not their
    own), ``eos_token`` left out; one load of the model."""
    _, llama_cpp = require()
    llm = load(model, n_ctx=256)
    try:
        vocab = llm._model.vocab
        tokens = [(t, i) for t, i in model.token_ids.items() if t != model.eos_token]
        eog = frozenset(t for t, i in tokens if llama_cpp.llama_vocab_is_eog(vocab, i))
        dropped = frozenset(t for t, i in tokens if llm.detokenize([i]) != t.encode("utf-8"))
        return eog, dropped
    finally:
        llm.close()


def end_of_generation_tokens(model: TinyModel) -> frozenset[str]:
    """The special tokens of ``model`` other than ``eos_token`` that llama.cpp ends a generation on.

    llama.cpp makes well-known end-of-turn texts (``<|im_end|>``, ``<|call|>``, ``<end_of_turn>``,
    ``</s>``, ...) end-of-generation CONTROL tokens whatever their type in the file, so a replay with
    one in the middle would stop there and leave it out of the text. Write the model again without
    them (their text is then spelled byte by byte) to replay such text exactly.
    """
    return _probe_special_tokens(model)[0]


def unrendered_tokens(model: TinyModel) -> frozenset[str]:
    """The special tokens of ``model`` (not ``eos_token``) that a llama.cpp server would not return
    as their text: those it ends a generation on (:func:`end_of_generation_tokens`) and those it
    types CONTROL on its own and so leaves out of the detokenized text (seen: Hy3's
    ``<｜reasoning_mode:opensource｜>``). Write the model again without them (spelled byte by byte)."""
    eog, dropped = _probe_special_tokens(model)
    return eog | dropped


def replay_token_count(text: str, model: TinyModel) -> int:
    """How many tokens the engine generates for ``text`` under :func:`replay_grammar` (before the
    end-of-generation token): one per special token, one per UTF-8 byte of the rest. Exact only for a
    model written with :data:`BYTE_ONLY_MERGES` (``ValueError`` otherwise)."""
    if model.merges != BYTE_ONLY_MERGES:
        raise ValueError("replay_token_count needs a model written with merges=BYTE_ONLY_MERGES")
    specials = [t for t in model.special_tokens if t != model.eos_token]
    return sum(1 if special else len(piece.encode("utf-8")) for piece, special in _pieces(text, specials))


def load(model: TinyModel, *, n_ctx: int = 4096, seed: int = 0) -> Any:
    """``llama_cpp.Llama`` over ``model`` (CPU, quiet)."""
    _, llama_cpp = require()
    return llama_cpp.Llama(model_path=str(model.path), n_ctx=n_ctx, seed=seed, verbose=False, n_threads=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(model: TinyModel, *, n_ctx: int = 4096, timeout: float = 60.0) -> Iterator[str]:
    """Run llama-cpp-python's OpenAI-compatible server over ``model`` on loopback; yield its base URL.

    The server is a child process (``python -m llama_cpp.server``), killed on exit. Its
    ``/v1/completions`` and ``/v1/chat/completions`` take a ``grammar`` field (GBNF).
    """
    require()
    port = free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model.path), "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", "1", "--verbose", "False",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: {err[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/v1/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer on {base} within {timeout} s")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
