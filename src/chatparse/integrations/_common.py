"""What the vLLM and SGLang plugins share: template resolution, policies, `tool_choice`, finish reasons.

Theory of operation
-------------------
An engine creates one parser object per request (and, on vLLM's engine core, one reasoning parser
per structured-output request). Everything here is either a pure function of its arguments or a
cache of immutable derived data (compiled templates keyed by the tokenizer object and environment,
and what a plugin derives from a template once instead of per request, `Resolved.memo`); nothing
here holds request state, so the plugins work the same in every process an engine starts.

Template resolution (`resolve`), first match wins:

1. `CHATPARSE_TEMPLATE_OVERRIDE` (a catalog name or a JSON file): for fine-tunes whose catalog
   guess is wrong;
2. the tokenizer's own `response_template` (attribute, or `init_kwargs` from
   `tokenizer_config.json`), used as-is;
3. the catalog, by model id (the tokenizer's `name_or_path`, or the engine's model name), then by
   the tokenizer's chat template;
4. `CHATPARSE_TEMPLATE` (a catalog name or a JSON file holding a template or a
   `tokenizer_config.json` with a `response_template`).

When none applies, `TemplateNotFound` says so in one line, with what to set.

Policies (`Policy.from_env`), chatparse's defaults first, the engine's convention as the switch:

* `CHATPARSE_STREAM_TOOL_CALLS=complete|early`: send each call once it is complete (default), or
  announce it at its opener (see `chatparse.openai.ChatParser`);
* `CHATPARSE_UNKNOWN_TOOLS=surface|drop`: return calls to tools the request did not offer
  (default), or drop them (SGLang's convention; `SGLANG_FORWARD_UNKNOWN_TOOLS` is not read);
* `CHATPARSE_REASONING_KEY=both|reasoning_content|reasoning` (vLLM only): the key of reasoning in
  stream deltas. SGLang's server always names it `reasoning_content`; vLLM's server builds the
  non-streamed message itself and always names it `reasoning`, so the vLLM default is `both`;
* `CHATPARSE_CALL_IDS=chatparse|engine` (vLLM only): `call_<24 alphanumerics>` (default) or
  vLLM's own `chatcmpl-tool-...` ids. SGLang's server mints call ids itself.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._template import Template, load_response_template
from ..openai._resolve import without_fields
from ..tools import ToolTable, build_tool_table

ENV_TEMPLATE = "CHATPARSE_TEMPLATE"
ENV_TEMPLATE_OVERRIDE = "CHATPARSE_TEMPLATE_OVERRIDE"
ENV_STREAM_TOOL_CALLS = "CHATPARSE_STREAM_TOOL_CALLS"
ENV_UNKNOWN_TOOLS = "CHATPARSE_UNKNOWN_TOOLS"
ENV_REASONING_KEY = "CHATPARSE_REASONING_KEY"
ENV_CALL_IDS = "CHATPARSE_CALL_IDS"
_ENV_KEYS = (
    ENV_TEMPLATE,
    ENV_TEMPLATE_OVERRIDE,
    ENV_STREAM_TOOL_CALLS,
    ENV_UNKNOWN_TOOLS,
    ENV_REASONING_KEY,
    ENV_CALL_IDS,
)

#: Field names the OpenAI layer reads as reasoning (`chatparse.openai.ChatParser`'s mapping).
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
TOOL_FIELD = "tool_calls"

PARSER_NAME = "chatparse"


class IntegrationError(ValueError):
    """A plugin cannot start with this tokenizer or environment; the message is one line."""


class TemplateNotFound(IntegrationError):
    """No response template applies to the served model."""


# --------------------------------------------------------------------------------------------------
# the end of an output

_log = logging.getLogger("chatparse.integrations")


def finish_output(parser: Any, reason: str, engine: str, *, report: bool = True) -> Any:
    """`parser.finish(reason)` (a `chatparse.openai.ChatParser`), with one warning line when the
    output held regions that are not returned (malformed calls, calls cut off or dropped by policy),
    as the engines' own parsers warn when they drop a call: the client only sees them missing."""
    out = parser.finish(reason)
    info = out[0].get("chatparse") if report and isinstance(out[0], dict) else None
    if info:
        _warn_unreturned(engine, info.get("errors") or (), info.get("dropped") or ())
    return out


