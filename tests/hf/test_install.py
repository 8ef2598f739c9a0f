"""`install` / `uninstall` on real tokenizers and processors (pipelines: test_generate.py, with torch)."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
from transformers import PreTrainedTokenizerFast, ProcessorMixin

import chatparse
from chatparse import catalog, hf

from .helpers import CHAT_TEMPLATES, FAMILIES, encode, family_cases, family_tokenizer


class TextProcessor(ProcessorMixin):
    """The smallest real processor: a tokenizer and a chat template."""

    tokenizer_class = "PreTrainedTokenizerFast"

    def __init__(self, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(tokenizer, chat_template=chat_template)


def snapshot(obj) -> dict:
    return {k: v for k, v in vars(obj).items()}


def test_install_uses_chatparse_and_uninstall_leaves_no_trace():
    tok = family_tokenizer("QWEN_JSON")
    before = snapshot(tok)
    class_methods = {
        n: getattr(PreTrainedTokenizerFast, n) for n in ("parse_response", "get_response_parser")
    }
    state = hf.install(tok)
    assert state.kind == "tokenizer" and state.template_source == "own" and not state.filled
    assert hf.is_installed(tok) and hf.install(tok) is state  # idempotent
    for case in family_cases("QWEN_JSON"):
        if not case["text"]:
            continue  # [] token ids are an empty batch (the reference's rule)
        try:
            expected = chatparse.parse_response(
                case["text"], FAMILIES["QWEN_JSON"], prefix=case["prefix"], tools=case["tools"]
            )
        except ValueError as e:
            with pytest.raises(type(e)):
                tok.parse_response(encode(tok, case["text"]), prefix=case["prefix"], tools=case["tools"])
            continue
        assert (
            tok.parse_response(
                encode(tok, case["text"]), prefix=encode(tok, case["prefix"]), tools=case["tools"]
            )
            == expected
        )
        # transformers' positional `schema` argument
        assert (
            tok.parse_response(
                case["text"], FAMILIES["QWEN_JSON"], prefix=case["prefix"], tools=case["tools"]
            )
            == expected
        )
        parser = tok.get_response_parser(prefix=case["prefix"], tools=case["tools"])
        assert isinstance(parser, chatparse.ResponseParser)
    assert hf.uninstall(tok) is True
    assert hf.uninstall(tok) is False
    assert snapshot(tok) == before
    assert {n: getattr(PreTrainedTokenizerFast, n) for n in class_methods} == class_methods
    assert tok.parse_response.__func__ is PreTrainedTokenizerFast.parse_response


def test_install_fills_a_missing_template_from_the_catalog():
    tok = family_tokenizer("QWEN_JSON", with_template=False, name_or_path="Qwen/Qwen3-8B")
    before = snapshot(tok)
    state = hf.install(tok)
    assert state.template_source == "catalog:qwen3" and state.filled
    assert tok.response_template == catalog.get("qwen3")
    text = "<think>x</think>Hi<|im_end|>"
    assert tok.parse_response(text, prefix="") == {
        "role": "assistant",
        "reasoning_content": "x",
        "content": "Hi",
    }
    hf.uninstall(tok)
    assert tok.response_template is None
    assert snapshot(tok) == before
    with pytest.raises(AttributeError):
        tok.parse_response(text, prefix="")


def test_fill_opt_out_and_catalog_off():
    tok = family_tokenizer("QWEN_JSON", with_template=False, name_or_path="Qwen/Qwen3-8B")
    state = hf.install(tok, fill=False)
    assert state.template_source is None and tok.response_template is None
    # parsing still finds the catalog template, without storing it
    assert tok.parse_response("Hi<|im_end|>", prefix="")["content"] == "Hi"
    hf.uninstall(tok)
    hf.install(tok, catalog=False)
    with pytest.raises(AttributeError) as info:
        tok.parse_response("Hi<|im_end|>", prefix="")
    assert str(info.value).startswith("This tokenizer does not have a `response_template`")
    hf.uninstall(tok)


def test_installed_tokenizer_pickles_deep_copies_and_saves(tmp_path):
    tok = family_tokenizer("QWEN_JSON", with_template=False, name_or_path="Qwen/Qwen3-8B")
    tok.save_pretrained(tmp_path / "before")
    hf.install(tok)
    for clone in (pickle.loads(pickle.dumps(tok)), copy.deepcopy(tok)):
        assert hf.is_installed(clone)
        assert clone.parse_response("Hi<|im_end|>", prefix="")["content"] == "Hi"
        assert clone.parse_response.__self__ is clone
        hf.uninstall(clone)
        assert not hasattr(clone, "_chatparse_installation")
    # while filled, save_pretrained writes the template (as the docs say); uninstalled, it does not
    config = "tokenizer_config.json"
    tok.save_pretrained(tmp_path / "on")
    assert json.loads((tmp_path / "on" / config).read_text())["response_template"] == catalog.get("qwen3")
    hf.uninstall(tok)
    tok.save_pretrained(tmp_path / "off")
    assert (tmp_path / "off" / config).read_text() == (tmp_path / "before" / config).read_text()


def test_installed_apply_chat_template_accepts_parsed_history():
    chat_template = (CHAT_TEMPLATES / "gpt_oss.jinja").read_text(encoding="utf-8")
    tok = family_tokenizer("GPT_OSS", with_template=False, chat_template=chat_template)
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Need the tool.",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "content": "18C"},
    ]
    # transformers renders JSON-text arguments JSON-encoded a second time
    assert '"{\\"city\\": \\"Paris\\"}"' in tok.apply_chat_template(history, tokenize=False)
    hf.install(tok)
    text = tok.apply_chat_template(history, tokenize=False)
    assert "<|channel|>analysis<|message|>Need the tool.<|end|>" in text
    assert '{"city": "Paris"}' in text
    assert history[1]["content"] is None  # not mutated
    hf.uninstall(tok)


def test_processor_install():
    chat_template = (CHAT_TEMPLATES / "qwen3.jinja").read_text(encoding="utf-8")
    tok = family_tokenizer("QWEN_JSON", with_template=False)
    proc = TextProcessor(tok, chat_template=chat_template)
    before_tok, before_proc = snapshot(tok), snapshot(proc)
    # transformers itself: the processor delegates to the tokenizer, which has no template
    with pytest.raises(AttributeError):
        proc.parse_response("Hi<|im_end|>", prefix="")
    state = hf.install(proc)
    assert (
        state.kind == "processor" and state.template_source == "catalog:qwen3"
    )  # by the processor's chat template
    assert proc.parse_response("Hi<|im_end|>", prefix="") == {"role": "assistant", "content": "Hi"}
    assert tok.parse_response("Hi<|im_end|>", prefix="") == {"role": "assistant", "content": "Hi"}
    ids = encode(tok, "<think>a</think>b<|im_end|>")
    assert proc.parse_response([ids, ids], prefix="")[1]["reasoning_content"] == "a"
    hf.uninstall(proc)
    assert snapshot(tok) == before_tok and snapshot(proc) == before_proc


def test_install_rejects_what_it_cannot_install_into():
    with pytest.raises(TypeError, match="tokenizer, processor or text-generation pipeline"):
        hf.install(object())
    with pytest.raises(TypeError):
        hf.install({"a": 1})
