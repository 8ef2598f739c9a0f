"""The recorded model outputs the server is tested with: the canitoolcall corpus and our own fixtures.

Shared by `test_corpus.py` (through the test engine) and `test_llamacpp.py` (through llama-cpp-python's
server). Importing this module needs canitoolcall (test extra).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from canitoolcall.fixtures import Fixture, load_families, load_fixtures

from ..conformance import harness as H

Case = tuple[Any, Any, Any]
"""(canitoolcall Fixture, harness Config, canitoolcall Family or None)."""


def _with_entry(layer: Any, entry: str) -> Any:
    return dataclasses.replace(layer, resolve_name=lambda model=None, **_: entry)


def load_cases() -> dict[tuple[str, str], list[Case]]:
    """Every fixture chatparse has a template for, grouped by (template, generation prompt); the own
    fixtures' known failures (strict xfails in tests/conformance/test_own_fixtures.py) left out."""
    from ..conformance.test_own_fixtures import BY_TEMPLATE_ONLY, FAMILY_OBJS, RECORDS, TEMPLATE_BUGS

    layer = H.load_layer()
    fams = load_families()
    families = {f.name: f for f in fams} if isinstance(fams, list) else dict(fams)
    fixtures = list(load_fixtures())
    fixtures += [Fixture.from_dict(rec, source=path, line=line) for path, line, rec in RECORDS]
    families.update(FAMILY_OBJS)
    groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for fx in fixtures:
        if fx.id in TEMPLATE_BUGS:
            continue
        entry = BY_TEMPLATE_ONLY.get(fx.family)  # entries chosen by chat template, not by model id
        try:
            cfg = H.config_for(fx, _with_entry(layer, entry) if entry else layer, families)
        except H.Unsupported:
            continue
        groups[(cfg.template_name, cfg.kwargs["prefix"])].append((fx, cfg, families.get(fx.family)))
    return dict(groups)


def tools_of(fx: Any) -> list[dict[str, Any]]:
    """The fixture's tools as Chat Completions tools."""
    out = []
    for t in fx.tools:
        t = dict(t)
        out.append(t if "function" in t else {"type": "function", "function": t})
    return out


def plain(message: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions message without empty keys, role, refusal and report; calls as (name, arguments)."""
    # (the first streamed chunk carries `content: ""` with the role, as OpenAI's does)
    out = {
        k: v for k, v in message.items() if v not in (None, "") and k not in ("refusal", "chatparse", "role")
    }
    if out.get("tool_calls"):
        out["tool_calls"] = [(c["function"]["name"], c["function"]["arguments"]) for c in out["tool_calls"]]
    return out
