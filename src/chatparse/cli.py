"""Command-line interface: ``chatparse parse``, ``chatparse stream``, ``chatparse templates ...``.

``parse`` and ``stream`` take the template from a file (``--template``) or from the catalog
(``--model ID``, resolved with :func:`chatparse.catalog.resolve`); ``templates list`` / ``show``
browse the catalog and ``templates validate`` checks a template file, optionally against sample
outputs.

Exit status: 0 on success, 1 when the model output cannot be parsed (a content parser, transform or
required-field error, or a malformed region while streaming), 2 for usage errors (bad arguments, a
missing or unreadable file, invalid JSON, an invalid ``response_template``).  Errors are printed as one
line, ``chatparse: error: ...``, on stderr; never as a traceback.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import os
import sys
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

PROG = "chatparse"
SHAPES = ("hf", "openai")
"""Output shapes of ``parse`` and ``stream`` (``--shape``)."""
_STDIN = "-"
_READ_SIZE = 65536
_MAX_MESSAGE = 2000


class CliError(Exception):
    """An error reported as ``chatparse: error: <message>`` with exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


class _ArgumentParser(argparse.ArgumentParser):
    """argparse parser whose errors are one line (``chatparse: error: ...``) and raise instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')", 2)


# --------------------------------------------------------------------------------------------------
# helpers


def _one_line(text: str) -> str:
    """Collapse a possibly multi-line message to one line, truncating very long ones."""
    line = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    if len(line) > _MAX_MESSAGE:
        line = line[:_MAX_MESSAGE] + " ... (truncated)"
    return line


def _describe(exc: BaseException) -> str:
    """``ExceptionType: message`` on one line (``KeyError`` without the extra quotes)."""
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        message = str(exc.args[0])
    else:
        message = str(exc)
    name = type(exc).__name__
    return f"{name}: {_one_line(message)}" if message else name


def _display(path: str) -> str:
    return "<stdin>" if path == _STDIN else path


def _read_text(path: str, what: str) -> str:
    """Read a whole file (or stdin for ``-``) as UTF-8, exactly: no newline translation."""
    try:
        if path == _STDIN:
            data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
            return data.decode("utf-8") if isinstance(data, bytes) else data
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except FileNotFoundError:
        raise CliError(f"{_display(path)}: {what} not found") from None
    except IsADirectoryError:
        raise CliError(f"{_display(path)}: {what} is a directory") from None
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{_display(path)}: {what} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise CliError(f"{_display(path)}: cannot read {what}: {exc.strerror or exc}") from None


def _read_json(path: str, what: str) -> Any:
    text = _read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{_display(path)}: invalid JSON in {what}: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None


def _report_warnings(path: str, caught: list[warnings.WarningMessage]) -> None:
    for item in caught:
        print(f"{PROG}: warning: {path}: {_one_line(str(item.message))}", file=sys.stderr)


def _template_data(path: str) -> Any:
    """The JSON of a template file, or the catalog entry named ``path`` when no such file exists."""
    from chatparse import catalog

    if path != _STDIN and not os.path.exists(path) and path in catalog.names():
        return catalog.entry(path)
    try:
        return _read_json(path, "template file")
    except CliError as exc:
        if path == _STDIN or os.path.exists(path):
            raise
        raise CliError(f"{exc} (nor a catalog template name: see 'chatparse templates list')") from None


def _template_spec(path: str) -> tuple[Any, bool]:
    """Read a template file: the template itself, or a tokenizer_config.json-style object with a
    ``response_template`` key, or a catalog entry (file, or catalog name).  Returns
    ``(spec, from_tokenizer_config)``."""
    data = _template_data(path)
    if isinstance(data, dict) and isinstance(data.get("template"), dict) and "fields" not in data:
        return data["template"], False  # a catalog entry file (metadata around the template)
    if isinstance(data, dict) and "response_template" in data and "fields" not in data:
        spec = data["response_template"]
        if spec is None:
            raise CliError(f"{path}: 'response_template' is null (this tokenizer has no response template)")
        return spec, True
    if (
        isinstance(data, dict)
        and "fields" not in data
        and ("chat_template" in data or "tokenizer_class" in data)
    ):
        raise CliError(f"{path}: tokenizer_config.json-style file without a 'response_template' key")
    return data, False


def _load_template(path: str) -> tuple[Any, Any, bool]:
    """Load and validate a template file: ``(compiled, spec, from_tokenizer_config)``; exit status 2 on error."""
    from chatparse import load_response_template

    spec, nested = _template_spec(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            compiled = load_response_template(spec)
        except (ValueError, TypeError) as exc:
            raise CliError(f"{path}: invalid response_template: {_one_line(str(exc))}") from None
    _report_warnings(path, caught)
    return compiled, spec, nested


def _load_prefix(args: argparse.Namespace, default: str = "") -> str:
    if args.prefix_file is not None:
        if args.prefix_file == _STDIN:
            raise CliError("--prefix-file cannot be '-' (stdin is reserved for the model output)")
        return _read_text(args.prefix_file, "prefix file")
    return args.prefix if args.prefix is not None else default


def _catalog_entry(name: str) -> dict[str, Any]:
    from chatparse import catalog

    try:
        return catalog.entry(name)
    except catalog.UnknownTemplateError as exc:
        raise CliError(str(exc)) from None


def _resolve_model(model: str) -> tuple[Any, str]:
    """The compiled catalog template for ``model`` (a model id, or a catalog name) and the entry's
    generation prompt."""
    from chatparse import catalog, load_response_template

    try:
        name = model if model in catalog.names() else catalog.resolve_name(model=model)
    except catalog.UnknownModelError as exc:
        raise CliError(_one_line(str(exc))) from None
    assert name is not None
    entry = catalog.entry(name)
    return load_response_template(entry["template"]), entry["generation_prompt"]


def _template_and_prefix(args: argparse.Namespace) -> tuple[Any, str]:
    """``(compiled template, prefix)`` from ``--template`` or ``--model``; with ``--model`` and no
    ``--prefix``/``--prefix-file`` the catalog entry's generation prompt is the prefix."""
    if args.model is not None:
        template, generation_prompt = _resolve_model(args.model)
        prefix = _load_prefix(args, generation_prompt)
    else:
        template, _, _ = _load_template(args.template)
        prefix = _load_prefix(args)
    _warn_missing_anchor(template, prefix, f"--model {args.model}" if args.model else _display(args.template))
    return template, prefix


