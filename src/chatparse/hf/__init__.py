"""chatparse where transformers users are: tokenizers, `generate()` streaming, pipelines, datasets.

Install with `pip install 'chatparse[hf]'` (transformers and datasets). Importing this package
imports neither (nor numpy or torch): each is used only when you hand it one of its objects.

* `parse_response(tokenizer, response, prefix=..., tools=..., response_template=...)` and
  `get_response_parser(tokenizer, prefix=..., ...)`: drop-ins for transformers 5.24.0's
  `tokenizer.parse_response` / `tokenizer.get_response_parser` (strings, batches, token ids, numpy
  arrays, torch tensors; the same errors), parsing with chatparse. When the tokenizer has no
  `response_template`, the catalog's is used (`response_template_for`).
* `install(obj)` / `uninstall(obj)`: make an existing tokenizer, processor or text-generation
  pipeline use chatparse (a chat pipeline then returns the parsed assistant message).
* `ResponseStreamer` (parser events) and `ChatDeltaStreamer` (Chat Completions deltas): streamers
  for `model.generate(streamer=...)`, iterable from another thread.
* `prepare_history` / `apply_chat_template`: parsed messages rendered back through the chat template.
* `parse_dataset` / `RowParser`: parse a column of stored generations (datasets, Ray Data, Spark).

>>> from chatparse.hf import parse_response
>>> class Tok:  # a transformers tokenizer in real use
...     name_or_path, chat_template, response_template = "Qwen/Qwen3-8B", None, None
>>> parse_response(Tok(), ["Hi<|im_end|>", "<think>a</think>b<|im_end|>"], prefix="")
[{'role': 'assistant', 'content': 'Hi'}, {'role': 'assistant', 'reasoning_content': 'a', 'content': 'b'}]
"""

from ._dataset import RowParser, parse_dataset
from ._decode import IncrementalDecoder
from ._history import apply_chat_template, prepare_history
from ._install import Installation, install, installation, is_installed, uninstall
from ._stream import ChatDeltaStreamer, ResponseStreamer
from ._tokenizer import catalog_name_for, get_response_parser, parse_response, response_template_for

__all__ = [
    "ChatDeltaStreamer",
    "IncrementalDecoder",
    "Installation",
    "ResponseStreamer",
    "RowParser",
    "apply_chat_template",
    "catalog_name_for",
    "get_response_parser",
    "install",
    "installation",
    "is_installed",
    "parse_dataset",
    "parse_response",
    "prepare_history",
    "response_template_for",
    "uninstall",
]