def finish_deltas(parser: Any, reason: str, engine: str) -> list[dict[str, Any]]:
    """The last deltas of `parser` (a template-mode `chatparse.openai.ChatParser`) and the same
    warning as `finish_output`, without building the message (SGLang's detectors return only
    deltas; the message cost about a microsecond per request)."""
    deltas: list[dict[str, Any]] = parser._end_stream(reason)
    errors, dropped = parser._unreturned()
    if errors or dropped:
        _warn_unreturned(engine, errors, dropped)
    return deltas


def _warn_unreturned(engine: str, errors: Sequence[Any], dropped: Sequence[Any]) -> None:
    if not errors and not dropped:
        return
    first = str(errors[0].get("error", "")).splitlines()[0][:160] if errors else ""
    _log.warning(
        "chatparse (%s): not returned: %d malformed region(s), %d dropped call(s)%s",
        engine,
        len(errors),
        len(dropped),
        f" (first: {first})" if first else "",
    )


def delimiter_literal(d: Any, tokenizer: Any) -> str | None:
    """The text an engine should tokenize for a reasoning delimiter: its first literal; for a
    pattern delimiter (DeepSeek DSML's and R1-Distill's `^\\s*<think>`), the shortest of the
    tokenizer's added tokens the pattern matches whole (the marker the model writes as one token),
    else None."""
    if d is None:
        return None
    if d.literals:
        return str(d.literals[0])
    # `get_added_vocab` builds a dictionary of every added token: asked per request (SGLang makes
    # a reasoning detector per request), that cost ~40 us. Remembered per tokenizer object and
    # vocabulary size (tokens added later give a new answer).
    try:
        known = _LITERALS.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no cache
        known = {}
    try:
        size: Any = len(tokenizer)
    except Exception:
        size = None
    key = (d.source, size)
    if key in known:
        return known[key]
    try:
        added = tokenizer.get_added_vocab()
    except Exception:
        return None
    hits = sorted((t for t in added if t and d.module_re.fullmatch(t)), key=lambda t: (len(t), t))
    found = known[key] = hits[0] if hits else None
    return found


_LITERALS: weakref.WeakKeyDictionary[Any, dict[tuple[str, Any], str | None]] = weakref.WeakKeyDictionary()


# --------------------------------------------------------------------------------------------------
# call ids


def no_call_id() -> str:
    """The id a plugin gives a call when the engine mints its own (SGLang): never sent."""
    return "call"


# --------------------------------------------------------------------------------------------------
# policies


def _choice(env: Mapping[str, str], key: str, allowed: Sequence[str], default: str) -> str:
    value = env.get(key, "").strip().lower()
    if not value:
        return default
    if value not in allowed:
        raise IntegrationError(f"chatparse: {key}={value!r} is not one of {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class Policy:
    """How a plugin turns parsed regions into the engine's deltas (see the module docstring)."""

    stream_tool_calls: str = "complete"
    unknown_tools: str = "surface"
    reasoning_key: str = "reasoning_content"
    call_ids: str = "chatparse"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, engine: str) -> Policy:
        """The policy the environment selects for `engine` (`"vllm"` or `"sglang"`).

        >>> Policy.from_env({}, engine="vllm").reasoning_key
        'both'
        >>> Policy.from_env({"CHATPARSE_UNKNOWN_TOOLS": "drop"}, engine="sglang").unknown_tools
        'drop'
        """
        env = os.environ if env is None else env
        return cls(
            stream_tool_calls=_choice(env, ENV_STREAM_TOOL_CALLS, ("complete", "early"), "complete"),
            unknown_tools=_choice(env, ENV_UNKNOWN_TOOLS, ("surface", "drop"), "surface"),
            reasoning_key=(
                _choice(env, ENV_REASONING_KEY, ("both", "reasoning_content", "reasoning"), "both")
                if engine == "vllm"
                else "reasoning_content"
            ),
            call_ids=_choice(env, ENV_CALL_IDS, ("chatparse", "engine"), "chatparse"),
        )


# --------------------------------------------------------------------------------------------------
# templates


