"""Tests of the fake inference engine (tests/server/engine.py) over real HTTP on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from .engine import DEFAULT_SPECIAL, MODEL, Script, TestEngine, tokenize
from .live import LiveServer

RAW = "<think>Let me think.</think>Hello, world! The answer is 42.<|im_end|>"
VISIBLE = "Let me think.Hello, world! The answer is 42."
CALLS = [
    {
        "id": "call_a",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    },
    {
        "id": "call_b",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"tz": "CET", "fmt": 24}'},
    },
]


@pytest.fixture(scope="module")
def engine() -> Iterator[TestEngine]:
    eng = TestEngine()
    eng.add("raw", Script(text=RAW, prompt_tokens=7))
    eng.add("generic", Script(text="a<|foo_bar|>b<\uff5ctool\u2581sep\uff5c>c[TOOL_CALLS]d"))
    eng.add("long", Script(text="The quick brown fox jumps over the lazy dog. " * 4, finish_reason="length"))
    eng.add("structured", Script(reasoning="Check the weather.", content="Sure.", tool_calls=CALLS))
    eng.add("content_only", Script(content="Just text."))
    eng.add("error", Script(text=RAW, fault="error"))
    eng.add("bad", Script(text=RAW, fault="bad_request"))
    eng.add("die", Script(text=RAW, fault="die:3"))
    eng.add("die_late", Script(text="abc", fault="die:99"))
    eng.add("hang", Script(text=RAW, fault="hang"))
    eng.add("hang2", Script(text=RAW, fault="hang:2"))
    eng.add("garbage", Script(text=RAW, fault="garbage:2"))
    eng.add("slow", Script(text="abcdefghij", delay=0.01, first_token_delay=0.05))
    with eng:
        yield eng


@pytest.fixture
def client(engine: TestEngine) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=engine.url, timeout=5) as c:
        yield c


def sse(resp: httpx.Response) -> list[dict]:
    """Parse an SSE body; asserts the [DONE] terminator is last."""
    events = [line[6:] for line in resp.text.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def ndjson(resp: httpx.Response) -> list[dict]:
    return [json.loads(line) for line in resp.text.splitlines() if line]


def completion(client: httpx.Client, case: str, **body) -> httpx.Response:
    return client.post("/v1/completions", json={"model": MODEL, "prompt": f"hi [case:{case}]", **body})


def chat(client: httpx.Client, case: str, path: str = "/v1/chat/completions", **body) -> httpx.Response:
    messages = [
        {"role": "user", "content": "[case:error]"},  # only the LAST user message counts
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": f"go [case:{case}]"}]},
    ]
    return client.post(path, json={"model": MODEL, "messages": messages, **body})


def stream_text(chunks: list[dict]) -> tuple[str, str | None, dict | None]:
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert all(f is None for f in finish[:-1])
    usage = chunks[-1].get("usage") if not chunks[-1]["choices"] else None
    return text, finish[-1], usage


# ---------------------------------------------------------------- tokenizer, live server


def test_tokenize_specials_whole_and_plain_pieces_small():
    toks = tokenize("<think>abcdefghij</think><|weird_one|><\uff5cend\u2581x\uff5c>xyz[ARGS]", "k", seed=3)
    specials = [t for t, s in toks if s]
    assert specials == ["<think>", "</think>", "<|weird_one|>", "<\uff5cend\u2581x\uff5c>", "[ARGS]"]
    assert all(1 <= len(t) <= 4 for t, s in toks if not s)
    assert (
        "".join(t for t, _ in toks)
        == "<think>abcdefghij</think><|weird_one|><\uff5cend\u2581x\uff5c>xyz[ARGS]"
    )
    assert toks == tokenize(
        "<think>abcdefghij</think><|weird_one|><\uff5cend\u2581x\uff5c>xyz[ARGS]", "k", seed=3
    )
    for s in (
        "<|tool_call>",
        "<tool_call|>",
        '<|"|>',
        "<|channel>",
        "<channel|>",
        "[CALL_ID]",
        "<|python_tag|>",
    ):
        assert s in DEFAULT_SPECIAL
        assert tokenize(f"x{s}y") == [("x", False), (s, True), ("y", False)]


def test_live_server_with_lifespan_and_restart():
    events = []

    @asynccontextmanager
    async def lifespan(app):
        events.append("up")
        yield
        events.append("down")

    async def ok(request):
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/", ok)], lifespan=lifespan)
    with LiveServer(app) as srv:
        assert srv.url == f"http://127.0.0.1:{srv.port}" and srv.port > 0
        assert httpx.get(srv.url).text == "ok"
    assert events == ["up", "down"]


def test_models_health_and_request_log(engine, client):
    assert client.get("/health").status_code == 200
    models = client.get("/v1/models").json()
    assert models == {
        "object": "list",
        "data": [{"id": "test-model", "object": "model", "created": 0, "owned_by": "test-engine"}],
    }
    completion(client, "raw", max_tokens=1, temperature=0.5)
    last = engine.requests[-1]
    assert last["path"] == "/v1/completions"
    assert last["body"]["temperature"] == 0.5 and last["body"]["prompt"] == "hi [case:raw]"
    assert last["headers"]["content-type"] == "application/json"


def test_unknown_case_invalid_json_and_default(engine, client):
    r = completion(client, "nope")
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "not_found_error"
    assert r.json()["error"]["param"] is None and r.json()["error"]["code"] is None
    assert chat(client, "nope", path="/api/chat").status_code == 404
    r = client.post("/v1/completions", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "message" in r.json()["error"]
    engine.default = Script(text="fallback")
    try:
        assert completion(client, "nope").json()["choices"][0]["text"] == "fallback"
        r = client.post("/v1/completions", json={"prompt": "no marker at all"})
        assert r.json()["choices"][0]["text"] == "fallback"
    finally:
        engine.default = None


# ---------------------------------------------------------------- /v1/completions


def test_completions_stream_matches_non_stream(client):
    for skip in (None, True, False):
        extra = {} if skip is None else {"skip_special_tokens": skip, "spaces_between_special_tokens": False}
        whole = completion(client, "raw", **extra).json()
        chunks = sse(completion(client, "raw", stream=True, **extra))
        text, finish, _ = stream_text(chunks)
        assert whole["object"] == "text_completion" and whole["id"].startswith("cmpl-")
        assert chunks[0]["object"] == "text_completion"
        assert text == whole["choices"][0]["text"] == (RAW if skip is False else VISIBLE)
        assert finish == whole["choices"][0]["finish_reason"] == "stop"
        assert whole["usage"]["prompt_tokens"] == 7
        assert whole["usage"]["total_tokens"] == 7 + whole["usage"]["completion_tokens"]
        if skip is False:  # specials arrive as whole tokens, other pieces are 1-4 chars
            pieces = [c["choices"][0]["text"] for c in chunks[:-1]]
            assert "<think>" in pieces and "<|im_end|>" in pieces
            assert whole["usage"]["completion_tokens"] == len(pieces)


def test_skip_special_tokens_strips_generic_forms(client):
    assert completion(client, "generic").json()["choices"][0]["text"] == "abcd"
    kept = completion(client, "generic", skip_special_tokens=False).json()["choices"][0]["text"]
    assert kept == "a<|foo_bar|>b<\uff5ctool\u2581sep\uff5c>c[TOOL_CALLS]d"


def test_max_tokens_gives_length(client):
    full = sse(completion(client, "raw", stream=True, skip_special_tokens=False))
    pieces = [c["choices"][0]["text"] for c in full[:-1]]
    for stream in (False, True):
        r = completion(client, "raw", max_tokens=4, skip_special_tokens=False, stream=stream)
        if stream:
            text, finish, _ = stream_text(sse(r))
        else:
            text, finish = r.json()["choices"][0]["text"], r.json()["choices"][0]["finish_reason"]
            assert r.json()["usage"]["completion_tokens"] == 4
        assert text == "".join(pieces[:4])
        assert finish == "length"
    # the script's own finish_reason when the text ends naturally
    assert completion(client, "long").json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    "stop, expected",
    [
        ("world", "Let me think.Hello, "),
        (["answer", ", w"], "Let me think.Hello"),  # earliest occurrence wins
        ("think.Hello", "Let me "),  # straddles the stripped </think>
        ("42.!", VISIBLE),  # a partial match is withheld, then released at the end
        ([".", "zzz"], "Let me think"),
    ],
)
def test_stop_strings(client, stop, expected):
    whole = completion(client, "raw", stop=stop).json()["choices"][0]
    chunks = sse(completion(client, "raw", stop=stop, stream=True))
    text, finish, _ = stream_text(chunks)
    assert whole["text"] == text == expected
    assert whole["finish_reason"] == finish == "stop"
    stops = [stop] if isinstance(stop, str) else stop
    if expected != VISIBLE:  # nothing of the stop string was ever sent, not even partially
        sent = ""
        for c in chunks[:-1]:
            sent += c["choices"][0]["text"]
            assert not any(s in sent for s in stops)


def test_stop_withholds_partial_match_at_token_level(engine, client):
    engine.add("stopmid", Script(text="abcdefghijklmnop"))
    chunks = sse(completion(client, "stopmid", stop="ghiX", stream=True))
    sent = [c["choices"][0]["text"] for c in chunks[:-1]]
    assert "".join(sent) == "abcdefghijklmnop"
    # "g", "gh", "ghi" were held back until it was clear the stop string does not follow
    prefix = ""
    for piece in sent:
        prefix += piece
        if len(prefix) < 16:
            assert not prefix.endswith(("g", "gh", "ghi"))


def test_include_usage_chunk(client):
    chunks = sse(completion(client, "raw", stream=True, stream_options={"include_usage": True}))
    assert chunks[-1]["choices"] == []
    usage = chunks[-1]["usage"]
    assert usage["prompt_tokens"] == 7 and usage["total_tokens"] == 7 + usage["completion_tokens"]
    assert "usage" not in chunks[-2]
    assert "usage" not in sse(completion(client, "raw", stream=True))[-1]


# ---------------------------------------------------------------- /v1/chat/completions


def reassemble_chat(chunks: list[dict], reasoning_key: str = "reasoning_content") -> dict:
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content, reasoning, calls, finish = "", "", {}, None
    for c in chunks:
        if not c["choices"]:
            continue
        choice = c["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        reasoning += delta.get(reasoning_key) or ""
        for tc in delta.get("tool_calls", []):
            i = tc["index"]
            if i not in calls:  # first delta of a call carries id, type and the name
                assert tc["id"] and tc["type"] == "function" and tc["function"]["name"]
                assert tc["function"]["arguments"] == ""
                calls[i] = {"id": tc["id"], "type": "function", "function": dict(tc["function"])}
            else:
                assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
                calls[i]["function"]["arguments"] += tc["function"]["arguments"]
        if choice["finish_reason"] is not None:
            assert delta == {}
            finish = choice["finish_reason"]
    return {
        "content": content,
        "reasoning": reasoning,
        "tool_calls": [calls[i] for i in sorted(calls)],
        "finish": finish,
    }


def test_chat_raw_mode(client):
    msg = chat(client, "raw", skip_special_tokens=False, tools=[], chat_template_kwargs={"x": 1}).json()
    assert msg["object"] == "chat.completion" and msg["id"].startswith("chatcmpl-")
    assert msg["choices"][0]["message"] == {"role": "assistant", "content": RAW}
    assert msg["choices"][0]["finish_reason"] == "stop"
    got = reassemble_chat(sse(chat(client, "raw", stream=True, skip_special_tokens=False)))
    assert got == {"content": RAW, "reasoning": "", "tool_calls": [], "finish": "stop"}
    assert chat(client, "raw").json()["choices"][0]["message"]["content"] == VISIBLE
    r = chat(
        client, "raw", stream=True, max_completion_tokens=3, stop="zz", stream_options={"include_usage": True}
    )
    chunks = sse(r)
    assert chunks[-1]["usage"]["completion_tokens"] == 3
    assert reassemble_chat(chunks)["finish"] == "length"


def test_chat_structured_mode(client):
    got = reassemble_chat(sse(chat(client, "structured", stream=True)))
    assert got == {
        "content": "Sure.",
        "reasoning": "Check the weather.",
        "tool_calls": CALLS,
        "finish": "tool_calls",
    }
    whole = chat(client, "structured").json()["choices"][0]
    assert whole["finish_reason"] == "tool_calls"
    assert whole["message"] == {
        "role": "assistant",
        "content": "Sure.",
        "reasoning_content": "Check the weather.",
        "tool_calls": CALLS,
    }
    only = chat(client, "content_only").json()["choices"][0]
    assert (
        only["message"] == {"role": "assistant", "content": "Just text."} and only["finish_reason"] == "stop"
    )
    cut = chat(client, "structured", max_tokens=3).json()["choices"][0]
    assert cut["finish_reason"] == "length" and "tool_calls" not in cut["message"]
    assert cut["message"]["content"] is None and 0 < len(cut["message"]["reasoning_content"]) < 18


def test_chat_structured_reasoning_key(engine):
    eng = TestEngine(reasoning_key="reasoning")
    eng.add("s", Script(reasoning="hmm", content=""))
    with eng, httpx.Client(base_url=eng.url) as c:
        got = reassemble_chat(sse(chat(c, "s", stream=True)), reasoning_key="reasoning")
        assert got["reasoning"] == "hmm"
        assert chat(c, "s").json()["choices"][0]["message"] == {
            "role": "assistant",
            "content": None,
            "reasoning": "hmm",
        }


# ---------------------------------------------------------------- Ollama


def test_ollama_generate(client):
    lines = ndjson(client.post("/api/generate", json={"model": "m", "prompt": "[case:raw]", "raw": True}))
    assert all(not x["done"] for x in lines[:-1]) and lines[-1]["done"]
    assert "".join(x["response"] for x in lines) == RAW  # Ollama never strips special tokens
    assert lines[0]["model"] == "m" and lines[0]["created_at"].endswith("Z")
    final = lines[-1]
    assert final["response"] == "" and final["done_reason"] == "stop"
    assert final["prompt_eval_count"] == 7 and final["eval_count"] == len(lines) - 1
    assert isinstance(final["total_duration"], int)
    whole = client.post("/api/generate", json={"prompt": "[case:raw]", "stream": False}).json()
    assert whole["response"] == RAW and whole["done"] is True and whole["eval_count"] == final["eval_count"]
    opts = {"num_predict": 2, "temperature": 0, "seed": 1}
    cut = client.post("/api/generate", json={"prompt": "[case:raw]", "stream": False, "options": opts}).json()
    assert cut["done_reason"] == "length" and cut["eval_count"] == 2
    stop = {"stop": ["world"]}
    lines = ndjson(client.post("/api/generate", json={"prompt": "[case:raw]", "options": stop}))
    assert "".join(x["response"] for x in lines) == "<think>Let me think.</think>Hello, "
    assert lines[-1]["done_reason"] == "stop"


def test_ollama_chat(client):
    lines = ndjson(chat(client, "raw", path="/api/chat"))
    assert "".join(x["message"]["content"] for x in lines) == RAW
    assert lines[-1]["done"] and lines[-1]["done_reason"] == "stop"
    lines = ndjson(chat(client, "structured", path="/api/chat", tools=[{"type": "function"}]))
    assert "".join(x["message"].get("thinking", "") for x in lines) == "Check the weather."
    assert "".join(x["message"]["content"] for x in lines) == "Sure."
    calls = [tc for x in lines for tc in x["message"].get("tool_calls", [])]
    assert calls == [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"function": {"name": "get_time", "arguments": {"tz": "CET", "fmt": 24}}},
    ]
    assert sum("tool_calls" in x["message"] for x in lines) == 2  # one whole call per line
    whole = chat(client, "structured", path="/api/chat", stream=False).json()
    assert whole["message"] == {
        "role": "assistant",
        "content": "Sure.",
        "thinking": "Check the weather.",
        "tool_calls": calls,
    }
    assert whole["done"] and whole["done_reason"] == "stop"


# ---------------------------------------------------------------- faults


def test_fault_error_and_bad_request(client):
    r = completion(client, "error", stream=True)
    assert r.status_code == 500 and r.json()["error"]["message"] == "engine exploded"
    assert r.json()["error"]["type"] == "internal_error"
    r = chat(client, "bad")
    assert r.status_code == 400
    assert (
        r.json()["error"]["type"] == "BadRequestError"
        and "maximum context length" in r.json()["error"]["message"]
    )
    r = client.post("/api/generate", json={"prompt": "[case:error]"})
    assert r.status_code == 500 and r.json() == {"error": "engine exploded"}
    r = chat(client, "bad", path="/api/chat")
    assert r.status_code == 400 and "maximum context length" in r.json()["error"]


def test_fault_die_streaming(engine, client):
    received = []
    with (
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
        client.stream("POST", "/v1/completions", json={"prompt": "[case:die]", "stream": True}) as r,
    ):
        assert r.status_code == 200
        for line in r.iter_lines():
            if line:
                received.append(line)
    assert len(received) == 3 and all(
        json.loads(x[6:])["choices"][0]["finish_reason"] is None for x in received
    )
    # chat: the role chunk, then 3 tokens; Ollama: 3 lines
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, "die", stream=True)
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/api/generate", json={"prompt": "[case:die]"})
    # fewer tokens than N: dies right before the finish chunk
    received = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/v1/completions", json={"prompt": "[case:die_late]", "stream": True}) as r,
    ):
        received.extend(line for line in r.iter_lines() if line)
    assert "".join(json.loads(x[6:])["choices"][0]["text"] for x in received) == "abc"
    assert client.get("/health").status_code == 200  # the engine survives


def test_fault_die_non_streaming(client):
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        completion(client, "die")
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/api/generate", json={"prompt": "[case:die]", "stream": False})


def test_fault_hang_counts_cancelled(engine):
    with httpx.Client(base_url=engine.url, timeout=0.2) as c:
        before = engine.cancelled
        with pytest.raises(httpx.ReadTimeout):
            completion(c, "hang")
        assert engine.wait_for(lambda e: e.cancelled == before + 1, 2)
        with pytest.raises(httpx.ReadTimeout):
            completion(c, "hang", stream=True)  # no headers either
        assert engine.wait_for(lambda e: e.cancelled == before + 2, 2)
        received = []
        with (
            pytest.raises(httpx.ReadTimeout),
            c.stream("POST", "/v1/completions", json={"prompt": "[case:hang2]", "stream": True}) as r,
        ):
            received.extend(line for line in r.iter_lines() if line)
        assert len(received) == 2
        assert engine.wait_for(lambda e: e.cancelled == before + 3, 2)
    assert engine.wait_for(lambda e: e.active == 0, 2)


def test_client_disconnect_mid_stream_is_cancelled(engine):
    engine.add("slowlong", Script(text="x" * 400, delay=0.005))
    before_c, before_done = engine.cancelled, engine.completed
    with (
        httpx.Client(base_url=engine.url) as c,
        c.stream("POST", "/v1/completions", json={"prompt": "[case:slowlong]", "stream": True}) as r,
    ):
        for _ in r.iter_lines():
            assert engine.active >= 1
            break
    assert engine.wait_for(lambda e: e.cancelled == before_c + 1, 2)
    assert engine.completed == before_done


def test_fault_garbage(client):
    r = completion(client, "garbage", stream=True, skip_special_tokens=False)
    events = [e[6:] for e in r.text.split("\n\n") if e.startswith("data: ")]
    assert events[2] == "{not json" and events[-1] == "[DONE]"
    good = [json.loads(e) for e in events if e not in ("{not json", "[DONE]")]
    assert stream_text(good)[0] == RAW
    lines = chat(client, "garbage", path="/api/chat").text.splitlines()
    assert lines[2] == "{not json"
    assert "".join(json.loads(x)["message"]["content"] for x in lines if x != "{not json") == RAW


def test_timing_delays(client):
    t0 = time.monotonic()
    with client.stream("POST", "/v1/completions", json={"prompt": "[case:slow]", "stream": True}) as r:
        stamps = [
            time.monotonic() - t0
            for line in r.iter_lines()
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0].get("text")
        ]
    # Lower bounds only (a loaded machine makes everything later, never earlier): the first
    # token waits `first_token_delay`, and the last one cannot arrive before every later token's
    # delay. (Only chunks that carry text: a chunk without text, such as the finish chunk, follows
    # the last token with no delay, so counting it asked for one delay too many.)
    assert stamps[0] >= 0.045  # time to first token
    assert stamps[-1] >= 0.045 + 0.009 * (len(stamps) - 1)  # tokens are spaced out
    t0 = time.monotonic()
    assert completion(client, "slow").json()["choices"][0]["text"] == "abcdefghij"
    assert time.monotonic() - t0 >= 0.05


def test_stop_releases_hung_requests():
    eng = TestEngine()
    eng.add("h", Script(text="abc", fault="hang"))
    errors: list[Exception] = []

    def call() -> None:
        try:
            httpx.post(eng.url + "/v1/completions", json={"prompt": "[case:h]"}, timeout=10)
        except Exception as exc:
            errors.append(exc)

    with eng:
        t = threading.Thread(target=call)
        t.start()
        assert eng.wait_for(lambda e: e.active == 1)
    # stop() dropped the hung connection itself; uvicorn's graceful-shutdown timeout did not cut it
    assert eng.released == 1 and eng.cancelled == 0
    t.join(5)
    assert len(errors) == 1 and isinstance(errors[0], httpx.RemoteProtocolError)
