"""Remote submit: a job sent to an attached cluster over jupyter_gtc's one shared SSH connection
(what `%%sbatch` does: the job folder made, the script written, sbatch run, the job
recorded), against a plain `ssh HOST sbatch ...` per job with a new connection each, as most
tools do. A real local cluster stands in for the remote one, reached through a real sshd
(tests/hosts/sshd.py; as root). Jobs are held, so none runs; all are cancelled at the end.

    .venv/bin/python bench/remote_submit.py [--jobs 50]

The two kinds are interleaved (one of each in turn) so a busy moment of the machine costs
both; the baseline is the plain ssh submit of the same run. Goal: ours at most 0.3x.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hosts.sshd import start_sshd  # noqa: E402  (the test server, reused as is)

SPEC = {
    "display_name": "benchsub",
    "node_pools": [{"id": "a3", "machine_spec": {"machine_type": "a3-highgpu-8g"},
                    "scaling_spec": {"min_node_count": 1, "max_node_count": 1}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "a3", "node_pool_ids": ["a3"]}]}},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50, help="submits of each kind")
    args = parser.parse_args()
    if os.getuid() != 0:
        sys.exit("run as root: the test sshd needs /run/sshd")
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api

    server = start_sshd(Path(home) / "sshd")
    ours, plain = [], []
    try:
        local = api.create_cluster(SPEC)
        conf = api.cluster_env(local.name)["SLURM_CONF"]
        api.attach_cluster({"display_name": "far", "slurm_conf": conf, "jobs_root": f"{home}/jobs",
                            "ssh": {"host": server.alias, "config_file": str(server.config)}})
        # What a plain tool runs: a new connection per job (no master), the same sbatch.
        plain_argv = ["ssh", "-F", str(server.config), "-o", "ControlMaster=no", "-o", "ControlPath=none",
                      "-o", "BatchMode=yes", server.alias, "env", f"SLURM_CONF={conf}", "sbatch", "--parsable",
                      "--hold", "--job-name=plain", "--wrap=true"]
        api.submit_job("far", "true", ["--hold"])  # the connection is opened once, as in a session
        for i in range(args.jobs):
            t0 = time.perf_counter()
            api.submit_job("far", "true", ["--hold", f"--job-name=ours-{i}"])
            ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(plain_argv, check=True, capture_output=True, timeout=60)
            plain.append(time.perf_counter() - t0)
    finally:
        names = [c.name for c in api.list_clusters(with_status=False)]
        if "far" in names:
            api.detach_cluster("far")
        if "benchsub" in names:
            api.delete_cluster("benchsub")  # cancels every job, ours and the plain ones
        server.stop()
        shutil.rmtree(home, ignore_errors=True)

    base = statistics.median(plain)
    print(f"submit over SSH, {args.jobs} each, interleaved (held jobs)")
    print(f"{'how':<46} {'median ms':>9} {'p90 ms':>7} {'x plain':>7}")
    for label, times in (("plain `ssh host sbatch` (new connection each)", plain),
                         ("jupyter_gtc %%sbatch (one shared connection)", ours)):
        median, p90 = statistics.median(times), sorted(times)[int(0.9 * (len(times) - 1))]
        print(f"{label:<46} {median * 1e3:>9.1f} {p90 * 1e3:>7.1f} {median / base:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
