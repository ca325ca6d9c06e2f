"""Vertex AI training clusters (``modelDevelopmentClusters``, v1beta1) served from local
clusters, for the local Vertex endpoint (``vertex_endpoint/clusters.py``): a create is our
create from the same spec JSON, a patch of ``node_pools`` our scale, a delete our delete, each a
long-running operation whose ``metadata.progressMessage`` is the latest progress line of ours.

What the cluster shows is ours too: ``clusterStatus.state`` from the cluster's state,
``nodesStatus`` from Slurm's nodes, ``clusterEvents`` from the supervisor's events (newest
first, at most 100). ``reportFaultyNodes`` drains the node with a reason of its own
(``health/ladder.REPORTED_REASON``): the supervisor then walks its ladder straight to the
replace rung, as Vertex replaces a reported node, and its checks resume the fresh one.

Operations live in this object (the endpoint's process), as Google's do for a while.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

from ..backends import get_backend
from ..exceptions import ClusterBusy, ClusterNotFound, GtcError, InvalidArgument, OperationNotFound, SpecError
from ..health.ladder import DONE, REPORTED_REASON
from ..spec.cluster import ClusterSpec, parse_cluster_spec
from ..spec.vertex_cluster import check_cluster_id
from .clusters import ClusterService
from .vertex_slurm_rest import SlurmJobApi

BACKEND = "local"
_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1beta1."
# Our cluster states -> ModelDevelopmentCluster.clusterStatus.state.
STATES = {"CREATING": "PROVISIONING", "RUNNING": "RUNNING", "SCALING": "UPDATING", "DELETING": "STOPPING",
          "ERROR": "ERROR"}
# The supervisor's events -> clusterEvents' eventType: Vertex's names where it has one for the
# same thing, else ours, prefixed GTC_.
EVENT_TYPES = {"detected": "VM_SLURM_DRAIN", DONE["replace"]: "VM_REPORT_AND_REPLACEMENT"}
RPC_CODES = {"CANCELLED": 1, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5, "ALREADY_EXISTS": 6,
             "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10,
             "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14, "UNAUTHENTICATED": 16}
MAX_EVENTS = 100
MAX_OPERATIONS = 1000  # kept for their polls (Google keeps them for days); a running one is never dropped
PAGE_SIZE = 50


class _Task:
    """A change done on a thread of its own, with the fields of a cluster ``Operation`` that
    the API reads (``finished``, ``message``, ``error``)."""

    def __init__(self, work):
        self.message, self.error, self.finished = "", None, False

        def run() -> None:
            try:
                work(self._progress)
            except GtcError as e:
                self.error = e
            except Exception as e:  # noqa: BLE001 - ends the operation in INTERNAL, with what it was
                self.error = GtcError(f"{type(e).__name__}: {e}")
            self.finished = True

        threading.Thread(target=run, name="gtc-vertex-cluster-patch", daemon=True).start()

    def _progress(self, message: str) -> None:
        self.message = message


class _Done:
    finished, message, error = True, "", None


class VertexTrainingClusters:
    def __init__(self, clusters: ClusterService):
        self.clusters = clusters
        self.operations: dict[str, tuple[Any, str, str | None]] = {}  # name -> (work, metadata type, cluster)
        self._lock = threading.Lock()
        self.slurm_api = SlurmJobApi(clusters)  # callSlurmRestApi: a slurmrestd per cluster, at its first call

    # -- the methods -----------------------------------------------------------------------

    def create(self, parent: str, cluster_id: str | None, body: dict[str, Any]) -> dict[str, Any]:
        if not cluster_id:
            raise InvalidArgument("modelDevelopmentClusterId: missing; give the new cluster's id in the query "
                                  "(?modelDevelopmentClusterId=ID)")
        check_cluster_id(cluster_id, "modelDevelopmentClusterId")
        spec = parse_cluster_spec(body, display_name=cluster_id)
        # With a JWT key: its Slurm Job API (callSlurmRestApi) is slurmrestd's (backends/slurm_rest.py).
        spec = spec.model_copy(update={"local": spec.local.model_copy(update={"slurm_rest_api": True})})
        operation = self.clusters.start_create(spec, BACKEND)  # checked and recorded (CREATING) before this answers
        return self._operation(f"{parent}/modelDevelopmentClusters/{cluster_id}", operation,
                               "CreateModelDevelopmentClusterOperationMetadata", cluster_id)

    def get(self, parent: str, cluster_id: str) -> dict[str, Any]:
        return self._resource(parent, self._ours(cluster_id))

    def list(self, parent: str, query: dict[str, str]) -> dict[str, Any]:
        names = sorted(c.name for c in self.clusters.list(with_status=False)
                       if c.backend == BACKEND and isinstance(c.spec, ClusterSpec))
        try:
            size = min(int(query.get("pageSize") or PAGE_SIZE), PAGE_SIZE) or PAGE_SIZE
            start = int(query.get("pageToken") or 0)
        except ValueError:
            raise InvalidArgument(f"pageSize or pageToken: {query.get('pageSize')!r}, {query.get('pageToken')!r}: "
                                  f"a page size is a whole number; a page token is what the last page gave") from None
        page = names[start:start + size]
        out: dict[str, Any] = {"modelDevelopmentClusters": [self.get(parent, n) for n in page]}
        if start + size < len(names):
            out["nextPageToken"] = str(start + size)
        return out

    def patch(self, parent: str, cluster_id: str, update_mask: str | None, body: dict[str, Any]) -> dict[str, Any]:
        """``node_pools`` replaced whole: each compute pool's new node count is a scale; any
        other change is refused by ``apply`` on the operation, naming the fields."""
        masks = [m.strip() for m in (update_mask or "").split(",") if m.strip()]
        if not masks:
            raise InvalidArgument("updateMask: missing; name the fields to change, e.g. ?updateMask=node_pools")
        other = [m for m in masks if m not in ("node_pools", "nodePools")]
        if other:
            raise SpecError("updateMask", ",".join(other), "the local endpoint changes node_pools (their sizes) "
                                                           "only; delete the cluster and create it again for the rest")
        cluster = self._ours(cluster_id)
        if cluster.state != "RUNNING":
            raise ClusterBusy(cluster_id, f"cluster {cluster_id} is {STATES.get(cluster.state, cluster.state)}; it "
                                          f"can be updated only when RUNNING", cluster.state)
        pools = body.get("nodePools", body.get("node_pools"))
        if not isinstance(pools, list):
            raise SpecError("node_pools", pools, "the whole list of the cluster's node pools (a repeated field is "
                                                 "replaced whole)")
        data = {k: v for k, v in cluster.spec.to_json().items() if k != "node_pools"} | {"node_pools": pools}
        spec = parse_cluster_spec(data, display_name=cluster_id)
        task = _Task(lambda progress: self.clusters.apply(spec, BACKEND, progress))
        return self._operation(f"{parent}/modelDevelopmentClusters/{cluster_id}", task,
                               "UpdateModelDevelopmentClusterOperationMetadata", cluster_id)

    def delete(self, parent: str, cluster_id: str) -> dict[str, Any]:
        self._ours(cluster_id)
        self.slurm_api.stop(cluster_id)  # (the local delete stops a slurmrestd left by another process)
        operation = self.clusters.start_delete(cluster_id)
        return self._operation(f"{parent}/modelDevelopmentClusters/{cluster_id}", operation,
                               "DeleteOperationMetadata", None)

    def report_faulty_nodes(self, parent: str, cluster_id: str, body: dict[str, Any]) -> dict[str, Any]:
        actions = body.get("nodeActions", body.get("node_actions"))
        if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
            raise SpecError("nodeActions", actions, "one node action, {nodeId: NODE} (one node per report)")
        action = actions[0]
        node = action.get("nodeId", action.get("node_id"))
        cluster = self._ours(cluster_id)
        nodes = [n for p in cluster.spec.compute_pools() for n in p.node_names()]
        if isinstance(node, str) and node.startswith(f"{cluster_id}-") and node[len(cluster_id) + 1:] in nodes:
            node = node[len(cluster_id) + 1:]  # Google's documented id of a node, CLUSTER-POOL-INDEX
        if node not in nodes:
            raise SpecError("nodeActions[0].nodeId", node, f"a node of {cluster_id}: {', '.join(nodes)}")
        if cluster.state != "RUNNING":
            raise ClusterBusy(cluster_id, f"cluster {cluster_id} is {STATES.get(cluster.state, cluster.state)}; "
                                          f"nodes are reported on a RUNNING cluster", cluster.state)
        host = action.get("reportFaultyHost", action.get("report_faulty_host")) or {}
        reasons = [f"{r.get('behavior', '')}: {r.get('description', '')}".strip(": ")
                   for r in host.get("faultReasons", host.get("fault_reasons")) or [] if isinstance(r, dict)]
        why = f"{REPORTED_REASON} reported faulty" + (f": {'; '.join(reasons)}" if reasons else "")
        record = self.clusters.store.get_cluster(cluster_id)
        commands = get_backend(record.backend, self.clusters.home).commands(record.runtime)
        # The supervisor sees this drain at its next look and replaces the node (health/ladder.py).
        commands.run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={why[:200]}"])
        return self._operation(f"{parent}/modelDevelopmentClusters/{cluster_id}", _Done(),
                               "ReportFaultyNodesOperationMetadata", None)

    def call_slurm_rest_api(self, parent: str, cluster_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Vertex's Slurm Job API: Slurm's REST API v0.0.42 in Google's envelope, answered by the
        cluster's slurmrestd as this endpoint's user (``services/vertex_slurm_rest.py``)."""
        cluster = self._ours(cluster_id)
        if cluster.state != "RUNNING":
            raise ClusterBusy(cluster_id, f"cluster {cluster_id} is {STATES.get(cluster.state, cluster.state)}; its "
                                          f"Slurm Job API answers when it is RUNNING", cluster.state)
        return self.slurm_api.call(cluster, body)

    def close(self) -> None:
        """Stop the slurmrestd daemons this endpoint started (the endpoint is stopping)."""
        self.slurm_api.close()

    def get_operation(self, parent: str, cluster_id: str, op: str) -> dict[str, Any]:
        name = f"{parent}/modelDevelopmentClusters/{cluster_id}/operations/{op}"
        with self._lock:
            found = self.operations.get(name)
        if found is None:
            raise OperationNotFound(f"The operation does not exist: {name}")
        work, kind, cluster = found
        body: dict[str, Any] = {"name": name, "metadata": {"@type": _TYPE + kind, "genericMetadata": {},
                                                           "progressMessage": work.message}, "done": work.finished}
        if work.finished and work.error is not None:
            status = work.error.google_status
            body["error"] = {"code": RPC_CODES.get(status, 13), "message": str(work.error)}
        elif work.finished:
            body["response"] = ({"@type": _TYPE + "ModelDevelopmentCluster"} | self.get(parent, cluster)
                                if cluster else {"@type": "type.googleapis.com/google.protobuf.Empty"})
        return body

    # -- what a cluster shows --------------------------------------------------------------

    def _ours(self, cluster_id: str):
        cluster = self.clusters.get(cluster_id, with_status=False)
        if cluster.backend != BACKEND or not isinstance(cluster.spec, ClusterSpec):
            raise ClusterNotFound(cluster_id)
        return cluster

    def _resource(self, parent: str, cluster) -> dict[str, Any]:
        if cluster.state in ("RUNNING", "SCALING", "ERROR"):
            cluster = self.clusters.get(cluster.name)  # with Slurm's view of its nodes
        spec: ClusterSpec = cluster.spec
        events = self.clusters.events(cluster.name)
        replaced = {}
        for e in events:
            if e["event"] == DONE["replace"]:
                replaced[e["node"]] = replaced.get(e["node"], 0) + 1
        slurm = {n.name: n for n in cluster.nodes}
        nodes = []
        for pool in spec.compute_pools():
            for node in pool.node_names():
                status = slurm.get(node)
                state = ("PROVISIONING" if status is None else "RUNNING" if status.ready
                         else status.display_state.upper())
                nodes.append({"nodePoolId": pool.id, "nodeState": state, "instanceName": node,
                              # a replaced node is new hardware: its host's name says which
                              "physicalHost": f"local/{node}/{replaced.get(node, 0)}"})
        if spec.slurm.login_node_pool_id:  # how a client reaches the jobs: over SSH, by this instance name
            login = spec.slurm.login_node_pool_id
            nodes.append({"nodePoolId": login, "instanceName": f"{cluster.name}-{login}-0",
                          "nodeState": "RUNNING" if cluster.state in ("RUNNING", "SCALING") else "PROVISIONING"})
        cluster_status: dict[str, Any] = {"state": STATES.get(cluster.state, cluster.state), "nodesStatus": nodes}
        if cluster.problem:
            cluster_status["detail"] = cluster.problem
        if cluster.state == "ERROR":
            cluster_status["error"] = {"code": 13, "message": cluster.problem or "ERROR"}
        return {"name": f"{parent}/modelDevelopmentClusters/{cluster.name}", **spec.to_vertex(),
                "createTime": _time(cluster.created_at), "clusterStatus": cluster_status,
                "clusterEvents": [{"eventType": EVENT_TYPES.get(e["event"], "GTC_" + e["event"].upper()
                                                                .replace(" ", "_")),
                                   "instanceName": e["node"], "eventTime": _time(e["time"]), "description": e["detail"]}
                                  for e in reversed(events[-MAX_EVENTS:])]}

    def _operation(self, resource: str, work: Any, kind: str, cluster: str | None) -> dict[str, Any]:
        name = f"{resource}/operations/{secrets.randbelow(10**18)}"
        with self._lock:
            self.operations[name] = (work, kind, cluster)
            finished = [n for n, (w, _, _) in self.operations.items() if w.finished]
            for old in finished[:max(0, len(self.operations) - MAX_OPERATIONS)]:  # the oldest finished go first
                del self.operations[old]
        parent, _, rest = name.partition("/modelDevelopmentClusters/")
        cluster_id, _, op = rest.partition("/operations/")
        return self.get_operation(parent, cluster_id, op)


def _time(seconds: float) -> str:
    # RFC 3339 with microseconds, as Google's timestamps carry fractions: a History ordered by
    # time (and a sidebar asking for events after the newest it has) tells apart the several
    # events the supervisor records within one second.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1e6):06d}Z"


__all__ = ["VertexTrainingClusters"]
