"""Bad requests and upstream faults: every one gets a clear answer, and nothing the upstream sent is lost."""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any

import httpx
import openai
import pytest

from .conftest import MODEL, WEATHER, client, running
from .engine import Script, TestEngine

LONG = "Hello there, " + " ".join(f"word{i}" for i in range(400)) + "<|im_end|>"


@pytest.fixture(scope="module", autouse=True)
def scripts(engine: TestEngine) -> None:
    engine.add("ok", Script(text="Hello there!<|im_end|>"))
    engine.add("error", Script(text="x", fault="error"))
    engine.add("bad-request", Script(text="x", fault="bad_request"))
    engine.add("die", Script(text="Hello there, this answer breaks off<|im_end|>", fault="die:4"))
    engine.add(
        "die-in-call",
        Script(
            text='Sure. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
            fault="die:8",
        ),
    )
    engine.add("hang", Script(text="x", fault="hang"))
    engine.add("hang-mid", Script(text="Hello there, then silence<|im_end|>", fault="hang:3"))
    engine.add("garbage", Script(text="Hello there, all fine<|im_end|>", fault="garbage:3"))
    engine.add("slow", Script(text=LONG, delay=0.02))


def body(case: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": f"[case:{case}] hi"}], **extra}


def post(srv: Any, payload: Any, *, path: str = "/v1/chat/completions", **kwargs: Any) -> httpx.Response:
    if isinstance(payload, (bytes, str)):
        return httpx.post(srv.url + path, content=payload, timeout=10, **kwargs)
    return httpx.post(srv.url + path, json=payload, timeout=10, **kwargs)


def sse_data(text: str) -> list[Any]:
    out = []
    for line in text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------ requests


def test_malformed_json_is_400(server_factory: Any) -> None:
    srv = server_factory(upstream_api="completions")
    r = post(srv, b'{"model": "x", "messages": [')
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and "not valid JSON" in err["message"]
    r = post(srv, b"[1, 2]")
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"messages": "hi"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": 7}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": "10"}, "max_completion_tokens"),
        ({"stream": "yes"}, "stream"),
        ({"n": 2}, "n"),
        ({"stop": [1]}, "stop[0]"),
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0].function.name"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice.function.name",
        ),
        ({"model": 3}, "model"),
    ],
)
def test_wrong_fields_are_400_naming_the_field(server_factory: Any, patch: dict, param: str) -> None:
    srv = server_factory(upstream_api="completions")
    r = post(srv, {**body("ok"), **patch})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error"
    assert param.split("[")[0].split(".")[0] in err["message"]


@pytest.mark.parametrize("missing", ["messages", "model"])
def test_a_missing_required_field_is_400_saying_so(server_factory: Any, missing: str) -> None:
    srv = server_factory(upstream_api="completions")
    r = post(srv, {k: v for k, v in body("ok").items() if k != missing})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err == {**err, "param": missing, "message": f"{missing} is required"}


def test_openai_client_sees_bad_request(server_factory: Any) -> None:
    c = client(server_factory(upstream_api="completions"))
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], temperature=9)
    assert e.value.param == "temperature"


def test_unknown_model_is_404(server_factory: Any) -> None:
    c = client(server_factory(upstream_api="completions"))
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        c.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "[case:ok] x"}])
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="gpt-9", input="[case:ok] x")


def test_body_over_the_limit_is_413(engine: TestEngine, qwen_dir: Any) -> None:
    with running(upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), max_body_bytes=2000) as srv:
        r = post(srv, body("ok", messages=[{"role": "user", "content": "x" * 5000}]))
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"

        def chunks() -> Any:  # no Content-Length: the limit is enforced while reading
            yield b'{"model": "' + MODEL.encode() + b'", "messages": [{"role": "user", "content": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}]}'

        r = httpx.post(srv.url + "/v1/chat/completions", content=chunks(), timeout=10)
        assert r.status_code == 413
        assert post(srv, body("ok")).status_code == 200


def test_api_key(engine: TestEngine, qwen_dir: Any) -> None:
    with running(upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), api_key="s3cret") as srv:
        assert post(srv, body("ok")).status_code == 401
        assert post(srv, body("ok"), headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(srv.url + "/v1/models").status_code == 401
        with pytest.raises(openai.AuthenticationError):
            client(srv, api_key="nope").chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "x"}]
            )
        r = client(srv, api_key="s3cret").chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "[case:ok] x"}]
        )
        assert r.choices[0].message.content == "Hello there!"
        assert httpx.get(srv.url + "/health").status_code == 200


def test_unknown_route_and_method(server_factory: Any) -> None:
    srv = server_factory(upstream_api="completions")
    r = httpx.get(srv.url + "/v1/nope")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(srv.url + "/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()


# ------------------------------------------------------------------------------------------ upstream


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_refusing_the_connection_is_502(qwen_dir: Any, stream: bool) -> None:
    with running(upstream=f"http://127.0.0.1:{free_port()}", model=MODEL, tokenizer=str(qwen_dir)) as srv:
        r = post(srv, body("ok", stream=stream))
        assert r.status_code == 502
        assert r.json()["error"]["type"] == "upstream_unreachable"
        with pytest.raises(openai.InternalServerError):
            client(srv).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_timeout_is_504(engine: TestEngine, qwen_dir: Any, stream: bool) -> None:
    with running(upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), upstream_timeout=0.5) as srv:
        r = post(srv, body("hang", stream=stream))
        assert r.status_code == 504
        assert r.json()["error"]["type"] == "upstream_timeout"