def _warn_missing_anchor(template: Any, prefix: str, label: str) -> None:
    """One line on stderr when the prefix holds none of the template's start anchors (issue 10 item 14)."""
    from chatparse.openai._resolve import missing_anchor_message

    message = missing_anchor_message(template, prefix, f"the template of {label}")
    if message is not None:
        print(f"{PROG}: warning: {_one_line(message)}", file=sys.stderr)


def _load_tools(path: str | None) -> list[Any] | None:
    if path is None:
        return None
    data = _read_json(path, "tools file")
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise CliError(
            f"{path}: tools file must contain a JSON list of tools (or an object with a 'tools' list), "
            f"got {type(data).__name__}"
        )
    return data


def _json_default(obj: Any) -> Any:
    if isinstance(obj, BaseException):
        return {"type": type(obj).__name__, "message": str(obj)}
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return repr(obj)


def _write_json(obj: Any, *, indent: int | None = None) -> None:
    """Print ``obj`` as JSON (non-ASCII kept; escaped only if stdout cannot encode it) and flush."""
    try:
        text = json.dumps(obj, ensure_ascii=False, indent=indent, default=_json_default)
        sys.stdout.write(text + "\n")
    except UnicodeEncodeError:
        sys.stdout.write(json.dumps(obj, ensure_ascii=True, indent=indent, default=_json_default) + "\n")
    sys.stdout.flush()


def _event_json(event: Mapping[str, object]) -> dict[str, object]:
    """A JSON-serialisable copy of an event (the ``error`` exception becomes ``{"type", "message"}``)."""
    out = dict(event)
    error = out.get("error")
    if isinstance(error, BaseException):
        out["error"] = {"type": type(error).__name__, "message": str(error)}
    return out


def _prefix_options(parser: argparse.ArgumentParser) -> None:
    prefix = parser.add_mutually_exclusive_group()
    prefix.add_argument(
        "--prefix",
        metavar="TEXT",
        help="the rendered chat prompt that preceded the generation (it is cut after the template's "
        "start anchor; it matters when the prompt pre-writes e.g. '<think>'). Default: '' (no prefix)",
    )
    prefix.add_argument(
        "--prefix-file",
        metavar="FILE",
        help="read the prefix from FILE (exact bytes, UTF-8; use this for prompts with newlines)",
    )


