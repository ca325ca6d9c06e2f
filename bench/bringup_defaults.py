"""What the defaults cost at bring-up: a 2-node local cluster created, scaled to 3 nodes and
deleted with Slurm alone (``supervisor: false``, ``accounting: {enabled: false}``: the baseline), with the
supervisor, with accounting, and with both (the defaults), measured in turn in one run and in
one GTC_HOME.

Accounting's MariaDB is shared by a GTC_HOME's clusters, so it is measured two ways: "cold",
the only cluster (its create starts the database, its delete stops it), and "warm", another
cluster of the same GTC_HOME keeping the database up, as in a session with a cluster already
made (and in the test suite). "x alone" is each median over the baseline's; issue 24 asked for
at most 1.1 with the supervisor and 1.5 with accounting. The "before" rows are clusters as the
code before live scaling made them (their scale restarts slurmctld: backends/local_scale.py),
measured in the same run.

    .venv/bin/python bench/bringup_defaults.py [--repeat 5]
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

# name -> (label, supervisor, accounting, another cluster keeps the database up, scale restarts
# slurmctld as before issue 24's live scale: a cluster made by the earlier code)
SETUPS = {
    "alone": ("Slurm alone (baseline)", False, False, False, False),
    "supervisor": ("with the supervisor", True, False, False, False),
    "acct-cold": ("with accounting, database cold", False, True, False, False),
    "acct-warm": ("with accounting, database warm", False, True, True, False),
    "defaults": ("defaults (both), database warm", True, True, True, False),
    "alone-old": ("before: Slurm alone, restart", False, False, False, True),
    "acct-old": ("before: accounting warm, restart", False, True, True, True),
}


def spec(name: str, supervisor: bool, accounting: bool, nodes: int = 2) -> dict:
    return {"display_name": name,
            "node_pools": [{"id": "cpu", "machine_spec": {"machine_type": "n2-standard-8"},
                            "scaling_spec": {"min_node_count": nodes, "max_node_count": nodes}}],
            "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}],
                                                 "accounting": {"enabled": accounting}}},
            "local": {"resource_scale": 0.25, "supervisor": supervisor}}


def measure(name: str, supervisor: bool, accounting: bool, restart: bool) -> tuple[float, float, float]:
    from jupyter_gtc import api
    from jupyter_gtc.backends import local_scale

    new_runtime = local_scale.new_runtime
    if restart:  # what a cluster made before live scaling records: none of it
        local_scale.new_runtime = lambda: None
    try:
        t0 = time.perf_counter()
        cluster = api.create_cluster(spec(name, supervisor, accounting))
        t1 = time.perf_counter()
    finally:
        local_scale.new_runtime = new_runtime
    assert all(n.ready for n in cluster.nodes)
    assert bool(cluster.runtime.get("live_scale")) != restart
    api.scale_cluster(name, "cpu", 3)  # starts one slurmd (and, with restart, slurmctld again)
    t2 = time.perf_counter()
    api.delete_cluster(name)
    return t1 - t0, t2 - t1, time.perf_counter() - t2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api

    runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in SETUPS}
    try:
        for _ in range(args.repeat):  # interleaved, so a busy moment of the machine hits every setup
            for key, (_, supervisor, accounting, warm, restart) in SETUPS.items():
                if warm:
                    api.create_cluster(spec("keeper", False, True, nodes=1))
                try:
                    runs[key].append(measure("bench", supervisor, accounting, restart))
                finally:
                    if warm:
                        api.delete_cluster("keeper")
    finally:
        shutil.rmtree(home, ignore_errors=True)

    # The best of the runs too: a create is a fraction of a second, and a busy machine (a
    # slurmd's first registration missed, retried a second later) moves a median.
    for name, pick in (("median", statistics.median), ("best", min)):
        up0, scale0, down0 = (pick(c) for c in zip(*runs["alone"]))
        print(f"2-node local cluster, {name} of {args.repeat}: create to all idle, scale to 3 nodes, delete")
        print(f"{'':34} {'create':>8} {'x alone':>8} {'scale':>8} {'x alone':>8} {'delete':>8} {'x alone':>8}")
        for key, (label, *_) in SETUPS.items():
            up, scale, down = (pick(c) for c in zip(*runs[key]))
            print(f"{label:34} {up:>7.2f}s {up / up0:>8.2f} {scale:>7.2f}s {scale / scale0:>8.2f} "
                  f"{down:>7.2f}s {down / down0:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
