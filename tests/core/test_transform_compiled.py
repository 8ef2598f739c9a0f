"""Compiled transforms (`_content.compile_transform`) rebuild exactly what the reference's walk rebuilds.

`apply_transform` runs a transform compiled once into one generated function; the walk (`_apply`,
the port of the reference) stays for the error messages and for transforms the compiler leaves
alone. Checked against the walk on generated transforms and scopes: equal values, the same
sharing of containers from the scope, and the same exception type and message.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatparse._content import _apply, apply_transform
from chatparse._content import compile_transform as _compiled

_NAMES = st.sampled_from(["content", "name", "id", "x"])
_KEYS = st.sampled_from(["a", "b", "name", "arguments"])
_PLACEHOLDERS = st.builds(
    lambda root, keys: "{" + ".".join([root, *keys]) + "}", _NAMES, st.lists(_KEYS, max_size=2)
)
_LITERALS = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(["function", "{", "x}"]))
_TRANSFORMS = st.recursive(
    st.one_of(_PLACEHOLDERS, _LITERALS),
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(_KEYS, kids, max_size=3)),
    max_leaves=8,
)
_VALUES = st.recursive(
    st.one_of(st.text(max_size=3), st.integers()),
    lambda kids: st.one_of(st.lists(kids, max_size=2), st.dictionaries(_KEYS, kids, max_size=3)),
    max_leaves=6,
)
_SCOPES = st.dictionaries(_NAMES, _VALUES, max_size=4)


def _outcome(fn: Any, transform: Any, scope: dict[str, Any]) -> Any:
    try:
        return ("ok", fn(transform, scope))
    except (KeyError, ValueError, TypeError) as e:
        return ("error", type(e), str(e))


def _containers(value: Any, out: list[int]) -> list[int]:
    if isinstance(value, (dict, list)):
        out.append(id(value))
        for v in value.values() if isinstance(value, dict) else value:
            _containers(v, out)
    return out


@settings(max_examples=400, deadline=None)
@given(_TRANSFORMS, _SCOPES)
def test_compiled_transforms_equal_the_walk(transform: Any, scope: dict[str, Any]) -> None:
    want = _outcome(lambda t, s: _apply(t, s, [], 0), transform, scope)
    got = _outcome(apply_transform, transform, scope)
    assert got == want
    if got[0] == "ok":
        # Never a container twice in one result (the walk copies where paths overlap).
        ids = _containers(got[1], [])
        assert len(ids) == len(set(ids))


def test_overlapping_placeholders_are_left_to_the_walk() -> None:
    assert _compiled({"a": "{content}", "b": "{content.name}"}) is None
    assert _compiled(["{x}", "{x}"]) is None
    assert _compiled({"a": "{content.name}", "b": "{content.arguments}", "c": "{name}"}) is not None
    value = {"name": {"k": 1}}
    out = apply_transform({"a": "{content}", "b": "{content.name}"}, {"content": value})
    assert out == {"a": value, "b": {"k": 1}} and out["b"] is not out["a"]["name"]
