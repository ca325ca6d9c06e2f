"""The official Vertex AI SDK (google-cloud-aiplatform), unpatched, against the local Vertex
endpoint's ModelService: a model the SDK uploads is a model of our registry (``gtc.models``),
its versions and aliases under the same rules, and a model registered here is one the SDK
finds; a registered version exported with ``export_to_vertex`` through a Vertex target.

No request may leave the machine: the SDK's proxies point at a port where nothing listens."""

from __future__ import annotations

import json

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import ModelNotFound
from jupyter_gtc.registry import ModelRef
from tests.conftest import no_egress

pytestmark = pytest.mark.slurm

IMAGE = "us-central1-docker.pkg.dev/local-project/serving/tiny-llm:1"  # a custom container (no file checks)


@pytest.fixture(scope="module")
def endpoint(slurm_available):
    from tests.conftest import small_gpu_spec

    with pytest.MonkeyPatch.context() as env:
        no_egress(env)
        cluster = api.create_cluster(small_gpu_spec("vxmodels", nodes=1))
        endpoint = api.start_vertex_endpoint(cluster.name)
        target = api.attach_vertex({"display_name": "vxm", "api_endpoint": f"local:{endpoint.port}"})
        yield endpoint, target.name
        api.detach_cluster(target.name)
        api.delete_cluster(cluster.name)


