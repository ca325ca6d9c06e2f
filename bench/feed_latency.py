"""Change-feed latency: how long after a job changes the sidebar's feed (``GET gtc/api/events``
on a real ``jupyter server``) says so, against how long Slurm itself takes to show it.

    .venv/bin/python bench/feed_latency.py [--n 10]

For each of N jobs (submitted from this process, as a notebook would; the server's poller
finds them in the state store), two times from the same instant: ``squeue`` polled every
20 ms here (the baseline, measured in this run: the soonest anyone can know) and the feed's
job event. Once for submit -> RUNNING, once for a cancel through the REST API -> CANCELLED.
Prints median and p95 of each and the feed's ratio to the baseline. The claim it checks:
a change reaches the sidebar within a poll tick or two (0.5 s each while jobs change),
a few seconds at most.

GTC_HOME is a fresh temporary folder; the cluster and the server are gone at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CLUSTER = "benchfeed"
SPEC = {
    "display_name": CLUSTER,
    "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                    "scaling_spec": {"min_node_count": 1, "max_node_count": 1}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


def squeue_shows(env: dict[str, str], job_id: str, state: str, since: float, timeout: float = 120) -> float:
    """Seconds from ``since`` until squeue shows the job in ``state``."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        shown = subprocess.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], env=env,
                               capture_output=True, text=True).stdout.strip()
        if shown == state:
            return time.perf_counter() - since
        time.sleep(0.02)
    raise TimeoutError(f"squeue did not show job {job_id} {state} within {timeout} s")


def measure(state: str, stream, env: dict[str, str], act) -> tuple[str, float, float]:
    """``act()`` changes a job and returns its id: (id, squeue's and the feed's seconds from
    then until each shows the job in ``state``)."""
    job_id = act()
    since = time.perf_counter()
    baseline: list[float] = []
    watcher = threading.Thread(target=lambda: baseline.append(squeue_shows(env, job_id, state, since)))
    watcher.start()
    stream.next("job", where=lambda j: j["id"] == job_id and j["state"] == state, timeout=120)
    feed = time.perf_counter() - since
    watcher.join()
    return job_id, baseline[0], feed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="jobs measured")
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api
    from tests.browser.jupyter import JupyterProcess
    from tests.server.api_client import EventStream, ok

    api.create_cluster(SPEC)
    env = {**os.environ, **api.cluster_env(CLUSTER)}
    rows: dict[str, list[tuple[float, float]]] = {"submit -> RUNNING": [], "cancel -> CANCELLED": []}
    try:
        with JupyterProcess(Path(home) / "jupyter", app="server") as server:
            stream = EventStream(server, f"?cluster={CLUSTER}")
            try:
                stream.next("snapshot", timeout=60)
                for i in range(args.n):
                    job_id, *running = measure("RUNNING", stream, env, lambda i=i: api.submit_job(
                        CLUSTER, "#!/bin/bash\nsleep 600\n", [f"--job-name=fed-{i}"]).id)
                    rows["submit -> RUNNING"].append(tuple(running))

                    def cancel(job_id=job_id) -> str:  # as the sidebar's Cancel button does
                        ok(server, "POST", f"jobs/{CLUSTER}/{job_id}/cancel")
                        return job_id

                    _, *cancelled = measure("CANCELLED", stream, env, cancel)
                    rows["cancel -> CANCELLED"].append(tuple(cancelled))
            finally:
                stream.close()
    finally:
        api.delete_cluster(CLUSTER)
        shutil.rmtree(home, ignore_errors=True)

    print(f"change-feed latency, {args.n} jobs, on a 1-node local cluster (baseline: squeue polled every 20 ms)")
    print(f"{'':>20} {'squeue median':>14} {'feed median':>12} {'feed p95':>9} {'x squeue (median)':>18}")
    for label, pairs in rows.items():
        base, feed = [b for b, _ in pairs], [f for _, f in pairs]
        print(f"{label:>20} {statistics.median(base):>12.2f} s {statistics.median(feed):>10.2f} s "
              f"{p95(feed):>7.2f} s {statistics.median(feed) / max(statistics.median(base), 0.01):>18.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
