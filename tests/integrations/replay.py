"""canitoolcall fixtures through the engines' own parser APIs, driven the way each server drives them.

Shared by the corpus tests (`test_vllm_corpus.py`, `test_sglang_corpus.py`) and
`benchmarks/bench_engines.py`. Per fixture:

* tokenizer: `localtok.family_tokenizer(family)` (built here; the markers are single tokens);
* template for the chatparse plugins: the one the library's conformance harness uses
  (`tests/conformance/harness.config_for`), selected with `CHATPARSE_TEMPLATE_OVERRIDE` as an
  operator would; the prompt is the harness's prefix (the generation prompt), tokenized;
* output token ids: the fixture's raw output tokenized; a stop token id is appended for fixtures
  that ended normally (the reference model's first stop token; `<|call|>` after a Harmony message
  with a recipient), none for fixtures cut off by `max_tokens`, whose request then has
  `max_tokens` = the number of output tokens;
* deltas (`STRATEGIES`): the whole output (`one`), one token per delta (`token`), and seeded
  groups of 1-8 tokens (`rand:S:8`), canitoolcall's own chunking;
* vLLM: `ParserManager.get_parser(...)`, then one parser per request, `adjust_request`, the v1
  `IncrementalDetokenizer` turning each id group into text (stop token dropped from the text, as
  `stop_terminated` does), and `parse_delta(text, ids, request, prompt_token_ids=..., finished=...)`;
  non-streaming `parse(text, request, enable_auto_tools=True, model_output_token_ids=ids)`;
* SGLang: per delta `ReasoningParser.parse_stream_chunk`, its normal text into
  `FunctionCallParser.parse_stream_chunk`, `parse_stream_end` on the last step; the serving layer's
  request context (prompt, finish reason) published as `OpenAIServingChat`'s hooks publish it.
  Non-streaming: `parse_non_stream` of both, `has_tool_call` first, as `_process_tool_calls`;
* verdicts: canitoolcall's own `checks.run_checks` over the non-streaming parse and every
  strategy; a case's status is the worst of its rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from canitoolcall import checks
from canitoolcall.chunking import ChunkStrategy, split
from canitoolcall.fixtures import Fixture, load_families, load_fixtures
from canitoolcall.results import (
    Observation,
    ParsedToolCall,
    ParseResult,
    Status,
    StreamAccumulator,
    worst_status,
)

from tests.conformance import harness as H

from .localtok import family_tokenizer

STRATEGIES: tuple[str, ...] = ("one", "token", "rand:1:8", "rand:2:8")
USER = "Use the tools to answer."
MAX_TOKENS = 4096


@contextlib.contextmanager
def environ(**values: str | None) -> Iterator[None]:
    """Set (or, with None, remove) environment variables for the block."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class Setup:
    fixture: Fixture
    template: str
    prefix: str
    tokenizer: Any
    prompt_ids: list[int]
    ids: list[int]
    """Output ids, with the stop token id appended when the model stopped by itself."""
    stopped: bool
    tools: list[dict[str, Any]]

    @property
    def stop_appended(self) -> bool:
        return self.stopped


def _harmony_stop(text: str) -> str:
    last = text.rsplit("<|start|>", 1)[-1]
    return (
        "<|call|>"
        if " to=" in last.split("<|message|>", 1)[0] or last.startswith("assistant to=")
        else "<|return|>"
    )


def setup_for(fx: Fixture) -> Setup | None:
    """The replay inputs for `fx`, or None when chatparse has no template for it."""
    fams = load_families()
    try:
        cfg = H.config_for(fx, H.load_layer(), fams)
    except H.Unsupported:
        return None
    tok = family_tokenizer(fx.family)
    prefix = cfg.kwargs["prefix"]
    prompt_ids = [int(i) for i in tok.encode(prefix, add_special_tokens=False)]
    ids = [int(i) for i in tok.encode(fx.raw_output, add_special_tokens=False)]
    stopped = not fx.truncated
    if stopped:
        fam = fams[fx.family]
        ref = fam.reference_for(fx.reference_model) or fam.reference_models[0]
        stops = list(ref.stop_tokens or ())
        if "<|call|>" in stops and "<|return|>" in stops:
            stops = [_harmony_stop(fx.raw_output)]
        stop_ids = {tok.convert_tokens_to_ids(s) for s in stops}
        if not (ids and ids[-1] in stop_ids) and stops:
            ids.append(int(tok.convert_tokens_to_ids(stops[0])))
    return Setup(fx, cfg.template_name, prefix, tok, prompt_ids, ids, stopped, [dict(t) for t in fx.tools])


