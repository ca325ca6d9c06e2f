"""``gtc doctor``: what is installed, what is missing, and how to fix it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..backends import accounting
from ..backends.local import REQUIRED_PROGRAMS, daemon_path
from ..containers.runtime import doctor_rows as container_rows
from ..state import open_store


def run_checks(home: Path) -> list[tuple[str, bool, str]]:
    rows: list[tuple[str, bool, str]] = []
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
        return rows
    rows += _attached_without_accounting(store.list_clusters())
    return rows


def _attached_without_accounting(records) -> list[tuple[str, bool, str]]:
    """An attached Slurm cluster that keeps no accounting (its ``AccountingStorageType`` is not
    slurmdbd, as read when it was attached): what that costs, which only its admins can mend."""
    return [(f"cluster {r.name} (attached): accounting", False,
             "its Slurm keeps no accounting (no slurmdbd), so sacct-based tools (submitit, dask-jobqueue) see "
             "every job's state as UNKNOWN (a cancelled job's result() waits forever), and how a job ended is "
             "lost here once slurmctld forgets it (its MinJobAge); ask its admins for slurmdbd "
             "(AccountingStorageType=accounting_storage/slurmdbd), then detach and attach it again")
            for r in records if r.backend == "slurm" and r.state == "RUNNING" and not r.runtime.get("accounting")]
