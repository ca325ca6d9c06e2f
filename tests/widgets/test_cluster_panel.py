"""The cluster panel and the creation progress line, on a real local cluster (with its
supervisor, whose events the panel's Remediation section lists)."""

from __future__ import annotations

import html
import time

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
    cluster = api.create_cluster(small_gpu_spec(CLUSTER, nodes=2, supervisor=True, supervisor_cooldown=1),
                                 progress=progress)
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
    assert panel.remediation.selected_index is None and panel.remediation.titles == ("Remediation",)


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


def test_the_remediation_section_lists_what_the_supervisor_did_after_a_crash(created):
    from jupyter_gtc import api
    from jupyter_gtc.widgets import ClusterPanel
    from tests.conftest import sleep_until

    panel = ClusterPanel(created[0])
    before = len(panel.events)
    api.inject_fault(CLUSTER, "gpu-0", "crash")
    assert sleep_until(lambda: "restarted" in [e["event"] for e in api.cluster_events(CLUSTER)[before:]], 60), \
        api.cluster_events(CLUSTER)
    panel.refresh_button.click()
    assert [(e["node"], e["event"]) for e in panel.events[before:]][:3] == [
        ("gpu-0", "detected"), ("gpu-0", "down"), ("gpu-0", "restarted")], panel.events
    assert panel.remediation.titles == (f"Remediation ({len(panel.events)})",)
    assert panel.remediation.selected_index == 0  # opened: there is news
    listed = panel.events_html.value
    assert "its slurmd exited" in listed
    # Newest first, local time, every detail escaped.
    assert listed.index("restarted") < listed.index("detected")
    newest = panel.events[-1]
    assert time.strftime("%H:%M:%S", time.localtime(newest["time"])) in listed
    assert "<td style" in listed and "<script" not in listed
    assert sleep_until(lambda: api.get_cluster(CLUSTER).nodes[0].ready, 60)  # left as found


def test_the_remediation_section_lists_the_newest_fifty_escaped(created):
    from jupyter_gtc.widgets import ClusterPanel
    from jupyter_gtc.widgets.cluster_panel import EVENTS_SHOWN

    panel = ClusterPanel(created[0])
    events = [{"time": 1_700_000_000 + i, "node": "gpu-1", "event": "still failing", "detail": f"try {i}"}
              for i in range(EVENTS_SHOWN + 10)]
    events[-1]["detail"] = "<script>alert(1)</script> & more"
    panel.show_events(events)
    listed = panel.events_html.value
    assert listed.count("<tr>") == EVENTS_SHOWN + 1  # a header, then the newest fifty
    assert "try 10<" in listed and "try 9<" not in listed and "and 10 older" in listed
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in listed and "<script>" not in listed
    assert listed.index("&lt;script&gt;") < listed.index("try 58")  # newest first
