"""`run_turn`: one agent turn (generate, dispatch the calls, generate again) on any runtime.

Theory of operation
-------------------
A turn is a loop of at most `max_steps` generations. Each step:

1. the runtime generates from the conversation so far (streamed: content and reasoning events
   arrive as the model writes them; a call event once the call is complete);
2. the assistant message is persisted (appended to the history) after the runtime's observers ran;
3. its calls are dispatched in order through the `ToolRegistry`: every call gets a `role: "tool"`
   result, errors included (`Tool not found: ...`, `Invalid arguments for ...`, `Tool call not
   authorized: ...`, `Error: ...`), so the model can correct itself on the next step; the
   `authorize` hook decides what may run (parsers never veto: an unknown or unauthorized call is
   answered, not dropped);
4. the loop goes on while the model calls tools.

A step with no calls ends the turn (`finish_reason` is the generation's: `"stop"`, or
`"length"` when it was cut off). A call to a tool that has no handler ends the turn after the
step's other calls ran, with the call in `TurnResult.pending` (`finish_reason="tool_calls"`), for
the caller to execute. Tool-call markup that did not parse (a malformed call) is never run; with
`malformed_calls="feedback"` (the default) the assistant message keeps the call text as its content
(chat templates and APIs want text there), the model is told in a user message what could not be
parsed and why, and it gets another step; with `"stop"` the turn ends there. When `max_steps`
generations all called tools, the turn ends with `finish_reason="max_steps"`.

`run_turn` / `arun_turn` return the `TurnResult`; `stream_turn` / `astream_turn` yield the events
(`ContentDelta`, `ReasoningDelta`, `ToolCallEvent`, `ToolResultEvent`, `StepFinished`, then one
`TurnFinished` holding the result).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._base import Runtime
from ._generation import Generation, ToolCall
from ._options import GenerationOptions
from ._tools import Authorize, ToolRegistry, ToolResult

__all__ = [
    "ContentDelta",
    "ReasoningDelta",
    "StepFinished",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEvent",
    "TurnFinished",
    "TurnResult",
    "arun_turn",
    "astream_turn",
    "run_turn",
    "stream_turn",
]

_MALFORMED_MODES = ("feedback", "stop")
_QUOTE = 400  # characters of a malformed call quoted back to the model


@dataclass(frozen=True, slots=True)
class ContentDelta:
    """Answer text as the model writes it."""

    type: ClassVar[str] = "content"
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """Reasoning text as the model writes it."""

    type: ClassVar[str] = "reasoning"
    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """A complete tool call, about to be dispatched (or left pending)."""

    type: ClassVar[str] = "tool_call"
    step: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolResultEvent:
    """The answer to a tool call, as the model will read it."""

    type: ClassVar[str] = "tool_result"
    step: int
    result: ToolResult


@dataclass(frozen=True, slots=True)
class StepFinished:
    """A step's generation ended; `generation` holds its message, calls and report."""

    type: ClassVar[str] = "step"
    step: int
    generation: Generation


@dataclass(frozen=True)
class TurnResult:
    """The outcome of a turn.

    `messages` is the whole conversation (the input history, then what the turn added);
    `new_messages` only what the turn added (assistant messages, tool results, feedback);
    `finish_reason` is `"stop"`, `"length"`, `"tool_calls"` (calls left `pending` for the
    caller), `"malformed"` (a malformed call with `malformed_calls="stop"`) or `"max_steps"`.
    """

    messages: list[dict[str, Any]]
    new_messages: list[dict[str, Any]]
    generations: list[Generation]
    results: list[ToolResult]
    finish_reason: str
    pending: list[ToolCall] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.generations)

    @property
    def message(self) -> dict[str, Any] | None:
        """The last assistant message."""
        return self.generations[-1].message if self.generations else None

    @property
    def content(self) -> str | None:
        """The last assistant message's content."""
        return self.generations[-1].content if self.generations else None


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The turn is over."""

    type: ClassVar[str] = "turn"
    result: TurnResult


TurnEvent = ContentDelta | ReasoningDelta | ToolCallEvent | ToolResultEvent | StepFinished | TurnFinished


def _error_summary(error: Any) -> str:
    """The gist of a parse error: its first line and any `Error: ...` line (no quoted content)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return "unparseable tool call"
    keep = [lines[0]] + [line for line in lines[1:] if line.startswith("Error:")]
    return " ".join(keep)


