"""The SGLang plugin on SGLang 0.5.23's own classes: registration, the reasoning-then-tools pipeline,
the request context, finish reasons, policies, structural tags.

The detectors run inside SGLang's `FunctionCallParser` and `ReasoningParser`, as `OpenAIServingChat`
creates them; the serving hooks are checked as registered with SGLang's `HookRegistry`, and their
logic is run around small stand-in methods. `test_sglang_serving.py` runs them all inside SGLang's
own server.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from types import SimpleNamespace
from typing import Any

import pytest

from ..support.build import pure_only
from ..support.counting import calls_of
from .cases import (
    CALL,
    CALL2,
    OUTPUT,
    PROMPT,
    TOOLS,
    TOOLS2,
    harmony_tokenizer,
    qwen3_tokenizer,
    xgr_acceptor,
)
from .conftest import engine_module
from .localtok import build_tokenizer
from .replay import environ

ENGINE = "sglang"
engine_module("sglang", "sglang.srt.function_call.function_call_parser")

from sglang.srt.entrypoints.openai.protocol import Tool  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: E402

import chatparse.integrations.sglang as plugin  # noqa: E402
from chatparse.integrations._common import IntegrationError  # noqa: E402


@pytest.fixture(scope="module")
def tok() -> Any:
    plugin.register()
    return qwen3_tokenizer()


def tools(specs: list[dict[str, Any]] = TOOLS) -> list[Any]:
    return [Tool(**t) for t in specs]


def pipeline(
    tok: Any,
    text: str,
    *,
    chunk: int = 3,
    prompt: str = PROMPT,
    finish: str = "stop",
    offered: list[dict[str, Any]] | None = TOOLS,
    stream_reasoning: bool = True,
    tool: str = "chatparse",
    reasoning: str = "chatparse",
) -> dict[str, Any]:
    """ReasoningParser, then FunctionCallParser on its normal text, per chunk; `parse_stream_end`
    on the last; the serving context as the hooks publish it. Returns the merged message.
    `tool` / `reasoning`: the parsers selected by name (an engine's own, to compare)."""
    active = bool(offered)
    token = plugin._REQUEST.set({"prefix": prompt, "finish_reason": None})
    try:
        rp = ReasoningParser(
            reasoning, stream_reasoning, False, None, tokenizer=tok, tool_call_parser_active=active
        )
        fp = FunctionCallParser(tools(offered or []), tool, tokenizer=tok) if active else None
        msg: dict[str, Any] = {"reasoning": "", "content": "", "calls": {}, "items": []}
        pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)] or [""]
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1
            if last:
                plugin._REQUEST.set({"prefix": prompt, "finish_reason": {"type": finish}})
            r, normal = rp.parse_stream_chunk(piece)
            if last:
                r2, n2 = rp.parse_stream_end()
                r, normal = (r or "") + (r2 or ""), (normal or "") + (n2 or "")
            msg["reasoning"] += r or ""
            if fp is None:
                msg["content"] += normal or ""
                continue
            t, calls = fp.parse_stream_chunk(normal or "")
            if last:
                t2, c2 = fp.parse_stream_end()
                t, calls = t + t2, calls + c2
            msg["content"] += t
            for c in calls:
                msg["items"].append(c)
                entry = msg["calls"].setdefault(c.tool_index, {"name": None, "arguments": ""})
                entry["name"] = entry["name"] or c.name
                entry["arguments"] += c.parameters
    finally:
        plugin._REQUEST.reset(token)
    msg["calls"] = [msg["calls"][i] for i in sorted(msg["calls"])]
    return msg


def non_stream(
    tok: Any,
    text: str,
    *,
    prompt: str = PROMPT,
    finish: str = "stop",
    offered: list[dict[str, Any]] = TOOLS,
    tool: str = "chatparse",
    reasoning: str = "chatparse",
) -> tuple[str, str, list[Any]]:
    """`_build_chat_response`: ReasoningParser.parse_non_stream, then `_process_tool_calls`."""
    token = plugin._REQUEST.set({"prefix": prompt, "finish_reason": {"type": finish}})
    try:
        rp = ReasoningParser(reasoning, False, False, None, tokenizer=tok, tool_call_parser_active=True)
        thought, text = rp.parse_non_stream(text)
        fp = FunctionCallParser(tools(offered), tool, tokenizer=tok)
        calls: list[Any] = []
        if fp.has_tool_call(text):
            text, calls = fp.parse_non_stream(text)
    finally:
        plugin._REQUEST.reset(token)
    return thought, text, calls


def test_registered_through_the_sglang_plugins_entry_point() -> None:
    eps = [ep for ep in importlib.metadata.entry_points(group="sglang.srt.plugins") if ep.name == "chatparse"]
    assert [ep.value for ep in eps] == ["chatparse.integrations.sglang:register"]
    import sglang.srt.plugins as plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    FunctionCallParser.ToolCallParserEnum.pop("chatparse", None)
    ReasoningParser.DetectorMap.pop("chatparse", None)
    HookRegistry.reset()
    plugins._plugins_loaded = False
    with environ(SGLANG_PLUGINS="chatparse"):
        plugins.load_plugins()
    assert FunctionCallParser.ToolCallParserEnum["chatparse"] is plugin.ChatparseDetector
    assert ReasoningParser.DetectorMap["chatparse"] is plugin.ChatparseReasoningDetector
    targets = {t.rsplit(".", 1)[-1] for t in HookRegistry._hooks if t.startswith(plugin._SERVING)}
    assert targets == {name for name, _ in plugin._HOOKS}
    assert f"{plugin._PARSER}.get_structure_constraint" in HookRegistry._hooks
    plugin.register()  # idempotent
    assert sum(len(v) for k, v in HookRegistry._hooks.items() if k.startswith(plugin._SERVING)) == len(
        plugin._HOOKS
    )


