"""Time from `create_cluster` to every node idle, and teardown time, for 1, 4 and 8 nodes.

Runs against the real local backend in a private GTC_HOME. Each size is measured
``--repeat`` times and the median printed, with the ratio to the 1-node cluster measured
in the same run (the baseline), so machines of different speeds compare.

    .venv/bin/python bench/cluster_bringup.py [--sizes 1 4 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time


def spec(nodes: int) -> dict:
    return {
        "display_name": f"bench{nodes}",
        "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                        "scaling_spec": {"min_node_count": nodes, "max_node_count": nodes}}],
        "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
    }


def measure(nodes: int) -> tuple[float, float, float]:
    from jupyter_gtc import api

    t0 = time.perf_counter()
    cluster = api.create_cluster(spec(nodes))
    t1 = time.perf_counter()
    assert len(cluster.nodes) == nodes and all(n.ready for n in cluster.nodes)
    scaled = api.scale_cluster(cluster.name, "a3", nodes + 1)
    t2 = time.perf_counter()
    assert len(scaled.nodes) == nodes + 1
    api.delete_cluster(cluster.name)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    sizes = sorted(set([1, *args.sizes]))

    rows = {}
    for nodes in sizes:
        runs = [measure(nodes) for _ in range(args.repeat)]
        rows[nodes] = [statistics.median(column) for column in zip(*runs)]
    shutil.rmtree(home, ignore_errors=True)

    base_up, _, base_down = rows[1]
    print(f"local cluster bring-up, median of {args.repeat} (a3-highgpu-8g nodes, emulated GPUs)")
    print(f"{'nodes':>5} {'to all idle':>12} {'x 1-node':>9} {'scale +1':>9} {'teardown':>9} {'x 1-node':>9}")
    for nodes, (up, scale, down) in rows.items():
        print(f"{nodes:>5} {up:>11.2f}s {up / base_up:>9.2f} {scale:>8.2f}s {down:>8.2f}s {down / base_down:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
