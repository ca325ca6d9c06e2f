"""Cluster lifecycle: validate, record, provision, scale, describe, delete.

The state store's record is written before anything starts (state CREATING) and updated
as the backend makes resources, so a failure at any point leaves something ``delete``
can clean up, and a failed create is rolled back completely.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..backends import get_backend
from ..backends.base import ClusterStatus, Progress, no_progress
from ..exceptions import ClusterBusy, SpecError, SpecErrors
from ..spec.cluster import ClusterSpec, parse_cluster_spec, spec_differences
from ..state import ClusterRecord, Store

CREATING, RUNNING, SCALING, DELETING, ERROR = "CREATING", "RUNNING", "SCALING", "DELETING", "ERROR"


@dataclass
class Cluster:
    """A cluster as every front end shows it. ``to_json`` is the REST payload."""

    name: str
    backend: str
    state: str
    spec: ClusterSpec
    created_at: float
    status: ClusterStatus | None = None
    runtime: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def nodes(self):
        return self.status.nodes if self.status else []

    @property
    def node_count(self) -> int:
        return sum(p.node_count for p in self.spec.compute_pools())

    @property
    def gpu_count(self) -> int:
        return sum(p.node_count * p.machine.gpu_count for p in self.spec.compute_pools())

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name, "backend": self.backend, "state": self.state,
            "created_at": self.created_at, "node_count": self.node_count, "gpu_count": self.gpu_count,
            "spec": self.spec.to_json(),
        }
        if self.status is not None:
            out["reachable"] = self.status.reachable
            out["problem"] = self.status.problem
            out["details"] = self.status.details
            out["nodes"] = [
                {k: v for k, v in asdict(n).items() if k != "extra"} | {"ready": n.ready} for n in self.status.nodes
            ]
        return out


class ClusterService:
    def __init__(self, store: Store, home: Path):
        self.store = store
        self.home = home

    def create(self, spec: ClusterSpec | dict | str, backend: str = "local", progress: Progress = no_progress) -> Cluster:
        spec = spec if isinstance(spec, ClusterSpec) else parse_cluster_spec(spec)
        impl = get_backend(backend, self.home)
        impl.check_spec(spec)
        runtime: dict[str, Any] = {}
        record = ClusterRecord(spec.name, backend, CREATING, spec.to_json(), runtime)
        self.store.add_cluster(record)  # raises ClusterExists before anything starts
        try:
            impl.create(spec, runtime, progress)
        except BaseException:
            progress("creation failed; removing what was started")
            try:
                impl.delete(spec, runtime, no_progress)
            finally:
                self.store.remove_cluster(spec.name)
            raise
        self.store.update_cluster(spec.name, state=RUNNING, runtime=runtime)
        return self.get(spec.name)

    def apply(self, spec: ClusterSpec | dict | str, backend: str = "local",
              progress: Progress = no_progress) -> Cluster:
        """Create the cluster ``spec`` describes, or bring an existing one to it by scaling its
        compute pools. Any other difference is refused, naming the fields, before anything
        changes: a running cluster is never half-changed."""
        spec = spec if isinstance(spec, ClusterSpec) else parse_cluster_spec(spec)
        if spec.name not in [r.name for r in self.store.list_clusters()]:
            return self.create(spec, backend, progress)
        current = parse_cluster_spec(self.store.get_cluster(spec.name).spec)
        resized = current
        for pool in spec.compute_pools():
            if pool.id in {p.id for p in current.compute_pools()}:
                resized = resized.with_pool_size(pool.id, pool.node_count)
        different = spec_differences(resized.to_json(), spec.to_json())
        if different:
            raise SpecError(", ".join(different), spec.name,
                            f"cluster {spec.name} exists and only compute pools' node counts change in place; "
                            f"delete it and create it again to change the rest")
        for pool in spec.compute_pools():
            if pool.node_count != current.pool(pool.id).node_count:
                progress(f"scaling pool {pool.id} to {pool.node_count} node(s)")
                self.scale(spec.name, pool.id, pool.node_count, progress)
        return self.get(spec.name)

    def get(self, name: str, with_status: bool = True) -> Cluster:
        record = self.store.get_cluster(name)
        spec = parse_cluster_spec(record.spec)
        status = None
        if with_status and record.state in (RUNNING, SCALING, ERROR):
            status = get_backend(record.backend, self.home).status(spec, record.runtime)
        return Cluster(record.name, record.backend, record.state, spec, record.created_at, status, record.runtime)

    def list(self, with_status: bool = True) -> list[Cluster]:
        return [self.get(r.name, with_status) for r in self.store.list_clusters()]

    def scale(self, name: str, pool: str, nodes: int, progress: Progress = no_progress) -> Cluster:
        record = self.store.get_cluster(name)
        old = parse_cluster_spec(record.spec)
        pool_ids = [p.id for p in old.compute_pools()]
        if pool not in pool_ids:
            raise SpecError("pool", pool, f"compute pools of {name}: {', '.join(pool_ids)}")
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise SpecError("nodes", nodes, "a whole number of nodes, at least 1")
        if record.state != RUNNING:
            raise ClusterBusy(f"cluster {name} is {record.state}; it can be scaled only when RUNNING")
        new = old.with_pool_size(pool, nodes)
        impl = get_backend(record.backend, self.home)
        impl.check_spec(new)
        if new == old:
            return self.get(name)
        runtime = record.runtime
        self.store.update_cluster(name, state=SCALING)
        try:
            impl.scale(old, new, runtime, progress)
        except BaseException:
            # The backend refused (jobs on the nodes to remove) or rolled back to ``old``.
            self.store.update_cluster(name, state=RUNNING, runtime=runtime)
            raise
        self.store.update_cluster(name, state=RUNNING, spec=new.to_json(), runtime=runtime)
        return self.get(name)

    def client_env(self, name: str) -> dict[str, str]:
        record = self.store.get_cluster(name)
        return get_backend(record.backend, self.home).client_env(record.runtime)

    def delete(self, name: str, progress: Progress = no_progress) -> None:
        record = self.store.get_cluster(name)
        spec = parse_cluster_spec(record.spec)
        self.store.update_cluster(name, state=DELETING)
        get_backend(record.backend, self.home).delete(spec, record.runtime, progress)
        self.store.remove_cluster(name)


__all__ = ["Cluster", "ClusterService", "SpecErrors"]
