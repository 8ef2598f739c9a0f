"""A time budget for one derivation, checked where the work is (per rule, per automaton step).

A derivation is pure Python and can take seconds for a large or hostile tool set. `within(seconds)`
sets a deadline for the current thread; `check()` raises `ConstraintTimeout` once it has passed, so
a worker running `derive(..., time_budget=...)` is freed at the deadline instead of running on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from ._errors import ConstraintError

_local = threading.local()


class ConstraintTimeout(ConstraintError):
    """The derivation did not finish within its time budget (`derive(..., time_budget=...)`)."""


@contextlib.contextmanager
def within(seconds: float | None) -> Iterator[None]:
    """Run the block with a deadline `seconds` from now (None: no deadline; nested: the earlier)."""
    old = getattr(_local, "deadline", None)
    if seconds is not None:
        new = time.monotonic() + seconds
        _local.deadline = new if old is None else min(old, new)
        _local.budget = seconds if old is None else getattr(_local, "budget", seconds)
    try:
        yield
    finally:
        _local.deadline = old


def check() -> None:
    """Raise `ConstraintTimeout` if the current thread's deadline has passed."""
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise ConstraintTimeout(
            f"deriving the constraint took longer than its time budget of {_local.budget:g} s"
        )
