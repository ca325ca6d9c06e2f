"""``Job.failure()`` on a real local cluster: one line that says why a job failed, read from
its log through the cluster's host; None for a job that did not fail."""

from __future__ import annotations

import sys

import pytest

from jupyter_gtc import api, cli
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def failing_cluster(slurm_available):
    cluster = api.create_cluster(small_gpu_spec("failing", nodes=2))
    yield cluster.name
    api.delete_cluster(cluster.name)


def test_a_failed_python_job_says_its_error(failing_cluster):
    script = f"#!/bin/bash\necho starting\n{sys.executable} -c 'import foo_not_installed'\n"
    job = api.submit_job(failing_cluster, script, ["-J", "nomodule"]).wait(timeout=60)
    assert job.failure() == "FAILED (exit code 1): ModuleNotFoundError: No module named 'foo_not_installed'"


def test_srun_of_a_missing_command(failing_cluster):
    job = api.submit_job(failing_cluster, "#!/bin/bash\nsrun --nodes=2 no_such_program_x\n",
                         ["--nodes=2", "-J", "missing"]).wait(timeout=60)
    assert job.failure().startswith("FAILED (exit code 2): slurmstepd-gpu-")
    assert job.failure().endswith("error: execve(): no_such_program_x: No such file or directory")


def test_a_job_whose_log_is_gone_says_so(failing_cluster):
    job = api.submit_job(failing_cluster, "#!/bin/bash\nexit 127\n", ["-J", "gone"]).wait(timeout=60)
    job.log_path.unlink()
    assert job.failure() == (f"FAILED (exit code 127: a command was not found); its log does not exist: "
                             f"{job.job_dir}/slurm-{job.id}.out")


def test_a_job_that_did_not_fail_has_none(failing_cluster):
    job = api.submit_job(failing_cluster, "#!/bin/bash\necho fine\n", ["-J", "fine"]).wait(timeout=60)
    assert job.state == "COMPLETED" and job.failure() is None
    running = api.submit_job(failing_cluster, "#!/bin/bash\nsleep 60\n", ["-J", "running"]).wait_until_running(60)
    assert running.failure() is None
    running.cancel()


def gtc_logs(capsys, job) -> tuple[int, str, str]:
    code = cli.main(["job", "logs", job.id, "--cluster", job.cluster])
    out, err = capsys.readouterr()
    return code, out, err


def test_gtc_job_logs_of_a_job_without_a_log_says_why_and_fails(failing_cluster, capsys):
    removed = api.submit_job(failing_cluster, "#!/bin/bash\necho gone\n", ["-J", "removed"]).wait(timeout=60)
    assert gtc_logs(capsys, removed) == (0, "gone\n", "")
    removed.log_path.unlink()
    assert gtc_logs(capsys, removed) == (1, "", f"error: job {removed.id} (removed) has no log at {removed.log_path}: "
                                                "it was removed, or the job's --output names a folder its node "
                                                "could not write\n")
    held = api.submit_job(failing_cluster, "#!/bin/bash\necho never\n", ["-J", "held", "--hold"])
    code, out, err = gtc_logs(capsys, held)
    assert (code, out) == (1, "") and err == (f"error: job {held.id} (held) has no log yet: it has not started "
                                              f"(PENDING); it will write {held.job_dir}/slurm-{held.id}.out\n")
    held.cancel().wait(timeout=60)
    code, out, err = gtc_logs(capsys, held)
    assert (code, out) == (1, "") and "has no log: it ended CANCELLED before it started" in err
    # cancelled while it waited: not a failure with a cause (the sidebar showed a red "its log does not exist")
    assert held.failure() is None


def test_gtc_job_submit_wait_of_a_failed_job_ends_with_the_line_that_says_why(failing_cluster, capsys, tmp_path):
    """`--wait` printed the whole log, then only "error: job 4 ended FAILED": the cause, under
    a traceback's frames, was for the user to find."""
    script = tmp_path / "bad.sbatch"
    script.write_text("#!/bin/bash\npython3 -c 'import nomodule_xyz'\n")
    code = cli.main(["job", "submit", str(script), "--cluster", failing_cluster, "--wait"])
    out, err = capsys.readouterr()
    assert code == 1 and err.endswith("FAILED (exit code 1): ModuleNotFoundError: No module named 'nomodule_xyz'\n"), err
