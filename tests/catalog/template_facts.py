"""Facts about the publishers' chat templates of the catalog's own checkpoints (issue 10, items 11-13).

Published chat templates are not committed (``tests/data/chat_templates/README.md``); what the
resolution tests need from them lives in ``tests/data/chat_template_facts/<org>__<model>.json``:
source, sha256 of the template text, and its marker literals (tag-shaped strings in order of first
appearance, then every catalog chat-template marker the text contains). This module holds the table
of sources and rewrites or checks the records from a folder holding the templates::

    CHATPARSE_REAL_TEMPLATES=/path/to/templates python -m tests.catalog.template_facts [--check]

Most templates are llama.cpp's copies under ``models/templates/`` at the commit vendored in
llama-cpp-python 0.3.36 (``pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36``);
the table names each file's origin.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import regex

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "tests" / "data" / "chat_template_facts"
TEMPLATES_ENV = "CHATPARSE_REAL_TEMPLATES"
LLAMA_CPP = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"  # vendored in llama-cpp-python 0.3.36


def _lcpp(path: str) -> dict[str, Any]:
    return {"repo": "ggml-org/llama.cpp", "path": f"models/templates/{path}", "commit": LLAMA_CPP}


# local file -> (model id, source, expected entry by the template, expected entry by the model id,
# variant for the record name); None = the family is not in the catalog
SOURCES: dict[str, tuple[str, dict[str, Any], str | None, str | None, str | None]] = {
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": (
        "CohereForAI/c4ai-command-r7b-12-2024",
        _lcpp("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"),
        "cohere",
        "cohere",
        "tool_use",
    ),
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": (
        "CohereForAI/c4ai-command-r-plus",
        _lcpp("CohereForAI-c4ai-command-r-plus-tool_use.jinja"),
        None,
        None,
        "tool_use",
    ),
    "zai-org-GLM-4.6.jinja": ("zai-org/GLM-4.6", _lcpp("GLM-4.6.jinja"), "glm", "glm", None),
    "zai-org-GLM-4.7-Flash.jinja": (
        "zai-org/GLM-4.7-Flash",
        _lcpp("GLM-4.7-Flash.jinja"),
        "glm",
        "glm",
        None,
    ),
    "HuggingFaceTB-SmolLM3-3B.jinja": (
        "HuggingFaceTB/SmolLM3-3B",
        _lcpp("HuggingFaceTB-SmolLM3-3B.jinja"),
        "smollm3",
        "smollm3",
        None,
    ),
    "moonshotai-Kimi-K2-Instruct.jinja": (
        "moonshotai/Kimi-K2-Instruct",
        _lcpp("Kimi-K2-Instruct.jinja"),
        "kimi_k2",
        "kimi_k2",
        None,
    ),
    "moonshotai-Kimi-K2-Thinking.jinja": (
        "moonshotai/Kimi-K2-Thinking",
        _lcpp("Kimi-K2-Thinking.jinja"),
        "kimi_k2",
        "kimi_k2",
        None,
    ),
    "moonshotai-Kimi-K3.jinja": ("moonshotai/Kimi-K3", _lcpp("Kimi-K3.jinja"), "kimi_k3", "kimi_k3", None),
    "LiquidAI-LFM2-8B-A1B.jinja": ("LiquidAI/LFM2-8B-A1B", _lcpp("LFM2-8B-A1B.jinja"), "lfm2", "lfm2", None),
    "LiquidAI-LFM2.5-8B-A1B.jinja": (
        "LiquidAI/LFM2.5-8B-A1B",
        _lcpp("LFM2.5-8B-A1B.jinja"),
        "lfm2",
        "lfm2",
        None,
    ),
    "mistralai-Mistral-Small-3.2-24B-Instruct-2506.jinja": (
        "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
        _lcpp("Mistral-Small-3.2-24B-Instruct-2506.jinja"),
        "mistral_v11",
        "mistral_v11",
        None,
    ),
    "mistralai-Devstral-Small-2507.jinja": (
        "mistralai/Devstral-Small-2507",
        _lcpp("unsloth-mistral-Devstral-Small-2507.jinja"),  # unsloth's copy
        "mistral_v11",
        "mistral_v11",
        None,
    ),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": (
        "mistralai/Mistral-Nemo-Instruct-2407",
        _lcpp("mistralai-Mistral-Nemo-Instruct-2407.jinja"),
        "mistral_v3",
        "mistral_v3",
        None,
    ),
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": (
        "mistralai/Ministral-3-14B-Reasoning-2512",
        _lcpp("mistralai-Ministral-3-14B-Reasoning-2512.jinja"),
        "mistral_v13",
        "mistral_v13",
        None,
    ),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": (
        "NousResearch/Hermes-2-Pro-Llama-3-8B",
        _lcpp("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"),
        "qwen3",
        "qwen3",
        "tool_use",
    ),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": (
        "NousResearch/Hermes-3-Llama-3.1-8B",
        _lcpp("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"),
        "qwen3",
        "qwen3",
        "tool_use",
    ),
    "Qwen-QwQ-32B.jinja": ("Qwen/QwQ-32B", _lcpp("Qwen-QwQ-32B.jinja"), "qwen3", "qwen3", None),
    "Qwen-Qwen2.5-7B-Instruct.jinja": (
        "Qwen/Qwen2.5-7B-Instruct",
        _lcpp("Qwen-Qwen2.5-7B-Instruct.jinja"),
        "qwen3",
        "qwen3",
        None,
    ),
    "Qwen-Qwen3-0.6B.jinja": ("Qwen/Qwen3-0.6B", _lcpp("Qwen-Qwen3-0.6B.jinja"), "qwen3", "qwen3", None),
    # llama.cpp does not say which Qwen3-Coder checkpoint its copy comes from
    "Qwen-Qwen3-Coder.jinja": (
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        _lcpp("Qwen3-Coder.jinja"),
        "qwen3_xml",
        "qwen3_xml",
        None,
    ),
    "Qwen-Qwen3.5-4B.jinja": ("Qwen/Qwen3.5-4B", _lcpp("Qwen3.5-4B.jinja"), "qwen3_xml", "qwen3_xml", None),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": (
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        _lcpp("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"),
        "deepseek_r1_distill",
        "deepseek_r1_distill",
        None,
    ),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
        _lcpp("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"),
        "deepseek_r1_distill",
        "deepseek_r1_distill",
        None,
    ),
    "deepseek-ai-DeepSeek-V3.1.jinja": (
        "deepseek-ai/DeepSeek-V3.1",
        _lcpp("deepseek-ai-DeepSeek-V3.1.jinja"),
        "deepseek_v31",
        "deepseek_v31",
        None,
    ),
    # DeepSeek ships Python encoders for V3.2+; these are the Jinja ports llama.cpp uses
    "deepseek-ai-DeepSeek-V3.2.jinja": (
        "deepseek-ai/DeepSeek-V3.2",
        _lcpp("deepseek-ai-DeepSeek-V3.2.jinja"),
        "deepseek_dsml",
        "deepseek_dsml",
        "llama-cpp-port",
    ),
    "deepseek-ai-DeepSeek-V4.jinja": (
        "deepseek-ai/DeepSeek-V4",
        _lcpp("deepseek-ai-DeepSeek-V4.jinja"),
        "deepseek_dsml",
        "deepseek_dsml",
        "llama-cpp-port",
    ),
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": (
        "deepseek-ai/DeepSeek-V4-Flash-0731",
        _lcpp("deepseek-ai-DeepSeek-V4-Flash-0731.jinja"),
        "deepseek_dsml",
        "deepseek_dsml",
        "llama-cpp-port",
    ),
    "google-gemma-4-31B-it.jinja": (
        "google/gemma-4-31B-it",
        _lcpp("google-gemma-4-31B-it.jinja"),
        "gemma4",
        "gemma4",
        None,
    ),
    "google-gemma-4-31B-it-interleaved.jinja": (
        "google/gemma-4-31B-it",
        _lcpp("google-gemma-4-31B-it-interleaved.jinja"),
        "gemma4",
        "gemma4",
        "interleaved",
    ),
    "google-gemma-2-2b-it.jinja": (
        "google/gemma-2-2b-it",
        _lcpp("google-gemma-2-2b-it.jinja"),
        None,
        None,
        None,
    ),
    "ibm-granite-granite-3.0-8b-instruct.jinja": (
        "ibm-granite/granite-3.0-8b-instruct",
        {"repo": "ggml-org/llama.cpp", "path": "tests/test-chat-template.cpp", "commit": LLAMA_CPP},
        "granite30",
        "granite30",
        None,
    ),
    "ibm-granite-granite-3.3-2b-instruct.jinja": (
        "ibm-granite/granite-3.3-2b-instruct",
        _lcpp("ibm-granite-granite-3.3-2B-Instruct.jinja"),
        "granite33",
        "granite33",
        None,
    ),
    # llama.cpp does not say which Granite 4.0 / 4.1 checkpoints its copies come from
    "ibm-granite-granite-4.0.jinja": (
        "ibm-granite/granite-4.0-h-small",
        _lcpp("ibm-granite-granite-4.0.jinja"),
        "granite4",
        "granite4",
        None,
    ),
    "ibm-granite-granite-4.1.jinja": (
        "ibm-granite/granite-4.1-8b",
        _lcpp("ibm-granite-granite-4.1.jinja"),
        "granite4",
        "granite4",
        None,
    ),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": (
        "meta-llama/Llama-3.1-8B-Instruct",
        _lcpp("meta-llama-Llama-3.1-8B-Instruct.jinja"),
        "llama3_json",
        "llama3_json",
        None,
    ),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": (
        "meta-llama/Llama-3.2-3B-Instruct",
        _lcpp("meta-llama-Llama-3.2-3B-Instruct.jinja"),
        "llama3_json",
        "llama3_json",
        None,
    ),
    "meta-llama-Llama-3.3-70B-Instruct.jinja": (
        "meta-llama/Llama-3.3-70B-Instruct",
        _lcpp("meta-llama-Llama-3.3-70B-Instruct.jinja"),
        "llama3_json",
        "llama3_json",
        None,
    ),
    # the template the conversion script writes into the converted Llama 4 Instruct checkpoints; it
    # asks for JSON calls (the llama4_json entry, from catalog-breadth); the model id alone stays
    # pythonic (the canitoolcall corpus)
    "meta-llama-Llama-4-Scout-17B-16E-Instruct.jinja": (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        {
            "repo": "huggingface/transformers",
            "path": "src/transformers/models/llama4/convert_llama4_weights_to_hf.py",
            "commit": None,
        },
        "llama4_json",
        "pythonic",
        None,
    ),
    "openai-gpt-oss-120b.jinja": (
        "openai/gpt-oss-120b",
        _lcpp("openai-gpt-oss-120b.jinja"),
        "gpt_oss",
        "gpt_oss",
        None,
    ),
    "speakleash-Bielik-11B-v3.0-Instruct.jinja": (
        "speakleash/Bielik-11B-v3.0-Instruct",
        _lcpp("Bielik-11B-v3.0-Instruct.jinja"),
        "qwen3",
        "qwen3",
        None,
    ),
    # a copy embedded in a third-party mlx-lm server script (escapes spelled differently from the
    # hub file, same rendered text), read with the project's code search
    "allenai-Olmo-3.1-32B-Instruct.jinja": (
        "allenai/Olmo-3.1-32B-Instruct",
        {
            "repo": "allenai/Olmo-3.1-32B-Instruct",
            "path": "tokenizer_config.json (third-party copy)",
            "commit": None,
        },
        "olmo3",
        "olmo3",
        None,
    ),
    "microsoft-Phi-3.5-mini-instruct.jinja": (
        "microsoft/Phi-3.5-mini-instruct",
        _lcpp("microsoft-Phi-3.5-mini-instruct.jinja"),
        None,
        None,
        None,
    ),
    "fireworks-ai-llama-3-firefunction-v2.jinja": (
        "fireworks-ai/llama-3-firefunction-v2",
        _lcpp("fireworks-ai-llama-3-firefunction-v2.jinja"),
        None,
        None,
        None,
    ),
    "meetkai-functionary-medium-v3.2.jinja": (
        "meetkai/functionary-medium-v3.2",
        _lcpp("meetkai-functionary-medium-v3.2.jinja"),
        None,
        None,
        None,
    ),
    # MiMo-VL writes Hermes-style <tool_call> JSON calls (llama.cpp tests it with that format); the
    # MiMo-V2 format (compact XML) is the mimo entry, chosen by its model id
    "XiaomiMiMo-MiMo-VL.jinja": ("XiaomiMiMo/MiMo-VL-7B-RL", _lcpp("MiMo-VL.jinja"), "qwen3", "qwen3", None),
}

_TAG = regex.compile(
    r"""<\|[^\s<>|'"]{1,60}\|>|<｜[^｜\n'"]{1,60}｜>|</?[A-Za-z_][\w:.\-]{0,40}>|<[A-Za-z_][\w.\-]{0,40}="""
    r"""|\[/?[A-Z][A-Z_]{1,30}\]"""
)


