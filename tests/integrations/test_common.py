"""What the engine plugins share, without any engine: template resolution, policies, `tool_choice`,
finish-reason recovery, stop token ids, and the reasoning splitter (with hypothesis properties)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse import catalog
from chatparse.errors import RequiredFieldsMissing
from chatparse.integrations import _common as C
from chatparse.integrations._split import ReasoningSplitter, ToolsOffSplitter

from ..support.build import pure_only
from ..support.counting import calls_of

QWEN_PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


class Tok:
    """A tokenizer as far as resolution looks at one (attributes only)."""

    def __init__(self, name: str | None = None, chat_template: Any = None, init_kwargs: Any = None) -> None:
        self.name_or_path = name
        self.chat_template = chat_template
        self.init_kwargs = init_kwargs or {}


OWN = {"start_anchor": "A", "fields": {"content": {"close": "<end>"}}}


# --------------------------------------------------------------------------------------------------
# resolution


def test_the_tokenizers_own_template_comes_first() -> None:
    r = C.resolve(Tok("Qwen/Qwen3-8B", init_kwargs={"response_template": OWN}), env={})
    assert (r.source, r.spec) == ("tokenizer", OWN)


def test_then_the_catalog_by_model_id_then_by_chat_template() -> None:
    r = C.resolve(Tok("unsloth/Qwen3-8B-GGUF"), env={})
    assert (r.name, r.source) == ("qwen3", "catalog (model id)")
    r = C.resolve(Tok("/models/local", "{{'<|im_start|>'}} <tool_call> <function="), env={})
    assert (r.name, r.source) == ("qwen3_xml", "catalog (chat template)")
    r = C.resolve(Tok("/models/local"), model="deepseek-ai/DeepSeek-V3.1", env={})
    assert r.name == "deepseek_v31"  # the engine's model name when the tokenizer's path says nothing


def test_then_the_environment(tmp_path: Path) -> None:
    assert C.resolve(Tok("acme/x"), env={"CHATPARSE_TEMPLATE": "gemma4"}).name == "gemma4"
    f = tmp_path / "tokenizer_config.json"
    f.write_text(json.dumps({"response_template": OWN}))
    r = C.resolve(Tok("acme/x"), env={"CHATPARSE_TEMPLATE": str(f)})
    assert (r.spec, r.source) == (OWN, "environment")
    bare = tmp_path / "t.json"
    bare.write_text(json.dumps(OWN))
    assert C.resolve(Tok("acme/x"), env={"CHATPARSE_TEMPLATE": str(bare)}).spec == OWN
    # the fallback never overrides what applies
    assert C.resolve(Tok("Qwen/Qwen3-8B"), env={"CHATPARSE_TEMPLATE": "gemma4"}).name == "qwen3"


def test_the_override_wins_over_everything() -> None:
    tok = Tok("Qwen/Qwen3-8B", init_kwargs={"response_template": OWN})
    r = C.resolve(tok, env={"CHATPARSE_TEMPLATE_OVERRIDE": "qwen3_xml"})
    assert (r.name, r.source) == ("qwen3_xml", "override")


def test_no_template_is_one_line_naming_what_to_set() -> None:
    with pytest.raises(C.TemplateNotFound) as err:
        C.resolve(Tok("acme/unheard-of-7b"), env={})
    message = str(err.value)
    assert "\n" not in message
    assert "acme/unheard-of-7b" in message and "CHATPARSE_TEMPLATE" in message


@pytest.mark.parametrize(
    "value, error",
    [("nope", "neither a file nor a catalog template"), ("{bad", "neither a file nor a catalog template")],
)
def test_bad_environment_values(value: str, error: str) -> None:
    with pytest.raises(C.IntegrationError, match=error):
        C.resolve(Tok("acme/x"), env={"CHATPARSE_TEMPLATE": value})


def test_unreadable_or_invalid_template_files(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text("{not json")
    with pytest.raises(C.IntegrationError, match="cannot read a JSON template"):
        C.resolve(Tok("acme/x"), env={"CHATPARSE_TEMPLATE": str(f)})
    f.write_text(json.dumps({"fields": {"content": {"bogus": 1}}}))
    with pytest.raises(C.IntegrationError, match="is invalid"):
        C.resolve(Tok("acme/x"), env={"CHATPARSE_TEMPLATE": str(f)})


def test_resolution_is_cached_per_tokenizer_and_environment() -> None:
    tok = Tok("Qwen/Qwen3-8B")
    a = C.resolve(tok, env={})
    assert C.resolve(tok, env={}) is a
    assert C.resolve(tok, env={"CHATPARSE_TEMPLATE_OVERRIDE": "gemma4"}).name == "gemma4"


def test_resolution_keeps_each_environment_per_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that switches templates by environment (tests, benchmarks) resolves each once: a
    switch back does not resolve and compile the template again."""
    resolved: list[Any] = []
    real = C._resolve
    monkeypatch.setattr(C, "_resolve", lambda *args: resolved.append(args) or real(*args))
    tok = Tok("Qwen/Qwen3-8B")
    envs = [{}, {"CHATPARSE_TEMPLATE_OVERRIDE": "gemma4"}, {"CHATPARSE_UNKNOWN_TOOLS": "drop"}]
    first = [C.resolve(tok, env=e) for e in envs]
    assert [r.name for r in first] == ["qwen3", "gemma4", "qwen3"] and len(resolved) == 3
    for _ in range(3):
        assert [C.resolve(tok, env=e) for e in envs] == first
        assert all(C.resolve(tok, env=e) is r for e, r in zip(envs, first))
    assert len(resolved) == 3


