"""The one-shot call loop's work per call (`chatparse._oneshot._call_loop`), counted, never timed.

A call-dense output goes closer, value, again step, closer, ... through the call loop. Per call it
asks the again step's opener for `(end, match)` (`_Again.open_end`) rather than a `_Found` object
(made only where `run`'s general step reads the seeker interface), and coerces a call value with
`tools._coerce_call` directly (the list walk of `coerce_tool_calls` is only for list values).
Checked on the catalog families SGLang's detectors cover, with the request's tools.
"""

from __future__ import annotations

from typing import Any

import pytest

import chatparse
from chatparse import _oneshot, catalog, tools

from ..support.build import pure_only
from ..support.calls import dense_calls

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


@pure_only
@pytest.mark.parametrize("family", ["qwen3", "qwen3_xml", "kimi_k2", "deepseek_v3"])
def test_no_found_object_or_list_walk_per_call(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = {"found": 0, "walk": 0, "coerce": 0}
    found_init, walk, coerce = _oneshot._Found.__init__, _oneshot.coerce_tool_calls, _oneshot.coerce_call

    def counted_found(self: Any, *a: Any) -> None:
        counts["found"] += 1
        found_init(self, *a)

    def counted_walk(value: Any, table: Any) -> Any:
        counts["walk"] += 1
        return walk(value, table)

    def counted_coerce(value: Any, table: Any) -> Any:
        counts["coerce"] += 1
        return coerce(value, table)

    monkeypatch.setattr(_oneshot._Found, "__init__", counted_found)
    monkeypatch.setattr(_oneshot, "coerce_tool_calls", counted_walk)
    monkeypatch.setattr(_oneshot, "coerce_call", counted_coerce)
    t = chatparse.load_response_template(catalog.get(family))
    seen = []
    for n in (10, 40):
        counts.update(found=0, walk=0, coerce=0)
        out = chatparse.parse_response(dense_calls(family, n), t, prefix="", tools=TOOLS)
        assert [c["function"]["arguments"] for c in out["tool_calls"]] == [{"a": i} for i in range(n)]
        seen.append(dict(counts))
    assert seen[1]["coerce"] - seen[0]["coerce"] == 30, seen  # one coercion per call, direct
    assert seen[1]["found"] == seen[0]["found"] and seen[1]["walk"] == seen[0]["walk"], seen


def test_call_values_are_coerced_as_coerce_tool_calls_does() -> None:
    # the direct call is `coerce_tool_calls` for a call dict: same values, same sharing
    table = tools.build_tool_table(TOOLS)
    for value in (
        {"type": "function", "function": {"name": "f", "arguments": {"a": "7"}}},
        {"type": "function", "function": {"name": "f", "arguments": {"a": 7}}},
        {"type": "function", "function": {"name": "g", "arguments": {"a": "7"}}},
        {"type": "function", "function": {"name": "f", "arguments": {"a": ["1", "2"]}}},
        {"function": "f"},
    ):
        direct, walked = _oneshot.coerce_call(value, table), tools.coerce_tool_calls(value, table)
        assert direct == walked and (direct is value) == (walked is value)


def test_json_loads_takes_json_whitespace_as_json_does() -> None:
    import json

    from chatparse._content import _JSON_WS, json_loads

    assert (
        json.decoder.WHITESPACE.pattern
        == "[" + _JSON_WS.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r") + "]*"
    )  # type: ignore[attr-defined]
    for text in [
        "",
        " ",
        '\n{"a": 1}\n',
        '{"a":1} x',
        "\x0b{}",
        "{}\x0b",
        " 1 ",
        "\u3000{}",
        "{} \u3000",
        "[1]\t\r\n ",
        "nul",
    ]:
        try:
            want: Any = ("ok", json.loads(text))
        except ValueError as e:
            want = ("error", str(e))
        try:
            got: Any = ("ok", json_loads(text))
        except ValueError as e:
            got = ("error", str(e))
        assert got == want, text


@pytest.mark.parametrize(
    ("opener", "all_set"),
    [
        ("<a (?P<name>[a-z]+)>", True),
        ("<a (?P<name>[a-z]+) (?P<id>[0-9]*)>", True),
        ("<a (?P<name>[a-z]+)(?: (?P<id>[0-9]+))?>", False),
        ("<a (?:(?P<name>[a-z]+)|_)>", False),
    ],
)
def test_again_captures_are_the_groupdict_only_when_every_group_takes_part(
    opener: str, all_set: bool
) -> None:
    # The call loop reads an again opener's captures with one `groupdict()` when each named group
    # takes part in every match (`_all_set`); otherwise groups that did not take part are left
    # out, as the streaming parser leaves them out. Both parses give the same calls.
    spec = {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open_pattern": opener,
                "close": "</a>",
                "repeats": True,
                "content": "json",
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            },
            "content": {},
        },
    }
    t = chatparse.load_response_template(spec)
    again = [ag for ag in _oneshot.plan_for(t).again if ag is not None and ag.names]
    assert again and again[0].all_set is all_set
    names = ["x" * (i + 1) if i != 3 else "_" for i in range(6)]
    text = "".join(f'<a {name} {i if i % 2 else ""}>{{"a": {i}}}</a>' for i, name in enumerate(names))
    text += "".join(f'<a {name}>{{"a": {i}}}</a>' for i, name in enumerate(names))

    def events(fast: bool) -> list[Any]:
        _, got = _oneshot.parse_events(text, t, "", None, fast=fast)
        return [{**e, "error": str(e["error"])} if "error" in e else e for e in got]

    fast = events(True)
    assert fast == events(False)
    opened = [e["captures"] for e in fast if e["type"] == "region_open" and e["field"] == "tool_calls"]
    assert len(opened) >= 5
    full = [set(c) == set(again[0].names) for c in opened]
    assert all(full) if all_set else not all(full)  # (a group left out where one may not take part)
