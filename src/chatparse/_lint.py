"""Warnings for templates that parse, but lose text on realistic outputs (defect D7)."""

from __future__ import annotations

from dataclasses import dataclass

from ._template import Template, load_response_template


@dataclass(frozen=True)
class LintWarning:
    """One finding: a stable `code`, the `field` concerned and a human-readable `message`."""

    code: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.code} [{self.field}]: {self.message}"


def lint_response_template(spec: dict | Template) -> list[LintWarning]:
    """Check a template for the implicit-field overwrite traps of the format (D7).

    The format keeps the reference's semantics: a non-`repeats` implicit field that closes and then
    receives more text is *overwritten* by the later text. Two common ways to hit it:

    * `implicit-closer`: the implicit field's closer does not swallow leading whitespace, so text
      after the closer (a newline before a second end marker) replaces the content; start the
      closer with `\\s*` and list every end marker in it;
    * `whitespace-between-regions`: a `repeats` field's opener does not swallow leading
      whitespace, so the newline between two tool calls becomes a fresh content value that
      replaces the text written before the calls. Start such openers with `\\s*`.

    >>> tpl = {"start_anchor": "A", "fields": {"content": {"close": ["<|im_end|>", "<|endoftext|>"]}}}
    >>> [w.code for w in lint_response_template(tpl)]
    ['implicit-closer']
    """
    t = load_response_template(spec)
    out: list[LintWarning] = []
    implicit = t.fields.get(t.implicit) if t.implicit is not None else None
    if implicit is None or implicit.repeats:
        return out
    closer = implicit.closer
    if closer is not None and not (closer.loop_test is not None and closer.loop_test(" ")):
        out.append(
            LintWarning(
                "implicit-closer",
                implicit.name,
                "text after the implicit field's closer opens a fresh value that overwrites the "
                "earlier one; start the closer with `\\s*` and list every end marker in it",
            )
        )
    for f in t.fields.values():
        if f is implicit or not f.repeats or f.opener is None:
            continue
        d = f.opener
        if d.literals is not None or d.loop_test is None or not d.loop_test(" "):
            out.append(
                LintWarning(
                    "whitespace-between-regions",
                    f.name,
                    f"whitespace between two '{f.name}' regions becomes a new '{implicit.name}' value that "
                    f"overwrites the text before them; start the opener with `\\s*`",
                )
            )
    return out
