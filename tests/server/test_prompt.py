"""Tests for `chatparse.server._prompt`: chat templates rendered locally, like transformers does.

The renders are compared with `transformers`' own `apply_chat_template(..., tokenize=False)` on
tokenizers loaded (offline) from the same model folders, on the re-created model templates in
``tests/data/chat_templates`` and random conversations.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse.server._prompt import MAX_RENDERED_CHARS, ChatTemplate, ChatTemplateError

# Before transformers is imported anywhere: nothing may be downloaded
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

DATA = Path(__file__).resolve().parents[1] / "data" / "chat_templates"
PROMPT_MODULE = Path(__file__).resolve().parents[2] / "src" / "chatparse" / "server" / "_prompt.py"
TEMPLATE_NAMES = sorted(p.stem for p in DATA.glob("*.jinja"))

# The tokenizer_config.json special tokens of each test model (several token spellings on purpose)
TOKEN_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen3": {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen3_small": {"bos_token": None, "eos_token": "<|im_end|>"},
    "deepseek_r1": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "lfm2": {"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>"},
    "llama3": {
        "bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>", "lstrip": False},
        "eos_token": "<|eot_id|>",
    },
    "gpt_oss": {"eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "gemma": {
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "image_token": "<image_soft_token>",
        "extra_special_tokens": {"boi_token": "<start_of_image>"},
    },
}


# --------------------------------------------------------------------------------------------------
# helpers


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def make_model_dir(
    path: Path,
    *,
    jinja: str | None = None,
    config: dict[str, Any] | None = None,
    extra: dict[str, str] | None = None,
    chat_template_json: Any = None,
) -> Path:
    """A model folder: tokenizer_config.json (if `config`), chat_template.jinja,
    additional_chat_templates/*.jinja, chat_template.json."""
    path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        write_json(path / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast", **config})
    if jinja is not None:
        (path / "chat_template.jinja").write_text(jinja, encoding="utf-8")
    for name, text in (extra or {}).items():
        (path / "additional_chat_templates").mkdir(exist_ok=True)
        (path / "additional_chat_templates" / f"{name}.jinja").write_text(text, encoding="utf-8")
    if chat_template_json is not None:
        write_json(path / "chat_template.json", {"chat_template": chat_template_json})
    return path


def hf_tokenizer(path: Path) -> Any:
    """transformers' tokenizer for a model folder (a tiny word-level tokenizer.json is added)."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    if not (path / "tokenizer.json").exists():
        vocab = {"<unk>": 0, "hello": 1}
        tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
        tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
        tok.save(str(path / "tokenizer.json"))
    if not (path / "tokenizer_config.json").exists():
        write_json(path / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast"})
    return transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def vllm_prepared(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What serving engines hand to transformers: text parts joined, JSON-string arguments parsed.
    An assistant message's null or missing content is "" (vLLM). (Reasoning aliases and None-dropping
    are left to transformers itself.)"""
    out = copy.deepcopy(messages)
    for message in out:
        if message.get("role") == "assistant" and message.get("content") is None:
            message["content"] = ""
        if isinstance(message.get("content"), list):
            message["content"] = "\n".join(part["text"] for part in message["content"])
        for call in message.get("tool_calls") or []:
            arguments = call["function"]["arguments"]
            if isinstance(arguments, str):
                try:
                    parsed = json.loads(arguments)
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    call["function"]["arguments"] = parsed
    return out


def compare(
    ours: ChatTemplate,
    tok: Any,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    enable_thinking: bool | None = None,
    **extra: Any,
) -> str | None:
    """Render with both; assert the same string, or that both raise. Returns our render."""
    import jinja2

    kwargs = dict(extra)
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    before = copy.deepcopy(messages)
    try:
        expected = tok.apply_chat_template(
            vllm_prepared(messages),
            tools=tools,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **kwargs,
        )
        reference_error = None
    except Exception as exc:  # the template (or transformers) rejected the conversation
        reference_error = exc
    try:
        got = ours.render(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            enable_thinking=enable_thinking,
            **extra,
        )
        our_error = None
    except ChatTemplateError as exc:
        got, our_error = None, exc
    assert messages == before, "render() mutated the caller's messages"
    if reference_error is not None:
        assert our_error is not None, f"transformers raised {reference_error!r}, we rendered {got!r}"
        if type(reference_error) is jinja2.TemplateError:  # raise_exception(): same message
            assert str(reference_error) in str(our_error)
        return None
    assert our_error is None, f"we raised {our_error}, transformers rendered {expected!r}"
    assert got == expected
    return got


# --------------------------------------------------------------------------------------------------
# random conversations

_PIECES = [
    *"abZ \n\t",
    "é",
    "中",
    "😀",
    '"',
    "'",
    "\\",
    "{",
    "}",
    "<",
    ">",
    "/",
    "|",
    ": ",
    "hello world",
    "</think>",
    "<think>",
    "<tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<|im_end|>",
    "[INST]",
    "<|channel|>final<|message|>",
    "{{ x }}",
]
text = st.lists(st.sampled_from(_PIECES), max_size=8).map("".join)
ident = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ident, inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(ident, json_values, max_size=4)
call_ids = st.from_regex(r"[A-Za-z0-9]{9}", fullmatch=True) | st.from_regex(
    r"call_[a-z0-9]{1,12}", fullmatch=True
)
content = text | st.lists(text.map(lambda t: {"type": "text", "text": t}), max_size=3)


@st.composite
def tool_calls(draw: Any) -> dict[str, Any]:
    args = draw(arguments)
    form = draw(st.sampled_from(["object", "json", "json", "invalid json", "json array"]))
    raw: Any = {
        "object": args,
        "json": json.dumps(args),
        "invalid json": json.dumps(args)[:-1],
        "json array": json.dumps([args]),
    }[form]
    return {"id": draw(call_ids), "type": "function", "function": {"name": draw(ident), "arguments": raw}}


@st.composite
def assistant_messages(draw: Any, *, calls: bool | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    with_calls = draw(st.booleans()) if calls is None else calls
    if with_calls:
        message["tool_calls"] = draw(st.lists(tool_calls(), min_size=1, max_size=2))
        message["content"] = draw(st.none() | st.just("") | content)
    else:
        message["content"] = draw(content)
    keys = draw(
        st.sampled_from(
            [(), ("reasoning_content",), ("thinking",), ("reasoning",), ("reasoning_content", "thinking")]
        )
    )
    if keys:
        reasoning = draw(text)
        for key in keys:
            message[key] = reasoning
    return message


def simple(role: str) -> Any:
    return st.builds(lambda c: {"role": role, "content": c}, content)


tool_messages = st.builds(lambda c, i: {"role": "tool", "content": c, "tool_call_id": i}, content, call_ids)
any_message = simple("system") | simple("user") | assistant_messages() | tool_messages


@st.composite
def conversations(draw: Any, *, tool_turns: bool = True) -> list[dict[str, Any]]:
    if draw(st.integers(0, 3)) == 0:  # anything goes (mostly exercises "both raise")
        return draw(st.lists(any_message, min_size=1, max_size=6))
    messages = [draw(simple("system"))] if draw(st.booleans()) else []
    turns = draw(st.integers(1, 3))
    for turn in range(turns):
        messages.append(draw(simple("user")))
        if tool_turns and draw(st.booleans()):
            call = draw(assistant_messages(calls=True))
            messages.append(call)
            for tool_call in call["tool_calls"]:
                messages.append({"role": "tool", "content": draw(content), "tool_call_id": tool_call["id"]})
        if turn < turns - 1 or draw(st.booleans()):
            messages.append(draw(assistant_messages(calls=False)))
    return messages


@st.composite
def tool_schemas(draw: Any) -> dict[str, Any]:
    properties = {}
    for name in draw(st.lists(ident, max_size=3, unique=True)):
        kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "array", "object"]))
        spec: dict[str, Any] = {"type": kind}
        if draw(st.booleans()):
            spec["description"] = draw(text)
        if kind == "string" and draw(st.booleans()):
            spec["enum"] = draw(st.lists(ident, min_size=1, max_size=3))
        if kind == "array":
            spec["items"] = {"type": draw(st.sampled_from(["string", "integer", "object"]))}
        properties[name] = spec
    parameters = {
        "type": "object",
        "properties": properties,
        "required": draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else [],
    }
    function = {"name": draw(ident), "description": draw(text), "parameters": parameters}
    return {"type": "function", "function": function}


tool_lists = st.none() | st.lists(tool_schemas(), max_size=3)

EXTRA_VARIABLES = {
    "qwen3": st.fixed_dictionaries({}),
    "qwen3_small": st.fixed_dictionaries({}),
    "deepseek_r1": st.fixed_dictionaries({}),
    "lfm2": st.fixed_dictionaries({}),
    "llama3": st.fixed_dictionaries(
        {}, optional={"date_string": text, "tools_in_user_message": st.booleans()}
    ),
    "gpt_oss": st.fixed_dictionaries(
        {},
        optional={
            "reasoning_effort": st.sampled_from(["low", "medium", "high"]),
            "model_identity": text,
        },
    ),
    "mistral": st.fixed_dictionaries({}),
    "gemma": st.fixed_dictionaries({}),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ChatTemplate, Any]]:
    """Each test template as a model folder, loaded by us and by transformers."""
    out = {}
    for name in TEMPLATE_NAMES:
        folder = make_model_dir(
            tmp_path_factory.mktemp(name),
            jinja=(DATA / f"{name}.jinja").read_text(encoding="utf-8"),
            config=TOKEN_CONFIGS[name],
        )
        out[name] = (ChatTemplate.from_dir(folder), hf_tokenizer(folder))
    return out


# --------------------------------------------------------------------------------------------------
# differential tests against transformers


def test_test_templates_are_all_configured() -> None:
    assert set(TEMPLATE_NAMES) == set(TOKEN_CONFIGS) == set(EXTRA_VARIABLES)


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_special_tokens_match_transformers(models: dict[str, Any], name: str) -> None:
    ours, tok = models[name]
    assert ours.special_tokens == tok.special_tokens_map
    assert ours.bos_token == tok.special_tokens_map.get("bos_token")
    assert ours.eos_token == tok.special_tokens_map.get("eos_token")
    assert ours.text == tok.chat_template
    assert ours.source.endswith("chat_template.jinja")


FIXED_CONVERSATION = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "I should call the tool.",
        "tool_calls": [
            {
                "id": "abcDEF123",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": [1, 2]}'},
            }
        ],
    },
    {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "abcDEF123"},
    {"role": "assistant", "content": "It is 21 °C.", "reasoning_content": "Report it."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "Thanks!"}, {"type": "text", "text": "And tomorrow?"}],
    },
]
FIXED_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "days": {"type": "array", "items": {"type": "integer"}},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                },
                "required": ["city"],
            },
        },
    }
]


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
@pytest.mark.parametrize("tools", [None, FIXED_TOOLS], ids=["no-tools", "tools"])
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_fixed_conversation_matches_transformers(
    models: dict[str, Any], name: str, tools: Any, add_generation_prompt: bool
) -> None:
    ours, tok = models[name]
    compare(ours, tok, FIXED_CONVERSATION, tools=tools, add_generation_prompt=add_generation_prompt)
    plain = [FIXED_CONVERSATION[1], {"role": "assistant", "content": "Sunny."}, FIXED_CONVERSATION[5]]
    got = compare(ours, tok, plain, tools=tools, add_generation_prompt=add_generation_prompt)
    if name != "llama3" or tools is None:  # llama3 moves the first user message into its tools block
        assert got is not None and "And tomorrow?" in got


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_conversations_match_transformers(models: dict[str, Any], name: str, data: Any) -> None:
    ours, tok = models[name]
    messages = data.draw(conversations(tool_turns=name != "gemma"), label="messages")
    tools = data.draw(tool_lists, label="tools")
    add_generation_prompt = data.draw(st.booleans(), label="add_generation_prompt")
    enable_thinking = data.draw(st.sampled_from([None, True, False]), label="enable_thinking")
    extra = data.draw(EXTRA_VARIABLES[name], label="extra")
    compare(
        ours,
        tok,
        messages,
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        enable_thinking=enable_thinking,
        **extra,
    )


def test_qwen3_thinking_switch(models: dict[str, Any]) -> None:
    ours, tok = models["qwen3"]
    messages = [{"role": "user", "content": "hi"}]
    off = compare(ours, tok, messages, enable_thinking=False)
    on = compare(ours, tok, messages, enable_thinking=True)
    default = compare(ours, tok, messages)
    assert off is not None and off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert on == default and default is not None and default.endswith("<|im_start|>assistant\n")


def test_reasoning_reaches_qwen3_and_gpt_oss(models: dict[str, Any]) -> None:
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "reasoning": "need a tool",  # vLLM's name for it: aliased to both templates' names
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "ok", "tool_call_id": "a"},
    ]
    qwen = compare(*models["qwen3"], messages)
    oss = compare(*models["gpt_oss"], messages)
    assert qwen is not None and "<think>\nneed a tool\n</think>" in qwen
    assert oss is not None and "<|channel|>analysis<|message|>need a tool<|end|>" in oss


def test_llama3_date_and_bos(models: dict[str, Any]) -> None:
    ours, tok = models["llama3"]
    got = compare(ours, tok, [{"role": "user", "content": "hi"}], date_string="01 Jan 2030")
    assert got is not None and got.startswith("<|begin_of_text|><|start_header_id|>system")
    assert "Today Date: 01 Jan 2030" in got
    got = compare(ours, tok, [{"role": "user", "content": "hi"}])  # strftime_now
    assert got is not None and "Today Date: " in got


def test_mistral_alternation_raises(models: dict[str, Any]) -> None:
    ours, tok = models["mistral"]
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert compare(ours, tok, messages) is None
    with pytest.raises(ChatTemplateError, match="roles must alternate") as info:
        ours.render(messages)
    assert "chat_template.jinja" in str(info.value)


def test_gemma_generation_block(models: dict[str, Any]) -> None:
    ours, tok = models["gemma"]
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " yo "}]
    got = compare(ours, tok, messages, add_generation_prompt=False)
    assert got == "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n"


def test_extra_variables_override_special_tokens_like_transformers(models: dict[str, Any]) -> None:
    ours, tok = models["mistral"]
    got = compare(ours, tok, [{"role": "user", "content": "a"}], bos_token="<BOS>")
    assert got is not None and got.startswith("<BOS>[INST]")


def test_tools_variable_is_defined_but_none_like_transformers(tmp_path: Path) -> None:
    text = "{{ tools is defined }}|{{ tools is none }}|{{ documents is none }}|{{ foo is defined }}"
    folder = make_model_dir(tmp_path / "m", jinja=text, config={})
    got = compare(ChatTemplate.from_dir(folder), hf_tokenizer(folder), [{"role": "user", "content": "x"}])
    assert got == "True|True|True|False"


def test_tojson_filter_and_globals_like_transformers(tmp_path: Path) -> None:
    text = (
        "{{ messages[0] | tojson }}\n{{ {'b': 1, 'a': '<é>'} | tojson(indent=2, sort_keys=true) }}\n"
        "{{ x | tojson(separators=(',', ':')) }}\n{{ x | tojson(ensure_ascii=true) }}\n"
        "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}"
        "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }} {{ dict(a=1) }} {{ dict.fromkeys(['k']) }}\n"
        "  {% if true %}\n  lstrip and trim\n  {% endif %}\n"
    )
    folder = make_model_dir(tmp_path / "m", jinja=text, config={})
    got = compare(
        ChatTemplate.from_dir(folder),
        hf_tokenizer(folder),
        [{"role": "user", "content": '<b>"é"</b>', "name": None}],
        x={"k": [1, "ü"]},
    )
    assert got is not None and '{"role": "user", "content": "<b>\\"é\\"</b>"}' in got


# --------------------------------------------------------------------------------------------------
# loading


def test_from_dir_precedence(tmp_path: Path) -> None:
    folder = make_model_dir(
        tmp_path / "m", jinja="JINJA", config={"chat_template": "CONFIG"}, chat_template_json="JSON"
    )
    assert ChatTemplate.from_dir(folder).text == "JINJA"
    assert ChatTemplate.from_dir(folder).source == str(folder / "chat_template.jinja")
    (folder / "chat_template.jinja").unlink()
    loaded = ChatTemplate.from_dir(folder)
    assert (loaded.text, loaded.source) == ("JSON", str(folder / "chat_template.json"))
    (folder / "chat_template.json").unlink()
    loaded = ChatTemplate.from_dir(folder)
    assert (loaded.text, loaded.source) == ("CONFIG", str(folder / "tokenizer_config.json"))
    assert loaded.tokenizer_config["chat_template"] == "CONFIG"


def test_from_dir_jinja_beats_tokenizer_config_like_transformers(tmp_path: Path) -> None:
    folder = make_model_dir(
        tmp_path / "m", jinja="JINJA {{ eos_token }}", config={"chat_template": "CONFIG", "eos_token": "</s>"}
    )
    compare(ChatTemplate.from_dir(folder), hf_tokenizer(folder), [{"role": "user", "content": "x"}])


def test_named_templates_from_files(tmp_path: Path) -> None:
    folder = make_model_dir(
        tmp_path / "m",
        jinja="DEFAULT",
        extra={"tool_use": "TOOLS {{ tools | length }}", "rag": "RAG"},
        config={},
    )
    ours, tok = ChatTemplate.from_dir(folder), hf_tokenizer(folder)
    assert set(ours.templates) == {"default", "tool_use", "rag"}
    assert ours.template_sources["tool_use"] == str(folder / "additional_chat_templates" / "tool_use.jinja")
    messages = [{"role": "user", "content": "x"}]
    assert compare(ours, tok, messages) == "DEFAULT"
    assert compare(ours, tok, messages, tools=FIXED_TOOLS) == "TOOLS 1"
    assert compare(ours, tok, messages, tools=[]) == "TOOLS 0"  # `tools is not None`, like transformers
    assert ours.template_name(None) == "default"


def test_named_templates_list_in_tokenizer_config(tmp_path: Path) -> None:
    config = {
        "chat_template": [
            {"name": "default", "template": "D {{ bos_token }}"},
            {"name": "tool_use", "template": "T {{ tools[0].function.name }}"},
        ],
        "bos_token": "<s>",
    }
    folder = make_model_dir(tmp_path / "m", config=config)
    ours, tok = ChatTemplate.from_dir(folder), hf_tokenizer(folder)
    assert ours.text == "D {{ bos_token }}"
    assert ours.template_sources["tool_use"] == f"{folder / 'tokenizer_config.json'} [tool_use]"
    assert compare(ours, tok, [{"role": "user", "content": "x"}]) == "D <s>"
    assert compare(ours, tok, [{"role": "user", "content": "x"}], tools=FIXED_TOOLS) == "T get_weather"


def test_named_templates_without_default(tmp_path: Path) -> None:
    folder = make_model_dir(tmp_path / "m", config={"chat_template": [{"name": "tool_use", "template": "T"}]})
    with pytest.raises(ChatTemplateError, match="none named 'default'"):
        ChatTemplate.from_dir(folder)


def test_additional_templates_take_default_from_tokenizer_config(tmp_path: Path) -> None:
    # transformers drops the tokenizer_config template here (and then has no default); we keep it
    folder = make_model_dir(tmp_path / "m", extra={"tool_use": "T"}, config={"chat_template": "C"})
    loaded = ChatTemplate.from_dir(folder)
    assert loaded.templates == {"default": "C", "tool_use": "T"}
    assert loaded.render([{"role": "user", "content": "x"}]) == "C"
    assert loaded.render([{"role": "user", "content": "x"}], tools=[]) == "T"


def test_added_token_dicts_and_model_specific_tokens(tmp_path: Path) -> None:
    config = {
        "chat_template": "{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ image_token }}|{{ audio_token }}",
        "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False},
        "eos_token": {"__type": "AddedToken", "content": "</s>", "rstrip": False},
        "unk_token": "<unk>",
        "pad_token": None,
        "image_token": {"__type": "AddedToken", "content": "<img>"},
        "extra_special_tokens": {"audio_token": "<aud>"},
        "additional_special_tokens": ["<x>", "<y>"],
        "add_bos_token": True,
        "model_max_length": 4096,
    }
    folder = make_model_dir(tmp_path / "m", config=config)
    ours, tok = ChatTemplate.from_dir(folder), hf_tokenizer(folder)
    assert ours.special_tokens == tok.special_tokens_map
    assert ours.special_tokens == {
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "image_token": "<img>",
        "audio_token": "<aud>",
    }
    assert (ours.bos_token, ours.eos_token) == ("<s>", "</s>")
    assert compare(ours, tok, [{"role": "user", "content": "x"}]) == "<s>|</s>|<unk>|<img>|<aud>"


def test_added_token_dict_without_type_marker(tmp_path: Path) -> None:
    # transformers rejects this spelling for the standard tokens; we take the content
    folder = make_model_dir(
        tmp_path / "m", config={"chat_template": "x", "bos_token": {"content": "<s>", "lstrip": False}}
    )
    assert ChatTemplate.from_dir(folder).bos_token == "<s>"


def test_legacy_special_tokens_map(tmp_path: Path) -> None:
    folder = make_model_dir(
        tmp_path / "m", config={"chat_template": "{{ bos_token }}{{ eos_token }}", "eos_token": "E"}
    )
    write_json(
        folder / "special_tokens_map.json",
        {"bos_token": {"content": "<s>", "single_word": False}, "eos_token": "</s>"},
    )
    ours, tok = ChatTemplate.from_dir(folder), hf_tokenizer(folder)
    assert ours.special_tokens == tok.special_tokens_map == {"bos_token": "<s>", "eos_token": "</s>"}
    # with an added_tokens_decoder, transformers ignores special_tokens_map.json
    config = json.loads((folder / "tokenizer_config.json").read_text())
    write_json(folder / "tokenizer_config.json", {**config, "added_tokens_decoder": {}})
    assert ChatTemplate.from_dir(folder).special_tokens == {"eos_token": "E"}


def test_from_file_kinds(tmp_path: Path) -> None:
    folder = make_model_dir(
        tmp_path / "m",
        jinja="J{{ bos_token }}",
        config={"chat_template": "C{{ bos_token }}", "bos_token": "<s>"},
        chat_template_json="S{{ bos_token }}",
    )
    message = [{"role": "user", "content": "x"}]
    assert ChatTemplate.from_file(folder / "tokenizer_config.json").render(message) == "C<s>"
    assert ChatTemplate.from_file(folder / "chat_template.json").render(message) == "S<s>"
    assert ChatTemplate.from_file(folder / "chat_template.jinja").render(message) == "J<s>"
    lone = tmp_path / "lone" / "custom.jinja"
    lone.parent.mkdir()
    lone.write_text("L{{ bos_token }}", encoding="utf-8")
    loaded = ChatTemplate.from_file(lone)
    assert (loaded.render(message), loaded.source, loaded.tokenizer_config) == ("L", str(lone), {})
    named = tmp_path / "named.json"
    write_json(named, {"chat_template": [{"name": "default", "template": "N"}], "eos_token": "</s>"})
    loaded = ChatTemplate.from_file(named)
    assert (loaded.text, loaded.eos_token) == ("N", "</s>")


def test_loading_errors(tmp_path: Path) -> None:
    with pytest.raises(ChatTemplateError, match="no such file"):
        ChatTemplate.from_file(tmp_path / "missing.jinja")
    with pytest.raises(ChatTemplateError, match="not a folder"):
        ChatTemplate.from_dir(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ChatTemplateError, match=r"no chat template in .*empty.*chat_template\.jinja"):
        ChatTemplate.from_dir(empty)
    no_key = make_model_dir(tmp_path / "nokey", config={"eos_token": "</s>"})
    with pytest.raises(ChatTemplateError, match="has no 'chat_template' key"):
        ChatTemplate.from_dir(no_key)
    with pytest.raises(ChatTemplateError, match="no 'chat_template' key") as info:
        ChatTemplate.from_file(no_key / "tokenizer_config.json")
    assert str(no_key / "tokenizer_config.json") in str(info.value)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ChatTemplateError, match="invalid JSON") as info:
        ChatTemplate.from_dir(bad)
    assert str(bad / "tokenizer_config.json") in str(info.value)
    with pytest.raises(ChatTemplateError, match="expected a JSON object"):
        write_json(bad / "list.json", ["chat_template"])
        ChatTemplate.from_file(bad / "list.json")
    wrong_type = make_model_dir(tmp_path / "wrongtype", config={"chat_template": 3})
    with pytest.raises(ChatTemplateError, match="must be a string or a list"):
        ChatTemplate.from_dir(wrong_type)
    broken = make_model_dir(tmp_path / "broken", jinja="ok\n{% if %}")
    with pytest.raises(ChatTemplateError, match=r"chat_template\.jinja: syntax error at line 2"):
        ChatTemplate.from_dir(broken)
    legacy = make_model_dir(tmp_path / "legacy")
    write_json(legacy / "chat_template.json", {"template": "x"})
    with pytest.raises(ChatTemplateError, match=r"chat_template\.json: no 'chat_template' key"):
        ChatTemplate.from_dir(legacy)


def make_cache(root: Path, model_id: str, snapshots: dict[str, str | None], main: str | None) -> Path:
    """A Hugging Face hub cache layout; `snapshots` maps revision -> chat_template.jinja text
    (None: a snapshot with only a config.json)."""
    repo = root / ("models--" + model_id.replace("/", "--"))
    for i, (revision, text) in enumerate(snapshots.items()):
        snapshot = repo / "snapshots" / revision
        snapshot.mkdir(parents=True)
        if text is None:
            write_json(snapshot / "config.json", {})
        else:
            (snapshot / "chat_template.jinja").write_text(text, encoding="utf-8")
        os.utime(snapshot, (1_000_000 + i, 1_000_000 + i))  # later entries are newer
    if main is not None:
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(main, encoding="utf-8")
    return repo


def test_from_hf_cache_prefers_refs_main(tmp_path: Path) -> None:
    repo = make_cache(tmp_path, "org/model", {"aaa": "MAIN", "bbb": "NEWER"}, main="aaa")
    loaded = ChatTemplate.from_hf_cache("org/model", cache_dir=tmp_path)
    assert loaded.text == "MAIN"
    assert loaded.source == str(repo / "snapshots" / "aaa" / "chat_template.jinja")


def test_from_hf_cache_newest_snapshot_without_refs(tmp_path: Path) -> None:
    make_cache(tmp_path, "org/model", {"aaa": "OLD", "bbb": "NEW"}, main=None)
    assert ChatTemplate.from_hf_cache("org/model", cache_dir=tmp_path).text == "NEW"


def test_from_hf_cache_ignores_a_refs_main_outside_snapshots(tmp_path: Path) -> None:
    outside = make_model_dir(tmp_path / "outside", jinja="OUTSIDE")
    make_cache(tmp_path / "cache", "org/model", {"aaa": "OLD", "bbb": "NEW"}, main=f"../../../{outside.name}")
    assert ChatTemplate.from_hf_cache("org/model", cache_dir=tmp_path / "cache").text == "NEW"


def test_from_hf_cache_skips_snapshots_without_template(tmp_path: Path) -> None:
    make_cache(tmp_path, "org/model", {"aaa": "OLD", "bbb": None}, main="bbb")
    assert ChatTemplate.from_hf_cache("org/model", cache_dir=tmp_path).text == "OLD"


def test_from_hf_cache_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    make_cache(tmp_path / "home" / "hub", "org/a", {"r": "VIA HF_HOME"}, main="r")
    make_cache(tmp_path / "hubcache", "org/a", {"r": "VIA HF_HUB_CACHE"}, main="r")
    make_cache(tmp_path / "user" / ".cache" / "huggingface" / "hub", "solo", {"r": "VIA HOME"}, main="r")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert ChatTemplate.from_hf_cache("solo").text == "VIA HOME"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert ChatTemplate.from_hf_cache("org/a").text == "VIA HF_HOME"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hubcache"))
    assert ChatTemplate.from_hf_cache("org/a").text == "VIA HF_HUB_CACHE"


def test_from_hf_cache_not_found(tmp_path: Path) -> None:
    with pytest.raises(ChatTemplateError) as info:
        ChatTemplate.from_hf_cache("org/absent", cache_dir=tmp_path)
    message = str(info.value)
    assert "'org/absent'" in message and str(tmp_path / "models--org--absent" / "snapshots") in message
    assert "never downloads" in message
    make_cache(tmp_path, "org/partial", {"aaa": None}, main="aaa")
    with pytest.raises(ChatTemplateError, match="snapshots.aaa"):
        ChatTemplate.from_hf_cache("org/partial", cache_dir=tmp_path)
    for bad in ("../etc", "org/../x", "/abs", "a/b/c", "org--x/y", ""):
        with pytest.raises(ChatTemplateError, match="not a Hugging Face model id"):
            ChatTemplate.from_hf_cache(bad, cache_dir=tmp_path)


def test_find(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_model_dir(tmp_path / "m", jinja="DIR", config={"chat_template": "CFG"})
    make_cache(tmp_path / "cache", "org/model", {"r": "CACHED"}, main="r")
    assert ChatTemplate.find(str(folder)).text == "DIR"
    assert ChatTemplate.find(str(folder / "tokenizer_config.json")).text == "CFG"
    assert ChatTemplate.find("org/model", cache_dir=tmp_path / "cache").text == "CACHED"
    monkeypatch.chdir(tmp_path)
    assert ChatTemplate.find("m").text == "DIR"  # a relative folder wins over a model id
    with pytest.raises(ChatTemplateError, match="no such file or folder"):
        ChatTemplate.find("./missing.jinja")
    with pytest.raises(ChatTemplateError, match="no such file or folder"):
        ChatTemplate.find("some/deep/path")
    with pytest.raises(ChatTemplateError, match="local Hugging Face cache"):
        ChatTemplate.find("org/other", cache_dir=tmp_path / "cache")


# --------------------------------------------------------------------------------------------------
# safety


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ ''.__class__.__mro__ }}", "blocked by the sandbox"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "blocked by the sandbox"),
        ("{{ cycler.__init__.__globals__ }}", "blocked by the sandbox"),
        ("{{ raise_exception.__globals__['os'] }}", "blocked by the sandbox"),
        ("{{ messages.append(1) }}", "blocked by the sandbox"),
        ("{{ messages[0].update({'a': 1}) }}", "blocked by the sandbox"),
        ("{% set ns = namespace(_secret=1) %}", "underscore-prefixed"),
        ("{% set ns = namespace() %}{% set ns._x = 1 %}", "underscore-prefixed"),
        ("{{ range(10**9) | length }}", "Range too big"),
        ("{{ 'x' * 10**10 }}", "repeats a sequence"),
        ("{{ [0] * 10**10 }}", "repeats a sequence"),
        ("{{ 7 ** 100000000 }}", "power too large"),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
            "longer than",
        ),
        ("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", f"exceeds {MAX_RENDERED_CHARS}"),
        ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "RecursionError"),
        ("{{ 1 / 0 }}", "ZeroDivisionError"),
        ("line 1\n{{ undefined_thing.attr }}", r"\(line 2\): undefined value"),
        ("{{ raise_exception('x marks the spot') }}", "the template raised an error: x marks the spot"),
    ],
)
def test_untrusted_templates_fail_cleanly(tmp_path: Path, source: str, expected: str) -> None:
    path = tmp_path / "evil.jinja"
    path.write_text(source, encoding="utf-8")
    template = ChatTemplate.from_file(path)
    with pytest.raises(ChatTemplateError, match=expected) as info:
        template.render([{"role": "user", "content": "hi"}])
    assert str(path) in str(info.value)


def test_no_code_execution(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    attempts = [
        f"{{{{ cycler.__init__.__globals__.os.system('touch {marker}') }}}}",
        f"{{{{ joiner.__init__.__globals__['os'].popen('touch {marker}').read() }}}}",
        "{{ ''.__class__.__base__.__subclasses__() }}",
        "{{ self._TemplateReference__context }}",
        "{{ lipsum.__globals__['os'] }}",
        f"{{{{ namespace.__init__.__globals__['__builtins__']['open']('{marker}', 'w') }}}}",
    ]
    for source in attempts:
        with contextlib.suppress(ChatTemplateError):
            ChatTemplate(source).render([{"role": "user", "content": "hi"}])
    assert not marker.exists()
    # an unsafe attribute on its own is just undefined (renders as nothing), as in transformers
    assert (
        ChatTemplate("[{{ raise_exception.__globals__ }}{{ ''.__class__ }}]").render([{"role": "user"}])
        == "[]"
    )


def test_raise_exception_message_in_error() -> None:
    template = ChatTemplate("{% if messages | length > 1 %}{{ raise_exception('too many: x') }}{% endif %}ok")
    assert template.render([{"role": "user", "content": "a"}]) == "ok"
    with pytest.raises(ChatTemplateError, match="too many: x"):
        template.render([{"role": "user", "content": "a"}] * 2)


def test_syntax_error_names_source() -> None:
    with pytest.raises(ChatTemplateError, match=r"chat template <string>: syntax error at line 1"):
        ChatTemplate("{% for %}")
    with pytest.raises(ChatTemplateError, match=r"model\.jinja \[tool_use\]: syntax error"):
        ChatTemplate({"default": "ok", "tool_use": "{{ }"}, source="model.jinja")


def test_src_does_not_import_transformers_and_imports_jinja_lazily() -> None:
    code = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("prompt_under_test", {str(PROMPT_MODULE)!r})
module = importlib.util.module_from_spec(spec)
sys.modules["prompt_under_test"] = module
spec.loader.exec_module(module)
assert "jinja2" not in sys.modules, "jinja2 imported eagerly"
out = module.ChatTemplate("{{{{ messages[0].content }}}}").render([{{"role": "user", "content": "hi"}}])
assert out == "hi", out
assert "jinja2" in sys.modules
assert not any(name == "transformers" or name.startswith("transformers.") for name in sys.modules)
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# --------------------------------------------------------------------------------------------------
# message preparation


def test_reasoning_aliases() -> None:
    prepare = ChatTemplate.prepare_messages
    for key in ("reasoning_content", "thinking", "reasoning"):
        (message,) = prepare([{"role": "assistant", "content": "c", key: "why"}])
        assert message["reasoning_content"] == message["thinking"] == message["reasoning"] == "why"
    (message,) = prepare([{"role": "assistant", "thinking": "T", "reasoning": "R"}])
    assert (message["reasoning_content"], message["thinking"], message["reasoning"]) == ("T", "T", "R")
    (message,) = prepare([{"role": "assistant", "content": "c", "reasoning_content": None}])
    assert message == {"role": "assistant", "content": "c"}
    (message,) = prepare([{"role": "assistant", "content": "c", "reasoning": ""}])
    assert message["reasoning_content"] == message["thinking"] == ""
    template = ChatTemplate(
        "{% for m in messages %}{{ m.reasoning_content }}|{{ m.thinking }}|{{ m.reasoning }};{% endfor %}"
    )
    assert (
        template.render([{"role": "user", "content": "u"}, {"role": "assistant", "thinking": "t"}])
        == "||;t|t|t;"
    )


def test_arguments_json_string_to_object() -> None:
    calls = [
        {"id": "1", "type": "function", "function": {"name": "a", "arguments": '{"x": [1, {"y": null}]}'}},
        {"id": "2", "type": "function", "function": {"name": "b", "arguments": "[1, 2]"}},
        {"id": "3", "type": "function", "function": {"name": "c", "arguments": "{broken"}},
        {"id": "4", "type": "function", "function": {"name": "d", "arguments": {"already": "dict"}}},
        {"id": "5", "type": "function", "function": {"name": "e"}},
        "not a call",
    ]
    (message,) = ChatTemplate.prepare_messages([{"role": "assistant", "tool_calls": calls}])
    arguments = [
        call["function"].get("arguments") if isinstance(call, dict) else call
        for call in message["tool_calls"]
    ]
    assert arguments == [
        {"x": [1, {"y": None}]},
        "[1, 2]",
        "{broken",
        {"already": "dict"},
        None,
        "not a call",
    ]
    template = ChatTemplate(
        "{% for c in messages[0].tool_calls %}{% for k, v in c.function.arguments.items() %}{{ k }}={{ v | tojson }}{% endfor %}{% endfor %}"
    )
    assert template.render([{"role": "assistant", "tool_calls": calls[:1]}]) == 'x=[1, {"y": null}]'


def test_text_parts_joined_and_other_parts_rejected() -> None:
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": "two", "extra": 1}]
    (message,) = ChatTemplate.prepare_messages([{"role": "user", "content": parts}])
    assert message["content"] == "one\ntwo"
    (message,) = ChatTemplate.prepare_messages([{"role": "user", "content": []}])
    assert message["content"] == ""
    bad = [
        {"role": "system", "content": "s"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}],
        },
    ]
    with pytest.raises(ChatTemplateError, match=r"messages\[1\]\.content\[1\]\.type: 'image_url'"):
        ChatTemplate.prepare_messages(bad)
    with pytest.raises(ChatTemplateError, match=r"messages\[0\]\.content\[0\]\.type: missing"):
        ChatTemplate.prepare_messages([{"role": "user", "content": [{"text": "a"}]}])
    with pytest.raises(ChatTemplateError, match=r"messages\[0\]\.content\[0\]\.text must be a string"):
        ChatTemplate.prepare_messages([{"role": "user", "content": [{"type": "text", "text": 3}]}])


def test_callers_messages_are_not_mutated() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {
            "role": "assistant",
            "content": None,
            "reasoning": "r",
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
    ]
    before = copy.deepcopy(messages)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    tools_before = copy.deepcopy(tools)
    ChatTemplate("{{ messages | tojson }}{{ tools | tojson }}").render(messages, tools=tools)
    prepared = ChatTemplate.prepare_messages(messages)
    prepared[1]["tool_calls"][0]["function"]["arguments"]["a"] = 2
    assert messages == before and tools == tools_before


def test_none_values_dropped_and_plain_copies() -> None:
    class Role(str):
        pass

    (message,) = ChatTemplate.prepare_messages(
        [{"role": Role("user"), "content": "x", "name": None, "when": object()}]
    )
    assert message == {"role": "user", "content": "x", "when": "<object>"}
    assert type(message["role"]) is str


def test_enable_thinking_only_when_given() -> None:
    template = ChatTemplate("{{ enable_thinking is defined }}:{{ enable_thinking }}")
    messages = [{"role": "user", "content": "x"}]
    assert template.render(messages) == "False:"
    assert template.render(messages, enable_thinking=False) == "True:False"
    assert template.render(messages, enable_thinking=True) == "True:True"


def test_extra_variables() -> None:
    template = ChatTemplate(
        "{{ add_generation_prompt }} {{ reasoning_effort }} {{ bos_token }} {{ documents | length }}",
        tokenizer_config={"bos_token": "<s>"},
    )
    messages = [{"role": "user", "content": "x"}]
    assert (
        template.render(messages, reasoning_effort="high", documents=[{"title": "t", "text": "d"}])
        == "True high <s> 1"
    )
    assert template.render(messages, add_generation_prompt=False, bos_token="B", documents=[]) == "False  B 0"


def test_reserved_extra_variables_rejected() -> None:
    template = ChatTemplate("x")
    messages = [{"role": "user", "content": "x"}]
    for name in ("messages", "continue_final_message"):
        kwargs: dict[str, Any] = {name: []}
        with pytest.raises(ChatTemplateError, match=f"{name} cannot be passed"):
            template.render(messages, **kwargs)


def test_invalid_inputs() -> None:
    template = ChatTemplate("x")
    with pytest.raises(ChatTemplateError, match="empty conversation"):
        template.render([])
    with pytest.raises(ChatTemplateError, match=r"messages\[1\] must be an object"):
        template.render([{"role": "user", "content": "x"}, "hello"])  # type: ignore[list-item]
    with pytest.raises(ChatTemplateError, match="messages must be a list"):
        template.render({"role": "user"})  # type: ignore[arg-type]
    with pytest.raises(ChatTemplateError, match=r"tools\[0\] must be an object"):
        template.render([{"role": "user", "content": "x"}], tools=["f"])  # type: ignore[list-item]


def test_deeply_nested_input() -> None:
    nested: Any = "x"
    for _ in range(sys.getrecursionlimit() + 100):
        nested = [nested]
    template = ChatTemplate("x")
    with pytest.raises(ChatTemplateError, match=r"messages\[0\] is nested too deeply"):
        template.render([{"role": "user", "content": "x", "extra": nested}])
    with pytest.raises(ChatTemplateError, match="template variables is nested too deeply"):
        template.render([{"role": "user", "content": "x"}], extra=nested)


def test_repr_and_attributes() -> None:
    template = ChatTemplate(
        {"default": "d", "tool_use": "t"}, source="x.json", tokenizer_config={"eos_token": "</s>"}
    )
    assert repr(template) == "ChatTemplate(source='x.json [default]', templates=[default, tool_use])"
    assert (template.text, template.bos_token, template.eos_token) == ("d", None, "</s>")
    assert template.special_tokens == {"eos_token": "</s>"}
