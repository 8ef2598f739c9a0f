"""Render a model's chat template locally, in a jinja2 sandbox, exactly like ``transformers`` does.

``chatparse serve`` talks to engines' raw ``/v1/completions`` endpoints, so it renders the prompt
itself. The template comes from files found locally (a model folder, a single file, or the local
Hugging Face cache; nothing is ever downloaded) and the rendered prompt is byte-identical to
``tokenizer.apply_chat_template(..., tokenize=False)`` in ``transformers`` for the same template,
messages and variables:

* the same jinja2 configuration (``ImmutableSandboxedEnvironment`` with ``trim_blocks``,
  ``lstrip_blocks`` and the ``loopcontrols`` extension, the ``{% generation %}`` tag, the
  ``raise_exception`` and ``strftime_now`` globals, the restricted ``dict`` and ``namespace``
  globals and the ``tojson`` filter that does not escape HTML and accepts ``ensure_ascii``,
  ``indent``, ``separators`` and ``sort_keys``);
* the same template selection (named templates; ``tool_use`` when tools are given);
* the same template variables (``messages``, ``tools``, ``documents``, ``add_generation_prompt``,
  the tokenizer's special tokens, then the caller's extra variables).

Templates come from untrusted model repositories, so they never run outside the sandbox, every
failure (``raise_exception()``, undefined values, sandbox violations, Python errors inside the
template) becomes a `ChatTemplateError` naming the template file, and the output is capped at
`MAX_RENDERED_CHARS`. jinja2 is imported lazily: it comes with the ``server`` extra.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["MAX_RENDERED_CHARS", "ChatTemplate", "ChatTemplateError"]

#: Longest prompt `ChatTemplate.render` returns (in characters); longer output is an error.
MAX_RENDERED_CHARS = 4 * 1024 * 1024
# Longest string/list the template may build with `+` or `*` (so `'x' * 10**10` fails fast), and the
# biggest integer power it may compute, in bits.
_MAX_SEQUENCE = MAX_RENDERED_CHARS
_MAX_POW_BITS = 1 << 16

CHAT_TEMPLATE_FILE = "chat_template.jinja"
CHAT_TEMPLATE_DIR = "additional_chat_templates"
CHAT_TEMPLATE_JSON = "chat_template.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"

# `PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES`
_SPECIAL_TOKEN_ATTRIBUTES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
# Names a message's reasoning goes by; the order is the precedence when several are set.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
# Template variables `render` sets itself; extra variables cannot replace them.
_RESERVED_VARIABLES = frozenset(
    {"messages", "tools", "documents", "add_generation_prompt", "continue_final_message"}
)
_INSTALL_HINT = "pip install 'chatparse[server]'"
_MIN_JINJA = (3, 1, 6)
_TEMPLATE_FILENAME = "<template>"
_MODEL_ID_RE = re.compile(r"[A-Za-z0-9][\w.\-]*(?:/[\w.\-]+)?")


class ChatTemplateError(ValueError):
    """A chat template is missing, unreadable, invalid, or failed to render.

    The message names the file the template came from and what failed (the jinja message for
    syntax errors, ``raise_exception()`` calls, undefined values and sandbox violations).
    """


class _NoTemplateFound(ChatTemplateError):
    """A folder holds no chat template at all (`ChatTemplate.from_hf_cache` tries the next one)."""


# --------------------------------------------------------------------------------------------------
# jinja2 environment (configured like transformers' `_compile_jinja_template`)


@functools.lru_cache(maxsize=1)
def _jinja() -> Any:
    """Import jinja2, or fail with an install hint (it is an optional dependency)."""
    try:
        import jinja2
        import jinja2.ext
        import jinja2.nodes
        import jinja2.sandbox
        import jinja2.utils
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"rendering chat templates needs jinja2, which is not installed: {_INSTALL_HINT}"
        ) from exc
    version = tuple(int(part) for part in re.findall(r"\d+", jinja2.__version__)[:3])
    if version < _MIN_JINJA:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"rendering chat templates needs jinja2>=3.1.6 (older versions have known sandbox "
            f"escapes), found {jinja2.__version__}: pip install -U 'jinja2>=3.1.6'"
        )
    return jinja2


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    """The sandboxed environment every chat template is compiled in (built once)."""
    jinja2 = _jinja()
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
    from jinja2.utils import Namespace

    class GenerationTag(Extension):
        """``{% generation %}...{% endgeneration %}``: renders its body (transformers only uses the
        tag to compute assistant-token masks, which a prompt does not need)."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_generation_support")
            return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _generation_support(self, caller: Any) -> Any:
            return caller()

    class Environment(ImmutableSandboxedEnvironment):
        """transformers' environment, plus size checks on ``+``, ``*`` and ``**`` so that
        ``'x' * 10**10`` or ``10 ** 10**10`` fail at once instead of eating the server's memory or
        CPU. The results of these operators are unchanged."""

        intercepted_binops = frozenset({"+", "*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            sized = (str, list, tuple)
            if operator == "*":
                for seq, count in ((left, right), (right, left)):
                    if isinstance(seq, sized) and isinstance(count, int) and len(seq) * count > _MAX_SEQUENCE:
                        raise SecurityError(
                            f"the template repeats a sequence of length {len(seq)} {count} times "
                            f"(limit: {_MAX_SEQUENCE} items)"
                        )
            elif operator == "+":
                if (
                    isinstance(left, sized)
                    and isinstance(right, sized)
                    and len(left) + len(right) > _MAX_SEQUENCE
                ):
                    raise SecurityError(f"the template builds a sequence longer than {_MAX_SEQUENCE} items")
            elif (
                operator == "**"
                and isinstance(left, int)
                and isinstance(right, int)
                and right > 0
                and abs(left) > 1
                and right * (abs(left).bit_length() - 1) > _MAX_POW_BITS
            ):
                raise SecurityError(f"the template computes a power too large: {left} ** {right}")
            return self.binop_table[operator](left, right)

    def raise_exception(message: Any) -> Any:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: Any = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        # jinja's own filter escapes HTML characters; transformers' does not
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    class TemplateDict:
        """``dict`` for templates, without the attributes of the real type."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(Namespace):
        """``namespace`` for templates: no underscore-prefixed attributes."""

        def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - jinja's signature trick
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check_name(name)
            Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise SecurityError(
                    "chat templates cannot store underscore-prefixed attributes on a namespace, "
                    f"but got {name!r}"
                )

    env = Environment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


@functools.lru_cache(maxsize=64)
def _compile_cached(text: str) -> Any:
    return _environment().from_string(text)


def _compile(text: str, origin: str) -> Any:
    """Compile (once per distinct template text) or raise `ChatTemplateError` naming `origin`."""
    jinja2 = _jinja()
    try:
        return _compile_cached(text)
    except jinja2.TemplateSyntaxError as exc:
        raise ChatTemplateError(
            f"chat template {origin}: syntax error at line {exc.lineno}: {exc.message}"
        ) from exc
    except (jinja2.TemplateError, RecursionError, MemoryError) as exc:
        raise ChatTemplateError(f"chat template {origin}: cannot compile: {exc}") from exc


def _template_line(exc: BaseException) -> int | None:
    """The template line an exception was raised at (jinja rewrites tracebacks to point there)."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == _TEMPLATE_FILENAME:
            line = frame.lineno
    return line


def _render_compiled(template: Any, variables: dict[str, Any], origin: str) -> str:
    jinja2 = _jinja()
    pieces: list[str] = []
    size = 0
    try:
        for piece in template.generate(**variables):
            size += len(piece)
            if size > MAX_RENDERED_CHARS:
                raise ChatTemplateError(
                    f"chat template {origin}: the rendered prompt exceeds {MAX_RENDERED_CHARS} characters"
                )
            pieces.append(piece)
    except ChatTemplateError:
        raise
    except jinja2.TemplateError as exc:
        if isinstance(exc, jinja2.sandbox.SecurityError):
            what = "blocked by the sandbox"
        elif isinstance(exc, jinja2.UndefinedError):
            what = "undefined value"
        elif type(exc) is jinja2.TemplateError:
            what = "the template raised an error"  # raise_exception()
        else:
            what = type(exc).__name__
        raise ChatTemplateError(_render_error(origin, exc, what, exc.message)) from exc
    except Exception as exc:  # untrusted template code: Python errors are template errors too
        what = f"rendering failed with {type(exc).__name__}"
        raise ChatTemplateError(_render_error(origin, exc, what, str(exc))) from exc
    return "".join(pieces)


def _render_error(origin: str, exc: BaseException, what: str, message: Any) -> str:
    line = _template_line(exc)
    where = f" (line {line})" if line is not None else ""
    return f"chat template {origin}{where}: {what}: {message}"


# --------------------------------------------------------------------------------------------------
# Template data


def _plain(value: Any) -> Any:
    """A fresh copy of `value` made only of JSON-like types (transformers' `_plain_template_data`).

    The template only ever sees these, so caller objects (and their methods) never reach the
    sandbox, and the caller's data is never mutated.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return _plain(model_dump())
    return f"<{type(value).__name__}>"


def _plain_checked(value: Any, what: str) -> Any:
    try:
        return _plain(value)
    except RecursionError:
        raise ChatTemplateError(f"{what} is nested too deeply") from None


def _prepare_message(index: int, message: Any) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise ChatTemplateError(f"messages[{index}] must be an object, got {type(message).__name__}")
    # Keys set to None are dropped (as transformers does: many templates render "None" or crash on
    # a null value). An assistant message's missing or null `content` (OpenAI clients send
    # `content: null` next to `tool_calls`) becomes "" as in vLLM: templates that build
    # `message['content'] + ...` or test `message.content is string` need a string there.
    plain = _plain_checked(message, f"messages[{index}]")
    msg = {key: value for key, value in plain.items() if value is not None}
    if msg.get("role") == "assistant" and "content" not in msg:
        msg["content"] = ""

    content = msg.get("content")
    if isinstance(content, (list, tuple)):
        texts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text":
                shown = repr(kind) if kind is not None else "missing"
                raise ChatTemplateError(
                    f"messages[{index}].content[{j}].type: {shown}; only text content parts are supported"
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise ChatTemplateError(f"messages[{index}].content[{j}].text must be a string")
            texts.append(text)
        msg["content"] = "\n".join(texts)

    tool_calls = msg.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, str):
                try:
                    parsed = json.loads(arguments)
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    function["arguments"] = parsed  # type: ignore[index]

    reasoning = next((msg[key] for key in _REASONING_FIELDS if key in msg), None)
    if reasoning is not None:
        # Same key order as transformers' `_alias_reasoning_fields`, plus `reasoning`
        msg = {"thinking": reasoning, **msg}
        msg.setdefault("reasoning_content", reasoning)
        msg.setdefault("reasoning", reasoning)
    return msg


def _object_list(value: Any, name: str) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ChatTemplateError(f"{name} must be a list of objects, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise ChatTemplateError(f"{name}[{i}] must be an object, got {type(item).__name__}")
    result: list[Any] = _plain_checked(list(value), name)
    return result


# --------------------------------------------------------------------------------------------------
# Loading


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChatTemplateError(f"cannot read chat template file {path}: {exc}") from exc


def _read_json_object(path: Path) -> dict[str, Any]:
    text = _read_text(path)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ChatTemplateError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ChatTemplateError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _named_templates(value: Any, origin: str) -> dict[str, str]:
    """A ``chat_template`` value (a string, or a list of ``{"name", "template"}``) as a dict."""
    if isinstance(value, str):
        return {"default": value}
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, list):
        items = []
        for i, entry in enumerate(value):
            if not (isinstance(entry, Mapping) and "name" in entry and "template" in entry):
                raise ChatTemplateError(
                    f"{origin}: chat_template[{i}] must be an object with 'name' and 'template'"
                )
            items.append((entry["name"], entry["template"]))
    else:
        raise ChatTemplateError(
            f"{origin}: chat_template must be a string or a list of {{name, template}} objects, "
            f"got {type(value).__name__}"
        )
    templates: dict[str, str] = {}
    for name, template in items:
        if not isinstance(name, str) or not isinstance(template, str):
            raise ChatTemplateError(f"{origin}: chat template names and templates must be strings")
        templates[name] = template
    return templates


def _token_text(value: Any, *, any_dict: bool) -> str | None:
    """A special token's text: a string, or an AddedToken dict's ``content``.

    transformers only accepts ``{"__type": "AddedToken", ...}`` dicts for model-specific tokens
    (``image_token``...); for the standard ones (``any_dict``) any dict with a ``content`` is taken.
    """
    if isinstance(value, str):
        return value
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("content"), str)
        and (any_dict or value.get("__type") == "AddedToken")
    ):
        return str(value["content"])
    return None


def _special_tokens(config: Mapping[str, Any]) -> dict[str, str]:
    """The tokens transformers passes to templates (``tokenizer.special_tokens_map``).

    The standard ones (``bos_token``, ``eos_token``, ``unk_token``, ``sep_token``, ``pad_token``,
    ``cls_token``, ``mask_token``), then the model-specific ``*_token`` keys, then the entries of an
    ``extra_special_tokens`` object.
    """
    tokens: dict[str, str] = {}
    for key in _SPECIAL_TOKEN_ATTRIBUTES:
        text = _token_text(config.get(key), any_dict=True)
        if text is not None:
            tokens[key] = text
    for key, value in config.items():
        if isinstance(key, str) and key.endswith("_token") and key not in tokens:
            text = _token_text(value, any_dict=False)
            if text is not None:
                tokens[key] = text
    extra = config.get("extra_special_tokens")
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            text = _token_text(value, any_dict=False)
            if isinstance(key, str) and text is not None:
                tokens[key] = text
    return tokens


def _tokenizer_config(folder: Path) -> dict[str, Any]:
    """A folder's ``tokenizer_config.json`` (``{}`` if none), with the legacy
    ``special_tokens_map.json`` merged in the way transformers does: its entries win, unless the
    config has an ``added_tokens_decoder``."""
    path = folder / TOKENIZER_CONFIG_FILE
    config = _read_json_object(path) if path.is_file() else {}
    legacy = folder / SPECIAL_TOKENS_MAP_FILE
    if "added_tokens_decoder" not in config and legacy.is_file():
        config = {**config, **_read_json_object(legacy)}
    return config


def _has_template_files(folder: Path) -> bool:
    return any(
        (folder / name).exists()
        for name in (CHAT_TEMPLATE_FILE, CHAT_TEMPLATE_DIR, CHAT_TEMPLATE_JSON, TOKENIZER_CONFIG_FILE)
    )


def _hub_cache_dir() -> Path:
    """The Hugging Face hub cache, resolved like ``huggingface_hub.constants.HF_HUB_CACHE``."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()
    return base / "huggingface" / "hub"


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


class ChatTemplate:
    """A model's chat template, ready to render prompts like ``apply_chat_template`` does.

    Build one with `from_dir`, `from_file`, `from_hf_cache` or `find`, or directly from a template
    string (or a list of ``{"name", "template"}`` / a dict of named templates) and optionally the
    parsed ``tokenizer_config.json`` the special tokens are read from. All templates are compiled
    on construction, so syntax errors surface early.

    Attributes:
        source: where the default template came from (a file path, or ``"<string>"``).
        text: the source of the default template (for catalog sniffing).
        templates: every template by name (``"default"``, and e.g. ``"tool_use"``).
        template_sources: where each named template came from.
        bos_token / eos_token: the tokenizer's, or None.
        special_tokens: the special tokens passed to the template, as strings (``bos_token``,
            ``eos_token``, ``unk_token``, ``pad_token``..., and model-specific ``*_token`` ones).
        tokenizer_config: the parsed ``tokenizer_config.json`` (``{}`` if none).
    """

    source: str
    text: str
    templates: dict[str, str]
    template_sources: dict[str, str]
    bos_token: str | None
    eos_token: str | None
    special_tokens: dict[str, str]
    tokenizer_config: dict[str, Any]

    def __init__(
        self,
        chat_template: str | Mapping[str, str] | Sequence[Mapping[str, Any]],
        *,
        source: str = "<string>",
        tokenizer_config: Mapping[str, Any] | None = None,
        special_tokens: Mapping[str, Any] | None = None,
        template_sources: Mapping[str, str] | None = None,
    ) -> None:
        templates = _named_templates(chat_template, source)
        if "default" not in templates:
            raise ChatTemplateError(
                f"{source}: several chat templates ({', '.join(sorted(templates))}) and none named 'default'"
            )
        sources = {name: source if len(templates) == 1 else f"{source} [{name}]" for name in templates}
        sources.update(template_sources or {})
        self.templates = templates
        self.template_sources = {name: sources[name] for name in templates}
        self.source = self.template_sources["default"]
        self.text = templates["default"]
        self.tokenizer_config = dict(tokenizer_config or {})
        self.special_tokens = _special_tokens(
            self.tokenizer_config if special_tokens is None else special_tokens
        )
        self.bos_token = self.special_tokens.get("bos_token")
        self.eos_token = self.special_tokens.get("eos_token")
        for name, text in templates.items():
            _compile(text, self.template_sources[name])

    def spec(self) -> dict[str, Any]:
        """A JSON-serialisable description that `from_spec` turns back into an equal template
        (used to load the template in render worker processes). Sources are reduced to file
        names, so error messages do not show the server's directories."""
        return {
            "templates": dict(self.templates),
            "template_sources": {k: os.path.basename(v) or v for k, v in self.template_sources.items()},
            "special_tokens": dict(self.special_tokens),
            "tokenizer_config": self.tokenizer_config,
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> ChatTemplate:
        """The template `spec()` described."""
        sources = dict(spec["template_sources"])
        return cls(
            dict(spec["templates"]),
            source=sources.get("default", "<string>"),
            tokenizer_config=spec.get("tokenizer_config") or {},
            special_tokens=spec.get("special_tokens"),
            template_sources=sources,
        )

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.templates))
        return f"ChatTemplate(source={self.source!r}, templates=[{names}])"

    # -- loading ------------------------------------------------------------------------------------

    @classmethod
    def from_dir(cls, path: str | os.PathLike[str]) -> ChatTemplate:
        """Load the chat template of a model folder, in transformers' precedence order.

        1. ``chat_template.jinja`` (the default template) and ``additional_chat_templates/*.jinja``
           (named templates; the file name without ``.jinja`` is the name);
        2. else the ``chat_template`` of ``chat_template.json`` (older processor repos);
        3. else the ``chat_template`` of ``tokenizer_config.json`` (a string or a list of
           ``{"name", "template"}``).

        When the files of (1) have no default, it comes from (2) or (3). Special tokens always come
        from ``tokenizer_config.json`` (and a legacy ``special_tokens_map.json``).
        """
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ChatTemplateError(f"{folder}: not a folder")
        config = _tokenizer_config(folder)
        templates: dict[str, str] = {}
        sources: dict[str, str] = {}
        main = folder / CHAT_TEMPLATE_FILE
        if main.is_file():
            templates["default"] = _read_text(main)
            sources["default"] = str(main)
        extra_dir = folder / CHAT_TEMPLATE_DIR
        if extra_dir.is_dir():
            for file in sorted(extra_dir.glob("*.jinja")):
                name = file.name[: -len(".jinja")]
                templates[name] = _read_text(file)
                sources[name] = str(file)
        if "default" not in templates:
            legacy = folder / CHAT_TEMPLATE_JSON
            config_path = folder / TOKENIZER_CONFIG_FILE
            fallback: tuple[Any, Path] | None = None
            if legacy.is_file():
                data = _read_json_object(legacy)
                if "chat_template" not in data:
                    raise ChatTemplateError(f"{legacy}: no 'chat_template' key")
                fallback = (data["chat_template"], legacy)
            elif config.get("chat_template") is not None:
                fallback = (config["chat_template"], config_path)
            if fallback is not None:
                value, origin = fallback
                named = _named_templates(value, str(origin))
                for name, text in named.items():
                    if name not in templates:
                        templates[name] = text
                        sources[name] = str(origin) if len(named) == 1 else f"{origin} [{name}]"
        if not templates:
            note = (
                f" ({TOKENIZER_CONFIG_FILE} has no 'chat_template' key)"
                if (folder / TOKENIZER_CONFIG_FILE).is_file()
                else ""
            )
            raise _NoTemplateFound(
                f"no chat template in {folder}: looked for {CHAT_TEMPLATE_FILE}, "
                f"{CHAT_TEMPLATE_DIR}/*.jinja, {CHAT_TEMPLATE_JSON} and {TOKENIZER_CONFIG_FILE}{note}"
            )
        return cls(
            templates,
            source=sources.get("default", str(folder)),
            tokenizer_config=config,
            template_sources=sources,
        )

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ChatTemplate:
        """Load a chat template from one file.

        * ``*.json``: a ``tokenizer_config.json`` or a ``chat_template.json`` (its ``chat_template``
          key: a string or a list of ``{"name", "template"}``);
        * anything else (``*.jinja``): the template source itself.

        Special tokens come from the file when it is a tokenizer config, else from a
        ``tokenizer_config.json`` next to it, if there is one.
        """
        file = Path(path).expanduser()
        if not file.is_file():
            raise ChatTemplateError(f"{file}: no such file")
        sibling = file.parent / TOKENIZER_CONFIG_FILE
        if file.suffix.lower() == ".json":
            data = _read_json_object(file)
            if "chat_template" not in data:
                raise ChatTemplateError(f"{file}: no 'chat_template' key")
            if file.name == CHAT_TEMPLATE_JSON:
                config = _tokenizer_config(file.parent) if sibling.is_file() else {}
            else:
                config = data
            return cls(data["chat_template"], source=str(file), tokenizer_config=config)
        config = _tokenizer_config(file.parent) if sibling.is_file() else {}
        return cls(_read_text(file), source=str(file), tokenizer_config=config)

    @classmethod
    def from_hf_cache(cls, model_id: str, *, cache_dir: str | os.PathLike[str] | None = None) -> ChatTemplate:
        """Load a model's chat template from the local Hugging Face cache (never downloads).

        The cache is `cache_dir`, else ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
        ``~/.cache/huggingface/hub``, laid out as ``models--{org}--{name}/snapshots/<revision>/``.
        The revision named by ``refs/main`` is preferred, then the other snapshots, most recently
        modified first; the first one holding a chat template is loaded with `from_dir`.
        """
        if not _MODEL_ID_RE.fullmatch(model_id) or ".." in model_id or "--" in model_id:
            raise ChatTemplateError(f"{model_id!r} is not a Hugging Face model id (org/name)")
        root = Path(cache_dir).expanduser() if cache_dir is not None else _hub_cache_dir()
        repo = root / ("models--" + model_id.replace("/", "--"))
        snapshots = repo / "snapshots"
        candidates: list[Path] = []
        if snapshots.is_dir():
            main_ref = repo / "refs" / "main"
            preferred = None
            revision = _read_text(main_ref).strip() if main_ref.is_file() else ""
            if re.fullmatch(r"[\w.\-]+", revision) and revision not in (".", ".."):
                preferred = snapshots / revision
                if preferred.is_dir():
                    candidates.append(preferred)
            others = [p for p in snapshots.iterdir() if p.is_dir() and p != preferred]
            candidates += sorted(others, key=_mtime, reverse=True)
        for snapshot in candidates:
            if not _has_template_files(snapshot):
                continue
            try:
                return cls.from_dir(snapshot)
            except _NoTemplateFound:
                continue
        searched = ", ".join(str(p) for p in candidates) if candidates else f"{snapshots} (missing)"
        raise ChatTemplateError(
            f"no chat template for {model_id!r} in the local Hugging Face cache {root}; "
            f"searched: {searched}. chatparse never downloads: fetch it first "
            f"(`hf download {model_id}`) or pass a file or folder"
        )

    @classmethod
    def find(cls, ref: str, *, cache_dir: str | os.PathLike[str] | None = None) -> ChatTemplate:
        """Load from `ref`: a file (`from_file`), a folder (`from_dir`), or else a model id looked up
        in the local Hugging Face cache (`from_hf_cache`)."""
        path = Path(ref).expanduser()
        if path.is_file():
            return cls.from_file(path)
        if path.is_dir():
            return cls.from_dir(path)
        looks_like_path = (
            ref.startswith(("/", ".", "~"))
            or ref.count("/") > 1
            or (os.sep != "/" and os.sep in ref)
            or path.suffix.lower() in (".json", ".jinja")
        )
        if looks_like_path or not _MODEL_ID_RE.fullmatch(ref):
            raise ChatTemplateError(f"{ref!r}: no such file or folder, and not a Hugging Face model id")
        return cls.from_hf_cache(ref, cache_dir=cache_dir)

    # -- rendering ----------------------------------------------------------------------------------

    def template_name(self, tools: Any = None) -> str:
        """The named template `render` uses: ``tool_use`` if tools are given (even an empty list,
        like transformers) and there is one, else ``default``."""
        if tools is not None and "tool_use" in self.templates:
            return "tool_use"
        return "default"

    @staticmethod
    def prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Copy `messages` into what the template sees (the caller's list is never mutated).

        The rules, applied to every message, are those of transformers plus those of serving
        engines (vLLM):

        * keys whose value is None are dropped (transformers), and an assistant message without
          ``content`` (missing or null, as OpenAI clients send it next to ``tool_calls``) gets
          ``content: ""`` (vLLM);
        * reasoning aliases: a message with any of ``reasoning_content``, ``thinking`` or
          ``reasoning`` gets the missing ones set to the same value (Qwen3-style templates read
          ``reasoning_content``, gpt-oss ``thinking``); if several are set, the missing ones take
          the first of ``reasoning_content``, ``thinking``, ``reasoning``;
        * ``tool_calls[i].function.arguments`` given as a JSON string that parses to an object
          becomes that object (templates iterate ``arguments.items()`` or ``tojson`` it); anything
          else is left as is;
        * ``content`` given as a list of ``{"type": "text", "text": ...}`` parts becomes the texts
          joined with ``"\\n"``; any other part type is a `ChatTemplateError` naming
          ``messages[i].content[j].type``;
        * values are copied into plain JSON types (dicts, lists, strings, numbers...); other objects
          become ``"<TypeName>"`` placeholders, as in transformers.
        """
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise ChatTemplateError(f"messages must be a list of objects, got {type(messages).__name__}")
        if not messages:
            raise ChatTemplateError("cannot render a chat template for an empty conversation")
        return [_prepare_message(i, message) for i, message in enumerate(messages)]

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        /,
        *,
        tools: list[dict[str, Any]] | None = None,
        documents: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        enable_thinking: bool | None = None,
        **kwargs: Any,
    ) -> str:
        """Render the prompt for `messages`, as ``apply_chat_template(..., tokenize=False)`` would.

        Messages are prepared by `prepare_messages` (see its rules). The template is the one
        `template_name` picks, and it sees these variables:

        * ``messages``, ``tools`` and ``documents`` (None when not given, so ``tools is defined``
          holds, as in transformers), ``add_generation_prompt``;
        * the special tokens (``bos_token``, ``eos_token``...);
        * ``enable_thinking``, only when it is not None (so ``enable_thinking is defined`` checks in
          templates behave);
        * the extra keyword arguments (e.g. a request's ``chat_template_kwargs``), which may replace
          special tokens (as in transformers) but not the variables above: ``messages=`` or
          ``continue_final_message=`` (unsupported) among them is a `ChatTemplateError`.

        Raises `ChatTemplateError` for invalid input, and for any failure of the template
        (``raise_exception()``, undefined values, sandbox violations, errors inside the template,
        output longer than `MAX_RENDERED_CHARS`), naming the template file.
        """
        reserved = sorted(_RESERVED_VARIABLES.intersection(kwargs))
        if reserved:
            raise ChatTemplateError(
                f"template variable(s) {', '.join(reserved)} cannot be passed as extra variables"
            )
        name = self.template_name(tools)
        origin = self.template_sources[name]
        template = _compile(self.templates[name], origin)
        variables: dict[str, Any] = {**self.special_tokens, **_plain_checked(kwargs, "template variables")}
        if enable_thinking is not None:
            variables["enable_thinking"] = _plain(enable_thinking)
        variables.update(
            messages=self.prepare_messages(messages),
            tools=_object_list(tools, "tools"),
            documents=_object_list(documents, "documents"),
            add_generation_prompt=add_generation_prompt,
        )
        return _render_compiled(template, variables, origin)
