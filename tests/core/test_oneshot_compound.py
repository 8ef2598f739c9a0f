"""The call loop's compound step (`_oneshot._compound`: a call's closer and the next again step as
one `regex` match at the closer's lead) and its plain JSON values parsed from the text itself
(`_oneshot._direct_json`): the same messages and events as the streaming parser on call-dense
texts, where the plan accepts them only, and linear work, counted."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import _oneshot, catalog
from chatparse.openai import ChatParser, parse_message

from ..support.build import pure_only
from ..support.calls import F_TOOLS as TOOLS
from ..support.counting import calls_of
from . import strategies as cst
from .test_oneshot import assert_same, counting_fast

CATALOG = {name: catalog.get(name) for name in catalog.names()}


def _calls(t: Any) -> Any:
    """The `_Calls` of the template's `tool_calls` again step."""
    got = [a.calls for a in _oneshot.plan_for(t).again if a is not None and a.calls is not None]
    assert len(got) == 1
    return got[0]


def test_the_plan_takes_the_compound_step_where_it_is_proved() -> None:
    took = set()
    for name, spec in CATALOG.items():
        t = chatparse.load_response_template(spec)
        for a in _oneshot.plan_for(t).again:
            if a is not None and a.calls is not None and a.calls.compound is not None:
                took.add(name)
                # a literal-led closer searched in C and one joined again match, or a cursor
                # closer with a literal lead and a cursor opener decided by `match_here`; no run
                # of the again step's match that crosses the lead
                if a.calls.prefix is not None:
                    lead = a.calls.prefix
                    assert a.joined and not a.others
                else:
                    lead = a.calls.lead
                    assert lead and a.calls.free and a.direct
                assert a.source is not None
                assert all(run.match(lead).end() < len(lead) for run in a.look_runs)
    assert {"kimi_k2", "glm", "ling3", "qwen3_xml"} <= took, took
    kimi = _calls(chatparse.load_response_template(CATALOG["kimi_k2"]))
    assert kimi.apply is not None  # its plain JSON bodies: parsed from the text itself


def _compound_names() -> list[str]:
    out = []
    for name, spec in CATALOG.items():
        t = chatparse.load_response_template(spec)
        if any(
            a is not None and a.calls is not None and a.calls.compound for a in _oneshot.plan_for(t).again
        ):
            out.append(name)
    return sorted(out)


_TAGS = {  # (open, key, value, close) of the arg-tag families
    "glm": ("<tool_call>", "<arg_key>{}</arg_key>", "<arg_value>{}</arg_value>", "</tool_call>"),
    "ling3": ("<tool_call>", "<arg_key>{}</arg_key>", "<arg_value>{}</arg_value>", "</tool_call>"),
    "poolside_v1": ("<tool_call>", "<arg_key>{}</arg_key>", "<arg_value>{}</arg_value>", "</tool_call>"),
    "k2_horizon": (
        "<ifm|tool_call>",
        "<ifm|arg_key>{}</ifm|arg_key>",
        "<ifm|arg_value>{}</ifm|arg_value>",
        "</ifm|tool_call>",
    ),
}


def _tag_pieces(name: str) -> list[str]:
    opener, key, value, closer = _TAGS[name]
    args = key.format("a") + value.format("1")
    return [
        f"{opener}f{args}{closer}",
        f"{opener}f\n{args}\n{closer}\n",
        f"\n{opener}g{closer}",
        f"{opener}f{key.format('b')}{value.format('x' + closer + 'y')}{closer}",  # the closer in a value
        f"{opener}f{key.format('b')}{value.format('x')}",  # no closer
        f"{opener}f{args}{closer}  prose ",
        closer,
        opener,
        " ",
        "\n\n",
        "text",
    ]


def test_every_catalog_template_the_compound_step_takes_is_tested() -> None:
    assert _compound_names() == sorted({*_TAGS, "kimi_k2", "qwen3_xml"})


@pytest.mark.parametrize("name", sorted(_TAGS))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_catalog_call_runs_agree_with_streaming(name: str, data: st.DataObject) -> None:
    # The other catalog templates the compound step takes (kimi_k2 and qwen3_xml: above):
    # call-dense runs of their own calls, with the ways out of the call loop between them, and
    # texts of their vocabulary around them.
    spec = CATALOG[name]
    parts = data.draw(st.lists(st.sampled_from(_tag_pieces(name)), max_size=10), label="parts")
    around = data.draw(cst.texts_for(spec, max_pieces=3), label="around")
    tools = data.draw(st.sampled_from([None, TOOLS]), label="tools")
    text = "".join(parts)
    assert_same(text, spec, tools=tools)
    assert_same(around + text + around, spec, tools=tools)
    _same_message(text, spec, tools)


