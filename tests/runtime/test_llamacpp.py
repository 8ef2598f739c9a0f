"""LlamaCppRuntime: a tiny GGUF written by the test, run in-process by llama-cpp-python, its output
forced per step by a GBNF grammar (tests/support/llamacpp.py); and llama-cpp-python's own
OpenAI-compatible server through OpenAIRuntime."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chatparse.runtime import Hooks, LlamaCppRuntime, OpenAIRuntime, run_turn, stream_turn

from ..server.conftest import QWEN_TEMPLATE
from ..support import llamacpp as L
from .helpers import ANSWER, CALL, INVALID, MALFORMED, UNKNOWN, UNKNOWN_ANSWER, check_events, get_weather

pytestmark = pytest.mark.llamacpp

END = "<|im_end|>"  # the CONTROL end-of-turn token: it ends the generation and is not in the text
STEPS = [s.removesuffix(END) for s in (CALL, UNKNOWN, MALFORMED, INVALID, ANSWER)]
USER = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> L.TinyModel:
    return L.write_tiny_gguf(
        tmp_path_factory.mktemp("gguf") / "tiny-chatml.gguf", chat_template=QWEN_TEMPLATE
    )


@pytest.fixture(scope="module")
def llm(model: L.TinyModel) -> Any:
    return L.load(model)


class Recording:
    """The real `Llama`, with the keyword arguments of each `create_completion` call recorded."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def create_completion(self, prompt: str, **kwargs: Any) -> Any:
        self.calls.append((prompt, kwargs))
        return self._llm.create_completion(prompt, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)


def forced(model: L.TinyModel, outputs: list[str]) -> Any:
    """Per-step options: step N's grammar admits exactly outputs[N - 1]."""
    return lambda step, history: {"grammar": L.replay_grammar(outputs[step - 1], model)}


def test_loading_reports_and_template_resolution(model: L.TinyModel) -> None:
    phases: list[tuple[str, float | None]] = []
    rt = LlamaCppRuntime(model.path, hooks=Hooks(on_lifecycle=lambda r: phases.append((r.phase, r.progress))))
    assert phases == [("loading", 0.0), ("compiling", None), ("loading", 1.0), ("ready", None)]
    assert rt.model == "tiny-chatml.gguf" and rt._template_name == "qwen3"  # from the GGUF's chat template
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        LlamaCppRuntime(Path(model.path).with_name("missing.gguf"))