def test_cli_choices_include_chatparse(tok: Any) -> None:
    from sglang.srt.server_args import _reasoning_parser_choices, _tool_call_parser_choices

    assert "chatparse" in _tool_call_parser_choices() and "chatparse" in _reasoning_parser_choices()


@pytest.mark.parametrize("chunk", [1, 3, 10_000])
def test_reasoning_then_tools_pipeline(tok: Any, chunk: int) -> None:
    msg = pipeline(tok, OUTPUT, chunk=chunk)
    assert msg["reasoning"] == "The user wants the weather."
    assert msg["content"] == "Let me check."
    assert [(c["name"], json.loads(c["arguments"])) for c in msg["calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    first = msg["items"][0]
    assert first.tool_index == 0 and first.name == "get_weather"  # name on the first item
    reasoning, content, calls = non_stream(tok, OUTPUT)
    assert (reasoning, content) == ("The user wants the weather.", "Let me check.")
    assert [(c.name, json.loads(c.parameters)) for c in calls] == [("get_weather", {"city": "Paris"})]


@pytest.mark.parametrize("chunk", [1, 4, 10_000])
def test_one_parse_when_both_parsers_are_chatparse(tok: Any, chunk: int) -> None:
    """As the serving hooks publish it (the tool parser's name and tools), the reasoning parser
    parses once and hands each step's content and calls to the tool-call parser."""
    from types import SimpleNamespace as NS

    from .replay import reasoning_context, tool_context

    su = NS(prefix=PROMPT)
    offered = tools()
    token = plugin._REQUEST.set(None)
    try:
        pieces = [OUTPUT[i : i + chunk] for i in range(0, len(OUTPUT), chunk)]
        rp = fp = None
        msg: dict[str, Any] = {"reasoning": "", "content": "", "calls": []}
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1
            finish = {"type": "stop"} if last else None
            reasoning_context(su, "chatparse", offered, finish)
            rp = rp or ReasoningParser(
                "chatparse", True, False, None, tokenizer=tok, tool_call_parser_active=True
            )
            r, normal = rp.parse_stream_chunk(piece)
            if last:
                r2, n2 = rp.parse_stream_end()
                r, normal = r + r2, normal + n2 if n2 else normal
            tool_context(su, finish)
            fp = fp or FunctionCallParser(offered, "chatparse", tokenizer=tok)
            t, calls = fp.parse_stream_chunk(normal)
            if last:
                t2, c2 = fp.parse_stream_end()
                t, calls = t + t2, calls + c2
            msg["reasoning"] += r
            msg["content"] += t
            msg["calls"] += [(c.name, json.loads(c.parameters)) for c in calls]
    finally:
        plugin._REQUEST.reset(token)
    assert isinstance(rp.detector._splitter, plugin._OneParse)
    assert rp.detector._splitter.linked and fp.detector._stream is None  # the tool side never parsed
    assert msg == {
        "reasoning": "The user wants the weather.",
        "content": "Let me check.",
        "calls": [("get_weather", {"city": "Paris"})],
    }


def test_prompt_that_opens_reasoning(tok: Any) -> None:
    msg = pipeline(tok, "hm, Paris.\n</think>\n\nSunny.", prompt=PROMPT + "<think>\n")
    assert (msg["reasoning"], msg["content"], msg["calls"]) == ("hm, Paris.", "Sunny.", [])


def test_force_reasoning_without_a_prompt(tok: Any) -> None:
    """No rendered prompt, but SGLang detected that the template opens reasoning."""
    rp = ReasoningParser("chatparse", True, True, None, tokenizer=tok)
    r, n = rp.parse_stream_chunk("hm.\n</think>\n\nHi")
    r2, n2 = rp.parse_stream_end()
    assert (r + r2, n + n2) == ("hm.", "Hi")


def test_without_tools_call_markup_is_content(tok: Any) -> None:
    msg = pipeline(tok, OUTPUT, offered=None)
    assert msg["reasoning"] == "The user wants the weather."
    assert msg["content"] == "Let me check." + CALL and msg["calls"] == []


@pytest.mark.parametrize(
    "template, prompt, body",
    [
        (
            "kimi_k2",
            "<|im_assistant|>assistant<|im_middle|>",
            "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city":"Paris"}<|tool_call_end|><|tool_calls_section_end|>',
        ),
        (
            "deepseek_v31",
            "<｜Assistant｜>",
            "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
            '{"city":"Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        ),
    ],
)
def test_without_tools_call_section_markers_stay_in_the_content(
    tok: Any, template: str, prompt: str, body: str
) -> None:
    """The families whose content closes on call-section markers keep them (and the whole call)."""
    with environ(CHATPARSE_TEMPLATE_OVERRIDE=template):
        msg = pipeline(tok, "<think>hm</think>" + body, prompt=prompt, offered=None)
    assert msg["reasoning"] == "hm" and msg["content"] == body


def test_a_call_cut_off_by_max_tokens_is_never_returned(tok: Any) -> None:
    cut = 'Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    for chunk in (1, 5, 10_000):
        msg = pipeline(tok, cut, chunk=chunk, finish="length")
        assert msg["calls"] == [] and msg["content"] == "Checking."
    _, content, calls = non_stream(tok, cut, finish="length")
    assert calls == [] and content == "Checking."


def test_unknown_tools(tok: Any) -> None:
    text = 'Hi.<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>'
    assert [c["name"] for c in pipeline(tok, text)["calls"]] == ["launch"]
    with environ(CHATPARSE_UNKNOWN_TOOLS="drop"):
        msg = pipeline(tok, text)
    assert msg["calls"] == [] and msg["content"] == "Hi."


def test_stream_reasoning_false_releases_reasoning_when_the_answer_starts(tok: Any) -> None:
    rp = ReasoningParser("chatparse", False, False, None, tokenizer=tok)
    token = plugin._REQUEST.set({"prefix": PROMPT})
    try:
        outs = [rp.parse_stream_chunk(p) for p in ("<think>\nab", "cd\n</think>", "\n\nHi")]
    finally:
        plugin._REQUEST.reset(token)
    assert [o[0] for o in outs] == ["", "", "abcd"]
    assert "".join(o[1] for o in outs) == "Hi"


def _sglang_grammar(tok: Any, sampling_params: dict[str, Any]) -> Any:
    """SGLang's own XGrammar backend compiling the request's `structural_tag`; an acceptor."""
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    backend = XGrammarGrammarBackend(tok, vocab_size=len(tok))
    grammar = backend.dispatch_structural_tag(sampling_params["structural_tag"])
    assert not isinstance(grammar, InvalidGrammarObject), grammar
    return xgr_acceptor(sampling_params["structural_tag"])


@pytest.mark.parametrize("thinking", [False, True], ids=["after-reasoning", "reasoning-in-grammar"])
@pytest.mark.parametrize(
    "choice, name",
    [("required", None), ({"type": "function", "function": {"name": "get_time"}}, "get_time")],
    ids=["required", "named"],
)
def test_forced_tool_choice_is_the_template_constraint_as_sglangs_structural_tag(
    tok: Any, choice: Any, name: str | None, thinking: bool
) -> None:
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest, ToolChoice

    sg_choice = choice if isinstance(choice, str) else ToolChoice(**choice)
    fp = FunctionCallParser(tools(TOOLS2), "chatparse", tokenizer=tok)
    assert fp.owns_tool_format() is True  # SGLang parses forced output with this detector
    # As `_process_messages` asks (thinking_mode: no reasoning parser and a thinking request).
    constraint = fp.get_structure_constraint(sg_choice, parallel_tool_calls=True, thinking_mode=thinking)
    hooked = plugin._hook_structure_constraint(
        FunctionCallParser.get_structure_constraint,
        fp,
        sg_choice,
        parallel_tool_calls=True,
        thinking_mode=thinking,
    )
    assert constraint is not None and constraint[0] == hooked[0] == "structural_tag"
    assert constraint[1].model_dump(by_alias=True) == hooked[1].model_dump(by_alias=True)
    req = ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=tools(TOOLS2), tool_choice=sg_choice
    )
    params = req.to_sampling_params(stop=[], model_generation_config={}, tool_call_constraint=constraint)
    assert "json_schema" not in params and params.get("structural_tag")
    accepts = _sglang_grammar(tok, params)
    lead = "<think>\nThe user wants the time.\n</think>\n\n" if thinking else "\n\n"
    assert accepts(lead + CALL2) and accepts(CALL2)
    assert accepts(lead + CALL) is (name is None)
    assert not accepts("Let me check.") and not accepts(CALL2.replace('"CET"', "7"))
    if not thinking:  # the reasoning is SGLang's reasoning backend's: not in this grammar
        assert not accepts("<think>\nx\n</think>\n\n" + CALL2)
    # SGLang's non-streaming path for a forced call: FunctionCallParser with the tool choice.
    parser = FunctionCallParser(tools(TOOLS2), "chatparse", tokenizer=tok, tool_choice=sg_choice)
    assert parser.has_tool_call(lead + CALL2)
    _, calls = parser.parse_non_stream(lead + CALL2)
    assert [(c.name, json.loads(c.parameters)) for c in calls] == [("get_time", {"zone": "CET"})]


def test_parallel_tool_calls_false_allows_one_forced_call(tok: Any) -> None:
    fp = FunctionCallParser(tools(TOOLS2), "chatparse", tokenizer=tok)
    one = fp.get_structure_constraint("required", parallel_tool_calls=False)
    many = fp.get_structure_constraint("required", parallel_tool_calls=True)
    params = {"structural_tag": json.dumps(one[1].model_dump(by_alias=True))}
    assert not _sglang_grammar(tok, params)(CALL + CALL2)
    params = {"structural_tag": json.dumps(many[1].model_dump(by_alias=True))}
    assert _sglang_grammar(tok, params)(CALL + CALL2)


def test_auto_is_not_constrained(tok: Any) -> None:
    fp = FunctionCallParser(tools(), "chatparse", tokenizer=tok)
    assert fp.get_structure_constraint("auto") is None
    assert fp.detector.get_structural_tag(tools=tools(), tool_choice="auto") is None
    with pytest.raises(NotImplementedError, match="chatparse"):
        fp.detector.structure_info()


def test_forced_tool_choice_the_constraints_cannot_express_is_sglangs_400(tok: Any) -> None:
    """SGLang's `get_structure_constraint` logs a detector's error and falls back to a JSON-array
    schema; the registered hook raises the `ValueError` SGLang's serving code answers 400."""
    harmony = harmony_tokenizer()
    # MuSE Glimmer's argument tags use \b, which no grammar writes (docs/constraints.md)
    with environ(CHATPARSE_TEMPLATE_OVERRIDE="muse_glimmer"):
        fp = FunctionCallParser(tools(), "chatparse", tokenizer=harmony)
        with pytest.raises(ValueError) as err:
            plugin._hook_structure_constraint(FunctionCallParser.get_structure_constraint, fp, "required")
    assert (
        "muse_glimmer" in str(err.value) and "tool_calls" in str(err.value) and "chatparse" in str(err.value)
    )
    schema = {"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z]"}}}
    fp = FunctionCallParser(
        tools([{"type": "function", "function": {"name": "f", "parameters": schema}}]),
        "chatparse",
        tokenizer=tok,
    )
    with pytest.raises(ValueError, match="'pattern'"):
        plugin._hook_structure_constraint(FunctionCallParser.get_structure_constraint, fp, "required")
    # Other detectors go through SGLang's own method untouched.
    other = FunctionCallParser(tools(), "qwen25", tokenizer=tok)
    assert plugin._hook_structure_constraint(
        FunctionCallParser.get_structure_constraint, other, "auto"
    ) == FunctionCallParser.get_structure_constraint(other, "auto")