def _spec(opener: str, closer: str, guard: bool = True) -> dict:
    return {
        "start_anchor": "A",
        "fields": {
            "tool_calls": {
                "open_pattern": opener,
                "close_pattern": closer,
                "repeats": True,
                "content": "json",
                "content_args": {"close_outside_strings": True} if guard else {},
                "transform": {"type": "function", "function": "{content}"},
            },
            "content": {"close": "<end>"},
        },
    }


def test_the_compound_step_is_refused_where_a_run_can_cross_the_lead() -> None:
    # `[^x]*` holds all of `</c>`: a run an again step measured could reach past the next
    # closer, so the again steps keep measuring their runs one by one.
    t = chatparse.load_response_template(_spec("[^x]*<c>", "</c>"))
    calls = _oneshot.plan_for(t).again
    assert all(a is None or a.calls is None or a.calls.compound is None for a in calls)
    t = chatparse.load_response_template(_spec("\\s*<c>", "</c>"))
    assert _calls(t).compound is not None


def test_direct_json_needs_the_quote_guard_and_a_lead_no_json_can_continue() -> None:
    # Without the guard a scan from the body's start could run through a string past the closer
    # (and on to the end of the text); a lead a JSON text can continue (a digit) likewise.
    assert _calls(chatparse.load_response_template(_spec("<c>", "</c>"))).apply is not None
    assert _calls(chatparse.load_response_template(_spec("<c>", "</c>", guard=False))).apply is None
    assert _calls(chatparse.load_response_template(_spec("<c>", "1</c>"))).apply is None


_KIMI_OPEN = [
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_begin|> filler ",
    "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>",
    "<|tool_call_begin|> f <|tool_call_argument_begin|>",
    "<|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>",
    " \n<|tool_call_begin|>functions.f:2<|tool_call_argument_begin|>",
]
_KIMI_BODY = [
    '{"a": 1}',
    '{"a": "1", "b": "x"}',
    ' {"a": 2} ',
    '{"a": 3}\n',
    '{"b": "<|tool_call_end|>"}',  # the closer's lead inside a string: the loop leaves
    '{"b": "x\\"<|tool_call_end|>"}',  # an escape before it
    '{"b": "\\\\"}',
    '{"b": "',  # a string that is not closed
    "[1, 2",
    "1",
    "-",
    "tru",
    "NaN",
    "{bad}",
    '{"a": 1} x',
    '{"a": 1}{"a": 2}',
    "[" * 40 + "]" * 40,
    '"s"',
    "",
    "\u00e9",
]
_KIMI_CLOSE = [
    "<|tool_call_end|>",
    "<|tool_call_end|> between ",
    "<|tool_call_end|>\n",
    "<|tool_calls_section_end|>",
    "<|im_end|>",
    " prose ",
    "</think>",
    "<think>",
]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    parts=st.lists(
        st.tuples(st.sampled_from(_KIMI_OPEN), st.sampled_from(_KIMI_BODY), st.sampled_from(_KIMI_CLOSE)),
        max_size=8,
    ),
    tools=st.sampled_from([None, TOOLS]),
)
@example(parts=[(_KIMI_OPEN[2], _KIMI_BODY[0], _KIMI_CLOSE[0])] * 3, tools=TOOLS)
@example(parts=[(_KIMI_OPEN[2], b, _KIMI_CLOSE[0]) for b in _KIMI_BODY], tools=TOOLS)
def test_kimi_call_dense_texts_agree_with_streaming(parts: list[tuple[str, str, str]], tools: Any) -> None:
    text = "".join(a + b + c for a, b, c in parts)
    spec = CATALOG["kimi_k2"]
    assert_same(text, spec, tools=tools)
    assert_same("<|tool_calls_section_begin|>" + text, spec, tools=tools)
    _same_message(text, spec, tools)


