"""Node faults under a 2-node training recipe on a real 3-node local cluster (namespace-mode
nodes, the supervisor and Slurm's HealthCheckProgram on): crash, partition, ECC, disk_full,
hang. Each: the node is taken out with the right reason, the job runs again on healthy nodes
from its newest checkpoint, its metrics have each step once, the supervisor's ladder is in the
cluster's events, and the node comes back (restarted, resumed, or replaced).

The recipe (llama-pretrain, tiny: 10 steps, a checkpoint every 5) holds after each checkpoint
until the file ``go`` is in its folder (``--hold-until go``), so every fault lands at a known
step whatever this machine's speed: after step 5, with steps 1-5 written and checkpointed. The
requeued run resumes from step 5 and holds again at step 10, where the test looks at where it
runs before letting it finish. The crash comes later, at step 7 (``--hold-at-step 7``): the
requeued run redoes steps 6 and 7, and its metrics still show each step once."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from jupyter_gtc import api
from tests.conftest import sleep_until, slurm
from tests.non_root import needs_root

# A test's own waits (300 s for the recipe to reach its checkpoint, under a loaded CI machine)
# end before pytest's timeout does, so that a failure prints what _why() saw, not a bare timeout.
pytestmark = [pytest.mark.usefixtures("slurm_available"), needs_root, pytest.mark.timeout(900)]

HEALTH_INTERVAL = 10  # seconds between HealthCheckProgram runs (3 nodes: each run costs ~1 s of CPU)
LADDER = ["detected", "requeued", "restarted", "still failing", "reimaged", "still failing", "replaced", "healthy"]
SPEC = {
    "display_name": "faults",
    "node_pools": [{"id": "cpu", "machine_spec": {"machine_type": "n2-standard-8"},
                    "scaling_spec": {"min_node_count": 3, "max_node_count": 3}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}]}},
    "local": {"resource_scale": 0.25, "network": "namespaces", "supervisor": True, "supervisor_cooldown": 1,
              # Each test's remediations count apart: a replace is allowed once per window per node,
              # and the next test's ladder may reach the same node's replace ~30 s after this one's
              # (it did in CI-like runs once bring-up got faster: "gave up" instead of "replaced").
              # Within one test each rung is tried once whatever the window.
              "supervisor_window": 5,
              "health_check_interval": HEALTH_INTERVAL},
}


@pytest.fixture(scope="module")
def cluster(slurm_available):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    made = api.create_cluster(SPEC)
    yield made.name
    api.delete_cluster(made.name)


def _log(job) -> str:
    try:
        return job.logs()
    except (api.GtcError, FileNotFoundError):
        return ""


def _node(cluster: str, name: str):
    return next(n for n in api.get_cluster(cluster).nodes if n.name == name)


def _hostnames(cluster: str, nodelist: str) -> list[str]:
    return slurm(cluster, "scontrol", "show", "hostnames", nodelist).stdout.split()


def _events(cluster: str, node: str, since: float) -> list[dict]:
    """The node's ladder since ``since``: the job-side "released" (its requeue let start at once)
    comes at a time of its own between them, and is checked apart (``_released``)."""
    return [e for e in api.cluster_events(cluster) if e["node"] == node and e["time"] >= since
            and e["event"] != "released"]


def _released(cluster: str, node: str, job) -> bool:
    return any(e["node"] == node and e["event"] == "released" and e["detail"].startswith(f"job {job.id}: requeued")
               for e in api.cluster_events(cluster))


def _train(cluster: str, hold_at_step: int | None = None):
    """The recipe on 2 of the 3 nodes, held after each checkpoint (5, 10) or after step
    ``hold_at_step`` (redone by the next attempt); and the node to fault: one of its two."""
    hold = ["--hold-at-step", str(hold_at_step)] if hold_at_step else []
    job = api.run_recipe("llama-pretrain", cluster, nodes=2,
                         args=["--steps", "10", "--checkpoint-every", "5", "--log-every", "1", "--hold-until", "go",
                               *hold])
    assert sleep_until(lambda: "holding until" in _log(job), 300), _why(cluster, job)
    assert (job.checkpoint_dir / "step-00000005").is_dir()
    nodes = _hostnames(cluster, job.nodes)
    assert len(nodes) == 2
    return job, nodes[-1]


def _why(cluster: str, job) -> str:
    """What a failed wait shows: the job as Slurm has it, the nodes, the events, the log's end."""
    nodes = [(n.name, n.display_state, n.reason) for n in api.get_cluster(cluster).nodes]
    return (f"job {job.id} {job.state} on {job.nodes} ({job.reason}); nodes {nodes}; events "
            f"{[(e['node'], e['event']) for e in api.cluster_events(cluster)][-12:]}\n{_log(job)[-3000:]}")


