"""Streamers for `model.generate(streamer=...)`: parser events, or Chat Completions deltas, per token.

Both classes implement transformers' streamer protocol (`put(token_ids)`, `end()`), so they go
wherever `TextStreamer` / `TextIteratorStreamer` go, and they are iterators like
`TextIteratorStreamer`: run `generate()` in a thread and iterate in another. What they do per call:

* the first `put` is the prompt (`generate()` always sends it first); it is not parsed as output,
  and unless `prefix=` was given, its decoded text (special tokens kept) is the parser's prefix;
* every later `put` is decoded incrementally (`IncrementalDecoder`: special tokens kept, never a
  split multi-byte character) and the text is fed to the parser;
* `end()` flushes the decoder and finishes the parser; `message` is then the parsed message.

Subclass and override `on_items(items, stream_end)` to push the items elsewhere (a websocket, an
asyncio queue); the default puts them on the iterator's queue. A streamer can be reused: a `put`
after `end()` starts a new message.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._parser import ResponseParser
from .._template import Template, load_response_template
from ..errors import RequiredFieldsMissing
from . import _tokenizer as T
from ._decode import IncrementalDecoder

_STOP = object()


def token_ids(value: Any) -> list[int]:
    """The token ids in what `generate()` hands a streamer: a tensor or array of shape `(n,)` or
    `(1, n)`, a list, or an int. A batch of more than one sequence raises `ValueError`."""
    if isinstance(value, int):
        return [value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        value = tolist()
        if isinstance(value, int):
            return [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"expected token ids (a tensor, an array, a list or an int), got {type(value).__name__}"
        )
    if value and isinstance(value[0], (list, tuple)):
        if len(value) > 1:
            raise ValueError(
                f"chatparse streamers support batch size 1 (got {len(value)} sequences); "
                "use one generate() call per prompt, or parse the batch afterwards with parse_response"
            )
        value = value[0]
    return list(value)


class _TokenStreamer:
    """The shared machinery: prompt handling, incremental decoding, the item queue, iteration."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        prefix: Any,
        skip_prompt: bool,
        timeout: float | None,
    ) -> None:
        self.tokenizer = tokenizer
        self.skip_prompt = skip_prompt
        self.timeout = timeout
        if prefix is not None and not isinstance(prefix, str):
            prefix = T.text_tokenizer(tokenizer).decode(prefix)
            if not isinstance(prefix, str):
                raise ValueError("prefix= must be a single sequence (str, list[int] or a 1-D tensor)")
        if prefix is None and not skip_prompt:
            raise ValueError(
                "prefix= is required with skip_prompt=False (the parser must see the prompt to parse "
                'the output correctly); pass prefix="" to opt out'
            )
        self._given_prefix: str | None = prefix
        self._queue: queue.Queue[Any] = queue.Queue()
        self._decoder = IncrementalDecoder(T.text_tokenizer(tokenizer))
        self._reset()

    # -- state -------------------------------------------------------------------------------

    def _reset(self) -> None:
        self._decoder.reset()
        self._prompt_pending = self.skip_prompt
        self._open_stream = False
        self._ended = False
        #: The prefix the parser was started with (the decoded prompt unless `prefix=` was given).
        self.prefix: str | None = None
        self._pieces: list[str] = []
        #: The last generated token id, or `None`.
        self.last_token_id: int | None = None

    @property
    def text(self) -> str:
        """The generated text decoded so far (special tokens kept)."""
        if len(self._pieces) > 1:
            self._pieces[:] = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    @property
    def token_ids(self) -> list[int]:
        """The generated token ids so far (the prompt excluded)."""
        return self._decoder.ids

    def _begin(self, prefix: str) -> None:
        self.prefix = prefix
        self._open_stream = True
        self.on_items(self._open(prefix), False)

    # -- the streamer protocol ---------------------------------------------------------------

    def put(self, value: Any) -> None:
        """Receive token ids from `generate()`: the prompt first, then the new tokens."""
        ids = token_ids(value)
        if self._ended:
            self._reset()
        if self._prompt_pending:
            self._prompt_pending = False
            prompt = self._given_prefix
            if prompt is None:
                decoded = T.text_tokenizer(self.tokenizer).decode(ids)
                prompt = decoded if isinstance(decoded, str) else "".join(decoded)
            self._begin(prompt)
            return
        if not self._open_stream:
            self._begin(self._given_prefix or "")
        if not ids:
            return
        self.last_token_id = ids[-1]
        text = self._decoder.push(ids)
        if text:
            self._pieces.append(text)
            items = self._feed(text)
            if items:
                self.on_items(items, False)

    def end(self) -> None:
        """`generate()` finished: flush the decoder, finish the parser, stop the iteration."""
        if self._ended:
            return
        if not self._open_stream:
            self._begin(self._given_prefix or "")
        items: list[Any] = []
        tail = self._decoder.flush()
        if tail:
            self._pieces.append(tail)
            items.extend(self._feed(tail))
        items.extend(self._close())
        self._ended = True
        self.on_items(items, True)

    def on_items(self, items: list[Any], stream_end: bool) -> None:
        """Deliver items to the consumer. Default: the iterator's queue (then a stop signal at the end)."""
        for item in items:
            self._queue.put(item, timeout=self.timeout)
        if stream_end:
            self._queue.put(_STOP, timeout=self.timeout)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        item = self._queue.get(timeout=self.timeout)
        if item is _STOP:
            raise StopIteration
        return item

    # -- what subclasses provide -------------------------------------------------------------

    def _open(self, prefix: str) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _feed(self, text: str) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _close(self) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError


