"""A multi-step agent turn through `chatparse serve` (an OpenAI-compatible server) in front of the
test engine: the engine replays raw Qwen3 text, the server renders the prompt and parses the calls,
OpenAIRuntime takes them as native calls, run_turn executes them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatparse.runtime import Hooks, OpenAIRuntime, arun_turn, run_turn

from ..server.conftest import model_dir, running
from ..server.engine import Script, TestEngine
from ..server.live import LiveServer
from .helpers import normalize

CALL = (
    "<think>\nI should call the tool.\n</think>\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
)
ANSWER = "It is sunny in Paris.<|im_end|>"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestEngine, LiveServer]]:
    folder: Path = model_dir(tmp_path_factory.mktemp("qwen3-serve"))
    with TestEngine() as eng:
        eng.default = Script(text=CALL)  # any prompt without a case key: the model calls the tool
        eng.add(
            "answer", Script(text=ANSWER)
        )  # once the tool result (which names this case) is in the prompt
        with running(upstream=eng.url, model="Qwen/Qwen3-8B", tokenizer=str(folder)) as srv:
            yield eng, srv


def get_weather(city: str) -> str:
    return f"Sunny in {city}. [case:answer]"


def test_turn_through_chatparse_serve(served: tuple[TestEngine, LiveServer]) -> None:
    eng, srv = served
    prompts = []
    rt = OpenAIRuntime(
        "Qwen/Qwen3-8B",
        base_url=srv.url + "/v1",
        max_retries=0,
        hooks=Hooks(on_prompt_assembled=prompts.append),
    )
    r = run_turn(rt, [{"role": "user", "content": "Weather in Paris?"}], tools=[get_weather])
    assert r.finish_reason == "stop" and r.steps == 2
    first = r.new_messages[0]
    assert first["reasoning_content"] == "I should call the tool."
    assert first["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert r.new_messages[1]["content"] == "Sunny in Paris. [case:answer]"
    assert r.content == "It is sunny in Paris."
    # what the engine was asked: the rendered prompt, with the tool result in it on step 2 and
    # enable_thinking=False pre-writing the empty think block
    engine_prompts = [q["body"]["prompt"] for q in eng.requests if q["path"] == "/v1/completions"][-2:]
    assert engine_prompts[0].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert "<tool_response>\nSunny in Paris. [case:answer]\n</tool_response>" in engine_prompts[1]
    assert [p.request_body["chat_template_kwargs"] for p in prompts] == [{"enable_thinking": False}] * 2


def test_async_turn_through_chatparse_serve(served: tuple[TestEngine, LiveServer]) -> None:
    _, srv = served
    rt = OpenAIRuntime("Qwen/Qwen3-8B", base_url=srv.url + "/v1", max_retries=0)
    sync = run_turn(rt, [{"role": "user", "content": "Weather in Paris?"}], tools=[get_weather])

    async def main():
        result = await arun_turn(rt, [{"role": "user", "content": "Weather in Paris?"}], tools=[get_weather])
        await rt.aclose()
        return result

    assert normalize(asyncio.run(main()).new_messages) == normalize(sync.new_messages)