_C_BODY = ['{"name": "f", "arguments": {"a": 1}}', '{"name": "f"} ', '{"x": "</c>"}', "[1", " 2", "{}"]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from(["<c>", " <c>", "\n\n<c>", "x<c>", "a<c>", ""]),
            st.sampled_from(_C_BODY),
            st.sampled_from(["</c>", "</c>\n", "</c>x", "<end>", ""]),
        ),
        max_size=8,
    ),
    closer=st.sampled_from(
        ["</c>", "</c>(?=\\n)", "</c>(?:\\n|$)", "</c>(?:[^<]{0,3}(?=<c>))?", "</c>(?:a(?=<))?"]
    ),
)
@example(parts=[("a<c>", "{}", "</c>"), ("a<c>", "{}", "</c>")], closer="</c>(?:a(?=<))?")
def test_generic_compound_texts_agree_with_streaming(parts: list[tuple[str, str, str]], closer: str) -> None:
    # Literal-led closers that fail at some leads, or that take a bounded tail before the next
    # opener (the greedy optional part the atomic group keeps), with `\\s*`-led openers.
    text = "".join(a + b + c for a, b, c in parts)
    # (`a<c>` after `</c>(?:a(?=<))?`: the closer's own match takes the `a`, the opener then fails
    # there and the loop leaves; a closer chosen for the opener after it would give the `a` back)
    for opener in ("<c>", "\\s*<c>", "a<c>"):
        spec = _spec(opener, closer)
        assert _calls(chatparse.load_response_template(spec)).compound is not None
        assert_same(text, spec)
        assert_same(text, spec, tools=TOOLS)


def _ids() -> Any:
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


def _same_message(text: str, spec: dict, tools: Any) -> None:
    def outcome(fn: Any) -> Any:
        try:
            return fn()
        except (ValueError, TypeError, KeyError) as e:
            return ("raised", type(e).__name__, str(e))

    def streamed() -> Any:
        p = ChatParser(template=spec, prefix="", tools=tools, id_factory=_ids(), missing_anchor="ignore")
        p.feed(text)
        return p.finish("stop")[0]

    fast = outcome(
        lambda: parse_message(
            text, template=spec, prefix="", tools=tools, id_factory=_ids(), missing_anchor="ignore"
        )
    )
    assert fast == outcome(streamed), text


_XML_OPEN = [
    "<tool_call>\n<function=f>\n",
    "\n<tool_call>\n<function=g>",
    "<function=f>",
    "  <function=f x>\n",
    "<tool_call><tool_call>\n<function=f>\n",
    "<function=<function=f>",
    "<think>",
    "",
]
_XML_BODY = [
    "<parameter=a>\n1\n</parameter>\n",
    "<parameter=b>\nx</function>y\n</parameter>\n",
    "<parameter=a>\n2\n</parameter>\n<parameter=b>\nz\n</parameter>\n",
    "<parameter=a>3",
    "",
    " \n ",
    "text",
]
_XML_CLOSE = [
    "</function>\n</tool_call>\n",
    "</function>\n</tool_call>",
    "</function>\n",
    "</function>",
    "</function> </tool_call>\n\n",
    "</tool_call>",
    "<|im_end|>",
    " prose ",
    "</think>",
]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    parts=st.lists(
        st.tuples(st.sampled_from(_XML_OPEN), st.sampled_from(_XML_BODY), st.sampled_from(_XML_CLOSE)),
        max_size=8,
    ),
    tools=st.sampled_from([None, TOOLS]),
)
@example(parts=[(_XML_OPEN[0], _XML_BODY[0], _XML_CLOSE[0])] * 3, tools=TOOLS)
@example(parts=[(_XML_OPEN[0], b, c) for b in _XML_BODY for c in _XML_CLOSE], tools=TOOLS)
def test_qwen3_xml_call_dense_texts_agree_with_streaming(
    parts: list[tuple[str, str, str]], tools: Any
) -> None:
    # The cursor closer and opener of the compound step, its exits (the closer failing at the
    # lead, the other top delimiters' lookahead, an opener that does not follow).
    text = "".join(a + b + c for a, b, c in parts)
    spec = CATALOG["qwen3_xml"]
    assert_same(text, spec, tools=tools)
    assert_same("<think>x</think>\n" + text, spec, tools=tools)
    _same_message(text, spec, tools)


def _xml(n: int, gap: str = "\n") -> str:
    call = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"
    return (call + gap) * n


