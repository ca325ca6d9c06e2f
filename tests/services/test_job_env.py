"""What a job gets from the kernel that submits it, and what is refused before sbatch, on a
real local cluster: the submitting interpreter's environment first on the job's PATH (or
another, or none), GPUs per node beyond the partition's machine type, a misspelt option."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gtc import api, cli
from jupyter_gtc.exceptions import JobSubmitError, SpecError
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm

# What the batch script and its task see: which python and torchrun, and the venv.
WHICH = """#!/bin/bash
echo "python=$(command -v python)"
echo "torchrun=$(command -v torchrun)"
echo "VIRTUAL_ENV=${VIRTUAL_ENV:-}"
srun python -c 'import sys; print("prefix=" + sys.prefix)'
echo "variables=$(compgen -e | tr '\\n' ' ')"
"""
VENV = Path(sys.prefix)


@pytest.fixture(scope="module")
def env_cluster(slurm_available):
    cluster = api.create_cluster(small_gpu_spec("jobenv", nodes=1))
    yield cluster.name
    api.delete_cluster(cluster.name)


@pytest.fixture
def kernel_without_venv_on_path(monkeypatch):
    """A kernel started as Jupyter starts one: ``.venv/bin/python -m ipykernel``, with the
    venv's bin folder nowhere on PATH and no VIRTUAL_ENV."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a venv")
    path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != VENV / "bin"]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("GTC_JOB_PYTHON_ENV", raising=False)


def seen(job) -> dict[str, str]:
    job.wait(timeout=90)
    assert job.state == "COMPLETED", job.logs()
    return dict(line.split("=", 1) for line in job.logs().splitlines())


def test_a_job_runs_the_submitting_interpreters_environment(env_cluster, kernel_without_venv_on_path):
    default = api.submit_job(env_cluster, WHICH, ["-J", "default-env"])
    plain = api.submit_job(env_cluster, WHICH, ["-J", "no-env"], python_env="none")
    got = seen(default)
    assert (got["python"], got["torchrun"]) == (f"{VENV}/bin/python", f"{VENV}/bin/torchrun")
    assert got["VIRTUAL_ENV"] == str(VENV) and got["prefix"] == str(VENV)  # srun's task too
    assert default.python_env == VENV and api.get_job(default.id, env_cluster).python_env == VENV

    without = seen(plain)
    assert without["python"] != f"{VENV}/bin/python" and without["prefix"] != str(VENV)
    assert without["VIRTUAL_ENV"] == "" and plain.python_env is None
    # Nothing of the kernel's beyond what sbatch exports anyway: one variable more, PATH changed.
    assert set(got["variables"].split()) - set(without["variables"].split()) == {"VIRTUAL_ENV"}
    assert set(without["variables"].split()) <= set(got["variables"].split())


@pytest.fixture(scope="module")
def other_env(tmp_path_factory) -> Path:
    """A second venv, at a path a shell would mangle."""
    env = tmp_path_factory.mktemp("envs") / "it's $(id) env"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    return env


def test_another_environment_by_option_by_its_python_and_by_variable(env_cluster, kernel_without_venv_on_path,
                                                                     other_env, monkeypatch):
    by_folder = api.submit_job(env_cluster, WHICH, ["-J", "other-env"], python_env=other_env)
    by_python = api.submit_job(env_cluster, WHICH, ["-J", "other-python"], python_env=f"{other_env}/bin/python")
    monkeypatch.setenv("GTC_JOB_PYTHON_ENV", str(other_env))
    by_variable = api.submit_job(env_cluster, WHICH, ["-J", "variable-env"])
    option_wins = api.submit_job(env_cluster, WHICH, ["-J", "none-wins"], python_env="none")
    for job in (by_folder, by_python, by_variable):
        got = seen(job)
        assert (got["python"], got["prefix"], got["VIRTUAL_ENV"]) == (f"{other_env}/bin/python", str(other_env),
                                                                       str(other_env)), job.name
        assert got["torchrun"] == ""  # the kernel's torch is not in that environment
        assert job.python_env == other_env
    assert seen(option_wins)["VIRTUAL_ENV"] == "" and option_wins.python_env is None


