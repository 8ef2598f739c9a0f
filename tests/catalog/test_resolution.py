"""Resolution on the publishers' real chat templates (issue 10, items 11-13).

Published chat templates are not committed; ``tests/data/chat_template_facts/`` records what each
real checkpoint's template contains (source, sha256, marker literals), written by
``tests/catalog/template_facts.py`` from the templates (sources in its table). A template is seen
here as its *marker text*, the recorded literals one per line. For each: the entry it must resolve
to by its chat template alone, by its model id alone, and by both together as the server resolves
them (``chatparse.server`` passes the model id and the template; ``chatparse.openai`` resolves a
model id). Markers are robust when each real template of a family matches its own entry and no
other entry's.

MiMo-VL (Hermes JSON in ``<tool_call>``) resolves to ``qwen3`` by template and by model id; MiMo-V2
(``mimo``, added on catalog-breadth) has no reachable template and is checked in ``test_breadth.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatparse import catalog
from chatparse.catalog import _marker_matches

from .template_facts import FACTS, SOURCES, record_name


def facts(file: str) -> dict:
    return json.loads((FACTS / record_name(file)).read_text(encoding="utf-8"))


def read(file: str) -> str:
    """The template as the tests see it: its recorded literals, one per line."""
    return "\n".join(facts(file)["literals"])


# file -> (model id, entry by the template, entry by the model id); None = not in the catalog
CASES: dict[str, tuple[str, str | None, str | None]] = {
    f: (m, t, by_id) for f, (m, _, t, by_id, _) in SOURCES.items()
}
XFAIL: dict[str, str] = {}
XFAIL_TEMPLATE: dict[str, str] = {}


def test_every_record_is_in_the_table() -> None:
    records = {p.name for p in FACTS.glob("*.json")}
    ours = {record_name(f) for f in SOURCES}
    assert ours <= records
    for file in SOURCES:
        record = facts(file)
        assert record["model"] == CASES[file][0] and record["expected"] == CASES[file][1]
        assert record["source"] == SOURCES[file][1]
        assert record["sha256"] is None or len(record["sha256"]) == 64


def test_every_entry_with_markers_has_a_real_template_or_says_why() -> None:
    covered = {t for _, t, m in CASES.values() for t in (t, m) if t}
    # the records of catalog-breadth's templates (tests/catalog/test_breadth.py checks them)
    for path in FACTS.glob("*.json"):
        covered.add(json.loads(path.read_text(encoding="utf-8"))["expected"])
    # no publisher chat template could be collected for these (see template_facts.py)
    without = {"deepseek_v3", "ernie", "functiongemma", "inkling", "phi4_mini"}
    # catalog-breadth entries chosen by model id whose markers are the engines' tokens (no template
    # reachable; tests/catalog/test_breadth.py checks them against every recorded real template)
    without |= {"jamba", "k2_horizon", "longcat", "step3"}
    with_markers = {n for n in catalog.names() if catalog.describe(n)["chat_template_markers"]}
    assert with_markers - covered == without


def _params(kind: str) -> list:
    out = []
    for f, case in CASES.items():
        reason = XFAIL.get(f) or (XFAIL_TEMPLATE.get(f) if kind != "model" else None)
        marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
        out.append(pytest.param(f, *case, id=f, marks=marks))
    return out


@pytest.mark.parametrize(("file", "model", "by_template", "by_model"), _params("template"))
def test_by_chat_template(file: str, model: str, by_template: str | None, by_model: str | None) -> None:
    text = read(file)
    matched = [name for _, _, name in _marker_matches(text)]
    # robust markers: the family's own entry matches, and no other entry does
    assert matched == ([by_template] if by_template else []), file
    if by_template is None:
        with pytest.raises(catalog.UnknownModelError):
            catalog.resolve(chat_template=text)
    else:
        assert catalog.resolve_name(chat_template=text) == by_template


@pytest.mark.parametrize(("file", "model", "by_template", "by_model"), _params("model"))
def test_by_model_id(file: str, model: str, by_template: str | None, by_model: str | None) -> None:
    assert catalog.match_model(model) == by_model
    for variant in (
        model.lower(),
        f"unsloth/{model.split('/')[-1]}-GGUF",
        f"/models/{model.split('/')[-1]}-Q4_K_M.gguf",
    ):
        assert catalog.match_model(variant) == by_model, variant


@pytest.mark.parametrize(("file", "model", "by_template", "by_model"), _params("both"))
def test_by_both_as_the_server_does(
    file: str, model: str, by_template: str | None, by_model: str | None
) -> None:
    """``chatparse.server`` resolves ``catalog.resolve(model=..., tokenizer_config=..., chat_template=...)``:
    the recognised template decides, the model id is the fallback."""
    text = read(file)
    expected = by_template or by_model
    config = {"chat_template": text, "name_or_path": model}
    if expected is None:
        with pytest.raises(catalog.UnknownModelError):
            catalog.resolve(model=model, chat_template=text)
        with pytest.raises(catalog.UnknownModelError):
            catalog.resolve(tokenizer_config=config)
        return
    assert catalog.resolve_name(model=model, chat_template=text) == expected
    assert catalog.resolve_name(tokenizer_config=config) == expected
    assert catalog.resolve_name(model=model, tokenizer_config=config) == expected


def test_server_resolution_uses_the_same_order(tmp_path: Path) -> None:
    """The server's own resolution (`chatparse.server._config.resolve_config`) on a folder whose
    tokenizer_config holds the Llama 3.2 hub template's markers: the template decides (JSON calls)."""
    pytest.importorskip("jinja2")
    from chatparse.server._config import ServerConfig, resolve_config

    folder = tmp_path / "llama32"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "chat_template": read("meta-llama-Llama-3.2-3B-Instruct.jinja"),
                "bos_token": "<|begin_of_text|>",
            }
        ),
        encoding="utf-8",
    )
    config = ServerConfig(
        upstream="http://127.0.0.1:9", model="acme/my-llama-finetune", tokenizer=str(folder)
    )
    assert resolve_config(config).template_name == "llama3_json"


