"""Vertex AI's ``ModelService`` (aiplatform v1) served from our model registry
(``services/models.py``): what the local Vertex endpoint answers for ``models``. A model the
SDK uploads is a model of ``gtc.models``, with its versions and aliases under the registry's
rules (Vertex's), and every registered model is a Vertex ``Model`` here.

A model's ID is made from its registry name (19 digits, as Vertex's IDs are), so it is the
same in every process and after a restart, with nothing more stored; the registry name is the
model's ``displayName``, and also accepted as its ID (``aiplatform.Model("llama-tiny@prod")``).
Vertex lets two models share a display name; the registry does not, so an upload of a name
that is registered, without ``parent_model``, is refused (ALREADY_EXISTS) saying to give
``parent_model``. What only Vertex keeps (the serving container, the version's own
description) is kept in the version's lineage, under ``origin``.

Requests are parsed, and resources emitted, with the SDK's own types (``services/vertex.py``'s
``parse`` and ``to_json``); only the endpoint's process imports this module.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any

from google.cloud.aiplatform_v1 import types as vx

from ..exceptions import InvalidArgument, ModelConflict, ModelNotFound, SpecError
from ..registry.rules import DEFAULT_ALIAS, ModelRef, check_model_name
from .models import Model, ModelService
from .vertex import gcs_path, parse, parse_filter, to_json

ORIGIN = "vertex_upload"  # lineage.origin.kind of a version the SDK uploaded
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1."


class ModelExists(ModelConflict):
    """An upload without ``parent_model`` of a display name the registry has already."""

    http_status = 409
    google_status = "ALREADY_EXISTS"


def model_id(name: str) -> str:
    """The Vertex ID of registry model ``name``: 19 digits from its name's hash (stable)."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return str(10**18 + digest % (9 * 10**18))