def _common_options(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--template",
        "-t",
        metavar="FILE",
        help="response_template JSON file: the template itself, a tokenizer_config.json-style "
        "object with a 'response_template' key, or a catalog entry file; or a catalog template "
        "name (e.g. qwen3: the template only, no prefix; --model NAME also applies the entry's "
        "generation prompt)",
    )
    source.add_argument(
        "--model",
        "-m",
        metavar="ID",
        help="take the template from the catalog for this model id (e.g. Qwen/Qwen3-8B, "
        "unsloth/Qwen3-8B-GGUF) or a catalog name (e.g. mistral_v11_call_id); without --prefix the catalog's generation prompt is the prefix",
    )
    source.add_argument(
        "--auto",
        action="store_true",
        help="no template: detect reasoning and tool calls with chatparse.detect (recognizers for "
        "every major family; marker-free call shapes only when the whole output has the shape or the "
        "callee is an offered tool); the message carries a 'chatparse' report (recognizer, candidates "
        "that were not calls)",
    )
    _prefix_options(parser)
    parser.add_argument(
        "--tools",
        metavar="FILE",
        help="JSON file with the tool definitions (OpenAI format, a list or an object with a 'tools' "
        "list); tool-call arguments are coerced to the declared parameter types",
    )
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default="hf",
        help="hf (default): messages as transformers' parse_response returns them (arguments as JSON "
        "objects, no ids) and, for stream, region events; openai: Chat Completions messages (ids, "
        "arguments as JSON text, a 'chatparse' report) and, for stream, choices[0].delta objects. "
        "The same for a template and for --auto",
    )
    parser.add_argument(
        "output",
        metavar="OUTPUT_FILE",
        help="raw model output to parse (UTF-8, read exactly; note that a trailing newline after the "
        "end-of-turn marker is text too), or '-' for stdin",
    )


# --------------------------------------------------------------------------------------------------
# subcommands


def _auto_prefix(args: argparse.Namespace) -> str | None:
    return _load_prefix(args) if (args.prefix is not None or args.prefix_file is not None) else None


