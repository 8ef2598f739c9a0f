"""The turn layer: one agent turn on any runtime, with one shared contract.

* `GenerationOptions`: one vocabulary for the generation knobs (`max_tokens`, `sampler`,
  `temperature`, `top_k`, `top_p`, `seed`, `enable_thinking`, `stop`), mapped by each adapter
  onto its runtime; the canonical name wins over a runtime's native name; greedy sends no sampler
  knobs; `enable_thinking` always reaches the chat template.
* Adapters: `TransformersRuntime` (a local transformers model), `LlamaCppRuntime` (a local GGUF
  through `llama-cpp-python`), `OpenAIRuntime` (any OpenAI-compatible server; native
  `tool_calls` trusted), `OllamaRuntime` (Ollama's native chat API), and `ReplayRuntime`
  (recorded outputs, for tests and examples). Local runtimes' text is parsed with the model's
  response template from `chatparse.catalog` (or by `chatparse.detect` when none is known); on
  the native-API adapters, `local_tool_call_parser` recovers calls left in the content, only when
  the provider returned none.
* `Hooks`: lifecycle reports (`loading` with progress, `compiling`, `ready`, `generating`,
  `complete`, `error`) and observers (`on_raw_generation`, `on_prompt_assembled`); a raising
  hook never aborts anything, and no hooks means no work.
* `ToolRegistry` and `run_turn` / `arun_turn` / `stream_turn` / `astream_turn`: the tool loop,
  which answers every call (unknown tools and invalid arguments included) so the model can correct
  itself, with an authorization hook.

>>> from chatparse.runtime import ReplayRuntime, run_turn
>>> def get_weather(city: str) -> str:
...     return f"Sunny in {city}"
>>> runtime = ReplayRuntime([
...     '<tool_call>\\n{"name": "get_weather", "arguments": {"city": "Paris"}}\\n</tool_call><|im_end|>',
...     "It is sunny in Paris.<|im_end|>",
... ], model="Qwen/Qwen3-8B")
>>> result = run_turn(runtime, [{"role": "user", "content": "Weather in Paris?"}], tools=[get_weather])
>>> [m["role"] for m in result.new_messages], result.content
(['assistant', 'tool', 'assistant'], 'It is sunny in Paris.')

See `docs/runtime.md`.
"""

from ._base import AsyncGenerationStream, GenerationError, GenerationStream, Runtime
from ._generation import Generation, ParseContext, ToolCall, ToolParseResult
from ._hooks import PHASES, Hooks, LifecycleReport, PromptAssembled, RawGeneration
from ._llamacpp import LlamaCppRuntime
from ._ollama import OllamaRuntime
from ._openai import OpenAIRuntime
from ._options import DEFAULTS, SAMPLERS, GenerationOptions, ResolvedOptions
from ._replay import ReplayRuntime
from ._tools import Tool, ToolRegistry, ToolResult, not_found_message, validate_arguments
from ._transformers import TransformersRuntime
from ._turn import (
    ContentDelta,
    ReasoningDelta,
    StepFinished,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
    TurnFinished,
    TurnResult,
    arun_turn,
    astream_turn,
    run_turn,
    stream_turn,
)

__all__ = [
    "DEFAULTS",
    "PHASES",
    "SAMPLERS",
    "AsyncGenerationStream",
    "ContentDelta",
    "Generation",
    "GenerationError",
    "GenerationOptions",
    "GenerationStream",
    "Hooks",
    "LifecycleReport",
    "LlamaCppRuntime",
    "OllamaRuntime",
    "OpenAIRuntime",
    "ParseContext",
    "PromptAssembled",
    "RawGeneration",
    "ReasoningDelta",
    "ReplayRuntime",
    "ResolvedOptions",
    "Runtime",
    "StepFinished",
    "Tool",
    "ToolCall",
    "ToolCallEvent",
    "ToolParseResult",
    "ToolRegistry",
    "ToolResult",
    "ToolResultEvent",
    "TransformersRuntime",
    "TurnEvent",
    "TurnFinished",
    "TurnResult",
    "arun_turn",
    "astream_turn",
    "not_found_message",
    "run_turn",
    "stream_turn",
    "validate_arguments",
]
