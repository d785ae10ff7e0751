"""Hatch build hook: build the viewer's page (web/ -> src/motionmatch/viewer/static/) so
that wheels ship it. Enabled from pyproject.toml::

    [tool.hatch.build.hooks.custom]
    path = "web/hatch_build.py"

It runs ``npm ci`` and ``node build.mjs`` (through ``motionmatch/viewer/_bundle.py``, which
needs only the standard library) when the bundle is missing or older than its source.
Set ``MOTIONMATCH_SKIP_WEB_BUILD=1`` to build without the page (the viewer then builds it on
first run from a source checkout, or says what is missing). Editable installs skip it: the
viewer builds the page itself on first run.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _bundle_module(root: Path):
    path = root / "src" / "motionmatch" / "viewer" / "_bundle.py"
    spec = importlib.util.spec_from_file_location("_motionmatch_viewer_bundle", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class ViewerPageHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get("MOTIONMATCH_SKIP_WEB_BUILD"):
            self.app.display_warning("MOTIONMATCH_SKIP_WEB_BUILD is set: the wheel is built without the viewer's page")
            return
        root = Path(self.root)
        bundle = _bundle_module(root)
        web = root / "web"
        static = root / "src" / "motionmatch" / "viewer" / "static"
        if not (web / "package.json").is_file():
            if bundle.bundle_ready(static):
                return  # building from an sdist that already carries the page
            raise RuntimeError("web/ (the viewer's front-end source) is missing and no built page is present")
        if bundle.bundle_ready(static) and bundle.bundle_digest(static) == bundle.source_digest(web):
            return
        bundle.build_bundle(web, static, log=self.app.display_info)
