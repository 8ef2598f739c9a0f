"""Validation of OpenAI-style request bodies (Chat Completions, Responses): no HTTP here.

Errors are `InvalidRequest` (a `ValueError`) carrying `param`, the dotted path of the offending field
(`messages[2].role`, `tools[0].function.name`), so a server can answer with an OpenAI error object.
"""

from __future__ import annotations


class InvalidRequest(ValueError):
    """A request body that does not follow the API: `param` names the field (dotted path) or is None."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param
