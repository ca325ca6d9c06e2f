"""``job.plot()`` and ``job.metrics()`` of real jobs on a real local cluster: a chart per tag,
and a plot that says why it is empty (the job waits, or failed before writing anything)."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.conftest import sleep_until, small_gpu_spec
from tests.widgets.test_plot import figures_by_tag

pytestmark = pytest.mark.slurm
CLUSTER = "jobplot"

# A training job's tags on their real scales: tokens/s is ~10,000 times the loss.
SCALES_TRAINER = """
import math, os
from torch.utils.tensorboard import SummaryWriter
with SummaryWriter(os.environ["AIP_TENSORBOARD_LOG_DIR"]) as writer:
    for step in range(1, 31):
        writer.add_scalar("train/loss", 2.0 / step + 0.1, step)
        writer.add_scalar("train/lr", 3e-4 * min(1.0, step / 10), step)
        writer.add_scalar("train/grad_norm", 0.8 + 0.1 * math.sin(step), step)
        writer.add_scalar("perf/tokens_per_s", 8000.0 + 50 * math.cos(step), step)
"""


@pytest.fixture(scope="module")
def cluster(slurm_available):
    from jupyter_gtc import api

    importlib.import_module("jupyter_gtc.widgets")  # how job.plot() draws, as %load_ext registers it
    api.create_cluster(small_gpu_spec(CLUSTER, nodes=1))
    yield CLUSTER
    api.delete_cluster(CLUSTER)


@pytest.fixture(scope="module")
def trained(cluster, tmp_path_factory):
    from jupyter_gtc import api

    trainer = tmp_path_factory.mktemp("trainer") / "scales.py"
    trainer.write_text(SCALES_TRAINER)
    job = api.submit_job(cluster, f"#!/bin/bash\n'{sys.executable}' '{trainer}'\n", ["--job-name", "scales"])
    job.wait(300)
    assert job.state == "COMPLETED", job.logs()
    return job


def test_plot_draws_a_chart_per_tag_each_with_its_own_y_range(trained):
    plot = trained.plot()
    drawn = figures_by_tag(plot)
    tags = {"train/loss", "train/lr", "train/grad_norm", "perf/tokens_per_s"}
    assert all(len(figure_tags) == 1 for figure_tags in drawn.values()), drawn  # old: all four on one axis
    assert {tag for figure_tags in drawn.values() for tag in figure_tags} == tags
    for tag, chart in plot.charts.items():
        [line] = chart.renderers
        values = line.data_source.data["value"]
        assert len(values) == 30 and line.name == tag
        if tag != "perf/tokens_per_s":
            assert values.max() < 10  # this chart's range is not stretched to ~8,000
    assert plot.status == ""  # it completed and wrote metrics: nothing to explain


def test_metrics_has_wall_time_as_a_timestamp_and_no_empty_run_column(trained):
    import pandas

    table = trained.metrics()
    assert list(table.columns) == ["tag", "step", "wall_time", "value"]  # no column of ""
    assert pandas.api.types.is_datetime64_any_dtype(table["wall_time"]), table.dtypes
    began = pandas.Timestamp(trained.submitted_at, unit="s", tz="UTC")
    assert (table["wall_time"] >= began.floor("s")).all()
    assert (table["wall_time"] - began).max() < pandas.Timedelta(minutes=10)  # seconds, not 1970 nor 56000 AD


def test_plot_of_a_job_that_failed_before_writing_anything_says_why(cluster):
    from jupyter_gtc import api

    job = api.submit_job(cluster, f"#!/bin/bash\n'{sys.executable}' -c 'import gtc_no_such_module'\n",
                         ["--job-name", "nomodule"])
    job.wait(120)
    assert job.state == "FAILED"
    plot = job.plot()
    # What the browser shows: a visible text in the plot's document (old: only an empty axis).
    shown = [m.text for m in plot._model.references() if isinstance(getattr(m, "text", None), str) and m.visible]
    assert any("No module named &#x27;gtc_no_such_module&#x27;" in text for text in shown), shown
    assert plot.status.startswith("FAILED (exit code 1)"), plot.status
    assert "ModuleNotFoundError: No module named 'gtc_no_such_module'" in plot.status


def test_plot_of_a_job_without_metrics_yet_says_it_waits_and_in_what_state(cluster):
    from jupyter_gtc import api

    job = api.submit_job(cluster, "#!/bin/bash\nsleep 300\n", ["--job-name", "quiet"])
    try:
        plot = job.plot()
        assert plot.status in ("waiting for the first metrics: job is PENDING",
                               "waiting for the first metrics: job is RUNNING"), plot.status
        job.wait_until_running(60)
        assert sleep_until(lambda: plot.status == "waiting for the first metrics: job is RUNNING", 60), plot.status
        job.cancel()
        assert sleep_until(lambda: plot.status.startswith("CANCELLED"), 60), plot.status
    finally:
        job.cancel()
