"""Server configuration and what is resolved from it once at startup (template, chat template, stops)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from .._template import Template, load_response_template
from ._json import dumps
from ._upstream import API_KINDS, PROMPT_KINDS, STRUCTURED_KINDS, base_url

log = logging.getLogger("chatparse.server")

REASONING_KEYS = ("reasoning_content", "reasoning", "both")


class ServerConfigError(ValueError):
    """The server cannot start with this configuration; the message says what to change."""


@dataclass
class ServerConfig:
    """Everything `chatparse serve` needs; the CLI flags map one to one.

    >>> ServerConfig(upstream="http://127.0.0.1:8000", model="Qwen/Qwen3-8B").upstream_api
    'auto'
    """

    upstream: str
    """The engine's base URL (`http://host:port`, with or without `/v1`)."""
    model: str
    """The model name clients send; also used to find the template and the chat template."""
    upstream_model: str | None = None
    """The model name the upstream knows (default: `model`)."""
    upstream_api: str = "auto"
    """One of `chatparse.server.API_KINDS`, or `auto`: `completions` when a chat template is found
    locally, else `chat-raw`."""
    template: str | None = None
    """A catalog name or a JSON file (a bare `response_template` or a `tokenizer_config.json`)."""
    tokenizer: str | None = None
    """Where the chat template is: a folder, a file, or a model id in the local Hugging Face cache."""
    api_key: str | None = None
    """When set, requests need `Authorization: Bearer <api_key>`."""
    upstream_api_key: str | None = None
    reasoning_key: str = "reasoning_content"
    """Key of reasoning in messages and deltas: `reasoning_content`, `reasoning` or `both`."""
    max_body_bytes: int = 4 * 1024 * 1024
    connect_timeout: float = 10.0
    upstream_timeout: float = 600.0
    """Seconds to wait for the upstream's next bytes (a whole non-streamed answer, or the next chunk)."""
    extra_stop: list[str] = field(default_factory=list)
    max_upstream_line: int = 16 * 1024 * 1024
    """Longest line of an upstream stream (and longest non-streamed upstream answer), in bytes."""
    body_timeout: float = 30.0
    """Seconds a client has to send the whole request body (then 408)."""
    header_timeout: float = 10.0
    """Seconds a connection may take to send a request's headers, from its opening or the start of
    the request (then it is closed): slow or idle clients cannot hold connections."""
    keep_alive_timeout: float = 5.0
    """Seconds an idle keep-alive connection is kept open between requests."""
    max_connections: int = 1000
    """Most client connections at once; more get an immediate 503 (lowered to fit the process's
    file-descriptor limit, which `chatparse serve` raises to its hard limit first)."""
    render_workers: int = 2
    """Processes that render chat templates; 0 renders on the event loop with no time budget
    (only for trusted templates)."""
    render_timeout: float = 10.0
    """Time budget for rendering one prompt, in seconds (the worker is killed and replaced after it)."""
    constraint_timeout: float = 10.0
    """Seconds a request waits for its generation constraint (tool_choice required / named / strict /
    parallel_tool_calls=false on a raw-text upstream) before a 503; the derivation goes on in the
    background for up to 5x that, then the tool set is refused with 422."""
    constraint_workers: int = 2
    """Threads that derive generation constraints (a pool of their own)."""
    constraint_max_tools: int = 128
    """Most tools a request may bring when it needs a generation constraint (more: 413)."""
    constraint_max_tools_bytes: int = 512 * 1024
    """Most bytes of tool JSON a request may bring when it needs a generation constraint (more: 413)."""
    shutdown_timeout: float = 10.0
    """On SIGTERM/SIGINT: seconds running answers may take to finish before they are ended."""
    passthrough: list[str] = field(default_factory=list)
    """Request fields sent to the engine as they are (e.g. `top_k`, `min_p`, llama.cpp's `grammar`)."""
    default_max_tokens: int | None = 8192
    """`max_tokens` sent to a `completions` upstream when the request sets none (None or 0: send none).
    The completions endpoints of vLLM, SGLang and llama-cpp-python default to 16 tokens, while a
    Chat Completions client that omits `max_tokens` expects an answer limited only by the context."""


@dataclass
class Resolved:
    """The startup decisions, shown by `chatparse serve` and `GET /health`."""

    api: str
    template: Template | None
    template_name: str | None
    chat_template: Any  # _prompt.ChatTemplate | None
    generation_prompt: str | None
    stop: list[str]
    upstream_url: str
    upstream_model: str

    def describe(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream_url,
            "upstream_api": self.api,
            "upstream_model": self.upstream_model,
            "template": self.template_name,
            "chat_template": getattr(self.chat_template, "source", None),
        }


def _load_template_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ServerConfigError(f"--template {path}: cannot read a JSON template: {e}") from e
    if isinstance(data, dict) and isinstance(data.get("response_template"), dict):
        data = data["response_template"]
    if not isinstance(data, dict):
        raise ServerConfigError(f"--template {path}: expected a JSON object (a response_template)")
    return data


def _find_chat_template(config: ServerConfig, upstream_model: str) -> Any:
    from ._prompt import ChatTemplate, ChatTemplateError

    if config.tokenizer:
        try:
            return ChatTemplate.find(config.tokenizer)
        except ChatTemplateError as e:
            raise ServerConfigError(f"--tokenizer {config.tokenizer}: {e}") from e
    for ref in dict.fromkeys((config.model, upstream_model)):
        try:
            return ChatTemplate.from_hf_cache(ref)
        except (ChatTemplateError, OSError, ValueError):
            continue
    return None