def test_full_loop_with_a_forced_model(model: L.TinyModel, llm: Any) -> None:
    rec = Recording(llm)
    rt = LlamaCppRuntime(rec, model_id="tiny")
    events = list(stream_turn(rt, USER, tools=[get_weather], options=forced(model, STEPS)))
    check_events(events)
    r = events[-1].result
    assert r.finish_reason == "stop" and r.steps == 5
    assert [m["role"] for m in r.new_messages] == [
        "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert r.new_messages[0]["reasoning_content"] == "The user wants the weather in Paris."
    assert r.results[0].content == "Sunny in Paris, 21 °C"
    assert r.results[1].content == UNKNOWN_ANSWER
    assert r.new_messages[5]["content"].startswith("Your tool call could not be parsed")
    assert "missing required property 'city'" in r.results[2].content
    assert r.content == "It is sunny in Paris, 21 °C."
    # the model saw its own calls and the results: the rendered prompt of the last step has them
    last_prompt = rec.calls[-1][0]
    assert last_prompt.count("<tool_call>") == 3 and UNKNOWN_ANSWER in last_prompt
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in last_prompt  # arguments as an object


SAMPLERS = {
    "greedy": ({}, {"temperature": 0.0}, ("top_k", "top_p", "min_p")),
    "top-k": (
        {"sampler": "top-k", "top_k": 7},
        {"temperature": 0.7, "top_k": 7, "top_p": 1.0, "min_p": 0.0},
        (),
    ),
    "top-p": (
        {"sampler": "top-p", "top_p": 0.4},
        {"temperature": 0.7, "top_p": 0.4, "top_k": 0, "min_p": 0.0},
        (),
    ),
}


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_options_mapping_on_the_call_llama_cpp_received(model: L.TinyModel, llm: Any, sampler: str) -> None:
    options, sent, absent = SAMPLERS[sampler]
    rec = Recording(llm)
    rt = LlamaCppRuntime(rec)
    grammar = L.replay_grammar("Hello there.", model)
    g = rt.generate(
        USER, options={**options, "max_tokens": 50, "seed": 11, "stop": ["zzz"], "grammar": grammar}
    )
    assert g.content == "Hello there." and g.finish_reason == "stop"
    prompt, kwargs = rec.calls[-1]
    for key, value in sent.items():
        assert kwargs[key] == value
    for key in absent:
        assert key not in kwargs
    assert (kwargs["max_tokens"], kwargs["seed"], kwargs["stop"]) == (50, 11, ["zzz"])
    assert type(kwargs["grammar"]).__name__ == "LlamaGrammar"
    # enable_thinking reached the chat template: off by default, which pre-writes an empty think block
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    rt.generate(USER, options={"enable_thinking": True, "grammar": grammar})
    assert rec.calls[-1][0].endswith("<|im_start|>assistant\n")


def test_options_take_effect(model: L.TinyModel, llm: Any) -> None:
    rt = LlamaCppRuntime(llm)
    long = L.replay_grammar("It is sunny and warm today in Paris.", model)
    g = rt.generate(USER, options={"grammar": long, "max_tokens": 5})
    assert g.finish_reason == "length" and g.usage["completion_tokens"] == 5
    g = rt.generate(USER, options={"grammar": long, "stop": [" warm"]})
    assert g.content == "It is sunny and" and g.finish_reason == "stop"
    g = rt.generate(USER, options={"grammar": long, "n_predict": 3})  # the native fallback name
    assert g.usage["completion_tokens"] == 3
    letters = "root ::= " + " ".join(["[a-z]"] * 24)

    def sample(**options: Any) -> str:
        return rt.generate(USER, options={"grammar": letters, **options}).content or ""

    assert sample(sampler="top-k", top_k=20, temperature=2.0, seed=1) == sample(
        sampler="top-k", top_k=20, temperature=2.0, seed=1
    )
    assert sample(sampler="top-k", top_k=20, temperature=2.0, seed=1) != sample(
        sampler="top-k", top_k=20, temperature=2.0, seed=2
    )
    assert sample(seed=1) == sample(seed=2)  # greedy ignores the seed


def test_enable_thinking_prompt_prefix_is_seen(model: L.TinyModel, llm: Any) -> None:
    rt = LlamaCppRuntime(llm)
    # thinking on: the model opens <think> itself
    g = rt.generate(
        USER,
        options={"enable_thinking": True, "grammar": L.replay_grammar("<think>\nhm\n</think>\n\nHi.", model)},
    )
    assert (g.reasoning, g.content) == ("hm", "Hi.")
    # thinking off: the prompt pre-wrote the (empty) block; the output is the answer
    g = rt.generate(USER, options={"grammar": L.replay_grammar("Hi.", model)})
    assert (g.reasoning, g.content) == (None, "Hi.")


def test_observation_and_streaming(model: L.TinyModel, llm: Any) -> None:
    seen: list[Any] = []
    rt = LlamaCppRuntime(llm, hooks=Hooks(on_raw_generation=seen.append))
    s = rt.stream(USER, tools=[get_weather], options={"grammar": L.replay_grammar(STEPS[0], model)})
    deltas = list(s)
    assert len(deltas) > 3 and s.result.tool_calls[0].arguments == {"city": "Paris"}
    obs = seen[0]
    assert obs.raw_text == STEPS[0] and obs.streamed and obs.parser == "template:qwen3"
    assert any(e["type"] == "region_close" and e["field"] == "tool_calls" for e in obs.events)


def test_async_turn(model: L.TinyModel, llm: Any) -> None:
    from chatparse.runtime import arun_turn

    rt = LlamaCppRuntime(llm)
    outputs = [STEPS[0], STEPS[4]]
    sync = run_turn(rt, USER, tools=[get_weather], options=forced(model, outputs))
    result = asyncio.run(arun_turn(rt, USER, tools=[get_weather], options=forced(model, outputs)))
    assert [m["role"] for m in result.new_messages] == [m["role"] for m in sync.new_messages]
    assert result.content == sync.content == "It is sunny in Paris, 21 °C."


def test_llama_cpp_server_through_openai_runtime(model: L.TinyModel) -> None:
    """llama-cpp-python's server does not lift calls from a GGUF Jinja template: the local fallback does."""
    with L.llama_server(model) as base:
        rt = OpenAIRuntime("tiny", base_url=base + "/v1", max_retries=0, local_tool_call_parser="auto")
        grammar = {"grammar": L.replay_grammar(STEPS[0].split("</think>\n\n", 1)[1], model)}
        g = rt.generate(USER, tools=[get_weather], options=grammar)
        assert g.parser == "local:hermes" and g.tool_calls[0].arguments == {"city": "Paris"}
        assert g.content == "Checking." and g.finish_reason == "tool_calls"
        s = rt.stream(USER, tools=[get_weather], options=grammar)
        list(s)
        assert s.result.tool_calls[0].name == "get_weather"


def test_observation_on_the_auto_path(model: L.TinyModel, llm: Any) -> None:
    """`template="auto"`: template-less detection, and the observer gets its region events."""
    from ..detect.helpers import check_region_events

    seen: list[Any] = []
    rt = LlamaCppRuntime(llm, template="auto", hooks=Hooks(on_raw_generation=seen.append))
    s = rt.stream(USER, tools=[get_weather], options={"grammar": L.replay_grammar(STEPS[0], model)})
    list(s)
    assert s.result.tool_calls[0].arguments == {"city": "Paris"}
    rt.generate(USER, tools=[get_weather], options={"grammar": L.replay_grammar(STEPS[2], model)})
    call, bad = seen
    assert call.parser == "auto:hermes" and call.streamed and call.input_text.endswith(call.raw_text)
    for obs in seen:
        check_region_events(obs.events, obs.input_text)
    (close,) = [e for e in call.events if e["type"] == "region_close" and e["field"] == "tool_calls"]
    assert (
        call.input_text[close["start"] : close["end"]] == "</tool_call>" and close["recognizer"] == "hermes"
    )
    assert bad.tool_calls == [] and [
        e["recognizer"] for e in bad.events if e["type"] == "region_malformed"
    ] == ["hermes"]
