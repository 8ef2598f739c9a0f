"""run_turn and friends on ReplayRuntime: the loop's contract, sync and async, streamed or not."""

from __future__ import annotations

import asyncio
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatparse.runtime import (
    GenerationError,
    Hooks,
    ReplayRuntime,
    ToolRegistry,
    TurnFinished,
    arun_turn,
    astream_turn,
    run_turn,
    stream_turn,
)

from .helpers import (
    ANSWER,
    CALL,
    INVALID,
    MALFORMED,
    STEPS,
    UNKNOWN,
    UNKNOWN_ANSWER,
    WEATHER_SCHEMA,
    check_events,
    get_weather,
    normalize,
)

USER = [{"role": "user", "content": "Weather in Paris?"}]
MODEL = "Qwen/Qwen3-8B"


def replay(outputs: list[str] = STEPS, **kwargs) -> ReplayRuntime:
    return ReplayRuntime(outputs, model=MODEL, **kwargs)


def test_full_loop_answers_every_call() -> None:
    r = run_turn(replay(), USER, tools=[get_weather])
    assert r.finish_reason == "stop" and r.steps == 5
    assert [m["role"] for m in r.new_messages] == [
        "assistant", "tool",        # offered tool: run
        "assistant", "tool",        # unknown tool: answered, not dropped
        "assistant", "user",        # malformed call: not run, the model is told
        "assistant", "tool",        # invalid arguments: answered with the validation message
        "assistant",
    ]  # fmt: skip
    first, unknown, malformed, feedback, invalid = (r.new_messages[i] for i in (0, 3, 4, 5, 7))
    assert first["reasoning_content"] == "The user wants the weather in Paris."
    assert first["content"] == "Checking."
    assert first["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert r.new_messages[1] == {
        "role": "tool",
        "tool_call_id": first["tool_calls"][0]["id"],
        "name": "get_weather",
        "content": "Sunny in Paris, 21 °C",
    }
    assert unknown["content"] == UNKNOWN_ANSWER and r.results[1].error == "not_found"
    assert "tool_calls" not in malformed and '"city": "Paris"' in malformed["content"]
    assert feedback["content"].startswith("Your tool call could not be parsed, so it was not run.")
    assert (
        "could not parse region as JSON" in feedback["content"]
        and "Expecting ',' delimiter" in feedback["content"]
    )
    assert invalid["content"].startswith(
        "Invalid arguments for get_weather: arguments: missing required property 'city'"
    )
    assert (
        r.content == "It is sunny in Paris, 21 °C."
        and r.message["reasoning_content"] == "I have the forecast."
    )
    assert r.messages[: len(USER)] == USER and r.messages[len(USER) :] == r.new_messages
    assert [g.parser for g in r.generations] == ["template:qwen3"] * 5


def test_the_model_sees_the_whole_history() -> None:
    rt = replay()
    run_turn(rt, USER, tools=[get_weather])
    seen = [req["messages"] for req in rt.requests]
    assert [len(m) for m in seen] == [1, 3, 5, 7, 9]
    assert seen[1][-1]["content"] == "Sunny in Paris, 21 °C"
    assert seen[2][-1]["content"] == UNKNOWN_ANSWER
    assert all(req["tools"] == [{**WEATHER_SCHEMA_FROM_FUNCTION}] for req in rt.requests)


WEATHER_SCHEMA_FROM_FUNCTION = ToolRegistry([get_weather]).schemas()[0]


def test_stream_events_are_well_formed() -> None:
    events = list(stream_turn(replay(), USER, tools=[get_weather]))
    check_events(events)
    kinds = [e.type for e in events]
    assert kinds.count("tool_call") == 3 and kinds.count("tool_result") == 3 and kinds.count("step") == 5
    assert (
        kinds.index("reasoning")
        < kinds.index("content")
        < kinds.index("tool_call")
        < kinds.index("tool_result")
    )


def test_on_event_sees_what_stream_turn_yields() -> None:
    seen: list = []
    r = run_turn(replay(), USER, tools=[get_weather], on_event=seen.append)
    assert isinstance(seen[-1], TurnFinished) and seen[-1].result is r
    assert normalize([e.type for e in seen]) == [
        e.type for e in stream_turn(replay(), USER, tools=[get_weather])
    ]


def test_async_equals_sync() -> None:
    sync = run_turn(replay(), USER, tools=[get_weather])

    async def main():
        events = [e async for e in astream_turn(replay(), USER, tools=[get_weather])]
        seen = []

        async def on_event(e):
            seen.append(e)

        result = await arun_turn(replay(), USER, tools=[get_weather], on_event=on_event)
        return events, result, seen

    events, result, seen = asyncio.run(main())
    check_events(events)
    assert normalize(events[-1].result.new_messages) == normalize(sync.new_messages)
    assert normalize(result.new_messages) == normalize(sync.new_messages)
    assert len(seen) == len(events)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40))
