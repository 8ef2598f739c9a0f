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
2. ``model``, a model id or path, matched against every template's ``models`` rules;
3. a chat template (``chat_template``, then the ``tokenizer_config``'s ``chat_template``), recognised
   by the template's ``chat_template_markers``;
4. the ``tokenizer_config``'s ``name_or_path`` (or ``_name_or_path``), as a model id.

Model-id rules are case-insensitive regular expressions searched in the normalised id (lower case,
``_`` and spaces as ``-``), so quantized and fine-tuned names such as ``unsloth/Qwen3-8B-GGUF`` or
``bartowski/Llama-3.2-3B-Instruct-GGUF`` match; the longest matching text wins (``qwen3-coder`` beats
``qwen3``; ``deepseek-v3.1`` beats ``deepseek-v3``). When nothing matches, :class:`UnknownModelError`
(a :class:`ValueError`) lists close candidates.
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
    """:func:`resolve` found no template. ``candidates`` lists close template names (else every name).

    >>> from chatparse import catalog
    >>> try:
    ...     catalog.resolve(model="acme/unheard-of-7b")
    ... except catalog.UnknownModelError as exc:
    ...     len(exc.candidates) > 0
    True
    """

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


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


def match_chat_template(chat_template: Any) -> str | None:
    """The catalog name recognised from a chat template's markers, or ``None``.

    An entry matches when all its ``chat_template_markers`` occur in the template; the entry with the
    most markers (then the longest ones) wins. Accepts a string or HF's list of named templates.

    >>> from chatparse import catalog
    >>> catalog.match_chat_template("{{'<|im_start|>'}} ... <tool_call> ... <function=")
    'qwen3_xml'
    """
    text = _chat_template_text(chat_template)
    if not text:
        return None
    best: tuple[int, int, str] | None = None
    for name, data in _entries().items():
        markers = data.get("chat_template_markers") or []
        if markers and all(marker in text for marker in markers):
            score = (len(markers), sum(len(m) for m in markers), name)
            if best is None or score[:2] > best[:2]:
                best = score
    return best[2] if best else None


def _close_candidates(*texts: str) -> list[str]:
    """Catalog names that look like ``texts`` (model ids or words of them); every name if none do."""
    all_names = names()
    vocabulary: dict[str, str] = {n: n for n in all_names}
    for name in all_names:
        for family in _entries()[name].get("families", ()):
            for word in re.split(r"[\s/()]+", family.lower()):
                if len(word) > 2:
                    vocabulary.setdefault(word, name)
    found: list[str] = []
    for text in texts:
        base = _normalise_model(text).rsplit("/", 1)[-1]
        words = [base, *[w for w in re.split(r"[-.:]+", base) if len(w) > 2]]
        for word in words:
            for hit in difflib.get_close_matches(word, list(vocabulary), n=5, cutoff=0.6):
                if vocabulary[hit] not in found:
                    found.append(vocabulary[hit])
    return found or all_names


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
    if model:
        name = match_model(model)
        if name is not None:
            return name, None
    for source in (chat_template, config.get("chat_template") if config is not None else None):
        if source:
            name = match_chat_template(source)
            if name is not None:
                return name, None
    config_model = None
    if config is not None:
        config_model = config.get("name_or_path") or config.get("_name_or_path")
        if isinstance(config_model, str) and config_model:
            name = match_model(config_model)
            if name is not None:
                return name, None
    if model is None and tokenizer_config is None and chat_template is None:
        raise TypeError("resolve() needs at least one of model, tokenizer_config, chat_template")
    tried = [
        f"model {model!r}" if model else "",
        "a chat template" if chat_template or (config and config.get("chat_template")) else "",
        f"name_or_path {config_model!r}" if isinstance(config_model, str) and config_model else "",
    ]
    hints = [t for t in (model, config_model) if isinstance(t, str) and t]
    candidates = _close_candidates(*hints)
    raise UnknownModelError(
        f"no catalog template matches {' or '.join(t for t in tried if t) or 'the input'}; "
        f"candidates: {', '.join(candidates)} "
        "(pick one with chatparse.catalog.get(name), or pass a response_template)",
        candidates=candidates,
    )


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
    Then ``model`` (a model id or path), then the chat template's markers, then the config's
    ``name_or_path``. Raises :class:`UnknownModelError` (a ``ValueError``) when nothing matches.

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
