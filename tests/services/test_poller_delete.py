"""Deleting a cluster is no failure: its pollers say nothing (no "could not poll NAME: NAME is
being deleted", no "squeue exited with code -9"), and stop once it is gone."""

from __future__ import annotations

import contextlib
import logging

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import ClusterNotFound
from jupyter_gtc.services.poller import ClusterPoller
from jupyter_gtc.slurm.commands import SlurmCommands
from jupyter_gtc.state import open_store
from tests.conftest import sleep_until, small_gpu_spec

pytestmark = pytest.mark.slurm


def test_deleting_a_cluster_with_a_watched_job_warns_of_nothing(slurm_available, caplog):
    caplog.set_level(logging.WARNING)
    api.create_cluster(small_gpu_spec("quietdel", nodes=1))
    try:
        job = api.submit_job("quietdel", "sleep 300", ["-J", "watched"]).wait_until_running(timeout=60)
        poller = api.job_poller("quietdel")  # the process's one, which watches the job
        # A poll in flight as the delete begins: its squeue is the cluster's own, not refused
        # as DELETING, so it fails as the daemons stop or the files go.
        store, env = open_store(), api.cluster_env("quietdel")
        in_flight = ClusterPoller("quietdel", lambda: SlurmCommands(env, timeout=10), store,
                                  incarnation=store.get_cluster("quietdel").created_at)
        in_flight.watch(job.id)

        deleting = api.start_delete_cluster("quietdel")
        poller.tick()  # while DELETING: refused before any squeue
        assert poller.warning is None
        deleting.wait(timeout=300)
        poller.tick()
        in_flight.tick()
        assert sleep_until(lambda: not poller.running and not in_flight.running, 60)  # both forgot its jobs
        assert (poller.warning, in_flight.warning) == (None, None)
        assert "could not poll" not in caplog.text, caplog.text
    finally:
        with contextlib.suppress(ClusterNotFound):  # deleted above, unless the test failed first
            api.delete_cluster("quietdel")
