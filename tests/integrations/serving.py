"""What both engines' end-to-end serving tests share: the model directory each server is built for,
the fixtures sent through it, the library's answer to compare with, and the OpenAI stream
conventions the chunks must keep.

The model directory is named after a family's reference model, so the catalog resolves the
template by model id as in production; it holds the family tokenizer of `localtok`, a chat
template that renders the conformance harness's generation prompt (passed in the request's
`chat_template_kwargs`, so fixtures with thinking on and off share a model) and the `config.json` of a
tiny Qwen3 architecture that no test loads (the engine is a replay of recorded outputs).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

from canitoolcall.fixtures import Fixture, load_fixtures

from chatparse import catalog
from chatparse.openai import ChatParser

from . import replay as R
from .localtok import family_tokenizer

# One reference model per family, and the fixtures of that model sent through the server (at most
# PER_FAMILY of them: every truncated one first (two at most), then the ones with calls, then the
# rest, in corpus order).
MODELS = {
    "deepseek": "deepseek-ai/DeepSeek-V3.1",
    "gemma4": "google/gemma-4-31B-it",
    "glm": "zai-org/GLM-4.7",
    "gpt-oss": "openai/gpt-oss-20b",
    "kimi": "moonshotai/Kimi-K2.6",
    "llama": "meta-llama/Llama-3.3-70B-Instruct",
    "mistral": "mistralai/Magistral-Small-2509",
    "qwen3-hermes": "Qwen/Qwen3-0.6B",
    "qwen3-xml": "Qwen/Qwen3.8-27B",
}
PER_FAMILY = 5


def selected(family: str, per_family: int = PER_FAMILY) -> list[Fixture]:
    model = MODELS[family]
    own = [fx for fx in load_fixtures() if fx.family == family and fx.reference_model == model]
    cut = [fx for fx in own if fx.truncated]
    calls = [fx for fx in own if not fx.truncated and fx.expected is not None and fx.expected.tool_calls]
    rest = [fx for fx in own if fx not in cut and fx not in calls]
    return (cut[:2] + calls + rest)[:per_family]


def write_model(root: Path, family: str) -> Path:
    """A model directory named after the family's reference model (tokenizer, chat template,
    config of a tiny Qwen3 architecture; no weights)."""
    d = root / MODELS[family]
    d.mkdir(parents=True)
    tok = family_tokenizer(family)
    tok.save_pretrained(str(d))
    (d / "chat_template.jinja").write_text("{{ generation_prompt }}", encoding="utf-8")
    cfg = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg.pop("chat_template", None)
    (d / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": len(tok),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "eos_token_id": tok.eos_token_id,
    }
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return d


def library(su: R.Setup) -> tuple[dict[str, Any], str]:
    """What chatparse answers for the same text, prefix, tools and finish reason: the message as
    {content, reasoning, tool_calls: [(name, arguments)]} and the finish reason."""
    tok = su.tokenizer
    ids = su.ids[:-1] if su.stopped else su.ids
    text = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    parser = ChatParser(template=catalog.get(su.template), prefix=su.prefix, tools=su.tools or None)
    parser.feed(text)
    message, _, reason = parser.finish("stop" if su.stopped else "length")
    return (
        {
            "content": message.get("content") or "",
            "reasoning": message.get("reasoning_content") or "",
            "tool_calls": [
                (c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or ()
            ],
        },
        reason,
    )


def merged(chunks: list[Any], reasoning_key: str) -> tuple[dict[str, Any], str | None]:
    """The message a client assembles from streamed chunks (openai-python's way: content and
    reasoning concatenated, call fragments concatenated per index), and the finish reason."""
    message: dict[str, Any] = {"content": "", "reasoning": "", "tool_calls": []}
    calls: dict[int, list[str]] = {}
    finish = None
    for ch in chunks:
        for c in ch.choices:
            d = c.delta
            message["content"] += d.content or ""
            message["reasoning"] += (d.model_extra or {}).get(reasoning_key) or ""
            for tc in d.tool_calls or ():
                entry = calls.setdefault(tc.index, ["", ""])
                if tc.function is not None:
                    entry[0] += tc.function.name or ""
                    entry[1] += tc.function.arguments or ""
            finish = c.finish_reason or finish
    message["tool_calls"] = [tuple(calls[i]) for i in sorted(calls)]
    return message, finish


def chunk_conventions(chunks: list[Any], *, single_token: bool, reasoning_key: str) -> list[str]:
    """OpenAI stream conventions over the chunks a client receives: one kind (reasoning, content
    or calls) per chunk of a one-token step before the last (a step of several tokens carries what
    it completed, as the engines' own reasoning parsers do); id, type and name only in the first
    fragment of an index; contiguous indices; argument fragments only for the newest index."""
    problems: list[str] = []
    seen: set[int] = set()
    newest = -1
    for n, ch in enumerate(chunks):
        for c in ch.choices:
            d = c.delta
            reasoning = (d.model_extra or {}).get(reasoning_key)
            kinds = [bool(reasoning), bool(d.content), bool(d.tool_calls)]
            if single_token and c.finish_reason is None and sum(kinds) > 1:
                problems.append(f"chunk {n} carries more than one of reasoning, content, calls")
            for tc in d.tool_calls or ():
                if tc.index not in seen:
                    if tc.index != newest + 1:
                        problems.append(f"chunk {n}: index {tc.index} after {newest}")
                    if not tc.id or tc.type != "function" or tc.function is None or not tc.function.name:
                        problems.append(
                            f"chunk {n}: first fragment of index {tc.index} lacks id, type or name"
                        )
                    seen.add(tc.index)
                    newest = tc.index
                elif tc.id or (tc.function is not None and tc.function.name):
                    problems.append(f"chunk {n}: id or name repeated for index {tc.index}")
                elif tc.index != newest:
                    problems.append(f"chunk {n}: arguments for index {tc.index} after {newest} started")
    return problems


def call_fixture(setups: list[R.Setup]) -> R.Setup | None:
    """The first selected fixture that ends with a complete call (every family has one)."""
    for su in setups:
        if su.stopped and su.fixture.expected is not None and su.fixture.expected.tool_calls and su.tools:
            return su
    return None


class LoopbackServer:
    """An engine's ASGI app served by uvicorn on a free loopback port, in a daemon thread running
    `loop` (the loop the app's state was set up on). Subclasses build `app`, then call `serve`."""

    app: Any
    loop: asyncio.AbstractEventLoop

    def serve(self) -> None:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(
            target=lambda: self.loop.run_until_complete(self.server.serve(sockets=[sock])), daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.loop.close()
