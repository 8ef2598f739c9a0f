"""Shared fixtures for the OpenAI-layer tests: family templates, cases, streaming runs, markers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from chatparse.openai import ChatParser, merge_deltas

DATA = Path(__file__).resolve().parent.parent / "data"
FAMILIES: dict[str, dict] = json.loads((DATA / "families.json").read_text(encoding="utf-8"))
CASES: list[dict] = json.loads((DATA / "family_cases.json").read_text(encoding="utf-8"))


def counter_ids() -> Callable[[], str]:
    n = iter(range(10**6))
    return lambda: f"call_{next(n)}"


def case_kwargs(case: dict, **options: Any) -> dict[str, Any]:
    return {
        "template": FAMILIES[case["template"]],
        "prefix": case["prefix"],
        "tools": case["tools"],
        "id_factory": counter_ids(),
        **options,
    }


def stream(chunks: Iterable[str], finish_reason: str = "stop", **kwargs: Any) -> tuple[dict, list[dict], str]:
    """Feed `chunks`; returns (message, all deltas, finish_reason)."""
    parser = ChatParser(**kwargs)
    deltas: list[dict] = []
    for c in chunks:
        deltas += parser.feed(c)
    message, last, reason = parser.finish(finish_reason)
    return message, deltas + last, reason


def streamed_dropped(message: dict) -> set[int]:
    return {d["index"] for d in message.get("chatparse", {}).get("dropped", []) if d["streamed"]}


def public(message: dict) -> dict:
    return {k: v for k, v in message.items() if k != "chatparse"}


def merged(message: dict, deltas: list[dict]) -> dict:
    return merge_deltas(deltas, discard=streamed_dropped(message))


_SPECIAL = re.compile(
    r"<\|[^|<>]{1,40}\|>|<｜[^｜<>]{1,40}｜>|\[/?[A-Z_]{3,}\]|<\|[a-z_\"]+>|<[a-z_\"]+\|>|</?[a-z_]{3,}>"
)


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


def markers(family: str) -> set[str]:
    """Marker strings of a family template: literal delimiters, text wrappers, special tokens in patterns."""
    spec = FAMILIES[family]
    found: set[str] = set()
    for f in spec["fields"].values():
        for key in ("open", "close"):
            found.update(_strings(f.get(key)))
        for key in ("open_pattern", "close_pattern"):
            for p in _strings(f.get(key)):
                found.update(_SPECIAL.findall(p.replace("\\|", "|").replace("\\[", "[").replace("\\]", "]")))
        args = f.get("content_args") or {}
        found.update(_strings([args.get("strip_prefix"), args.get("strip_suffix")]))
    found.update(_strings(spec.get("start_anchor")))
    groups = {"<name>", "<key>", "<value>", "<id>"}  # `(?P<name>...)`, not markers
    return {m for m in found if len(m.strip()) >= 3 and m not in groups}
