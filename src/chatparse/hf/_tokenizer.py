"""Tokenizer-level parsing with transformers 5.24.0's input rules, and the template lookup.

`parse_response` and `get_response_parser` take exactly what `PreTrainedTokenizerBase.parse_response`
/ `.get_response_parser` take (response-template.md §7.2-§7.3) and raise the same errors with the
same messages; the only difference is where the template comes from when the tokenizer has none
(`response_template_for`: the catalog, by the tokenizer's `name_or_path` and chat template).

Token ids of any shape (lists, numpy arrays, torch tensors) are handed to the tokenizer's own
`decode`, as transformers does, so this module never imports numpy or torch.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .._parser import ResponseParser
from .._parser import parse_response as _parse_text
from .._template import Template, load_response_template

# The reference's messages (transformers 5.24.0 tokenization_utils_base.py), verbatim.
NO_TEMPLATE_PARSE = "This tokenizer does not have a `response_template` for parsing chat responses!"
NO_TEMPLATE_STREAM = (
    "This tokenizer does not have a `response_template` set; cannot create a response event stream."
)
PREFIX_REQUIRED = (
    "`parse_response` requires `prefix=` (the prompt that came before generation), because chat "
    "templates often pre-write part of the assistant message (e.g. an opening `<think>` tag) that the "
    "parser must see to parse correctly. If you're sure you don't need the prefix, you can pass an "
    "empty string or list."
)
PREFIX_NOT_SINGLE = (
    "`prefix=` must be a single sequence (str, list[int], or 1D tensor) for `get_response_parser`."
)
NO_TOKENIZER = "Can't use parse_response on a processor class without a tokenizer!"


def batch_size_mismatch(n_responses: int, n_prefixes: int) -> str:
    """The reference's message for a batched prefix whose length differs from the responses'."""
    return (
        f"Got {n_responses} response(s) but {n_prefixes} prefix(es); `prefix` must be "
        "a single sequence (broadcast to every response), or one prefix per response."
    )


TemplateLike = dict | Template | str


# --------------------------------------------------------------------------------------------------
# tokenizers and processors


def _is_processor(obj: Any) -> bool:
    """A transformers `ProcessorMixin` (recognised by class name: transformers is not imported)."""
    return any(cls.__name__ == "ProcessorMixin" for cls in type(obj).__mro__)


def text_tokenizer(obj: Any) -> Any:
    """The tokenizer that decodes for `obj`: `obj` itself, or a processor's `tokenizer`."""
    if _is_processor(obj):
        tok = getattr(obj, "tokenizer", None)
        if tok is None:
            raise ValueError(NO_TOKENIZER)
        return tok
    return obj


def _chat_template_of(obj: Any) -> Any:
    for holder in (obj, getattr(obj, "tokenizer", None)):
        if holder is None:
            continue
        try:
            chat_template = getattr(holder, "chat_template", None)
        except Exception:  # noqa: BLE001 - a broken attribute must not hide the real error
            chat_template = None
        if chat_template:
            return chat_template
    return None


def _name_or_path(obj: Any) -> str:
    for holder in (obj, getattr(obj, "tokenizer", None)):
        name = getattr(holder, "name_or_path", None) if holder is not None else None
        if isinstance(name, str) and name:
            return name
    return ""


# --------------------------------------------------------------------------------------------------
# template lookup


class _Lookup:
    """What the catalog said for one tokenizer: a catalog name, or the reason there is none."""

    __slots__ = ("key", "name", "hint")

    def __init__(self, key: tuple[Any, ...], name: str | None, hint: str) -> None:
        self.key = key
        self.name = name
        self.hint = hint


_LOOKUPS: weakref.WeakKeyDictionary[Any, _Lookup] = weakref.WeakKeyDictionary()


def _own_template(obj: Any) -> Any:
    tok = getattr(obj, "tokenizer", None) if _is_processor(obj) else obj
    return getattr(tok, "response_template", None) if tok is not None else None


