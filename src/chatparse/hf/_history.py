"""History that renders: parsed messages made ready for a model's chat template.

A message chatparse produced (core `parse_response`, `chatparse.openai`, a pipeline's chat output)
often cannot go back through a chat template as it is: reasoning is under `reasoning_content` while
the template reads `thinking` (gpt-oss) or `reasoning`; `content` is missing or `None` on a turn that
only called tools (templates concatenate it, test it with `in`, or trim it); arguments are JSON text
where the template expects an object (`| tojson`), or an object where it concatenates text
(DeepSeek). `prepare_history` fixes each of these for the chat template at hand, without mutating
its input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
_REPORT_KEY = "chatparse"
_ARGUMENT_MODES = ("auto", "object", "string")

# A chat template that tests the arguments' type (`is string` / `is mapping`) takes an object (it
# renders both); one that concatenates them (`+ tool['function']['arguments'] +`, DeepSeek) wants
# JSON text; anything else (`| tojson`, `.items()`, `| dictsort`) wants an object.
_TYPE_TEST = re.compile(r"""arguments['"\]]*\s+is\s+(?:not\s+)?(?:string|mapping)""")
_CONCAT = re.compile(r"""arguments['"\]]*\s*[+~]|[+~]\s*[\w.'"\[\]]*arguments\b""")
_CALL_IDS = re.compile(r"""tool_call(?:\.id\b|\[\s*['"]id['"]\s*\])|tool_call_id""")
_NINE = re.compile(r"length\s*!=\s*9|length\s+9\b")


def _template_text(chat_template: Any) -> str:
    if isinstance(chat_template, str):
        return chat_template
    if isinstance(chat_template, Mapping):
        return "\n".join(_template_text(v) for v in chat_template.values())
    if isinstance(chat_template, (list, tuple)):
        return "\n".join(
            _template_text(v.get("template") if isinstance(v, Mapping) else v) for v in chat_template
        )
    return ""


def reasoning_keys_for(chat_template: Any) -> tuple[str, ...]:
    """The reasoning keys a chat template reads (`reasoning_content`, `reasoning`, `thinking`).

    >>> reasoning_keys_for("{% if message.thinking %}...{% endif %}")
    ('thinking',)
    >>> reasoning_keys_for(None)
    ('reasoning_content',)
    """
    text = _template_text(chat_template)
    found = tuple(k for k in REASONING_KEYS if re.search(rf"\b{k}\b", text))
    return found or ("reasoning_content",)


def arguments_mode_for(chat_template: Any) -> str:
    """`"object"` or `"string"`: how a chat template expects tool-call arguments.

    >>> arguments_mode_for("{{ tool_call.arguments | tojson }}")
    'object'
    >>> arguments_mode_for("{{ '```json\\n' + tool['function']['arguments'] + '\\n```' }}")
    'string'
    """
    text = _template_text(chat_template)
    if _TYPE_TEST.search(text) or not _CONCAT.search(text):
        return "object"
    return "string"


def _call_id(mode: str, message_index: int, call_index: int) -> str:
    if mode == "nine":  # Mistral's templates demand 9 alphanumeric characters
        return f"c{message_index:04d}{call_index:04d}"[-9:]
    return f"call_{message_index}_{call_index}"


def _arguments(value: Any, mode: str, where: str) -> Any:
    if value is None:
        value = {}
    if mode == "object":
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{where}.arguments is not valid JSON ({e.msg} at position {e.pos}): {value[:200]!r}"
                ) from None
        return _plain(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _plain(value: Any) -> Any:
    """A deep copy of JSON-like data (mappings and sequences become dicts and lists)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _tool_call(call: Any, mode: str, where: str) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        raise TypeError(f"{where} must be a dict, got {type(call).__name__}")
    out = {k: _plain(v) for k, v in call.items() if k not in ("function", "name", "arguments")}
    fn = call.get("function")
    if fn is None:  # the flat form {"name": ..., "arguments": ...}
        fn = {k: call[k] for k in ("name", "arguments") if k in call}
    if not isinstance(fn, Mapping):
        raise TypeError(f"{where}.function must be a dict, got {type(fn).__name__}")
    if not isinstance(fn.get("name"), str):
        raise ValueError(f"{where}.function.name must be a string, got {fn.get('name')!r}")
    function = {k: _plain(v) for k, v in fn.items() if k != "arguments"}
    function["arguments"] = _arguments(fn.get("arguments"), mode, f"{where}.function")
    out.setdefault("type", "function")
    out["function"] = function
    return out


def prepare_message(
    message: Mapping[str, Any],
    *,
    reasoning_keys: Sequence[str] = ("reasoning_content",),
    arguments: str = "object",
    where: str = "message",
) -> dict[str, Any]:
    """One message made ready for a chat template (see `prepare_history`); `message` is not changed."""
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a dict, got {type(message).__name__}")
    reasoning = next(
        (message[k] for k in REASONING_KEYS if isinstance(message.get(k), str) and message[k]), None
    )
    out: dict[str, Any] = {}
    for k, v in message.items():
        if k == _REPORT_KEY:
            continue
        if k not in REASONING_KEYS:
            out[k] = _plain(v)
        elif reasoning is not None and k == next(r for r in REASONING_KEYS if r in message):
            out.update(dict.fromkeys(reasoning_keys, reasoning))  # where the reasoning was
    if out.get("content") is None:
        out["content"] = ""
    calls = message.get("tool_calls")
    if calls is None or (isinstance(calls, (list, tuple)) and not calls):
        out.pop("tool_calls", None)
    elif isinstance(calls, (list, tuple)):
        out["tool_calls"] = [
            _tool_call(c, arguments, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)
        ]
    else:
        raise TypeError(f"{where}.tool_calls must be a list, got {type(calls).__name__}")
    return out


def prepare_history(
    messages: Sequence[Mapping[str, Any]],
    *,
    chat_template: Any = None,
    arguments: str = "auto",
    call_ids: str = "auto",
) -> list[dict[str, Any]]:
    """Messages made ready for a chat template: what chatparse produced renders as the model wrote it.

    For every message (the input is never mutated):

    * reasoning given as `reasoning_content`, `reasoning` or `thinking` is stored under every one of
      those keys the chat template reads (`reasoning_content` when it reads none or is not given);
    * `content` that is missing or `None` becomes `""`;
    * `tool_calls` that is `None` or empty is removed; each call gets the `{"type": "function",
      "function": {"name", "arguments"}}` form (the flat `{"name", "arguments"}` form is accepted),
      with `arguments` as an object or as JSON text, whichever the template expects
      (`arguments="auto"`; force with `"object"` or `"string"`); JSON text that does not parse
      raises a `ValueError` naming the message and call;
    * when the template reads call ids (`tool_call.id`, `tool_call_id`) and `call_ids="auto"`,
      calls without an `id` get a deterministic one, and `tool` messages without a `tool_call_id`
      get the id of the call they answer, in order; where the template demands 9 alphanumeric
      characters (Mistral's), other ids are mapped to such ids, the same way in the calls and in
      the tool messages (`call_ids="keep"` leaves ids alone);
    * chatparse's own report (the `chatparse` key of `chatparse.openai` messages) is dropped.

    >>> prepare_history([{"role": "assistant", "content": None, "reasoning": "hm",
    ...                   "tool_calls": [{"name": "f", "arguments": '{"x": 1}'}]}],
    ...                 chat_template="{{ m.thinking }} {{ c.arguments | tojson }}")
    [{'role': 'assistant', 'content': '', 'thinking': 'hm', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', 'arguments': {'x': 1}}}]}]
    """
    if arguments not in _ARGUMENT_MODES:
        raise ValueError(f"arguments must be one of {_ARGUMENT_MODES}, got {arguments!r}")
    if call_ids not in ("auto", "keep"):
        raise ValueError(f"call_ids must be 'auto' or 'keep', got {call_ids!r}")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    keys = reasoning_keys_for(chat_template)
    mode = arguments_mode_for(chat_template) if arguments == "auto" else arguments
    out = [
        prepare_message(m, reasoning_keys=keys, arguments=mode, where=f"messages[{i}]")
        for i, m in enumerate(messages)
    ]
    text = _template_text(chat_template)
    if call_ids == "auto" and _CALL_IDS.search(text):
        _fill_call_ids(out, "nine" if _NINE.search(text) else "plain")
    return out


def _nine(call_id: str) -> str:
    """A 9-character alphanumeric id derived from another id (the same id always maps the same way)."""
    if len(call_id) == 9 and call_id.isascii() and call_id.isalnum():
        return call_id
    import hashlib

    return hashlib.sha1(call_id.encode("utf-8")).hexdigest()[:9]


def _fill_call_ids(messages: list[dict[str, Any]], mode: str) -> None:
    pending: list[str] = []
    for i, m in enumerate(messages):
        calls = m.get("tool_calls")
        if calls:
            pending = []
            for j, call in enumerate(calls):
                if not isinstance(call.get("id"), str) or not call["id"]:
                    call["id"] = _call_id(mode, i, j)
                elif mode == "nine":
                    call["id"] = _nine(call["id"])
                pending.append(call["id"])
        elif m.get("role") == "tool":
            if isinstance(m.get("tool_call_id"), str) and m["tool_call_id"]:
                if mode == "nine":
                    m["tool_call_id"] = _nine(m["tool_call_id"])
                if m["tool_call_id"] in pending:
                    pending.remove(m["tool_call_id"])
            elif pending:
                m["tool_call_id"] = pending.pop(0)


def _is_batch(conversation: Any) -> bool:
    return (
        isinstance(conversation, (list, tuple))
        and bool(conversation)
        and isinstance(conversation[0], (list, tuple))
    )


def _template_source(own: Any, requested: Any) -> Any:
    """The chat template text `apply_chat_template` will use: `chat_template=` (text or a name), else the own."""
    if requested is not None and not (isinstance(requested, str) and "{" not in requested):
        return requested
    if isinstance(own, Mapping):
        if isinstance(requested, str):
            return own.get(requested)
        return own.get("default", next(iter(own.values()), None))
    return own


def render_prepared(
    render: Any, own_template: Any, conversation: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """`render(prepared conversation, *args, **kwargs)`: the shared body of `apply_chat_template`."""
    template = _template_source(own_template, kwargs.get("chat_template"))
    if _is_batch(conversation):
        prepared: Any = [prepare_history(c, chat_template=template) for c in conversation]
    else:
        prepared = prepare_history(conversation, chat_template=template)
    return render(prepared, *args, **kwargs)


def apply_chat_template(tokenizer: Any, conversation: Any, *args: Any, **kwargs: Any) -> Any:
    """`tokenizer.apply_chat_template` on a history prepared with `prepare_history`.

    Takes everything `apply_chat_template` takes (a conversation or a batch of them, `tools=`,
    `add_generation_prompt=`, `tokenize=`, ...); the chat template that decides the reasoning keys
    and the argument form is `chat_template=` if given (text or a template name), else the
    tokenizer's (or processor's).
    """
    return render_prepared(
        tokenizer.apply_chat_template, getattr(tokenizer, "chat_template", None), conversation, args, kwargs
    )
