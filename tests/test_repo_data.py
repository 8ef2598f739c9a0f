"""What the repository may hold as test data.

The project commits nothing it read from public repositories (the developers' charter: learn from
public code, never copy its code or text). Model publishers' chat templates are code under their
own licences, so ``tests/data/chat_templates/`` holds only re-creations written for this project,
each listed in that folder's README table; facts about real checkpoints' templates (source, hash,
marker literals) go to ``tests/data/chat_template_facts/``.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
TEMPLATES = DATA / "chat_templates"
FACTS = DATA / "chat_template_facts"

HOW = (
    "tests/data/chat_templates/ holds re-creations written for chatparse only, each listed in its "
    "README table; published chat templates must not be committed. Record what a real checkpoint's "
    "template contains in tests/data/chat_template_facts/ (see its README) instead."
)


def test_chat_templates_are_listed_re_creations() -> None:
    readme = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    for path in sorted(TEMPLATES.rglob("*")):
        if path.name == "README.md":
            continue
        assert path.parent == TEMPLATES and path.is_file(), f"{path.relative_to(DATA)}: {HOW}"
        assert f"| `{path.name}` |" in readme, f"{path.name} is not in the README table. {HOW}"


def test_chat_template_facts_are_facts() -> None:
    for path in sorted(FACTS.glob("*")):
        if path.name == "README.md":
            continue
        assert path.suffix == ".json", f"{path.name}: {HOW}"
        record = json.loads(path.read_text(encoding="utf-8"))
        assert {"model", "source", "literals", "expected"} <= record.keys(), path.name
        assert all(isinstance(x, str) and len(x) <= 80 for x in record["literals"]), (
            f"{path.name}: literals are marker strings, not template text"
        )
