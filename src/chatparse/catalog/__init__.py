"""Catalog of ``response_template`` s for open model families, and resolution of a model to one.

Each template is a JSON data file in ``chatparse/catalog/templates/`` (one per output protocol) with
metadata around the template itself: ``name``, ``description``, ``families``, ``models`` (model-id
match rules), ``chat_template_markers``, ``generation_prompt``, ``prefills``, ``stop``, ``notes`` and
``template``. The files are read lazily (on first use) with :mod:`importlib.resources`; every public
function returns fresh copies, so callers may mutate what they get.

The catalog never parses text itself: hand the template to :func:`chatparse.parse_response` or
:class:`chatparse.ResponseParser`.

>>> from chatparse import catalog, parse_response
>>> tpl = catalog.resolve(model="unsloth/Qwen3-8B-GGUF")
>>> parse_response("<think>hm</think>Hi<|im_end|>", tpl, prefix="<|im_start|>assistant\\n")
{'role': 'assistant', 'reasoning_content': 'hm', 'content': 'Hi'}

Resolution (:func:`resolve`, :func:`resolve_name`), in this order:

1. a ``tokenizer_config``'s own ``response_template`` (returned as-is, as a copy);
2. a chat template (``chat_template``, then the ``tokenizer_config``'s ``chat_template``), recognised
   by the entries' ``chat_template_markers``: the template is what the model is prompted with, so
   it decides the output format (Llama 3.2 writes JSON calls under its hub template, pythonic ones
   under vLLM's pythonic template);
3. ``model``, a model id or path, matched against every template's ``models`` rules;
4. the ``tokenizer_config``'s ``name_or_path`` (or ``_name_or_path``), as a model id.

Chat-template markers are literal strings that must all occur in the template; a marker written
``"!text"`` must not occur (it tells a family apart from a neighbour that shares its markers).

Model-id rules are case-insensitive regular expressions searched in the normalised id (lower case,
``_`` and spaces as ``-``), so quantized and fine-tuned names such as ``unsloth/Qwen3-8B-GGUF`` or
``bartowski/Llama-3.2-3B-Instruct-GGUF`` match; the longest matching text wins (``qwen3-coder`` beats
``qwen3``; ``deepseek-v3.1`` beats ``deepseek-v3``). When nothing matches, :class:`UnknownModelError`
(a :class:`ValueError`) names the model's family when the catalog knows it, the entries nearest to a
chat template by markers, and what to do when the family is not in the catalog.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

__all__ = [
    "UnknownModelError",
    "UnknownTemplateError",
    "describe",
    "entry",
    "get",
    "load",
    "match_chat_template",
    "match_model",
    "names",
    "resolve",
    "resolve_name",
]

_TEMPLATE_DIR = "templates"
_REASONING_FIELD = "reasoning_content"
_METADATA_KEYS = (
    "name",
    "description",
    "families",
    "models",
    "chat_template_markers",
    "generation_prompt",
    "prefills",
    "stop",
    "notes",
)


class UnknownTemplateError(KeyError, ValueError):
    """No catalog entry has this name. ``candidates`` lists close names (else every name).

    >>> from chatparse import catalog
    >>> try:
    ...     catalog.get("qwen")
    ... except catalog.UnknownTemplateError as exc:
    ...     "qwen3" in exc.candidates
    True
    """

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.message = message
        self.candidates = candidates

    def __str__(self) -> str:
        return self.message


class UnknownModelError(ValueError):
    """:func:`resolve` found no template.

    ``candidates`` lists the catalog entries worth a look, possibly none: for a model id, the
    entries of the model's family when the catalog knows the family (``family``) but no entry
    matches the checkpoint; for a chat template, the entries whose chat-template markers overlap
    most with it. The message always says what to do when the family is not in the catalog:
    parse without a template (``--auto``, ``ChatParser(auto=True)``) or pass a template file.
    ``reason`` is the message without that advice (what was tried and what is near), for callers
    that give their own (``chatparse serve`` names its flags).

    >>> from chatparse import catalog
    >>> try:
    ...     catalog.resolve(model="acme/unheard-of-7b")
    ... except catalog.UnknownModelError as exc:
    ...     exc.candidates, exc.family
    ([], None)
    """

    def __init__(
        self, message: str, candidates: list[str], family: str | None = None, reason: str | None = None
    ) -> None:
        super().__init__(message)
        self.candidates = candidates
        self.family = family
        self.reason = message if reason is None else reason


# --------------------------------------------------------------------------------------------------
# loading


class _Rule:
    """One compiled model-id rule of a catalog entry."""

    __slots__ = ("name", "pattern", "regex")

    def __init__(self, name: str, pattern: str) -> None:
        self.name = name
        self.pattern = pattern
        self.regex = re.compile(pattern, re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _entries() -> dict[str, dict[str, Any]]:
    """All catalog entries by name, read once from the package data (never handed out: copy first)."""
    out: dict[str, dict[str, Any]] = {}
    folder = resources.files(__name__).joinpath(_TEMPLATE_DIR)
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".json"):
            continue
        data = json.loads(item.read_text(encoding="utf-8"))
        name = data.get("name")
        if name != item.name[: -len(".json")]:
            raise ValueError(f"catalog file {item.name}: 'name' is {name!r}, expected the file stem")
        out[name] = data
    return out


@functools.lru_cache(maxsize=1)
def _rules() -> tuple[_Rule, ...]:
    return tuple(_Rule(name, pattern) for name, e in _entries().items() for pattern in e.get("models", ()))


def _entry(name: str) -> dict[str, Any]:
    entries = _entries()
    found = entries.get(name)
    if found is None:
        found = entries.get(str(name).strip().lower().replace("-", "_").replace(".", ""))
    if found is None:
        # a model id where a name belongs ("Qwen/Qwen3-8B"): the entry it resolves to is the candidate
        by_id = match_model(str(name)) if "/" in str(name) or "." in str(name) else None
        if by_id is not None:
            raise UnknownTemplateError(
                f"no catalog template named {name!r}; as a model id it resolves to {by_id!r} "
                "(model ids go to catalog.resolve(model=...) and chatparse parse --model)",
                candidates=[by_id],
            )
        close = difflib.get_close_matches(str(name).lower(), list(entries), n=5, cutoff=0.5)
        close = close or [n for n in entries if str(name).lower() in n] or sorted(entries)
        raise UnknownTemplateError(
            f"no catalog template named {name!r}; candidates: {', '.join(close)}", candidates=close
        )
    return found


def _rename_reasoning(template: dict[str, Any], reasoning_field: str) -> dict[str, Any]:
    if reasoning_field == _REASONING_FIELD:
        return template
    fields = template.get("fields", {})
    template["fields"] = {(reasoning_field if k == _REASONING_FIELD else k): v for k, v in fields.items()}
    return template


# --------------------------------------------------------------------------------------------------
# lookup


def names() -> list[str]:
    """The names of all catalog templates, sorted.

    >>> from chatparse import catalog
    >>> "qwen3" in catalog.names() and "gpt_oss" in catalog.names()
    True
    """
    return sorted(_entries())


def get(name: str, *, reasoning_field: str = _REASONING_FIELD) -> dict[str, Any]:
    """The ``response_template`` named ``name``, as a fresh copy.

    ``reasoning_field`` renames the reasoning field (``"thinking"`` for vLLM's ``hf`` and SGLang's
    ``response_template`` parsers). Raises :class:`UnknownTemplateError` for an unknown name.

    >>> from chatparse import catalog
    >>> tpl = catalog.get("qwen3")
    >>> tpl["start_anchor"], list(tpl["fields"])
    ('<|im_start|>assistant\\n', ['reasoning_content', 'tool_calls', 'content'])
    >>> list(catalog.get("qwen3", reasoning_field="thinking")["fields"])[0]
    'thinking'
    """
    template = copy.deepcopy(_entry(name)["template"])
    return _rename_reasoning(template, reasoning_field)


def entry(name: str) -> dict[str, Any]:
    """The whole catalog entry (metadata and ``template``) named ``name``, as a fresh copy.

    >>> from chatparse import catalog
    >>> catalog.entry("gemma4")["generation_prompt"]
    '<|turn>model\\n'
    """
    return copy.deepcopy(_entry(name))


def describe(name: str) -> dict[str, Any]:
    """The metadata of the catalog entry ``name``: everything but the template, as a fresh copy.

    >>> from chatparse import catalog
    >>> info = catalog.describe("deepseek_v31")
    >>> info["generation_prompt"], "template" in info
    ('<｜Assistant｜></think>', False)
    """
    data = _entry(name)
    return {key: copy.deepcopy(value) for key, value in data.items() if key != "template"}


def load(name: str) -> Any:
    """The template named ``name``, compiled with :func:`chatparse.load_response_template`.

    >>> from chatparse import catalog, parse_response
    >>> parse_response("Hi<|im_end|>", catalog.load("qwen3"), prefix="<|im_start|>assistant\\n")
    {'role': 'assistant', 'content': 'Hi'}
    """
    from .._template import load_response_template

    return load_response_template(get(name))


# --------------------------------------------------------------------------------------------------
# matching


def _normalise_model(model: str) -> str:
    text = str(model).strip().lower().replace("\\", "/")
    return re.sub(r"[_\s]+", "-", text)


def _model_matches(model: str) -> list[tuple[int, int, str, str]]:
    """``(matched length, rule length, name, rule)`` for every rule that matches ``model``, best first."""
    text = _normalise_model(model)
    found: dict[str, tuple[int, int, str, str]] = {}
    for rule in _rules():
        hit = rule.regex.search(text)
        if hit is None:
            continue
        score = (hit.end() - hit.start(), len(rule.pattern), rule.name, rule.pattern)
        if rule.name not in found or score[:2] > found[rule.name][:2]:
            found[rule.name] = score
    return sorted(found.values(), key=lambda s: (-s[0], -s[1], s[2]))


def match_model(model: str) -> str | None:
    """The catalog name whose model-id rules match ``model`` best, or ``None``.

    >>> from chatparse import catalog
    >>> catalog.match_model("Qwen/Qwen3-Coder-30B-A3B-Instruct"), catalog.match_model("Qwen/Qwen3-8B")
    ('qwen3_xml', 'qwen3')
    >>> catalog.match_model("acme/unheard-of") is None
    True
    """
    matches = _model_matches(model)
    return matches[0][2] if matches else None


def _chat_template_text(chat_template: Any) -> str:
    """A chat template as one string: a string, or HF's list of ``{"name", "template"}`` entries."""
    if isinstance(chat_template, str):
        return chat_template
    if isinstance(chat_template, Mapping):
        return _chat_template_text(chat_template.get("template", ""))
    if isinstance(chat_template, (list, tuple)):
        return "\n".join(_chat_template_text(item) for item in chat_template)
    return ""


