"""What tests/backends/test_non_root.py runs as the ordinary user, in a process of its own:

    python -m tests.backends.as_user create NAME [--plain]   a 2-node cluster, a step, a batch job
    python -m tests.backends.as_user finish NAME [--plain]   a job deaf to SIGTERM, then delete the cluster

Each prints one JSON object on its last line. ``--plain`` makes the backend act as on a
machine without user namespaces (plain processes), which this machine cannot be made into.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from jupyter_gtc import api
from tests.conftest import small_gpu_spec

STEP = 'echo "node=$SLURMD_NODENAME user=$(id -un) resolves=$(getent hosts gpu-0 gpu-1 | wc -l)"'
BATCH = f"""#!/bin/bash
srun -N2 bash -c '{STEP}'
echo written > "$AIP_MODEL_DIR/model.txt"
"""


def create(name: str) -> dict:
    cluster = api.create_cluster(small_gpu_spec(name, nodes=2))
    env = {**os.environ, **api.cluster_env(name)}
    step = subprocess.run(["srun", "-N2", "bash", "-c", STEP], env=env, capture_output=True, text=True, timeout=120)
    job = api.submit_job(name, BATCH, ["--nodes=2"]).wait(timeout=120)
    files = [p for p in job.job_dir.rglob("*")]
    return {
        "nodes": [n.name for n in cluster.nodes], "not_applied": [str(x) for x in cluster.not_applied],
        "runs_as": cluster.status.details.get("runs_as"), "slurm_conf": env["SLURM_CONF"],
        "step": step.stdout, "step_error": step.stderr, "step_rc": step.returncode,
        "job": {"state": job.state, "exit_code": job.exit_code, "log": job.logs(), "dir": str(job.job_dir),
                "owners": sorted({p.stat().st_uid for p in files}), "files": sorted(str(p) for p in files)},
    }


# Deaf to SIGTERM (an ignored signal stays ignored across exec), so scancel does not end it
# within the few seconds a delete gives it: stopping the nodes must.
STUBBORN = """#!/bin/bash
trap '' TERM
srun -N2 bash -c "trap '' TERM; exec sleep 600"
"""


def finish(name: str) -> dict:
    job = api.submit_job(name, STUBBORN, ["--nodes=2"]).wait_until_running(timeout=60)
    deadline = time.monotonic() + 60
    while len(_sleeps()) < 2 and time.monotonic() < deadline:  # one per node
        time.sleep(0.1)
    sleeps = len(_sleeps())
    api.delete_cluster(name)
    return {"running_job": job.id, "sleeps_before_delete": sleeps,
            "clusters": [c.name for c in api.list_clusters(with_status=False)],
            "cluster_dir_left": (Path(os.environ["GTC_HOME"]) / "clusters" / name).exists()}


def _sleeps() -> list[psutil.Process]:
    """The job's sleeps: this user's (other test sessions on the machine sleep too)."""
    return [p for p in psutil.process_iter(["cmdline", "uids"])
            if p.info["cmdline"] == ["sleep", "600"] and p.info["uids"].real == os.getuid()]


def main(argv: list[str]) -> None:
    action, name, *flags = argv
    if "--plain" in flags:
        from jupyter_gtc.backends import daemons

        daemons.isolation = lambda: "none"
    print(json.dumps({"create": create, "finish": finish}[action](name)))


if __name__ == "__main__":
    main(sys.argv[1:])
