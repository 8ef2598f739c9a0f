"""A real `generate()` loop and real text-generation pipelines, with torch on CPU.

The model is a tiny random-weight Llama built from a config; a logits processor forces its output
token by token to replay a recorded output of each family (tests/data/family_cases.json), so the
streamers see exactly what `generate()` hands them (the prompt first, then one token per step).
"""

from __future__ import annotations

import copy
import functools
import threading

import pytest

from .conftest import require_torch

torch = require_torch()

from transformers import (  # noqa: E402
    LlamaConfig,
    LlamaForCausalLM,
    LogitsProcessor,
    LogitsProcessorList,
    TextIteratorStreamer,
    pipeline,
)

from chatparse import catalog, hf  # noqa: E402
from chatparse.openai import parse_message  # noqa: E402

from .helpers import CASES, CHAT_TEMPLATES, FAMILIES, encode, family_cases, family_tokenizer  # noqa: E402


class Force(LogitsProcessor):
    """Make the model write `target` (token ids), whatever its weights say."""

    def __init__(self, target: list[int]) -> None:
        self.target = target
        self.start: int | None = None

    def __call__(self, input_ids, scores):
        if self.start is None:
            self.start = input_ids.shape[1]
        k = input_ids.shape[1] - self.start
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.target[min(k, len(self.target) - 1)]] = 0.0
        return forced


