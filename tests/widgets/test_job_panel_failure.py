"""The job panel of a failed job says why, above its log: the first error line (a torchrun
worker's, which the log's tail, ending in torchrun's own traceback, leaves out), and goodput
says what it counts."""

from __future__ import annotations

import re
import sys

import pytest

from tests.conftest import sleep_until, small_gpu_spec

pytestmark = pytest.mark.slurm
CLUSTER = "failpanel"

WORKER = """import os
if os.environ["RANK"] == "1":
    raise ZeroDivisionError("rank 1 divided by zero")
import time
time.sleep(2)
"""


@pytest.fixture(scope="module")
def cluster(slurm_available):
    from jupyter_gtc import api

    api.create_cluster(small_gpu_spec(CLUSTER, nodes=1))
    yield CLUSTER
    api.delete_cluster(CLUSTER)


def test_a_failed_torchrun_job_shows_its_workers_error_not_torchruns(cluster, tmp_path):
    pytest.importorskip("torch")
    from jupyter_gtc import api
    from jupyter_gtc.widgets import JobPanel

    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    script = f"#!/bin/bash\nsrun '{sys.executable}' -m torch.distributed.run --nproc-per-node 2 '{worker}'\n"
    # In tmp_path: torchrun's failing step can leave a core of slurmstepd where the job runs.
    job = api.submit_job(cluster, script, ["--job-name", "ddp-fails", f"--chdir={tmp_path}"])
    panel = JobPanel(job, log_lines=10)
    assert sleep_until(lambda: not panel.following, 120), job.logs()
    assert job.state == "FAILED"
    assert panel.failure_html.layout.display != "none"
    assert "FAILED (exit code 1): ZeroDivisionError: rank 1 divided by zero" in panel.failure_html.value
    # What the tail of the log shows is torchrun's ending, not the cause.
    assert "ZeroDivisionError" not in panel.log_html.value and "Root Cause" in job.logs()


def test_a_completed_job_shows_no_failure_and_goodput_says_what_it_counts(cluster):
    from jupyter_gtc import api
    from jupyter_gtc.metrics.goodput import Goodput
    from jupyter_gtc.widgets import JobPanel
    from jupyter_gtc.widgets.job_panel import goodput_text

    job = api.submit_job(cluster, "#!/bin/bash\necho fine\n", ["--job-name", "fine"]).wait(timeout=60)
    panel = JobPanel(job)
    assert panel.failure_html.layout.display == "none" and panel.failure_html.value == ""
    # Never interrupted: the rest is its own start and end, said so, not a bare "75%".
    assert goodput_text(Goodput(100.0, 75.0, {"startup": 20.0, "restart": 0.0, "finish": 5.0})) == \
        "75% (startup 20%, finish 5%)"
    assert goodput_text(Goodput(10.0, 10.0, {"startup": 0.0})) == "100%"
    assert re.fullmatch(r"\d+% \(restart 30%, startup 10%\)",
                        goodput_text(Goodput(100.0, 60.0, {"startup": 10.0, "restart": 30.0})))
