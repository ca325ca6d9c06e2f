"""``ep.plot()`` of a real endpoint on a real local cluster: the tiny Llama deployed, requests
sent through our API (answered and refused), and the plot's Bokeh data sources hold points that
add up to exactly those requests and errors, p50 at most p95, one replica; a request sent after
the plot was made appears in the same plot; after the undeploy it says so and shows 0 replicas.

The test waits on the feed's own events (a listener subscribed after the plot's, so it runs
once the plot has its points), never on a fixed sleep."""

from __future__ import annotations

import importlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import PredictionError
from jupyter_gtc.services.endpoint_metrics import ERRORS, LATENCY, REPLICAS, REQUESTS
from tests.conftest import small_gpu_spec
from tests.serving.tiny_model import save_tiny_llama

pytestmark = pytest.mark.slurm
CLUSTER = "srvplot"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    importlib.import_module("jupyter_gtc.widgets")  # how ep.plot() draws, as %load_ext registers it
    api.create_cluster(small_gpu_spec(CLUSTER, nodes=1, machine="n2-standard-8"))
    yield CLUSTER
    api.delete_cluster(CLUSTER)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return save_tiny_llama(tmp_path_factory.mktemp("llama") / "model")


class Arrivals:
    """Wakes a waiter each time the feed hands on points (after the plot, subscribed first, took them)."""

    def __init__(self, feed):
        self._changed = threading.Condition()
        feed.subscribe(self._on_points)

    def _on_points(self, new) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait(self, predicate, timeout: float = 60) -> bool:
        with self._changed:
            return self._changed.wait_for(predicate, timeout)


def test_the_plot_streams_each_request_and_error_as_it_comes(cluster, tiny, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the shared cores (notes/recipes.md)
    model = api.register_model(artifact_uri=str(tiny), model="plotted")
    ep = model.deploy(cluster=CLUSTER)
    plot = ep.plot()
    assert plot.status == "no requests yet: ep.predict(instances=[...]) sends one"
    arrivals = Arrivals(ep.metrics_feed)

    for prompt in ["The try statement", "A function definition", "The", "A", "The try"]:
        assert ep.predict([{"prompt": prompt, "max_tokens": 4}])[0]["tokens"] == 4
    for _ in range(2):
        with pytest.raises(PredictionError):
            ep.predict([{"prompt": "x", "max_tokens": 0}])  # 400: an error the plot counts

    assert arrivals.wait(lambda: plot.requests == 7), (plot.requests, ep.requests())
    assert plot.total(ERRORS) == 2 and plot.status == ""
    p50, p95 = plot.values(LATENCY, "p50"), plot.values(LATENCY, "p95")
    assert p50 and len(p50) == len(p95) and all(0 < a <= b for a, b in zip(p50, p95))
    answered = sorted(r["seconds"] for r in ep.requests() if r["status"] == 200)
    # Each a latency one request took (kept as float32 by the plot: equal to 7 digits).
    assert answered[0] * (1 - 1e-6) <= min(p50) and max(p95) <= answered[-1] * (1 + 1e-6)
    assert plot.values(REPLICAS)[-1] == 1
    assert set(plot.charts) == {REQUESTS, ERRORS, LATENCY, REPLICAS}

    # A new request appears in the plot already shown: nothing is made again.
    before = len(plot.values(REQUESTS))
    ep.predict([{"prompt": "One more", "max_tokens": 4}])
    assert arrivals.wait(lambda: plot.requests == 8), (plot.requests, ep.requests())
    assert plot.total(ERRORS) == 2 and len(plot.values(REQUESTS)) > before
    assert ep.plot() is not plot and ep.plot().requests == 8  # a second plot starts with every point

    # Another kernel, fresh after a restart: only %load_ext, then the endpoint by its id.
    fresh_kernel = (
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'jupyter_gtc')\n"
        "import sys\n"
        "assert 'jupyter_gtc.widgets' not in sys.modules  # %load_ext stays light\n"
        "import jupyter_gtc as gtc\n"
        f"plot = gtc.endpoints.get({ep.id!r}).plot()\n"
        "print(type(plot).__name__, plot.requests, plot.total('errors/s'))\n")
    done = subprocess.run([sys.executable, "-c", fresh_kernel], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "EndpointPlot 8.0 2.0"), done.stderr

    ep.undeploy()
    assert arrivals.wait(lambda: ep.metrics_feed.finished), plot.status
    assert plot.status == "undeployed: no more requests come" and plot.values(REPLICAS)[-1] == 0
    assert plot.requests == 8
