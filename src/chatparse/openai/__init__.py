"""OpenAI wire formats for parsed model output: Chat Completions deltas and messages, Responses items.

No HTTP here and no parsing of its own: `ChatParser` drives the core `ResponseParser` (or, with
`auto=True`, `chatparse.detect.AutoParser`) and turns its region events into `choices[0].delta` dicts (`reasoning_content`, `content`, `tool_calls` fragments
with stable indices), and `finish` gives the final message and `finish_reason`. The policies
(cut-off calls, malformed calls, unknown tools, early or complete call streaming) are documented in
`chatparse.openai._chat` and on `ChatParser`.

>>> from chatparse.openai import parse_message
>>> tpl = {"start_anchor": "A", "fields": {"thinking": {"open": "<think>", "close": "</think>"},
...                                        "content": {"close": "<end>"}}}
>>> parse_message("<think>hm</think> Hi<end>", template=tpl)
{'role': 'assistant', 'content': 'Hi', 'reasoning_content': 'hm'}
"""

from ._auto import AutoStream, local_fallback, parse_auto
from ._calls import ToolCallAssembler, calls_from_value, random_call_id
from ._chat import ChatParser, parse_message
from ._request import InvalidRequest, validate_chat_request
from ._resolve import MissingAnchorError, MissingAnchorWarning
from ._responses import ResponsesStream, responses_to_chat
from ._wire import merge_deltas, to_responses_output

__all__ = [
    "AutoStream",
    "ChatParser",
    "InvalidRequest",
    "MissingAnchorError",
    "MissingAnchorWarning",
    "ResponsesStream",
    "ToolCallAssembler",
    "calls_from_value",
    "local_fallback",
    "merge_deltas",
    "parse_auto",
    "parse_message",
    "random_call_id",
    "responses_to_chat",
    "to_responses_output",
    "validate_chat_request",
]
