"""OllamaRuntime against the test engine's /api/chat over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from chatparse.openai import merge_deltas
from chatparse.runtime import GenerationError, Hooks, OllamaRuntime

from ..server.engine import TestEngine
from .conftest import DECOY, GEMMA_WRAPPED, LOOSE, ask
from .helpers import WEATHER_SCHEMA, normalize

TOOLS = [WEATHER_SCHEMA]


def runtime(engine: TestEngine, **kwargs: Any) -> OllamaRuntime:
    return OllamaRuntime("qwen3:8b", base_url=engine.url, timeout=30, **kwargs)


def last_body(engine: TestEngine) -> dict:
    assert engine.requests[-1]["path"] == "/api/chat"
    return engine.requests[-1]["body"]


@pytest.mark.parametrize("streamed", [False, True])
def test_native_calls_win_over_a_decoy(engine: TestEngine, streamed: bool) -> None:
    rt = runtime(engine, local_tool_call_parser="auto")
    g = (
        rt.generate(ask("native"), tools=TOOLS)
        if not streamed
        else _drain(rt.stream(ask("native"), tools=TOOLS))
    )
    assert [(c.name, c.arguments) for c in g.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert g.tool_calls[0].id.startswith("call_")  # Ollama sends no ids: minted
    assert g.reasoning == "The user wants Paris." and g.finish_reason == "tool_calls" and g.parser == "native"
    assert g.report["local_fallback"]["ignored"][0]["function"]["name"] == "delete_everything"
    g = runtime(engine).generate(ask("native"), tools=TOOLS)
    assert g.content == "Calling the tool. " + DECOY  # fallback off: the content as Ollama sent it


@pytest.mark.parametrize("streamed", [False, True])
def test_local_fallback_recovers_a_gemma_call(engine: TestEngine, streamed: bool) -> None:
    rt = runtime(engine, local_tool_call_parser="gemma")
    g = (
        rt.generate(ask("gemma"), tools=TOOLS)
        if not streamed
        else _drain(rt.stream(ask("gemma"), tools=TOOLS))
    )
    assert [(c.name, c.arguments) for c in g.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert g.content == "Let me look." and g.parser == "local:gemma"
    native = runtime(engine).generate(ask("native-two"), tools=TOOLS).message["tool_calls"][0]
    rec = g.message["tool_calls"][0]
    assert rec.keys() == native.keys() and rec["function"].keys() == native["function"].keys()
    assert runtime(engine).generate(ask("gemma"), tools=TOOLS).content == "Let me look. " + GEMMA_WRAPPED


def test_two_native_calls_in_order(engine: TestEngine) -> None:
    g = _drain(runtime(engine).stream(ask("native-two"), tools=TOOLS))
    assert [c.arguments["city"] for c in g.tool_calls] == ["Paris", "Oslo"]  # type: ignore[index]
    assert len({c.id for c in g.tool_calls}) == 2


def test_observer_sees_the_leak(engine: TestEngine) -> None:
    seen = []
    runtime(engine, hooks=Hooks(on_raw_generation=seen.append)).generate(ask("leak"), tools=TOOLS)
    assert (seen[0].raw_text, seen[0].cleaned_text, seen[0].tool_calls) == (LOOSE, LOOSE, [])
    assert seen[0].adapter == "ollama"


def test_hook_order_and_raising_hooks(engine: TestEngine) -> None:
    order: list[str] = []
    hooks = Hooks(
        on_lifecycle=lambda r: order.append(r.phase),
        on_prompt_assembled=lambda p: order.append("prompt_assembled"),
        on_raw_generation=lambda o: order.append("raw_generation"),
    )
    quiet = runtime(engine, hooks=hooks, local_tool_call_parser="auto").generate(ask("gemma"), tools=TOOLS)
    assert order == ["ready", "generating", "prompt_assembled", "raw_generation", "complete"]
    body = last_body(engine)

    def boom(_: Any) -> None:
        raise ValueError("x")

    loud = runtime(
        engine, hooks=Hooks(**{n: boom for n in Hooks.__dataclass_fields__}), local_tool_call_parser="auto"
    )
    noisy = loud.generate(ask("gemma"), tools=TOOLS)
    assert last_body(engine) == body
    assert normalize(noisy.message) == normalize(quiet.message) and noisy.report == quiet.report


SAMPLERS = {
    "greedy": ({}, {"temperature": 0.0}, ("top_p", "top_k")),
    "top-k": ({"sampler": "top-k", "top_k": 5}, {"temperature": 0.7, "top_k": 5}, ("top_p",)),
    "top-p": (
        {"sampler": "top-p", "top_p": 0.5, "temperature": 1.2},
        {"temperature": 1.2, "top_p": 0.5},
        ("top_k",),
    ),
}


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_options_mapping_on_the_request_received(engine: TestEngine, sampler: str) -> None:
    options, sent, absent = SAMPLERS[sampler]
    runtime(engine).generate(
        ask("plain"), tools=TOOLS, options={**options, "max_tokens": 12, "seed": 3, "stop": ["END"]}
    )
    body = last_body(engine)
    opts = body["options"]
    for key, value in sent.items():
        assert opts[key] == value
    for key in absent:
        assert key not in opts
    assert (opts["num_predict"], opts["seed"], opts["stop"]) == (12, 3, ["END"])
    assert body["think"] is False and body["stream"] is False and body["tools"] == TOOLS


def test_native_options_and_precedence(engine: TestEngine) -> None:
    runtime(engine).generate(
        ask("plain"), options={"num_predict": 7, "think": True, "keep_alive": "1m", "num_ctx": 2048}
    )
    body = last_body(engine)
    assert body["options"]["num_predict"] == 7 and body["think"] is True
    assert body["keep_alive"] == "1m" and body["options"]["num_ctx"] == 2048 and "num_ctx" not in body
    runtime(engine, options={"max_tokens": 20, "enable_thinking": False}).generate(
        ask("plain"), options={"num_predict": 7, "think": True}
    )
    body = last_body(engine)
    assert body["options"]["num_predict"] == 20 and body["think"] is False  # canonical wins
    g = runtime(engine).generate(ask("long"), options={"max_tokens": 4})
    assert g.finish_reason == "length" and g.usage["completion_tokens"] == 4


def test_history_is_converted(engine: TestEngine) -> None:
    history = [
        *ask("plain"),
        {"role": "assistant", "content": None, "reasoning_content": "think",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "user", "content": [{"type": "text", "text": "and "}, {"type": "text", "text": "Oslo? [case:plain]"}]},
    ]  # fmt: skip
    runtime(engine).generate(history)
    sent = last_body(engine)["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "",
        "thinking": "think",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
    }
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_name": "get_weather"}
    assert sent[3] == {"role": "user", "content": "and Oslo? [case:plain]"}


def test_streamed_deltas_add_up(engine: TestEngine) -> None:
    rt = runtime(engine, local_tool_call_parser="auto")
    for case in ("native", "gemma", "answer"):
        s = rt.stream(ask(case), tools=TOOLS)
        merged = merge_deltas(list(s))
        assert merged["content"] == s.result.content and merged.get("tool_calls") == s.result.message.get(
            "tool_calls"
        )


def test_errors(engine: TestEngine) -> None:
    with pytest.raises(GenerationError, match="HTTP 500: engine exploded"):
        runtime(engine).generate(ask("fail"))
    with pytest.raises(GenerationError, match="HTTP 404"):
        runtime(engine).generate([{"role": "user", "content": "[case:nope]"}])
    with pytest.raises(GenerationError, match="ConnectError"):
        OllamaRuntime("m", base_url="http://127.0.0.1:9").generate(ask("plain"))
    with pytest.raises(ValueError, match="base_url"):
        OllamaRuntime("m", base_url="localhost:11434")


def test_async(engine: TestEngine) -> None:
    async def main() -> tuple:
        rt = runtime(engine, local_tool_call_parser="auto")
        a = await rt.agenerate(ask("gemma"), tools=TOOLS)
        s = rt.astream(ask("native"), tools=TOOLS)
        deltas = [d async for d in s]
        await rt.aclose()
        return a, s.result, deltas

    a, b, deltas = asyncio.run(main())
    assert a.parser == "local:gemma" and json.loads(a.message["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Paris"
    }
    assert b.parser == "native" and merge_deltas(deltas)["tool_calls"] == b.message["tool_calls"]


def _drain(s: Any) -> Any:
    for _ in s:
        pass
    return s.result
