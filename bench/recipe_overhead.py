"""Recipe overhead: the tiny Llama pretraining recipe as a job (``api.run_recipe``: sbatch,
srun, torchrun, our trainer) against the same program run directly in a process, on
this machine, interleaved so both see the same load.

    .venv/bin/python bench/recipe_overhead.py [--steps 60] [--repeats 2]

Prints the median step time of each (from the steps' tokens/s, the first 5 steps left out
as warm-up) and the ratio to the direct run, the baseline measured in this run; and the
whole wall time, submission to completion, against the direct process's. Where a GPU is
present it also prints tokens/s and MFU of the 1b config on one GPU in bf16, with the
GPU's model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = {
    "display_name": "benchrcp",
    "node_pools": [{"id": "cpu", "machine_spec": {"machine_type": "n2-standard-8"},
                    "scaling_spec": {"min_node_count": 1, "max_node_count": 1}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}]}},
}


def step_seconds(log_dir: Path, tokens_per_step: int) -> float:
    from jupyter_gtc.metrics.reader import read_metrics
    rates = [s.value for s in read_metrics(log_dir) if s.tag == "perf/tokens_per_s" and s.step > 5]
    return statistics.median(tokens_per_step / r for r in rates)


def direct(out: Path, steps: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "jupyter_gtc.recipes.pretrain", "--output-dir", str(out),
                    "--steps", str(steps), "--checkpoint-every", str(steps)], env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - started


def gpu_throughput() -> None:
    import torch
    if not torch.cuda.is_available():
        print("no GPU here: the 1b bf16 throughput needs one (run this on a GPU node)")
        return
    out = Path(tempfile.mkdtemp(prefix="gtc-bench-gpu-"))
    subprocess.run([sys.executable, "-m", "jupyter_gtc.recipes.pretrain", "--output-dir", str(out), "--size", "1b",
                    "--steps", "30", "--global-batch", "8", "--checkpoint-every", "1000", "--log-every", "10"],
                   check=True)
    from jupyter_gtc.metrics.reader import read_metrics
    scalars = [s for s in read_metrics(out / "logs") if s.step > 10]
    rate = statistics.median(s.value for s in scalars if s.tag == "perf/tokens_per_s")
    mfu = statistics.median(s.value for s in scalars if s.tag == "perf/mfu")
    print(f"1b on one {torch.cuda.get_device_name(0)}, bf16: {rate:,.0f} tokens/s, MFU {mfu:.1%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from jupyter_gtc import api
    from jupyter_gtc.recipes.config import PretrainConfig

    tokens = PretrainConfig().global_batch * PretrainConfig().seq_len
    api.create_cluster(SPEC)
    ours_step, direct_step, ours_wall, direct_wall = [], [], [], []
    try:
        for i in range(args.repeats):
            started = time.perf_counter()
            job = api.run_recipe("llama-pretrain", "benchrcp", args=["--steps", str(args.steps)]).wait(600)
            ours_wall.append(time.perf_counter() - started)
            if job.state != "COMPLETED":
                print(job.logs(), file=sys.stderr)
                return 1
            ours_step.append(step_seconds(job.log_dir, tokens))
            out = Path(tempfile.mkdtemp(prefix="gtc-bench-direct-"))
            direct_wall.append(direct(out, args.steps))
            direct_step.append(step_seconds(out / "logs", tokens))
    finally:
        api.delete_cluster("benchrcp")
    med = statistics.median
    print(f"tiny llama, {args.steps} steps x {tokens} tokens, {args.repeats} runs each")
    print(f"step time   direct {med(direct_step) * 1e3:7.1f} ms   as a recipe job {med(ours_step) * 1e3:7.1f} ms   "
          f"ratio {med(ours_step) / med(direct_step):.2f}")
    print(f"wall time   direct {med(direct_wall):7.1f} s    as a recipe job {med(ours_wall):7.1f} s    "
          f"ratio {med(ours_wall) / med(direct_wall):.2f}")
    gpu_throughput()
    return 0


if __name__ == "__main__":
    sys.exit(main())