@functools.cache
def tiny_model(vocab_size: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    model.generation_config.do_sample = False
    return model


def generate(tok, prompt_ids, target, streamer, **kwargs):
    model = tiny_model(len(tok))
    with torch.no_grad():
        return model.generate(
            input_ids=torch.tensor([prompt_ids]),
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            max_new_tokens=len(target),
            logits_processor=LogitsProcessorList([Force(target)]),
            do_sample=False,
            streamer=streamer,
            **kwargs,
        )


def replay_cases():
    """The documentation case of every family; cut-off, unicode and prefilled outputs for a few.

    (Every case of every family goes through the same streamer, fed as generate() feeds it, in
    test_streamer.py; here the loop itself is real.)"""
    out = []
    for name in FAMILIES:
        kinds = ["doc"]
        if name in ("QWEN_JSON", "GPT_OSS", "DEEPSEEK_V31", "GEMMA4"):
            kinds += ["truncated-call", "unicode-content", "unicode-call", "prefilled-think"]
        for kind in kinds:
            found = next((c for c in family_cases(name) if c["id"] == f"{name}-{kind}"), None)
            if found is not None and found["text"]:
                out.append(found)
    return out


REPLAY = replay_cases()


@pytest.mark.parametrize("case", REPLAY, ids=[c["id"] for c in REPLAY])
def test_generate_streams_events_equal_to_the_one_shot_parse(case):
    tok = family_tokenizer(case["template"])
    prompt_ids, target = encode(tok, case["prefix"]), encode(tok, case["text"])
    streamer = hf.ResponseStreamer(tok, tools=case["tools"], timeout=60)
    worker = threading.Thread(target=generate, args=(tok, prompt_ids, target, streamer))
    worker.start()
    events = list(streamer)  # iterated here while generate() runs in the other thread
    worker.join()
    assert streamer.token_ids == target and streamer.text == case["text"]
    assert streamer.prefix == case["prefix"]
    try:
        expected = hf.parse_response(tok, target, prefix=prompt_ids, tools=case["tools"])
    except ValueError as e:
        assert type(streamer.error) is type(e)
    else:
        assert streamer.error is None and streamer.message == expected
    # the events are the parser's for the text generate() produced, token by token
    p = hf.get_response_parser(tok, prefix=case["prefix"], tools=case["tools"])
    replayed = list(p.initial_events)
    for piece in _pieces(tok, target):
        replayed += p.feed(piece)
    try:
        replayed += p.finalize()[1]
    except ValueError as e:
        replayed += getattr(e, "events", [])
    assert _comparable(events) == _comparable(replayed)


def _pieces(tok, ids):
    d = hf.IncrementalDecoder(tok)
    out = [d.push([i]) for i in ids] + [d.flush()]
    return [p for p in out if p]


def _comparable(events):
    return [{k: (type(v).__name__ if k == "error" else v) for k, v in e.items()} for e in events]


def test_generate_output_equals_text_iterator_streamer_text():
    case = next(c for c in CASES if c["id"] == "GPT_OSS-doc")
    tok = family_tokenizer("GPT_OSS")
    prompt_ids, target = encode(tok, case["prefix"]), encode(tok, case["text"])
    text_streamer = TextIteratorStreamer(tok, skip_prompt=True)
    generate(tok, prompt_ids, target, text_streamer)
    ours = hf.ResponseStreamer(tok)
    out = generate(tok, prompt_ids, target, ours)
    assert "".join(text_streamer) == ours.text == tok.decode(out[0, len(prompt_ids) :])


def test_chat_delta_streamer_with_generate_and_eos():
    tok = family_tokenizer("QWEN_JSON", with_template=False, name_or_path="Qwen/Qwen3-8B")
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    case = next(c for c in CASES if c["id"] == "QWEN_JSON-two-calls")
    prompt_ids, target = encode(tok, case["prefix"]), encode(tok, case["text"])
    streamer = hf.ChatDeltaStreamer(tok, tools=case["tools"], eos_token_id=eos, id_factory=lambda: "call_1")
    generate(tok, prompt_ids, target + [eos] * 3, streamer, eos_token_id=eos)
    deltas = list(streamer)
    expected = parse_message(
        case["text"],
        template=catalog.get("qwen3"),
        prefix=case["prefix"],
        tools=case["tools"],
        id_factory=lambda: "call_1",
    )
    assert streamer.message == expected and streamer.finish_reason == "tool_calls"
    assert sum(len(d.get("tool_calls", [])) for d in deltas) == 2
    # cut by max_new_tokens inside the second call: that call is dropped
    cut = hf.ChatDeltaStreamer(tok, tools=case["tools"], eos_token_id=eos, id_factory=lambda: "call_1")
    generate(tok, prompt_ids, target[:-4], cut)
    assert cut.finish_reason == "length" and len(cut.message.get("tool_calls", [])) < 2


# ---------------------------------------------------------------------------------------- pipelines


def chat_pipeline(tok):
    return pipeline("text-generation", model=tiny_model(len(tok)), tokenizer=tok, device="cpu")


def qwen_tokenizer(**attrs):
    return family_tokenizer(
        "QWEN_JSON",
        with_template=False,
        chat_template=(CHAT_TEMPLATES / "qwen3.jinja").read_text(encoding="utf-8"),
        **attrs,
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]
ANSWER = '<think>\nI need the weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n</tool_call><|im_end|>'
MESSAGES = [{"role": "user", "content": "Weather in Paris for 3 days?"}]


def _state(pipe):
    return {k: v for k, v in vars(pipe).items() if k != "call_count"}  # the pipeline counts its calls


def run_pipe(pipe, tok, inputs, answer=ANSWER, **kwargs):
    target = encode(tok, answer)
    return pipe(
        inputs,
        max_new_tokens=len(target),
        logits_processor=LogitsProcessorList([Force(target)]),
        do_sample=False,
        **kwargs,
    )


def test_chat_pipeline_returns_the_parsed_message_and_uninstall_restores_it():
    tok = qwen_tokenizer(name_or_path="Qwen/Qwen3-8B")
    pipe = chat_pipeline(tok)
    before = run_pipe(pipe, tok, MESSAGES, tools=TOOLS)
    # transformers without a template: the raw text as content (special tokens skipped)
    assert before[0]["generated_text"][-1] == {
        "role": "assistant",
        "content": tok.decode(encode(tok, ANSWER), skip_special_tokens=True),
    }
    pipe_state, tok_state = _state(pipe), dict(vars(tok))
    state = hf.install(pipe)
    assert state.kind == "pipeline" and state.template_source == "catalog:qwen3"
    out = run_pipe(pipe, tok, MESSAGES, tools=TOOLS)
    conversation = out[0]["generated_text"]
    assert conversation[:-1] == MESSAGES
    message = conversation[-1]
    prompt = tok.apply_chat_template(MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert message == hf.parse_response(tok, ANSWER, prefix=prompt, tools=TOOLS)
    assert message["reasoning_content"] == "I need the weather."
    # the tools given to the call coerce the arguments ("3" -> 3 for an integer parameter)
    assert message["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "days": 3}
    hf.uninstall(pipe)
    assert _state(pipe) == pipe_state and dict(vars(tok)) == tok_state
    assert run_pipe(pipe, tok, MESSAGES, tools=TOOLS) == before


def test_pipeline_other_inputs_are_unchanged_by_install():
    tok = qwen_tokenizer(name_or_path="Qwen/Qwen3-8B")
    pipe = chat_pipeline(tok)
    prefill = [*MESSAGES, {"role": "assistant", "content": "Let me"}]
    calls = [
        dict(inputs="Once upon a time"),
        dict(inputs="Once upon a time", return_full_text=False),
        dict(inputs="Once upon a time", skip_special_tokens=False),
        dict(inputs=MESSAGES, return_full_text=False),
        dict(inputs=prefill),
        dict(inputs=MESSAGES, return_tensors=True),
    ]
    before = [run_pipe(pipe, tok, **c) for c in calls]
    hf.install(pipe)
    after = [run_pipe(pipe, tok, **c) for c in calls]
    for c, b, a in zip(calls, before, after):
        assert a == b, c
    assert (
        isinstance(after[0][0]["generated_text"], str) and "<|im_end|>" not in after[0][0]["generated_text"]
    )
    hf.uninstall(pipe)


def test_pipeline_with_the_tokenizer_s_own_template_matches_transformers():
    tok = qwen_tokenizer()
    tok.response_template = copy.deepcopy(FAMILIES["QWEN_JSON"])
    pipe = chat_pipeline(tok)
    calls = [dict(inputs=MESSAGES, tools=TOOLS), dict(inputs="Once upon a time"), dict(inputs=MESSAGES)]
    before = [run_pipe(pipe, tok, **c) for c in calls]
    state = hf.install(pipe)
    assert state.template_source == "own"
    after = [run_pipe(pipe, tok, **c) for c in calls]
    assert after == before
    hf.uninstall(pipe)


def test_pipeline_batch_of_chats():
    tok = qwen_tokenizer(name_or_path="Qwen/Qwen3-8B")
    pipe = chat_pipeline(tok)
    hf.install(pipe)
    out = run_pipe(pipe, tok, [MESSAGES, MESSAGES], tools=TOOLS)
    assert len(out) == 2
    assert all(o[0]["generated_text"][-1]["tool_calls"][0]["function"]["name"] == "get_weather" for o in out)
    hf.uninstall(pipe)


def test_install_into_a_pipeline_whose_tokenizer_is_installed_keeps_it():
    tok = qwen_tokenizer(name_or_path="Qwen/Qwen3-8B")
    hf.install(tok)
    pipe = chat_pipeline(tok)
    hf.install(pipe)
    hf.uninstall(pipe)
    assert hf.is_installed(tok) and not hf.is_installed(pipe)
    hf.uninstall(tok)