def _split_markers(markers: list[str]) -> tuple[list[str], list[str]]:
    """``(required, excluded)``: a marker written ``!text`` must not occur in the template."""
    required = [m for m in markers if not m.startswith("!")]
    excluded = [m[1:] for m in markers if m.startswith("!") and len(m) > 1]
    return required, excluded


def _marker_matches(text: str) -> list[tuple[int, int, str]]:
    """``(required markers, their total length, name)`` of every entry whose markers match ``text``."""
    found = []
    for name, data in _entries().items():
        required, excluded = _split_markers(list(data.get("chat_template_markers") or []))
        if required and all(m in text for m in required) and not any(m in text for m in excluded):
            found.append((len(required), sum(len(m) for m in required), name))
    return sorted(found, key=lambda s: (-s[0], -s[1], s[2]))


def match_chat_template(chat_template: Any) -> str | None:
    """The catalog name recognised from a chat template's markers, or ``None``.

    An entry matches when all its ``chat_template_markers`` occur in the template and none of its
    exclusions (markers written ``"!text"``) does; when several match, the one with the most markers
    (then the longest ones) wins. Accepts a string or HF's list of named templates.

    >>> from chatparse import catalog
    >>> catalog.match_chat_template("{{'<|im_start|>'}} ... <tool_call> ... <function=")
    'qwen3_xml'
    """
    text = _chat_template_text(chat_template)
    if not text:
        return None
    found = _marker_matches(text)
    return found[0][2] if found else None


