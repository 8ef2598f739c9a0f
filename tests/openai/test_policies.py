"""Policies of `ChatParser` / `parse_message`: call streaming, cut-off and malformed calls, unknown
tools, finish reasons, text assembly, template resolution, Responses items."""

from __future__ import annotations

import json

import pytest

from chatparse.openai import ChatParser, calls_from_value, merge_deltas, parse_message, to_responses_output

from ..support.build import pure_only
from .helpers import FAMILIES, counter_ids, merged, public, stream

WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
QWEN_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def run(family: str, chunks: list[str], finish_reason: str = "stop", **options):
    options.setdefault("id_factory", counter_ids())
    return stream(chunks, finish_reason, template=FAMILIES[family], prefix="", **options)


def test_mistral_arguments_stream_incrementally_and_concatenate_exactly() -> None:
    message, deltas, reason = run(
        "MISTRAL_V13",
        ['[TOOL_CALLS]get_weather[ARGS]{"ci', 'ty": "Par', 'is"} ', "\n"],
        stream_tool_calls="early",
    )
    assert deltas[0] == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
        ]
    }
    fragments = [d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:]]
    assert fragments == ['{"ci', 'ty": "Par', 'is"}']  # trailing whitespace is never sent
    assert message["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'
    assert reason == "tool_calls"


def test_json_inside_call_object_is_sent_whole_at_close() -> None:
    _, deltas, _ = run("QWEN_JSON", [QWEN_CALL[:20], QWEN_CALL[20:]])
    assert deltas == [
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ]
        }
    ]


def test_name_is_announced_at_the_opener_when_captured() -> None:
    parser = ChatParser(
        template=FAMILIES["QWEN_XML"], prefix="", id_factory=lambda: "call_a", stream_tool_calls="early"
    )
    deltas = parser.feed("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar")
    assert deltas == [
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ]
    more = parser.feed("is\n</parameter>\n</function>\n</tool_call>")
    assert more == [{"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]}]


def test_complete_mode_sends_nothing_before_close() -> None:
    parser = ChatParser(
        template=FAMILIES["MISTRAL_V13"], prefix="", stream_tool_calls="complete", id_factory=lambda: "c"
    )
    assert parser.feed('[TOOL_CALLS]get_weather[ARGS]{"city": "Par') == []
    parser.feed('is"}')
    message, deltas, reason = parser.finish()
    assert deltas == [
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ]
        }
    ]
    assert reason == "tool_calls"


@pytest.mark.parametrize("mode", ["early", "complete"])
def test_length_drops_the_cut_off_call_and_keeps_the_first(mode: str) -> None:
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_weather[ARGS]{"city": "To'
    message, deltas, reason = run("MISTRAL_V13", [text], "length", stream_tool_calls=mode)
    assert reason == "length"
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"city": "Paris"}']
    dropped = message["chatparse"]["dropped"]
    assert [d["reason"] for d in dropped] == ["truncated"]
    assert dropped[0]["streamed"] is (mode == "early")
    assert public(merged(message, deltas)) == public(message)


def test_length_drops_a_parsable_call_without_its_closer_but_stop_keeps_it() -> None:
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    cut, _, reason = run("QWEN_XML", [text + "</function>"], "length")
    assert "tool_calls" not in cut and reason == "length"
    kept, _, reason = run("MISTRAL_V13", ['[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'], "stop")
    assert len(kept["tool_calls"]) == 1 and reason == "tool_calls"  # `</s>` is the stop token


def test_malformed_call_is_reported_and_the_rest_is_kept() -> None:
    text = "Checking. " + QWEN_CALL + "<tool_call>{not json}</tool_call>" + QWEN_CALL + " Done.<|im_end|>"
    message, deltas, reason = run("QWEN_JSON", [text])
    assert message["content"] == "Checking. Done."
    assert len(message["tool_calls"]) == 2
    assert [d["tool_calls"][0]["index"] for d in deltas if "tool_calls" in d] == [0, 1]
    (error,) = message["chatparse"]["errors"]
    assert error["field"] == "tool_calls" and error["text"] == "{not json}" and "JSON" in error["error"]
    assert reason == "tool_calls"
    with pytest.raises(ValueError):
        import chatparse

        chatparse.parse_response(text, FAMILIES["QWEN_JSON"], prefix="")


