"""`parse_message` builds its message from the one-shot core path (`chatparse._oneshot`): the
result must equal the streaming `ChatParser` fed the whole text and finished, for every catalog
template, with and without tools, including the `chatparse` report (errors, unknown tools)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse import catalog
from chatparse.openai import ChatParser, parse_message

from ..core import strategies as cst
from ..support.build import pure_only
from ..support.calls import F_TOOLS as TOOLS
from ..support.calls import dense_calls

CATALOG = {name: catalog.get(name) for name in catalog.names()}


def _ids() -> Any:
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except (ValueError, TypeError, KeyError) as e:
        return ("raised", type(e).__name__, str(e))


def _streaming(text: str, spec: dict, prefix: str, tools: Any, finish_reason: str = "stop") -> Any:
    p = ChatParser(template=spec, prefix=prefix, tools=tools, id_factory=_ids(), missing_anchor="ignore")
    p.feed(text)
    return p.finish(finish_reason)[0]


def assert_same(text: str, spec: dict, prefix: str = "", tools: Any = None) -> None:
    fast = _outcome(
        lambda: parse_message(
            text, template=spec, prefix=prefix, tools=tools, id_factory=_ids(), missing_anchor="ignore"
        )
    )
    slow = _outcome(lambda: _streaming(text, spec, prefix, tools))
    assert fast == slow, (text, prefix)


@pytest.mark.parametrize("name", sorted(CATALOG))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_parse_message_equals_streaming(name: str, data: st.DataObject) -> None:
    spec = CATALOG[name]
    text = data.draw(cst.texts_for(spec, max_pieces=18), label="text")
    prefix = data.draw(cst.prefixes_for(spec), label="prefix")
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    assert_same(text, spec, prefix, tools)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_calls_through_both_paths(name: str) -> None:
    spec = CATALOG[name]
    for d in cst.delimiter_strings(spec)[:16]:
        text = f'Hi {d}{{"name": "f", "arguments": {{"a": "1"}}}}{d} done'
        assert_same(text, spec, "", TOOLS)
        assert_same(text, spec, "", None)


def test_default_call_ids_keep_their_format() -> None:
    spec = CATALOG["qwen3"]
    text = "".join(f'<tool_call>{{"name": "f", "arguments": {{"a": {i}}}}}</tool_call>' for i in range(50))
    msg = parse_message(text, template=spec, prefix="")
    ids = [c["id"] for c in msg["tool_calls"]]
    assert len(set(ids)) == 50
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", i) for i in ids), ids


def test_length_takes_the_streaming_path() -> None:
    spec = CATALOG["qwen3_xml"]
    text = "Hi <tool_call>\n<function=f>\n<parameter=a>"
    fast = parse_message(text, template=spec, prefix="", finish_reason="length", id_factory=_ids())
    assert fast == _streaming(text, spec, "", None, "length")


@pure_only
def test_calls_the_core_typed_are_coerced_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The core types `{"function": {"name", "arguments": {...}}}` calls with the request's tools;
    # the assembler coerces only what the core could not type (a passed-through `parameters`
    # object), so each call is coerced once, and both shapes come out typed.
    from chatparse import tools as tools_module
    from chatparse.openai import _calls
    from chatparse.tools import build_tool_table

    seen: list[Any] = []
    original = tools_module._coerce_call

    def counted(value: Any, table: Any) -> Any:
        if isinstance(value, dict):  # a call (the core also passes every other field's value)
            seen.append(value)
        return original(value, table)

    from chatparse import _oneshot, _parser

    monkeypatch.setattr(tools_module, "_coerce_call", counted)
    monkeypatch.setattr(_oneshot, "coerce_call", counted)  # (the core's call loop calls it directly)
    monkeypatch.setattr(_parser, "coerce_call", counted)  # (and `ResponseParser._value`)
    text = "".join(
        f'<tool_call>\n{{"name": "f", "arguments": {{"a": "{i}", "b": "x"}}}}\n</tool_call>\n'
        for i in range(5)
    )
    for fn in (
        lambda: parse_message(text, template=CATALOG["qwen3"], prefix="", tools=TOOLS),
        lambda: _streaming(text, CATALOG["qwen3"], "", TOOLS),
    ):
        seen.clear()
        message = fn()
        assert [c["function"]["arguments"] for c in message["tool_calls"]] == [
            f'{{"a": {i}, "b": "x"}}' for i in range(5)
        ]
        assert len(seen) == 5, len(seen)
    # a call object the core passes through (`parameters`): typed by the assembler
    assembler = _calls.ToolCallAssembler(
        stream="complete",
        offered=build_tool_table(TOOLS),
        unknown_tools="surface",
        id_factory=lambda: "c",
    )
    assembler.core_typed = True
    out: list[Any] = []
    field = type("F", (), {"name": "tool_calls", "transform_each": False})()
    assembler.open(field, {}, 0, out)  # type: ignore[arg-type]
    assembler.close({"name": "f", "parameters": {"a": "7"}}, True, False, "", out)
    assert out[0]["function"]["arguments"] == '{"a": 7}'


def test_call_bodies_are_not_handed_to_the_assembler_chunk_by_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    # Calls sent complete ("complete", the default) make no delta from their body chunks: the
    # layer only moves its position past them. In "early" mode the chunks stream the arguments.
    from chatparse.openai import _calls

    chunks: list[str] = []
    original = _calls.ToolCallAssembler.chunk

    def counted(self: Any, text: str, out: list) -> None:
        chunks.append(text)
        original(self, text, out)

    monkeypatch.setattr(_calls.ToolCallAssembler, "chunk", counted)
    text = "".join(
        f'<tool_call>\n{{"name": "f", "arguments": {{"a": "{i}"}}}}\n</tool_call>\n' for i in range(5)
    )
    message = parse_message(text, template=CATALOG["qwen3"], prefix="", tools=TOOLS)
    assert len(message["tool_calls"]) == 5 and chunks == []
    early = parse_message(text, template=CATALOG["qwen3"], prefix="", tools=TOOLS, stream_tool_calls="early")
    assert [c["function"] for c in early["tool_calls"]] == [c["function"] for c in message["tool_calls"]]


@pure_only
def test_calls_are_kept_whole_without_regions_or_per_call_processing(monkeypatch: pytest.MonkeyPatch) -> None:
    # With calls sent complete, a one-shot message keeps each call of the usual shape whole: the
    # core's call loop appends one record per call and no event (`_oneshot.run`'s `kept`), and the
    # assembler keeps the records in one pass (`ToolCallAssembler.keep_records`): no region opened
    # in the assembler, no per-call pass of `_process`, events and passes independent of n.
    from chatparse.openai import _calls, _chat

    counts = {"open": 0, "process": 0, "events": 0, "passes": 0}
    open_, process = _calls.ToolCallAssembler.open, _chat.ChatParser._process
    # (a call region's events: text regions' events are taken inline by `_Whole.take`)
    append, keep = _chat._Whole._call_event, _calls.ToolCallAssembler.keep_records

    def counted_open(self: Any, *a: Any) -> None:
        counts["open"] += 1
        open_(self, *a)

    def counted_process(self: Any, events: list, truncated_drops: bool) -> Any:
        counts["process"] += 1
        return process(self, events, truncated_drops)

    def counted_append(self: Any, e: Any) -> None:
        counts["events"] += 1
        append(self, e)

    def counted_keep(self: Any, records: list, i: int) -> int:
        counts["passes"] += 1
        return keep(self, records, i)

    monkeypatch.setattr(_calls.ToolCallAssembler, "open", counted_open)
    monkeypatch.setattr(_chat.ChatParser, "_process", counted_process)
    monkeypatch.setattr(_chat._Whole, "_call_event", counted_append)
    monkeypatch.setattr(_calls.ToolCallAssembler, "keep_records", counted_keep)
    for family in ("qwen3", "deepseek_v3", "kimi_k2", "qwen3_xml"):
        spec = CATALOG[family]
        seen = []
        for n in (10, 40):
            slow = _streaming(dense_calls(family, n), spec, "", TOOLS)
            counts.update(open=0, process=0, events=0, passes=0)
            fast = parse_message(
                dense_calls(family, n), template=spec, prefix="", tools=TOOLS, id_factory=_ids()
            )
            assert fast == slow and len(fast["tool_calls"]) == n
            assert counts["open"] == 0, (family, counts)
            assert counts["process"] <= 3, (family, counts)  # the prefix, text around the calls
            seen.append(dict(counts))
        assert seen[0] == seen[1], (family, seen)  # nothing per call


@pytest.mark.parametrize("family", ["qwen3", "deepseek_v3", "kimi_k2", "qwen3_xml"])
@pytest.mark.parametrize("unknown_tools", ["surface", "drop"])
@pytest.mark.parametrize("mode", ["complete", "early"])
def test_calls_kept_whole_or_declined_equal_streaming(family: str, unknown_tools: str, mode: str) -> None:
    # Calls `keep_records` declines (an unknown tool dropped, a malformed body) amid kept ones, text
    # between them (its trailing whitespace kept before a call), a call id from the template:
    # the one-shot message equals the streamed one, report included.
    spec = CATALOG[family]
    bad = (
        dense_calls(family, 1)
        .replace('"0"}', '"0"')
        .replace("<parameter=a>\n0\n</parameter>\n", "<parameter=")
    )
    text = (
        "Hi there  \n"
        + dense_calls(family, 3)
        + dense_calls(family, 2, name="g")
        + " mid  "
        + bad
        + dense_calls(family, 2)
        + "bye"
    )
    for tools in (TOOLS, None):
        options = {"unknown_tools": unknown_tools, "stream_tool_calls": mode}
        fast = parse_message(text, template=spec, prefix="", tools=tools, id_factory=_ids(), **options)
        p = ChatParser(template=spec, prefix="", tools=tools, id_factory=_ids(), **options)
        p.feed(text)
        assert fast == p.finish()[0], (text, tools)
        # the message lists calls in index order: ids are drawn in that order (none from the
        # template but kimi_k2's)
        ids = [c["id"] for c in fast["tool_calls"] if c["id"].startswith("call_")]
        assert ids == sorted(ids, key=lambda i: int(i[5:])), ids


@pure_only
@pytest.mark.parametrize("family", ["qwen3", "deepseek_v3", "kimi_k2", "qwen3_xml"])
def test_a_typical_turn_takes_no_process_pass(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Reasoning, a sentence, two calls: text regions take `_process`'s text branch without deltas
    # (`_Whole._text`) and the calls are kept whole, so no event goes through `_process`.
    from chatparse.openai import _chat

    passes: list[int] = []
    process = _chat.ChatParser._process

    def counted(self: Any, events: list, truncated_drops: bool) -> Any:
        passes.append(len(events))
        return process(self, events, truncated_drops)

    monkeypatch.setattr(_chat.ChatParser, "_process", counted)
    spec = CATALOG[family]
    think = "<think>\nI will call the tool twice.\n</think>\n\n" if family.startswith("qwen3") else ""
    text = think + "Let me check both.  \n" + dense_calls(family, 2)
    fast = parse_message(text, template=spec, prefix="", tools=TOOLS, id_factory=_ids())
    assert sum(passes) == 0 and len(fast["tool_calls"]) == 2  # (the parser's set-up: no events)
    passes.clear()
    assert fast == _streaming(text, spec, "", TOOLS)
    assert sum(passes) > 0  # (the streaming parser's own passes: the counter counts)


def test_a_parse_the_fast_path_gives_up_on_draws_no_id_before_the_streaming_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The message is built after the core's one-shot parse, never during it: a parse that bails
    # half-way (here: after the whole run) has called no id factory, so the streaming parse that
    # replaces it gives the ids a fresh one would.
    from chatparse import _oneshot
    from chatparse.openai import _chat

    run = _chat.run_oneshot

    def bailing(*a: Any) -> Any:
        run(*a)
        raise _oneshot.Bail("forced")

    monkeypatch.setattr(_chat, "run_oneshot", bailing)
    for family in ("qwen3", "kimi_k2", "deepseek_v3"):
        text = "Hi\n" + dense_calls(family, 3)
        fast = parse_message(text, template=CATALOG[family], prefix="", tools=TOOLS, id_factory=_ids())
        assert fast == _streaming(text, CATALOG[family], "", TOOLS), family


@pytest.mark.parametrize(
    "text", ["<t>hm</t>Hi<end>", "Hi<end>", "<t>hm</t>", "", '<c>{"name": "f", "arguments": {}}</c>']
)
def test_a_required_field_missing_is_reported_as_streaming_reports_it(text: str) -> None:
    # (the one-shot message checks required fields only for a template that has one)
    spec = {
        "start_anchor": "A",
        "fields": {
            "thinking": {"open": "<t>", "close": "</t>", "optional": False},
            "tool_calls": {
                "open": "<c>",
                "close": "</c>",
                "content": "json",
                "repeats": True,
                "transform": {"type": "function", "function": "{content}"},
            },
            "content": {"close": "<end>"},
        },
    }
    assert_same(text, spec)
    message = parse_message(text, template=spec, prefix="")
    missing = "<t>" not in text  # (no thinking region: the required field is missing)
    assert ("chatparse" in message and "errors" in message["chatparse"]) == missing, message
