"""A restart that keeps the process (jupyter_gtc.injob, through jupyter_gtc.resume): a node of a
2-node job crashes mid-run; the process left on the other node trains on with the same PID, the
warm spare beside it takes the dead rank's place, nobody imports torch again, the job is never
requeued, and its metrics show each step once. On a real local cluster, with its supervisor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import sleep_until

pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("slurm_available")

SPEC = {
    "display_name": "injob",
    "node_pools": [{"id": "cpu", "machine_spec": {"machine_type": "n2-standard-8"},
                    "scaling_spec": {"min_node_count": 2, "max_node_count": 2}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}]}},
    "local": {"resource_scale": 0.25, "supervisor_cooldown": 1},
}

# Two processes a node, placed in turn (cyclic): ranks 0 and 1 on different nodes, a spare on each.
SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --no-kill
#SBATCH --requeue
export OMP_NUM_THREADS=1
python -m jupyter_gtc.lighthouse srun --no-kill --kill-on-bad-exit=0 --distribution=cyclic \\
    python -m jupyter_gtc.examples.injob_regression --steps 30 --snapshot_every 5 "$@"
"""
STARTED = re.compile(r"^started: process (\d+) pid (\d+) on (\S+):", re.M)
GENERATION = re.compile(r"^generation (\d+): rank (\d+) of 2 is process (\d+) pid (\d+) on (\S+), from step (\d+)$", re.M)


@pytest.fixture(scope="module")
def cluster(slurm_available):
    from jupyter_gtc import api

    made = api.create_cluster(SPEC)
    yield made.name
    api.delete_cluster(made.name)


def held_with_two_spares(cluster: str, go: Path):
    """A job of SCRIPT with two warm spares, held after step 13 (its last snapshot: 10) until
    ``go`` exists, returned once every process started and the spares wait: the job, each
    process's ``{process: (pid, node)}`` and generation 0's ``{rank: (process, pid, node)}``."""
    from jupyter_gtc import api

    job = api.submit_job(cluster, SCRIPT, script_args=["--spares", "2", "--hold_at_step", "13", "--hold_until", str(go)])
    assert sleep_until(lambda: "step 13/30" in job.logs() and len(STARTED.findall(job.logs())) == 4, 240), \
        job.logs()
    before = job.logs()
    started = {int(p): (int(pid), node) for p, pid, node in STARTED.findall(before)}
    first = {int(rank): (int(p), int(pid), node) for g, rank, p, pid, node, _ in GENERATION.findall(before)}
    return job, started, first


def trained_steps(job) -> list[int]:
    """The steps of the job's train/loss metric, sorted: each once where a redone step replaced the first."""
    table = job.metrics()
    rows = table.to_dict("records") if hasattr(table, "to_dict") else [vars(s) for s in table]
    return sorted(r["step"] for r in rows if r["tag"] == "train/loss")


def test_a_node_crash_is_survived_by_the_processes_left_and_a_warm_spare_with_each_step_once(cluster, tmp_path):
    from jupyter_gtc import api

    go = tmp_path / "go"
    job, started, first = held_with_two_spares(cluster, go)
    assert set(first) == {0, 1} and first[0][2] != first[1][2], job.logs()  # one active rank a node
    survivor, lost = first[0], first[1]
    spare = next(p for p, (_, node) in started.items() if node == survivor[2] and p != survivor[0])

    api.inject_fault(cluster, lost[2], "crash")  # the node of rank 1: its rank and its spare die
    go.write_text("")
    job.wait(timeout=240)
    log = job.logs()
    assert job.state == "COMPLETED", log
    assert "(requeued)" not in log, log  # no new attempt: the job carried on in its processes
    assert len(STARTED.findall(log)) == 4, log  # nobody started again: torch imported once a process
    again = {int(rank): (int(p), int(pid), node, int(start))
             for g, rank, p, pid, node, start in GENERATION.findall(log) if g == "1"}
    # The same PID trains on as rank 0; the warm spare on its node (imported, built) is rank 1;
    # both from the newest snapshot (step 10), which the survivor kept in memory.
    assert again == {0: (*survivor, 11), 1: (spare, started[spare][0], survivor[2], 11)}, log
    assert re.search(r"^in-job restart: process \d+ \(rank 0\) saw .*generation 1 resumes from step 10$", log, re.M), log

    # Each step once in the job's metrics (the redone 11-13 replace the first ones), up to the end.
    steps = trained_steps(job)
    assert steps == list(range(1, 31)), steps
    # The redone steps are the same steps: the snapshot restored model, optimizer and generators.
    printed = re.findall(r"^step (\d+)/30 loss (\S+)$", log, re.M)
    by_step: dict[str, set[str]] = {}
    for step, loss in printed:
        by_step.setdefault(step, set()).add(loss)
    assert [s for s, _ in printed].count("12") == 2 and len(by_step["12"]) == 1, log


