"""`Runtime`: the shared machinery of every adapter (options, hooks, parsing, sync and async).

Theory of operation
-------------------
An adapter implements three things:

* `_prepare(messages, tools, options, streamed, stream_id) -> Prepared`: the request for its
  runtime (the rendered prompt or the request body) and how the output is to be parsed;
* `_parts(prepared, cancel) -> Iterator[part]`: run the runtime and yield its output as parts
  (`_generation.Assembly` documents them), checking `cancel` (a `threading.Event`) between them;
* optionally `_aparts(prepared, cancel)`, an async version; without one, `_parts` runs in a
  worker thread and its parts are handed to the event loop, so a local model never blocks it.

Everything else is here: one `generate()` / `stream()` / `agenerate()` / `astream()` flow per
generation: options resolved, `generating` reported, `on_prompt_assembled` fed, parts assembled
into deltas, `on_raw_generation` fed, `complete` reported; any failure is reported as `error` and
raised as `GenerationError` (its `__cause__` is the runtime's own exception). Streams yield
Chat Completions deltas (`{"content"}`, `{"reasoning_content"}`, `{"tool_calls": [...]}`) and hold
the `Generation` in `.result` once exhausted.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn

from .._template import Template
from ._generation import Assembly, Generation, LocalParser, new_stream_id
from ._hooks import Hooks, PromptAssembled, coerce_hooks
from ._options import GenerationOptions, NativeName, ResolvedOptions
from ._tools import ToolRegistry

__all__ = ["AsyncGenerationStream", "GenerationError", "GenerationStream", "Runtime"]


class GenerationError(RuntimeError):
    """A generation failed in the runtime (a server error, a model that could not run, ...).

    `adapter` and `model` say where; the runtime's own exception is `__cause__`.
    """

    def __init__(self, message: str, *, adapter: str, model: str) -> None:
        super().__init__(message)
        self.adapter = adapter
        self.model = model


@dataclass
class Prepared:
    """One generation's request, as an adapter prepared it."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    options: ResolvedOptions
    streamed: bool
    stream_id: str
    native: bool
    prompt: str | None = None
    body: dict[str, Any] | None = None
    template: Template | None = None
    template_name: str | None = None
    local_parser: LocalParser = None
    extra: dict[str, Any] = field(default_factory=dict)


def tool_schemas(tools: Any) -> list[dict[str, Any]] | None:
    """The Chat Completions `tools` list for `tools` (a registry, or functions / dicts / Tools)."""
    if tools is None:
        return None
    registry = ToolRegistry.coerce(tools)
    return registry.schemas() if len(registry) else None


