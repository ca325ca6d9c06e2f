"""A process killed in the middle of a scale or a create (a Jupyter server restarted, a
kernel killed) leaves a cluster that the next process to look at it marks ERROR, saying
what was interrupted; a scale repairs it, and delete always works."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import ClusterBusy
from tests.conftest import slurm, small_gpu_spec

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]


def killed_at(code: str, line_starts: str) -> None:
    """Run ``code`` (which prints each progress step) in another process, and SIGKILL it
    the moment it prints a line that starts with ``line_starts``."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line.rstrip())
            if line.startswith(line_starts):
                proc.kill()
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert seen and seen[-1].startswith(line_starts), seen


def slurmds(cluster: str) -> list[psutil.Process]:
    conf = str(Path(os.environ["GTC_HOME"]) / "clusters" / cluster / "etc" / "slurm.conf")
    return [p for p in psutil.process_iter(["cmdline", "environ"])
            if (p.info["cmdline"] or [""])[0].endswith("slurmd") and (p.info["environ"] or {}).get("SLURM_CONF") == conf]


def test_a_scale_killed_halfway_is_repaired_by_scaling_again():
    api.create_cluster(small_gpu_spec("halfway", nodes=2))
    try:
        killed_at("""
            from jupyter_gtc import api
            api.scale_cluster("halfway", "gpu", 3, progress=lambda m: print(m, flush=True))
            """, "starting slurmd")
        cluster = api.get_cluster("halfway")
        assert cluster.state == "ERROR"
        assert cluster.problem.startswith("scaling pool gpu to 3 node(s) was interrupted: the process doing it")
        assert "scale it (to any size) to repair it, or delete it" in cluster.to_json()["problem"]  # the panel's text

        repaired = api.scale_cluster("halfway", "gpu", 3)
        assert repaired.state == "RUNNING" and repaired.problem is None
        assert [n.name for n in repaired.nodes] == ["gpu-0", "gpu-1", "gpu-2"] and all(n.ready for n in repaired.nodes)
        out = slurm("halfway", "srun", "-N3", "bash", "-c", "echo $SLURMD_NODENAME").stdout
        assert sorted(out.split()) == ["gpu-0", "gpu-1", "gpu-2"]
        assert len(slurmds("halfway")) == 3  # the one the killed scale started was replaced, not doubled
        assert [n.name for n in api.scale_cluster("halfway", "gpu", 2).nodes] == ["gpu-0", "gpu-1"]
    finally:
        api.delete_cluster("halfway")
    assert slurmds("halfway") == []


def test_a_create_killed_halfway_is_deleted_and_its_name_reused():
    killed_at(f"""
        from jupyter_gtc import api
        api.create_cluster({small_gpu_spec("unborn", nodes=2)!r}, progress=lambda m: print(m, flush=True))
        """, "starting slurmd 2/2")
    cluster = api.get_cluster("unborn")
    assert cluster.state == "ERROR"
    assert cluster.problem.startswith("creating was interrupted") and "delete it and create it again" in cluster.problem
    with pytest.raises(ClusterBusy, match="delete it and create it again"):
        api.scale_cluster("unborn", "gpu", 2)
    assert "unborn" in [c["name"] for c in (c.to_json() for c in api.list_clusters())]

    api.delete_cluster("unborn")
    assert "unborn" not in [c.name for c in api.list_clusters(with_status=False)]
    assert slurmds("unborn") == []
    again = api.create_cluster(small_gpu_spec("unborn", nodes=1))
    assert again.state == "RUNNING" and all(n.ready for n in again.nodes)
    api.delete_cluster("unborn")


def test_a_change_under_way_in_a_live_process_is_left_alone():
    """The owner check must not take a running change for a dead one."""
    api.create_cluster(small_gpu_spec("busy", nodes=1))
    try:
        operation = api.start_scale_cluster("busy", "gpu", 2)  # claimed by this process, which lives
        cluster = api.get_cluster("busy")  # a scale restarts slurmctld: it takes seconds, not milliseconds
        assert cluster.state == "SCALING" and cluster.problem is None
        with pytest.raises(ClusterBusy):
            api.scale_cluster("busy", "gpu", 3)
        assert [n.name for n in operation.wait(timeout=120).nodes] == ["gpu-0", "gpu-1"]
        assert api.get_cluster("busy").state == "RUNNING"
    finally:
        api.delete_cluster("busy")
