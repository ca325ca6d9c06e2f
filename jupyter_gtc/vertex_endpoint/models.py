"""The local Vertex endpoint's routes of Vertex AI's ``ModelService`` (v1, REST), answered by
``api.vertex_models()`` (the model registry as Vertex's ``Model`` resources). The SDK sends a
version in the path as ``models/ID%40VERSION`` (or ``%40ALIAS``); the server unquotes paths
before they are matched here.

Uploads and deletes are long-running operations in Vertex; here they are done before they
answer, and kept (in the endpoint's memory, with the job routes' operations) for the SDK's
poll at ``/ui/.../operations/OP``.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from .. import api
from ..exceptions import OperationNotFound

_PARENT = r"(?P<parent>projects/[^/]+/locations/[^/]+)"
_MODEL = _PARENT + r"/models/(?P<id>[^/:@]+)"
_VERSION = _MODEL + r"(?:@(?P<selector>[^/:@]+))?"
# (method, path after /v1/ or /ui/, handler name): the server's ROUTES take these too.
MODEL_ROUTES = [
    ("POST", re.compile(_PARENT + r"/models:upload"), "upload_model"),
    ("GET", re.compile(_PARENT + r"/models"), "list_models"),
    ("GET", re.compile(_VERSION), "get_model"),
    ("GET", re.compile(_VERSION + r":listVersions"), "list_model_versions"),
    ("POST", re.compile(_VERSION + r":mergeVersionAliases"), "merge_version_aliases"),
    ("DELETE", re.compile(_VERSION + r":deleteVersion"), "delete_model_version"),
    ("DELETE", re.compile(_MODEL), "delete_model"),
    ("GET", re.compile(_MODEL + r"/operations/(?P<op>[^/]+)"), "get_model_operation"),
]
TAKES_BODY = {"upload_model", "merge_version_aliases"}
TAKES_QUERY = {"list_models", "list_model_versions"}
_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1."


class ModelMethods:
    """ModelService's handlers, mixed into the server's ``Endpoint`` (whose ``operations`` they share)."""

    operations: dict[str, dict[str, Any]]
    _vertex_models: Any = None

    @property
    def _models(self) -> Any:
        if self._vertex_models is None:  # the SDK's types load with it: at the first model call only
            self._vertex_models = api.vertex_models()
        return self._vertex_models

    def upload_model(self, body: dict[str, Any], parent: str) -> dict[str, Any]:
        resource, response = self._models.upload(parent, body)
        return self._operation(resource, "UploadModelOperationMetadata", response)

    def list_models(self, query: dict[str, str], parent: str) -> dict[str, Any]:
        return self._models.list(parent, query)

    def get_model(self, parent: str, id: str, selector: str | None = None) -> dict[str, Any]:
        return self._models.get(parent, id, selector)

    def list_model_versions(self, query: dict[str, str], parent: str, id: str,
                            selector: str | None = None) -> dict[str, Any]:
        return self._models.list_versions(parent, id, query, selector)

    def merge_version_aliases(self, body: dict[str, Any], parent: str, id: str,
                              selector: str | None = None) -> dict[str, Any]:
        return self._models.merge_aliases(parent, id, body, selector)

    def delete_model_version(self, parent: str, id: str, selector: str | None = None) -> dict[str, Any]:
        return self._operation(self._models.delete_version(parent, id, selector), "DeleteOperationMetadata",
                               {"@type": "type.googleapis.com/google.protobuf.Empty"})

    def delete_model(self, parent: str, id: str) -> dict[str, Any]:
        return self._operation(self._models.delete(parent, id), "DeleteOperationMetadata",
                               {"@type": "type.googleapis.com/google.protobuf.Empty"})

    def get_model_operation(self, parent: str, id: str, op: str) -> dict[str, Any]:
        name = f"{parent}/models/{id}/operations/{op}"
        if name not in self.operations:
            raise OperationNotFound(f"The operation does not exist: {name}")
        return self.operations[name]

    def _operation(self, resource: str, metadata: str, response: dict[str, Any]) -> dict[str, Any]:
        """A finished operation on ``resource``, kept for the SDK's poll. Its fields are exactly
        an Operation's: the SDK parses operations strictly."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        operation = {"name": f"{resource}/operations/{secrets.randbelow(10**18)}",
                     "metadata": {"@type": _TYPE + metadata, "genericMetadata": {"createTime": now, "updateTime": now}},
                     "done": True, "response": response}
        self.operations[operation["name"]] = operation
        return operation
