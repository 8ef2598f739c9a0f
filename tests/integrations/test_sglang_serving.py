"""End to end through SGLang's own OpenAI server: `--tool-call-parser chatparse --reasoning-parser chatparse`.

SGLang 0.5.23's HTTP server is set up as `sglang.launch_server` sets it up, up to the point where
it would start the scheduler: `load_plugins()` (which registers chatparse through its
`sglang.srt.plugins` entry point and applies its serving hooks), SGLang's own CLI parser reads the
flags (`prepare_server_args`, whose parser choices must include `chatparse`), the `ServerArgs` are
resolved, checked and published for the tokenizer process, and `init_tokenizer_manager` builds the
`TemplateManager` for a model directory written by the test (`serving.write_model`: named after a
reference model, so the catalog resolves the template by model id). `OpenAIServingChat` is built
on it as the server's lifespan builds it, put on SGLang's own FastAPI `app`
(`sglang.srt.entrypoints.http_server.app`, whose `/v1/chat/completions` route and middleware are
SGLang's), and uvicorn serves that app on loopback.

The one stand-in is the engine side of the `TokenizerManager` (`ReplayTokenizerManager`): its
`generate_request` answers with the token ids of a recorded canitoolcall output in steps of one
token, of 1-8 tokens, or at once (non-streamed), detokenized by SGLang's own
`DetokenizerManager._decode_batch_token_id_output` (incremental decoding, the matched stop token
trimmed) with the request's sampling parameters, stopping at a stop token id (`{"type": "stop",
"matched": id}`) or at `max_new_tokens` (`{"type": "length"}`) as the scheduler does, and shaped as
the real manager shapes its outputs (cumulative text and `meta_info`). Everything else (the
tokenizer, `ModelConfig`, the request and response classes, the prompt rendering, the parsers'
creation and driving, the finish-reason rewrite to `tool_calls`) is SGLang's.

The real `openai` client sends each request; the message it gets, non-streamed and streamed (chunks
merged), must equal what the library answers for the same text, prefix, tools and finish reason,
and the streamed chunks must keep the OpenAI delta conventions. SGLang names reasoning
`reasoning_content`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from .conftest import engine_module

ENGINE = "sglang"
engine_module("sglang", "sglang.srt.entrypoints.openai.serving_chat")
engine_module("sglang", "sglang.srt.entrypoints.http_server")
pytest.importorskip("canitoolcall")
pytest.importorskip("openai")
pytest.importorskip("uvicorn")

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
FAMILIES = sorted(MODELS)


# --------------------------------------------------------------------------------------------------
# the engine stand-in


def _detokenizer(server_args: Any, tokenizer: Any) -> Any:
    """SGLang's `DetokenizerManager` without its processes and sockets: the state its decoding
    reads, set as its `init_tokenizer` / `init_running_status` set it."""
    from sglang.srt.managers.detokenizer_manager import DetokenizerManager, LimitedCapacityDict
    from sglang.srt.parser.response_template import tool_close_token_ids
    from sglang.srt.runtime_context import get_serving

    det = DetokenizerManager.__new__(DetokenizerManager)
    det.tokenizer = tokenizer
    det.vocab_size = len(tokenizer)
    det.decode_status = LimitedCapacityDict(capacity=1 << 16)
    det.disable_tokenizer_batch_decode = get_serving().disable_tokenizer_batch_decode
    det.is_tool_call_parser_gpt_oss = get_serving().tool_call_parser == "gpt-oss"
    det.tool_close_token_ids = tool_close_token_ids(get_serving().tool_call_parser, tokenizer)
    return det


class ReplayTokenizerManager:
    """What `OpenAIServingChat` reads of SGLang's `TokenizerManager`, with `generate_request`
    replaying a recorded output (see the module docstring).

    `script` holds the next request's output: its token ids (a stop token id last when the model
    stopped) and the id groups of its engine steps. `seen` records every `GenerateReqInput`.
    """

    def __init__(self, server_args: Any, port_args: Any) -> None:
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
        from sglang.srt.managers.tokenizer_manager import TokenizerManager
        from sglang.srt.runtime_context import get_serving
        from sglang.srt.utils.request_logger import RequestLogger

        serving = get_serving()
        self.server_args = server_args
        self.model_path = server_args.model_path
        self.served_model_name = serving.served_model_name
        self.model_config = ModelConfig.from_server_args(server_args)
        TokenizerManager.init_tokenizer_and_processor(self)  # type: ignore[arg-type]  # the real one
        self.request_logger = RequestLogger(
            log_requests=False, log_requests_level=0, log_requests_format="text", log_requests_target=None
        )
        self.serving_chat_class = OpenAIServingChat
        self.incremental = bool(serving.incremental_streaming_output)
        self.detokenizer = _detokenizer(server_args, self.tokenizer)
        self.script: tuple[list[int], list[list[int]]] | None = None
        self.seen: list[Any] = []

    def config_value(self, name: str) -> Any:
        from sglang.srt.managers.tokenizer_manager import TokenizerManager

        return TokenizerManager.config_value(self, name)  # type: ignore[arg-type]

    def create_abort_task(self, obj: Any) -> None:
        """No background abort after a stream: a replayed request has always finished by then."""
        return None

    def _stop_ids(self, params: dict[str, Any]) -> set[int]:
        """The scheduler's stop ids: the request's, and (unless `ignore_eos`) the model's EOS ids."""
        stop = {int(t) for t in params.get("stop_token_ids") or ()}
        if not params.get("ignore_eos"):
            eos = self.model_config.hf_eos_token_id or set()
            stop |= {int(t) for t in eos}
            if self.tokenizer.eos_token_id is not None:
                stop.add(int(self.tokenizer.eos_token_id))
        return stop

    async def generate_request(
        self, obj: Any, raw_request: Any = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        assert self.script is not None, "no recorded output for this request"
        ids, steps = self.script
        self.script = None
        self.seen.append(obj)
        params = dict(obj.sampling_params or {})
        assert not params.get("stop"), f"stop strings are not replayed: {params.get('stop')!r}"
        prompt_ids = list(obj.input_ids) if obj.input_ids is not None else self.tokenizer.encode(obj.text)
        max_new = params.get("max_new_tokens")
        if max_new is None:
            max_new = self.model_config.context_len - len(prompt_ids)
        stop_ids = self._stop_ids(params)
        rid = obj.rid if isinstance(obj.rid, str) else uuid.uuid4().hex
        surrogate = prompt_ids[-5:]  # the scheduler's first step carries a few prompt ids as context
        text = ""
        out_ids: list[int] = []
        for n, step in enumerate(steps):
            new: list[int] = []
            finish: dict[str, Any] | None = None
            for t in step:  # the scheduler checks stop conditions after every token
                new.append(t)
                if t in stop_ids:
                    finish = {"type": "stop", "matched": t}
                    break
                if len(out_ids) + len(new) >= max_new:
                    finish = {"type": "length", "length": max_new}
                    break
            out_ids.extend(new)
            batch = SimpleNamespace(
                rids=[rid],
                decoded_texts=[""],
                decode_ids=[surrogate + new if n == 0 else new],
                read_offsets=[len(surrogate)],
                finished_reasons=[finish],
                no_stop_trim=[bool(params.get("no_stop_trim"))],
                skip_special_tokens=[bool(params.get("skip_special_tokens", True))],
                spaces_between_special_tokens=[bool(params.get("spaces_between_special_tokens", True))],
            )
            (piece,) = self.detokenizer._decode_batch_token_id_output(batch)
            text += piece
            meta = {
                "id": rid,
                "finish_reason": finish,
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": len(out_ids),
                "cached_tokens": 0,
                "weight_version": self.config_value("weight_version"),
                "num_retractions": 0,
            }
            if obj.stream:
                incremental = self.incremental
                yield {
                    "text": piece if incremental else text,
                    "output_ids": new if incremental else list(out_ids),
                    "meta_info": meta,
                }
            elif finish is not None:
                yield {"text": text, "output_ids": list(out_ids), "meta_info": meta}
            await asyncio.sleep(0)
            if finish is not None:
                return
        raise AssertionError("recorded output ended without a stop token or max_new_tokens")


# --------------------------------------------------------------------------------------------------
# the server


def _plugins() -> None:
    """What `sglang.launch_server` does before it parses the command line."""
    from sglang.srt.plugins import load_plugins

    load_plugins()


def _tokenizer_manager(model_dir: Path, served: str) -> tuple[Any, Any]:
    """`ServerArgs` from SGLang's CLI parser, resolved, checked and published as the launcher does
    before it starts its processes; then `init_tokenizer_manager` with the replay manager."""
    from sglang.srt.entrypoints.engine import init_tokenizer_manager
    from sglang.srt.parser.template_detection import resolve_auto_parsers
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import prepare_server_args

    _plugins()
    argv = [
        "--model-path",
        str(model_dir),
        "--served-model-name",
        served,
        "--tool-call-parser",
        "chatparse",
        "--reasoning-parser",
        "chatparse",
        "--device",
        "cpu",
    ]
    server_args = prepare_server_args(argv)
    server_args.resolve_once()
    server_args.check_server_args()
    resolve_auto_parsers(server_args)
    publish(server_args, role="tokenizer")
    return init_tokenizer_manager(server_args, None, ReplayTokenizerManager)


class Server(LoopbackServer):
    """SGLang's OpenAI HTTP app for one model directory, on loopback in a thread."""

    def __init__(self, model_dir: Path, served: str) -> None:
        from sglang.srt.entrypoints import http_server

        self.manager, template_manager = _tokenizer_manager(model_dir, served)
        self.app = http_server.app
        # The lifespan's handler for /v1/chat/completions (the lifespan itself starts warm-up
        # requests and the other endpoints' handlers, which need a scheduler).
        self.chat = self.manager.serving_chat_class(self.manager, template_manager)
        self.app.state.openai_serving_chat = self.chat
        self.loop = asyncio.new_event_loop()
        self.serve()


@pytest.fixture(scope="module", params=FAMILIES)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    family = request.param
    setups = [R.setup_for(fx) for fx in selected(family)]
    assert setups and all(su is not None for su in setups)
    model_dir = write_model(tmp_path_factory.mktemp(family), family)
    server = Server(model_dir, MODELS[family])
    try:
        yield SimpleNamespace(family=family, server=server, setups=setups)
    finally:
        server.close()


# --------------------------------------------------------------------------------------------------
# requests


def _client(server: Server) -> Any:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def _request(su: R.Setup, **extra: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": MODELS[su.fixture.family],
        "messages": [{"role": "user", "content": R.USER}],
        "extra_body": {"chat_template_kwargs": {"generation_prompt": su.prefix}},
    }
    if su.tools:
        kwargs.update(tools=su.tools, tool_choice="auto")
    if su.fixture.truncated:
        kwargs["max_tokens"] = len(su.ids)
    kwargs.update(extra)
    return kwargs


def _send(server: Server, su: R.Setup, *, stream: str | None) -> tuple[dict[str, Any], str | None, list[Any]]:
    """One chat completion for `su`'s recorded output; the message, the finish reason, the chunks."""
    steps = [list(su.ids)] if stream is None else R.groups(su.ids, stream)
    server.manager.script = (list(su.ids), steps)
    client = _client(server)
    if stream is None:
        r = client.chat.completions.create(**_request(su))
        m = r.choices[0].message
        message = {
            "content": m.content or "",
            "reasoning": (m.model_extra or {}).get("reasoning_content") or "",
            "tool_calls": [(c.function.name, c.function.arguments) for c in m.tool_calls or ()],
        }
        return message, r.choices[0].finish_reason, []
    chunks = list(client.chat.completions.create(stream=True, **_request(su)))
    message, finish = merged(chunks, "reasoning_content")
    return message, finish, chunks


def _call_fixture(served: Any) -> R.Setup:
    su = call_fixture(served.setups)
    if su is None:
        pytest.skip(f"{served.family}: no selected fixture ends with a call")  # every family has one
    return su


# --------------------------------------------------------------------------------------------------
# tests


def test_server_selected_chatparse_by_name(served: Any) -> None:
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    from chatparse.integrations.sglang import ChatparseDetector, ChatparseReasoningDetector

    chat = served.server.chat
    assert (chat.tool_call_parser, chat.reasoning_parser) == ("chatparse", "chatparse")
    assert FunctionCallParser.ToolCallParserEnum["chatparse"] is ChatparseDetector
    assert ReasoningParser.DetectorMap["chatparse"] is ChatparseReasoningDetector
    assert isinstance(chat._reasoning_detector, ChatparseReasoningDetector)


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
                for p in chunk_conventions(
                    chunks, single_token=mode == "token", reasoning_key="reasoning_content"
                )
            ]
    assert not problems, "\n".join(problems[:20])


