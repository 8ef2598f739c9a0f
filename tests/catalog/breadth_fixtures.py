"""Own fixtures for the breadth formats of the catalog, rendered through the models' real chat templates.

The publishers' chat templates are not in this repository (``tests/test_repo_data.py``): what the
tests need from them is recorded as facts in ``tests/data/chat_template_facts/`` (source, sha256,
marker literals, the entry the template must resolve to). To regenerate or re-check the fixtures,
fetch the templates named there (sha256 must match), put them in one folder and run::

    CHATPARSE_REAL_TEMPLATES=/path/to/templates python -m tests.catalog.breadth_fixtures [--check] [--facts]

which rewrites ``tests/data/own_fixtures/<slug>.jsonl`` for every family in
``breadth_specs.FAMILIES`` (``--check`` only compares; ``--facts`` also rewrites the facts records).
``tests/catalog/test_breadth.py`` runs the same comparison when that variable is set.

Where the fixtures come from (canitoolcall spec v0.1 provenance kinds):

* ``template_render``: the conversation ``[system?, user, (assistant, tool)*]`` plus the case's
  assistant message is rendered with the publisher's chat template by transformers'
  ``render_jinja_template``; ``raw_output`` is what follows the rendered generation prompt, up to the
  turn's stop token. The expected message is the assistant message itself, so the fixture says what
  the model was trained to write and what a parser must return for it. "Formats are never typed by
  hand." Truncated cases are renders cut at a point inside the output (``cut_before``): the
  generation hit ``max_tokens`` there.
* ``spec_example``: outputs written for chatparse in shapes a template cannot render (a model that
  closes its reasoning at once, skips a block, uses the other spelling an engine accepts), each
  pointing at the engine code or test that shows the shape; no text of those is copied.
* ``spec_example`` from a writer: for a format whose checkpoint's chat template is not reachable, the
  family has a ``writer``, a function written for chatparse from the engines' parser code (and the
  publisher's model card, where there is one) that lays a message out in the format; the standard
  messages go through it instead of a template. The provenance names that parser code.

Every family also names the markers the leakage check looks for and its stop tokens
(``breadth_specs.FAMILY_META``, used by ``tests/conformance/test_own_fixtures.py``). The family
specs themselves are data, in ``tests/catalog/breadth_specs.py``.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES_ENV = "CHATPARSE_REAL_TEMPLATES"
OUT = ROOT / "tests" / "data" / "own_fixtures"
FACTS = ROOT / "tests" / "data" / "chat_template_facts"


def templates_dir() -> Path | None:
    """The folder with the publishers' templates (``$CHATPARSE_REAL_TEMPLATES``), or None."""
    folder = os.environ.get(TEMPLATES_ENV)
    return Path(folder) if folder and Path(folder).is_dir() else None


GENERATOR = "tests/catalog/breadth_fixtures.py"
WRITTEN = "2026-12-01"
"""When the hand-written shape examples were written (their provenance revision)."""

LLAMA_CPP = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
"""The llama.cpp commit vendored in llama-cpp-python 0.3.36 (its ``models/templates`` copies)."""
LLAMA_CPP_TEMPLATES = f"https://github.com/ggml-org/llama.cpp/blob/{LLAMA_CPP}/models/templates/"
LLAMA_CPP_TESTS = f"https://github.com/ggml-org/llama.cpp/blob/{LLAMA_CPP}/tests/test-chat.cpp"


# --------------------------------------------------------------------------------------------------
# tools offered in every fixture


def _tool(
    name: str, description: str, properties: dict[str, Any], required: Sequence[str] = ()
) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        params["required"] = list(required)
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOLS: list[dict[str, Any]] = [
    _tool(
        "get_weather",
        "Current weather for a city",
        {"city": {"type": "string"}, "days": {"type": "integer"}},
        ["city"],
    ),
    _tool(
        "get_time",
        "Current time in a time zone",
        {"timezone": {"type": "string"}, "utc": {"type": "boolean"}},
        ["timezone"],
    ),
    _tool(
        "send_message",
        "Send a chat message",
        {"to": {"type": "string"}, "text": {"type": "string"}},
        ["to", "text"],
    ),
    _tool("list_alarms", "List the alarms", {}),
    _tool(
        "create_event",
        "Create a calendar event",
        {
            "title": {"type": "string"},
            "attendees": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object"},
        },
        ["title"],
    ),
]

