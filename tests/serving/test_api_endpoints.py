"""Serving's routes on a real Jupyter server: no route answers without a login; a model deployed
through the server is served by it (a user's own Vertex server on a real local cluster), listed,
described, asked, refused with the endpoint's own status, and undeployed."""

from __future__ import annotations

import sys

import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec
from tests.server.api_client import call, ok, wait_for
from tests.server.conftest import jupyter_server  # noqa: F401  (fixture)
from tests.serving.test_deploy import USER_SERVER

pytestmark = pytest.mark.slurm
CLUSTER = "srvrest"

ROUTES = [("GET", "endpoints", 200, None), ("GET", "endpoints/1", 404, "EndpointNotFound"),
          ("DELETE", "endpoints/1", 404, "EndpointNotFound"),
          ("POST", "endpoints/1/predict", 404, "EndpointNotFound"),
          ("POST", "models/none@1/deploy", 404, "ModelNotFound")]


@pytest.mark.parametrize(("method", "path", "status", "kind"), ROUTES)
def test_every_endpoint_route_refuses_a_request_without_a_login(jupyter_server, method, path, status, kind):
    payload = {"instances": [1], "cluster": "c"} if method == "POST" else None
    refused, body = call(jupyter_server, method, path, payload, token=False)
    assert refused == 403 and body["kind"] == "HTTPError", (method, path, refused, body)
    answered, body = call(jupyter_server, method, path, payload)
    assert answered == status and (kind is None or body["kind"] == kind), (method, path, answered, body)


@pytest.fixture(scope="module")
def cluster(slurm_available):
    api.create_cluster(small_gpu_spec(CLUSTER, nodes=1, machine="n2-standard-8"))
    yield CLUSTER
    api.delete_cluster(CLUSTER)


def test_a_model_is_deployed_asked_and_undeployed_through_the_server(jupyter_server, cluster, tmp_path):
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "ready").touch()  # the user's server is healthy at once
    api.register_model(artifact_uri=str(folder), model="webecho")

    status, body = call(jupyter_server, "POST", "models/webecho/deploy", {"cluster": CLUSTER, "colour": "red"})
    assert status == 400 and "colour" in body["message"]
    deployed = ok(jupyter_server, "POST", "models/webecho%401/deploy",
                  {"cluster": CLUSTER, "command": [sys.executable, str(USER_SERVER)]})
    endpoint = deployed["id"]
    assert deployed["model"] == "webecho@1" and deployed["cluster"] == CLUSTER
    assert [e["id"] for e in ok(jupyter_server, "GET", "endpoints")["endpoints"]] == [endpoint]
    # Seen by the process that serves it, healthy once the user's server answers.
    replicas = wait_for(lambda: [r for r in ok(jupyter_server, "GET", f"endpoints/{endpoint}")["replicas"]
                                 if r["healthy"]], timeout=120, what="a healthy replica")
    assert len(replicas) == 1

    answer = ok(jupyter_server, "POST", f"endpoints/{endpoint}/predict", {"instances": [{"x": 1}]})
    assert answer["predictions"][0]["echo"] == {"x": 1} and answer["predictions"][0]["endpoint"] == endpoint
    status, body = call(jupyter_server, "POST", f"endpoints/{endpoint}/predict", {"instances": "x"})
    assert status == 400
    # The endpoint's own refusal keeps its status: a body with no instances list is its 400.
    status, body = call(jupyter_server, "POST", f"endpoints/{endpoint}/predict", {"instances": [{"x": 1}] * 65})
    assert status == 400 and body["kind"] == "PredictionError" and "at most 64" in body["message"]
    # This process (the same user) reaches the server's endpoint too.
    assert api.predict(endpoint, [{"x": 2}])[0]["echo"] == {"x": 2}

    assert ok(jupyter_server, "DELETE", f"endpoints/{endpoint}") == {"undeployed": endpoint}
    assert ok(jupyter_server, "GET", "endpoints")["endpoints"] == []
    assert api.get_model("webecho").deployment is None


def test_a_deploy_route_answers_202_before_any_replica_is_ready_and_the_endpoint_follows(jupyter_server, cluster,
                                                                                        tmp_path):
    """The route holds none of the server's REST threads while a model loads: its answer comes while
    the replica cannot be ready (its server waits for a file this test writes after the answer)."""
    folder = tmp_path / "slow"
    folder.mkdir()
    (folder / "model.txt").write_text("an echo")
    api.register_model(artifact_uri=str(folder), model="webslow")
    status, deployed = call(jupyter_server, "POST", "models/webslow/deploy",
                            {"cluster": CLUSTER, "command": [sys.executable, str(USER_SERVER)]})
    assert status == 202, deployed
    endpoint = deployed["id"]
    assert [r["healthy"] for r in deployed["replicas"]] == [False]
    status, body = call(jupyter_server, "POST", f"endpoints/{endpoint}/predict", {"instances": [{"x": 1}]})
    assert status == 429 and "not ready" in body["message"]

    (folder / "ready").touch()
    wait_for(lambda: any(r["healthy"] for r in ok(jupyter_server, "GET", f"endpoints/{endpoint}")["replicas"]),
             timeout=120, what="a healthy replica")
    answer = ok(jupyter_server, "POST", f"endpoints/{endpoint}/predict", {"instances": [{"x": 1}]})
    assert answer["predictions"][0]["echo"] == {"x": 1}
    assert ok(jupyter_server, "DELETE", f"endpoints/{endpoint}") == {"undeployed": endpoint}
    assert api.get_model("webslow").deployment is None


def test_a_deploy_whose_replica_never_answers_is_undeployed_by_the_server(jupyter_server, cluster, tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "model.txt").write_text("never served")
    api.register_model(artifact_uri=str(folder), model="webbroken")
    status, deployed = call(jupyter_server, "POST", "models/webbroken/deploy",
                            {"cluster": CLUSTER, "command": [sys.executable, "-c", "raise SystemExit(3)"]})
    assert status == 202, deployed
    job = deployed["replicas"][0]["job"]
    # The server's thread saw its job end before it answered: the endpoint is gone, the version free.
    wait_for(lambda: api.get_model("webbroken").deployment is None, timeout=120, what="the endpoint undeployed")
    assert call(jupyter_server, "GET", f"endpoints/{deployed['id']}")[0] == 404
    assert api.get_job(job, CLUSTER).finished
    assert api.get_model("webbroken").events[-1]["event"] == "undeploy"