def groups(ids: Sequence[int], strategy: str) -> list[list[int]]:
    return [list(g) for g in split(list(ids), ChunkStrategy.parse(strategy))]


def plugin_env(su: Setup) -> contextlib.AbstractContextManager[None]:
    return environ(CHATPARSE_TEMPLATE_OVERRIDE=su.template)


# --------------------------------------------------------------------------------------------------
# vLLM

_VLLM_TOKENIZERS: dict[str, Any] = {}


def vllm_tok(su: Setup) -> Any:
    """The family tokenizer wrapped as vLLM's server wraps every HF tokenizer (`get_cached_tokenizer`:
    vocabulary, special ids and length computed once)."""
    fam = su.fixture.family
    if fam not in _VLLM_TOKENIZERS:
        from vllm.tokenizers.hf import get_cached_tokenizer

        _VLLM_TOKENIZERS[fam] = get_cached_tokenizer(su.tokenizer)
    return _VLLM_TOKENIZERS[fam]


def vllm_request(su: Setup, *, stream: bool) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    extra: dict[str, Any] = {"tools": su.tools, "tool_choice": "auto"} if su.tools else {}
    if su.fixture.truncated:
        extra["max_tokens"] = len(su.ids)
    return ChatCompletionRequest(
        model=su.fixture.reference_model, messages=[{"role": "user", "content": USER}], stream=stream, **extra
    )


def vllm_parser_cls(su: Setup, tool: str | None, reasoning: str | None) -> Any:
    from vllm.parser.parser_manager import ParserManager

    return ParserManager.get_parser(
        tool_parser_name=tool,
        reasoning_parser_name=reasoning,
        enable_auto_tools=True,
        model_name=su.fixture.reference_model,
        is_harmony=su.fixture.family == "gpt-oss",  # as serving: hf_config.model_type == "gpt_oss"
        tokenizer=vllm_tok(su),
    )


def vllm_prepare(su: Setup, parser_cls: Any, *, stream: bool) -> tuple[Any, Any]:
    """The adjusted request and the per-request parser, as the renderer and serving build them."""
    request = vllm_request(su, stream=stream)
    ctk = dict(request.chat_template_kwargs or {})
    adjuster = parser_cls(vllm_tok(su), request.tools, model_config=None, chat_template_kwargs=ctk)
    adjuster.set_prompt_token_ids(su.prompt_ids)
    request = adjuster.adjust_request(request=request)
    return request, parser_cls(vllm_tok(su), request.tools, chat_template_kwargs=ctk, model_config=None)


def vllm_detokenize(su: Setup, request: Any, id_groups: Sequence[Sequence[int]]) -> list[str]:
    """Text per id group from vLLM's v1 IncrementalDetokenizer (the stop token's text dropped)."""
    from vllm.v1.engine.detokenizer import IncrementalDetokenizer

    params = request.to_sampling_params(MAX_TOKENS, {})
    engine_request = SimpleNamespace(
        request_id="replay", sampling_params=params, prompt_token_ids=list(su.prompt_ids), prompt_embeds=None
    )
    det = IncrementalDetokenizer.from_new_request(vllm_tok(su), engine_request)
    out: list[str] = []
    for i, g in enumerate(id_groups):
        last = i == len(id_groups) - 1
        det.update(list(g), last and su.stopped)
        out.append(det.get_next_output_text(last, True))
    return out


class _VllmAccumulator(StreamAccumulator):
    def add(self, delta: Any) -> None:
        if delta is None:
            return
        self.add_content(delta.content)
        self.add_reasoning(delta.reasoning)
        for tc in delta.tool_calls or []:
            fn = tc.function
            self.add_tool_call(int(tc.index), fn.name if fn else None, fn.arguments if fn else None)


def vllm_stream(su: Setup, parser_cls: Any, strategy: str, deltas: list[Any] | None = None) -> ParseResult:
    acc = _VllmAccumulator()
    try:
        request, parser = vllm_prepare(su, parser_cls, stream=True)
        id_groups = groups(su.ids, strategy)
        texts = vllm_detokenize(su, request, id_groups)
        for i, (text, ids) in enumerate(zip(texts, id_groups)):
            delta = parser.parse_delta(
                text, ids, request, prompt_token_ids=su.prompt_ids, finished=i == len(id_groups) - 1
            )
            if deltas is not None:
                deltas.append(delta)
            acc.add(delta)
    except Exception as e:
        return acc.result(exception=f"{type(e).__name__}: {e}")
    return acc.result()


