"""Generation constraints derived from a response template and a request's tools.

The template that parses a model's output also says how a call must be written: where it starts,
how its name and arguments are spelled, where it ends. `derive` turns a template plus the
request's `tools`, `tool_choice`, `parallel_tool_calls` and reasoning mode into one `Constraint`,
rendered for each engine's grammar backend:

>>> from chatparse import constraints
>>> tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
...     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
>>> c = constraints.derive("qwen3", tools, tool_choice="required", parallel_tool_calls=False)
>>> sorted(c.structural_tag())        # vLLM / SGLang: response_format / structured_outputs
['format', 'type']
>>> c.gbnf().startswith("root ::=")   # llama.cpp: "grammar"
True

Whatever a rendering accepts parses, with the same template, into calls to offered tools whose
arguments satisfy their schemas. What cannot be expressed exactly raises `ConstraintError`
naming the field or schema keyword; see docs/constraints.md for what each family constrains.
"""

from ._budget import ConstraintTimeout
from ._constraint import DEFAULT_MAX_WHITESPACE, Constraint, derive
from ._schema import ConstraintError

__all__ = ["DEFAULT_MAX_WHITESPACE", "Constraint", "ConstraintError", "ConstraintTimeout", "derive"]