def test_has_tool_call(tok: Any) -> None:
    fp = FunctionCallParser(tools(), "chatparse", tokenizer=tok)
    assert fp.has_tool_call("Let me check." + CALL) is True
    assert fp.has_tool_call("Just text.") is False
    assert fp.has_tool_call('<tool_call>\n{"name": "get_weather", "argu') is True  # incomplete: parse decides


def test_a_model_without_template_fails_with_one_line() -> None:
    unknown = build_tokenizer(
        ["<x>"], ["plain"] * 4, stop=["</s>"], vocab_size=300, name_or_path="acme/unheard-of"
    )
    with pytest.raises(IntegrationError) as err:
        FunctionCallParser(tools(), "chatparse", tokenizer=unknown)
    assert "\n" not in str(err.value) and "CHATPARSE_TEMPLATE" in str(err.value)
    with environ(CHATPARSE_TEMPLATE="qwen3"):
        FunctionCallParser(tools(), "chatparse", tokenizer=unknown)


def test_request_context_is_per_task(tok: Any) -> None:
    """Concurrent requests (asyncio tasks) each see their own prompt."""

    async def one(prompt: str, text: str) -> dict[str, Any]:
        plugin._REQUEST.set({"prefix": prompt})
        await asyncio.sleep(0)
        rp = ReasoningParser("chatparse", True, False, None, tokenizer=tok)
        out = {"reasoning": "", "content": ""}
        for piece in (text[:5], text[5:]):
            await asyncio.sleep(0)
            r, n = rp.parse_stream_chunk(piece)
            out["reasoning"] += r
            out["content"] += n
        r, n = rp.parse_stream_end()
        out["reasoning"] += r
        out["content"] += n
        return out

    async def both() -> list[dict[str, Any]]:
        return await asyncio.gather(one(PROMPT + "<think>\n", "deep\n</think>\n\nA"), one(PROMPT, "plain B"))

    a, b = asyncio.run(both())
    assert a == {"reasoning": "deep", "content": "A"} and b == {"reasoning": "", "content": "plain B"}


