"""`chatparse serve` attaches the derived generation constraint (issue 14) to raw-text upstreams.

A request with `tool_choice="required"`, a named tool, a strict tool or `parallel_tool_calls=false`
reaches a raw-text upstream with the constraint that `chatparse.constraints.derive` gives for the
response template, the request's tools and the rendered prompt, in each engine's own field:
`structured_outputs.structural_tag` (vLLM), `ebnf` (SGLang), `grammar` (llama.cpp) on `completions`
and `chat-raw`; Ollama's `format` only where a JSON schema is exact. Where nothing applies the
request is refused with 400 naming the upstream API (or what the template cannot express); a
plain `auto` request is sent without one. Checked on what the test engine received, and on
llama-cpp-python's server: a random-weight model answers a `required` request with a valid call.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatparse import catalog, constraints

from .conftest import MODEL, WEATHER, client, model_dir, running
from .engine import Script, TestEngine

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
STRICT = {**WEATHER, "function": {**WEATHER["function"], "strict": True}}
NAMED = {"type": "function", "function": {"name": "get_weather"}}
ENGINE_FIELDS = ("structured_outputs", "ebnf", "grammar")


@pytest.fixture(scope="module", autouse=True)
def scripts(engine: TestEngine) -> None:
    engine.add("constrained", Script(text=CALL))


def _post(srv: Any, **fields: Any) -> httpx.Response:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "[case:constrained] weather?"}],
        **fields,
    }
    return httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=60)


def _received(engine: TestEngine, before: int) -> dict[str, Any]:
    sent = [q["body"] for q in engine.requests[before:] if "[case:constrained]" in json.dumps(q["body"])]
    assert len(sent) == 1, sent
    return sent[0]


@pytest.mark.parametrize("api", ["completions", "chat-raw"])
@pytest.mark.parametrize(
    "fields",
    [
        {"tools": [WEATHER], "tool_choice": "required"},
        {"tools": [WEATHER], "tool_choice": NAMED},
        {"tools": [STRICT]},
        {"tools": [WEATHER], "parallel_tool_calls": False},
    ],
    ids=["required", "named", "strict", "non-parallel"],
)
def test_constraint_reaches_the_engine(
    server_factory: Any, engine: TestEngine, api: str, fields: dict[str, Any]
) -> None:
    srv = server_factory(upstream_api=api)
    before = len(engine.requests)
    r = _post(srv, **fields)
    assert r.status_code == 200, r.text
    msg = r.json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"]
    sent = _received(engine, before)
    # the constraint derive() gives for this template, tools and rendered prompt (completions: the
    # prompt the engine got; chat-raw: the same conversation rendered by the server)
    prompt = sent.get("prompt")
    if prompt is None:
        done = httpx.post(
            server_factory(upstream_api="completions").url + "/v1/chat/completions",
            json={"model": MODEL, "messages": sent["messages"], "tools": fields["tools"]},
            timeout=60,
        )
        assert done.status_code == 200
        prompt = [q["body"] for q in engine.requests if q["body"] and q["body"].get("messages") is None][-1][
            "prompt"
        ]
    expected = constraints.derive(
        "qwen3",
        fields["tools"],
        tool_choice=fields.get("tool_choice", "auto"),
        parallel_tool_calls=fields.get("parallel_tool_calls", True),
        strict=True if "strict" in json.dumps(fields) else None,
        prefix=prompt,
        stop=catalog.describe("qwen3")["stop"],  # the engine stops on these itself: never written
    )
    assert json.loads(sent["structured_outputs"]["structural_tag"]) == expected.structural_tag()
    assert sent["ebnf"] == sent["grammar"] == expected.gbnf()
    assert "get_weather" in sent["grammar"]


@pytest.mark.parametrize("api", ["completions", "chat-raw", "ollama-generate"])
def test_plain_auto_requests_are_sent_unconstrained(
    server_factory: Any, engine: TestEngine, api: str
) -> None:
    srv = server_factory(upstream_api=api)
    before = len(engine.requests)
    assert _post(srv, tools=[WEATHER]).status_code == 200
    sent = _received(engine, before)
    assert not any(k in sent for k in (*ENGINE_FIELDS, "format"))


def test_a_structured_chat_upstream_enforces_tool_choice_itself(
    server_factory: Any, engine: TestEngine
) -> None:
    srv = server_factory(upstream_api="chat")
    before = len(engine.requests)
    assert _post(srv, tools=[WEATHER], tool_choice="required").status_code == 200
    sent = _received(engine, before)
    assert sent["tool_choice"] == "required" and not any(k in sent for k in ENGINE_FIELDS)


@pytest.mark.parametrize(
    ("api", "fields", "param", "words"),
    [
        ("ollama-chat", {"tool_choice": "required"}, "tool_choice", ["ollama-chat upstream"]),
        ("ollama-chat", {"tool_choice": NAMED}, "tool_choice", ["'get_weather'", "ollama-chat upstream"]),
        # Qwen3's calls have markers around them: no JSON schema (Ollama's `format`) is exact
        (
            "ollama-generate",
            {"tool_choice": "required"},
            "tool_choice",
            ["ollama-generate upstream", "JSON schema"],
        ),
        ("ollama-generate", {"tools": [STRICT]}, "tools", ["strict tool", "ollama-generate upstream"]),
    ],
)
def test_400_names_the_upstream_where_no_constraint_applies(
    server_factory: Any, engine: TestEngine, api: str, fields: dict[str, Any], param: str, words: list[str]
) -> None:
    srv = server_factory(upstream_api=api)
    before = len(engine.requests)
    r = _post(srv, **{"tools": [WEATHER], **fields})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    for w in words:
        assert w in err["message"], err
    assert not [q for q in engine.requests[before:] if "[case:constrained]" in json.dumps(q["body"])]


def test_non_parallel_without_a_constraint_still_sends_one_call(
    server_factory: Any, engine: TestEngine
) -> None:
    """`parallel_tool_calls=false` alone is never refused: the server keeps the first call."""
    srv = server_factory(upstream_api="ollama-generate")
    before = len(engine.requests)
    r = _post(srv, tools=[WEATHER], parallel_tool_calls=False)
    assert r.status_code == 200, r.text
    assert "format" not in _received(engine, before)
    assert len(r.json()["choices"][0]["message"]["tool_calls"]) == 1


def test_a_template_that_cannot_be_constrained_is_400(engine: TestEngine, qwen_dir: Path) -> None:
    """MuSE Glimmer's argument tags use `\\b`, which a grammar does not write (docs/constraints.md):
    refused, naming it."""
    with running(
        upstream=engine.url,
        model=MODEL,
        tokenizer=str(qwen_dir),
        template="muse_glimmer",
        upstream_api="completions",
    ) as srv:
        r = _post(srv, tools=[WEATHER], tool_choice="required")
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == "tool_choice"
        assert "completions upstream" in err["message"] and "muse_glimmer" in err["message"], err
        assert "Field 'tool_calls'" in err["message"], err
        # auto needs no constraint: still served
        assert _post(srv, tools=[WEATHER]).status_code == 200


# ------------------------------------------------------------------------------------------------
# Bounded per request: a slow or huge derivation holds neither the event loop nor other requests


def _tools(n: int) -> list[dict[str, Any]]:
    return [{**WEATHER, "function": {**WEATHER["function"], "name": f"tool_{i}"}} for i in range(n)]


class _Gate:
    """`derive` held at a gate: `entered` once a derivation started, released by `release`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        real = constraints.derive

        def held(*a: Any, **kw: Any) -> Any:
            self.calls += 1
            self.entered.set()
            assert self.release.wait(60), "the test never opened the gate"
            kw.pop("time_budget", None)  # held here, not slow: the real work has no deadline
            return real(*a, **kw)

        monkeypatch.setattr(constraints, "derive", held)


