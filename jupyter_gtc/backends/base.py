"""The contract every backend implements. Services call these methods and nothing else;
the record in the state store is owned by the services, the ``runtime`` dict inside it
by the backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..hosts import LOCAL, Host
from ..slurm.commands import SlurmCommands
from ..slurm.parse import NodeStatus
from ..spec.cluster import ClusterSpec

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


class Backend(ABC):
    name: str

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

    @abstractmethod
    def scale(self, old: ClusterSpec, new: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        """Resize pools from ``old`` to ``new`` without disturbing jobs on nodes that stay."""

    @abstractmethod
    def delete(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        """Cancel jobs, stop everything the cluster runs and remove its files. Idempotent."""
