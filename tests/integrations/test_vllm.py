"""The vLLM plugin on vLLM 0.33's own classes: registration, composition, requests, prefixes, finish reasons.

Everything goes through vLLM's `ParserManager.get_parser` and the parser API its OpenAI server calls
(`adjust_request`, `set_prompt_token_ids`, `parse_delta(..., finished=...)`, `parse`), with a
tokenizer built here (byte-level BPE, Qwen3's markers as single tokens) and vLLM's request types.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
from collections.abc import Sequence
from typing import Any

import pytest

from .cases import (
    CALL,
    CALL2,
    OUTPUT,
    PROMPT,
    TOOLS,
    TOOLS2,
    qwen3_tokenizer,
    xgr_acceptor,
)
from .conftest import engine_module
from .localtok import build_tokenizer
from .replay import environ

ENGINE = "vllm"
engine_module("vllm", "vllm.parser.parser_manager")

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.parser.abstract_parser import DelegatingParser  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.reasoning import ReasoningParserManager  # noqa: E402
from vllm.tool_parsers import ToolParserManager  # noqa: E402

import chatparse.integrations.vllm as plugin  # noqa: E402


@pytest.fixture(scope="module")
def tok() -> Any:
    return qwen3_tokenizer(json.dumps(TOOLS))


def ids(tok: Any, text: str) -> list[int]:
    return [int(i) for i in tok.encode(text, add_special_tokens=False)]


def parser_cls(
    tok: Any, tool: str | None = "chatparse", reasoning: str | None = "chatparse", auto: bool = True
) -> Any:
    return ParserManager.get_parser(
        tool_parser_name=tool,
        reasoning_parser_name=reasoning,
        enable_auto_tools=auto,
        model_name="Qwen/Qwen3-8B",
        tokenizer=tok,
    )


def request(**kw: Any) -> Any:
    kw.setdefault("tools", TOOLS)
    if kw["tools"] is None:
        del kw["tools"]
    else:
        kw.setdefault("tool_choice", "auto")
    return ChatCompletionRequest(model="Qwen/Qwen3-8B", messages=[{"role": "user", "content": "hi"}], **kw)


def stream(
    tok: Any,
    cls: Any,
    text: str,
    *,
    prompt: str = PROMPT,
    req: Any = None,
    stop: bool = True,
    per: int = 1,
) -> tuple[list[Any], dict[str, Any]]:
    """One request through `parse_delta`, `per` tokens per delta; the deltas and the merged message."""
    req = req if req is not None else request(stream=True)
    parser = cls(tok, req.tools, chat_template_kwargs={}, model_config=None)
    req = parser.adjust_request(req)
    out = ids(tok, text)
    if stop:
        out.append(tok.convert_tokens_to_ids("<|im_end|>"))
    prompt_ids = ids(tok, prompt)
    deltas = []
    for i in range(0, len(out), per):
        group = out[i : i + per]
        last = i + per >= len(out)
        shown = [t for t in group if not (last and stop and t == group[-1])] if last and stop else group
        deltas.append(
            parser.parse_delta(
                tok.decode(shown, skip_special_tokens=False),
                group,
                req,
                prompt_token_ids=prompt_ids,
                finished=last,
            )
        )
    return deltas, merge(deltas)


def merge(deltas: Sequence[Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"content": "", "reasoning": "", "reasoning_content": "", "tool_calls": {}}
    for d in deltas:
        if d is None:
            continue
        data = d.model_dump(exclude_none=True)
        for k in ("content", "reasoning", "reasoning_content"):
            msg[k] += data.get(k) or ""
        for tc in d.tool_calls:
            entry = msg["tool_calls"].setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            entry["id"] = entry["id"] or tc.id
            if tc.function is not None:
                entry["name"] = entry["name"] or tc.function.name
                entry["arguments"] += tc.function.arguments or ""
    msg["tool_calls"] = [msg["tool_calls"][i] for i in sorted(msg["tool_calls"])]
    return msg


def one_shot(
    tok: Any, cls: Any, text: str, *, prompt: str = PROMPT, req: Any = None, stop: bool = True
) -> Any:
    req = req if req is not None else request()
    parser = cls(tok, req.tools, chat_template_kwargs={}, model_config=None)
    req = parser.adjust_request(req)
    parser.set_prompt_token_ids(ids(tok, prompt))
    out = ids(tok, text) + ([tok.convert_tokens_to_ids("<|im_end|>")] if stop else [])
    return parser.parse(text, req, enable_auto_tools=True, model_output_token_ids=out)


# --------------------------------------------------------------------------------------------------
# registration


def test_registered_under_the_name_chatparse() -> None:
    assert "chatparse" in ToolParserManager.list_registered()
    assert "chatparse" in ReasoningParserManager.list_registered()
    assert ToolParserManager.get_tool_parser("chatparse") is plugin.ChatparseToolParser
    assert ReasoningParserManager.get_reasoning_parser("chatparse") is plugin.ChatparseReasoningParser


def test_vllm_general_plugins_entry_point_registers() -> None:
    eps = [
        ep for ep in importlib.metadata.entry_points(group="vllm.general_plugins") if ep.name == "chatparse"
    ]
    assert [ep.value for ep in eps] == ["chatparse.integrations.vllm:register"]
    import vllm.plugins

    ToolParserManager.tool_parsers.pop("chatparse", None)
    ReasoningParserManager.reasoning_parsers.pop("chatparse", None)
    assert "chatparse" not in ToolParserManager.list_registered()
    vllm.plugins.plugins_loaded = False
    with environ(VLLM_PLUGINS="chatparse"):
        vllm.plugins.load_general_plugins()
    assert "chatparse" in ToolParserManager.list_registered()
    assert "chatparse" in ReasoningParserManager.list_registered()


def test_tool_parser_plugin_flag_registers_by_module_path() -> None:
    ToolParserManager.tool_parsers.pop("chatparse", None)
    ReasoningParserManager.reasoning_parsers.pop("chatparse", None)
    import sys

    sys.modules.pop("chatparse.integrations.vllm", None)
    ToolParserManager.import_tool_parser("chatparse.integrations.vllm")  # what --tool-parser-plugin does
    fresh = sys.modules["chatparse.integrations.vllm"]
    assert ToolParserManager.get_tool_parser("chatparse") is fresh.ChatparseToolParser
    assert "chatparse" in ReasoningParserManager.list_registered()
    # the composer follows the registry, not the module object it was installed from
    cls = ParserManager._compose_parser("chatparse", "chatparse", True, None, False, None, None)
    assert issubclass(cls, fresh.ChatparseParser)
    sys.modules["chatparse.integrations.vllm"] = plugin
    plugin.register()


def test_get_parser_composes_one_unified_parser(tok: Any) -> None:
    cls = parser_cls(tok)
    assert issubclass(cls, plugin.ChatparseParser)
    assert cls.reasoning_parser_cls is plugin.ChatparseReasoningParser
    assert cls.tool_parser_cls is plugin.ChatparseToolParser
    only_tools = parser_cls(tok, reasoning=None)
    assert (
        only_tools.reasoning_parser_cls is None and only_tools.tool_parser_cls is plugin.ChatparseToolParser
    )
    only_reasoning = parser_cls(tok, tool=None)
    assert only_reasoning.tool_parser_cls is None
    no_auto = parser_cls(tok, auto=False)
    assert no_auto.tool_parser_cls is None and no_auto.reasoning_parser_cls is not None


def test_harmony_models_still_get_the_chatparse_parser(tok: Any) -> None:
    cls = ParserManager.get_parser(
        tool_parser_name="chatparse",
        reasoning_parser_name="chatparse",
        enable_auto_tools=True,
        model_name="openai/gpt-oss-20b",
        is_harmony=True,
        tokenizer=tok,
    )
    assert issubclass(cls, plugin.ChatparseParser)


def test_other_names_are_composed_by_vllm(tok: Any) -> None:
    cls = parser_cls(tok, tool="hermes", reasoning="qwen3")
    assert issubclass(cls, DelegatingParser) and not issubclass(cls, plugin.ChatparseParser)


def test_chatparse_tools_with_another_reasoning_parser_is_refused(tok: Any) -> None:
    with pytest.raises(TypeError, match="cannot be combined"):
        parser_cls(tok, tool="chatparse", reasoning="qwen3")


def test_startup_fails_with_one_line_when_no_template_applies() -> None:
    unknown = build_tokenizer(
        ["<x>"], ["plain text"] * 4, stop=["</s>"], vocab_size=300, name_or_path="acme/unheard-of"
    )
    with pytest.raises(TypeError) as err:
        parser_cls(unknown)
    message = str(err.value)
    assert "\n" not in message
    assert "chatparse: no response template" in message and "CHATPARSE_TEMPLATE" in message
    with environ(CHATPARSE_TEMPLATE="qwen3"):
        assert issubclass(parser_cls(unknown), plugin.ChatparseParser)


# --------------------------------------------------------------------------------------------------
# parsing through the serving API


@pytest.mark.parametrize("per", [1, 3, 1000])
def test_stream_equals_parse(tok: Any, per: int) -> None:
    cls = parser_cls(tok)
    deltas, msg = stream(tok, cls, OUTPUT, per=per)
    reasoning, content, calls = one_shot(tok, cls, OUTPUT)
    assert msg["reasoning"] == msg["reasoning_content"] == reasoning == "The user wants the weather."
    assert msg["content"] == content == "Let me check."
    assert [(c["name"], json.loads(c["arguments"])) for c in msg["tool_calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert msg["tool_calls"][0]["id"].startswith("call_") and len(msg["tool_calls"][0]["id"]) == 29


def test_prompt_that_opens_reasoning(tok: Any) -> None:
    cls = parser_cls(tok)
    text = "hm, Paris.\n</think>\n\nSunny."
    _, msg = stream(tok, cls, text, prompt=PROMPT + "<think>\n")
    assert (msg["reasoning"], msg["content"]) == ("hm, Paris.", "Sunny.")
    assert one_shot(tok, cls, text, prompt=PROMPT + "<think>\n")[:2] == ("hm, Paris.", "Sunny.")


def test_prompt_that_opens_a_call(tok: Any) -> None:
    cls = parser_cls(tok)
    text = '\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    _, msg = stream(tok, cls, text, prompt=PROMPT + "<tool_call>")
    assert [(c["name"], json.loads(c["arguments"])) for c in msg["tool_calls"]] == [
        ("get_weather", {"city": "Oslo"})
    ]


def test_adjust_request_keeps_special_tokens_and_their_spacing(tok: Any) -> None:
    req = request()
    assert req.skip_special_tokens is not False
    parser = parser_cls(tok)(tok, req.tools)
    req = parser.adjust_request(req)
    assert req.skip_special_tokens is False and req.spaces_between_special_tokens is False


def forced(tok: Any, choice: Any, *, prompt: str = PROMPT, auto: bool = True, **kw: Any) -> tuple[Any, Any]:
    """A forced-call request through the parser as vLLM's renderer runs it: the prompt's ids first
    (`set_prompt_token_ids`), then `adjust_request`. Returns (parser, adjusted request)."""
    req = request(tool_choice=choice, tools=kw.pop("tools", TOOLS2), **kw)
    parser = parser_cls(tok, auto=auto)(tok, req.tools, chat_template_kwargs={}, model_config=None)
    parser.set_prompt_token_ids(ids(tok, prompt))
    return parser, parser.adjust_request(req)


@pytest.mark.parametrize(
    "choice, name",
    [("required", None), ({"type": "function", "function": {"name": "get_time"}}, "get_time")],
    ids=["required", "named"],
)
@pytest.mark.parametrize("auto", [True, False], ids=["auto-tool-choice", "no-auto-tool-choice"])
def test_forced_tool_choice_attaches_the_template_constraint_as_vllms_structural_tag(
    tok: Any, choice: Any, name: str | None, auto: bool
) -> None:
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    parser, req = forced(tok, choice, auto=auto, response_format={"type": "json_object"})
    so = req.structured_outputs
    assert so is not None and so.structural_tag is not None and so.json is None
    assert req.response_format is None  # a forced call overrides it, as in vLLM
    assert req._grammar_from_parser is True
    # The engine applies it from the first token: the grammar holds the reasoning too.
    assert req.resolve_reasoning_ended(parser, ids(tok, PROMPT)) is True
    # What vLLM sends to the engine core carries it, and vLLM's own XGrammar validation takes it.
    params = req.to_sampling_params(64, {})
    assert (
        params.structured_outputs is not None
        and params.structured_outputs.structural_tag == so.structural_tag
    )
    validate_xgrammar_grammar(params)
    accepts = xgr_acceptor(so.structural_tag)
    think = "<think>\nThe user wants the time.\n</think>\n\n"
    assert accepts(think + CALL2) and accepts(CALL2)
    assert accepts(CALL) is (name is None) and accepts(think + CALL) is (name is None)
    assert not accepts("Let me check.")  # no call: refused under required / named
    assert not accepts(CALL2.replace('"CET"', "7"))  # arguments outside the schema
    # The parser reads what the grammar admits (streamed and one-shot).
    _, msg = stream(
        tok, type(parser), think + CALL2, req=request(tool_choice=choice, tools=TOOLS2, stream=True)
    )
    reasoning, content, calls = one_shot(
        tok, type(parser), think + CALL2, req=request(tool_choice=choice, tools=TOOLS2)
    )
    assert [(c["name"], json.loads(c["arguments"])) for c in msg["tool_calls"]] == [
        ("get_time", {"zone": "CET"})
    ]
    assert calls is not None and [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_time", {"zone": "CET"})
    ]
    assert msg["reasoning"] == reasoning == "The user wants the time."


def test_forced_tool_choice_under_vllms_guidance_backend_is_its_400(tok: Any) -> None:
    """`--structured-outputs-config.backend guidance`: vLLM's guidance backend reads structural tags
    only in the legacy `triggers` / `structures` form, so a forced call is answered 400 by vLLM's
    own validation (under `auto`, the default, and `xgrammar` it is enforced: the tests above).
    The constraint's Lark form is no way round it: llguidance (that backend's matcher) maps the
    tokenizer's added tokens (`<tool_call>`, `<think>`) to special tokens, which the grammar's text
    literals never match, so even a call the grammar describes is refused."""
    import llguidance
    import llguidance.hf
    from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar

    ll_tok = llguidance.hf.from_tokenizer(tok)
    parser, req = forced(tok, "required")
    with pytest.raises(VLLMValidationError, match="triggers"):
        validate_guidance_grammar(req.to_sampling_params(64, {}), tokenizer=ll_tok)
    from chatparse.integrations._common import tool_constraint

    c = tool_constraint(parser._resolved, parser._resolved.template, "required", TOOLS2)
    m = llguidance.LLMatcher(ll_tok, llguidance.LLMatcher.grammar_from_lark(c.lark()))
    assert not m.consume_token(ids(tok, CALL2)[0])  # `<tool_call>`, one added token


def test_forced_tool_choice_continues_the_prompts_open_reasoning(tok: Any) -> None:
    """The constraint starts inside the reasoning the prompt opened: reasoning text, its closer,
    then the call; or the call at once, which ends the open reasoning as the template's reasoning
    closer (a lookahead for the call opener) reads it. Without the prompt's `<think>` the same
    reasoning text is content before a forced call, which `required` does not allow."""
    _, req = forced(tok, "required", prompt=PROMPT + "<think>\n")
    accepts = xgr_acceptor(req.structured_outputs.structural_tag)
    thought = "The user wants the time.\n</think>\n\n"
    assert accepts(thought + CALL2)
    assert accepts(CALL2)
    _, plain = forced(tok, "required")
    assert not xgr_acceptor(plain.structured_outputs.structural_tag)(thought + CALL2)


def test_parallel_tool_calls_false_allows_one_forced_call(tok: Any) -> None:
    _, many = forced(tok, "required")
    _, one = forced(tok, "required", parallel_tool_calls=False)
    assert xgr_acceptor(many.structured_outputs.structural_tag)(CALL + CALL2)
    assert not xgr_acceptor(one.structured_outputs.structural_tag)(CALL + CALL2)


def test_forced_tool_choice_the_constraints_cannot_express_is_vllms_400_naming_template_and_field(
    tok: Any,
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z]"}}}
    with pytest.raises(VLLMValidationError) as err:
        forced(tok, "required", tools=[{"type": "function", "function": {"name": "f", "parameters": schema}}])
    assert err.value.parameter == "tools"
    assert "qwen3" in str(err.value) and "'pattern'" in str(err.value) and "chatparse" in str(err.value)
    # MuSE Glimmer's argument tags use \b, which no grammar writes (docs/constraints.md)
    with environ(CHATPARSE_TEMPLATE_OVERRIDE="muse_glimmer"), pytest.raises(VLLMValidationError) as err:
        forced(tok, "required")
    assert err.value.parameter == "tool_choice"
    assert "muse_glimmer" in str(err.value) and "tool_calls" in str(err.value)
    parser, req = forced(tok, "auto")
    assert req.structured_outputs is None  # auto and none: nothing attached
    assert forced(tok, "none")[1].structured_outputs is None


def test_forced_tool_choice_without_the_chatparse_tool_parser_is_refused(tok: Any) -> None:
    cls = parser_cls(tok, tool=None)
    req = request(tool_choice="required")
    with pytest.raises(VLLMValidationError) as err:
        cls(tok, req.tools, chat_template_kwargs={}, model_config=None).adjust_request(req)
    assert "--tool-call-parser chatparse" in str(err.value)


@pytest.mark.parametrize(
    "req, cls_kw",
    [
        (lambda: request(tool_choice="none", stream=True), {}),
        (lambda: request(tools=None, stream=True), {}),
        (lambda: request(stream=True), {"auto": False}),
    ],
    ids=["tool_choice-none", "no-tools", "no-auto-tool-choice"],
)
def test_call_markup_passes_through_as_content_when_calls_are_not_parsed(
    tok: Any, req: Any, cls_kw: Any
) -> None:
    cls = parser_cls(tok, **cls_kw)
    _, msg = stream(tok, cls, OUTPUT, req=req())
    assert msg["tool_calls"] == []
    assert msg["content"] == "Let me check." + CALL
    assert msg["reasoning"] == "The user wants the weather."


def test_reasoning_markup_is_content_without_a_reasoning_parser(tok: Any) -> None:
    cls = parser_cls(tok, reasoning=None)
    _, msg = stream(tok, cls, OUTPUT)
    assert msg["reasoning"] == msg["reasoning_content"] == ""
    assert msg["content"] == "<think>\nThe user wants the weather.\n</think>\n\nLet me check."
    assert [c["name"] for c in msg["tool_calls"]] == ["get_weather"]


def test_include_reasoning_false_drops_reasoning(tok: Any) -> None:
    _, msg = stream(tok, parser_cls(tok), OUTPUT, req=request(stream=True, include_reasoning=False))
    assert msg["reasoning"] == msg["reasoning_content"] == ""
    assert msg["content"] == "Let me check."


# --------------------------------------------------------------------------------------------------
# finish reasons


CUT = "Checking." + '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'


def test_a_call_cut_off_by_max_tokens_is_never_returned(tok: Any) -> None:
    cls = parser_cls(tok)
    n = len(ids(tok, CUT))
    for per in (1, 4, n):
        _, msg = stream(tok, cls, CUT, req=request(stream=True, max_tokens=n), stop=False, per=per)
        assert msg["tool_calls"] == [] and msg["content"] == "Checking."
    reasoning, content, calls = one_shot(tok, cls, CUT, req=request(max_tokens=n), stop=False)
    assert calls is None and content == "Checking."


def test_a_call_the_model_ended_with_its_stop_token_is_returned(tok: Any) -> None:
    # No closer, but the model stopped by itself: the call parsed, so it is kept (finish "stop").
    text = 'Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    n = len(ids(tok, text)) + 1
    _, msg = stream(tok, parser_cls(tok), text, req=request(stream=True, max_tokens=n), stop=True)
    assert [c["name"] for c in msg["tool_calls"]] == ["get_weather"]


def test_max_tokens_reached_without_a_stop_token_is_length() -> None:
    from chatparse.integrations._common import recover_finish_reason

    stops = frozenset({7})
    assert recover_finish_reason(last_ids=[7], generated=10, stop_ids=stops, max_tokens=10) == "stop"
    assert recover_finish_reason(last_ids=[3], generated=10, stop_ids=stops, max_tokens=10) == "length"
    assert recover_finish_reason(last_ids=[3], generated=9, stop_ids=stops, max_tokens=10) == "stop"
    assert (
        recover_finish_reason(
            last_ids=[3], generated=90, stop_ids=stops, max_tokens=None, prompt_tokens=10, max_model_len=100
        )
        == "length"
    )


# --------------------------------------------------------------------------------------------------
# policies


def test_unknown_tools_are_surfaced_by_default_and_dropped_on_request(tok: Any) -> None:
    text = 'Hi.<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>'
    _, msg = stream(tok, parser_cls(tok), text)
    assert [c["name"] for c in msg["tool_calls"]] == ["launch"]
    with environ(CHATPARSE_UNKNOWN_TOOLS="drop"):
        _, msg = stream(tok, parser_cls(tok), text)
    assert msg["tool_calls"] == [] and msg["content"] == "Hi."


@pytest.mark.parametrize(
    "key, fields",
    [
        ("reasoning", {"reasoning"}),
        ("reasoning_content", {"reasoning_content"}),
        ("both", {"reasoning", "reasoning_content"}),
    ],
)
def test_reasoning_key(tok: Any, key: str, fields: set[str]) -> None:
    with environ(CHATPARSE_REASONING_KEY=key):
        deltas, _ = stream(tok, parser_cls(tok), OUTPUT)
    seen = {
        k
        for d in deltas
        if d is not None
        for k in d.model_dump(exclude_none=True)
        if k.startswith("reasoning")
    }
    assert seen == fields


def test_engine_call_ids(tok: Any) -> None:
    with environ(CHATPARSE_CALL_IDS="engine"):
        _, msg = stream(tok, parser_cls(tok), OUTPUT)
    assert msg["tool_calls"][0]["id"].startswith("chatcmpl-tool-")


def test_invalid_policy_value_fails_startup_with_one_clear_line(tok: Any) -> None:
    with environ(CHATPARSE_UNKNOWN_TOOLS="ignore"), pytest.raises(TypeError) as err:
        parser_cls(tok)  # vLLM instantiates the parser at startup (validate_parser_tokenizer)
    assert "CHATPARSE_UNKNOWN_TOOLS='ignore' is not one of surface, drop" in str(err.value)
    assert "\n" not in str(err.value)


def test_parsers_keep_per_request_state_only(tok: Any) -> None:
    cls = parser_cls(tok)
    req = request(stream=True)
    a, b = cls(tok, req.tools), cls(tok, req.tools)
    first, second = ids(tok, OUTPUT), ids(tok, "Sunny.")
    prompt = ids(tok, PROMPT)
    out_a, out_b = [], []
    for i in range(max(len(first), len(second))):  # interleaved, like concurrent requests
        if i < len(first):
            out_a.append(
                a.parse_delta(tok.decode([first[i]]), [first[i]], req, prompt, finished=i == len(first) - 1)
            )
        if i < len(second):
            out_b.append(
                b.parse_delta(
                    tok.decode([second[i]]), [second[i]], req, prompt, finished=i == len(second) - 1
                )
            )
    assert merge(out_b)["content"] == "Sunny." and merge(out_b)["tool_calls"] == []
    assert merge(out_a)["content"] == "Let me check." and len(merge(out_a)["tool_calls"]) == 1


# --------------------------------------------------------------------------------------------------
# reasoning end (engine core) and reasoning tokens


def test_is_reasoning_end_on_the_prompt(tok: Any) -> None:
    cls = parser_cls(tok)
    parser = cls(tok, None, chat_template_kwargs={})
    assert parser.is_reasoning_end(ids(tok, PROMPT + "<think>\n")) is False
    assert parser.is_reasoning_end(ids(tok, PROMPT + "<think>\n\n</think>\n\n")) is True
    assert parser.is_reasoning_end(ids(tok, PROMPT)) is False  # the model may still think
    disabled = cls(tok, None, chat_template_kwargs={"enable_thinking": False})
    assert disabled.is_reasoning_end(ids(tok, PROMPT)) is True
    assert parser_cls(tok, reasoning=None)(tok, None).is_reasoning_end(ids(tok, PROMPT)) is True


class CountingIds(Sequence[int]):
    """A token-id list that counts element reads (to check work done per call)."""

    def __init__(self, data: list[int]) -> None:
        self.data = data
        self.reads = 0

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: Any) -> Any:
        got = self.data[i]
        self.reads += len(got) if isinstance(got, list) else 1
        return got


def test_is_reasoning_end_streaming_reads_only_the_delta(tok: Any) -> None:
    rp = plugin.ChatparseReasoningParser(tok)
    body = ids(tok, "<think>\n" + "Some long reasoning about the weather. " * 200)
    end = ids(tok, "</think>")
    reads = []
    for n in (len(body) // 4, len(body)):
        seq = CountingIds(body[:n] + end)
        assert rp.is_reasoning_end_streaming(seq, end) is True
        assert rp.is_reasoning_end_streaming(CountingIds(body[:n]), body[n - 3 : n]) is False
        reads.append(seq.reads)
    # The same reads however long the reasoning (O(delta)): the closer's ids, or for a pattern closer
    # (qwen3's `</think>|(?=<tool_call>...)`) a bounded window of ids before the delta.
    assert reads[0] == reads[1] <= 2 * len(end) + plugin._PATTERN_WINDOW + 1


def test_count_reasoning_tokens(tok: Any) -> None:
    parser = parser_cls(tok)(tok, None)
    parser.set_prompt_token_ids(ids(tok, PROMPT))
    out = ids(tok, OUTPUT)
    body = ids(tok, "\nThe user wants the weather.\n")
    assert parser.count_reasoning_tokens(out) == len(body)
    grown = [parser.count_reasoning_tokens(out[:k]) for k in range(1, len(out) + 1)]
    assert grown[-1] == len(body) and grown == sorted(grown)


# --------------------------------------------------------------------------------------------------
# legacy interfaces


def test_legacy_tool_parser_methods(tok: Any) -> None:
    tp = plugin.ChatparseToolParser(tok, request().tools)
    info = tp.extract_tool_calls("Let me check." + CALL, request())
    assert info.tools_called and info.content == "Let me check."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in info.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    text = "Let me check." + CALL
    deltas = []
    prev = ""
    for t in ids(tok, text):
        piece = tok.decode([t])
        deltas.append(tp.extract_tool_calls_streaming(prev, prev + piece, piece, [], [], [t], request()))
        prev += piece
    msg = merge(deltas)
    assert msg["content"] == "Let me check." and [c["name"] for c in msg["tool_calls"]] == ["get_weather"]


def test_legacy_reasoning_parser_with_another_tool_parser(tok: Any) -> None:
    """`--reasoning-parser chatparse --tool-call-parser hermes`: vLLM's DelegatingParser runs the
    legacy reasoning methods, and the rest of the output reaches Hermes as written."""
    cls = parser_cls(tok, tool="hermes", reasoning="chatparse")
    assert issubclass(cls, DelegatingParser)
    _, msg = stream(tok, cls, OUTPUT)
    assert msg["reasoning"] == "The user wants the weather."
    assert [c["name"] for c in msg["tool_calls"]] == ["get_weather"]
    rp = plugin.ChatparseReasoningParser(tok)
    assert rp.extract_reasoning(OUTPUT, request()) == ("The user wants the weather.", "Let me check." + CALL)
    assert rp.extract_content_ids(ids(tok, OUTPUT)) == ids(tok, "\n\nLet me check." + CALL)


def test_extract_content_ids_matches_vllms_own_parser_for_a_literal_closer(tok: Any) -> None:
    """deepseek_r1_distill's closer is the literal `</think>`: the ids after it, as vLLM's own
    DeepSeek-R1 parser returns them, for every prefix of several outputs (none, one, two closers)."""
    from vllm.reasoning.deepseek_r1_reasoning_parser import DeepSeekR1ReasoningParser

    theirs = DeepSeekR1ReasoningParser(tok)
    with environ(CHATPARSE_TEMPLATE_OVERRIDE="deepseek_r1_distill"):
        ours = plugin.ChatparseReasoningParser(tok)
    assert ours._closers == ["</think>"]
    outputs = [OUTPUT, "abc</think>x</think>y" + CALL, "no closer here", "</think>"]
    checked = 0
    for text in outputs:
        seq = ids(tok, text)
        for n in range(len(seq) + 1):
            assert ours.extract_content_ids(seq[:n]) == theirs.extract_content_ids(seq[:n]), (text, n)
            checked += 1
    assert checked > 60


def test_extract_content_ids_for_a_pattern_closer(tok: Any) -> None:
    """qwen3's closer is `</think>|(?=<tool_call>\\s{0,16}\\{)`: after `</think>`, or at a call that
    implicitly ends the reasoning (the call stays in the content)."""
    rp = plugin.ChatparseReasoningParser(tok)
    assert rp._end_ids is None  # a pattern
    seq = ids(tok, OUTPUT)
    closer = seq.index(tok.convert_tokens_to_ids("</think>"))
    assert rp.extract_content_ids(seq) == seq[closer + 1 :]
    assert rp.extract_content_ids(seq[: closer + 1]) == []  # nothing after the closer yet
    assert rp.extract_content_ids(seq[:closer]) == []  # still reasoning
    implicit = ids(tok, "<think>\nThe user wants the weather.\n") + ids(tok, CALL)
    call = implicit.index(tok.convert_tokens_to_ids("<tool_call>"))
    assert rp.extract_content_ids(implicit) == implicit[call:]
    assert rp.extract_content_ids(implicit[: call + 1]) == []  # `<tool_call>` alone: no `{` seen yet


def test_a_long_prompt_is_decoded_from_its_tail(tok: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser reads only what follows the prompt's last start anchor: of a long prompt only
    the last `_TAIL_IDS` ids are decoded when that anchor lies inside them (counted), with the same
    result as the short prompt; an anchor further back (a long pre-written answer) decodes it all."""
    decoded: list[int] = []
    real = plugin._decode

    def counting(tokenizer: Any, seq: Sequence[int]) -> str:
        decoded.append(len(seq))
        return real(tokenizer, seq)

    monkeypatch.setattr(plugin, "_decode", counting)
    system = "<|im_start|>system\n" + "You are a helpful assistant. " * 200 + "<|im_end|>\n"
    long_ids = ids(tok, system + PROMPT)
    assert len(long_ids) > 4 * plugin._TAIL_IDS
    short_msg = stream(tok, parser_cls(tok), OUTPUT, prompt=PROMPT)[1]
    decoded.clear()
    long_msg = stream(tok, parser_cls(tok), OUTPUT, prompt=system + PROMPT)[1]
    for m in (short_msg, long_msg):
        for c in m["tool_calls"]:
            c.pop("id")  # minted per call
    assert long_msg == short_msg
    assert decoded and max(decoded) <= plugin._TAIL_IDS
    # The prompt pre-wrote a long answer after the anchor: the whole prompt is decoded.
    prewritten = PROMPT + "<think>\n" + "step. " * 400
    decoded.clear()
    msg = stream(tok, parser_cls(tok), "done\n</think>\n\nHi", prompt=prewritten)[1]
    assert msg["reasoning"].startswith("step.") and msg["reasoning"].endswith("done")
    assert msg["content"] == "Hi" and max(decoded) == len(ids(tok, prewritten))


