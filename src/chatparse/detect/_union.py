"""The marker-anchored recognizers as one union `response_template` run on the core engine.

Each recognizer is one field; the field name is ``<kind>_<recognizer>`` where kind is
``tool_calls``, ``reasoning``, ``content`` (text that is content, e.g. the Harmony final channel),
``orphan`` (a lone reasoning closer, a zero-width region) or ``marker`` (a section or end-of-turn
marker of a family, a zero-width region: dropped). The implicit field is ``content``.
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
    # GLM-4.5+: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>; the name
    # never starts with `{` (that is hermes) or `<` (qwen3_coder) and is followed by <arg_key> or
    # </tool_call> (so `<tool_call>not valid json</tool_call>` is not a call).
    "glm": {
        "open_pattern": r"<tool_call>\s*(?P<name>[^<\s{\[][^<\s]*)(?=\s*(?:<arg_key>|</tool_call>))",
        "close_pattern": (
            r"(?<=</arg_value>\s{0,16}|<tool_call>[^<\s]{1,256}\s{0,16})</tool_call>"
            r"|</tool_call>(?=\s{0,16}(?:<tool_call>|<\||\Z))"
        ),
        "repeats": True,
        "content": "xml-inline",
        "content_args": {
            "tag_pattern": (
                r"<arg_key>\s*(?P<key>.*?)\s*</arg_key>\s*<arg_value>(?P<value>.*?)"
                r"(?:</arg_value>|(?=<arg_key>[^<]{0,256}</arg_key>\s{0,16}<arg_value>)|\Z)"
            )
        },
        **_NAMED,
    },
    # DeepSeek V3 / R1-0528: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```<｜tool▁call▁end｜>
    "deepseek_v3": {
        "open_pattern": r"<｜tool▁call▁begin｜>function<｜tool▁sep｜>(?P<name>[^\n<]+)\n```json\n",
        "close_pattern": r"\s*```\s*<｜tool▁call▁end｜>",
        "repeats": True,
        "content": "json",
        **_NAMED,
    },
    # DeepSeek V3.1: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>
    "deepseek_v31": {
        "open_pattern": r"<｜tool▁call▁begin｜>(?P<name>[^<]+?)<｜tool▁sep｜>(?=\s*\{)",
        "close": "<｜tool▁call▁end｜>",
        "repeats": True,
        **_JSON,
        **_NAMED,
    },
    # DeepSeek V3.2 / V4 / V4.1 DSML (V4.1 writes a space after ｜DSML｜; self-closing = no arguments)
    "deepseek_dsml": {
        "open_pattern": r"<｜DSML｜ ?invoke name=\"(?P<name>[^\"]+)\"\s*/?>",
        "close_pattern": r"</｜DSML｜ ?invoke>|(?<=<｜DSML｜ ?invoke name=\"[^\"]{1,256}\"\s{0,8}/>)",
        "repeats": True,
        "content": "xml-inline",
        "content_args": {
            "tag_pattern": (
                r"<｜DSML｜ ?parameter name=\"(?P<key>[^\"]+)\"(?: string=\"(?:true|false)\")?>"
                r"(?P<value>.*?)</｜DSML｜ ?parameter>"
            )
        },
        **_NAMED,
    },
    # Kimi K2.x: [<|tool_calls_section_begin|>]<|tool_call_begin|>functions.NAME:IDX
    # <|tool_call_argument_begin|>{..}<|tool_call_end|>; text between the markers is dropped.
    "kimi_k2": {
        "open_pattern": (
            r"(?:<\|tool_calls_section_begin\|>[^<]{0,256}|\s*)<\|tool_call_begin\|>\s*"
            r"(?:functions\.)?(?P<name>[^:<\s]+)(?::\d+)?\s*<\|tool_call_argument_begin\|>"
        ),
        "close_pattern": (
            r"<\|tool_call_end\|>(?:[^<]{0,256}(?=<\|tool_call_begin\|>|<\|tool_calls_section_end\|>))?"
        ),
        "repeats": True,
        **_JSON,
        **_NAMED,
    },
    # Kimi K3 XTML: <|open|>call tool="NAME" ...<|sep|><|open|>argument key="K" ...<|sep|>V
    # <|close|>argument<|sep|>...<|close|>call<|sep|>
    "kimi_k3": {
        "open_pattern": r"<\|open\|>call tool=\"(?P<name>[^\"<]*)\"[^<>]{0,128}?<\|sep\|>",
        "close": "<|close|>call<|sep|>",
        "repeats": True,
        "content": "xml-inline",
        "content_args": {
            "tag_pattern": (
                r"<\|open\|>argument key=\"(?P<key>[^\"<]*)\"[^<>]{0,128}?<\|sep\|>(?P<value>.*?)"
                r"<\|close\|>argument<\|sep\|>(?=\s*(?:<\|open\|>argument |\Z))"
            ),
            "value_parser": {"name": "json", "args": {"allow_non_json": True, "strip": False}},
            "unescape_keys": True,
        },
        **_NAMED,
    },
}

#: Section and end-of-turn markers of a family, dropped from the content (zero-width regions).
MARKER_FIELDS: dict[str, tuple[str, dict[str, Any]]] = {
    "deepseek": (
        "deepseek",
        {"open_pattern": r"<｜tool▁calls▁(?:begin|end)｜>|<｜end▁of▁sentence｜>", "close_pattern": "(?=)"},
    ),
    "deepseek_dsml": (
        "deepseek_dsml",
        {"open_pattern": r"</?｜DSML｜ ?(?:function_calls|tool_calls|calls)>", "close_pattern": "(?=)"},
    ),
    "kimi_k2": (
        "kimi_k2",
        {"open_pattern": r"<\|tool_calls_section_(?:begin|end)\|>|<\|im_end\|>", "close_pattern": "(?=)"},
    ),
    "kimi_k3": (
        "kimi_k3",
        {
            "open_pattern": (
                r"<\|(?:open|close)\|>(?:response|tools)<\|sep\|>|<\|close\|>message<\|sep\|>"
                r"|<\|end_of_msg\|>"
            ),
            "close_pattern": "(?=)",
        },
    ),
}

#: Regions that are neither content nor a call (a Harmony message to a built-in recipient such as
#: `to=python`): their text is dropped and reported in `errors`.
DROP_FIELDS: dict[str, tuple[str, dict[str, Any]]] = {
    "gpt_oss": (
        "gpt_oss",
        {
            "open_pattern": (
                r"(?:<\|start\|>assistant)?(?:<\|channel\|>(?:commentary|analysis)\s+to=(?!functions\.)[^\s<]+"
                r"|\s*to=(?!functions\.)[^\s<]+[^<]*<\|channel\|>(?:commentary|analysis))"
                r"[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
            ),
            "close": ["<|call|>", "<|end|>"],
            "repeats": True,
        },
    ),
}

#: Recognizers whose payload has no terminator of its own: a region that runs on past its JSON
#: is cut at the end of the first JSON value (the rest is content).
UNTERMINATED = frozenset({"phi", "llama_tag", "mistral_list", "mistral_args", "gpt_oss", "gpt_oss_role"})

#: Fields reported under another recognizer's name.
ALIASES = {
    "gpt_oss_role": "gpt_oss",
    "pythonic_tag": "pythonic",
    "gemma_legacy": "gemma",
    "deepseek_v3": "deepseek",
    "deepseek_v31": "deepseek",
}

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
    # Kimi K3 XTML think section (ends at its closer or where the response/tools section opens)
    "xtml_think": {
        "open": "<|open|>think<|sep|>",
        "close_pattern": r"<\|close\|>think<\|sep\|>|(?=<\|open\|>(?:response|tools)<\|sep\|>)",
        "repeats": True,
    },
}

#: Reasoning openers that a prompt (`prefix`) may end with: the output then starts in reasoning.
PREFIX_OPENERS: dict[str, str] = {
    "<think>": "think_tag",
    "<thinking>": "think_tag",
    "[THINK]": "think_tag",
    "<|channel>thought": "gemma_channel",
    "<|channel|>analysis<|message|>": "harmony_analysis",
    "<|open|>think<|sep|>": "xtml_think",
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
    "xtml_think": (
        "xtml_think",
        {"open": "<|close|>think<|sep|>", "close_pattern": "(?=)", "repeats": True},
    ),
}

#: The tool-call recognizers (the names `recognizers=` and `local_tool_call_parser` accept), in the
#: documented `auto` precedence: the marker families first (hermes, gemma, gpt_oss, phi,
#: llama_tag, mistral_list, mistral_args, qwen3_coder, glm, deepseek, deepseek_dsml, kimi_k2,
#: kimi_k3), then pythonic (`[f(a=1)]`, and `<|python_start|>` with a marker) and the other
#: marker-free whole-output shapes (bare_pythonic, llama3_json, tool_code, loose_keyed).
#: Public as `chatparse.detect.TOOL_RECOGNIZERS`.
TOOL_RECOGNIZERS: tuple[str, ...] = (
    *(n for n in dict.fromkeys(ALIASES.get(n, n) for n in TOOL_FIELDS) if n != "pythonic"),
    "pythonic",
    "bare_pythonic",
    "llama3_json",
    "tool_code",
    "loose_keyed",
)
#: The reasoning recognizers (think_tag, harmony_analysis, gemma_channel, xtml_think). Public as
#: `chatparse.detect.REASONING_RECOGNIZERS`.
REASONING_RECOGNIZERS: tuple[str, ...] = tuple(REASONING_FIELDS)


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
    for n, (family, spec) in DROP_FIELDS.items():
        if family in names:
            fields[f"drop_{n}"] = spec
    for n, (family, spec) in MARKER_FIELDS.items():
        if family in names:
            fields[f"marker_{n}"] = spec
    for n, (family, spec) in CONTENT_FIELDS.items():
        if family in names:
            fields[f"content_{n}"] = spec
    for n in TOOL_FIELDS:
        if ALIASES.get(n, n) in names:
            fields[f"tool_calls_{n}"] = TOOL_FIELDS[n]
    fields["content"] = {"content_args": {"strip": False}}
    return load_response_template({"start_anchor": NEVER_ANCHOR, "fields": fields})
