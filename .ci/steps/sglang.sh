#!/usr/bin/env bash
# SGLang step: chatparse's SGLang plugin tested on SGLang 0.5.23's own classes, CPU-only, in its own venv.
# Run from the repository root: .ci/steps/sglang.sh   (called by .ci/run; prints its own elapsed time)
set -euo pipefail
start=$SECONDS
VENV="$PWD/.venv-sglang"
python3.11 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
# torch first: the 2.13.0 CPU build (anything else resolves a multi-GB CUDA build)
"${PIP[@]}" torch==2.13.0
# SGLang without its pins, then what its parser code imports (sglang/__init__ imports triton and IPython)
"${PIP[@]}" --no-deps sglang==0.5.23
"${PIP[@]}" triton ipython
"${PIP[@]}" regex pydantic "openai==2.8.0" "transformers==5.24.0" "tokenizers==0.23.2" partial-json-parser \
    msgspec cachetools psutil numpy orjson pyyaml cbor2 "oss-harmony>=0.0.11" openai-harmony "fastapi[standard]" \
    xgrammar==0.2.9 pyzmq aiohttp requests pillow pybase64 prometheus_client cloudpickle py-cpuinfo \
    einops ijson llguidance
"${PIP[@]}" --no-deps -e .
"${PIP[@]}" pytest hypothesis canitoolcall==0.1.1
echo "sglang step: installed in $((SECONDS - start)) s"
# Every SGLang test must run here: a skip is a failure (tests/integrations/conftest.py).
CHATPARSE_REQUIRE_SGLANG=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    tests/integrations/test_common.py tests/integrations/test_sglang.py tests/integrations/test_sglang_corpus.py
echo "sglang step: done in $((SECONDS - start)) s"
