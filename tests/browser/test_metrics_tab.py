"""The sidebar's metrics tab in a real JupyterLab, in a real headless Chromium, on a real local
Slurm cluster: a chart per tag, each on its own y range (tokens/s of ~8,000 beside a loss of
~2 and a learning rate of 3e-4), and a requeue's resume step marked in every chart."""

from __future__ import annotations

import sys

import pytest
from playwright.sync_api import expect

from jupyter_gtc import api
from tests.browser.lab import job_row, open_lab_with_sidebar
from tests.conftest import small_gpu_spec

CLUSTER = "metricstab"
TAGS = {"perf/tokens_per_s": 8000.0, "train/grad_norm": 0.8, "train/loss": 2.0, "train/lr": 3e-4}

# Two attempts, each its own event file, as a requeued job's writer: the first wrote steps
# 1-20 (its checkpoint was at 10), the second resumed at 11. lr is logged every 5 steps only,
# so it comes back at 15: the requeue resumed at the lowest, 11.
REQUEUED = """#!/bin/bash
"{python}" - <<'EOF'
import math, os, time
from tensorboard.compat.proto import event_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

SCALES = {scales!r}

def attempt(suffix, steps, began):
    writer = EventFileWriter(os.environ["AIP_TENSORBOARD_LOG_DIR"], filename_suffix=suffix)
    for i, step in enumerate(steps):
        for tag, scale in SCALES.items():
            if tag == "train/lr" and step % 5:
                continue
            event = event_pb2.Event(step=step, wall_time=began + i)
            event.summary.value.add(tag=tag, simple_value=scale * (1 + 0.1 * math.sin(step)))
            writer.add_event(event)
    writer.close()

now = time.time()
attempt(".first", range(1, 21), now - 100)
attempt(".second", range(11, 31), now - 50)
EOF
"""


@pytest.fixture(scope="module")
def cluster(slurm_available):
    created = api.create_cluster(small_gpu_spec(CLUSTER, nodes=1))
    yield created
    api.delete_cluster(created.name)


def test_the_metrics_tab_draws_a_chart_per_tag_and_marks_the_resume(jupyter_lab, page, cluster, screenshots):
    job = api.submit_job(cluster.name, REQUEUED.format(python=sys.executable, scales=TAGS), ["--job-name=scales"])
    job.wait(timeout=120)
    assert job.state == "COMPLETED", job.logs()
    open_lab_with_sidebar(jupyter_lab, page)
    job_row(page, job.id).locator('[data-command="jupyter-gtc:open-metrics"]').click()
    expect(page.locator(".jp-gtc-Metrics-status")).to_have_text("The job has finished.", timeout=30_000)

    charts = page.locator(".jp-gtc-Metrics-chart")
    expect(charts).to_have_count(4, timeout=15_000)  # one per tag, not every tag on one axis
    assert [charts.nth(i).get_attribute("data-tag") for i in range(4)] == sorted(TAGS)  # by name: prefixes together
    boxes = [charts.nth(i).bounding_box() for i in range(4)]
    assert len({round(b["x"]) for b in boxes}) == 2 and len({round(b["y"]) for b in boxes}) == 2, boxes  # 2 x 2
    for tag, scale in TAGS.items():
        chart = page.locator(f'.jp-gtc-Metrics-chart[data-tag="{tag}"]')
        expect(chart.locator(".jp-gtc-Metrics-title")).to_have_text(tag)
        lines = chart.locator("path.jp-gtc-Metrics-line")
        expect(lines).to_have_count(1)
        assert lines.get_attribute("data-tag") == tag
        # Its y axis (the ticks at its left) spans its own values, not the other tags'.
        y_ticks = [float(t) for t in chart.locator('.jp-gtc-Metrics-axes text[text-anchor="end"]').all_text_contents()]
        assert len(y_ticks) >= 2 and all(0.8 * scale <= t <= 1.2 * scale for t in y_ticks), (tag, y_ticks)
        # The requeue: a dashed line at step 11 (the lowest step any tag came back at) with its label.
        mark = chart.locator(".jp-gtc-Metrics-resume")
        expect(mark).to_have_count(1)
        assert mark.get_attribute("data-step") == "11"
        expect(mark).to_have_text("requeued: attempt 2 from step 11")
    loss = page.locator('.jp-gtc-Metrics path[data-tag="train/loss"]')
    assert loss.get_attribute("data-points") == "30"  # each step once
    page.screenshot(path=str(screenshots / "metrics_tab_grid.png"))
    errors = [line for line in page.console_log if line.startswith("[pageerror]")]
    assert not errors, errors
