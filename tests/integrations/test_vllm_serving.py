"""End to end through vLLM's own OpenAI server: `--tool-call-parser chatparse --reasoning-parser chatparse`.

vLLM 0.33's API server is built as `vllm serve` builds it: its CLI parser reads the flags, its
`AsyncEngineArgs` make the `VllmConfig` (CPU platform) from a model directory written here
(`config.json` of a tiny Qwen3 architecture that is never loaded, the family tokenizer of
`localtok`, a chat template that renders the conformance harness's generation prompt), its
`build_app` and `init_app_state` make the FastAPI app with `OpenAIServingChat`, and uvicorn serves it
on loopback. The template is resolved as in production: the model directory is named after the
fixture's reference model, so the catalog finds it by model id.

The one stand-in is the engine: `ReplayEngine` implements vLLM's `EngineClient` protocol and
answers `generate` with the token ids of a recorded canitoolcall output, detokenized by vLLM's own
`IncrementalDetokenizer` with the request's sampling parameters, in steps of one token or of 1-8
tokens (`RequestOutputKind.DELTA`) or at once (`FINAL_ONLY`), stopping at a stop token id
(`finish_reason="stop"`) or at `max_tokens` (`"length"`) as the engine core does.

The real `openai` client sends each request; the message it gets, non-streamed and streamed
(chunks merged), must equal what the library answers for the same text, prefix, tools and finish
reason (`chatparse.openai.ChatParser`), and the streamed chunks must keep the OpenAI delta
conventions.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from .conftest import engine_module

ENGINE = "vllm"
engine_module("vllm", "vllm.parser.parser_manager")
engine_module("vllm", "vllm.entrypoints.launchers.app")
pytest.importorskip("canitoolcall")
pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from chatparse import catalog  # noqa: E402

from . import replay as R  # noqa: E402
from .cases import xgr_acceptor  # noqa: E402
from .serving import (  # noqa: E402
    MODELS,
    LoopbackServer,
    call_fixture,
    chunk_conventions,
    library,
    merged,
    selected,
    write_model,
)

STREAMS = ("token", "rand:1:8")


# --------------------------------------------------------------------------------------------------
# the engine stand-in


class ReplayEngine:
    """vLLM's `EngineClient` protocol over recorded outputs (see the module docstring).

    `script` holds the next request's output: its token ids (a stop token id last when the model
    stopped) and the id groups of its engine steps.
    """

    def __init__(self, vllm_config: Any, renderer: Any) -> None:
        self.vllm_config = vllm_config
        self.model_config = vllm_config.model_config
        self.renderer = renderer
        self.input_processor = None
        self.script: tuple[list[int], list[list[int]]] | None = None
        self.seen: list[dict[str, Any]] = []  # what generate() was asked, per request

    # -- what OpenAIServingChat calls ------------------------------------------------------------

    async def generate(
        self, prompt: Any, sampling_params: Any, request_id: str, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        from vllm.outputs import CompletionOutput, RequestOutput
        from vllm.sampling_params import RequestOutputKind
        from vllm.v1.engine.detokenizer import IncrementalDetokenizer

        assert self.script is not None, "no recorded output for this request"
        ids, steps = self.script
        self.script = None
        prompt_ids = list(prompt["prompt_token_ids"])
        self.seen.append({"prompt_token_ids": prompt_ids, "sampling_params": sampling_params, **kwargs})
        tokenizer = self.renderer.tokenizer
        stop_ids = set(sampling_params.all_stop_token_ids or ())
        if not sampling_params.ignore_eos and tokenizer.eos_token_id is not None:
            stop_ids.add(tokenizer.eos_token_id)
        engine_request = SimpleNamespace(
            request_id=request_id,
            sampling_params=sampling_params,
            prompt_token_ids=prompt_ids,
            prompt_embeds=None,
        )
        det = IncrementalDetokenizer.from_new_request(tokenizer, engine_request)
        delta = sampling_params.output_kind == RequestOutputKind.DELTA
        all_ids: list[int] = []
        for step in steps:
            new: list[int] = []
            finish: str | None = None
            stop_reason: int | None = None
            for t in step:  # the engine core checks stop conditions after every token
                new.append(t)
                if t in stop_ids:
                    finish, stop_reason = "stop", (None if t == tokenizer.eos_token_id else t)
                    break
                if len(all_ids) + len(new) >= sampling_params.max_tokens:
                    finish = "length"
                    break
            all_ids.extend(new)
            det.update(new, finish == "stop")
            # DELTA: the step's new text; FINAL_ONLY: the whole text, on the last step.
            text = det.get_next_output_text(finish is not None, delta)
            if delta or finish is not None:
                out = CompletionOutput(
                    index=0,
                    text=text,
                    token_ids=new if delta else list(all_ids),
                    cumulative_logprob=None,
                    logprobs=None,
                    finish_reason=finish,
                    stop_reason=stop_reason,
                )
                yield RequestOutput(
                    request_id=request_id,
                    prompt=None,
                    prompt_token_ids=prompt_ids,
                    prompt_logprobs=None,
                    outputs=[out],
                    finished=finish is not None,
                )
            await asyncio.sleep(0)
            if finish is not None:
                return
        raise AssertionError("recorded output ended without a stop token or max_tokens")

    async def get_supported_tasks(self) -> tuple[str, ...]:
        return ("generate",)

    @property
    def is_running(self) -> bool:
        return True

    @property
    def is_stopped(self) -> bool:
        return False

    @property
    def errored(self) -> bool:
        return False

    @property
    def dead_error(self) -> BaseException:
        return RuntimeError("the replay engine does not die")

    async def is_paused(self) -> bool:
        return False

    async def is_sleeping(self) -> bool:
        return False

    async def is_tracing_enabled(self) -> bool:
        return False

    async def check_health(self) -> None:
        return None

    async def abort(self, request_id: Any) -> None:
        return None

    async def do_log_stats(self) -> None:
        return None

    async def reset_mm_cache(self) -> None:
        return None

    def check_admission(self, n: int = 1, request_id: str | None = None) -> None:
        return None

    def shutdown(self, timeout: float | None = None) -> None:
        return None


def _engine_client(vllm_config: Any, renderer: Any) -> Any:
    """A `ReplayEngine` that is an `EngineClient` (the protocol's other methods are never called)."""
    from vllm.engine.protocol import EngineClient

    def unused(name: str) -> Any:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(f"ReplayEngine.{name} is not used by chat completions")

        return method

    missing = {n: unused(n) for n in EngineClient.__abstractmethods__ if not hasattr(ReplayEngine, n)}
    cls = type("ReplayEngineClient", (ReplayEngine, EngineClient), missing)
    return cls(vllm_config, renderer)


# --------------------------------------------------------------------------------------------------
# the server


_ARG_PARSER: Any = None


def _cli_args(argv: list[str]) -> Any:
    global _ARG_PARSER
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if _ARG_PARSER is None:
        _ARG_PARSER = make_arg_parser(FlexibleArgumentParser())
    args = _ARG_PARSER.parse_args(argv)
    validate_parsed_serve_args(args)
    return args


class Server(LoopbackServer):
    """vLLM's OpenAI API server for one model directory, on loopback in a thread."""

    def __init__(self, model_dir: Path, served: str, extra: tuple[str, ...] = ()) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.entrypoints.launchers.api_server.app_state import init_app_state
        from vllm.entrypoints.launchers.app import build_app
        from vllm.renderers.registry import renderer_from_config

        argv = [
            "--model",
            str(model_dir),
            "--served-model-name",
            served,
            "--max-model-len",
            "8192",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "chatparse",
            "--reasoning-parser",
            "chatparse",
            *extra,
        ]
        self.args = args = _cli_args(argv)
        vllm_config = AsyncEngineArgs.from_cli_args(args).create_engine_config()
        self.engine = _engine_client(vllm_config, renderer_from_config(vllm_config))
        self.app = build_app(args, ("generate",), vllm_config.model_config)
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(init_app_state(self.engine, self.app.state, args, ("generate",)))
        self.serve()


@pytest.fixture(scope="module", params=sorted(MODELS))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    family = request.param
    fixtures = selected(family)
    setups = [R.setup_for(fx) for fx in fixtures]
    assert setups and all(su is not None for su in setups)
    model_dir = write_model(tmp_path_factory.mktemp(family), family)
    server = Server(model_dir, MODELS[family])
    try:
        yield SimpleNamespace(family=family, server=server, setups=setups)
    finally:
        server.close()


# --------------------------------------------------------------------------------------------------
# requests and the library's answer


def _client(server: Server) -> Any:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def _send(server: Server, su: R.Setup, *, stream: str | None) -> tuple[dict[str, Any], str | None, list[Any]]:
    """One chat completion for `su`'s recorded output; the message, the finish reason, the chunks."""
    steps = [list(su.ids)] if stream is None else R.groups(su.ids, stream)
    server.engine.script = (list(su.ids), steps)
    extra: dict[str, Any] = {"tools": su.tools, "tool_choice": "auto"} if su.tools else {}
    extra["extra_body"] = {"chat_template_kwargs": {"generation_prompt": su.prefix}}
    if su.fixture.truncated:
        extra["max_tokens"] = len(su.ids)
    client = _client(server)
    messages = [{"role": "user", "content": R.USER}]
    if stream is None:
        r = client.chat.completions.create(model=MODELS[su.fixture.family], messages=messages, **extra)
        m = r.choices[0].message
        message = {
            "content": m.content or "",
            "reasoning": (m.model_extra or {}).get("reasoning") or "",
            "tool_calls": [(c.function.name, c.function.arguments) for c in m.tool_calls or ()],
        }
        return message, r.choices[0].finish_reason, []
    chunks = list(
        client.chat.completions.create(
            model=MODELS[su.fixture.family], messages=messages, stream=True, **extra
        )
    )
    message, finish = merged(chunks, "reasoning")
    return message, finish, chunks


# --------------------------------------------------------------------------------------------------
# tests


def test_server_selected_chatparse_by_name(served: Any) -> None:
    from chatparse.integrations.vllm import ChatparseParser

    chat = served.server.app.state.openai_serving_chat
    assert issubclass(chat.parser_cls, ChatparseParser)
    assert chat.parser_cls.reasoning_parser_cls is not None and chat.parser_cls.tool_parser_cls is not None
    assert chat.enable_auto_tools


def test_answers_equal_the_librarys(served: Any) -> None:
    """Non-streamed and streamed (one token per step, 1-8 tokens per step): the library's message."""
    problems = []
    for su in served.setups:
        want, want_reason = library(su)
        for mode in (None, *STREAMS):
            got, reason, chunks = _send(served.server, su, stream=mode)
            label = f"{su.fixture.id} [{mode or 'non-streamed'}]"
            if got != want:
                problems.append(f"{label}: got {got!r}, library {want!r}")
            if reason != want_reason:
                problems.append(f"{label}: finish_reason {reason!r}, library {want_reason!r}")
            problems += [
                f"{label}: {p}"
                for p in chunk_conventions(chunks, single_token=mode == "token", reasoning_key="reasoning")
            ]
    assert not problems, "\n".join(problems[:20])


def test_the_prompt_reached_the_parser_and_special_tokens_were_kept(served: Any) -> None:
    """adjust_request ran inside the server: the engine was asked to keep special tokens."""
    su = served.setups[0]
    served.server.engine.seen.clear()
    _send(served.server, su, stream="token")
    (seen,) = served.server.engine.seen
    params = seen["sampling_params"]
    assert params.skip_special_tokens is False and params.spaces_between_special_tokens is False
    tok = su.tokenizer
    assert tok.decode(seen["prompt_token_ids"], skip_special_tokens=False) == su.prefix


def _call_fixture(served: Any) -> R.Setup:
    su = call_fixture(served.setups)
    if su is None:
        pytest.skip(f"{served.family}: no selected fixture ends with a call")  # every family has one
    return su


# `tool_choice="none"`: the plugin parses with the whole template and writes every call region back
# into the content verbatim (`chatparse.integrations._split.ToolsOffSplitter`), call-section
# markers included; only the reasoning is taken out.


def test_tool_choice_none_passes_call_markup_through_as_content(served: Any) -> None:
    su = _call_fixture(served)
    tok = su.tokenizer
    served.server.engine.script = (list(su.ids), [list(su.ids)])
    r = _client(served.server).chat.completions.create(
        model=MODELS[served.family],
        messages=[{"role": "user", "content": R.USER}],
        tools=su.tools,
        tool_choice="none",
        extra_body={"chat_template_kwargs": {"generation_prompt": su.prefix}},
    )
    m = r.choices[0].message
    assert not m.tool_calls and r.choices[0].finish_reason == "stop"
    text = tok.decode(su.ids[:-1], skip_special_tokens=False, clean_up_tokenization_spaces=False)
    # The reasoning is split out; everything after it, call markup included, is the content verbatim.
    assert m.content and text.rstrip().endswith(m.content.strip())
    name = su.fixture.expected.tool_calls[0].name
    assert name in m.content


@pytest.mark.parametrize("choice", ["required", "named"])
def test_forced_tool_choice_gets_the_template_constraint_and_a_call(served: Any, choice: str) -> None:
    """`required` / a named tool through the server: the engine is asked for the structural tag
    chatparse derives (vLLM's XGrammar validation takes it; it admits the replayed output), and the
    recorded call comes back parsed by chatparse, streamed and not, for every family (gpt-oss
    included: its recipient is written in a Harmony header gap, docs/constraints.md)."""
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    su = _call_fixture(served)
    want, _ = library(su)
    name = want["tool_calls"][0][0]
    tool_choice: Any = (
        "required" if choice == "required" else {"type": "function", "function": {"name": name}}
    )
    tools = (
        su.tools
        if choice == "required"
        else [t for t in su.tools if t["function"]["name"] == name]
        + [t for t in su.tools if t["function"]["name"] != name]
    )
    client = _client(served.server)
    kwargs: dict[str, Any] = {
        "model": MODELS[served.family],
        "messages": [{"role": "user", "content": R.USER}],
        "tools": tools,
        "tool_choice": tool_choice,
        "extra_body": {"chat_template_kwargs": {"generation_prompt": su.prefix}},
    }
    served.server.engine.seen.clear()
    for stream in (None, "rand:1:8"):
        served.server.engine.script = (
            list(su.ids),
            [list(su.ids)] if stream is None else R.groups(su.ids, stream),
        )
        if stream is None:
            r = client.chat.completions.create(**kwargs)
            calls = [(c.function.name, c.function.arguments) for c in r.choices[0].message.tool_calls or ()]
            finish = r.choices[0].finish_reason
        else:
            acc: dict[int, list[str]] = {}
            finish = None
            for ch in client.chat.completions.create(stream=True, **kwargs):
                for c in ch.choices:
                    for tc in c.delta.tool_calls or ():
                        entry = acc.setdefault(tc.index, ["", ""])
                        entry[0] += (tc.function.name or "") if tc.function else ""
                        entry[1] += (tc.function.arguments or "") if tc.function else ""
                    finish = c.finish_reason or finish
            calls = [(n, a) for n, a in (acc[i] for i in sorted(acc))]
        assert [(n, json.loads(a)) for n, a in calls] == [(n, json.loads(a)) for n, a in want["tool_calls"]]
        assert finish == ("tool_calls" if choice == "required" else "stop")  # OpenAI: "stop" for a named tool
    params = served.server.engine.seen[-1]["sampling_params"]
    so = params.structured_outputs
    assert so is not None and so.structural_tag is not None
    validate_xgrammar_grammar(params)
    # An output the constraint admits (the derivation's own sample call for the tool, after what
    # the prompt left open), replayed: the attached grammar accepts it and it comes back as the call.
    from chatparse.constraints import derive

    stop = list(catalog.describe(su.template).get("stop") or ())  # never written: the engine stops there
    c = derive(catalog.get(su.template), tools, tool_choice=tool_choice, prefix=su.prefix, stop=stop)
    offered = [t["function"]["name"] for t in tools] if choice == "required" else [name]
    sample = c.sample_lead + c.sample_calls[offered.index(name)]
    assert xgr_acceptor(so.structural_tag)(sample), (
        f"{su.fixture.id}: the attached grammar rejects {sample!r}"
    )
    tok = su.tokenizer
    ids = [int(i) for i in tok.encode(sample, add_special_tokens=False)] + [su.ids[-1]]
    served.server.engine.script = (ids, R.groups(ids, "rand:1:8"))
    r = client.chat.completions.create(**kwargs)
    (call,) = r.choices[0].message.tool_calls or ()
    assert call.function.name == name and isinstance(json.loads(call.function.arguments), dict)
    assert r.choices[0].finish_reason == ("tool_calls" if choice == "required" else "stop")
    served.server.engine.script = None
