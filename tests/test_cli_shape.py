"""`chatparse parse` / `stream` output shapes (`--shape hf|openai`), with a template and with `--auto`.

Every family case of `tests/data/family_cases.json` (438 outputs, every catalog family) goes through
both commands in both shapes, and each output is checked against the library call it stands for:
`--shape hf` against `parse_response` / `ResponseParser`, `--shape openai` against
`chatparse.openai.parse_message` / `ChatParser`, and the two shapes against each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatparse import parse_response
from chatparse.cli import main
from chatparse.openai import merge_deltas, parse_message

DATA = Path(__file__).resolve().parent / "data"
FAMILIES: dict[str, dict[str, Any]] = json.loads((DATA / "families.json").read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = json.loads((DATA / "family_cases.json").read_text(encoding="utf-8"))
TEMPLATES = sorted({c["template"] for c in CASES})


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def no_ids(message: dict[str, Any]) -> dict[str, Any]:
    """The message with its random call ids blanked."""
    out = dict(message)
    if out.get("tool_calls"):
        out["tool_calls"] = [{**c, "id": "-"} for c in out["tool_calls"]]
    return out


def as_hf(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped message as the hf shape has it (for comparing the two shapes)."""
    out: dict[str, Any] = {"role": "assistant"}
    for key in ("reasoning_content", "content"):
        if message.get(key):
            out[key] = message[key]
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": json.loads(c["function"]["arguments"]),
                },
            }
            for c in message["tool_calls"]
        ]
    if message.get("chatparse"):
        out["chatparse"] = message["chatparse"]
    return out


def core_fields(message: dict[str, Any]) -> dict[str, Any]:
    """Reasoning (under any of the templates' names for it), content and calls, the empty ones left out."""
    out = {}
    for key in ("reasoning_content", "thinking", "reasoning"):
        if message.get(key):
            out["reasoning"] = message[key]
    if message.get("content"):
        out["content"] = message["content"]
    if message.get("tool_calls"):  # ids: only some templates give them in the hf shape
        out["tool_calls"] = [{k: v for k, v in c.items() if k != "id"} for c in message["tool_calls"]]
    return out


def files(tmp_path: Path, case: dict[str, Any]) -> list[str]:
    """Write the case's template, prefix and output; the CLI arguments for them (and its tools, if any)."""
    (tmp_path / "t.json").write_text(json.dumps(FAMILIES[case["template"]]), encoding="utf-8")
    (tmp_path / "p.txt").write_text(case["prefix"], encoding="utf-8", newline="")
    (tmp_path / "o.txt").write_text(case["text"], encoding="utf-8", newline="")
    args = ["-t", str(tmp_path / "t.json"), "--prefix-file", str(tmp_path / "p.txt")]
    if case["tools"] is not None:
        (tmp_path / "tools.json").write_text(json.dumps(case["tools"]), encoding="utf-8")
        args += ["--tools", str(tmp_path / "tools.json")]
    return args


