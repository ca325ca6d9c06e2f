"""Slurm's command-line tools for one cluster, run through the edge (``_process.run``).

The cluster is chosen by ``SLURM_CONF``; the same class will serve an SSH runner later.
"""

from __future__ import annotations

from .. import _process
from .parse import NodeStatus, parse_scontrol_nodes


class SlurmCommands:
    def __init__(self, env: dict[str, str], timeout: float = 30):
        self.env = env
        self.timeout = timeout

    def run(self, argv: list[str], *, check: bool = True, timeout: float | None = None) -> _process.Result:
        return _process.run(argv, env=self.env, check=check, timeout=timeout or self.timeout)

    def ping(self) -> bool:
        """True when slurmctld answers."""
        result = self.run(["scontrol", "ping"], check=False, timeout=10)
        return result.returncode == 0 and "UP" in result.stdout

    def nodes(self) -> list[NodeStatus]:
        return parse_scontrol_nodes(self.run(["scontrol", "-d", "-o", "show", "node"]).stdout)

    def job_ids(self, nodes: list[str] | None = None) -> list[str]:
        """Ids of jobs not yet finished, optionally only those on ``nodes``."""
        argv = ["squeue", "-h", "-o", "%i"]
        if nodes:
            argv += ["-w", ",".join(nodes)]
        return self.run(argv).stdout.split()

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self.run(["scancel", *job_ids])

    def reconfigure(self) -> None:
        self.run(["scontrol", "reconfigure"])
