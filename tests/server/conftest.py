"""A real ``jupyter server`` with the extensions the environment enables, ours among them,
and unauthenticated access off: a route without a login check is then an error. One for
all of tests/server (a start costs about 2 s); tests leave it as they found it.

``authz_server`` is a second one, as a deployment may run it: unauthenticated access on (the
server's default: only our own decorators then refuse a request without a login), and an
Authorizer of the deployment's (``policy_authorizer.py``) that refuses what ``policy`` says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.jupyter import JupyterProcess

STRICT = ["--ServerApp.allow_unauthenticated_access=False"]


@pytest.fixture(scope="package")
def jupyter_server(tmp_path_factory):
    with JupyterProcess(tmp_path_factory.mktemp("jupyter-server"), app="server", extra_args=STRICT) as server:
        yield server


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def authz_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jupyter-authz")
    policy_file = tmp / "denied-actions"
    policy_file.write_text("")
    (tmp / "config").mkdir()
    # A config file, as a deployment configures its Authorizer (JUPYTER_CONFIG_DIR is tmp/config).
    (tmp / "config" / "jupyter_server_config.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "from tests.server.policy_authorizer import PolicyAuthorizer\n"
        "c.ServerApp.authorizer_class = PolicyAuthorizer\n"
        f"c.PolicyAuthorizer.policy_file = {str(policy_file)!r}\n")
    with JupyterProcess(tmp, app="server", extra_args=["--ServerApp.allow_unauthenticated_access=True"]) as server:
        server.policy_file = policy_file
        yield server


@pytest.fixture
def policy(authz_server):
    """``policy("write")``: from now on ``authz_server``'s Authorizer refuses those actions on
    jupyter_gtc's resource; at the end of the test it refuses none again."""
    def deny(*actions: str) -> None:
        authz_server.policy_file.write_text("\n".join(actions))

    yield deny
    deny()


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
