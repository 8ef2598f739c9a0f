"""What operators expect: `/metrics`, `/openapi.json` (fuzzed with schemathesis: no 5xx), versions."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings

from chatparse import __version__
from chatparse.cli import main

from .conftest import MODEL, WEATHER, client
from .engine import Script, TestEngine

schemathesis = pytest.importorskip("schemathesis")  # in the test extra
# `from_url` imports its OpenAPI loader on first use; importing it here, at collection, keeps that
# import (and pytest's assertion rewriting of it, an `ast.parse`) out of the running test: in one
# full run on CPython 3.11.7 it failed there with "AST constructor recursion depth mismatch", a
# CPython bug in the AST constructor's depth tracking (python/cpython#106905, fixed in 3.11.8).
pytest.importorskip("schemathesis.specs.openapi.schemas")


@pytest.fixture(scope="module", autouse=True)
def scripts(engine: TestEngine) -> None:
    engine.add(
        "metrics-call",
        Script(
            text='<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
        ),
    )
    engine.add("metrics-bad", Script(text="<tool_call>\n{not json}\n</tool_call><|im_end|>"))
    engine.default = engine.default or Script(text="Hello from the default script.<|im_end|>")


def test_metrics(server_factory: Any) -> None:
    srv = server_factory(upstream_api="completions")
    c = client(srv)
    c.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "[case:metrics-call] x"}], tools=[WEATHER]
    )
    list(
        c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "[case:metrics-bad] x"}],
            tools=[WEATHER],
            stream=True,
        )
    )
    list(
        c.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "[case:metrics-call] x"}],
            tools=[WEATHER],
            stream=True,
        )
    )
    httpx.post(srv.url + "/v1/chat/completions", content=b"{", timeout=10)
    r = httpx.get(srv.url + "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text

    def value(pattern: str) -> float:
        m = re.search("^" + pattern + r" (\S+)$", text, re.M)
        assert m, pattern
        return float(m.group(1))

    assert value(r'chatparse_requests_total\{path="/v1/chat/completions",status="200"\}') >= 2
    assert value(r'chatparse_requests_total\{path="/v1/chat/completions",status="400"\}') >= 1
    assert value(r'chatparse_tool_calls_total\{template="qwen3"\}') >= 1
    assert value(r'chatparse_parse_errors_total\{template="qwen3"\}') >= 1
    assert value(r'chatparse_completion_tokens_total\{template="qwen3"\}') > 0
    assert value(r'chatparse_time_to_first_token_seconds_count\{template="qwen3"\}') >= 1
    assert value(r'chatparse_request_duration_seconds_count\{path="/v1/chat/completions"\}') >= 3
    for line in text.splitlines():  # the exposition format: comments or `name{labels} value`
        assert line.startswith("# ") or re.fullmatch(r"[a-z_]+(\{[^}]*\})? \S+", line), line


def test_metrics_need_the_api_key(engine: TestEngine, qwen_dir: Any) -> None:
    from .conftest import running

    with running(upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), api_key="k") as srv:
        assert httpx.get(srv.url + "/metrics").status_code == 401
        assert httpx.get(srv.url + "/metrics", headers={"Authorization": "Bearer k"}).status_code == 200
        doc = httpx.get(srv.url + "/openapi.json").json()
        assert doc["paths"]["/v1/chat/completions"]["post"]["security"] == [{"bearer": []}]


def test_openapi_lists_the_endpoints(server_factory: Any) -> None:
    doc = httpx.get(server_factory(upstream_api="completions").url + "/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {
        "/health",
        "/v1/models",
        "/v1/chat/completions",
        "/v1/responses",
        "/metrics",
        "/openapi.json",
    }
    assert doc["info"]["version"] == __version__


def test_schemathesis_finds_no_server_error(server_factory: Any) -> None:
    """Every operation of the served OpenAPI schema, fuzzed by schemathesis (bounded: 30 cases each)."""
    from hypothesis import given

    srv = server_factory(upstream_api="completions")
    api = schemathesis.openapi.from_url(srv.url + "/openapi.json")
    seen = []
    for result in api.get_all_operations():
        operation = result.ok()
        seen.append(operation.label)

        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            response = case.call(timeout=20)
            assert response.status_code < 500 or response.status_code in (502, 503, 504), (
                case,
                response.text,
            )
            if response.status_code >= 400:
                assert response.headers["content-type"][0].startswith("application/json")
                assert "error" in response.json()

        check()
    assert set(seen) >= {
        "GET /health",
        "GET /v1/models",
        "POST /v1/chat/completions",
        "POST /v1/responses",
        "GET /metrics",
    }


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"chatparse {__version__}"


def test_python_dash_m() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "chatparse", "--version"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.strip() == f"chatparse {__version__}"
    r = subprocess.run(
        [sys.executable, "-m", "chatparse", "templates", "list"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "qwen3" in r.stdout
