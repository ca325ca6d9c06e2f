"""What the supervisor costs a delete: a 2-node local cluster deleted with and without its
supervisor, in one run and one GTC_HOME, each created the plain way and from a thread that
blocks SIGTERM.

A daemon inherits the signal mask of the thread that started it (tini hands it on), and a
delete stops the supervisor, then munged, with SIGTERM and a grace of 5 s and 2 s before
SIGKILL: a cluster made from a thread that blocked SIGTERM took 9.4 s to delete with the
supervisor against 2.3 s without (issue 25 measured 10.7 s against 0.7 s). Daemons now start
with nothing blocked, and the supervisor unblocks SIGTERM itself. "x without" is each median
over the same creation's delete without the supervisor.

    .venv/bin/python bench/delete_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def spec(supervisor: bool) -> dict:
    return {"display_name": "bench",
            "node_pools": [{"id": "cpu", "machine_spec": {"machine_type": "n2-standard-8"},
                            "scaling_spec": {"min_node_count": 2, "max_node_count": 2}}],
            "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}],
                                                 "accounting": {"enabled": False}}},
            "local": {"resource_scale": 0.25, "supervisor": supervisor}}


def delete_time(supervisor: bool, sigterm_blocked: bool) -> float:
    from jupyter_gtc import api

    def create() -> None:
        if sigterm_blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        api.create_cluster(spec(supervisor))

    thread = threading.Thread(target=create)
    thread.start()
    thread.join()
    time.sleep(1.5)  # the supervisor past its start, at its tick's sleep
    started = time.perf_counter()
    api.delete_cluster("bench")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    runs: dict[tuple[bool, bool], list[float]] = {}
    try:
        for _ in range(args.repeat):
            for blocked in (False, True):
                for supervisor in (False, True):
                    runs.setdefault((supervisor, blocked), []).append(delete_time(supervisor, blocked))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"delete of a 2-node local cluster, median of {args.repeat}")
    print(f"{'created':36} {'without':>8} {'with supervisor':>16} {'x without':>10}")
    for blocked, label in ((False, "plainly"), (True, "from a thread that blocks SIGTERM")):
        without, with_ = (statistics.median(runs[(s, blocked)]) for s in (False, True))
        print(f"{label:36} {without:>7.2f}s {with_:>15.2f}s {with_ / without:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
