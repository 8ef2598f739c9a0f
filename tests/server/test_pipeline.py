"""The server's pipeline without HTTP: the same answer however the upstream's events are split.

The server answers streamed and non-streamed requests by running `Pipeline` over the upstream's
events; a non-streamed upstream answer is one text event, a streamed one is many. These properties
say the split never matters: the message, the finish reason and the report are the same, the deltas
are well formed (one call per index, contiguous indices, id and name first, arguments a JSON object).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatparse import load_response_template
from chatparse.server._pipeline import Pipeline
from chatparse.server._upstream import Call, Content, Finish, Reasoning, Text

from ..openai.helpers import CASES, FAMILIES

CASE_IDS = list(range(len(CASES)))


def run(events: list[Any], case: dict, **options: Any) -> tuple[dict, list[dict], str | None]:
    options.setdefault("tool_choice", "auto")
    options.setdefault("parallel_tool_calls", True)
    pipe = Pipeline(
        template=load_response_template(FAMILIES[case["template"]]) if case else None,
        prefix=case["prefix"] if case else None,
        tools=case["tools"] if case else None,
        reasoning_key="reasoning_content",
        **options,
    )
    deltas: list[dict] = []
    for e in events:
        deltas += pipe.feed(e)
    return pipe.message(), deltas, pipe.finish_reason


def normal(message: dict) -> dict:
    """Ids are random per call: compare everything else."""
    out = json.loads(json.dumps(message))
    for call in out.get("tool_calls") or ():
        call.pop("id", None)
    for d in (out.get("chatparse") or {}).get("dropped") or ():
        d.pop("id", None)
    return out


def check_deltas(deltas: list[dict]) -> None:
    arguments: dict[int, str] = {}
    for d in deltas:
        for entry in d.get("tool_calls") or ():
            i = entry["index"]
            if i not in arguments:
                assert i == len(arguments), "indices are contiguous, in order"
                assert entry["id"] and entry["function"]["name"], "id and name come first"
                arguments[i] = ""
            else:
                assert "id" not in entry and "name" not in entry.get("function", {})
            arguments[i] += entry["function"].get("arguments") or ""
    for text in arguments.values():
        assert isinstance(json.loads(text), dict), "the fragments of an index add up to a JSON object"


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    return [p for p in pieces if p]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(CASE_IDS),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    st.sampled_from(["stop", "length"]),
    st.booleans(),
)
def test_raw_text_split_does_not_matter(index: int, cuts: list[int], reason: str, parallel: bool) -> None:
    case = CASES[index]
    text = case["text"]
    finish = Finish(reason, {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8})
    whole, _, r1 = run([Text(text), finish], case, parallel_tool_calls=parallel)
    message, deltas, r2 = run(
        [*(Text(p) for p in split(text, cuts)), finish], case, parallel_tool_calls=parallel
    )
    assert normal(message) == normal(whole)
    assert r1 == r2
    check_deltas(deltas)
    if not parallel:
        assert len(message.get("tool_calls") or ()) <= 1
    if reason == "length":
        assert r2 == "length"
    elif message.get("tool_calls"):
        assert r2 == "tool_calls"


CONTENTS = [
    "Plain answer.",
    'Let me check. <tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
    '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
    "<think>hmm</think>Sure.",
]
NATIVE = {
    "index": 0,
    "id": "call_native",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'},
}


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(CONTENTS),
    st.lists(st.integers(min_value=0, max_value=200), max_size=12),
    st.booleans(),
    st.booleans(),
)
def test_structured_upstream_split_does_not_matter(
    content: str, cuts: list[int], native: bool, fragment: bool
) -> None:
    finish = Finish("stop", None)
    calls: list[tuple[Any, ...]] = []
    if native:
        if fragment:  # the way vLLM streams: id and name first, then argument pieces
            args = NATIVE["function"]["arguments"]
            calls = [Call({**NATIVE, "function": {"name": "get_weather", "arguments": ""}})]
            calls += [
                Call({"index": 0, "function": {"arguments": args[i : i + 3]}}) for i in range(0, len(args), 3)
            ]
        else:
            calls = [Call(NATIVE)]
    whole_message, _, r1 = run([Reasoning("r"), Content(content), *calls, finish], {})
    events = [Reasoning("r"), *(Content(p) for p in split(content, cuts)), *calls, finish]
    message, deltas, r2 = run(events, {})
    assert normal(message) == normal(whole_message) and r1 == r2
    check_deltas(deltas)
    if native:
        # Native calls win: exactly the engine's call; what the fallback found is reported, not sent.
        assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
        assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Lima"}
        assert r2 == "tool_calls"