def test_the_prompt_reached_the_engine_and_special_tokens_were_kept(served: Any) -> None:
    """The detokenization hook ran inside the server: the engine was asked to keep special tokens,
    and the prompt SGLang rendered is the one the parser was given as its prefix."""
    su = served.setups[0]
    served.server.manager.seen.clear()
    _send(served.server, su, stream="token")
    (seen,) = served.server.manager.seen
    assert seen.sampling_params["skip_special_tokens"] is False
    tok = su.tokenizer
    assert tok.decode(list(seen.input_ids), skip_special_tokens=False) == su.prefix


def test_tool_choice_none_passes_call_markup_through_as_content(served: Any) -> None:
    """`tool_choice="none"`: no tool parser runs; the reasoning detector writes every call region
    back into the content verbatim (`chatparse.integrations._split.ToolsOffSplitter`)."""
    su = _call_fixture(served)
    tok = su.tokenizer
    served.server.manager.script = (list(su.ids), [list(su.ids)])
    r = _client(served.server).chat.completions.create(**_request(su, tool_choice="none"))
    m = r.choices[0].message
    assert not m.tool_calls and r.choices[0].finish_reason == "stop"
    text = tok.decode(su.ids[:-1], skip_special_tokens=False, clean_up_tokenization_spaces=False)
    assert m.content and text.rstrip().endswith(m.content.strip())
    assert su.fixture.expected.tool_calls[0].name in m.content


