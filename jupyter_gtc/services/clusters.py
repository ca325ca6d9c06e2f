"""Cluster lifecycle: validate, record, provision, scale, describe, delete.

The state store's record is written before anything starts (state CREATING) and updated
as the backend makes resources, so a failure at any point leaves something ``delete``
can clean up, and a failed create is rolled back completely.

Each change is two steps: a quick claim (check, then record the cluster as CREATING,
SCALING or DELETING, and which process does it) and the backend's slow work. ``create``,
``scale`` and ``delete`` do both in the caller; ``start_create``, ``start_scale`` and
``start_delete`` claim in the caller and return an ``Operation`` whose thread does the work
(operations.py).

A process can die mid-change (a Jupyter server restarted while it scaled). Whoever reads
the cluster next finds its recorded owner gone and marks it ERROR, saying what was
interrupted: a scale (to any size) repairs it, and delete always works.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .._process import process_alive, this_process
from ..backends import get_backend
from ..backends.base import Backend, ClusterStatus, NotApplied, PartitionLayout, Progress, no_progress
from ..health.checks import FAIL, WARN
from ..exceptions import ClusterBusy, ClusterNotFound, GtcError, SpecError, SpecErrors
from ..spec.attach import AttachSpec
from ..spec.cluster import ClusterSpec, spec_differences
from ..state import ClusterRecord, Store
from .operations import Operation, Operations

CREATING, RUNNING, SCALING, DELETING, ERROR = "CREATING", "RUNNING", "SCALING", "DELETING", "ERROR"

# What a claim hands the slow step: the new cluster's spec, backend and record; for a scale,
# also the spec before and after; for a delete, the record and its spec.
NewClaim = tuple[ClusterSpec, Backend, ClusterRecord]
ScaleClaim = tuple[ClusterRecord, Backend, ClusterSpec, ClusterSpec]
DeleteClaim = tuple[ClusterRecord, ClusterSpec]


@dataclass
class Cluster:
    """A cluster as every front end shows it. ``to_json`` is the REST payload."""

    name: str
    backend: str
    state: str
    spec: ClusterSpec | AttachSpec  # what it was created from, or (an attached one) how it is reached
    created_at: float
    status: ClusterStatus | None = None
    runtime: dict[str, Any] = field(default_factory=dict, repr=False)
    interrupted: str | None = None  # ERROR: what was under way when its process died, and what to do
    not_applied: list[NotApplied] = field(default_factory=list)  # spec fields its backend accepts, does not apply
    partitions: list[PartitionLayout] = field(default_factory=list)  # the default first

    @property
    def problem(self) -> str | None:
        parts = [p for p in (self.interrupted, self.status.problem if self.status else None) if p]
        return "\n".join(parts) or None

    @property
    def nodes(self):
        return self.status.nodes if self.status else []

    @property
    def attached(self) -> bool:
        """Whether it is a cluster that exists without jupyter_gtc (backend ``slurm``, or a
        ``vertex`` target)."""
        return not isinstance(self.spec, ClusterSpec)

    @property
    def node_count(self) -> int:
        return len(self._node_gpus())

    @property
    def gpu_count(self) -> int:
        return sum(self._node_gpus().values())

    def _node_gpus(self) -> dict[str, int]:
        return {n: g for p in self.partitions for n, g in zip(p.nodes, p.node_gpus)}

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name, "backend": self.backend, "state": self.state,
            "created_at": self.created_at, "node_count": self.node_count, "gpu_count": self.gpu_count,
            "attached": self.attached,
            "spec": self.spec.to_json(),
            "not_applied": [asdict(item) for item in self.not_applied],
            "partitions": [asdict(p) for p in self.partitions],
        }
        if self.status is not None or self.interrupted:
            out["problem"] = self.problem
        if self.status is not None:
            out["reachable"] = self.status.reachable
            out["details"] = self.status.details
            out["nodes"] = [
                {k: v for k, v in asdict(n).items() if k != "extra"} | {"ready": n.ready} for n in self.status.nodes
            ]
        return out


class ClusterService:
    def __init__(self, store: Store, home: Path):
        self.store = store
        self.home = home
        self.operations = Operations()  # creates, scales and deletes started in the background

    def create(self, spec: ClusterSpec | dict | str, backend: str = "local", progress: Progress = no_progress) -> Cluster:
        return self._provision(self._claim_new(spec, backend), progress)

    def start_create(self, spec: ClusterSpec | AttachSpec | dict | str, backend: str = "local") -> Operation:
        """``create`` in the background: checked and recorded (CREATING) before this returns."""
        spec = _parsed(get_backend(backend, self.home), spec)
        return self.operations.start("create", spec.name, lambda: self._claim_new(spec, backend), self._provision)

    def _claim_new(self, spec: ClusterSpec | AttachSpec | dict | str, backend: str) -> NewClaim:
        impl = get_backend(backend, self.home)
        spec = _parsed(impl, spec)
        impl.check_spec(spec)
        record = ClusterRecord(spec.name, backend, CREATING, spec.to_json(), {}, owner=_owner("creating"))
        self.store.add_cluster(record)  # raises ClusterExists before anything starts
        return spec, impl, record

    def _provision(self, claimed: NewClaim, progress: Progress) -> Cluster:
        spec, impl, record = claimed
        runtime = record.runtime
        try:
            impl.create(spec, runtime, self._recording(spec.name, runtime, progress))
        except BaseException:
            progress("creation failed; removing what was started")
            try:
                impl.delete(spec, runtime, no_progress)
            finally:
                self.store.remove_cluster(spec.name)
            raise
        self.store.update_cluster(spec.name, state=RUNNING, runtime=runtime, owner=None)
        return self.get(spec.name)

    def apply(self, spec: ClusterSpec | dict | str, backend: str = "local",
              progress: Progress = no_progress) -> Cluster:
        """Create the cluster ``spec`` describes, or bring an existing one to it by scaling its
        compute pools. Any other difference is refused, naming the fields, before anything
        changes: a running cluster is never half-changed. A cluster of that name that was
        attached (backend ``slurm``) is used as it is if it has what the spec asks (its
        partitions, nodes and GPUs): a notebook written against a local cluster then runs
        unchanged on the real cluster attached under that name."""
        spec = _parsed(get_backend(backend, self.home), spec)
        if spec.name not in [r.name for r in self.store.list_clusters()]:
            return self.create(spec, backend, progress)
        record = self.store.get_cluster(spec.name)
        if (record.backend != backend and isinstance(spec, ClusterSpec)
                and get_backend(record.backend, self.home, record.spec).stands_in):
            cluster = self.get(spec.name)
            _check_fits(cluster, spec)
            progress(f"cluster {spec.name} is attached ({record.backend}): used as it is")
            return cluster
        if record.backend != backend:
            raise SpecError("backend", backend, f"cluster {spec.name} exists with backend {record.backend}; "
                                                f"delete (or detach) it first, or give another name")
        impl = get_backend(backend, self.home, spec)  # vertex: a target attaches, a training cluster not
        if impl.attaches:  # nothing of an attached cluster changes in place
            different = spec_differences(impl.parse_spec(record.spec).to_json(), spec.to_json())
            if different:
                raise SpecError(", ".join(different), spec.name, f"cluster {spec.name} is attached with other "
                                                                 f"settings; detach it and attach it again")
            return self.get(spec.name)
        current = impl.parse_spec(record.spec)  # a training cluster's has its login section
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
        record = self._settled(self.store.get_cluster(name))
        backend = get_backend(record.backend, self.home)
        spec = backend.parse_spec(record.spec)
        status = None
        # A create that was interrupted never made a cluster to ask: its message says all there is.
        if with_status and record.state in (RUNNING, SCALING, ERROR) and not _create_interrupted(record):
            status = backend.status(spec, record.runtime)
        partitions = backend.partitions(spec, record.runtime)
        return Cluster(record.name, record.backend, record.state, spec, record.created_at, status, record.runtime,
                       _interruption(record), backend.not_applied(spec), partitions)

    def _recording(self, name: str, runtime: dict[str, Any], progress: Progress) -> Progress:
        """``progress`` that first records the backend's ``runtime`` as it is so far (it adds
        to it as it goes): a process killed at any step leaves a record of what it started,
        which is what a repair or a delete then works from."""
        def step(message: str) -> None:
            self.store.update_cluster(name, runtime=runtime)
            progress(message)
        return step

    def _settled(self, record: ClusterRecord) -> ClusterRecord:
        """``record``, marked ERROR first if the process changing it has died meanwhile."""
        owner = record.owner
        if record.state in (CREATING, SCALING, DELETING) and owner and "action" in owner and not process_alive(owner):
            interrupted = {"interrupted": owner["action"], "pid": owner["pid"]}
            # Only if nobody changed it since we read it: a new claim must not be undone.
            if self.store.update_cluster(record.name, expect={"state": record.state, "owner": owner},
                                         state=ERROR, owner=interrupted):
                record = replace(record, state=ERROR, owner=interrupted)
        return record

    def list(self, with_status: bool = True) -> list[Cluster]:
        clusters = []
        for record in self.store.list_clusters():
            try:
                clusters.append(self.get(record.name, with_status))
            except ClusterNotFound:  # deleted (or a failed create rolled back) since the listing
                continue
        return clusters

    def scale(self, name: str, pool: str, nodes: int, progress: Progress = no_progress) -> Cluster:
        return self._resize(self._claim_scale(name, pool, nodes), progress)

    def start_scale(self, name: str, pool: str, nodes: int) -> Operation:
        """``scale`` in the background: checked and marked SCALING before this returns."""
        return self.operations.start("scale", name, lambda: self._claim_scale(name, pool, nodes), self._resize)

    def _claim_scale(self, name: str, pool: str, nodes: int) -> ScaleClaim:
        record = self.store.get_cluster(name)
        impl = get_backend(record.backend, self.home, record.spec)  # vertex: a training cluster scales
        if impl.attaches:
            raise GtcError(f"cluster {name} is attached (backend {record.backend}): jupyter_gtc never resizes a "
                           f"cluster it did not create; its admins do")
        old = impl.parse_spec(record.spec)
        pool_ids = [p.id for p in old.compute_pools()]
        if pool not in pool_ids:
            raise SpecError("pool", pool, f"compute pools of {name}: {', '.join(pool_ids)}")
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise SpecError("nodes", nodes, "a whole number of nodes, at least 1")
        record = self._settled(record)
        if _create_interrupted(record):
            raise ClusterBusy(name, f"cluster {name} is ERROR: {_interruption(record)}", record.state)
        if record.state not in (RUNNING, ERROR):
            raise ClusterBusy(name, f"cluster {name} is {record.state}; it can be scaled only when RUNNING", record.state)
        new = old.with_pool_size(pool, nodes)
        impl.check_spec(new)
        # A cluster in ERROR is scaled even to the size it has: that re-applies it (the repair).
        if (new != old or record.state == ERROR) and not self.store.update_cluster(
                name, expect={"state": record.state, "owner": record.owner}, state=SCALING,
                owner=_owner(f"scaling pool {pool} to {nodes} node(s)")):
            raise ClusterBusy(name, f"cluster {name} changed meanwhile (another process claimed it); look again and retry")
        return record, impl, old, new

    def _resize(self, claimed: ScaleClaim, progress: Progress) -> Cluster:
        record, impl, old, new = claimed
        name, runtime = record.name, record.runtime
        if new == old and record.state != ERROR:
            return self.get(name)
        try:
            impl.scale(old, new, runtime, self._recording(name, runtime, progress))
        except BaseException:
            # The backend refused (jobs on the nodes to remove) or rolled back to ``old``; a
            # repair that failed leaves the cluster in ERROR, saying what was interrupted.
            self.store.update_cluster(name, state=record.state, runtime=runtime,
                                      owner=record.owner if record.state == ERROR else None)
            raise
        self.store.update_cluster(name, state=RUNNING, spec=new.to_json(), runtime=runtime, owner=None)
        return self.get(name)

    def health(self, name: str, now: bool = True) -> list[dict[str, Any]]:
        """One row per node: Slurm's state and reason for it, each check's verdict, what the
        failing or warning checks saw, the node's verdict and when it was checked. ``now``:
        the checks run first (a few seconds); else the last run of each node's checks."""
        record = self.store.get_cluster(name)
        backend = get_backend(record.backend, self.home)
        spec = backend.parse_spec(record.spec)
        reports = {h.node: h for h in backend.health(spec, record.runtime, now)}
        nodes = {n.name: n for n in backend.status(spec, record.runtime).nodes}
        rows = []
        for node in sorted(set(nodes) | set(reports)):
            status, report = nodes.get(node), reports.get(node)
            row: dict[str, Any] = {"node": node, "state": status.display_state if status else "unknown",
                                   "reason": (status.reason or "") if status else ""}
            results = report.results if report else ()
            row |= {r.check: r.verdict for r in results}
            row["evidence"] = "; ".join(f"{r.check}: {r.evidence}" for r in results if r.verdict in (FAIL, WARN))
            row["verdict"] = report.verdict if report else "not checked"
            row["checked_at"] = report.time if report else None
            rows.append(row)
        return rows

    def events(self, name: str) -> list[dict[str, Any]]:
        """What happened to the cluster's nodes, oldest first: time, node, event (detected, down,
        restarted, gave up, hang), detail. The supervisor's decisions, and the backend's own."""
        record = self.store.get_cluster(name)
        backend = get_backend(record.backend, self.home)
        own = backend.events(backend.parse_spec(record.spec), record.runtime)
        return sorted(self.store.events(name) + own, key=lambda e: e["time"])

    def inject_fault(self, name: str, node: str, fault: str, clear: bool = False) -> None:
        """Make a local cluster's ``node`` fail as ``fault`` (ecc, xid, slow, disk_full, hang,
        crash) would, for testing health checks and recovery; ``clear`` undoes it."""
        record = self.store.get_cluster(name)
        if record.state != RUNNING:
            raise ClusterBusy(name, f"cluster {name} is {record.state}; faults are injected into a RUNNING cluster",
                              record.state)
        backend = get_backend(record.backend, self.home)
        backend.inject_fault(backend.parse_spec(record.spec), record.runtime, node, fault, clear)

    def client_env(self, name: str) -> dict[str, str]:
        record = self.store.get_cluster(name)
        return get_backend(record.backend, self.home).client_env(record.runtime)

    def delete(self, name: str, progress: Progress = no_progress) -> None:
        self._tear_down(self._claim_delete(name), progress)

    def start_delete(self, name: str) -> Operation:
        """``delete`` in the background: marked DELETING before this returns."""
        return self.operations.start("delete", name, lambda: self._claim_delete(name), self._tear_down)

    def _claim_delete(self, name: str) -> DeleteClaim:
        record = self.store.get_cluster(name)
        spec = get_backend(record.backend, self.home).parse_spec(record.spec)
        self.store.update_cluster(name, state=DELETING, owner=_owner("deleting"))  # always allowed: the way out
        return record, spec

    def _tear_down(self, claimed: DeleteClaim, progress: Progress) -> None:
        from .vertex_local import stop_serving

        record, spec = claimed
        for port in stop_serving(self.home, record.name):
            progress(f"stopped the local Vertex endpoint on port {port}")
        get_backend(record.backend, self.home).delete(spec, record.runtime, progress)
        self.store.remove_cluster(record.name)