def test_variants_leave_fields_out() -> None:
    r = C.resolve(Tok("Qwen/Qwen3-8B"), env={})
    assert set(r.template.fields) == {"reasoning_content", "tool_calls", "content"}
    assert set(r.variant(reasoning=False, tools=True).fields) == {"tool_calls", "content"}
    assert set(r.variant(reasoning=True, tools=False).fields) == {"reasoning_content", "content"}
    assert r.variant(reasoning=False, tools=False) is r.variant(reasoning=False, tools=False)  # compiled once
    implicit = C.Resolved(
        {"fields": {"thinking": {"close": "</think>"}, "content": {"open": "<a>"}}}, "x", "env"
    )
    assert implicit.variant(reasoning=False, tools=True) is None  # content alone has no implicit field


# --------------------------------------------------------------------------------------------------
# policies, tool_choice, finish reasons


def test_policies() -> None:
    assert C.Policy.from_env({}, engine="vllm") == C.Policy(reasoning_key="both")
    assert C.Policy.from_env({}, engine="sglang") == C.Policy()
    p = C.Policy.from_env(
        {
            "CHATPARSE_STREAM_TOOL_CALLS": "early",
            "CHATPARSE_UNKNOWN_TOOLS": "DROP",
            "CHATPARSE_CALL_IDS": "engine",
        },
        engine="sglang",
    )
    assert (p.stream_tool_calls, p.unknown_tools, p.call_ids) == ("early", "drop", "engine")
    with pytest.raises(C.IntegrationError, match="CHATPARSE_REASONING_KEY='x' is not one of both"):
        C.Policy.from_env({"CHATPARSE_REASONING_KEY": "x"}, engine="vllm")


@pytest.mark.parametrize(
    "choice, mode",
    [
        (None, "auto"),
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"function": {"name": "f"}}, "named"),
    ],
)
def test_tool_choice(choice: Any, mode: str) -> None:
    assert C.tool_choice_mode(choice) == mode
    offered = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert C.forces_tool_calls(choice, offered) == (mode in ("required", "named"))
    assert not C.forces_tool_calls(choice, None)  # nothing to choose from
    resolved = C.Resolved(catalog.get("qwen3"), "qwen3", "override", ("<|im_end|>",))
    c = C.tool_constraint(resolved, resolved.template, choice, offered)
    assert (c is not None) == (mode in ("required", "named"))
    if c is not None:
        assert c.tool_choice == ("required" if mode == "required" else "f")
        assert "<|im_end|>" not in c.gbnf()  # the engine stops there: never written
    assert C.tool_constraint(resolved, resolved.template, choice, None) is None


def test_tool_constraint_names_the_template_and_field_it_cannot_express() -> None:
    # MuSE Glimmer's argument tags use \b, which no grammar writes (docs/constraints.md)
    gpt = C.Resolved(catalog.get("muse_glimmer"), "muse_glimmer", "override")
    offered = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
        }
    ]
    with pytest.raises(C.ToolChoiceError) as err:
        C.tool_constraint(gpt, gpt.template, "required", offered)
    assert err.value.parameter == "tool_choice"
    assert "muse_glimmer" in str(err.value) and "tool_calls" in str(err.value)
    qwen = C.Resolved(catalog.get("qwen3"), "qwen3", "override")
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}
    pattern = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    with pytest.raises(C.ToolChoiceError) as err:
        C.tool_constraint(qwen, qwen.template, {"type": "function", "function": {"name": "f"}}, pattern)
    assert err.value.parameter == "tools" and "'pattern'" in str(err.value) and "qwen3" in str(err.value)


