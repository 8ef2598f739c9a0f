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

import asyncio
import concurrent.futures
import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..openai import InvalidRequest


class ConstraintRefused(Exception):
    """A request the planner answers without a constraint: `status` (413, 422, 503), `param`, `kind`."""

    def __init__(self, status: int, message: str, param: str | None, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.kind = kind


__all__ = [
    "CONSTRAINT_FIELDS",
    "ConstraintPlanner",
    "ConstraintRefused",
    "needs_constraint",
    "plan_constraint",
]


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
    time_budget: float | None = None,
) -> Any:
    """The `chatparse.constraints.Constraint` to attach to the upstream request for `req` on an
    upstream API `kind`, or None when none is needed or the upstream enforces the request itself.

    Raises `InvalidRequest` (answered 400) naming the upstream API or what the template cannot
    express when `tool_choice` / a strict tool needs a constraint that cannot be attached.
    `parallel_tool_calls=false` alone never refuses: without a constraint the server still sends
    only the first call (and reports the others). `time_budget`: seconds the derivation may take
    (`ConstraintTimeout` past it, raised as it is)."""
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
    from ..constraints import ConstraintError, ConstraintTimeout, derive

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
            time_budget=time_budget,
        )
        if kind == "ollama-generate":
            c.ollama_format()  # only a JSON schema travels to Ollama
    except ConstraintTimeout:
        raise
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


class ConstraintPlanner:
    """Derives constraints for the server off the event loop, bounded per request.

    * Limits first: more than `max_tools` tools or more than `max_tools_bytes` of tool JSON is
      answered 413 naming the limit, before any derivation.
    * Derivations run on a pool of their own (`workers` threads), so a slow one never takes the
      threads that render prompts or read bodies, and never the event loop.
    * A request waits at most `timeout` seconds for its constraint (queueing included), then is
      answered 503 naming the budget. The derivation goes on in the background, up to
      `timeout * BACKGROUND_FACTOR` seconds in all, after which it is interrupted (its worker freed)
      and the tool set is remembered as too costly: the same request is then answered 422 at once.
    * Identical requests share one derivation (a retry joins the running one, and once it is done
      `derive`'s cache answers it at once).
    """

    BACKGROUND_FACTOR = 5.0
    _REFUSED_SIZE = 256

    def __init__(self, *, workers: int, timeout: float, max_tools: int, max_tools_bytes: int) -> None:
        self.timeout = timeout
        self.max_tools = max_tools
        self.max_tools_bytes = max_tools_bytes
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="chatparse-constraints"
        )
        self._lock = threading.Lock()
        self._running: dict[str, concurrent.futures.Future[Any]] = {}
        self._refused: OrderedDict[str, str] = OrderedDict()

    def check_limits(self, req: dict[str, Any]) -> None:
        tools = req.get("tools") or []
        if len(tools) > self.max_tools:
            raise ConstraintRefused(
                413,
                f"{len(tools)} tools need a generation constraint, more than this server derives one "
                f"for (--constraint-max-tools {self.max_tools})",
                "tools",
                kind="constraint_too_large",
            )
        size = len(json.dumps(tools, ensure_ascii=False).encode("utf-8"))
        if size > self.max_tools_bytes:
            raise ConstraintRefused(
                413,
                f"the tools take {size} bytes of JSON, more than this server derives a generation "
                f"constraint for (--constraint-max-tools-bytes {self.max_tools_bytes})",
                "tools",
                kind="constraint_too_large",
            )

    async def plan(self, kind: str, req: dict[str, Any], **kw: Any) -> Any:
        """`plan_constraint(kind, req, **kw)` within the budget (see the class)."""
        self.check_limits(req)
        key = json.dumps(
            [kind, req.get("tools"), req.get("tool_choice"), req.get("parallel_tool_calls"), kw],
            sort_keys=True,
            default=str,
        )
        hard = self.timeout * self.BACKGROUND_FACTOR
        with self._lock:
            refused = self._refused.get(key)
            fut = self._running.get(key)
            started = refused is None and fut is None
            if started:
                fut = self._pool.submit(plan_constraint, kind, req, time_budget=hard, **kw)
                self._running[key] = fut
        if started:
            assert fut is not None  # (a callback added to a finished future runs here, unlocked)
            fut.add_done_callback(lambda f: self._done(key, f))
        if refused is not None:
            raise ConstraintRefused(422, refused, "tools", kind="constraint_timeout")
        assert fut is not None
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), self.timeout)
        except TimeoutError:
            n = len(req.get("tools") or [])
            raise ConstraintRefused(
                503,
                f"the generation constraint for {n} tool{'s' if n != 1 else ''} was not derived within "
                f"the per-request budget of {self.timeout:g} s (--constraint-timeout); the derivation "
                f"continues in the background for up to {hard:g} s and the same request then uses it",
                "tools",
                kind="constraint_timeout",
            ) from None
        except _timeout_error() as e:
            raise ConstraintRefused(422, self._refusal(e), "tools", kind="constraint_timeout") from None

    def _done(self, key: str, fut: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            if self._running.get(key) is fut:
                del self._running[key]
            exc = None if fut.cancelled() else fut.exception()
            if isinstance(exc, _timeout_error()):
                self._refused[key] = self._refusal(exc)
                while len(self._refused) > self._REFUSED_SIZE:
                    self._refused.popitem(last=False)

    @staticmethod
    def _refusal(e: BaseException) -> str:
        return f"these tools cannot be constrained by this server: {e}"

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _timeout_error() -> type[Exception]:
    from ..constraints import ConstraintTimeout

    return ConstraintTimeout
