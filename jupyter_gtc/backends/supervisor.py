"""A local cluster's supervisor: notices a failed node within seconds, not Slurm's
``SlurmdTimeout`` later, gets its jobs running elsewhere, and walks the remediation ladder on it.

    python -m jupyter_gtc.backends.supervisor HOME CLUSTER     (started with the cluster)

Once a second it looks at every node. It acts on three kinds of failure:

- a crash: the node's slurmd record says it runs but its process is gone (``%gtc_fault demo
  gpu-1 crash``, a kernel panic). The node is set DOWN at once with a reason naming it, so
  slurmctld requeues its ``--requeue`` jobs onto the other nodes now (and ends the others
  NODE_FAIL);
- a failed health check: Slurm's HealthCheckProgram drained the node (reason ``gtc-health:``,
  health/node.py). A drain lets jobs run on, so its running jobs are requeued;
- silence: the node's slurmd runs but does not answer (``%gtc_fault demo gpu-1 partition``,
  its link down). It is set DOWN after ``SILENT_TICKS`` seconds and resumed once it answers.

A crashed or health-drained node then goes up the ladder (health/ladder.py): restart (its
slurmd), reimage (its local state wiped), replace (a fresh node), each rung within its attempt
limit within ``local.supervisor_window`` and after ``local.supervisor_cooldown`` since the
node's last action; after
each, a health-drained node's checks are run again: it is resumed when they pass, the next
rung follows when they do not. When no rung is left it gives up: the node stays out, saying
why, until someone starts or resumes it by hand (event "back"). A node an admin drained or
set DOWN is never touched. A running job submitted with a hang timeout that has written no
log line for that long is requeued (hung: a stuck collective writes nothing, and Slurm would
wait for its time limit).

One loop, so never two actions on one node at once (nor on two nodes: a replace that takes
seconds delays the next look at the others by as much). Every decision is an event in the
state store (``api.cluster_events``), and a supervisor started again (its process killed,
then the cluster applied again) reads them back: the attempts it counts, the nodes it gave up
on and the episodes still open are its predecessor's too. It ends with its cluster (deleted,
or made anew).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from ..exceptions import ClusterNotFound, GtcError
from ..health import ladder
from ..health.checks import FAIL
from ..health.node import REASON_PREFIX as HEALTH_REASON
from ..slurm.commands import SlurmCommands
from ..slurm.parse import NodeStatus
from ..spec.cluster import parse_cluster_spec
from ..spec.job import hang_timeout
from . import daemons

LABEL = "supervisor"
TICK_S = 1.0
SILENT_TICKS = 3  # a node whose slurmd runs but does not answer for this many ticks is cut off
RESTARTS = ladder.Limits().attempts["restart"]  # restarts of a node within the window, by default
REASON = "gtc-supervisor:"


class Supervisor:
    def __init__(self, home: Path, cluster: str, limits: ladder.Limits | None = None):
        """``limits``: the ladder's attempt limits, window and cool-down; by default
        ``ladder.Limits`` with the spec's ``local.supervisor_cooldown`` and ``supervisor_window``."""
        from ..state import open_store
        from .local import LocalBackend

        self.store, self.cluster, self.limits = open_store(home), cluster, limits
        self.backend = LocalBackend(home)
        self.created_at = self.store.get_cluster(cluster).created_at
        self.given_up: set[str] = set()
        self.cut_off: set[str] = set()  # set DOWN as unreachable: resumed once they answer again
        self.silent: dict[str, int] = {}  # node -> ticks in a row it has not answered
        by_node: dict[str, list[dict]] = {}
        for e in self.store.events(cluster):  # what an earlier supervisor of this cluster did
            by_node.setdefault(e["node"], []).append(e)
            if e["event"] == "gave up":
                self.given_up.add(e["node"])
            elif e["event"] == "back":
                self.given_up.discard(e["node"])
                self.cut_off.discard(e["node"])
            elif e["event"] == "unreachable":
                self.cut_off.add(e["node"])
        # node -> the kind of its episode under remediation ("crash" or "health")
        self.open = {node: kind for node, events in by_node.items()
                     if node not in self.given_up and (kind := ladder.open_episode(events))}
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
        limits = self.limits or ladder.Limits(cooldown_s=spec.local.supervisor_cooldown,
                                              window_s=spec.local.supervisor_window)
        try:
            statuses = {n.name: n for n in commands.nodes()}
        except GtcError:
            statuses = {}  # slurmctld busy or restarting: crashes are still seen, drains next tick
        for pool in spec.compute_pools():
            for node in pool.node_names():
                crashed, status = self._crashed(root, node), statuses.get(node)
                if node in self.given_up:
                    if not crashed and status is not None and status.ready:  # started or resumed by hand
                        self.given_up.discard(node)
                        self.record(node, "back", "it runs and takes jobs again (started or resumed by hand): "
                                                  "supervised again")
                    continue
                kind = self.open.get(node)
                if kind is None and crashed:
                    self.open[node] = "crash"
                    self.record(node, "detected", ladder.CRASH_DETAIL)
                    self._set_down(commands, node, "slurmd exited; restarting it")
                elif kind is None and _health_drained(status):
                    self.open[node] = "health"
                    self.record(node, "detected", f"drained by its health check: {status.reason}")
                    self._requeue_jobs(commands, node)
                elif kind == "crash" and not crashed:  # its slurmd was started meanwhile (by hand)
                    del self.open[node]
                elif kind == "health" and status is not None and not _health_drained(status) and not crashed:
                    del self.open[node]  # its HealthCheckProgram passed again and resumed it, or an admin took it
                    if status.ready:
                        self.record(node, "healthy", f"its health check passes again: {status.display_state}")
                    else:
                        self.record(node, "left alone", f"{status.display_state} for another reason now "
                                                        f"({status.reason}): not ours to remediate")
                if node in self.open:
                    self._climb(spec, runtime, commands, node, limits)
                elif not crashed:
                    self._check_answers(runtime, commands, node)
        self._requeue_hung(commands)
        return True

    def record(self, node: str, event: str, detail: str) -> None:
        self.store.add_event(self.cluster, node, event, detail)

    def _climb(self, spec, runtime: dict[str, Any], commands: SlurmCommands, node: str, limits: ladder.Limits) -> None:
        """The next rung of ``node``'s ladder, unless it is cooling down; for a health failure,
        its checks run again after the action: a pass resumes it, a failure waits for the next."""
        kind = self.open[node]
        if kind == "health" and self._has_jobs(commands, node):
            # Not while a job is on it, even one ending (COMPLETING): a node restarted under a job
            # slurmctld is still ending never reports that job's end, and slurmctld holds the
            # job (its requeue too) until it sends the kill again, ~90 s later. As `scontrol
            # reboot ASAP` does, wait for the drained node to be empty.
            return
        events = [e for e in self.store.events(self.cluster) if e["node"] == node]
        decision = ladder.next_action(events, time.time(), limits)
        if decision.action == "wait":
            return
        if decision.action == "give up":
            del self.open[node]
            self.given_up.add(node)
            # A node whose slurmd runs is drained, not set DOWN: ReturnToService=2 would take a DOWN
            # one back at its next answer to slurmctld's ping.
            state = "DOWN" if kind == "crash" else "DRAIN"
            self._set_down(commands, node, f"gave up: {decision.why}", "gave up",
                           f"{decision.why}; it stays {state} until it is started or resumed by hand", state)
            return
        rung = decision.action
        try:
            getattr(self.backend, f"{rung}_node")(spec, runtime, node)
        except GtcError as e:
            self.record(node, ladder.FAILED[rung], f"{decision.why}: {e}")
            return
        if kind == "crash":
            del self.open[node]
            self.record(node, ladder.DONE[rung], f"{decision.why}: its slurmd runs again and has registered")
            return
        self.record(node, ladder.DONE[rung], f"{decision.why}: it has registered; running its checks")
        health = self.backend.check_node(spec, runtime, node)
        failed = [f"{r.check}: {r.evidence}" for r in health.results if r.verdict == FAIL]
        if failed:
            self.record(node, "still failing", "; ".join(failed))
            return
        del self.open[node]
        status = next((n for n in commands.nodes() if n.name == node), None)
        if status is not None and (status.reason or "").startswith((HEALTH_REASON, REASON)):
            commands.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
        self.record(node, "healthy", "its checks pass: resumed")

    @staticmethod
    def _has_jobs(commands: SlurmCommands, node: str) -> bool:
        try:
            return bool(commands.job_ids([node]))
        except GtcError:
            return True  # slurmctld busy: look again next tick

    def _requeue_jobs(self, commands: SlurmCommands, node: str) -> None:
        """Requeue the jobs running on a drained ``node`` (a drain lets them run on, on a node
        that fails its checks), so they run again on healthy nodes from their checkpoints."""
        try:
            jobs = commands.job_ids([node], states=["RUNNING"])
        except GtcError as e:
            self.record(node, "requeue failed", f"cannot list its jobs: {e}")
            return
        for job in jobs:
            done = commands.run(["scontrol", "requeue", job], check=False)
            self.record(node, "requeued", f"job {job}: it runs again on healthy nodes" if done.returncode == 0 else
                        f"job {job}: requeue refused ({done.stderr.strip()}); it runs on, on a failing node")

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
                  detail: str = "set DOWN: slurmctld requeues its --requeue jobs on the other nodes",
                  state: str = "DOWN") -> None:
        """``scontrol update State=DOWN`` (or ``state``) with our reason (``REASON`` and ``why``),
        and its event."""
        commands.run(["scontrol", "update", f"NodeName={node}", f"State={state}", f"Reason={REASON} {why}"],
                     check=False)
        self.record(node, event, detail)


def _health_drained(status: NodeStatus | None) -> bool:
    """Drained (or draining) by a failed health check of ours: never by an admin."""
    return status is not None and "DRAIN" in status.flags and (status.reason or "").startswith(HEALTH_REASON)


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