def test_tool_dicts() -> None:
    class Model:
        def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
            return {"type": "function", "function": {"name": "f", "parameters": {}}}

    responses = {"type": "function", "name": "g", "parameters": {}}
    assert [t["function"]["name"] for t in C.tool_dicts([Model(), responses, {"type": "web_search"}])] == [
        "f",
        "g",
    ]


class Attrs:
    """An engine's pydantic tool as far as the plugins read one, with the attributes read counted."""

    def __init__(self, counted: list[str], **values: Any) -> None:
        object.__setattr__(self, "_counted", counted)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> Any:
        if name not in self._values:
            raise AttributeError(name)
        self._counted.append(name)
        return self._values[name]

    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        raise AssertionError("not dumped")


def test_parser_tools_read_name_and_parameters_only() -> None:
    """What a parser needs of the request's tools is their name and parameters schema (its tool
    table); the plugins read nothing else of them per request. Other shapes as `tool_dicts`."""
    from chatparse.tools import build_tool_table

    read: list[str] = []
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
    fn = Attrs(read, name="get_weather", description="d" * 500, parameters=schema, strict=True)
    bare = Attrs(read, name="ping", description="no parameters", parameters=None, strict=None)
    dicts = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    responses = {"type": "function", "name": "g", "parameters": {}}
    offered = [Attrs(read, type="function", function=fn), Attrs(read, type="function", function=bare)]
    offered += [*dicts, responses, {"type": "web_search"}]
    got = C.parser_tools(offered)
    assert (
        "description" not in read
        and "strict" not in read
        and sorted(set(read))
        == [
            "function",
            "name",
            "parameters",
        ]
    )
    want = {"get_weather": schema["properties"], "ping": {}, "f": schema["properties"], "g": {}}
    assert build_tool_table(got) == want


def test_parser_tool_table_is_the_table_of_parser_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """`parser_tool_table` gives what `build_tool_table(parser_tools(...))` gives (None when empty),
    in one pass: no intermediate dict for the engines' pydantic tools, nothing else read of them."""
    from chatparse.tools import ToolTable, build_tool_table

    read: list[str] = []
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
    fn = Attrs(read, name="get_weather", description="d" * 500, parameters=schema, strict=True)
    bare = Attrs(read, name="ping", description="no parameters", parameters=None, strict=None)
    again = Attrs(read, name="f", parameters={"type": "object"})  # a later tool of the same name wins
    dicts = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    responses = {"type": "function", "name": "g", "parameters": {}}
    shapes: list[list[Any]] = [
        [Attrs(read, type="function", function=fn), Attrs(read, type="function", function=bare)],
        [*dicts, responses, {"type": "web_search"}, Attrs(read, type="function", function=again)],
        [{"type": "web_search"}],
        [],
    ]
    for offered in shapes:
        want = build_tool_table(C.parser_tools(offered)) or None
        got = C.parser_tool_table(offered)
        assert got == want and (got is None or type(got) is ToolTable)
    assert "description" not in read and "strict" not in read
    built = calls_of(monkeypatch, C, "tool_dicts")
    C.parser_tool_table(shapes[0])
    assert built[0] == 0  # the pydantic tools went straight into the table


def test_recover_finish_reason() -> None:
    stops = frozenset({2})
    cases = [
        ({"last_ids": [2], "generated": 5, "max_tokens": 5}, "stop"),
        ({"last_ids": [9], "generated": 5, "max_tokens": 5}, "length"),
        ({"last_ids": [9], "generated": 4, "max_tokens": 5}, "stop"),
        ({"last_ids": [], "generated": 0, "max_tokens": None}, "stop"),
        (
            {"last_ids": [9], "generated": 6, "max_tokens": None, "prompt_tokens": 4, "max_model_len": 10},
            "length",
        ),
    ]
    for kw, want in cases:
        assert C.recover_finish_reason(stop_ids=stops, **kw) == want, kw


