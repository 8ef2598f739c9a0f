"""The breadth formats of the catalog (issue 10): entries checked on the models' real chat templates.

* every own fixture rendered from a template equals a fresh render of that template (so the fixtures
  say what the model was trained to write, and cannot drift);
* every stored chat template resolves to its entry, unambiguously, and every model id to its entry;
* the breadth table in ``docs/conformance.md`` lists every catalog entry, and chatparse's column
  says which entry parses each format.

The fixtures themselves run through canitoolcall's checks in every chunking in
``tests/conformance/test_own_fixtures.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chatparse import catalog

from .breadth_fixtures import OUT, TEMPLATES, dump, family_records, template_text
from .breadth_specs import FAMILIES

pytest.importorskip(
    "transformers", reason="the renders need transformers' render_jinja_template (test extra)"
)

FAMILY_IDS = [f.slug for f in FAMILIES]


# --------------------------------------------------------------------------------------------------
# fixtures == renders of the real templates


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_fixtures_are_renders_of_the_real_template(family) -> None:
    path = OUT / f"{family.slug}.jsonl"
    assert path.read_text(encoding="utf-8") == dump(family_records(family)), (
        f"{path.name} differs from a fresh render: run python -m tests.catalog.breadth_fixtures {family.slug}"
    )


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
# resolution on the real templates and model ids


def _templates() -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for family in FAMILIES:
        for name in (family.template, *(case.template for case in family.cases if case.template)):
            assert seen.setdefault(name, family.entry) == family.entry, name
    return sorted(seen.items())


def test_every_stored_template_belongs_to_a_family() -> None:
    stored = {p.name for p in TEMPLATES.glob("*.jinja")}
    assert stored == {name for name, _ in _templates()}


@pytest.mark.parametrize(("template", "entry"), _templates())
def test_stored_template_resolves_to_its_entry(template: str, entry: str) -> None:
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    assert catalog.resolve_name(chat_template=text) == entry
    assert catalog.match_chat_template(text) == entry
    ours = catalog.describe(entry)["chat_template_markers"]
    assert all(marker in text for marker in ours)
    # No other entry's markers all occur with as many markers: the choice never rests on a tie-break.
    rivals = [
        name
        for name in catalog.names()
        if name != entry
        and (markers := catalog.describe(name)["chat_template_markers"])
        and all(marker in text for marker in markers)
        and len(markers) >= len(ours)
    ]
    assert not rivals, f"{template}: {rivals} match as strongly as {entry}"


MODEL_IDS = sorted({(model, f.entry) for f in FAMILIES if not f.by_template_only for model in f.models})


@pytest.mark.parametrize(("model", "entry"), MODEL_IDS)
def test_model_id_resolves(model: str, entry: str) -> None:
    assert catalog.resolve_name(model=model) == entry
    assert catalog.resolve_name(model=model, chat_template="{{ messages }}") == entry


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_model_and_template_together(family) -> None:
    """What the server does: the model id first, the chat template as a fallback; both agree."""
    text = template_text(family)
    if not family.by_template_only:
        for model in family.models:
            assert catalog.resolve_name(model=model, chat_template=text) == family.entry
    assert catalog.resolve_name(model="acme/unknown-model", chat_template=text) == family.entry


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
    assert "Sources:" in info["notes"] or "Source:" in info["notes"]
    assert info["generation_prompt"]
    for stop in family.stops:
        assert stop in info["stop"]


BREADTH_ENTRIES = {family.entry for family in FAMILIES}
"""Catalog entries whose examples are the breadth fixtures (test_catalog counts them as covered)."""


def test_breadth_templates_are_in_their_own_folder() -> None:
    # tests/data/chat_templates/*.jinja are the server's re-created prompt templates; the real
    # templates live one folder down so the server's prompt tests do not pick them up.
    assert TEMPLATES.parent.name == "chat_templates" and TEMPLATES.name == "real"
    assert Path(TEMPLATES / "README.md").exists() or (TEMPLATES.parent / "README.md").exists()
