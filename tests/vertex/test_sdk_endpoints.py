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
from tests.conftest import no_egress, small_gpu_spec
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)
from tests.refusals import post_as_another_user
from tests.serving.tiny_model import generate_here, save_tiny_llama

pytestmark = pytest.mark.slurm

IMAGE = "us-central1-docker.pkg.dev/local-project/serving/tiny-llm:1"
MACHINE = "n2-standard-8"
PARENT = "projects/local-project/locations/us-central1"
PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


@pytest.fixture(scope="module")
def endpoint(slurm_available):
    with pytest.MonkeyPatch.context() as env:
        no_egress(env)
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

    no_egress(monkeypatch)
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

    # A version serves one endpoint at a time (the registry keeps one deployment per version).
    other = aiplatform.Endpoint.create(display_name="sdk-llama-other")
    with pytest.raises(exceptions.BadRequest, match="deployed already") as refused:
        model.deploy(endpoint=other, machine_type=MACHINE)
    assert google_error(refused.value)["status"] == "FAILED_PRECONDITION" and other.list_models() == []
    other.delete()

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


def test_list_an_empty_endpoints_refusal_a_wrong_machine_and_a_deleted_endpoint(aiplatform, endpoint, tiny):
    from google.api_core import exceptions

    first = aiplatform.Endpoint.create(display_name="sdk-empty-a", labels={"stage": "dev"})
    second = aiplatform.Endpoint.create(display_name="sdk-empty-b")
    named = aiplatform.Endpoint.list(filter='display_name="sdk-empty-b"')
    assert [e.resource_name for e in named] == [second.resource_name]
    assert {first.resource_name, second.resource_name} <= {e.resource_name for e in aiplatform.Endpoint.list()}
    assert [e.display_name for e in aiplatform.Endpoint.list(filter='labels.stage="dev"')] == ["sdk-empty-a"]
    with pytest.raises(exceptions.BadRequest, match="filter.*display_name"):
        aiplatform.Endpoint.list(filter='state="RUNNING"')

    # Nothing deployed: the error a user reads says so and what to do, in Google's shape.
    with pytest.raises(exceptions.BadRequest, match="no model is deployed") as refused:
        first.predict(instances=[{"prompt": "The", "max_tokens": 4}])
    error = google_error(refused.value)
    assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
    assert "model.deploy(endpoint=" in error["message"]

    # A machine type the cluster has no nodes of: refused at once, naming the field and what it has.
    model = aiplatform.Model.upload(display_name="sdk-llama-m", artifact_uri=str(tiny),
                                    serving_container_image_uri=IMAGE)
    with pytest.raises(exceptions.BadRequest, match=MACHINE) as refused:
        model.deploy(endpoint=first, machine_type="a2-highgpu-1g")
    assert "dedicated_resources.machine_spec.machine_type" in google_error(refused.value)["message"]
    assert first.list_models() == [] and api.get_model("sdk-llama-m").deployment is None  # nothing half-made

    second.delete()
    with pytest.raises(exceptions.NotFound, match=f"The Endpoint does not exist: {second.resource_name}") as gone:
        second.predict(instances=[{"prompt": "The"}])
    assert google_error(gone.value)["status"] == "NOT_FOUND"
    with pytest.raises(exceptions.NotFound):
        second.delete()
    assert second.resource_name not in {e.resource_name for e in aiplatform.Endpoint.list()}
    first.delete()


def test_predict_answers_429_while_the_model_is_being_deployed(aiplatform, endpoint, tiny):
    """Both nodes busy: the replica's job waits, the deploy operation is not done, and a
    prediction is refused at once with 429; once the nodes are free it answers."""
    from google.api_core import exceptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    model = aiplatform.Model.upload(display_name="sdk-llama-busy", artifact_uri=str(tiny),
                                    serving_container_image_uri=IMAGE)
    ep = aiplatform.Endpoint.create(display_name="sdk-busy")
    blocker = api.submit_job("vxep", "#!/bin/bash\nsleep 600\n", ["--nodes=2", "--exclusive"])
    blocker.wait_until_running(timeout=120)
    client = aiplatform_v1.EndpointServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                                 client_options={"api_endpoint": endpoint.api_endpoint})
    operation = client.deploy_model(request={
        "endpoint": ep.resource_name, "traffic_split": {"0": 100},
        "deployed_model": {"model": model.resource_name, "dedicated_resources": {
            "machine_spec": {"machine_type": MACHINE}, "min_replica_count": 1, "max_replica_count": 1}}})
    try:
        assert not client.get_operation(request={"name": operation.operation.name}).done
        with pytest.raises(exceptions.TooManyRequests, match="being deployed") as refused:
            ep.predict(instances=[{"prompt": "The", "max_tokens": 4}])
        assert google_error(refused.value)["status"] == "RESOURCE_EXHAUSTED"
    finally:
        blocker.cancel()
    deployed = operation.result(timeout=300).deployed_model
    answer = ep.predict(instances=[{"prompt": "The", "max_tokens": 4}])
    assert answer.deployed_model_id == deployed.id and len(answer.predictions) == 1
    ep.delete(force=True)  # the SDK undeploys first
    assert api.get_model("sdk-llama-busy").deployment is None


