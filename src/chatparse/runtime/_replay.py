"""`ReplayRuntime`: recorded model outputs replayed through the same path as a local model's.

For tests of agent code and for examples: no model, no server, deterministic. Each generation
takes the next recorded raw output (special tokens included, as the model wrote it), streams it in
`chunk_size`-character pieces, honours `max_tokens` (one piece counts as one token) and `stop`,
and parses it exactly as the local adapters do: with the model's response template (found in
the catalog from `model`) and the generation prompt as prefix, or by detection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from ._base import GenerationError, Prepared, Runtime
from ._options import ResolvedOptions
from ._templates import resolve_response_template

__all__ = ["ReplayRuntime"]


class ReplayRuntime(Runtime):
    """Replays `outputs`, one per generation, as a local model would produce them.

    >>> rt = ReplayRuntime(['<tool_call>\\n{"name": "f", "arguments": {}}\\n</tool_call><|im_end|>'],
    ...                    model="Qwen/Qwen3-8B")
    >>> g = rt.generate([{"role": "user", "content": "go"}])
    >>> g.finish_reason, g.tool_calls[0].name, g.parser
    ('tool_calls', 'f', 'template:qwen3')

    `template` is as for the local adapters (a catalog name, a dict, a `Template`, `"auto"`, or
    None: resolved from `model`); `prompt` is the prefix the output continues (default: the
    catalog entry's generation prompt). `requests` records what each generation was asked
    (messages, tools, resolved options). Running out of outputs raises `GenerationError`.
    """

    adapter = "replay"

    def __init__(
        self,
        outputs: Iterable[str],
        *,
        model: str = "replay",
        template: Any = None,
        prompt: str | None = None,
        chunk_size: int = 4,
        options: Any = None,
        hooks: Any = None,
    ) -> None:
        super().__init__(model=model, options=options, hooks=hooks)
        if isinstance(outputs, str):
            raise TypeError("outputs must be a list of recorded outputs, not one string")
        self.outputs = list(outputs)
        if not all(isinstance(o, str) for o in self.outputs):
            raise TypeError("every recorded output must be a string")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        self.chunk_size = chunk_size
        self._template, self._template_name = resolve_response_template(template, model=model)
        if prompt is None and self._template_name is not None:
            from .. import catalog

            prompt = catalog.describe(self._template_name).get("generation_prompt") or ""
        self.prompt = prompt or ""
        self.requests: list[dict[str, Any]] = []
        self._next = 0
        self._lock = threading.Lock()
        self._lifecycle("ready", detail=f"{len(self.outputs)} recorded output(s)")

    def _prepare(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        options: ResolvedOptions,
        streamed: bool,
        stream_id: str,
    ) -> Prepared:
        with self._lock:
            if self._next >= len(self.outputs):
                raise GenerationError(
                    f"ReplayRuntime: no recorded output left (all {len(self.outputs)} were used)",
                    adapter=self.adapter,
                    model=self.model,
                )
            text = self.outputs[self._next]
            self._next += 1
            self.requests.append({"messages": messages, "tools": tools, "options": options})
        return Prepared(
            messages=messages,
            tools=tools,
            options=options,
            streamed=streamed,
            stream_id=stream_id,
            native=False,
            prompt=self.prompt,
            template=self._template,
            template_name=self._template_name,
            extra={"text": text},
        )

    def _parts(self, p: Prepared, cancel: threading.Event) -> Iterator[tuple[Any, ...]]:
        text: str = p.extra["text"]
        stops = p.options.stop
        cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
        finish = "stop"
        if cut >= 0:
            text = text[:cut]
        n = 0
        for i in range(0, len(text), self.chunk_size):
            if cancel.is_set():
                return
            if n >= p.options.max_tokens:
                finish = "length"
                break
            n += 1
            yield ("text", text[i : i + self.chunk_size])
        yield ("finish", finish, {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n})