# --------------------------------------------------------------------------------------------------
# every facts record, both tables: exactly one entry by template, by model id, and by both


def _record_table() -> dict[str, tuple[str, str | None, str | None]]:
    """Record file -> (model id, entry by the template, entry by the model id), for every record in
    ``tests/data/chat_template_facts/``: this module's table, then the breadth families' templates."""
    from .breadth_fixtures import facts_path
    from .breadth_specs import FAMILIES, TEMPLATE_SOURCES, template_entries

    out = {record_name(f): (m, t, by_id) for f, (m, _, t, by_id, _) in SOURCES.items()}
    template_only = {f.entry for f in FAMILIES if f.by_template_only}
    for template, entry in template_entries().items():
        source = TEMPLATE_SOURCES[template]
        # a family chosen by its template only: its model id alone picks another format (Llama 4: pythonic)
        by_id = catalog.match_model(source["model"]) if entry in template_only else entry
        if entry in template_only:
            assert by_id != entry, template
        out.setdefault(facts_path(source).name, (source["model"], entry, by_id))
    return out


RECORDS = _record_table()


def test_the_record_table_covers_every_record() -> None:
    assert set(RECORDS) == {p.name for p in FACTS.glob("*.json")}
    for name, (model, by_template, _) in RECORDS.items():
        record = json.loads((FACTS / name).read_text(encoding="utf-8"))
        assert (record["model"], record["expected"]) == (model, by_template), name


@pytest.mark.parametrize(("name", "model", "by_template", "by_model"), [(n, *c) for n, c in RECORDS.items()])
def test_every_record_resolves_to_exactly_its_entry(
    name: str, model: str, by_template: str | None, by_model: str | None
) -> None:
    """No recorded real template is ambiguous: exactly its own entry's markers match it (not merely
    the best-ranked of several), its model id picks the expected entry, and both together (as the
    server resolves) pick the template's entry."""
    record = json.loads((FACTS / name).read_text(encoding="utf-8"))
    text = "\n".join(record["literals"])
    assert [n for _, _, n in _marker_matches(text)] == ([by_template] if by_template else [])
    base = model.split("/")[-1]
    for variant in (model, model.lower(), f"unsloth/{base}-GGUF", f"/models/{base}-Q4_K_M.gguf"):
        assert catalog.match_model(variant) == by_model, variant
    expected = by_template or by_model
    if expected is None:
        with pytest.raises(catalog.UnknownModelError):
            catalog.resolve(model=model, chat_template=text)
        return
    assert catalog.resolve_name(model=model, chat_template=text) == expected
    assert catalog.resolve_name(tokenizer_config={"chat_template": text, "name_or_path": model}) == expected


