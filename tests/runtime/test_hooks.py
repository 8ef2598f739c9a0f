"""Hooks and observers: order, isolation, no work without hooks, the raw-generation observation."""

from __future__ import annotations

import logging

import pytest

from chatparse.runtime import Hooks, LifecycleReport, ReplayRuntime, _generation, _hooks, run_turn

from ..detect.helpers import check_region_events
from .helpers import CALL, MALFORMED, get_weather

USER = [{"role": "user", "content": "Weather in Paris?"}]


class Counting:
    """Count constructions of a class while delegating to it (the real class does the work)."""

    def __init__(self, cls: type) -> None:
        self.cls, self.n = cls, 0

    def __call__(self, *args, **kwargs):
        self.n += 1
        return self.cls(*args, **kwargs)


@pytest.fixture
def counters(monkeypatch: pytest.MonkeyPatch) -> dict[str, Counting]:
    c = {
        "parser": Counting(_generation.ResponseParser),
        "auto": Counting(_generation.AutoParser),
        "report": Counting(_hooks.LifecycleReport),
        "observation": Counting(_generation.RawGeneration),
    }
    monkeypatch.setattr(_generation, "ResponseParser", c["parser"])
    monkeypatch.setattr(_generation, "AutoParser", c["auto"])
    monkeypatch.setattr(_hooks, "LifecycleReport", c["report"])
    monkeypatch.setattr(_generation, "RawGeneration", c["observation"])
    return c


def test_no_hooks_no_work(counters: dict[str, Counting]) -> None:
    rt = ReplayRuntime([CALL, "Done.<|im_end|>"], model="Qwen/Qwen3-8B", hooks=Hooks())
    assert rt.hooks is None  # an empty Hooks is no hooks
    run_turn(rt, USER, tools=[get_weather])
    assert {k: v.n for k, v in counters.items()} == {"parser": 0, "auto": 0, "report": 0, "observation": 0}
    # one observer: observations are built (one core re-parse each), lifecycle reports are not
    seen = []
    rt = ReplayRuntime(
        [CALL, "Done.<|im_end|>"], model="Qwen/Qwen3-8B", hooks={"on_raw_generation": seen.append}
    )
    run_turn(rt, USER, tools=[get_weather])
    assert {k: v.n for k, v in counters.items()} == {"parser": 2, "auto": 0, "report": 0, "observation": 2}
    assert len(seen) == 2
    # auto mode (no template for the model): one detect re-parse per observation, none without
    for k in counters.values():
        k.n = 0
    run_turn(ReplayRuntime([CALL, "Done."], model="replay"), USER, tools=[get_weather])
    assert {k: v.n for k, v in counters.items()} == {"parser": 0, "auto": 0, "report": 0, "observation": 0}
    rt = ReplayRuntime([CALL, "Done."], model="replay", hooks={"on_raw_generation": seen.append})
    run_turn(rt, USER, tools=[get_weather])
    assert {k: v.n for k, v in counters.items()} == {"parser": 0, "auto": 2, "report": 0, "observation": 2}


def test_lifecycle_order_over_a_turn() -> None:
    phases: list[tuple[str, str]] = []
    hooks = Hooks(
        on_lifecycle=lambda r: phases.append(("all", r.phase)),
        on_generating=lambda r: phases.append(("own", r.phase)),
        on_complete=lambda r: phases.append(("own", r.phase)),
    )
    rt = ReplayRuntime([CALL, "Done.<|im_end|>"], model="Qwen/Qwen3-8B", hooks=hooks)
    run_turn(rt, USER, tools=[get_weather])
    step = [("all", "generating"), ("own", "generating"), ("all", "complete"), ("own", "complete")]
    assert phases == [("all", "ready"), *step, *step]