def _check_fits(cluster: Cluster, spec: ClusterSpec) -> None:
    """Refuse ``spec`` for the attached ``cluster`` where one of its partitions is missing there,
    or has fewer nodes or GPUs per node than the spec's, naming the partition and what it has."""
    have = {p.name: p for p in cluster.partitions}
    for i, part in enumerate(spec.slurm.partitions):
        field_ = f"orchestrator_spec.slurm_spec.partitions[{i}]"
        got = have.get(part.id)
        if got is None:
            raise SpecError(field_, part.id, f"the attached cluster {cluster.name} has partitions "
                                             f"{', '.join(have) or '(none)'}; use one of them, or another name")
        nodes = sum(spec.pool(pid).node_count for pid in part.node_pool_ids)
        gpus = max((spec.pool(pid).machine.gpu_count for pid in part.node_pool_ids), default=0)
        if len(got.nodes) < nodes or max(got.node_gpus, default=0) < gpus:
            raise SpecError(field_, part.id, f"partition {part.id} of the attached cluster {cluster.name} has "
                                             f"{len(got.nodes)} node(s) with up to {max(got.node_gpus, default=0)} "
                                             f"GPUs; the spec asks {nodes} with {gpus}")


def _parsed(backend: Backend, spec: ClusterSpec | AttachSpec | dict | str) -> ClusterSpec | AttachSpec:
    return spec if isinstance(spec, (ClusterSpec, AttachSpec)) else backend.parse_spec(spec)


def _owner(action: str) -> dict[str, Any]:
    return {**this_process(), "action": action}


def _create_interrupted(record: ClusterRecord) -> bool:
    return record.state == ERROR and (record.owner or {}).get("interrupted") == "creating"


def _interruption(record: ClusterRecord) -> str | None:
    """What an ERROR cluster says of the change its process did not finish, and what to do."""
    owner = record.owner or {}
    if record.state != ERROR or "interrupted" not in owner:
        return None
    action, pid = owner["interrupted"], owner.get("pid")
    then = ("delete it and create it again" if action == "creating" else
            "delete it again" if action == "deleting" else "scale it (to any size) to repair it, or delete it")
    return f"{action} was interrupted: the process doing it (pid {pid}) ended; {then}"


__all__ = ["Cluster", "ClusterService", "SpecErrors"]
