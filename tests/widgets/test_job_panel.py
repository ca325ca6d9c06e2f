"""The job panel against real jobs on a real local cluster. The test thread only sleeps, as
an idle kernel would: every change the panel shows arrives from the cluster's poller."""

from __future__ import annotations


import pytest

from tests.conftest import sleep_until, small_gpu_spec

pytestmark = pytest.mark.slurm
CLUSTER = "jobpanel"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    from jupyter_gtc import api

    api.create_cluster(small_gpu_spec(CLUSTER, nodes=1))
    yield CLUSTER
    api.delete_cluster(CLUSTER)




def test_panel_follows_a_job_to_completed_with_its_log(cluster):
    from jupyter_gtc import api
    from jupyter_gtc.widgets import JobPanel

    # The job waits after its first line until the test has seen it in the panel, so the
    # panel surely shows a log that grows, however the poller's ticks fall.
    script = ('echo step 1; until [ -e "$GTC_JOB_DIR/go" ]; do sleep 0.1; done; '
              'for i in 2 3 4 5; do sleep 1; echo step $i; done; echo done')
    job = api.submit_job(cluster, script, ["--job-name", "steps"])
    panel = JobPanel(job)
    states, logs = [panel.state_label.value], []
    panel.state_label.observe(lambda change: states.append(change["new"]), "value")
    panel.log_html.observe(lambda change: logs.append(change["new"]), "value")
    assert "job " + job.id in panel.title_html.value and "steps" in panel.title_html.value
    assert sleep_until(lambda: "step 1" in panel.log_html.value, 60), panel.log_html.value
    (job.job_dir / "go").touch()

    assert sleep_until(lambda: not panel.following, 60), panel.state_label.value
    assert states[0] in ("PENDING", "RUNNING") and states[-1] == "COMPLETED", states
    assert panel.exit_code_label.value == "0" and panel.nodes_label.value == "gpu-0"
    # Elapsed as H:MM:SS: the time the job ran, which includes its four 1 s sleeps.
    hours, minutes, seconds = (int(part) for part in panel.elapsed_label.value.split(":"))
    assert hours * 3600 + minutes * 60 + seconds == int(job.elapsed) >= 4, (panel.elapsed_label.value, job.elapsed)
    for line in ("step 1", "step 4", "done"):
        assert line in panel.log_html.value
    # The log grew while the job ran (read incrementally, not only at the end).
    assert any("step 1" in log and "done" not in log for log in logs), logs
    assert panel.cancel_button.disabled


def test_cancel_button_cancels_a_running_job(cluster):
    from jupyter_gtc import api
    from jupyter_gtc.widgets import JobPanel

    job = api.submit_job(cluster, "echo started; sleep 300", ["--job-name", "sleeper"])
    panel = JobPanel(job)
    job.wait_until_running(60)
    assert sleep_until(lambda: panel.state_label.value == "RUNNING")
    # RUNNING is Slurm's word for "allocated": the TaskProlog may still be running, and a
    # cancel then kills it before the script prints. A user cancels what they saw start.
    assert sleep_until(lambda: "started" in panel.log_html.value, 60), panel.log_html.value

    panel.cancel_button.click()
    assert sleep_until(lambda: panel.state_label.value == "CANCELLED", 30), panel.state_label.value
    assert job.state == "CANCELLED"
    assert not panel.following and panel.cancel_button.disabled
    assert "started" in panel.log_html.value


def test_panel_keeps_the_last_lines_and_escapes_them(cluster):
    from jupyter_gtc import api
    from jupyter_gtc.widgets import JobPanel

    job = api.submit_job(cluster, "for i in $(seq 1 100); do echo \"<line $i>\"; done", ["--job-name", "many"])
    job.wait(60)
    panel = JobPanel(job)  # opened after the job finished: one read, no subscription
    assert not panel.following and panel.state_label.value == "COMPLETED"
    shown = panel.log_html.value
    assert "&lt;line 100&gt;" in shown and "&lt;line 61&gt;" in shown and "&lt;line 60&gt;" not in shown


