"""The supervisor of a real local cluster: a node whose slurmd crashes under a ``--requeue``
job is set DOWN, the job runs again (its first attempt's output kept), the node is restarted
and takes jobs again, and every step is in the cluster's events."""

from __future__ import annotations

import os

import psutil
import pytest

from jupyter_gtc import api
from tests.conftest import sleep_until, small_gpu_spec
from tests.non_root import needs_root

pytestmark = pytest.mark.usefixtures("slurm_available")


@pytest.fixture(scope="module")
def watched(slurm_available):
    cluster = api.create_cluster(small_gpu_spec("watched", nodes=2, supervisor=True, supervisor_cooldown=1))
    yield cluster
    api.delete_cluster(cluster.name)


def _node(cluster: str, name: str):
    return next(n for n in api.get_cluster(cluster).nodes if n.name == name)


def _supervisors(cluster: str) -> list:
    """The supervisor processes of this session's ``cluster`` (another session on this machine
    may have a cluster of that name too: its GTC_HOME differs)."""
    argv = ["-m", "jupyter_gtc.backends.supervisor", os.environ["GTC_HOME"], cluster]
    return [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[-4:] == argv]


def test_a_crashed_node_is_set_down_its_job_runs_again_and_the_node_is_restarted(watched):
    script = ('#!/bin/bash\n#SBATCH --requeue\necho "run ${SLURM_RESTART_COUNT:-0} on $SLURMD_NODENAME"\n'
              "python -m jupyter_gtc.examples.tiny_regression --steps 40 --step_delay 0.1\n")
    job = api.submit_job(watched.name, script).wait_until_running(timeout=60)

    def steps() -> int:
        table = job.metrics()
        rows = table.to_dict("records") if hasattr(table, "to_dict") else [vars(s) for s in table]
        return sum(1 for r in rows if r["tag"] == "train/loss")

    assert sleep_until(lambda: steps() >= 10, 120), job.logs()
    crashed = job.nodes
    api.inject_fault(watched.name, crashed, "crash")

    job.wait(timeout=240)
    assert job.state == "COMPLETED", job.logs()
    first, marker, second = job.logs().partition("--- jupyter_gtc: attempt 2 (requeued)")
    assert first.startswith(f"run 0 on {crashed}") and marker and "run 1 on gpu-" in second, job.logs()

    assert sleep_until(lambda: any(e["event"] == "restarted" for e in api.cluster_events(watched.name)), 120)
    events = [(e["node"], e["event"]) for e in api.cluster_events(watched.name) if e["event"] != "hang"]
    # The job's requeue is let start at once (not cred_expire + 1 s later), beside the node's ladder:
    # it ran on the crashed node alone, which revoked nothing.
    assert (crashed, "released") in events, events
    released = [e["detail"] for e in api.cluster_events(watched.name) if e["event"] == "released"]
    assert released[-1] == (f"job {job.id}: requeued, let start at once rather than cred_expire + 1 s later: "
                            f"it ran on {crashed} alone, down before it revoked anything"), released
    events.remove((crashed, "released"))
    assert events == [(crashed, "detected"), (crashed, "down"), (crashed, "restarted")], events
    assert sleep_until(lambda: _node(watched.name, crashed).ready, 60), _node(watched.name, crashed)

    # Its goodput: the second attempt started again from step 1 (this program keeps no
    # checkpoint), so what the first did is recompute and the gap between them is restart.
    g = job.goodput()
    assert g.attempts == 2 and g.steps == 40
    assert g.badput_s["recompute"] > 0 and g.badput_s["restart"] > 0 and 0 < g.goodput < 1
    assert g.productive_s + sum(g.badput_s.values()) == pytest.approx(g.wall_s)

    from jupyter_gtc.widgets import JobPanel

    panel = JobPanel(job)  # what the notebook shows of it
    assert panel.attempt_label.value == "2" and panel._attempt_field.layout.display == ""
    # the share, then where the rest went, the restart this crash cost among it
    shown = panel.goodput_label.value
    assert shown.startswith(f"{g.goodput:.0%} (") and "restart" in shown
    assert "over 2 attempt(s)" in panel.goodput_label.tooltip
    assert job.to_json()["attempts"] == 2  # the sidebar's chip


def test_a_cluster_has_a_supervisor_by_default_and_its_delete_takes_it(slurm_available):
    cluster = api.create_cluster(small_gpu_spec("brief", nodes=1))  # no `supervisor` key
    assert cluster.spec.local.supervisor and _supervisors("brief")
    api.delete_cluster(cluster.name)
    assert not _supervisors("brief")  # stopped by the delete, not later
    off = api.create_cluster(small_gpu_spec("brief", nodes=1, supervisor=False))
    try:
        assert not _supervisors("brief")
    finally:
        api.delete_cluster(off.name)


