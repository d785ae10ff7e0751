"""The page's built bundle: where it is, and building it from ``web/`` with Node.js.

Standard library only: the wheel's build hook (``web/hatch_build.py``) loads this file by
path, before any of the package's dependencies are installed.

The bundle (``index.html``, ``app.js``, ``app.css``, ``build-info.json``, and ``pose/``: the
camera's pose estimator, MediaPipe Tasks' WebAssembly runtime and model bundles assembled
from npm packages by ``web/pose_task.mjs``) lives in the package folder
``motionmatch/viewer/static/``. It is produced from the front-end source
in ``web/`` (``npm ci`` then ``node build.mjs``): when a wheel is built, or on the first
``motionmatch viewer`` run from a source checkout (and again when the source is newer
than the bundle). It is never committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
BUNDLE_FILES = ("index.html", "app.js", "app.css", "pose-worker.js")
MIN_NODE = 18
#: what ``npm ci`` installs that the build reads (missing: ``npm ci`` runs again)
NODE_PACKAGES = ("esbuild", "three", "@mediapipe/tasks-vision", "@mediapipe/pose")

NODE_MISSING = (
    "Node.js (version {min} or newer, with npm) is needed to build the viewer's page from its source in {web}, "
    "and {what} was not found on PATH.\n"
    "  * Debian/Ubuntu: `sudo apt-get install nodejs npm`; macOS: `brew install node`; others: https://nodejs.org\n"
    "  * then run `motionmatch viewer` again (it builds the page once), or build it by hand: "
    "`cd {web} && npm ci && npm run build`.\n"
    "Installed from a wheel, motionmatch ships the built page and needs no Node.js."
)


class BundleError(RuntimeError):
    """The page's bundle is missing and cannot be built."""


def web_source() -> Path | None:
    """The ``web/`` folder of the source checkout this package runs from (an editable or
    in-tree install: ``<repo>/src/motionmatch/viewer/_bundle.py``), if any."""
    here = Path(__file__).resolve()
    if len(here.parents) < 4 or here.parents[2].name != "src":
        return None
    web = here.parents[3] / "web"
    if (web / "package.json").is_file() and (web / "build.mjs").is_file():
        return web
    return None


def bundle_ready(static: Path = STATIC_DIR) -> bool:
    return all((static / f).is_file() for f in BUNDLE_FILES)


def source_digest(web: Path) -> str:
    """SHA-256 over the front end's source files (what the bundle is built from)."""
    h = hashlib.sha256()
    files = [web / "package.json", web / "package-lock.json", web / "index.html", *sorted(web.glob("*.mjs"))]
    files += sorted(p for p in (web / "src").rglob("*") if p.is_file())
    for p in files:
        if p.is_file():
            h.update(p.relative_to(web).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def bundle_digest(static: Path = STATIC_DIR) -> str | None:
    try:
        return json.loads((static / "build-info.json").read_text())["source_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _node_version(node: str) -> int:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        return int(out.lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0


def build_bundle(web: Path, out: Path = STATIC_DIR, *, log=print, install: bool = True) -> Path:
    """``npm ci`` (when ``node_modules`` is missing or older than the lockfile) and
    ``node build.mjs --outdir OUT``; raises :class:`BundleError` with what to do."""
    web = Path(web)
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise BundleError(NODE_MISSING.format(min=MIN_NODE, web=web, what="node" if node is None else "npm"))
    v = _node_version(node)
    if v < MIN_NODE:
        raise BundleError(f"Node.js {MIN_NODE} or newer is needed to build the viewer's page (found version {v} at "
                          f"{node}); " + NODE_MISSING.format(min=MIN_NODE, web=web, what="a recent node")
                          .split("\n", 1)[1])
    mods = web / "node_modules"
    marker = mods / ".package-lock.json"
    stale = not all((mods / p).is_dir() for p in NODE_PACKAGES) or (
        marker.is_file() and marker.stat().st_mtime < (web / "package-lock.json").stat().st_mtime)
    env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false", npm_config_audit="false")
    if install and stale:
        log(f"installing the front end's build tools (npm ci in {web}) ...")
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=web, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise BundleError(f"`npm ci` failed in {web} (exit {r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    log(f"building the viewer's page into {out} ...")
    r = subprocess.run([node, "build.mjs", "--outdir", str(out)], cwd=web, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise BundleError(f"building the page failed (node build.mjs, exit {r.returncode}):\n"
                          f"{r.stdout[-3000:]}{r.stderr[-3000:]}")
    info = {"source_sha256": source_digest(web)}
    (out / "build-info.json").write_text(json.dumps(info, indent=1) + "\n")
    if not bundle_ready(out):
        raise BundleError(f"the build finished but {out} lacks {', '.join(BUNDLE_FILES)}")
    return out


def ensure_bundle(*, log=print, rebuild: bool = False) -> Path:
    """The bundle's folder, building it first when it is missing or older than ``web/``."""
    web = web_source()
    ready = bundle_ready()
    if web is None:
        if ready:
            return STATIC_DIR
        raise BundleError(f"the viewer's page is missing from this installation ({STATIC_DIR}) and there is no "
                          "front-end source (web/) to build it from: reinstall motionmatch from a wheel, which ships "
                          "the page, or run from a source checkout with Node.js installed")
    if ready and not rebuild and bundle_digest() == source_digest(web):
        return STATIC_DIR
    try:
        return build_bundle(web, STATIC_DIR, log=log)
    except BundleError as e:
        if ready and not rebuild:
            log(f"warning: the page's source changed but it cannot be rebuilt; serving the previous build.\n{e}")
            return STATIC_DIR
        raise
