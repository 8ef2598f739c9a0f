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
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
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
    limits.add_argument(
        "--max-body-bytes",
        type=int,
        default=d.max_body_bytes,
        metavar="N",
        help="largest request body (default: 4 MiB)",
    )
    limits.add_argument(
        "--body-timeout",
        type=float,
        default=d.body_timeout,
        metavar="SECONDS",
        help=f"time a client has to send the whole body, else 408 (default: {d.body_timeout:g})",
    )
    limits.add_argument(
        "--header-timeout",
        type=float,
        default=d.header_timeout,
        metavar="SECONDS",
        help="time a connection has to send a request's headers, else it is closed "
        f"(default: {d.header_timeout:g})",
    )
    limits.add_argument(
        "--keep-alive-timeout",
        type=float,
        default=d.keep_alive_timeout,
        metavar="SECONDS",
        help=f"how long an idle keep-alive connection stays open (default: {d.keep_alive_timeout:g})",
    )
    limits.add_argument(
        "--max-connections",
        type=int,
        default=d.max_connections,
        metavar="N",
        help="most client connections at once; more get 503 (default: "
        f"{d.max_connections}, lowered to fit the file-descriptor limit)",
    )
    limits.add_argument(
        "--max-upstream-line",
        type=int,
        default=d.max_upstream_line,
        metavar="BYTES",
        help="longest line of an upstream stream or non-streamed answer (default: 16 MiB)",
    )
    limits.add_argument(
        "--render-timeout",
        type=float,
        default=d.render_timeout,
        metavar="SECONDS",
        help=f"time budget for rendering one prompt with the chat template (default: {d.render_timeout:g})",
    )
    for flag, kind, meta, what in (
        ("--constraint-timeout", float, "SECONDS", "seconds a request waits for its generation constraint"),
        ("--constraint-workers", int, "N", "threads deriving generation constraints"),
        ("--constraint-max-tools", int, "N", "most tools of a request that needs a generation constraint"),
        ("--constraint-max-tools-bytes", int, "BYTES", "most bytes of tool JSON such a request may bring"),
    ):
        dest = flag[2:].replace("-", "_")
        limits.add_argument(
            flag,
            type=kind,
            default=getattr(d, dest),
            metavar=meta,
            help=f"{what} (default: {getattr(d, dest):g})",
        )
    limits.add_argument(
        "--render-workers",
        type=int,
        default=d.render_workers,
        metavar="N",
        help=f"processes rendering chat templates (default: {d.render_workers}; 0 renders in the server "
        "process with no time budget: trusted templates only)",
    )
    limits.add_argument(
        "--shutdown-timeout",
        type=float,
        default=d.shutdown_timeout,
        metavar="SECONDS",
        help=f"on SIGTERM/SIGINT, time running answers get before they are ended (default: {d.shutdown_timeout:g})",
    )
    limits.add_argument(
        "--connect-timeout",
        type=float,
        default=d.connect_timeout,
        metavar="SECONDS",
        help="upstream connect timeout (default: 10)",
    )
    limits.add_argument(
        "--upstream-timeout",
        type=float,
        default=d.upstream_timeout,
        metavar="SECONDS",
        help="longest wait for the engine's next bytes (default: 600)",
    )


def config_from_args(args: argparse.Namespace) -> ServerConfig:
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
        max_body_bytes=args.max_body_bytes,
        connect_timeout=args.connect_timeout,
        upstream_timeout=args.upstream_timeout,
        extra_stop=list(args.stop),
        max_upstream_line=args.max_upstream_line,
        body_timeout=args.body_timeout,
        header_timeout=args.header_timeout,
        keep_alive_timeout=args.keep_alive_timeout,
        max_connections=args.max_connections,
        render_workers=args.render_workers,
        render_timeout=args.render_timeout,
        constraint_timeout=args.constraint_timeout,
        constraint_workers=args.constraint_workers,
        constraint_max_tools=args.constraint_max_tools,
        constraint_max_tools_bytes=args.constraint_max_tools_bytes,
        shutdown_timeout=args.shutdown_timeout,
        passthrough=list(args.passthrough),
        default_max_tokens=args.default_max_tokens or None,
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