def vllm_nonstream(su: Setup, parser_cls: Any) -> ParseResult:
    try:
        request, parser = vllm_prepare(su, parser_cls, stream=False)
        (text,) = vllm_detokenize(su, request, [su.ids])
        parser.set_prompt_token_ids(su.prompt_ids)  # as OpenAIServingChat does before `parse`
        reasoning, content, calls = parser.parse(
            text, request, enable_auto_tools=True, model_output_token_ids=su.ids
        )
    except Exception as e:
        return ParseResult(exception=f"{type(e).__name__}: {e}")
    return ParseResult(
        content=content or None,
        reasoning_content=reasoning or None,
        tool_calls=tuple(ParsedToolCall(c.name, c.arguments) for c in calls or ()),
    )


# --------------------------------------------------------------------------------------------------
# SGLang


def sglang_texts(su: Setup, id_groups: Sequence[Sequence[int]]) -> list[str]:
    """Text per step: incremental decoding that holds back incomplete UTF-8, the stop token's
    text trimmed (SGLang's `trim_matched_stop`)."""
    tok = su.tokenizer
    out: list[str] = []
    sent = ""
    seen: list[int] = []
    n = sum(len(g) for g in id_groups)
    for i, g in enumerate(id_groups):
        seen.extend(g)
        last = i == len(id_groups) - 1
        ids = seen[: n - 1] if last and su.stopped else seen
        text = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if not last and text.endswith("\ufffd"):
            text = text.rstrip("\ufffd")
        out.append(text[len(sent) :] if text.startswith(sent) else text)
        sent = text if text.startswith(sent) else sent + text
    return out


def _sglang_tools(su: Setup) -> list[Any]:
    from sglang.srt.entrypoints.openai.protocol import Tool

    return [Tool(**t) for t in su.tools]


def _force_reasoning(su: Setup) -> bool:
    p = su.prefix
    return any(
        p.rfind(o) > p.rfind(c) for o, c in (("<think>", "</think>"), ("[THINK]", "[/THINK]")) if o in p
    )


def _sglang_finish(su: Setup) -> dict[str, Any]:
    return {"type": "stop", "matched": None} if su.stopped else {"type": "length", "length": len(su.ids)}


def sglang_stream(
    su: Setup, tool: str | None, reasoning: str | None, strategy: str, items: list[Any] | None = None
) -> ParseResult:
    """One streamed request as SGLang's server drives its parsers; `items`, when given, receives
    every `ToolCallItem` the tool-call parser released, in order."""
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    from chatparse.integrations.sglang import _REQUEST

    acc = StreamAccumulator()
    token = _REQUEST.set(None)
    try:
        tools = _sglang_tools(su)
        fp_active = bool(tool and tools)
        rp: Any = None
        fp: Any = None
        id_groups = groups(su.ids, strategy)
        for i, text in enumerate(sglang_texts(su, id_groups)):
            last = i == len(id_groups) - 1
            finish = _sglang_finish(su) if last else None
            normal = text
            if reasoning:
                reasoning_context(su, tool, tools, finish)
                if rp is None:  # created inside `_process_reasoning_stream`, on its first call
                    rp = ReasoningParser(
                        reasoning,
                        True,
                        _force_reasoning(su),
                        None,
                        tokenizer=su.tokenizer,
                        tool_call_parser_active=fp_active,
                    )
                r, normal = rp.parse_stream_chunk(text)
                if last:
                    r2, n2 = rp.parse_stream_end()
                    if r2:
                        r = (r or "") + r2
                    if n2:
                        normal = (normal or "") + n2
                acc.add_reasoning(r or None)
            if not fp_active:
                acc.add_content(normal or None)
                continue
            tool_context(su, finish)
            if fp is None:  # created inside `_process_tool_call_stream`
                fp = FunctionCallParser(tools, tool, tokenizer=su.tokenizer)
            t, calls = fp.parse_stream_chunk(normal or "")
            if last:
                t2, c2 = fp.parse_stream_end()
                t, calls = (t or "") + (t2 or ""), [*calls, *c2]
            acc.add_content(t or None)
            for c in calls:
                acc.add_tool_call(c.tool_index, c.name, c.parameters)
            if items is not None:
                items.extend(calls)
            if last:
                rest = _unstreamed_args(fp.detector)
                if rest is not None:
                    acc.add_tool_call(rest[0], None, rest[1])
    except Exception as e:
        return acc.result(exception=f"{type(e).__name__}: {e}")
    finally:
        _REQUEST.reset(token)
    return acc.result()


