"""`chatparse serve`: an OpenAI-compatible server in front of real inference engines.

It sends each request upstream in raw mode (a prompt it renders itself from the model's local chat
template, or a chat request with special tokens kept), parses the raw text with the model's
response template, and answers in the OpenAI Chat Completions or Responses format, streamed or not.
Engines that parse tool calls themselves can be used too: their structured calls are kept, and
chatparse's detection recovers calls only when the engine returned none.

Needs the `[server]` extra (`pip install 'chatparse[server]'`).

>>> from chatparse.server import ServerConfig, create_app
>>> config = ServerConfig(upstream="http://127.0.0.1:8000", model="Qwen/Qwen3-8B",
...                       upstream_api="chat-raw")
>>> app = create_app(config)  # an ASGI app: run it with uvicorn
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import create_app
    from ._config import Resolved, ServerConfig, ServerConfigError, resolve_config
    from ._upstream import API_KINDS, UpstreamError

# Imported on first use, so that a render worker (`python -m chatparse.server._render`), which needs
# only the chat-template code, starts without loading the HTTP stack.
_LAZY = {
    "create_app": "._app",
    "Resolved": "._config",
    "ServerConfig": "._config",
    "ServerConfigError": "._config",
    "resolve_config": "._config",
    "API_KINDS": "._upstream",
    "UpstreamError": "._upstream",
}

__all__ = [
    "API_KINDS",
    "Resolved",
    "ServerConfig",
    "ServerConfigError",
    "UpstreamError",
    "create_app",
    "resolve_config",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def serve(config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the server until SIGTERM/SIGINT (binds to 127.0.0.1 unless told otherwise).

    Raises `ServerConfigError` for a configuration that cannot work and `OSError` when the address
    cannot be bound. Logs are JSON lines on stderr (`configure_logging`).
    """
    from ._app import create_app
    from ._log import configure_logging
    from ._serve import bind, fd_budget, run

    configure_logging()
    app = create_app(config)
    cap, _ = fd_budget(config.max_connections)
    run(app, bind(host, port), max_connections=cap)
