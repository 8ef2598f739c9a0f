"""`ResponseStreamer` / `ChatDeltaStreamer` driven as `generate()` drives them, without torch.

`generate()` calls `put(prompt ids of shape (1, n))`, then `put(new ids of shape (1,))` per step
(several at once with assisted decoding), then `end()`. Here the same calls come from a list (the
real `generate()` loop is in test_generate.py). For every family case the streamer's message equals
`chatparse.hf.parse_response` of the generated ids with the prompt ids as prefix, whatever the
grouping of the ids, and the events are well formed.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import catalog, hf
from chatparse.openai import merge_deltas, parse_message

from .helpers import CASES, FAMILIES, encode, family_cases, family_tokenizer


def drive(streamer, prompt_ids, ids, sizes=None):
    streamer.put([prompt_ids])  # the prompt, as a (1, n) batch
    i, k = 0, 0
    while i < len(ids):
        n = sizes[k % len(sizes)] if sizes else 1
        streamer.put([ids[i : i + n]] if n > 1 else ids[i : i + 1])
        i, k = i + n, k + 1
    streamer.end()


def expected_outcome(tok, text, prompt_ids, tools):
    try:
        return hf.parse_response(tok, text, prefix=prompt_ids, tools=tools), None
    except ValueError as e:
        return None, e


def check_events(events):
    """Each region opens once, then chunks, then closes (or is malformed); offsets never decrease."""
    open_field = None
    last = 0
    for e in events:
        if "start" in e:
            assert e["start"] >= last or e["type"] == "region_open"
            last = max(last, e["start"])
        if e["type"] == "region_open":
            assert open_field is None
            open_field = e["field"]
        elif e["type"] == "region_chunk":
            assert e["field"] == open_field and isinstance(e["text"], str)
        else:
            assert e["type"] in ("region_close", "region_malformed") and e["field"] == open_field
            open_field = None
    assert open_field is None


def family_inputs(case):
    tok = family_tokenizer(case["template"])
    return tok, encode(tok, case["prefix"]), encode(tok, case["text"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_response_streamer_equals_parse_response(case):
    tok, prompt_ids, ids = family_inputs(case)
    s = hf.ResponseStreamer(tok, tools=case["tools"])
    drive(s, prompt_ids, ids)
    events = list(s)
    check_events(events)
    assert s.prefix == case["prefix"] and s.text == case["text"] and s.token_ids == ids
    message, error = expected_outcome(tok, case["text"], prompt_ids, case["tools"])
    if error is None:
        assert s.error is None and s.message == message
    else:
        assert type(s.error) is type(error)
    if "\ufffd" not in case["text"]:
        assert not any("\ufffd" in e.get("text", "") for e in events)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_any_grouping_of_tokens_gives_the_same_message(case, sizes):
    tok, prompt_ids, ids = family_inputs(case)
    if not ids:
        return
    one = hf.ResponseStreamer(tok, tools=case["tools"])
    drive(one, prompt_ids, ids)
    grouped = hf.ResponseStreamer(tok, tools=case["tools"])
    drive(grouped, prompt_ids, ids, sizes)
    assert grouped.message == one.message and grouped.text == one.text
    assert type(grouped.error) is type(one.error)
    check_events(list(grouped))


def test_prompt_events_come_first_and_explicit_prefix_wins():
    case = next(c for c in CASES if c["id"] == "QWEN_JSON-prefilled-think")
    tok, prompt_ids, ids = family_inputs(case)
    s = hf.ResponseStreamer(tok)
    drive(s, prompt_ids, ids)
    events = list(s)
    assert events[0]["type"] == "region_open" and events[0]["field"] == "thinking"
    # an explicit prefix replaces the prompt generate() sends (which is still skipped)
    t = hf.ResponseStreamer(tok, prefix="")
    drive(t, encode(tok, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"), ids)
    assert t.prefix == "" and t.message == chatparse.parse_response(
        case["text"], FAMILIES["QWEN_JSON"], prefix=""
    )
    u = hf.ResponseStreamer(tok, prefix=prompt_ids)
    drive(u, [1, 2, 3], ids)
    assert u.message == s.message and u.prefix == case["prefix"]


def test_iterating_from_another_thread():
    case = next(c for c in CASES if c["id"] == "QWEN_JSON-doc")
    tok, prompt_ids, ids = family_inputs(case)
    reference = hf.ResponseStreamer(tok)
    drive(reference, prompt_ids, ids)
    expected_events = list(reference)
    s = hf.ResponseStreamer(tok, timeout=30)
    producer = threading.Thread(target=drive, args=(s, prompt_ids, ids))
    producer.start()
    got = list(s)
    producer.join()
    assert got == expected_events
    assert s.message == reference.message


def test_reuse_after_end_starts_a_new_message():
    tok = family_tokenizer("QWEN_JSON")
    s = hf.ResponseStreamer(tok)
    prompt = encode(tok, "<|im_start|>assistant\n")
    drive(s, prompt, encode(tok, "one<|im_end|>"))
    assert s.message["content"] == "one"
    drive(s, prompt, encode(tok, "<think>t</think>two<|im_end|>"))
    assert s.message == {"role": "assistant", "thinking": "t", "content": "two"}
    # both messages' events were queued, each ended by a stop
    assert [e["type"] for e in s][-1] == "region_close"
    assert [e["type"] for e in s][-1] == "region_close"


def test_streamer_errors():
    tok = family_tokenizer("QWEN_JSON")
    s = hf.ResponseStreamer(tok)
    s.put([[1, 2]])
    with pytest.raises(ValueError, match="batch size 1"):
        s.put([[1], [2]])
    with pytest.raises(ValueError, match="prefix= is required"):
        hf.ResponseStreamer(tok, skip_prompt=False)
    with pytest.raises(AttributeError, match="cannot create a response event stream"):
        hf.ResponseStreamer(family_tokenizer("QWEN_JSON", with_template=False), catalog=False)
    with pytest.raises(TypeError, match="token ids"):
        s.put("text")
    no_prompt = hf.ResponseStreamer(tok, skip_prompt=False, prefix="")
    for i in encode(tok, "Hi<|im_end|>"):
        no_prompt.put(i)
    no_prompt.end()
    assert no_prompt.message["content"] == "Hi"


def test_malformed_output_sets_error_and_keeps_the_rest():
    tok = family_tokenizer("QWEN_JSON")
    text = 'Hi <tool_call>\n{"name": "f", "arguments": {bad}}\n</tool_call><|im_end|>'
    s = hf.ResponseStreamer(tok)
    drive(s, encode(tok, "<|im_start|>assistant\n"), encode(tok, text))
    with pytest.raises(ValueError) as info:
        hf.parse_response(tok, text, prefix="<|im_start|>assistant\n")
    assert type(s.error) is type(info.value)
    assert s.message == {"role": "assistant", "content": "Hi"}
    assert any(e["type"] == "region_malformed" for e in s)


# ---------------------------------------------------------------------------------------- deltas

CATALOG_OF = {
    "QWEN_JSON": "qwen3",
    "QWEN_XML": "qwen3_xml",
    "GPT_OSS": "gpt_oss",
    "GEMMA4": "gemma4",
    "KIMI_K2": "kimi_k2",
}


@pytest.mark.parametrize("family", sorted(CATALOG_OF))
def test_chat_delta_streamer_equals_parse_message(family):
    template = catalog.get(CATALOG_OF[family])
    for case in family_cases(family):
        tok = family_tokenizer(family, with_template=False)
        tok.response_template = template
        prompt_ids, ids = encode(tok, case["prefix"]), encode(tok, case["text"])
        s = hf.ChatDeltaStreamer(tok, tools=case["tools"], id_factory=lambda: "call_x")
        drive(s, prompt_ids, ids)
        deltas = list(s)
        expected = parse_message(
            case["text"],
            template=template,
            prefix=case["prefix"],
            tools=case["tools"],
            id_factory=lambda: "call_x",
        )
        assert s.message == expected, case["id"]
        merged = merge_deltas(deltas)
        assert (merged.get("content") or None) == expected.get("content")
        assert merged.get("reasoning_content") == expected.get("reasoning_content")
        assert [c["function"] for c in merged.get("tool_calls", [])] == [
            c["function"] for c in expected.get("tool_calls", [])
        ]
        assert s.finish_reason == ("tool_calls" if expected.get("tool_calls") else "stop")


def test_chat_delta_streamer_finish_reason_from_eos():
    tok = family_tokenizer("QWEN_JSON", with_template=False, name_or_path="Qwen/Qwen3-8B")
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    prompt = encode(tok, "<|im_start|>assistant\n")
    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    stopped = hf.ChatDeltaStreamer(tok, eos_token_id=[eos])
    drive(stopped, prompt, encode(tok, call + "<|im_end|>"))
    assert stopped.finish_reason == "tool_calls" and len(stopped.message["tool_calls"]) == 1
    cut = hf.ChatDeltaStreamer(tok, eos_token_id=eos)
    drive(cut, prompt, encode(tok, call[:-6]))
    assert cut.finish_reason == "length" and "tool_calls" not in cut.message
    by_hand = hf.ChatDeltaStreamer(tok)
    by_hand.put([prompt])
    by_hand.put(encode(tok, "Hi"))
    by_hand.end(finish_reason="length")
    assert by_hand.finish_reason == "length" and by_hand.message["content"] == "Hi"
