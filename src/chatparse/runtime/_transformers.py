"""`TransformersRuntime`: a local transformers model, tool calls parsed from the generated text.

The prompt is the tokenizer's chat template (`apply_chat_template(..., tools=..., enable_thinking=
..., add_generation_prompt=True)`), so it is known exactly (`on_prompt_assembled`) and is the
parser's prefix. `model.generate()` runs in a worker thread with a streamer that decodes the new
tokens incrementally, special tokens kept (the parser needs the markers); the text is parsed with
the response template resolved from the tokenizer (its own `response_template`, else the model id
and the chat template through `chatparse.catalog`) or by detection.

Decoding goes through `chatparse.hf.IncrementalDecoder` when the `chatparse.hf` layer is
installed, else through the equivalent sliding-window decoder below (the seam is
`_incremental_decoder`).

Options mapping (onto `generate()`): `max_tokens` -> `max_new_tokens` (native fallback
`max_new_tokens`); greedy -> `do_sample=False` and no `temperature` / `top_k` / `top_p` (native
fallback for the sampler: `do_sample`, True meaning top-p); top-k -> `do_sample=True`,
`temperature`, `top_k`, `top_p=1.0` (off); top-p -> `do_sample=True`, `temperature`, `top_p`,
`top_k=0` (off); the neutral values keep a model's `generation_config` defaults out. `stop` ->
`stop_strings` (with the tokenizer); `seed` -> `torch.manual_seed(seed)` before sampling (torch's
global generator: generate() takes no generator). Other native options are `generate()`
keywords (`logits_processor`, `repetition_penalty`, ...).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ._base import Prepared, Runtime
from ._llamacpp import template_messages
from ._options import ResolvedOptions
from ._templates import resolve_response_template

__all__ = ["TransformersRuntime"]

_REPLACEMENT = "\ufffd"


class _SlidingDecoder:
    """Token ids in, text out, never a split character: a window over `tokenizer.decode`, the text
    of its last tokens released once it no longer ends in U+FFFD (vLLM's / TGI's detokenization).
    The same `push` / `flush` interface as `chatparse.hf.IncrementalDecoder`."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self._prefix = 0
        self._read = 0
        self._emitted = 0

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))

    def push(self, ids: list[int]) -> str:
        if not ids:
            return ""
        self.ids.extend(ids)
        window = self.ids[self._prefix :]
        before = self._decode(window[: self._read - self._prefix])
        after = self._decode(window)
        if len(after) > len(before) and not after.endswith(_REPLACEMENT):
            out = after[len(before) :]
            self._prefix, self._read = self._read, len(self.ids)
            self._emitted += len(out)
            return out
        return ""

    def flush(self) -> str:
        if not self.ids:
            return ""
        full = self._decode(self.ids)
        out = full[self._emitted :]
        self._emitted = len(full)
        return out


def _incremental_decoder(tokenizer: Any) -> Any:
    try:
        from ..hf import IncrementalDecoder
    except ImportError:
        return _SlidingDecoder(tokenizer)
    return IncrementalDecoder(tokenizer, skip_special_tokens=False)


def _ids(value: Any) -> list[int]:
    """The token ids in what `generate()` hands a streamer (a tensor of shape (n,) or (1, n))."""
    tolist = getattr(value, "tolist", None)
    value = tolist() if callable(tolist) else value
    if isinstance(value, int):
        return [value]
    if value and isinstance(value[0], list):
        if len(value) > 1:
            raise ValueError("TransformersRuntime generates one sequence at a time (batch size 1)")
        value = value[0]
    return [int(i) for i in value]


class _QueueStreamer:
    """transformers' streamer protocol (`put`, `end`): decoded text pieces onto a queue."""

    def __init__(self, tokenizer: Any, out: queue.Queue[tuple[str, Any]]) -> None:
        self.decoder = _incremental_decoder(tokenizer)
        self.out = out
        self.prompt = True
        self.ids: list[int] = []

    def put(self, value: Any) -> None:
        ids = _ids(value)
        if self.prompt:  # generate() hands the prompt over first
            self.prompt = False
            return
        self.ids.extend(ids)
        text = self.decoder.push(ids)
        if text:
            self.out.put(("text", text))

    def end(self) -> None:
        text = self.decoder.flush()
        if text:
            self.out.put(("text", text))


