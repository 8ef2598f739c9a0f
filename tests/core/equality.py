"""Type-strict structural equality shared by the differential test modules."""

from __future__ import annotations

from typing import Any


def same(a: Any, b: Any) -> bool:
    """Type-strict structural equality; floats compared by repr (NaN == NaN, -0.0 != 0.0); dict key
    order matters (the message key order is part of the contract)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)
