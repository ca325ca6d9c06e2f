"""The cluster panel and the creation progress line, on a real local cluster."""

from __future__ import annotations

import html

import pytest

from tests.conftest import slurm, small_gpu_spec

pytestmark = pytest.mark.slurm
CLUSTER = "clpanel"


@pytest.fixture(scope="module")
def created(slurm_available):
    """The cluster, and the progress line that watched it being created."""
    from jupyter_gtc import api
    from jupyter_gtc.widgets import ClusterProgress

    progress = ClusterProgress(f"creating cluster {CLUSTER}")
    cluster = api.create_cluster(small_gpu_spec(CLUSTER, nodes=2), progress=progress)
    progress.finish()
    yield cluster, progress
    api.delete_cluster(CLUSTER)


def test_progress_lists_the_steps_and_ends_in_one_line(created):
    _cluster, progress = created
    assert progress.steps[0] == "starting munged" and "starting slurmd 2/2: gpu-1" in progress.steps
    assert progress.bar.bar_style == "success" and progress.bar.value == progress.bar.max
    assert progress.message_label.value.startswith(f"creating cluster {CLUSTER}: done in")


def test_progress_shows_a_failure():
    from jupyter_gtc.widgets import ClusterProgress

    progress = ClusterProgress("creating cluster x")
    progress("starting munged")
    progress.finish(error="munged did not start")
    assert progress.bar.bar_style == "danger"
    assert progress.message_label.value == "creating cluster x failed: munged did not start"


def test_panel_shows_pools_and_nodes(created):
    from jupyter_gtc.widgets import ClusterPanel

    panel = ClusterPanel(created[0])
    assert f"<b>{CLUSTER}</b>" in panel.summary_html.value
    assert "nodes ready 2/2" in panel.summary_html.value and "GPUs used 0/16" in panel.summary_html.value
    for text in ("gpu", "a3-highgpu-8g", "login", "n2-standard-4"):
        assert text in panel.pools_html.value
    assert panel.nodes_html.value.count("<tr>") == 3  # header + gpu-0, gpu-1
    assert repr(panel) == f"<Cluster {CLUSTER} (local) RUNNING: 2/2 nodes ready>"


def test_refresh_shows_gpus_in_use_and_drained_nodes(created):
    from jupyter_gtc import api
    from jupyter_gtc.widgets import ClusterPanel

    panel = ClusterPanel(created[0])
    job = api.submit_job(CLUSTER, "sleep 300", ["--nodelist", "gpu-0", "--gpus-per-node", "3"])
    try:
        job.wait_until_running(60)
        slurm(CLUSTER, "scontrol", "update", "NodeName=gpu-1", "State=DRAIN", "Reason=xid 79 <bad gpu>")
        panel.refresh_button.click()
        assert "GPUs used 3/16" in panel.summary_html.value
        assert "nodes ready 1/2" in panel.summary_html.value
        assert "3/8" in panel.nodes_html.value
        assert "xid 79 &lt;bad gpu&gt;" in panel.nodes_html.value and "drain" in panel.nodes_html.value
    finally:
        job.cancel().wait(30)
        slurm(CLUSTER, "scontrol", "update", "NodeName=gpu-1", "State=RESUME")


def test_refresh_of_a_deleted_cluster_says_so(slurm_available):
    from jupyter_gtc import api
    from jupyter_gtc.widgets import ClusterPanel

    panel = ClusterPanel(api.create_cluster(small_gpu_spec("gone", nodes=1)))
    api.delete_cluster("gone")
    panel.refresh()
    assert "no cluster named 'gone'" in html.unescape(panel.summary_html.value)
