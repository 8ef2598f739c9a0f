"""Tests for the ``chatparse`` command line (``chatparse.cli``)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import chatparse

if not hasattr(chatparse, "ResponseParser"):
    pytest.skip(
        "chatparse.ResponseParser does not exist yet (the parsing engine is not written)",
        allow_module_level=True,
    )

from chatparse.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
QWEN3_TEMPLATE = EXAMPLES / "templates" / "qwen3.json"
QWEN3_OUTPUT = EXAMPLES / "outputs" / "qwen3.txt"
GEMMA4_TEMPLATE = EXAMPLES / "templates" / "gemma4.json"
GEMMA4_OUTPUT = EXAMPLES / "outputs" / "gemma4.txt"

QWEN3_MESSAGE = {
    "role": "assistant",
    "reasoning_content": (
        "The user wants the current weather in Zürich and in Tokyo, in Celsius. I have a get_weather tool "
        "that takes a city and a unit. The two lookups are independent, so I can call the tool twice in "
        "parallel instead of waiting for the first result. Tokyo should be written in English for the API."
    ),
    "content": "I'll look up the current weather in both cities for you.",
    "tool_calls": [
        {
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}},
        },
        {
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "celsius"}},
        },
    ],
}

GEMMA4_MESSAGE = {
    "role": "assistant",
    "reasoning_content": (
        "The user asks for the weather in Paris for the next 3 days and the local time there. "
        "I can call get_weather and get_time back to back."
    ),
    "content": "Let me check both for you.",
    "tool_calls": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "arguments": {"city": "Paris, France", "days": 3, "units": "metric"},
            },
        },
        {"type": "function", "function": {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}},
    ],
}

# A minimal ChatML-style template used by the error-path tests.
SIMPLE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open_pattern": "\\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": "\\s*(?:<\\|im_end\\|>|<\\|endoftext\\|>)"},
    },
}

# Gemma 4 malformed-recovery example (response-template.md §4.2).
GEMMA4_MALFORMED = 'Hi<|tool_call>call:f{a:<|"|>x<|"|>,,}<tool_call|><|tool_call>call:g{b:1}<tool_call|>'


def run(capsys: pytest.CaptureFixture[str], *argv: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8", newline="")
    return path


def write_json(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def assert_one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("chatparse: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, err)


def parse_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def check_event_stream(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Check the open/chunk/close structure of streamed events; return the final message."""
    assert records[-1]["type"] == "message"
    events = records[:-1]
    current: str | None = None
    for event in events:
        assert event["type"] in {"region_open", "region_chunk", "region_close", "region_malformed"}
        if event["type"] == "region_open":
            assert current is None, events
            current = event["field"]
        else:
            assert event["field"] == current, events
            if event["type"] == "region_chunk":
                assert isinstance(event["text"], str)
                assert isinstance(event["dirty"], bool)
            else:
                current = None
    assert current is None, "a region is still open after finalize"
    message: dict[str, Any] = records[-1]["message"]
    return message


@pytest.fixture
def stdin_bytes(monkeypatch: pytest.MonkeyPatch):
    """Replace stdin by an in-memory stream (no file descriptor) holding the given bytes."""

    def install(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=""))

    return install


# --------------------------------------------------------------------------------------------------
# parse


def test_parse_bundled_qwen3_example(capsys):
    code, out, err = run(capsys, "parse", "--template", QWEN3_TEMPLATE, QWEN3_OUTPUT)
    assert code == 0, err
    assert json.loads(out) == QWEN3_MESSAGE
    assert "Zürich" in out  # ensure_ascii=False
    assert out.startswith("{\n  ")  # pretty-printed


def test_parse_bundled_gemma4_example_with_prefix(capsys):
    prefix = "<|turn>user\nWeather and time in Paris?<turn|>\n<|turn>model\n"
    code, out, err = run(capsys, "parse", "-t", GEMMA4_TEMPLATE, "--prefix", prefix, GEMMA4_OUTPUT)
    assert code == 0, err
    assert json.loads(out) == GEMMA4_MESSAGE


def test_parse_prefix_file_prewritten_think(capsys, tmp_path):
    # Thinking-2507 style: the prompt pre-writes "<think>\n"; the generation starts inside the reasoning.
    prefix = write(
        tmp_path / "prompt.txt", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    )
    output = write(tmp_path / "out.txt", "Greet back.\n</think>\n\nHello!<|im_end|>")
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "--prefix-file", prefix, output)
    assert code == 0, err
    assert json.loads(out) == {"role": "assistant", "reasoning_content": "Greet back.", "content": "Hello!"}


