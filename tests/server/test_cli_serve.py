"""`chatparse serve` as a real process: startup errors, then one request end to end and its log line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from chatparse.cli import main

from .conftest import MODEL, client
from .engine import Script, TestEngine
from .test_faults import free_port


def serve_args(*extra: str, model: str = MODEL, api: str = "chat-raw") -> list[str]:
    return ["--upstream", "http://127.0.0.1:9", "--model", model, "--upstream-api", api, *extra]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (serve_args(model="no-such-model-xyz"), "no response template for 'no-such-model-xyz'"),
        (["--upstream", "ftp://x", "--model", MODEL, "--upstream-api", "chat-raw"], "http:// or https://"),
        (serve_args("--tokenizer", "/nonexistent/dir", api="completions"), "--tokenizer /nonexistent/dir"),
        (serve_args(model="no-such-model-xyz", api="completions"), "none was found for 'no-such-model-xyz'"),
        (
            serve_args("--template", "qwen"),
            "neither a file nor a catalog template; close names: qwen3, qwen3_xml",
        ),
        (serve_args("--port", "99999"), "argument --port: 99999 is not a TCP port (0-65535)"),
        (serve_args("--port", "x"), "argument --port: not a port number: 'x'"),
    ],
)
def test_startup_errors_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chatparse: error: ") and message in err


def test_serve_process(engine: TestEngine, qwen_dir: Path) -> None:
    engine.add("cli", Script(text="<think>ok</think>Hi from the CLI.<|im_end|>"))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chatparse.cli",
            "serve",
            "--upstream",
            engine.url,
            "--model",
            MODEL,
            "--tokenizer",
            str(qwen_dir),
            "--port",
            str(port),
            "--api-key",
            "k",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx.get(url + "/health", timeout=1).json()
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        assert health == {"status": "ok"}
        r = client(url, api_key="k").chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "[case:cli] hi"}]
        )
        assert r.choices[0].message.content == "Hi from the CLI."
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err  # SIGTERM is a graceful shutdown
    lines = [json.loads(line) for line in err.splitlines()]  # every line is JSON
    chat = [x for x in lines if x.get("path") == "/v1/chat/completions"]
    assert len(chat) == 1 and chat[0]["status"] == 200 and chat[0]["finish_reason"] == "stop"
    listening = next(x for x in lines if x["event"] == "listening")
    assert listening["url"] == f"http://127.0.0.1:{port}/v1"
    assert listening["upstream_api"] == "completions" and listening["template"] == "qwen3"


def test_every_serve_flag_reaches_the_config() -> None:
    """Each `chatparse serve` flag lands in its `ServerConfig` field, and each limit's help names the
    field's real default (the limit flags are one table in `server._cli`)."""
    import argparse
    import dataclasses

    from chatparse.server import ServerConfig
    from chatparse.server._cli import _LIMITS, _field, _shown, add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = ServerConfig(upstream="", model="")
    fields = {f.name for f in dataclasses.fields(ServerConfig)}
    argv = ["--upstream", "http://127.0.0.1:9", "--model", "m"]
    for n, (flag, kind, _, _) in enumerate(_LIMITS, start=1):
        assert _field(flag) in fields, flag
        action = next(a for a in parser._actions if flag in a.option_strings)
        assert action.default == getattr(defaults, _field(flag)) and action.type is kind
        assert f"(default: {_shown(action.default)}" in (action.help or ""), flag
        argv += [flag, str(n)]
    config = config_from_args(parser.parse_args(argv))
    for n, (flag, kind, _, _) in enumerate(_LIMITS, start=1):
        assert getattr(config, _field(flag)) == kind(n), flag
    assert _shown(4 * 1024 * 1024) == "4 MiB" and _shown(600.0) == "600" and _shown(1000) == "1000"


def test_unknown_model_error_names_the_serve_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """The catalog's diagnosis, then serve's own advice (its flags), not the library's or parse's."""
    assert main(["serve", *serve_args(model="acme/unheard-of-7b")]) == 2
    err = capsys.readouterr().err
    assert "its family is not in the catalog. Pass --template NAME|FILE" in err
    assert "ChatParser(auto=True)" not in err and "parse --auto" not in err and ".. " not in err


def test_template_name_is_case_and_dash_insensitive_like_the_catalog() -> None:
    from chatparse.server._config import ServerConfig, resolve_config

    config = ServerConfig(upstream="http://127.0.0.1:9", model="x", upstream_api="chat-raw", template="Qwen3")
    resolved = resolve_config(config)
    assert resolved.template_name == "qwen3" and resolved.generation_prompt == "<|im_start|>assistant\n"
