"""Counting a function's calls in a test: `calls_of(monkeypatch, owner, name)` replaces
`owner.name` (a module function or a class's method) with a wrapper that counts its calls and then
calls the original; `monkeypatch` puts the original back after the test. Only calls that look the
name up are counted: inside compiled (mypyc) modules calls are native (see `build.pure_only`)."""

from __future__ import annotations

from typing import Any

import pytest


def calls_of(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Count the calls of `owner.name` from now on, in the returned one-item list."""
    count = [0]
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return count
