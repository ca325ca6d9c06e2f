"""A failed trial says why, as its job's log does (the first error line, not only "ended
FAILED"), and a study that failed trials stopped says what happened and the first cause."""

from __future__ import annotations

import shlex
import sys

from jupyter_gtc import api
from tests.tuning.conftest import short_spec

BROKEN = f"#!/bin/bash\necho loading\n{shlex.quote(sys.executable)} -c 'import torchvision_not_installed' \"$@\"\n"


def test_a_failed_trial_says_its_first_error_line(cluster):
    spec = short_spec("{x: {double: [0, 1]}}", trials=4, parallel=1, extra="max_failed_trials: 2\n", script=BROKEN)
    study = api.create_study(cluster, spec, name="broken-import").wait(timeout=120)
    trials = study.snapshot().trials
    assert [t.state for t in trials] == ["FAIL", "FAIL"]
    cause = "FAILED (exit code 1): ModuleNotFoundError: No module named 'torchvision_not_installed'"
    assert [t.reason for t in trials] == [f"job {t.job_id} {cause}" for t in trials]
    assert study.state == "FAILED"
    assert study.reason == (f"stopped: 2 trials failed, reaching max_failed_trial_count=2; the first failure, "
                            f"trial 1: job {trials[0].job_id} {cause}")


def test_the_study_panel_shows_a_failed_trials_error_under_its_row(cluster):
    from jupyter_gtc.widgets.study_panel import StudyPanel

    panel = StudyPanel(api.get_study("broken-import"))
    table = panel.table_html.value
    assert table.count("gtc-trial-failure") == 2
    assert "ModuleNotFoundError: No module named &#x27;torchvision_not_installed&#x27;" in table
    assert "stopped: 2 trials failed" in panel.reason_html.value
    panel.close()
