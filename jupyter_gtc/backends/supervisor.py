"""A local cluster's supervisor: notices a node that crashed within a second, not Slurm's
``SlurmdTimeout`` later, and works the first rungs of the remediation ladder on it.

    python -m jupyter_gtc.backends.supervisor HOME CLUSTER     (started with the cluster)

Once a second it looks at every node's slurmd. One whose record says it runs but whose
process is gone has crashed (``%gtc_fault demo gpu-1 crash``, a kernel panic): the node is
set DOWN at once with a reason naming it, so slurmctld requeues its ``--requeue`` jobs onto
the other nodes now (and ends the others NODE_FAIL); then the node is restarted (its slurmd
started again; ``ReturnToService=2`` takes it back when it registers). After ``RESTARTS``
restarts within ``WINDOW_S`` it gives up and leaves the node DOWN, saying so, until someone
starts it again (``%gtc_fault demo gpu-1 crash --clear``). A running job
submitted with a hang timeout that has written no log line for that long is requeued (hung:
a stuck collective writes nothing, and Slurm would wait for its time limit). One loop, so
never two actions on one node at once. Every decision is an event in the state store
(``api.cluster_events``), and a supervisor started again (its process killed, then the cluster
applied again) reads them back: the restarts it counts and the nodes it gave up on are its
predecessor's too. A node that runs but does not answer (``%gtc_fault demo gpu-1 partition``:
its link down) is set DOWN after ``SILENT_TICKS`` seconds and resumed once it answers again.
It ends with its cluster (deleted, or made anew).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from ..exceptions import ClusterNotFound, GtcError
from ..slurm.commands import SlurmCommands
from ..spec.cluster import parse_cluster_spec
from ..spec.job import hang_timeout
from . import daemons

LABEL = "supervisor"
TICK_S = 1.0
SILENT_TICKS = 3  # a node whose slurmd runs but does not answer for this many ticks is cut off
RESTARTS, WINDOW_S = 3, 600.0
REASON = "gtc-supervisor:"


class Supervisor:
    def __init__(self, home: Path, cluster: str):
        from ..state import open_store
        from .local import LocalBackend

        self.store, self.cluster = open_store(home), cluster
        self.backend = LocalBackend(home)
        self.created_at = self.store.get_cluster(cluster).created_at
        self.restarts: dict[str, list[float]] = {}  # node -> when it was restarted
        self.given_up: set[str] = set()
        self.cut_off: set[str] = set()  # set DOWN as unreachable: resumed once they answer again
        self.silent: dict[str, int] = {}  # node -> ticks in a row it has not answered
        for e in self.store.events(cluster):  # what an earlier supervisor of this cluster did
            if e["event"] == "restarted":
                self.restarts.setdefault(e["node"], []).append(e["time"])
            if e["event"] == "gave up":
                self.given_up.add(e["node"])
            elif e["event"] == "back":
                self.given_up.discard(e["node"])
                self.cut_off.discard(e["node"])
            elif e["event"] == "unreachable":
                self.cut_off.add(e["node"])
        self.requeued: set[tuple[str, int]] = set()  # (job, attempt) already requeued as hung

    def run(self) -> None:
        while self.tick():
            time.sleep(TICK_S)

    def tick(self) -> bool:
        """One look at every node; False once the cluster is gone (or is another one now)."""
        try:
            record = self.store.get_cluster(self.cluster)
        except ClusterNotFound:
            return False
        if record.created_at != self.created_at:
            return False
        if record.state != "RUNNING":  # a create, scale or delete is at work: theirs to do
            return True
        spec, runtime = parse_cluster_spec(record.spec), record.runtime
        root, commands = Path(runtime["dir"]), self.backend.commands(runtime)
        for pool in spec.compute_pools():
            for node in pool.node_names():
                crashed = self._crashed(root, node)
                if node in self.given_up and not crashed:  # someone started it again by hand
                    self.given_up.discard(node)
                    self.record(node, "back", "its slurmd runs again (started by hand): supervised again")
                elif node not in self.given_up and crashed:
                    self._remediate(spec, runtime, commands, node)
                elif not crashed:
                    self._check_answers(runtime, commands, node)
        self._requeue_hung(commands)
        return True

    def record(self, node: str, event: str, detail: str) -> None:
        self.store.add_event(self.cluster, node, event, detail)

    def _requeue_hung(self, commands: SlurmCommands) -> None:
        """Requeue each running job that carries a hang timeout (``submit(hang_timeout=)``)
        and has written no log line for that long: a hung collective, a deadlocked loader."""
        try:
            jobs = commands.queue()
        except GtcError:
            return  # slurmctld busy or restarting: the next tick looks again
        now = time.time()
        for job in jobs:
            timeout = hang_timeout(job.comment)
            if job.state != "RUNNING" or timeout is None or not job.log_path or job.start_time is None:
                continue
            try:
                written = os.stat(job.log_path).st_mtime
            except FileNotFoundError:
                written = 0.0
            quiet = now - max(written, job.start_time)
            if quiet > timeout and (job.job_id, job.restart_count) not in self.requeued:
                self.requeued.add((job.job_id, job.restart_count))
                done = commands.run(["scontrol", "requeue", job.job_id], check=False)
                self.record(job.nodes, "hang", f"job {job.job_id} wrote nothing for {quiet:.0f} s (its hang "
                             f"timeout is {timeout:g} s): " + ("requeued" if done.returncode == 0 else
                                                               f"requeue refused: {done.stderr.strip()}"))

    def _check_answers(self, runtime: dict[str, Any], commands: SlurmCommands, node: str) -> None:
        """A node whose slurmd runs but does not answer (a partition: a switch port, a cable)
        is set DOWN after ``SILENT_TICKS``, so its jobs run again elsewhere now, not after
        ``SlurmdTimeout``; restarting it would not help. Once it answers again it is resumed,
        if it is still DOWN for our reason (never a node an admin took out meanwhile)."""
        if self.backend.node_answers(runtime, node):
            self.silent.pop(node, None)
            if node in self.cut_off:
                self.cut_off.discard(node)
                status = next((n for n in commands.nodes() if n.name == node), None)
                if status is not None and (status.reason or "").startswith(REASON):
                    commands.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
                self.record(node, "back", "it answers again: resumed")
            return
        self.silent[node] = self.silent.get(node, 0) + 1
        if self.silent[node] == SILENT_TICKS and node not in self.cut_off:
            self.cut_off.add(node)
            self.record(node, "unreachable", f"its slurmd runs but has not answered for {SILENT_TICKS} s")
            self._set_down(commands, node, "unreachable; resumed once it answers")

    @staticmethod
    def _crashed(root: Path, node: str) -> bool:
        label = f"slurmd-{node}"
        return (root / "run" / f"{label}.json").exists() and daemons.find(label, root / "run") is None

    def _set_down(self, commands: SlurmCommands, node: str, why: str, event: str = "down",
                  detail: str = "set DOWN: slurmctld requeues its --requeue jobs on the other nodes") -> None:
        """``scontrol update State=DOWN`` with our reason (``REASON`` and ``why``), and its event."""
        commands.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={REASON} {why}"], check=False)
        self.record(node, event, detail)

    def _remediate(self, spec, runtime: dict[str, Any], commands: SlurmCommands, node: str) -> None:
        self.record(node, "detected", "its slurmd exited")
        self._set_down(commands, node, "slurmd exited; restarting it")
        now = time.time()
        recent = [t for t in self.restarts.get(node, []) if now - t < WINDOW_S]
        if len(recent) >= RESTARTS:
            self.given_up.add(node)
            self._set_down(commands, node, f"gave up after {RESTARTS} restarts in {WINDOW_S:.0f} s", "gave up",
                           f"{RESTARTS} restarts within {WINDOW_S:.0f} s; it stays DOWN")
            return
        self.restarts[node] = [*recent, now]
        try:
            self.backend.restart_node(spec, runtime, node)
        except GtcError as e:
            self.record(node, "restart failed", str(e))
            return
        self.record(node, "restarted", "its slurmd runs again and has registered")


def main(argv: list[str] | None = None) -> int:
    home, cluster = (argv or sys.argv[1:])[:2]
    os.environ["GTC_HOME"] = home
    try:
        Supervisor(Path(home), cluster).run()
    except ClusterNotFound:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