@pure_only
def test_qwen3_xml_one_regex_match_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # Per call: the compound match; no `match_here`, no other delimiter's test, no seeker search.
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    calls = _calls(t)
    compound = calls_of(monkeypatch, calls, "compound")
    here = calls_of(monkeypatch, _oneshot._CursorSeek, "match_here")
    searches = calls_of(monkeypatch, _oneshot._CursorSeek, "_search")
    seen = []
    for n in (5, 50):
        for c in (compound, here, searches):
            c[0] = 0
        out = chatparse.parse_response(_xml(n), t, prefix="", tools=TOOLS)
        assert [c["function"]["arguments"] for c in out["tool_calls"]] == [{"a": 1}] * n
        assert compound[0] == n
        seen.append((here[0], searches[0]))
    assert seen[0] == seen[1], seen


def _kimi(n: int, body: str = '{"a": 1}', gap: str = "") -> str:
    call = f"<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{body}<|tool_call_end|>{gap}"
    return "<|tool_calls_section_begin|>" + call * n + "<|tool_calls_section_end|>"


@pure_only
def test_one_regex_match_per_call_and_no_run_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    # Per call: the compound match, no leading-run match (`_measure` runs once per loop exit),
    # no seeker, no slice parsed by `json_loads`.
    t = chatparse.load_response_template(CATALOG["kimi_k2"])
    calls = _calls(t)
    compound = calls_of(monkeypatch, calls, "compound")
    measured = calls_of(monkeypatch, _oneshot, "_measure")
    firsts = calls_of(monkeypatch, _oneshot._Seek, "first")
    loads = calls_of(monkeypatch, chatparse._content, "json_loads")
    seen = []
    for n in (5, 50):
        for c in (compound, measured, firsts, loads):
            c[0] = 0
        out = chatparse.parse_response(_kimi(n), t, prefix="", tools=TOOLS)
        assert [c["function"]["arguments"] for c in out["tool_calls"]] == [{"a": 1}] * n
        assert compound[0] == n - 1 + 1  # the first call's closer too
        assert loads[0] == 0
        seen.append((measured[0], firsts[0]))
    assert seen[0] == seen[1], seen


def _work(t: Any, text: str) -> int:
    """`counting_fast`'s work plus the compound step's (the text from the body's start to the end
    of its match) and the direct JSON scans' (the body up to where the scan stopped)."""
    calls = _calls(t)
    real = calls.compound
    real_scan = chatparse._content._JSON_SCAN
    spans = [0]

    def compound(buf: str, p: int) -> Any:
        m = real(buf, p)
        spans[0] += (m.end() if m is not None else p) - p + 1
        return m

    def scan(buf: str, i: int) -> Any:
        try:
            got = real_scan(buf, i)
        except StopIteration:
            spans[0] += 1
            raise
        spans[0] += got[1] - i + 1
        return got

    with pytest.MonkeyPatch.context() as mp, counting_fast() as counts:
        mp.setattr(calls, "compound", compound)
        mp.setattr(chatparse._content, "_JSON_SCAN", scan)
        _oneshot.parse_events(text, t, "", None)
        with contextlib.suppress(ValueError, TypeError, KeyError):
            _oneshot.parse(text, t, "", None)
    return sum(counts.values()) + spans[0]


@pure_only
@pytest.mark.parametrize(
    "make",
    [
        lambda k: _kimi(k),
        lambda k: _kimi(k, gap=" " * 300 + "x"),  # a run after each call: the again step fails
        lambda k: _kimi(k, body='{"b": "<|tool_call_end|>"}'),  # the lead in a string: the loop leaves
        lambda k: _kimi(k, body="[" * 30),  # scans that fail at the closer
        lambda k: _kimi(k, body='{"a": 1} ' + " " * 50),
    ],
)
def test_compound_call_loop_is_linear(make: Any) -> None:
    t = chatparse.load_response_template(CATALOG["kimi_k2"])
    small = _work(t, make(60))
    large = _work(t, make(120))
    assert large <= 2.3 * small + 200, (small, large)


@pure_only
@pytest.mark.parametrize(
    "make",
    [
        lambda k: _xml(k),
        lambda k: _xml(k, gap=" " * 300 + "x"),  # a run the lookahead's `\\s*` crosses, then prose
        lambda k: _xml(k, gap="\n" * 300 + "<|im_end|>"),  # ... then the content's closer
        lambda k: _xml(k, gap="</function>" * 20),  # closers with no opener after them
        lambda k: "<function=f>" * k + "</function>" * k,
    ],
)
def test_qwen3_xml_compound_call_loop_is_linear(make: Any) -> None:
    t = chatparse.load_response_template(CATALOG["qwen3_xml"])
    small = _work(t, make(60))
    large = _work(t, make(120))
    assert large <= 2.3 * small + 200, (small, large)
