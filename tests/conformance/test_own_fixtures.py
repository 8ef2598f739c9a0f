"""Own canitoolcall-format fixtures for the families the canitoolcall 0.1.1 corpus lacks.

Fixtures: ``tests/data/own_fixtures/<family>.jsonl`` (spec v0.1, ``spec_example`` provenance from
``shared/reference/families.md``).  Each fixture goes through the same machinery as the corpus
(``harness.run_case``: template from ``catalog.resolve_name(model=models[0])``, ``prefix`` =
``generation_prompt``, ``tools=``, ``finish_reason="length"`` for ``truncated``; non-streaming plus
the chunkings ``one``, ``char:0`` (one character per feed), ``char:1..3`` (seeded 1-8 characters),
``marker:0`` / ``marker:1`` (cuts at / around every marker)), then canitoolcall's own
``assert_conforms`` (strict unless the fixture is tagged ``x-soft-pass``, explained in its
``notes``), ``checks.run_checks`` for leakage, and ``assert_equivalent`` (strict) stream vs
non-stream.  The family metadata canitoolcall needs (leakage markers, stop tokens) lives in
:data:`FAMILIES`, since the own fixtures are flat files without ``family.json``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("canitoolcall", reason="canitoolcall (test extra) is not installed")

from canitoolcall import checks  # noqa: E402
from canitoolcall.fixtures import Family, Fixture, load_families, read_jsonl, validate  # noqa: E402
from canitoolcall.pytest_plugin import assert_conforms, assert_equivalent  # noqa: E402
from canitoolcall.results import Status  # noqa: E402

from ..catalog.breadth_specs import BY_TEMPLATE_ONLY  # noqa: E402
from ..catalog.breadth_specs import FAMILY_META as BREADTH_FAMILIES  # noqa: E402
from ..catalog.breadth_specs import KNOWN_FAILURES as BREADTH_KNOWN_FAILURES  # noqa: E402
from . import harness as H  # noqa: E402

_MISSING = H.missing_layer_reason()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")

DATA = Path(__file__).resolve().parents[1] / "data" / "own_fixtures"

_CHATML = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
# slug -> (name, has_reasoning, markers, stop tokens)
FAMILIES: dict[str, tuple[str, bool, list[str], list[str]]] = {
    "cohere": (
        "Cohere Command R7B / Command A",
        True,
        [
            "<|START_OF_TURN_TOKEN|>",
            "<|CHATBOT_TOKEN|>",
            "<|END_OF_TURN_TOKEN|>",
            "<|START_THINKING|>",
            "<|END_THINKING|>",
            "<|START_ACTION|>",
            "<|END_ACTION|>",
            "<|START_RESPONSE|>",
            "<|END_RESPONSE|>",
            "<|START_TEXT|>",
            "<|END_TEXT|>",
        ],
        ["<|END_OF_TURN_TOKEN|>"],
    ),
    "granite": (
        "IBM Granite 3.0 / 3.1 / 3.3 / 4.0",
        True,
        [
            "<|start_of_role|>",
            "<|end_of_role|>",
            "<|end_of_text|>",
            "<|tool_call|>",
            "<tool_call>",
            "</tool_call>",
            "<think>",
            "</think>",
            "<response>",
            "</response>",
        ],
        ["<|end_of_text|>"],
    ),
    "lfm2": (
        "Liquid LFM2 / LFM2.5 (Python-style calls) and LFM2-350M-Math",
        True,
        [
            *_CHATML[:2],
            "<|tool_call_start|>",
            "<|tool_call_end|>",
            "<think>",
            "</think>",
            "<|cot_start|>",
            "<|cot_end|>",
        ],
        ["<|im_end|>"],
    ),
    "smollm3": (
        "SmolLM3",
        True,
        [*_CHATML, "<tool_call>", "</tool_call>", "<think>", "</think>"],
        ["<|im_end|>", "<|endoftext|>"],
    ),
    "inkling": (
        "Inkling / TMLv0",
        True,
        [
            "<|message_model|>",
            "<|content_text|>",
            "<|content_thinking|>",
            "<|content_invoke_tool_json|>",
            "<|content_invoke_tool_text|>",
            "<|content_tool_error|>",
            "<|content_model_end_sampling|>",
            "<|end_message|>",
        ],
        ["<|content_model_end_sampling|>"],
    ),
    "ernie": (
        "ERNIE 4.5 Thinking",
        True,
        ["<think>", "</think>", "<response>", "</response>", "<tool_call>", "</tool_call>", "</s>"],
        ["</s>"],
    ),
    "phi4-mini": (
        "Phi-4-mini",
        False,
        ["<|assistant|>", "<|end|>", "<|endoftext|>", "functools["],
        ["<|end|>", "<|endoftext|>"],
    ),
    "functiongemma": (
        "FunctionGemma",
        False,
        [
            "<start_function_call>",
            "<end_function_call>",
            "<escape>",
            "<start_function_response>",
            "<start_of_turn>",
            "<end_of_turn>",
        ],
        ["<end_of_turn>", "<start_function_response>"],
    ),
    "deepseek-r1-distill": (
        "DeepSeek-R1-Distill (Qwen / Llama)",
        True,
        [
            "<think>",
            "</think>",
            "<｜Assistant｜>",
            "<｜User｜>",
            "<｜end▁of▁sentence｜>",
            "<｜tool▁calls▁begin｜>",
        ],
        ["<｜end▁of▁sentence｜>"],
    ),
    "qwen35-xml": (
        "Qwen3.5 XML tool calls",
        True,
        [
            *_CHATML,
            "<tool_call>",
            "</tool_call>",
            "<function=",
            "</function>",
            "<parameter=",
            "</parameter>",
            "<think>",
            "</think>",
        ],
        ["<|im_end|>", "<|endoftext|>"],
    ),
}

# The breadth formats (issue 10): fixtures rendered through the models' real chat templates.
FAMILIES.update(BREADTH_FAMILIES)

# Own fixtures for families the canitoolcall corpus has (the issue-10 bug classes: calls inside
# reasoning, payloads followed by text, stray special tokens, ...) use the corpus family's own
# markers and stop tokens (its family.json), so leakage is judged exactly as for the corpus.
_CORPUS_FAMILIES = load_families()
for _slug in (
    "deepseek",
    "gemma4",
    "glm",
    "gpt-oss",
    "kimi",
    "llama",
    "mistral",
    "qwen3-hermes",
    "qwen3-xml",
):
    _fam = _CORPUS_FAMILIES[_slug]
    FAMILIES[_slug] = (
        _fam.name,
        _fam.has_reasoning,
        list(_fam.markers),
        sorted({t for m in _fam.reference_models for t in m.stop_tokens}),
    )
FAMILIES["olmo3"] = (
    "Olmo 3 (Instruct and Think)",
    True,
    [*_CHATML, "<function_calls>", "</function_calls>", "<functions>", "</functions>", "<think>", "</think>"],
    ["<|im_end|>", "<|endoftext|>"],
)

# Fixture id -> reason, for failures caused by a catalog template (the catalog is owned elsewhere;
# these are strict xfails so a template fix shows up as XPASS).
# Fixtures that fail because of a catalog template bug (strict xfail with the cause). Empty now:
# `deepseek-r1-distill/think-opener-in-answer` was fixed by opening reasoning only at `^<think>`.
TEMPLATE_BUGS: dict[str, str] = {}
TEMPLATE_BUGS.update(BREADTH_KNOWN_FAILURES)  # breadth formats: limits named in breadth_specs

SOFT_TAG = "x-soft-pass"
PLACEHOLDER_REVISION = "0" * 40  # family.json for validation only: the fixtures pin no tokenizer


def _records() -> list[tuple[Path, int, dict]]:
    return [(p, n, rec) for p in sorted(DATA.glob("*.jsonl")) for n, rec in read_jsonl(p)]


def _family_dict(slug: str, models: list[str]) -> dict:
    name, has_reasoning, markers, stops = FAMILIES[slug]
    return {
        "slug": slug,
        "name": name,
        "spec_version": "0.1",
        "has_reasoning": has_reasoning,
        "markers": markers,
        "reference_models": [
            {"repo": m, "revision": PLACEHOLDER_REVISION, "stop_tokens": stops} for m in sorted(set(models))
        ],
        "format_notes": "shared/reference/families.md",
    }


RECORDS = _records()
MODELS: dict[str, list[str]] = {}
for _p, _n, _rec in RECORDS:
    MODELS.setdefault(_rec["family"], []).append(_rec["models"][0])
# The corpus's own Family objects for its slugs (its reference models and default generation prompts
# stay what canitoolcall says, also for the server corpus test, which merges these in).
FAMILY_OBJS: dict[str, Family] = {
    s: _CORPUS_FAMILIES[s] if s in _CORPUS_FAMILIES else Family.from_dict(_family_dict(s, MODELS.get(s, [])))
    for s in FAMILIES
}


def test_fixture_files_validate(tmp_path: Path) -> None:
    """canitoolcall's own ``validate`` (JSON Schema + id/family/tool/stop-token rules) on every line.

    ``validate`` wants ``fixtures/<slug>/*.jsonl`` next to a ``family.json``: the files are copied into
    that layout with a family.json built from :data:`FAMILIES`. ``provenance.source_url`` is the model's
    page (the schema wants an http(s) URL); ``attribution`` names the protocol facts they were written from.
    """
    assert {p.stem for p, _, _ in RECORDS} == set(FAMILIES)
    for p in sorted(DATA.glob("*.jsonl")):
        d = tmp_path / p.stem
        d.mkdir()
        (d / p.name).write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
        (d / "family.json").write_text(json.dumps(_family_dict(p.stem, MODELS[p.stem])), encoding="utf-8")
    issues = [str(i) for i in validate([tmp_path])]
    assert not issues, "\n".join(issues)
    for _p, _n, rec in RECORDS:
        if rec["family"] in BREADTH_FAMILIES:  # renders of real templates, engine tests: see breadth_fixtures
            assert rec["provenance"]["kind"] in ("template_render", "spec_example"), rec["id"]
            continue
        assert rec["provenance"]["source_url"].startswith("https://huggingface.co/")
        attribution = rec["provenance"]["attribution"]
        # the protocol facts they were written from: the reference, or (issue 10) the engine
        # parser, engine test, bug report or chat template named in the attribution
        assert "families.md" in attribution or attribution.startswith(
            "written for chatparse issue 10 from "
        ), rec["id"]
        assert "generation_prompt" in rec, rec["id"]
        if SOFT_TAG in rec["tags"]:
            assert rec.get("notes"), f"{rec['id']}: a soft pass must be explained in notes"


def _params() -> list:
    out = []
    for path, line, rec in RECORDS:
        marks = []
        if rec["id"] in TEMPLATE_BUGS:
            marks.append(pytest.mark.xfail(strict=True, reason=TEMPLATE_BUGS[rec["id"]]))
        out.append(pytest.param(Fixture.from_dict(rec, source=path, line=line), id=rec["id"], marks=marks))
    return out


@pytest.fixture(scope="module")
def layer() -> H.Layer:
    return H.load_layer()


@pytest.mark.parametrize("fx", _params())
def test_own_fixture(fx: Fixture, layer: H.Layer) -> None:
    assert layer.resolve_name(model=fx.reference_model), f"no catalog template for {fx.reference_model}"
    if fx.family in BY_TEMPLATE_ONLY:  # chosen by chat template: the model's id resolves to another format
        entry = BY_TEMPLATE_ONLY[fx.family]
        layer = dataclasses.replace(layer, resolve_name=lambda model=None, **_: entry)
    fam = FAMILY_OBJS[fx.family]
    case = H.run_case(fx, layer, FAMILY_OBJS)
    assert case.config is not None and case.config.how == "catalog", case.reason
    assert case.config.kwargs["prefix"] == fx.generation_prompt
    assert case.config.finish_reason == ("length" if "truncated" in fx.tags else "stop")
    obs = case.observation
    assert obs is not None and set(obs.streams) == set(H.STRATEGIES)
    soft = SOFT_TAG in fx.tags
    problems: list[str] = []
    for label, got in [(checks.NONSTREAM, obs.nonstream), *obs.streams.items()]:
        try:
            assert_conforms(fx, got, soft=soft, family=fam)
            if label != checks.NONSTREAM:
                assert_equivalent(obs.nonstream, got)
        except AssertionError as e:
            problems.append(f"[{label}] {e}")
    leaks = [r for r in case.rows if r.check == "no_leakage" and r.status is not Status.PASS]
    problems += [f"[{r.strategy}] leakage: {r.detail}" for r in leaks]
    bad = [r for r in case.rows if r.status in (Status.FAIL, Status.ERROR)]
    problems += [f"[{r.strategy}] {r.check}: {r.detail}" for r in bad]
    if case.message_mismatch:
        problems.append(f"finish() message != merged deltas in {case.message_mismatch}")
    if not soft:
        assert case.status is Status.PASS or problems, f"non-strict status {case.status}"
        problems += [
            f"[{r.strategy}] {r.check}: soft pass" for r in case.rows if r.status is Status.SOFT_PASS
        ]
    assert not problems, "\n\n".join(dict.fromkeys(problems))