def test_a_folder_that_is_no_python_environment_is_refused_naming_the_option(env_cluster, tmp_path, monkeypatch,
                                                                            capsys):
    folders = set((Path(os.environ["GTC_HOME"]) / "jobs" / env_cluster).glob("*"))
    with pytest.raises(SpecError) as info:
        api.submit_job(env_cluster, "true", python_env=tmp_path)
    assert str(info.value).startswith(f"python_env: {str(tmp_path)!r} is not valid; a Python environment: a venv "
                                      "or conda folder with bin/python")
    assert "'none'" in str(info.value)
    monkeypatch.setenv("GTC_JOB_PYTHON_ENV", str(tmp_path / "missing"))
    with pytest.raises(SpecError) as info:
        api.submit_job(env_cluster, "true")
    assert (info.value.field, info.value.value) == ("GTC_JOB_PYTHON_ENV", str(tmp_path / "missing"))

    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\ntrue\n")
    assert cli.main(["job", "submit", str(script), "--cluster", env_cluster, "--python-env", "/usr/share"]) == 1
    assert capsys.readouterr().err.startswith("error: --python-env: '/usr/share' is not valid; a Python environment")
    assert set((Path(os.environ["GTC_HOME"]) / "jobs" / env_cluster).glob("*")) == folders  # nothing submitted


ASKS_TOO_MANY = "partition train has a3-highgpu-8g nodes with 8 GPUs; "


@pytest.mark.parametrize(("options", "script", "message"), [
    (["--gpus-per-node=9"], "true", "--gpus-per-node=9 asks for 9"),
    (["--gpus-per-node", "9"], "true", "--gpus-per-node=9 asks for 9"),
    ([], "#!/bin/bash\n#SBATCH --gpus-per-node 9\ntrue\n", "--gpus-per-node=9 asks for 9"),
    (["--gres=gpu:h100:12"], "true", "--gres=gpu:h100:12 asks for 12"),
    (["--gres", "gpu:9"], "true", "--gres=gpu:9 asks for 9"),
    (["-G", "18", "-N", "2"], "true", "--gpus=18 on --nodes=2 asks for 9 per node"),
    (["--partition=train", "--gpus=9", "--nodes=1"], "true", "--gpus=9 on --nodes=1 asks for 9 per node"),
])
def test_more_gpus_per_node_than_the_machine_type_has_is_refused_before_sbatch(env_cluster, options, script, message):
    folders = set((Path(os.environ["GTC_HOME"]) / "jobs" / env_cluster).glob("*"))
    with pytest.raises(SpecError) as info:
        api.submit_job(env_cluster, script, ["-J", "too-many", *options])
    assert str(info.value).endswith(ASKS_TOO_MANY + message)
    assert set((Path(os.environ["GTC_HOME"]) / "jobs" / env_cluster).glob("*")) == folders


def test_gpus_that_fit_run_and_those_slurm_must_judge_get_its_answer(env_cluster):
    job = api.submit_job(env_cluster, "#!/bin/bash\necho $CUDA_VISIBLE_DEVICES\n", ["--gpus-per-node=8"])
    assert job.wait(timeout=60).state == "COMPLETED" and job.logs() == "0,1,2,3,4,5,6,7\n"
    with pytest.raises(JobSubmitError, match="Requested node configuration is not available"):
        api.submit_job(env_cluster, "true", ["--gpus=9"])  # on how many nodes is Slurm's choice


@pytest.mark.parametrize(("options", "script", "refused"), [
    (["--gpu-per-node=2"], "true", "unrecognized option '--gpu-per-node=2'; did you mean --gpus-per-node?"),
    (["--job_name", "x"], "true", "unrecognized option '--job_name'; did you mean --job-name?"),
    ([], "#!/bin/bash\n#SBATCH --gpu-per-node=2\ntrue\n",
     "unrecognized option '--gpu-per-node=2'; did you mean --gpus-per-node?"),
])
def test_a_misspelt_option_gets_sbatchs_text_and_a_guess(env_cluster, options, script, refused):
    with pytest.raises(JobSubmitError) as info:
        api.submit_job(env_cluster, script, options)
    assert str(info.value).startswith(f"sbatch refused the job: sbatch: {refused}")


def test_the_servers_own_tokens_never_reach_a_job(env_cluster, monkeypatch):
    """sbatch gives a job the environment it starts with: a job submitted from the sidebar (the
    Jupyter server's process) carried JUPYTERHUB_API_TOKEN, which Slurm also keeps with the job.
    A variable the user sets for their jobs (HF_TOKEN here) still reaches them."""
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hub-secret")
    monkeypatch.setenv("JUPYTER_TOKEN", "server-secret")
    monkeypatch.setenv("HF_TOKEN", "the-users-own")
    job = api.submit_job(env_cluster, "#!/bin/bash\nenv\n").wait(60)
    seen = dict(line.split("=", 1) for line in job.logs().splitlines() if "=" in line)
    assert "JUPYTERHUB_API_TOKEN" not in seen and "JUPYTER_TOKEN" not in seen
    assert seen.get("HF_TOKEN") == "the-users-own"
    assert "hub-secret" not in job.logs() and "server-secret" not in job.logs()
