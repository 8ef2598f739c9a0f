"""`LlamaCppRuntime`: a local GGUF model through `llama-cpp-python`, tool calls parsed from text.

The prompt is rendered by llama-cpp-python's own chat formatter (`Jinja2ChatFormatter`, a
sandboxed Jinja environment) from the GGUF's chat template (or `chat_template=`), with `tools`
and `enable_thinking` passed to the template, and generated with `Llama.create_completion`, so the
exact prompt is known (`on_prompt_assembled`) and is the parser's prefix (a `<think>` the prompt
pre-writes is seen). The text is parsed with the response template resolved from the model id
(default: the GGUF file name), the GGUF's chat template or `template=`.

Options mapping (onto `create_completion`): `max_tokens` (native fallback `n_predict`, the
llama.cpp server's spelling); greedy -> `temperature=0.0`, which is llama.cpp's greedy sampler,
and no `top_k` / `top_p`; top-k -> `temperature`, `top_k`, with nucleus and min-p sampling
switched off (`top_p=1.0`, `min_p=0.0`); top-p -> `temperature`, `top_p`, with `top_k=0` (off) and
`min_p=0.0`; `seed`, `stop` as they are. Other native options are `create_completion` keywords
(`grammar` may be GBNF text; `repeat_penalty`, `logits_processor`, ...).

Loading reports `loading` (progress 0.0), `compiling`, `loading` (progress 1.0) and `ready`:
llama-cpp-python's constructor does not expose llama.cpp's load-progress callback, so there is
no progress in between. One `Llama` runs one generation at a time (a lock serializes them).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._base import Prepared, Runtime
from ._options import ResolvedOptions
from ._templates import resolve_response_template

__all__ = ["LlamaCppRuntime"]


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "LlamaCppRuntime needs llama-cpp-python: pip install llama-cpp-python "
            "(it compiles llama.cpp from source)"
        ) from e
    return llama_cpp


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as Hugging Face chat templates expect them: call arguments as objects (the JSON
    text of the Chat Completions format parsed), no chatparse report."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if k != "chatparse"}
        calls = m.get("tool_calls")
        if calls:
            converted = []
            for c in calls:
                c = dict(c)
                fn = dict(c.get("function") or {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    # text that is not JSON is kept: the template shows what the model wrote
                    with contextlib.suppress(ValueError):
                        fn["arguments"] = json.loads(args) if args.strip() else {}
                c["function"] = fn
                converted.append(c)
            m["tool_calls"] = converted
        out.append(m)
    return out


class LlamaCppRuntime(Runtime):
    """A GGUF model run in-process by llama-cpp-python.

    >>> rt = LlamaCppRuntime("Qwen3-8B-Q4_K_M.gguf", n_ctx=8192)  # doctest: +SKIP

    `model` is a path to a GGUF file or an existing `llama_cpp.Llama`; `model_id` names the model
    for the catalog (default: the file name); `load_kwargs` go to `llama_cpp.Llama` (`n_ctx`,
    `n_threads` and `verbose=False` are set unless given).
    """

    adapter = "llama.cpp"
    native_names = {"max_tokens": "n_predict"}

    def __init__(
        self,
        model: str | os.PathLike[str] | Any,
        *,
        model_id: str | None = None,
        template: Any = None,
        chat_template: str | None = None,
        n_ctx: int = 4096,
        load_kwargs: dict[str, Any] | None = None,
        options: Any = None,
        hooks: Any = None,
    ) -> None:
        is_path = isinstance(model, (str, os.PathLike))
        path_of = model if is_path else getattr(model, "model_path", None)
        name = model_id or (Path(path_of).name if path_of else "llama.cpp")
        super().__init__(model=str(name), options=options, hooks=hooks)
        if is_path:
            llama_cpp = _import_llama_cpp()
            path = os.fspath(model)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"LlamaCppRuntime: no GGUF file at {path!r}")
            kwargs = {"n_ctx": n_ctx, "verbose": False, **(load_kwargs or {})}
            self._lifecycle("loading", progress=0.0, detail=path)
            self._lifecycle("compiling", detail="llama_cpp.Llama")
            try:
                self.llm = llama_cpp.Llama(model_path=path, **kwargs)
            except Exception as e:
                self._lifecycle("error", error=e, detail=f"{type(e).__name__}: {e}")
                raise
            self._lifecycle("loading", progress=1.0, detail=path)
        else:
            self.llm = model
        meta = getattr(self.llm, "metadata", None) or {}
        self.chat_template = chat_template or meta.get("tokenizer.chat_template")
        self._template, self._template_name = resolve_response_template(
            template, model=self.model, chat_template=self.chat_template
        )
        self._formatter: Any = None
        self._lock = threading.Lock()
        self._lifecycle(
            "ready", detail=self._template_name or ("template" if self._template else "detection")
        )

    def _format(self) -> Any:
        if self._formatter is None:
            if not self.chat_template:
                raise ValueError(
                    f"{self.model}: the GGUF has no chat template (tokenizer.chat_template); pass chat_template="
                )
            llama_cpp = _import_llama_cpp()
            model = self.llm._model

            def text(token: int) -> str:
                return model.token_get_text(token) if token != -1 else ""

            self._formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(
                template=self.chat_template,
                eos_token=text(self.llm.token_eos()),
                bos_token=text(self.llm.token_bos()),
            )
        return self._formatter

    def _prepare(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        options: ResolvedOptions,
        streamed: bool,
        stream_id: str,
    ) -> Prepared:
        rendered = self._format()(
            messages=template_messages(messages), tools=tools, enable_thinking=options.enable_thinking
        )
        kwargs: dict[str, Any] = {"max_tokens": options.max_tokens}
        if options.sampler == "greedy":
            kwargs["temperature"] = 0.0
        elif options.sampler == "top-k":
            kwargs.update(temperature=options.temperature, top_k=options.top_k, top_p=1.0, min_p=0.0)
        else:
            kwargs.update(temperature=options.temperature, top_p=options.top_p, top_k=0, min_p=0.0)
        if options.seed is not None:
            kwargs["seed"] = options.seed
        if options.stop:
            kwargs["stop"] = list(options.stop)
        passthrough = dict(options.passthrough)
        grammar = passthrough.pop("grammar", None)
        if isinstance(grammar, str):
            grammar = _import_llama_cpp().LlamaGrammar.from_string(grammar, verbose=False)
        if grammar is not None:
            kwargs["grammar"] = grammar
        kwargs.update(passthrough)
        return Prepared(
            messages=messages,
            tools=tools,
            options=options,
            streamed=streamed,
            stream_id=stream_id,
            native=False,
            prompt=rendered.prompt,
            template=self._template,
            template_name=self._template_name,
            extra={"kwargs": kwargs},
        )

    def _parts(self, p: Prepared, cancel: threading.Event) -> Iterator[tuple[Any, ...]]:
        kwargs = p.extra["kwargs"]
        with self._lock:
            if not p.streamed:
                out = self.llm.create_completion(p.prompt, stream=False, **kwargs)
                choice = out["choices"][0]
                yield ("text", choice["text"])
                yield ("finish", choice.get("finish_reason") or "stop", out.get("usage"))
                return
            finish = "stop"
            chunks = self.llm.create_completion(p.prompt, stream=True, **kwargs)
            try:
                for chunk in chunks:
                    choice = chunk["choices"][0]
                    if choice.get("text"):
                        yield ("text", choice["text"])
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                    if cancel.is_set():
                        return
            finally:
                chunks.close()
            yield ("finish", finish, None)
