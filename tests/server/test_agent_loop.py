"""The everyday agent loop: an assistant turn with `content: null` and `tool_calls` goes back upstream.

OpenAI clients and agent frameworks send the assistant's tool-call turn back with `content: null`
(or no `content` at all). Every chat template in `tests/data/chat_templates/` (re-creations of the
access patterns real templates use; templates added there later join these tests) must render that
turn exactly as it renders `content: ""`, and the server must accept it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from chatparse.server._prompt import ChatTemplate, ChatTemplateError

from .conftest import MODEL, WEATHER, model_dir, running
from .engine import Script, TestEngine
from .test_prompt import TOKEN_CONFIGS

DATA = Path(__file__).resolve().parents[1] / "data" / "chat_templates"
NAMES = sorted(p.stem for p in DATA.glob("*.jinja"))
# Re-creations of templates that failed on a null content before issue 11: they must render it.
MUST_RENDER = {"deepseek_r1", "lfm2", "qwen3_small", "qwen3"}

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


def conversation(content: Any) -> list[dict[str, Any]]:
    assistant: dict[str, Any] = {"role": "assistant", "tool_calls": [CALL]}
    if content != "missing":
        assistant["content"] = content
    return [
        {"role": "user", "content": "[case:agent] Weather in Paris?"},
        assistant,
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    ]


def template(name: str) -> ChatTemplate:
    return ChatTemplate(
        (DATA / f"{name}.jinja").read_text(encoding="utf-8"), tokenizer_config=TOKEN_CONFIGS.get(name, {})
    )


def render(name: str, content: Any) -> str | None:
    try:
        return template(name).render(conversation(content), tools=[WEATHER])
    except ChatTemplateError:
        return None


def test_the_folder_has_the_templates_that_failed() -> None:
    assert set(NAMES) >= MUST_RENDER


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("content", [None, "missing"])
def test_null_content_renders_as_empty_content(name: str, content: Any) -> None:
    empty = render(name, "")
    if empty is None:
        assert name not in MUST_RENDER, f"{name} cannot render a tool-call turn at all"
        pytest.skip(f"{name} does not render tool-call turns with content ''")
    assert render(name, content) == empty


@pytest.fixture(scope="module")
def agent_script(engine: TestEngine) -> None:
    engine.add("agent", Script(text="It is 21 °C in Paris.<|im_end|>"))


@pytest.mark.parametrize("name", sorted(MUST_RENDER))
def test_server_accepts_null_content_with_tool_calls(
    engine: TestEngine, agent_script: None, tmp_path: Path, name: str
) -> None:
    folder = model_dir(tmp_path, (DATA / f"{name}.jinja").read_text(encoding="utf-8"), **TOKEN_CONFIGS[name])
    with running(upstream=engine.url, model=MODEL, tokenizer=str(folder), template="qwen3") as srv:
        prompts = []
        for content in ("", None, "missing"):
            body = {"model": MODEL, "messages": conversation(content), "tools": [WEATHER]}
            r = httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=10)
            assert r.status_code == 200, (content, r.text)
            assert r.json()["choices"][0]["message"]["content"] == "It is 21 °C in Paris."
            prompts.append(next(q for q in reversed(engine.requests) if q["path"] == "/v1/completions"))
        assert prompts[0]["body"]["prompt"] == prompts[1]["body"]["prompt"] == prompts[2]["body"]["prompt"]
