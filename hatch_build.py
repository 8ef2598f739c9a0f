"""Build-time guard for the opt-in compiled build (pyproject.toml's `mypyc` hook).

mypyc builds in place: an editable install with the hook enabled would leave compiled modules
under src/chatparse/, which Python imports before the .py files beside them, so every later edit
of those sources would be silently ignored. An editable install is therefore always pure Python;
asking for a compiled one fails here, before anything is compiled.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class EditableStaysPure(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        # `hook_config`: the hooks this build runs (hatchling applies HATCH_BUILD_HOOK_ENABLE_MYPYC,
        # HATCH_BUILD_HOOKS_ENABLE and HATCH_BUILD_NO_HOOKS to `enable-by-default = false`)
        if version == "editable" and "mypyc" in self.build_config.hook_config:
            raise RuntimeError(
                "chatparse: the compiled build is not editable (mypyc would leave compiled modules "
                "in src/ that shadow the sources). Install it with "
                "`HATCH_BUILD_HOOK_ENABLE_MYPYC=1 pip install .`, or unset the variable for "
                "`pip install -e .`"
            )
