"""`install` / `uninstall`: chatparse inside existing tokenizers, processors and pipelines.

Installing sets a few instance attributes (never the class, so other objects are unaffected) and
remembers what was there before; `uninstall` puts exactly that back, so nothing is left behind:

* tokenizer: `parse_response`, `get_response_parser` (chatparse, transformers' signatures) and
  `apply_chat_template` (the history goes through `prepare_history` first); a missing
  `response_template` is filled from the catalog (`fill=False` to opt out);
* processor: the same on the processor and on its `tokenizer`;
* text-generation pipeline: its tokenizer as above, and `postprocess`, so that a chat input returns
  the conversation with the parsed assistant message, while every other input (plain strings,
  `continue_final_message`, `return_full_text=False`, `return_tensors=True`) returns what it
  returned before the install.

The installed callables pickle and deep-copy with their object (they hold it, not a closure).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import _tokenizer as T

_STATE = "_chatparse_installation"
_MISSING = object()


@dataclass
class Installation:
    """What `install` did to one object (returned by `install`, and by `installation(obj)`).

    `kind` is `"tokenizer"`, `"processor"` or `"pipeline"`; `template_source` is `"own"` (the
    tokenizer had a `response_template`), `"catalog:<name>"` (filled from the catalog) or `None`
    (none found: parsing raises the reference's error with a hint, unless a template is passed).
    """

    kind: str
    template_source: str | None
    catalog: bool
    saved: dict[str, Any] = field(default_factory=dict, repr=False)
    children: list[Any] = field(default_factory=list, repr=False)

    @property
    def filled(self) -> bool:
        """True when `install` set the tokenizer's `response_template` from the catalog."""
        return bool(self.template_source and self.template_source.startswith("catalog:"))


class _Installed:
    """A callable stored on an object in place of one of its methods (pickles with the object)."""

    __slots__ = ("__self__", "_kind")

    def __init__(self, owner: Any, kind: str) -> None:
        self.__self__ = owner
        self._kind = kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _IMPLEMENTATIONS[self._kind](self.__self__, *args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Installed, (self.__self__, self._kind))

    def __repr__(self) -> str:
        return f"<chatparse {self._kind.split('.')[-1]} of {type(self.__self__).__name__}>"

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return _IMPLEMENTATIONS[self._kind].__doc__

    @property
    def __wrapped__(self) -> Any:
        return getattr(type(self.__self__), self._kind.split(".")[-1], None)


def installation(obj: Any) -> Installation | None:
    """The `Installation` of `obj`, or `None` when chatparse is not installed in it."""
    try:
        state = vars(obj).get(_STATE)
    except TypeError:
        return None
    return state if isinstance(state, Installation) else None


def is_installed(obj: Any) -> bool:
    """Whether `install(obj)` is in effect."""
    return installation(obj) is not None


def _original(obj: Any, name: str) -> Callable[..., Any]:
    """The callable `name` of `obj` as it was before install (instance attribute, else the class's)."""
    state = installation(obj)
    saved = state.saved.get(name, _MISSING) if state is not None else _MISSING
    if saved is not _MISSING:
        return saved  # type: ignore[return-value]
    return getattr(type(obj), name).__get__(obj, type(obj))


def _set(obj: Any, state: Installation, name: str, value: Any) -> None:
    d = vars(obj)
    if name not in state.saved:
        state.saved[name] = d.get(name, _MISSING)
    d[name] = value


# --------------------------------------------------------------------------------------------------
# the installed methods


def _catalog_flag(obj: Any) -> bool:
    state = installation(obj)
    return state.catalog if state is not None else True


def _tok_parse_response(
    tok: Any, response: Any, schema: Any = None, *, prefix: Any = None, tools: Any = None
) -> Any:
    """chatparse's `parse_response` (see `chatparse.hf.parse_response`), transformers' signature."""
    return T.parse_response(
        tok, response, prefix=prefix, tools=tools, response_template=schema, catalog=_catalog_flag(tok)
    )


def _tok_get_response_parser(
    tok: Any, response_template: Any = None, *, prefix: Any = None, tools: Any = None
) -> Any:
    """chatparse's `get_response_parser` (see `chatparse.hf.get_response_parser`)."""
    return T.get_response_parser(
        tok, prefix=prefix, tools=tools, response_template=response_template, catalog=_catalog_flag(tok)
    )


def _tok_apply_chat_template(obj: Any, conversation: Any, *args: Any, **kwargs: Any) -> Any:
    """`apply_chat_template` with the history prepared by `chatparse.hf.prepare_history` first."""
    from ._history import render_prepared

    original = _original(obj, "apply_chat_template")
    return render_prepared(original, getattr(obj, "chat_template", None), conversation, args, kwargs)


def _pipe_postprocess(pipe: Any, model_outputs: Any, **params: Any) -> Any:
    """The pipeline's `postprocess`: a chat input gets the parsed assistant message."""
    from transformers.pipelines.text_generation import ReturnType
    from transformers.utils.chat_template_utils import Chat

    original = _original(pipe, "postprocess")
    state = installation(pipe)
    tok = pipe.tokenizer
    return_type = params.get("return_type")
    if return_type is None:
        return_type = ReturnType.FULL_TEXT
    prompt = model_outputs["prompt_text"]
    is_chat = isinstance(prompt, Chat)
    continue_final = params.get("continue_final_message")
    if continue_final is None:
        continue_final = is_chat and prompt.messages[-1]["role"] == "assistant"
    template = getattr(tok, "response_template", None)
    if template is None and state is not None and state.catalog:
        template = T.response_template_for(pipe.tokenizer)
    parse = is_chat and return_type == ReturnType.FULL_TEXT and not continue_final and template is not None
    if return_type == ReturnType.TENSORS or template is None or not (parse or _filled(tok)):
        return original(model_outputs, **params)
    cleanup = params.get("clean_up_tokenization_spaces")
    base = {k: v for k, v in params.items() if k not in ("return_type", "skip_special_tokens")}
    records = original(model_outputs, **{**base, "return_type": ReturnType.TENSORS})
    input_ids = model_outputs["input_ids"]
    n_prompt = 0 if input_ids is None else int(input_ids.shape[-1])
    skip = params.get("skip_special_tokens")
    skip = False if parse else (True if skip is None else skip)
    out = []
    for record in records:
        rest = dict(record)
        sequence = rest.pop("generated_token_ids")
        text = tok.decode(sequence[n_prompt:], skip_special_tokens=skip, clean_up_tokenization_spaces=cleanup)
        generated: Any
        if parse:
            prefix = tok.decode(
                sequence[:n_prompt], skip_special_tokens=skip, clean_up_tokenization_spaces=cleanup
            )
            message = T.parse_response(
                tok, text, prefix=prefix, tools=params.get("tools"), response_template=template
            )
            generated = [*prompt.messages, message]
        elif return_type != ReturnType.FULL_TEXT:
            generated = text
        elif isinstance(prompt, str):
            generated = prompt + text
        elif continue_final:
            last = prompt.messages[-1]
            generated = [*prompt.messages[:-1], {"role": last["role"], "content": last["content"] + text}]
        else:  # pragma: no cover - a chat that is neither parsed nor continued is handled above
            generated = text
        out.append({"generated_text": generated, **rest})
    return out


def _filled(tok: Any) -> bool:
    state = installation(tok)
    return state is not None and state.filled


_IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "tokenizer.parse_response": _tok_parse_response,
    "tokenizer.get_response_parser": _tok_get_response_parser,
    "tokenizer.apply_chat_template": _tok_apply_chat_template,
    "processor.parse_response": _tok_parse_response,
    "processor.get_response_parser": _tok_get_response_parser,
    "processor.apply_chat_template": _tok_apply_chat_template,
    "pipeline.postprocess": _pipe_postprocess,
}


