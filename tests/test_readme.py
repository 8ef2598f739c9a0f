"""The README's Python examples run as written (the Serve example against a chatparse server in front
of the test engine), its `chatparse parse|stream|templates` commands run and exit 0, and the files
its commands name exist."""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
# Blocks that need a real checkpoint or a running engine (```python sketch): not run, but they must
# compile and every chatparse name they use must exist.
SKETCHES = re.findall(r"```python sketch\n(.*?)```", README, re.S)
SERVE_URL = "http://127.0.0.1:8000"


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_python_block_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    code = BLOCKS[index]
    monkeypatch.chdir(ROOT)
    if SERVE_URL in code:
        pytest.importorskip("openai")
        from .server.conftest import MODEL, model_dir, running
        from .server.engine import Script, TestEngine

        with TestEngine() as engine:
            engine.default = Script(
                text='<think>Paris.</think><tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
            )
            with running(upstream=engine.url, model=MODEL, tokenizer=str(model_dir(tmp_path))) as srv:
                runpy_code(code.replace(SERVE_URL, srv.url), tmp_path)
        assert "get_weather" in capsys.readouterr().out
        return
    runpy_code(code, tmp_path)


@pytest.mark.parametrize("index", range(len(SKETCHES)))
def test_sketch_block_names_exist(index: int) -> None:
    import ast
    import importlib

    tree = ast.parse(SKETCHES[index])
    modules: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chatparse"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                try:
                    value = getattr(module, alias.name)
                except AttributeError:  # a submodule (`from chatparse import hf`)
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                modules[alias.asname or alias.name] = value
    used = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            owner = modules[node.value.id]
            assert hasattr(owner, node.attr), f"README sketch uses {node.value.id}.{node.attr}"
            used += 1
        elif isinstance(node, ast.Name) and node.id in modules:
            used += 1
    assert used, "the sketch uses no chatparse name"


def runpy_code(code: str, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    runpy.run_path(str(script), run_name="__main__")


def test_files_named_by_readme_commands_exist() -> None:
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            if not line.startswith("chatparse ") and " chatparse " not in line:
                continue
            for word in shlex.split(line.split("#")[0].rstrip().rstrip("\\").replace("$'", "'")):
                if word.startswith("examples/"):
                    assert (ROOT / word).exists(), word


def _cli_commands() -> list[list[str]]:
    """The README's `chatparse parse|stream|templates` commands that read files (no stdin, no server)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.splitlines():
            if not re.match(r"chatparse (parse|stream|templates) ", line):
                continue
            # bash's $'...' quoting: only \n occurs
            words = [w.replace("\\n", "\n") for w in shlex.split(line.split(" #")[0].replace("$'", "'"))]
            if ">" in words:  # an output redirection: the test reads stdout itself
                words = words[: words.index(">")]
            if words[-1] != "-":
                out.append(words[1:])
    return out


def test_the_readme_has_command_line_examples() -> None:
    commands = _cli_commands()
    assert len(commands) >= 8 and any("--shape" in c for c in commands)


@pytest.mark.parametrize("argv", _cli_commands(), ids=lambda a: " ".join(a)[:60])
def test_command_line_example_runs(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from chatparse.cli import main

    monkeypatch.chdir(ROOT)
    argv = [a for a in argv if not a.startswith("--delay") and a != "0.02"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.strip()