def test_parse_without_prefix_keeps_think_in_content(capsys, tmp_path):
    output = write(tmp_path / "out.txt", "Greet back.\n</think>\n\nHello!<|im_end|>")
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, output)
    assert code == 0, err
    assert "</think>" in json.loads(out)["content"]


def test_parse_tokenizer_config_template(capsys, tmp_path):
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "chat_template": "{{ messages }}",
        "response_template": json.loads(QWEN3_TEMPLATE.read_text(encoding="utf-8")),
    }
    template = write_json(tmp_path / "tokenizer_config.json", config)
    code, out, err = run(capsys, "parse", "--template", template, QWEN3_OUTPUT)
    assert code == 0, err
    assert json.loads(out) == QWEN3_MESSAGE


def test_parse_tools_coerce_arguments(capsys, tmp_path):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                },
            },
        }
    ]
    tools_file = write_json(tmp_path / "tools.json", tools)
    output = write(
        tmp_path / "out.txt",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n</tool_call><|im_end|>',
    )
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, output)
    assert code == 0, err
    assert json.loads(out)["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "days": "3"}
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "--tools", tools_file, output)
    assert code == 0, err
    assert json.loads(out)["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "days": 3}
    # an object with a "tools" list (e.g. a chat-completions request body) is accepted too
    request = write_json(tmp_path / "request.json", {"model": "m", "tools": tools})
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "--tools", request, output)
    assert code == 0, err
    assert json.loads(out)["tool_calls"][0]["function"]["arguments"]["days"] == 3


def test_parse_stdin(capsys, stdin_bytes):
    stdin_bytes(QWEN3_OUTPUT.read_bytes())
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "-")
    assert code == 0, err
    assert json.loads(out) == QWEN3_MESSAGE


def test_parse_reads_output_exactly(capsys, tmp_path):
    # CRLF is kept (no newline translation) and non-ASCII survives.
    output = tmp_path / "out.txt"
    output.write_bytes("<think>a\r\nb</think>Grüße 👋<|im_end|>".encode())
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, output)
    assert code == 0, err
    message = json.loads(out)
    assert message["reasoning_content"] == "a\r\nb"
    assert message["content"] == "Grüße 👋"
    assert "Grüße 👋" in out


# --------------------------------------------------------------------------------------------------
# stream


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 1000])
def test_stream_file_matches_parse(capsys, chunk_size):
    code, out, err = run(
        capsys, "stream", "-t", QWEN3_TEMPLATE, "--chunk-size", str(chunk_size), QWEN3_OUTPUT
    )
    assert code == 0, err
    records = parse_lines(out)
    assert check_event_stream(records) == QWEN3_MESSAGE
    events = records[:-1]
    opened = [e["field"] for e in events if e["type"] == "region_open"]
    assert opened == ["reasoning_content", "content", "tool_calls", "tool_calls"]
    closes = [e for e in events if e["type"] == "region_close"]
    assert [c["value"] for c in closes if c["field"] == "tool_calls"] == QWEN3_MESSAGE["tool_calls"]
    # chunks of the reasoning region concatenate to its raw body
    reasoning = "".join(
        e["text"] for e in events if e["type"] == "region_chunk" and e["field"] == "reasoning_content"
    )
    assert reasoning.strip() == QWEN3_MESSAGE["reasoning_content"]
    if chunk_size == 1:
        assert sum(e["type"] == "region_chunk" for e in events) > 50


def test_stream_default_chunk_size_and_delay(capsys):
    code, out, err = run(capsys, "stream", "-t", GEMMA4_TEMPLATE, "--delay", "0.0001", GEMMA4_OUTPUT)
    assert code == 0, err
    records = parse_lines(out)
    assert check_event_stream(records) == GEMMA4_MESSAGE
    chunks = [e for e in records if e["type"] == "region_chunk"]
    # 4-character feeds; a chunk is longer only by text held back as a possible delimiter
    assert len(chunks) > 40
    assert max(len(e["text"]) for e in chunks) <= 4 + len("<|tool_call>call:get_weather")


