"""A CustomJob pool's container_spec where no container runtime runs images (``GTC_CONTAINERS=none``
stands for a machine without one, as CI's was before scripts/install-system-deps.sh installed
podman): its command runs on the nodes, saying so, and what must not run there is refused."""

from __future__ import annotations

import pytest
from google.cloud.aiplatform_v1 import types as vx

from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.services.vertex_containers import SWITCH, container_pool, runs_pip

IMAGE = "us-docker.pkg.dev/my-project/trainers/train:1"
FROM_LOCAL_SCRIPT = ["sh", "-c", "pip install --upgrade pip && pip3 install -q --user /gcs/b/pkg.tar.gz && "
                                 "python3 -m aiplatform_custom_trainer_script.task \"$@\"", "--"]


@pytest.fixture(autouse=True)
def no_runtime(monkeypatch):
    monkeypatch.setenv(SWITCH, "none")


def test_a_job_that_needs_the_images_entrypoint_is_refused_with_what_to_install():
    with pytest.raises(SpecError) as info:
        container_pool(vx.ContainerSpec(image_uri=IMAGE, command=[], args=["--epochs", "3"]), 1, "pool")
    assert info.value.field == "pool.container_spec.command"
    assert f"image {IMAGE}'s entrypoint" in str(info.value) and SWITCH in str(info.value)


def test_a_command_that_runs_pip_never_runs_against_the_kernels_environment():
    with pytest.raises(SpecError) as info:
        container_pool(vx.ContainerSpec(image_uri=IMAGE, command=FROM_LOCAL_SCRIPT), 1, "pool")
    assert "pip" in str(info.value) and "no job may change" in str(info.value)


def test_any_other_command_runs_on_the_nodes_saying_the_image_is_not_run():
    pool = container_pool(vx.ContainerSpec(image_uri=IMAGE, command=["python3", "-c", "print(1)"]), 1, "pool")
    assert pool["argv"] == ["python3", "-c", "print(1)"] and "container" not in pool
    assert pool["note"].startswith(f"jupyter_gtc: image {IMAGE} is not run")


@pytest.mark.parametrize("argv, runs", [
    (FROM_LOCAL_SCRIPT, True), (["python3", "-m", "pip", "install", "x"], True), (["/usr/bin/pip3.11", "list"], True),
    (["python3", "-m", "trainer.task", "--pipeline", "pip-free"], False), (["sh", "-c", "echo pipe"], False),
    (["bash", "-c", "set -o pipefail; python3 -m trainer"], False)])
def test_pip_is_recognised_in_each_form(argv, runs):
    assert runs_pip(argv) is runs