def _constrained_server(engine: TestEngine, qwen_dir: Path, **kw: Any) -> Any:
    return running(
        upstream=engine.url, model=MODEL, tokenizer=str(qwen_dir), upstream_api="completions", **kw
    )


def test_a_slow_derivation_does_not_delay_a_plain_request(
    engine: TestEngine, qwen_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _Gate(monkeypatch)
    with _constrained_server(engine, qwen_dir, constraint_timeout=60) as srv:
        result: dict[str, Any] = {}
        slow = threading.Thread(
            target=lambda: result.update(r=_post(srv, tools=[WEATHER], tool_choice="required"))
        )
        slow.start()
        assert gate.entered.wait(60)
        # the derivation is held: a plain request (and an auto one) is answered meanwhile
        assert _post(srv).status_code == 200
        assert _post(srv, tools=[WEATHER]).status_code == 200
        assert slow.is_alive() and "r" not in result
        gate.release.set()
        slow.join(60)
        assert result["r"].status_code == 200, result["r"].text


def test_past_the_budget_503_then_the_same_request_uses_the_finished_derivation(
    engine: TestEngine, qwen_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _Gate(monkeypatch)
    with _constrained_server(engine, qwen_dir, constraint_timeout=0.2) as srv:
        r = _post(srv, tools=_tools(3), tool_choice="required")
        assert r.status_code == 503, r.text
        err = r.json()["error"]
        assert err["type"] == "constraint_timeout" and err["param"] == "tools"
        assert "3 tools" in err["message"] and "0.2 s" in err["message"], err
        # a retry while it still runs joins it (no second derivation) and is refused the same way
        assert _post(srv, tools=_tools(3), tool_choice="required").status_code == 503
        assert gate.calls == 1
        gate.release.set()
        # once done, derive's cache answers the same request at once
        for _ in range(200):
            r = _post(srv, tools=_tools(3), tool_choice="required")
            if r.status_code == 200:
                break
            threading.Event().wait(0.05)
        assert r.status_code == 200, r.text
        assert gate.calls in (1, 2)  # a second call only returns the cached constraint


def test_a_derivation_past_its_hard_limit_is_interrupted_and_refused(
    engine: TestEngine, qwen_dir: Path
) -> None:
    """100 GLM tools take seconds to derive; with a budget of 0.01 s (0.05 s in the background)
    the worker is interrupted (`ConstraintTimeout`), and the tool set is then refused at once."""
    tools = _tools(100)
    with _constrained_server(engine, qwen_dir, template="glm", constraint_timeout=0.01) as srv:
        assert _post(srv, tools=tools, tool_choice="required").status_code == 503
        for _ in range(400):
            r = _post(srv, tools=tools, tool_choice="required")
            if r.status_code != 503:
                break
            threading.Event().wait(0.05)
        assert r.status_code == 422, r.text
        assert "time budget" in r.json()["error"]["message"]
        assert _post(srv, tools=tools).status_code == 200  # auto needs no constraint


def test_too_many_tools_or_too_much_schema_is_413(engine: TestEngine, qwen_dir: Path) -> None:
    with _constrained_server(
        engine, qwen_dir, constraint_max_tools=4, constraint_max_tools_bytes=2000
    ) as srv:
        r = _post(srv, tools=_tools(5), tool_choice="required")
        assert r.status_code == 413, r.text
        assert "5 tools" in r.json()["error"]["message"] and "--constraint-max-tools 4" in r.text
        big = [{**WEATHER, "function": {**WEATHER["function"], "description": "x" * 3000}}]
        r = _post(srv, tools=big, tool_choice="required")
        assert r.status_code == 413 and "--constraint-max-tools-bytes 2000" in r.text, r.text
        assert _post(srv, tools=_tools(5)).status_code == 200  # auto: no constraint, no limit
        assert _post(srv, tools=_tools(4), tool_choice="required").status_code == 200


# ------------------------------------------------------------------------------------------------
# llama.cpp: the engine generates under the grammar the server attached

EOT = "<|eot_id|>"
LLAMA_CHAT = (
    "{%- for m in messages -%}"
    "{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + (m.content or '') + '<|eot_id|>' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif -%}"
)


@pytest.mark.llamacpp
def test_llamacpp_answers_a_required_request_with_a_valid_call(tmp_path: Path) -> None:
    """A random-weight model behind llama-cpp-python's server: only the attached grammar makes its
    output a call. `pythonic` (no reasoning field, so the output is the call list; no free strings
    in these schemas, so a random model ends well within `max_tokens`), 8 seeds."""
    from ..support import llamacpp as L

    L.require()
    model = L.write_tiny_gguf(
        tmp_path / "tiny.gguf",
        special_tokens=[
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|python_start|>",
            "<|python_end|>",
            EOT,
        ],
        eos_token=EOT,
        chat_template=LLAMA_CHAT,
        context_length=1024,
    )
    folder = model_dir(tmp_path / "tok", LLAMA_CHAT, eos_token=EOT)
    with (
        L.llama_server(model, n_ctx=1024) as url,
        running(
            upstream=url,
            model="tiny",
            tokenizer=str(folder),
            template="pythonic",
            upstream_api="completions",
        ) as srv,
    ):
        c = client(srv, timeout=120)
        names = set()
        for seed in range(8):
            choice: Any = (
                "required" if seed % 2 == 0 else {"type": "function", "function": {"name": "set_alarm"}}
            )
            r = c.chat.completions.create(
                model="tiny",
                messages=[{"role": "user", "content": "wake me"}],
                tools=L.ALARM_TOOLS,  # type: ignore[arg-type]
                tool_choice=choice,
                parallel_tool_calls=False,  # one call: a random model would otherwise add calls
                max_tokens=300,
                temperature=1.0,
                seed=seed,
            )
            calls = r.choices[0].message.tool_calls or []
            assert len(calls) == 1, (seed, r.choices[0].message)
            for call in calls:
                fn = call.function  # type: ignore[union-attr]
                args = json.loads(fn.arguments)
                if choice != "required":
                    assert fn.name == "set_alarm"
                L.check_alarm_call(fn.name, args)
                names.add(fn.arguments)
        assert len(names) > 2  # the seeds really sample different calls
