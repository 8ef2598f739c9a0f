"""Tests for the catalog parts of the CLI: ``templates list/show``, ``validate --sample``, ``--model``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatparse import catalog
from chatparse.cli import main

ROOT = Path(__file__).resolve().parents[1]
QWEN3_OUTPUT = ROOT / "examples" / "outputs" / "qwen3.txt"
CATALOG_DIR = ROOT / "src" / "chatparse" / "catalog" / "templates"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return str(path)


def test_templates_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "templates", "list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == catalog.names()
    qwen = next(line for line in lines if line.split()[0] == "qwen3")
    assert catalog.describe("qwen3")["description"] in qwen


def test_templates_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "templates", "show", "gemma4")
    assert code == 0
    assert json.loads(out) == catalog.get("gemma4")


def test_templates_show_full(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "templates", "show", "gpt_oss", "--full")
    assert code == 0
    assert json.loads(out) == catalog.entry("gpt_oss")


def test_templates_show_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "templates", "show", "qwen")
    assert code == 2 and out == ""
    assert err.startswith("chatparse: error: ") and "qwen3" in err and err.count("\n") == 1


def test_templates_without_action(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "templates")
    assert code == 2 and "list, show or validate" in err


def test_validate_catalog_entry_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "templates", "validate", str(CATALOG_DIR / "qwen3.json"))
    assert code == 0
    assert "OK" in out and "reasoning_content" in out


def test_validate_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "good.txt", "<think>x</think>Hi<|im_end|>")
    calls = write(
        tmp_path, "calls.txt", '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>'
    )
    code, out, err = run(
        capsys, "templates", "validate", str(CATALOG_DIR / "qwen3.json"), "--sample", good, "--sample", calls
    )
    assert code == 0, err
    assert f"{good}: OK: reasoning_content, content" in out
    assert f"{calls}: OK: tool_calls (1)" in out


def test_validate_sample_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "good.txt", "Hi<|im_end|>")
    bad = write(tmp_path, "bad.txt", "<tool_call>{bad</tool_call>")
    code, out, err = run(
        capsys, "templates", "validate", str(CATALOG_DIR / "qwen3.json"), "--sample", good, "--sample", bad
    )
    assert code == 1
    assert f"{good}: OK" in out and f"{bad}: FAILED" in out
    assert "1 of 2 sample(s)" in err


def test_validate_sample_with_prefix_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpl = write(tmp_path, "tpl.json", json.dumps(catalog.get("qwen3")))
    sample = write(tmp_path, "s.txt", "reasoning</think>answer<|im_end|>")
    code, out, _ = run(
        capsys,
        "templates",
        "validate",
        tpl,
        "--sample",
        sample,
        "--prefix",
        "<|im_start|>assistant\n<think>\n",
        "--show",
    )
    assert code == 0
    assert '"reasoning_content": "reasoning"' in out and '"content": "answer"' in out


def test_validate_sample_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys,
        "templates",
        "validate",
        str(CATALOG_DIR / "qwen3.json"),
        "--sample",
        str(tmp_path / "nope.txt"),
    )
    assert code == 2 and "not found" in err


def test_parse_with_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "parse", "--model", "unsloth/Qwen3-8B-GGUF", str(QWEN3_OUTPUT))
    assert code == 0, err
    message = json.loads(out)
    assert message["content"] == "I'll look up the current weather in both cities for you."
    assert len(message["tool_calls"]) == 2


def test_parse_with_model_uses_generation_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-R1-Distill's generation prompt pre-writes "<think>\n": the reasoning is split only with it
    output = write(tmp_path, "out.txt", "Six times seven.\n</think>\n\n42<｜end▁of▁sentence｜>")
    code, out, _ = run(capsys, "parse", "-m", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", output)
    assert code == 0
    assert json.loads(out) == {"role": "assistant", "reasoning_content": "Six times seven.", "content": "42"}


def test_parse_with_model_and_explicit_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = write(tmp_path, "out.txt", "Hello<|im_end|>")
    code, out, _ = run(capsys, "parse", "--model", "Qwen/Qwen3-8B", "--prefix", "", output)
    assert code == 0
    assert json.loads(out) == {"role": "assistant", "content": "Hello"}


def test_parse_with_catalog_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = write(tmp_path, "out.txt", '[TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{"a": 1}</s>')
    code, out, _ = run(capsys, "parse", "--model", "mistral_v11_call_id", output)
    assert code == 0
    assert json.loads(out)["tool_calls"][0]["id"] == "abc123def"


def test_parse_with_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = write(tmp_path, "out.txt", "x")
    code, out, err = run(capsys, "parse", "--model", "acme/mystery-7b", output)
    assert code == 2 and out == ""
    assert "acme/mystery-7b" in err and "--auto" in err and err.count("\n") == 1


def test_parse_template_and_model_are_exclusive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = write(tmp_path, "out.txt", "x")
    tpl = str(CATALOG_DIR / "qwen3.json")
    code, _, err = run(capsys, "parse", "--model", "Qwen/Qwen3-8B", "--template", tpl, output)
    assert code == 2 and "not allowed with" in err
    code, _, err = run(capsys, "parse", output)
    assert code == 2 and "--model" in err


def test_parse_with_catalog_entry_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "parse",
        "--template",
        str(CATALOG_DIR / "qwen3.json"),
        "--prefix",
        "<|im_start|>assistant\n",
        str(QWEN3_OUTPUT),
    )
    assert code == 0 and len(json.loads(out)["tool_calls"]) == 2


def test_stream_with_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = write(tmp_path, "out.txt", "<|channel|>final<|message|>Hi there.<|return|>")
    code, out, err = run(capsys, "stream", "--model", "openai/gpt-oss-20b", "--chunk-size", "3", output)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1] == {"type": "message", "message": {"role": "assistant", "content": "Hi there."}}
    assert any(line["type"] == "region_chunk" for line in lines)


def test_template_option_takes_a_catalog_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--template qwen3`` (no such file) reads the catalog template: the template only, so the
    output parses as with the entry file and no prefix."""
    code, out, err = run(capsys, "parse", "--template", "qwen3", "--prefix", "", str(QWEN3_OUTPUT))
    by_file = run(
        capsys, "parse", "--template", str(CATALOG_DIR / "qwen3.json"), "--prefix", "", str(QWEN3_OUTPUT)
    )
    assert code == 0 and err == "" and by_file[0] == 0
    assert json.loads(out) == json.loads(by_file[1])


def test_a_file_wins_over_a_catalog_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen3").write_text(
        json.dumps(
            {"start_anchor": "<|im_start|>assistant\n", "fields": {"content": {"close": "<|im_end|>"}}}
        )
    )
    code, out, err = run(capsys, "templates", "validate", "qwen3")
    assert code == 0 and "fields content" in out and "reasoning_content" not in out


def test_validate_a_catalog_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sample = write(tmp_path, "s.txt", "<think>x</think>Hi<|im_end|>")
    code, out, err = run(capsys, "templates", "validate", "qwen3", "--sample", sample)
    assert code == 0, err
    assert out.startswith("qwen3: OK: fields reasoning_content")
    assert out.splitlines()[1].endswith(": OK: reasoning_content, content")


def test_unknown_template_name_says_what_was_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = write(tmp_path, "out.txt", "x")
    code, out, err = run(capsys, "parse", "--template", "qwen33", output)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "qwen33: template file not found" in err and "catalog template name" in err