class VertexModels:
    """ModelService's methods; each returns the JSON the REST API answers (an operation's
    ``response`` and ``metadata`` for the long-running ones, which finish before they answer)."""

    def __init__(self, models: ModelService, gcs_root: Path):
        self.models = models
        self.gcs_root = gcs_root
        # An upload's "is the name free" and its registration, one at a time: the endpoint
        # serves each connection in its own thread, and two uploads of one new name must not
        # both pass the check (the second would silently be version 2).
        self._uploading = threading.Lock()

    # -- reads -----------------------------------------------------------------------

    def get(self, parent: str, id: str, selector: str | None = None) -> dict[str, Any]:
        name = self._name_of(parent, id)
        return self._resource(parent, self.models.get(str(_ref(name, selector))))

    def list(self, parent: str, query: dict[str, str]) -> dict[str, Any]:
        """Each model as its default version, by name; ``filter`` and paging as Vertex takes them."""
        models = [Model(self.models, record.name, version.version) for record in self.models.list()
                  for version in record.versions if DEFAULT_ALIAS in version.aliases]
        resources = [self._resource(parent, m) for m in models]
        return _page(_filtered(resources, query.get("filter", "")), query, "models")

    def list_versions(self, parent: str, id: str, query: dict[str, str], selector: str | None = None) -> dict[str, Any]:
        name = self._name_of(parent, id)
        versions = [Model(self.models, name, v.version) for v in self.models.tables.get_model(name).versions]
        resources = [self._resource(parent, m) for m in versions]
        return _page(_filtered(resources, query.get("filter", "")), query, "models")

    # -- changes ---------------------------------------------------------------------

    def upload(self, parent: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A new model, or a new version of ``parentModel``; (its resource name, the operation's
        ``response``). Everything is checked before the registry is written."""
        request = parse(vx.UploadModelRequest, {k: v for k, v in body.items() if k != "parent"},
                        "google.cloud.aiplatform.v1.UploadModelRequest")
        model = request.model
        if request.model_id:
            raise SpecError("model_id", request.model_id, "leave it out: the local endpoint makes a model's ID from "
                                                          "its display_name (the registry's name)")
        uri = self._artifacts(model.artifact_uri)
        origin: dict[str, Any] = {"kind": ORIGIN, "version_description": model.version_description}
        if "container_spec" in model:
            origin["container_spec"] = to_json(model.container_spec)
        with self._uploading:
            if request.parent_model:
                name = self._name_of(parent, _id_of(request.parent_model, parent, "parent_model"))
            else:
                name = check_model_name(model.display_name, "model.display_name")
                if any(record.name == name for record in self.models.list()):
                    raise ModelExists("model.display_name", name,
                                      f"a model named {name!r} is registered already (ID {model_id(name)}); give "
                                      f"parent_model={model_id(name)!r} to add a version to it, or another "
                                      f"display_name")
            added = self.models.register(model=name, alias=list(model.version_aliases),
                                         description=model.description, labels=dict(model.labels), artifact_uri=uri,
                                         origin=origin)
        resource = f"{parent}/models/{model_id(name)}"
        return resource, {"@type": _TYPE + "UploadModelResponse", "model": resource,
                          "modelVersionId": str(added.version)}

    def merge_aliases(self, parent: str, id: str, body: dict[str, Any], selector: str | None = None) -> dict[str, Any]:
        request = parse(vx.MergeVersionAliasesRequest, {k: v for k, v in body.items() if k != "name"},
                        "google.cloud.aiplatform.v1.MergeVersionAliasesRequest")
        target = self.models.get(str(_ref(self._name_of(parent, id), selector)))
        self.models.merge_aliases(ModelRef(target.name, version=target.version), list(request.version_aliases))
        return self._resource(parent, target)

    def delete_version(self, parent: str, id: str, selector: str | None = None) -> str:
        if not selector:
            raise SpecError("name", f"{parent}/models/{id}", "a version to delete: models/ID@VERSION or "
                                                             "models/ID@ALIAS (to delete the model, DELETE models/ID)")
        target = self.models.get(str(_ref(self._name_of(parent, id), selector)))
        self.models.delete(ModelRef(target.name, version=target.version))
        return f"{parent}/models/{model_id(target.name)}"

    def delete(self, parent: str, id: str) -> str:
        name = self._name_of(parent, id)
        self.models.delete(ModelRef(name))
        return f"{parent}/models/{model_id(name)}"

    # -- the registry as Vertex's resources ------------------------------------------------

    def _name_of(self, parent: str, id: str) -> str:
        """The registry's name for Vertex ID ``id`` (or for the name itself)."""
        names = [record.name for record in self.models.list()]
        for name in names:
            if id in (name, model_id(name)):
                return name
        raise ModelNotFound(id, f"The Model does not exist: {parent}/models/{id} (the local endpoint's models are "
                                f"the registry's: {', '.join(f'{n} (ID {model_id(n)})' for n in names[:8]) or 'none'})")

    def _artifacts(self, uri: str) -> str:
        """``uri`` as the registry keeps it: a folder of the local buckets that holds files (the
        SDK has uploaded a local folder there already)."""
        if not uri:
            raise SpecError("model.artifact_uri", "", "the gs:// folder of the model's files (Model.upload("
                                                       "artifact_uri=) uploads a local folder to the staging bucket)")
        path = gcs_path(self.gcs_root, uri.rstrip("/"), "model.artifact_uri")
        if not path.is_dir() or not any(path.iterdir()):
            raise SpecError("model.artifact_uri", uri, "a gs://BUCKET/FOLDER of the local buckets that holds the "
                                                       "model's files (the local endpoint's buckets are its storage "
                                                       "emulator's: upload there, or give Model.upload a local folder)")
        return uri

    def _resource(self, parent: str, model: Model) -> dict[str, Any]:
        record = model.record
        whole = self.models.tables.get_model(model.name)
        origin = (record.lineage or {}).get("origin") or {}
        resource = vx.Model(
            name=f"{parent}/models/{model_id(model.name)}", display_name=model.name,
            description=whole.description, version_id=str(record.version), version_aliases=record.aliases,
            version_description=origin.get("version_description") or record.description,
            create_time=_time(whole.created_at), update_time=_time(whole.updated_at),
            version_create_time=_time(record.created_at), version_update_time=_time(record.created_at),
            artifact_uri=record.artifact_uri, labels=record.labels,
            # Without it the SDK's deploy() sends no machine resources (measured).
            supported_deployment_resources_types=[vx.Model.DeploymentResourcesType.DEDICATED_RESOURCES])
        if origin.get("container_spec"):
            resource.container_spec = vx.ModelContainerSpec.from_json(json.dumps(origin["container_spec"]))
        return to_json(resource)


def _ref(name: str, selector: str | None) -> ModelRef:
    if not selector:
        return ModelRef(name)
    if selector.isdigit():
        return ModelRef(name, version=int(selector))
    return ModelRef(name, alias=selector)


def _id_of(resource: str, parent: str, field: str) -> str:
    """The ID in ``projects/P/locations/L/models/ID`` (or ``ID`` alone)."""
    match = re.fullmatch(r"(?:projects/[^/]+/locations/[^/]+/models/)?([^/@:]+)", resource)
    if match is None:
        raise SpecError(field, resource, f"a model's resource name, {parent}/models/ID, or its ID")
    return match[1]


def _filtered(resources: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """``display_name="x"`` and ``labels.k="v"`` terms (``services/vertex.py``'s grammar)."""
    wanted = parse_filter(text)
    for key, _ in wanted:
        if key == "state":
            raise InvalidArgument('filter: a Model has no state; filter on display_name="NAME" or labels.KEY="VALUE"')
    return [r for r in resources if all(
        (r.get("labels", {}).get(key[len("labels."):]) if key.startswith("labels.") else r.get(key)) == value
        for key, value in wanted)]


def _page(resources: list[dict[str, Any]], query: dict[str, str], field: str) -> dict[str, Any]:
    """One page of ``resources``: ``pageSize`` of them from ``pageToken`` (an offset, opaque to
    the SDK), with ``nextPageToken`` while more follow."""
    size_text, token = query.get("pageSize") or str(DEFAULT_PAGE_SIZE), query.get("pageToken") or "0"
    if not size_text.isdigit():
        raise SpecError("page_size", size_text, f"a whole number, at most {MAX_PAGE_SIZE}")
    if not token.isdigit() or int(token) > len(resources):
        raise SpecError("page_token", token, "the nextPageToken of the page before, as the list answered it")
    start, size = int(token), min(int(size_text) or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    answer: dict[str, Any] = {field: resources[start:start + size]}
    if start + size < len(resources):
        answer["nextPageToken"] = str(start + size)
    return answer


def _time(epoch: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
