"""The prefix pass's state kept per template and prefix (`_parser._PREFIX_STATES`).

A parser whose prefix state was restored must behave exactly as one that processed the prefix:
the same initial events, then the same events for every chunking of the output, the same message
and the same cut-off report."""

from __future__ import annotations

import collections
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import _parser, catalog
from chatparse._parser import ResponseParser

from ..support.build import pure_only
from . import strategies as cst

CATALOG = {name: catalog.get(name) for name in catalog.names()}


def _plain(events: list[Any]) -> list[dict]:
    """Events with their errors as (type, message): exceptions compare by identity."""
    return [
        {**e, "error": (type(e["error"]).__name__, str(e["error"]))} if "error" in e else e for e in events
    ]


def _run(t: Any, prefix: str, chunks: list[str]) -> tuple[Any, ...]:
    p = ResponseParser(t, prefix=prefix)
    events = [dict(e) for e in p.initial_events]
    for c in chunks:
        events += p.feed(c)
    try:
        message, last = p.finalize()
    except ValueError as e:  # RequiredFieldsMissing: the same either way
        return _plain(events), ("raised", str(e)), p.cut_off
    return _plain(events + last), message, p.cut_off


@pytest.mark.parametrize("name", sorted(CATALOG))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_restored_prefix_state_parses_as_the_prefix_pass(name: str, data: st.DataObject) -> None:
    spec = CATALOG[name]
    t = chatparse.load_response_template(spec)
    prefix = data.draw(cst.prefixes_for(spec), label="prefix")
    text = data.draw(cst.texts_for(spec, max_pieces=10), label="text")
    chunks = data.draw(cst.chunkings(text, cst.delimiter_strings(spec)), label="chunks")
    _parser._PREFIX_STATES.pop(t, None)
    fresh = _run(t, prefix, chunks)  # the prefix pass (and, when it qualifies, its state kept)
    restored = _run(t, prefix, chunks)  # from the kept state, when there is one
    assert restored == fresh


