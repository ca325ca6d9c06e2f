"""A scale of a local cluster leaves slurmctld running (issue 24): accounting on (the default),
a job on a node that stays runs on, new nodes take jobs (GPUs too), sacct lists those jobs,
and a scale down drains and removes. backends/local_scale.py says how.

Before it, every scale restarted slurmctld (its PID changed), which with accounting cost ~2 s:
slurmctld's shutdown waits on a thread of Slurm's that sleeps 2 s at a time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import accounting, daemons
from jupyter_gtc.backends.local import daemon_path
from tests.conftest import slurm, small_gpu_spec
from tests.non_root import normal_user, normal_user_account, processes_left  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slurm

NAME = "livescale"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    missing = accounting.missing_packages(daemon_path())
    if missing:
        pytest.skip(f"accounting needs {', '.join(missing)}")
    cluster = api.create_cluster(small_gpu_spec(NAME, nodes=2, accounting=None))  # the default: accounting on
    assert cluster.runtime.get("accounting")
    yield cluster
    api.delete_cluster(NAME)


def test_a_scale_keeps_slurmctld_and_the_jobs_and_new_nodes_take_jobs_that_sacct_lists(cluster):
    ctld = _slurmctld_pid(cluster)
    job = _submit("-w", "gpu-0", "--wrap", "sleep 302")
    _wait(lambda: _state(job) == "RUNNING", f"job {job} to run")

    scaled = api.scale_cluster(NAME, "gpu", 4)
    assert [n.name for n in scaled.nodes] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert _slurmctld_pid(cluster) == ctld  # the same slurmctld: never restarted
    assert _state(job) == "RUNNING"
    # A step over old and new nodes, right after the scale: every node's output comes back.
    step = slurm(NAME, "srun", "-N3", "-x", "gpu-0", "bash", "-c", "echo $SLURMD_NODENAME")
    assert sorted(step.stdout.split()) == ["gpu-1", "gpu-2", "gpu-3"], step.stderr
    # The new node's GPUs, and the partition it was added to.
    gpus = slurm(NAME, "srun", "-w", "gpu-3", "-p", "train", "--gpus=2", "bash", "-c", "echo $CUDA_VISIBLE_DEVICES")
    assert gpus.stdout.strip() == "0,1", gpus.stderr
    batch = _submit("-w", "gpu-2,gpu-3", "-N2", "--wrap", "srun hostname")
    _wait(lambda: _sacct(batch) == ("gpu-[2-3]", "COMPLETED"), f"sacct to list job {batch} as COMPLETED on gpu-[2-3]")

    scaled = api.scale_cluster(NAME, "gpu", 2)
    assert [n.name for n in scaled.nodes] == ["gpu-0", "gpu-1"]
    assert _slurmctld_pid(cluster) == ctld
    assert _state(job) == "RUNNING"
    listed = slurm(NAME, "scontrol", "-o", "--future", "show", "node").stdout
    assert "gpu-2" not in listed and "gpu-3" not in listed, listed  # removed from slurmctld, not just hidden
    refused = slurm(NAME, "sbatch", "-w", "gpu-3", "--wrap", "true", check=False)
    assert refused.returncode != 0
    assert not any(daemons.find(label, Path(cluster.runtime["dir"]) / "run")
                   for label in ("slurmd-gpu-2", "slurmd-gpu-3", "relay-gpu-3"))
    # Back up again: a removed node's name comes back as a new node.
    api.scale_cluster(NAME, "gpu", 3)
    assert slurm(NAME, "srun", "-w", "gpu-2", "hostname").returncode == 0
    assert _slurmctld_pid(cluster) == ctld and _state(job) == "RUNNING"
    slurm(NAME, "scancel", job)


def _slurmctld_pid(cluster) -> int:
    return daemons.find("slurmctld", Path(cluster.runtime["dir"]) / "run").pid


def _submit(*argv: str) -> str:
    return slurm(NAME, "sbatch", "--parsable", "-o", "/dev/null", *argv).stdout.strip().split(";")[0]


def _state(job: str) -> str:
    return slurm(NAME, "squeue", "-h", "-j", job, "-o", "%T").stdout.strip()


def _sacct(job: str) -> tuple[str, str]:
    out = slurm(NAME, "sacct", "-n", "-X", "-P", "-j", job, "-o", "NodeList,State").stdout.strip()
    return tuple(out.split("|")) if out else ("", "")


def _wait(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.2)


AS_USER = """
import json, os, subprocess
from pathlib import Path
from jupyter_gtc import api
from jupyter_gtc.backends import daemons
from tests.conftest import small_gpu_spec

made = api.create_cluster(small_gpu_spec("nrlive", nodes=1, accounting=None))
run = Path(made.runtime["dir"]) / "run"
ctld = daemons.find("slurmctld", run).pid
try:
    scaled = api.scale_cluster("nrlive", "gpu", 3)
    env = {**os.environ, **api.cluster_env("nrlive")}
    step = subprocess.run(["srun", "-N3", "bash", "-c", "echo $SLURMD_NODENAME"], env=env, capture_output=True,
                          text=True, timeout=60)
    same = daemons.find("slurmctld", run).pid == ctld
    down = api.scale_cluster("nrlive", "gpu", 1)
    print(json.dumps({"nodes": [n.name for n in scaled.nodes], "step": sorted(step.stdout.split()),
                      "err": step.stderr[-500:], "same_ctld": same, "after": [n.name for n in down.nodes],
                      "same_after": daemons.find("slurmctld", run).pid == ctld}))
finally:
    api.delete_cluster("nrlive")
"""


def test_a_normal_users_cluster_scales_live_too(slurm_available, normal_user):
    import json

    result = normal_user.python(AS_USER, normal_user.new_home())
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["nodes"] == ["gpu-0", "gpu-1", "gpu-2"]
    assert answer["step"] == ["gpu-0", "gpu-1", "gpu-2"], answer["err"]
    assert answer["same_ctld"] and answer["same_after"] and answer["after"] == ["gpu-0"]
    assert not processes_left(normal_user.uid)  # the added nodes' relays went with them
