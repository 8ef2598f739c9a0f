"""The fixed cost of a one-shot parse of a typical turn (text, then a few calls), counted, never
timed: the decisions `run` takes through `_decide`, and the objects made per parse.

Checked on the catalog families SGLang's detectors cover, with the request's tools.
"""

from __future__ import annotations

from typing import Any

import pytest

import chatparse
from chatparse import _oneshot, catalog

from ..support.build import pure_only
from ..support.calls import dense_calls

FAMILIES = ["qwen3", "qwen3_xml", "kimi_k2", "deepseek_v3"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


def _turn(family: str, n: int) -> str:
    think = "<think>\nThe user wants f twice.\n</think>\n\n" if family.startswith("qwen3") else ""
    return think + "Let me call f." + ("\n" if family.startswith("qwen3") else "") + dense_calls(family, n)


@pure_only
@pytest.mark.parametrize("family", FAMILIES)
def test_every_call_of_a_run_closes_in_the_call_loop(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first call of a run too (opened by `_decide`, not by an again step): no call region's
    # closer is decided by `_decide`, so a turn costs the same decisions with 1 call as with 5.
    asked: list[Any] = []
    real = _oneshot._decide

    def decide(fw: Any, *args: Any) -> Any:
        asked.append(fw)
        return real(fw, *args)

    monkeypatch.setattr(_oneshot, "_decide", decide)
    t = chatparse.load_response_template(catalog.get(family))
    calls_list = _oneshot.plan_for(t).by_field["tool_calls"]
    seen = []
    for n in (1, 5):
        asked.clear()
        out = chatparse.parse_response(_turn(family, n), t, prefix="", tools=TOOLS)
        assert [c["function"]["arguments"] for c in out["tool_calls"]] == [{"a": i} for i in range(n)]
        assert calls_list not in asked, family
        seen.append(len(asked))
    assert seen[0] == seen[1], seen
