"""Call-dense model outputs for the one-shot tests (tests/core/test_oneshot_calls.py,
tests/openai/test_oneshot_message.py)."""

from __future__ import annotations

F_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            },
        },
    }
]
"""One tool `f(a: integer, b: string)`, the tool `dense_calls` writes calls of by default."""


def dense_calls(family: str, n: int, name: str = "f") -> str:
    """`n` calls of `name` in `family`'s call syntax, written as a model writes them."""
    if family == "qwen3":
        return "".join(
            f'<tool_call>\n{{"name": "{name}", "arguments": {{"a": "{i}"}}}}\n</tool_call>\n'
            for i in range(n)
        )
    if family == "qwen3_xml":
        return "".join(
            f"<tool_call>\n<function={name}>\n<parameter=a>\n{i}\n</parameter>\n</function>\n</tool_call>\n"
            for i in range(n)
        )
    if family == "kimi_k2":
        body = "".join(
            f'<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>{{"a": "{i}"}}<|tool_call_end|>'
            for i in range(n)
        )
        return "<|tool_calls_section_begin|>" + body + "<|tool_calls_section_end|>"
    assert family == "deepseek_v3"
    body = "".join(
        f'<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{{"a": "{i}"}}\n```<｜tool▁call▁end｜>'
        for i in range(n)
    )
    return "<｜tool▁calls▁begin｜>" + body + "<｜tool▁calls▁end｜>"
