"""OpenAIRuntime against the test engine over loopback HTTP, with the real openai client."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from chatparse.runtime import GenerationError, Hooks, OpenAIRuntime, ParseContext, ToolParseResult

from ..detect.helpers import check_region_events
from ..server.engine import TestEngine
from .conftest import DECOY, GEMMA_WRAPPED, LOOSE, ask
from .helpers import WEATHER_SCHEMA, normalize

TOOLS = [WEATHER_SCHEMA]


def runtime(engine: TestEngine, **kwargs: Any) -> OpenAIRuntime:
    kwargs.setdefault("max_retries", 0)
    return OpenAIRuntime("test-model", base_url=engine.url + "/v1", **kwargs)


def last_body(engine: TestEngine) -> dict:
    return engine.requests[-1]["body"]


@pytest.mark.parametrize("streamed", [False, True])
def test_native_calls_win_over_a_decoy_in_content(engine: TestEngine, streamed: bool) -> None:
    rt = runtime(engine, local_tool_call_parser="auto")
    run = rt.generate if not streamed else lambda *a, **k: _drain(rt.stream(*a, **k))
    g = run(ask("native"), tools=TOOLS)
    assert [(c.id, c.name, c.arguments) for c in g.tool_calls] == [
        ("call_native1", "get_weather", {"city": "Paris"})
    ]
    assert g.finish_reason == "tool_calls" and g.parser == "native"
    assert g.reasoning == "The user wants Paris."
    # the decoy is not a call; the fallback found it and reports it as ignored
    ignored = g.report["local_fallback"]["ignored"]
    assert [c["function"]["name"] for c in ignored] == ["delete_everything"]
    assert g.message["tool_calls"] == [
        {
            "id": "call_native1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ]


def test_without_a_local_parser_the_content_is_verbatim(engine: TestEngine) -> None:
    g = runtime(engine).generate(ask("native"), tools=TOOLS)
    assert g.content == "Calling the tool. " + DECOY and "local_fallback" not in g.report
    g = runtime(engine).generate(ask("gemma"), tools=TOOLS)
    assert g.tool_calls == () and g.content == "Let me look. " + GEMMA_WRAPPED and g.finish_reason == "stop"


@pytest.mark.parametrize("parser", ["auto", "gemma"])
@pytest.mark.parametrize("streamed", [False, True])
def test_local_fallback_recovers_a_gemma_call(engine: TestEngine, parser: str, streamed: bool) -> None:
    rt = runtime(engine, local_tool_call_parser=parser)
    native = rt.generate(ask("native-two"), tools=TOOLS)
    g = (
        rt.generate(ask("gemma"), tools=TOOLS)
        if not streamed
        else _drain(rt.stream(ask("gemma"), tools=TOOLS))
    )
    assert [(c.name, c.arguments) for c in g.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert g.content == "Let me look." and g.finish_reason == "tool_calls" and g.parser == "local:gemma"
    assert g.report["local_fallback"]["calls"] == 1
    # recovered calls look exactly like native ones
    rec, nat = g.message["tool_calls"][0], native.message["tool_calls"][0]
    assert rec.keys() == nat.keys() and rec["function"].keys() == nat["function"].keys()
    assert rec["type"] == "function" and rec["id"].startswith("call_") and len(rec["id"]) == 29
    assert json.loads(rec["function"]["arguments"]) == {"city": "Paris"}


def test_bare_gemma_and_loose_keyed_need_the_offered_name(engine: TestEngine) -> None:
    rt = runtime(engine, local_tool_call_parser="auto")
    assert rt.generate(ask("gemma-bare"), tools=TOOLS).tool_calls[0].arguments == {"city": "Paris"}
    assert rt.generate(ask("leak"), tools=TOOLS).tool_calls[0].name == "get_weather"
    assert rt.generate(ask("leak")).tool_calls == ()  # not offered: not a call
    # a family that does not match declines
    assert (
        runtime(engine, local_tool_call_parser="hermes").generate(ask("gemma"), tools=TOOLS).tool_calls == ()
    )
    with pytest.raises(ValueError, match="unknown local_tool_call_parser 'gemma5'"):
        runtime(engine, local_tool_call_parser="gemma5")


def test_callable_local_parser(engine: TestEngine) -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []

    def mine(text: str, ctx: ParseContext) -> ToolParseResult:
        seen.append((text, ctx.tool_names))
        if text.startswith("get_weather\n"):
            return ToolParseResult([{"name": "get_weather", "arguments": {"city": "Paris"}}], "")
        return ToolParseResult([], text)

    rt = runtime(engine, local_tool_call_parser=mine)
    g = _drain(rt.stream(ask("leak"), tools=TOOLS))
    assert seen == [(LOOSE, ("get_weather",))]
    assert (
        g.parser == "callable:mine" and g.tool_calls[0].arguments == {"city": "Paris"} and g.content is None
    )
    assert rt.generate(ask("native"), tools=TOOLS).parser == "native" and len(seen) == 1  # natives: not run

    def broken(text: str, ctx: ParseContext) -> Any:
        raise RuntimeError("bug")

    g = runtime(engine, local_tool_call_parser=broken).generate(ask("leak"), tools=TOOLS)
    assert g.tool_calls == () and g.content == LOOSE and "RuntimeError: bug" in g.report["errors"][0]["error"]


def test_the_observer_sees_the_leak(engine: TestEngine) -> None:
    seen = []
    rt = runtime(engine, hooks=Hooks(on_raw_generation=seen.append))
    g = rt.generate(ask("leak"), tools=TOOLS)
    (obs,) = seen
    assert obs.raw_text == LOOSE and obs.cleaned_text == LOOSE and obs.tool_calls == []
    assert obs.adapter == "openai" and obs.streamed is False and obs.stream_id == g.stream_id
    assert obs.parser is None and obs.events == [] and obs.finish_reason == "stop"
    # with the fallback on, the same text is claimed and the observer says by whom
    seen.clear()
    runtime(engine, local_tool_call_parser="auto", hooks=Hooks(on_raw_generation=seen.append)).generate(
        ask("leak"), tools=TOOLS
    )
    assert seen[0].parser == "local:loose_keyed" and seen[0].raw_text == LOOSE and seen[0].cleaned_text == ""
    assert seen[0].tool_calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    # ... with the region events of the fallback's parse, offsets into the provider's content
    obs = seen[0]
    assert obs.input_text == LOOSE
    check_region_events(obs.events, obs.input_text)
    (call,) = [e for e in obs.events if e["type"] == "region_close" and e["field"] == "tool_calls"]
    assert call["recognizer"] == "loose_keyed" and call["value"] == [
        {"name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    assert LOOSE[call["body_start"] : call["body_end"]].strip() == LOOSE.strip()


@pytest.mark.parametrize("parser", ["auto", "gemma"])
@pytest.mark.parametrize("streamed", [False, True])
def test_the_observer_sees_the_fallback_regions(engine: TestEngine, parser: str, streamed: bool) -> None:
    seen = []
    rt = runtime(engine, local_tool_call_parser=parser, hooks=Hooks(on_raw_generation=seen.append))
    g = (
        rt.generate(ask("gemma"), tools=TOOLS)
        if not streamed
        else _drain(rt.stream(ask("gemma"), tools=TOOLS))
    )
    (obs,) = seen
    assert obs.parser == "local:gemma" and obs.raw_text == obs.input_text == "Let me look. " + GEMMA_WRAPPED
    check_region_events(obs.events, obs.input_text)
    spans = [
        (e["type"], e["field"], obs.input_text[e["start"] : e["end"]])
        for e in obs.events
        if e["type"] in ("region_open", "region_close")
    ]
    assert spans[:2] == [("region_open", "content", ""), ("region_close", "content", "")]
    assert spans[2][:2] == ("region_open", "tool_calls") and spans[2][2].startswith(
        "<|tool_call>call:get_weather"
    )
    assert spans[3] == ("region_close", "tool_calls", "<tool_call|>")
    assert (
        [c["function"]["name"] for c in obs.tool_calls] == ["get_weather"] == [c.name for c in g.tool_calls]
    )
    # native calls win: the fallback's regions are still shown (the decoy is hermes: only "auto" sees it)
    seen.clear()
    rt.generate(ask("native"), tools=TOOLS)
    assert seen[0].parser == "native" and seen[0].input_text == "Calling the tool. " + DECOY
    check_region_events(seen[0].events, seen[0].input_text)
    decoys = [e for e in seen[0].events if e["type"] == "region_close" and e["field"] == "tool_calls"]
    assert [e["recognizer"] for e in decoys] == (["hermes"] if parser == "auto" else [])


def test_hooks_fire_in_order_and_a_raising_hook_changes_nothing(engine: TestEngine) -> None:
    order: list[str] = []

    def note(name: str):
        return lambda x: order.append(name if name != "lifecycle" else x.phase)

    hooks = Hooks(
        on_lifecycle=note("lifecycle"),
        on_prompt_assembled=note("prompt_assembled"),
        on_raw_generation=note("raw_generation"),
    )
    rt = runtime(engine, hooks=hooks, local_tool_call_parser="auto")
    quiet = _drain(rt.stream(ask("native"), tools=TOOLS))
    assert order == ["ready", "generating", "prompt_assembled", "raw_generation", "complete"]
    body_quiet = last_body(engine)

    def boom(_: Any) -> None:
        raise RuntimeError("hook bug")

    loud = Hooks(**{name: boom for name in Hooks.__dataclass_fields__})
    rt = runtime(engine, hooks=loud, local_tool_call_parser="auto")
    noisy = _drain(rt.stream(ask("native"), tools=TOOLS))
    assert last_body(engine) == body_quiet
    strip = lambda g: normalize({"m": g.message, "r": g.report, "f": g.finish_reason, "raw": g.raw_text})  # noqa: E731
    assert strip(noisy) == strip(quiet)


def test_prompt_assembled_is_the_request_body(engine: TestEngine) -> None:
    seen = []
    rt = runtime(engine, hooks=Hooks(on_prompt_assembled=seen.append))
    rt.generate(ask("plain"), tools=TOOLS)
    (p,) = seen
    assert p.kind == "request-body" and p.prompt is None and p.tools == TOOLS
    assert p.request_body == last_body(engine)  # exactly what the server received


SAMPLERS = {
    "greedy": ({}, {"temperature": 0.0}, ("top_p", "top_k")),
    "top-k": (
        {"sampler": "top-k", "top_k": 5, "temperature": 0.9},
        {"temperature": 0.9, "top_k": 5},
        ("top_p",),
    ),
    "top-p": ({"sampler": "top-p", "top_p": 0.5}, {"temperature": 0.7, "top_p": 0.5}, ("top_k",)),
}


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_options_mapping_on_the_request_received(engine: TestEngine, sampler: str) -> None:
    options, sent, absent = SAMPLERS[sampler]
    runtime(engine).generate(ask("plain"), options={**options, "seed": 7, "stop": ["\n\n"], "max_tokens": 33})
    body = last_body(engine)
    for key, value in sent.items():
        assert body[key] == value
    for key in absent:
        assert key not in body
    assert (body["max_tokens"], body["seed"], body["stop"]) == (33, 7, ["\n\n"])
    assert body["chat_template_kwargs"] == {"enable_thinking": False}  # always sent, default off
    assert body["stream"] is False and "stream_options" not in body


def test_options_precedence_and_passthrough(engine: TestEngine) -> None:
    rt = runtime(engine, options={"max_tokens": 50, "enable_thinking": True})
    _drain(
        rt.stream(ask("plain"), options={"native": {"max_completion_tokens": 9, "repetition_penalty": 1.1}})
    )
    body = last_body(engine)
    # the runtime default (canonical) wins over the native name, which is then not sent
    assert body["max_tokens"] == 50 and "max_completion_tokens" not in body
    assert body["repetition_penalty"] == 1.1 and body["chat_template_kwargs"] == {"enable_thinking": True}
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    runtime(engine).generate(ask("plain"), options={"max_completion_tokens": 9})
    assert last_body(engine)["max_tokens"] == 9
    # a native chat_template_kwargs is merged; its enable_thinking is the fallback
    runtime(engine).generate(
        ask("plain"), options={"chat_template_kwargs": {"enable_thinking": True, "x": 1}}
    )
    assert last_body(engine)["chat_template_kwargs"] == {"enable_thinking": True, "x": 1}
    runtime(engine, chat_template_kwargs=False).generate(ask("plain"))
    assert "chat_template_kwargs" not in last_body(engine)


def test_max_tokens_reaches_the_engine(engine: TestEngine) -> None:
    g = runtime(engine).generate(ask("long"), options={"max_tokens": 5})
    assert g.finish_reason == "length" and g.usage["completion_tokens"] == 5


def test_history_sent_and_reasoning_dropped(engine: TestEngine) -> None:
    history = [
        *ask("plain"),
        {"role": "assistant", "content": None, "reasoning_content": "hm", "chatparse": {"x": 1},
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "sunny"},
    ]  # fmt: skip
    runtime(engine).generate(history)
    sent = last_body(engine)["messages"]
    assert "reasoning_content" not in sent[1] and "chatparse" not in sent[1] and sent[1]["tool_calls"]
    assert sent[2] == history[2]
    runtime(engine, send_reasoning=True).generate(history)
    assert last_body(engine)["messages"][1]["reasoning_content"] == "hm"


def test_streamed_deltas_add_up_to_the_message(engine: TestEngine) -> None:
    from chatparse.openai import merge_deltas

    rt = runtime(engine, local_tool_call_parser="auto")
    for case in ("native", "gemma", "answer", "native-two"):
        s = rt.stream(ask(case), tools=TOOLS)
        deltas = list(s)
        merged = merge_deltas(deltas)
        assert merged["content"] == s.result.content
        assert merged.get("reasoning_content") == s.result.reasoning
        assert merged.get("tool_calls") == s.result.message.get("tool_calls")


def test_errors_are_generation_errors(engine: TestEngine) -> None:
    errors = []
    rt = runtime(engine, hooks=Hooks(on_error=errors.append))
    with pytest.raises(GenerationError, match="HTTP 500: engine exploded") as info:
        rt.generate(ask("fail"))
    assert isinstance(info.value.__cause__, openai.APIStatusError) and info.value.adapter == "openai"
    assert errors[0].phase == "error" and errors[0].error is info.value
    dead = OpenAIRuntime(
        "m", client=openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0)
    )
    with pytest.raises(GenerationError, match="cannot reach"):
        dead.generate(ask("plain"))


def test_async_generate_and_stream(engine: TestEngine) -> None:
    async def main() -> tuple:
        rt = runtime(engine, local_tool_call_parser="auto")
        a = await rt.agenerate(ask("gemma"), tools=TOOLS)
        s = rt.astream(ask("native"), tools=TOOLS)
        deltas = [d async for d in s]
        await rt.aclose()
        return a, s.result, deltas

    a, b, deltas = asyncio.run(main())
    assert a.tool_calls[0].name == "get_weather" and a.parser == "local:gemma"
    assert b.tool_calls[0].id == "call_native1" and deltas[-1]["tool_calls"][0]["id"] == "call_native1"
    assert normalize(a.message) == normalize(
        runtime(engine, local_tool_call_parser="auto").generate(ask("gemma"), tools=TOOLS).message
    )


def _drain(s: Any) -> Any:
    for _ in s:
        pass
    return s.result