_NOT_FAMILIES = frozenset({"other", "the"})


def _family_word(family: str) -> str:
    """The family name of an entry's ``families`` item: ``"Qwen3 (hybrid 2504)"`` -> ``"qwen"``,
    ``"DeepSeek-V3.1"`` -> ``"deepseek"``, ``"gpt-oss (Harmony)"`` -> ``"gpt-oss"``."""
    head = family.strip().split(" ")[0].lower()
    m = re.match(r"[a-z]+", head)
    word = m.group(0) if m else ""
    if len(word) < 4 and (tail := re.match(r"-([a-z]{2,})", head[len(word) :])):
        word += "-" + tail.group(1)  # gpt-oss, not gpt
    return "" if word in _NOT_FAMILIES else word


@functools.lru_cache(maxsize=1)
def _families() -> dict[str, tuple[str, ...]]:
    """Family word -> the catalog names whose ``families`` use it (words of 3+ letters)."""
    out: dict[str, list[str]] = {}
    for name, data in _entries().items():
        for family in data.get("families", ()):
            word = _family_word(family)
            if len(word) >= 3 and name not in out.setdefault(word, []):
                out[word].append(name)
    return {word: tuple(sorted(found)) for word, found in out.items()}


def _model_family(model: str) -> str | None:
    """The catalog family word found in a model id (the longest one, as a word), or ``None``."""
    text = _normalise_model(model)
    best = None
    for word in _families():
        if re.search(rf"(?<![a-z]){re.escape(word)}", text) and (best is None or len(word) > len(best)):
            best = word
    return best


