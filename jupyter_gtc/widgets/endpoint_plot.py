"""``ep.plot()``: an endpoint's requests/s, p50/p95 latency, errors/s and replicas, live.

The same ``TagGrid`` as ``job.plot()`` (a chart per tag, only new points streamed to the
browser), fed by the endpoint's one ``EndpointMetrics`` in this process
(``services/endpoint_metrics.py``), whose thread reads ``requests.jsonl`` once a second:
the x axis is seconds since the endpoint was deployed, a point a second. Latency is one chart
with two lines (p50 and p95). Above the charts it says what they cannot show: that no request
has come yet, or that the endpoint is undeployed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..services.endpoint_metrics import REQUESTS
from .tag_grid import TagGrid

if TYPE_CHECKING:
    from bokeh.plotting import figure

    from ..metrics import Scalar
    from ..services.endpoints import Endpoint

X_LABEL = "seconds since deployed"


class EndpointPlot(TagGrid):
    """A ``TagGrid`` whose x axis is seconds, not steps."""

    def _new_chart(self, tag: str) -> figure:
        fig = super()._new_chart(tag)
        fig.xaxis.axis_label = X_LABEL
        for hover in fig.hover:
            hover.tooltips = [("", "$name"), ("second", "@step{0,0}"), ("value", "@value{%.4g}")]
        return fig

    @property
    def requests(self) -> float:
        """Requests counted so far (the sum of the requests/s line)."""
        return self.total(REQUESTS)

    def total(self, tag: str, run: str = "") -> float:
        """The sum of the points of ``tag``'s line (``run``: "p50" or "p95" for latency)."""
        return float(sum(self.values(tag, run)))

    def values(self, tag: str, run: str = "") -> list[float]:
        """The points ``tag``'s line holds, oldest first, as the browser got them."""
        with self._lock:
            line = self._lines.get((run, tag))
            return [] if line is None else list(line.source.data["value"])


def plot_endpoint(endpoint: Endpoint) -> EndpointPlot:
    plot = EndpointPlot(title=f"endpoint {endpoint.id} {endpoint.model}")
    feed = endpoint.metrics_feed

    def on_points(new: list[Scalar]) -> None:
        plot.add(new)
        plot.set_status(status_of(feed.finished, plot.requests))

    feed.subscribe(on_points)  # every point so far, then a point a second while it is deployed
    plot.set_status(status_of(feed.finished, plot.requests))
    return plot


def status_of(finished: bool, requests: float) -> str:
    if finished:
        return "undeployed: no more requests come"
    return "" if requests else "no requests yet: ep.predict(instances=[...]) sends one"
