"""Template and prefix resolution for the OpenAI layer (through `chatparse.catalog`, imported lazily)."""

from __future__ import annotations

import re
import warnings
from copy import deepcopy
from typing import Any

from .._template import REGEX_TIMEOUT, Template, load_response_template

MISSING_ANCHOR_POLICIES = ("warn", "error", "ignore")


class MissingAnchorWarning(UserWarning):
    """The prefix holds none of the template's start anchors, so all of it is parsed as output.

    The core keeps the reference behaviour (it parses the whole prefix, and only logs at INFO);
    `ChatParser` and `parse_message` warn with this class, or raise `MissingAnchorError` with
    `missing_anchor="error"`. A prompt that does not end in the template's generation prompt usually
    means the wrong template or a prompt passed without its generation prompt: the prompt text then
    lands in `content`, and format examples in a system prompt become tool calls.
    """


class MissingAnchorError(ValueError):
    """`missing_anchor="error"`: the prefix holds none of the template's start anchors."""


def _anchors(t: Template) -> str:
    if t.anchor_literals is not None:
        return ", ".join(repr(a) for a in t.anchor_literals)
    return f"pattern {t.anchor_re.pattern!r}"


def missing_anchor_message(t: Template, prefix: str | None, label: str | None = None) -> str | None:
    """Why `prefix` is suspicious for `t` (it is non-empty and holds no start anchor), else `None`.

    `label` names the template in the message (default "the template").

    >>> t = load_response_template({"start_anchor": "<|assistant|>", "fields": {"content": {}}})
    >>> missing_anchor_message(t, "<|assistant|>") is None, missing_anchor_message(t, "") is None
    (True, True)
    >>> missing_anchor_message(t, "<|user|>hi", "template 'mine'")[:68]
    "the prefix (10 characters) holds none of the start anchors of templa"
    """
    if not prefix:
        return None
    try:
        found = (
            t.anchor_re.search(prefix, timeout=REGEX_TIMEOUT)
            if t.anchor_guarded
            else t.anchor_re.search(prefix)
        )
        if found is not None:
            return None
    except TimeoutError:
        return None  # the core reports the timeout itself when it truncates the prefix
    size = f"{len(prefix)} character{'' if len(prefix) == 1 else 's'}"
    return (
        f"the prefix ({size}) holds none of the start anchors of {label or 'the template'} "
        f"({_anchors(t)}), so all of it is parsed as model output: prompt text can end up in content "
        "and format examples in the prompt can become tool calls. Pass the rendered prompt including its "
        "generation prompt, an empty prefix when there is none, or the template the prompt was rendered for"
    )


def check_prefix(t: Template, prefix: str | None, label: str | None, policy: str) -> None:
    """Warn (`MissingAnchorWarning`) or raise (`MissingAnchorError`) per `policy` when the prefix
    holds none of the template's start anchors; see `missing_anchor_message`."""
    if policy not in MISSING_ANCHOR_POLICIES:
        raise ValueError(f"missing_anchor must be one of {MISSING_ANCHOR_POLICIES}, got {policy!r}")
    if policy == "ignore":
        return
    message = missing_anchor_message(t, prefix, label)
    if message is None:
        return
    if policy == "error":
        raise MissingAnchorError(message)
    warnings.warn(message[0].upper() + message[1:], MissingAnchorWarning, stacklevel=4)


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


def _alternatives(pattern: str) -> list[tuple[int, int]]:
    """Spans of the alternatives of every alternation in `pattern` (top level and each group).

    A plain scan (escapes, character classes and group nesting tracked); the spans of one alternation
    are consecutive in the list, grouped by the returned order of `_alternation_groups`.
    """
    return [span for group in _alternation_groups(pattern) for span in group]


# What opens a group, up to where its first alternative starts: `(`, `(?:`, `(?=`, `(?!`, `(?<=`,
# `(?<!`, `(?P<name>`, `(?<name>`, `(?i:`. Anything else after `(` (`(?P=name)`, `(?i)`, a prefix
# that never ends) counts from the `(`: the scan always moves on.
_GROUP_PREFIX = re.compile(r"\((?:\?(?:[=!]|<[=!]|P?<\w+>|[a-zA-Z-]*:))?")


def _alternation_groups(pattern: str) -> list[list[tuple[int, int]]]:
    groups: list[list[tuple[int, int]]] = []
    stack: list[list[tuple[int, int]]] = [[]]
    starts = [0]
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern.startswith("[]", i) or pattern.startswith("[^]", i):
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif c == "(":
            j = _GROUP_PREFIX.match(pattern, i).end()  # type: ignore[union-attr]  # always >= i + 1
            stack.append([])
            starts.append(j)
            i = j
            continue
        elif c == ")" and len(stack) > 1:
            stack[-1].append((starts.pop(), i))
            groups.append(stack.pop())
        elif c == "|":
            stack[-1].append((starts[-1], i))
            starts[-1] = i + 1
        i += 1
    stack[0].append((starts[0], n))
    groups.append(stack[0])
    return groups


_META = set(".^$*+?{}[]()|\\")


