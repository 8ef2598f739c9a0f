#!/usr/bin/env bash
# SGLang step: chatparse's SGLang plugin tested on SGLang 0.5.23's own classes, CPU-only, in its own venv.
# Run from the repository root: .ci/steps/sglang.sh   (called by .ci/run; prints its own elapsed time)
#
# Install: CPU torch 2.13.0 first (anything else resolves a multi-GB CUDA build), then everything
# else with --no-deps from the exact pins of .ci/steps/sglang-requirements.txt: SGLang without its
# own pins, what its parser code imports (sglang/__init__ imports triton and IPython), and the test
# tools. No resolver run, nothing unpinned.
# Regenerate the pins from a working venv: pip freeze --exclude-editable | grep -v '^torch=='
set -euo pipefail
start=$SECONDS
phase=$SECONDS
lap() {
    echo "sglang step: $1 in $((SECONDS - phase)) s"
    phase=$SECONDS
}
VENV="$PWD/.venv-sglang"
python3.11 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
"${PIP[@]}" torch==2.13.0
lap "torch installed"
"${PIP[@]}" --no-deps -r .ci/steps/sglang-requirements.txt
lap "sglang and pinned dependencies installed"
"${PIP[@]}" --no-deps -e .
lap "chatparse installed"
echo "sglang step: installed in $((SECONDS - start)) s"
# Every SGLang test must run here: a skip is a failure (tests/integrations/conftest.py).
CHATPARSE_REQUIRE_SGLANG=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    tests/integrations/test_common.py tests/integrations/test_sglang.py tests/integrations/test_sglang_corpus.py
lap "tests ran"
echo "sglang step: done in $((SECONDS - start)) s"
