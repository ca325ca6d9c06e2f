"""Submission latency: ``%%sbatch`` in a real IPython shell and ``api.submit_job`` (what
the magic and `gtc job submit` call) against raw ``sbatch`` on the same local cluster,
interleaved so all three see the same load.

    .venv/bin/python bench/submit_latency.py [--n 100]

Prints median and p95 of each and the ratios to raw sbatch (the baseline measured in this run).
Jobs are submitted held (--hold) so running them does not disturb the timing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SPEC = {
    "display_name": "benchsub",
    "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                    "scaling_spec": {"min_node_count": 2, "max_node_count": 2}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}
SCRIPT = "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=1\nsrun hostname\n"


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api

    api.create_cluster(SPEC)
    env = {**os.environ, **api.cluster_env("benchsub")}
    script_path = os.path.join(home, "raw.sbatch")
    with open(script_path, "w") as f:
        f.write(SCRIPT)
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "jupyter_gtc")
    magic, ours, raw = [], [], []
    try:
        for i in range(args.n):
            t0 = time.perf_counter()
            shell.run_cell_magic("sbatch", f"--cluster benchsub --hold --job-name=magic-{i}", SCRIPT)
            t1 = time.perf_counter()
            api.submit_job("benchsub", SCRIPT, ["--hold", f"--job-name=ours-{i}"])
            t2 = time.perf_counter()
            subprocess.run(["sbatch", "--parsable", "--hold", f"--job-name=raw-{i}", script_path],
                           env=env, capture_output=True, text=True, check=True)
            t3 = time.perf_counter()
            magic.append(t1 - t0)
            ours.append(t2 - t1)
            raw.append(t3 - t2)
    finally:
        api.delete_cluster("benchsub")
        shutil.rmtree(home, ignore_errors=True)

    print(f"submission latency, {args.n} submissions each, interleaved, on a 2-node local cluster")
    print(f"{'':>16} {'median':>9} {'p95':>9} {'x raw (median)':>15} {'x raw (p95)':>12}")
    for label, values in (("raw sbatch", raw), ("api.submit_job", ours), ("%%sbatch", magic)):
        print(f"{label:>16} {statistics.median(values) * 1000:>7.1f}ms {p95(values) * 1000:>7.1f}ms "
              f"{statistics.median(values) / statistics.median(raw):>15.2f} {p95(values) / p95(raw):>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