# --------------------------------------------------------------------------------------------------
# the serving hooks' logic, around stand-in methods (OpenAIServingChat is not importable here)


def test_hooks_publish_the_prompt_and_the_finish_reason(tok: Any) -> None:
    req = SimpleNamespace(_response_parser_prefix=PROMPT + "<think>\n", tool_choice="auto")
    seen: list[dict[str, Any]] = []

    def original(self: Any, *args: Any, **kwargs: Any) -> str:
        seen.append(plugin.request_context())
        return "ok"

    assert plugin._hook_build_response(original, None, req) == "ok"
    assert seen[-1] == {"prefix": PROMPT + "<think>\n"}
    finish = {"type": "length", "length": 9}
    plugin._hook_tool_calls(original, None, "text", [], finish, "auto", 0, PROMPT)
    assert seen[-1] == {"prefix": PROMPT, "finish_reason": finish}
    assert plugin.request_context() == {}  # reset after each synchronous hook
    plugin._hook_reasoning_stream(original, None, 0, "x", {}, {}, req)
    assert seen[-1]["prefix"] == PROMPT + "<think>\n" and "tools" not in seen[-1]
    # With the chatparse tool parser active, the reasoning step publishes it and the tools (read
    # once per request), and the final step's finish reason; the context stays for the tool step.
    asked: list[Any] = []
    serving = SimpleNamespace(
        tool_call_parser="chatparse",
        _tool_call_parsing_active=lambda r: True,
        _effective_tools=lambda r: asked.append(r) or TOOLS,
    )
    plugin._hook_reasoning_stream(original, serving, 0, "x", {}, {}, req)
    plugin._hook_reasoning_stream(original, serving, 0, "y", {}, {}, req, "length")
    assert seen[-1]["tool_parser"] == "chatparse" and seen[-1]["tools"] == TOOLS and len(asked) == 1
    assert (
        seen[-1]["finish_reason"] == "length" and plugin._finish_type(seen[-1]["finish_reason"]) == "length"
    )
    one = object()
    plugin.request_context()["one_parse"] = one  # what the reasoning detector publishes

    async def gen(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(plugin.request_context())
        yield "chunk"

    async def drain(flush: bool) -> list[Any]:
        content = {"meta_info": {"finish_reason": finish}}
        return [
            c
            async for c in plugin._hook_tool_stream(
                gen, None, 0, "d", {}, content, req, {}, 0, False, flush=flush
            )
        ]

    assert asyncio.run(drain(False)) == ["chunk"] and seen[-1]["finish_reason"] is None
    assert seen[-1]["one_parse"] is one  # the tool step still sees the reasoning step's parse
    assert asyncio.run(drain(True)) == ["chunk"] and seen[-1]["finish_reason"] == finish
    # the server iterates the original's own generator: the hook wraps no generator around it
    it = plugin._hook_tool_stream(gen, None, 0, "d", {}, {}, req, {}, 0, False, flush=False)
    assert it.ag_code is gen.__code__


def test_detokenization_hook_and_startup_hook(tok: Any) -> None:
    serving = SimpleNamespace(
        tool_call_parser="chatparse",
        reasoning_parser=None,
        tokenizer_manager=SimpleNamespace(tokenizer=tok),
        _effective_tools=lambda request: request.tools,
    )
    never = lambda self, request: False  # noqa: E731
    assert (
        plugin._hook_detokenization(never, serving, SimpleNamespace(tool_choice="auto", tools=TOOLS)) is True
    )
    assert (
        plugin._hook_detokenization(never, serving, SimpleNamespace(tool_choice="none", tools=TOOLS)) is False
    )
    assert plugin._hook_detokenization(never, serving, SimpleNamespace(tool_choice="auto", tools=[])) is False
    serving.reasoning_parser = "chatparse"
    assert plugin._hook_detokenization(never, serving, SimpleNamespace(tool_choice="none", tools=[])) is True
    plugin._hook_init(lambda self: None, serving)  # resolves the template: no error
    unknown = build_tokenizer(
        ["<x>"], ["plain"] * 4, stop=["</s>"], vocab_size=300, name_or_path="acme/unheard-of"
    )
    serving.tokenizer_manager = SimpleNamespace(tokenizer=unknown)
    with pytest.raises(IntegrationError, match="CHATPARSE_TEMPLATE"):
        plugin._hook_init(lambda self: None, serving)


# --------------------------------------------------------------------------------------------------
# deliberate differences from SGLang's own parsers (docs/compatibility.md, "The engine plugins"): the
# same Qwen3 output, character by character, through SGLang's `qwen25` + `qwen3` parsers (what
# canitoolcall maps Qwen3 to) and through chatparse

BUILTIN = {"tool": "qwen25", "reasoning": "qwen3"}
UNKNOWN = 'Hi.<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>'
CUT = 'Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
MALFORMED = 'Hi.<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'


def test_difference_unknown_tools_are_returned(tok: Any) -> None:
    assert pipeline(tok, UNKNOWN, chunk=1, **BUILTIN)["calls"] == []  # SGLang drops them
    assert non_stream(tok, UNKNOWN, **BUILTIN)[2] == []
    assert [c["name"] for c in pipeline(tok, UNKNOWN, chunk=1)["calls"]] == ["launch"]
    assert [c.name for c in non_stream(tok, UNKNOWN)[2]] == ["launch"]
    with environ(CHATPARSE_UNKNOWN_TOOLS="drop"):  # SGLang's convention, on request
        assert pipeline(tok, UNKNOWN, chunk=1)["calls"] == [] and non_stream(tok, UNKNOWN)[2] == []


def test_difference_a_call_is_sent_once_complete(tok: Any) -> None:
    builtin = pipeline(tok, OUTPUT, chunk=1, **BUILTIN)
    ours = pipeline(tok, OUTPUT, chunk=1)
    assert len([i for i in builtin["items"] if i.parameters]) > 1  # SGLang: fragments as generated
    (item,) = ours["items"]  # chatparse: one item, the name and the whole arguments
    assert item.name == "get_weather" and json.loads(item.parameters) == {"city": "Paris"}
    assert json.loads(builtin["calls"][0]["arguments"]) == json.loads(ours["calls"][0]["arguments"])


def test_difference_cut_off_and_malformed_calls_are_never_streamed(tok: Any) -> None:
    # SGLang streams the start of a call cut off by max_tokens (its arguments not JSON) and the name
    # of a malformed one (no arguments); chatparse streams neither. Non-streamed, neither returns them.
    cut = pipeline(tok, CUT, chunk=1, finish="length", **BUILTIN)["calls"]
    assert [c["name"] for c in cut] == ["get_weather"] and cut[0]["arguments"] != ""
    with pytest.raises(ValueError):
        json.loads(cut[0]["arguments"])
    assert pipeline(tok, MALFORMED, chunk=1, **BUILTIN)["calls"] == [{"name": "get_weather", "arguments": ""}]
    for text, finish in ((CUT, "length"), (MALFORMED, "stop")):
        msg = pipeline(tok, text, chunk=1, finish=finish)
        assert msg["calls"] == [] and msg["content"] in ("Checking.", "Hi.")
        assert non_stream(tok, text, finish=finish, **BUILTIN)[2] == []
        assert non_stream(tok, text, finish=finish)[2] == []


def test_difference_non_streamed_index_is_the_call_order(tok: Any) -> None:
    # One call to the second tool offered: SGLang's non-streaming path indexes it by its position in
    # `tools` (1), its streaming path by call order (0); chatparse uses the call order both ways.
    assert [(c.tool_index, c.name) for c in non_stream(tok, CALL2, offered=TOOLS2, **BUILTIN)[2]] == [
        (1, "get_time")
    ]
    assert [(c.tool_index, c.name) for c in non_stream(tok, CALL2, offered=TOOLS2)[2]] == [(0, "get_time")]
    assert [i.tool_index for i in pipeline(tok, CALL2, chunk=1, offered=TOOLS2)["items"]] == [0]


def test_difference_text_is_trimmed_as_the_template_says(tok: Any) -> None:
    # SGLang's qwen3 parsers keep the newlines the chat template writes around the reasoning and
    # before the answer; chatparse applies the template's own trimming.
    builtin = pipeline(tok, OUTPUT, chunk=1, **BUILTIN)
    ours = pipeline(tok, OUTPUT, chunk=1)
    assert (builtin["reasoning"], builtin["content"]) == (
        "\nThe user wants the weather.\n",
        "\n\nLet me check.",
    )
    assert (ours["reasoning"], ours["content"]) == ("The user wants the weather.", "Let me check.")


@pure_only  # counts ChatParser._message by patching it
def test_streamed_turns_end_without_building_a_message(tok: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang's detectors return only the last deltas at the end of a stream: the message
    (`ChatParser._message`, what `finish` adds) is never built there, whichever detector parses;
    what it would report as not returned is still logged (`test_calls_not_returned_are_logged`)."""
    from chatparse.openai import ChatParser

    built = calls_of(monkeypatch, ChatParser, "_message")
    for reasoning in ("chatparse", "qwen3"):
        msg = pipeline(tok, OUTPUT, chunk=1, reasoning=reasoning)
        assert msg["content"] == "Let me check." and len(msg["calls"]) == 1
    assert built[0] == 0
    non_stream(tok, OUTPUT)  # the non-streaming path reads the message's report
    assert built[0] > 0


def test_calls_not_returned_are_logged(tok: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A malformed call is not returned; the server log says so, once per output (not again when
    SGLang's non-streaming path first asks `has_tool_call`)."""
    for run in (
        lambda: pipeline(tok, MALFORMED, chunk=1),
        lambda: pipeline(tok, MALFORMED, chunk=1, reasoning="qwen3"),  # the tool detector parses alone
        lambda: non_stream(tok, MALFORMED),
    ):
        caplog.clear()
        with caplog.at_level("WARNING", logger="chatparse.integrations"):
            run()
        (line,) = [r.getMessage() for r in caplog.records if r.name == "chatparse.integrations"]
        assert line.startswith("chatparse (sglang): not returned: 1 malformed region(s)")
    caplog.clear()
    with caplog.at_level("WARNING", logger="chatparse.integrations"):
        pipeline(tok, OUTPUT, chunk=1)
    assert not [r for r in caplog.records if r.name == "chatparse.integrations"]


@pytest.mark.parametrize(
    "prompt, kept",
    [
        (PROMPT, PROMPT),
        (PROMPT + "<think>\n", PROMPT),  # the open reasoning is the reasoning parser's, not this one's
        # thinking disabled by the prompt: the closed region goes, the text after it stays
        (PROMPT + "<think>\n\n</think>\n\n", PROMPT + "\n\n"),
        ("", ""),
    ],
)
def test_tool_parser_prompt_without_reasoning_skips_the_probe(
    tok: Any, monkeypatch: pytest.MonkeyPatch, prompt: str, kept: str
) -> None:
    """The tool-call detector's prefix drops the reasoning regions the prompt opens; a prompt without
    any reasoning opener is kept as it is without parsing it (one probe parse per request would
    cost more than a short turn's steps), and that is what the probe answers too."""
    built = calls_of(monkeypatch, plugin, "ResponseParser")
    token = plugin._REQUEST.set({"prefix": prompt, "finish_reason": None})
    try:
        detector = plugin.ChatparseDetector(tokenizer=tok)
        assert detector._prefix() == kept
        assert built[0] == (1 if "<think>" in prompt else 0)
        # The probe itself (openers unknown, as for a pattern opener) gives the same prefix
        # (its remembered answers forgotten first).
        monkeypatch.setattr(plugin, "_reasoning_openers", lambda resolved: ())
        detector._resolved.memo.pop("sglang.prompt_tails", None)
        assert detector._prefix() == kept
        assert built[0] == (2 if "<think>" in prompt else 1 if prompt else 0)
    finally:
        plugin._REQUEST.reset(token)


# --------------------------------------------------------------------------------------------------
# per-step and per-request work, counted (the plugin runs once per token of every request)


class CountingContext:
    """`_REQUEST` with its reads and writes counted (a ContextVar's methods cannot be patched)."""

    def __init__(self, real: Any) -> None:
        self.real, self.gets, self.sets = real, 0, 0

    def get(self) -> Any:
        self.gets += 1
        return self.real.get()

    def set(self, value: Any) -> Any:
        self.sets += 1
        return self.real.set(value)

    def reset(self, token: Any) -> None:
        self.real.reset(token)


def test_one_parse_steps_touch_the_request_context_only_at_the_edges(
    tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both parsers chatparse, one token per step, as the server drives them (hooks included): the
    hooks publish a context on the first and the last step only; the tool-call detector reads it on
    its first step (to link to the reasoning parser's parse) and never again; the reasoning detector
    steps its parse directly (no `_OneParse.feed`, no `_split` on a step that releases nothing,
    no `ChatParser` call on a step whose core answer changes nothing there)."""
    counted = CountingContext(plugin._REQUEST)
    monkeypatch.setattr(plugin, "_REQUEST", counted)
    calls = {"feed": 0, "split": 0}
    for name in calls:
        real = getattr(plugin._OneParse, f"_{name}" if name == "split" else name)

        def spy(self: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(plugin._OneParse, f"_{name}" if name == "split" else name, spy)
    offered = tools()
    serving = SimpleNamespace(
        tool_call_parser="chatparse",
        _tool_call_parsing_active=lambda request: True,
        _effective_tools=lambda request: offered,
    )
    request = SimpleNamespace(_response_parser_prefix=PROMPT)

    def no_op(*args: Any, **kwargs: Any) -> None:
        return None

    steps = [OUTPUT[i : i + 1] for i in range(len(OUTPUT))]
    kinds: list[Any] = []  # each step's deltas from the parse (from the second step)
    handed: list[bool] = []  # whether the step handed the core's answer to ChatParser
    # what the core answered: "quiet" (nothing, or a chunk making no delta), "text" (a clean chunk
    # of the open reasoning or content region, with its stream), or "other" (events, ...)
    answers: list[str] = []
    token = counted.real.set(None)
    seen = {"reasoning": "", "content": "", "calls": []}
    try:
        rp = fp = None
        middle: dict[str, int] = {}
        for n, text in enumerate(steps):
            last = n == len(steps) - 1
            if n == 2:  # the first step and its set-up are behind: count the steps between
                middle = {"gets": counted.gets, "sets": counted.sets, **calls}
                before = len(kinds)
            if last:  # ... up to the last step
                inner = {"gets": counted.gets, "sets": counted.sets, **calls}
                # SGLang's per-token calls go straight to the one parse's own steps
                assert rp.detector.parse_streaming_increment == rp.detector._splitter.step
                assert fp is not None and fp.detector.parse_streaming_increment == rp.detector._splitter.take
                stepped = kinds[before:]
                mixed = [d for d in stepped if len(d) > 1 or (d and "tool_calls" in d[0])]
            plugin._hook_reasoning_stream(no_op, serving, 0, text, {}, {}, request, "stop" if last else None)
            if rp is None:
                rp = ReasoningParser(
                    "chatparse", True, False, None, tokenizer=tok, tool_call_parser_active=True
                )
            r, normal = rp.parse_stream_chunk(text)
            if n == 0:  # the parse now exists: see what each step's core answer releases
                one = rp.detector._splitter
                core, answer = one._core, one._answer

                def answered(r: Any, _answer: Any = answer) -> Any:
                    deltas = _answer(r)
                    kinds[-1] = deltas
                    handed[-1] = True
                    return deltas

                def stepped_core(piece: str, _core: Any = core, _chat: Any = one._parser) -> Any:
                    r = _core(piece)
                    kinds.append([])  # unless the answer goes to ChatParser
                    handed.append(False)
                    sink = _chat._sink if type(r) is str else None
                    text = sink is _chat._reasoning or sink is _chat._content
                    answers.append(
                        "quiet" if not r or (type(r) is str and sink is None) else "text" if text else "other"
                    )
                    return r

                one._core, one._answer = stepped_core, answered
            if last:
                r2, n2 = rp.parse_stream_end()
                r, normal = r + r2, normal + n2 if n2 else normal
            plugin._publish_tool_step(request, {"type": "stop"} if last else None)
            fp = fp or FunctionCallParser(offered, "chatparse", tokenizer=tok)
            t, found = fp.parse_stream_chunk(normal)
            if last:
                t2, c2 = fp.parse_stream_end()
                t, found = t + t2, found + c2
            seen["reasoning"] += r
            seen["content"] += t
            seen["calls"] += [(c.name, json.loads(c.parameters)) for c in found]
    finally:
        counted.real.reset(token)
    assert seen == {
        "reasoning": "The user wants the weather.",
        "content": "Let me check.",
        "calls": [("get_weather", {"city": "Paris"})],
    }
    assert "parse_streaming_increment" not in vars(fp.detector)  # finished: the class's own again
    between = len(steps) - 3  # steps 2 .. len-2, each: reasoning hook, tool hook, both parsers
    assert inner["sets"] == middle["sets"]  # no context built between the first and the last step
    assert inner["gets"] - middle["gets"] == 2 * between  # one read per hook, none by the parsers
    assert inner["feed"] == middle["feed"] == 0  # the detector steps the parse itself
    # `_split` (joins, lists) only where a step released a call or several deltas; a step that
    # released nothing, or one reasoning or content delta, returns without it.
    assert len(stepped) == between and sum(1 for d in stepped if not d) > between // 2
    # A step whose core answer changes nothing in ChatParser (most steps: a call being written,
    # text held) does not call it; a clean reasoning or content chunk goes to its stream's piece
    # directly, except the first piece of each stream (the stream's general path: leading space);
    # every other answer goes to ChatParser.
    answered_kinds = answers[before:]
    assert [k for k, h in zip(answered_kinds, handed[before:]) if h and k != "text"] == [
        k for k in answered_kinds if k == "other"
    ]
    assert sum(k == "quiet" for k in answered_kinds) > between // 2
    text_steps = [h for k, h in zip(answered_kinds, handed[before:]) if k == "text"]
    assert len(text_steps) > 5 and sum(text_steps) <= 2
    assert inner["split"] - middle["split"] == len(mixed) < 3


def test_tool_parser_parsing_alone_steps_the_core_and_skips_chatparser_on_quiet_steps(
    tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chatparse tool-call detector after another reasoning parser (it parses the turn itself),
    one character per step: `ChatParser.feed` runs on its first step only; from then on SGLang's
    call goes straight to the parse's own step, which hands `ChatParser` only the core's answers
    that change something there (fewer than half the steps: a call is being written). The result
    is the pipeline's usual one."""
    from chatparse.openai import ChatParser

    counts = {"feed": 0, "answer": 0}
    real_feed, real_answer = ChatParser.feed, ChatParser._answer
    answers: list[str] = []  # per step after the first: what the core answered (see below)
    handed: set[int] = set()  # the steps whose answer went to `ChatParser._answer`

    def feed(self: Any, text: str) -> Any:
        counts["feed"] += 1
        return real_feed(self, text)

    def answer(self: Any, r: Any) -> Any:
        counts["answer"] += 1
        handed.add(len(answers) - 1)
        return real_answer(self, r)

    monkeypatch.setattr(ChatParser, "feed", feed)
    monkeypatch.setattr(ChatParser, "_answer", answer)
    seen: list[Any] = []
    real_step = plugin._tool_steps

    def tool_steps(parser: Any) -> Any:
        core = parser._core_feed

        def recording(text: str) -> Any:
            r = core(text)
            sink = parser._sink if type(r) is str else None
            quiet = not r or (type(r) is str and sink is None)
            answers.append("quiet" if quiet else "content" if sink is parser._content else "other")
            return r

        parser._core_feed = recording
        step = real_step(parser)
        seen.append(step)
        return step

    monkeypatch.setattr(plugin, "_tool_steps", tool_steps)
    msg = pipeline(tok, OUTPUT, chunk=1, reasoning="qwen3")
    # (SGLang's qwen3 reasoning parser keeps the newlines around the reasoning)
    assert msg["reasoning"].strip() == "The user wants the weather." and msg["content"] == "Let me check."
    assert [(c["name"], json.loads(c["arguments"])) for c in msg["calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    steps = len(OUTPUT)  # the pipeline calls the tool-call parser on every step
    assert len(seen) == 1 and counts["feed"] == 1
    # `_answer` only where something can change in ChatParser (plus `feed`'s own first step)
    assert 0 < counts["answer"] < steps // 4, counts
    # ... and not for a clean content chunk either (its stream's piece, straight from the step),
    # except the content's first piece (the stream's general path: leading space)
    assert all(answers[i] != "quiet" for i in handed)
    assert {i for i, k in enumerate(answers) if k == "other"} <= handed
    content = [i for i, k in enumerate(answers) if k == "content"]
    assert len(content) > 5 and len(handed.intersection(content)) <= 1


def test_per_request_derivations_are_made_once(tok: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reasoning detector and a tool-call detector per request: the reasoning markers, the
    literal reasoning openers the prompt probe needs and the tool-call detector's template variant
    and policy are derived once per template, not per request."""
    from chatparse.integrations._common import Resolved

    variants = calls_of(monkeypatch, Resolved, "variant")
    tool_detector: list[int] = []  # `Resolved.variant` calls per tool-call detector and prefix
    literal: list[Any] = []
    openers: list[Any] = []
    real_literal, real_openers = plugin.delimiter_literal, plugin._derive_reasoning_openers
    monkeypatch.setattr(plugin, "delimiter_literal", lambda d, t: literal.append(d) or real_literal(d, t))
    monkeypatch.setattr(plugin, "_derive_reasoning_openers", lambda r: openers.append(r) or real_openers(r))
    with environ(CHATPARSE_TEMPLATE_OVERRIDE="qwen3_xml"):  # a template not resolved before
        token = plugin._REQUEST.set({"prefix": PROMPT + "<think>\n", "finish_reason": None})
        try:
            for _ in range(5):
                rp = ReasoningParser(
                    "chatparse", True, False, None, tokenizer=tok, tool_call_parser_active=True
                )
                assert (rp.detector.think_start_token, rp.detector.think_end_token) == ("<think>", "</think>")
                before = variants[0]
                assert plugin.ChatparseDetector(tokenizer=tok)._prefix() == PROMPT
                tool_detector.append(variants[0] - before)
        finally:
            plugin._REQUEST.reset(token)
    assert len(literal) == 2 and len(openers) == 1  # opener and closer once; the openers once
    # the tool-call detector's templates (the one it parses with, the whole one): its first asks
    assert tool_detector[0] > 0 and tool_detector[1:] == [0, 0, 0, 0]


def test_the_prompt_probe_runs_once_per_prompt_tail(tok: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tool-call detector's prompt probe (a parse of the prompt, to drop the reasoning regions
    it opens) depends only on the prompt past its last start anchor: requests whose prompts end
    alike (a server's prompts end in a few generation prompts) parse it once, whatever came before
    the anchor; a different tail is probed afresh and keeps its own answer."""
    built = calls_of(monkeypatch, plugin, "ResponseParser")
    off = "<|im_start|>assistant\n<think>\n\n</think>\n\n"  # thinking disabled by the prompt
    on = "<|im_start|>assistant\n<think>\n"  # thinking: the prompt opens reasoning
    with environ(CHATPARSE_TEMPLATE_OVERRIDE="qwen3_xml"):
        plugin.resolve(tok).memo.pop("sglang.prompt_tails", None)  # (what earlier tests probed)
        prompts = [
            (
                f"<|im_start|>user\nquestion {i}<|im_end|>\n" + tail,
                f"<|im_start|>user\nquestion {i}<|im_end|>\n" + kept,
            )
            for i in range(6)
            for tail, kept in ((off, "<|im_start|>assistant\n\n\n"), (on, "<|im_start|>assistant\n"))
        ]
        for prompt, kept in prompts:
            token = plugin._REQUEST.set({"prefix": prompt, "finish_reason": None})
            try:
                assert plugin.ChatparseDetector(tokenizer=tok)._prefix() == kept
            finally:
                plugin._REQUEST.reset(token)
    assert built[0] == 2  # one probe per tail, 12 requests


def test_a_new_requests_context_carries_nothing_of_another_request() -> None:
    """The hooks rebuild the context on a request's first and last step from its own earlier
    context only: another request's parse or tools (a context that leaked into this task) never
    reach this request's detectors."""
    a, b = (SimpleNamespace(_response_parser_prefix=p) for p in ("A", "B"))
    serving = SimpleNamespace(
        tool_call_parser="chatparse", _tool_call_parsing_active=lambda r: True, _effective_tools=lambda r: [r]
    )

    def no_op(*args: Any, **kwargs: Any) -> None:
        return None

    token = plugin._REQUEST.set(None)
    try:
        plugin._hook_reasoning_stream(no_op, serving, 0, "", {}, {}, a, None)
        plugin.request_context()["one_parse"] = stale = object()
        plugin._hook_reasoning_stream(no_op, serving, 0, "", {}, {}, a, "stop")  # a's last step
        assert plugin.request_context()["one_parse"] is stale and plugin.request_context()["tools"] == [a]
        plugin._hook_reasoning_stream(no_op, serving, 0, "", {}, {}, b, None)
        ctx = plugin.request_context()
        assert ctx["one_parse"] is None and ctx["tools"] == [b] and ctx["prefix"] == "B"
        plugin.request_context()["one_parse"] = stale
        plugin._publish_tool_step(
            a, {"type": "stop"}
        )  # a step of a (no reasoning parser): b's parse stays b's
        assert "one_parse" not in plugin.request_context() and plugin.request_context()["prefix"] == "A"
    finally:
        plugin._REQUEST.reset(token)
