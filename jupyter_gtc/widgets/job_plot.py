"""``job.plot()``: a ``TagGrid`` (a chart per tag) fed with a job's scalars as it writes them.

The plot subscribes to the job's one metrics reader (so it starts with every point so far)
and to the cluster's poller, whose thread reads new points once per tick; after the job
has finished, a last read and it lets go of both. Above the charts it says what they cannot
show: that the job has written nothing yet and in what state it is, or why it failed."""

from __future__ import annotations

from .. import api
from ..metrics.progress import TOTAL_STEPS_TAG
from .tag_grid import TagGrid


def plot_job(job: api.Job, tags: list[str] | None = None) -> TagGrid:
    plot = TagGrid(title=f"job {job.id} {job.name}")
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
        plot.set_status(status_of(job, sum(plot.point_count.values())))
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
    plot.set_status(status_of(job, sum(plot.point_count.values())))
    return plot


def status_of(job: api.Job, points: int) -> str:
    """What the plot says above its charts: why the job failed (whether or not it wrote
    metrics first); while it has drawn nothing, that it waits and why; else nothing."""
    if job.finished:
        failure = job.failure()  # reads the log's ends: once, as the job has ended
        if failure:
            return failure
        return "" if points else f"no metrics: the job ended {job.state} without writing any scalars"
    return "" if points else f"waiting for the first metrics: job is {job.state}"
