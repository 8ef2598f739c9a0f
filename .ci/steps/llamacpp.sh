#!/usr/bin/env bash
# CI step: the llama.cpp stack (llama-cpp-python compiled from source by pip, ~5 min on 2 cores
# the first time; pip's wheel cache makes later runs fast) and the tests marked `llamacpp`.
# Run from the repository root: .ci/steps/llamacpp.sh
set -euo pipefail
start=$SECONDS

python3 -m venv .venv-llama
PY="$PWD/.venv-llama/bin/python"
"$PY" -m pip install --disable-pip-version-check -q -e '.[test]' gguf 'llama-cpp-python[server]==0.3.36'
echo "llamacpp step: install took $((SECONDS - start)) s"

CHATPARSE_REQUIRE_LLAMACPP=1 "$PY" -m pytest -q -m llamacpp -p no:cacheprovider
echo "llamacpp step: total $((SECONDS - start)) s"
