"""A local cluster's supervisor: notices a failed node within seconds, not Slurm's
``SlurmdTimeout`` later, gets its jobs running elsewhere, and walks the remediation ladder on it.

    python -m jupyter_gtc.backends.supervisor HOME CLUSTER     (started with the cluster)

Once a second it looks at every node, and at once when a node's slurmd exits (it sleeps on
their pidfds: backends/exits.py). It acts on three kinds of failure:

- a crash: the node's slurmd record says it runs but its process is gone (``%gtc_fault demo
  gpu-1 crash``, a kernel panic). The node is set DOWN within milliseconds with a reason naming
  it, so slurmctld requeues its ``--requeue`` jobs onto the other nodes now (and ends the others
  NODE_FAIL);
- a failed health check: Slurm's HealthCheckProgram drained the node (reason ``gtc-health:``,
  health/node.py). A drain lets jobs run on, so its running jobs are requeued;
- silence: the node's slurmd runs but does not answer (``%gtc_fault demo gpu-1 partition``,
  its link down). After ``SILENT_PROBES`` unanswered probes in a row, sent back to back once
  one went unanswered (1.5 s of silence), it is fenced (powered off: the copy of its
  jobs still running there would otherwise write on into the folders their new run writes,
  every node sharing the job's disk) and set DOWN; once its network answers again it is
  started and resumed.

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
import signal
import sys
import threading
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
from .exits import Exits

LABEL = "supervisor"
TICK_S = 1.0
# A probe is a TCP connect to the node's slurmd: the node's kernel answers it, however busy
# slurmd or the machine is (bench/silent_probes.py: the slowest answer under load 4-6 took
# 137 ms). A node that answers none of SILENT_PROBES probes in a row, each waited out for
# PROBE_TIMEOUT_S and sent at once after the one before, is cut off: 1.5 s of silence.
PROBE_TIMEOUT_S = 0.5
SILENT_PROBES = 3
RESTARTS = ladder.Limits().attempts["restart"]  # restarts of a node within the window, by default
REASON = "gtc-supervisor:"
# Slurm holds a requeued job for AuthInfo's cred_expire + 1 s: a slurmd refuses a credential
# of the job made no later than the second it revoked the old run's (slurm_cred.c,
# ``cred->ctime <= j->revoked``). The jobs a failed node's requeue sent back are let start once
# plainly PENDING this long instead: no longer COMPLETING, so every node has ended the old run
# and revoked its credential, whole seconds before any new one is made (and their failed node
# is dead, fenced or drained). 11 s less of every recovery on a local cluster, 121 s with
# Slurm's default cred_expire. The next whole second is enough: every revocation happened
# before the job was first seen PENDING (``pending_since``), and both times are whole seconds
# of this machine's clock (the nodes share it), so a credential made in any later whole second
# than that look's is later than every revocation (half a second's wait on average, not one).
# A job that ran on the failed node alone is let start at once: that node went down (crashed,
# or fenced) before it could revoke anything, and is not started again while slurmctld's kill
# may still reach it (KILL_IN_FLIGHT_MAX_S), so no node holds a revocation of the job.
RELEASE_POLL_S = 0.1  # how often the jobs being watched are looked at: only while there are some
# A node set DOWN under a job is sent the kill of that job's run all the same, its answer not
# awaited (node_scheduler.c, deallocate_nodes): slurmctld's agent goes on connecting until the
# node answers or it gives up. A crashed namespace node's address answers again a second after
# it is restarted, and a node started again sooner gets the old run's kill after the requeued
# run started on it: that kills the new run (NODE_FAIL, for good). So a node we set DOWN is
# started again only once slurmctld has no message in flight (sdiag), or this long after it
# went down (MessageTimeout: the longest an agent waits on a node).
KILL_IN_FLIGHT_MAX_S = 10.0
RELEASE_WATCH_S = 120.0  # a job not requeued within this (not --requeue: it ended) is forgotten


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
        self.start_failed: set[str] = set()  # cut off, answering again, but their slurmd would not start
        self.silent: dict[str, int] = {}  # node -> probes in a row it has not answered
        self.down_at: dict[str, float] = {}  # node -> when we set it DOWN
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
        # job -> (the node that failed under it, its restart count and the time then, when first
        # seen pending again, whether it ran on that node alone and the node is down)
        self.releasing: dict[str, tuple[str, int, float, float | None, bool]] = {}
        self._releasing_lock = threading.Lock()
        self._commands: SlurmCommands | None = None  # the last tick's
        self.exits = Exits()  # every node's slurmd: a crash wakes the loop at once

    def run(self) -> None:
        # Requeued jobs are released from a thread of their own: a rung (a restart, a replace, a
        # node's checks that hang until their budget) can hold the loop for longer than Slurm's hold.
        threading.Thread(target=self._release_loop, name="release", daemon=True).start()
        self.loop()

    def loop(self) -> None:
        """Tick once a second, start to start, until the cluster is gone, and at once when a
        node's slurmd exits. While a node is silent (not yet cut off) the next tick follows at
        once: its ``SILENT_PROBES`` probes then cover 1.5 s without a gap."""
        try:
            while True:
                began = time.monotonic()
                if not self.tick():
                    return
                if not any(node not in self.cut_off for node in self.silent):
                    self.exits.wait(TICK_S - (time.monotonic() - began))
        finally:
            self.exits.close()

    def _release_loop(self) -> None:
        while True:
            time.sleep(RELEASE_POLL_S)
            self.release_requeued()

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
                # A fenced node is down on purpose, not crashed: started again once it answers.
                crashed, status = node not in self.cut_off and self._crashed(root, node), statuses.get(node)
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
                    self._watch_requeue(commands, node)
                    self._set_down(commands, node, "slurmd exited; restarting it")
                elif kind is None and _health_drained(status):
                    self.open[node] = "health"
                    self.record(node, "detected", f"{ladder.REPORTED_DETAIL}: {status.reason}"
                                if status.reason.startswith(ladder.REPORTED_REASON)
                                else f"drained by its health check: {status.reason}")
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
                    self._check_answers(spec, runtime, commands, node)
        self._commands = commands
        self.release_requeued()
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
        if kind == "crash" and self._kill_may_reach(commands, node):
            return  # started again at a later tick, once its old jobs' kill cannot reach it
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
        if status is not None and (status.reason or "").startswith((HEALTH_REASON, REASON, ladder.REPORTED_REASON)):
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
        self._watch_requeue(commands, node, down=False)
        for job in jobs:
            done = commands.run(["scontrol", "requeue", job], check=False)
            self.record(node, "requeued", f"job {job}: it runs again on healthy nodes" if done.returncode == 0 else
                        f"job {job}: requeue refused ({done.stderr.strip()}); it runs on, on a failing node")

    def _watch_requeue(self, commands: SlurmCommands, node: str, down: bool = True) -> None:
        """Note the jobs running on ``node``, which fails: each is let start again as soon as it
        is pending (in the next whole second; at once where it ran on ``node`` alone and the node
        is ``down``: crashed or fenced, it revoked nothing), not cred_expire later."""
        try:
            on_node = set(commands.job_ids([node], states=["RUNNING"]))
            jobs = commands.queue()
            with self._releasing_lock:
                for job in jobs:
                    if job.job_id in on_node:
                        alone = down and job.nodes == node
                        self.releasing[job.job_id] = (node, job.restart_count, time.time(), None, alone)
        except GtcError:
            pass  # slurmctld busy: those jobs start again cred_expire + 1 s after their requeue

    def release_requeued(self) -> None:
        """Let each job noted by ``_watch_requeue`` start once it has been pending again since
        an earlier whole second than now (event "released")."""
        with self._releasing_lock:
            commands = self._commands
            if not self.releasing or commands is None:
                return
            try:
                jobs = commands.queue()
            except GtcError:
                return  # slurmctld busy or restarting: the next look tries again
            self._release(commands, jobs)

    def _release(self, commands: SlurmCommands, jobs) -> None:
        now = time.time()
        for job in jobs:
            if job.job_id not in self.releasing:
                continue
            node, count, noted, pending_since, alone = self.releasing[job.job_id]
            if job.state != "PENDING" or job.restart_count <= count:  # not requeued yet, or no longer waiting
                if now - noted > RELEASE_WATCH_S or (job.state == "RUNNING" and job.restart_count > count):
                    del self.releasing[job.job_id]  # it ended (not --requeue), or runs again
                continue
            if pending_since is None and not alone:
                self.releasing[job.job_id] = (node, count, noted, now, alone)
            elif alone or int(now) > int(pending_since):
                del self.releasing[job.job_id]
                done = commands.run(["scontrol", "update", f"JobId={job.job_id}", "StartTime=now"], check=False)
                when = (f"at once rather than cred_expire + 1 s later: it ran on {node} alone, down before it "
                        f"revoked anything" if alone else "now rather than cred_expire + 1 s later")
                self.record(node, "released", f"job {job.job_id}: requeued, let start {when}"
                            if done.returncode == 0 else f"job {job.job_id}: could not be let start: "
                                                         f"{done.stderr.strip()}")
        for job_id in set(self.releasing) - {j.job_id for j in jobs}:
            del self.releasing[job_id]  # gone from slurmctld's list

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
                with self._releasing_lock:
                    self.releasing[job.job_id] = (job.nodes, job.restart_count, now, None, False)
                done = commands.run(["scontrol", "requeue", job.job_id], check=False)
                self.record(job.nodes, "hang", f"job {job.job_id} wrote nothing for {quiet:.0f} s (its hang "
                             f"timeout is {timeout:g} s): " + ("requeued" if done.returncode == 0 else
                                                               f"requeue refused: {done.stderr.strip()}"))

    def _check_answers(self, spec, runtime: dict[str, Any], commands: SlurmCommands, node: str) -> None:
        """A node whose slurmd runs but does not answer (a partition: a switch port, a cable)
        is fenced and set DOWN after ``SILENT_PROBES`` unanswered probes, so its jobs run again elsewhere now, not
        after ``SlurmdTimeout``, and their old copy there stops. Fencing is the power (STONITH,
        as HA clusters do it): nothing else reaches a node cut off. Once its network answers
        again it is started and resumed, if it is still DOWN for our reason (never a node an
        admin took out meanwhile)."""
        if self.backend.node_answers(runtime, node, timeout=PROBE_TIMEOUT_S):
            self.silent.pop(node, None)
            if node in self.cut_off:
                if self._kill_may_reach(commands, node):
                    return
                try:
                    self.backend.restart_node(spec, runtime, node)
                except GtcError as e:
                    if node not in self.start_failed:  # once, not at every tick that tries again
                        self.start_failed.add(node)
                        self.record(node, "restart failed", f"it answers again, but its slurmd did not start: {e}")
                    return
                self.start_failed.discard(node)
                self.cut_off.discard(node)
                status = next((n for n in commands.nodes() if n.name == node), None)
                if status is not None and (status.reason or "").startswith(REASON):
                    commands.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
                self.record(node, "back", "it answers again: started and resumed")
            return
        self.silent[node] = self.silent.get(node, 0) + 1
        if self.silent[node] == SILENT_PROBES and node not in self.cut_off:
            self.cut_off.add(node)
            self.record(node, "unreachable", f"its slurmd runs but has not answered for "
                                             f"{SILENT_PROBES * PROBE_TIMEOUT_S:g} s ({SILENT_PROBES} probes)")
            self._watch_requeue(commands, node)
            self.backend.power_off_node(runtime, node)
            self.record(node, "fenced", "powered off, with the copy of its jobs still running there, so that "
                                        "copy cannot write on beside their new run; started once it answers")
            self._set_down(commands, node, "unreachable; fenced, started again once it answers")

    def _crashed(self, root: Path, node: str) -> bool:
        label = f"slurmd-{node}"
        slurmd = daemons.find(label, root / "run")
        self.exits.watch(node, slurmd)
        return (root / "run" / f"{label}.json").exists() and slurmd is None

    def _kill_may_reach(self, commands: SlurmCommands, node: str) -> bool:
        """Whether the kill of the jobs ``node`` ran when we set it DOWN may still be on its way
        to it (``KILL_IN_FLIGHT_MAX_S``): not yet to be started again."""
        if time.time() - self.down_at.get(node, 0.0) > KILL_IN_FLIGHT_MAX_S:
            return False
        try:
            return commands.messages_in_flight() > 0
        except GtcError:
            return True  # slurmctld busy: the next tick asks again

    def _set_down(self, commands: SlurmCommands, node: str, why: str, event: str = "down",
                  detail: str = "set DOWN: slurmctld requeues its --requeue jobs on the other nodes",
                  state: str = "DOWN") -> None:
        """``scontrol update State=DOWN`` (or ``state``) with our reason (``REASON`` and ``why``),
        and its event."""
        commands.run(["scontrol", "update", f"NodeName={node}", f"State={state}", f"Reason={REASON} {why}"],
                     check=False)
        self.down_at[node] = time.time()
        self.record(node, event, detail)


def _health_drained(status: NodeStatus | None) -> bool:
    """Drained (or draining) by a failed health check of ours, or reported faulty through the
    local Vertex endpoint: never by an admin."""
    return status is not None and "DRAIN" in status.flags and (status.reason or "").startswith(
        (HEALTH_REASON, ladder.REPORTED_REASON))


def main(argv: list[str] | None = None) -> int:
    home, cluster = (argv or sys.argv[1:])[:2]
    os.environ["GTC_HOME"] = home
    # A delete stops the supervisor first, with SIGTERM, and waits up to 5 s for it to go: it
    # must die of it at once, whatever mask and dispositions it inherited from the process
    # (and thread) that created the cluster. With SIGTERM blocked there it waited out the 5 s.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        Supervisor(Path(home), cluster).run()
    except ClusterNotFound:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