USER = {"role": "user", "content": "Can you help me with the weather, the time and my messages?"}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """An OpenAI-style tool call of an assistant message (arguments as a dict, as templates want)."""
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(
    content: str | None = None, reasoning: str | None = None, calls: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = list(calls)
    return message


# --------------------------------------------------------------------------------------------------
# specs


@dataclass(frozen=True)
class Case:
    """One fixture: an assistant message to render, or a raw output from an engine's tests."""

    name: str
    tags: tuple[str, ...]
    message: dict[str, Any] | None = None
    """The assistant message rendered with the family's template (``template_render``)."""
    history: tuple[dict[str, Any], ...] = ()
    """Messages between the user turn and the generation prompt (a previous call and its result)."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Extra chat-template variables (``enable_thinking``, ...), over the family's."""
    cut_before: str | None = None
    """Truncation: the output is cut right before the last occurrence of this text."""
    expected: Mapping[str, Any] | None = None
    """Overrides the expected message derived from ``message`` (keys: content, reasoning_content, tool_calls)."""
    expected_error: str | None = None
    """Instead of an expected message: why no call can be recovered (canitoolcall ``expected_error``,
    accepting no calls, the text passed through, or an exception)."""
    raw: str | None = None
    """An output written for chatparse (``spec_example``) in a shape the template cannot render."""
    generation_prompt: str | None = None
    """For ``raw`` cases: what the prompt pre-wrote."""
    source: str | None = None
    """For ``raw`` cases: where the shape is shown (engine code or test, line-anchored)."""
    source_revision: str | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    """The tools offered (default :data:`TOOLS`); engine tests call their own."""
    notes: str = ""
    known_failure: str | None = None
    """Why chatparse cannot parse this yet (a strict xfail in test_own_fixtures; XPASS once fixed)."""
    template: str | None = None
    """Another template of the same format (file under ``real/``), instead of the family's."""
    template_url: str | None = None
    prefill_not_in_turn: str | None = None
    """What the generation prompt pre-wrote and the template leaves out of this turn (e.g. the empty
    think block of thinking-off mode): the output is the turn after the prompt without it."""


@dataclass(frozen=True)
class Family:
    slug: str
    """The fixture family (``tests/data/own_fixtures/<slug>.jsonl``)."""
    name: str
    entry: str
    """The catalog entry the reference model resolves to."""
    models: tuple[str, ...]
    template: str | None
    """File name in ``$CHATPARSE_REAL_TEMPLATES``; None for a family with a :attr:`writer`."""
    template_url: str
    """Where the template (or, with a writer, the format's definition) was read."""
    template_revision: str
    template_license: str
    publisher: str
    """The model repository the template was published with (``https://huggingface.co/...``)."""
    markers: tuple[str, ...]
    stops: tuple[str, ...]
    has_reasoning: bool
    cases: tuple[Case, ...]
    writer: Callable[[dict[str, Any]], str] | None = None
    """Lays an assistant message out in the format (families without a reachable chat template)."""
    writer_prompt: str | None = None
    """The generation prompt of the written cases."""
    stop: str | None = None
    """The token that ends the rendered assistant turn; ``raw_output`` stops before it."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    special: Mapping[str, str] = field(default_factory=dict)
    """``bos_token`` / ``eos_token`` values for the template."""
    system: str | None = None
    stop_optional: bool = False
    """The template leaves the stop token off some turns (e.g. a final answer)."""
    single_call: bool = False
    """The format has one call per turn (the template renders only the first)."""
    prefill_not_in_turn: str | None = None
    """:attr:`Case.prefill_not_in_turn` for every case of the family (a case's ``""`` turns it off)."""
    json_arguments: bool = False
    """Render tool-call arguments as JSON strings (what OpenAI clients send), for templates that
    print them with Jinja's string filter."""
    by_template_only: bool = False
    """The entry is chosen by the chat template, not by model id (the models also write another
    format, which their ids resolve to)."""
    history_reasoning: str | None = None
    """For templates that render the last assistant message as a prefill and drop reasoning from
    history (Nemotron Nano v2): the turn is rendered as a history turn (a user message follows),
    and the reasoning the template cannot render is put in front with this format
    (``{reasoning}``), the layout of the engine tests. The turn ends at the first stop token."""


# --------------------------------------------------------------------------------------------------
# rendering


def template_name(family: Family, case: Case | None = None) -> str:
    name = case.template if case is not None and case.template else family.template
    if name is None:
        raise ValueError(f"{family.slug}: the family has no template (its cases are written)")
    return name


def template_text(family: Family, case: Case | None = None) -> str:
    name = template_name(family, case)
    folder = templates_dir()
    if folder is None or not (folder / name).is_file():
        raise FileNotFoundError(
            f"{name}: set {TEMPLATES_ENV} to a folder with the published templates "
            f"(sources and sha256 in {FACTS.relative_to(ROOT)})"
        )
    return (folder / name).read_text(encoding="utf-8")


def template_sha256(family: Family, case: Case | None = None) -> str:
    return hashlib.sha256(template_text(family, case).encode("utf-8")).hexdigest()


RENDER_TIME = datetime.datetime(2026, 12, 1, 9, 30)
"""What ``strftime_now`` returns in the renders (templates that print the date render reproducibly)."""


class _FixedClock(datetime.datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:  # noqa: ARG003 - the signature of datetime.now
        return RENDER_TIME


def _render(family: Family, case: Case, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
    from unittest import mock

    from transformers.utils import chat_template_utils
    from transformers.utils.chat_template_utils import render_jinja_template

    variables = {**family.special, **family.kwargs, **case.kwargs}
    # transformers' strftime_now reads the module's `datetime` when called: pin it for the render
    with mock.patch.object(chat_template_utils, "datetime", _FixedClock):
        rendered, _ = render_jinja_template(
            [copy.deepcopy(messages)],
            tools=copy.deepcopy(TOOLS),
            chat_template=template_text(family, case),
            add_generation_prompt=generation_prompt,
            **variables,
        )
    return str(rendered[0])


def _as_rendered(message: dict[str, Any], family: Family | None = None) -> dict[str, Any]:
    # Clients send `content: null` with tool calls; some templates print that as "None", so the
    # renders use "" (what the engines' chat preparation hands most templates).
    if message.get("role") == "assistant" and message.get("content") is None:
        message = {**message, "content": ""}
    if family is not None and family.json_arguments and message.get("tool_calls"):
        message = copy.deepcopy(message)
        for c in message["tool_calls"]:
            c["function"]["arguments"] = json.dumps(c["function"]["arguments"], ensure_ascii=False)
    return message


def conversation(family: Family, case: Case) -> list[dict[str, Any]]:
    head = [{"role": "system", "content": family.system}] if family.system else []
    return [*head, USER, *(_as_rendered(m, family) for m in case.history)]


def render_case(family: Family, case: Case) -> tuple[str, str]:
    """``(generation_prompt, raw_output)`` of a rendered case."""
    assert case.message is not None
    messages = conversation(family, case)
    before = _render(family, case, messages, generation_prompt=False)
    prompt = _render(family, case, messages, generation_prompt=True)
    turn = _as_rendered(case.message, family)
    glue = family.history_reasoning
    if glue is not None:
        reasoning = turn.get("reasoning_content")
        turn = {k: v for k, v in turn.items() if k != "reasoning_content"}
        following = {"role": "user", "content": "Thanks."}
        full = _render(family, case, [*messages, turn, following], generation_prompt=False)
    else:
        full = _render(family, case, [*messages, turn], generation_prompt=False)
    if not prompt.startswith(before):
        raise ValueError(f"{family.slug}/{case.name}: the generation prompt is not a suffix of the prompt")
    prefill = case.prefill_not_in_turn if case.prefill_not_in_turn is not None else family.prefill_not_in_turn
    if prefill:
        header = prompt[: -len(prefill)]
        if not prompt.endswith(prefill) or not full.startswith(header) or full.startswith(prompt):
            raise ValueError(
                f"{family.slug}/{case.name}: the prompt does not end with {prefill!r} left out of the turn"
            )
        full = prompt + full[len(header) :]
    if glue is not None:
        assert family.stop is not None
        body = full[len(prompt) :]
        body = body[: body.index(family.stop)]
        head = glue.format(reasoning=reasoning) if reasoning else ""
        full = prompt + head + body + family.stop
    if not full.startswith(prompt):
        raise ValueError(
            f"{family.slug}/{case.name}: the rendered assistant turn does not continue the generation prompt:\n"
            f"prompt tail {prompt[-120:]!r}\nturn tail {full[len(before) : len(before) + 200]!r}"
        )
    raw = full[len(prompt) :]
    if family.stop is not None:
        end = raw.rfind(family.stop)
        if end != -1 and raw[end + len(family.stop) :].strip() in ("", family.special.get("eos_token", "")):
            raw = raw[:end]
        elif not family.stop_optional:
            raise ValueError(
                f"{family.slug}/{case.name}: the turn does not end with {family.stop!r}: {raw[-80:]!r}"
            )
    if case.cut_before is not None:
        cut = raw.rfind(case.cut_before)
        if cut <= 0:
            raise ValueError(f"{family.slug}/{case.name}: {case.cut_before!r} is not in the output")
        raw = raw[:cut]
    return prompt[len(before) :], raw


def write_case(family: Family, case: Case) -> tuple[str, str]:
    """``(generation_prompt, raw_output)`` of a case laid out by the family's writer."""
    assert family.writer is not None and family.writer_prompt is not None and case.message is not None
    raw = family.writer(_as_rendered(case.message, family))
    if case.cut_before is not None:
        cut = raw.rfind(case.cut_before)
        if cut <= 0:
            raise ValueError(f"{family.slug}/{case.name}: {case.cut_before!r} is not in the output")
        raw = raw[:cut]
    prompt = case.generation_prompt if case.generation_prompt is not None else family.writer_prompt
    return prompt, raw


def expected_of(case: Case) -> dict[str, Any]:
    message = case.message or {}
    out: dict[str, Any] = {
        "content": message.get("content"),
        "reasoning_content": message.get("reasoning_content"),
        "tool_calls": [
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls") or ()
        ],
    }
    out.update(copy.deepcopy(dict(case.expected or {})))
    return out


def fixture(family: Family, case: Case) -> dict[str, Any]:
    """The canitoolcall fixture record of one case."""
    record: dict[str, Any] = {
        "id": f"{family.slug}/{case.name}",
        "family": family.slug,
        "models": list(family.models),
        "spec_version": "0.1",
    }
    if case.raw is not None:
        assert case.source and case.generation_prompt is not None, case.name
        record["provenance"] = {
            "kind": "spec_example",
            "source_url": case.source,
            "revision": case.source_revision or WRITTEN,
            "license": "Apache-2.0",
            "attribution": "written for chatparse after the output shape shown at source_url (no text copied); "
            f"model page {family.publisher}",
        }
        prompt, raw = case.generation_prompt, case.raw
    elif family.writer is not None:
        record["provenance"] = {
            "kind": "spec_example",
            "source_url": case.source or family.template_url,
            "revision": case.source_revision or family.template_revision,
            "license": "Apache-2.0",
            "attribution": "written for chatparse in the format the engines' parsers at source_url read "
            f"(tests/catalog/breadth_specs.py writer; no text copied); model page {family.publisher}",
        }
        prompt, raw = write_case(family, case)
    else:
        prompt, raw = render_case(family, case)
        record["provenance"] = {
            "kind": "template_render",
            "source_url": case.template_url or family.template_url,
            "revision": family.template_revision,
            "license": family.template_license,
            "generator": GENERATOR,
            "template_sha256": template_sha256(family, case),
            "attribution": f"rendered with the chat template published in {family.publisher}",
        }
    record["tools"] = copy.deepcopy(list(case.tools) if case.tools is not None else TOOLS)
    record["raw_output"] = raw
    if case.expected_error is not None:
        record["expected_error"] = {
            "reason": case.expected_error,
            "accept": ["no_tool_calls", "content_passthrough", "exception"],
        }
    else:
        record["expected"] = expected_of(case)
    record["tags"] = list(case.tags)
    record["generation_prompt"] = prompt
    if "reasoning" in case.tags or "reasoning-prefilled" in case.tags:
        record["thinking"] = True
    if case.notes:
        record["notes"] = case.notes
    return record


# --------------------------------------------------------------------------------------------------
# facts about the templates (what the repository keeps instead of the templates)

# Tag-shaped strings a template writes: <|special|>, <｜fullwidth｜>, <tag> / </tag> with simple
# attributes, <name= prefixes, [BRACKET TAGS], and the few odd markers of MiniMax and XML CDATA.
_TAG = regex.compile(
    r"""<\|[^\s<>|'"]{1,60}\|>|<｜[^｜\n'"]{1,60}｜>"""
    r"""|</?[A-Za-z_][A-Za-z0-9_:.\-]{0,40}(?:\{\})?(?:\s+[a-z_]+="[^"<>\n'+~]{0,40}")*\s?/?>"""
    r"""|<[A-Za-z_][A-Za-z0-9_:.\-]{0,40}=|\[[A-Z][A-Z_ ]{2,40}\]|\]~b\]|\[e~\[|\]<\]minimax\[>\[|<!\[CDATA\[|\]\]>"""
)


def literals(text: str, markers: Sequence[str]) -> list[str]:
    """The marker literals of a template: its tag-shaped strings in order of first appearance, then
    the catalog entry's chat-template markers (each verified to occur in the template)."""
    out: list[str] = []
    for m in _TAG.finditer(text):
        if m[0] not in out:
            out.append(m[0])
    for marker in markers:
        if marker not in text:
            raise ValueError(f"chat-template marker {marker!r} is not in the template")
        if marker not in out:
            out.append(marker)
    return out


def facts_path(source: Mapping[str, Any]) -> Path:
    """``<org>__<model>.json``; a template an engine wrote for the model gets ``__<repo>`` appended
    (it is not the publisher's own template)."""
    name = source["model"].replace("/", "__")
    if source.get("variant"):
        name += "__" + source["variant"]
    return FACTS / (name + ".json")


def facts_record(
    template: str, source: Mapping[str, Any], entry: str, markers: Sequence[str]
) -> dict[str, Any]:
    """The chat_template_facts record of one published template (read from the templates folder)."""
    folder = templates_dir()
    assert folder is not None
    text = (folder / template).read_text(encoding="utf-8")
    return {
        "model": source["model"],
        "source": {"repo": source["repo"], "path": source["path"], "commit": source["commit"]},
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "literals": literals(text, markers),
        "expected": entry,
        "local_name": template,
    }


def family_records(family: Family) -> list[dict[str, Any]]:
    return [fixture(family, case) for case in family.cases]


def dump(records: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare with the files instead of writing")
    parser.add_argument("--facts", action="store_true", help="also (re)write tests/data/chat_template_facts/")
    parser.add_argument("families", nargs="*", help="slugs (default: all)")
    args = parser.parse_args(argv)
    from .breadth_specs import FAMILIES, TEMPLATE_SOURCES, template_entries

    if templates_dir() is None:
        print(f"set {TEMPLATES_ENV} to the folder with the published templates", file=sys.stderr)
        return 2
    stale = []
    if args.facts:
        from chatparse import catalog

        for template, entry in template_entries().items():
            source = TEMPLATE_SOURCES[template]
            record = facts_record(template, source, entry, catalog.describe(entry)["chat_template_markers"])
            text = json.dumps(record, ensure_ascii=False, indent=2) + "\n"
            path = facts_path(source)
            if args.check:
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    stale.append(path.name)
            else:
                path.write_text(text, encoding="utf-8")
                print(f"{path.relative_to(ROOT)}: {len(record['literals'])} literals")
    for family in FAMILIES:
        if args.families and family.slug not in args.families:
            continue
        text = dump(family_records(family))
        path = OUT / f"{family.slug}.jsonl"
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"{path.relative_to(ROOT)}: {len(family.cases)} fixtures")
    if stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
