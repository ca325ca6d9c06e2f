"""Where a job of an attached cluster runs (issue 25): in the folder it was submitted from where
the login node has it, else in its job folder, which the submit says (the magic and `gtc job
submit` print the warning). The cluster and its login node are test_slurm_attach.py's: a
namespace cluster whose login node (a real sshd) sees the cluster's filestore at
/cluster/scratch, where this process sees a folder of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
import warnings
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import GtcWarning
from tests.backends.test_slurm_attach import SHARED, _attach_over_login, cluster_behind_login  # noqa: F401
from tests.test_magics import shell  # noqa: F401 - the IPython shell fixture, with jupyter_gtc loaded

pytestmark = pytest.mark.usefixtures("slurm_available")


def test_a_folder_the_login_node_lacks_runs_the_job_in_its_job_folder_and_the_submit_says_so(
        cluster_behind_login, shell, capsys, monkeypatch):
    cluster, login = cluster_behind_login
    _attach_over_login(cluster, login, "away")
    here = Path(SHARED) / f"notebook-{uuid.uuid4().hex[:8]}"  # here only: the login node has the filestore there
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    try:
        assert shell.run_cell("%%sbatch --cluster away --job-name where\npwd\n").success
        job = shell.user_ns["_"]
        said = (f"warning: job {job.id} runs in its job folder {job.job_dir}: the folder it was submitted from, "
                f"{here}, does not exist on the cluster ({login.alias}); to run it elsewhere, give --chdir=FOLDER "
                f"with a folder on the cluster\n")
        assert said in capsys.readouterr().err
        assert (job.wait(60).state, job.logs()) == ("COMPLETED", f"{job.job_dir}\n")

        (here / "where.sbatch").write_text("#!/bin/bash\npwd\n")
        cli = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "job", "submit", "where.sbatch",
                              "--cluster", "away", "--wait"], cwd=here, capture_output=True, text=True,
                             timeout=120, env=os.environ)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert cli.stderr.startswith("warning: job ") and f"the folder it was submitted from, {here}, does not " \
            f"exist on the cluster ({login.alias})" in cli.stderr, cli.stderr

        # A folder the login node has (the filestore's): the job runs there, and nothing is said.
        with warnings.catch_warnings():
            warnings.simplefilter("error", GtcWarning)
            there = api.submit_job("away", "pwd\n", submit_dir=f"{SHARED}/jobs").wait(60)
        assert (there.state, there.logs()) == ("COMPLETED", f"{SHARED}/jobs\n")
    finally:
        api.detach_cluster("away")
        shutil.rmtree(here, ignore_errors=True)


def test_a_study_created_in_a_folder_the_login_node_lacks_says_so_once_and_its_trials_run(
        cluster_behind_login, monkeypatch):
    from tests.tuning.conftest import short_spec

    cluster, login = cluster_behind_login
    _attach_over_login(cluster, login, "awaystudy")
    here = Path(SHARED) / f"notebook-{uuid.uuid4().hex[:8]}"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    try:
        with pytest.warns(GtcWarning) as said:
            study = api.create_study("awaystudy", short_spec("{x: {double: [0, 1]}}", trials=2), name="farstudy")
        assert [str(w.message) for w in said] == [
            f"the trials of study farstudy run in their job folders: the folder it was created from, {here}, does "
            f"not exist on the cluster ({login.alias}); to run them elsewhere, give local.submit_dir with a folder "
            f"on the cluster"]
        study.wait(timeout=300)
        assert (study.state, [t.state for t in study.snapshot().trials]) == ("SUCCEEDED", ["COMPLETE"] * 2)
        assert study.spec.local.submit_dir is None  # kept as where they ran: a resume does the same
    finally:
        api.detach_cluster("awaystudy")
        shutil.rmtree(here, ignore_errors=True)
