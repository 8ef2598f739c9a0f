"""Marker-free whole-output shapes, decided at the end of the stream on the cleaned content."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from typing import Any

from . import _gemma

Call = dict[str, Any]

_FENCE = re.compile(r"\A```([A-Za-z_]*)[ \t]*\n(.*?)\n?```\Z", re.DOTALL)
_IDENT = r"[A-Za-z_][\w.\-]*"
_PYTHONIC = re.compile(r"\A\[\s*" + _IDENT + r"\s*\(.*\)\s*\]\Z", re.DOTALL)
_BARE = re.compile(r"\A(?:/|call:)?(" + _IDENT + r")\s*\((.*)\)\Z", re.DOTALL)
_KEYED = re.compile(r"\A\s*([A-Za-z_][\w\-]*)\s*:\s*(.*?)\s*\Z")

#: Strings that a marker-free shape can start with (besides tool names).
STARTS = ("[", "{", "```", "/", "call:")


def could_be_shape(text: str, tool_names: Sequence[str]) -> bool:
    """True while `text` (content so far) may still grow into a marker-free whole-output shape.

    Prefix-closed: true for `s` implies true for every prefix of `s`; every shape implies it.
    """
    s = text.lstrip()
    if not s:
        return True
    for lead in (*STARTS, *tool_names, *(f"/{n}" for n in tool_names), *(f"call:{n}" for n in tool_names)):
        if lead.startswith(s) or s.startswith(lead):
            return True
    return False


def _literal(node: ast.AST) -> Any:
    value = ast.literal_eval(node)
    if isinstance(value, tuple):
        value = list(value)
    json.dumps(value)  # only JSON-representable values
    return value


def _py_call(node: ast.AST) -> Call:
    if not isinstance(node, ast.Call) or node.args:
        raise ValueError("not a keyword-argument call")
    func = node.func
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        raise ValueError("callee is not a name")
    parts.append(func.id)
    args = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError("**kwargs")
        args[kw.arg] = _literal(kw.value)
    return {"name": ".".join(reversed(parts)), "arguments": args}


def _py_calls(src: str) -> list[Call] | None:
    try:
        tree = ast.parse(src.strip(), mode="eval")
        body = tree.body
        nodes = body.elts if isinstance(body, ast.List) else [body]
        calls = [_py_call(n) for n in nodes]
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return calls or None


def pythonic(text: str) -> list[Call] | None:
    """`[f(a=1), g()]` as the whole (trimmed) output. Not gated on tool names."""
    s = text.strip()
    if not _PYTHONIC.match(s):
        return None
    return _py_calls(s)


def bare_pythonic(text: str, tool_names: Sequence[str]) -> list[Call] | None:
    """`NAME(k=v)` (optional leading `/` or `call:`) as the whole output, NAME offered."""
    m = _BARE.match(text.strip())
    if not m or m.group(1) not in tool_names:
        return None
    return _py_calls(f"{m.group(1)}({m.group(2)})")


def _json_objects(s: str) -> list[Any] | None:
    dec = json.JSONDecoder()
    out: list[Any] = []
    i, n = 0, len(s)
    while True:
        while i < n and (s[i].isspace() or (out and s[i] in ",;")):
            i += 1
        if i >= n:
            return out or None
        if s[i] != "{":
            return None
        try:
            value, i = dec.raw_decode(s, i)
        except (ValueError, RecursionError):
            return None
        out.append(value)


def llama3_json(text: str) -> list[Call] | None:
    """Whole output is `{"name", "parameters"|"arguments"}` objects, optionally in a json fence."""
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        if m.group(1) not in ("", "json"):
            return None
        s = m.group(2).strip()
    objs = _json_objects(s)
    if not objs:
        return None
    calls = []
    for o in objs:
        if not isinstance(o, dict) or not isinstance(o.get("name"), str):
            return None
        args = o.get("parameters", o.get("arguments", {}))
        calls.append({"name": o["name"], "arguments": args})
    return calls


def tool_code(text: str) -> list[Call] | None:
    """A ```tool_code (or ```python) fence holding Python calls, as the whole output."""
    m = _FENCE.match(text.strip())
    if not m or m.group(1) not in ("tool_code", "python", "tool_call"):
        return None
    return _py_calls(m.group(2))


def _scalar(v: str) -> Any:
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    try:
        return json.loads(v)
    except ValueError:
        return v


def loose_keyed(text: str, tool_names: Sequence[str]) -> list[Call] | None:
    """First non-empty line exactly an offered tool name, then only `key: value` lines (>= 1)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) < 2 or lines[0].strip() not in tool_names:
        return None
    args: dict[str, Any] = {}
    for ln in lines[1:]:
        m = _KEYED.match(ln)
        if not m:
            return None
        args[m.group(1)] = _scalar(m.group(2))
    return [{"name": lines[0].strip(), "arguments": args}]


def whole_output(
    text: str, tool_names: Sequence[str], enabled: Sequence[str]
) -> tuple[str, list[Call]] | None:
    """The first marker-free shape (documented precedence) that claims the whole `text`.

    Gemma's bare forms (`call:NAME{…}`, and `NAME{…}` for an offered NAME) come first, as the
    `gemma` family precedes the marker-free families.
    """
    if "gemma" in enabled:
        gemma = _gemma.bare_calls(text, tuple(tool_names))
        if gemma:
            return "gemma", gemma
    for name in ("pythonic", "bare_pythonic", "llama3_json", "tool_code", "loose_keyed"):
        if name not in enabled:
            continue
        if name == "pythonic":
            calls = pythonic(text)
        elif name == "bare_pythonic":
            calls = bare_pythonic(text, tool_names)
        elif name == "llama3_json":
            calls = llama3_json(text)
        elif name == "tool_code":
            calls = tool_code(text)
        else:
            calls = loose_keyed(text, tool_names)
        if calls:
            return name, calls
    return None
