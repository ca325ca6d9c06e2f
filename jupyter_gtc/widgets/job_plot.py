"""``job.plot()``: a ``LivePlot`` fed with a job's scalars as it writes them.

The plot subscribes to the job's one metrics reader (so it starts with every point so far)
and to the cluster's poller, whose thread reads new points once per tick; after the job
has finished, a last read and it lets go of both."""

from __future__ import annotations

from .. import api
from ..metrics.progress import TOTAL_STEPS_TAG
from .plot import LivePlot


def plot_job(job: api.Job, tags: list[str] | None = None) -> LivePlot:
    plot = LivePlot(title=f"job {job.id} {job.name}")
    metrics = job.metrics_feed

    def wanted(tag: str) -> bool:
        # The total-steps scalar drives the progress bar; as a line it would be one lonely point.
        if tag == TOTAL_STEPS_TAG:
            return False
        return tags is None or any(tag == t or (t.endswith("/") and tag.startswith(t)) for t in tags)

    stop_metrics = metrics.subscribe(lambda new: plot.add([s for s in new if wanted(s.tag)]))
    poller = api.job_poller(job.cluster)
    stop_ticks = None

    def on_tick(changed) -> None:
        nonlocal stop_ticks
        finished = job.finished  # before the read, so the last read sees everything
        metrics.refresh()
        if finished and stop_ticks is not None:
            stop_ticks()
            stop_ticks = None
            stop_metrics()

    if job.finished:
        metrics.refresh()
        stop_metrics()
    else:
        stop_ticks = poller.subscribe(on_tick)
        job.refresh()
        metrics.refresh()
    return plot
