"""An sbatch job as a Vertex AI CustomJob (spec/vertex_job.py): pure, no endpoint. What the
vertex backend sends is checked here field by field; tests/vertex/test_backend.py runs it."""

from __future__ import annotations

import pytest

from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.spec.vertex_job import CPU_IMAGE, GPU_IMAGE, custom_job, slurm_seconds

ENV = {"GTC_JOB_DIR": "/gcs/b/jobs/vx/train-1", "AIP_MODEL_DIR": "/gcs/b/jobs/vx/train-1/model/", "X": "1"}


def body(script: str, *options: str, **kw):
    return custom_job(script, list(options), ENV, cluster="vx", output_uri="gs://b/jobs/vx/train-1", **kw)


def test_machine_accelerators_replicas_image_and_program():
    job = body("#!/bin/bash\n#SBATCH --nodes=3\n#SBATCH --job-name=train\nsrun --gpus-per-node 8 python train.py \"$@\"\n",
               "--machine-type=a3-highgpu-8g", script_args=["--lr=0.1"])
    assert job["display_name"] == "train" and job["labels"] == {"gtc_cluster": "vx"}
    pools = job["job_spec"]["worker_pool_specs"]
    assert [p["replica_count"] for p in pools] == [1, 2]  # the primary, and the rest of --nodes
    assert pools[0]["machine_spec"] == {"machine_type": "a3-highgpu-8g", "accelerator_type": "NVIDIA_H100_80GB",
                                        "accelerator_count": 8}
    container = pools[1]["container_spec"]
    assert container["image_uri"] == GPU_IMAGE
    assert container["command"][:2] == ["bash", "-c"] and container["command"][3:] == [
        "gtc-job", "python", "train.py", "--lr=0.1"]  # srun's own options dropped; the flags after the program
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["GTC_POOL"] == "1" and env["X"] == "1" and "AIP_MODEL_DIR" not in env  # Vertex sets AIP_* itself
    assert env["GTC_LOG"] == "/gcs/b/jobs/vx/train-1/slurm-%j.out"
    assert job["job_spec"]["base_output_directory"] == {"output_uri_prefix": "gs://b/jobs/vx/train-1"}


def test_replicas_win_over_nodes_and_the_image_and_time_are_taken():
    job = body("#!/bin/bash\n#SBATCH -N 4\necho hi\n", "--replicas", "1", "--machine-type", "n2-standard-8",
               "--image", "eu.gcr.io/p/trainer:1", "--time=1-02:03:04")
    pools = job["job_spec"]["worker_pool_specs"]
    assert [p["replica_count"] for p in pools] == [1]
    assert pools[0]["machine_spec"] == {"machine_type": "n2-standard-8"}  # no GPUs: no accelerator fields
    assert pools[0]["container_spec"]["image_uri"] == "eu.gcr.io/p/trainer:1"
    assert pools[0]["container_spec"]["command"][3:] == ["gtc-job", "bash", "-c", "echo hi", "trial"]
    assert job["job_spec"]["scheduling"] == {"timeout": f"{86400 + 2 * 3600 + 3 * 60 + 4}s"}


def test_the_targets_defaults_apply_and_a_cpu_machine_gets_the_cpu_image():
    job = body("#!/bin/bash\ntrue\n", machine_type="n2-standard-4")
    assert job["job_spec"]["worker_pool_specs"][0]["container_spec"]["image_uri"] == CPU_IMAGE
    assert body("true\n", machine_type="n2-standard-4", image="my/image")["job_spec"]["worker_pool_specs"][0][
        "container_spec"]["image_uri"] == "my/image"


def test_a_reduction_server_is_worker_pool_2():
    from jupyter_gtc.spec.vertex_job import REDUCTION_SERVER_IMAGE

    pools = body("#!/bin/bash\ntrue\n", "--machine-type=a3-highgpu-8g", "--replicas=4", "--reduction-server=2")[
        "job_spec"]["worker_pool_specs"]
    assert [p["replica_count"] for p in pools] == [1, 3, 2]
    assert pools[2] == {"machine_spec": {"machine_type": "n1-highcpu-16"}, "replica_count": 2,
                        "container_spec": {"image_uri": REDUCTION_SERVER_IMAGE}}


def test_requeue_spot_and_flex_start_are_vertexs_scheduling():
    spot = body("#!/bin/bash\n#SBATCH --requeue\ntrue\n", "--machine-type=n2-standard-8", "--spot")
    assert spot["job_spec"]["scheduling"] == {"restart_job_on_worker_restart": True, "strategy": "SPOT"}
    flex = body("#!/bin/bash\n#SBATCH --requeue\ntrue\n", "--machine-type=a3-highgpu-8g", "--no-requeue",
                "--flex-start=2:00:00")
    assert flex["job_spec"]["scheduling"] == {"strategy": "FLEX_START", "max_wait_duration": "7200s"}
    assert "scheduling" not in body("true\n", "--machine-type=n2-standard-8")["job_spec"]


@pytest.mark.parametrize("options, field, words", [
    ([], "--machine-type", "gtc config set vertex.machine_type"),
    (["--machine-type=g2-standard-8", "--gpus-per-node=2"], "--gpus-per-node", "g2-standard-8 has 1 GPU"),
    (["--machine-type=n2-standard-8", "--array=1-4"], "--array", "no job arrays"),
    (["--machine-type=n2-standard-8", "--partition=gpu"], "--partition", "--machine-type"),
    (["--machine-type=n2-standard-8", "--replicas=0"], "--replicas", "1 or more"),
    (["--machine-type=n2-standard-8", "--reduction-server=1"], "--reduction-server", "2 or more"),
    (["--machine-type=n2-standard-8", "--time=soon"], "--time", "HH:MM:SS"),
    (["--machine-type=n2-standard-8", "--spot", "--flex-start"], "--spot", "not both"),
    (["--machine-type=n2-standard-8", "--flex-start=later"], "--flex-start", "HH:MM:SS"),
])
def test_what_vertex_cannot_do_is_refused_naming_the_option(options, field, words):
    with pytest.raises(SpecError) as info:
        body("#!/bin/bash\ntrue\n", *options)
    assert info.value.field == field and words in str(info.value)


@pytest.mark.parametrize("value, seconds", [("90", 5400), ("10:30", 630), ("01:00:05", 3605), ("2-3", 2 * 86400 + 3 * 3600)])
def test_slurm_time_limits(value, seconds):
    assert slurm_seconds(value) == seconds
