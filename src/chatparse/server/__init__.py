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

from ._app import create_app
from ._config import Resolved, ServerConfig, ServerConfigError, resolve_config
from ._upstream import API_KINDS, UpstreamError

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


def serve(
    config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info"
) -> None:
    """Run the server with uvicorn until interrupted (binds to 127.0.0.1 unless told otherwise)."""
    import uvicorn

    app = create_app(config)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
