"""``gtc doctor``: what is installed, what is missing, and how to fix it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from pathlib import Path

from ..backends import accounting
from ..backends.local import REQUIRED_PROGRAMS, daemon_path
from ..containers.runtime import doctor_rows as container_rows
from ..state import open_store


# The optional packages: a row's name, each package with the module our code imports lazily for
# it (looked up, never imported: torch or aiplatform take seconds), and what a user goes without
# when any is missing. The `recipes` and `cloud` extras of pyproject.toml, pandas, scipy, jupyterlab.
_BAYESIAN = ('tuning\'s "bayesian" algorithm is TPE, not a Gaussian process (Optuna\'s GPSampler needs '
             "torch and scipy)")
OPTIONAL_PACKAGES: tuple[tuple[str, dict[str, str], str], ...] = (
    ("pandas", {"pandas": "pandas"},
     "job.metrics(), study.trials and the %squeue/%gtc_clusters tables are plain lists, not DataFrames"),
    ("torch", {"torch": "torch"},
     f"{_BAYESIAN}; jobs run with this Python cannot run the recipes or the jupyter_gtc.examples programs"),
    ("scipy", {"scipy": "scipy"}, _BAYESIAN),
    ("google-cloud-aiplatform", {"google-cloud-aiplatform": "google.cloud.aiplatform_v1"},
     "no vertex backend (jobs on Vertex AI) and no local Vertex endpoint (gtc vertex serve, %gtc_vertex_local)"),
    ("gcp-storage-emulator", {"gcp-storage-emulator": "gcp_storage_emulator"},
     "the local Vertex endpoint (gtc vertex serve) cannot start: its Cloud Storage is this emulator"),
    ("the recipes' libraries", {n: n for n in ("transformers", "trl", "peft", "datasets", "accelerate", "safetensors")},
     "jobs run with this Python cannot run the recipe catalogue's training programs (gtc recipe ...)"),
    ("jupyterlab", {"jupyterlab": "jupyterlab"},
     "no JupyterLab in this environment, so no sidebar (clusters, jobs, studies); notebooks and gtc work"),
)


def optional_packages() -> list[tuple[str, bool | None, str]]:
    """One row per optional package (or group): ok, with the versions, where installed, else
    None, not False (jupyter_gtc works without it), with what that costs and the pip command."""
    rows: list[tuple[str, bool | None, str]] = []
    for name, packages, cost in OPTIONAL_PACKAGES:
        missing = [package for package, module in packages.items() if not _importable(module)]
        if missing:
            rows.append((f"optional: {name}", None, f"not installed: {cost}; pip install {' '.join(missing)}"))
        else:
            rows.append((f"optional: {name}", True, ", ".join(_version(p, len(packages) > 1) for p in packages)))
    return rows


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # its parent package missing (google.cloud), or a broken one
        return False


def _version(package: str, named: bool) -> str:
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:  # importable without metadata: a source checkout
        version = "importable"
    return f"{package} {version}" if named else version


def run_checks(home: Path) -> list[tuple[str, bool | None, str]]:
    """(check, ok, detail) rows: ok True, False (something to fix), or None (an optional
    package not installed: the detail says what that costs)."""
    rows: list[tuple[str, bool | None, str]] = []
    for program, package in REQUIRED_PROGRAMS.items():
        path = shutil.which(program, path=daemon_path())  # daemons live in /usr/sbin
        rows.append((f"{program} ({package})", path is not None,
                     path or f"apt-get install -y {package}"))
    missing = accounting.missing_packages(daemon_path())
    rows.append(("accounting (slurmdbd, MariaDB)", True, "installed: local clusters keep accounting (sacct works; "
                 "off with slurm_spec.accounting: {enabled: false})" if not missing else
                 f"local clusters keep none without it (sacct-based tools such as submitit see every job as "
                 f"UNKNOWN): apt-get install -y {' '.join(missing)}"))
    # Root or not, the local backend works; what a normal user cannot have is said here.
    rows.append(("user", True, "root: every local network mode" if os.geteuid() == 0 else
                 "a normal user: local clusters in host network mode, owned by you "
                 "(local.network: namespaces needs root)"))
    rows += container_rows()  # which runtime runs Vertex jobs' images, and how to get one
    try:
        store = open_store(home)
        rows.append(("state store", True, f"{store.path} (schema {store.schema_version})"))
    except Exception as e:  # doctor reports every failure instead of stopping at the first
        rows.append(("state store", False, f"{home}: {e}; set GTC_HOME to a writable folder"))
        return rows + optional_packages()
    rows += _attached_without_accounting(store.list_clusters())
    return rows + optional_packages()


def _attached_without_accounting(records) -> list[tuple[str, bool, str]]:
    """An attached Slurm cluster that keeps no accounting (its ``AccountingStorageType`` is not
    slurmdbd, as read when it was attached): what that costs, which only its admins can mend."""
    return [(f"cluster {r.name} (attached): accounting", False,
             "its Slurm keeps no accounting (no slurmdbd), so sacct-based tools (submitit, dask-jobqueue) see "
             "every job's state as UNKNOWN (a cancelled job's result() waits forever), and how a job ended is "
             "lost here once slurmctld forgets it (its MinJobAge); ask its admins for slurmdbd "
             "(AccountingStorageType=accounting_storage/slurmdbd), then detach and attach it again")
            for r in records if r.backend == "slurm" and r.state == "RUNNING" and not r.runtime.get("accounting")]
