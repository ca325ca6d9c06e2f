"""The one facade every front end calls: the magics, the widgets, the REST routes and the
``gtc`` command use these functions, with these names, and nothing below them.

All functions are synchronous and thread-safe. Errors are ``jupyter_gtc.exceptions``
subclasses; front ends translate them for their users.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .backends.base import Progress, no_progress
from .services.clusters import Cluster, ClusterService
from .spec.cluster import ClusterSpec, load_cluster_spec, parse_cluster_spec
from .state import default_home, open_store

_lock = threading.Lock()
_services: dict[Path, ClusterService] = {}


def _clusters() -> ClusterService:
    home = default_home()  # read each call so GTC_HOME set later (tests, notebooks) applies
    with _lock:
        if home not in _services:
            _services[home] = ClusterService(open_store(home), home)
        return _services[home]


def create_cluster(spec: ClusterSpec | dict[str, Any] | str | Path, backend: str = "local",
                   progress: Progress = no_progress) -> Cluster:
    """Create a cluster from a spec: a ``ClusterSpec``, a dict (camelCase or snake_case), JSON
    or YAML text, or a path to a .json/.yaml file. Returns when every node is idle."""
    if isinstance(spec, Path) or (isinstance(spec, str) and spec.endswith((".json", ".yaml", ".yml"))
                                  and "\n" not in spec):
        spec = load_cluster_spec(spec)
    return _clusters().create(spec, backend, progress)


def get_cluster(name: str) -> Cluster:
    """A cluster with its live status (nodes, states, drain reasons)."""
    return _clusters().get(name)


def list_clusters(with_status: bool = True) -> list[Cluster]:
    """Every cluster in the state store, oldest first."""
    return _clusters().list(with_status)


def scale_cluster(name: str, pool: str, nodes: int, progress: Progress = no_progress) -> Cluster:
    """Resize one compute pool to ``nodes`` nodes; jobs on nodes that stay are untouched."""
    return _clusters().scale(name, pool, nodes, progress)


def cluster_env(name: str) -> dict[str, str]:
    """Environment variables under which Slurm's own commands (sinfo, squeue, sbatch, srun)
    talk to this cluster, e.g. ``{"SLURM_CONF": ".../etc/slurm.conf"}``."""
    return _clusters().client_env(name)


def delete_cluster(name: str, progress: Progress = no_progress) -> None:
    """Cancel the cluster's jobs, stop its daemons and every job process, remove its files."""
    _clusters().delete(name, progress)


def doctor() -> list[tuple[str, bool, str]]:
    """What each backend needs here: (check, ok, how to fix) rows."""
    from .services.doctor import run_checks

    return run_checks(default_home())


__all__ = ["load_cluster_spec", "parse_cluster_spec", "create_cluster", "get_cluster", "list_clusters", "scale_cluster", "cluster_env", "delete_cluster", "doctor",
           "Cluster", "ClusterSpec"]
