#!/usr/bin/env bash
# CI step: torch (the CPU build, installed first so that pip never resolves a multi-GB CUDA build)
# and the tests that need it, with CHATPARSE_REQUIRE_TORCH=1 so that they cannot skip. XGrammar
# pulls torch, so the constraints tests run here too (CHATPARSE_REQUIRE_CONSTRAINTS=1).
# Run from the repository root: .ci/steps/torch.sh
set -euo pipefail
start=$SECONDS

python3 -m venv .venv-torch
PY="$PWD/.venv-torch/bin/python"
"$PY" -m pip install --disable-pip-version-check -q torch==2.13.0
"$PY" -m pip install --disable-pip-version-check -q -e '.[hf,test,constraints]'
echo "torch step: install took $((SECONDS - start)) s"

# chatparse.runtime: TransformersRuntime with a tiny random-weight model whose output is forced
t=$SECONDS
CHATPARSE_REQUIRE_TORCH=1 "$PY" -m pytest -q -p no:cacheprovider tests/runtime/test_transformers.py
echo "torch step: runtime tests took $((SECONDS - t)) s"

# chatparse.hf: a real generate() loop with a tiny forced model, text-generation pipelines,
# token-id tensors in the tokenizer-level differential tests
t=$SECONDS
CHATPARSE_REQUIRE_TORCH=1 "$PY" -m pytest -q -p no:cacheprovider tests/hf/test_generate.py tests/hf/test_tokenizer.py
echo "torch step: hf tests took $((SECONDS - t)) s"

# chatparse.constraints: every derived grammar compiled and run by XGrammar and llguidance
t=$SECONDS
CHATPARSE_REQUIRE_CONSTRAINTS=1 "$PY" -m pytest -q -p no:cacheprovider tests/constraints -m "not llamacpp"
echo "torch step: constraints tests took $((SECONDS - t)) s"

echo "torch step: total $((SECONDS - start)) s"