def test_reports_are_normalized() -> None:
    reports: list[LifecycleReport] = []
    rt = ReplayRuntime([CALL], model="Qwen/Qwen3-8B", hooks=Hooks(on_lifecycle=reports.append))
    g = rt.generate(USER, tools=[get_weather])
    ready, generating, complete = reports
    assert all(r.adapter == "replay" and r.model == "Qwen/Qwen3-8B" and r.at.endswith("Z") for r in reports)
    assert generating.stream_id == complete.stream_id == g.stream_id and complete.detail == "tool_calls"
    with pytest.raises(ValueError, match="unknown lifecycle phase"):
        Hooks(on_lifecycle=print).lifecycle("warming", adapter="a", model="m")
    with pytest.raises(TypeError, match="on_ready must be callable"):
        Hooks(on_ready=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown hook"):
        ReplayRuntime([], hooks={"on_load": print})


def test_raising_hooks_change_nothing(caplog: pytest.LogCaptureFixture) -> None:
    def boom(_):
        raise RuntimeError("observer bug")

    quiet = run_turn(
        ReplayRuntime([CALL, "Done.<|im_end|>"], model="Qwen/Qwen3-8B"), USER, tools=[get_weather]
    )
    loud_hooks = Hooks(**{name: boom for name in Hooks.__dataclass_fields__})
    with caplog.at_level(logging.ERROR, logger="chatparse.runtime"):
        loud = run_turn(
            ReplayRuntime([CALL, "Done.<|im_end|>"], model="Qwen/Qwen3-8B", hooks=loud_hooks),
            USER,
            tools=[get_weather],
        )
    from .helpers import normalize

    assert normalize(loud.new_messages) == normalize(quiet.new_messages)
    assert caplog.text.count("observer bug") >= 8  # every hook raised, each one logged


def test_observers_cannot_change_the_generation() -> None:
    def vandal(obs):
        obs.tool_calls.clear()
        obs.events.clear()

    rt = ReplayRuntime(
        [CALL], model="Qwen/Qwen3-8B", hooks=Hooks(on_raw_generation=vandal, on_prompt_assembled=vandal)
    )
    g = rt.generate(USER, tools=[get_weather])
    assert g.tool_calls and g.message["tool_calls"]


def test_raw_generation_observation_has_region_events_with_offsets() -> None:
    seen = []
    prompt = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
    rt = ReplayRuntime(
        [CALL, MALFORMED], model="Qwen/Qwen3-8B", prompt=prompt, hooks=Hooks(on_raw_generation=seen.append)
    )
    g = rt.generate(USER, tools=[get_weather])
    obs = seen[0]
    assert obs.raw_text == CALL and obs.parser == "template:qwen3" and obs.stream_id == g.stream_id
    assert obs.reasoning == ["The user wants the weather in Paris."] and obs.cleaned_text == "Checking."
    assert obs.tool_calls == g.message["tool_calls"]
    assert obs.input_text.endswith(CALL)
    fields = [(e["type"], e["field"]) for e in obs.events if e["type"] != "region_chunk"]
    assert ("region_open", "tool_calls") in fields and ("region_close", "tool_calls") in fields
    for e in obs.events:
        if e["type"] == "region_open" and e["field"] == "tool_calls":
            assert obs.input_text[e["start"] : e["end"]].strip() == "<tool_call>"
        if e["type"] == "region_close" and e["field"] == "tool_calls":
            assert obs.input_text[e["start"] : e["end"]] == "</tool_call>"
    # a malformed call: visible as raw text and a region_malformed event, with no calls
    rt.generate(USER, tools=[get_weather])
    bad = seen[1]
    assert bad.tool_calls == [] and bad.raw_text == MALFORMED
    malformed = [e for e in bad.events if e["type"] == "region_malformed"]
    assert malformed and malformed[0]["field"] == "tool_calls"
    assert bad.errors[0]["field"] == "tool_calls"


def test_prompt_assembled_for_a_local_runtime() -> None:
    seen = []
    rt = ReplayRuntime(["Hi<|im_end|>"], model="Qwen/Qwen3-8B", hooks=Hooks(on_prompt_assembled=seen.append))
    s = rt.stream(USER)
    list(s)
    (p,) = seen
    assert p.kind == "rendered-prompt" and p.prompt == "<|im_start|>assistant\n" and p.request_body is None
    assert p.streamed is True and p.stream_id == s.result.stream_id and p.messages == USER


def test_raw_generation_observation_has_region_events_on_the_auto_path() -> None:
    """No template for the model: the detect layer's region events, with offsets, as on the
    template path (`chatparse.detect.AutoParser`: fields reasoning / content / tool_calls)."""
    seen = []
    prompt = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n"
    body = CALL.removeprefix("<think>\n")  # the prompt pre-opened the reasoning
    rt = ReplayRuntime([body], model="replay", prompt=prompt, hooks=Hooks(on_raw_generation=seen.append))
    g = rt.generate(USER, tools=[get_weather])
    obs = seen[0]
    assert obs.raw_text == body and obs.parser == "auto:hermes" and obs.stream_id == g.stream_id
    assert obs.reasoning == ["The user wants the weather in Paris."] and obs.cleaned_text == "Checking."
    assert obs.tool_calls == g.message["tool_calls"] and len(obs.tool_calls) == 1
    assert obs.input_text == "<think>" + body
    check_region_events(obs.events, obs.input_text)
    fields = [(e["type"], e["field"], e["recognizer"]) for e in obs.events if e["type"] != "region_chunk"]
    assert fields[:2] == [
        ("region_open", "reasoning", "think_tag"),
        ("region_close", "reasoning", "think_tag"),
    ]
    assert ("region_open", "tool_calls", "hermes") in fields and (
        "region_close",
        "tool_calls",
        "hermes",
    ) in fields
    for e in obs.events:
        if e["type"] == "region_open" and e["field"] in ("tool_calls", "reasoning"):
            assert obs.input_text[e["start"] : e["end"]] in ("<tool_call>", "<think>")
        if e["type"] == "region_close" and e["field"] == "tool_calls":
            assert obs.input_text[e["start"] : e["end"]] == "</tool_call>"
            assert e["value"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    # a malformed call: raw text, a region_malformed event, no calls, the text back in content
    rt = ReplayRuntime([MALFORMED], model="replay", hooks=Hooks(on_raw_generation=seen.append))
    rt.generate(USER, tools=[get_weather])
    bad = seen[1]
    assert bad.tool_calls == [] and bad.raw_text == MALFORMED and bad.parser == "auto"
    check_region_events(bad.events, bad.input_text)
    malformed = [e for e in bad.events if e["type"] == "region_malformed"]
    assert malformed and malformed[0]["field"] == "tool_calls" and malformed[0]["recognizer"] == "hermes"
    text = MALFORMED.removesuffix("<|im_end|>")  # an end-of-turn marker is dropped from the content
    assert bad.errors[0]["recognizer"] == "hermes" and bad.cleaned_text == text
    content = [e["value"] for e in bad.events if e["type"] == "region_close" and e["field"] == "content"]
    assert "".join(content) == text
