#!/usr/bin/env bash
# CI step: the opt-in compiled build. chatparse installed non-editable with
# HATCH_BUILD_HOOK_ENABLE_MYPYC=1 (pyproject.toml's mypyc hook compiles the core modules into C
# extensions), a check that they really are compiled, then the core and layer tests on it.
# Operation-counting tests that patch internals skip here (tests/support/build.py); the main step
# runs them on the pure build.
# Run from the repository root: .ci/steps/compiled.sh
set -euo pipefail
start=$SECONDS

python3 -m venv .venv-compiled
PY="$PWD/.venv-compiled/bin/python"
# mypyc builds in place (hatch-mypyc runs `build_ext --inplace`) and leaves the .so files under
# src/chatparse/, where they would shadow the sources for the main step's editable install running
# beside this step in the same checkout: build from a copy of the tracked files.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
git ls-files -z | tar --null -T - -cf - | tar -C "$copy" -xf -
HATCH_BUILD_HOOK_ENABLE_MYPYC=1 "$PY" -m pip install --disable-pip-version-check -q "$copy[test]"
echo "compiled step: build and install took $((SECONDS - start)) s"

# Really compiled: each module the hook compiles is an extension module, imported from the venv.
"$PY" -I .ci/steps/compiled-check.py

t=$SECONDS
"$PY" -m pytest -q -p no:cacheprovider tests/core tests/openai tests/catalog tests/detect tests/hf
echo "compiled step: tests took $((SECONDS - t)) s"
echo "compiled step: total $((SECONDS - start)) s"
