"""The local Vertex endpoint's routes of Vertex AI training clusters
(``modelDevelopmentClusters``, v1beta1; their operations polled under ``/v1/``), answered by
``api.vertex_training_clusters()``: local clusters as ``ModelDevelopmentCluster`` resources
(``services/vertex_clusters.py``). Who may call them is the server's guard, as for every route."""

from __future__ import annotations

import re
from typing import Any

from .. import api

_PARENT = r"(?P<parent>projects/[^/]+/locations/[^/]+)"
_COLLECTION = _PARENT + r"/modelDevelopmentClusters"
_CLUSTER = _COLLECTION + r"/(?P<cluster_id>[^/:]+)"
# (method, path after the version, handler name): the server's ROUTES take these too.
CLUSTER_ROUTES = [
    ("POST", re.compile(_COLLECTION), "create_training_cluster"),
    ("GET", re.compile(_COLLECTION), "list_training_clusters"),
    ("GET", re.compile(_CLUSTER), "get_training_cluster"),
    ("PATCH", re.compile(_CLUSTER), "patch_training_cluster"),
    ("DELETE", re.compile(_CLUSTER), "delete_training_cluster"),
    ("POST", re.compile(_CLUSTER + r":reportFaultyNodes"), "report_faulty_nodes"),
    ("POST", re.compile(_CLUSTER + r":callSlurmRestApi"), "call_slurm_rest_api"),
    ("GET", re.compile(_CLUSTER + r"/operations/(?P<op>[^/]+)"), "get_training_cluster_operation"),
]
TAKES_BODY = {"create_training_cluster", "patch_training_cluster", "report_faulty_nodes", "call_slurm_rest_api"}
# Vertex takes callSlurmRestApi requests under 1 MB: a bigger one is refused before its body is read.
SMALL_BODY = {re.compile(r".*/modelDevelopmentClusters/[^/:]+:callSlurmRestApi"): 1024 * 1024}
TAKES_QUERY = {"create_training_cluster", "list_training_clusters", "patch_training_cluster"}


class ClusterMethods:
    """The handlers, mixed into the server's ``Endpoint``; the service is made at the first call."""

    _training_clusters: Any = None

    @property
    def _clusters(self) -> Any:
        if self._training_clusters is None:
            self._training_clusters = api.vertex_training_clusters()
        return self._training_clusters

    def create_training_cluster(self, body: dict[str, Any], query: dict[str, str], parent: str) -> dict[str, Any]:
        # The query's name in JSON's spelling or the proto's: Google takes both.
        cluster_id = query.get("modelDevelopmentClusterId", query.get("model_development_cluster_id"))
        return self._clusters.create(parent, cluster_id, body)

    def list_training_clusters(self, query: dict[str, str], parent: str) -> dict[str, Any]:
        return self._clusters.list(parent, query)

    def get_training_cluster(self, parent: str, cluster_id: str) -> dict[str, Any]:
        return self._clusters.get(parent, cluster_id)

    def patch_training_cluster(self, body: dict[str, Any], query: dict[str, str], parent: str,
                               cluster_id: str) -> dict[str, Any]:
        return self._clusters.patch(parent, cluster_id, query.get("updateMask", query.get("update_mask")), body)

    def delete_training_cluster(self, parent: str, cluster_id: str) -> dict[str, Any]:
        return self._clusters.delete(parent, cluster_id)

    def report_faulty_nodes(self, body: dict[str, Any], parent: str, cluster_id: str) -> dict[str, Any]:
        return self._clusters.report_faulty_nodes(parent, cluster_id, body)

    def call_slurm_rest_api(self, body: dict[str, Any], parent: str, cluster_id: str) -> dict[str, Any]:
        return self._clusters.call_slurm_rest_api(parent, cluster_id, body)

    def close_training_clusters(self) -> None:
        """The slurmrestd daemons the Slurm Job API started: stopped with the endpoint."""
        if self._training_clusters is not None:
            self._training_clusters.close()

    def get_training_cluster_operation(self, parent: str, cluster_id: str, op: str) -> dict[str, Any]:
        return self._clusters.get_operation(parent, cluster_id, op)