def test_stream_initial_events_from_prefix(capsys, tmp_path):
    output = write(tmp_path / "out.txt", "plan</think>done<|im_end|>")
    prefix = "<|im_start|>assistant\n<think>\n"
    code, out, err = run(capsys, "stream", "-t", QWEN3_TEMPLATE, "--prefix", prefix, output)
    assert code == 0, err
    records = parse_lines(out)
    assert records[0] == {**records[0], "type": "region_open", "field": "reasoning_content"}
    assert check_event_stream(records) == {
        "role": "assistant",
        "reasoning_content": "plan",
        "content": "done",
    }


def test_stream_stdin(capsys, stdin_bytes):
    stdin_bytes(QWEN3_OUTPUT.read_bytes())
    code, out, err = run(capsys, "stream", "-t", QWEN3_TEMPLATE, "-")
    assert code == 0, err
    assert check_event_stream(parse_lines(out)) == QWEN3_MESSAGE


def test_stream_malformed_region_is_reported_and_recovered(capsys, tmp_path):
    output = write(tmp_path / "out.txt", GEMMA4_MALFORMED)
    code, out, err = run(capsys, "stream", "-t", GEMMA4_TEMPLATE, "--chunk-size", "5", output)
    assert code == 1
    records = parse_lines(out)
    malformed = [e for e in records if e["type"] == "region_malformed"]
    assert len(malformed) == 1
    assert malformed[0]["field"] == "tool_calls"
    assert malformed[0]["error"]["type"] == "ValueError"
    assert isinstance(malformed[0]["error"]["message"], str) and malformed[0]["error"]["message"]
    message = check_event_stream(records)
    assert message["content"] == "Hi"
    assert message["tool_calls"] == [{"type": "function", "function": {"name": "g", "arguments": {"b": 1}}}]
    assert_one_line_error(err, str(output), "malformed", "tool_calls", "ValueError")


def test_stream_events_carry_offsets(capsys):
    # enriched event contract: start/end offsets on open/close events
    code, out, err = run(capsys, "stream", "-t", QWEN3_TEMPLATE, QWEN3_OUTPUT)
    assert code == 0, err
    text = QWEN3_OUTPUT.read_text(encoding="utf-8")
    for event in parse_lines(out)[:-1]:
        if event["type"] in ("region_open", "region_close"):
            assert 0 <= event["start"] <= event["end"] <= len(text)
    first_open = parse_lines(out)[0]
    assert text[first_open["start"] : first_open["end"]] == "<think>"


# --------------------------------------------------------------------------------------------------
# templates validate


def test_validate_ok(capsys):
    code, out, err = run(capsys, "templates", "validate", QWEN3_TEMPLATE)
    assert code == 0, err
    assert "OK" in out and str(QWEN3_TEMPLATE) in out
    assert "reasoning_content" in out


def test_validate_bundled_templates(capsys):
    for template in sorted((EXAMPLES / "templates").glob("*.json")):
        code, out, err = run(capsys, "templates", "validate", template)
        assert code == 0, (template, err)


def test_validate_tokenizer_config(capsys, tmp_path):
    config = {"chat_template": "x", "response_template": SIMPLE_TEMPLATE}
    path = write_json(tmp_path / "tokenizer_config.json", config)
    code, out, err = run(capsys, "templates", "validate", path)
    assert code == 0, err
    assert "OK" in out and "response_template" in out


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        ({"fields": {}}, "response_template.fields must be a non-empty dict"),
        ({**SIMPLE_TEMPLATE, "bogus": 1}, "Unknown keys in response_template: ['bogus']"),
        (
            {"start_anchor": "S", "fields": {"x": {"open_pattern": "(", "close": "y"}}},
            "Field 'x': invalid open_pattern regex",
        ),
        ([1, 2], "response_template must be a dict, got list"),
    ],
)
def test_validate_invalid_template(capsys, tmp_path, template, needle):
    path = write_json(tmp_path / "t.json", template)
    code, out, err = run(capsys, "templates", "validate", path)
    assert code == 2
    assert out == ""
    assert_one_line_error(err, str(path), needle)


def test_validate_tokenizer_config_without_template(capsys, tmp_path):
    path = write_json(tmp_path / "tokenizer_config.json", {"chat_template": "x", "tokenizer_class": "T"})
    code, _, err = run(capsys, "templates", "validate", path)
    assert code == 2
    assert_one_line_error(err, str(path), "response_template")


