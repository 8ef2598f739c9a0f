"""Template and prefix resolution for the OpenAI layer (through `chatparse.catalog`, imported lazily)."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from .._template import Template, load_response_template

# A JSON call object read by key: `{"name": ..., "parameters"|"arguments": ...}` (Llama 3.x writes
# both keys; a transform cannot fall back between them, families.md rule 8).
_KEYED_CALL = tuple(
    {"type": "function", "function": {"name": "{content.name}", "arguments": f"{{content.{key}}}"}}
    for key in ("parameters", "arguments")
)


def relax_call_keys(spec: dict) -> dict:
    """`spec` with a keyed JSON call transform replaced by one that passes the call object through.

    The OpenAI layer normalises `{"name", "parameters"}` and `{"name", "arguments"}` alike
    (`calls_from_value`), so a `tool_calls` field whose transform only reads `content.name` and
    `content.parameters` (or `content.arguments`) accepts either key. Other templates, and the
    core's own output for the template, are unchanged; `spec` itself is never mutated.

    >>> spec = {"fields": {"tool_calls": {"open": "<c>", "content": "json",
    ...     "transform": {"type": "function", "function": {"name": "{content.name}",
    ...                                                    "arguments": "{content.parameters}"}}}}}
    >>> relax_call_keys(spec)["fields"]["tool_calls"]["transform"]
    {'type': 'function', 'function': '{content}'}
    """
    fields = spec.get("fields")
    f = fields.get("tool_calls") if isinstance(fields, dict) else None
    if (
        not isinstance(f, dict)
        or f.get("content") != "json"
        or f.get("transform_each")
        or f.get("transform") not in _KEYED_CALL
    ):
        return spec
    out = deepcopy(spec)
    out["fields"]["tool_calls"]["transform"] = {"type": "function", "function": "{content}"}
    return out


def _catalog() -> Any:
    try:
        from .. import catalog
    except ImportError as e:  # pragma: no cover - the catalog ships with the package
        raise ValueError("chatparse.catalog is not available: pass template= as a dict") from e
    return catalog


def _generation_prompt(catalog: Any, name: str) -> str:
    describe = getattr(catalog, "describe", None)
    if describe is None:
        return ""
    info = describe(name)
    prompt = info.get("generation_prompt") if isinstance(info, dict) else None
    return prompt if isinstance(prompt, str) else ""


def _by_name(catalog: Any, name: str) -> Any:
    # The catalog's lookup by name: `get(name)`, `describe(name)["template"]` or `resolve(name=...)`,
    # whichever it offers.
    get = getattr(catalog, "get", None)
    if callable(get):
        return get(name)
    describe = getattr(catalog, "describe", None)
    if callable(describe):
        info = describe(name)
        if isinstance(info, dict) and isinstance(info.get("template"), dict):
            return info["template"]
    resolve = getattr(catalog, "resolve", None)
    if callable(resolve):
        return resolve(name=name)
    raise ValueError(f"chatparse.catalog cannot look up template {name!r} by name")


def without_tool_calls(spec: Any) -> Any:
    """`spec` without its `tool_calls` field (a copy), so that call markup stays in the text.

    Used for `tool_choice="none"`: the model was asked not to call, and whatever call-like text it
    writes is returned as content, never as a call (engines.md §3).
    """
    fields = spec.get("fields") if isinstance(spec, dict) else None
    if not isinstance(fields, dict) or "tool_calls" not in fields:
        return spec
    out = dict(spec)
    out["fields"] = {k: v for k, v in fields.items() if k != "tool_calls"}
    return out


def _load(spec: Any, parse_tool_calls: bool) -> Template:
    if isinstance(spec, Template):
        spec = spec.spec
    if isinstance(spec, dict):
        relaxed = relax_call_keys(spec)
        spec = relaxed if parse_tool_calls else without_tool_calls(relaxed)
    return load_response_template(spec)


def resolve_template(
    model: str | None,
    template: dict | Template | str | None,
    prefix: str | None,
    *,
    parse_tool_calls: bool = True,
) -> tuple[Template, str]:
    """The compiled template and the prefix for `ChatParser` / `parse_message`.

    `template` may be a dict, a `Template` or a catalog name; otherwise `model` is resolved through
    `chatparse.catalog.resolve(model=...)`. `prefix=None` means the catalog entry's
    `generation_prompt` when the template came from the catalog, else `""`. With
    `parse_tool_calls=False` the template's `tool_calls` field is left out.
    """
    if template is None and model is None:
        raise ValueError("ChatParser needs template= (a dict, Template or catalog name) or model=")
    if template is not None and not isinstance(template, str):
        spec = template.spec if isinstance(template, Template) else template
        if isinstance(spec, dict) and relax_call_keys(spec) is spec and parse_tool_calls:
            return load_response_template(template), "" if prefix is None else prefix
        return _load(spec, parse_tool_calls), "" if prefix is None else prefix
    catalog = _catalog()
    name: str | None
    if isinstance(template, str):
        name = template
        spec = _by_name(catalog, name)
    else:
        spec = catalog.resolve(model=model)
        resolve_name = getattr(catalog, "resolve_name", None)
        name = resolve_name(model=model) if callable(resolve_name) else None
    if prefix is None:
        prefix = _generation_prompt(catalog, name) if name else ""
    return _load(spec, parse_tool_calls), prefix