# Nemotron 3 and Step 3.5 write Qwen3-Coder's <tool_call><function= calls inside ChatML: every one of
# qwen3_xml's required markers occurs in their templates, so qwen3_xml excludes what sets them apart.
COLLISIONS = {
    "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json": ("nemotron3", "truncate_history_thinking"),
    "stepfun-ai__Step-3.5-Flash.json": ("step3p5", "<|im_start|>tool_response"),
}


@pytest.mark.parametrize(("name", "entry", "excluded"), [(n, *c) for n, c in COLLISIONS.items()])
def test_qwen3_xml_neighbours_resolve_to_their_own_entry(name: str, entry: str, excluded: str) -> None:
    record = json.loads((FACTS / name).read_text(encoding="utf-8"))
    text = "\n".join(record["literals"])
    markers = catalog.describe("qwen3_xml")["chat_template_markers"]
    required = [m for m in markers if not m.startswith("!")]
    assert all(m in text for m in required) and "!" + excluded in markers
    assert [n for _, _, n in _marker_matches(text)] == [entry]
    # by template, by model id, by both, and a Qwen model id cannot pull the template over
    assert catalog.resolve_name(chat_template=text) == entry
    assert catalog.match_model(record["model"]) == entry
    assert catalog.resolve_name(model=record["model"], chat_template=text) == entry
    assert catalog.resolve_name(model="Qwen/Qwen3-Coder-30B-A3B-Instruct", chat_template=text) == entry
    # the excluded literal is what tells them apart: without it the text is qwen3_xml's
    assert catalog.match_chat_template(text.replace(excluded, "")) == "qwen3_xml"


