"""``gtc doctor`` on the optional packages, run by a real interpreter that lacks some: this
venv's site-packages as a folder of links to each entry but pandas and scipy (a site dir of
its own, .pth files and all), so nothing is patched and the packages are simply not there."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

HIDDEN = ("pandas", "scipy")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site_without(tmp_path_factory) -> Path:
    site = Path(sysconfig.get_paths()["purelib"])
    farm = tmp_path_factory.mktemp("site-packages")
    for entry in site.iterdir():
        top = entry.name.split("-")[0].split(".")[0].lower()
        if top not in HIDDEN:
            (farm / entry.name).symlink_to(entry)
    return farm


def run_without(site: Path, code: str, *argv: str) -> subprocess.CompletedProcess:
    # -I -S: no user site, no site-packages; the farm is added as a site dir (its .pth files
    # too: namespace packages), and this checkout's jupyter_gtc comes first.
    boot = (f"import site, sys; site.addsitedir({str(site)!r}); sys.path.insert(0, {str(ROOT)!r}); "
            f"sys.argv[1:] = {list(argv)!r}\n")
    return subprocess.run([sys.executable, "-I", "-S", "-c", boot + code], capture_output=True, text=True,
                          timeout=120)


def test_the_interpreter_really_lacks_them(site_without):
    out = run_without(site_without, "import importlib.util, json; "
                      "print(json.dumps([importlib.util.find_spec(m) is None for m in ('pandas', 'scipy', 'torch')]))")
    assert json.loads(out.stdout) == [True, True, False], out.stderr


def test_doctor_names_each_missing_optional_package_and_what_it_costs(site_without):
    result = run_without(site_without, "import runpy; runpy.run_module('jupyter_gtc.cli', run_name='__main__')",
                         "doctor")
    lines = {line.split("optional: ", 1)[1].split(":", 1)[0]: line for line in result.stdout.splitlines()
             if "optional: " in line}
    pandas, scipy, torch = lines["pandas"], lines["scipy"], lines["torch"]
    assert pandas.startswith("absent ") and "job.metrics()" in pandas and "not DataFrames" in pandas
    assert pandas.endswith("pip install pandas")
    assert scipy.startswith("absent ") and '"bayesian" algorithm is TPE' in scipy and scipy.endswith("pip install scipy")
    assert torch.startswith("ok ")  # present here: only what is missing costs anything
    # An optional package is no failure: the exit status is that of the required checks.
    required_missing = any(line.startswith("MISSING") for line in result.stdout.splitlines())
    assert result.returncode == (1 if required_missing else 0), result.stdout + result.stderr


def test_what_doctor_says_is_what_the_code_does(site_without):
    # The costs named above, seen in the same interpreter: a list, not a DataFrame; TPE, not GP.
    code = ("from jupyter_gtc.metrics.scalar import Scalar\n"
            "from jupyter_gtc.services.metrics import as_table\n"
            "from jupyter_gtc.services.tuning.engine import make_sampler\n"
            "from jupyter_gtc.spec.study import parse_tuning_spec\n"
            "rows = as_table([Scalar('loss', 1, 1700000000.0, 0.5)])\n"
            "spec = parse_tuning_spec('metric: loss:minimize\\nmax_trials: 8\\njob: srun t.py \"$@\"\\n'\n"
            "                         'parameters: {lr: {double: [0.0001, 0.1], scale: log}}\\n')\n"
            "print(type(rows).__name__, make_sampler(spec)[1])\n")
    out = run_without(site_without, code)
    assert out.stdout.split() == ["list", "tpe"], out.stderr