def test_validate_null_template_in_tokenizer_config(capsys, tmp_path):
    path = write_json(tmp_path / "tokenizer_config.json", {"chat_template": "x", "response_template": None})
    code, _, err = run(capsys, "templates", "validate", path)
    assert code == 2
    assert_one_line_error(err, str(path), "null")


# --------------------------------------------------------------------------------------------------
# error paths


@pytest.mark.parametrize("command", ["parse", "stream"])
def test_missing_template_file(capsys, tmp_path, command):
    missing = tmp_path / "nope.json"
    code, out, err = run(capsys, command, "-t", missing, QWEN3_OUTPUT)
    assert code == 2
    assert out == ""
    assert_one_line_error(err, str(missing), "not found")


def test_missing_template_file_validate(capsys, tmp_path):
    missing = tmp_path / "nope.json"
    code, _, err = run(capsys, "templates", "validate", missing)
    assert code == 2
    assert_one_line_error(err, str(missing), "not found")


@pytest.mark.parametrize("command", ["parse", "stream"])
def test_invalid_json_template(capsys, tmp_path, command):
    path = write(tmp_path / "t.json", '{"fields": {,}')
    code, out, err = run(capsys, command, "-t", path, QWEN3_OUTPUT)
    assert code == 2
    assert out == ""
    assert_one_line_error(err, str(path), "invalid JSON", "line 1")


@pytest.mark.parametrize("command", ["parse", "stream"])
def test_invalid_template(capsys, tmp_path, command):
    path = write_json(tmp_path / "t.json", {"start_anchor": "S", "fields": {"x": {"open": 3}}})
    code, out, err = run(capsys, command, "-t", path, QWEN3_OUTPUT)
    assert code == 2
    assert out == ""
    assert_one_line_error(err, str(path), "invalid response_template", "Field 'x'")


@pytest.mark.parametrize("command", ["parse", "stream"])
def test_missing_output_file(capsys, tmp_path, command):
    missing = tmp_path / "missing.txt"
    code, out, err = run(capsys, command, "-t", QWEN3_TEMPLATE, missing)
    assert code == 2
    assert out == ""
    assert_one_line_error(err, str(missing), "not found")


def test_output_is_directory(capsys, tmp_path):
    code, _, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, tmp_path)
    assert code == 2
    assert_one_line_error(err, str(tmp_path), "directory")


def test_output_not_utf8(capsys, tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"caf\xe9<|im_end|>")
    code, _, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, path)
    assert code == 2
    assert_one_line_error(err, str(path), "UTF-8")


def test_parse_error_exit_1(capsys, tmp_path):
    output = write(tmp_path / "out.txt", "<tool_call>\n{not json}\n</tool_call><|im_end|>")
    code, out, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, output)
    assert code == 1
    assert out == ""
    assert_one_line_error(err, str(output), "ValueError", "json")


def test_parse_error_malformed_gemma4(capsys, tmp_path):
    output = write(tmp_path / "out.txt", GEMMA4_MALFORMED)
    code, out, err = run(capsys, "parse", "-t", GEMMA4_TEMPLATE, output)
    assert code == 1
    assert out == ""
    assert_one_line_error(err, str(output), "ValueError")


@pytest.mark.parametrize("command", ["parse", "stream"])
def test_required_field_missing_exit_1(capsys, tmp_path, command):
    template = {
        "start_anchor": "A",
        "fields": {"answer": {"open": "<a>", "close": "</a>", "optional": False}},
    }
    path = write_json(tmp_path / "t.json", template)
    output = write(tmp_path / "out.txt", "zzz")
    code, _, err = run(capsys, command, "-t", path, output)
    assert code == 1
    assert_one_line_error(err, str(output), "Required response_template fields missing", "answer")


def test_parse_error_from_stdin_names_stdin(capsys, stdin_bytes):
    stdin_bytes(b"<tool_call>{bad</tool_call>")
    code, _, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "-")
    assert code == 1
    assert_one_line_error(err, "<stdin>")


def test_missing_prefix_file(capsys, tmp_path):
    missing = tmp_path / "prompt.txt"
    code, _, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "--prefix-file", missing, QWEN3_OUTPUT)
    assert code == 2
    assert_one_line_error(err, str(missing), "not found")


def test_missing_tools_file(capsys, tmp_path):
    missing = tmp_path / "tools.json"
    code, _, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "--tools", missing, QWEN3_OUTPUT)
    assert code == 2
    assert_one_line_error(err, str(missing), "not found")


