"""`chatparse serve`: its options (`add_arguments`) and what it does with them (`run_serve`).

`chatparse.cli` owns the command line; this module owns the serve command's flags, so the two stay
in step with `ServerConfig`. Errors are `ServerConfigError` (a configuration that cannot work) and
`BindError` (the address cannot be listened on); the CLI prints them as one line and exits with 2.
"""

from __future__ import annotations

import argparse
import os

from ._config import ServerConfig

__all__ = ["add_arguments", "config_from_args", "run_serve"]

_MIB = 1024 * 1024


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The serve command's flags (each maps to a `ServerConfig` field)."""
    d = ServerConfig(upstream="", model="")
    p.add_argument(
        "--upstream", required=True, metavar="URL", help="the engine's base URL, e.g. http://127.0.0.1:8001"
    )
    p.add_argument(
        "--model",
        required=True,
        metavar="NAME",
        help="the model name clients use (also used to find the template)",
    )
    p.add_argument(
        "--upstream-model", metavar="NAME", help="the model name the engine knows (default: --model)"
    )
    p.add_argument(
        "--upstream-api",
        default="auto",
        choices=["auto", "completions", "ollama-generate", "chat-raw", "chat", "ollama-chat"],
        help="how to talk to the engine: completions / ollama-generate send a prompt chatparse renders "
        "from the local chat template; chat-raw is a chat endpoint returning raw text; chat / ollama-chat "
        "are chat endpoints that parse calls themselves (chatparse only recovers calls they missed). "
        "auto: completions when a chat template is found locally, else chat-raw (with a warning)",
    )
    p.add_argument(
        "--template",
        metavar="NAME|FILE",
        help="catalog template name or JSON file (default: resolved from the model)",
    )
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="folder or file with the chat template (tokenizer_config.json, chat_template.jinja), or a "
        "model id in the local Hugging Face cache (default: the model id, looked up in the cache)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port (default: 8000)")
    p.add_argument(
        "--api-key", metavar="KEY", help="require 'Authorization: Bearer KEY' (or set CHATPARSE_API_KEY)"
    )
    p.add_argument(
        "--upstream-api-key",
        metavar="KEY",
        help="bearer token for the engine (or CHATPARSE_UPSTREAM_API_KEY)",
    )
    p.add_argument(
        "--reasoning-key",
        default="reasoning_content",
        choices=["reasoning_content", "reasoning", "both"],
        help="key of the reasoning text in messages and deltas (default: reasoning_content)",
    )
    p.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="TEXT",
        help="extra stop string sent upstream (repeatable)",
    )
    p.add_argument(
        "--passthrough",
        action="append",
        default=[],
        metavar="FIELD",
        help="a request field sent to the engine as it is, e.g. top_k, min_p or llama.cpp's grammar (repeatable)",
    )
    p.add_argument(
        "--default-max-tokens",
        type=int,
        default=d.default_max_tokens,
        metavar="N",
        help="max_tokens sent to a completions upstream when the request has none, because the "
        "completions endpoints of vLLM, SGLang and llama-cpp-python stop after 16 tokens by default "
        f"(default: {d.default_max_tokens}; 0: send none, the engine's own default applies)",
    )
    limits = p.add_argument_group("limits (every one has a safe default)")
    for flag, kind, metavar, text in _LIMITS:
        field = _field(flag)
        default = getattr(d, field)
        limits.add_argument(
            flag, type=kind, default=default, metavar=metavar, help=text.format(_shown(default))
        )


# The limit flags: (flag, type, metavar, help with "{}" where the default goes). Each flag's
# ServerConfig field is its name with "_" for "-"; the help shows that field's default.
_LIMITS: tuple[tuple[str, type, str, str], ...] = (
    ("--max-body-bytes", int, "N", "largest request body (default: {})"),
    ("--body-timeout", float, "SECONDS", "time a client has to send the whole body, else 408 (default: {})"),
    (
        "--header-timeout",
        float,
        "SECONDS",
        "time a connection has to send a request's headers, else it is closed (default: {})",
    ),
    (
        "--keep-alive-timeout",
        float,
        "SECONDS",
        "how long an idle keep-alive connection stays open (default: {})",
    ),
    (
        "--max-connections",
        int,
        "N",
        "most client connections at once; more get 503 (default: {}, lowered to fit the "
        "file-descriptor limit)",
    ),
    (
        "--max-upstream-line",
        int,
        "BYTES",
        "longest line of an upstream stream or non-streamed answer (default: {})",
    ),
    (
        "--render-timeout",
        float,
        "SECONDS",
        "time budget for rendering one prompt with the chat template (default: {})",
    ),
    (
        "--constraint-timeout",
        float,
        "SECONDS",
        "seconds a request waits for its generation constraint (default: {})",
    ),
    ("--constraint-workers", int, "N", "threads deriving generation constraints (default: {})"),
    (
        "--constraint-max-tools",
        int,
        "N",
        "most tools of a request that needs a generation constraint, else 413 (default: {})",
    ),
    (
        "--constraint-max-tools-bytes",
        int,
        "BYTES",
        "most bytes of tool JSON such a request may bring, else 413 (default: {})",
    ),
    (
        "--render-workers",
        int,
        "N",
        "processes rendering chat templates (default: {}; 0 renders in the server process with no "
        "time budget: trusted templates only)",
    ),
    (
        "--shutdown-timeout",
        float,
        "SECONDS",
        "on SIGTERM/SIGINT, time running answers get before they are ended (default: {})",
    ),
    ("--connect-timeout", float, "SECONDS", "upstream connect timeout (default: {})"),
    ("--upstream-timeout", float, "SECONDS", "longest wait for the engine's next bytes (default: {})"),
)


def _port(text: str) -> int:
    """A TCP port number for argparse (0 lets the system pick one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port


def _field(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _shown(default: float) -> str:
    """A default as the help shows it: sizes of whole MiB in MiB, numbers without a trailing .0."""
    if isinstance(default, int) and default >= _MIB and default % _MIB == 0:
        return f"{default // _MIB} MiB"
    return f"{default:g}"


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The `ServerConfig` the parsed flags describe (API keys fall back to their environment variables)."""
    return ServerConfig(
        upstream=args.upstream,
        model=args.model,
        upstream_model=args.upstream_model,
        upstream_api=args.upstream_api,
        template=args.template,
        tokenizer=args.tokenizer,
        api_key=args.api_key or os.environ.get("CHATPARSE_API_KEY") or None,
        upstream_api_key=args.upstream_api_key or os.environ.get("CHATPARSE_UPSTREAM_API_KEY") or None,
        reasoning_key=args.reasoning_key,
        extra_stop=list(args.stop),
        passthrough=list(args.passthrough),
        default_max_tokens=args.default_max_tokens or None,
        **{_field(flag): getattr(args, _field(flag)) for flag, _, _, _ in _LIMITS},
    )


def run_serve(args: argparse.Namespace) -> int:
    """Resolve, bind, announce, serve; 0 after a graceful shutdown."""
    from ._app import create_app
    from ._config import resolve_config
    from ._log import configure_logging
    from ._serve import bind, fd_budget, run

    configure_logging()
    config = config_from_args(args)
    resolved = resolve_config(config)
    cap, _ = fd_budget(config.max_connections)
    sock = bind(args.host, args.port)
    run(create_app(config, resolved=resolved), sock, max_connections=cap)
    return 0