def _template(tokenizer: Any, response_template: Any, catalog: bool) -> Template:
    spec = T.resolve_template(tokenizer, response_template, catalog=catalog, message=T.NO_TEMPLATE_STREAM)
    return load_response_template(spec)


class ResponseStreamer(_TokenStreamer):
    """A `generate()` streamer that parses as tokens arrive and yields the parser's events.

    Iterating gives the event dicts of `chatparse.ResponseParser` (`region_open`, `region_chunk`,
    `region_close`, `region_malformed`), the prompt's own events first (e.g. a `<think>` that the
    chat template pre-wrote); after `end()`, `message` equals `chatparse.hf.parse_response` of the
    generated ids with the prompt as prefix. Where `parse_response` would raise (a malformed region,
    a missing required field), `error` holds that exception and `message` the recovered message
    (`None` for a missing required field).

    Arguments: `prefix` (default: the prompt `generate()` sends, decoded with special tokens kept;
    give text or ids to override), `tools` (argument coercion), `response_template` (default: the
    tokenizer's, else the catalog's, as in `parse_response`), `skip_prompt` (default `True`: the
    first `put` is the prompt), `timeout` (seconds a consumer waits for the next event before
    `queue.Empty`, as in `TextIteratorStreamer`).

    Example (generation in a thread, events in this one)::

        streamer = ResponseStreamer(tokenizer, tools=tools)
        thread = threading.Thread(target=model.generate,
                                  kwargs=dict(input_ids=prompt_ids, streamer=streamer, max_new_tokens=256))
        thread.start()
        for event in streamer:
            if event["type"] == "region_chunk" and not event["dirty"]:
                print(event["text"], end="")
        thread.join()
        message = streamer.message
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        prefix: Any = None,
        tools: Sequence[dict | Callable] | None = None,
        response_template: Any = None,
        skip_prompt: bool = True,
        timeout: float | None = None,
        catalog: bool = True,
    ) -> None:
        self.template = _template(tokenizer, response_template, catalog)
        self.tools = list(tools) if tools is not None else None
        #: The live parser (its `input_text` is the truncated prefix plus the generated text).
        self.parser: ResponseParser | None = None
        super().__init__(tokenizer, prefix=prefix, skip_prompt=skip_prompt, timeout=timeout)

    def _reset(self) -> None:
        super()._reset()
        self.parser = None
        #: The parsed message, set by `end()`.
        self.message: dict | None = None
        #: The exception `parse_response` would raise for this output, or `None`.
        self.error: BaseException | None = None

    def _open(self, prefix: str) -> list[Any]:
        self.parser = ResponseParser(self.template, prefix=prefix, tools=self.tools)
        return list(self.parser.initial_events)

    def _feed(self, text: str) -> list[Any]:
        assert self.parser is not None
        return self.parser.feed(text)

    def _close(self) -> list[Any]:
        assert self.parser is not None
        try:
            message, events = self.parser.finalize()
        except RequiredFieldsMissing as e:
            self.error = e
            return list(e.events)
        self.message = message
        return events

    def on_items(self, items: list[Any], stream_end: bool) -> None:
        if self.error is None:
            bad = next((e for e in items if e["type"] == "region_malformed"), None)
            if bad is not None:
                self.error = bad["error"]
        super().on_items(items, stream_end)


class ChatDeltaStreamer(_TokenStreamer):
    """A `generate()` streamer that yields OpenAI Chat Completions deltas (`chatparse.openai`).

    Iterating gives `choices[0].delta` dicts: `{"reasoning_content": ...}`, `{"content": ...}` and
    `{"tool_calls": [...]}` fragments with stable indices (by default a call is sent once complete).
    After `end()`: `message` (the Chat Completions assistant message) and `finish_reason`
    (`"tool_calls"` when calls were returned). `eos_token_id` (an id or a list, e.g.
    `model.generation_config.eos_token_id`) tells a stop from a cut-off: when the last token is not
    one of them the output was cut (`"length"`: an unfinished call is dropped). Without it the
    output is taken as stopped. Other keyword options go to `chatparse.openai.ChatParser`
    (`stream_tool_calls`, `unknown_tools`, `reasoning_key`, `id_factory`, `parse_tool_calls`).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        prefix: Any = None,
        tools: Sequence[dict | Callable] | None = None,
        response_template: Any = None,
        skip_prompt: bool = True,
        timeout: float | None = None,
        eos_token_id: int | Sequence[int] | None = None,
        catalog: bool = True,
        **options: Any,
    ) -> None:
        self.template = _template(tokenizer, response_template, catalog)
        self.tools = list(tools) if tools is not None else None
        self.options = options
        if isinstance(eos_token_id, int):
            eos_token_id = [eos_token_id]
        self.eos_token_ids = frozenset(eos_token_id) if eos_token_id is not None else None
        self.chat_parser: Any = None
        super().__init__(tokenizer, prefix=prefix, skip_prompt=skip_prompt, timeout=timeout)

    def _reset(self) -> None:
        super()._reset()
        self.chat_parser = None
        #: The Chat Completions message, set by `end()`.
        self.message: dict | None = None
        #: `"stop"`, `"length"` or `"tool_calls"`, set by `end()`.
        self.finish_reason: str | None = None
        self._finish_override: str | None = None

    def end(self, finish_reason: str | None = None) -> None:
        """As `generate()` calls it; a caller driving the streamer by hand may give the finish reason."""
        self._finish_override = finish_reason
        super().end()

    def _open(self, prefix: str) -> list[Any]:
        from ..openai import ChatParser

        self.chat_parser = ChatParser(template=self.template, prefix=prefix, tools=self.tools, **self.options)
        return []

    def _feed(self, text: str) -> list[Any]:
        return self.chat_parser.feed(text)

    def _close(self) -> list[Any]:
        reason = self._finish_override
        if reason is None:
            if self.eos_token_ids is None or self.last_token_id in self.eos_token_ids:
                reason = "stop"
            else:
                reason = "length"
        message, deltas, reason = self.chat_parser.finish(reason)
        self.message = message
        self.finish_reason = reason
        return deltas