def test_stop_token_ids_from_eos_catalog_markers_and_request() -> None:
    class T:
        eos_token_id = 1
        unk_token_id = 0

        def convert_tokens_to_ids(self, text: str) -> int:
            return {"<|im_end|>": 5, "<|endoftext|>": 1}.get(text, 0)

    r = C.resolve(Tok("Qwen/Qwen3-8B"), env={})
    assert C.stop_token_ids(T(), r, [42]) == frozenset({1, 5, 42})


# --------------------------------------------------------------------------------------------------
# the reasoning splitter


def qwen3() -> Any:
    return catalog.load("qwen3")


def split_all(
    template: Any, prefix: str, pieces: list[str], cls: Any = ReasoningSplitter, **kw: Any
) -> tuple[str, str]:
    """`(reasoning, normal text)` of a splitter fed `pieces`, then finished."""
    s = cls(template, prefix=prefix, **kw)
    r, n = [], []
    for p in pieces:
        a, b = s.feed(p)
        r.append(a)
        n.append(b)
    a, b = s.finish()
    return "".join(r) + a, "".join(n) + b


def test_splitter_consumes_reasoning_and_passes_the_rest_verbatim() -> None:
    text = "<think>\n a b \n</think>\n\nHi <tool_call>\n{}\n</tool_call> bye"
    assert split_all(qwen3(), QWEN_PROMPT, [text]) == ("a b", "Hi <tool_call>\n{}\n</tool_call> bye")
    assert split_all(qwen3(), QWEN_PROMPT + "<think>\n", ["x\n</think>y"]) == ("x", "y")
    assert split_all(qwen3(), QWEN_PROMPT, ["no reasoning"]) == ("", "no reasoning")
    s = ReasoningSplitter(qwen3(), prefix=QWEN_PROMPT + "<think>\n")
    assert s.in_reasoning and not s.reasoning_ended


def test_splitter_never_passes_prompt_text_on() -> None:
    prompt = QWEN_PROMPT + "<think>\n\n</think>\n\n"
    assert split_all(qwen3(), prompt, ["Answer."]) == ("", "Answer.")


@pure_only  # counts `ResponseParser._finish` and `Scanner.undecided` by patching them
def test_splitter_end_builds_no_core_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """The splitter's end reads the core's last events only: no final message of the core and no
    cut-off report (an output ending in a held opener start, so there is one to make)."""
    from chatparse import _parser, _scan

    message = calls_of(monkeypatch, _parser.ResponseParser, "_finish")
    undecided = calls_of(monkeypatch, _scan.Scanner, "undecided")
    for cls in (ReasoningSplitter, ToolsOffSplitter):
        assert split_all(qwen3(), QWEN_PROMPT, ["<think>\nx\n</think>\n\nHi <tool_c"], cls) == (
            "x",
            "Hi <tool_c",
        )
    assert message[0] == 0 and undecided[0] == 0


TEXTS = [
    '<think>\nplan\n</think>\n\nok <tool_call>\n{"name": "f", "arguments": {"a": "</think>"}}\n</tool_call>',
    "<think>\n\n</think>\n\nplain answer",
    "<think>unterminated reasoning <tool",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(range(len(TEXTS))), pre=st.booleans())
def test_splitter_streamed_equals_one_shot(data: st.DataObject, which: int, pre: bool) -> None:
    text = TEXTS[which]
    prefix = QWEN_PROMPT + ("<think>\n" if pre else "")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    assert split_all(qwen3(), prefix, pieces) == split_all(qwen3(), prefix, [text])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["<think>", "</think>", "<tool_call>", "</tool_call>", "\n", " ", "x", "{", "}", '"', "é"]
        ),
        max_size=40,
    ),
    st.sampled_from(catalog.names()),
)
def test_splitter_takes_any_text(pieces: list[str], name: str) -> None:
    template = catalog.load(name)
    prompt = (catalog.describe(name).get("generation_prompt") or "") if name != "inkling" else ""
    reasoning, normal = split_all(template, prompt, pieces)
    assert isinstance(reasoning, str) and isinstance(normal, str)
    assert (reasoning, normal) == split_all(template, prompt, ["".join(pieces)])


# --------------------------------------------------------------------------------------------------
# tools off: calls stay in the content verbatim


def off_all(template: Any, prefix: str, pieces: list[str], split_reasoning: bool = True) -> tuple[str, str]:
    return split_all(template, prefix, pieces, ToolsOffSplitter, split_reasoning=split_reasoning)


