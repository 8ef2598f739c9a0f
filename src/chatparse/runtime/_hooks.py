"""Lifecycle hooks and observers: what a runtime reports, and the rule that reporting never breaks it.

Theory of operation
-------------------
A runtime reports its life in six phases (`runtime-contract.md` §7): `loading` (with `progress`
0..1 where the runtime reports it), `compiling` (a coarse marker before the model is built),
`ready`, `generating` (once per generation, before it starts), `complete` (after the output was
parsed and observed) and `error` (with the exception, before it propagates). Every report is one
`LifecycleReport`; the firehose hook `on_lifecycle` sees each one first, then the per-phase hook
(`on_loading`, ...).

Two observers show what the parser saw (§8): `on_prompt_assembled` receives the exact rendered
prompt or request body before it is sent, and `on_raw_generation` receives, once per finished
generation, after parsing and before anything is persisted, the raw text, the cleaned text, the
reasoning, the calls, which parser claimed the output, and the region events with their offsets
(so a call the parser did not recognise is visible as raw text with no calls).

Rules: a hook that raises never aborts a load or a turn (the exception is logged on the
`chatparse.runtime` logger and swallowed); no hooks means no work (nothing is built for a hook
that is not set: `Hooks.wants(...)` is checked before a report or observation is made). Hooks are
purely observational: what they return is ignored, and they get copies, so mutating an argument
changes nothing.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "PHASES",
    "Hooks",
    "LifecycleReport",
    "PromptAssembled",
    "RawGeneration",
]

logger = logging.getLogger("chatparse.runtime")

PHASES = ("loading", "compiling", "ready", "generating", "complete", "error")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class LifecycleReport:
    """One lifecycle event of a runtime.

    `phase` is one of `PHASES`; `adapter` names the runtime adapter (`"transformers"`,
    `"llama.cpp"`, `"openai"`, `"ollama"`, `"replay"`); `at` is an ISO-8601 UTC timestamp.
    `progress` (0..1) is set on `loading` reports where the runtime reports progress; `detail` is
    a short human-readable note; `raw` is what the runtime itself reported (e.g. a download
    progress bar's counts); `error` is the exception of an `error` report; `stream_id` ties
    `generating` / `complete` / `error` reports to one generation.
    """

    phase: str
    adapter: str
    model: str
    at: str = field(default_factory=_now)
    detail: str | None = None
    progress: float | None = None
    raw: Any = None
    error: BaseException | None = None
    stream_id: str | None = None


@dataclass(frozen=True)
class PromptAssembled:
    """What is about to be sent to the runtime, exactly (not redacted).

    `kind` is `"rendered-prompt"` (local runtimes: `prompt` is the chat template's output, the
    text the model continues) or `"request-body"` (servers: `request_body` is the JSON body).
    """

    adapter: str
    model: str
    kind: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    streamed: bool
    stream_id: str
    prompt: str | None = None
    request_body: dict[str, Any] | None = None


@dataclass(frozen=True)
class RawGeneration:
    """One finished generation as the parser saw it.

    * `raw_text`: the text as the runtime produced it (special tokens the runtime returns
      included); for a server, the content it returned (nothing of its structured calls).
    * `cleaned_text`: the content after reasoning and tool calls were taken out (`""` if none).
    * `reasoning`: the reasoning texts, `tool_calls`: the calls, OpenAI-shaped (`id`, `type`,
      `function.name`, `function.arguments` as a JSON text), recovered ones included.
    * `parser`: what claimed the output: `"template:<catalog name>"` (or `"template"` for a
      template without a catalog name), `"auto:<recognizer>"` / `"auto"` (template-less
      detection), `"native"` (the provider's own calls), `"local:<recognizer>"` (calls recovered
      by `local_tool_call_parser`), or `"callable:<name>"`.
    * `events`: the region events of the parse (`region_open` / `region_chunk` / `region_close` /
      `region_malformed`, with `start` / `end` and `body_start` / `body_end` offsets into
      `input_text`). With a template: the core's events, fields named by the template, and
      `input_text` is the prompt's truncated tail followed by `raw_text`. With template-less
      detection (`"auto:..."`, and `local_tool_call_parser` set to `"auto"` or a family):
      `chatparse.detect.AutoParser`'s events, fields `reasoning` / `content` / `tool_calls`, each
      with the `recognizer` that found it; a call that is not one is a `region_malformed` whose
      text follows as content, and `input_text` is the reasoning opener the prompt ended with (if
      any) followed by `raw_text`. Empty for native calls without a fallback and for a callable
      parser.
    * `errors`: what the parser reported (malformed calls, dropped or unknown ones).
    """

    adapter: str
    model: str
    raw_text: str
    cleaned_text: str
    reasoning: list[str]
    tool_calls: list[dict[str, Any]]
    parser: str | None
    events: list[dict[str, Any]]
    input_text: str
    finish_reason: str
    streamed: bool
    stream_id: str
    errors: list[dict[str, Any]] = field(default_factory=list)


_Hook = Callable[[Any], Any] | None


@dataclass(frozen=True)
class Hooks:
    """Callbacks for lifecycle reports and observations; every one optional.

    >>> seen = []
    >>> hooks = Hooks(on_lifecycle=lambda r: seen.append(r.phase), on_ready=lambda r: 1 / 0)
    >>> hooks.lifecycle("ready", adapter="replay", model="m")   # the raising hook is logged, not raised
    >>> seen
    ['ready']
    """

    on_lifecycle: _Hook = None
    on_loading: _Hook = None
    on_compiling: _Hook = None
    on_ready: _Hook = None
    on_generating: _Hook = None
    on_complete: _Hook = None
    on_error: _Hook = None
    on_raw_generation: _Hook = None
    on_prompt_assembled: _Hook = None

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"Hooks.{name} must be callable or None, got {type(value).__name__}")

    def wants(self, what: str) -> bool:
        """Whether anything listens for a lifecycle `phase`, or for `"raw_generation"` /
        `"prompt_assembled"`."""
        if what in PHASES:
            return self.on_lifecycle is not None or getattr(self, f"on_{what}") is not None
        return getattr(self, f"on_{what}", None) is not None

    def lifecycle(self, phase: str, *, adapter: str, model: str, **details: Any) -> None:
        """Report `phase` to `on_lifecycle`, then to the phase's own hook (no report is built when
        neither is set). Details are `LifecycleReport` fields."""
        if phase not in PHASES:
            raise ValueError(f"unknown lifecycle phase {phase!r}; phases: {', '.join(PHASES)}")
        own = getattr(self, f"on_{phase}")
        if self.on_lifecycle is None and own is None:
            return
        report = LifecycleReport(phase=phase, adapter=adapter, model=model, **details)
        for hook in (self.on_lifecycle, own):
            if hook is not None:
                _call(hook, report, f"on_lifecycle({phase})" if hook is self.on_lifecycle else f"on_{phase}")

    def observe(self, what: str, observation: Any) -> None:
        """Hand `observation` to `on_raw_generation` or `on_prompt_assembled` (a deep copy)."""
        hook = getattr(self, f"on_{what}")
        if hook is None:
            return
        try:
            observation = copy.deepcopy(observation)
        except Exception:  # e.g. an exception object in an event that cannot be copied
            observation = copy.copy(observation)
        _call(hook, observation, f"on_{what}")


def _call(hook: Callable[[Any], Any], argument: Any, name: str) -> None:
    try:
        hook(argument)
    except Exception:  # a hook never aborts a load or a turn
        logger.exception("chatparse.runtime: hook %s raised; ignored", name)


def coerce_hooks(hooks: Hooks | Mapping[str, Any] | None) -> Hooks | None:
    """`hooks` as a `Hooks` (a mapping of hook names is accepted), or None when none is set."""
    if hooks is None:
        return None
    if isinstance(hooks, Mapping):
        unknown = set(hooks) - set(Hooks.__dataclass_fields__)
        if unknown:
            raise TypeError(
                f"unknown hook(s) {sorted(unknown)}; hooks: {', '.join(Hooks.__dataclass_fields__)}"
            )
        hooks = Hooks(**hooks)
    if not isinstance(hooks, Hooks):
        raise TypeError(f"hooks must be Hooks or a mapping, not {type(hooks).__name__}")
    if all(getattr(hooks, name) is None for name in Hooks.__dataclass_fields__):
        return None
    return hooks


def tools_for_observation(tools: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    return None if tools is None else [dict(t) for t in tools]
