#!/usr/bin/env bash
# vLLM step: chatparse's vLLM plugin tested on vLLM 0.33.0's own classes, CPU-only, in its own venv.
# Run from the repository root: .ci/steps/vllm.sh   (called by .ci/run; prints its own elapsed time)
#
# Install: CPU torch 2.13.0 first (anything else resolves a multi-GB CUDA build), then everything
# else with --no-deps from the exact pins of .ci/steps/vllm-requirements.txt: vLLM without its own
# pins (they ask for CUDA torch 2.14), what its parser code and its OpenAI API server import (the
# end-to-end test builds the server), and the test tools. No resolver run, nothing unpinned.
# Left out on purpose: triton (xgrammar's Linux dependency, ~1 GB unpacked; nothing here imports it).
# Regenerate the pins from a working venv: pip freeze --exclude-editable | grep -v '^torch=='
set -euo pipefail
start=$SECONDS
phase=$SECONDS
lap() {
    echo "vllm step: $1 in $((SECONDS - phase)) s"
    phase=$SECONDS
}
VENV="$PWD/.venv-vllm"
python3.11 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
"${PIP[@]}" torch==2.13.0
lap "torch installed"
"${PIP[@]}" --no-deps -r .ci/steps/vllm-requirements.txt
lap "vllm and pinned dependencies installed"
# chatparse itself (its runtime dependency, regex, is pinned above)
"${PIP[@]}" --no-deps -e .
lap "chatparse installed"
echo "vllm step: installed in $((SECONDS - start)) s"
# Every vLLM test must run here: a skip is a failure (tests/integrations/conftest.py).
CHATPARSE_REQUIRE_VLLM=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    tests/integrations/test_common.py tests/integrations/test_vllm.py tests/integrations/test_vllm_corpus.py \
    tests/integrations/test_vllm_serving.py
lap "tests ran"
echo "vllm step: done in $((SECONDS - start)) s"