def _without(spec: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return without_fields(spec, names)


@dataclass(frozen=True)
class Resolved:
    """The template a plugin parses with, and where it came from (for the startup log line)."""

    spec: dict[str, Any]
    name: str
    """A catalog name, a file path, or `"tokenizer response_template"`."""
    source: str
    """`override`, `tokenizer`, `catalog (model id)`, `catalog (chat template)` or `environment`."""
    stop: tuple[str, ...] = ()
    """End-of-turn markers from the catalog entry (used to recognise a stop token id)."""
    policies: dict[str, Policy] = field(default_factory=dict, compare=False)
    """`Policy.from_env` per engine, read from the same environment as the template."""
    _variants: dict[tuple[bool, bool], Template | None] = field(
        default_factory=dict, repr=False, compare=False
    )
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """What a plugin derives from the template once instead of per request (by the plugin's key)."""

    @property
    def template(self) -> Template:
        """The whole template, compiled."""
        found = self.variant(reasoning=True, tools=True)
        assert found is not None
        return found

    # Asked per request by every parser the engines create; the spec never changes.
    @functools.cached_property
    def reasoning_field(self) -> str | None:
        fields = self.spec.get("fields") or {}
        return next((n for n in REASONING_FIELDS if n in fields), None)

    @functools.cached_property
    def has_tools(self) -> bool:
        return TOOL_FIELD in (self.spec.get("fields") or {})

    def variant(self, *, reasoning: bool, tools: bool) -> Template | None:
        """The template with its reasoning and/or tool-call fields left out, compiled once.

        A field left out is not parsed: its markup stays in the content, verbatim (vLLM's and
        SGLang's convention when no reasoning parser is selected, or for `tool_choice="none"`).
        `None` when the template does not load without the field (e.g. reasoning is its implicit
        field); the caller then routes that field to content instead.
        """
        key = (reasoning, tools)
        if key not in self._variants:
            drop = [] if reasoning else list(REASONING_FIELDS)
            if not tools:
                drop.append(TOOL_FIELD)
            spec = _without(self.spec, drop)
            try:
                self._variants[key] = load_response_template(spec)
            except ValueError:
                if reasoning and tools:
                    raise
                self._variants[key] = None
        return self._variants[key]


def tokenizer_response_template(tokenizer: Any) -> dict[str, Any] | None:
    """The tokenizer's own `response_template` (attribute or `init_kwargs`), or None."""
    if tokenizer is None:
        return None
    for source in (tokenizer, getattr(tokenizer, "tokenizer", None)):
        if source is None:
            continue
        try:
            found = getattr(source, "response_template", None)
        except Exception:  # a wrapper that proxies attribute access and fails
            found = None
        if isinstance(found, dict):
            return found
        init_kwargs = getattr(source, "init_kwargs", None)
        if isinstance(init_kwargs, Mapping) and isinstance(init_kwargs.get("response_template"), dict):
            return dict(init_kwargs["response_template"])
    return None


def tokenizer_model_id(tokenizer: Any) -> str | None:
    for source in (tokenizer, getattr(tokenizer, "tokenizer", None)):
        name = getattr(source, "name_or_path", None) if source is not None else None
        if isinstance(name, str) and name:
            return name
    return None


def tokenizer_chat_template(tokenizer: Any) -> Any:
    for source in (tokenizer, getattr(tokenizer, "tokenizer", None)):
        if source is None:
            continue
        try:
            found = getattr(source, "chat_template", None)
        except Exception:
            found = None
        if found:
            return found
    return None


def _from_env_value(key: str, value: str) -> tuple[dict[str, Any], str]:
    from .. import catalog

    if os.path.exists(value):
        try:
            with open(value, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise IntegrationError(f"chatparse: {key}={value}: cannot read a JSON template: {e}") from e
        if isinstance(data, dict) and isinstance(data.get("response_template"), dict):
            data = data["response_template"]
        if not isinstance(data, dict):
            raise IntegrationError(f"chatparse: {key}={value}: expected a JSON object (a response_template)")
        return data, value
    try:
        return catalog.get(value), value
    except catalog.UnknownTemplateError as e:
        raise IntegrationError(
            f"chatparse: {key}={value!r} is neither a file nor a catalog template; "
            f"catalog templates: {', '.join(catalog.names())}"
        ) from e


def _catalog_stop(name: str) -> tuple[str, ...]:
    from .. import catalog

    try:
        stop = catalog.describe(name).get("stop") or ()
    except (KeyError, ValueError):
        return ()
    return tuple(s for s in stop if isinstance(s, str) and s)


def _resolve(tokenizer: Any, model: str | None, env: Mapping[str, str]) -> Resolved:
    from .. import catalog

    policies = {engine: Policy.from_env(env, engine=engine) for engine in ("vllm", "sglang")}

    def finish(spec: dict[str, Any], name: str, source: str) -> Resolved:
        resolved = Resolved(spec, name, source, _catalog_stop(name), policies)
        try:
            resolved.template  # noqa: B018 - validate and compile now, not on the first request
        except ValueError as e:
            raise IntegrationError(f"chatparse: template {name} ({source}) is invalid: {e}") from e
        return resolved

    override = env.get(ENV_TEMPLATE_OVERRIDE, "").strip()
    if override:
        spec, name = _from_env_value(ENV_TEMPLATE_OVERRIDE, override)
        return finish(spec, name, "override")
    own = tokenizer_response_template(tokenizer)
    if own is not None:
        return finish(own, "tokenizer response_template", "tokenizer")
    tried: list[str] = []
    for model_id in dict.fromkeys(m for m in (tokenizer_model_id(tokenizer), model) if m):
        tried.append(f"model id {model_id!r}")
        by_model = catalog.match_model(model_id)
        if by_model is not None:
            return finish(catalog.get(by_model), by_model, "catalog (model id)")
    chat_template = tokenizer_chat_template(tokenizer)
    if chat_template:
        tried.append("its chat template")
        by_chat = catalog.match_chat_template(chat_template)
        if by_chat is not None:
            return finish(catalog.get(by_chat), by_chat, "catalog (chat template)")
    fallback = env.get(ENV_TEMPLATE, "").strip()
    if fallback:
        spec, name = _from_env_value(ENV_TEMPLATE, fallback)
        return finish(spec, name, "environment")
    raise TemplateNotFound(
        "chatparse: no response template for this model: the tokenizer has no response_template and "
        f"the catalog matches neither {' nor '.join(tried) or 'a model id nor a chat template'}; "
        f"set {ENV_TEMPLATE} to a catalog name ({', '.join(catalog.names()[:6])}, ...; "
        "`chatparse templates list`) or to a JSON file"
    )


_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Resolved]] = weakref.WeakKeyDictionary()
_CACHE_KEYS = 8  # environments remembered per tokenizer (one in a server; tests and benchmarks switch)