@pytest.fixture
def aiplatform(endpoint, monkeypatch):
    """The SDK as %gtc_vertex_local points it at the endpoint."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    no_egress(monkeypatch)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint[0].storage_host)  # the SDK's uploads
    aiplatform.init(project="local-project", location="us-central1", staging_bucket="gs://local-bucket",
                    api_endpoint=endpoint[0].api_endpoint, api_transport="rest", credentials=AnonymousCredentials())
    return aiplatform


@pytest.fixture
def folder(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (model / "weights.bin").write_bytes(bytes(range(256)) * 64)
    return model


def google_status(error) -> str:
    """The canonical status of an error's answer (the SDK's exception keeps the HTTP response)."""
    return error.response.json()["error"]["status"]


def model_id(model) -> str:
    return model.resource_name.rsplit("/", 1)[1]


def test_upload_a_folder_then_a_version_with_an_alias_is_a_registry_model(aiplatform, folder):
    first = aiplatform.Model.upload(display_name="sdk-tiny", artifact_uri=str(folder),
                                    serving_container_image_uri=IMAGE, description="a tiny model",
                                    labels={"team": "nlp"})
    assert (first.version_id, first.version_aliases) == ("1", ["default"])
    assert model_id(first).isdigit() and len(model_id(first)) == 19
    # The SDK uploaded the folder to the staging bucket (the storage emulator): the files are there.
    assert first.uri.startswith("gs://local-bucket/vertex_ai_auto_staging/")
    staged = api.gcs_root() / first.uri.removeprefix("gs://")
    assert (staged / "weights.bin").read_bytes() == (folder / "weights.bin").read_bytes()
    assert first.container_spec.image_uri == IMAGE and first.labels == {"team": "nlp"}
    types = aiplatform.gapic.Model.DeploymentResourcesType
    assert list(first.gca_resource.supported_deployment_resources_types) == [types.DEDICATED_RESOURCES]

    second = aiplatform.Model.upload(display_name="sdk-tiny", parent_model=first.resource_name,
                                     artifact_uri=str(folder), serving_container_image_uri=IMAGE,
                                     version_aliases=["prod"], is_default_version=False)
    assert model_id(second) == model_id(first)
    assert (second.version_id, second.version_aliases) == ("2", ["prod"])
    assert aiplatform.Model(f"{model_id(first)}@prod").version_id == "2"
    assert aiplatform.Model(model_id(first)).version_id == "1"  # the default version
    # The same model in our registry, under the same rules.
    assert api.get_model("sdk-tiny@prod").version == 2 and api.get_model("sdk-tiny").version == 1
    assert api.get_model("sdk-tiny@2").artifact_uri == second.uri
    assert api.get_model("sdk-tiny@2").lineage["origin"]["container_spec"]["imageUri"] == IMAGE

    from google.api_core import exceptions

    with pytest.raises(exceptions.Conflict, match="parent_model") as refused:  # one model per name here
        aiplatform.Model.upload(display_name="sdk-tiny", artifact_uri=str(folder), serving_container_image_uri=IMAGE)
    assert google_status(refused.value) == "ALREADY_EXISTS"
    with pytest.raises(exceptions.BadRequest, match="alias"):
        aiplatform.Model.upload(display_name="sdk-tiny", parent_model=model_id(first), artifact_uri=str(folder),
                                serving_container_image_uri=IMAGE, version_aliases=["Prod!"])
    with pytest.raises(exceptions.BadRequest, match="display_name"):  # the registry's name: a folder's
        aiplatform.Model.upload(display_name="my model/v2", artifact_uri=str(folder), serving_container_image_uri=IMAGE)
    with pytest.raises(exceptions.BadRequest, match="artifact_uri"):
        aiplatform.Model.upload(display_name="sdk-none", artifact_uri="gs://local-bucket/nothing-here",
                                serving_container_image_uri=IMAGE)
    assert [v.version for v in api.get_model("sdk-tiny").versions] == [1, 2]  # the refusals added nothing


def test_model_registry_lists_versions_and_moves_and_removes_aliases(aiplatform, folder):
    from google.api_core import exceptions

    first = aiplatform.Model.upload(display_name="sdk-reg", artifact_uri=str(folder), serving_container_image_uri=IMAGE)
    aiplatform.Model.upload(display_name="sdk-reg", parent_model=first.resource_name, artifact_uri=str(folder),
                            serving_container_image_uri=IMAGE, is_default_version=False)
    registry = aiplatform.models.ModelRegistry(first)
    versions = {v.version_id: v.version_aliases for v in registry.list_versions()}
    assert versions == {"1": ["default"], "2": []}

    registry.add_version_aliases(["candidate"], version="2")
    assert api.get_model("sdk-reg@candidate").version == 2
    assert registry.get_model(version="candidate").version_id == "2"
    registry.add_version_aliases(["candidate"], version="1")  # an alias applied elsewhere moves
    assert api.get_model("sdk-reg@1").aliases == ["default", "candidate"] and api.get_model("sdk-reg@2").aliases == []
    registry.remove_version_aliases(["candidate"], version="1")
    assert api.get_model("sdk-reg@1").aliases == ["default"]
    with pytest.raises(exceptions.BadRequest, match="default"):
        registry.remove_version_aliases(["default"], version="1")

    # FAILED_PRECONDITION is HTTP 400, as Google answers it: the SDK raises BadRequest.
    with pytest.raises(exceptions.BadRequest, match="default") as refused:
        registry.delete_version("1")  # the default version
    assert google_status(refused.value) == "FAILED_PRECONDITION"
    # A deployed version stays (the registry's deployment row, as serving records it).
    tables, version_2 = api._models().tables, ModelRef("sdk-reg", version=2)
    tables.set_deployment(version_2, {"endpoint": "ep-test", "cluster": "vxmodels"}, "tester")
    with pytest.raises(exceptions.BadRequest, match="deployed") as refused:
        registry.delete_version("2")
    assert google_status(refused.value) == "FAILED_PRECONDITION"
    tables.set_deployment(version_2, None, "tester")
    registry.delete_version("2")
    assert [v.version_id for v in registry.list_versions()] == ["1"]
    with pytest.raises(exceptions.BadRequest, match="only version") as refused:
        registry.delete_version("1")
    assert google_status(refused.value) == "FAILED_PRECONDITION"
    with pytest.raises(exceptions.NotFound):
        registry.get_model(version="2")
    events = [e["event"] for e in api.get_model("sdk-reg").events]
    assert events.count("alias") >= 3 and "unalias" in events and "delete_version" in events


def test_list_filters_by_display_name_and_pages_and_delete(aiplatform, folder, endpoint):
    from google.api_core import exceptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    for name in ("sdk-list-a", "sdk-list-b", "sdk-list-c"):
        aiplatform.Model.upload(display_name=name, artifact_uri=str(folder), serving_container_image_uri=IMAGE)
    named = aiplatform.Model.list(filter='display_name="sdk-list-b"')
    assert [(m.display_name, m.version_id) for m in named] == [("sdk-list-b", "1")]
    client = aiplatform_v1.ModelServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                              client_options={"api_endpoint": endpoint[0].api_endpoint})
    # Uploads and deletes are operations, finished when answered and there for the SDK's poll.
    upload = client.upload_model(request={"parent": "projects/local-project/locations/us-central1",
                                          "model": {"display_name": "sdk-list-d", "artifact_uri": named[0].uri}})
    polled = client.get_operation(request={"name": upload.operation.name})
    assert polled.done and upload.result().model_version_id == "1"
    calls = [json.loads(line) for line in api.vertex_request_log().read_text().splitlines()]
    assert {"method": "GET", "path": f"/ui/{upload.operation.name}", "status": 200} in [
        {k: c[k] for k in ("method", "path", "status")} for c in calls]
    assert api.get_model("sdk-list-d").artifact_uri == named[0].uri

    every = {m.display_name for m in aiplatform.Model.list()}
    assert {"sdk-list-a", "sdk-list-b", "sdk-list-c", "sdk-list-d"} <= every
    pages = list(client.list_models(request={"parent": "projects/local-project/locations/us-central1",
                                             "page_size": 2}).pages)
    assert len(pages) == (len(every) + 1) // 2 and all(len(p.models) <= 2 for p in pages)
    assert {m.display_name for p in pages for m in p.models} == every

    doomed = named[0]
    doomed.delete()
    with pytest.raises(exceptions.NotFound):
        aiplatform.Model(model_id(doomed))
    with pytest.raises(ModelNotFound, match="no model named 'sdk-list-b'"):
        api.get_model("sdk-list-b")


def test_a_registered_model_is_found_by_the_sdk_and_exported(aiplatform, folder, endpoint):
    registered = api.register_model(model="exp-model", artifact_uri=str(folder), alias="prod",
                                    description="from a folder", labels={"stage": "test"})
    by_name = aiplatform.Model("exp-model@prod")  # the registry's name is an ID too
    assert (by_name.display_name, by_name.version_id, by_name.uri) == ("exp-model", "1", str(folder))

    exported = registered.export_to_vertex(target=endpoint[1])
    assert (exported.resource_name, exported.version_id) == (by_name.resource_name, "2")  # a version of it
    assert exported.artifact_uri.startswith("gs://local-bucket/jupyter_gtc/models/exp-model/1-")
    files = api.gcs_root() / exported.artifact_uri.removeprefix("gs://")
    assert sorted(p.name for p in files.iterdir()) == ["config.json", "weights.bin"]
    version = aiplatform.Model(f"{model_id(by_name)}@2")
    assert version.uri == exported.artifact_uri and version.labels == {"stage": "test"}
    assert set(version.version_aliases) == {"default", "prod"}  # the aliases went with it
    assert api.get_model("exp-model@prod").version == 2

    copy = api.get_model("exp-model@1").export_to_vertex(endpoint[1], display_name="exp-copy",
                                                        serving_container_image_uri=IMAGE)
    assert copy.version_id == "1" and api.get_model("exp-copy").artifact_uri == copy.artifact_uri
    assert aiplatform.Model(copy.resource_name).container_spec.image_uri == IMAGE