@pure_only
@pytest.mark.parametrize(
    "name, prefix",
    [
        ("qwen3", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"),
        ("qwen3_xml", "<|im_start|>assistant\n<think>\n"),
        ("deepseek_v3", "<｜Assistant｜><think>\n"),
        ("kimi_k2", "<|im_assistant|>assistant<|im_middle|><think>"),
    ],
)
def test_a_reasoning_prompt_is_processed_once_per_template(
    name: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The prompt ends in an opened reasoning region: the second parser restores the state (no
    # scanner pass), then parses the output as the first.
    t = chatparse.load_response_template(CATALOG[name])
    _parser._PREFIX_STATES.pop(t, None)
    passes = collections.Counter()
    process = ResponseParser._process

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        passes["process"] += 1
        return process(self, *args, **kwargs)

    monkeypatch.setattr(ResponseParser, "_process", counted)
    first = ResponseParser(t, prefix=prefix)
    assert passes["process"] == 1 and first._current == "reasoning_content"
    second = ResponseParser(t, prefix=prefix)
    assert passes["process"] == 1
    assert second.initial_events == first.initial_events
    assert second.initial_events is not first.initial_events
    out = "hm</think>Hi<|im_end|>"
    assert second.feed(out) == first.feed(out)


def test_a_prefix_that_closes_a_call_is_not_kept() -> None:
    # A prefix that closes a call (a value computed with this parser's tools) is processed for
    # every parser.
    t = chatparse.load_response_template(CATALOG["qwen3"])
    _parser._PREFIX_STATES.pop(t, None)
    call = '<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {"a": "1"}}\n</tool_call>\n'
    ResponseParser(t, prefix=call)
    assert not _parser._PREFIX_STATES.get(t)


@pure_only
@pytest.mark.parametrize(
    "name, prefix",
    [
        ("qwen3", "<|im_start|>assistant\n<think>\n\n</think>\n\n"),  # no thinking: held newlines
        ("qwen3_xml", "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
        ("qwen3", "<|im_start|>assistant\n<think>\nhm</thi"),  # a closer being written
        ("deepseek_v3", "<｜Assistant｜>Hi <｜tool▁calls"),  # a call opener being written
        ("gpt_oss", "<|start|>assistant<|channel|>analysis<|message|>hm<|e"),
        ("kimi_k2", "<|im_assistant|>assistant<|im_middle|>Hi "),
    ],
)
@pytest.mark.parametrize("out", ["", "Hi", "\n\nHi<|im_end|>", "</think>ok", '<tool_call>\n{"name": "f"'])
@pytest.mark.parametrize("reason", ["finalize", "feed by characters"])
def test_a_prefix_whose_tail_is_held_is_kept(
    name: str, prefix: str, out: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pass held the prompt's tail (a delimiter may still start in it): the state is kept, and
    # each parser, the one that made the pass too, goes on with a scanner made afresh at the held
    # position; a restored parser makes that scanner only at its first feed (or at the end: an
    # empty output), and parses every output as the pass's parser, its cut-off report included.
    t = chatparse.load_response_template(CATALOG[name])
    _parser._PREFIX_STATES.pop(t, None)
    calls: list[int] = []
    process = ResponseParser._process

    def counted(self: Any, events: Any, *args: Any, **kwargs: Any) -> Any:
        before = len(events)
        process(self, events, *args, **kwargs)
        calls.append(len(events) - before)

    monkeypatch.setattr(ResponseParser, "_process", counted)
    first = ResponseParser(t, prefix=prefix)
    assert first._pos < len(first.input_text), "the tail is held"
    assert len(calls) == 2 and calls[1] == 0  # the pass, then the fresh scanner's hold
    assert len(_parser._PREFIX_STATES.get(t) or {}) == 1
    calls.clear()
    second = ResponseParser(t, prefix=prefix)
    assert calls == []  # no scanner yet: the first feed (or the end) makes it
    assert second.initial_events == first.initial_events
    monkeypatch.setattr(ResponseParser, "_process", process)
    chunks = list(out) if reason == "feed by characters" else [out]

    def run(p: ResponseParser) -> tuple[Any, ...]:
        events = [_plain(p.feed(c)) for c in chunks]
        message, last = p.finalize()
        return events, message, _plain(last), p.cut_off

    want = run(first)
    assert run(second) == want
    # ... and as a parser that kept nothing (it goes on with the scanner its pass held with)
    _parser._PREFIX_STATES.pop(t, None)
    monkeypatch.setattr(_parser, "_PREFIX_KEY_MAX", -1)
    plain = ResponseParser(t, prefix=prefix)
    assert not _parser._PREFIX_STATES.get(t)
    assert run(plain) == want


@pytest.mark.parametrize(
    "name, prefix, out",
    [
        ("qwen3", "<|im_start|>assistant\n<think>\nhm</think>ok", " more<|im_end|>"),
        ("gemma4", "<|turn>model\n<|channel>thought\n<channel|>", "Hi<turn|>"),
        ("glm", "<|assistant|>\n<think></think>", "Hi"),
    ],
)
def test_a_prefix_that_closes_its_reasoning_is_kept(name: str, prefix: str, out: str) -> None:
    # A closed region with a text value is the same for every parser: the state is kept with the
    # output, and a restored parser gives the prefix pass's events, message and values, its own.
    t = chatparse.load_response_template(CATALOG[name])
    _parser._PREFIX_STATES.pop(t, None)
    tools = [{"name": "f", "parameters": {"properties": {"a": {"type": "integer"}}}}]
    first = ResponseParser(t, prefix=prefix, tools=tools)
    assert any(e["type"] == "region_close" for e in first.initial_events), first.initial_events
    assert len(_parser._PREFIX_STATES.get(t) or {}) == 1
    second = ResponseParser(t, prefix=prefix)
    assert second.initial_events == first.initial_events
    assert second.initial_events is not first.initial_events
    assert second._output == first._output and second._output is not first._output
    assert second.feed(out) == first.feed(out)
    assert second.finalize() == first.finalize()


@pytest.mark.parametrize(
    "name, prefix, out",
    [
        (
            "qwen3_xml",
            "<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n",
            "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call><|im_end|>",
        ),
        (
            "deepseek_v3",
            "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n",
            '{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        ),
    ],
)
def test_a_call_the_prompt_opened_keeps_its_captures(name: str, prefix: str, out: str) -> None:
    # The opener's captures (the tool's name) come back with the restored state.
    t = chatparse.load_response_template(CATALOG[name])
    _parser._PREFIX_STATES.pop(t, None)
    messages = []
    for _ in range(2):
        p = ResponseParser(t, prefix=prefix)
        p.feed(out)
        messages.append(p.finalize()[0])
    assert _parser._PREFIX_STATES.get(t), "the prefix state was kept"
    assert messages[0] == messages[1]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_kept_prefix_states_are_bounded() -> None:
    # At most `_PREFIX_STATES_MAX` prefixes per template, none longer than `_PREFIX_KEY_MAX`.
    t = chatparse.load_response_template(CATALOG["qwen3"])
    _parser._PREFIX_STATES.pop(t, None)
    anchor = "<|im_start|>assistant\n"
    for i in range(_parser._PREFIX_STATES_MAX + 10):
        ResponseParser(t, prefix=f"{anchor}<think>\nstep {i} ")
        assert len(_parser._PREFIX_STATES[t]) <= _parser._PREFIX_STATES_MAX
    _parser._PREFIX_STATES.pop(t, None)
    long = anchor + "<think>\n" + "x " * _parser._PREFIX_KEY_MAX
    ResponseParser(t, prefix=long)
    assert not _parser._PREFIX_STATES.get(t)