def test_another_local_user_is_refused_before_the_body_unless_it_shows_the_token(aiplatform, endpoint,
                                                                                  normal_user):
    """Against :predict: refused before the body is read, without the endpoint's token; with it
    in an Authorization header, the request is served."""
    ep = aiplatform.Endpoint.create(display_name="sdk-guarded")
    got = post_as_another_user(normal_user, endpoint.port, endpoint.token, f"/v1/{ep.resource_name}:predict",
                               json.dumps({"instances": [{"prompt": "The"}]}))
    assert got["none"][0] == 403 and "Authorization: Bearer" in got["none"][1], got
    assert got["wrong"][0] == 401, got
    # With the token the request reaches PredictionService, which says what is missing.
    status, answer = got["token"]
    assert status == 400 and answer["error"]["status"] == "FAILED_PRECONDITION", got
    assert "no model is deployed" in answer["error"]["message"]
    ep.delete()


def test_whole_numbers_come_back_as_ints_and_a_traffic_split_must_add_up():
    from jupyter_gtc.exceptions import SpecError
    from jupyter_gtc.services.vertex_endpoints import _traffic_split, _whole_numbers

    # What protobuf's Value made of the SDK's {"ids": [1, 2], "max_tokens": 8, "t": 0.5}.
    assert _whole_numbers([{"ids": [1.0, 2.0], "max_tokens": 8.0, "t": 0.5, "big": 1e300}]) == [
        {"ids": [1, 2], "max_tokens": 8, "t": 0.5, "big": 1e300}]
    with_one = {"deployedModels": [{"id": "111"}], "trafficSplit": {"111": 100}}
    assert _traffic_split({}, {}, "0") == {"0": 100}  # the first model takes all
    assert _traffic_split({}, with_one, "0") == {"111": 100}  # a second one none, unless asked
    assert _traffic_split({"111": 60, "0": 40}, with_one, "0") == {"111": 60, "0": 40}
    with pytest.raises(SpecError, match="traffic_split.*adding up to 100.*111"):
        _traffic_split({"111": 60, "0": 60}, with_one, "0")
    with pytest.raises(SpecError, match="traffic_split"):
        _traffic_split({"999": 100}, with_one, "0")


def test_a_stopped_endpoint_undeploys_what_it_deployed(endpoint, tiny, monkeypatch):
    """Its fronts are its threads: stopped (SIGTERM, as the kernel's end or Ctrl-C sends), it
    ends the replicas' jobs and clears the registry's rows, and leaves the endpoint empty."""
    import psutil
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    from jupyter_gtc import _ports

    for proxy in PROXIES:
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    api.register_model(artifact_uri=str(tiny), model="stopped-llama")
    second = api.start_vertex_endpoint("vxep", port=_ports.free_ports(1, "127.0.0.1")[0])  # beside the module's
    assert second.port != endpoint.port
    options = {"api_endpoint": second.api_endpoint}
    endpoints = aiplatform_v1.EndpointServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                                    client_options=options)
    created = endpoints.create_endpoint(parent=PARENT, endpoint={"display_name": "stopped"}).result()
    deployed = endpoints.deploy_model(request={
        "endpoint": created.name, "traffic_split": {"0": 100},
        "deployed_model": {"model": f"{PARENT}/models/stopped-llama", "dedicated_resources": {
            "machine_spec": {"machine_type": MACHINE}, "min_replica_count": 1}}}).result(timeout=300)
    jobs = [r["job"] for r in api.get_model("stopped-llama").deployment["replicas"]]
    assert deployed.deployed_model.model_version_id == "1" and jobs

    process = psutil.Process(second.process["pid"])
    process.terminate()
    process.wait(timeout=120)
    assert api.get_model("stopped-llama").deployment is None
    assert all(api.get_job(job, "vxep").finished for job in jobs)
    record = json.loads((api._clusters().home / "vertex" / "endpoint-resources" /
                         f"{created.name.rsplit('/', 1)[1]}.json").read_text())
    assert record["resource"].get("deployedModels", []) == [] and record["serving"] == {}
