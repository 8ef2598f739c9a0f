"""`chatparse parse --auto` and `chatparse stream --auto` (template-less detection)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatparse.cli import main

OUTPUT = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'


@pytest.fixture()
def output_file(tmp_path: Path) -> Path:
    p = tmp_path / "out.txt"
    p.write_text(OUTPUT, encoding="utf-8")
    return p


def test_parse_auto_prints_the_detected_message(
    output_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parse", "--auto", "--shape", "openai", str(output_file)]) == 0
    message = json.loads(capsys.readouterr().out)
    assert message["content"] == "Let me check."
    assert message["chatparse"]["recognizer"] == "hermes"
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "get_weather" and call["id"].startswith("call_")
    assert json.loads(call["function"]["arguments"]) == {"city": "Zürich"}


def test_parse_auto_prints_the_hf_shape_by_default(
    output_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["parse", "--auto", str(output_file)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}
        ],
        "chatparse": {"recognizer": "hermes"},
    }


@pytest.mark.parametrize("size", ["1", "4", "1000"])
def test_stream_auto_deltas_merge_to_the_message(
    output_file: Path, size: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stream", "--auto", "--shape", "openai", "--chunk-size", size, str(output_file)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    *deltas, final = lines
    assert all(d["type"] == "delta" for d in deltas) and final["type"] == "message"
    content = "".join(d["delta"].get("content", "") for d in deltas)
    assert content == final["message"]["content"] == "Let me check."
    assert final["finish_reason"] == "tool_calls"
    calls = [d["delta"]["tool_calls"][0] for d in deltas if "tool_calls" in d["delta"]]
    assert [c["function"]["name"] for c in calls] == ["get_weather"]


def test_auto_prose_is_never_a_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "prose.txt"
    p.write_text('Use {"name": "x"} as JSON, or call functools to cache.', encoding="utf-8")
    assert main(["parse", "--auto", str(p)]) == 0
    message = json.loads(capsys.readouterr().out)
    assert "tool_calls" not in message
    assert message["content"].startswith("Use {")


def test_auto_excludes_template_and_model(output_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "--auto", "--model", "Qwen/Qwen3-8B", str(output_file)]) == 2
    assert "not allowed with" in capsys.readouterr().err
