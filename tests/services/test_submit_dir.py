"""Where a job runs (issue 25): in the folder it was submitted from (the api caller's, `gtc`'s
working directory), as sbatch runs one, unless the user's own --chdir/-D (options or #SBATCH
lines) chooses; where this machine lacks that folder, in its job folder, with a warning. Its
outputs go to its job folder either way."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import GtcWarning
from tests.conftest import sleep_until

# Reads a file by its relative name: where the job runs decides what it finds.
READS = '#!/bin/bash\necho "ran in $(pwd)"\ncat data.txt\n'


def test_a_job_runs_where_the_api_caller_is_and_writes_its_outputs_to_its_folder(cluster3, tmp_path, monkeypatch):
    (tmp_path / "data.txt").write_text("beside the caller\n")
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GtcWarning)  # nothing to warn of: the folder is there
        job = api.submit_job(cluster3.name, READS + 'echo done > "$AIP_MODEL_DIR/out.txt"\n').wait(60)
    assert (job.state, job.logs()) == ("COMPLETED", f"ran in {tmp_path}\nbeside the caller\n")
    assert job.log_path == job.job_dir / f"slurm-{job.id}.out"
    assert (job.model_dir / "out.txt").read_text() == "done\n"
    assert os.listdir(tmp_path) == ["data.txt"]  # nothing of the job's beside it


def test_the_users_chdir_in_the_options_or_the_script_and_submit_dir_choose(cluster3, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.txt").write_text("in the chosen folder\n")
    monkeypatch.chdir(tmp_path)  # no data.txt here
    jobs = [api.submit_job(cluster3.name, READS, ["-D", str(other)]),
            api.submit_job(cluster3.name, READS.replace("\n", f"\n#SBATCH --chdir={other}\n", 1)),
            api.submit_job(cluster3.name, READS, submit_dir="other")]  # relative to this process's folder
    for job in jobs:
        job.wait(60)
        assert (job.state, job.logs()) == ("COMPLETED", f"ran in {other}\nin the chosen folder\n"), job.logs()


def test_a_folder_the_cluster_lacks_runs_the_job_in_its_job_folder_and_says_so(cluster3, tmp_path):
    gone = tmp_path / "gone"
    with pytest.warns(GtcWarning) as said:
        job = api.submit_job(cluster3.name, "pwd\n", submit_dir=gone)
    assert [str(w.message) for w in said] == [
        f"job {job.id} runs in its job folder {job.job_dir}: the folder it was submitted from, {gone}, does not "
        f"exist on the cluster (localhost); to run it elsewhere, give --chdir=FOLDER with a folder on the cluster"]
    job.wait(60)
    assert (job.state, job.logs()) == ("COMPLETED", f"{job.job_dir}\n")


def test_a_caller_whose_folder_was_deleted_gets_its_job_run_in_its_job_folder(cluster3, tmp_path, monkeypatch):
    """A notebook that removed its own temporary folder: os.getcwd() raises, and submitting
    failed with a bare FileNotFoundError naming no path."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.warns(GtcWarning, match=f"the folder it was submitted from, {gone} \\(deleted\\), does not exist"):
        job = api.submit_job(cluster3.name, "pwd\n")
    job.wait(60)
    assert (job.state, job.logs()) == ("COMPLETED", f"{job.job_dir}\n")


def test_gtc_job_submit_runs_the_script_where_gtc_was_run(cluster3, tmp_path):
    (tmp_path / "data.txt").write_text("beside gtc\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "reads.sbatch").write_text(READS)
    result = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "job", "submit", "jobs/reads.sbatch",
                             "--cluster", cluster3.name, "--wait"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env=os.environ)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ran in {tmp_path}\nbeside gtc\n" in result.stdout and "warning" not in result.stderr


def test_a_submit_dir_that_is_a_file_runs_the_job_in_its_job_folder_saying_why(cluster3, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.warns(GtcWarning, match=f"{tmp_path}/file, is not a folder on the cluster"):
        job = api.submit_job(cluster3.name, "pwd\n", submit_dir=tmp_path / "file")
    assert job.wait(60).logs() == f"{job.job_dir}\n"


def test_a_requeued_job_runs_again_where_it_was_submitted_from(cluster3, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = ('#!/bin/bash\n#SBATCH --requeue\necho "run ${SLURM_RESTART_COUNT:-0} in $(pwd)"\n'
              '[ -n "$SLURM_RESTART_COUNT" ] || sleep 300\n')
    job = api.submit_job(cluster3.name, script).wait_until_running(60)
    assert sleep_until(lambda: "run 0" in job.logs(), 60), job.logs()
    monkeypatch.chdir("/")  # where this process is now does not matter: Slurm keeps the job's folder
    job.requeue()
    job.wait(240)
    runs = [line for line in job.logs().splitlines() if line.startswith("run ")]
    assert (job.state, runs) == ("COMPLETED", [f"run 0 in {tmp_path}", f"run 1 in {tmp_path}"]), job.logs()