def check_regions(events: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The region contract (one open, chunks, one close, no nesting); returns field -> closed values,
    and for text fields the concatenated chunks under `field + ':chunks'`."""
    open_field: str | None = None
    out: dict[str, list[Any]] = {}
    for e in events:
        if e["type"] == "region_open":
            assert open_field is None, events
            open_field = e["field"]
            out.setdefault(open_field + ":chunks", []).append("")
        elif e["type"] == "region_chunk":
            assert e["field"] == open_field and isinstance(e["text"], str), e
            out[open_field + ":chunks"][-1] += e["text"]
        else:
            assert e["type"] in ("region_close", "region_malformed") and e["field"] == open_field, e
            if e["type"] == "region_close":
                out.setdefault(open_field, []).append(e["value"])
            open_field = None
    assert open_field is None
    return out


@pytest.mark.parametrize("template", TEMPLATES)
def test_template_mode_both_shapes_for_every_case(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for case in (c for c in CASES if c["template"] == template):
        args = files(tmp_path, case)
        output = str(tmp_path / "o.txt")
        compiled = FAMILIES[template]
        try:
            reference: dict[str, Any] | None = parse_response(
                case["text"], compiled, prefix=case["prefix"], tools=case["tools"]
            )
        except ValueError:
            reference = None
        # hf (the default): parse_response's message, or exit 1
        code, out, err = run(capsys, "parse", *args, output)
        assert (code, run(capsys, "parse", "--shape", "hf", *args, output)[1]) == (
            0 if reference is not None else 1,
            out,
        ), case["id"]
        if reference is not None:
            assert json.loads(out) == json.loads(json.dumps(reference)), case["id"]
        # openai: parse_message's message, printed even when a region was malformed (then exit 1)
        expected = parse_message(case["text"], template=compiled, prefix=case["prefix"], tools=case["tools"])
        code, out, err = run(capsys, "parse", "--shape", "openai", *args, output)
        got = json.loads(out)
        assert no_ids(got) == no_ids(json.loads(json.dumps(expected))), case["id"]
        bad = bool((got.get("chatparse") or {}).get("errors"))
        assert code == (1 if bad else 0) and (err.count("\n") == 1 if bad else err == ""), (case["id"], err)
        if reference is not None and not bad:  # the two shapes say the same
            hf, oa = core_fields(json.loads(json.dumps(reference))), core_fields(as_hf(got))
            # D7 (docs/compatibility.md): parse_response keeps only a field's last region, the
            # OpenAI layer all of them
            hf_content, oa_content = hf.pop("content", ""), oa.pop("content", "")
            assert oa_content == hf_content or oa_content.endswith(hf_content), case["id"]
            assert oa == hf, case["id"]
        # stream --shape openai: the deltas merge to the message line, which is parse's message
        code, out, _ = run(capsys, "stream", "--shape", "openai", "--chunk-size", "3", *args, output)
        *deltas, final = lines(out)
        assert all(d["type"] == "delta" for d in deltas) and final["type"] == "message", case["id"]
        assert code == (1 if bad else 0), case["id"]
        message = final["message"]
        assert no_ids(message) == no_ids(got), case["id"]
        assert final["finish_reason"] == ("tool_calls" if message.get("tool_calls") else "stop")
        public = {k: v for k, v in message.items() if k != "chatparse"}
        assert no_ids(merge_deltas([d["delta"] for d in deltas])) == no_ids(public), case["id"]
        # stream (hf): region events, then parse_response's message
        code, out, _ = run(capsys, "stream", "--chunk-size", "3", *args, output)
        *events, final = lines(out)
        check_regions(events)
        if reference is not None:
            assert code == 0 and final == {"type": "message", "message": json.loads(json.dumps(reference))}


@pytest.mark.parametrize("template", TEMPLATES)
def test_auto_mode_both_shapes_for_every_case(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for case in (c for c in CASES if c["template"] == template):
        args = files(tmp_path, case)[2:]  # the prefix and the tools, no template
        output = str(tmp_path / "o.txt")
        code, out, _ = run(capsys, "parse", "--auto", "--shape", "openai", *args, output)
        openai_message = json.loads(out)
        assert code == 0 and all(c["id"].startswith("call_") for c in openai_message.get("tool_calls") or [])
        code, out, _ = run(capsys, "parse", "--auto", *args, output)
        hf_message = json.loads(out)
        assert code == 0 and hf_message == as_hf(openai_message), case["id"]
        # stream --shape openai: deltas that merge to the message
        code, out, _ = run(
            capsys, "stream", "--auto", "--shape", "openai", "--chunk-size", "2", *args, output
        )
        *deltas, final = lines(out)
        assert code == 0 and no_ids(final["message"]) == no_ids(openai_message), case["id"]
        public = {k: v for k, v in final["message"].items() if k != "chatparse"}
        assert no_ids(merge_deltas([d["delta"] for d in deltas])) == no_ids(public), case["id"]
        # stream (hf): region events whose chunks and values rebuild the hf message
        code, out, _ = run(capsys, "stream", "--auto", "--chunk-size", "2", *args, output)
        *events, final = lines(out)
        assert code == 0 and final == {"type": "message", "message": hf_message}, case["id"]
        regions = check_regions(events)
        for key in ("reasoning_content", "content"):
            assert "".join(regions.get(key + ":chunks", [])) == hf_message.get(key, ""), (case["id"], key)
            assert "".join(regions.get(key, [])) == hf_message.get(key, ""), (case["id"], key)
        assert regions.get("tool_calls", []) == hf_message.get("tool_calls", []), case["id"]


def test_shape_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "o.txt").write_text("hi", encoding="utf-8")
    code, out, err = run(capsys, "parse", "--auto", "--shape", "xml", str(tmp_path / "o.txt"))
    assert code == 2 and out == "" and "--shape" in err and "'hf', 'openai'" in err


def test_openai_shape_prints_the_recovered_message_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "o.txt").write_text(
        'Hi<tool_call>{"name": "f", "arguments": {bad}}</tool_call><tool_call>{"name": "g", "arguments": {}}'
        "</tool_call>",
        encoding="utf-8",
    )
    code, out, err = run(
        capsys, "parse", "--model", "qwen3", "--prefix", "", "--shape", "openai", str(tmp_path / "o.txt")
    )
    message = json.loads(out)
    assert code == 1 and [c["function"]["name"] for c in message["tool_calls"]] == ["g"]
    assert message["chatparse"]["errors"][0]["field"] == "tool_calls"
    assert err.startswith("chatparse: error: ") and "1 malformed region" in err and err.count("\n") == 1
    code, out, err = run(capsys, "parse", "--model", "qwen3", "--prefix", "", str(tmp_path / "o.txt"))
    assert code == 1 and out == "" and "cannot parse" in err  # hf: parse_response raises


@pytest.mark.parametrize("shape", ["hf", "openai"])
@pytest.mark.parametrize("mode", ["template", "auto"])
def test_jsonl_lines_have_the_shape_of_parse(
    shape: str, mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [c for c in CASES if c["template"] in ("QWEN_JSON", "GPT_OSS", "MISTRAL_V11") and not c["tools"]]
    src = tmp_path / "in.jsonl"
    for template in ("QWEN_JSON", "GPT_OSS", "MISTRAL_V11"):
        rows = [c for c in cases if c["template"] == template]
        src.write_text(
            "".join(json.dumps({"t": c["text"], "p": c["prefix"]}) + "\n" for c in rows), encoding="utf-8"
        )
        source = ["--auto"] if mode == "auto" else files(tmp_path, rows[0])[:2]
        argv = [
            "parse",
            "--jsonl",
            str(src),
            "--field",
            "t",
            "--prefix-field",
            "p",
            "--shape",
            shape,
            *source,
        ]
        main(argv)
        got = lines(capsys.readouterr().out)
        assert len(got) == len(rows)
        for line, case in zip(got, rows):
            args = files(tmp_path, case)
            args = args[2:] if mode == "auto" else args
            code, out, _ = run(
                capsys,
                "parse",
                "--shape",
                shape,
                *(["--auto"] if mode == "auto" else []),
                *args,
                str(tmp_path / "o.txt"),
            )
            if "error" in line:  # hf with a template: parse_response raised, and so does parse
                assert shape == "hf" and mode == "template" and code == 1, case["id"]
            else:
                assert no_ids(line) == no_ids(json.loads(out)), case["id"]
