"""TransformersRuntime: a tiny random-weight Llama built in the test, with a byte-level tokenizer
built with `tokenizers`; each step's output is forced by a logits processor that replays a
recorded output token by token (then the end-of-turn token). Needs torch: CI runs these in
`.ci/steps/torch.sh` (CHATPARSE_REQUIRE_TORCH=1 turns the skip into a failure)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from chatparse.runtime import Hooks, TransformersRuntime, arun_turn, run_turn, stream_turn

from ..server.conftest import QWEN_TEMPLATE
from .helpers import (
    ANSWER,
    CALL,
    INVALID,
    MALFORMED,
    STEPS,
    UNKNOWN,
    UNKNOWN_ANSWER,
    check_events,
    get_weather,
)

if os.environ.get("CHATPARSE_REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip("torch", reason="needs torch (CI runs these in .ci/steps/torch.sh)")

import transformers  # noqa: E402

SPECIALS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
]
USER = [{"role": "user", "content": "Weather in Paris?"}]


def build_tokenizer() -> Any:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())  # one token per byte: any text can be spelled
    backend = Tokenizer(models.BPE({c: i for i, c in enumerate(alphabet)}, []))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=QWEN_TEMPLATE,
        name_or_path="tiny/chatml-random",
    )


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer: Any) -> Any:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    return transformers.LlamaForCausalLM(config).eval()


class Force(transformers.LogitsProcessor):
    """Replays `text` token by token from the first generated position, then the end-of-turn token."""

    def __init__(self, tokenizer: Any, text: str) -> None:
        self.target = tokenizer.encode(text, add_special_tokens=False)
        self.eos = tokenizer.eos_token_id
        self.start: int | None = None
        self.calls = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.calls += 1
        if self.start is None:
            self.start = input_ids.shape[-1]
        i = input_ids.shape[-1] - self.start
        token = self.target[i] if i < len(self.target) else self.eos
        forced = torch.full_like(scores, float("-inf"))
        forced[:, token] = 0.0
        return forced


def forced(tokenizer: Any, outputs: list[str]) -> Any:
    """Per-step options: a fresh forcing processor replaying outputs[step - 1]."""
    return lambda step, history: {
        "logits_processor": [Force(tokenizer, outputs[step - 1].removesuffix("<|im_end|>"))]
    }


class Recording:
    """The real model, with the keyword arguments of each generate() call recorded."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.calls: list[dict[str, Any]] = []

    def generate(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self._model.generate(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def test_the_forcing_replays_exactly(tokenizer: Any, model: Any) -> None:
    text = CALL.removesuffix("<|im_end|>")
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.convert_tokens_to_ids("<tool_call>") in ids  # markers are single tokens
    rt = TransformersRuntime(model, tokenizer)
    g = rt.generate(USER, tools=[get_weather], options={"logits_processor": [Force(tokenizer, text)]})
    assert g.raw_text == CALL  # the forced text, then the end-of-turn token, special tokens kept
    assert g.tool_calls[0].arguments == {"city": "Paris"} and g.parser == "template:qwen3"


def test_full_loop_with_a_forced_model(tokenizer: Any, model: Any) -> None:
    rec = Recording(model)
    prompts: list[str] = []
    rt = TransformersRuntime(
        rec, tokenizer, hooks=Hooks(on_prompt_assembled=lambda p: prompts.append(p.prompt))
    )
    events = list(stream_turn(rt, USER, tools=[get_weather], options=forced(tokenizer, STEPS)))
    check_events(events)
    r = events[-1].result
    assert r.finish_reason == "stop" and r.steps == 5
    assert [m["role"] for m in r.new_messages] == [
        "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert r.new_messages[0]["reasoning_content"] == "The user wants the weather in Paris."
    assert r.results[0].content == "Sunny in Paris, 21 °C"
    assert r.results[1].content == UNKNOWN_ANSWER
    assert r.new_messages[5]["content"].startswith("Your tool call could not be parsed")
    assert "missing required property 'city'" in r.results[2].content
    assert (
        r.content == "It is sunny in Paris, 21 °C."
        and r.message["reasoning_content"] == "I have the forecast."
    )
    assert len(rec.calls) == 5 and len(prompts) == 5
    assert "<tool_response>\nSunny in Paris, 21 °C\n</tool_response>" in prompts[1]
    assert UNKNOWN_ANSWER in prompts[2] and '"arguments": {"city": "Paris"}' in prompts[1]


SAMPLERS = {
    "greedy": ({}, {"do_sample": False}, ("temperature", "top_k", "top_p")),
    "top-k": (
        {"sampler": "top-k", "top_k": 5},
        {"do_sample": True, "temperature": 0.7, "top_k": 5, "top_p": 1.0},
        (),
    ),
    "top-p": (
        {"sampler": "top-p", "top_p": 0.5},
        {"do_sample": True, "temperature": 0.7, "top_p": 0.5, "top_k": 0},
        (),
    ),
}


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_options_mapping_on_the_generate_call(tokenizer: Any, model: Any, sampler: str) -> None:
    options, sent, absent = SAMPLERS[sampler]
    rec = Recording(model)
    rt = TransformersRuntime(rec, tokenizer)
    g = rt.generate(
        USER,
        options={**options, "max_tokens": 40, "stop": ["zzz"], "logits_processor": [Force(tokenizer, "Hi.")]},
    )
    assert g.content == "Hi." and g.finish_reason == "stop"
    kwargs = rec.calls[-1]
    for key, value in sent.items():
        assert kwargs[key] == value
    for key in absent:
        assert key not in kwargs
    assert (
        kwargs["max_new_tokens"] == 40
        and kwargs["stop_strings"] == ["zzz"]
        and kwargs["tokenizer"] is tokenizer
    )
    # native fallbacks: max_new_tokens, and do_sample (True: top-p)
    rt.generate(
        USER, options={"max_new_tokens": 9, "do_sample": True, "logits_processor": [Force(tokenizer, "Hi.")]}
    )
    kwargs = rec.calls[-1]
    assert kwargs["max_new_tokens"] == 9 and kwargs["do_sample"] is True and kwargs["top_p"] == 0.95


def test_options_take_effect(tokenizer: Any, model: Any) -> None:
    rt = TransformersRuntime(model, tokenizer)
    text = "It is sunny and warm today in Paris."
    g = rt.generate(USER, options={"max_tokens": 6, "logits_processor": [Force(tokenizer, text)]})
    assert g.finish_reason == "length" and g.usage["completion_tokens"] == 6 and g.content == "It is"
    s = rt.stream(USER, options={"stop": [" warm"], "logits_processor": [Force(tokenizer, text)]})
    deltas = list(s)
    assert s.result.content == "It is sunny and" and s.result.finish_reason == "stop"
    assert "warm" not in "".join(d.get("content", "") for d in deltas)  # the stop string never streams

    # sampling with a seed is reproducible (no forcing: the random model's own distribution)
    def sample(seed: int) -> str:
        return rt.generate(
            USER,
            options={"sampler": "top-k", "top_k": 50, "temperature": 1.5, "seed": seed, "max_tokens": 12},
        ).raw_text

    assert sample(3) == sample(3) and sample(3) != sample(4)


def test_enable_thinking_reaches_the_chat_template(tokenizer: Any, model: Any) -> None:
    prompts: list[str] = []
    rt = TransformersRuntime(
        model, tokenizer, hooks=Hooks(on_prompt_assembled=lambda p: prompts.append(p.prompt))
    )
    g = rt.generate(USER, options={"logits_processor": [Force(tokenizer, "Hi.")]})
    assert prompts[-1].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and g.content == "Hi."
    g = rt.generate(
        USER,
        options={
            "enable_thinking": True,
            "logits_processor": [Force(tokenizer, "<think>\nhm\n</think>\n\nHi.")],
        },
    )
    assert prompts[-1].endswith("<|im_start|>assistant\n") and (g.reasoning, g.content) == ("hm", "Hi.")


def test_from_pretrained_reports_loading(tmp_path: Path, tokenizer: Any, model: Any) -> None:
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    phases: list[tuple[str, float | None]] = []
    rt = TransformersRuntime.from_pretrained(
        str(tmp_path),
        model_id="tiny/chatml-random",
        hooks=Hooks(on_lifecycle=lambda r: phases.append((r.phase, r.progress))),
    )
    assert phases == [("loading", 0.0), ("compiling", None), ("loading", 1.0), ("ready", None)]
    g = rt.generate(
        USER,
        tools=[get_weather],
        options={"logits_processor": [Force(tokenizer, UNKNOWN.removesuffix("<|im_end|>"))]},
    )
    assert g.tool_calls[0].name == "get_time" and g.report["unknown_tools"] == [
        {"index": 0, "name": "get_time"}
    ]
    errors = []
    with pytest.raises(OSError):
        TransformersRuntime.from_pretrained(str(tmp_path / "missing"), hooks=Hooks(on_error=errors.append))
    assert errors and errors[0].phase == "error"


def test_closing_a_stream_stops_generate(tokenizer: Any, model: Any) -> None:
    force = Force(tokenizer, "x" * 400)
    rt = TransformersRuntime(model, tokenizer)
    s = rt.stream(USER, options={"logits_processor": [force], "max_tokens": 400})
    next(s)
    s.close()
    assert force.calls < 400  # the generate() thread was stopped, not run to the end


def test_observation_and_async(tokenizer: Any, model: Any) -> None:
    seen: list[Any] = []
    rt = TransformersRuntime(model, tokenizer, hooks=Hooks(on_raw_generation=seen.append))
    sync = run_turn(rt, USER, tools=[get_weather], options=forced(tokenizer, [MALFORMED, ANSWER]))
    assert seen[0].raw_text == MALFORMED and seen[0].tool_calls == []
    assert any(e["type"] == "region_malformed" for e in seen[0].events)
    result = asyncio.run(
        arun_turn(rt, USER, tools=[get_weather], options=forced(tokenizer, [INVALID, ANSWER]))
    )
    assert result.results[0].error == "invalid_arguments" and result.content == sync.content


def test_observation_on_the_auto_path(tokenizer: Any, model: Any) -> None:
    """`template="auto"`: template-less detection, and the observer gets its region events."""
    from ..detect.helpers import check_region_events

    seen: list[Any] = []
    rt = TransformersRuntime(model, tokenizer, template="auto", hooks=Hooks(on_raw_generation=seen.append))
    result = run_turn(rt, USER, tools=[get_weather], options=forced(tokenizer, [CALL, MALFORMED, ANSWER]))
    assert result.results[0].name == "get_weather" and result.content == "It is sunny in Paris, 21 °C."
    call, bad, answer = seen
    assert call.parser == "auto:hermes" and call.input_text.endswith(call.raw_text)
    for obs in seen:
        check_region_events(obs.events, obs.input_text)
    (close,) = [e for e in call.events if e["type"] == "region_close" and e["field"] == "tool_calls"]
    assert (
        call.input_text[close["start"] : close["end"]] == "</tool_call>" and close["recognizer"] == "hermes"
    )
    assert close["value"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert bad.tool_calls == [] and [
        e["recognizer"] for e in bad.events if e["type"] == "region_malformed"
    ] == ["hermes"]
    assert [e["field"] for e in answer.events if e["type"] == "region_open"] == ["reasoning", "content"]