def _family_label(name: str) -> str:
    families = _entries()[name].get("families") or []
    return f"{name} ({', '.join(families)})" if families else name


def _nearest_by_markers(text: str, limit: int = 3) -> list[tuple[str, list[str], list[str], list[str]]]:
    """``(name, present, missing, excluded-but-present)`` for the entries whose required
    chat-template markers overlap most with ``text`` (at least one present), best first."""
    scored = []
    for name, data in _entries().items():
        required, excluded = _split_markers(list(data.get("chat_template_markers") or []))
        if not required:
            continue
        present = [m for m in required if m in text]
        if not present:
            continue
        missing = [m for m in required if m not in text]
        clashing = [m for m in excluded if m in text]
        scored.append((len(present) / len(required), len(present), name, present, missing, clashing))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    return [(name, present, missing, clashing) for _, _, name, present, missing, clashing in scored[:limit]]


_NAME_AN_ENTRY = "catalog.get(name), chatparse parse --model NAME, chatparse serve --template NAME"
_WHAT_TO_DO = (
    "parse without a template (chatparse parse --auto, ChatParser(auto=True)) or pass a response "
    "template file (chatparse parse --template FILE, template=...)"
)


# --------------------------------------------------------------------------------------------------
# resolution


def _read_tokenizer_config(tokenizer_config: Any) -> Mapping[str, Any]:
    """A tokenizer config mapping, from a mapping, a ``tokenizer_config.json`` path or a folder with one."""
    if isinstance(tokenizer_config, Mapping):
        return tokenizer_config
    if isinstance(tokenizer_config, (str, os.PathLike)):
        path = os.fspath(tokenizer_config)
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer_config.json")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: a tokenizer_config.json must hold a JSON object")
        return data
    raise TypeError(f"tokenizer_config must be a mapping or a path, not {type(tokenizer_config).__name__}")


def _resolve(
    model: str | None, tokenizer_config: Any, chat_template: Any
) -> tuple[str | None, dict[str, Any] | None]:
    config = _read_tokenizer_config(tokenizer_config) if tokenizer_config is not None else None
    if config is not None:
        own = config.get("response_template")
        if own is not None:
            return None, copy.deepcopy(dict(own))
    if model is None and tokenizer_config is None and chat_template is None:
        raise TypeError("resolve() needs at least one of model, tokenizer_config, chat_template")
    # The chat template is what the model is actually prompted with, so when it is recognised it
    # decides the output format (a Llama 3.2 or Llama 4 checkpoint writes JSON calls under its hub
    # template and pythonic calls under vLLM's pythonic one); the model id is the fallback.
    templates = [t for t in (chat_template, config.get("chat_template") if config is not None else None) if t]
    for source in templates:
        name = match_chat_template(source)
        if name is not None:
            return name, None
    config_model = None
    if config is not None:
        config_model = config.get("name_or_path") or config.get("_name_or_path")
    models = [m for m in (model, config_model) if isinstance(m, str) and m]
    for m in models:
        name = match_model(m)
        if name is not None:
            return name, None
    raise _unknown(models, [_chat_template_text(t) for t in templates])