def test_a_job_that_writes_nothing_for_its_hang_timeout_is_requeued_and_runs_again(watched):
    script = ('#!/bin/bash\n#SBATCH --requeue\necho "run ${SLURM_RESTART_COUNT:-0}"\n'
              '[ -n "${SLURM_RESTART_COUNT:-}" ] || sleep 600\n')  # the first attempt hangs, silent
    job = api.submit_job(watched.name, script, hang_timeout=3).wait_until_running(timeout=60)
    job.wait(timeout=180)
    assert job.state == "COMPLETED" and "run 1" in job.logs(), job.logs()
    hung = [e for e in api.cluster_events(watched.name) if e["event"] == "hang"]
    assert len(hung) == 1 and f"job {job.id} wrote nothing" in hung[0]["detail"] and "requeued" in hung[0]["detail"]
    released = [e for e in api.cluster_events(watched.name) if e["event"] == "released"]
    assert [e["detail"] for e in released if e["detail"].startswith(f"job {job.id}:")] == [
        f"job {job.id}: requeued, let start now rather than cred_expire + 1 s later"], released


def test_a_bad_hang_timeout_is_refused_before_anything_is_made(watched):
    from jupyter_gtc.exceptions import SpecError

    before = len(api.list_jobs(watched.name, foreign=False))
    for bad in (0, -5, "soon", True):
        with pytest.raises(SpecError) as refused:
            api.submit_job(watched.name, "true", hang_timeout=bad)
        assert refused.value.field == "hang_timeout"
    with pytest.raises(SpecError, match="own --comment"):
        api.submit_job(watched.name, "true", ["--comment=mine"], hang_timeout=60)
    assert len(api.list_jobs(watched.name, foreign=False)) == before



def test_a_node_an_admin_drained_stays_drained_and_does_not_stop_a_restart_of_another(watched):
    from tests.conftest import slurm

    slurm(watched.name, "scontrol", "update", "NodeName=gpu-0", "State=DRAIN", "Reason=admin: new cables")
    try:
        done = len(api.cluster_events(watched.name))
        api.inject_fault(watched.name, "gpu-1", "crash")
        assert sleep_until(lambda: [e["event"] for e in api.cluster_events(watched.name)[done:]]
                           == ["detected", "down", "restarted"], 90), api.cluster_events(watched.name)[done:]
        assert sleep_until(lambda: _node(watched.name, "gpu-1").ready, 60), _node(watched.name, "gpu-1")
        drained = _node(watched.name, "gpu-0")
        assert "DRAIN" in drained.flags and drained.reason.startswith("admin: new cables")  # never resumed by us
    finally:
        slurm(watched.name, "scontrol", "update", "NodeName=gpu-0", "State=RESUME")


def test_a_supervisor_started_again_goes_on_from_what_the_one_before_did(watched):
    """Its decisions are in the state store: one started after its predecessor died counts the
    node's restarts that one did, so the next crash climbs to a reimage (the node's spool
    wiped), the one after that finds no rung left and gives up; the node is taken back once
    someone starts it by hand."""
    import os
    from pathlib import Path

    from jupyter_gtc.backends.supervisor import RESTARTS, Supervisor
    from jupyter_gtc.health.ladder import Limits

    node = "gpu-1"

    def events() -> list[tuple[str, str]]:
        return [(e["node"], e["event"]) for e in api.cluster_events(watched.name)]

    while events().count((node, "restarted")) < RESTARTS:  # the first supervisor restarts it
        done = events().count((node, "restarted"))
        api.inject_fault(watched.name, node, "crash")
        assert sleep_until(lambda: events().count((node, "restarted")) > done, 60), events()
    assert sleep_until(lambda: _node(watched.name, node).ready, 60), _node(watched.name, node)
    for process in _supervisors(watched.name):
        process.kill()
        process.wait(10)

    # No replace (its limit 0 here: a replace is tested under training, test_faults_under_training).
    successor = Supervisor(Path(os.environ["GTC_HOME"]), watched.name,
                           Limits(attempts={"restart": RESTARTS, "reimage": 1, "replace": 0}, cooldown_s=1))
    spool = Path(watched.runtime["dir"]) / "spool" / node
    (spool / "left-by-the-old-image").write_text("")
    api.inject_fault(watched.name, node, "crash")
    assert sleep_until(lambda: successor.tick() and events()[-1] == (node, "reimaged"), 30), events()
    assert events()[-3:] == [(node, "detected"), (node, "down"), (node, "reimaged")], events()
    assert spool.is_dir() and not (spool / "left-by-the-old-image").exists()
    assert sleep_until(lambda: _node(watched.name, node).ready, 60), _node(watched.name, node)
    for process in _supervisors(watched.name):  # the reimage started the cluster's missing daemons: one
        process.kill()
        process.wait(10)

    api.inject_fault(watched.name, node, "crash")
    assert sleep_until(lambda: successor.tick() and events()[-1] == (node, "gave up"), 30), events()
    assert events()[-3:] == [(node, "detected"), (node, "down"), (node, "gave up")], events()
    assert sleep_until(lambda: "gave up: every rung tried" in (_node(watched.name, node).reason or ""), 30)
    successor.tick()  # a node it gave up on stays as it is
    assert events()[-1] == (node, "gave up")

    api.inject_fault(watched.name, node, "crash", clear=True)  # by hand; starts a supervisor again too
    assert sleep_until(lambda: events()[-1] == (node, "back"), 60), events()
    assert _supervisors(watched.name) and _node(watched.name, node).ready