def test_upstream_stalling_mid_stream_ends_the_stream_cleanly(engine: TestEngine, qwen_dir: Any) -> None:
    with running(upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), upstream_timeout=0.5) as srv:
        r = post(srv, body("hang-mid", stream=True))
        assert r.status_code == 200
        events = sse_data(r.text)
        assert events[-1] == "[DONE]"
        assert events[-2]["error"]["type"] == "upstream_timeout"
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-2] if e.get("choices"))
        assert text and "Hello there, then silence".startswith(text)


@pytest.mark.parametrize(("case", "status"), [("error", 502), ("bad-request", 400)])
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_error_answers(server_factory: Any, case: str, status: int, stream: bool) -> None:
    for api in ("completions", "ollama-generate", "chat"):
        srv = server_factory(upstream_api=api)
        r = post(srv, body(case, stream=stream))
        assert r.status_code == status, (api, r.text)
        message = r.json()["error"]["message"]
        assert ("engine exploded" in message) if case == "error" else ("maximum context length" in message)


@pytest.mark.parametrize("api", ["completions", "ollama-generate", "chat-raw"])
def test_upstream_dying_mid_stream(server_factory: Any, api: str) -> None:
    srv = server_factory(upstream_api=api)
    r = post(srv, body("die", stream=True))
    assert r.status_code == 200
    events = sse_data(r.text)
    assert events[-1] == "[DONE]" and events[-2]["error"]["type"] == "upstream_disconnected"
    # Everything the upstream sent before it died reached the client.
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-2] if e.get("choices"))
    assert text and "Hello there, this answer breaks off".startswith(text)
    # The openai client raises on the error event, after the text.
    seen = []
    with pytest.raises(openai.APIError, match="mid-response"):
        for chunk in client(srv).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "[case:die] x"}], stream=True
        ):
            seen.append(chunk)
    assert seen
    # Non-streamed: 502.
    assert post(srv, body("die")).status_code == 502


def test_call_cut_by_a_dying_upstream_is_not_sent(server_factory: Any) -> None:
    srv = server_factory(upstream_api="completions")
    r = post(srv, body("die-in-call", stream=True, tools=[WEATHER]))
    events = sse_data(r.text)
    assert events[-2]["error"]["type"] == "upstream_disconnected"
    assert not any(e["choices"][0]["delta"].get("tool_calls") for e in events[:-2] if e.get("choices"))


def test_garbage_line_is_reported_not_fatal(server_factory: Any) -> None:
    srv = server_factory(upstream_api="completions")
    events = sse_data(post(srv, body("garbage", stream=True)).text)
    assert events[-1] == "[DONE]"
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e.get("choices"))
    assert text == "Hello there, all fine"
    assert "not JSON" in events[-2]["chatparse"]["upstream_warnings"][0]


# ------------------------------------------------------------------------------------------ disconnects


def test_client_disconnect_cancels_the_upstream_stream(server_factory: Any, engine: TestEngine) -> None:
    srv = server_factory(upstream_api="completions")
    before = engine.cancelled
    with httpx.stream(
        "POST", srv.url + "/v1/chat/completions", json=body("slow", stream=True), timeout=10
    ) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert any(line.startswith("data: ") for line in got)
    assert engine.wait_for(lambda e: e.cancelled > before, timeout=5)


def test_client_disconnect_cancels_a_non_streamed_request(server_factory: Any, engine: TestEngine) -> None:
    srv = server_factory(upstream_api="completions")
    before = engine.cancelled
    with pytest.raises(httpx.ReadTimeout):
        post_timeout = httpx.Timeout(0.5)
        httpx.post(srv.url + "/v1/chat/completions", json=body("hang"), timeout=post_timeout)
    assert engine.wait_for(lambda e: e.cancelled > before, timeout=5)


def test_one_structured_log_line_per_request(server_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    srv = server_factory(upstream_api="completions")

    def records() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "chatparse.server"]

    with caplog.at_level(logging.INFO, logger="chatparse.server"):
        before = len(records())
        post(srv, body("ok"))
        post(srv, body("ok", model="gpt-9"))
        # The line is written once the answer is sent, so it can follow the client's last byte.
        deadline = time.monotonic() + 5
        while len(records()) < before + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = [json.loads(r.getMessage()) for r in records()]
    assert len(lines) == before + 2
    assert [(x["status"], x["path"]) for x in lines[-2:]] == [
        (200, "/v1/chat/completions"),
        (404, "/v1/chat/completions"),
    ]
    assert lines[-2]["finish_reason"] == "stop" and lines[-2]["model"] == MODEL and "duration_ms" in lines[-2]
