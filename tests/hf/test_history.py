"""History that renders: parse -> render with the model's chat template -> parse gives the same message.

For every catalog family with a chat template among the test data (re-creations written for chatparse:
tests/data/chat_templates/ and tests/hf/chat_templates/, listed in their READMEs), every family case
is parsed, the parsed message (as chatparse's core returns it, and as `chatparse.openai` returns it:
`content: None`, arguments as JSON text) is rendered back after the user turn with
`chatparse.hf.apply_chat_template`, and the rendered assistant turn is parsed again. The messages
must be equal, except for what the chat template itself leaves out of history (listed in DROPS:
DeepSeek's and Gemma 4's templates never render past reasoning).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import chatparse
from chatparse import catalog, hf
from chatparse.hf import prepare_history
from chatparse.openai import parse_message

from .conftest import STATS
from .helpers import CHAT_TEMPLATES, family_cases, family_tokenizer

# chat template file -> (family of tests/data/family_cases.json, catalog template)
PAIRS = {
    "qwen3.jinja": ("QWEN_JSON", "qwen3"),
    "llama3.jinja": ("LLAMA3_JSON", "llama3_json"),
    "gpt_oss.jinja": ("GPT_OSS", "gpt_oss"),
    "mistral.jinja": ("MISTRAL_V3", "mistral_v3"),
    "hf/deepseek_v31.jinja": ("DEEPSEEK_V31", "deepseek_v31"),
    "hf/glm.jinja": ("GLM", "glm"),
    "hf/kimi_k2.jinja": ("KIMI_K2", "kimi_k2"),
    "hf/lfm2.jinja": ("LFM2", "lfm2"),
    "hf/gemma4.jinja": ("GEMMA4", "gemma4"),
}

# What each chat template leaves out of an assistant turn in history (as the models' own templates
# do: DeepSeek's and Gemma 4's never render past reasoning, Llama 3.1's the text of a call turn).
DROPS = {
    "deepseek_v31": lambda m: {"reasoning_content"},
    "gemma4": lambda m: {"reasoning_content"},
    # Llama 3.1's template renders a tool-call turn as the call alone (text written after the call,
    # which close_after_value keeps as content, is not part of that turn's history)
    "llama3_json": lambda m: {"content"} if m.get("tool_calls") else set(),
}
# The re-created Llama 3.1 template renders one call per message and raises for more.
SINGLE_CALL = {"llama3_json"}
# gpt-oss's template renders the first call of a message only (`message.tool_calls[0]`).
FIRST_CALL_ONLY = {"gpt_oss"}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
OWN_TEMPLATES = Path(__file__).parent / "chat_templates"


def _template(file: str) -> str:
    """A test chat template: `name.jinja` from tests/data/chat_templates, `hf/name.jinja` from ours."""
    path = OWN_TEMPLATES / file[3:] if file.startswith("hf/") else CHAT_TEMPLATES / file
    return path.read_text(encoding="utf-8")


def _lcp(a: str, b: str) -> int:
    n, i = min(len(a), len(b)), 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def split_turn(full: str, prompt: str, header: str) -> tuple[str, str]:
    """(prefix, assistant turn) of a rendered conversation whose last message is the assistant's."""
    at = full.find(header, _lcp(prompt, full) - len(header)) if header else -1
    k = (
        at + len(header)
        if at >= 0 and at + len(header) <= len(prompt) + 1
        else min(_lcp(prompt, full), len(prompt))
    )
    return full[:k], full[k:]


def cut_at_stop(turn: str, stops: list[str]) -> str:
    """The turn up to and including its end-of-turn marker (what the model would have generated)."""
    ends = [turn.rfind(s) + len(s) for s in stops if s in turn]
    return turn[: max(ends)] if ends else turn


def round_trip(tok, template: dict, name: str, message: dict, tools):
    prompt = tok.apply_chat_template(USER, tools=tools, add_generation_prompt=True, tokenize=False)
    full = hf.apply_chat_template(tok, [*USER, message], tools=tools, tokenize=False)
    info = catalog.describe(name)
    prefix, turn = split_turn(full, prompt, info["generation_prompt"])
    return chatparse.parse_response(cut_at_stop(turn, info["stop"]), template, prefix=prefix, tools=tools)


def without(message: dict, keys: set[str]) -> dict:
    return {k: v for k, v in message.items() if k not in keys}


def comparable(message: dict) -> dict:
    """Call ids that prepare_history invented (Mistral's template demands them) are not compared."""
    out = copy.deepcopy(message)
    for call in out.get("tool_calls", []):
        call.pop("id", None)
    return out


