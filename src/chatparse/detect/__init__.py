"""Template-less detection of tool calls and reasoning (runtime-contract.md §2-§5, §9).

The marker-anchored recognizers (hermes, gemma, gpt_oss, phi, llama `<|python_tag|>`, mistral in
both forms, qwen3_coder, glm, deepseek V3/V3.1, deepseek_dsml, kimi_k2, kimi_k3 XTML) and the
reasoning recognizers (think_tag, harmony_analysis, gemma_channel, xtml_think) are fields of one
union `response_template` run on the streaming core (`_union.py`). Marker-free shapes (Gemma's
bare `call:NAME{…}` and, for an offered NAME, `NAME{…}`; pythonic, bare_pythonic, llama3_json,
fenced tool_code, loose_keyed) are decided on the whole cleaned content at the end of the stream,
and only when no marker recognizer produced a call (`_shapes.py`). Gemma payloads the JSON dialect
rejects are repaired to JSON (`_gemma.py`); a wrapped Gemma call without its terminator is repaired
and fires unless finish_reason is "length".

The layer's API: `detect(text)` (a `DetectResult`), `AutoParser` (the streaming parser: region
events for `reasoning`, `content` and `tool_calls` with offsets into its `input_text`, in the
core's shape plus a `recognizer` key; see `_auto.py`'s "Theory of operation"), and the
recognizer tables `TOOL_RECOGNIZERS`, `REASONING_RECOGNIZERS`, `RECOGNIZERS`. Chat Completions
deltas and messages are the OpenAI layer's: `chatparse.openai.ChatParser(auto=True)`.
The template-less Chat Completions helpers `AutoStream`, `parse_auto` and `local_fallback` are
`chatparse.openai`'s too (this layer never imports the one above it).

Policies:

* A marker-anchored call needs its marker, a payload that parses, and (where the family has one)
  its terminator. A region that fails any of these is not a call: its raw text goes back into the
  content at its place and the failure is listed in `errors`. Arguments that are not a JSON object
  are such a failure (never a silently empty call).
* Reasoning is separated before calls are looked for: a call drafted inside `<think>` is
  reasoning text.
* Reasoning pre-opened by the prompt: when `prefix` (the prompt) ends, ignoring whitespace, with
  a reasoning opener (`<think>`, `<thinking>`, `[THINK]`, `<|channel>thought`,
  `<|channel|>analysis<|message|>`, `<|open|>think<|sep|>`), the output starts inside reasoning.
* Orphan closers (`</think>`, `</thinking>`, `<|close|>think<|sep|>`): off by default
  (`orphan_reasoning=False` for `detect`, `parse_message` and `AutoStream`), so prose streams as
  it arrives and the streamed message equals `detect` for every chunking; a lone closer is then
  dropped from the content and reported in `errors`. With `orphan_reasoning=True` (the default of
  the non-streaming `local_fallback`), content since the start of the output (or since the
  previous orphan closer) up to a lone closer is reasoning, as long as no other region opened in
  between; that text is held back while it may still become reasoning. A lone opener runs to the
  end.
* Section and end-of-turn markers of the recognized families (`<｜tool▁calls▁begin｜>`,
  `<｜DSML｜function_calls>`, `<|tool_calls_section_begin|>`, XTML `<|open|>tools<|sep|>`, ...) are
  dropped from the content.
* The first marker family that produces a call wins: calls of another marker family later in the
  same output are reported in `errors` and their text stays content (no merging across families).
* Unknown tool names are surfaced (`unknown_tools` lists them when `tools=` is given).

Streaming: the same message for every chunking. Content is released as the core
releases it, except that text is held while (a) with `orphan_reasoning=True`, it may still turn
out to be reasoning (the start of the output, or text after an orphan closer, until another region
opens) and (b) while no call was found, nothing was released and the content so far could still
be a marker-free whole-output shape (starts with `[`, `{`, a fence, `/`, `call:` or an offered
tool name).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._auto import OUTPUT_TEMPLATE, RECOGNIZERS, AutoParser, DetectResult, resolve_recognizers
from ._union import REASONING_RECOGNIZERS, TOOL_RECOGNIZERS

__all__ = [
    "OUTPUT_TEMPLATE",
    "REASONING_RECOGNIZERS",
    "RECOGNIZERS",
    "TOOL_RECOGNIZERS",
    "AutoParser",
    "DetectResult",
    "detect",
    "resolve_recognizers",
]


def detect(
    text: str,
    *,
    tools: Sequence[dict | Callable] | None = None,
    recognizers: str | Sequence[str] | None = None,
    prefix: str | None = None,
    orphan_reasoning: bool = False,
) -> DetectResult:
    """Detect reasoning and tool calls in a complete model output.

    >>> r = detect('[get_weather(city="SF")]')
    >>> r.recognizer, r.calls, r.cleaned
    ('pythonic', [{'name': 'get_weather', 'arguments': {'city': 'SF'}}], '')
    """
    p = AutoParser(tools=tools, recognizers=recognizers, prefix=prefix, orphan_reasoning=orphan_reasoning)
    p.feed(text)
    return p.finalize()[0]