# --------------------------------------------------------------------------------------------------
# deliberate differences from vLLM's own parsers (docs/compatibility.md, "The engine plugins"): the
# same Qwen3 output, token by token, through vLLM's `hermes` + `qwen3` parsers and through chatparse


MALFORMED = 'Hi.<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'


def _builtin(tok: Any) -> Any:
    return parser_cls(tok, "hermes", "qwen3")


def _fragments(deltas: Sequence[Any]) -> list[str]:
    return [
        tc.function.arguments
        for d in deltas
        if d is not None
        for tc in d.tool_calls
        if tc.function is not None and tc.function.arguments
    ]


def _parses(arguments: str) -> bool:
    try:
        json.loads(arguments)
    except ValueError:
        return False
    return True


def test_difference_a_call_is_sent_once_complete(tok: Any) -> None:
    builtin, _ = stream(tok, _builtin(tok), OUTPUT)
    ours, msg = stream(tok, parser_cls(tok), OUTPUT)
    assert len(_fragments(builtin)) > 1  # vLLM: argument fragments as they are generated
    assert _fragments(ours) == ['{"city": "Paris"}']  # chatparse: whole, with the id and name
    first = next(tc for d in ours if d is not None for tc in d.tool_calls)
    assert first.id and first.function is not None and first.function.name == "get_weather"
    assert json.loads(msg["tool_calls"][0]["arguments"]) == {"city": "Paris"}