# --------------------------------------------------------------------------------------------------
# install / uninstall


def _kind(obj: Any) -> str:
    names = {cls.__name__ for cls in type(obj).__mro__}
    if "Pipeline" in names:
        if "TextGenerationPipeline" in names:
            return "pipeline"
        raise TypeError(
            f"install() supports text-generation pipelines, not {type(obj).__name__}; "
            "install into its tokenizer or processor instead (chatparse.hf.install(pipe.tokenizer))"
        )
    if "ProcessorMixin" in names:
        return "processor"
    if "PreTrainedTokenizerBase" in names or (hasattr(obj, "decode") and hasattr(obj, "parse_response")):
        return "tokenizer"
    raise TypeError(
        f"install() takes a transformers tokenizer, processor or text-generation pipeline, "
        f"not {type(obj).__name__}"
    )


def _install_tokenizer(tok: Any, kind: str, fill: bool, catalog: bool, lookup_obj: Any) -> Installation:
    own = getattr(tok if kind == "tokenizer" else tok.tokenizer, "response_template", None)
    state = Installation(kind=kind, template_source="own" if own is not None else None, catalog=catalog)
    vars(tok)[_STATE] = state
    try:
        for name in ("parse_response", "get_response_parser", "apply_chat_template"):
            if hasattr(type(tok), name):
                _set(tok, state, name, _Installed(tok, f"{kind}.{name}"))
        if kind == "tokenizer" and own is None and fill and catalog:
            entry = T.catalog_name_for(lookup_obj)
            if entry is not None:
                from .. import catalog as _catalog

                _set(tok, state, "response_template", _catalog.get(entry))
                state.template_source = f"catalog:{entry}"
    except BaseException:
        _restore(tok, state)
        raise
    return state