def reasoning_context(su: Setup, tool: str | None, tools: list[Any], finish: Any) -> None:
    """Run `chatparse.integrations.sglang._hook_reasoning_stream` itself for one step, around a
    no-op `_process_reasoning_stream`, with a stand-in server and request: the context it publishes
    is production's, and so is its cost (the benchmark times it with the plugin)."""
    from chatparse.integrations.sglang import _hook_reasoning_stream

    fake = getattr(su, "_sglang_serving", None)
    if fake is None or fake[0].tool_call_parser != tool or fake[2] is not tools:
        serving = SimpleNamespace(
            tool_call_parser=tool,
            _tool_call_parsing_active=lambda request: bool(tools),
            _effective_tools=lambda request: tools,
        )
        fake = (serving, SimpleNamespace(_response_parser_prefix=su.prefix), tools)
        su._sglang_serving = fake  # type: ignore[attr-defined]
    kind = finish.get("type") if isinstance(finish, dict) else finish
    _hook_reasoning_stream(_no_op, fake[0], 0, "", {}, {}, fake[1], kind)


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def tool_context(su: Setup, finish: Any) -> None:
    """What `chatparse.integrations.sglang._hook_tool_stream` publishes for one step (its
    synchronous part, `_publish_tool_step`; the hook itself is an async generator around SGLang's)."""
    from chatparse.integrations.sglang import _publish_tool_step

    fake = getattr(su, "_sglang_serving", None)
    request = fake[1] if fake is not None else SimpleNamespace(_response_parser_prefix=su.prefix)
    if fake is None:
        su._sglang_serving = (SimpleNamespace(tool_call_parser=None), request, None)  # type: ignore[attr-defined]
    _publish_tool_step(request, finish)


def _unstreamed_args(detector: Any) -> tuple[int, str] | None:
    """`OpenAIServingChat._check_for_unstreamed_tool_args`: the arguments a detector parsed for its
    last call but did not stream (the server sends them after the final step)."""
    prev = getattr(detector, "prev_tool_call_arr", None)
    sent = getattr(detector, "streamed_args_for_tool", None)
    if not prev or not sent:
        return None
    i = len(prev) - 1
    if i >= len(sent):
        return None
    expected = prev[i].get("arguments", {})
    expected = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
    rest = expected[len(sent[i]) :] if expected.startswith(sent[i]) else ""
    return (i, rest) if rest else None


def sglang_nonstream(su: Setup, tool: str | None, reasoning: str | None) -> ParseResult:
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    from chatparse.integrations.sglang import _REQUEST

    token = _REQUEST.set({"prefix": su.prefix, "finish_reason": _sglang_finish(su)})
    try:
        (text,) = sglang_texts(su, [su.ids])
        reasoning_text = None
        calls: list[ParsedToolCall] = []
        tools = _sglang_tools(su)
        if reasoning:
            rp = ReasoningParser(
                reasoning,
                False,
                _force_reasoning(su),
                None,
                tokenizer=su.tokenizer,
                tool_call_parser_active=bool(tool and tools),
            )
            reasoning_text, text = rp.parse_non_stream(text)
        if tool and tools:
            fp = FunctionCallParser(tools, tool, tokenizer=su.tokenizer)
            if fp.has_tool_call(text):
                text, items = fp.parse_non_stream(text)
                calls = [ParsedToolCall(c.name or "", c.parameters) for c in items]
    except Exception as e:
        return ParseResult(exception=f"{type(e).__name__}: {e}")
    finally:
        _REQUEST.reset(token)
    return ParseResult(
        content=text or None, reasoning_content=reasoning_text or None, tool_calls=tuple(calls)
    )


# --------------------------------------------------------------------------------------------------
# verdicts


@dataclass
class Verdict:
    fixture: Fixture
    status: Status
    failing: list[str] = field(default_factory=list)


