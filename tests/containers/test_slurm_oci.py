"""Slurm 22.05's own container support on a real 2-node local cluster: the tests' image
unpacked into an OCI bundle by umoci, oci.conf naming this machine's OCI runtime, and
``srun --container=BUNDLE`` running each task in the image, on its node's network."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.containers import runtime, slurm_oci
from tests.containers.image import trainer_image

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(any(shutil.which(p) is None for p in ("podman", "mmdebstrap", "umoci", "skopeo")),
                                 reason="podman, mmdebstrap, umoci and skopeo are not installed "
                                        "(scripts/install-system-deps.sh)")]

REPORT = "import os; print('task in the image:', os.path.isdir('/opt/trainer'), 'job', os.environ['SLURM_JOB_ID'])"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    from tests.conftest import small_gpu_spec

    cluster = api.create_cluster(small_gpu_spec("oci", nodes=2))
    yield cluster
    api.delete_cluster(cluster.name)


def test_srun_container_runs_each_task_of_a_two_node_job_in_the_image(cluster, tmp_path):
    found = runtime.detect()
    conf = Path(os.environ["GTC_HOME"]) / "clusters" / cluster.name / "etc" / "slurm.conf"
    # slurmstepd reads oci.conf at each step: written into the running cluster, used by the next one.
    (conf.parent / "oci.conf").write_text(slurm_oci.oci_conf(found.oci_runtime, rootless=os.geteuid() != 0))
    bundle = slurm_oci.bundle_for(found.engine, trainer_image(), tmp_path / "bundles")
    script = f"#!/bin/bash\nsrun --container={bundle} python3 -c \"{REPORT}\"\n"
    job = api.submit_job(cluster.name, script, ["--nodes=2", "--ntasks-per-node=1"])
    job.wait(timeout=300)
    assert job.state == "COMPLETED", job.logs()
    # One line per task, each from inside the image. (Not asserted: which task wrote which. Slurm
    # 22.05 gave both containers the first task's SLURM_PROCID and SLURMD_NODENAME here.)
    lines = [line for line in job.logs().splitlines() if line.startswith("task ")]
    assert lines == [f"task in the image: True job {job.id}"] * 2, job.logs()


def test_a_clusters_host_says_it_has_slurms_oci_support_and_no_pyxis_with_whom_to_ask(cluster, monkeypatch):
    from jupyter_gtc.hosts.local import LocalHost

    # As for an attached cluster's login node, through its host: here this machine, with the
    # cluster's slurm.conf (srun --help needs one).
    monkeypatch.setenv("SLURM_CONF", str(Path(os.environ["GTC_HOME"]) / "clusters" / cluster.name / "etc" /
                                         "slurm.conf"))
    found = runtime.detect_on_host(LocalHost())
    assert found.get("slurm-oci") is not None and found.get("podman") is not None
    assert found.get("pyxis") is None and "ask the cluster's admins for pyxis" in found.missing["pyxis"]
