"""Hostile clients, templates and upstreams: every limit holds and nobody else is stalled.

Each case failed on the main branch before issue 11: a template with nested loops hung the whole
server, idle and slow connections were never closed, an upstream line without a newline was
buffered with a copy per read, SIGTERM waited for the upstream timeout, and error messages and
`/health` showed the upstream URL.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import MODEL, model_dir, running
from .engine import Script, TestEngine
from .test_faults import free_port, sse_data

HOSTILE = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}x"
QUADRATIC = (
    "{% for m in messages %}{% for n in messages %}{{ m.content[:1] }}{% endfor %}{% endfor %}"
    "<|im_start|>assistant\n"
)


@pytest.fixture(scope="module", autouse=True)
def scripts(engine: TestEngine) -> None:
    engine.add("ok", Script(text="Hello there!<|im_end|>"))
    engine.add("stall", Script(text="Hello there, then silence<|im_end|>", fault="hang:3"))


def body(case: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": f"[case:{case}] hi"}], **extra}


def test_hostile_template_is_stopped_and_health_answers_meanwhile(engine: TestEngine, tmp_path: Path) -> None:
    folder = model_dir(
        tmp_path,
        "{% if messages[0].content.startswith('[case:ok] slow') %}"
        + HOSTILE
        + "{% else %}{{ messages[0].content }}<|im_start|>assistant\n{% endif %}",
    )
    with running(
        upstream=engine.url, model=MODEL, tokenizer=str(folder), template="qwen3", render_timeout=1.5
    ) as srv:
        result: dict[str, Any] = {}

        def slow() -> None:
            t = time.monotonic()
            r = httpx.post(
                srv.url + "/v1/chat/completions",
                json=body(messages=[{"role": "user", "content": "[case:ok] slow"}]),
                timeout=30,
            )
            result.update(status=r.status_code, error=r.json()["error"], seconds=time.monotonic() - t)

        thread = threading.Thread(target=slow)
        thread.start()
        time.sleep(0.3)
        # the event loop is free: health and a normal request are answered while the template runs
        assert httpx.get(srv.url + "/health", timeout=5).status_code == 200
        assert not result  # answered while the hostile template was still rendering
        thread.join(30)
        assert result["status"] == 400 and result["error"]["type"] == "render_timeout"
        assert "--render-timeout" in result["error"]["message"] and result["seconds"] < 5
        # the killed worker was replaced: the next request renders
        r = httpx.post(srv.url + "/v1/chat/completions", json=body(), timeout=30)
        assert r.status_code == 200, r.text
        assert b"chatparse_render_timeouts_total 1" in httpx.get(srv.url + "/metrics").content


def test_quadratic_template_over_many_messages_is_bounded(engine: TestEngine, tmp_path: Path) -> None:
    folder = model_dir(tmp_path, QUADRATIC)
    with running(
        upstream=engine.url, model=MODEL, tokenizer=str(folder), template="qwen3", render_timeout=1.0
    ) as srv:
        messages = [{"role": "user", "content": f"[case:ok] {i}"} for i in range(4000)]
        t = time.monotonic()
        r = httpx.post(srv.url + "/v1/chat/completions", json=body(messages=messages), timeout=30)
        assert r.status_code == 400 and r.json()["error"]["type"] == "render_timeout"
        assert time.monotonic() - t < 4


def _connect(srv: Any) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    return s


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            data = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not data:
            break
        out += data
    return out


def test_idle_slow_and_short_bodied_connections_are_closed(engine: TestEngine, qwen_dir: Any) -> None:
    with running(
        upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), header_timeout=0.5, body_timeout=0.5
    ) as srv:
        idle = _connect(srv)
        slow = _connect(srv)
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # headers never finish
        short = _connect(srv)
        short.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"model": '
        )
        t = time.monotonic()
        answers = [_read_all(s) for s in (idle, slow, short)]
        assert time.monotonic() - t < 5
        for answer in answers[:2]:
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b'"request_timeout"' in answer and b"--header-timeout" in answer
        assert answers[2].startswith(b"HTTP/1.1 408") and b"--body-timeout" in answers[2], answers[2]
        assert httpx.get(srv.url + "/health").status_code == 200


def test_connection_cap_answers_503_json(engine: TestEngine, qwen_dir: Any) -> None:
    with running(upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), max_connections=5) as srv:
        held = [_connect(srv) for _ in range(5)]
        time.sleep(0.2)
        extra = _connect(srv)
        answer = _read_all(extra)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        err = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
        assert err["type"] == "server_busy" and "--max-connections" in err["message"]
        for s in held:
            s.close()
        time.sleep(0.2)
        assert httpx.get(srv.url + "/health").status_code == 200


class _RawUpstream:
    """A hostile engine: answers every request with `head` and then `chunks` of bytes."""

    def __init__(self, chunks: Any) -> None:
        self.chunks = chunks
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            for chunk in self.chunks():
                conn.sendall(chunk)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.sock.close()


def test_upstream_line_without_newline_is_cut_at_the_limit(qwen_dir: Any) -> None:
    def chunks() -> Any:
        yield b'data: {"choices": [{"index": 0, "text": "'
        piece = b"x" * 65536
        for _ in range(1024):  # 64 MiB, never a newline
            yield piece

    up = _RawUpstream(chunks)
    try:
        with running(
            upstream=up.url,
            model=MODEL,
            tokenizer=str(qwen_dir),
            upstream_api="completions",
            max_upstream_line=1 << 20,
        ) as srv:
            cpu = time.process_time()
            r = httpx.post(srv.url + "/v1/chat/completions", json=body(stream=True), timeout=30)
            events = sse_data(r.text)
            assert events[-1] == "[DONE]"
            assert events[-2]["error"]["type"] == "upstream_line_too_long"
            assert "--max-upstream-line" in events[-2]["error"]["message"]
            assert time.process_time() - cpu < 5  # linear, and stopped at the limit
    finally:
        up.close()


def test_errors_do_not_show_the_upstream_url(qwen_dir: Any) -> None:
    port = free_port()
    with running(upstream=f"http://127.0.0.1:{port}", model=MODEL, tokenizer=str(qwen_dir)) as srv:
        r = httpx.post(srv.url + "/v1/chat/completions", json=body(), timeout=10)
        assert r.status_code == 502 and str(port) not in r.text and "127.0.0.1" not in r.text
        h = httpx.get(srv.url + "/health")
        assert h.json() == {"status": "ok"} and str(port) not in h.text


def _serve_process(engine: TestEngine, qwen_dir: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatparse", "serve", "--upstream", engine.url, "--model", MODEL,
         "--tokenizer", str(qwen_dir), "--port", str(port), "--render-workers", "1", *extra],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url + "/health", timeout=1)
            return proc, url
        except httpx.HTTPError:
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)


def test_sigterm_with_a_stalled_stream_ends_it_within_the_deadline(
    engine: TestEngine, qwen_dir: Path
) -> None:
    proc, url = _serve_process(engine, qwen_dir, "--shutdown-timeout", "1")
    try:
        with httpx.stream(
            "POST", url + "/v1/chat/completions", json=body("stall", stream=True), timeout=30
        ) as r:
            lines = r.iter_lines()
            got = [next(lines) for _ in range(2)]
            t = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            got += list(lines)
            elapsed = time.monotonic() - t
        events = sse_data("\n".join(got))
        assert events[-1] == "[DONE]" and events[-2]["error"]["type"] == "server_shutting_down"
        assert elapsed < 5
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=10)
    assert all(line.startswith("{") for line in err.splitlines()), err


def test_busy_port_is_a_clear_startup_error(engine: TestEngine, qwen_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "chatparse", "serve", "--upstream", engine.url, "--model", MODEL,
             "--tokenizer", str(qwen_dir), "--port", str(port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert r.returncode == 2
    assert f"chatparse: error: cannot listen on 127.0.0.1:{port}" in r.stderr
    assert "listening" not in r.stderr


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX resource limits")
def test_many_idle_sockets_with_few_file_descriptors(engine: TestEngine, qwen_dir: Path) -> None:
    # 256 file descriptors: the cap leaves room, idle sockets time out, the log stays small and JSON
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)); "
        "from chatparse.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--upstream", engine.url, "--model", MODEL, "--tokenizer",
         str(qwen_dir), "--port", str(port), "--header-timeout", "1", "--render-workers", "1"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    socks: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        for _ in range(300):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(1.5)  # the idle ones are closed by the header timeout
        r = httpx.post(url + "/v1/chat/completions", json=body(), timeout=10)
        assert r.status_code == 200, r.text
    finally:
        for s in socks:
            s.close()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert len(err) < 200_000
    assert all(line.startswith("{") for line in err.splitlines())
    assert "EMFILE" not in err and "Too many open files" not in err