def test_difference_a_cut_off_call_is_never_streamed(tok: Any) -> None:
    n = len(ids(tok, CUT))
    _, builtin = stream(tok, _builtin(tok), CUT, req=request(stream=True, max_tokens=n), stop=False)
    _, ours = stream(tok, parser_cls(tok), CUT, req=request(stream=True, max_tokens=n), stop=False)
    # vLLM: the client receives a call whose arguments are not JSON; chatparse: no call.
    assert [c["name"] for c in builtin["tool_calls"]] == ["get_weather"]
    assert not _parses(builtin["tool_calls"][0]["arguments"])
    assert ours["tool_calls"] == [] and ours["content"] == "Checking."


def test_difference_a_malformed_call_is_dropped(tok: Any) -> None:
    _, builtin = stream(tok, _builtin(tok), MALFORMED)
    _, ours = stream(tok, parser_cls(tok), MALFORMED)
    # vLLM streams the call with its arguments as written (not JSON) and, non-streamed, returns the
    # markup as content; chatparse returns no call and keeps the rest of the message, both ways.
    assert [c["name"] for c in builtin["tool_calls"]] == ["get_weather"]
    assert not _parses(builtin["tool_calls"][0]["arguments"])
    _, content, calls = one_shot(tok, _builtin(tok), MALFORMED)
    assert calls is None and content is not None and "<tool_call>" in content
    assert ours["tool_calls"] == [] and ours["content"] == "Hi."
    assert one_shot(tok, parser_cls(tok), MALFORMED)[1:] == ("Hi.", None)