class _StopCut:
    """Cut the text at the first stop string, as servers do (generate()'s `stop_strings` only stops
    generating: the text it returns still holds the stop string). Text that may be the start of a
    stop string is held back until it is known not to be one."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.buf = ""
        self.hit = False

    def feed(self, text: str) -> str:
        if self.hit or not self.stops:
            return "" if self.hit else text
        self.buf += text
        found = [i for i in (self.buf.find(s) for s in self.stops) if i >= 0]
        if found:
            out, self.buf, self.hit = self.buf[: min(found)], "", True
            return out
        hold = 0
        for stop in self.stops:
            for k in range(min(len(self.buf), len(stop) - 1), hold, -1):
                if self.buf.endswith(stop[:k]):
                    hold = k
                    break
        out, self.buf = self.buf[: len(self.buf) - hold], self.buf[len(self.buf) - hold :]
        return out

    def flush(self) -> str:
        out, self.buf = self.buf, ""
        return "" if self.hit else out


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    config = getattr(model, "generation_config", None)
    for value in (getattr(config, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return ids


class TransformersRuntime(Runtime):
    """A transformers causal LM and its tokenizer, run in-process.

    >>> rt = TransformersRuntime.from_pretrained("Qwen/Qwen3-0.6B")  # doctest: +SKIP

    `model_id` names the model for the catalog (default: the tokenizer's `name_or_path`);
    `template` as for every local adapter (a catalog name, a dict, a `Template`, `"auto"`, or None
    to resolve it).
    """

    adapter = "transformers"
    native_names = {
        "max_tokens": "max_new_tokens",
        "sampler": ("do_sample", lambda v: "top-p" if v else "greedy"),
    }

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_id: str | None = None,
        template: Any = None,
        options: Any = None,
        hooks: Any = None,
    ) -> None:
        name = model_id or getattr(tokenizer, "name_or_path", None) or type(model).__name__
        super().__init__(model=str(name), options=options, hooks=hooks)
        self.hf_model = model
        self.tokenizer = tokenizer
        own = getattr(tokenizer, "response_template", None)
        self._template, self._template_name = resolve_response_template(
            template,
            model=self.model,
            chat_template=getattr(tokenizer, "chat_template", None),
            tokenizer_config={"response_template": own} if own else None,
        )
        self._lock = threading.Lock()
        self._lifecycle(
            "ready", detail=self._template_name or ("template" if self._template else "detection")
        )

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        model_kwargs: dict[str, Any] | None = None,
        tokenizer_kwargs: dict[str, Any] | None = None,
        model_id: str | None = None,
        template: Any = None,
        options: Any = None,
        hooks: Any = None,
    ) -> TransformersRuntime:
        """Load the tokenizer and `AutoModelForCausalLM` from a folder or the Hub, reporting
        `loading` (progress 0..1 from the download progress bars, when files are downloaded),
        `compiling` (before the model is built) and `ready`."""
        import transformers

        from ._hooks import coerce_hooks

        hk = coerce_hooks(hooks)
        model_name = model_id or name_or_path

        def report(phase: str, **details: Any) -> None:
            if hk is not None:
                hk.lifecycle(phase, adapter=cls.adapter, model=model_name, **details)

        report("loading", progress=0.0, detail=name_or_path)
        extra: dict[str, Any] = {}
        if hk is not None and hk.wants("loading"):
            extra["tqdm_class"] = _progress_bar(
                lambda fraction, raw: report("loading", progress=fraction, raw=raw)
            )
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(name_or_path, **(tokenizer_kwargs or {}))
            report("compiling", detail="AutoModelForCausalLM")
            model = transformers.AutoModelForCausalLM.from_pretrained(
                name_or_path, **extra, **(model_kwargs or {})
            )
        except Exception as e:
            report("error", error=e, detail=f"{type(e).__name__}: {e}")
            raise
        report("loading", progress=1.0, detail=name_or_path)
        return cls(model, tokenizer, model_id=model_name, template=template, options=options, hooks=hk)

    # -- generation --------------------------------------------------------------------------

    def _prepare(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        options: ResolvedOptions,
        streamed: bool,
        stream_id: str,
    ) -> Prepared:
        prompt = self.tokenizer.apply_chat_template(
            template_messages(messages),
            tools=tools,
            add_generation_prompt=True,
            tokenize=False,
            enable_thinking=options.enable_thinking,
        )
        if not isinstance(prompt, str):
            raise TypeError(f"apply_chat_template returned {type(prompt).__name__}, expected the prompt text")
        kwargs: dict[str, Any] = {"max_new_tokens": options.max_tokens}
        if options.sampler == "greedy":
            kwargs["do_sample"] = False
        elif options.sampler == "top-k":
            kwargs.update(do_sample=True, temperature=options.temperature, top_k=options.top_k, top_p=1.0)
        else:
            kwargs.update(do_sample=True, temperature=options.temperature, top_p=options.top_p, top_k=0)
        if options.stop:
            kwargs.update(stop_strings=list(options.stop), tokenizer=self.tokenizer)
        kwargs.update(options.passthrough)
        return Prepared(
            messages=messages,
            tools=tools,
            options=options,
            streamed=streamed,
            stream_id=stream_id,
            native=False,
            prompt=prompt,
            template=self._template,
            template_name=self._template_name,
            extra={"kwargs": kwargs},
        )

    def _parts(self, p: Prepared, cancel: threading.Event) -> Iterator[tuple[Any, ...]]:
        import torch
        import transformers

        kwargs = dict(p.extra["kwargs"])
        tok = self.tokenizer
        inputs = tok(p.prompt, add_special_tokens=False, return_tensors="pt")
        device = getattr(self.hf_model, "device", None)
        if device is not None:
            inputs = inputs.to(device)
        out: queue.Queue[tuple[str, Any]] = queue.Queue()
        streamer = _QueueStreamer(tok, out)

        class _Cancelled(transformers.StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kw: Any) -> Any:
                return torch.full(
                    (input_ids.shape[0],), cancel.is_set(), dtype=torch.bool, device=input_ids.device
                )

        criteria = transformers.StoppingCriteriaList(list(kwargs.pop("stopping_criteria", None) or ()))
        criteria.append(_Cancelled())
        processors = kwargs.pop("logits_processor", None)
        if processors is not None and not isinstance(processors, transformers.LogitsProcessorList):
            processors = transformers.LogitsProcessorList(list(processors))
        if processors is not None:
            kwargs["logits_processor"] = processors
        if tok.pad_token_id is None and "pad_token_id" not in kwargs and tok.eos_token_id is not None:
            kwargs["pad_token_id"] = tok.eos_token_id
        seed = p.options.seed

        def work() -> None:
            try:
                with self._lock:
                    if seed is not None and p.options.sampler != "greedy":
                        torch.manual_seed(seed)
                    with torch.inference_mode():
                        self.hf_model.generate(
                            **inputs, streamer=streamer, stopping_criteria=criteria, **kwargs
                        )
            except BaseException as e:
                out.put(("error", e))
            else:
                out.put(("end", None))

        cut = _StopCut(p.options.stop)
        thread = threading.Thread(target=work, name="chatparse-transformers", daemon=True)
        thread.start()
        try:
            while True:
                kind, value = out.get()
                if kind == "text":
                    text = cut.feed(value)
                    if cut.hit:
                        cancel.set()  # generate() stops at its next step
                    if text:
                        yield ("text", text)
                elif kind == "error":
                    raise value
                else:
                    break
            rest = cut.flush()
            if rest:
                yield ("text", rest)
        finally:
            cancel.set()
            thread.join()
        n = len(streamer.ids)
        finish = "stop"
        if cut.hit:
            pass
        elif n and streamer.ids[-1] not in _eos_ids(self.hf_model, tok) and n >= kwargs["max_new_tokens"]:
            finish = "length"
        prompt_tokens = int(inputs["input_ids"].shape[-1])
        yield (
            "finish",
            finish,
            {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n},
        )


def _progress_bar(report: Callable[[float, Any], None]) -> Any:
    """A tqdm class that reports each bar's fraction done (downloads) instead of drawing it."""
    from tqdm.auto import tqdm

    class ProgressBar(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = False
            kwargs.setdefault("file", _Null())
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            out = super().update(n)
            if self.total:
                report(
                    min(1.0, float(self.n) / float(self.total)),
                    {"n": self.n, "total": self.total, "desc": self.desc},
                )
            return out

    return ProgressBar


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass
