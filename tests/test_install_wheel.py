"""Installing into your own JupyterLab, as a user does: `make dist` in a source tree, then the
wheel into a fresh venv that has only JupyterLab. No Node.js on PATH anywhere here: the
wheel and the sdist carry the built extension, and a tree whose extension is built needs no npm.

The tree is a copy of this checkout's source files (what git tracks or would add) plus its
built labextension, dated after the sources as a build leaves them: whether that bundle
matches the sources is the browser tests' business, not packaging's.

Packages come from a wheelhouse under build/ (pip download, once per change of the
requirements; the only network use), installed with --no-index: the same files pip would
fetch, without minutes of index queries on every run. The venv is made with --without-pip and
this interpreter's pip installs into it (`pip --python`), as its own pip would.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_TOOLS = {"npm", "npx", "node", "nodejs", "corepack", "jlpm", "yarn"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(argv: list, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)


def path_without_node(tmp: Path) -> str:
    """A PATH of links to every program on this one but Node's (npm, node, jlpm...)."""
    bin_dir = tmp / "bin-without-node"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            link = bin_dir / name
            if name not in NODE_TOOLS and not link.exists() and os.access(os.path.join(folder, name), os.X_OK):
                link.symlink_to(os.path.join(folder, name))
    assert shutil.which("npm", path=str(bin_dir)) is None
    return str(bin_dir)


def source_copy(dest: Path, built: bool) -> Path:
    files = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, check=True)
    for name in files.stdout.split("\0"):
        if name and (ROOT / name).is_file():  # a file deleted in the work tree is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    if built:
        assert (ROOT / "jupyter_gtc/labextension/package.json").is_file(), "build the labextension first (make setup)"
        shutil.copytree(ROOT / "jupyter_gtc/labextension", dest / "jupyter_gtc/labextension")
        now = time.time()
        for f in (dest / "jupyter_gtc/labextension").rglob("*"):
            os.utime(f, (now, now))
    return dest


def requirements() -> list[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    hook = meta["tool"]["hatch"]["build"]["hooks"]["jupyter-builder"]
    return sorted({*meta["build-system"]["requires"], *hook.get("dependencies", []),
                   *meta["project"]["dependencies"], "jupyterlab>=4.2,<5"})


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """Wheels for the build and for a venv with JupyterLab and our dependencies."""
    house = ROOT / "build" / "test-wheelhouse"
    wanted = hashlib.sha256(json.dumps([sys.version_info[:2], requirements()]).encode()).hexdigest()
    stamp = house / "requirements.sha256"
    house.mkdir(parents=True, exist_ok=True)
    with open(house / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs in one tree (xdist workers) fill it once
        if not stamp.is_file() or stamp.read_text() != wanted:
            result = run([sys.executable, "-m", "pip", "download", "-q", "-d", house, *requirements()], timeout=900)
            assert result.returncode == 0, f"pip download (the network, once) failed:\n{result.stderr[-3000:]}"
            stamp.write_text(wanted)
    return house


def offline(house: Path, path: str) -> dict[str, str]:
    return {**os.environ, "PATH": path, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(house)}


def pip_install(venv: Path, house: Path, what) -> list[str]:
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-compile",
            "--no-index", "--find-links", str(house), str(what)]


@pytest.fixture(scope="session")
def jupyterlab_venv(tmp_path_factory, wheelhouse):
    """A fresh venv, JupyterLab being installed into it (in the background, while `make dist` runs)."""
    venv = tmp_path_factory.mktemp("lab") / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    installing = subprocess.Popen(pip_install(venv, wheelhouse, "jupyterlab>=4.2,<5"), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
    yield venv, installing
    if installing.poll() is None:
        installing.kill()
        installing.wait()


@pytest.fixture(scope="session")
def dist(tmp_path_factory, wheelhouse, jupyterlab_venv) -> tuple[Path, Path]:
    """`make dist` in a source tree whose extension is built, without npm: (wheel, sdist)."""
    tmp = tmp_path_factory.mktemp("dist")
    tree = source_copy(tmp / "src", built=True)
    # DIST_PY: this interpreter (it has `build`, a test extra) instead of a venv made for it.
    made = run(["make", "-C", tree, "dist", f"DIST_PY={sys.executable}"], timeout=600,
               env=offline(wheelhouse, path_without_node(tmp)))
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    wheels, sdists = sorted((tree / "dist").glob("*.whl")), sorted((tree / "dist").glob("*.tar.gz"))
    assert len(wheels) == len(sdists) == 1, sorted((tree / "dist").iterdir())
    return wheels[0], sdists[0]


def test_make_dist_builds_a_wheel_and_an_sdist_that_carry_the_built_extension(dist):
    wheel, sdist = dist
    manifest = "share/jupyter/labextensions/jupyter_gtc/package.json"
    with zipfile.ZipFile(wheel) as z:
        data = {n.split(".data/data/", 1)[1] for n in z.namelist() if ".data/data/" in n}
        built = json.loads(z.read(next(n for n in z.namelist() if n.endswith(manifest))))
    load = built["jupyterlab"]["_build"]["load"]
    assert {manifest, f"share/jupyter/labextensions/jupyter_gtc/{load}",
            "share/jupyter/labextensions/jupyter_gtc/install.json",
            "etc/jupyter/jupyter_server_config.d/jupyter_gtc.json"} <= data
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"jupyter_gtc/labextension/package.json", f"jupyter_gtc/labextension/{load}",
            "scripts/build_labextension.py", "install.json"} <= names
    assert not [n for n in names if n.startswith(("node_modules/", "dist/", "build/"))]


@pytest.fixture(scope="session")
def lab_venv(jupyterlab_venv, wheelhouse, dist) -> Path:
    """The fresh venv with JupyterLab, then the wheel installed into it."""
    venv, installing = jupyterlab_venv
    _, errors = installing.communicate(timeout=600)
    assert installing.returncode == 0, errors[-3000:]
    installed = run(pip_install(venv, wheelhouse, dist[0]), timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


def venv_env(venv: Path, tmp: Path) -> dict[str, str]:
    return {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp), "GTC_HOME": str(tmp / "gtc"),
            "JUPYTER_CONFIG_DIR": str(tmp / "jupyter-config"), "JUPYTER_DATA_DIR": str(tmp / "jupyter-data"),
            "JUPYTER_PLATFORM_DIRS": "1", "LANG": "C.UTF-8"}


def in_venv(venv: Path, tmp: Path, *argv: str) -> subprocess.CompletedProcess:
    return run(argv, timeout=180, env=venv_env(venv, tmp), cwd=tmp)


def test_the_wheel_in_a_fresh_jupyterlab_is_enabled_and_ok(lab_venv, tmp_path):
    # Both listings at once (each is seconds of imports); jupyter prints them on stderr.
    commands = (["jupyter", "labextension", "list"], ["jupyter", "server", "extension", "list"])
    listing = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=venv_env(lab_venv, tmp_path), cwd=tmp_path) for argv in commands]
    labextensions, server_extensions = (ANSI.sub("", p.communicate(timeout=180)[0]) for p in listing)
    ours = labextensions.split(str(lab_venv / "share" / "jupyter" / "labextensions"), 1)[-1]
    line = next((l for l in ours.splitlines() if "jupyter_gtc" in l), "")
    assert "enabled" in line and "OK" in line and "python, jupyter_gtc" in line, labextensions
    assert re.search(r"^\s*jupyter_gtc enabled$", server_extensions, re.M), server_extensions
    assert re.search(r"^\s*jupyter_gtc \S+ OK$", server_extensions, re.M), server_extensions