_ENV_KEYS_RAW = tuple(os.fsencode(k) for k in _ENV_KEYS) if os.name != "nt" else ()


def _env_key(env: Mapping[str, str]) -> tuple[Any, ...]:
    """The values of the variables that select a template and policies: the cache key of `resolve`.

    Read from `os.environ`'s own (encoded) mapping when that is what is asked, which every
    `os.environ` assignment updates: `os.environ.get` encodes each name first, 7 names ~20 µs
    per request under load, twice per SGLang request."""
    data = getattr(env, "_data", None) if env is os.environ else None
    if isinstance(data, dict) and _ENV_KEYS_RAW:
        return tuple(map(data.get, _ENV_KEYS_RAW))
    return tuple(env.get(k) for k in _ENV_KEYS)


def resolve(tokenizer: Any, *, model: str | None = None, env: Mapping[str, str] | None = None) -> Resolved:
    """The template for `tokenizer` (see the module docstring). Raises `IntegrationError`.

    The result is cached per tokenizer object and environment (a few environments each, so a
    process that switches templates by environment, as tests and benchmarks do, keeps them all),
    so per-request parser construction costs a dictionary lookup.
    """
    env = os.environ if env is None else env
    key = (model, *_env_key(env))
    try:
        known = _CACHE.get(tokenizer)
    except TypeError:  # not weak-referenceable
        known = None
    if known is not None:
        hit = known.get(key)
        if hit is not None:
            return hit
    resolved = _resolve(tokenizer, model, env)
    if known is None:
        known = {}
        with contextlib.suppress(TypeError):  # not weak-referenceable: no cache
            _CACHE[tokenizer] = known
    if len(known) >= _CACHE_KEYS:
        known.clear()
    known[key] = resolved
    return resolved


def describe(resolved: Resolved, engine: str) -> str:
    """The one startup line: which template, from where."""
    return f"chatparse ({engine}): response template {resolved.name!r} from {resolved.source}"


# --------------------------------------------------------------------------------------------------
# requests