@pytest.mark.parametrize("choice", ["required", "named"])
def test_forced_tool_choice_gets_the_template_constraint_and_a_call(served: Any, choice: str) -> None:
    """`required` / a named tool through the server: SGLang attaches the structural tag the
    detector derives (it admits the replayed output), and the recorded call comes back parsed by
    chatparse, streamed and not, for every family."""
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
    kwargs = _request(su, tools=tools, tool_choice=tool_choice)
    kwargs.pop("max_tokens", None)
    served.server.manager.seen.clear()
    for stream in (None, "rand:1:8"):
        served.server.manager.script = (
            list(su.ids),
            [list(su.ids)] if stream is None else R.groups(su.ids, stream),
        )
        if stream is None:
            r = client.chat.completions.create(**kwargs)
            calls = [(c.function.name, c.function.arguments) for c in r.choices[0].message.tool_calls or ()]
            finish = r.choices[0].finish_reason
        else:
            message, finish = merged(
                list(client.chat.completions.create(stream=True, **kwargs)), "reasoning_content"
            )
            calls = message["tool_calls"]
        assert [(n, json.loads(a)) for n, a in calls] == [(n, json.loads(a)) for n, a in want["tool_calls"]]
        assert finish == "tool_calls"
    params = served.server.manager.seen[-1].sampling_params
    tag = params.get("structural_tag")
    assert isinstance(tag, str), (
        f"no structural tag attached: {sorted(k for k, v in params.items() if v is not None)}"
    )
    # What SGLang attached is the constraint the detector derives (with a reasoning parser SGLang
    # applies it once the reasoning closer is written, so it covers only what follows): XGrammar,
    # SGLang's grammar backend, compiles it and admits the derivation's own sample call for the tool.
    from chatparse.integrations._common import tool_constraint
    from chatparse.integrations.sglang import ChatparseDetector

    det = ChatparseDetector(served.server.manager.tokenizer)
    c = tool_constraint(det._resolved, det._template, tool_choice, tools, reasoning=False)
    from xgrammar import StructuralTag

    assert StructuralTag.model_validate_json(tag) == StructuralTag.model_validate(c.structural_tag())
    offered = [t["function"]["name"] for t in tools] if choice == "required" else [name]
    sample = c.sample_lead + c.sample_calls[offered.index(name)]
    assert xgr_acceptor(tag)(sample), f"{su.fixture.id}: the attached grammar rejects {sample!r}"
    served.server.manager.script = None
