"""A real TensorBoard on a job's log dir: started once per process, answers HTTP, stops."""

from __future__ import annotations

import signal
import sys
import urllib.request

import pytest

from jupyter_gtc import api
from tests.cli_process import running_gtc, wait_gone
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


@pytest.mark.parametrize("signum, sigint_ignored", [
    (signal.SIGINT, False),  # Ctrl-C in a terminal
    (signal.SIGINT, True),   # started from a background job (`make test &`, CI): SIGINT inherited ignored
    (signal.SIGTERM, True),  # kill, a CI runner's time-out, a service manager
], ids=["sigint", "sigint-inherited-ignored", "sigterm"])
def test_gtc_job_tensorboard_runs_until_interrupted(finished_job, signum, sigint_ignored):
    with running_gtc("job", "tensorboard", "tb", sigint_ignored=sigint_ignored) as gtc:
        line = gtc.stdout.readline()
        assert line.startswith("TensorBoard for ") and " at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as answer:
            assert answer.status == 200
        board = gtc.note_descendants()
        assert board, "no TensorBoard process under gtc"
        gtc.send_signal(signum)
        assert gtc.wait(timeout=120) == 128 + signum
        assert not wait_gone(board, timeout=60)  # it stopped its TensorBoard on the way out


def test_a_tensorboard_whose_cli_is_killed_outright_ends_by_itself(finished_job):
    """SIGKILL gives `gtc` no chance to stop its child; the child notices and ends."""
    with running_gtc("job", "tensorboard", "tb", sigint_ignored=True) as gtc:
        assert gtc.stdout.readline().startswith("TensorBoard for ")
        board = gtc.note_descendants()
        gtc.kill()
        gtc.wait(timeout=60)
        assert not wait_gone(board, timeout=60)
