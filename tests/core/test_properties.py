"""Invariants of the streaming parser, for every template, text and chunking (hypothesis).

* streamed final message == one-shot message (or the same error);
* events are well-formed: open, chunks, close or malformed, no nesting, valid offsets;
* a region's chunks concatenate to its raw body (`input_text[open.end:close.start]`), so no byte of
  a delimiter ever reaches a chunk;
* nothing emitted is ever retracted: the normalised event stream of any chunking equals the
  one-shot one (llama.cpp's feed-every-prefix check, one character at a time);
* text is held back only while a delimiter could still start there (checked exactly for literal
  templates: the held tail is a proper prefix of a watched literal);
* arbitrary input only raises documented exceptions.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import chatparse
from tests.core import strategies as S

SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)

DOCUMENTED = (ValueError, KeyError)


def _load(template: dict) -> Any:
    try:
        return chatparse.load_response_template(template)
    except ValueError:
        return None


def _one_shot(template: Any, prefix: str, text: str) -> tuple[str, Any]:
    try:
        return ("ok", chatparse.parse_response(text, template, prefix=prefix))
    except DOCUMENTED as e:
        return ("err", type(e))


def _stream(
    template: Any, prefix: str, chunks: list[str]
) -> tuple[chatparse.ResponseParser, list[dict], Any]:
    p = chatparse.ResponseParser(template, prefix=prefix)
    events = list(p.initial_events)
    for c in chunks:
        events += p.feed(c)
    events += p._end()  # finalize() = _end() + required check + _finish(); keep the events on error
    try:
        p._check_required(events)
    except ValueError as e:
        return p, events, ("err", type(e))
    return p, events, ("ok", p._finish())


def _streamed_outcome(events: list[dict], outcome: tuple[str, Any]) -> tuple[str, Any]:
    for e in events:
        if e["type"] == "region_malformed":
            return ("err", type(e["error"]))
    return outcome


def check_events(p: chatparse.ResponseParser, events: list[dict], prefix_len: int) -> None:
    text = p.input_text
    open_ev: dict | None = None
    chunks: list[str] = []
    last = 0
    for e in events:
        t = e["type"]
        if t == "region_open":
            assert open_ev is None, "nested region"
            assert 0 <= e["start"] <= e["end"] <= len(text)
            assert e["start"] >= last
            open_ev, chunks, last = e, [], e["end"]
        elif t == "region_chunk":
            assert open_ev is not None and e["field"] == open_ev["field"]
            assert isinstance(e["dirty"], bool) and e["text"]
            chunks.append(e["text"])
        else:
            assert t in ("region_close", "region_malformed")
            assert open_ev is not None and e["field"] == open_ev["field"]
            assert open_ev["end"] <= e["start"] <= e["end"] <= len(text)
            body = text[open_ev["end"] : e["start"]]
            # Prefix characters released after the prefix pass are not re-emitted (D20).
            if open_ev["end"] < prefix_len:
                # Prefix characters held at the end of the prefix pass and released later are not
                # re-emitted (D20): the chunks are the body minus one run ending at the prefix end.
                cut = min(len(body), prefix_len - open_ev["end"])
                joined = "".join(chunks)
                assert any(joined == body[:k] + body[cut:] for k in range(cut + 1)), (joined, body, cut)
            else:
                assert "".join(chunks) == body
            if t == "region_close":
                assert isinstance(e["complete"], bool)
            open_ev, last = None, e["end"]
    assert open_ev is None, "region left open after finalize"


def normalise(events: list[dict]) -> list[tuple]:
    out: list[tuple] = []
    for e in events:
        t = e["type"]
        if t == "region_chunk":
            if out and out[-1][0] == "chunk" and out[-1][1] == e["field"]:
                out[-1] = ("chunk", e["field"], out[-1][2] + e["text"])
            else:
                out.append(("chunk", e["field"], e["text"]))
        elif t == "region_open":
            out.append(
                ("open", e["field"], e["start"], e["end"], json.dumps(e.get("captures"), sort_keys=True))
            )
        elif t == "region_close":
            out.append(("close", e["field"], e["start"], e["end"], repr(e["value"]), e["complete"]))
        else:
            out.append(("malformed", e["field"], e["start"], e["end"], type(e["error"]).__name__))
    return out


@SETTINGS
@given(S.chunked_cases())
def test_stream_equals_one_shot_and_events_are_well_formed(case: tuple[dict, str, str, list[str]]) -> None:
    template, prefix, text, chunks = case
    t = _load(template)
    assume(t is not None)
    expected = _one_shot(t, prefix, text)
    p, events, outcome = _stream(t, prefix, chunks)
    assert _streamed_outcome(events, outcome) == expected
    prefix_len = len(t.truncate_past_last_anchor(prefix)) if prefix else 0
    check_events(p, events, prefix_len)
    assert "".join(chunks) == p.input_text[prefix_len:]


@SETTINGS
@given(S.template_cases())
def test_one_character_at_a_time_never_retracts(case: tuple[dict, str, str]) -> None:
    template, prefix, text = case
    t = _load(template)
    assume(t is not None)
    _, whole, _ = _stream(t, prefix, [text])
    _, single, _ = _stream(t, prefix, list(text))
    # The prefix pass is the same; text released later never differs from the one-shot release.
    assert normalise(single) == normalise(whole)


def _literal_watch(t: Any, parser: chatparse.ResponseParser) -> list[str] | None:
    lits: list[str] = []
    for w in parser._watch().entries:
        d = w.delimiter
        if d.literals is None:
            return None
        lits += d.literals
    return lits


@SETTINGS
@given(S.template_cases())
def test_literal_hold_back_is_minimal(case: tuple[dict, str, str]) -> None:
    template, prefix, text = case
    t = _load(template)
    assume(t is not None)
    p = chatparse.ResponseParser(t, prefix=prefix)
    for ch in text:
        p.feed(ch)
        lits = _literal_watch(t, p)
        if lits is None:
            continue
        held = p.input_text[p._pos :]
        if held:
            assert any(lit.startswith(held) and lit != held for lit in lits), (held, lits)


ZERO_WIDTH_TEMPLATES = [
    {"start_anchor": "S", "fields": {"x": {"open_pattern": "(?=q)", "close_pattern": "(?=q)"}}},  # D5
    {"start_anchor": "S", "fields": {"c": {"close_pattern": "(?=z)"}}},  # D6
    {
        "start_anchor": "S",
        "fields": {
            "t": {"open_pattern": r"(?=\[)", "close_pattern": r"(?=\[)|\]"},
            "c": {"close_pattern": "(?=z)|$"},
        },
    },
]


@SETTINGS
@given(st.sampled_from(ZERO_WIDTH_TEMPLATES), st.text("qzab[] ", max_size=12), st.data())
def test_zero_width_delimiters_terminate_and_lose_nothing(
    template: dict, text: str, data: st.DataObject
) -> None:
    expected = chatparse.parse_response(text, template, prefix="")
    chunks = data.draw(S.chunkings(text))
    p, events, outcome = _stream(template, "", chunks)
    assert outcome == ("ok", expected)
    check_events(p, events, 0)
    # Every character outside delimiters is in some region body, or in the null sink.
    covered = sum(len(e["text"]) for e in events if e["type"] == "region_chunk")
    delims = sum(e["end"] - e["start"] for e in events if e["type"] in ("region_open", "region_close"))
    assert covered + delims <= len(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.templates(), st.text(max_size=60), st.binary(max_size=40))
def test_arbitrary_input_raises_only_documented_exceptions(template: dict, text: str, raw: bytes) -> None:
    t = _load(template)
    assume(t is not None)
    noise = raw.decode("utf-8", errors="replace")
    for s in (text, noise, text + noise):
        with contextlib.suppress(*DOCUMENTED):
            chatparse.parse_response(s, t, prefix=noise)
        # Streaming never raises for bad content; only finalize() may (required fields).
        p = chatparse.ResponseParser(t, prefix=noise)
        for i in range(0, len(s), 3):
            p.feed(s[i : i + 3])
        with contextlib.suppress(chatparse.RequiredFieldsMissing):
            p.finalize()


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=5), c),
        max_leaves=12,
    )
)
def test_malformed_templates_raise_value_error(spec: Any) -> None:
    for candidate in (
        spec,
        {"fields": spec, "start_anchor": "A"},
        {"fields": {"f": spec}, "start_anchor": "A"},
    ):
        with contextlib.suppress(ValueError):
            chatparse.load_response_template(candidate)


@pytest.mark.parametrize(
    "bad", ['{"a": ', '{"a": "\\ud800"}', "[" * 5000 + "]" * 5000, '{"a": 1e999}', "\x01\x02"]
)
def test_malformed_json_is_a_region_error(bad: str) -> None:
    tpl = {
        "start_anchor": "A",
        "fields": {"tool": {"open": "<c>", "close": "</c>", "content": "json"}, "content": {}},
    }
    p = chatparse.ResponseParser(tpl, prefix="")
    events = p.feed(f'hi <c>{bad}</c> after <c>{{"ok": 1}}</c>')
    msg, final = p.finalize()
    kinds = [e["type"] for e in events + final]
    assert msg["tool"] == {"ok": 1}
    if "region_malformed" in kinds:
        with pytest.raises(ValueError):
            chatparse.parse_response(f"<c>{bad}</c>", tpl, prefix="")
