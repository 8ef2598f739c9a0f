#!/usr/bin/env bash
# CI step: the grammar engines (XGrammar, which pulls torch, and llguidance) and tests/constraints
# with them required. torch==2.13.0 goes in first: it is the CPU build; left to resolve itself,
# pip would pull a multi-GB CUDA build.
# Run from the repository root: .ci/steps/constraints.sh
set -euo pipefail
start=$SECONDS

python3 -m venv .venv-constraints
PY="$PWD/.venv-constraints/bin/python"
"$PY" -m pip install --disable-pip-version-check -q torch==2.13.0
"$PY" -m pip install --disable-pip-version-check -q -e '.[test,constraints]'
echo "constraints step: install took $((SECONDS - start)) s"

CHATPARSE_REQUIRE_CONSTRAINTS=1 "$PY" -m pytest -q tests/constraints -m "not llamacpp" -p no:cacheprovider
echo "constraints step: total $((SECONDS - start)) s"
