"""The labextension's build step in a wheel or sdist build (hatch-jupyter-builder's
``build-function``, named in pyproject.toml).

A wheel or sdist carries the built extension (``jupyter_gtc/labextension``), so installing
either needs no Node.js. Building one needs npm only where that extension is missing or older
than its sources; a development build is rebuilt for production where npm is at hand in a
source tree. An sdist made by ``make dist`` unpacks with the extension built and every file
of one age, so a wheel builds from it without npm, shipping the build it carries. Without npm and without a usable build, the build stops with one line that says
what to install, not a traceback from deep in the build backend.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

BUILT = Path("jupyter_gtc/labextension")
# What the extension is built from: its TypeScript and styles, the npm manifest and lock, tsc's
# settings. A file here newer than the built extension's package.json (written last by each
# build) means the build is stale.
SOURCES = ("labextension/src", "labextension/style", "package.json", "package-lock.json", "tsconfig.json")
HOW = ("install Node.js 20 and npm (Debian: apt-get install -y nodejs npm), or install a wheel that "
       "`make dist` built where npm is (pip install dist/jupyter_gtc-*.whl)")


def build(target_name: str, version: str, **npm_kwargs) -> None:
    """Called by hatch-jupyter-builder for a "wheel" or "sdist" target, ``version`` "standard"
    or "editable"; ``npm_kwargs`` are pyproject's build-kwargs for it (npm_builder's)."""
    root = Path.cwd()  # the build backend runs in the source tree (or the unpacked sdist)
    state, detail = built_state(root)
    npm = shutil.which("npm")
    if version == "editable":
        # `pip install -e`: a development build, rebuilt by npm_builder when its sources changed.
        if npm:
            from hatch_jupyter_builder import npm_builder

            npm_builder(target_name, version, **npm_kwargs)
        elif state in ("missing", "stale"):
            _stop(f"{detail}, and npm is not on PATH to build it: {HOW}")
        return
    if state == "ok":
        return
    from_sdist = (root / "PKG-INFO").is_file()  # an unpacked sdist: what it carries is what it ships
    if state == "development" and (from_sdist or not npm):
        # It works in JupyterLab as a production build does, only larger (source maps).
        print(f"jupyter_gtc: {detail}; packaging it as it is"
              f"{'' if from_sdist else ' (npm is not on PATH to make a production build)'}", file=sys.stderr)
        return
    if not npm:
        _stop(f"{detail}, and npm is not on PATH to build it: {HOW}")
    from hatch_jupyter_builder.utils import run

    # A production build from clean: jupyter-builder leaves a development build's files
    # (build_log.json) beside a new one, which would then read as a development build.
    run([npm, "install"], cwd=str(root))
    run([npm, "run", "clean:labextension"], cwd=str(root))
    run([npm, "run", npm_kwargs.get("build_cmd", "build:prod")], cwd=str(root))


def built_state(root: Path) -> tuple[str, str]:
    """("ok" | "missing" | "stale" | "development", what that is in words)."""
    manifest = root / BUILT / "package.json"
    try:
        built_at = manifest.stat().st_mtime
        entry = json.loads(manifest.read_text())["jupyterlab"]["_build"]["load"]
    except (OSError, ValueError, KeyError, TypeError):
        return "missing", f"the JupyterLab extension is not built ({BUILT}/package.json is missing)"
    if not (root / BUILT / entry).is_file():
        return "missing", f"the JupyterLab extension in {BUILT} is incomplete ({entry} is missing)"
    newer = _newest_source(root)
    if newer and newer[0] > built_at:  # equal is fine: an sdist's files all have one time
        return "stale", f"the JupyterLab extension in {BUILT} is older than {newer[1].relative_to(root)}"
    log = root / BUILT / "build_log.json"  # only jupyter-builder's development mode writes it
    if log.is_file():
        return "development", f"the JupyterLab extension in {BUILT} is a development build"
    return "ok", f"the JupyterLab extension in {BUILT} is built"


def _newest_source(root: Path) -> tuple[float, Path] | None:
    newest = None
    for name in SOURCES:
        path = root / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []
        for f in files:
            at = f.stat().st_mtime
            if newest is None or at > newest[0]:
                newest = (at, f)
    return newest


def _stop(message: str) -> None:
    # SystemExit is not an Exception: hatch-jupyter-builder does not wrap it, and the backend's
    # process ends with this line and status 1 instead of a traceback.
    raise SystemExit(f"jupyter_gtc: {message}")
