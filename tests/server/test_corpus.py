"""The canitoolcall corpus through `chatparse serve` over real HTTP: every fixture, streamed and not.

Each recorded model output is served by the test engine token by token (special tokens single
tokens, other text in 1-4 character pieces) from `/v1/completions` or Ollama's `/api/generate`;
chatparse renders the prompt from a local chat template whose generation prompt is the fixture's,
asks for raw text, parses it and answers through the real `openai` client. The answer must be the library's own
`chatparse.openai.parse_message` result for the text the engine sent (conformance of that result is
measured in tests/conformance), and the streamed answer must equal the non-streamed one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

pytest.importorskip("canitoolcall", reason="canitoolcall (test extra) is not installed")

from canitoolcall import checks  # noqa: E402
from canitoolcall.results import Observation, Status, worst_status  # noqa: E402

from chatparse import catalog  # noqa: E402
from chatparse.openai import merge_deltas, parse_message  # noqa: E402

from ..conformance import harness as H  # noqa: E402
from .conftest import client, model_dir, running  # noqa: E402
from .corpus import load_cases, plain, tools_of  # noqa: E402
from .engine import Script, TestEngine  # noqa: E402

# The generation prompt comes from the tokenizer config (as bos_token, the only free string a chat
# template receives), after a plain rendering of the conversation.
PROMPT_TEMPLATE = (
    "{%- for m in messages %}{{ '[' + m.role + ']' + m.content + '\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ bos_token }}{%- endif %}"
)


GROUPS = load_cases()


def _responses_tools(tools: list[dict[str, Any]]) -> Any:
    return [{"type": "function", **t["function"]} for t in tools] if tools else openai.omit


def _items(resp: Any) -> list[tuple[str, Any]]:
    """Reasoning and message texts (all items joined: text around a call is two message items) and calls."""
    texts = {"reasoning": "", "content": ""}
    calls = []
    for item in resp.output:
        if item.type == "reasoning":
            texts["reasoning"] += "".join(c.text for c in item.content or [])
        elif item.type == "message":
            texts["content"] += "".join(c.text for c in item.content)
        else:
            calls.append(("call", (item.name, item.arguments)))
    return [(k, v) for k, v in texts.items() if v] + calls


def _items_of(expected: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    if expected.get("reasoning_content"):
        out.append(("reasoning", expected["reasoning_content"]))
    if expected.get("content"):
        out.append(("content", expected["content"]))
    out += [("call", c) for c in expected.get("tool_calls") or ()]
    return out


@pytest.mark.parametrize("api", ["completions", "ollama-generate"])
@pytest.mark.parametrize(("template", "prefix"), sorted(GROUPS), ids=lambda v: repr(v)[:40])
def test_corpus_through_the_server(
    engine: TestEngine, tmp_path: Path, template: str, prefix: str, api: str
) -> None:
    info = catalog.describe(template)
    folder = model_dir(tmp_path / "model", PROMPT_TEMPLATE, bos_token=prefix)
    cases = GROUPS[(template, prefix)]
    with running(
        upstream=engine.url,
        model="corpus-model",
        template=template,
        tokenizer=str(folder),
        upstream_api=api,
    ) as srv:
        c = client(srv)
        for fx, cfg, family in cases:
            key = f"{template}/{fx.id}".replace(" ", "_")
            engine.add(key, Script(text=fx.raw_output, finish_reason=cfg.finish_reason))
            sent, reason = fx.raw_output, cfg.finish_reason
            effective = (
                prefix if catalog.load(template).anchor_re.search(prefix) else info.get("generation_prompt")
            )
            kwargs = {**cfg.kwargs, "prefix": effective}
            expected = plain(parse_message(sent, finish_reason=reason, **kwargs))
            request = {
                "model": "corpus-model",
                "messages": [{"role": "user", "content": f"[case:{key}] go"}],
                "tool_choice": "auto",
            }
            tools = tools_of(fx)
            if tools:
                request["tools"] = tools
            r = c.chat.completions.create(**request)
            got = plain(r.choices[0].message.model_dump())
            assert got == expected, (fx.id, fx.raw_output)
            # canitoolcall's own verdict on the server's answer (expected message, no marker leakage,
            # JSON-object arguments matching the schema, call order; soft = whitespace only).
            rows = checks.run_checks(
                fx, family, Observation(nonstream=H.as_result(r.choices[0].message.model_dump()), streams={})
            )
            verdict = worst_status(row.status for row in rows)
            assert verdict in (Status.PASS, Status.SOFT_PASS), (
                fx.id,
                [str(row) for row in rows if row.status is not Status.PASS],
            )
            chunks = list(c.chat.completions.create(**request, stream=True))
            deltas = [ch.choices[0].delta.model_dump(exclude_none=True) for ch in chunks if ch.choices]
            assert plain(merge_deltas(deltas)) == got, fx.id
            finals = [
                ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason
            ]
            assert finals == [r.choices[0].finish_reason], fx.id
            if expected.get("tool_calls"):
                for _, arguments in expected["tool_calls"]:
                    assert isinstance(json.loads(arguments), dict)
            if api == "completions":  # the Responses API gives the same items
                resp = c.responses.create(
                    model="corpus-model",
                    input=request["messages"][0]["content"],
                    tools=_responses_tools(tools),
                    tool_choice="auto",
                )
                assert _items(resp) == _items_of(expected), fx.id
                assert resp.status == (
                    "incomplete" if r.choices[0].finish_reason == "length" else "completed"
                )
