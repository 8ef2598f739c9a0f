"""The constraint package's exceptions (a module of its own so every layer can raise them)."""

from __future__ import annotations


class ConstraintError(ValueError):
    """A template, tool schema or request option cannot be turned into an exact constraint."""
