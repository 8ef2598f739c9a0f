"""Exceptions raised by chatparse (all are `ValueError`s, so `except ValueError` catches them)."""

from __future__ import annotations

from typing import Any


class RequiredFieldsMissing(ValueError):
    """`finalize()` found no value for fields marked `optional: false`.

    Raised after the end-of-stream pass, so the events of that pass (closing the last region,
    possibly a `region_malformed`) are not lost: they are in `events`, and `missing` lists the
    field names. The message text is the reference's.
    """

    def __init__(self, missing: list[str], events: list[Any]) -> None:
        super().__init__(f"Required response_template fields missing from parsed output: {missing}")
        self.missing = missing
        self.events = events
