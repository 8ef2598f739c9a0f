"""Exit non-zero unless every module that pyproject.toml's mypyc hook compiles is an extension
module imported from site-packages (not its source in src/). Run from the repository root with
`python -I` after a compiled install: by compiled.sh and by the engine steps (engine-step.bash)."""

import importlib
import sys
import tomllib

with open("pyproject.toml", "rb") as f:
    include = tomllib.load(f)["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["mypyc"]["include"]
modules = ["chatparse." + p.removeprefix("/src/chatparse/").removesuffix(".py").replace("/", ".") for p in include]
files = [importlib.import_module(m).__file__ or m for m in modules]
bad = [f for f in files if not f.endswith(".so") or "site-packages" not in f]
print("compiled modules:", len(files) - len(bad), "of", len(files))
sys.exit(f"not compiled: {bad}" if bad else 0)
