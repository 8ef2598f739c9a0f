"""`chatparse parse --jsonl FILE --field NAME`: one parsed message per input line, in order."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import chatparse
from chatparse import catalog
from chatparse.cli import main

from .helpers import CASES, FAMILIES, family_cases


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def expected_line(text, template, prefix, tools=None):
    try:
        return chatparse.parse_response(text, template, prefix=prefix, tools=tools)
    except ValueError as e:
        return {"error": type(e).__name__}


def outputs(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.mark.parametrize("name", ["QWEN_JSON", "GPT_OSS", "KIMI_K2", "MISTRAL_V11"])
def test_every_line_is_parsed_in_order(tmp_path, capsys, name):
    cases = family_cases(name)
    src = write_lines(tmp_path / "in.jsonl", [{"p": c["prefix"], "g": {"text": c["text"]}} for c in cases])
    (tmp_path / "t.json").write_text(json.dumps(FAMILIES[name]), encoding="utf-8")
    code = main(
        [
            "parse",
            "--jsonl",
            str(src),
            "--field",
            "g.text",
            "--prefix-field",
            "p",
            "-t",
            str(tmp_path / "t.json"),
        ]
    )
    out = outputs(capsys.readouterr().out)
    assert len(out) == len(cases)
    failed = 0
    for i, (got, case) in enumerate(zip(out, cases), start=1):
        exp = expected_line(case["text"], FAMILIES[name], case["prefix"])
        if "error" in exp:
            failed += 1
            assert got["error"]["line"] == i and got["error"]["type"] == exp["error"]
        else:
            assert got == json.loads(json.dumps(exp))
    assert code == (1 if failed else 0)


def test_several_processes_progress_and_errors(tmp_path):
    rows = [{"text": f"<think>r{i}</think>answer {i}<|im_end|>"} for i in range(3000)]
    rows[1234] = {"nope": 1}
    src = write_lines(tmp_path / "in.jsonl", rows)
    with open(src, "a", encoding="utf-8") as f:
        f.write("{broken\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "chatparse.cli",
            "parse",
            "--jsonl",
            str(src),
            "--field",
            "text",
            "--model",
            "qwen3",
            "-j",
            "2",
            "--progress",
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert proc.returncode == 1
    out = outputs(proc.stdout)
    assert len(out) == 3001
    assert out[0] == {"role": "assistant", "reasoning_content": "r0", "content": "answer 0"}
    assert out[2999]["content"] == "answer 2999"
    assert out[1234] == {"error": {"line": 1235, "type": "ValueError", "message": "no text field 'text'"}}
    assert out[3000]["error"]["line"] == 3001 and out[3000]["error"]["message"].startswith("invalid JSON")
    assert "100.0%" in proc.stderr and "3,001 lines" in proc.stderr
    assert "2 of 3001 line(s) could not be parsed; first: line 1235" in proc.stderr
    one = subprocess.run(
        [
            sys.executable,
            "-m",
            "chatparse.cli",
            "parse",
            "--jsonl",
            str(src),
            "--field",
            "text",
            "--model",
            "qwen3",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert one.stdout == proc.stdout and "lines/s" not in one.stderr


def test_stdin_auto_mode_and_usage_errors(tmp_path, capsys, monkeypatch):
    import io

    case = next(c for c in CASES if c["id"] == "QWEN_JSON-doc")
    monkeypatch.setattr(
        sys, "stdin", io.StringIO(json.dumps({"t": case["text"], "p": case["prefix"]}) + "\n")
    )
    assert main(["parse", "--jsonl", "-", "--field", "t", "--prefix-field", "p", "--auto"]) == 0
    (msg,) = outputs(capsys.readouterr().out)
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather", "get_weather"]
    src = write_lines(tmp_path / "in.jsonl", [{"t": "x"}])
    assert main(["parse", "--jsonl", str(src), "--model", "qwen3"]) == 2
    assert "--jsonl needs --field" in capsys.readouterr().err
    assert main(["parse", "--jsonl", str(src), "--field", "t", "--model", "qwen3", "-j", "0"]) == 2
    assert (
        main(["parse", "--jsonl", str(tmp_path / "missing.jsonl"), "--field", "t", "--model", "qwen3"]) == 2
    )
    # --model's generation prompt is the prefix unless a line gives its own
    src = write_lines(tmp_path / "p.jsonl", [{"t": "<think>a</think>b<|im_end|>"}])
    assert main(["parse", "--jsonl", str(src), "--field", "t", "--model", "Qwen/Qwen3-8B"]) == 0
    assert outputs(capsys.readouterr().out) == [
        chatparse.parse_response(
            "<think>a</think>b<|im_end|>", catalog.get("qwen3"), prefix="<|im_start|>assistant\n"
        )
    ]
