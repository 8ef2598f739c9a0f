"""A non-empty prefix that holds none of the template's start anchors (issue 10, item 14).

The core keeps the reference behaviour: the whole prefix is parsed as output (transformers 5.24.0
logs at INFO and does the same), so the prompt ends up in ``content`` and format examples in a system
prompt become tool calls. The OpenAI layer warns (``MissingAnchorWarning``) or refuses
(``missing_anchor="error"``, ``MissingAnchorError``); the CLI prints one line on stderr.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import chatparse
from chatparse import catalog
from chatparse.cli import main
from chatparse.openai import ChatParser, MissingAnchorError, MissingAnchorWarning, parse_message

# a prompt rendered without its generation prompt: the system prompt shows the call format
PROMPT = (
    "<|im_start|>system\nCall tools like this: <tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "..."}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\nWeather?<|im_end|>\n"
)
OUTPUT = "It is sunny.<|im_end|>"


def test_core_keeps_the_reference_behaviour() -> None:
    message = chatparse.parse_response(OUTPUT, catalog.get("qwen3"), prefix=PROMPT)
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"  # the example became a call
    reference = pytest.importorskip("transformers.utils.chat_parsing")
    assert reference.parse_response(OUTPUT, catalog.get("qwen3"), prefix=PROMPT) == message


def test_parse_message_warns_and_names_the_template_and_anchors() -> None:
    with pytest.warns(MissingAnchorWarning) as caught:
        parse_message(OUTPUT, model="Qwen/Qwen3-8B", prefix=PROMPT)
    text = str(caught[0].message)
    assert "template 'qwen3'" in text and "'Qwen/Qwen3-8B'" in text
    assert repr("<|im_start|>assistant\n") in text
    assert issubclass(MissingAnchorWarning, UserWarning)


def test_chat_parser_refuses_on_request() -> None:
    with pytest.raises(MissingAnchorError, match="start anchors of template 'qwen3'"):
        ChatParser(template="qwen3", prefix=PROMPT, missing_anchor="error")
    assert issubclass(MissingAnchorError, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "prefix"),
    [
        ({"template": "qwen3"}, PROMPT + "<|im_start|>assistant\n"),  # the anchor is there
        ({"template": "qwen3"}, ""),  # explicit opt-out
        ({"template": "qwen3"}, None),  # the catalog's generation prompt
        ({"model": "Qwen/Qwen3-8B"}, None),
        ({"template": "qwen3", "missing_anchor": "ignore"}, PROMPT),
    ],
)
def test_no_warning_when_the_prefix_is_fine(kwargs: dict, prefix: str | None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ChatParser(prefix=prefix, **kwargs).feed(OUTPUT)


def test_a_template_dict_and_a_pattern_anchor() -> None:
    spec = catalog.get("granite33")  # start_anchor_pattern
    with pytest.warns(MissingAnchorWarning, match=r"the template \(pattern "):
        parse_message("Hi<|end_of_text|>", template=spec, prefix="<|start_of_role|>user<|end_of_role|>hi")


def test_invalid_policy() -> None:
    with pytest.raises(ValueError, match="missing_anchor must be one of"):
        ChatParser(template="qwen3", prefix="", missing_anchor="loud")


def test_every_catalog_generation_prompt_holds_its_anchor() -> None:
    for name in catalog.names():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ChatParser(template=name, prefix=catalog.describe(name)["generation_prompt"])


def test_cli_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.txt"
    out.write_text(OUTPUT, encoding="utf-8")
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(PROMPT, encoding="utf-8")
    code = main(["parse", "--model", "Qwen/Qwen3-8B", "--prefix-file", str(prompt), str(out)])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["role"] == "assistant"
    assert captured.err.startswith("chatparse: warning: the prefix") and captured.err.count("\n") == 1
    code = main(["parse", "--model", "Qwen/Qwen3-8B", str(out)])
    assert code == 0 and capsys.readouterr().err == ""
