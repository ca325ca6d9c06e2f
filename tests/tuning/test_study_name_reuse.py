"""A new study under a name already taken: a finished study is said to be finished (its state
and when) and cannot be resumed, so the error names the next free name; one still running is
for resuming."""

from __future__ import annotations

import re

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import StudyExists
from tests.tuning.conftest import short_spec

pytestmark = pytest.mark.slurm


def test_a_finished_studys_name_gets_the_next_free_one(cluster):
    spec = short_spec("{x: {double: [0, 1]}}", trials=1, parallel=1)
    study = api.create_study(cluster, spec, name="reused")
    study.wait(timeout=120)
    assert study.state == "SUCCEEDED"
    api.create_study(cluster, spec, name="reused-2").wait(timeout=120)  # taken too: the next is -3
    with pytest.raises(StudyExists) as info:
        api.create_study(cluster, spec, name="reused")
    message = str(info.value)
    assert re.match(r"study 'reused' is finished: SUCCEEDED at \d{4}-\d\d-\d\d \d\d:\d\d", message), message
    assert "cannot be resumed" in message and "--name reused-3" in message, message
    assert "resume it" not in message


def test_a_running_studys_name_is_for_resuming(cluster):
    # A trial that waits for its study to be stopped: the study runs while the name is reused.
    spec = short_spec("{x: {double: [0, 1]}}", trials=1, parallel=1, extra="")
    spec["job"] = "#!/bin/bash\n#SBATCH --nodes=1 --cpus-per-task=1\nsleep 300\n: \"$@\"\n"
    study = api.create_study(cluster, spec, name="running")
    try:
        with pytest.raises(StudyExists) as info:
            api.create_study(cluster, spec, name="running")
        message = str(info.value)
        assert "exists and is RUNNING: resume it (gtc study resume running" in message, message
        assert "--name running-2" in message, message
    finally:
        study.stop()
