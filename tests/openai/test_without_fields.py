"""A field left out of a template (`tool_choice="none"`, an engine with no reasoning parser) leaves
its markup in the content verbatim: its closing marker too, which catalog entries otherwise drop from
content as a stray closer (issue 10 item 8)."""

from __future__ import annotations

import pytest

from chatparse import catalog
from chatparse._template import load_response_template
from chatparse.openai import ChatParser, merge_deltas, parse_message
from chatparse.openai._resolve import _closing_literals, _drop_alternatives, without_fields

QWEN3_PROMPT = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.mark.parametrize(
    ("pattern", "drop", "expected"),
    [
        (r"\s*(?:<\|im_end\|>|</think>|</tool_call>)", {"</think>"}, r"\s*(?:<\|im_end\|>|</tool_call>)"),
        (r"\s*(?:<\|im_end\|>|</think>|</tool_call>)", {"</think>", "</tool_call>"}, r"\s*(?:<\|im_end\|>)"),
        (r"</think>|x", {"</think>"}, "x"),
        (r"a|</think>|</tool_call>|x", {"</think>", "</tool_call>"}, "a|x"),
        (r"</think>", {"</think>"}, r"</think>"),  # an alternation keeps one alternative
        (r"(?:</think>)", {"</think>"}, r"(?:</think>)"),
        (r"[|]</think>|y", {"</think>"}, r"[|]</think>|y"),  # '|' in a class is not an alternation
        (r"(?<=a|b)c|</think>", {"</think>"}, r"(?<=a|b)c"),
        (r"\|</think>|z", {"</think>"}, r"\|</think>|z"),  # an escaped '|' either
        (r"(?P<k>\w+)|</k>", {"</k>"}, r"(?P<k>\w+)"),
        (r"(?<=a|b)x|(?P=k)|</k>", {"</k>"}, r"(?<=a|b)x|(?P=k)"),
        (r"(?i:a|</k>)", {"</k>"}, r"(?i:a)"),
        (r"x(?<ab|</k>", {"</k>"}, r"x(?<ab|</k>"),  # not a valid regex: no hang, unchanged
        (r"x(?P<ab|y", {"</k>"}, r"x(?P<ab|y"),
    ],
)
def test_drop_alternatives(pattern: str, drop: set[str], expected: str) -> None:
    assert _drop_alternatives(pattern, drop) == expected


@pytest.mark.parametrize("name", catalog.names())
def test_every_catalog_template_loads_without_each_field(name: str) -> None:
    spec = catalog.load(name).spec
    for names in (["tool_calls"], ["reasoning_content"], ["tool_calls", "reasoning_content"]):
        out = without_fields(spec, names)
        if out is spec:
            continue
        load_response_template(out)
        closers = set().union(*(_closing_literals(spec["fields"].get(n)) for n in names))
        for key, field in out["fields"].items():
            before = spec["fields"][key].get("close_pattern")
            after = field.get("close_pattern")
            # only the removed fields' own closers go, and only from close patterns
            assert (before == after) or (after is not None and closers), (name, names, key)
    assert catalog.load(name).spec == spec  # the catalog's spec is not changed in place


@pytest.mark.parametrize("stream", [False, True])
def test_qwen3_calls_left_unparsed_keep_their_closer(stream: bool) -> None:
    raw = "<think>\nCheck the weather.\n</think>\n\nLet me check." + CALL + "<|im_end|>"
    if stream:
        p = ChatParser(template="qwen3", prefix=QWEN3_PROMPT, parse_tool_calls=False)
        deltas = [d for ch in raw for d in p.feed(ch)]
        final, last, _ = p.finish()
        msg = merge_deltas(deltas + last)
        assert msg == {k: v for k, v in final.items() if v is not None}
    else:
        msg = parse_message(raw, template="qwen3", prefix=QWEN3_PROMPT, parse_tool_calls=False)
    assert msg["reasoning_content"] == "Check the weather."
    assert msg["content"] == "Let me check." + CALL
    assert not msg.get("tool_calls")
    # With calls parsed, a stray closer is still dropped from content (the catalog's policy).
    stray = parse_message("Done.</tool_call><|im_end|>", template="qwen3", prefix=QWEN3_PROMPT)
    assert stray["content"] == "Done."


def test_qwen3_reasoning_left_unparsed_keeps_its_closer() -> None:
    spec = without_fields(catalog.load("qwen3").spec, ["reasoning_content"])
    raw = "<think>\nHmm.\n</think>\n\nHi.<|im_end|>"
    msg = parse_message(raw, template=spec, prefix=QWEN3_PROMPT)
    assert msg["content"] == raw[: -len("<|im_end|>")]
