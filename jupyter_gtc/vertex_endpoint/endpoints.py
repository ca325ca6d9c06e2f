"""The local Vertex endpoint's routes of Vertex AI's ``EndpointService`` and
``PredictionService`` (v1, REST), answered by ``api.vertex_endpoints(cluster)``
(``services/vertex_endpoints.py``: a deployed model is a deployment of our serving on the
endpoint's cluster).

Create, undeploy and delete are done before they answer; ``deployModel`` answers an operation
at once and finishes it once a replica answers (a Slurm job starts, the model loads), so the
SDK's poll at ``/ui/.../operations/OP`` sees it ``done`` then, with the deployed model or the
error. Every operation carries the exact ``@type`` of its metadata and response: the SDK parses
operations strictly.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from .. import api
from ..exceptions import GtcError, OperationNotFound

_PARENT = r"(?P<parent>projects/[^/]+/locations/[^/]+)"
_ENDPOINT = _PARENT + r"/endpoints/(?P<id>[^/:@]+)"
# (method, path after /v1/ or /ui/, handler name): the server's ROUTES take these too.
ENDPOINT_ROUTES = [
    ("POST", re.compile(_PARENT + r"/endpoints"), "create_endpoint"),
    ("GET", re.compile(_PARENT + r"/endpoints"), "list_endpoints"),
    ("GET", re.compile(_ENDPOINT), "get_endpoint"),
    ("DELETE", re.compile(_ENDPOINT), "delete_endpoint"),
    ("POST", re.compile(_ENDPOINT + r":deployModel"), "deploy_model"),
    ("POST", re.compile(_ENDPOINT + r":undeployModel"), "undeploy_model"),
    ("POST", re.compile(_ENDPOINT + r":predict"), "predict"),
    ("POST", re.compile(_ENDPOINT + r":rawPredict"), "raw_predict"),
    ("GET", re.compile(_ENDPOINT + r"/operations/(?P<op>[^/]+)"), "get_endpoint_operation"),
]
TAKES_BODY = {"create_endpoint", "deploy_model", "undeploy_model", "predict", "raw_predict"}
TAKES_QUERY = {"create_endpoint", "list_endpoints"}
_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1."
_EMPTY = {"@type": "type.googleapis.com/google.protobuf.Empty"}


class EndpointMethods:
    """EndpointService's and PredictionService's handlers, mixed into the server's ``Endpoint``
    (whose ``operations`` and ``cluster`` they share)."""

    operations: dict[str, dict[str, Any]]
    cluster: str
    _vertex_endpoints: Any = None

    @property
    def _endpoints(self) -> Any:
        if self._vertex_endpoints is None:  # the SDK's types load with it: at the first endpoint call only
            self._vertex_endpoints = api.vertex_endpoints(self.cluster)
        return self._vertex_endpoints

    def create_endpoint(self, body: dict[str, Any], query: dict[str, str], parent: str) -> dict[str, Any]:
        resource = self._endpoints.create(parent, body, query)
        return self._endpoint_operation(resource["name"], "CreateEndpointOperationMetadata",
                                        {"@type": _TYPE + "Endpoint", **resource})

    def list_endpoints(self, query: dict[str, str], parent: str) -> dict[str, Any]:
        return self._endpoints.list(parent, query)

    def get_endpoint(self, parent: str, id: str) -> dict[str, Any]:
        return self._endpoints.get(parent, id)

    def delete_endpoint(self, parent: str, id: str) -> dict[str, Any]:
        return self._endpoint_operation(self._endpoints.delete(parent, id), "DeleteOperationMetadata", _EMPTY)

    def deploy_model(self, body: dict[str, Any], parent: str, id: str) -> dict[str, Any]:
        operation = self._endpoint_operation(f"{parent}/endpoints/{id}", "DeployModelOperationMetadata", None)

        def finish(response: dict[str, Any] | None, error: GtcError | None) -> None:
            operation["metadata"]["genericMetadata"]["updateTime"] = _now()
            if error is not None:
                body = error.google_error()["error"]
                operation["error"] = {"code": _RPC_CODES.get(body["status"], 2), "message": body["message"]}
            else:
                operation["response"] = response
            operation["done"] = True  # last: a poll that sees it done sees its result

        try:
            self._endpoints.deploy_model(parent, id, body, finish)
        except BaseException:
            self.operations.pop(operation["name"], None)  # refused before it began: no operation to poll
            raise
        return operation

    def undeploy_model(self, body: dict[str, Any], parent: str, id: str) -> dict[str, Any]:
        name = self._endpoints.undeploy_model(parent, id, body)
        return self._endpoint_operation(name, "UndeployModelOperationMetadata",
                                        {"@type": _TYPE + "UndeployModelResponse"})

    def predict(self, body: dict[str, Any], parent: str, id: str) -> dict[str, Any]:
        return self._endpoints.predict(parent, id, body)

    def raw_predict(self, body: dict[str, Any], parent: str, id: str) -> dict[str, Any]:
        return self._endpoints.raw_predict(parent, id, body)

    def get_endpoint_operation(self, parent: str, id: str, op: str) -> dict[str, Any]:
        name = f"{parent}/endpoints/{id}/operations/{op}"
        if name not in self.operations:
            raise OperationNotFound(f"The operation does not exist: {name}")
        return dict(self.operations[name])  # a copy: a deploy's thread may finish it meanwhile

    def close_endpoints(self) -> None:
        """On the way out: what this process deployed is undeployed (its fronts end with it)."""
        if self._vertex_endpoints is not None:
            self._vertex_endpoints.close()

    def _endpoint_operation(self, resource: str, metadata: str, response: dict[str, Any] | None) -> dict[str, Any]:
        """An operation on ``resource``, kept for the SDK's poll: finished with ``response``, or
        (None) running. Its fields are exactly an Operation's."""
        now = _now()
        operation: dict[str, Any] = {
            "name": f"{resource}/operations/{secrets.randbelow(10**18)}",
            "metadata": {"@type": _TYPE + metadata, "genericMetadata": {"createTime": now, "updateTime": now}},
            "done": response is not None}
        if response is not None:
            operation["response"] = response
        self.operations[operation["name"]] = operation
        return operation


# google.rpc.Code's numbers, for an operation's error (an Operation carries a Status, not an HTTP code).
_RPC_CODES = {"CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
              "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9,
              "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
              "UNAUTHENTICATED": 16}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