@pytest.mark.parametrize("file", list(PAIRS))
def test_parse_render_parse_round_trip(file):
    family, name = PAIRS[file]
    chat_template = _template(file)
    tok = family_tokenizer(family, with_template=False, chat_template=chat_template)
    tok.bos_token, tok.eos_token = None, "</s>"
    template = catalog.get(name)
    drops = DROPS.get(name, lambda m: set())
    done = 0
    for case in family_cases(family):
        tools = case["tools"]
        try:
            tok.apply_chat_template(USER, tools=tools, add_generation_prompt=True, tokenize=False)
        except Exception:  # noqa: BLE001 - e.g. gpt-oss's template wants a description for every tool
            tools = None
        try:
            message = chatparse.parse_response(case["text"], template, prefix=case["prefix"], tools=tools)
        except ValueError:
            continue  # output that cannot be parsed has no message to render
        if name in SINGLE_CALL and len(message.get("tool_calls", [])) > 1:
            with pytest.raises(Exception, match="single tool-calls"):
                hf.apply_chat_template(tok, [*USER, message], tools=tools, tokenize=False)
            continue
        expected = comparable(without(message, drops(message)))
        if name in FIRST_CALL_ONLY and expected.get("tool_calls"):
            expected["tool_calls"] = expected["tool_calls"][:1]
        again = round_trip(tok, template, name, message, tools)
        assert comparable(again) == expected, case["id"]
        # the same message in Chat Completions form: content None, arguments as JSON text
        wire = parse_message(case["text"], template=template, prefix=case["prefix"], tools=tools)
        wire.pop("chatparse", None)
        assert comparable(round_trip(tok, template, name, wire, tools)) == expected, case["id"]
        done += 1
    STATS[f"round-trip:{name}"] += done
    assert done >= 7, f"only {done} cases of {family} round-tripped"


# ---------------------------------------------------------------------------------------- units


def test_reasoning_aliases_go_where_the_template_reads_them():
    for alias in ("reasoning_content", "reasoning", "thinking"):
        m = {"role": "assistant", alias: "hm", "content": "x"}
        assert prepare_history([m], chat_template="{{ message.thinking }}")[0] == {
            "role": "assistant",
            "thinking": "hm",
            "content": "x",
        }
        assert prepare_history([m])[0]["reasoning_content"] == "hm"
    both = prepare_history(
        [{"role": "assistant", "reasoning": "r"}], chat_template="{{ m.reasoning_content }}{{ m.reasoning }}"
    )
    assert both[0]["reasoning_content"] == both[0]["reasoning"] == "r"
    assert "reasoning_content" not in prepare_history([{"role": "assistant", "reasoning_content": ""}])[0]


def test_content_none_calls_and_arguments():
    m = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": [1, 2]}'}},
            {"name": "g", "arguments": {"y": "é"}},
            {"function": {"name": "h", "arguments": None}},
        ],
        "chatparse": {"errors": []},
    }
    before = copy.deepcopy(m)
    obj = prepare_history([m], arguments="object")[0]
    assert obj["content"] == "" and "chatparse" not in obj
    assert [c["function"]["arguments"] for c in obj["tool_calls"]] == [{"x": [1, 2]}, {"y": "é"}, {}]
    assert obj["tool_calls"][0]["id"] == "a" and obj["tool_calls"][1]["type"] == "function"
    text = prepare_history([m], arguments="string")[0]
    assert [c["function"]["arguments"] for c in text["tool_calls"]] == ['{"x": [1, 2]}', '{"y": "é"}', "{}"]
    assert m == before  # never mutated
    assert "tool_calls" not in prepare_history([{"role": "assistant", "content": "x", "tool_calls": []}])[0]
    assert "tool_calls" not in prepare_history([{"role": "assistant", "content": "x", "tool_calls": None}])[0]


def test_bad_history_gets_clear_errors():
    with pytest.raises(
        ValueError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.arguments is not valid JSON"
    ):
        prepare_history(
            [
                {"role": "user", "content": "u"},
                {"role": "assistant", "tool_calls": [{"name": "f", "arguments": "{oops"}]},
            ],
            arguments="object",
        )
    with pytest.raises(TypeError, match=r"messages\[0\] must be a dict"):
        prepare_history(["hi"])
    with pytest.raises(TypeError, match="list of dicts"):
        prepare_history("hi")
    with pytest.raises(ValueError, match="name must be a string"):
        prepare_history([{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}])
    with pytest.raises(ValueError, match="arguments must be one of"):
        prepare_history([], arguments="json")


def test_argument_form_follows_the_template():
    deepseek = _template("hf/deepseek_v31.jinja")
    m = [
        {
            "role": "assistant",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
        }
    ]
    assert (
        prepare_history(m, chat_template=deepseek)[0]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    )
    for file in (
        "qwen3.jinja",
        "gpt_oss.jinja",
        "llama3.jinja",
        "hf/glm.jinja",
        "hf/lfm2.jinja",
        "hf/gemma4.jinja",
        "hf/kimi_k2.jinja",
    ):
        ct = _template(file)
        assert prepare_history(m, chat_template=ct)[0]["tool_calls"][0]["function"]["arguments"] == {
            "a": 1
        }, file


def test_call_ids_are_filled_where_the_template_needs_them():
    mistral = (CHAT_TEMPLATES / "mistral.jinja").read_text(encoding="utf-8")
    history = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "tool_calls": [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]},
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "2"},
    ]
    out = prepare_history(history, chat_template=mistral)
    ids = [c["id"] for c in out[1]["tool_calls"]]
    assert all(len(i) == 9 and i.isalnum() for i in ids) and len(set(ids)) == 2
    assert [out[2]["tool_call_id"], out[3]["tool_call_id"]] == ids
    assert "id" not in prepare_history(history, chat_template=mistral, call_ids="keep")[1]["tool_calls"][0]
    assert "id" not in prepare_history(history, chat_template="{{ m.content }}")[1]["tool_calls"][0]
