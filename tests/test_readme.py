"""The README's Python examples run as written (the Serve example against a chatparse server in front
of the test engine), and the files its commands name exist."""

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