def _catalog_lookup(obj: Any) -> _Lookup:
    """The catalog entry for `obj` by its chat template, then `name_or_path` (cached per object)."""
    from .. import catalog

    name_or_path = _name_or_path(obj)
    chat_template = _chat_template_of(obj)
    key = (name_or_path, id(chat_template), chat_template if isinstance(chat_template, str) else None)
    try:
        cached = _LOOKUPS.get(obj)
    except TypeError:  # not weak-referenceable / unhashable: no cache
        cached = None
    if cached is not None and cached.key == key:
        return cached
    found: str | None = None
    hint = ""
    if name_or_path or chat_template:
        try:
            found = catalog.resolve_name(model=name_or_path or None, chat_template=chat_template)
        except catalog.UnknownModelError as exc:
            candidates = ", ".join(exc.candidates[:8]) or "none"
            tried = []
            if name_or_path:
                tried.append(f"name_or_path {name_or_path!r}")
            if chat_template:
                tried.append("its chat template")
            hint = (
                f"chatparse: no catalog template matches {' or '.join(tried)} (closest: {candidates}); "
                "pass response_template= (a dict or a name from chatparse.catalog.names()) or set "
                "tokenizer.response_template."
            )
    else:
        hint = (
            "chatparse: the tokenizer has no name_or_path and no chat template to look up in the catalog; "
            "pass response_template= (a dict or a name from chatparse.catalog.names()) or set "
            "tokenizer.response_template."
        )
    result = _Lookup(key, found, hint)
    with contextlib.suppress(TypeError):
        _LOOKUPS[obj] = result
    return result


def catalog_name_for(obj: Any) -> str | None:
    """The catalog entry that matches a tokenizer or processor, or `None`.

    The tokenizer's chat template (a processor's own, else its tokenizer's) is recognised by the
    catalog's markers first, then its `name_or_path` is matched against the model-id rules
    (`chatparse.catalog.resolve`'s order).
    """
    return _catalog_lookup(obj).name


def response_template_for(obj: Any, *, catalog: bool = True) -> dict | None:
    """The `response_template` that chatparse uses for a tokenizer or processor, or `None`.

    The tokenizer's own `response_template` first; otherwise (with `catalog=True`) the catalog entry
    matched by the tokenizer's chat template, then by its `name_or_path` (a fresh copy, reasoning in
    `reasoning_content`).

    >>> from chatparse.hf import response_template_for
    >>> class Tok:  # any object with the tokenizer's attributes
    ...     name_or_path, chat_template, response_template = "Qwen/Qwen3-8B", None, None
    >>> response_template_for(Tok())["start_anchor"]
    '<|im_start|>assistant\\n'
    """
    own = _own_template(obj)
    if own is not None:
        return own
    if not catalog:
        return None
    name = _catalog_lookup(obj).name
    if name is None:
        return None
    from .. import catalog as _catalog

    return _catalog.get(name)


def _missing(obj: Any, message: str, catalog: bool) -> AttributeError:
    if not catalog:
        hint = (
            "chatparse: the catalog lookup is off (catalog=False); pass response_template= (a dict or a "
            "name from chatparse.catalog.names()) or set tokenizer.response_template."
        )
    else:
        hint = _catalog_lookup(obj).hint
    return AttributeError(f"{message}\n{hint}")


def resolve_template(obj: Any, template: Any, *, catalog: bool, message: str) -> Any:
    """`template` (a dict, a `Template` or a catalog name), else the tokenizer's, else the catalog's.

    Raises the reference's `AttributeError` (`message`) plus one line of help when there is none.
    """
    if template is None:
        own = _own_template(obj)
        if own is not None:
            return own
        if catalog:
            name = _catalog_lookup(obj).name
            if name is not None:
                return _catalog_template(name)
        raise _missing(obj, message, catalog)
    if isinstance(template, str):
        return _catalog_template(template)
    return template


@functools.lru_cache(maxsize=64)
def _catalog_template(name: str) -> Template:
    from .. import catalog

    return catalog.load(name)


# --------------------------------------------------------------------------------------------------
# the input rules of transformers 5.24.0 (response-template.md §7.2)


def _texts(tok: Any, value: Any) -> tuple[list[str], bool]:
    """`(texts, batched)` for a response: a str, a batch of str, or token ids decoded by `tok`."""
    if isinstance(value, str):
        return [value], False
    if isinstance(value, (list, tuple)) and (not value or isinstance(value[0], str)):
        return list(value), True
    decoded = tok.decode(value)
    if isinstance(decoded, str):
        return [decoded], False
    return list(decoded), True


def _prefix_texts(tok: Any, prefix: Any) -> tuple[list[str], bool]:
    if isinstance(prefix, str):
        return [prefix], False
    if isinstance(prefix, (list, tuple)) and not prefix:
        return [""], False  # the explicit opt-out, broadcast
    if isinstance(prefix, (list, tuple)) and isinstance(prefix[0], str):
        return list(prefix), True
    decoded = tok.decode(prefix)
    if isinstance(decoded, str):
        return [decoded], False
    return list(decoded), True


