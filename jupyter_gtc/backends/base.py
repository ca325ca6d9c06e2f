"""The contract every backend implements. Services call these methods and nothing else;
the record in the state store is owned by the services, the ``runtime`` dict inside it
by the backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import GtcError
from ..health.checks import NodeHealth
from ..hosts import LOCAL, Host
from ..slurm.commands import SlurmCommands
from ..slurm.parse import NodeStatus
from ..spec import machines
from ..spec.cluster import ClusterSpec, parse_cluster_spec
from .job_env import chosen_python_env, python_env_variables

# Progress callbacks receive one short human sentence at a time ("starting slurmd 3/8").
Progress = Callable[[str], None]


def no_progress(message: str) -> None:
    pass


@dataclass
class ClusterStatus:
    """What a backend reports about a live cluster."""

    reachable: bool
    nodes: list[NodeStatus] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # e.g. controller address, GPU backing
    problem: str | None = None


@dataclass(frozen=True)
class NotApplied:
    """A spec field a backend accepts but cannot apply, and why: shown at create (a warning),
    in `gtc cluster describe` and in the cluster's JSON, so nothing is dropped silently."""

    field: str   # node_pools[gpu].boot_disk
    reason: str

    def __str__(self) -> str:
        return f"{self.field} ({self.reason})"


@dataclass(frozen=True)
class PartitionLayout:
    """A partition as jobs see it: what submit checks a job against before sbatch does."""

    name: str
    nodes: tuple[str, ...]
    node_gpus: tuple[int, ...]   # per node, in ``nodes``' order
    node_types: tuple[str, ...]  # per node: "a3-highgpu-8g"; "" where unknown (Slurm then judges)
    default: bool = False        # where a job without --partition goes


@dataclass(frozen=True)
class JobLaunch:
    """How a job's environment reaches it: the script to submit and the variables sbatch
    runs with. ``python_env`` is the environment first on its PATH (None: none given)."""

    script: str
    env: dict[str, str]
    python_env: str | None


@dataclass(frozen=True)
class ContainerLaunch:
    """A job whose ``srun`` steps run in an image (pyxis's ``--container-image``), as sbatch gets it."""

    launch: JobLaunch
    pass_through: bool  # the --container-* flags go to sbatch as given: the cluster's own pyxis runs them


@dataclass(frozen=True)
class WorkDir:
    """Where a job runs (sbatch's ``--chdir``), as a backend places one submitted from a folder."""

    path: str | None            # None: in its own job folder
    missing: str | None = None  # why not the folder it was submitted from, for the submitter; None: nothing to say