@pytest.mark.parametrize(("name", "entry", "excluded"), [(n, *c) for n, c in COLLISIONS.items()])
def test_qwen3_xml_neighbours_as_the_server_resolves_them(
    tmp_path: Path, name: str, entry: str, excluded: str
) -> None:
    """`chatparse.server._config.resolve_config` on a folder with the template and a fine-tune's id."""
    pytest.importorskip("jinja2")
    from chatparse.server._config import ServerConfig, resolve_config

    record = json.loads((FACTS / name).read_text(encoding="utf-8"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": "\n".join(record["literals"])}), encoding="utf-8"
    )
    for model in (record["model"], "acme/my-finetune"):
        config = ServerConfig(upstream="http://127.0.0.1:9", model=model, tokenizer=str(folder))
        assert resolve_config(config).template_name == entry, model


# --------------------------------------------------------------------------------------------------
# model-id rules (item 12)

MODEL_RULES = {
    # Llama 3.2's hub template asks for JSON calls (families.md used to say pythonic)
    "meta-llama/Llama-3.2-1B-Instruct": "llama3_json",
    "meta-llama/Llama-3.2-11B-Vision-Instruct": "llama3_json",
    "bartowski/Llama-3.2-3B-Instruct-GGUF": "llama3_json",
    # GLM-4 (9b-chat, 0414, 4.1V) write `name\n{json}` calls, not GLM-4.5's <arg_key> XML
    "THUDM/glm-4-9b-chat": None,
    "THUDM/GLM-4-32B-0414": None,
    "zai-org/GLM-4.1V-9B-Thinking": None,
    "zai-org/GLM-4.5V": "glm",
    "zai-org/GLM-4.5-Air": "glm",
    "zai-org/GLM-5.1": "glm",
    # Granite: only the generations the catalog covers
    "ibm-granite/granite-20b-functioncalling": "granite_20b_fc",
    "ibm-granite/granite-guardian-3.3-8b": None,
    "ibm-granite/granite-8b-code-instruct-4k": None,
    "ibm-granite/granite-4.0-h-tiny": "granite4",
    "ibm-granite/granite-4.0-micro": "granite4",
    "ibm-granite/granite-3.2-8b-instruct": "granite30",
    "speakleash/Bielik-11B-v2.3-Instruct": "qwen3",
    "allenai/Olmo-3-7B-Think": "olmo3",
    "allenai/Olmo-3-32B-Think": "olmo3",
    "allenai/OLMo-2-1124-7B-Instruct": None,
}


@pytest.mark.parametrize(("model", "name"), MODEL_RULES.items())
def test_model_rules(model: str, name: str | None) -> None:
    assert catalog.match_model(model) == name


# --------------------------------------------------------------------------------------------------
# UnknownModelError (item 13)


def test_unknown_model_of_a_known_family_names_the_family_entries() -> None:
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(model="THUDM/GLM-4-32B-0414")
    err = info.value
    assert err.family == "glm" and err.candidates == ["glm"]
    assert "looks like a glm checkpoint" in str(err) and "GLM-4.5" in str(err)
    assert "--auto" in str(err) and "ChatParser(auto=True)" in str(err) and "--template FILE" in str(err)


def test_unknown_model_family_not_in_the_catalog() -> None:
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(model="acme/unheard-of-7b")
    err = info.value
    assert err.candidates == [] and err.family is None
    assert "its family is not in the catalog" in str(err) and "--auto" in str(err)


def test_no_string_distance_candidates() -> None:
    # a name that merely looks like an entry's name is not a candidate
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(model="someorg/Granit-7b")
    assert info.value.candidates == []


def test_unknown_chat_template_lists_the_nearest_entries_only() -> None:
    text = read("microsoft-Phi-3.5-mini-instruct.jinja")
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(chat_template=text)
    err = info.value
    assert 0 < len(err.candidates) <= 3, err.candidates
    assert "phi4_mini" in err.candidates  # shares <|assistant|> and <|end|>
    assert "nearest by markers" in str(err) and "missing '<|tool|>'" in str(err)


def test_unknown_chat_template_without_any_marker() -> None:
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(chat_template="{{ messages }}")
    assert info.value.candidates == []
    assert "none of the catalog's chat-template markers" in str(info.value)


def test_template_and_model_errors_combine() -> None:
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(model="THUDM/glm-4-9b-chat", chat_template="[gMASK]<sop><|assistant|>")
    text = str(info.value)
    assert "glm checkpoint" in text and "nearest by markers: glm (1/2 markers, missing '<arg_key>')" in text


def test_unknown_model_message_reads_once() -> None:
    """The diagnosis (``reason``) and then one piece of advice: no repeated clause, no double stop."""
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(model="acme/unheard-of-7b")
    err = info.value
    text = str(err)
    assert text.startswith(err.reason) and "--auto" not in err.reason
    assert (
        text.count("not in the catalog") == 1 and ".." not in text.replace("...", "") and text.endswith(".")
    )
    assert "chatparse parse --model NAME" in text and "chatparse serve --template NAME" in text
    with pytest.raises(catalog.UnknownModelError) as info:
        catalog.resolve(model="THUDM/GLM-4-32B-0414")
    assert "Pick one of those if it fits" in str(info.value) and "). " in str(info.value)


@pytest.mark.parametrize(
    ("given", "entry"),
    [("Qwen/Qwen3-8B", "qwen3"), ("unsloth/Qwen3-8B-GGUF", "qwen3"), ("zai-org/GLM-4.6", "glm")],
)
def test_a_model_id_given_as_a_name_says_where_it_goes(given: str, entry: str) -> None:
    with pytest.raises(catalog.UnknownTemplateError) as info:
        catalog.get(given)
    assert info.value.candidates == [entry]
    assert f"as a model id it resolves to {entry!r}" in str(info.value) and "--model" in str(info.value)


def test_a_misspelt_name_still_lists_close_names() -> None:
    with pytest.raises(catalog.UnknownTemplateError) as info:
        catalog.get("qwen")
    assert "qwen3" in info.value.candidates and "model id" not in str(info.value)
