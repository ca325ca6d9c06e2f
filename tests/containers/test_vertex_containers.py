"""Vertex AI CustomJobs whose images run, through the official SDK (google-cloud-aiplatform,
unpatched) against the local Vertex endpoint on a real local cluster, with a real podman and
the tests' own image (tests/containers/image.py: built here, no registry).

Each test fails on the endpoint that never ran an image: it refused ``command: []`` (the
image's entrypoint), and ran from_local_script's ``pip install --upgrade pip && pip3 install
--user ...`` on the node with the kernel's venv first on PATH."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc._process import run
from tests.conftest import no_egress, sleep_until
from tests.containers.image import BASE, TRAINER, base_image, trainer_image, tuner_image

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(shutil.which("podman") is None or shutil.which("mmdebstrap") is None,
                                 reason="podman and mmdebstrap are not installed (scripts/install-system-deps.sh)")]


def machine(gpus: int = 8) -> dict:
    return {"machine_type": "a3-highgpu-8g", "accelerator_type": "NVIDIA_H100_80GB", "accelerator_count": gpus}


@pytest.fixture(scope="module")
def images():
    return trainer_image(), base_image()


@pytest.fixture(scope="module")
def endpoint(slurm_available, images):
    from tests.conftest import small_gpu_spec

    cluster = api.create_cluster(small_gpu_spec("ctr", nodes=2))
    endpoint = api.start_vertex_endpoint(cluster.name)
    yield endpoint
    api.delete_cluster(cluster.name)


@pytest.fixture
def aiplatform(endpoint, monkeypatch):
    """The SDK as a user points it at the endpoint, every other way out of the machine closed."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    no_egress(monkeypatch)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.storage_host)
    aiplatform.init(project="local-project", location="us-central1", staging_bucket="gs://local-bucket",
                    api_endpoint=endpoint.api_endpoint, api_transport="rest", credentials=AnonymousCredentials())
    return aiplatform