def _call_spans(template: Any, prefix: str, text: str) -> list[str]:
    """The raw text of each tool-call region (delimiters included), as the parser delimits them."""
    from chatparse._parser import ResponseParser

    p = ResponseParser(template, prefix=prefix)
    events = p.feed(text)
    try:
        events += p.finalize()[1]
    except RequiredFieldsMissing as e:
        events += e.events
    buf, out, start = p.input_text, [], None
    for e in events:
        if e["field"] != C.TOOL_FIELD or e["type"] == "region_chunk":
            continue
        if e["type"] == "region_open":
            start = e["start"]
        elif start is not None:
            out.append(buf[start : e["end"]])
            start = None
    if start is not None:
        out.append(buf[start:])
    return out


def _corpus_cases() -> list[tuple[str, str, str]]:
    pytest.importorskip("canitoolcall")
    from canitoolcall.fixtures import load_families, load_fixtures

    from tests.conformance import harness as H

    fams, layer, out = load_families(), H.load_layer(), []
    for fx in load_fixtures():
        try:
            cfg = H.config_for(fx, layer, fams)
        except H.Unsupported:
            continue
        if catalog.load(cfg.template_name).fields.get(C.TOOL_FIELD) is not None:
            out.append((fx.id, cfg.template_name, cfg.kwargs["prefix"]))
    return out


def test_tools_off_keeps_every_call_verbatim_on_the_corpus() -> None:
    """Every canitoolcall output of a template with calls: each call region the parser delimits is
    in the content, verbatim and in order; the reasoning is what `ReasoningSplitter` takes out;
    streamed in 7-character pieces equals one-shot; without a reasoning parser, the reasoning stays
    in the content too."""
    from canitoolcall.fixtures import load_fixtures

    texts = {fx.id: fx.raw_output for fx in load_fixtures()}
    cases = _corpus_cases()
    calls = 0
    for fid, name, prefix in cases:
        template, text = catalog.load(name), texts[fid]
        reasoning, content = off_all(template, prefix, [text])
        pos = 0
        for span in _call_spans(template, prefix, text):
            found = content.find(span.strip(), pos)
            assert found >= 0, (fid, span, content)
            pos = found + len(span.strip())
            calls += 1
        assert reasoning == split_all(template, prefix, [text])[0], fid
        pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
        assert off_all(template, prefix, pieces) == (reasoning, content), fid
        raw_r, raw_c = off_all(template, prefix, [text], split_reasoning=False)
        assert raw_r == "" and text.strip().endswith(raw_c.strip()), fid
    assert len(cases) > 300 and calls > 300


def test_tools_off_drops_only_content_framing() -> None:
    gpt = catalog.load("gpt_oss")
    text = (
        "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Paris is nice."
    )
    assert off_all(gpt, "<|start|>assistant", [text]) == ("hm", "Paris is nice.")
    call = "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>"
    assert off_all(gpt, "<|start|>assistant", ["<|channel|>analysis<|message|>hm<|end|>" + call]) == (
        "hm",
        call,
    )
    kimi = catalog.load("kimi_k2")
    body = (
        "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"
    )
    assert off_all(kimi, "<|im_assistant|>assistant<|im_middle|>", ["<think>hm</think>" + body]) == (
        "hm",
        body,
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<think>",
                "</think>",
                "<tool_call>",
                "</tool_call>",
                "<|tool_call_begin|>",
                "\n",
                " ",
                "x",
                "{",
                "}",
            ]
        ),
        max_size=40,
    ),
    st.sampled_from([n for n in catalog.names() if catalog.load(n).fields.get(C.TOOL_FIELD) is not None]),
    st.booleans(),
)
def test_tools_off_takes_any_text(pieces: list[str], name: str, split_reasoning: bool) -> None:
    template = catalog.load(name)
    prompt = (catalog.describe(name).get("generation_prompt") or "") if name != "inkling" else ""
    got = off_all(template, prompt, pieces, split_reasoning)
    assert got == off_all(template, prompt, ["".join(pieces)], split_reasoning)


# --------------------------------------------------------------------------------------------------
# per-step results built without validation


