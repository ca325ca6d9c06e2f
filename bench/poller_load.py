"""Poller load: scheduler commands per minute and CPU used by the poller with 1, 100 and
1,000 watched jobs (held, so they stay in the queue), on a real local cluster.

    .venv/bin/python bench/poller_load.py [--window 20]

The baseline is the 1-job case of the same run: a poller that batches costs about the
same whatever the number of jobs, so the ratios should stay near 1 for commands, and CPU
too now that a tick asks squeue for only the fields a view needs (``squeue -O``) and parses
only the jobs that changed. Then, with the most jobs, one poll's CPU (this process and
squeue's) the way ticks poll now against the ``squeue --json`` they ran before, same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

SPEC = {
    "display_name": "benchpoll",
    "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                    "scaling_spec": {"min_node_count": 1, "max_node_count": 1}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}


def cpu_seconds() -> float:
    """This process's CPU plus that of the commands it ran (squeue)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1000])
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api

    api.create_cluster(SPEC)
    rows = []
    submitted = 0
    try:
        poller = api.job_poller("benchpoll")
        for size in sorted(args.sizes):
            while submitted < size:
                api.submit_job("benchpoll", "true", ["--hold", f"--job-name=held-{submitted}"])
                submitted += 1
            poller.tick()  # settle: every job seen once
            ticks, cpu, t0 = poller.ticks, cpu_seconds(), time.perf_counter()
            time.sleep(args.window)
            elapsed = time.perf_counter() - t0
            rows.append((size, (poller.ticks - ticks) * 60 / elapsed, (cpu_seconds() - cpu) / elapsed * 100))
        polls = compare_polls(poller._commands(), repeat=10)
    finally:
        api.delete_cluster("benchpoll")
        shutil.rmtree(home, ignore_errors=True)

    base_cmds, base_cpu = rows[0][1], rows[0][2]
    print(f"poller load over {args.window:.0f} s windows (idle jobs: the poller backs off to its max interval)")
    print(f"{'watched':>8} {'squeue/min':>11} {'x 1 job':>8} {'CPU %':>7} {'x 1 job':>8}")
    for size, per_min, cpu in rows:
        print(f"{size:>8} {per_min:>11.1f} {per_min / base_cmds:>8.2f} {cpu:>7.2f} {cpu / max(base_cpu, 1e-9):>8.2f}")
    print(f"\none poll of {rows[-1][0]} jobs, CPU ms (this process + squeue), mean of 10:")
    base = polls["squeue --json (before)"]
    for label, ms in polls.items():
        print(f"  {label:<36} {ms:>7.1f} ms  {base / max(ms, 1e-9):>6.1f}x less than --json")
    return 0


def compare_polls(commands, repeat: int) -> dict[str, float]:
    """CPU ms per poll: --json parsed whole (the old tick), -O parsed whole (a reader's first
    tick), -O with every job unchanged (a reader's steady tick)."""
    from jupyter_gtc.slurm.parse import SqueueFormatReader

    def measure(poll) -> float:
        poll()  # warm
        cpu = cpu_seconds()
        for _ in range(repeat):
            poll()
        return (cpu_seconds() - cpu) / repeat * 1000

    reader = SqueueFormatReader()
    return {"squeue --json (before)": measure(commands.queue_json),
            "squeue -O, every job parsed": measure(lambda: commands.queue(SqueueFormatReader())),
            "squeue -O, only changed jobs parsed": measure(lambda: commands.queue(reader))}


if __name__ == "__main__":
    sys.exit(main())