def test_non_object_arguments_are_reported_not_returned() -> None:
    message, _, reason = run(
        "MISTRAL_V3", ['[TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": "g", "arguments": 3}]']
    )
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["f"]
    assert "not a JSON object" in message["chatparse"]["errors"][0]["error"]


def test_unknown_tools_surfaced_by_default() -> None:
    tools = [{"type": "function", "function": {"name": "search"}}]
    message, _, reason = run("QWEN_JSON", [QWEN_CALL], tools=tools)
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"
    assert message["chatparse"]["unknown_tools"] == [{"index": 0, "name": "get_weather"}]
    assert reason == "tool_calls"


@pytest.mark.parametrize(
    "family, text",
    [
        ("QWEN_JSON", QWEN_CALL),
        ("MISTRAL_V13", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'),
    ],
)
def test_unknown_tools_dropped_on_request(family: str, text: str) -> None:
    tools = [{"type": "function", "function": {"name": "search"}}]
    message, deltas, reason = run(family, list(text), tools=tools, unknown_tools="drop")
    assert deltas == [] and "tool_calls" not in message and reason == "stop"
    assert message["chatparse"]["dropped"][0]["reason"] == "unknown_tool"


def test_no_tools_means_nothing_is_unknown() -> None:
    message, _, _ = run("QWEN_JSON", [QWEN_CALL], unknown_tools="drop")
    assert len(message["tool_calls"]) == 1 and "chatparse" not in message


def test_kimi_ids_come_from_the_template() -> None:
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    message, deltas, _ = run("KIMI_K2", list(text))
    assert message["tool_calls"][0]["id"] == "functions.get_weather:0"
    assert deltas[0]["tool_calls"][0]["id"] == "functions.get_weather:0"


def test_default_ids_are_call_plus_24_alphanumerics() -> None:
    message = parse_message(QWEN_CALL, template=FAMILIES["QWEN_JSON"], prefix="")
    call_id = message["tool_calls"][0]["id"]
    assert call_id.startswith("call_") and len(call_id) == 29 and call_id[5:].isalnum()


def test_coercible_schema_disables_incremental_arguments() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        }
    ]
    message, deltas, _ = run("MISTRAL_V13", ['[TOOL_CALLS]f[ARGS]{"n": ', '"5"}'], tools=tools)
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"n": 5}
    assert public(merge_deltas(deltas)) == public(message)


def test_text_around_calls_is_concatenated_and_stripped_at_the_edges() -> None:
    chunks = ["  Hello ", "<tool_call>", QWEN_CALL[11:], "  world  ", "<|im_end|>"]
    message, deltas, _ = run("QWEN_JSON", chunks)
    # the opener `\s*<tool_call>` consumed the space after "Hello"; the rest is verbatim
    assert message["content"] == "Hello  world"
    assert "".join(d.get("content", "") for d in deltas) == "Hello  world"


def test_joined_channels_match_the_core() -> None:
    text = (
        "<|channel|>analysis<|message|>a <|end|><|start|>assistant<|channel|>analysis<|message|> b<|end|>"
        "<|start|>assistant<|channel|>final<|message|>hi<|return|>"
    )
    message, deltas, _ = run("GPT_OSS", list(text), reasoning_key="both")
    assert message["reasoning_content"] == message["reasoning"] == "a\n\nb"
    assert message["content"] == "hi"
    assert all(not ({"content", "reasoning"} & set(d) and {"content"} < set(d)) for d in deltas)


def test_wrapped_text_is_sent_at_close() -> None:
    parser = ChatParser(template=FAMILIES["GRANITE33"], prefix="")
    assert parser.feed("<response> h") == []
    assert parser.feed("i </response><|end_of_text|>") == [{"content": "hi"}]


def test_tool_call_inside_reasoning_stays_reasoning() -> None:
    message, _, reason = run("QWEN_JSON", ["<think>maybe " + QWEN_CALL + "</think>No call."])
    assert "tool_calls" not in message and reason == "stop"
    assert "<tool_call>" in message["reasoning_content"]


