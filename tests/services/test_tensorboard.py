"""A real TensorBoard on a job's log dir: started once per process, answers HTTP, stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import psutil
import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def finished_job(slurm_available):
    api.create_cluster(small_gpu_spec("tboard", nodes=1))
    script = (f"#!/bin/bash\n'{sys.executable}' -c 'from torch.utils.tensorboard import SummaryWriter as W\n"
              "import os\nw = W(os.environ[\"AIP_TENSORBOARD_LOG_DIR\"])\n"
              "[w.add_scalar(\"train/loss\", 1.0 / (s + 1), s) for s in range(20)]\nw.close()'\n")
    job = api.submit_job("tboard", script, ["-J", "tb"]).wait(timeout=120)
    assert job.state == "COMPLETED", job.logs()
    yield job
    api.delete_cluster("tboard")


def test_tensorboard_serves_the_jobs_scalars_and_stops(finished_job):
    board = api.job_tensorboard("tb", "tboard")
    try:
        assert api.job_tensorboard(finished_job.id, "tboard") is board  # one per log dir per process
        with urllib.request.urlopen(f"{board.url}data/plugin/scalars/tags", timeout=30) as answer:
            assert b"train/loss" in answer.read()
    finally:
        board.stop()
    assert not board.running  # gone, or a zombie awaiting its reaper


def test_gtc_job_tensorboard_runs_until_interrupted(finished_job):
    proc = subprocess.Popen([sys.executable, "-m", "jupyter_gtc.cli", "job", "tensorboard", "tb"],
                            stdout=subprocess.PIPE, text=True, env=os.environ)
    line = proc.stdout.readline()
    assert line.startswith("TensorBoard for ") and " at http://127.0.0.1:" in line
    url = line.split(" at ", 1)[1].split()[0]
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert not [c for c in children if c.is_running() and c.status() != "zombie"]