@needs_root
def test_a_node_cut_off_is_set_down_its_job_runs_again_elsewhere_and_it_is_resumed(slurm_available):
    """A partition (the node's link down): its slurmd runs on but nothing reaches it. Within
    seconds it is fenced (its slurmd and the job's first run there stopped) and set DOWN, and
    its --requeue job runs on the other node; once it answers again it is started and resumed."""
    cluster = api.create_cluster(small_gpu_spec("cutoff", nodes=2, supervisor=True, network="namespaces"))
    try:
        script = ('#!/bin/bash\n#SBATCH --requeue\necho "run ${SLURM_RESTART_COUNT:-0} on $SLURMD_NODENAME"\n'
                  '[ -n "${SLURM_RESTART_COUNT:-}" ] || sleep 6017\n')  # the first attempt runs on
        job = api.submit_job(cluster.name, script).wait_until_running(timeout=60)
        cut = job.nodes
        other = next(n.name for n in cluster.nodes if n.name != cut)
        api.inject_fault(cluster.name, cut, "partition")
        job.wait(timeout=180)
        assert job.state == "COMPLETED" and job.attempts == 2, job.logs()
        first, marker, second = job.logs().partition("--- jupyter_gtc: attempt 2 (requeued)")
        assert first.startswith(f"run 0 on {cut}") and marker and f"run 1 on {other}" in second, job.logs()

        def events() -> list[tuple[str, str]]:
            return [(e["node"], e["event"]) for e in api.cluster_events(cluster.name) if e["event"] != "released"]

        assert events() == [(cut, "unreachable"), (cut, "fenced"), (cut, "down")], events()
        assert any(e["event"] == "released" for e in api.cluster_events(cluster.name)), api.cluster_events(cluster.name)
        # Fenced: the first run, cut off with its node, was stopped there, not left to write on.
        assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "6017"]]
        assert "unreachable" in (_node(cluster.name, cut).reason or "")
        api.inject_fault(cluster.name, cut, "partition", clear=True)
        assert sleep_until(lambda: events()[-1:] == [(cut, "back")], 60), events()
        assert sleep_until(lambda: _node(cluster.name, cut).ready, 60), _node(cluster.name, cut)
    finally:
        api.delete_cluster(cluster.name)


def test_a_partition_needs_nodes_with_their_own_network(watched):
    from jupyter_gtc.exceptions import SpecError

    with pytest.raises(SpecError) as refused:
        api.inject_fault(watched.name, "gpu-0", "partition")
    assert refused.value.field == "fault" and "network: namespaces" in str(refused.value)


@needs_root
def test_a_job_requeued_by_a_crash_runs_again_on_its_restarted_node_and_finishes(slurm_available):
    """One node, so the job can only run again where it crashed. slurmctld sends the kill of the
    first run to the node it set DOWN all the same, and its agent keeps connecting; a node
    started again before that kill is through got it after the second run started there, which
    killed the second run for good (NODE_FAIL). The supervisor starts it again only then."""
    cluster = api.create_cluster(small_gpu_spec("alone", nodes=1, supervisor=True, network="namespaces"))
    try:
        script = ('#!/bin/bash\n#SBATCH --requeue\necho "run ${SLURM_RESTART_COUNT:-0} on $SLURMD_NODENAME"\n'
                  '[ -n "${SLURM_RESTART_COUNT:-}" ] || sleep 6017\n'  # the first run waits for the crash
                  'sleep 3\necho finished\n')  # the second lives past a stale kill's arrival
        job = api.submit_job(cluster.name, script).wait_until_running(timeout=60)
        node = job.nodes
        api.inject_fault(cluster.name, node, "crash")
        job.wait(timeout=180)
        assert job.state == "COMPLETED" and job.attempts == 2, job.logs()
        first, marker, second = job.logs().partition("--- jupyter_gtc: attempt 2 (requeued)")
        assert marker and f"run 1 on {node}" in second and "finished" in second, job.logs()
        events = [(e["node"], e["event"]) for e in api.cluster_events(cluster.name)]
        assert {(node, "released"), (node, "restarted")} <= set(events), events
    finally:
        api.delete_cluster(cluster.name)