def texts_and_prefixes(tok: Any, response: Any, prefix: Any) -> tuple[list[str], list[str], bool]:
    """The response texts, one prefix per text (a single prefix is broadcast), and whether it is a batch."""
    if prefix is None:
        raise ValueError(PREFIX_REQUIRED)
    responses, batched = _texts(tok, response)
    prefix_texts, prefix_batched = _prefix_texts(tok, prefix)
    if not prefix_batched:
        prefixes = prefix_texts * len(responses)
    elif len(prefix_texts) != len(responses):
        raise ValueError(batch_size_mismatch(len(responses), len(prefix_texts)))
    else:
        prefixes = prefix_texts
    return responses, prefixes, batched


def parse_response(
    tokenizer: Any,
    response: Any,
    *,
    prefix: Any = None,
    tools: Sequence[dict | Callable] | None = None,
    response_template: TemplateLike | None = None,
    catalog: bool = True,
) -> dict | list[dict]:
    """Parse generated text or token ids into a message, as `tokenizer.parse_response` does.

    Drop-in for transformers 5.24.0's `tokenizer.parse_response(response, response_template,
    prefix=..., tools=...)`, with chatparse's parser (linear time, the documented fixes):

    * `response`: a string; a list of strings (a batch); token ids as a list, a list of lists,
      a 1-D/2-D numpy array or torch tensor, decoded by the tokenizer with special tokens kept. A
      single sequence returns a message dict, a batch a list of them (`[]` gives `[]`).
    * `prefix` (required; `""` or `[]` to opt out): the prompt, in the same shapes. A single prefix
      is broadcast over a batch; a batch of prefixes must match the responses one to one.
    * `tools`: tool definitions as `apply_chat_template` takes them; tool-call arguments are
      coerced to their declared JSON-schema types.
    * `response_template`: a dict, a compiled `chatparse.Template` or a catalog name. Default: the
      tokenizer's own `response_template`, else (unless `catalog=False`) the catalog entry matched by
      the tokenizer's `name_or_path` and chat template (`response_template_for`).

    `tokenizer` may also be a processor (its `tokenizer` decodes). Errors are the reference's:
    `AttributeError` when there is no template (plus one line saying what to pass), `ValueError`
    for a missing prefix, mismatched batch sizes, or output that cannot be parsed.

    >>> from chatparse.hf import parse_response
    >>> class Tok:
    ...     name_or_path, chat_template, response_template = "Qwen/Qwen3-8B", None, None
    >>> parse_response(Tok(), "<think>hm</think>Hi<|im_end|>", prefix="<|im_start|>assistant\\n")
    {'role': 'assistant', 'reasoning_content': 'hm', 'content': 'Hi'}
    """
    tok = text_tokenizer(tokenizer)
    template = resolve_template(tokenizer, response_template, catalog=catalog, message=NO_TEMPLATE_PARSE)
    if prefix is None:
        raise ValueError(PREFIX_REQUIRED)
    responses, prefixes, batched = texts_and_prefixes(tok, response, prefix)
    tool_list = list(tools) if tools is not None else None
    if len(responses) > 1:
        template = load_response_template(template)  # validate and compile once for the batch
    parsed = [
        _parse_text(text, template, prefix=pfx, tools=tool_list) for text, pfx in zip(responses, prefixes)
    ]
    return parsed if batched else parsed[0]


def get_response_parser(
    tokenizer: Any,
    *,
    prefix: Any = None,
    tools: Sequence[dict | Callable] | None = None,
    response_template: TemplateLike | None = None,
    catalog: bool = True,
) -> ResponseParser:
    """A streaming `chatparse.ResponseParser`, as `tokenizer.get_response_parser` builds one.

    The template is found as in `parse_response`. A non-string `prefix` (token ids, a 1-D array or
    tensor) is decoded with special tokens kept; a batch raises the reference's `ValueError`, and
    `prefix=None` the parser's (pass `""` to opt out).

    >>> from chatparse.hf import get_response_parser
    >>> class Tok:
    ...     name_or_path, chat_template, response_template = "Qwen/Qwen3-8B", None, None
    >>> p = get_response_parser(Tok(), prefix="<|im_start|>assistant\\n")
    >>> _ = p.feed("Hi<|im_end|>")
    >>> p.finalize()[0]
    {'role': 'assistant', 'content': 'Hi'}
    """
    template = resolve_template(tokenizer, response_template, catalog=catalog, message=NO_TEMPLATE_STREAM)
    if prefix is not None and not isinstance(prefix, str):
        prefix = text_tokenizer(tokenizer).decode(prefix)
        if not isinstance(prefix, str):
            raise ValueError(PREFIX_NOT_SINGLE)
    return ResponseParser(template, prefix=prefix, tools=list(tools) if tools is not None else None)
