"""Raw argument values that quote the template's own markers (round 4: a value excludes only what
would end it, not every marker literal).

For every catalog template whose calls carry raw text values (`xml-inline` tags), a value is
built by hypothesis from the markers the template's tags and closers are made of, plus prose and
whitespace, and placed in a call the constraint writes. Wherever the constraint (XGrammar running
the GBNF form) accepts the call, the parser must read back exactly that value (less a line break
the tag itself reads at either edge, `<parameter=K>\n?`, or as its value parser reads it): the
constraint may refuse a value, never admit one the parser cuts short at a quoted marker. The corpus test
(`test_constraints.py::test_corpus_outputs_under_auto`) checks that the real outputs quoting
markers are admitted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse import catalog, constraints, load_response_template, parse_response

from . import engines as E

SENTINEL = "QQSENTINELQQ"


def _tool(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "write_note",
            "parameters": {"type": "object", "properties": {"text": schema}, "required": ["text"]},
        },
    }


def _xml_templates() -> list[str]:
    out = []
    for name in catalog.names():
        spec = catalog.get(name)
        f = (spec.get("fields") or {}).get("tool_calls") or {}
        if f.get("content") == "xml-inline":
            out.append(name)
    return out


def _markers(name: str) -> list[str]:
    """The literal pieces of the tool field's patterns (`</parameter>`, `<parameter=`, ...)."""
    spec = catalog.get(name)["fields"]["tool_calls"]
    sources = [
        spec.get("open_pattern") or "",
        spec.get("close_pattern") or "",
        (spec.get("content_args") or {}).get("tag_pattern") or "",
    ]
    pieces: set[str] = set()
    for src in sources:
        # runs of literal characters between regex syntax
        for m in regex.finditer(r"(?:\\.|[^\\()\[\]{}|?*+^$.])+", src):
            lit = regex.sub(r"\\(.)", r"\1", m.group(0))
            if lit.strip():
                pieces.add(lit)
    return sorted(pieces)


def _frame(name: str) -> tuple[str, str] | None:
    """The text of one call around its value: derived with the value fixed to the sentinel."""
    try:
        c = constraints.derive(
            name,
            [_tool({"type": "string", "enum": [SENTINEL]})],
            tool_choice="required",
            prefix=_prompt(name),
        )
    except constraints.ConstraintError:
        return None
    sample = c.sample_lead + c.sample_calls[0]
    if sample.count(SENTINEL) != 1:
        return None
    before, after = sample.split(SENTINEL)
    return before, after


def _prompt(name: str) -> str:
    return str(catalog.describe(name)["generation_prompt"])


def _value_of(name: str, text: str) -> Any:
    msg = parse_response(
        text,
        load_response_template(catalog.get(name)),
        prefix=_prompt(name),
        tools=[_tool({"type": "string"})],
    )
    calls = msg.get("tool_calls") or []
    assert len(calls) == 1, (text, msg)
    args = calls[0]["function"]["arguments"]
    return args.get("text") if isinstance(args, dict) else args


@pytest.mark.parametrize("name", _xml_templates())
def test_accepted_values_parse_back_exactly(name: str) -> None:
    E.need("xgrammar")
    frame = _frame(name)
    if frame is None:
        pytest.skip(f"{name}: no raw string value in a call (or not derivable)")
    before, after = frame
    try:
        c = constraints.derive(
            name, [_tool({"type": "string"})], tool_choice="required", prefix=_prompt(name)
        )
    except constraints.ConstraintError as e:
        pytest.skip(str(e))
    grammar = E.xg_compile(c, "gbnf")
    pieces = _markers(name) + ["x", " ", "\n", "and", "<", ">", "/"]
    cargs = catalog.get(name)["fields"]["tool_calls"].get("content_args") or {}
    strip = cargs.get("value_parser")
    json_values = "json" in str(strip) or bool(cargs.get("type_parsers"))
    seen = {"accepted": 0}

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.sampled_from(pieces), min_size=1, max_size=8))
    def check(parts: list[str]) -> None:
        value = "".join(parts)
        text = before + value + after
        if not E.xg_accepts(grammar, text):
            return
        seen["accepted"] += 1
        got = _value_of(name, text)
        wants = {value.strip() if strip is not None and "text" in str(strip) else value}
        # a tag that reads a line break on either side of the value as its own (`<parameter=K>\n?`)
        for w in list(wants):
            w2 = w[1:] if w.startswith("\n") else w
            wants |= {w2, w[:-1] if w.endswith("\n") else w, w2[:-1] if w2.endswith("\n") else w2}
        if json_values:  # a value the JSON value parser reads (`""` is the empty string)
            try:
                decoded = json.loads(value)
            except ValueError:
                pass
            else:
                if isinstance(decoded, str):
                    wants.add(decoded)
        assert got in wants, (text, got)

    check()
    # the property is not vacuous: some values holding markers were admitted and read back
    assert seen["accepted"] > 0, name