def test_difference_reasoning_field_and_call_ids(tok: Any) -> None:
    def shown(deltas: Sequence[Any]) -> tuple[set[str], list[str]]:
        keys = {
            k
            for d in deltas
            if d is not None
            for k in d.model_dump(exclude_none=True)
            if k.startswith("reasoning")
        }
        return keys, [tc.id for d in deltas if d is not None for tc in d.tool_calls if tc.id]

    keys, call_ids = shown(stream(tok, _builtin(tok), OUTPUT)[0])
    assert keys == {"reasoning"} and call_ids[0].startswith("chatcmpl-tool-")
    keys, call_ids = shown(stream(tok, parser_cls(tok), OUTPUT)[0])
    assert keys == {"reasoning", "reasoning_content"}
    assert call_ids[0].startswith("call_") and len(call_ids[0]) == len("call_") + 24


@pytest.mark.parametrize(
    "template, markers, start, end",
    [
        (
            "deepseek_dsml",
            ["<think>", "</think>", "<｜DSML｜"],
            "<think>",
            "</think>",
        ),  # pattern opener and closer
        ("qwen3", ["<think>", "</think>", "<tool_call>"], "<think>", "</think>"),  # pattern closer
    ],
)
def test_reasoning_delimiters_for_vllms_reasoning_config(
    template: str, markers: list[str], start: str, end: str
) -> None:
    """vLLM's `ReasoningConfig` tokenizes `reasoning_start_str` / `reasoning_end_str`: a pattern
    delimiter gives the added token it matches whole (None before, so the config stayed off)."""
    tok = build_tokenizer(
        markers, ["<think>\nok\n</think>\n\nHi."] * 4, stop=["<｜end▁of▁sentence｜>"], vocab_size=300
    )
    with environ(CHATPARSE_TEMPLATE_OVERRIDE=template):
        rp = plugin.ChatparseReasoningParser(tok)
    assert (rp.reasoning_start_str, rp.reasoning_end_str) == (start, end)
    assert [len(tok.encode(s, add_special_tokens=False)) for s in (start, end)] == [1, 1]


def test_calls_not_returned_are_logged(tok: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A malformed call (or one cut off) is not returned; the server log says so, in one line."""
    with caplog.at_level("WARNING", logger="chatparse.integrations"):
        stream(tok, parser_cls(tok), MALFORMED)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "chatparse.integrations"]
    assert line.startswith("chatparse (vllm): not returned: 1 malformed region(s)") and "JSON" in line
    caplog.clear()
    with caplog.at_level("WARNING", logger="chatparse.integrations"):
        stream(tok, parser_cls(tok), OUTPUT)
    assert not [r for r in caplog.records if r.name == "chatparse.integrations"]
