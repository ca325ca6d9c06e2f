"""Vertex AI training clusters (``modelDevelopmentClusters``, v1beta1) through our client
(``vertex_clusters/client.py``) against the local Vertex endpoint, which serves them from real
local clusters: a create from examples/clusters/local-a3.yaml with its progress lines, a scale,
a node reported faulty and replaced by the supervisor, a delete; a hyphenated id refused.

No request may leave the machine: proxies point at a port where nothing listens."""

from __future__ import annotations

from pathlib import Path

import json

import pytest
import requests

import jupyter_gtc
from jupyter_gtc import api
from jupyter_gtc.exceptions import CloudApiError, SpecError
from jupyter_gtc.spec.cluster import load_cluster_spec
from tests.conftest import sleep_until
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)
from tests.refusals import post_as_another_user
from tests.vertex_clusters.conftest import local_vertex_endpoint, training_clusters

pytestmark = pytest.mark.slurm

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"
PARENT = "projects/local-project/locations/us-central1"


@pytest.fixture(scope="module")
def endpoint(slurm_available):
    with local_vertex_endpoint("vxchost", made=("vxtrain",)) as served:
        yield served.endpoint


@pytest.fixture
def client(endpoint):
    return training_clusters(endpoint)


def body() -> dict:
    return load_cluster_spec(EXAMPLE).to_vertex()  # the spec as a user wrote it, in Vertex's JSON


def nodes(cluster: dict) -> list[dict]:
    return cluster["clusterStatus"]["nodesStatus"]


def test_create_scale_report_faulty_and_delete_a_training_cluster(client):
    lines: list[str] = []
    cluster = client.create("vxtrain", body(), progress=lines.append)
    assert cluster["name"] == f"{PARENT}/modelDevelopmentClusters/vxtrain"
    assert cluster["clusterStatus"]["state"] == "RUNNING"
    assert [(n["nodePoolId"], n["nodeState"]) for n in nodes(cluster)] == \
        [("a3", "RUNNING")] * 2 + [("login", "RUNNING")]
    assert nodes(cluster)[-1]["instanceName"] == "vxtrain-login-0"  # the login node, which clients reach over SSH
    # The operation's progressMessage came through as progress lines: the local create's own steps
    # (those seen at each poll; at least its last, once done).
    assert lines[0].startswith("creating training cluster vxtrain") and len(lines) >= 2, lines
    assert "starting the supervisor" in lines or len(lines) > 2, lines
    assert "vxtrain" in [c["name"].rsplit("/", 1)[1] for c in client.list(page_size=1)]  # followed pageToken

    lines.clear()
    cluster = client.scale("vxtrain", "a3", 3, progress=lines.append)
    assert cluster["clusterStatus"]["state"] == "RUNNING"
    assert [(n["nodePoolId"], n["nodeState"]) for n in nodes(cluster)] == \
        [("a3", "RUNNING")] * 3 + [("login", "RUNNING")]
    assert lines[0] == "scaling pool a3 of vxtrain to 3 node(s)" and len(lines) >= 2, lines

    node = nodes(cluster)[1]
    client.report_faulty_node("vxtrain", node["instanceName"],
                              [{"behavior": "PERFORMANCE", "description": "slow all-reduce"}])

    def replaced() -> dict | None:
        now = client.get("vxtrain")
        done = [e for e in now["clusterEvents"] if e["eventType"] == "VM_REPORT_AND_REPLACEMENT"
                and e["instanceName"] == node["instanceName"]]
        back = [n for n in nodes(now) if n["instanceName"] == node["instanceName"] and n["nodeState"] == "RUNNING"]
        return now if done and back else None

    assert sleep_until(replaced, timeout=120), client.get("vxtrain")["clusterEvents"]
    now = replaced()
    drained = [e for e in now["clusterEvents"] if e["eventType"] == "VM_SLURM_DRAIN"]
    assert drained and "slow all-reduce" in drained[0]["description"]
    after = next(n for n in nodes(now) if n["instanceName"] == node["instanceName"])
    assert after["physicalHost"] != node["physicalHost"]  # new hardware under the same name

    client.delete("vxtrain")
    with pytest.raises(CloudApiError) as gone:
        client.get("vxtrain")
    assert gone.value.status == "NOT_FOUND"


def test_a_hyphenated_id_is_refused_naming_the_rule(client, endpoint):
    with pytest.raises(SpecError) as refused:
        client.create("my-train", body())
    assert "^[a-z][a-z0-9]{0,9}$" in str(refused.value) and "did you mean 'mytrain'" in str(refused.value)
    # The endpoint refuses it at the wire too, as Google does, with nothing made.
    answer = requests.post(f"{endpoint.api_endpoint}/v1beta1/{PARENT}/modelDevelopmentClusters",
                           params={"modelDevelopmentClusterId": "my-train"}, json=body(), timeout=30)
    assert answer.status_code == 400
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "no hyphens" in answer.json()["error"]["message"]
    assert "my-train" not in [c.name for c in api.list_clusters(with_status=False)]


def test_another_local_user_is_refused_before_the_body_unless_it_shows_the_token(endpoint, normal_user):
    """Against a create: refused before the body is read without the endpoint's token (403), with
    a wrong one (401); with it, served (here: the id refused)."""
    path = f"/v1beta1/{PARENT}/modelDevelopmentClusters?modelDevelopmentClusterId=vx-other"
    got = post_as_another_user(normal_user, endpoint.port, endpoint.token, path, json.dumps(body()))
    assert (got["none"][0], got["wrong"][0]) == (403, 401), got
    status, answer = got["token"]
    assert status == 400 and "no hyphens" in answer["error"]["message"], got  # reached the service
    assert "vx-other" not in [c.name for c in api.list_clusters(with_status=False)]
