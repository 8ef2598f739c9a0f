# Shared by vllm.sh and sglang.sh (sourced, not run): one engine's venv, installed the same way,
# and its tests, with per-phase times.
#
# engine_step NAME LOCKFILE REQUIRE_VAR TORCH TEST...
#   TORCH first (e.g. "torch==2.13.0", the CPU build on the project's machines; an unpinned torch
#   resolves a multi-GB CUDA build), then everything else
#   with --no-deps from the exact pins of LOCKFILE (no resolver run, nothing unpinned), then
#   chatparse itself (--no-deps: its runtime dependency, regex, is pinned in LOCKFILE); then the
#   TESTs with REQUIRE_VAR=1, so that a skip is a failure (tests/integrations/conftest.py);
#   then the opt-in compiled build (pyproject.toml's mypyc hook) installed over the editable one in
#   the same venv, checked to be compiled, and the same TESTs on it: the build README recommends
#   for engine deployments (its speed figures inside each engine are measured on that install).
# Regenerate a lock from a working venv: pip freeze --exclude-editable | grep -v '^torch=='
engine_step() {
    local name=$1 lock=$2 require=$3 torch=$4
    shift 4
    local start=$SECONDS phase=$SECONDS
    lap() {
        echo "$name step: $1 in $((SECONDS - phase)) s"
        phase=$SECONDS
    }
    local venv="$PWD/.venv-$name"
    python3.11 -m venv "$venv"
    # --no-compile: no bytecode for the thousands of modules never imported here (torch, CUDA
    # libraries); Python compiles what it imports.
    local pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q --no-compile)
    # shellcheck disable=SC2086  # TORCH is a list of requirements
    "${pip[@]}" $torch
    lap "$torch installed"
    "${pip[@]}" --no-deps -r "$lock"
    lap "$name and pinned dependencies installed"
    "${pip[@]}" --no-deps -e .
    lap "chatparse installed"
    echo "$name step: installed in $((SECONDS - start)) s"
    env "$require=1" "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
    lap "tests ran"
    # mypyc builds in place (see compiled.sh): build from a copy of the tracked files. Build
    # isolation fetches the hook's pinned build dependencies; --no-deps keeps the engine's pins.
    local copy
    copy=$(mktemp -d)
    git ls-files -z | tar --null -T - -cf - | tar -C "$copy" -xf -
    HATCH_BUILD_HOOK_ENABLE_MYPYC=1 "${pip[@]}" --no-deps --force-reinstall "$copy"
    rm -rf "$copy"
    "$venv/bin/python" -I .ci/steps/compiled-check.py
    lap "compiled build installed"
    env "$require=1" "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
    lap "tests ran on the compiled build"
    echo "$name step: done in $((SECONDS - start)) s"
}