def tool_dicts(tools: Sequence[Any] | None) -> list[dict[str, Any]]:
    """The request's tools as plain dicts in the Chat Completions shape (pydantic models dumped)."""
    out: list[dict[str, Any]] = []
    for tool in tools or ():
        fast = _function_tool(tool)
        if fast is not None:
            out.append(fast)
            continue
        if hasattr(tool, "model_dump"):
            tool = tool.model_dump(exclude_none=True)
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append(tool)
        elif tool.get("type") == "function" and isinstance(tool.get("name"), str):  # Responses API
            out.append({"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}})
    return out


def parser_tools(tools: Sequence[Any] | None) -> list[dict[str, Any]]:
    """The request's tools as a parser reads them (`chatparse.tools.build_tool_table`): bare
    function dicts with the name and the parameters schema only, read from the attributes of the
    engines' pydantic tools (a request's parser needs nothing else from them, and each further
    attribute costs a little on every request); other shapes as `tool_dicts` gives them."""
    out: list[dict[str, Any]] = []
    for tool in tools or ():
        read = _engine_function(tool)
        if read is None:
            out.extend(tool_dicts((tool,)))
        else:
            name, params = read
            out.append({"name": name, "parameters": params} if params is not None else {"name": name})
    return out


def _engine_function(tool: Any) -> tuple[str, dict[str, Any] | None] | None:
    """The name and parameters schema of one of the engines' pydantic tools (read from its
    attributes), or None for any other shape (`tool_dicts` reads those)."""
    fn = None if isinstance(tool, dict) else getattr(tool, "function", None)
    if fn is not None and not isinstance(fn, dict) and hasattr(tool, "model_dump"):
        name = getattr(fn, "name", None)
        params = getattr(fn, "parameters", None)
        if isinstance(name, str) and (params is None or isinstance(params, dict)):
            return name, params
    return None


def parser_tool_table(tools: Sequence[Any] | None) -> ToolTable | None:
    """`build_tool_table(parser_tools(tools))`, None when it is empty (the request offers no tool
    a parser reads), built in one pass: the properties schema of each of the engines' pydantic
    tools goes straight into the table, without the intermediate dicts (other shapes as
    `parser_tools` gives them). A parser takes the table as it is (`ChatParser(tools=table)`)."""
    table = ToolTable()
    for tool in tools or ():
        # `_engine_function`, inlined (a request's every tool, on every request)
        fn = None if isinstance(tool, dict) else getattr(tool, "function", None)
        if fn is not None and not isinstance(fn, dict) and hasattr(tool, "model_dump"):
            name = getattr(fn, "name", None)
            params = getattr(fn, "parameters", None)
            if isinstance(name, str):
                if params is None:
                    table[name] = {}
                    continue
                if isinstance(params, dict):
                    properties = params.get("properties")
                    table[name] = properties if isinstance(properties, dict) else {}
                    continue
        table.update(build_tool_table(tool_dicts((tool,))))
    return table or None


_FUNCTION_KEYS = ("name", "description", "parameters", "strict")


def _function_tool(tool: Any) -> dict[str, Any] | None:
    """A pydantic Chat Completions tool (vLLM's `ChatCompletionToolsParam`, SGLang's `Tool`) as a
    dict, read from its attributes: what the parser uses (name, description, parameters schema)
    without pydantic's serializer, which costs more than a short request's parsing. None for
    anything else (plain dicts, Responses API tools, unexpected shapes: `model_dump` handles them)."""
    if isinstance(tool, dict) or not hasattr(tool, "model_dump"):
        return None
    fn = getattr(tool, "function", None)
    if fn is None or isinstance(fn, dict) or not isinstance(getattr(fn, "name", None), str):
        return None
    params = getattr(fn, "parameters", None)
    if params is not None and not isinstance(params, dict):
        return None
    body = {k: v for k in _FUNCTION_KEYS if (v := getattr(fn, k, None)) is not None}
    return {"type": getattr(tool, "type", None) or "function", "function": body}


def tool_choice_mode(tool_choice: Any) -> str:
    """`none`, `auto`, `required` or `named` for any engine's `tool_choice` value (None is `auto`)."""
    if tool_choice is None or tool_choice == "auto":
        return "auto"
    if tool_choice in ("none", "required"):
        return str(tool_choice)
    return "named"


class ToolChoiceError(ValueError):
    """A request's `tool_choice` cannot be guaranteed with this template (answered 400).

    `parameter` is the request field at fault (`tool_choice`, or `tools` for a schema keyword)."""

    def __init__(self, message: str, parameter: str = "tool_choice") -> None:
        super().__init__(message)
        self.parameter = parameter


def forces_tool_calls(tool_choice: Any, tools: Sequence[Any] | None) -> bool:
    """Whether a request asks for at least one call (`required` or a named tool) among offered tools."""
    return bool(tools) and tool_choice_mode(tool_choice) in ("required", "named")


def _choice_dict(tool_choice: Any) -> Any:
    """`tool_choice` as `chatparse.constraints.derive` reads it (engines pass pydantic models)."""
    if isinstance(tool_choice, str) or tool_choice is None:
        return tool_choice or "auto"
    if isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else tool_choice.get("name")
    else:
        fn = getattr(tool_choice, "function", None)
        name = getattr(fn, "name", None) if fn is not None else getattr(tool_choice, "name", None)
    return {"type": "function", "function": {"name": name}}


def tool_constraint(
    resolved: Resolved,
    template: Template,
    tool_choice: Any,
    tools: Sequence[Any] | None,
    *,
    parallel_tool_calls: bool | None = True,
    prefix: str | None = None,
    reasoning: bool | None = None,
) -> Any:
    """The `chatparse.constraints.Constraint` that makes `tool_choice` hold, or None when the request
    needs none (`auto`, `none`, no tools).

    The single place where `tool_choice="required"` and named choices are decided for both plugins.
    `template` is the one the plugin parses this request with (so whatever the constraint admits,
    the plugin reads back into calls); `prefix` the rendered prompt where the engine knows it
    (a `<think>` the prompt opened is continued); `reasoning`: False when the engine applies the
    grammar only after the reasoning (SGLang with a reasoning parser), None when it may come first.
    The catalog entry's end-of-turn markers are never written (the engine stops on them).
    Derivations are cached by `chatparse.constraints.derive` (same template object, tools and
    options: one derivation per process).

    Raises `ToolChoiceError` naming the template and the field or schema keyword that cannot be
    expressed (each engine answers it with its own 400).
    """
    if not forces_tool_calls(tool_choice, tools):
        return None
    from ..constraints import ConstraintError, derive

    mode = tool_choice_mode(tool_choice)
    choice = _choice_dict(tool_choice)
    what = (
        "tool_choice='required'"
        if mode == "required"
        else f"tool_choice naming {choice['function']['name']!r}"
    )
    try:
        return derive(
            template,
            tool_dicts(tools),
            tool_choice=choice,
            parallel_tool_calls=parallel_tool_calls is not False,
            reasoning=reasoning,
            prefix=prefix,
            stop=list(resolved.stop),
        )
    except ConstraintError as e:
        parameter = "tools" if str(e).startswith(("tool '", "tools[")) else "tool_choice"
        raise ToolChoiceError(
            f"the chatparse parser cannot guarantee {what} with response template {resolved.name}: {e}",
            parameter,
        ) from None


# --------------------------------------------------------------------------------------------------
# finish reasons


def stop_token_ids(tokenizer: Any, resolved: Resolved, extra: Sequence[int] | None = ()) -> frozenset[int]:
    """Token ids whose appearance at the end of an output means the model stopped by itself.

    The tokenizer's EOS id, the catalog entry's end-of-turn markers when each is one token, and the
    request's own `stop_token_ids`.
    """
    base = _base_stop_ids(tokenizer, resolved)
    if not extra:
        return base
    return base | {int(i) for i in extra if isinstance(i, int)}


_STOP_IDS: weakref.WeakKeyDictionary[Any, tuple[Resolved, frozenset[int]]] = weakref.WeakKeyDictionary()


def _base_stop_ids(tokenizer: Any, resolved: Resolved) -> frozenset[int]:
    """EOS and the catalog's end-of-turn ids, once per tokenizer and template (every request asks)."""
    try:
        hit = _STOP_IDS.get(tokenizer)
    except TypeError:  # not weak-referenceable
        hit = None
    if hit is not None and hit[0] is resolved:
        return hit[1]
    ids: set[int] = set()
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(i) for i in eos if isinstance(i, int))
    for text in resolved.stop:
        try:
            found = tokenizer.convert_tokens_to_ids(text)
        except Exception:
            continue
        unk = getattr(tokenizer, "unk_token_id", None)
        if isinstance(found, int) and found >= 0 and found != unk:
            ids.add(found)
    out = frozenset(ids)
    with contextlib.suppress(TypeError):
        _STOP_IDS[tokenizer] = (resolved, out)
    return out


def recover_finish_reason(
    *,
    last_ids: Sequence[int],
    generated: int,
    stop_ids: frozenset[int],
    max_tokens: int | None,
    prompt_tokens: int | None = None,
    max_model_len: int | None = None,
) -> str:
    """`"stop"` or `"length"` for an output whose engine did not say which.

    A stop token id in the final delta means the model stopped; otherwise reaching `max_tokens`
    (or the model's context length) means it was cut off; anything else is a stop string or an
    unknown cause and counts as `"stop"`.

    >>> recover_finish_reason(last_ids=[7], generated=16, stop_ids=frozenset({2}), max_tokens=16)
    'length'
    >>> recover_finish_reason(last_ids=[7, 2], generated=16, stop_ids=frozenset({2}), max_tokens=16)
    'stop'
    """
    if last_ids and last_ids[-1] in stop_ids:
        return "stop"
    if max_tokens is not None and max_tokens > 0 and generated >= max_tokens:
        return "length"
    if max_model_len and prompt_tokens is not None and prompt_tokens + generated >= max_model_len:
        return "length"
    return "stop"


# --------------------------------------------------------------------------------------------------
# per-step results


def _slot_setter(cls: Any, name: str) -> Any:
    """`setter(obj, value)` for the instance slot `name` of `cls`: the slot's own descriptor
    (`object.__setattr__` finds it through the MRO on every call, a third of a step's result)."""
    for klass in cls.__mro__:
        d = klass.__dict__.get(name)
        if d is not None:
            setter = getattr(d, "__set__", None)
            if setter is not None:
                return setter
            break
    put = object.__setattr__
    return lambda obj, value: put(obj, name, value)


def prebuilt(cls: Any, sample: Mapping[str, str]) -> Any:
    """A constructor for `cls(**values)` (a pydantic v2 model of the engine) that skips validation,
    for exactly the string fields named in `sample` and string values: the results the plugins
    build on nearly every step (a content or reasoning delta). Validating them costs 1-4 µs a step,
    more than the plugin's own work for the step; pydantic's `model_construct` costs more still.

    The instance gets what validation would give it: the defaults of a model built from `sample`,
    a fresh empty list for each list default, the given values (in the extra slot for a key the
    model keeps as an extra), and the same fields-set and private slot, each stored through its
    slot's descriptor. It is checked once here against `cls(**values)` for values other than
    `sample`'s (equality, `model_dump`, `model_fields_set`); when anything differs (another
    pydantic, a model with validators that change strings), `cls` itself is returned, so a caller
    never gets a wrong object, only a slower one.
    """
    try:
        proto = cls(**sample)
        base = dict(proto.__dict__)
        lists = tuple(k for k, v in base.items() if isinstance(v, list) and not v and k not in sample)
        extra = proto.__pydantic_extra__
        extra_keys = frozenset(k for k in sample if extra is not None and k in extra)
        if proto.__pydantic_private__ is not None or set(sample) - extra_keys - set(base):
            return cls
        new = object.__new__
        set_dict = _slot_setter(cls, "__dict__")
        set_fields = _slot_setter(cls, "__pydantic_fields_set__")
        set_extra = _slot_setter(cls, "__pydantic_extra__")
        set_private = _slot_setter(cls, "__pydantic_private__")

        def build(**values: str) -> Any:
            obj = new(cls)
            state = base.copy()
            more: dict[str, Any] | None
            if extra_keys:
                more = dict(extra)
                for k, v in values.items():
                    if k in extra_keys:
                        more[k] = v
                    else:
                        state[k] = v
            else:
                more = None if extra is None else dict(extra)
                state.update(values)
            for k in lists:
                state[k] = []
            set_dict(obj, state)
            set_fields(obj, set(values))
            set_extra(obj, more)
            set_private(obj, None)
            return obj

        other = {k: v + "\u00e9 " for k, v in sample.items()}
        probe, want = build(**other), cls(**other)
        if (
            type(probe) is type(want)
            and probe == want
            and probe.model_dump() == want.model_dump()
            and probe.model_fields_set == want.model_fields_set
            and all(getattr(probe, k) == v for k, v in other.items())
        ):
            return build
    except Exception:  # not a pydantic v2 model as expected: validate
        pass
    return cls