def _literal(text: str) -> str | None:
    """The string a regex alternative matches when it is a plain literal (escapes resolved), else None."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text) or text[i + 1].isalnum():
                return None  # \s, \d, \b, ... or a dangling escape
            out.append(text[i + 1])
            i += 2
            continue
        if c in _META:
            return None
        out.append(c)
        i += 1
    return "".join(out) or None


def _closing_literals(field: Any) -> set[str]:
    """The closing markers that end `field` and pair with its opener (`<think>` ... `</think>`,
    `<tool_call>` ... `</tool_call>`); not end-of-turn markers that also end it."""
    found: set[str] = set()
    if not isinstance(field, dict):
        return found
    if isinstance(field.get("close"), str):
        found.add(field["close"])
    pattern = field.get("close_pattern")
    if isinstance(pattern, str):
        found |= {lit for a, b in _alternatives(pattern) if (lit := _literal(pattern[a:b]))}
    opener = " ".join(str(field.get(k, "")) for k in ("open", "open_pattern"))

    def pairs(lit: str) -> bool:  # `</x>` / `[/X]` whose `<x>` / `[X]` opens this field
        return lit.startswith(("</", "[/")) and (lit[0] + lit[2:]) in opener.replace("\\", "")

    return {lit for lit in found if pairs(lit)}


def _drop_alternatives(pattern: str, literals: set[str]) -> str:
    """`pattern` without the alternatives that are exactly one of `literals` (an alternation keeps at
    least one alternative)."""
    cut: list[tuple[int, int]] = []
    for group in _alternation_groups(pattern):
        if len(group) < 2:
            continue
        gone = [k for k, (a, b) in enumerate(group) if _literal(pattern[a:b]) in literals]
        if not gone or len(gone) == len(group):
            continue
        for k in gone:  # remove the alternative with one neighbouring '|'
            a, b = group[k]
            cut.append((a - 1, b) if k == len(group) - 1 or (k > 0 and k - 1 not in gone) else (a, b + 1))
    for a, b in sorted(cut, reverse=True):
        pattern = pattern[:a] + pattern[b:]
    return pattern


def without_fields(spec: Any, names: Any) -> Any:
    """`spec` without the fields `names` (a copy), so that their markup stays in the text verbatim.

    Used for `tool_choice="none"` (the model was asked not to call: call-like text is content, never
    a call, engines.md §3) and by the engine integrations when no reasoning parser is selected. The
    closing markers of a removed field (`</think>`, `</tool_call>`) are also taken out of the other
    fields' `close_pattern`s, where a catalog entry drops them as stray closers: with the field gone
    they belong to the verbatim markup.
    """
    fields = spec.get("fields") if isinstance(spec, dict) else None
    if not isinstance(fields, dict) or not any(n in fields for n in names):
        return spec
    literals: set[str] = set()
    for n in names:
        literals |= _closing_literals(fields.get(n))
    kept: dict[str, Any] = {}
    for k, v in fields.items():
        if k in names:
            continue
        if literals and isinstance(v, dict) and isinstance(v.get("close_pattern"), str):
            v = {**v, "close_pattern": _drop_alternatives(v["close_pattern"], literals)}
        kept[k] = v
    out = dict(spec)
    out["fields"] = kept
    return out


def without_tool_calls(spec: Any) -> Any:
    """`spec` without its `tool_calls` field (`without_fields(spec, ["tool_calls"])`)."""
    return without_fields(spec, ["tool_calls"])


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
    missing_anchor: str = "warn",
) -> tuple[Template, str]:
    """The compiled template and the prefix for `ChatParser` / `parse_message`.

    `template` may be a dict, a `Template` or a catalog name; otherwise `model` is resolved through
    `chatparse.catalog.resolve(model=...)`. `prefix=None` means the catalog entry's
    `generation_prompt` when the template came from the catalog, else `""`. With
    `parse_tool_calls=False` the template's `tool_calls` field is left out. A non-empty prefix
    without any of the template's start anchors warns or raises per `missing_anchor`
    (`check_prefix`).
    """
    t, out, name = _resolve_template(model, template, prefix, parse_tool_calls)
    label = None
    if name:
        label = f"template {name!r}" + (
            f" (the catalog entry for model {model!r})" if template is None else ""
        )
    check_prefix(t, out, label, missing_anchor)
    return t, out


def _resolve_template(
    model: str | None,
    template: dict | Template | str | None,
    prefix: str | None,
    parse_tool_calls: bool,
) -> tuple[Template, str, str | None]:
    """`(template, prefix, catalog name or None)`."""
    if template is None and model is None:
        raise ValueError("ChatParser needs template= (a dict, Template or catalog name) or model=")
    if template is not None and not isinstance(template, str):
        spec = template.spec if isinstance(template, Template) else template
        if isinstance(spec, dict) and relax_call_keys(spec) is spec and parse_tool_calls:
            return load_response_template(template), "" if prefix is None else prefix, None
        return _load(spec, parse_tool_calls), "" if prefix is None else prefix, None
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
    return _load(spec, parse_tool_calls), prefix, name
