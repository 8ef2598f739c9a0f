"""`ResponseParser._end` without a scanner when nothing is left to route: the stream's end then
closes the open region directly. It must give what the scanner's end-of-stream pass gives (which
takes no match at the very end of the text, zero-width or anchored ones included)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import catalog
from chatparse._parser import ResponseParser

from . import strategies as cst
from .test_prefix_state import _plain

CATALOG = {name: catalog.get(name) for name in catalog.names()}

#: delimiters that can match, zero-width or not, at the very end of the text
END_ANCHORED = [
    {"fields": {"content": {"close_pattern": "$"}}},
    {"fields": {"content": {"close_pattern": "\\Z"}}},
    {
        "fields": {
            "thinking": {"open": "<t>", "close_pattern": "(?=\\Z)|</t>"},
            "content": {"close_pattern": "(?=$)"},
        }
    },
    {
        "fields": {
            "tool_calls": {"open": "<c>", "close_pattern": "\\Z|</c>", "content": "json"},
            "content": {},
        }
    },
    {"fields": {"thinking": {"open_pattern": "(?=x\\Z)", "close": "</t>"}, "content": {}}},
]


def _both_ends(t: Any, prefix: str, chunks: list[str]) -> tuple[Any, Any]:
    ends = []
    for direct in (True, False):
        p = ResponseParser(t, prefix=prefix)
        for c in chunks:
            p.feed(c)
        if direct:
            events = p._end()
        else:  # the scanner's end-of-stream pass, whatever is left
            events = []
            p._process(events, eos=True)
        ends.append((_plain(events), p._output, p._current, p._pos))
    return ends[0], ends[1]


@pytest.mark.parametrize("spec", END_ANCHORED, ids=range(len(END_ANCHORED)))
@pytest.mark.parametrize("text", ["", "hi", "x", "ax", "<t>x", "<t>x</t>y", "<c>{}", "<c>{}</c>", "<c>{"])
def test_end_anchored_delimiters(spec: dict, text: str) -> None:
    t = chatparse.load_response_template({**spec, "start_anchor": "A"})
    for chunks in ([text], list(text)):
        direct, scanned = _both_ends(t, "", chunks)
        assert direct == scanned


@pytest.mark.parametrize("name", sorted(CATALOG))
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_catalog_end_equals_the_scanners(name: str, data: st.DataObject) -> None:
    spec = CATALOG[name]
    t = chatparse.load_response_template(spec)
    prefix = data.draw(cst.prefixes_for(spec), label="prefix")
    text = data.draw(cst.texts_for(spec, max_pieces=10), label="text")
    chunks = data.draw(cst.chunkings(text, cst.delimiter_strings(spec)), label="chunks")
    direct, scanned = _both_ends(t, prefix, chunks)
    assert direct == scanned