def verdict(fx: Fixture, nonstream: ParseResult, streams: dict[str, ParseResult]) -> Verdict:
    fam = load_families().get(fx.family)
    rows = checks.run_checks(fx, fam, Observation(nonstream=nonstream, streams=streams))
    bad = [
        f"{r.check}@{r.strategy}: {(r.detail or '')[:200]}"
        for r in rows
        if r.status in (Status.FAIL, Status.ERROR)
    ]
    return Verdict(fx, worst_status(r.status for r in rows), bad)


def tally(verdicts: Sequence[Verdict]) -> tuple[int, int, int]:
    n = Counter(v.status for v in verdicts)
    return n[Status.PASS], n[Status.SOFT_PASS], n[Status.FAIL] + n[Status.ERROR]


def corpus() -> list[Fixture]:
    return list(load_fixtures())


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def dump(result: ParseResult) -> str:
    return json.dumps(result.to_dict(), ensure_ascii=False)[:400]


# --------------------------------------------------------------------------------------------------
# the corpus driver both engines' corpus tests share


@dataclass
class CorpusRun:
    """Verdicts per family for the plugin and for the engine's built-in parsers, in one run."""

    plugin: dict[str, list[Verdict]] = field(default_factory=lambda: defaultdict(list))
    builtin: dict[str, list[Verdict]] = field(default_factory=lambda: defaultdict(list))
    builtin_names: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    deltas: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    """The plugin's stream output per (fixture id, chunking), where the engine test keeps it."""


def run_corpus(
    plugin: Any,
    builtin: Any,
) -> CorpusRun:
    """Every supported corpus fixture through the plugin (`plugin(su, run)` returns the non-streamed
    result and the streams by chunking, under the fixture's template) and through the engine's
    built-in parsers for the family (`builtin(su)` returns `(label, non-streamed, streams)` or None
    where the engine has none that loads here). The built-in parsers' warnings are silenced: they
    log every malformed call."""
    import logging

    out = CorpusRun()
    logging.disable(logging.WARNING)
    try:
        for fx in corpus():
            su = setup_for(fx)
            assert su is not None, fx.id
            with plugin_env(su):
                ns, streams = plugin(su, out)
            out.plugin[fx.family].append(verdict(fx, ns, streams))
            found = builtin(su)
            if found is None:
                continue
            label, ns, streams = found
            out.builtin_names[fx.family].add(label)
            out.builtin[fx.family].append(verdict(fx, ns, streams))
    finally:
        logging.disable(logging.NOTSET)
    return out


def score_table(run: CorpusRun, engine: str) -> tuple[list[str], list[Verdict]]:
    """The side-by-side table (markdown lines) and the plugin's verdicts."""
    lines = [
        f"| family | fixtures | chatparse plugin p/s/f | {engine} built-in | built-in p/s/f |",
        "|---|---:|---:|---|---:|",
    ]
    for fam in sorted(run.plugin):
        p, s, f = tally(run.plugin[fam])
        b = run.builtin.get(fam, [])
        bp, bs, bf = tally(b)
        names = ", ".join(sorted(run.builtin_names.get(fam, ()))) or "-"
        lines.append(
            f"| {fam} | {len(run.plugin[fam])} | {p}/{s}/{f} | {names} | {bp}/{bs}/{bf} ({len(b)} run) |"
        )
    everything = [v for vs in run.plugin.values() for v in vs]
    builtin = [v for vs in run.builtin.values() for v in vs]
    p, s, f = tally(everything)
    bp, bs, bf = tally(builtin)
    lines.append(f"| total | {len(everything)} | {p}/{s}/{f} | | {bp}/{bs}/{bf} ({len(builtin)} run) |")
    return lines, everything


def assert_library_scores(run: CorpusRun, engine: str, capsys: Any) -> None:
    """Print the table; the plugin must score what the library scores (`tests/conformance`)."""
    from tests.conformance import canitoolcall_baseline as B

    lines, everything = score_table(run, engine)
    with capsys.disabled():
        print(f"\ncanitoolcall corpus through {engine}'s parser API (deltas: {', '.join(STRATEGIES)})")
        print("\n".join(lines))
    failing = [f"{v.fixture.id}: {v.failing[:2]}" for v in everything if v.failing]
    assert not failing, "\n".join(failing)
    p, s, f = tally(everything)
    assert len(everything) == B.MEASURED_SUPPORTED
    assert p >= B.MEASURED_STRICT["all"] and p + s >= B.MEASURED_PASS_OR_SOFT["all"] and f == 0
