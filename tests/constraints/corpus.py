"""Valid tool-calling outputs from the canitoolcall corpus and the own fixtures, with their template."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatparse import catalog

DATA = Path(__file__).resolve().parents[1] / "data" / "own_fixtures"


@dataclass(frozen=True)
class Case:
    id: str
    template: str
    prefix: str
    tools: list[dict[str, Any]]
    output: str  # the raw output without the stop strings that end it (engines drop them)
    calls: int


def _cut_at_stop(text: str, stops: list[str]) -> str:
    """Drop the stop strings that end the output: engines end on the end-of-sequence token and
    leave it out. A stop string inside the output (an argument that mentions `<|im_end|>`) is
    text the model wrote, and stays."""
    cut = True
    while cut:
        cut = False
        for s in stops:
            if s and text.endswith(s):
                text, cut = text[: len(text) - len(s)], True
    return text


@functools.lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    from canitoolcall.fixtures import Fixture, load_families, load_fixtures, read_jsonl

    from ..conformance import harness as H

    layer = H.load_layer()
    families = load_families()
    fixtures = list(load_fixtures())
    for path in sorted(DATA.glob("*.jsonl")):
        fixtures.extend(Fixture.from_dict(d) for _, d in read_jsonl(path))
    out = []
    for fx in fixtures:
        calls = fx.expected.tool_calls if fx.expected is not None else ()
        if not calls or fx.truncated or fx.expected_error is not None:
            continue
        try:
            cfg = H.config_for(fx, layer, families)
        except H.Unsupported:
            continue
        name = cfg.template_name
        stops = list(catalog.describe(name).get("stop") or [])
        out.append(
            Case(
                fx.id,
                name,
                cfg.kwargs["prefix"],
                [dict(t) for t in fx.tools],
                _cut_at_stop(fx.raw_output, stops),
                len(calls),
            )
        )
    return tuple(out)


def dump(case: Case) -> str:
    return json.dumps({"id": case.id, "template": case.template, "output": case.output}, ensure_ascii=False)