def test_prebuilt_builds_what_validation_builds() -> None:
    from pydantic import BaseModel, ConfigDict

    class Delta(BaseModel):  # the shape of vLLM's DeltaMessage: defaults, a list, extras allowed
        model_config = ConfigDict(extra="allow")
        role: str | None = None
        content: str | None = None
        tool_calls: list[Any] = []

    build = C.prebuilt(Delta, {"content": "x"})
    assert build is not Delta
    for text in ("", "a", "é\n<tag>"):
        got, want = build(content=text), Delta(content=text)
        assert got == want and got.model_dump() == want.model_dump()
        assert got.model_fields_set == want.model_fields_set == {"content"}
        assert got.model_dump_json(exclude_unset=True) == want.model_dump_json(exclude_unset=True)
    a, b = build(content="1"), build(content="2")
    a.tool_calls.append(1)
    assert b.tool_calls == [] and Delta().tool_calls == []  # a fresh list each, as validation gives
    # A key the model keeps as an extra (vLLM's `reasoning_content`) goes to the extra slot.
    both = C.prebuilt(Delta, {"content": "x", "reasoning_content": "x"})
    assert both is not Delta
    got, want = both(content="c", reasoning_content="r"), Delta(content="c", reasoning_content="r")
    assert got == want and got.model_dump() == want.model_dump() and got.reasoning_content == "r"


def test_prebuilt_stores_through_the_slots_own_descriptors() -> None:
    """The slots pydantic keeps per instance are stored through their descriptors (found once),
    not `object.__setattr__` (which looks each name up through the class's MRO per store)."""
    from pydantic import BaseModel

    class Result(BaseModel):
        normal_text: str = ""
        calls: list[Any] = []

    for name in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
        descriptor = next(k.__dict__[name] for k in Result.__mro__ if name in k.__dict__)
        assert C._slot_setter(Result, name) == descriptor.__set__
    build = C.prebuilt(Result, {"normal_text": "x"})
    got = build(normal_text="é")
    assert got == Result(normal_text="é") and got.calls == [] and got.model_fields_set == {"normal_text"}


def test_prebuilt_falls_back_to_validation_when_it_would_differ() -> None:
    from pydantic import BaseModel, ConfigDict, field_validator

    class Stripped(BaseModel):
        text: str = ""

        @field_validator("text")
        @classmethod
        def strip(cls, v: str) -> str:
            return v.strip()

    class Closed(BaseModel):  # extras forbidden: an unknown key must raise, as validation does
        model_config = ConfigDict(extra="forbid")
        text: str = ""

    assert C.prebuilt(Stripped, {"text": "x"}) is Stripped
    assert C.prebuilt(Closed, {"other": "x"}) is Closed
    assert C.prebuilt(dict, {"text": "x"}) is dict  # not a pydantic model


# --------------------------------------------------------------------------------------------------
# the reasoning delimiter an engine tokenizes


class AddedVocabTok:
    """A tokenizer as far as `delimiter_literal` looks at one: added tokens, counted."""

    def __init__(self, added: list[str]) -> None:
        self.added = list(added)
        self.asked = 0

    def __len__(self) -> int:
        return 100 + len(self.added)

    def get_added_vocab(self) -> dict[str, int]:
        self.asked += 1
        return {t: 100 + i for i, t in enumerate(self.added)}


def test_delimiter_literal_reads_the_added_vocabulary_once_per_tokenizer() -> None:
    # deepseek_r1_distill's reasoning opener is the pattern `^\s*<think>`: the engine tokenizes the
    # added token it matches, found once per tokenizer (engines build a detector per request).
    t = catalog.load("deepseek_r1_distill")
    opener = next(f.opener for f in t.fields.values() if f.opener is not None and f.opener.literals is None)
    tok = AddedVocabTok(["<｜end▁of▁sentence｜>", "<think>", "<tool_call>"])
    assert [C.delimiter_literal(opener, tok) for _ in range(5)] == ["<think>"] * 5
    assert tok.asked == 1
    tok.added.append(" <think>")  # a token added later: the vocabulary size changed, asked again
    assert C.delimiter_literal(opener, tok) == "<think>"
    assert tok.asked == 2
    assert C.delimiter_literal(opener, AddedVocabTok(["<tool_call>"])) is None


def test_per_request_properties_of_the_template_are_computed_once() -> None:
    """Every parser an engine creates per request asks which field is reasoning and whether the
    template has calls: the answers are kept on the `Resolved` after the first question."""
    r = C.resolve(Tok("Qwen/Qwen3-8B"), env={})
    assert (r.reasoning_field, r.has_tools) == ("reasoning_content", True)
    assert vars(r)["reasoning_field"] == "reasoning_content" and vars(r)["has_tools"] is True
    r2 = C.resolve(Tok("acme/x"), env={"CHATPARSE_TEMPLATE": "mistral_v3"})
    assert (r2.reasoning_field, r2.has_tools) == (None, True)
    assert "reasoning_field" in vars(r2)
