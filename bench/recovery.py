"""Recovery from a node fault, a crash (its slurmd and jobs gone) or a partition (its link down,
its processes running on): seconds from the fault to the node set DOWN and to the
``--requeue`` job running again on the other node, with the cluster's supervisor and without
it (Slurm's own detection: ``SlurmdTimeout=30``, as the local backend sets it; Slurm's default
is 300 s). Two local clusters of 2 namespace-mode nodes (root), measured in turn in one run.

    .venv/bin/python bench/recovery.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCRIPT = ('#!/bin/bash\n#SBATCH --requeue\necho "run ${SLURM_RESTART_COUNT:-0}"\n'
          '[ -n "${SLURM_RESTART_COUNT:-}" ] || sleep 600\nsleep 1\n')


def spec(name: str, supervisor: bool) -> dict:
    return {"display_name": name,
            "node_pools": [{"id": "gpu", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                            "scaling_spec": {"min_node_count": 2, "max_node_count": 2}}],
            "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "gpu", "node_pool_ids": ["gpu"]}]}},
            "local": {"resource_scale": 0.125, "supervisor": supervisor, "network": "namespaces"}}


def wait(condition, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the job did not come back")
        time.sleep(0.1)
    return time.monotonic()


def one_fault(api, cluster: str, fault: str) -> tuple[float, float]:
    """(seconds to the node DOWN, seconds to the job running again) after ``fault``."""
    job = api.submit_job(cluster, SCRIPT).wait_until_running(timeout=120)
    wait(lambda: "run 0" in job.logs())
    node = job.nodes
    began = time.monotonic()
    api.inject_fault(cluster, node, fault)
    down = wait(lambda: any(n.name == node and n.state == "DOWN" for n in api.get_cluster(cluster).nodes))
    again = wait(lambda: "run 1" in job.logs())
    job.wait(timeout=120)
    api.inject_fault(cluster, node, fault, clear=True)  # the next round starts with both nodes up
    wait(lambda: all(n.ready for n in api.get_cluster(cluster).nodes))
    return down - began, again - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api

    faults = ("crash", "partition")
    rows = {}
    try:
        for name, supervised in (("slurmonly", False), ("supervised", True)):
            api.create_cluster(spec(name, supervised))
            for fault in faults:
                rows[name, fault] = [one_fault(api, name, fault) for _ in range(args.rounds)]
            api.delete_cluster(name)
    finally:
        for c in api.list_clusters(with_status=False):
            api.delete_cluster(c.name)
        shutil.rmtree(home, ignore_errors=True)

    print(f"a node fault under a --requeue job, {args.rounds} rounds each (medians)")
    print(f"{'fault':<10} {'detection':<32} {'to DOWN s':>9} {'job again s':>11} {'x Slurm':>7}")
    for fault in faults:
        base = statistics.median(r[1] for r in rows["slurmonly", fault])
        for name, label in (("slurmonly", "Slurm alone (SlurmdTimeout=30)"), ("supervised", "with the supervisor")):
            measured = rows[name, fault]
            down, again = statistics.median(r[0] for r in measured), statistics.median(r[1] for r in measured)
            print(f"{fault:<10} {label:<32} {down:>9.1f} {again:>11.1f} {again / base:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
