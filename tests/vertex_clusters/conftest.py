"""The local Vertex endpoint these modules talk to, as each module's own fixture makes it.

Each module has one endpoint and its host cluster (module-scoped fixtures: clusters take a while
to make), from ``local_vertex_endpoint``: in this session's GTC_HOME, for tests that call the
endpoint's REST API themselves; or in a second GTC_HOME (``second_home``), for tests of the
``vertex`` backend, which must reach its clusters through the endpoint as it would reach Google's,
never as local clusters of its own home."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jupyter_gtc import api
from jupyter_gtc.state import config
from tests.conftest import no_egress, small_gpu_spec

if TYPE_CHECKING:
    from jupyter_gtc.vertex.local_endpoint import LocalEndpoint

PROJECT, REGION = "local-project", "us-central1"


@dataclass(frozen=True)
class Served:
    """A running local Vertex endpoint and the GTC_HOMEs around it."""

    endpoint: LocalEndpoint
    home: Path  # the GTC_HOME it serves from: its host cluster and the training clusters it made
    own: Path  # the tests' GTC_HOME (the same as ``home`` unless second_home was given)


@contextlib.contextmanager
def local_vertex_endpoint(host: str, *, made: tuple[str, ...] = (), second_home: str | None = None,
                          settings: dict[str, str] | None = None) -> Iterator[Served]:
    """A one-node local cluster ``host`` and the local Vertex endpoint serving on it.

    ``made``: the training clusters the module makes in its own GTC_HOME, deleted at the end if
    a test left them (in a second home, through the endpoint, while it still runs).
    ``second_home``: the prefix of a fresh GTC_HOME to serve from; the tests' own home then gets
    ``vertex.api_endpoint`` (and ``settings``, other ``gtc config`` keys), unset at the end, and
    the second home's clusters are all deleted, the host last, with the folder."""
    own = Path(os.environ["GTC_HOME"])
    home = Path(tempfile.mkdtemp(prefix=second_home)) if second_home else own
    settings = dict(settings or {})
    with pytest.MonkeyPatch.context() as env:
        no_egress(env)
        if second_home:
            env.setenv("GTC_VERTEX_POLL_S", "0.5")  # the vertex backend's operation polls (5 s otherwise)
            env.setenv("GTC_HOME", str(home))
        try:
            endpoint = api.start_vertex_endpoint(api.create_cluster(small_gpu_spec(host, nodes=1)).name)
            if second_home:
                env.setenv("GTC_HOME", str(own))
                settings["vertex.api_endpoint"] = endpoint.api_endpoint
                for key, value in settings.items():
                    config.set_value(own, key, value)
            yield Served(endpoint, home, own)
        finally:
            env.setenv("GTC_HOME", str(own))
            try:
                _delete(made)
            finally:
                for key in settings:
                    config.unset(own, key)
                env.setenv("GTC_HOME", str(home))
                try:
                    others = [c.name for c in api.list_clusters(with_status=False) if c.name != host]
                    _delete(others if second_home else [], host)
                finally:
                    env.setenv("GTC_HOME", str(own))
                    if second_home:
                        shutil.rmtree(home, ignore_errors=True)


def _delete(names, *last: str) -> None:
    """Delete each of ``names`` that this GTC_HOME lists, then ``last``."""
    listed = {c.name for c in api.list_clusters(with_status=False)}
    for name in [*names, *last]:
        if name in listed:
            api.delete_cluster(name)


def training_clusters(endpoint, kind=None):
    """Our client of ``endpoint``'s training clusters (``kind``, a subclass, where
    a test counts its calls), polling fast: the local endpoint's operations end in seconds."""
    from jupyter_gtc.vertex_clusters.client import TrainingClusters

    return (kind or TrainingClusters)(PROJECT, REGION, api_endpoint=endpoint.api_endpoint, poll_s=0.2,
                                      max_poll_s=1.0)
