"""Both builds (pure Python, and the opt-in mypyc-compiled core; `tests/support/build.py`): what
must hold in whichever one runs. CI's main step runs these on the pure build, its compiled step on
the compiled one."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import chatparse
from chatparse import _template, catalog, load_response_template, parse_response

_TEXTS = [
    "plain text, no markers",
    '<think>hm</think>Hi<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>',
    '[TOOL_CALLS]f[ARGS]{"a": 1}<|tool▁calls▁begin|><|tool▁call▁begin|>function<|tool▁sep|>f\n'
    '```json\n{"a": 1}\n```<|tool▁call▁end|><|tool▁calls▁end|>',
]


def _parses(t: chatparse.Template) -> list[object]:
    out: list[object] = []
    for text in _TEXTS:
        try:
            out.append(parse_response(text, t, prefix=""))
        except ValueError as e:  # a required field missing: the same error both times
            out.append(("error", str(e)))
    return out


def test_every_catalog_template_pickles_and_parses_the_same() -> None:
    # Templates pickle as their spec and compile again on load (`Template.__reduce__`): the
    # compiled build's native objects do not pickle, and the round trip must give a template that
    # parses the same in both builds (`datasets` workers, multiprocessing).
    for name in catalog.names():
        t = load_response_template(catalog.get(name))
        data = pickle.dumps(t)
        _template._CACHE.clear()  # a real rebuild, not the in-process cache's same object
        copy = pickle.loads(data)
        assert copy is not t and copy.spec == t.spec, name
        assert _parses(copy) == _parses(t), name


def test_a_template_pickled_here_parses_the_same_in_a_fresh_process() -> None:
    t = load_response_template(catalog.get("qwen3"))
    code = textwrap.dedent(
        """
        import pickle, sys
        from chatparse import parse_response
        t = pickle.loads(sys.stdin.buffer.read())
        text = '<think>hm</think>Hi<tool_call>\\n{"name": "f", "arguments": {"a": 1}}\\n</tool_call>'
        print(repr(parse_response(text, t, prefix="")))
        """
    )
    got = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(t), capture_output=True, check=True
    ).stdout.decode()
    assert got.strip() == repr(parse_response(_TEXTS[1], t, prefix=""))


def test_no_compiled_module_shadows_the_sources() -> None:
    # mypyc builds in place: `HATCH_BUILD_HOOK_ENABLE_MYPYC=1 pip install .` leaves the extension
    # modules under src/chatparse/, where Python imports them before the .py files next to them,
    # so an editable install (and PYTHONPATH=src) would silently run the stale compiled code.
    src = Path(__file__).resolve().parents[2] / "src" / "chatparse"
    stale = sorted(str(p.relative_to(src.parent)) for p in src.rglob("*") if p.suffix in (".so", ".pyd"))
    stale += sorted(p.name for p in src.parent.glob("*__mypyc*"))
    assert not stale, f"compiled modules in the source tree shadow the sources: {stale}; delete them"
