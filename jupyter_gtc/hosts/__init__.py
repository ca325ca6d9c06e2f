"""Hosts: where a cluster's commands run and its files live.

A local cluster's host is this machine; an existing cluster's (the ``slurm`` backend's) is
its login node, reached over SSH. Services read job folders, logs, event files and the
completion file through the cluster's host, by byte range, so a live log or plot over SSH
costs the new bytes only. See ARCHITECTURE.md, "Hosts".
"""

from __future__ import annotations

from .base import DirEntry, FileStat, Host, RangeReader
from .local import LOCAL, LocalHost

__all__ = ["DirEntry", "FileStat", "Host", "LOCAL", "LocalHost", "RangeReader"]
