"""Incremental detokenization: token ids in, text out, never a split character.

The concatenation of everything `IncrementalDecoder` returns equals `tokenizer.decode(all ids,
skip_special_tokens=...)`. A fast tokenizer with no clean-up pass decodes with the `tokenizers`
library's `DecodeStream` (one native call per token); any other tokenizer with a sliding window
over `tokenizer.decode` (the detokenization vLLM and TGI use): the text of the window's last
tokens is released once it no longer ends with an incomplete character (`U+FFFD`). Either way the
work per token is constant, not proportional to the text so far.
"""

from __future__ import annotations

from typing import Any

_REPLACEMENT = "\ufffd"


def _backend(tokenizer: Any) -> Any:
    """The `tokenizers.Tokenizer` behind a fast transformers tokenizer, or `None`."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or type(backend).__module__.split(".")[0] != "tokenizers":
        return None
    return backend


def _cleans_up(tokenizer: Any, backend: Any) -> bool:
    """Whether `tokenizer.decode` post-processes the backend's text (transformers' clean-up pass)."""
    if not getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return False
    model = getattr(backend, "model", None)
    is_bpe = type(model).__name__ == "BPE"
    forced = getattr(
        tokenizer, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False
    )
    return not is_bpe or bool(forced)


class IncrementalDecoder:
    """Decode token ids as they arrive: `push(ids) -> text`, then `flush() -> text` at the end.

    `native=False` always uses the sliding window over `tokenizer.decode` (also what any tokenizer
    that is not a fast one gets).

    >>> from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    >>> from transformers import PreTrainedTokenizerFast
    >>> alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())  # one token per byte
    >>> t = Tokenizer(models.BPE({c: i for i, c in enumerate(alphabet)}, []))
    >>> t.pre_tokenizer, t.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    >>> tok = PreTrainedTokenizerFast(tokenizer_object=t)
    >>> ids = tok.encode("née 🙂")  # 'é' is two byte tokens, '🙂' four
    >>> d = IncrementalDecoder(tok)
    >>> [d.push([i]) for i in ids] + [d.flush()]
    ['n', '', 'é', 'e', ' ', '', '', '', '🙂', '']
    """

    def __init__(self, tokenizer: Any, *, skip_special_tokens: bool = False, native: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self._native = native
        self.ids: list[int] = []
        self._parts: list[str] = []  # what was returned, joined only by `flush`
        self._stream: Any = None
        backend = _backend(tokenizer) if native else None
        if backend is not None and not _cleans_up(tokenizer, backend):
            try:
                from tokenizers.decoders import DecodeStream
            except ImportError:  # pragma: no cover - tokenizers < 0.21
                pass
            else:
                self._stream = DecodeStream(skip_special_tokens=skip_special_tokens)
                self._backend = backend
        self._prefix_offset = 0
        self._read_offset = 0
        self._released = 0  # ids whose text the native decoder has released in full

    @property
    def native(self) -> bool:
        """True when the `tokenizers` library's `DecodeStream` does the work."""
        return self._stream is not None

    def _decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)
        return text if isinstance(text, str) else "".join(text)

    def push(self, ids: list[int]) -> str:
        """Add token ids; return the text they complete (possibly `""`)."""
        if not ids:
            return ""
        self.ids.extend(ids)
        if self._stream is not None:
            try:
                text = self._stream.step(self._backend, ids if len(ids) > 1 else ids[0])
            except Exception:  # noqa: BLE001 - DecodeStream rejects byte runs that change earlier text
                # Go on with the sliding window from the last point where everything was released.
                self._stream = None
                self._read_offset = self._released
                self._prefix_offset = max(0, self._released - 1)
            else:
                if text:
                    self._released = len(self.ids)
                    self._parts.append(str(text))
                    return str(text)
                return ""
        window = self.ids[self._prefix_offset :]
        prefix_text = self._decode(window[: self._read_offset - self._prefix_offset])
        new_text = self._decode(window)
        if len(new_text) > len(prefix_text) and not new_text.endswith(_REPLACEMENT):
            out = new_text[len(prefix_text) :]
            self._prefix_offset = self._read_offset
            self._read_offset = len(self.ids)
            self._parts.append(out)
            return out
        return ""

    def flush(self) -> str:
        """The rest of the text (an incomplete character at the very end decodes as `U+FFFD`).

        Normally everything returned equals `tokenizer.decode(ids)`. One case cannot: with a byte
        fallback tokenizer (`<0xNN>` tokens) whose ids end inside a character, `decode` replaces
        the whole run of byte tokens, including characters already returned, by one `U+FFFD` per
        byte. Text already streamed is not taken back: the flush then returns one `U+FFFD` per
        dangling byte (what a byte-level tokenizer's `decode` gives), documented in
        docs/compatibility.md.
        """
        if not self.ids:
            return ""
        full = self._decode(self.ids)
        emitted = "".join(self._parts)
        self._parts = [emitted]
        out = full[len(emitted) :] if full.startswith(emitted) else None
        if out is None or _REPLACEMENT in out:
            out = self._tail()
        self._parts.append(out)
        return out

    def _tail(self) -> str:
        """The text of the ids not yet released: their longest complete part, then the dangling
        bytes (at most 4 ids: one character's) decoded alone, as `U+FFFD`s.

        The complete part is decoded after the last released character as context (so that a
        decoder that strips a leading space does not strip it here), never after part of one
        (a byte run would then decode as invalid as a whole).
        """
        start = self._released if self._stream is not None else self._read_offset
        n = len(self.ids)
        prefix, context = start, 0
        for p in range(start - 1, max(0, start - 8) - 1, -1):  # the last released character(s)
            text = self._decode(self.ids[p:start])
            if text and _REPLACEMENT not in text:
                prefix, context = p, len(text)
                break
        for j in range(n, max(start, n - 4) - 1, -1):
            head = self._decode(self.ids[prefix:j])[context:] if j > start else ""
            if _REPLACEMENT not in head:
                return head + (self._decode(self.ids[j:]) if j < n else "")
        return self._decode(self.ids[prefix:])[context:]

    def reset(self) -> None:
        """Forget every id: the next `push` starts a new text."""
        self.__init__(self.tokenizer, skip_special_tokens=self.skip_special_tokens, native=self._native)  # type: ignore[misc]
