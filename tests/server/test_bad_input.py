"""Hostile or broken request bodies and upstream text: a JSON error naming the field, never a 500.

Each case here was a 500 (text/plain) or a stream cut without an error event on the main branch
before issue 11.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import MODEL, WEATHER
from .engine import Script, TestEngine
from .test_faults import sse_data


@pytest.fixture(scope="module", autouse=True)
def scripts(engine: TestEngine) -> None:
    engine.add("ok", Script(text="Hello there!<|im_end|>"))
    engine.add("surrogate", Script(text="Hello \ud800 there<|im_end|>"))


def raw_post(srv: Any, raw: bytes, path: str = "/v1/chat/completions") -> httpx.Response:
    return httpx.post(srv.url + path, content=raw, timeout=10, headers={"content-type": "application/json"})


def body(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "[case:ok] hi"}], **extra}


def assert_json_error(r: httpx.Response, status: int, param: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json"), r.headers
    err: dict[str, Any] = r.json()["error"]
    if param is not None:
        assert err["param"] == param, err
    return err


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_deeply_nested_body_is_400(server_factory: Any, api: str) -> None:
    srv = server_factory(upstream_api=api)
    err = assert_json_error(raw_post(srv, b"[" * 100_000), 400, "body")
    assert "nest" in err["message"]
    # nesting deep but within the limit is only a wrong body
    assert_json_error(raw_post(srv, b"[" * 50 + b"]" * 50), 400, "body")


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {"type": "object", "properties": {"x": {"default": float("nan")}}},
                        },
                    }
                ]
            },
            "tools[0].function.parameters.properties.x.default",
        ),
        ({"chat_template_kwargs": {"budget": float("inf")}}, "chat_template_kwargs.budget"),
        ({"temperature": float("-inf")}, "temperature"),
    ],
)
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_nan_and_infinity_are_400_naming_the_field(
    server_factory: Any, api: str, patch: dict[str, Any], param: str
) -> None:
    srv = server_factory(upstream_api=api)
    err = assert_json_error(raw_post(srv, json.dumps(body(**patch)).encode()), 400, param)
    assert "not valid JSON" in err["message"] and param in err["message"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_lone_surrogate_in_the_request_is_400_naming_the_field(server_factory: Any, path: str) -> None:
    srv = server_factory(upstream_api="completions")
    if path == "/v1/responses":
        payload: dict[str, Any] = {"model": MODEL, "input": [{"role": "user", "content": "a \ud800 b"}]}
        param = "input[0].content"
    else:
        payload = body(messages=[{"role": "user", "content": "[case:ok] \udfff"}])
        param = "messages[0].content"
    err = assert_json_error(raw_post(srv, json.dumps(payload).encode(), path), 400, param)
    assert "surrogate" in err["message"]


def test_invalid_utf8_body_is_400(server_factory: Any) -> None:
    srv = server_factory(upstream_api="completions")
    raw = json.dumps(body()).encode().replace(b"hi", b"h\xff")
    assert_json_error(raw_post(srv, raw), 400, "body")


@pytest.mark.parametrize("api", ["completions", "ollama-generate", "chat-raw"])
def test_lone_surrogate_from_the_upstream_is_replaced_and_reported(server_factory: Any, api: str) -> None:
    srv = server_factory(upstream_api=api)
    req = body(messages=[{"role": "user", "content": "[case:surrogate] hi"}])
    r = httpx.post(srv.url + "/v1/chat/completions", json=req, timeout=10)
    assert r.status_code == 200, r.text
    message = r.json()["choices"][0]["message"]
    assert message["content"] == "Hello \ufffd there"
    assert any("surrogate" in w for w in message["chatparse"]["upstream_warnings"])
    r = httpx.post(srv.url + "/v1/chat/completions", json={**req, "stream": True}, timeout=10)
    events = sse_data(r.text)
    assert events[-1] == "[DONE]"
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e.get("choices"))
    assert text == "Hello \ufffd there"


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"model": MODEL, "input": [{"role": {}, "content": "hi"}]}, "input[0].role"),
        ({"model": MODEL, "input": [{"role": ["user"], "content": "hi"}]}, "input[0].role"),
        ({"model": MODEL, "input": [{"type": {}, "content": "hi"}]}, "input[0].type"),
    ],
)
def test_responses_odd_types_are_400(server_factory: Any, payload: dict[str, Any], param: str) -> None:
    srv = server_factory(upstream_api="completions")
    assert_json_error(raw_post(srv, json.dumps(payload).encode(), "/v1/responses"), 400, param)


# Arbitrary JSON values where the API expects specific ones: the answer is a 2xx or a JSON 4xx.
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_chat_keys = st.sampled_from(
    [
        "messages",
        "tools",
        "tool_choice",
        "stream",
        "stream_options",
        "max_tokens",
        "stop",
        "chat_template_kwargs",
        "response_format",
        "parallel_tool_calls",
        "temperature",
        "reasoning_effort",
        "n",
    ]
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"]) | _json},
    optional={"content": _json, "tool_calls": _json, "tool_call_id": _json, "name": _json},
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    extra=st.dictionaries(_chat_keys, _json, max_size=3),
    messages=st.lists(_message, min_size=1, max_size=3),
    responses=st.booleans(),
)
def test_arbitrary_bodies_never_give_5xx(
    server_factory: Any, extra: dict[str, Any], messages: list[Any], responses: bool
) -> None:
    srv = server_factory(upstream_api="completions")
    messages = [
        *messages,
        {"role": "user", "content": "[case:ok] go"},
    ]  # the engine's script, if it gets there
    if responses:
        payload: dict[str, Any] = {"model": MODEL, "input": messages, **extra}
        path = "/v1/responses"
    else:
        payload = {"model": MODEL, "messages": messages, **extra}
        path = "/v1/chat/completions"
    r = raw_post(srv, json.dumps(payload).encode(), path)
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("application/json") and "error" in r.json()


def test_tools_are_checked_before_rendering(server_factory: Any) -> None:
    srv = server_factory(upstream_api="completions")
    r = httpx.post(srv.url + "/v1/chat/completions", json=body(tools=[WEATHER]), timeout=10)
    assert r.status_code == 200, r.text