def to_hf_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A Chat Completions message (``--auto``) in the hf shape (``chatparse.openai._wire.to_hf_message``)."""
    from chatparse.openai._wire import to_hf_message as convert

    return convert(dict(message))


def _report_errors(where: str, message: Mapping[str, Any]) -> int:
    """Exit status of an OpenAI-shaped template-mode answer: 1 (with one stderr line) when a region
    could not be parsed, as ``parse_response`` would have raised; the message is printed anyway."""
    errors = (message.get("chatparse") or {}).get("errors") or []
    if not errors:
        return 0
    first = errors[0]
    print(
        f"{PROG}: error: {where}: {len(errors)} malformed region(s); first: field '{first.get('field')}': "
        f"{_one_line(str(first.get('error')))}",
        file=sys.stderr,
    )
    return 1


def _cmd_parse_jsonl(args: argparse.Namespace) -> int:
    """``parse --jsonl``: the logic is in :mod:`chatparse.hf._jsonl`."""
    from chatparse.hf import _jsonl

    if not args.field:
        raise CliError("--jsonl needs --field NAME (the key of the generated text in each line)")
    if args.jobs < 1:
        raise CliError("--jobs must be at least 1")
    template, prefix = (None, _load_prefix(args)) if args.auto else _template_and_prefix(args)
    tools = _load_tools(args.tools)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    try:
        handle = sys.stdin if args.output == _STDIN else open(args.output, encoding="utf-8", newline="")  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"{args.output}: cannot read output file: {exc.strerror or exc}") from None
    with contextlib.closing(handle) if handle is not sys.stdin else contextlib.nullcontext():
        try:
            result = _jsonl.parse_jsonl(
                handle, sys.stdout, field=args.field, template=template, prefix=prefix,
                prefix_field=args.prefix_field, tools=tools, jobs=args.jobs, progress=progress,
                total_bytes=_jsonl.file_size(args.output) if args.output != _STDIN else None,
                shape=args.shape,
            )  # fmt: skip
        except UnicodeDecodeError as exc:
            raise CliError(f"{_display(args.output)}: not valid UTF-8 ({exc.reason})") from None
    if result.failed:
        print(f"{PROG}: error: {_display(args.output)}: {result.failed} of {result.lines} line(s) could not be "
              f"parsed; first: {result.first_error}", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _cmd_parse(args: argparse.Namespace) -> int:
    from chatparse import parse_response

    if args.jsonl:
        return _cmd_parse_jsonl(args)
    if args.auto:
        from chatparse.openai import parse_auto

        tools = _load_tools(args.tools)
        text = _read_text(args.output, "output file")
        message, _reason = parse_auto(text, tools=tools, prefix=_auto_prefix(args))
        _write_json(message if args.shape == "openai" else to_hf_message(message), indent=2)
        return 0
    template, prefix = _template_and_prefix(args)
    tools = _load_tools(args.tools)
    text = _read_text(args.output, "output file")
    where = _display(args.output)
    if args.shape == "openai":
        from chatparse.openai import parse_message

        try:
            answer = parse_message(text, template=template, prefix=prefix, tools=tools)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CliError(f"{where}: cannot parse: {_describe(exc)}", 1) from None
        _write_json(answer, indent=2)
        return _report_errors(where, answer)
    try:
        message = parse_response(text, template, prefix=prefix, tools=tools)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CliError(f"{where}: cannot parse: {_describe(exc)}", 1) from None
    _write_json(message, indent=2)
    return 0


def _stdin_reads() -> Iterator[str]:
    """Yield stdin text as it arrives: each ``os.read`` is decoded (incremental UTF-8) and yielded."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        fd: int | None = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # replaced stdin (e.g. in tests): no file descriptor
        fd = None
    try:
        if fd is not None:
            while True:
                data = os.read(fd, _READ_SIZE)
                if not data:
                    break
                text = decoder.decode(data)
                if text:
                    yield text
            tail = decoder.decode(b"", final=True)
            if tail:
                yield tail
        else:
            yield from iter(sys.stdin.readline, "")
    except UnicodeDecodeError as exc:
        raise CliError(f"<stdin>: output is not valid UTF-8 ({exc.reason})") from None