def venv_state() -> dict:
    """The kernel's venv as a job could change it: pip's version, `pip freeze`, and every file of
    its site-packages with its size and content hash."""
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    files = {}
    for path in sorted(site.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[str(path.relative_to(site))] = hashlib.sha256(path.read_bytes()).hexdigest()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    return {"pip": run([*pip, "--version"]).stdout, "freeze": run([*pip, "freeze"]).stdout,
            "bin": sorted(os.listdir(Path(sys.prefix) / "bin")), "files": files}


def test_a_google_container_sample_runs_the_images_entrypoint(aiplatform):
    # As Google's samples send it (python-aiplatform samples: "command": [], the image's own
    # ENTRYPOINT runs, "args" replace its CMD), here with a worker pool too: one container a node.
    def pool(greeting: str) -> dict:
        return {"machine_spec": machine(), "replica_count": 1,
                "container_spec": {"image_uri": TRAINER, "command": [], "args": ["--epochs", "3"],
                                   "env": [{"name": "GREETING", "value": greeting}]}}

    job = aiplatform.CustomJob(display_name="entrypoint", worker_pool_specs=[pool("chief"), pool("worker")])
    job.run()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    log = api.get_job("entrypoint", "ctr").logs()
    assert f"jupyter_gtc: image {TRAINER} runs in podman" in log
    reports = sorted((json.loads(line) for line in log.splitlines() if line.startswith("{")),
                     key=lambda r: r["greeting"])
    assert [(r["greeting"], r["argv"], r["in_container"]) for r in reports] == [
        ("chief", ["--epochs", "3"], True), ("worker", ["--epochs", "3"], True)]
    chief, worker = (r["cluster_spec"] for r in reports)
    assert chief["cluster"] == {"workerpool0": ["gpu-0:2222"], "workerpool1": ["gpu-1:2222"]}
    assert (chief["task"], worker["task"]) == ({"type": "workerpool0", "index": 0}, {"type": "workerpool1", "index": 0})
    # The model went where AIP_MODEL_DIR says, through /gcs: a file of the local bucket.
    model_dir = job.job_spec.base_output_directory.output_uri_prefix.removeprefix("gs://").rstrip("/")
    from jupyter_gtc.state import default_home

    assert (default_home() / "gcs" / model_dir / "model" / "model.txt").read_text() == "trained in a container\n"


def test_googles_tuning_sample_runs_each_trial_in_its_image(aiplatform):
    # python-aiplatform's samples/model-builder/create_hyperparameter_tuning_job_sample.py, its
    # request as the sample sends it: container_spec with "command": [] and "args": [] (the image's
    # ENTRYPOINT takes each trial's flags, which replace its CMD), the four kinds of parameter, a
    # metric to minimize, labels. Changed: this cluster's machine (the sample's n1-standard-4 with
    # a K80), and counts a 2-node cluster runs in a test (128 trials, 8 at once, in the sample).
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    container_uri = tuner_image()
    worker_pool_specs = [{"machine_spec": machine(), "replica_count": 1,
                          "container_spec": {"image_uri": container_uri, "command": [], "args": []}}]
    custom_job = aiplatform.CustomJob(display_name="custom_job", worker_pool_specs=worker_pool_specs)
    hpt_job = aiplatform.HyperparameterTuningJob(
        display_name="tuning-sample", custom_job=custom_job, metric_spec={"loss": "minimize"},
        parameter_spec={"lr": hpt.DoubleParameterSpec(min=0.001, max=0.1, scale="log"),
                        "units": hpt.IntegerParameterSpec(min=4, max=128, scale="linear"),
                        "activation": hpt.CategoricalParameterSpec(values=["relu", "selu"]),
                        "batch_size": hpt.DiscreteParameterSpec(values=[128, 256], scale="linear")},
        max_trial_count=2, parallel_trial_count=2, labels={"my_key": "my_value"})
    hpt_job.run()
    assert hpt_job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    trials = hpt_job.trials
    assert len(trials) == 2 and {t.state.name for t in trials} == {"SUCCEEDED"}, trials
    study = api.get_study(f"hpt-{hpt_job.resource_name.rsplit('/', 1)[1]}")
    logs = {t.trial_id: api.get_job(t.job_id, "ctr").logs() for t in study.snapshot().trials}
    for trial in trials:
        p = {param.parameter_id: param.value for param in trial.parameters}
        expected = abs(math.log10(p["lr"]) + 2) + p["units"] / 1000 + (p["activation"] == "selu") \
            + p["batch_size"] / 10000
        (loss,) = [m.value for m in trial.final_measurement.metrics if m.metric_id == "loss"]
        assert abs(loss - expected) < 1e-9, (p, loss)
        [report] = [json.loads(line[len("TUNER "):]) for line in logs[trial.id].splitlines()
                    if line.startswith("TUNER ")]
        # The image's own program (its ENTRYPOINT) and python3, given the trial's flags and not its CMD.
        assert report["in_container"] and report["python"] == "/usr/bin/python3", logs[trial.id]
        assert sorted(word.split("=")[0] for word in report["argv"]) == [
            "--activation", "--batch_size", "--lr", "--units"], report


def test_cancelling_a_job_in_a_container_leaves_no_container_running(aiplatform):
    job = aiplatform.CustomJob(display_name="cancelled", worker_pool_specs=[{
        "machine_spec": machine(), "replica_count": 1,
        "container_spec": {"image_uri": BASE, "command": ["python3", "-c", "import time; print('the container is up', flush=True); "
                                                                          "time.sleep(600)"]}}])
    job.submit()
    ours = api.get_job("cancelled", "ctr")
    assert sleep_until(lambda: "the container is up" in ours.logs(), timeout=120), ours.logs()
    name = f"gtc-ctr-{ours.id}-0"
    running = lambda: run(["podman", "ps", "--all", "--format", "{{.Names}}"]).stdout.split()  # noqa: E731
    assert name in running(), ours.logs()
    job.cancel()
    ours.wait(timeout=120)
    assert sleep_until(lambda: name not in running(), timeout=60), f"{name} is still there: {running()}"


def test_from_local_script_in_a_custom_image_installs_in_the_container_not_the_kernels_venv(aiplatform, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys, site\nprint('trained by', sys.executable, 'from', __file__)\n")
    before = venv_state()
    job = aiplatform.CustomJob.from_local_script(
        display_name="custom-image-script", script_path=str(script), container_uri=BASE,
        args=["--lr", "0.1"], replica_count=1, machine_type="a3-highgpu-8g")
    command = job.job_spec.worker_pool_specs[0].container_spec.command
    assert "pip install --upgrade pip" in " ".join(command)  # what the SDK sends for a custom image
    job.run()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    log = api.get_job("custom-image-script", "ctr").logs()
    assert "trained by /usr/bin/python3 from /root/.local/lib/python3.11/site-packages/" in log, log
    assert venv_state() == before


def test_an_image_that_cannot_be_had_is_refused_naming_it_and_what_was_tried(aiplatform):
    from google.api_core import exceptions

    image = "registry.invalid/nobody/trainer:1"
    job = aiplatform.CustomJob(display_name="no-image", worker_pool_specs=[{
        "machine_spec": machine(), "replica_count": 1,
        "container_spec": {"image_uri": image, "command": [], "args": []}}])
    with pytest.raises(exceptions.BadRequest) as info:
        job.run()
    message = str(info.value)
    assert f"image {image} cannot be had here" in message and f"podman pull {image}" in message, message
    assert "podman load" in message  # how to give an image of one's own with no registry