def test_any_chunking_gives_the_same_turn(chunk_size: int) -> None:
    reference = normalize(run_turn(replay(chunk_size=1000), USER, tools=[get_weather]).new_messages)
    events = list(stream_turn(replay(chunk_size=chunk_size), USER, tools=[get_weather]))
    check_events(events)
    assert normalize(events[-1].result.new_messages) == reference


def test_max_steps() -> None:
    r = run_turn(replay([CALL, CALL, CALL]), USER, tools=[get_weather], max_steps=2)
    assert r.finish_reason == "max_steps" and r.steps == 2 and len(r.results) == 2
    assert r.new_messages[-1]["role"] == "tool"  # the last step's calls still ran
    with pytest.raises(ValueError, match="max_steps"):
        run_turn(replay(), USER, max_steps=0)


def test_calls_to_tools_without_handlers_are_left_pending() -> None:
    r = run_turn(replay([CALL, ANSWER]), USER, tools=[WEATHER_SCHEMA])
    assert r.finish_reason == "tool_calls" and r.steps == 1
    assert [c.name for c in r.pending] == ["get_weather"] and r.pending[0].arguments == {"city": "Paris"}
    assert r.results == [] and r.new_messages[-1]["tool_calls"][0]["id"] == r.pending[0].id


def test_malformed_stop_mode() -> None:
    r = run_turn(replay([MALFORMED, ANSWER]), USER, tools=[get_weather], malformed_calls="stop")
    assert r.finish_reason == "malformed" and r.steps == 1
    assert r.generations[0].malformed_calls[0]["field"] == "tool_calls"
    with pytest.raises(ValueError, match="malformed_calls"):
        run_turn(replay(), USER, malformed_calls="ignore")


def test_authorization_decides_parsers_never_veto() -> None:
    asked = []

    def authorize(call):
        asked.append(call.name)
        return "Weather lookups are disabled." if call.name == "get_weather" else True

    r = run_turn(replay([CALL, UNKNOWN, ANSWER]), USER, tools=[get_weather], authorize=authorize)
    assert [x.content for x in r.results] == ["Weather lookups are disabled.", UNKNOWN_ANSWER]
    assert asked == ["get_weather"]  # an unknown tool is answered before authorization
    assert r.finish_reason == "stop"


def test_options_per_step_and_cut_off_calls() -> None:
    rt = replay([CALL, ANSWER])
    seen = []

    def options(step, history):
        seen.append((step, len(history)))
        return {"max_tokens": 3} if step == 1 else None

    r = run_turn(rt, USER, tools=[get_weather], options=options)
    assert seen == [(1, 1)]
    assert r.finish_reason == "length" and r.steps == 1 and r.results == []  # a cut-off call never runs
    assert rt.requests[0]["options"].max_tokens == 3


def test_tool_errors_are_answers() -> None:
    def get_weather(city: str) -> str:
        raise ConnectionError("weather service down")

    r = run_turn(replay([CALL, ANSWER]), USER, tools=[get_weather])
    assert (
        r.results[0].content == "Error: ConnectionError: weather service down" and r.finish_reason == "stop"
    )


def test_runtime_failures_raise_generation_error_and_report(caplog: pytest.LogCaptureFixture) -> None:
    phases = []
    rt = replay([CALL], hooks=Hooks(on_lifecycle=lambda r: phases.append(r.phase), on_error=lambda r: 1 / 0))
    with (
        caplog.at_level(logging.ERROR, logger="chatparse.runtime"),
        pytest.raises(GenerationError, match="no recorded output left"),
    ):
        run_turn(rt, USER, tools=[get_weather])
    assert phases == ["ready", "generating", "complete", "generating", "error"]
    assert "hook on_error raised" in caplog.text  # logged, and the GenerationError still propagates


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="runtime"):
        run_turn(object(), USER)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="messages"):
        run_turn(replay(), "hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tools"):
        run_turn(replay(), USER, tools=get_weather)


def test_invalid_arguments_step_alone() -> None:
    r = run_turn(replay([INVALID, ANSWER]), USER, tools=[get_weather])
    assert "missing required property 'city'" in r.results[0].content
    # the parser typed "2" by the offered schema, so only the missing city is a problem
    assert r.generations[0].tool_calls[0].arguments == {"days": 2}
    assert "days" not in r.results[0].content.split(". Expected parameters")[0]
