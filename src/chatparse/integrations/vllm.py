"""chatparse as vLLM's tool and reasoning parser: `--tool-call-parser chatparse --reasoning-parser chatparse`.

```sh
pip install 'chatparse[vllm]'
vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser chatparse --reasoning-parser chatparse
```

Installing chatparse registers the name through vLLM's `vllm.general_plugins` entry point (loaded
in every vLLM process: API servers and engine cores). Without the entry point (e.g.
`VLLM_PLUGINS` restricts them), `--tool-parser-plugin chatparse.integrations.vllm` and
`--reasoning-parser-plugin chatparse.integrations.vllm` load it: importing this module registers.

What runs
---------
* `ChatparseParser`, a unified `vllm.parser.abstract_parser.Parser`: one request, one
  `chatparse.openai.ChatParser`. The prompt token ids are decoded into the parser's prefix, so a
  `<think>` or a call the prompt opened is seen; `parse_delta` feeds each delta's text and, when
  `finished`, recovers the finish reason (below) and finishes the message. `parse` does the same
  in one go. `adjust_request` keeps special tokens and their spacing (the markers must reach the
  parser) and, for `tool_choice="required"` or a named tool, attaches the constraint
  `chatparse.constraints` derives from the template, the tools and the rendered prompt as vLLM's
  structural tag (`structured_outputs.structural_tag`, applied from the first token); the output is
  still parsed here. What the constraints cannot express (gpt-oss's call opener, a schema keyword
  such as `pattern`) is a `VLLMValidationError` (400) naming the template and the field.
* `ChatparseReasoningParser` and `ChatparseToolParser`, the legacy classes the registries hold.
  vLLM composes a parser class from the names on the command line; for `chatparse` that is
  `ChatparseParser` (registration wraps `ParserManager._compose_parser` for this one name, because
  vLLM's composer otherwise wraps legacy classes in a `DelegatingParser`, which never tells the tool
  parser the prompt or the end of the stream, or insists on a tokenizer-provided template).
  `--reasoning-parser chatparse` with another family's tool parser composes vLLM's way, with the
  legacy streaming methods of `ChatparseReasoningParser` (reasoning out, the rest verbatim).
  The reasoning parser is also what vLLM's engine core asks whether reasoning ended
  (`is_reasoning_end` on the prompt ids, `is_reasoning_end_streaming` per step, O(delta)).

Field routing: reasoning goes to `delta.reasoning` and, by default, also `delta.reasoning_content`
(`CHATPARSE_REASONING_KEY`); vLLM builds the non-streamed message itself, under `reasoning`. With
no reasoning parser selected, reasoning markup stays in the content verbatim; with tool parsing
off for the request (`tool_choice="none"`, no tools, or no `--enable-auto-tool-choice`) every call
is written back into the content as the model wrote it (`_split.ToolsOffSplitter`).

Deltas: for steps of one token, each `DeltaMessage` carries one kind (reasoning, content, or one
call; what a token completes beyond that goes out with the next step); a step of several tokens,
and the final step, carry everything they completed.

Finish reasons: vLLM does not tell parsers why generation ended, and chatparse never returns a call
the model did not finish. A stop token id (EOS, the template's end-of-turn markers, the request's
`stop_token_ids`) at the end of the final delta means `"stop"`; otherwise `max_tokens` (or the
context length) reached means `"length"`; anything else (a stop string) counts as `"stop"`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterable, Sequence
from typing import Any, cast

try:
    from vllm.entrypoints.generate.base.protocol import (
        DeltaFunctionCall,
        DeltaMessage,
        DeltaToolCall,
        ExtractedToolCallInformation,
        FunctionCall,
        ToolCall,
    )
    from vllm.exceptions import VLLMValidationError
    from vllm.parser.abstract_parser import Parser
    from vllm.parser.parser_manager import ParserManager
    from vllm.reasoning import ReasoningParser, ReasoningParserManager
    from vllm.renderers.chat_utils import make_tool_call_id
    from vllm.tool_parsers import ToolParser, ToolParserManager
except ImportError as e:  # pragma: no cover - exercised only without vLLM
    raise ImportError(
        f"chatparse.integrations.vllm needs vLLM 0.33 (pip install 'chatparse[vllm]'): {e}"
    ) from e

from .._parser import ResponseParser
from ..openai import ChatParser
from ._common import (
    PARSER_NAME,
    REASONING_FIELDS,
    Policy,
    Resolved,
    ToolChoiceError,
    delimiter_literal,
    describe,
    finish_output,
    forces_tool_calls,
    parser_tools,
    prebuilt,
    recover_finish_reason,
    resolve,
    stop_token_ids,
    tool_choice_mode,
    tool_constraint,
)
from ._split import PassthroughChat, ReasoningSplitter

__all__ = [
    "ChatparseParser",
    "ChatparseReasoningParser",
    "ChatparseToolParser",
    "register",
]

log = logging.getLogger("chatparse.integrations.vllm")
_PATTERN_WINDOW = 16  # ids of context before a delta when a pattern closer is searched
_LOGGED: set[int] = set()  # ids of Resolved objects already announced (a log, not parser state)


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    try:
        return cast(
            str, tokenizer.decode(list(ids), skip_special_tokens=False, spaces_between_special_tokens=False)
        )
    except TypeError:
        return cast(str, tokenizer.decode(list(ids), skip_special_tokens=False))


_TAIL_IDS = 256  # prompt ids decoded first: the parser reads only the text after the last start anchor
_TAIL_MARGIN = 128  # characters of context the anchor match must leave before it (lookbehinds)


def _prompt_text(tokenizer: Any, template: Any, ids: Sequence[int]) -> str:
    """The prompt as the parser needs it: its text from a little before the last start-anchor match.

    The parser reads only what follows the last match of the template's start anchor, so for a
    long prompt (a system prompt with many tools is thousands of ids) only its last `_TAIL_IDS` ids
    are decoded, when the last anchor match lies well inside them (`_TAIL_MARGIN` characters of
    context before it, so a lookbehind and a match cut at the tail's start cannot differ from the
    whole prompt's); otherwise, or for a template without an anchor, the whole prompt.
    """
    if len(ids) > _TAIL_IDS:
        rx = getattr(template, "anchor_re", None)
        if rx is not None:
            tail = _decode(tokenizer, ids[len(ids) - _TAIL_IDS :])
            last = None
            try:
                for m in rx.finditer(tail, timeout=1.0):
                    last = m
            except TimeoutError:
                last = None
            if last is not None and last.start() >= _TAIL_MARGIN:
                return tail[last.start() - _TAIL_MARGIN :]
    return _decode(tokenizer, ids)


def _model_name(model_config: Any) -> str | None:
    name = getattr(model_config, "model", None) if model_config is not None else None
    return name if isinstance(name, str) else None


def _resolve(tokenizer: Any, model_config: Any) -> Resolved:
    resolved = resolve(tokenizer, model=_model_name(model_config))
    if id(resolved) not in _LOGGED:
        _LOGGED.add(id(resolved))
        log.info("%s", describe(resolved, "vllm"))
    return resolved


def _literal_id_sequences(tokenizer: Any, literals: Iterable[str]) -> list[list[int]] | None:
    out: list[list[int]] = []
    vocab = {}
    try:
        vocab = tokenizer.get_vocab()
    except Exception:
        vocab = {}
    for lit in literals:
        ids = [vocab[lit]] if lit in vocab else list(tokenizer.encode(lit, add_special_tokens=False))
        if not ids:
            return None
        out.append(ids)
    return out or None


def _ends_within(ids: Sequence[int], end: list[int], new: int) -> bool:
    """Whether `end` completes within the last `new` ids (looks at `new + len(end) - 1` ids only)."""
    n = len(ids)
    lo = max(0, n - new - len(end) + 1)
    k = len(end)
    return any(list(ids[i : i + k]) == end for i in range(lo, n - k + 1))


# --------------------------------------------------------------------------------------------------
# legacy reasoning parser (registry entry; engine-core reasoning-end checks; DelegatingParser paths)


class ChatparseReasoningParser(ReasoningParser):
    """Reasoning through chatparse: where reasoning ends, and the legacy extraction methods.

    Stateless for `is_reasoning_end*` (vLLM's engine core calls them with arbitrary, even
    shrinking, id lists for speculative tokens); the extraction methods keep per-instance stream
    state (one instance per request, as vLLM creates them).
    """

    chatparse_plugin = True

    @staticmethod
    def unified_parser(**options: Any) -> type[Parser]:
        """The unified parser class that selecting this parser stands for."""
        return _unified_parser(**options)

    def __init__(
        self, tokenizer: Any, *args: Any, chatparse_resolved: Resolved | None = None, **kwargs: Any
    ) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        self._resolved = chatparse_resolved or _resolve(tokenizer, kwargs.get("model_config"))
        ctk = kwargs.get("chat_template_kwargs") or {}
        self._thinking_disabled = ctk.get("enable_thinking", True) is False or ctk.get("thinking") is False
        field_name = self._resolved.reasoning_field
        f = self._resolved.template.fields.get(field_name) if field_name else None
        self._field = f
        self._closers = f.closer.literals if f is not None and f.closer is not None else None
        self._end_ids_cache: list[list[int]] | None | bool = False  # computed on first use
        self._prompt_ids: list[int] | None = None
        self._splitter: ReasoningSplitter | None = None

    @property
    def _end_ids(self) -> list[list[int]] | None:
        """Token ids of each literal reasoning closer (None for a pattern closer)."""
        if self._end_ids_cache is False:
            closers = self._closers
            self._end_ids_cache = _literal_id_sequences(self.model_tokenizer, closers) if closers else None
        return self._end_ids_cache  # type: ignore[return-value]

    @property
    def reasoning_start_str(self) -> str | None:
        """The reasoning opener vLLM tokenizes (`ReasoningConfig`): a literal, or the added token a
        pattern opener matches (`delimiter_literal`)."""
        return delimiter_literal(
            self._field.opener if self._field is not None else None, self.model_tokenizer
        )

    @property
    def reasoning_end_str(self) -> str | None:
        """The reasoning closer vLLM tokenizes, found as `reasoning_start_str` is."""
        return delimiter_literal(
            self._field.closer if self._field is not None else None, self.model_tokenizer
        )

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self._prompt_ids = list(prompt_token_ids)
        self._splitter = None

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Whether generation after `input_ids` (a prompt) starts outside reasoning.

        A reasoning region the prompt opened and did not close: False. One it closed (e.g. an
        empty `<think></think>` for `enable_thinking=False`), or a content or call region it
        opened: True. Otherwise reasoning may still start: True only if thinking was disabled for
        the request (vLLM's `hf` convention, so that structured output waits for reasoning).
        """
        if self._field is None:
            return True
        try:
            splitter = ReasoningSplitter(
                self._resolved.template,
                prefix=_prompt_text(self.model_tokenizer, self._resolved.template, input_ids),
            )
        except Exception:
            return False
        if splitter.in_reasoning:
            return False
        if splitter.reasoning_ended:
            return True
        return self._thinking_disabled

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        """Whether a reasoning closer completes within the newest `delta_ids`: O(len(delta_ids))."""
        new = len(delta_ids) if isinstance(delta_ids, Sequence) else len(list(delta_ids))
        if self._end_ids is None:
            if self._field is None:
                return True
            return self._pattern_end_within(input_ids, new)
        return any(_ends_within(input_ids, end, new) for end in self._end_ids)

    def _pattern_end_within(self, input_ids: Sequence[int], new: int) -> bool:
        """A pattern closer (e.g. qwen3_xml's `</think>|(?=<tool_call>...)`): search a bounded
        window of the newest ids for a match that ends, or for a lookahead that starts, in them."""
        closer = self._field.closer if self._field is not None else None
        rx = getattr(closer, "module_re", None)
        if rx is None:
            return False
        window = list(input_ids[max(0, len(input_ids) - new - _PATTERN_WINDOW) :])
        text = _decode(self.model_tokenizer, window)
        old = len(_decode(self.model_tokenizer, window[: len(window) - new])) if new < len(window) else 0
        for m in rx.finditer(text):
            if m.end() > old or (m.end() == m.start() and m.start() >= old - _PATTERN_WINDOW):
                return True
        return False

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        """The ids after the first reasoning closer in `input_ids` (vLLM's convention: `[]` when no
        closer ends before the last id).

        A literal closer is matched on its token ids, as vLLM's own parsers match their end token.
        A pattern closer (qwen3's `</think>|(?=<tool_call>...)`) is matched on the decoded text:
        the content starts at the first token that begins at or after the match's end, so a
        lookahead alternative leaves the `<tool_call>` it saw in the content.
        """
        ids = list(input_ids)
        if self._field is None:
            return ids
        if self._end_ids is not None:
            best: int | None = None
            for end in self._end_ids:
                k = len(end)
                for i in range(len(ids) - k):  # a closer ending at the last id leaves no content
                    if ids[i : i + k] == end:
                        best = i + k if best is None else min(best, i + k)
                        break
            return ids[best:] if best is not None else []
        closer = self._field.closer
        rx = getattr(closer, "module_re", None)
        if rx is None:
            return []
        starts: list[int] = []  # start offset of each token in the decoded text
        pieces: list[str] = []
        pos = 0
        for i in ids:
            starts.append(pos)
            piece = _decode(self.model_tokenizer, [i])
            pieces.append(piece)
            pos += len(piece)
        m = rx.search("".join(pieces))
        if m is None:
            return []
        first = next((k for k, at in enumerate(starts) if at >= m.end()), len(ids))
        return ids[first:]

    def _prefix(self) -> str:
        if not self._prompt_ids:
            return ""
        return _prompt_text(self.model_tokenizer, self._resolved.template, self._prompt_ids)

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        splitter = ReasoningSplitter(self._resolved.template, prefix=self._prefix())
        r1, n1 = splitter.feed(model_output)
        r2, n2 = splitter.finish()
        return (r1 + r2) or None, (n1 + n2) or None

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        if self._splitter is None:
            self._splitter = ReasoningSplitter(self._resolved.template, prefix=self._prefix())
        reasoning, normal = self._splitter.feed(delta_text)
        if not reasoning and not normal:
            return None
        return DeltaMessage(reasoning=reasoning or None, content=normal or None)


# --------------------------------------------------------------------------------------------------
# legacy tool parser (registry entry; direct legacy streaming use)


class ChatparseToolParser(ToolParser):
    """Tool calls through chatparse with the legacy `ToolParser` interface.

    Used by vLLM as the registry entry behind `--tool-call-parser chatparse` (the serving path runs
    `ChatparseParser`). Its own methods parse text that has no reasoning left in it; the legacy
    streaming interface has no end-of-stream call, so a call whose region is only ended by the end
    of the output (no closer) is returned by `extract_tool_calls` but not streamed here.
    """

    # Forced calls are constrained to the template's own syntax (`adjust_request`) and parsed by
    # chatparse, never by vLLM's JSON-array path (`DelegatingParser`, for parsers that say True).
    supports_required_and_named = False
    chatparse_plugin = True

    @staticmethod
    def unified_parser(**options: Any) -> type[Parser]:
        """The unified parser class that selecting this parser stands for."""
        return _unified_parser(**options)

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        super().__init__(tokenizer, tools)
        # Nothing is resolved here: in the serving path this object only stands for the name
        # (`ChatparseParser` parses), and vLLM creates one per request.
        self._raw_tools = tools
        self._stream: ChatParser | None = None

    @functools.cached_property
    def _resolved(self) -> Resolved:
        return _resolve(self.model_tokenizer, None)

    @property
    def _policy(self) -> Policy:
        return self._resolved.policies["vllm"]

    @functools.cached_property
    def _tool_list(self) -> list[dict[str, Any]]:
        return parser_tools(self._raw_tools)

    def adjust_request(self, request: Any) -> Any:
        _keep_markers(request)
        if forces_tool_calls(getattr(request, "tool_choice", None), getattr(request, "tools", None)):
            template = self._resolved.variant(reasoning=False, tools=True) or self._resolved.template
            _attach(request, _constraint_for(self._resolved, template, request, prefix=None))
        return request

    def _parser(self) -> ChatParser:
        template = self._resolved.variant(reasoning=False, tools=True) or self._resolved.template
        return _chat_parser(template, "", self._tool_list, self._policy)

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        parser = self._parser()
        parser.feed(model_output)
        message, _, _ = finish_output(parser, "stop", "vllm")
        calls = [
            ToolCall(
                id=c["id"],
                function=FunctionCall(name=c["function"]["name"], arguments=c["function"]["arguments"]),
            )
            for c in message.get("tool_calls") or ()
        ]
        return ExtractedToolCallInformation(
            tools_called=bool(calls), tool_calls=calls, content=message.get("content")
        )

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        if self._stream is None:
            self._stream = self._parser()
        return _delta_message(self._stream.feed(delta_text), self._policy, include_reasoning=False)


# --------------------------------------------------------------------------------------------------
# the unified parser (what the serving layer runs)


def _keep_markers(request: Any) -> None:
    """Keep special tokens and their spacing in the detokenized text: the markers must reach the parser."""
    if hasattr(request, "skip_special_tokens"):
        request.skip_special_tokens = False
    if hasattr(request, "spaces_between_special_tokens"):
        request.spaces_between_special_tokens = False


def _constraint_for(resolved: Resolved, template: Any, request: Any, *, prefix: str | None) -> Any:
    """The constraint for a `required` / named request, or vLLM's 400 naming what cannot be expressed."""
    try:
        return tool_constraint(
            resolved,
            template,
            request.tool_choice,
            request.tools,
            parallel_tool_calls=getattr(request, "parallel_tool_calls", True),
            prefix=prefix,
        )
    except ToolChoiceError as e:
        value = request.tool_choice if e.parameter == "tool_choice" else None
        raise VLLMValidationError(str(e), parameter=e.parameter, value=str(value)) from None


def _attach(request: Any, constraint: Any) -> None:
    """Hand the constraint to vLLM's structured-output path as its own tool parsers do
    (`DelegatingParser._apply_structural_tag`): `structured_outputs.structural_tag`, replacing any
    `response_format` (a forced call overrides it, as in vLLM)."""
    import json

    from vllm.sampling_params import StructuredOutputsParams

    tag = json.dumps(constraint.structural_tag(), ensure_ascii=False)
    if getattr(request, "structured_outputs", None) is not None or getattr(request, "response_format", None):
        log.warning("structured outputs are ignored because tool_choice forces a tool call")
    request.structured_outputs = StructuredOutputsParams(structural_tag=tag)
    if hasattr(request, "response_format"):
        request.response_format = None
    elif hasattr(request, "text"):  # ResponsesRequest
        request.text = None


def _chat_parser(template: Any, prefix: str, tools: list[dict[str, Any]], policy: Policy) -> ChatParser:
    return ChatParser(
        template=template,
        prefix=prefix,
        tools=tools or None,
        stream_tool_calls=policy.stream_tool_calls,
        unknown_tools=policy.unknown_tools,
        id_factory=make_tool_call_id if policy.call_ids == "engine" else None,
    )


# The per-token results of `parse_delta`, built without pydantic's validation (`prebuilt`: checked
# once against `DeltaMessage` itself, which they fall back to).
_content_message = prebuilt(DeltaMessage, {"content": "x"})
_reasoning_both = prebuilt(DeltaMessage, {"reasoning": "x", "reasoning_content": "x"})
_reasoning_only = prebuilt(DeltaMessage, {"reasoning": "x"})
_reasoning_content_only = prebuilt(DeltaMessage, {"reasoning_content": "x"})


def _reasoning_message(text: str, policy: Policy) -> DeltaMessage:
    key = policy.reasoning_key
    if key == "both":
        return cast(DeltaMessage, _reasoning_both(reasoning=text, reasoning_content=text))
    if key == "reasoning":
        return cast(DeltaMessage, _reasoning_only(reasoning=text))
    return cast(DeltaMessage, _reasoning_content_only(reasoning_content=text))


def _delta_message(
    deltas: list[dict[str, Any]],
    policy: Policy,
    *,
    include_reasoning: bool,
    reasoning_as_content: bool = False,
) -> DeltaMessage | None:
    """One `DeltaMessage` for the OpenAI deltas of one engine step."""
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[DeltaToolCall] = []
    for d in deltas:
        if "reasoning_content" in d:
            (content if reasoning_as_content else reasoning).append(d["reasoning_content"])
        if "content" in d:
            content.append(d["content"])
        for entry in d.get("tool_calls") or ():
            fn = entry.get("function") or {}
            calls.append(
                DeltaToolCall(
                    index=entry["index"],
                    id=entry.get("id"),
                    type=entry.get("type"),
                    function=DeltaFunctionCall(name=fn.get("name"), arguments=fn.get("arguments")),
                )
            )
    fields: dict[str, Any] = {}
    text = "".join(reasoning)
    if text and include_reasoning:
        if policy.reasoning_key in ("both", "reasoning"):
            fields["reasoning"] = text
        if policy.reasoning_key in ("both", "reasoning_content"):
            fields["reasoning_content"] = text
    if content:
        fields["content"] = "".join(content)
    if calls:
        fields["tool_calls"] = calls
    return DeltaMessage(**fields) if fields else None


def _kind(delta: dict[str, Any], reasoning_as_content: bool) -> Any:
    if "tool_calls" in delta:
        return delta["tool_calls"][0]["index"]
    if "reasoning_content" in delta and not reasoning_as_content:
        return "reasoning"
    return "content"


def _one_kind(
    queue: list[dict[str, Any]], reasoning_as_content: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The leading deltas of one kind (reasoning, content, or one call), and the rest.

    For steps of one token, vLLM's delta conventions hold: a delta carries reasoning, content or
    one call, never two of them. What a token completes beyond that (the text before a call, a
    second call of a list) goes out with the next step, or with the final one.
    """
    if not queue:
        return [], []
    first = _kind(queue[0], reasoning_as_content)
    n = 1
    while n < len(queue) and _kind(queue[n], reasoning_as_content) == first:
        n += 1
    return queue[:n], queue[n:]


class _ReasoningTokenCounter:
    """Counts generated tokens whose text is reasoning; each token is decoded and parsed once."""

    def __init__(self, resolved: Resolved, prefix: str, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._parser = ResponseParser(resolved.template, prefix=prefix)
        self._start = len(self._parser.input_text)
        self._ids: list[int] = []
        self._ends: list[int] = []  # end offset of each token in input_text
        self._spans: list[tuple[int, int]] = []  # closed reasoning bodies
        self._open: int | None = None
        self._settled = 0  # tokens before this index are counted in self._count
        self._count = 0
        self._track(self._parser.initial_events)

    def continues(self, ids: Sequence[int]) -> bool:
        return len(ids) >= len(self._ids) and list(ids[: len(self._ids)]) == self._ids

    def _track(self, events: list[Any]) -> None:
        for e in events:
            if e["field"] not in REASONING_FIELDS or e["type"] == "region_chunk":
                continue
            if e["type"] == "region_open":
                self._open = e["end"]
            elif self._open is not None:
                self._spans.append((self._open, e["start"]))
                self._open = None

    def count(self, ids: Sequence[int]) -> int:
        new = list(ids[len(self._ids) :])
        end = self._ends[-1] if self._ends else self._start
        texts = []
        for i in new:
            t = _decode(self._tokenizer, [i])
            texts.append(t)
            end += len(t)
            self._ends.append(end)
        self._ids.extend(new)
        self._track(self._parser.feed("".join(texts)))
        spans = self._spans if self._open is None else [*self._spans, (self._open, 1 << 62)]
        # Tokens before the last closed span's end can no longer change class.
        stable_to = self._spans[-1][1] if self._spans else self._start
        if self._open is not None:
            stable_to = min(stable_to, self._open)
        count = self._count
        start = self._ends[self._settled - 1] if self._settled else self._start
        for k in range(self._settled, len(self._ends)):
            tok_end = self._ends[k]
            inside = any(a < tok_end and start < b for a, b in spans)
            count += inside
            if tok_end <= stable_to and k == self._settled:
                self._settled += 1
                self._count += inside
            start = tok_end
        return count


class ChatparseParser(Parser):
    """The unified vLLM parser: one `chatparse.openai.ChatParser` per request.

    >>> ChatparseParser.reasoning_parser_cls.__name__, ChatparseParser.always_adjust_request
    ('ChatparseReasoningParser', True)
    """

    reasoning_parser_cls: type[ReasoningParser] | None = ChatparseReasoningParser
    tool_parser_cls: type[ToolParser] | None = ChatparseToolParser
    always_adjust_request = True
    _enable_auto_tools = True  # the composed class (see `register`) sets the server's flag
    _tools_selected = True  # `--tool-call-parser chatparse` (forced calls parse even without auto)

    def __init__(
        self,
        tokenizer: Any,
        tools: list[Any] | None = None,
        *args: Any,
        model_config: Any = None,
        **kwargs: Any,
    ) -> None:
        self._resolved = _resolve(tokenizer, model_config)
        if self.reasoning_parser_cls is not None and issubclass(
            self.reasoning_parser_cls, ChatparseReasoningParser
        ):
            kwargs["chatparse_resolved"] = self._resolved
        super().__init__(tokenizer, tools, *args, model_config=model_config, **kwargs)
        self._model_config = model_config
        self._policy = self._resolved.policies["vllm"]
        self._tools = tools  # converted to dicts once, when the stream starts (`model_dump` is costly)
        self._prompt_ids: list[int] | None = None
        self._prefix = ""
        self._stream: ChatParser | PassthroughChat | None = None
        self._reasoning_as_content = False
        self._generated = 0
        self._last_id: int | None = None  # the last generated token's id (a stop token, or not)
        self._done = False
        self._pending: list[dict[str, Any]] = []  # deltas held for the next single-token step
        self._include = True  # reasoning goes out (decided per request, with the stream)
        self._counter: _ReasoningTokenCounter | None = None

    # -- request ---------------------------------------------------------------------------------

    def adjust_request(self, request: Any) -> Any:
        """Keep the markers in the text; for `tool_choice="required"` or a named tool, attach the
        constraint `chatparse.constraints` derives from the template, the request's tools and the
        rendered prompt (vLLM calls `set_prompt_token_ids` first) as vLLM's structural tag.

        The grammar covers the whole output, reasoning included (the prompt's open `<think>` is
        continued), so the engine applies it from the first token (`_grammar_from_parser`, as
        vLLM's Mistral parser does). vLLM's serving code leaves parsing to this parser's own
        `parse` / `parse_delta` for forced calls too (only `DelegatingParser` has a JSON path).
        A template or schema the constraints cannot express is vLLM's 400 naming the template
        and the field; so is a forced call without `--tool-call-parser chatparse`.
        """
        _keep_markers(request)
        tools = getattr(request, "tools", None)
        if not forces_tool_calls(getattr(request, "tool_choice", None), tools):
            return request
        if not self._tools_selected or not self._resolved.has_tools:
            why = (
                "--tool-call-parser chatparse is not selected"
                if not self._tools_selected
                else f"response template {self._resolved.name} has no tool_calls field"
            )
            raise VLLMValidationError(
                f"the chatparse parser cannot guarantee a forced tool call: {why}",
                parameter="tool_choice",
                value=str(request.tool_choice),
            )
        template, _ = self._template_for(request, self._enable_auto_tools)
        _attach(request, _constraint_for(self._resolved, template, request, prefix=self._prefix))
        with contextlib.suppress(AttributeError, ValueError):  # a request type without the attribute
            request._grammar_from_parser = True
        return request

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        ids = list(prompt_token_ids)
        if ids == self._prompt_ids:
            return
        self._prompt_ids = ids
        self._prefix = _prompt_text(self.model_tokenizer, self._resolved.template, ids)
        self._stream = None
        self._counter = None
        if self._reasoning_parser is not None:
            self._reasoning_parser.set_prompt_token_ids(ids)

    def is_reasoning_end(self, input_ids: list[int]) -> bool:
        return self._reasoning_parser is None or self._reasoning_parser.is_reasoning_end(input_ids)

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """Generated tokens whose text the template parses as reasoning (held text counts as
        reasoning until its closer arrives); each token is decoded and parsed once per stream."""
        if self._reasoning_parser is None or self._resolved.reasoning_field is None:
            return 0
        counter = self._counter
        if counter is None or not counter.continues(token_ids):
            counter = self._counter = _ReasoningTokenCounter(
                self._resolved, self._prefix, self.model_tokenizer
            )
        return counter.count(token_ids)

    # -- parsing ---------------------------------------------------------------------------------

    def _parses_tools(self, request: Any, enable_auto_tools: bool) -> bool:
        """Calls are parsed for `auto` with `--enable-auto-tool-choice`, and for forced calls
        (`required`, named) whenever `--tool-call-parser chatparse` is selected (vLLM returns
        forced calls without auto tool choice too)."""
        tools = getattr(request, "tools", None)
        if not (self._tools_selected and self._resolved.has_tools and tools):
            return False
        choice = getattr(request, "tool_choice", None)
        if forces_tool_calls(choice, tools):
            return True
        return self._tool_parser is not None and enable_auto_tools and tool_choice_mode(choice) != "none"

    def _template_for(self, request: Any, enable_auto_tools: bool) -> tuple[Any, bool]:
        """The template this request is parsed with, and whether reasoning goes to the content."""
        reasoning = self._reasoning_parser is not None
        tools = self._parses_tools(request, enable_auto_tools)
        template = self._resolved.variant(reasoning=reasoning, tools=tools)
        if template is None:  # the field cannot be left out: parse it, and route it to content
            template = self._resolved.variant(reasoning=True, tools=tools)
            assert template is not None
            return template, not reasoning
        return template, False

    def _new_stream(self, request: Any, enable_auto_tools: bool) -> ChatParser | PassthroughChat:
        if self._resolved.has_tools and not self._parses_tools(request, enable_auto_tools):
            # Tools off for this turn: calls stay in the content as written (`ToolsOffSplitter`).
            self._reasoning_as_content = False
            return PassthroughChat(
                self._resolved.template, self._prefix, split_reasoning=self._reasoning_parser is not None
            )
        template, self._reasoning_as_content = self._template_for(request, enable_auto_tools)
        offered = getattr(request, "tools", None)
        tools = parser_tools(offered if offered is not None else self._tools)
        return _chat_parser(template, self._prefix, tools, self._policy)

    def _finish_reason(self, request: Any, all_ids: Sequence[int], generated: int) -> str:
        extra = getattr(request, "stop_token_ids", None) or ()
        stops = stop_token_ids(self.model_tokenizer, self._resolved, extra)
        fields = getattr(request, "__dict__", {})  # plain reads: `max_tokens` warns as deprecated
        max_tokens = fields.get("max_completion_tokens") or fields.get("max_tokens")
        max_model_len = getattr(self._model_config, "max_model_len", None)
        return recover_finish_reason(
            last_ids=list(all_ids[-1:]),
            generated=generated,
            stop_ids=stops,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
            prompt_tokens=len(self._prompt_ids) if self._prompt_ids is not None else None,
            max_model_len=max_model_len if isinstance(max_model_len, int) else None,
        )

    def _include_reasoning(self, request: Any) -> bool:
        return self._reasoning_parser is not None and getattr(request, "include_reasoning", True) is not False

    def parse(
        self,
        model_output: str,
        request: Any,
        enable_auto_tools: bool = False,
        model_output_token_ids: Sequence[int] = (),
    ) -> tuple[str | None, str | None, list[FunctionCall] | None]:
        parser = self._new_stream(request, enable_auto_tools)
        parser.feed(model_output)
        ids = list(model_output_token_ids)
        reason = self._finish_reason(request, ids, len(ids)) if ids else "stop"
        message, _, _ = finish_output(parser, reason, "vllm")
        reasoning = message.get("reasoning_content")
        content = message.get("content")
        if self._reasoning_as_content and reasoning:
            content, reasoning = reasoning + (content or ""), None
        calls = [
            FunctionCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in message.get("tool_calls") or ()
        ]
        return reasoning or None, content or None, calls or None

    def parse_delta(
        self,
        delta_text: str,
        delta_token_ids: list[int],
        request: Any,
        prompt_token_ids: list[int] | None = None,
        *,
        finished: bool,
    ) -> DeltaMessage | None:
        if self._done:
            return None
        stream = self._stream
        if stream is None:
            if self._prompt_ids is None and prompt_token_ids is not None:
                self.set_prompt_token_ids(prompt_token_ids)
            stream = self._stream = self._new_stream(request, self._enable_auto_tools)
            self._include = self._include_reasoning(request) or self._reasoning_as_content
        deltas = stream.feed(delta_text) if delta_text else []
        if delta_token_ids:
            self._generated += len(delta_token_ids)
            self._last_id = delta_token_ids[-1]
        if not finished and not self._pending:
            # The common steps: nothing released (text held, a call being written), or one delta.
            if not deltas:
                return None
            if len(deltas) == 1 and len(deltas[0]) == 1:
                d = deltas[0]
                if "content" in d:
                    return cast(DeltaMessage, _content_message(content=d["content"]))
                if "reasoning_content" in d:
                    text = d["reasoning_content"]
                    if self._reasoning_as_content:
                        return cast(DeltaMessage, _content_message(content=text))
                    if not self._include:
                        return None
                    return _reasoning_message(text, self._policy)
        if finished:
            self._done = True
            last_ids = [self._last_id] if self._last_id is not None else []
            reason = self._finish_reason(request, last_ids, self._generated)
            _, last, _ = finish_output(stream, reason, "vllm")
            deltas = deltas + last
        include = self._include
        queue = self._pending + [d for d in deltas if include or "reasoning_content" not in d]
        if finished or len(delta_token_ids) > 1:
            out, self._pending = queue, []
        else:
            out, self._pending = _one_kind(queue, self._reasoning_as_content)
        return _delta_message(
            out, self._policy, include_reasoning=include, reasoning_as_content=self._reasoning_as_content
        )


# --------------------------------------------------------------------------------------------------
# registration


def _registered(manager: Any, name: str | None) -> Any:
    """The class registered under `name` when it is a chatparse class (any copy of this module)."""
    if name != PARSER_NAME:
        return None
    try:
        cls = (
            manager.get_tool_parser(name)
            if manager is ToolParserManager
            else manager.get_reasoning_parser(name)
        )
    except Exception:
        return None
    return cls if getattr(cls, "chatparse_plugin", False) else None


def _install_composer() -> None:
    """Make `ParserManager` compose `ChatparseParser` for the name `chatparse` (idempotent).

    The wrapper looks the classes up in vLLM's registries on every call, so it never holds on to
    classes of a stale copy of this module.
    """
    original = ParserManager.__dict__["_compose_parser"]
    func = getattr(original, "__func__", None)
    if func is None or getattr(func, "_chatparse", False):
        return

    def _compose_parser(
        cls: Any,
        tool_parser_name: str | None,
        reasoning_parser_name: str | None,
        enable_auto_tools: bool,
        model_name: str | None,
        is_harmony: bool,
        tool_strict_level: str | None,
        tokenizer: Any,
    ) -> Any:
        tool_cls = _registered(ToolParserManager, tool_parser_name)
        reasoning_cls = _registered(ReasoningParserManager, reasoning_parser_name)
        if tool_cls is not None and reasoning_parser_name and reasoning_cls is None:
            raise TypeError(
                f"--reasoning-parser {reasoning_parser_name} and --tool-call-parser {PARSER_NAME} cannot be "
                f"combined: the chatparse parser parses reasoning itself (use --reasoning-parser {PARSER_NAME})"
            )
        if tool_cls is not None or (reasoning_cls is not None and not tool_parser_name):
            owner = tool_cls or reasoning_cls
            return owner.unified_parser(
                reasoning=reasoning_cls is not None,
                tools=tool_cls is not None and enable_auto_tools,
                tools_selected=tool_cls is not None,
                tool_strict_level=tool_strict_level,
                enable_auto_tools=enable_auto_tools,
            )
        return func(
            cls,
            tool_parser_name,
            reasoning_parser_name,
            enable_auto_tools,
            model_name,
            is_harmony,
            tool_strict_level,
            tokenizer,
        )

    _compose_parser._chatparse = True  # type: ignore[attr-defined]
    ParserManager._compose_parser = classmethod(_compose_parser)


def _unified_parser(
    *,
    reasoning: bool,
    tools: bool,
    tool_strict_level: str | None,
    enable_auto_tools: bool,
    tools_selected: bool | None = None,
) -> type[Parser]:
    """A `ChatparseParser` class for the selected parsers, as `ParserManager` composes one."""
    from vllm.tool_parsers.tool_strict_level import ToolStrictLevel

    level = None if tool_strict_level is None else ToolStrictLevel.from_name(tool_strict_level)
    return type(
        "ChatparseParser",
        (ChatparseParser,),
        {
            "reasoning_parser_cls": ChatparseReasoningParser if reasoning else None,
            "tool_parser_cls": ChatparseToolParser if tools else None,
            "tool_strict_level": level,
            "_enable_auto_tools": enable_auto_tools,
            "_tools_selected": tools if tools_selected is None else tools_selected,
            "__module__": __name__,
        },
    )


def register() -> None:
    """Register `chatparse` with vLLM's tool and reasoning parser registries (idempotent).

    The `vllm.general_plugins` entry point calls this in every vLLM process; importing this module
    (`--tool-parser-plugin chatparse.integrations.vllm`) calls it too.
    """
    ToolParserManager.register_module(PARSER_NAME, force=True, module=ChatparseToolParser)
    ReasoningParserManager.register_module(PARSER_NAME, force=True, module=ChatparseReasoningParser)
    _install_composer()


register()
