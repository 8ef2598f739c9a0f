"""The corpus through `chatparse serve` in front of a real engine: llama-cpp-python's OpenAI server.

For each model family, the test writes a tiny random-weight GGUF (`tests.support.llamacpp`) whose
vocabulary has that family's markers as single special tokens (USER_DEFINED, so llama.cpp keeps them
in the text it returns) and a dedicated end-of-generation token that no output contains; ordinary
text is one token per UTF-8 byte (`BYTE_ONLY_MERGES`), so a recorded output has a known token count.
The GGUF and the local tokenizer folder carry the same chat template, which renders the conversation
plainly and ends with the generation prompt taken from the system message: one model per family
serves every generation prompt of the family's fixtures.

Every recorded output (canitoolcall corpus and our own fixtures) is then replayed by llama.cpp: the
client sends a GBNF grammar that admits exactly that output (markers as token references) in the
request, and `chatparse serve --passthrough grammar` forwards it. A fixture that a token limit cut
off is cut the same way, with `max_tokens` equal to its token count (finish reason `length`); the
others send no `max_tokens`, so chatparse's `--default-max-tokens` is what keeps llama-cpp-python's
16-token default of `/v1/completions` away. Both hops are real HTTP on loopback.

Each answer (non-streamed and streamed, prompt mode through `/v1/completions` and raw chat through
`/v1/chat/completions`) must equal the answer the same chatparse configuration gives in front of
the test engine (`tests/server/engine.py`) for the same request, and that is the library's
`parse_message` of the recorded output.

Cost: llama-cpp-python detokenizes the whole completion again after every token (its stop-string
check), so a replay costs time quadratic in its length: a 6,660-byte output takes about three
minutes. Outputs longer than `MAX_REPLAY_BYTES` (the nine `long-arguments` fixtures, which
`test_corpus.py` serves through the test engine) are therefore left out, and their number is
checked. Of the others, every family's first `REPLAYED` fixtures per template and generation prompt
(and the first fixture of each family that a token limit cut off) are replayed streamed through
`/v1/completions` (all of them with `CHATPARSE_LLAMACPP_ALL=1`: about 25 minutes on a loaded 2-core
machine, too long for CI; every fixture goes through the test engine in `test_corpus.py`); a
sample (the first `SAMPLE` of those, and the cut one) is also replayed non-streamed and through
`/v1/chat/completions`, streamed and not.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

pytest.importorskip("canitoolcall", reason="canitoolcall (test extra) is not installed")

from chatparse import catalog  # noqa: E402
from chatparse.openai import merge_deltas, parse_message  # noqa: E402

from ..support import llamacpp as L  # noqa: E402
from .conftest import client, model_dir, running  # noqa: E402
from .corpus import load_cases, plain, tools_of  # noqa: E402
from .engine import Script, TestEngine  # noqa: E402
from .live import LiveServer  # noqa: E402

pytestmark = pytest.mark.llamacpp

EOS = "<|chatparse_eos|>"
"""The end-of-generation token of every test model (CONTROL: never in the returned text)."""

# The conversation in plain text, then the generation prompt, which the system message carries (so
# that one model serves all the generation prompts of a family). llama-cpp-python renders it from
# the GGUF for /v1/chat/completions, chatparse from the tokenizer folder for /v1/completions.
CHAT_TEMPLATE = (
    "{%- set ns = namespace(prompt='') -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}{%- set ns.prompt = m.content -%}"
    "{%- else -%}{{ '[' + m.role + ']' + (m.content or '') + '\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ ns.prompt }}{%- endif -%}"
)

# Markers that are special tokens in their family's real vocabulary: <|...|>, <｜...｜>, <|x>, <x|>,
# <tag>, </tag>, [TAG], [/TAG]. Not the fragments some families' markers are (`<function=`,
# `functools[`, `｜DSML｜`), which real tokenizers spell with ordinary tokens.
_TOKEN_SHAPE = re.compile(
    r"<\|[^<>\s]*\|>|<\uff5c[^<>]*\uff5c>|<\|[^<>\s|]+>|<[^<>\s|]+\|>|</?[A-Za-z_]+>|\[/?[A-Z_]+\]"
)
MAX_REPLAY_BYTES = 1024
LONG_FIXTURES = 9
"""How many corpus outputs are longer than `MAX_REPLAY_BYTES` (a change of the corpus shows here)."""
SAMPLE = 1
REPLAYED = 1_000_000 if os.environ.get("CHATPARSE_LLAMACPP_ALL") else 3
# One user turn and the generation prompt: the prompt is tiny next to the outputs.
N_CTX = 2048


def special_tokens(family: Any) -> list[str]:
    """The family's markers that are single tokens, plus the end-of-generation token."""
    markers = [m for m in family.markers if _TOKEN_SHAPE.fullmatch(m)]
    return [*dict.fromkeys(markers), EOS]