class Runtime:
    """Base class of the runtime adapters; see the module docstring.

    `model` names the model (a model id for catalog lookup, or the server's model name);
    `options` are defaults for every generation (per-call options override them); `hooks`
    receives lifecycle reports and observations.
    """

    adapter: ClassVar[str] = "runtime"
    #: portable option -> the runtime's native name for it (the fallback; `_options`)
    native_names: ClassVar[Mapping[str, NativeName]] = {}

    def __init__(
        self,
        *,
        model: str,
        options: GenerationOptions | Mapping[str, Any] | None = None,
        hooks: Hooks | Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.options = GenerationOptions.coerce(options)
        self.hooks = coerce_hooks(hooks)

    # -- lifecycle ---------------------------------------------------------------------------

    def _lifecycle(self, phase: str, **details: Any) -> None:
        if self.hooks is not None:
            self.hooks.lifecycle(phase, adapter=self.adapter, model=self.model, **details)

    def _prompt_assembled(self, p: Prepared) -> None:
        if self.hooks is None or not self.hooks.wants("prompt_assembled"):
            return
        self.hooks.observe(
            "prompt_assembled",
            PromptAssembled(
                adapter=self.adapter,
                model=self.model,
                kind="rendered-prompt" if p.prompt is not None else "request-body",
                messages=p.messages,
                tools=p.tools,
                streamed=p.streamed,
                stream_id=p.stream_id,
                prompt=p.prompt,
                request_body=p.body,
            ),
        )

    # -- to implement ------------------------------------------------------------------------

    def _prepare(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        options: ResolvedOptions,
        streamed: bool,
        stream_id: str,
    ) -> Prepared:  # pragma: no cover - abstract
        raise NotImplementedError

    def _parts(self, p: Prepared, cancel: threading.Event) -> Iterator[tuple[Any, ...]]:  # pragma: no cover
        raise NotImplementedError

    async def _aparts(self, p: Prepared, cancel: threading.Event) -> AsyncIterator[tuple[Any, ...]]:
        """Default: `_parts` in a worker thread, its parts handed over through a queue."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def put(item: tuple[str, Any]) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: the consumer left
                cancel.set()

        def work() -> None:
            try:
                for part in self._parts(p, cancel):
                    put(("part", part))
                    if cancel.is_set():
                        break
            except BaseException as e:
                put(("error", e))
            else:
                put(("end", None))

        thread = threading.Thread(target=work, name=f"chatparse-{self.adapter}", daemon=True)
        thread.start()
        try:
            while True:
                kind, value = await queue.get()
                if kind == "part":
                    yield value
                elif kind == "error":
                    raise value
                else:
                    return
        finally:
            cancel.set()

    # -- public ------------------------------------------------------------------------------

    def resolve_options(self, options: GenerationOptions | Mapping[str, Any] | None) -> ResolvedOptions:
        """The runtime's default options merged with `options`, resolved for this adapter."""
        return self.options.merged(options).resolve(self.native_names)

    def _start(
        self, messages: Sequence[dict[str, Any]], tools: Any, options: Any, streamed: bool
    ) -> Prepared:
        if isinstance(messages, (str, Mapping)) or not all(isinstance(m, Mapping) for m in messages):
            raise TypeError("messages must be a list of message dicts ({'role': ..., 'content': ...})")
        resolved = self.resolve_options(options)
        schemas = tool_schemas(tools)
        stream_id = new_stream_id()
        self._lifecycle("generating", stream_id=stream_id)
        try:
            p = self._prepare([dict(m) for m in messages], schemas, resolved, streamed, stream_id)
        except Exception as e:
            self._raise(e, stream_id)
        self._prompt_assembled(p)
        return p

    def _assembly(self, p: Prepared) -> Assembly:
        return Assembly(
            adapter=self.adapter,
            model=self.model,
            tools=p.tools,
            hooks=self.hooks,
            streamed=p.streamed,
            stream_id=p.stream_id,
            native=p.native,
            template=p.template,
            template_name=p.template_name,
            prefix=p.prompt or "",
            local_parser=p.local_parser,
        )

    def _raise(self, e: Exception, stream_id: str) -> NoReturn:
        """Report `e` as `error` and raise it as a `GenerationError` (its `__cause__` is `e`)."""
        self._lifecycle("error", error=e, stream_id=stream_id, detail=f"{type(e).__name__}: {e}")
        if isinstance(e, GenerationError):
            raise e
        raise GenerationError(
            f"{self.adapter} generation failed for model {self.model!r}: {type(e).__name__}: {e}",
            adapter=self.adapter,
            model=self.model,
        ) from e

    def _run(self, p: Prepared) -> Generator[dict[str, Any], None, Generation]:
        cancel = threading.Event()
        asm = self._assembly(p)
        finish: tuple[Any, ...] = ("finish", "stop", None)
        parts = self._parts(p, cancel)
        try:
            for part in parts:
                if part[0] == "finish":
                    finish = part
                    continue
                yield from asm.feed(part)
            deltas, gen = asm.finish(finish[1], finish[2])
        except GeneratorExit:
            cancel.set()
            raise
        except Exception as e:
            cancel.set()
            self._raise(e, p.stream_id)
        finally:
            close = getattr(parts, "close", None)
            if close is not None:
                close()
        yield from deltas
        self._lifecycle("complete", stream_id=p.stream_id, detail=gen.finish_reason)
        return gen

    async def _arun(self, p: Prepared) -> AsyncIterator[Any]:
        cancel = threading.Event()
        asm = self._assembly(p)
        finish: tuple[Any, ...] = ("finish", "stop", None)
        parts = self._aparts(p, cancel)
        try:
            async for part in parts:
                if part[0] == "finish":
                    finish = part
                    continue
                for d in asm.feed(part):
                    yield d
            deltas, gen = asm.finish(finish[1], finish[2])
        except (GeneratorExit, asyncio.CancelledError):
            cancel.set()
            raise
        except Exception as e:
            cancel.set()
            self._raise(e, p.stream_id)
        finally:
            await parts.aclose()  # type: ignore[attr-defined]
        for d in deltas:
            yield d
        self._lifecycle("complete", stream_id=p.stream_id, detail=gen.finish_reason)
        yield _Done(gen)

    def stream(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Any = None,
        options: GenerationOptions | Mapping[str, Any] | None = None,
    ) -> GenerationStream:
        """Start a generation; iterate the result for deltas, then read `.result`.

        >>> from chatparse.runtime import ReplayRuntime
        >>> rt = ReplayRuntime(["<think>hm</think>Hi!<|im_end|>"], model="Qwen/Qwen3-8B")
        >>> s = rt.stream([{"role": "user", "content": "Hello"}])
        >>> [d for d in s]  # 4-character pieces, as the replay streams them
        [{'reasoning_content': 'h'}, {'reasoning_content': 'm'}, {'content': 'Hi!'}]
        >>> s.result.content, s.result.reasoning
        ('Hi!', 'hm')
        """
        p = self._start(messages, tools, options, streamed=True)
        return GenerationStream(self._run(p))

    def generate(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Any = None,
        options: GenerationOptions | Mapping[str, Any] | None = None,
    ) -> Generation:
        """Run one generation to its end and return the `Generation` (non-streaming request)."""
        p = self._start(messages, tools, options, streamed=False)
        s = GenerationStream(self._run(p))
        for _ in s:
            pass
        assert s.result is not None
        return s.result

    def astream(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Any = None,
        options: GenerationOptions | Mapping[str, Any] | None = None,
    ) -> AsyncGenerationStream:
        """`stream` for asyncio: `async for delta in runtime.astream(...)`, then `.result`."""
        return AsyncGenerationStream(self, messages, tools, options, streamed=True)

    async def agenerate(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Any = None,
        options: GenerationOptions | Mapping[str, Any] | None = None,
    ) -> Generation:
        """`generate` for asyncio."""
        s = AsyncGenerationStream(self, messages, tools, options, streamed=False)
        async for _ in s:
            pass
        assert s.result is not None
        return s.result

    def close(self) -> None:
        """Release what the runtime holds (clients, models); the base has nothing to release."""

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"


@dataclass(frozen=True)
class _Done:
    generation: Generation


class GenerationStream:
    """Deltas of one generation; `.result` is the `Generation` once the stream is exhausted.

    Closing it early (`close()`, leaving a `with` block, or dropping it) stops the runtime.
    """

    def __init__(self, it: Generator[dict[str, Any], None, Generation]) -> None:
        self._it = it
        self.result: Generation | None = None

    def __iter__(self) -> GenerationStream:
        return self

    def __next__(self) -> dict[str, Any]:
        try:
            return next(self._it)
        except StopIteration as e:
            self.result = e.value
            raise

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> GenerationStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGenerationStream:
    """`GenerationStream` for asyncio: `async for delta in stream`, then `.result`."""

    def __init__(self, runtime: Runtime, messages: Any, tools: Any, options: Any, *, streamed: bool) -> None:
        self._runtime = runtime
        self._args = (messages, tools, options, streamed)
        self._it: Any = None
        self.result: Generation | None = None

    def __aiter__(self) -> AsyncGenerationStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._it is None:
            messages, tools, options, streamed = self._args
            p = self._runtime._start(messages, tools, options, streamed=streamed)
            self._it = self._runtime._arun(p)
        if self.result is not None:
            raise StopAsyncIteration
        item = await self._it.__anext__()
        if isinstance(item, _Done):
            self.result = item.generation
            await self._it.aclose()
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        if self._it is not None:
            await self._it.aclose()

    async def __aenter__(self) -> AsyncGenerationStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
