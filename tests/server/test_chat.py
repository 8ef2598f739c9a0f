"""`chatparse serve` in front of the test engine, driven with the real `openai` client: every upstream API."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from chatparse.openai import merge_deltas

from .conftest import MODEL, WEATHER, client
from .engine import Script, TestEngine

TWO_CALLS = (
    "<think>let me see</think>Sure. <tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>'
)
RAW_APIS = ("completions", "ollama-generate", "chat-raw")
ALL_APIS = (*RAW_APIS, "chat", "ollama-chat")


@pytest.fixture(scope="module", autouse=True)
def scripts(engine: TestEngine) -> None:
    engine.add("two-calls", Script(text=TWO_CALLS, prompt_tokens=21))
    engine.add("plain", Script(text="Hello there!<|im_end|>"))
    engine.add("think-plain", Script(text="<think>\nquick\n</think>\n\nHello!<|im_end|>"))
    engine.add(
        "marker-in-arg",
        Script(
            text='<tool_call>\n{"name": "get_weather", "arguments": {"city": "a</tool_call>b"}}\n</tool_call><|im_end|>'
        ),
    )
    engine.add(
        "structured",
        Script(
            text="",
            reasoning="hm",
            content="Checking.",
            tool_calls=[
                {
                    "id": "call_n1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        ),
    )
    engine.add(
        "structured-missed",
        Script(
            text="",
            content='Let me check. <tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
        ),
    )


def ask(c: openai.OpenAI, case: str, **kwargs: Any) -> Any:
    kwargs.setdefault("tools", [WEATHER])
    return c.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": f"[case:{case}] weather?"}], **kwargs
    )


def streamed(c: openai.OpenAI, case: str, **kwargs: Any) -> tuple[dict[str, Any], str, list[Any]]:
    chunks = list(ask(c, case, stream=True, **kwargs))
    deltas = [ch.choices[0].delta.model_dump(exclude_none=True) for ch in chunks if ch.choices]
    reasons = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(reasons) == 1, reasons
    return merge_deltas(deltas), reasons[0], chunks


def plain(message: Any) -> dict[str, Any]:
    """The message as a dict without the null keys the SDK adds and without the ids (random)."""
    d = message.model_dump(exclude_none=True) if not isinstance(message, dict) else dict(message)
    d.pop("refusal", None)
    d.pop("chatparse", None)
    if d.get("content") == "":  # the first streamed chunk carries `content: ""` with the role
        del d["content"]
    calls = d.get("tool_calls")
    if calls:
        d["tool_calls"] = [
            {"name": t["function"]["name"], "arguments": json.loads(t["function"]["arguments"])}
            for t in calls
        ]
    return d


@pytest.mark.parametrize("api", RAW_APIS)
def test_reasoning_content_and_two_calls(server_factory: Any, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    r = ask(c, "two-calls")
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    msg = plain(choice.message)
    assert msg == {
        "role": "assistant",
        "content": "Sure.",
        "reasoning_content": "let me see",
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
        ],
    }
    ids = [t.id for t in choice.message.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    merged, reason, chunks = streamed(c, "two-calls")
    assert reason == "tool_calls"
    assert plain(merged) == msg
    # Indices are stable and contiguous; id, type and name come with the first fragment of an index.
    seen: dict[int, Any] = {}
    for ch in chunks:
        for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices else []:
            if tc.index not in seen:
                assert tc.id and tc.type == "function" and tc.function.name == "get_weather"
                seen[tc.index] = tc
    assert sorted(seen) == [0, 1]
    # Text never leaks markers.
    for ch in chunks:
        if ch.choices:
            for text in (
                ch.choices[0].delta.content,
                getattr(ch.choices[0].delta, "reasoning_content", None),
            ):
                assert not text or ("<" not in text and ">" not in text)


@pytest.mark.parametrize("api", ALL_APIS)
def test_plain_answer_and_usage(server_factory: Any, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    r = ask(c, "plain")
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == "Hello there!"
    assert r.choices[0].message.tool_calls is None
    assert r.usage is not None and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    chunks = list(ask(c, "plain", stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage == r.usage
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == "Hello there!"


@pytest.mark.parametrize("api", RAW_APIS)
def test_prompt_reasoning_and_special_tokens_kept(server_factory: Any, engine: TestEngine, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    r = ask(c, "think-plain", extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert r.choices[0].message.content == "Hello!"
    assert r.model_extra is not None
    assert r.choices[0].message.model_extra["reasoning_content"] == "quick"
    sent = [q for q in engine.requests if "[case:think-plain]" in json.dumps(q["body"])][-1]["body"]
    if api == "completions":
        assert sent["skip_special_tokens"] is False
        assert sent["prompt"].endswith("<|im_start|>assistant\n")
        assert '"name": "get_weather"' in sent["prompt"]  # the tools were rendered into the prompt
        assert "stop" not in sent  # engines stop on end-of-turn token ids; no text stop strings added
    elif api == "ollama-generate":
        assert sent["raw"] is True and sent["prompt"].endswith("<|im_start|>assistant\n")
    else:
        assert sent["skip_special_tokens"] is False and sent["tool_choice"] == "none"


def test_enable_thinking_false_prefills_the_prompt(server_factory: Any, engine: TestEngine) -> None:
    c = client(server_factory(upstream_api="completions"))
    r = ask(c, "plain", extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].message.content == "Hello there!"
    sent = [q for q in engine.requests if "[case:plain]" in json.dumps(q["body"])][-1]["body"]
    assert sent["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.parametrize("api", RAW_APIS)
def test_cut_off_call_is_not_a_call(server_factory: Any, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    r = ask(c, "two-calls", max_tokens=14)
    assert r.choices[0].finish_reason == "length"
    full = ask(c, "two-calls")
    assert len(full.choices[0].message.tool_calls) == 2
    calls = r.choices[0].message.tool_calls or []
    assert len(calls) <= 1
    for t in calls:
        json.loads(t.function.arguments)
    merged, reason, _ = streamed(c, "two-calls", max_tokens=14)
    assert reason == "length"
    assert plain(merged) == plain(r.choices[0].message)


@pytest.mark.parametrize("api", RAW_APIS)
def test_tool_choice_none_keeps_markup_as_content(server_factory: Any, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    r = ask(c, "two-calls", tool_choice="none")
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.tool_calls is None
    assert '"city": "Paris"' in r.choices[0].message.content
    merged, reason, _ = streamed(c, "two-calls", tool_choice="none")
    assert reason == "stop" and plain(merged) == plain(r.choices[0].message)


def test_parallel_tool_calls_false_keeps_the_first(server_factory: Any) -> None:
    c = client(server_factory(upstream_api="completions"))
    r = ask(c, "two-calls", parallel_tool_calls=False)
    calls = r.choices[0].message.tool_calls
    assert [json.loads(t.function.arguments) for t in calls] == [{"city": "Paris"}]
    report = r.choices[0].message.model_extra["chatparse"]
    assert report["dropped"][0]["reason"] == "parallel_tool_calls is false"
    merged, _, chunks = streamed(c, "two-calls", parallel_tool_calls=False)
    assert plain(merged) == plain(r.choices[0].message)
    assert chunks[-1].model_extra["chatparse"]["dropped"][0]["name"] == "get_weather"


def test_marker_inside_an_argument(server_factory: Any) -> None:
    c = client(server_factory(upstream_api="completions"))
    r = ask(c, "marker-in-arg")
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"city": "a</tool_call>b"}


@pytest.mark.parametrize("api", ["chat", "ollama-chat"])
def test_structured_upstream_calls_are_kept(server_factory: Any, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    r = ask(c, "structured")
    msg = plain(r.choices[0].message)
    assert msg == {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "hm",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}],
    }
    assert r.choices[0].finish_reason == "tool_calls"
    merged, reason, _ = streamed(c, "structured")
    assert reason == "tool_calls" and plain(merged) == msg


@pytest.mark.parametrize("api", ["chat", "ollama-chat"])
def test_local_fallback_recovers_a_missed_call(server_factory: Any, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    r = ask(c, "structured-missed")
    msg = plain(r.choices[0].message)
    assert msg["tool_calls"] == [{"name": "get_weather", "arguments": {"city": "Rome"}}]
    assert msg["content"] == "Let me check."
    assert r.choices[0].finish_reason == "tool_calls"
    assert r.choices[0].message.model_extra["chatparse"]["local_fallback"] == {"calls": 1}
    merged, reason, _ = streamed(c, "structured-missed")
    assert reason == "tool_calls" and plain(merged) == msg


def test_reasoning_key_both(server_factory: Any) -> None:
    c = client(server_factory(upstream_api="completions", reasoning_key="both"))
    r = ask(c, "two-calls")
    extra = r.choices[0].message.model_extra
    assert extra["reasoning_content"] == extra["reasoning"] == "let me see"


def test_models_and_health(server_factory: Any, engine: TestEngine) -> None:
    srv = server_factory(upstream_api="completions")
    c = client(srv)
    assert [m.id for m in c.models.list()] == [MODEL]
    import httpx

    # /health needs no key, so it says nothing about the upstream or the local files
    assert httpx.get(srv.url + "/health").json() == {"status": "ok"}
    d = srv.app.resolved.describe()
    assert d["upstream_api"] == "completions" and d["template"] == "qwen3"


def test_unknown_tool_is_sent_and_reported(server_factory: Any, engine: TestEngine) -> None:
    engine.add(
        "unknown-tool",
        Script(
            text='<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call><|im_end|>'
        ),
    )
    c = client(server_factory(upstream_api="completions"))
    r = ask(c, "unknown-tool")
    assert [t.function.name for t in r.choices[0].message.tool_calls] == ["get_time"]
    assert r.choices[0].message.model_extra["chatparse"]["unknown_tools"]
    merged, _, chunks = streamed(c, "unknown-tool")
    assert plain(merged) == plain(r.choices[0].message)
    assert chunks[-1].model_extra["chatparse"]["unknown_tools"]


def test_malformed_call_text_is_reported_not_lost(server_factory: Any, engine: TestEngine) -> None:
    engine.add(
        "malformed",
        Script(
            text='Trying. <tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call><|im_end|>'
        ),
    )
    c = client(server_factory(upstream_api="completions"))
    r = ask(c, "malformed")
    assert r.choices[0].finish_reason == "stop" and r.choices[0].message.tool_calls is None
    errors = r.choices[0].message.model_extra["chatparse"]["errors"]
    assert errors[0]["field"] == "tool_calls" and '"city": }' in errors[0]["text"]
    merged, _, chunks = streamed(c, "malformed")
    assert plain(merged) == plain(r.choices[0].message)
    assert chunks[-1].model_extra["chatparse"]["errors"] == errors


def test_chat_raw_upstream_with_its_own_reasoning_parser(server_factory: Any, engine: TestEngine) -> None:
    # vLLM run with --reasoning-parser but no tool parser: reasoning arrives separated, calls raw.
    engine.add(
        "raw-with-reasoning",
        Script(
            reasoning="pondering",
            content='On it. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>',
        ),
    )
    c = client(server_factory(upstream_api="chat-raw"))
    r = ask(c, "raw-with-reasoning")
    msg = plain(r.choices[0].message)
    assert msg == {
        "role": "assistant",
        "content": "On it.",
        "reasoning_content": "pondering",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}],
    }
    merged, reason, _ = streamed(c, "raw-with-reasoning")
    assert reason == "tool_calls" and plain(merged) == msg


@pytest.mark.parametrize("api", ALL_APIS)
def test_sampling_options_are_passed_upstream(server_factory: Any, engine: TestEngine, api: str) -> None:
    c = client(server_factory(upstream_api=api))
    ask(c, "plain", temperature=0.3, top_p=0.9, seed=7, stop=["END"], max_completion_tokens=50)
    sent = [q for q in engine.requests if "[case:plain]" in json.dumps(q["body"])][-1]["body"]
    if api.startswith("ollama"):
        opts = sent["options"]
        assert (opts["temperature"], opts["top_p"], opts["seed"], opts["num_predict"]) == (0.3, 0.9, 7, 50)
        assert "END" in opts["stop"]
    else:
        assert (sent["temperature"], sent["top_p"], sent["seed"], sent["max_tokens"]) == (0.3, 0.9, 7, 50)
        assert "END" in sent["stop"]
    assert sent["model"] == MODEL


def test_chat_raw_without_a_chat_template_uses_the_catalog_prompt(
    server_factory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # No tokenizer files anywhere (an empty Hugging Face cache): the catalog's generation prompt is
    # the parser's prefix.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    srv = server_factory(upstream_api="chat-raw", tokenizer=None)
    import httpx

    assert httpx.get(srv.url + "/health").json() == {"status": "ok"}
    assert srv.app.resolved.chat_template is None
    c = client(srv)
    r = ask(c, "two-calls")
    assert plain(r.choices[0].message)["reasoning_content"] == "let me see"
    assert len(r.choices[0].message.tool_calls) == 2


def test_upstream_model_name(server_factory: Any, engine: TestEngine) -> None:
    c = client(server_factory(upstream_api="ollama-generate", upstream_model="qwen3:8b"))
    ask(c, "plain")
    sent = [q for q in engine.requests if "[case:plain]" in json.dumps(q["body"])][-1]["body"]
    assert sent["model"] == "qwen3:8b"


def _sent(engine: TestEngine, case: str) -> dict[str, Any]:
    return [q for q in engine.requests if f"[case:{case}]" in json.dumps(q["body"])][-1]["body"]


@pytest.mark.parametrize("api", ALL_APIS)
def test_a_request_without_max_tokens_gets_the_default_budget_on_completions_only(
    server_factory: Any, engine: TestEngine, api: str
) -> None:
    # vLLM's, SGLang's and llama-cpp-python's /v1/completions stop after 16 tokens when max_tokens is
    # absent (or null); a Chat Completions client that omits it expects the whole answer.
    c = client(server_factory(upstream_api=api))
    ask(c, "plain")
    sent = _sent(engine, "plain")
    if api == "completions":
        assert sent["max_tokens"] == 8192
    else:  # chat endpoints default to the rest of the context, Ollama to no limit
        assert "max_tokens" not in sent and "num_predict" not in (sent.get("options") or {})
    ask(c, "plain", max_tokens=7)
    sent = _sent(engine, "plain")
    assert (sent["options"]["num_predict"] if api.startswith("ollama") else sent["max_tokens"]) == 7


def test_default_max_tokens_is_configurable_and_can_be_turned_off(
    server_factory: Any, engine: TestEngine
) -> None:
    ask(client(server_factory(upstream_api="completions", default_max_tokens=300)), "plain")
    assert _sent(engine, "plain")["max_tokens"] == 300
    ask(client(server_factory(upstream_api="completions", default_max_tokens=None)), "plain")
    assert "max_tokens" not in _sent(engine, "plain")


@pytest.mark.parametrize("stream", [False, True])
def test_an_engine_refusing_the_default_budget_gets_a_hint(
    server_factory: Any, engine: TestEngine, stream: bool
) -> None:
    engine.add("too-long", Script(fault="bad_request"))
    c = client(server_factory(upstream_api="completions"))
    with pytest.raises(openai.BadRequestError) as info:
        ask(c, "too-long", stream=stream)
    message = info.value.body["message"]
    assert "maximum context length" in message and "--default-max-tokens" in message and "8192" in message
    with pytest.raises(openai.BadRequestError) as info:  # the client chose max_tokens: no hint
        ask(c, "too-long", stream=stream, max_tokens=10)
    assert "--default-max-tokens" not in info.value.body["message"]
