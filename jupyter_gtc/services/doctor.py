"""``gtc doctor``: what is installed, what is missing, and how to fix it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..backends.local import REQUIRED_PROGRAMS
from ..state import open_store


def run_checks(home: Path) -> list[tuple[str, bool, str]]:
    rows: list[tuple[str, bool, str]] = []
    for program, package in REQUIRED_PROGRAMS.items():
        path = shutil.which(program)
        rows.append((f"{program} ({package})", path is not None,
                     path or f"apt-get install -y {package}"))
    root = os.geteuid() == 0
    rows.append(("running as root", root, "yes" if root else
                 "the local backend starts Slurm's daemons as root; run as root or use the slurm backend"))
    try:
        store = open_store(home)
        rows.append(("state store", True, f"{store.path} (schema {store.schema_version})"))
    except Exception as e:  # doctor reports every failure instead of stopping at the first
        rows.append(("state store", False, f"{home}: {e}; set GTC_HOME to a writable folder"))
    return rows