def test_prefix_with_prewritten_think() -> None:
    message = parse_message(
        "hm</think>Hi", template=FAMILIES["QWEN_JSON"], prefix="<|im_start|>assistant\n<think>\n"
    )
    assert message == {"role": "assistant", "content": "Hi", "reasoning_content": "hm"}


def test_empty_output() -> None:
    message, deltas, reason = run("QWEN_JSON", [""])
    assert message == {"role": "assistant", "content": None} and deltas == [] and reason == "stop"


def test_options_are_validated() -> None:
    for bad in ({"stream_tool_calls": "x"}, {"unknown_tools": "x"}, {"reasoning_key": "x"}):
        with pytest.raises(ValueError):
            ChatParser(template=FAMILIES["QWEN_JSON"], **bad)
    with pytest.raises(ValueError):
        ChatParser()


def test_finish_twice_raises() -> None:
    parser = ChatParser(template=FAMILIES["QWEN_JSON"])
    parser.finish()
    with pytest.raises(RuntimeError):
        parser.finish()
    with pytest.raises(RuntimeError):
        parser.feed("x")


def test_calls_from_value_shapes() -> None:
    assert calls_from_value(
        [{"name": "a", "arguments": None}, {"function": {"name": "b", "arguments": "{}"}}]
    ) == [({"name": "a", "arguments": {}}, None), ({"name": "b", "arguments": {}}, None)]
    assert calls_from_value({"id": "x", "name": "a", "parameters": {"k": 1}}) == [
        ({"name": "a", "arguments": {"k": 1}, "id": "x"}, None)
    ]
    assert calls_from_value({"arguments": {}})[0][0] is None
    assert calls_from_value({"name": "a", "arguments": "{"})[0][0] is None
    assert calls_from_value("text")[0][0] is None


def test_responses_output_items() -> None:
    message = parse_message(
        "<think>hm</think>Hi " + QWEN_CALL,
        template=FAMILIES["QWEN_JSON"],
        prefix="",
        id_factory=lambda: "call_1",
    )
    items = to_responses_output(message, id_factory=lambda p: p + "_1")
    assert [i["type"] for i in items] == ["reasoning", "message", "function_call"]
    assert items[0]["content"] == [{"type": "reasoning_text", "text": "hm"}]
    assert items[1]["content"][0]["text"] == "Hi"
    assert items[2] == {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    }


def _catalog():
    catalog = pytest.importorskip("chatparse.catalog")
    if not all(hasattr(catalog, n) for n in ("resolve", "resolve_name", "describe", "names")):
        pytest.skip("chatparse.catalog has not landed yet")
    return catalog


def test_model_resolves_through_the_catalog_with_its_generation_prompt() -> None:
    catalog = _catalog()
    model = "Qwen/Qwen3-8B"
    name = catalog.resolve_name(model=model)
    prompt = catalog.describe(name).get("generation_prompt") or ""
    text = "<think>hm</think>Hi<|im_end|>"
    expected = parse_message(text, template=catalog.resolve(model=model), prefix=prompt)
    assert parse_message(text, model=model) == expected
    assert expected["content"] == "Hi" and expected["reasoning_content"] == "hm"


def test_template_may_be_a_catalog_name() -> None:
    catalog = _catalog()
    for name in catalog.names():
        message = parse_message("", template=name)
        assert message["role"] == "assistant"
    message = parse_message(
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', template="mistral_v13", prefix=""
    )
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("auto", [False, True])
@pytest.mark.parametrize(
    "text",
    ["<think></think><think>", "<think>a</think>b<think>c</think>d", "<think>a</think><think>c"],
)
def test_reopened_reasoning_loses_no_text(text: str, auto: bool) -> None:
    """DeepSeek DSML (reported by the engines engineer): `<think>` after `</think>` opens the
    non-repeating reasoning field again. The core keeps the reference's semantics (the last region
    wins in `parse_response`); the OpenAI layer concatenates every reasoning region, so no reasoning
    text is lost and the deltas add up to the message for every chunking. (The catalog's DSML template
    now opens reasoning only at the start, `^\\s*<think>`, so the test gives it back the literal
    opener it had, to keep a field that can open again.)"""
    from chatparse import catalog

    template = catalog.get("deepseek_dsml")
    reasoning_field = template["fields"]["reasoning_content"]
    reasoning_field.pop("open_pattern")
    reasoning_field["open"] = "<think>"
    kw: dict = {"auto": True} if auto else {"template": template}
    reasoning = "".join(text.replace("</think>", "<think>").split("<think>")[1::2])
    content = "".join(text.replace("</think>", "<think>").split("<think>")[2::2])
    for chunks in (list(text), [text], [text[:3], text[3:]]):
        message, deltas, _ = stream(chunks, prefix="<｜Assistant｜>", id_factory=counter_ids(), **kw)
        assert merged(message, deltas) == public(message)
        got = (message.get("reasoning_content") or "").replace("\n\n", "")
        assert got == reasoning
        assert (message.get("content") or "") == content


