"""Backends: where a cluster's Slurm runs. ``local`` is the embedded default; ``slurm``
attaches an existing cluster (over SSH, or from its login node); ``vertex`` (Google Cloud)
plugs into the same contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..exceptions import BackendUnavailable
from .base import Backend, ClusterStatus, Progress

KNOWN = ("local", "slurm", "vertex")


def get_backend(name: str, home: Path, spec: Any = None) -> Backend:
    """The backend called ``name``. Backends are imported here, lazily, so a heavy one
    (the Google Cloud clients) costs nothing until a cluster uses it. ``vertex`` is two: a
    target's (jobs as CustomJobs, attached) and a training cluster's (node pools, created);
    ``spec`` (parsed, or a record's JSON) picks one, else each call is routed by what it gets."""
    if name == "local":
        from .local import LocalBackend

        return LocalBackend(home)
    if name == "slurm":
        from .slurm import SlurmBackend

        return SlurmBackend(home)
    if name == "vertex":
        from .vertex_training import vertex_backend

        return vertex_backend(home, spec)
    raise BackendUnavailable(f"backend {name!r} is not available; valid backends: {', '.join(KNOWN)}")


__all__ = ["Backend", "ClusterStatus", "Progress", "get_backend", "KNOWN"]