def write_model(path: Path, family: Any) -> tuple[L.TinyModel, frozenset[str]]:
    """The family's test model, and the markers that had to be spelled byte by byte: those llama.cpp
    would end the generation on (`<|im_end|>`, `<|call|>`, ...), which recorded outputs may have in
    the middle (gpt-oss: `<|call|>` between two calls), and those it would leave out of the text
    (`L.unrendered_tokens`)."""

    def write(specials: list[str]) -> L.TinyModel:
        return L.write_tiny_gguf(
            path,
            special_tokens=specials,
            eos_token=EOS,
            chat_template=CHAT_TEMPLATE,
            context_length=N_CTX,
            merges=L.BYTE_ONLY_MERGES,
        )

    specials, ends = special_tokens(family), frozenset[str]()
    for _ in range(4):  # llama.cpp's choice depends on the other tokens (gpt-oss: <|end|> after <|call|>)
        model = write([t for t in specials if t not in ends])
        more = L.unrendered_tokens(model)
        if not more:
            return model, ends
        ends |= more
    raise AssertionError(f"llama.cpp keeps finding end-of-generation tokens: {sorted(ends)}")


Replay = tuple[Any, Any, Any, str, bool]
"""(fixture, harness config, family object, generation prompt, in the sample)."""


def _by_family() -> tuple[dict[str, dict[str, list[Replay]]], list[str]]:
    """family -> template name -> replays; and the ids of the outputs too long to replay."""
    out: dict[str, dict[str, list[Replay]]] = defaultdict(lambda: defaultdict(list))
    long = []
    cut_sampled: set[str] = set()
    for (template, prefix), cases in sorted(load_cases().items()):
        taken = 0
        for fx, cfg, family in cases:
            if len(fx.raw_output.encode()) > MAX_REPLAY_BYTES:
                long.append(fx.id)
                continue
            sample = taken < SAMPLE
            if cfg.finish_reason == "length" and fx.family not in cut_sampled:
                cut_sampled.add(fx.family)
                sample = True
            elif taken >= REPLAYED:
                continue
            taken += 1
            out[fx.family][template].append((fx, cfg, family, prefix, sample))
    return {k: dict(v) for k, v in sorted(out.items())}, long


FAMILIES, TOO_LONG = _by_family()


def test_only_the_long_outputs_are_left_out() -> None:
    assert len(TOO_LONG) == LONG_FIXTURES and all("long-arguments" in i for i in TOO_LONG), TOO_LONG


@contextlib.contextmanager
def _servers(**kwargs: Any) -> Iterator[list[LiveServer]]:
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(running(**kwargs, upstream_api=api)) for api in ("completions", "chat-raw")
        ]