def test_invalid_json_tools_file(capsys, tmp_path):
    path = write(tmp_path / "tools.json", "[{")
    code, _, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "--tools", path, QWEN3_OUTPUT)
    assert code == 2
    assert_one_line_error(err, str(path), "invalid JSON")


def test_tools_file_wrong_shape(capsys, tmp_path):
    path = write_json(tmp_path / "tools.json", {"name": "f"})
    code, _, err = run(capsys, "parse", "-t", QWEN3_TEMPLATE, "--tools", path, QWEN3_OUTPUT)
    assert code == 2
    assert_one_line_error(err, str(path), "list")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "command is required"),
        (["templates"], "action is required"),
        (["bogus"], "invalid choice"),
        (["parse"], "required"),
        (["parse", "-t", str(QWEN3_TEMPLATE)], "OUTPUT_FILE"),
        (["parse", "-t", "t.json", "--prefix", "a", "--prefix-file", "b", "out.txt"], "not allowed"),
        (["stream", "-t", str(QWEN3_TEMPLATE), "--chunk-size", "x", str(QWEN3_OUTPUT)], "--chunk-size"),
        (["stream", "-t", str(QWEN3_TEMPLATE), "--chunk-size", "0", str(QWEN3_OUTPUT)], "--chunk-size"),
        (["stream", "-t", str(QWEN3_TEMPLATE), "--delay", "-1", str(QWEN3_OUTPUT)], "--delay"),
        (["parse", "-t", str(QWEN3_TEMPLATE), "--prefix-file", "-", "out.txt"], "--prefix-file"),
        (["templates", "validate"], "FILE"),
    ],
)
def test_usage_errors(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert_one_line_error(err, needle)


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--help"], ["parse", "stream", "templates", "Exit status"]),
        (["parse", "--help"], ["--template", "--prefix", "--prefix-file", "--tools", "OUTPUT_FILE"]),
        (["stream", "--help"], ["--chunk-size", "--delay", "region_malformed", "stdin"]),
        (["templates", "--help"], ["validate"]),
        (["templates", "validate", "--help"], ["tokenizer_config.json", "FILE"]),
    ],
)
def test_help(capsys, argv, needles):
    code, out, _ = run(capsys, *argv)
    assert code == 0
    for needle in needles:
        assert needle in out, needle


# --------------------------------------------------------------------------------------------------
# the installed console script, in a real subprocess


def _console_command() -> list[str]:
    scripts = Path(sys.executable).parent
    for name in ("chatparse", "chatparse.exe"):
        if (scripts / name).exists():
            return [str(scripts / name)]
    found = shutil.which("chatparse")
    return [found] if found else [sys.executable, "-m", "chatparse.cli"]


def test_console_script_parse_and_stream_stdin(tmp_path):
    command = _console_command()
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [*command, "parse", "--template", str(QWEN3_TEMPLATE), str(QWEN3_OUTPUT)],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout.decode("utf-8")) == QWEN3_MESSAGE

    done = subprocess.run(
        [*command, "stream", "--template", str(QWEN3_TEMPLATE), "-"],
        input=QWEN3_OUTPUT.read_bytes(),
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert check_event_stream(parse_lines(done.stdout.decode("utf-8"))) == QWEN3_MESSAGE

    missing = tmp_path / "missing.txt"
    done = subprocess.run(
        [*command, "parse", "--template", str(QWEN3_TEMPLATE), str(missing)],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert_one_line_error(done.stderr.decode("utf-8"), str(missing))


def test_console_script_stream_stdin_incremental():
    """With a real pipe, events for the first part arrive before stdin is closed."""
    command = _console_command()
    proc = subprocess.Popen(
        [*command, "stream", "--template", str(QWEN3_TEMPLATE), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"<think>\nplanning</think>")
        proc.stdin.flush()
        seen = []
        while True:
            line = proc.stdout.readline()
            assert line, "stream ended before the reasoning region closed"
            event = json.loads(line)
            seen.append(event)
            if event["type"] == "region_close":
                break
        assert seen[-1]["value"] == "planning"
        proc.stdin.write("Done ✓<|im_end|>".encode())
        proc.stdin.close()
        rest = parse_lines(proc.stdout.read().decode("utf-8"))
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert check_event_stream(seen + rest) == {
        "role": "assistant",
        "reasoning_content": "planning",
        "content": "Done ✓",
    }
