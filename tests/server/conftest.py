"""Fixtures for the server tests: the test engine, a chatparse server in front of it, model folders."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from chatparse.server import ServerConfig, create_app
from chatparse.server._serve import make_protocol

from .engine import TestEngine
from .live import LiveServer

MODEL = "Qwen/Qwen3-8B"

# A ChatML chat template in the style of Qwen3's (tools in the system turn, reasoning_content of
# assistant history in <think>, enable_thinking=false pre-writing an empty think block).
QWEN_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
    {{- '# Tools\\n\\n<tools>' }}
    {%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
    {{- '\\n</tools><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {{- '<|im_start|>assistant\\n' }}
        {%- if message.reasoning_content %}
            {{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' }}
        {%- endif %}
        {{- message.content or '' }}
        {%- for tc in message.tool_calls or [] %}
            {{- '\\n<tool_call>\\n{"name": "' + tc.function.name + '", "arguments": ' }}
            {{- tc.function.arguments | tojson }}{{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == 'tool' %}
        {{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def model_dir(root: Path, template: str = QWEN_TEMPLATE, **config: Any) -> Path:
    """A model folder holding only a tokenizer_config.json with `template` (no weights)."""
    root.mkdir(parents=True, exist_ok=True)
    data = {"chat_template": template, "eos_token": "<|im_end|>", "bos_token": None, **config}
    (root / "tokenizer_config.json").write_text(json.dumps(data), encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """`chatparse serve` run in-process (`cli.main(["serve", ...])`) configures the root logger for
    JSON lines on stderr; the next tests get the logging configuration back as it was."""
    names = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "asyncio", "httpx", "httpcore")
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in map(logging.getLogger, names)]
    yield
    for lg, handlers, level, propagate in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate


@pytest.fixture(scope="session")
def engine() -> Iterator[TestEngine]:
    with TestEngine() as eng:
        yield eng


@pytest.fixture(scope="session")
def qwen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir(tmp_path_factory.mktemp("qwen3"))


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[LiveServer]:
    """A chatparse server for `ServerConfig(**kwargs)` on a loopback port, with the HTTP protocol
    (header timeout, connection cap) of `chatparse serve`. One render worker unless told otherwise."""
    kwargs.setdefault("render_workers", 1)
    config = ServerConfig(**kwargs)
    protocol = make_protocol(config.header_timeout, config.max_connections)
    with LiveServer(create_app(config), http=protocol, lifespan="on") as srv:
        yield srv


def client(srv: LiveServer | str, **kwargs: Any) -> openai.OpenAI:
    """The real openai client for a server (or its base URL)."""
    kwargs.setdefault("api_key", "unused")
    kwargs.setdefault("max_retries", 0)
    url = srv if isinstance(srv, str) else srv.url
    return openai.OpenAI(base_url=url + "/v1", **kwargs)


@pytest.fixture(scope="session")
def server_factory(engine: TestEngine, qwen_dir: Path) -> Iterator[Callable[..., LiveServer]]:
    """Servers in front of the session engine, one per configuration, reused across tests."""
    stack = contextlib.ExitStack()
    cache: dict[str, LiveServer] = {}

    def get(**kwargs: Any) -> LiveServer:
        kwargs.setdefault("upstream", engine.url)
        kwargs.setdefault("model", MODEL)
        if kwargs.get("upstream_api") in (None, "completions", "ollama-generate", "chat-raw"):
            kwargs.setdefault("tokenizer", str(qwen_dir))
        key = json.dumps(kwargs, sort_keys=True)
        if key not in cache:
            cache[key] = stack.enter_context(running(**kwargs))
        return cache[key]

    with stack:
        yield get