def _malformed_text(gen: Generation) -> str:
    texts = [str(e.get("text") or "").strip() for e in gen.malformed_calls]
    return "\n".join(t for t in texts if t)


def _feedback(gen: Generation) -> dict[str, Any]:
    """The user message that tells the model its call markup did not parse."""
    parts = []
    for e in gen.malformed_calls:
        text = str(e.get("text") or "").strip()
        if len(text) > _QUOTE:
            text = text[:_QUOTE] + "..."
        parts.append(_error_summary(e.get("error")) + (f" The call was: {text}" if text else ""))
    return {
        "role": "user",
        "content": "Your tool call could not be parsed, so it was not run. "
        + " ".join(parts)
        + " Write the call again in the correct format.",
    }


def _step_options(options: Any, step: int, history: list[dict[str, Any]]) -> Any:
    """The options of one step: `options` itself, or what the callable returns for `(step, history)`."""
    if callable(options) and not isinstance(options, (GenerationOptions, Mapping)):
        return options(step, list(history))
    return options


def _check(runtime: Any, messages: Any, max_steps: Any, malformed_calls: str) -> list[dict[str, Any]]:
    if not isinstance(runtime, Runtime):
        raise TypeError(f"runtime must be a chatparse.runtime Runtime, not {type(runtime).__name__}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    if malformed_calls not in _MALFORMED_MODES:
        raise ValueError(f"malformed_calls must be one of {_MALFORMED_MODES}, got {malformed_calls!r}")
    if isinstance(messages, (str, Mapping)) or not all(isinstance(m, Mapping) for m in messages):
        raise TypeError("messages must be a list of message dicts")
    return [dict(m) for m in messages]


class _Loop:
    """The state of one turn, shared by the sync and async drivers."""

    def __init__(
        self, history: list[dict[str, Any]], registry: ToolRegistry, max_steps: int, malformed: str
    ) -> None:
        self.history = history
        self.start = len(history)
        self.registry = registry
        self.max_steps = max_steps
        self.malformed = malformed
        self.generations: list[Generation] = []
        self.results: list[ToolResult] = []
        self.pending: list[ToolCall] = []
        self.finish: str | None = None

    def deltas(self, step: int, delta: dict[str, Any]) -> Iterator[TurnEvent]:
        if delta.get("reasoning_content"):
            yield ReasoningDelta(step, delta["reasoning_content"])
        if delta.get("content"):
            yield ContentDelta(step, delta["content"])

    def after_generation(self, step: int, gen: Generation) -> list[ToolCall]:
        """Persist the message; return the calls to dispatch (setting `finish` when the turn ends)."""
        self.generations.append(gen)
        message = gen.message
        if not gen.tool_calls and gen.malformed_calls and not message.get("content"):
            # the history keeps what the model wrote (chat templates and APIs want text there)
            message = {**message, "content": _malformed_text(gen)}
        self.history.append(message)
        if gen.tool_calls:
            runnable = []
            for call in gen.tool_calls:
                tool = self.registry.get(call.name)
                if tool is not None and tool.handler is None:
                    self.pending.append(call)
                else:
                    runnable.append(call)
            if self.pending:
                self.finish = "tool_calls"
            elif step == self.max_steps:
                self.finish = "max_steps"
            return runnable
        if gen.malformed_calls:
            if self.malformed == "stop":
                self.finish = "malformed"
            elif step == self.max_steps:
                self.finish = "max_steps"
            else:
                self.history.append(_feedback(gen))
            return []
        self.finish = gen.finish_reason if gen.finish_reason != "tool_calls" else "stop"
        return []

    def record(self, result: ToolResult) -> None:
        self.results.append(result)
        self.history.append(result.to_message())

    def result(self) -> TurnResult:
        return TurnResult(
            messages=self.history,
            new_messages=self.history[self.start :],
            generations=self.generations,
            results=self.results,
            finish_reason=self.finish or "max_steps",
            pending=self.pending,
        )


def stream_turn(
    runtime: Runtime,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Any = None,
    max_steps: int = 8,
    options: Any = None,
    authorize: Authorize | None = None,
    malformed_calls: str = "feedback",
) -> Iterator[TurnEvent]:
    """Run a turn, yielding its events; the last one is `TurnFinished` (see the module docstring).

    `tools` is a `ToolRegistry` or a list of functions, tool dicts and `Tool`s; `options` are
    `GenerationOptions` (or a mapping) for every step, or a callable `(step, history) -> options`
    choosing them per step (steps count from 1); `authorize(call)` returns True / None to allow a
    call, False or a message string to deny it.
    """
    loop = _Loop(
        _check(runtime, messages, max_steps, malformed_calls),
        ToolRegistry.coerce(tools),
        max_steps,
        malformed_calls,
    )
    schemas = loop.registry.schemas() or None
    for step in range(1, max_steps + 1):
        s = runtime.stream(loop.history, tools=schemas, options=_step_options(options, step, loop.history))
        with s:
            for delta in s:
                yield from loop.deltas(step, delta)
        gen = s.result
        assert gen is not None
        calls = loop.after_generation(step, gen)
        for call in gen.tool_calls:
            yield ToolCallEvent(step, call)
        for call in calls:
            result = loop.registry.dispatch(call, authorize=authorize)
            loop.record(result)
            yield ToolResultEvent(step, result)
        yield StepFinished(step, gen)
        if loop.finish is not None:
            break
    yield TurnFinished(loop.result())


def run_turn(
    runtime: Runtime,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Any = None,
    max_steps: int = 8,
    options: Any = None,
    authorize: Authorize | None = None,
    malformed_calls: str = "feedback",
    on_event: Callable[[TurnEvent], Any] | None = None,
) -> TurnResult:
    """Run a turn to its end and return the `TurnResult`; `on_event` sees every event as it happens.

    >>> from chatparse.runtime import ReplayRuntime
    >>> def add(a: int, b: int) -> int:
    ...     return a + b
    >>> rt = ReplayRuntime(['<tool_call>\\n{"name": "add", "arguments": {"a": 2, "b": 3}}\\n</tool_call><|im_end|>',
    ...                     "The sum is 5.<|im_end|>"], model="Qwen/Qwen3-8B")
    >>> result = run_turn(rt, [{"role": "user", "content": "2 + 3?"}], tools=[add])
    >>> result.content, result.steps, result.results[0].content
    ('The sum is 5.', 2, '5')
    """
    for event in stream_turn(
        runtime,
        messages,
        tools=tools,
        max_steps=max_steps,
        options=options,
        authorize=authorize,
        malformed_calls=malformed_calls,
    ):
        if on_event is not None:
            on_event(event)
        if isinstance(event, TurnFinished):
            return event.result
    raise AssertionError("stream_turn ended without TurnFinished")  # pragma: no cover


async def astream_turn(
    runtime: Runtime,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Any = None,
    max_steps: int = 8,
    options: Any = None,
    authorize: Authorize | None = None,
    malformed_calls: str = "feedback",
) -> AsyncIterator[TurnEvent]:
    """`stream_turn` for asyncio: generations through `runtime.astream`, async tools awaited,
    sync tools run in worker threads."""
    loop = _Loop(
        _check(runtime, messages, max_steps, malformed_calls),
        ToolRegistry.coerce(tools),
        max_steps,
        malformed_calls,
    )
    schemas = loop.registry.schemas() or None
    for step in range(1, max_steps + 1):
        s = runtime.astream(loop.history, tools=schemas, options=_step_options(options, step, loop.history))
        async with s:
            async for delta in s:
                for event in loop.deltas(step, delta):
                    yield event
        gen = s.result
        assert gen is not None
        calls = loop.after_generation(step, gen)
        for call in gen.tool_calls:
            yield ToolCallEvent(step, call)
        for call in calls:
            result = await loop.registry.adispatch(call, authorize=authorize)
            loop.record(result)
            yield ToolResultEvent(step, result)
        yield StepFinished(step, gen)
        if loop.finish is not None:
            break
    yield TurnFinished(loop.result())


async def arun_turn(
    runtime: Runtime,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Any = None,
    max_steps: int = 8,
    options: Any = None,
    authorize: Authorize | None = None,
    malformed_calls: str = "feedback",
    on_event: Callable[[TurnEvent], Any] | None = None,
) -> TurnResult:
    """`run_turn` for asyncio; `on_event` may be a coroutine function."""
    async for event in astream_turn(
        runtime,
        messages,
        tools=tools,
        max_steps=max_steps,
        options=options,
        authorize=authorize,
        malformed_calls=malformed_calls,
    ):
        if on_event is not None:
            out = on_event(event)
            if inspect.isawaitable(out):
                await out
        if isinstance(event, TurnFinished):
            return event.result
    raise AssertionError("astream_turn ended without TurnFinished")  # pragma: no cover
