"""A node's disk check on a cluster of a new GTC_HOME, before any job: it reads the folder
jobs write to, which did not exist yet, so every check failed ("No such file or directory")
and a node the supervisor replaced never passed again (found by the training-clusters work:
a reported node's replacement was given up on)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.usefixtures("slurm_available")


def test_a_new_homes_nodes_pass_their_disk_check_before_the_first_job(monkeypatch):
    home = Path(tempfile.mkdtemp(prefix="gtc-"))
    monkeypatch.setenv("GTC_HOME", str(home))
    try:
        cluster = api.create_cluster(small_gpu_spec("fresh", nodes=1, supervisor=False))
        [node] = api.cluster_health(cluster.name, now=True)
        assert (node["disk"], node["verdict"]) == ("pass", "pass"), node["evidence"]
    finally:
        if api.list_clusters(with_status=False):
            api.delete_cluster("fresh")
        shutil.rmtree(home, ignore_errors=True)
