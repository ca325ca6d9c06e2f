"""The model registry's routes on a real Jupyter server: what the notebook registered is
listed and described, aliases move and refusals come back as {kind, message} with their
status, versions and models are deleted; and no route answers without a login."""

from __future__ import annotations

import pytest

from jupyter_gtc import api
from tests.server.api_client import call, ok

# Each route, and what it answers with a login (no model "any" exists).
MODEL_ROUTES = [("GET", "models", 200, None), ("POST", "models", 400, "BadRequest"),
                ("GET", "models/any", 404, "ModelNotFound"), ("DELETE", "models/any@1", 404, "ModelNotFound"),
                ("POST", "models/any@1/aliases", 404, "ModelNotFound")]


@pytest.mark.parametrize(("method", "path", "status", "kind"), MODEL_ROUTES)
def test_every_model_route_refuses_a_request_without_a_login(jupyter_server, method, path, status, kind):
    payload = b"{}" if method == "POST" else None
    refused, body = call(jupyter_server, method, path, payload, token=False)
    assert refused == 403 and body["kind"] == "HTTPError", (method, path, refused, body)
    answered, body = call(jupyter_server, method, path, payload)
    assert answered == status and (kind is None or body["kind"] == kind), (method, path, answered, body)


@pytest.fixture
def model_folder(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.bin").write_bytes(b"\0" * 100)
    return tmp_path / "model"


def test_models_are_listed_described_aliased_and_deleted(jupyter_server, model_folder):
    api.register_model(model="rest-model", artifact_uri=str(model_folder), description="one", labels={"a": "b"})
    api.register_model(model="rest-model", artifact_uri=str(model_folder), alias="prod")

    row = next(m for m in ok(jupyter_server, "GET", "models")["models"] if m["name"] == "rest-model")
    assert (row["description"], row["labels"]) == ("one", {"a": "b"})
    assert [(v["version"], v["aliases"], v["deployed"]) for v in row["versions"]] == [
        (1, ["default"], False), (2, ["prod"], False)]

    whole = ok(jupyter_server, "GET", "models/rest-model%40prod")
    assert whole["version"] == 2 and whole["versions"][1]["lineage"]["source"] == str(model_folder)
    assert [e["event"] for e in whole["events"]] == ["register", "alias", "register", "alias"]
    assert ok(jupyter_server, "GET", "models/rest-model")["version"] == 1

    moved = ok(jupyter_server, "POST", "models/rest-model@2/aliases", {"aliases": ["default", "-prod"]})
    assert [v["aliases"] for v in moved["versions"]] == [[], ["default"]]

    status, body = call(jupyter_server, "POST", "models/rest-model@2/aliases", {"aliases": ["-default"]})
    assert status == 400 and body["kind"] == "SpecError" and "cannot be removed, only moved" in body["message"]
    status, body = call(jupyter_server, "POST", "models/rest-model@2/aliases", {"aliases": ["42"]})
    assert status == 400 and "cannot be a number" in body["message"]
    status, body = call(jupyter_server, "DELETE", "models/rest-model@2")
    assert status == 409 and body["kind"] == "ModelConflict" and "holds 'default'" in body["message"]
    status, body = call(jupyter_server, "GET", "models/rest-modle")
    assert status == 404 and body["kind"] == "ModelNotFound" and "did you mean 'rest-model'?" in body["message"]
    status, body = call(jupyter_server, "POST", "models", {"job": "1", "model": "x", "colour": "red"})
    assert status == 400 and "colour" in body["message"]

    assert ok(jupyter_server, "DELETE", "models/rest-model@1") == {"deleted": "rest-model@1"}
    assert [v.version for v in api.get_model("rest-model").versions] == [2]
    ok(jupyter_server, "DELETE", "models/rest-model")
    assert "rest-model" not in [m["name"] for m in ok(jupyter_server, "GET", "models")["models"]]


def test_a_diverged_final_metric_is_null_not_nan(jupyter_server):
    """A browser's JSON.parse refuses NaN: a run whose loss diverged must not break the Models section."""
    api._models().tables.register("nan-model", artifact_uri="gs://bucket/nan-model", user="tester",
                                  lineage={"metrics": {"train/loss": {"step": 3, "value": float("nan")}}})
    whole = ok(jupyter_server, "GET", "models/nan-model")
    assert whole["versions"][0]["lineage"]["metrics"]["train/loss"] == {"step": 3, "value": None}
