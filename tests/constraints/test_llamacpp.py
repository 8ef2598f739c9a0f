"""llama.cpp generating under the emitted GBNF grammar.

A tiny random-weight model (written by the test, `tests.support.llamacpp`) samples with the
constraint as its only guide: whatever it writes must parse, with the family's template, into
calls to offered tools whose arguments satisfy their schemas. 50 seeds per family, alternating
`tool_choice="required"` and a named tool, one call (`parallel_tool_calls=False`), no reasoning.

The schemas keep every value bounded (integers, booleans, enums), so each output ends well within
`max_tokens`: a random model writes a free string until it happens to sample its end.
"""

from __future__ import annotations

from typing import Any

import pytest

from chatparse import catalog, constraints

from ..support import llamacpp as L
from .test_constraints import check_parse

pytestmark = pytest.mark.llamacpp

FAMILIES = ["qwen3", "mistral_v13", "gemma4", "lfm2", "qwen3_xml", "glm", "gpt_oss", "xlam"]
SEEDS = range(50)
TOOLS = L.ALARM_TOOLS
NAMED = {"type": "function", "function": {"name": "set_alarm"}}


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Any:
    model = L.write_tiny_gguf(
        tmp_path_factory.mktemp("gguf") / "tiny.gguf",
        special_tokens=["<|eos|>"],
        eos_token="<|eos|>",
        chat_template=None,
    )
    return L.load(model, n_ctx=1024)


@pytest.mark.parametrize("name", FAMILIES)
def test_random_model_under_the_grammar_writes_valid_calls(llm: Any, name: str) -> None:
    llama_cpp = L.require()[1]
    prompt = str(catalog.describe(name)["generation_prompt"])
    grammars = {}
    for choice in ("required", "named"):
        c = constraints.derive(
            name,
            TOOLS,
            tool_choice=NAMED if choice == "named" else "required",
            parallel_tool_calls=False,
            reasoning=False,
            prefix=prompt,
            max_whitespace=2,
        )
        grammars[choice] = (c, llama_cpp.LlamaGrammar.from_string(c.gbnf(), verbose=False))
    names = set()
    for seed in SEEDS:
        choice = "named" if seed % 2 else "required"
        c, grammar = grammars[choice]
        out = llm.create_completion(prompt, grammar=grammar, max_tokens=300, temperature=1.0, seed=seed)
        text = out["choices"][0]["text"]
        assert out["choices"][0]["finish_reason"] == "stop", (seed, text)
        tools = TOOLS if choice == "required" else TOOLS[:1]
        check_parse(c, name, text, tools, 1, 1)
        names.add(text)
    assert len(names) > 10  # the seeds really sample different outputs
