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

# Really compiled: each core module is an extension module, and imported from the venv, not src/.
"$PY" -I -c '
import importlib, sys
mods = ["_oneshot", "_rx", "_scan", "_parser", "_content", "tools", "openai._chat", "openai._calls", "openai._text",
        "detect._auto"]
files = [importlib.import_module("chatparse." + m).__file__ for m in mods]
bad = [f for f in files if not f.endswith(".so") or "site-packages" not in f]
print("compiled modules:", len(files) - len(bad), "of", len(files))
sys.exit(f"not compiled: {bad}" if bad else 0)
'

t=$SECONDS
"$PY" -m pytest -q -p no:cacheprovider tests/core tests/openai tests/catalog tests/detect tests/hf
echo "compiled step: tests took $((SECONDS - t)) s"
echo "compiled step: total $((SECONDS - start)) s"
