#!/usr/bin/env bash
# vLLM step: chatparse's vLLM plugin tested on vLLM 0.33.0's own classes, CPU-only, in its own venv.
# Run from the repository root: .ci/steps/vllm.sh   (called by .ci/run; prints its own elapsed time)
set -euo pipefail
start=$SECONDS
VENV="$PWD/.venv-vllm"
python3.11 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
# torch first: the 2.13.0 CPU build (anything else resolves a multi-GB CUDA build)
"${PIP[@]}" torch==2.13.0
# vLLM without its pins (they ask for CUDA torch 2.14), then what its parser and serving code import
"${PIP[@]}" --no-deps vllm==0.33.0
"${PIP[@]}" regex pydantic "openai>=2.25" "transformers>=5.16.1,<5.21" tokenizers partial-json-parser \
    msgspec cachetools psutil numpy orjson pyyaml cbor2 "oss-harmony>=0.0.11" "fastapi[standard]" \
    xgrammar==0.2.8 pyzmq aiohttp requests pillow pybase64 prometheus_client cloudpickle py-cpuinfo \
    einops ijson llguidance mistral_common
# chatparse itself (its runtime dependency is regex) and the test tools
"${PIP[@]}" --no-deps -e .
"${PIP[@]}" pytest hypothesis canitoolcall==0.1.1
echo "vllm step: installed in $((SECONDS - start)) s"
# Every vLLM test must run here: a skip is a failure (tests/integrations/conftest.py).
CHATPARSE_REQUIRE_VLLM=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    tests/integrations/test_common.py tests/integrations/test_vllm.py tests/integrations/test_vllm_corpus.py
echo "vllm step: done in $((SECONDS - start)) s"
