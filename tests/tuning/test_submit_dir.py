"""A study's trials run where the study was created (issue 25), as a job runs where it is
submitted: the folder is kept with the study (its spec's ``local.submit_dir``), so a driver in
another process (a resume) submits them from there too."""

from __future__ import annotations

import shutil
import sys

from jupyter_gtc import api
from tests.tuning.conftest import OBJECTIVE, short_spec


def test_a_studys_trials_run_the_script_beside_where_it_was_created(cluster, tmp_path, monkeypatch):
    shutil.copy(OBJECTIVE, tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    script = f'#!/bin/bash\n#SBATCH --nodes=1 --cpus-per-task=1\n{sys.executable} train.py "$@"\n'
    study = api.create_study(cluster, short_spec("{x: {double: [0, 1]}}", trials=2, script=script), name="beside")
    study.wait(timeout=300)
    trials = study.snapshot().trials
    assert (study.state, [t.state for t in trials]) == ("SUCCEEDED", ["COMPLETE"] * 2), \
        [api.get_job(t.job_id, cluster).logs() for t in trials if t.job_id]
    assert api.get_study("beside").spec.local.submit_dir == str(tmp_path)  # what a resuming driver reads