_INT_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    }
]


@pure_only
def test_calls_the_core_typed_are_not_coerced_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core types `function.arguments` with the same tools: the assembler takes its values as
    they are (it coerced every call a second time, ~3 us a call), yet still types a call object the
    core passed through untyped (`{"name", "parameters"}` under a `{content}` transform)."""
    from chatparse.openai import _calls

    seen: list[object] = []
    original = _calls.coerce_tool_calls

    def counted(value: object, table: object) -> object:
        seen.append(value)
        return original(value, table)  # type: ignore[arg-type]

    monkeypatch.setattr(_calls, "coerce_tool_calls", counted)
    qwen = '<tool_call>\n{"name": "f", "arguments": {"n": "5"}}\n</tool_call>'
    message, deltas, _ = run("QWEN_JSON", list(qwen + qwen), tools=_INT_TOOL)
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"n": 5}] * 2
    assert public(merge_deltas(deltas)) == public(message)
    assert seen == []
    passthrough = {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open": "<call>",
                "close": "</call>",
                "repeats": True,
                "content": "json",
                "transform": "{content}",
            },
            "content": {},
        },
    }
    message = parse_message(
        '<call>{"name": "f", "parameters": {"n": "7"}}</call>', template=passthrough, tools=_INT_TOOL
    )
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"n": 7}
    assert len(seen) == 1


@pure_only
def test_one_tool_table_per_parser_and_one_field_plan_per_template(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parser per request (the engines' plugins): the tools are read into a table once (the
    core's, shared with the call assembler; it was built twice), and which fields stream as text or
    make no delta is derived once per template and streaming mode. The plan is what the fields
    say, for every catalog template."""
    from chatparse import _parser, catalog
    from chatparse.openai import _chat

    built: list[object] = []
    for module in (_parser, _chat):
        real = module.build_tool_table
        monkeypatch.setattr(
            module, "build_tool_table", lambda tools, _real=real: built.append(tools) or _real(tools)
        )
    derived: list[str] = []
    real_key = _chat._text_key
    monkeypatch.setattr(_chat, "_text_key", lambda name: derived.append(name) or real_key(name))
    monkeypatch.setattr(_chat, "_PLANS", {})  # no plan from an earlier test
    template = catalog.load("qwen3")
    first = 0
    for _ in range(4):
        p = ChatParser(template=template, prefix="", tools=_INT_TOOL)
        assert p._calls.offered is p._parser._tools and p._calls.offered == {"f": {"n": {"type": "integer"}}}
        first = first or len(derived)
    assert len(built) == 4
    assert 0 < first == len(derived)  # the plan was derived for the first parser only
    ChatParser(template=template, prefix="", tools=[])  # no tools offered: an empty table, not None
    assert len(built) == 5
    monkeypatch.undo()
    for name in catalog.names():
        t = catalog.load(name)
        for mode in ("complete", "early"):
            text, silent, required = _chat._field_plan(t, mode)
            assert required == any(not f.optional for f in t.fields.values())
            assert set(text) == {
                n
                for n, f in t.fields.items()
                if (n == "content" or n in _chat.REASONING_FIELDS) and not f.dirty
            }
            assert silent == {
                n
                for n, f in t.fields.items()
                if (n == "tool_calls" and mode != "early")
                or (n != "tool_calls" and (not (n == "content" or n in _chat.REASONING_FIELDS) or f.dirty))
            }
