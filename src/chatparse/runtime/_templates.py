"""Which response template parses a local model's output (through `chatparse.catalog`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .._template import Template, load_response_template

logger = logging.getLogger("chatparse.runtime")


def resolve_response_template(
    template: Any,
    *,
    model: str | None = None,
    chat_template: Any = None,
    tokenizer_config: Any = None,
) -> tuple[Template | None, str | None]:
    """`(compiled template or None, catalog name or None)` for a local runtime.

    `template` is a catalog name, a `response_template` dict, a `Template`, `"auto"` / `False`
    (template-less detection), or None: resolved from `tokenizer_config` (its own
    `response_template` first), the model id and the chat template, in the catalog's order. When
    nothing matches, the output is parsed by detection (and the reason is logged).
    """
    from .. import catalog

    if template is False or template == "auto":
        return None, None
    if isinstance(template, Template):
        return template, None
    if isinstance(template, Mapping):
        return load_response_template(dict(template)), None
    if isinstance(template, str):
        return load_response_template(catalog.get(template)), template
    if template is not None:
        raise TypeError(
            f"template must be a catalog name, a response_template dict, a Template, 'auto' or None, "
            f"not {type(template).__name__}"
        )
    if model is None and chat_template is None and tokenizer_config is None:
        return None, None
    try:
        name = catalog.resolve_name(
            model=model, tokenizer_config=tokenizer_config, chat_template=chat_template
        )
        spec = catalog.resolve(model=model, tokenizer_config=tokenizer_config, chat_template=chat_template)
    except catalog.UnknownModelError as e:
        logger.info("chatparse.runtime: %s; parsing %s's output by detection", e, model or "the model")
        return None, None
    return load_response_template(spec), name
