"""`ChatParser` built from a compiled template, as the engine plugins build one per request: the
template is used as given (no `resolve_template` pass) when resolving would return it unchanged,
with the same deltas, message and missing-anchor check as from its dict."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from chatparse._template import load_response_template
from chatparse.openai import ChatParser, MissingAnchorWarning, _chat
from chatparse.openai._resolve import relax_call_keys

from ..support.build import COMPILED, pure_only
from ..support.counting import calls_of
from .helpers import CASES, FAMILIES, case_kwargs, stream


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"resolve_template": 0}
    real = _chat.resolve_template

    def resolve(*args: Any, **kwargs: Any) -> Any:
        calls["resolve_template"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(_chat, "resolve_template", resolve)
    return calls


@pytest.mark.parametrize("case", CASES, ids=[f"{c['template']}-{i}" for i, c in enumerate(CASES)])
def test_a_compiled_template_parses_as_its_dict(case: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = FAMILIES[case["template"]]
    compiled = load_response_template(spec)
    text = case["text"]
    chunks = [text[i : i + 3] for i in range(0, len(text), 3)]
    want = stream(chunks, **case_kwargs(case))
    calls = _counting(monkeypatch)
    got = stream(chunks, **case_kwargs(case, template=compiled))
    assert got == want
    # resolving would give the compiled template back unless its call transform is relaxed
    # (counted in the pure build: compiled code calls `resolve_template` natively)
    if not COMPILED:
        assert calls["resolve_template"] == (0 if relax_call_keys(spec) is spec else 1)


def test_the_missing_anchor_check_and_its_warning_are_the_same() -> None:
    case = next(c for c in CASES if relax_call_keys(FAMILIES[c["template"]]) is FAMILIES[c["template"]])
    spec = FAMILIES[case["template"]]
    for template in (spec, load_response_template(spec)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            ChatParser(template=template, prefix="no anchor in this prompt")
        (w,) = seen
        assert w.category is MissingAnchorWarning
        # the caller's line (in the pure build: compiled functions leave no frame to count)
        assert COMPILED or w.filename == __file__
        with pytest.raises(ValueError):
            ChatParser(template=template, prefix="no anchor in this prompt", missing_anchor="error")
        with pytest.raises(ValueError):
            ChatParser(template=template, prefix="", missing_anchor="sometimes")


@pure_only
def test_the_prompt_is_searched_for_an_anchor_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled template used as given: the core cuts the prompt at its last start anchor, and the
    missing-anchor check (a second search of the whole prompt) runs only when the core cut nothing,
    where it warns as before; an unknown policy is refused either way."""
    case = next(c for c in CASES if relax_call_keys(FAMILIES[c["template"]]) is FAMILIES[c["template"]])
    compiled = load_response_template(FAMILIES[case["template"]])
    anchor = case_kwargs(case)["prefix"]
    assert anchor
    checks = calls_of(monkeypatch, _chat, "_check_prefix")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            ChatParser(template=compiled, prefix="<|user|>earlier turns " + anchor)
        assert checks[0] == 0 and not seen
        ChatParser(template=compiled, prefix="no anchor in this prompt")
        assert checks[0] == 1 and [w.category for w in seen] == [MissingAnchorWarning]
    with pytest.raises(ValueError):
        ChatParser(template=compiled, prefix=anchor, missing_anchor="sometimes")


@pure_only
def test_no_initial_events_are_processed_when_the_prefix_leaves_none(monkeypatch: pytest.MonkeyPatch) -> None:
    processed = {"n": 0}
    real = ChatParser._process

    def process(self: Any, events: Any, truncated_drops: bool) -> Any:
        processed["n"] += 1
        return real(self, events, truncated_drops)

    monkeypatch.setattr(ChatParser, "_process", process)
    spec = FAMILIES[CASES[0]["template"]]
    ChatParser(template=spec, prefix="")
    assert processed["n"] == 0


@pytest.mark.parametrize("case", [c for c in CASES if c["tools"]][:60], ids=lambda c: c["id"])
def test_a_tool_table_is_taken_as_the_parsers_table(case: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    # A `ToolTable` (`build_tool_table`'s result, which the engine plugins build per request)
    # parses as the tools it was built from, and is the core's table itself (no second build).
    from chatparse import _parser
    from chatparse.tools import build_tool_table

    text = case["text"]
    chunks = [text[i : i + 2] for i in range(0, len(text), 2)]
    for mode in ("complete", "early"):
        want = stream(chunks, **case_kwargs(case, stream_tool_calls=mode))
        table = build_tool_table(case["tools"])
        got = stream(chunks, **case_kwargs(case, tools=table, stream_tool_calls=mode))
        assert got == want
    table = build_tool_table(case["tools"])
    parser = ChatParser(**case_kwargs(case, tools=table))
    assert parser._parser._tools is table
    if not COMPILED:  # (counted in the pure build: compiled code calls it natively)
        built = calls_of(monkeypatch, _parser, "build_tool_table")
        ChatParser(**case_kwargs(case, tools=table))
        assert built[0] == 0


def test_auto_mode_refuses_a_tool_table() -> None:
    from chatparse.tools import build_tool_table

    with pytest.raises(ValueError, match="tool table"):
        ChatParser(auto=True, tools=build_tool_table([{"name": "f"}]))