def _file_chunks(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _cmd_stream(args: argparse.Namespace) -> int:
    from chatparse import ResponseParser

    if args.chunk_size < 1:
        raise CliError("--chunk-size must be at least 1")
    if args.delay is not None and args.delay < 0:
        raise CliError("--delay must not be negative")
    if args.auto:
        return _stream_auto(args)
    template, prefix = _template_and_prefix(args)
    tools = _load_tools(args.tools)
    chunks = _chunks(args)
    where = _display(args.output)
    if args.shape == "openai":
        return _stream_deltas(args, template, prefix, tools, chunks, where)
    malformed: list[Mapping[str, object]] = []

    def emit(events: Sequence[Mapping[str, object]]) -> None:
        for event in events:
            if event.get("type") == "region_malformed":
                malformed.append(event)
            _write_json(_event_json(event))

    try:
        parser = ResponseParser(template, prefix=prefix, tools=tools)
        emit(parser.initial_events)
        for chunk in chunks:
            emit(parser.feed(chunk))
        message, final_events = parser.finalize()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CliError(f"{where}: cannot parse: {_describe(exc)}", 1) from None
    emit(final_events)
    _write_json({"type": "message", "message": message})
    if malformed:
        first_bad = malformed[0]
        error = first_bad.get("error")
        detail = _describe(error) if isinstance(error, BaseException) else "malformed"
        print(
            f"{PROG}: error: {where}: {len(malformed)} malformed region(s); first: "
            f"field '{first_bad.get('field')}': {detail}",
            file=sys.stderr,
        )
        return 1
    return 0


def _chunks(args: argparse.Namespace) -> Iterator[str]:
    """The model output as feeds: stdin as it arrives, a file (read now, so that a missing one is an
    error before any output) in ``--chunk-size`` pieces; ``--delay`` seconds apart."""
    if args.output == _STDIN:
        source: Iterator[str] = _stdin_reads()
    else:
        source = _file_chunks(_read_text(args.output, "output file"), args.chunk_size)
    return _paced(source, args.delay) if args.delay else source


def _paced(source: Iterator[str], delay: float) -> Iterator[str]:
    for i, chunk in enumerate(source):
        if i:
            time.sleep(delay)
        yield chunk


def _stream_deltas(
    args: argparse.Namespace, template: Any, prefix: str, tools: Any, chunks: Iterator[str], where: str
) -> int:
    """``stream --shape openai`` with a template: one Chat Completions delta per line, then the message."""
    from chatparse.openai import ChatParser

    try:
        parser = ChatParser(template=template, prefix=prefix, tools=tools)
        for chunk in chunks:
            for delta in parser.feed(chunk):
                _write_json({"type": "delta", "delta": delta})
        message, deltas, reason = parser.finish("stop")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CliError(f"{where}: cannot parse: {_describe(exc)}", 1) from None
    for delta in deltas:
        _write_json({"type": "delta", "delta": delta})
    _write_json({"type": "message", "message": message, "finish_reason": reason})
    return _report_errors(where, message)


class _DeltaRegions:
    """Region events (``--shape hf``) for the deltas of template-less detection.

    Detection decides some calls only at the end of the output and runs its own union template, so
    its regions have no offsets in a prompt + output text: these events carry no ``start``/``end``/
    ``captures``. Otherwise the contract holds: one open, chunks (text fields, ``dirty`` false),
    exactly one close per region, no nesting; a call is one region whose close value is the call.
    """

    def __init__(self) -> None:
        self.field: str | None = None
        self.text: list[str] = []

    def _close(self, out: list[dict[str, Any]]) -> None:
        if self.field is not None:
            out.append(
                {"type": "region_close", "field": self.field, "value": "".join(self.text), "complete": True}
            )
            self.field, self.text = None, []

    def events(self, delta: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for key, value in delta.items():
            if key == "tool_calls":
                self._close(out)
                for call in to_hf_message({"tool_calls": value})["tool_calls"]:
                    out.append({"type": "region_open", "field": "tool_calls"})
                    close = {"type": "region_close", "field": "tool_calls", "value": call}
                    out.append({**close, "complete": True})
            elif isinstance(value, str) and value:
                if self.field != key:
                    self._close(out)
                    self.field = key
                    out.append({"type": "region_open", "field": key})
                self.text.append(value)
                out.append({"type": "region_chunk", "field": key, "text": value, "dirty": False})
        return out

    def finish(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self._close(out)
        return out


def _stream_auto(args: argparse.Namespace) -> int:
    """``stream --auto``: region events (``--shape hf``) or Chat Completions deltas (``--shape
    openai``) as detection releases them, then the message."""
    from chatparse.openai import AutoStream

    tools = _load_tools(args.tools)
    chunks = _chunks(args)
    stream = AutoStream(tools=tools, prefix=_auto_prefix(args))
    regions = _DeltaRegions() if args.shape == "hf" else None

    def emit(deltas: Sequence[Mapping[str, Any]]) -> None:
        for delta in deltas:
            if regions is None:
                _write_json({"type": "delta", "delta": delta})
            else:
                for event in regions.events(delta):
                    _write_json(event)

    for chunk in chunks:
        emit(stream.feed(chunk))
    message, deltas, reason = stream.finish("stop")
    emit(deltas)
    if regions is None:
        _write_json({"type": "message", "message": message, "finish_reason": reason})
    else:
        for event in regions.finish():
            _write_json(event)
        _write_json({"type": "message", "message": to_hf_message(message)})
    return 0


def _summary(message: Mapping[str, Any]) -> str:
    parts = []
    for key, value in message.items():
        if key == "role":
            continue
        if isinstance(value, list):
            parts.append(f"{key} ({len(value)})")
        else:
            parts.append(key)
    return ", ".join(parts) if parts else "(empty message)"


def _cmd_validate(args: argparse.Namespace) -> int:
    from chatparse import parse_response

    compiled, spec, nested = _load_template(args.file)
    fields = spec.get("fields") if isinstance(spec, dict) else None
    names = ", ".join(str(name) for name in fields) if isinstance(fields, dict) else ""
    source = " (from the 'response_template' key)" if nested else ""
    print(f"{args.file}: OK{source}: fields {names}")
    if not args.sample:
        return 0
    data = _template_data(args.file)
    default_prefix = ""
    if isinstance(data, dict) and isinstance(data.get("generation_prompt"), str) and "fields" not in data:
        default_prefix = data["generation_prompt"]
    prefix = _load_prefix(args, default_prefix)
    tools = _load_tools(args.tools)
    failed = 0
    for sample in args.sample:
        if sample == _STDIN:
            raise CliError("--sample cannot be '-'")
        text = _read_text(sample, "sample file")
        try:
            message = parse_response(text, compiled, prefix=prefix, tools=tools)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            failed += 1
            print(f"{sample}: FAILED: {_describe(exc)}")
            continue
        print(f"{sample}: OK: {_summary(message)}")
        if args.show:
            _write_json(message, indent=2)
    if failed:
        print(f"{PROG}: error: {failed} of {len(args.sample)} sample(s) could not be parsed", file=sys.stderr)
        return 1
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from chatparse import catalog

    names = catalog.names()
    width = max(len(name) for name in names)
    for name in names:
        print(f"{name.ljust(width)}  {catalog.describe(name)['description']}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    entry = _catalog_entry(args.name)
    _write_json(entry if args.full else entry["template"], indent=2)
    return 0


def _serve_missing(args: argparse.Namespace) -> int:
    raise CliError("serve needs the server extra: pip install 'chatparse[server]'")


def _cmd_serve(args: argparse.Namespace) -> int:
    from .server import ServerConfigError
    from .server._cli import run_serve
    from .server._serve import BindError, StartupError

    try:
        return run_serve(args)
    except (ServerConfigError, BindError, StartupError) as e:
        raise CliError(str(e)) from e


# --------------------------------------------------------------------------------------------------
# argument parser


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG,
        description="Parse raw model output into a structured assistant message "
        "(reasoning_content / content / tool_calls) with a Hugging Face response_template.",
        epilog="Exit status: 0 success, 1 the output could not be parsed, 2 usage error "
        "(bad arguments, missing file, invalid JSON or invalid template). "
        "Example: chatparse parse --template examples/templates/qwen3.json examples/outputs/qwen3.txt",
    )
    from chatparse import __version__

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p_parse = sub.add_parser(
        "parse",
        help="parse a complete model output and print the message as JSON",
        description="Parse a complete model output (one-shot) and print the assistant message as "
        "pretty-printed JSON: with --shape hf (the default) as transformers' parse_response returns it, "
        "with --shape openai as a Chat Completions message. Exit status 1 if the output cannot be parsed "
        "(e.g. a tool call that is not valid JSON, or a required field is missing); with --shape openai "
        "the recovered message is printed anyway. --auto never fails: what is not a call stays content.",
    )
    _common_options(p_parse)
    jsonl = p_parse.add_argument_group("JSON Lines (one generation per line; see chatparse.hf)")
    jsonl.add_argument("--jsonl", action="store_true", help="OUTPUT_FILE is JSON Lines: parse --field of every line and write one message (or {\"error\": ...}) per line")  # fmt: skip
    jsonl.add_argument("--field", metavar="NAME", help="with --jsonl: the key of the generated text (a.b for nested keys)")  # fmt: skip
    jsonl.add_argument("--prefix-field", metavar="NAME", help="with --jsonl: the key of each line's prompt (default: --prefix)")  # fmt: skip
    jsonl.add_argument("--jobs", "-j", type=int, default=1, metavar="N", help="with --jsonl: parse in N processes (default: 1)")  # fmt: skip
    jsonl.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="with --jsonl: progress bar on stderr (default: when stderr is a terminal)")  # fmt: skip
    p_parse.set_defaults(handler=_cmd_parse)

    p_stream = sub.add_parser(
        "stream",
        help="feed a model output in chunks and print the parser events as JSON lines",
        description="Feed a model output to the streaming parser in chunks and print one JSON object "
        "per line as it is released. --shape hf (the default): the parser's events, region_open, "
        "region_chunk, region_close, region_malformed (whose 'error' is printed as "
        '{"type": ..., "message": ...}), then {"type": "message", "message": {...}}; with --auto '
        "the events carry no offsets. --shape openai: "
        '{"type": "delta", "delta": {...}} lines (Chat Completions choices[0].delta), then '
        '{"type": "message", "message": {...}, "finish_reason": ...}. With OUTPUT_FILE "-", '
        "stdin is fed as it arrives (each read is one feed; --chunk-size and --delay do not apply). "
        "Exit status 1 if a region was malformed (all events and the recovered message are still "
        "printed) or the output cannot be parsed.",
    )
    _common_options(p_stream)
    p_stream.add_argument(
        "--chunk-size",
        type=int,
        default=4,
        metavar="N",
        help="characters per feed when reading a file (default: 4, roughly one token)",
    )
    p_stream.add_argument(
        "--delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="sleep between feeds, to watch the events arrive as during generation (default: none)",
    )
    p_stream.set_defaults(handler=_cmd_stream)

    p_serve = sub.add_parser(
        "serve",
        help="run an OpenAI-compatible server in front of an inference engine",
        description="Run an OpenAI-compatible server (GET /v1/models, GET /health, POST "
        "/v1/chat/completions, POST /v1/responses) that sends requests to an engine in raw mode and "
        "parses its output with the model's response template. Needs 'pip install chatparse[server]'. "
        "Logs JSON lines on stderr (one per request). Exit status 0 after a graceful shutdown (SIGTERM, "
        "SIGINT), 2 when it cannot start (bad configuration, no template, the address cannot be bound).",
    )
    try:
        from .server._cli import add_arguments as _serve_arguments
    except ImportError:  # no server extra: the command explains itself when run
        p_serve.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p_serve.set_defaults(handler=_serve_missing)
    else:
        _serve_arguments(p_serve)
        p_serve.set_defaults(handler=_cmd_serve)

    p_templates = sub.add_parser(
        "templates",
        help="list, show and validate response templates (the catalog and template files)",
        description="List and show the catalog's templates; validate template files.",
    )
    tsub = p_templates.add_subparsers(dest="templates_command", metavar="ACTION")
    p_validate = tsub.add_parser(
        "validate",
        help="check that a template file loads",
        description="Load a template file (the template itself, or a tokenizer_config.json-style object "
        "with a 'response_template' key), validate and compile it, and print OK with its fields. "
        "Exit status 2 with the validation error if it is invalid.",
    )
    p_validate.add_argument(
        "file", metavar="FILE", help="template JSON file, or a catalog template name (e.g. qwen3)"
    )
    p_validate.add_argument(
        "--sample",
        action="append",
        default=[],
        metavar="FILE",
        help="raw model output to parse with the template (repeatable); each prints OK with the "
        "fields found or FAILED with the error, and any failure makes the exit status 1",
    )
    _prefix_options(p_validate)
    p_validate.add_argument("--tools", metavar="FILE", help="JSON file with the tool definitions")
    p_validate.add_argument("--show", action="store_true", help="also print each parsed message as JSON")
    p_validate.set_defaults(handler=_cmd_validate)

    p_list = tsub.add_parser(
        "list",
        help="list the catalog's templates",
        description="List the catalog's templates: one line each, name and description.",
    )
    p_list.set_defaults(handler=_cmd_list)

    p_show = tsub.add_parser(
        "show",
        help="print a catalog template as JSON",
        description="Print the response_template of the catalog entry NAME as JSON (with --full, the "
        "whole entry: metadata and template). Exit status 2 for an unknown name.",
    )
    p_show.add_argument("name", metavar="NAME", help="catalog name (see 'chatparse templates list')")
    p_show.add_argument("--full", action="store_true", help="print the whole entry, metadata included")
    p_show.set_defaults(handler=_cmd_show)
    p_templates.set_defaults(handler=None, subparser=p_templates)

    from .constraints import _cli as constraints_cli

    constraints_cli.add_parser(sub).set_defaults(handler=lambda a: constraints_cli.run(a, CliError))

    parser.set_defaults(handler=None, subparser=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(list(argv) if argv is not None else None)
        except SystemExit as exc:  # --help / --version
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if args.handler is None:
            if args.subparser is parser:
                raise CliError(
                    "a command is required: parse, stream, serve or templates (see 'chatparse --help')"
                )
            raise CliError(
                "templates: an action is required: list, show or validate (see 'chatparse templates --help')"
            )
        code: int = args.handler(args)
        return code
    except CliError as exc:
        _flush_quietly()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        _flush_quietly()
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout closed early (e.g. piped into `head`): stop quietly.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # last resort: never show a traceback
        _flush_quietly()
        print(f"{PROG}: error: internal error: {_describe(exc)}", file=sys.stderr)
        return 1


def _flush_quietly() -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
