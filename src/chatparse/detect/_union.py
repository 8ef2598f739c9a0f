"""The marker-anchored recognizers as one union `response_template` run on the core engine.

Each recognizer is one field; the field name is ``<kind>_<recognizer>`` where kind is
``tool_calls``, ``reasoning``, ``content`` (text that is content, e.g. the Harmony final channel)
or ``orphan`` (a lone reasoning closer, a zero-width region). The implicit field is ``content``.
The start anchor is a literal that never occurs in model output; parsers are built with
``prefix=""`` so the whole output is parsed.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .._template import Template, load_response_template

NEVER_ANCHOR = "\x00chatparse-detect\x00"

_JSON = {"content": "json", "content_args": {"close_outside_strings": True}}
_NAMED = {"transform": {"name": "{name}", "arguments": "{content}"}}

#: Tool-call recognizers, in the documented `auto` precedence (used to order reports).
TOOL_FIELDS: dict[str, dict[str, Any]] = {
    # <tool_call>{json}</tool_call>; a non-JSON body is left to qwen3_coder.
    "hermes": {
        "open_pattern": r"<tool_call>(?=\s*\{)",
        "close": "</tool_call>",
        "repeats": True,
        **_JSON,
    },
    # Gemma 4 wrapped form, Gemma-quoted JSON with bare keys.
    "gemma": {
        "open_pattern": r"<\|tool_call>call:(?P<name>[\w.\-]+)(?=\s*\{)",
        "close": "<tool_call|>",
        "repeats": True,
        "content": "json",
        "content_args": {
            "unquoted_keys": "lenient",
            "string_delims": [['<|"|>', '<|"|>']],
            "close_outside_strings": True,
        },
        **_NAMED,
    },
    # The older <call:NAME{json}> form (local fallback example, runtime-contract §9).
    "gemma_legacy": {
        "open_pattern": r"<call:(?P<name>[\w.\-]+)(?=\{)",
        "close": ">",
        "repeats": True,
        "content": "json",
        "content_args": {"unquoted_keys": "lenient", "close_outside_strings": True},
        **_NAMED,
    },
    # Harmony: commentary (or analysis) channel addressed to functions.NAME, ending <|call|>.
    "gpt_oss": {
        "open_pattern": (
            r"(?:<\|start\|>assistant)?<\|channel\|>(?:commentary|analysis)\s+to=functions\.(?P<name>[^\s<]+)"
            r"[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
        ),
        "close": ["<|call|>", "<|end|>"],
        "repeats": True,
        **_JSON,
        **_NAMED,
    },
    # the recipient in the role header: <|start|>assistant to=functions.NAME<|channel|>commentary...
    # (`<|start|>assistant` may be the end of the prompt, so the output starts at ` to=`)
    "gpt_oss_role": {
        "open_pattern": (
            r"(?:<\|start\|>assistant)?\s*to=functions\.(?P<name>[^\s<]+)[^<]*"
            r"<\|channel\|>(?:commentary|analysis)[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
        ),
        "close": ["<|call|>", "<|end|>"],
        "repeats": True,
        **_JSON,
        **_NAMED,
    },
    # Llama 4 <|python_start|>[f(a=1)]<|python_end|>
    "pythonic_tag": {
        "open": "<|python_start|>",
        "close": "<|python_end|>",
        "repeats": True,
        "content": "python-call-list",
        "transform_each": True,
        "transform": {"name": "{name}", "arguments": "{arguments}"},
    },
    # functools[{...}, ...]: no terminator; the JSON array is cut from trailing prose.
    "phi": {"open_pattern": r"functools(?=\[)", "close": "<|end|>", **_JSON},
    # <|python_tag|>{...}: Llama 3.x built-in tool-call tag.
    "llama_tag": {
        "open_pattern": r"<\|python_tag\|>(?=\s*[\[{])",
        "close": ["<|eom_id|>", "<|eot_id|>"],
        "repeats": True,
        **_JSON,
    },
    # [TOOL_CALLS] [{...}, ...]
    "mistral_list": {"open_pattern": r"\[TOOL_CALLS\]\s*(?=\[)", "close": "</s>", "repeats": True, **_JSON},
    # [TOOL_CALLS]NAME[ARGS]{...} (v11+), one call per marker.
    "mistral_args": {
        "open_pattern": r"\[TOOL_CALLS\](?P<name>[^\[\{\s]+?)(?:\[CALL_ID\][A-Za-z0-9]+)?\[ARGS\]",
        "close_pattern": r"(?=\[TOOL_CALLS\])|</s>",
        "repeats": True,
        **_JSON,
        **_NAMED,
    },
    # <tool_call><function=NAME><parameter=k>v</parameter></function></tool_call>
    "qwen3_coder": {
        "open_pattern": r"(?:<tool_call>\s*)?<function=(?P<name>[^>\n]+)>",
        "close_pattern": r"</function>\s*</tool_call>",
        "repeats": True,
        "content": "xml-inline",
        "content_args": {
            "tag_pattern": (
                r"<parameter=(?P<key>[^>\n]+)>\n?(?P<value>.*?)"
                r"(?:\n?</parameter>(?=\s{0,64}(?:<parameter=|\Z))|\n(?=<parameter=)|\n?\Z)"
            )
        },
        **_NAMED,
    },
}

#: Recognizers whose payload has no terminator of its own: a region that runs on past its JSON
#: is cut at the end of the first JSON value (the rest is content).
UNTERMINATED = frozenset({"phi", "llama_tag", "mistral_list", "mistral_args", "gpt_oss", "gpt_oss_role"})

#: Fields reported under another recognizer's name.
ALIASES = {"gpt_oss_role": "gpt_oss", "pythonic_tag": "pythonic", "gemma_legacy": "gemma"}

REASONING_FIELDS: dict[str, dict[str, Any]] = {
    "think_tag": {
        "open": ["<think>", "<thinking>", "[THINK]"],
        "close": ["</think>", "</thinking>", "[/THINK]"],
        "repeats": True,
    },
    "harmony_analysis": {
        "open_pattern": r"<\|channel\|>analysis\s*<\|message\|>",
        "close": "<|end|>",
        "repeats": True,
    },
    "gemma_channel": {"open": "<|channel>thought", "close": "<channel|>", "repeats": True},
}

#: Extra content regions (markers removed, text kept as content), enabled with their reasoning family.
CONTENT_FIELDS: dict[str, tuple[str, dict[str, Any]]] = {
    "harmony_final": (
        "harmony_analysis",
        {
            "open_pattern": r"(?:<\|start\|>assistant)?<\|channel\|>(?:final|commentary)\s*<\|message\|>",
            "close": ["<|end|>", "<|return|>"],
            "repeats": True,
            "content_args": {"strip": False},
        },
    ),
}

#: Lone closers recovered as the end of reasoning (zero-width regions).
ORPHAN_FIELDS: dict[str, tuple[str, dict[str, Any]]] = {
    "think_tag": (
        "think_tag",
        {"open": ["</think>", "</thinking>"], "close_pattern": "(?=)", "repeats": True},
    ),
}

TOOL_RECOGNIZERS = (
    *(n for n in TOOL_FIELDS if n not in ALIASES),
    "pythonic",
    "bare_pythonic",
    "llama3_json",
    "tool_code",
    "loose_keyed",
)
REASONING_RECOGNIZERS = tuple(REASONING_FIELDS)


@lru_cache(maxsize=64)
def union_template(names: tuple[str, ...]) -> Template:
    """The union template for the enabled recognizer `names` (tool and reasoning)."""
    fields: dict[str, Any] = {}
    for n in REASONING_FIELDS:
        if n in names:
            fields[f"reasoning_{n}"] = REASONING_FIELDS[n]
    for n, (family, spec) in ORPHAN_FIELDS.items():
        if family in names:
            fields[f"orphan_{n}"] = spec
    for n, (family, spec) in CONTENT_FIELDS.items():
        if family in names:
            fields[f"content_{n}"] = spec
    for n in TOOL_FIELDS:
        if ALIASES.get(n, n) in names:
            fields[f"tool_calls_{n}"] = TOOL_FIELDS[n]
    fields["content"] = {"content_args": {"strip": False}}
    return load_response_template({"start_anchor": NEVER_ANCHOR, "fields": fields})