class Backend(ABC):
    name: str
    # An attached backend reaches a cluster that exists without it: it never creates, resizes
    # or deletes one (``create`` attaches, ``delete`` detaches).
    attaches = False

    @property
    def stands_in(self) -> bool:
        """Whether a cluster of this backend, made beforehand under a name, is used as it is
        where a local cluster spec of that name is applied (a notebook written against a local
        cluster then runs unchanged on it): attached clusters, and clouds' clusters."""
        return self.attaches

    def __init__(self, home: Path):
        self.home = Path(home)  # jupyter_gtc's folder: the state store, local clusters, job folders

    def parse_spec(self, data: Any, display_name: str | None = None) -> Any:
        """The spec this backend's clusters are described by, validated (``SpecErrors``)."""
        return parse_cluster_spec(data, display_name)

    @abstractmethod
    def problems(self) -> list[str]:
        """What stops this backend from working here, each with how to fix it; [] if none."""

    @abstractmethod
    def check_spec(self, spec: ClusterSpec) -> None:
        """Raise SpecErrors for what this backend cannot provide (beyond the schema)."""

    def not_applied(self, spec: ClusterSpec) -> list[NotApplied]:
        """The fields of ``spec`` this backend accepts and does not apply (the rest it applies)."""
        return []

    @abstractmethod
    def create(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        """Bring the cluster up. ``runtime`` is filled in as resources are made, and saved by
        the caller even when this raises, so ``delete`` can always clean up."""

    @abstractmethod
    def status(self, spec: ClusterSpec, runtime: dict[str, Any]) -> ClusterStatus: ...

    @abstractmethod
    def client_env(self, runtime: dict[str, Any]) -> dict[str, str]:
        """Environment under which Slurm's own commands (sinfo, sbatch, ...) reach this cluster."""

    @abstractmethod
    def commands(self, runtime: dict[str, Any]) -> SlurmCommands:
        """Slurm's command-line tools, pointed at this cluster (run on ``host``)."""

    def host(self, runtime: dict[str, Any]) -> Host:
        """Where the cluster's commands run and its job folders live: this machine for a
        local cluster, the login node for an existing one. Services touch a cluster's files
        only through it."""
        return LOCAL

    def partitions(self, spec: ClusterSpec, runtime: dict[str, Any]) -> list[PartitionLayout]:
        """The cluster's partitions, the default first; from the spec's pools by default."""
        out = []
        for part in spec.slurm.partitions:
            nodes, gpus, types = [], [], []
            for pool_id in part.node_pool_ids:
                pool = spec.pool(pool_id)
                machine = machines.lookup(pool.machine_spec.machine_type)
                nodes += pool.node_names()
                gpus += [machine.gpu_count if machine else 0] * pool.node_count
                types += [machine.name if machine else ""] * pool.node_count
            out.append(PartitionLayout(part.id, tuple(nodes), tuple(gpus), tuple(types), default=not out))
        return out

    def min_poll_interval(self, runtime: dict[str, Any]) -> float:
        """Seconds between two polls of the cluster's scheduler, at the least (a shared one is
        to be spared: sites throttle their users' squeue)."""
        return 0.0

    def jobs_root(self, cluster: str, runtime: dict[str, Any]) -> str:
        """The folder on ``host`` under which each job of ``cluster`` gets its own."""
        return str(self.home / "jobs" / cluster)

    def work_dir(self, spec: Any, runtime: dict[str, Any], submit_dir: str) -> WorkDir:
        """Where a job submitted from ``submit_dir`` (a kernel's or ``gtc``'s working directory)
        runs. Here, as sbatch runs a job: in that folder where the cluster's host has it (this
        machine for a local cluster; an attached cluster's login node, whose file system its
        nodes are taken to share, as a site's home and project folders are); else in its job
        folder, saying so (a notebook on a laptop, its cluster reached over SSH)."""
        host = self.host(runtime)
        found = host.stat(submit_dir)
        if found is not None and found.is_dir:
            return WorkDir(submit_dir)
        return WorkDir(None, f"does not exist on the cluster ({host.name})" if found is None
                       else f"is not a folder on the cluster ({host.name})")

    def job_launch(self, spec: Any, runtime: dict[str, Any], script: str, variables: dict[str, str],
                   python_env: Any) -> JobLaunch:
        """The job as sbatch gets it, with the contract's ``variables`` and ``python_env``
        (``job_env``: a folder, "none", or None for the default). Here: in sbatch's own
        environment, which it exports to the job; this machine's Python environment."""
        chosen = chosen_python_env(python_env)
        return JobLaunch(script, {**python_env_variables(chosen), **variables}, str(chosen) if chosen else None)

    def job_container(self, spec: Any, runtime: dict[str, Any], request: Any, launch: JobLaunch, job_dir: Path,
                      work_dir: str) -> ContainerLaunch:
        """How this backend runs the ``srun`` steps of a job in ``request``'s image
        (``containers.pyxis.ContainerRequest``), the job to be launched as ``launch`` from
        ``job_dir`` in ``work_dir``; raises ``ContainerRefused`` (naming the image and what to
        install) before anything is submitted where it cannot. Here: it cannot."""
        from ..containers.slurm_job import ContainerRefused

        raise ContainerRefused(f"image {request.image}: the {self.name} backend does not run --container-image "
                               f"jobs; run it on a local cluster, or an attached one whose srun has pyxis")

    def health(self, spec: Any, runtime: dict[str, Any], now: bool) -> list[NodeHealth]:
        """Each node's last health-check run (``now``: run them first, within seconds)."""
        raise GtcError(f"the {self.name} backend does not run node health checks yet")

    def events(self, spec: Any, runtime: dict[str, Any]) -> list[dict[str, Any]]:
        """What the cluster itself records of its nodes' faults and repairs (a cloud's own
        operations log), oldest first; our supervisor's decisions are in the state store."""
        return []

    def inject_fault(self, spec: Any, runtime: dict[str, Any], node: str, fault: str, clear: bool) -> None:
        """Make ``node`` fail as ``fault`` would (or stop it failing: ``clear``), for testing."""
        raise GtcError(f"faults are injected only into local clusters, for testing; {self.name} clusters are real")

    @abstractmethod
    def scale(self, old: ClusterSpec, new: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        """Resize pools from ``old`` to ``new`` without disturbing jobs on nodes that stay."""

    @abstractmethod
    def delete(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        """Cancel jobs, stop everything the cluster runs and remove its files. Idempotent."""
