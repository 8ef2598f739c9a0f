"""The breadth formats of the catalog (issue 10): entries checked on the models' real chat templates.

The published templates are not in the repository; ``tests/data/chat_template_facts/`` records, for
each, its source, sha256 and marker literals, and the entry it must resolve to. Checked here:

* every template a breadth family renders has a facts record, and the marker literals resolve to the
  entry (by chat template alone, with a model id, and with an unknown model id);
* every fixture rendered from a template names that template's sha256 (the facts are of the very
  file the fixture came from); with ``$CHATPARSE_REAL_TEMPLATES`` pointing at the templates, every
  rendered fixture is re-rendered and must be unchanged, and the real text resolves like its facts;
* every model id of a family resolves to its entry;
* the breadth table in ``docs/conformance.md`` lists every catalog entry, and its engine columns
  name parsers those engines register.

The fixtures themselves run through canitoolcall's checks in every chunking in
``tests/conformance/test_own_fixtures.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatparse import catalog

from .breadth_fixtures import (
    FACTS,
    OUT,
    TEMPLATES_ENV,
    dump,
    facts_path,
    family_records,
    template_name,
    template_text,
    templates_dir,
)
from .breadth_specs import FAMILIES, TEMPLATE_SOURCES, template_entries

FAMILY_IDS = [f.slug for f in FAMILIES]
TEMPLATES = sorted(template_entries().items())


def facts(template: str) -> dict:
    return json.loads(facts_path(TEMPLATE_SOURCES[template]).read_text(encoding="utf-8"))


def marker_text(template: str) -> str:
    """What the resolution tests see of a template: its recorded literals, one per line."""
    return "\n".join(facts(template)["literals"])


# --------------------------------------------------------------------------------------------------
# facts about the real templates


def test_every_template_has_facts() -> None:
    assert set(TEMPLATE_SOURCES) == {name for name, _ in TEMPLATES}
    for template, entry in TEMPLATES:
        record = facts(template)
        source = TEMPLATE_SOURCES[template]
        assert record["expected"] == entry and record["model"] == source["model"]
        assert record["source"] == {k: source[k] for k in ("repo", "path", "commit")}
        assert record["local_name"] == template and len(record["sha256"]) == 64


@pytest.mark.parametrize(("template", "entry"), TEMPLATES)
def test_template_facts_resolve_to_their_entry(template: str, entry: str) -> None:
    text = marker_text(template)
    assert all(marker in text for marker in catalog.describe(entry)["chat_template_markers"])
    assert catalog.match_chat_template(text) == entry
    assert catalog.resolve_name(chat_template=text) == entry
    assert catalog.resolve_name(model="acme/unknown-model", chat_template=text) == entry
    assert catalog.resolve_name(chat_template={"name": "tool_use", "template": text}) == entry


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_rendered_fixtures_name_the_template_they_came_from(family) -> None:
    records = {
        json.loads(line)["id"]: json.loads(line)
        for line in (OUT / f"{family.slug}.jsonl").read_text(encoding="utf-8").splitlines()
    }
    assert len(records) == len(family.cases)
    for case in family.cases:
        record = records[f"{family.slug}/{case.name}"]
        if case.raw is not None or family.writer is not None:
            assert record["provenance"]["kind"] == "spec_example"
            continue
        assert record["provenance"]["kind"] == "template_render"
        assert record["provenance"]["template_sha256"] == facts(template_name(family, case))["sha256"]


real = pytest.mark.skipif(
    templates_dir() is None, reason=f"${TEMPLATES_ENV} is not set (the published templates)"
)


@real
@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_fixtures_are_renders_of_the_real_template(family) -> None:
    pytest.importorskip(
        "transformers", reason="the renders need transformers' render_jinja_template (test extra)"
    )
    path = OUT / f"{family.slug}.jsonl"
    assert path.read_text(encoding="utf-8") == dump(family_records(family)), (
        f"{path.name} differs from a fresh render: run python -m tests.catalog.breadth_fixtures {family.slug}"
    )


@real
@pytest.mark.parametrize(("template", "entry"), TEMPLATES)
def test_real_template_resolves_like_its_facts(template: str, entry: str) -> None:
    import hashlib

    family = next(f for f in FAMILIES if template in (f.template, *(c.template for c in f.cases)))
    case = next((c for c in family.cases if c.template == template), None)
    text = template_text(family, case)
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == facts(template)["sha256"]
    assert catalog.resolve_name(chat_template=text) == entry


WRITTEN = [f for f in FAMILIES if f.writer is not None]


@pytest.mark.parametrize("family", WRITTEN, ids=[f.slug for f in WRITTEN])
def test_written_fixtures_are_fresh(family) -> None:
    """Families without a reachable chat template: their fixtures come from the writer in
    breadth_specs (no template needed), so the file must equal a fresh write, always."""
    assert family.template is None
    path = OUT / f"{family.slug}.jsonl"
    assert path.read_text(encoding="utf-8") == dump(family_records(family)), (
        f"{path.name} differs from a fresh write: run python -m tests.catalog.breadth_fixtures {family.slug}"
    )


WRITTEN_ENTRIES = sorted({f.entry for f in WRITTEN})


@pytest.mark.parametrize("entry", WRITTEN_ENTRIES)
def test_engine_token_markers_collide_with_no_real_template(entry: str) -> None:
    """An entry chosen without a real template takes its chat-template markers from the engines'
    known tokens: they must resolve to it, and no recorded real template of another entry may hold
    them all (else that checkpoint would be parsed with this entry)."""
    markers = catalog.describe(entry)["chat_template_markers"]
    if not markers:  # tokens shared with other formats (MiMo-V2: Qwen3-Coder's): chosen by model id only
        assert "Chosen by model id only" in catalog.describe(entry)["notes"]
        return
    assert catalog.match_chat_template("\n".join(markers)) == entry
    for path in sorted(FACTS.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        literals = "\n".join(record["literals"])
        assert not all(m in literals for m in markers), f"{path.name} holds every marker of {entry}"
        assert catalog.match_chat_template(literals) != entry, path.name


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_family_has_the_required_cases(family) -> None:
    """At least 8 fixtures: reasoning, content, one and several calls, unicode, markers in arguments,
    truncation and a prompt prefill, wherever the format can carry them."""
    tags = [set(case.tags) for case in family.cases]
    assert len(family.cases) >= 8
    needed = {"single-call", "parallel-calls", "unicode", "marker-in-arguments", "truncated", "no-call"}
    if family.single_call:
        needed -= {"parallel-calls"}
    if family.has_reasoning:
        needed |= {"reasoning"}
    assert needed <= set().union(*tags), needed - set().union(*tags)
    assert any(t & {"reasoning-prefilled", "multi-turn"} for t in tags), "no case exercises the prompt prefix"


# --------------------------------------------------------------------------------------------------
# model ids

MODEL_IDS = sorted({(model, f.entry) for f in FAMILIES if not f.by_template_only for model in f.models})


@pytest.mark.parametrize(("model", "entry"), MODEL_IDS)
def test_model_id_resolves(model: str, entry: str) -> None:
    assert catalog.resolve_name(model=model) == entry
    assert catalog.resolve_name(model=model, chat_template="{{ messages }}") == entry


# checkpoints next to a breadth family whose ids look alike but whose format is another entry's, or
# none the catalog has (None: the chat template has to decide)
NEIGHBOUR_IDS = {
    "stepfun-ai/Step3-VL-10B": None,  # a Qwen3-8B decoder, not Step 3's <steptml:invoke> format
    "stepfun-ai/Step-3.5-Flash": "step3p5",
    "ai-sage/GigaChat3-10B-A1.8B": "gigachat3",
    "ai-sage/GigaChat3.1-10B-A1.8B": "gigachat3",
    "Salesforce/xLAM-7b-fc-r": None,  # first-generation xLAM ({"tool_calls": [...]}), not covered
    "moonshotai/Kimi-K2-Instruct": "kimi_k2",
}


@pytest.mark.parametrize(("model", "entry"), sorted(NEIGHBOUR_IDS.items()))
def test_neighbour_model_ids(model: str, entry: str | None) -> None:
    for variant in (model, model.lower(), f"/models/{model.split('/')[-1]}-Q4_K_M.gguf"):
        assert catalog.match_model(variant) == entry, variant


@pytest.mark.parametrize(("template", "entry"), TEMPLATES)
def test_model_and_template_together(template: str, entry: str) -> None:
    """What the server does: the model id and the chat template; both must agree."""
    family = next(f for f in FAMILIES if f.entry == entry)
    if not family.by_template_only:
        for model in family.models:
            assert catalog.resolve_name(model=model, chat_template=marker_text(template)) == entry


def test_llama4_ids_stay_pythonic() -> None:
    """Llama 4 writes pythonic calls with Meta's prompt (canitoolcall llama/l4-meta-pythonic-*), JSON
    calls only with a JSON tool template: the id cannot tell, so llama4_json is chosen by template."""
    assert catalog.describe("llama4_json")["models"] == []
    for model in (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    ):
        assert catalog.resolve_name(model=model) == "pythonic"


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_entry_names_its_sources(family) -> None:
    info = catalog.describe(family.entry)
    assert "Sources:" in info["notes"] or "Chosen by" in info["notes"]
    assert info["generation_prompt"]
    for stop in family.stops:
        assert stop in info["stop"]


def test_facts_folder_holds_only_records_and_its_readme() -> None:
    assert {p.suffix for p in FACTS.iterdir() if p.name != "README.md"} <= {".json"}


# --------------------------------------------------------------------------------------------------
# the breadth table in docs/conformance.md

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"

# Parser names as registered in each engine (checked in their code; see the doc's table header).
VLLM = {
    # vllm 0.33.0 ToolParserManager (58) and ReasoningParserManager (42)
    "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32",
    "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47",
    "granite", "granite-20b-fc", "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
    "internlm", "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json",
    "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse",
    "muse_glimmer", "musespark1x", "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic",
    "qwen3_coder", "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam",
    "deepseek_r1", "granite_thinking_parser", "holo2", "minicpmv", "minimax_m2_append_think", "nemotron_v3",
    "openai_gptoss", "qwen3",
}  # fmt: skip
SGLANG = {
    # sglang 0.5.23 FunctionCallParser.ToolCallParserEnum (44) and ReasoningParser.DetectorMap (36)
    "apertus2509", "beam", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32", "deepseekv4",
    "deepseekv41", "dots", "gemma4", "gigachat3", "gigachat35", "glm", "glm45", "glm47", "gpt-oss", "hermes",
    "hunyuan", "inkling", "interns1", "iquest_q1", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3",
    "mimo", "minicpm5", "minimax-m2", "minimax-m3", "mistral", "muse", "nanbeige", "poolside_v1", "pythonic",
    "qwen", "qwen25", "qwen3_coder", "response_template", "spark25", "step3", "step3p5", "trinity",
    "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41", "granite_thinking_parser", "kimi", "minimax",
    "minimax-append-think", "nemotron_3", "qwen3", "qwen3-thinking",
}  # fmt: skip
OLLAMA = {
    # ollama fb307609 model/parsers ParserForName
    "qwen3", "qwen3-thinking", "qwen3.5", "ornith", "qwen3-coder", "qwen3-vl-instruct", "qwen3-vl-thinking",
    "ministral", "passthrough", "harmony", "cogito", "deepseek3", "olmo3", "olmo3-think", "nemotron-3-nano",
    "nemotron-3.5-nano", "functiongemma", "glm-4.7", "gemma4", "gemma4-no-thinking", "glm-ocr", "lfm2",
    "lfm2-thinking", "laguna", "poolside-v1", "cohere", "glimmer",
}  # fmt: skip
LLAMA_CPP_HANDLERS = {
    # llama.cpp 0c1e5709 common_chat_templates_apply_jinja: "Using specialized template: ..."
    "Ministral 3", "GPT-OSS", "Muse Glimmer", "Functionary v3.2", "Kimi K2", "Kimi K3", "Ling 3.0",
    "Cohere2 MoE", "LFM2", "LFM2.5", "GigaChatV3", "MiniMax-M3", "DeepSeek V3.2/V4", "Gemma4", "MiniCPM5",
    "Qwen3-Coder",
}  # fmt: skip


def _table() -> list[dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split("<!-- breadth-table:start -->", 1)[1].split("<!-- breadth-table:end -->", 1)[0]
    lines = [line for line in body.strip().splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        # `\|` inside a cell is an escaped pipe (markdown), not a column separator
        cells = [
            cell.strip().replace("\\|", "|") for cell in line.replace("\\|", "\x00").strip("|").split("|")
        ]
        rows.append(dict(zip(header, [c.replace("\x00", "\\|") for c in cells], strict=True)))
    return rows


def _names(cell: str) -> list[str]:
    import re

    return re.findall(r"`([^`]+)`", cell)


TABLE = _table()


def test_table_has_the_engine_columns() -> None:
    assert list(TABLE[0]) == [
        "format",
        "vLLM 0.33.0",
        "SGLang 0.5.23",
        "llama.cpp 0c1e5709",
        "Ollama fb307609",
        "chatparse",
    ]


def test_chatparse_column_is_the_catalog() -> None:
    listed = [name for row in TABLE for name in _names(row["chatparse"])]
    assert sorted(listed) == sorted(set(listed)), "an entry is listed twice"
    assert set(listed) == set(catalog.names())
    for row in TABLE:
        assert _names(row["chatparse"]) or row["chatparse"] == "—", row["format"]


def test_every_breadth_family_has_its_row() -> None:
    rows = {name: row["format"] for row in TABLE for name in _names(row["chatparse"])}
    for family in FAMILIES:
        assert family.entry in rows


@pytest.mark.parametrize(
    ("column", "known"), [("vLLM 0.33.0", VLLM), ("SGLang 0.5.23", SGLANG), ("Ollama fb307609", OLLAMA)]
)
def test_engine_parser_names_are_registered(column: str, known: set[str]) -> None:
    for row in TABLE:
        cell = row[column]
        names = [n for n in _names(cell) if not n.startswith("<")]
        assert names or cell == "—", (row["format"], cell)
        unknown = [n for n in names if n not in known]
        assert not unknown, f"{row['format']}: {unknown} are not {column} parsers"


def test_llama_cpp_cells_name_a_handler_or_the_autoparser() -> None:
    for row in TABLE:
        cell = row["llama.cpp 0c1e5709"]
        if cell == "—":
            continue
        assert "autoparser" in cell or "handler" in cell, cell
        for name in _names(cell):
            assert name in LLAMA_CPP_HANDLERS or name.endswith((".jinja", ".cpp")), (row["format"], name)


# --------------------------------------------------------------------------------------------------
# the README's family list

README_NAMES = {
    "minimax_m2": "MiniMax M2",
    "minimax_m3": "M3",
    "seed_oss": "Seed-OSS",
    "step3p5": "Step 3 / 3.5",
    "step3": "Step 3",
    "nemotron3": "Nemotron 3",
    "nemotron_nano_v2": "Nemotron Nano v2",
    "ling3": "Ling 3",
    "poolside_v1": "Poolside Laguna",
    "hy3": "Hy3",
    "hunyuan_a13b": "Hunyuan-A13B",
    "minicpm5": "MiniCPM 5",
    "muse_glimmer": "Muse Glimmer",
    "gigachat3": "GigaChat 3 / 3.1",
    "gigachat35": "3.1 / 3.5",
    "apriel": "Apriel",
    "llama4_json": "Llama 4 JSON",
    "granite_20b_fc": "Granite 20B function calling",
    "internlm": "InternLM / Intern-S1",
    "apertus": "Apertus",
    "xlam": "xLAM-2",
    "jamba": "Jamba",
    "longcat": "LongCat-Flash",
    "mimo": "MiMo-V2",
    "k2_horizon": "K2 Horizon",
}


def test_readme_family_list_names_every_breadth_entry() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    sentence = readme.split("`chatparse.catalog` ships validated templates", 1)[1].split(":\n", 1)[0]
    sentence = " ".join(sentence.split())
    assert {f.entry for f in FAMILIES} <= set(README_NAMES)
    for entry, label in README_NAMES.items():
        assert label in sentence, (entry, label)
