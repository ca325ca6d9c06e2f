"""The `gtc` command as a user runs it: a separate process, its output and exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import sleep_until, small_gpu_spec


def gtc(*argv: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", *argv], capture_output=True, text=True,
                          timeout=120, check=check, env=os.environ)


def test_a_bad_spec_prints_each_problem_and_exits_1(tmp_path):
    data = small_gpu_spec("Demo", machine="a3-highgpu-9g")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = gtc("cluster", "create", "-f", str(path))
    assert result.returncode == 1
    assert result.stderr.startswith("error: 2 problem(s) in the cluster spec:")
    assert "display_name: 'Demo' is not valid" in result.stderr
    assert "node_pools[0].machine_spec.machine_type: 'a3-highgpu-9g'" in result.stderr
    assert "Traceback" not in result.stderr
    assert "Demo" not in gtc("cluster", "list").stdout


def test_a_missing_file_is_named():
    result = gtc("cluster", "create", "-f", "no/such/spec.yaml")
    assert result.returncode == 1 and "no/such/spec.yaml" in result.stderr and "could not be read" in result.stderr


def test_describe_of_an_unknown_cluster():
    result = gtc("cluster", "describe", "ghost")
    assert result.returncode == 1 and "no cluster named 'ghost'" in result.stderr


def test_usage_errors_exit_2():
    result = gtc("cluster", "scale", "x", "--pool", "gpu", "--nodes", "many")
    assert result.returncode == 2 and "invalid int value" in result.stderr


def test_doctor_reports_every_check():
    result = gtc("doctor")
    for program in ("munged", "slurmctld", "slurmd", "tini", "state store"):
        assert program in result.stdout
    assert result.returncode == (0 if "MISSING" not in result.stdout else 1)


@pytest.mark.slurm
def test_cluster_lifecycle_from_the_command_line(tmp_path, slurm_available):
    path = tmp_path / "spec.yaml"
    import yaml

    path.write_text(yaml.safe_dump(small_gpu_spec("clitest", nodes=2)))
    created = gtc("cluster", "create", "-f", str(path))
    assert created.returncode == 0, created.stderr
    assert "starting slurmd 2/2: gpu-1" in created.stderr and "cluster clitest is up" in created.stderr
    assert "gpu-0" in created.stdout and "idle" in created.stdout

    listed = gtc("cluster", "list").stdout.splitlines()
    row = next(line.split() for line in listed if line.split()[:1] == ["clitest"])
    assert row[1:5] == ["local", "RUNNING", "2/2", "16"]

    env = gtc("cluster", "env", "clitest").stdout
    assert env.startswith("export SLURM_CONF=") and "clitest/etc/slurm.conf" in env

    scaled = gtc("cluster", "scale", "clitest", "--pool", "gpu", "--nodes", "3")
    assert scaled.returncode == 0, scaled.stderr
    assert "gpu-2" in scaled.stdout
    described = json.loads(gtc("cluster", "describe", "clitest", "--json").stdout)
    assert [n["name"] for n in described["nodes"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert described["spec"]["node_pools"][0]["scaling_spec"] == {"min_node_count": 3, "max_node_count": 3}

    deleted = gtc("cluster", "delete", "clitest")
    assert deleted.returncode == 0 and "cluster clitest deleted" in deleted.stdout
    assert "clitest" not in gtc("cluster", "list").stdout


@pytest.mark.slurm
def test_job_verbs(tmp_path, slurm_available):
    from jupyter_gtc import api

    api.create_cluster(small_gpu_spec("clijobs", nodes=2))
    try:
        script = tmp_path / "two.sbatch"
        script.write_text("#!/bin/bash\n#SBATCH --nodes=1\nsrun printenv SLURMD_NODENAME\n")
        submitted = gtc("job", "submit", "--wait", str(script), "--nodes", "2", "--job-name", "two")
        assert submitted.returncode == 0, submitted.stderr
        assert "submitted job" in submitted.stdout and "COMPLETED (exit code 0)" in submitted.stdout
        assert sorted(submitted.stdout.split("\n", 1)[1].split()[:2]) == ["gpu-0", "gpu-1"]

        listed = gtc("job", "list", "--json")
        [job] = json.loads(listed.stdout)
        assert (job["name"], job["state"], job["exit_code"], job["cluster"]) == ("two", "COMPLETED", 0, "clijobs")
        assert sorted(gtc("job", "logs", "two").stdout.split()) == ["gpu-0", "gpu-1"]

        # An array's output task by task, in task order (10 after 9), each under its task id.
        array = tmp_path / "array.sbatch"
        array.write_text('#!/bin/bash\necho "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID"\n')
        ran = gtc("job", "submit", "--wait", str(array), "--array=10,2,9", "--job-name", "arr")
        assert ran.returncode == 0, ran.stderr
        first, body = ran.stdout.split("\n", 1)
        array_id = first.split()[2]
        assert body == "".join(f"==> task {t}: COMPLETED (exit code 0) <==\ntask {t} of {array_id}\n"
                               for t in (2, 9, 10)) + f"job {array_id} COMPLETED (exit code 0)\n"
        # Tasks that share one file (an --output without %a): the file once, under all of them.
        shared = tmp_path / "shared.out"
        ran = gtc("job", "submit", "--wait", str(array), "--array=0-1", f"--output={shared}", "--job-name", "arr")
        assert ran.returncode == 0, ran.stderr
        lines = ran.stdout.splitlines()[1:]
        assert lines[0] == "==> tasks 0: COMPLETED (exit code 0), 1: COMPLETED (exit code 0) <==", ran.stdout
        assert sorted(lines[1:3]) == [f"task {t} of {lines[-1].split()[1]}" for t in (0, 1)], ran.stdout

        sleeper = tmp_path / "sleep.sbatch"
        sleeper.write_text("#!/bin/bash\necho started\nsleep 300\n")
        out = gtc("job", "submit", str(sleeper), "--job-name=sleeper").stdout
        job_id = out.split()[2]
        follow = subprocess.Popen([sys.executable, "-m", "jupyter_gtc.cli", "job", "logs", "-f", job_id],
                                  stdout=subprocess.PIPE, text=True, env=os.environ)
        api.get_job(job_id).wait_until_running(timeout=30)
        # RUNNING means allocated: cancel once the script has started (its TaskProlog is done).
        assert sleep_until(lambda: "started" in api.get_job(job_id).logs(), 60)
        assert gtc("job", "cancel", "sleeper").returncode == 0
        out, _ = follow.communicate(timeout=60)  # -f returns once the job has ended
        assert out.startswith("started")
        assert api.get_job(job_id).wait(timeout=30).state == "CANCELLED"
        # At 80 columns the name and the state stay whole (they were `longtr…` and `CANCEL…`).
        long_name = "longtraining-run-llama"
        long_id = gtc("job", "submit", str(sleeper), f"--job-name={long_name}").stdout.split()[2]
        api.get_job(long_id).wait_until_running(timeout=30)
        assert gtc("job", "cancel", long_id).returncode == 0
        api.get_job(long_id).wait(timeout=30)
        narrow = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "job", "list"], capture_output=True,
                                text=True, timeout=120, env={**os.environ, "COLUMNS": "80"}).stdout
        row = next(line for line in narrow.splitlines() if line.split()[:1] == [long_id])
        assert row.split()[1:3] == [long_name, "CANCELLED"], narrow
        assert all(len(line) <= 80 for line in narrow.splitlines()), narrow

        hostile = tmp_path / "it's $(id) a job.sbatch"
        hostile.write_text("#!/bin/bash\necho from a hostile path\n")
        ran = gtc("job", "submit", str(hostile), "--wait", "--job-name", "a'; echo x")
        assert ran.returncode == 0 and "from a hostile path" in ran.stdout

        bad = gtc("job", "submit", str(script), "--cluster", "clijobs", "--gpus-per-node=99")
        assert bad.returncode == 1 and "a3-highgpu-8g nodes with 8 GPUs; --gpus-per-node=99 asks for 99" in bad.stderr
    finally:
        api.delete_cluster("clijobs")


def test_recipes_are_listed_and_show_the_script_they_submit():
    listed = gtc("recipe", "list", check=True).stdout
    for name in ("llama-pretrain", "gemma-pretrain", "continued-pretrain", "sft", "grpo", "dpo"):
        assert name in listed
    shown = gtc("recipe", "show", "llama-pretrain", "--config", "8b", check=True).stdout
    assert "#SBATCH --nodes=4" in shown and "--nproc-per-node=8" in shown and "# program flags: --model llama --size 8b" in shown
    result = gtc("recipe", "run", "llama-3", "--cluster", "any")
    assert result.returncode == 1 and "recipe: 'llama-3' is not valid; one of llama-pretrain" in result.stderr