def test_panel_shows_the_pollers_warning_while_slurm_cannot_be_asked(cluster, tmp_path, monkeypatch):
    """squeue failing (here: an squeue earlier on PATH that exits 1) shows as a warning line,
    which goes once polling works again."""
    import os

    from jupyter_gtc import api
    from jupyter_gtc.widgets import JobPanel

    job = api.submit_job(cluster, "sleep 300", ["--job-name", "outage"])
    job.wait_until_running(60)
    panel = JobPanel(job)
    poller = api.job_poller(cluster)
    broken = tmp_path / "squeue"
    broken.write_text("#!/bin/sh\necho 'squeue: error: controller unreachable' >&2\nexit 1\n")
    broken.chmod(0o755)
    try:
        monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
        poller.poke()
        assert sleep_until(lambda: "controller unreachable" in panel.warning_html.value, 30)
        assert panel.state_label.value == "RUNNING" and panel.following
        monkeypatch.undo()
        poller.poke()
        assert sleep_until(lambda: panel.warning_html.value == "", 30), panel.warning_html.value
    finally:
        monkeypatch.undo()
        job.cancel().wait(30)
    assert sleep_until(lambda: panel.state_label.value == "CANCELLED", 60)


HALFWAY_TRAINER = """
import os, time
from torch.utils.tensorboard import SummaryWriter
with SummaryWriter(os.environ["AIP_TENSORBOARD_LOG_DIR"], flush_secs=1) as writer:
    writer.add_scalar("progress/total_steps", 200, 0)
    for step in range(1, 201):
        writer.add_scalar("train/loss", 1.0 / step, step)
        if step == 100:
            writer.flush()
            while not os.path.exists(os.path.join(os.environ["GTC_JOB_DIR"], "go")):
                time.sleep(0.1)
"""


def test_panel_grows_a_live_plot_and_a_progress_bar_from_the_jobs_scalars(cluster, tmp_path):
    import sys

    from jupyter_gtc import api
    from jupyter_gtc.widgets import JobPanel
    from jupyter_gtc.widgets.tag_grid import TagGrid

    # A writer of the scalars a training job writes (tiny_regression.py's tags) that stops
    # halfway until the test has seen the bar move: the bar must show a fraction in between.
    trainer = tmp_path / "halfway.py"
    trainer.write_text(HALFWAY_TRAINER)
    script = f"#!/bin/bash\n'{sys.executable}' '{trainer}'\n"
    job = api.submit_job(cluster, script, ["--job-name", "scalars"])
    panel = JobPanel(job)
    fractions = []
    panel.progress_bar.observe(lambda change: fractions.append(change["new"]), "value")

    assert sleep_until(lambda: panel.plot_box.children, 120), job.logs()
    [plot] = panel.plot_box.children
    assert isinstance(plot, TagGrid)  # job.plot(): a chart per tag
    assert sleep_until(lambda: 0 < panel.progress_bar.value < 1, 120), (panel.progress_bar.value, job.logs())
    (job.job_dir / "go").touch()
    assert sleep_until(lambda: not panel.following, 120), job.logs()
    assert job.state == "COMPLETED", job.logs()
    assert plot.point_count["train/loss"] == 200 and "progress/total_steps" not in plot.point_count
    assert panel.progress_bar.value == 1.0 and panel.progress_label.value.startswith("200/200 steps (100%)")
    assert any(0 < f < 1 for f in fractions), fractions  # it moved while the job trained
    # Once finished: the share of its time that made steps; no attempt field, never requeued.
    # Said with what the rest went to ("83% (startup 10%, ...)"): a bare share read as a fault.
    assert panel.goodput_label.value.split(" ")[0].endswith("%") and "startup" in panel.goodput_label.value
    assert "200 steps kept, over 1 attempt(s)" in panel.goodput_label.tooltip
    assert panel._attempt_field.layout.display == "none"