def _from_catalog(catalog: Any, model: str, sources: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    return catalog.resolve_name(model=model, **sources), catalog.resolve(model=model, **sources)


def _nearest(candidates: list[str]) -> str:
    """The close catalog names of an unknown ``--template``, or that there are none."""
    from .. import catalog

    if candidates and len(candidates) < len(catalog.names()):
        return f"close names: {', '.join(candidates)}"
    return "no catalog name is close to it"


def resolve_config(config: ServerConfig) -> Resolved:
    """Decide the upstream API, the response template, the chat template and the stop strings.

    Raises `ServerConfigError` with what to change when the server could not work.
    """
    from .. import catalog

    if config.reasoning_key not in REASONING_KEYS:
        raise ServerConfigError(f"--reasoning-key must be one of {', '.join(REASONING_KEYS)}")
    if config.upstream_api != "auto" and config.upstream_api not in API_KINDS:
        raise ServerConfigError(f"--upstream-api must be auto or one of {', '.join(API_KINDS)}")
    for option in (
        "max_body_bytes",
        "max_upstream_line",
        "max_connections",
        "constraint_workers",
        "constraint_max_tools",
        "constraint_max_tools_bytes",
    ):
        if getattr(config, option) < 1:
            raise ServerConfigError(f"--{option.replace('_', '-')} must be at least 1")
    for option in (
        "connect_timeout",
        "upstream_timeout",
        "body_timeout",
        "header_timeout",
        "render_timeout",
        "constraint_timeout",
    ):
        if not getattr(config, option) > 0:
            raise ServerConfigError(f"--{option.replace('_', '-')} must be a positive number of seconds")
    if config.keep_alive_timeout < 0 or config.shutdown_timeout < 0 or config.render_workers < 0:
        raise ServerConfigError(
            "--keep-alive-timeout, --shutdown-timeout and --render-workers must not be negative"
        )
    try:
        url = base_url(config.upstream)
    except ValueError as e:
        raise ServerConfigError(str(e)) from e
    upstream_model = config.upstream_model or config.model
    chat_template = _find_chat_template(config, upstream_model)
    api = config.upstream_api
    if api == "auto":
        api = "completions" if chat_template is not None else "chat-raw"
        if chat_template is None:
            log.warning(
                dumps(
                    {
                        "event": "startup_warning",
                        "message": f"no chat template found for {config.model!r} (looked in the local Hugging Face "
                        "cache), so --upstream-api auto uses chat-raw: the engine renders the prompt itself. "
                        "For prompt mode (recommended) pass --tokenizer DIR; pass --upstream-api chat-raw to "
                        "choose this mode explicitly",
                    }
                ).decode()
            )
    if api in PROMPT_KINDS and chat_template is None:
        raise ServerConfigError(
            f"--upstream-api {api} sends a prompt, so chatparse must render the chat template itself, and "
            f"none was found for {config.model!r}: pass --tokenizer DIR (a folder with tokenizer_config.json "
            "or chat_template.jinja), or use --upstream-api chat-raw / chat"
        )
    template: Template | None = None
    name: str | None = None
    prompt: str | None = None
    if api in STRUCTURED_KINDS and config.template:
        log.warning(
            "--template %s is not used with --upstream-api %s (the engine parses calls)", config.template, api
        )
    if api not in STRUCTURED_KINDS:
        spec: Any
        if config.template and os.path.exists(config.template):
            spec, name = _load_template_file(config.template), config.template
        elif config.template:
            try:
                name = catalog.entry(config.template)["name"]  # "Qwen3" is qwen3
            except catalog.UnknownTemplateError as e:
                raise ServerConfigError(
                    f"--template {config.template!r} is neither a file nor a catalog template; "
                    f"{_nearest(e.candidates)} (chatparse templates list shows them all)"
                ) from None
            spec = catalog.get(name)
        else:
            sources = {
                "tokenizer_config": getattr(chat_template, "tokenizer_config", None) or None,
                "chat_template": getattr(chat_template, "text", None),
            }
            try:
                name, spec = _from_catalog(catalog, config.model, sources)
            except ValueError as e:
                try:
                    name, spec = _from_catalog(catalog, upstream_model, sources)
                except ValueError:
                    raise ServerConfigError(
                        f"no response template for {config.model!r}: {getattr(e, 'reason', e)} Pass "
                        "--template NAME|FILE (a catalog entry, see chatparse templates list, or a response "
                        "template JSON file), or use --upstream-api chat (the engine parses calls; chatparse "
                        "only recovers missed ones)"
                    ) from e
            if name is None:
                name = "tokenizer_config.json response_template"
        try:
            template = load_response_template(spec)
        except ValueError as e:
            raise ServerConfigError(f"template {name}: {e}") from e
        if name in catalog.names():
            prompt = catalog.describe(name).get("generation_prompt")
    # Only the operator's stop strings: engines stop on the model's end-of-turn token ids themselves,
    # and a text stop string would also cut an argument that mentions the marker literally.
    stop = list(dict.fromkeys(config.extra_stop))
    return Resolved(
        api=api,
        template=template,
        template_name=name,
        chat_template=chat_template,
        generation_prompt=prompt,
        stop=stop,
        upstream_url=url,
        upstream_model=upstream_model,
    )
