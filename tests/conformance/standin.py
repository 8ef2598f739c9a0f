"""A minimal stand-in for ``chatparse.openai`` (and, when it is missing, ``chatparse.catalog``), built
on the core parser and the catalog templates (else the family templates of ``tests/data/families.json``).  Used only by ``benchmarks/conformance.py
--standin`` to exercise the harness before (or independently of) the real OpenAI layer; it
emits all deltas at ``finish()`` (no incremental streaming), so its stream results say nothing
about the real layer's incremental behaviour.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import chatparse

from .harness import Layer

_TEMPLATES: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "families.json").read_text(encoding="utf-8")
)


def _message(out: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for i, tc in enumerate(out.get("tool_calls") or ()):
        fn = tc.get("function", tc)
        args = fn.get("arguments")
        calls.append(
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {
                    "name": fn.get("name"),
                    "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                },
            }
        )
    reasoning = out.get("reasoning_content", out.get("thinking", out.get("reasoning")))
    return {
        "role": "assistant",
        "content": out.get("content") or None,
        "reasoning_content": reasoning or None,
        "tool_calls": calls,
    }


_NAMES = {"qwen3": "QWEN_JSON", "qwen3_xml": "QWEN_XML"}


def _catalog() -> Any:
    try:
        from chatparse import catalog
    except ImportError:
        return None
    return catalog


def _template(template: Any, model: str | None = None) -> Any:
    cat = _catalog()
    if template is None and cat is not None:
        return cat.resolve(model=model)
    if isinstance(template, str):
        return cat.get(template) if cat is not None else _TEMPLATES[_NAMES.get(template, template.upper())]
    return template


class StandInChatParser:
    def __init__(
        self, *, prefix: str, template: Any = None, tools: Any = None, model: str | None = None
    ) -> None:
        self._p = chatparse.ResponseParser(_template(template, model), prefix=prefix, tools=tools)

    def feed(self, text: str) -> list[dict[str, Any]]:
        self._p.feed(text)
        return []

    def finish(self, finish_reason: str = "stop") -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        out, _ = self._p.finalize()
        msg = _message(out)
        delta: dict[str, Any] = {"content": msg["content"], "reasoning_content": msg["reasoning_content"]}
        delta["tool_calls"] = [
            {"index": i, "id": tc["id"], "type": "function", "function": tc["function"]}
            for i, tc in enumerate(msg["tool_calls"])
        ]
        return msg, [delta], "tool_calls" if msg["tool_calls"] else finish_reason


def _parse_message(
    text: str,
    *,
    prefix: str,
    template: Any = None,
    tools: Any = None,
    finish_reason: str = "stop",
    model: str | None = None,
) -> dict[str, Any]:
    return _message(chatparse.parse_response(text, _template(template, model), prefix=prefix, tools=tools))


def _resolve_name(*, model: str) -> str:
    cat = _catalog()
    if cat is None:
        raise LookupError(model)  # no model index: the harness falls back to families
    return cat.resolve_name(model=model)


def _describe(name: str) -> dict[str, Any]:
    cat = _catalog()
    return cat.describe(name) if cat is not None else {"name": name, "generation_prompt": None}


def standin_layer() -> Layer:
    return Layer(
        resolve_name=_resolve_name,
        describe=_describe,
        parse_message=_parse_message,
        chat_parser=StandInChatParser,
    )
