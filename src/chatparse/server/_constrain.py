"""Generation constraints for raw-text upstreams (`chatparse.constraints`, issue 14).

When the engine generates raw text (`completions`, `chat-raw`, `ollama-generate`), nothing but a
constraint makes `tool_choice="required"`, a named tool, `strict` tools or
`parallel_tool_calls=false` hold. `plan` derives one for such a request from the response template,
the request's tools and the rendered prompt (so a region the prompt opened, `<think>`, is continued);
`CONSTRAINT_FIELDS[kind]` says how it travels in that API's request body:

* `completions` and `chat-raw` (vLLM, SGLang, llama.cpp, LM Studio speak the same path): each
  engine's own field, which the others ignore: vLLM `structured_outputs.structural_tag` (the
  XGrammar structural tag), SGLang `ebnf` (the same grammar in XGrammar's EBNF), llama.cpp
  `grammar` (GBNF). `response_format` is left alone: llama.cpp's chat endpoint rejects a
  structural-tag `response_format`.
* `ollama-generate`: `format`, Ollama's JSON schema, where one is exact for the template
  (`Constraint.json_schema`); otherwise the request is refused.
* `chat` and `ollama-chat` parse calls themselves: `chat` passes `tool_choice` through to the
  engine, which enforces it; Ollama's chat API has no `tool_choice`, so a request that needs one is
  refused (400 naming the upstream API) rather than answered unconstrained.

A request that needs a constraint the template cannot express exactly is refused with 400 naming
what the template cannot express (`ConstraintError`), never sent unconstrained.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from ..openai import InvalidRequest

__all__ = ["CONSTRAINT_FIELDS", "needs_constraint", "plan_constraint"]


def needs_constraint(req: dict[str, Any]) -> str | None:
    """The request field that asks for constrained generation (`tool_choice`, `tools` for a strict
    tool, `parallel_tool_calls`), or None. `req` is a validated Chat Completions request."""
    tools = req.get("tools") or []
    choice = req.get("tool_choice")
    if not tools or choice == "none":
        return None
    if choice == "required" or isinstance(choice, dict):
        return "tool_choice"
    if any((t.get("function") or {}).get("strict") for t in tools):
        return "tools"
    if req.get("parallel_tool_calls") is False:
        return "parallel_tool_calls"
    return None


def _what(req: dict[str, Any], param: str) -> str:
    choice = req.get("tool_choice")
    if param == "tool_choice":
        return (
            "tool_choice 'required'"
            if choice == "required"
            else f"tool_choice naming {((choice or {}).get('function') or {}).get('name')!r}"
        )
    if param == "tools":
        return "a strict tool"
    return "parallel_tool_calls=false"


def plan_constraint(
    kind: str,
    req: dict[str, Any],
    *,
    template: Any,
    template_name: str | None,
    prefix: str | None,
    stop: list[str] | None,
) -> Any:
    """The `chatparse.constraints.Constraint` to attach to the upstream request for `req` on an
    upstream API `kind`, or None when none is needed or the upstream enforces the request itself.

    Raises `InvalidRequest` (answered 400) naming the upstream API or what the template cannot
    express when `tool_choice` / a strict tool needs a constraint that cannot be attached.
    `parallel_tool_calls=false` alone never refuses: without a constraint the server still sends
    only the first call (and reports the others)."""
    param = needs_constraint(req)
    if param is None or kind == "chat":  # a structured chat endpoint enforces tool_choice itself
        return None
    soft = param == "parallel_tool_calls"
    what = _what(req, param)
    if kind == "ollama-chat":
        if soft:
            return None
        raise InvalidRequest(
            f"{what} cannot be enforced on the ollama-chat upstream: Ollama's chat API takes no "
            "tool_choice and parses calls itself (use --upstream-api ollama-generate or another engine)",
            param,
        )
    if template is None:
        if soft:
            return None
        raise InvalidRequest(
            f"{what} cannot be enforced on the {kind} upstream without a response template", param
        )
    from ..constraints import ConstraintError, derive

    label = template_name or "the response template"
    # Never written: the operator's stop strings and the catalog entry's end-of-turn markers (the
    # engine stops on those tokens itself; the constraint ends the output there).
    stops = list(stop or [])
    if template_name:
        from .. import catalog

        with contextlib.suppress(KeyError):  # a template file: no catalog stops
            stops += [s for s in catalog.describe(template_name).get("stop") or [] if s not in stops]
    try:
        c = derive(
            template,
            req.get("tools") or [],
            tool_choice=req.get("tool_choice") or "auto",
            parallel_tool_calls=req.get("parallel_tool_calls", True),
            strict=True if param == "tools" else None,
            prefix=prefix,
            stop=stops,
        )
        if kind == "ollama-generate":
            c.ollama_format()  # only a JSON schema travels to Ollama
    except ConstraintError as e:
        if soft:
            return None
        raise InvalidRequest(
            f"{what} cannot be enforced on the {kind} upstream with {label}: {e}", param
        ) from None
    return c


def _engine_fields(c: Any) -> dict[str, Any]:
    gbnf = c.gbnf()
    return {
        "structured_outputs": {"structural_tag": json.dumps(c.structural_tag(), ensure_ascii=False)},  # vLLM
        "ebnf": gbnf,  # SGLang
        "grammar": gbnf,  # llama.cpp
    }


CONSTRAINT_FIELDS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "completions": _engine_fields,
    "chat-raw": _engine_fields,
    "ollama-generate": lambda c: {"format": c.ollama_format()},
}
"""How a constraint travels in the request body of each raw-text upstream API."""