def record_name(file: str) -> str:
    model, _, _, _, variant = SOURCES[file]
    return model.replace("/", "__") + (f"__{variant}" if variant else "") + ".json"


def literals(text: str) -> list[str]:
    """Tag-shaped strings in order of first appearance, then every catalog chat-template marker
    (required or excluded) the text contains."""
    from chatparse import catalog

    out = list(dict.fromkeys(m[0] for m in _TAG.finditer(text)))
    for name in catalog.names():
        for marker in catalog.describe(name)["chat_template_markers"]:
            marker = marker.removeprefix("!")
            if marker in text and marker not in out:
                out.append(marker)
    return [m for m in out if len(m) <= 80]


def record(file: str, text: str) -> dict[str, Any]:
    model, source, by_template, _, _ = SOURCES[file]
    return {
        "model": model,
        "source": source,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "literals": literals(text),
        "expected": by_template,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="compare with the records instead of writing")
    args = ap.parse_args(argv)
    folder = os.environ.get(TEMPLATES_ENV)
    if not folder:
        print(f"set ${TEMPLATES_ENV} to the folder holding the templates", file=sys.stderr)
        return 2
    bad = 0
    for file in SOURCES:
        got = record(file, (Path(folder) / file).read_text(encoding="utf-8"))
        path = FACTS / record_name(file)
        text = json.dumps(got, ensure_ascii=False, indent=2) + "\n"
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                print(f"differs: {path.name}")
                bad += 1
        else:
            path.write_text(text, encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