def _answer(c: openai.OpenAI, request: dict[str, Any], stream: bool) -> tuple[dict[str, Any], list[Any]]:
    """The message (streamed: the merged deltas) and the finish reasons (streamed: every one sent)."""
    if not stream:
        r = c.chat.completions.create(**request)
        return plain(r.choices[0].message.model_dump()), [r.choices[0].finish_reason]
    chunks = list(c.chat.completions.create(**request, stream=True))
    deltas = [ch.choices[0].delta.model_dump(exclude_none=True) for ch in chunks if ch.choices]
    reasons = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    return plain(merge_deltas(deltas)), reasons


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_corpus_through_llamacpp_equals_the_test_engine(
    family: str, engine: TestEngine, tmp_path: Path
) -> None:
    L.require()
    templates = FAMILIES[family]
    fam_obj = next(case[2] for cases in templates.values() for case in cases)
    model, _ = write_model(tmp_path / f"{family}.gguf", fam_obj)
    folder = model_dir(tmp_path / "tokenizer", CHAT_TEMPLATE, eos_token=EOS)
    checked = replays = 0
    with L.llama_server(model, n_ctx=N_CTX) as llama_url:
        for template, cases in templates.items():
            common = {"model": "corpus-model", "template": template, "tokenizer": str(folder)}
            with (
                _servers(upstream=llama_url, passthrough=["grammar"], **common) as via_llama,
                _servers(upstream=engine.url, **common) as via_fake,
            ):
                for fx, cfg, _, prefix, sample in cases:
                    key = f"llamacpp/{template}/{fx.id}".replace(" ", "_")
                    raw, reason = fx.raw_output, cfg.finish_reason
                    engine.add(key, Script(text=raw, finish_reason=reason))
                    request: dict[str, Any] = {
                        "model": "corpus-model",
                        "messages": [
                            {"role": "system", "content": prefix},
                            {"role": "user", "content": f"[case:{key}] go"},
                        ],
                        "tool_choice": "auto",
                    }
                    if fx.tools:
                        request["tools"] = tools_of(fx)
                    llama_request = {**request, "extra_body": {"grammar": L.replay_grammar(raw, model)}}
                    if reason == "length":
                        llama_request["max_tokens"] = L.replay_token_count(raw, model)
                    effective = (
                        prefix
                        if catalog.load(template).anchor_re.search(prefix)
                        else catalog.describe(template).get("generation_prompt")
                    )
                    expected = plain(
                        parse_message(raw, finish_reason=reason, **{**cfg.kwargs, "prefix": effective})
                    )
                    passes = [(0, True)] + ([(0, False), (1, True), (1, False)] if sample else [])
                    for api, stream in passes:  # 0: completions (prompt mode), 1: chat-raw
                        fake = _answer(client(via_fake[api]), request, stream)
                        got = _answer(client(via_llama[api]), llama_request, stream)
                        where = (fx.id, via_llama[api].app.resolved.api, "stream" if stream else "whole", raw)
                        assert fake[0] == expected, where
                        assert got == fake, where
                        assert len(got[1]) == 1, where
                        replays += 1
                    checked += 1
    assert checked == sum(len(c) for c in templates.values()) > 0
    assert replays >= checked


def test_without_a_default_budget_llamacpp_stops_after_16_tokens(tmp_path: Path) -> None:
    L.require()
    fx, cfg, family, prefix, _ = FAMILIES["qwen3-hermes"]["qwen3"][0]
    model, _ = write_model(tmp_path / "m.gguf", family)
    assert L.replay_token_count(fx.raw_output, model) > 16
    folder = model_dir(tmp_path / "tokenizer", CHAT_TEMPLATE, eos_token=EOS)
    request = {
        "model": "m",
        "messages": [{"role": "system", "content": prefix}, {"role": "user", "content": "go"}],
        "tools": tools_of(fx),
        "extra_body": {"grammar": L.replay_grammar(fx.raw_output, model)},
    }
    expected = plain(parse_message(fx.raw_output, **{**cfg.kwargs, "prefix": prefix}))
    with L.llama_server(model, n_ctx=N_CTX) as url:
        common = {"upstream": url, "model": "m", "template": "qwen3", "tokenizer": str(folder)}
        with running(**common, upstream_api="completions", passthrough=["grammar"]) as srv:
            assert _answer(client(srv), request, False) == (expected, ["tool_calls"])
        with running(
            **common, upstream_api="completions", passthrough=["grammar"], default_max_tokens=None
        ) as srv:
            message, reasons = _answer(client(srv), request, False)
    assert reasons == ["length"] and message != expected
