"""A real ``jupyter server`` with the extensions the environment enables, ours among them,
and unauthenticated access off: a route without a login check is then an error. One for
all of tests/server (a start costs about 2 s); tests leave it as they found it."""

from __future__ import annotations

import pytest

from tests.browser.jupyter import JupyterProcess

STRICT = ["--ServerApp.allow_unauthenticated_access=False"]


@pytest.fixture(scope="package")
def jupyter_server(tmp_path_factory):
    with JupyterProcess(tmp_path_factory.mktemp("jupyter-server"), app="server", extra_args=STRICT) as server:
        yield server


@pytest.fixture(scope="package")
def rest_cluster(slurm_available):
    """A 3-node local cluster for the job and feed routes, named as no other test names one:
    a process's job poller outlives a deleted cluster of the same name, and would answer for
    job 1, 2, ... of the new one with what it saw of the old one's."""
    from jupyter_gtc import api
    from tests.conftest import small_gpu_spec

    cluster = api.create_cluster(small_gpu_spec("restjobs", nodes=3))
    yield cluster
    api.delete_cluster(cluster.name)
