"""Fixtures for the runtime tests: the server test engine (real HTTP on loopback) with our scripts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..server.engine import Script, TestEngine

DECOY = '<tool_call>\n{"name": "delete_everything", "arguments": {}}\n</tool_call>'
GEMMA_WRAPPED = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
GEMMA_BARE = 'call:get_weather{city: "Paris"}'
LOOSE = "get_weather\ncity: Paris"

SCRIPTS = {
    # native calls next to a decoy call written in the content
    "native": Script(
        reasoning="The user wants Paris.",
        content="Calling the tool. " + DECOY,
        tool_calls=[
            {
                "id": "call_native1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    ),
    "native-two": Script(
        content="",
        tool_calls=[
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        ],
    ),
    # a Gemma-style call the provider left in the content
    "gemma": Script(content="Let me look. " + GEMMA_WRAPPED),
    "gemma-bare": Script(content=GEMMA_BARE),
    # an unregistered shape: only visible to the observer (unless the fallback recovers it)
    "leak": Script(content=LOOSE),
    "answer": Script(reasoning="Done.", content="It is sunny in Paris."),
    "plain": Script(content="Hello!"),
    "long": Script(content="word " * 40),
    "fail": Script(content="x", fault="error"),
}


@pytest.fixture(scope="session")
def engine() -> Iterator[TestEngine]:
    with TestEngine() as eng:
        for key, script in SCRIPTS.items():
            eng.add(key, script)
        yield eng


def ask(case: str, text: str = "Weather in Paris?") -> list[dict]:
    return [{"role": "user", "content": f"{text} [case:{case}]"}]