def install(obj: Any, *, fill: bool = True, catalog: bool = True) -> Installation:
    """Make a tokenizer, processor or text-generation pipeline parse with chatparse.

    From then on `obj.parse_response(...)` and `obj.get_response_parser(...)` are chatparse's (same
    signatures, inputs and errors as transformers 5.24.0; linear-time, with the documented fixes),
    `obj.apply_chat_template(...)` accepts parsed history (`prepare_history`), and a pipeline's chat
    output is `[*messages, parsed assistant message]` with tools given to the call used for argument
    coercion. A tokenizer without a `response_template` gets the catalog's (found by `name_or_path`,
    then the chat template) unless `fill=False`; `catalog=False` turns every catalog lookup off.
    While filled, `save_pretrained` writes that template into `tokenizer_config.json`.

    Installing twice is a no-op; `uninstall(obj)` restores everything.

    >>> from chatparse.hf import install, uninstall
    >>> class Tokenizer:  # stands in for a transformers tokenizer here
    ...     name_or_path, chat_template, response_template = "Qwen/Qwen3-8B", None, None
    ...     def decode(self, ids): raise NotImplementedError
    ...     def parse_response(self, *a, **k): raise NotImplementedError("transformers' own")
    >>> tok = Tokenizer()
    >>> install(tok).template_source
    'catalog:qwen3'
    >>> tok.parse_response("Hi<|im_end|>", prefix="<|im_start|>assistant\\n")
    {'role': 'assistant', 'content': 'Hi'}
    >>> uninstall(tok), vars(tok)
    (True, {})
    """
    existing = installation(obj)
    if existing is not None:
        return existing
    kind = _kind(obj)
    if kind == "tokenizer":
        return _install_tokenizer(obj, "tokenizer", fill, catalog, obj)
    if kind == "processor":
        tok = T.text_tokenizer(obj)
        children: list[Any] = []
        if installation(tok) is None:
            _install_tokenizer(tok, "tokenizer", fill, catalog, obj)
            children.append(tok)
        state = _install_tokenizer(obj, "processor", fill, catalog, obj)
        state.children = children
        state.template_source = installation(tok).template_source  # type: ignore[union-attr]
        return state
    tok = getattr(obj, "tokenizer", None)
    if tok is None:
        raise TypeError(f"{type(obj).__name__} has no tokenizer to install chatparse into")
    children = []
    if installation(tok) is None:
        _install_tokenizer(tok, "tokenizer", fill, catalog, tok)
        children.append(tok)
    tok_state = installation(tok)
    assert tok_state is not None
    state = Installation(kind="pipeline", template_source=tok_state.template_source, catalog=catalog)
    vars(obj)[_STATE] = state
    _set(obj, state, "postprocess", _Installed(obj, "pipeline.postprocess"))
    state.children = children
    return state


def _restore(obj: Any, state: Installation) -> None:
    d = vars(obj)
    for name, value in state.saved.items():
        if value is _MISSING:
            d.pop(name, None)
        else:
            d[name] = value
    d.pop(_STATE, None)


def uninstall(obj: Any) -> bool:
    """Undo `install(obj)` exactly (and the install into its tokenizer, if `install` did that).

    Returns `False` when chatparse was not installed in `obj`.
    """
    state = installation(obj)
    if state is None:
        return False
    _restore(obj, state)
    for child in state.children:
        uninstall(child)
    return True