def _resumed_elsewhere_and_finished(cluster: str, job, faulty: str, began: float, held_at: int = 5) -> None:
    """The requeued run resumed from step 5 on healthy nodes; let go, it finishes with every
    step once in its metrics (the steps after 5 that it redid, its values)."""
    assert sleep_until(lambda: _log(job).count("holding until") == 2, 300), _why(cluster, job)
    first, marker, second = _log(job).partition("--- jupyter_gtc: attempt 2 (requeued)")
    assert marker, first[-3000:]
    assert re.search(r"resuming from \S+/step-00000005 \(step 5, restart 1\)", second), second[-3000:]
    # Where the second attempt runs, every node was healthy when it started: not the faulty one,
    # unless the supervisor had already brought that one back.
    started = job.started_at
    cured = [e["time"] for e in _events(cluster, faulty, began) if e["event"] in ("restarted", "healthy", "back")]
    for node in _hostnames(cluster, job.nodes):
        assert node != faulty or (cured and min(cured) <= started), (node, faulty, cured, started)
    assert _released(cluster, faulty, job), api.cluster_events(cluster)
    (job.job_dir / "go").touch()
    job.wait(300)
    assert job.state == "COMPLETED" and job.attempts == 2, _log(job)[-3000:]
    table = job.metrics()
    rows = table.to_dict("records") if hasattr(table, "to_dict") else [vars(s) for s in table]
    steps = sorted(r["step"] for r in rows if r["tag"] == "train/loss")
    assert steps == list(range(1, 11)), steps  # none lost before the checkpoint, none counted twice
    table = job.metrics(all_attempts=True)
    rows = table.to_dict("records") if hasattr(table, "to_dict") else [vars(s) for s in table]
    written = sorted(r["step"] for r in rows if r["tag"] == "train/loss")
    assert written == sorted([*range(1, held_at + 1), *range(6, 11)]), written  # what both attempts wrote
    g = job.goodput()
    assert g.attempts == 2 and g.steps == 10 and g.badput_s["restart"] > 0
    assert (g.badput_s["recompute"] > 0) == (held_at > 5), g


def test_a_crashed_node(cluster):
    """Crashed two steps after its checkpoint: the requeued run redoes them."""
    job, faulty = _train(cluster, hold_at_step=7)
    began = time.time()
    api.inject_fault(cluster, faulty, "crash")
    _resumed_elsewhere_and_finished(cluster, job, faulty, began, held_at=7)
    assert sleep_until(lambda: [e["event"] for e in _events(cluster, faulty, began)]
                       == ["detected", "down", "restarted"], 120), _events(cluster, faulty, began)
    # Slurm's own log says why the node went DOWN (it was back by the time anyone looked).
    log = (Path(api.get_cluster(cluster).runtime["dir"]) / "log" / "slurmctld.log").read_text()
    assert f"node {faulty} reason set to: gtc-supervisor: slurmd exited" in log
    assert sleep_until(lambda: _node(cluster, faulty).ready, 60), _node(cluster, faulty)


def test_a_partitioned_node(cluster):
    job, faulty = _train(cluster)
    began = time.time()
    api.inject_fault(cluster, faulty, "partition")
    try:
        assert sleep_until(lambda: "unreachable" in (_node(cluster, faulty).reason or ""), 60)
        assert _node(cluster, faulty).state == "DOWN"
        assert sleep_until(lambda: _log(job).count("holding until") == 2, 300), _log(job)[-3000:]
    finally:
        api.inject_fault(cluster, faulty, "partition", clear=True)
    # Fenced: the old copy of the job there stopped before the new run began.
    assert sleep_until(lambda: [e["event"] for e in _events(cluster, faulty, began)]
                       == ["unreachable", "fenced", "down", "back"], 60), _events(cluster, faulty, began)
    assert sleep_until(lambda: _node(cluster, faulty).ready, 60), _node(cluster, faulty)
    _resumed_elsewhere_and_finished(cluster, job, faulty, began)


@pytest.mark.parametrize("fault, reason", [
    ("ecc", "gtc-health: ecc: injected: ecc injected by gtc fault"),
    ("disk_full", "gtc-health: disk: injected: disk_full injected by gtc fault"),
    ("hang", "gtc-health: disk: did not finish within 10 s"),  # a check stuck as on a hung filesystem
])
def test_a_node_failing_its_health_check_is_drained_its_job_requeued_and_the_node_replaced(cluster, fault, reason):
    """The fault stays through a restart and a reimage (it is the node's hardware), so the
    ladder climbs to a replace: a fresh node, which passes its checks and is resumed."""
    job, faulty = _train(cluster)
    began = time.time()
    api.inject_fault(cluster, faulty, fault)
    assert sleep_until(lambda: (_node(cluster, faulty).reason or "").startswith(reason), 60), _node(cluster, faulty)
    assert "DRAIN" in _node(cluster, faulty).flags
    _resumed_elsewhere_and_finished(cluster, job, faulty, began)
    assert sleep_until(lambda: [e["event"] for e in _events(cluster, faulty, began)] == LADDER, 180), \
        [(round(e["time"] - began, 1), e["event"], e["detail"][:90]) for e in api.cluster_events(cluster)]
    events = _events(cluster, faulty, began)
    assert events[0]["detail"].startswith(f"drained by its health check: {reason}")
    assert events[1]["detail"] == f"job {job.id}: it runs again on healthy nodes"
    assert all(e["detail"].startswith(reason.removeprefix("gtc-health: ")) for e in events if e["event"] == "still failing")
    assert sleep_until(lambda: _node(cluster, faulty).ready, 60), _node(cluster, faulty)
    assert not (Path(api.get_cluster(cluster).runtime["dir"]) / "faults" / faulty).exists()  # new hardware
