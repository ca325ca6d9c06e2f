"""The `gtc` verbs that run until something happens end on Ctrl-C (SIGINT) and SIGTERM, also
when started from a background job, which starts them with SIGINT ignored. The job they
follow goes on. (`gtc job tensorboard`: tests/services/test_tensorboard.py.)"""

from __future__ import annotations

import signal

import pytest

from jupyter_gtc import api
from tests.cli_process import running_gtc
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm
CLUSTER = "clisig"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    api.create_cluster(small_gpu_spec(CLUSTER, nodes=1))
    yield CLUSTER
    api.delete_cluster(CLUSTER)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "long.sbatch"
    path.write_text("#!/bin/bash\necho started\nsleep 600\n")
    return path


SIGNALS = pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])


@SIGNALS
def test_logs_follow_ends_on_a_signal_and_the_job_goes_on(cluster, script, signum):
    job = api.submit_job(cluster, script.read_text(), ["--job-name=followed"]).wait_until_running(timeout=60)
    try:
        with running_gtc("job", "logs", "-f", job.id, "--cluster", cluster, sigint_ignored=True) as gtc:
            assert gtc.stdout.readline() == "started\n"  # following
            gtc.send_signal(signum)
            assert gtc.wait(timeout=60) == 128 + signum
            assert gtc.stderr.read().strip().endswith("interrupted" if signum == signal.SIGINT else "terminated")
        assert job.state == "RUNNING"
    finally:
        job.cancel()


@SIGNALS
def test_submit_wait_ends_on_a_signal_and_the_job_goes_on(cluster, script, signum):
    with running_gtc("job", "submit", str(script), "--cluster", cluster, "--wait", "--job-name=waited",
                     sigint_ignored=True) as gtc:
        line = gtc.stdout.readline()
        assert line.startswith("submitted job "), line
        job = api.get_job(line.split()[2], cluster)
        try:
            job.wait_until_running(timeout=60)
            gtc.send_signal(signum)
            assert gtc.wait(timeout=60) == 128 + signum
            assert job.state == "RUNNING"
        finally:
            job.cancel()