def _unknown(models: list[str], templates: list[str]) -> UnknownModelError:
    """The error for inputs nothing in the catalog matches: what was tried, what is near, what to do."""
    parts: list[str] = []
    candidates: list[str] = []
    family: str | None = None
    for m in models:
        word = _model_family(m)
        if word is None:
            parts.append(f"Model {m!r}: no catalog rule matches it, and its family is not in the catalog.")
            continue
        family = family or word
        names_ = list(_families()[word])
        candidates += [n for n in names_ if n not in candidates]
        parts.append(
            f"Model {m!r} looks like a {word} checkpoint, but no catalog rule covers it "
            f"(the catalog's {word} entries: {'; '.join(_family_label(n) for n in names_)})."
        )
    for text in templates:
        near = _nearest_by_markers(text)
        if not near:
            parts.append("The chat template has none of the catalog's chat-template markers.")
            continue
        described = []
        for name, present, missing, clashing in near:
            why = [f"missing {', '.join(repr(x) for x in missing)}"] if missing else []
            why += [f"has {', '.join(repr(x) for x in clashing)}"] if clashing else []
            described.append(
                f"{name} ({len(present)}/{len(present) + len(missing)} markers, {'; '.join(why)})"
            )
            if name not in candidates:
                candidates.append(name)
        parts.append("The chat template matches no entry; nearest by markers: " + ", ".join(described) + ".")
    reason = "no catalog template. " + " ".join(parts)
    if candidates:
        advice = f"Pick one of those if it fits ({_NAME_AN_ENTRY}); otherwise {_WHAT_TO_DO}."
    else:
        advice = (
            "If the model writes one of the catalog's formats (chatparse templates list), name that entry "
            f"({_NAME_AN_ENTRY}); otherwise {_WHAT_TO_DO}."
        )
    return UnknownModelError(f"{reason} {advice}", candidates=candidates, family=family, reason=reason)


def resolve_name(
    model: str | None = None, tokenizer_config: Any = None, chat_template: Any = None
) -> str | None:
    """The catalog name :func:`resolve` would use; ``None`` when the tokenizer config has its own template.

    >>> from chatparse import catalog
    >>> catalog.resolve_name(model="deepseek-ai/DeepSeek-V3.1")
    'deepseek_v31'
    >>> catalog.resolve_name(tokenizer_config={"response_template": {"start_anchor": "A", "fields": {}}}) is None
    True
    """
    name, _ = _resolve(model, tokenizer_config, chat_template)
    return name


def resolve(
    model: str | None = None,
    tokenizer_config: Any = None,
    chat_template: Any = None,
    *,
    reasoning_field: str = _REASONING_FIELD,
) -> dict[str, Any]:
    """The ``response_template`` for a model, as a fresh copy.

    ``tokenizer_config`` is a mapping, a ``tokenizer_config.json`` path or a folder holding one; its
    own ``response_template`` wins and is returned as-is (a copy; ``reasoning_field`` is not applied).
    Then the chat template's markers (``chat_template``, then the config's), then ``model`` (a model
    id or path), then the config's ``name_or_path``. Raises :class:`UnknownModelError` (a
    ``ValueError``) when nothing matches.

    >>> from chatparse import catalog
    >>> catalog.resolve(model="lmstudio-community/gpt-oss-20b-GGUF")["start_anchor"]
    '<|start|>assistant'
    >>> catalog.resolve(chat_template="... <|tool_call>call: ...")["start_anchor"]
    ['<|turn>model\\n', '<tool_response|>']
    """
    name, own = _resolve(model, tokenizer_config, chat_template)
    if own is not None:
        return own
    assert name is not None
    return get(name, reasoning_field=reasoning_field)
