"""pyxis's flags read from a job's options and #SBATCH lines, and each task's own Slurm ids
as ``oci_task`` gives them to its container (Slurm 22.05 gave every container the first's)."""

from __future__ import annotations

import os

import pytest

from jupyter_gtc.containers import oci_task, pyxis
from jupyter_gtc.exceptions import SpecError


def test_flags_from_sbatch_lines_and_options_the_options_winning():
    script = pyxis.request(["--container-image", "a:1", "--nodes", "2", "--container-mounts=/d:/data:ro"],
                           ["--container-image=docker://b:2", "--container-env", "HF_TOKEN,WANDB_MODE"])
    assert script.image == "b:2" and [(m.source, m.target, m.read_only) for m in script.mounts] == [("/d", "/data", True)]
    assert script.env_names == ("HF_TOKEN", "WANDB_MODE")
    assert pyxis.request(["--nodes", "2"], []) is None


def test_a_relative_archive_is_the_submit_folders():
    assert pyxis.request([], ["--container-image", "./images/train.tar"], "/home/u/proj").image == \
        "/home/u/proj/images/train.tar"


@pytest.mark.parametrize("options, field", [
    (["--container-mounts", "data:/data"], "--container-mounts"),
    (["--container-image", "a", "--container-mounts", "relative:/data"], "--container-mounts"),
    (["--container-image", "a", "--container-workdir", "work"], "--container-workdir"),
    (["--container-image", "a", "--container-env", "NOT-A-NAME"], "--container-env"),
    (["--container-image"], "--container-image"),
])
def test_bad_flags_name_the_field(options, field):
    with pytest.raises(SpecError) as info:
        pyxis.request([], options)
    assert info.value.field == field


def test_the_scripts_container_lines_are_taken_out_and_nothing_else():
    script = ("#!/bin/bash\n#SBATCH --container-image=a:1\n#SBATCH --nodes 2 --container-mounts /d:/d # data\n"
              "#SBATCH --time 5\necho '#SBATCH --container-image x'\n")
    assert pyxis.strip_script(script) == ("#!/bin/bash\n#SBATCH --nodes 2 # data\n#SBATCH --time 5\n"
                                          "echo '#SBATCH --container-image x'\n")


def test_host_lists_and_tasks_per_node_as_slurm_writes_them():
    assert oci_task.expand_hostlist("gpu-[0-1,3],login-0,n[08-10]") == \
        ["gpu-0", "gpu-1", "gpu-3", "login-0", "n08", "n09", "n10"]
    assert oci_task.expand_counts("2(x2),1") == [2, 2, 1]
    assert oci_task.global_ids([2, 2, 1], "block") == [[0, 1], [2, 3], [4]]
    assert oci_task.global_ids([2, 2, 1], "cyclic:block") == [[0, 3], [1, 4], [2]]


def test_each_task_gets_its_own_ids_and_the_images_variables_win_but_those_named():
    image = ["PATH=/usr/bin", "PYTHONPATH=/opt/app", "LANG=C.UTF-8"]
    step = ["SLURM_STEP_NODELIST=gpu-[0-1]", "SLURM_STEP_TASKS_PER_NODE=1(x2)", "SLURM_PROCID=0",
            "SLURMD_NODENAME=gpu-0", "SLURM_NODEID=0", "PATH=/venv/bin:/usr/bin", "PYTHONPATH=/mine", "LANG=en"]
    env = dict(e.split("=", 1) for e in oci_task.task_env(image + step, "gpu-1", 0, image, ["PYTHONPATH"]))
    assert (env["SLURM_PROCID"], env["SLURMD_NODENAME"], env["SLURM_NODEID"], env["SLURM_LOCALID"]) == \
        ("1", "gpu-1", "1", "0")
    assert env["PATH"] == "/usr/bin" and env["LANG"] == "C.UTF-8" and env["PYTHONPATH"] == "/mine"


def _srun_on_path(tmp_path, monkeypatch, help_text: str) -> None:
    """An attached cluster's srun, reached as its host runs it (this machine, no SSH): pyxis is
    no Debian package, so its ``--help`` is what stands for it, at the wire."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!/bin/sh\ncat <<'EOF'\n{help_text}\nEOF\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def _attached_job_container(tmp_path, request):
    from jupyter_gtc.backends.base import JobLaunch
    from jupyter_gtc.backends.slurm import SlurmBackend
    from jupyter_gtc.spec.attach import parse_attach_spec

    backend = SlurmBackend(tmp_path)
    launch = JobLaunch("#!/bin/bash\n#SBATCH --container-image=a:1\nsrun true\n", {"X": "1"}, None)
    return launch, backend.job_container(parse_attach_spec({}, "site"), {}, request, launch,
                                         tmp_path / "job", str(tmp_path))


def test_an_attached_cluster_with_pyxis_gets_the_flags_unchanged(tmp_path, monkeypatch):
    _srun_on_path(tmp_path, monkeypatch, "Usage: srun [OPTIONS...] executable [args...]\n"
                                         "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n")
    launch, plan = _attached_job_container(tmp_path, pyxis.request(["--container-image=a:1"], []))
    assert plan.pass_through and plan.launch == launch


def test_an_attached_cluster_without_pyxis_refuses_naming_the_image_and_whom_to_ask(tmp_path, monkeypatch):
    from jupyter_gtc.containers.slurm_job import ContainerRefused

    _srun_on_path(tmp_path, monkeypatch, "Usage: srun [OPTIONS...] executable [args...]\n      --container=PATH\n")
    with pytest.raises(ContainerRefused) as info:
        _attached_job_container(tmp_path, pyxis.request(["--container-image=a:1"], []))
    assert "image a:1" in str(info.value) and "ask the cluster's admins for pyxis" in str(info.value)
