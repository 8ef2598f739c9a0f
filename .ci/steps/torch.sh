#!/usr/bin/env bash
# CI step: torch (the CPU build, installed first so that pip never resolves torch by itself) and the
# chatparse.hf tests that need it: a real generate() loop with a tiny forced model, text-generation
# pipelines, token-id tensors. CHATPARSE_REQUIRE_TORCH=1 turns their torch skips into failures.
# Run from the repository root: .ci/steps/torch.sh
set -euo pipefail
start=$SECONDS

python3 -m venv .venv-torch
PY="$PWD/.venv-torch/bin/python"
"$PY" -m pip install --disable-pip-version-check -q torch==2.13.0
"$PY" -m pip install --disable-pip-version-check -q -e '.[hf,test]'
echo "torch step: install took $((SECONDS - start)) s"

CHATPARSE_REQUIRE_TORCH=1 "$PY" -m pytest -q -p no:cacheprovider tests/hf/test_generate.py tests/hf/test_tokenizer.py
echo "torch step: total $((SECONDS - start)) s"
