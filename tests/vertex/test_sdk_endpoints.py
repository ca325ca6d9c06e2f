"""The official Vertex AI SDK (google-cloud-aiplatform), unpatched, against the local Vertex
endpoint's EndpointService and PredictionService: a model the SDK uploads is deployed to an
endpoint the SDK created, as Slurm jobs of the endpoint's cluster running our LM server (the
tiny Llama), and ``Endpoint.predict`` is answered by it; undeploy, delete, list, and the
errors a user reads (nothing deployed, an endpoint that is gone, another user's request).

No request may leave the machine: the SDK's proxies point at a port where nothing listens."""

from __future__ import annotations

import http.client
import json

import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec
from tests.serving.tiny_model import generate_here, save_tiny_llama

pytestmark = pytest.mark.slurm

IMAGE = "us-central1-docker.pkg.dev/local-project/serving/tiny-llm:1"
MACHINE = "n2-standard-8"
PARENT = "projects/local-project/locations/us-central1"
PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


@pytest.fixture(scope="module")
def endpoint(slurm_available):
    with pytest.MonkeyPatch.context() as env:
        for proxy in PROXIES:
            env.setenv(proxy, "http://127.0.0.1:9")  # discard: nothing answers there
        env.setenv("NO_PROXY", "127.0.0.1,localhost")
        env.setenv("no_proxy", "127.0.0.1,localhost")
        env.setenv("OMP_NUM_THREADS", "1")  # the replicas' torch, on the shared cores (notes/recipes.md)
        # Two nodes of one CPU each: a replica's job takes one, so two replicas can run.
        cluster = api.create_cluster(small_gpu_spec("vxep", nodes=2, machine=MACHINE))
        endpoint = api.start_vertex_endpoint(cluster.name)
        yield endpoint
        api.delete_cluster(cluster.name)


@pytest.fixture
def aiplatform(endpoint, monkeypatch):
    """The SDK as %gtc_vertex_local points it at the endpoint."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    for proxy in PROXIES:
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.storage_host)  # the SDK's uploads
    aiplatform.init(project="local-project", location="us-central1", staging_bucket="gs://local-bucket",
                    api_endpoint=endpoint.api_endpoint, api_transport="rest", credentials=AnonymousCredentials())
    return aiplatform


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_llama(tmp_path_factory.mktemp("llama") / "model")


def google_error(error) -> dict:
    """The error's answer as Google's APIs give it (the SDK's exception keeps the HTTP response)."""
    return error.response.json()["error"]


def calls(endpoint) -> list[tuple[str, str, int]]:
    lines = api.vertex_request_log().read_text().splitlines()
    return [(c["method"], c["path"], c["status"]) for c in map(json.loads, lines)]


def test_upload_create_deploy_predict_undeploy_delete(aiplatform, endpoint, tiny):
    from google.api_core import exceptions

    model = aiplatform.Model.upload(display_name="sdk-llama", artifact_uri=str(tiny),
                                    serving_container_image_uri=IMAGE)
    ep = aiplatform.Endpoint.create(display_name="sdk-llama-ep", labels={"team": "nlp"})
    assert ep.display_name == "sdk-llama-ep" and ep.resource_name.startswith(f"{PARENT}/endpoints/")
    model.deploy(endpoint=ep, machine_type=MACHINE, min_replica_count=1, max_replica_count=2)

    # The deployed model: one of our endpoints, replicas as Slurm jobs of the endpoint's cluster.
    [deployed] = ep.list_models()
    assert (deployed.model, deployed.model_version_id) == (model.resource_name, "1")
    assert dict(ep.traffic_split) == {deployed.id: 100}
    ours = api.get_model("sdk-llama").deployment
    assert ours["deployed_model_id"] == deployed.id
    assert (ours["cluster"], ours["min_replicas"], ours["max_replicas"]) == ("vxep", 1, 2)

    # Predictions through the SDK (protobuf Value: the 8 arrives as 8.0), answered by the tiny Llama.
    prompts = ["The try statement", "A function definition"]
    answer = ep.predict(instances=[{"prompt": p, "max_tokens": 8} for p in prompts])
    assert [p["text"] for p in answer.predictions] == generate_here(tiny, prompts, 8)
    assert (answer.deployed_model_id, answer.model_resource_name, answer.model_version_id) == (
        deployed.id, model.resource_name, "1")
    # A bad instance: 400 with the reason, in Google's error shape.
    with pytest.raises(exceptions.BadRequest, match=r"instances\[0\]\.max_tokens") as refused:
        ep.predict(instances=[{"prompt": "x", "max_tokens": 0}])
    assert google_error(refused.value)["status"] == "INVALID_ARGUMENT"

    # :rawPredict over plain HTTP (the SDK's raw_predict builds a googleapis.com URL), numbers as sent.
    raw = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=120)
    raw.request("POST", f"/v1/{ep.resource_name}:rawPredict", headers={"Content-Type": "application/json"},
                body=json.dumps({"instances": [{"prompt": prompts[0], "max_tokens": 8}]}))
    response = raw.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["predictions"][0]["text"] == answer.predictions[0]["text"]

    # A deployed endpoint is not deleted; undeploy_all ends the replicas' jobs.
    with pytest.raises(exceptions.BadRequest, match="undeploy") as refused:
        ep.delete()
    assert google_error(refused.value)["status"] == "FAILED_PRECONDITION"
    jobs = [r["job"] for r in ours["replicas"]]
    ep.undeploy_all()
    assert ep.list_models() == [] and dict(ep.traffic_split) == {}
    assert api.get_model("sdk-llama").deployment is None
    assert all(api.get_job(job, "vxep").finished for job in jobs)
    ep.delete()
    with pytest.raises(exceptions.NotFound, match=f"does not exist: {ep.resource_name}") as gone:
        ep.predict(instances=[{"prompt": "x"}])
    assert google_error(gone.value)["status"] == "NOT_FOUND"
    with pytest.raises(exceptions.NotFound):
        aiplatform.Endpoint(ep.name).gca_resource  # noqa: B018 - the SDK's lazy GET
    # Every operation was polled at /ui/ (the SDK's way), and answered.
    polls = [c for c in calls(endpoint) if c[1].startswith(f"/ui/{ep.resource_name}/operations/")]
    assert polls and all(status == 200 for _, _, status in polls)