def test_a_killed_process_is_replaced_by_the_spare_on_its_node_and_the_others_keep_theirs(cluster, tmp_path):
    """A process killed (as the OOM killer does) while its node lives on: the warm spare on that
    node takes its rank, so each node keeps its share of ranks; rank 0 keeps its process."""
    import psutil

    go = tmp_path / "go"
    job, started, first = held_with_two_spares(cluster, go)
    lost = first[1]
    spare = next(p for p, (_, node) in started.items() if node == lost[2] and p != lost[0])

    def rank1(proc) -> bool:
        try:
            env = proc.environ()
        except psutil.Error:
            return False
        return (env.get("SLURM_JOB_ID") == str(job.id) and env.get("SLURM_PROCID") == str(lost[0])
                and "jupyter_gtc.examples.injob_regression" in " ".join(proc.info["cmdline"] or []))
    victims = [p for p in psutil.process_iter(["cmdline"]) if rank1(p)]
    assert len(victims) == 1, victims
    victims[0].kill()
    go.write_text("")
    job.wait(timeout=240)
    log = job.logs()
    assert job.state == "COMPLETED" and "(requeued)" not in log and len(STARTED.findall(log)) == 4, log
    again = {int(rank): (int(p), int(pid), node, int(start))
             for g, rank, p, pid, node, start in GENERATION.findall(log) if g == "1"}
    assert again == {0: (*first[0], 11), 1: (spare, started[spare][0], lost[2], 11)}, log
    steps = trained_steps(job)
    assert steps == list(range(1, 31)), steps


def test_a_job_whose_spares_are_used_up_is_requeued_and_resumes_from_its_disk_checkpoint_each_step_once(
        cluster, tmp_path):
    """--no-kill keeps Slurm from requeueing the job when its node fails; with no spare left the
    processes give up (status 75) and the lighthouse requeues it: a new attempt resumes from the
    disk checkpoint instead of the job ending failed with a node short."""
    from jupyter_gtc import api

    go = tmp_path / "go"
    job = api.submit_job(cluster, SCRIPT.replace("--ntasks-per-node=2", "--ntasks-per-node=1"), script_args=[
        "--spares", "0", "--checkpoint_every", "10", "--join_timeout", "3", "--hold_at_step", "13",
        "--hold_until", str(go)])
    assert sleep_until(lambda: "step 13/30" in job.logs(), 240), job.logs()
    rank1 = {int(rank): node for g, rank, p, pid, node, _ in GENERATION.findall(job.logs())}[1]
    api.inject_fault(cluster, rank1, "crash")
    go.write_text("")
    job.wait(timeout=240)
    log = job.logs()
    assert job.state == "COMPLETED", log
    first, marker, second = log.partition("--- jupyter_gtc: attempt 2 (requeued)")
    assert marker and "exits with status 75" in first and "lighthouse: the training could not carry on" in first, log
    assert re.search(r"^resuming from \S+/step-00000010 \(step 10\)$", second, re.M), log
    steps = trained_steps(job)
    assert steps == list(range(1, 31)), steps
