"""chatparse: exact, streaming, linear-time parsing of raw model output into assistant messages.

The core is a drop-in for `transformers.utils.chat_parsing` (Hugging Face `response_template`):

>>> import chatparse
>>> tpl = {"start_anchor": "<|im_start|>assistant\\n",
...        "fields": {"reasoning_content": {"open": "<think>", "close": "</think>"},
...                   "content": {"close": "<|im_end|>"}}}
>>> chatparse.parse_response("<think>hm</think>Hello<|im_end|>", tpl, prefix="")
{'reasoning_content': 'hm', 'content': 'Hello'}
"""

from . import errors
from ._events import Event, RegionChunk, RegionClose, RegionMalformed, RegionOpen
from ._lint import LintWarning, lint_response_template
from ._parser import ResponseParser, parse_response
from ._template import Template, load_response_template
from .errors import RequiredFieldsMissing

__version__ = "0.1.0"

__all__ = [
    "Event",
    "LintWarning",
    "RegionChunk",
    "RegionClose",
    "RegionMalformed",
    "RegionOpen",
    "RequiredFieldsMissing",
    "ResponseParser",
    "Template",
    "errors",
    "lint_response_template",
    "load_response_template",
    "parse_response",
]