def test_the_installed_package_loads_light_and_needs_no_extra(lab_venv, tmp_path):
    # %load_ext jupyter_gtc in a real IPython shell of the venv: the magics are there, and
    # nothing heavy was imported (torch, pandas, aiplatform are not even installed here).
    code = ("import sys\n"
            "import jupyter_gtc, jupyter_gtc.api\n"
            "from IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance()\n"
            "shell.run_line_magic('load_ext', 'jupyter_gtc')\n"
            "heavy = [m for m in ('torch', 'pandas', 'scipy', 'google.cloud.aiplatform', 'tornado') if m in sys.modules]\n"
            "print(jupyter_gtc.__file__, 'sbatch' in shell.magics_manager.magics['cell'], heavy)\n")
    out = in_venv(lab_venv, tmp_path, "python", "-c", code)
    path, has_sbatch, heavy = out.stdout.split(" ", 2)
    assert path.startswith(str(lab_venv)) and has_sbatch == "True" and heavy.strip() == "[]", out.stderr
    doctor = in_venv(lab_venv, tmp_path, "gtc", "doctor")
    absent = {l.split("optional: ", 1)[1].split(":", 1)[0] for l in doctor.stdout.splitlines()
              if l.startswith("absent ")}
    assert {"pandas", "torch", "scipy", "google-cloud-aiplatform"} <= absent, doctor.stdout + doctor.stderr
    # With no cluster yet, the hint names a spec to start from that the wheel carries.
    hint = in_venv(lab_venv, tmp_path, "gtc", "cluster", "list").stdout
    spec = Path(hint.split("a spec to start from: ", 1)[1].split(")", 1)[0])
    assert spec.is_file() and str(spec).startswith(str(lab_venv)) and "node_pools:" in spec.read_text(), hint


def test_building_without_npm_or_a_built_extension_says_what_to_do_in_one_line(tmp_path, wheelhouse):
    tree = source_copy(tmp_path / "src", built=False)
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp_path / "out", tree], timeout=600,
                env=offline(wheelhouse, path_without_node(tmp_path)))
    assert built.returncode != 0
    said = [l.strip() for l in (built.stdout + built.stderr).splitlines() if "jupyter_gtc:" in l]
    assert len(said) == 1 and "not built" in said[0] and "npm is not on PATH" in said[0], built.stderr
    assert "apt-get install -y nodejs npm" in said[0] and "make dist" in said[0]
    assert "Traceback" not in built.stdout + built.stderr


def test_npm_is_needed_only_for_a_missing_stale_or_development_build(tmp_path):
    spec = importlib.util.spec_from_file_location("build_labextension", ROOT / "scripts" / "build_labextension.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    (tmp_path / "labextension/src").mkdir(parents=True)
    source = tmp_path / "labextension/src/sidebar.tsx"
    source.write_text("export {};\n")
    assert builder.built_state(tmp_path)[0] == "missing"
    built = tmp_path / "jupyter_gtc/labextension"
    (built / "static").mkdir(parents=True)
    (built / "package.json").write_text(json.dumps({"jupyterlab": {"_build": {"load": "static/remoteEntry.1.js"}}}))
    assert builder.built_state(tmp_path)[0] == "missing"  # its entry point is not there
    (built / "static/remoteEntry.1.js").write_text("")
    for at, state in ((100, "stale"), (200, "ok")):  # equal times (an unpacked sdist) are up to date
        os.utime(source, (200, 200))
        os.utime(built / "package.json", (at, at))
        assert builder.built_state(tmp_path)[0] == state
    (built / "build_log.json").write_text("[]")
    assert builder.built_state(tmp_path)[0] == "development"
    os.utime(source, (300, 300))
    state, why = builder.built_state(tmp_path)
    assert state == "stale" and "older than labextension/src/sidebar.tsx" in why
