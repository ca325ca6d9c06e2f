"""Vertex AI's ``EndpointService`` and ``PredictionService`` (aiplatform v1) over our serving
(``services/endpoints.py``): what the local Vertex endpoint answers for ``endpoints``.

A Vertex ``Endpoint`` is an address that models are deployed to; ours is a model version
served by Slurm jobs behind a front. So an Endpoint here is a small record of its own (name,
display name, labels, its deployed models and traffic split), kept in a 0600 file under
``<GTC_HOME>/vertex/endpoint-resources/`` so a restarted endpoint lists it again, and each of
its deployed models is one of our endpoints: ``deployModel`` deploys the registry's version on
the endpoint's cluster (a replica per Slurm job, between ``minReplicaCount`` and
``maxReplicaCount``), and ``DeployedModel.id`` is that deployment's ``AIP_DEPLOYED_MODEL_ID``.
A prediction goes to a deployed model chosen by the traffic split, through its front.

A version can be deployed once at a time (the registry keeps one deployment per version);
``automaticResources`` and ``dedicatedResources`` both give the replica counts, a machine
type chooses the partition as a CustomJob's does. Requests are parsed, and resources
emitted, with the SDK's own types; only the endpoint's process imports this module.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import random
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

from google.cloud.aiplatform_v1 import types as vx
from google.protobuf import json_format, struct_pb2

from ..exceptions import EndpointNotFound, GtcError, ModelConflict, PredictionError, SpecError
from .vertex import _partition_for, new_id, parse, parse_filter, to_json
from .vertex_models import VertexModels, _filtered, _id_of, _page, _ref, model_id

_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1."
_SAFE_INT = 2 ** 53  # a double holds every whole number up to here exactly


class NoDeployedModel(ModelConflict):
    """A prediction on an endpoint with no model deployed (or none given traffic)."""

    http_status = 400
    google_status = "FAILED_PRECONDITION"


class DeployedModelNotFound(GtcError):
    http_status = 404
    google_status = "NOT_FOUND"


class VertexEndpoints:
    """EndpointService's and PredictionService's methods for the endpoints of ``cluster``; each
    returns the JSON the REST API answers. ``operation(resource, metadata type, response,
    done)`` makes the long-running operations, which the caller keeps for the SDK's poll."""

    def __init__(self, vertex_models: VertexModels, layouts: Callable[[], list], cluster: str, home: Path):
        self.vertex_models = vertex_models
        self.models = vertex_models.models
        self.serving = self.models.endpoints  # services/endpoints.py's EndpointService
        self.layouts, self.cluster = layouts, cluster
        self.folder = home / "vertex" / "endpoint-resources"
        self._lock = threading.Lock()  # one change of the records at a time (a thread per connection)
        self._deploying: dict[str, str] = {}  # endpoint id -> the model being deployed to it

    # -- EndpointService -------------------------------------------------------------------

    def create(self, parent: str, body: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        endpoint = parse(vx.Endpoint, body, "google.cloud.aiplatform.v1.Endpoint")
        if not endpoint.display_name:
            raise SpecError("endpoint.display_name", "", "a name for the endpoint (Endpoint.create(display_name=))")
        for field in ("deployed_models", "traffic_split"):
            if field in endpoint:
                raise SpecError(f"endpoint.{field}", "set", "leave it out: models are deployed with deployModel "
                                                            "(model.deploy(endpoint=...))")
        endpoint_id = query.get("endpointId") or new_id()
        if not re.fullmatch(r"[1-9][0-9]{0,18}|[a-z][a-z0-9-]{0,61}[a-z0-9]", endpoint_id):
            raise SpecError("endpoint_id", endpoint_id, "1 to 19 digits, not starting with 0 (or a lowercase "
                                                        "name of letters, digits and dashes)")
        now = _now()
        endpoint.name = f"{parent}/endpoints/{endpoint_id}"
        endpoint.create_time = endpoint.update_time = now
        with self._lock:
            if self._path(endpoint_id).exists():
                raise _AlreadyExists(f"Endpoint {endpoint.name} already exists")
            self._write(endpoint_id, {"resource": to_json(endpoint), "serving": {}})
        return to_json(endpoint)

    def get(self, parent: str, id: str) -> dict[str, Any]:
        return self._read(parent, id)["resource"]

    def list(self, parent: str, query: dict[str, str]) -> dict[str, Any]:
        resources = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            record = json.loads(path.read_text())
            if record["resource"]["name"].startswith(parent + "/"):
                resources.append(record["resource"])
        resources.sort(key=lambda r: r.get("createTime", ""))
        if any(key == "state" for key, _ in parse_filter(query.get("filter", ""))):
            raise SpecError("filter", query["filter"], 'terms on display_name="NAME" or labels.KEY="VALUE" (an '
                                                       'Endpoint has no state)')
        return _page(_filtered(resources, query.get("filter", "")), query, "endpoints")

    def delete(self, parent: str, id: str) -> str:
        with self._lock:
            record = self._read(parent, id)
            if record["resource"].get("deployedModels") or id in self._deploying:
                models = ", ".join(d["id"] for d in record["resource"].get("deployedModels", [])) or "one deploying"
                raise ModelConflict("endpoint", record["resource"]["name"],
                                    f"it has deployed models ({models}); undeploy them first "
                                    f"(endpoint.undeploy_all(), or endpoint.delete(force=True))")
            self._path(id).unlink()
        return record["resource"]["name"]

    def deploy_model(self, parent: str, id: str, body: dict[str, Any],
                     finish: Callable[[dict[str, Any] | None, GtcError | None], None]) -> None:
        """Check the request and start the deployment; ``finish(response, error)`` is called from
        a thread once a replica answers (or the deployment failed, with nothing left of it)."""
        request = parse(vx.DeployModelRequest, {k: v for k, v in body.items() if k != "endpoint"},
                        "google.cloud.aiplatform.v1.DeployModelRequest")
        deployed = request.deployed_model
        low, high, options = self._resources(deployed)
        name = self.vertex_models._name_of(parent, _id_of(deployed.model.split("@")[0], parent,
                                                           "deployed_model.model"))
        selector = deployed.model.partition("@")[2] or None
        model = self.models.get(str(_ref(name, selector)))
        if model.record.deployment:
            raise ModelConflict("deployed_model.model", deployed.model,
                                f"version {model.version} of {name} is deployed already (endpoint "
                                f"{model.record.deployment['endpoint']} of this cluster); undeploy it first, or "
                                f"upload it as a new version to deploy it twice")
        with self._lock:
            record = self._read(parent, id)
            if id in self._deploying:
                raise ModelConflict("endpoint", record["resource"]["name"],
                                    f"{self._deploying[id]} is being deployed to it; wait for that operation")
            split = _traffic_split(dict(request.traffic_split), record["resource"], "0")
            self._deploying[id] = f"{name}@{model.version}"
        threading.Thread(target=self._deploy, name=f"deploy-{id}", daemon=True,
                         args=(parent, id, model, deployed, low, high, options, split, finish)).start()

    def _deploy(self, parent: str, id: str, model: Any, deployed: Any, low: int, high: int, options: list[str],
                split: dict[str, int], finish: Callable) -> None:
        try:
            served = self.serving.deploy(_LocalArtifacts(model, self.vertex_models.gcs_root), self.cluster,
                                         min_replicas=low, max_replicas=high, options=options)
        except GtcError as e:
            self._deploying.pop(id, None)
            finish(None, e)
            return
        except Exception as e:  # noqa: BLE001 - the operation says it failed; the endpoint's log has why
            self._deploying.pop(id, None)
            finish(None, GtcError(f"deploying failed: {type(e).__name__}: {e}"))
            return
        deployment = served.deployment
        dmid = deployment["deployed_model_id"]
        deployed.id = dmid
        deployed.model = f"{parent}/models/{model_id(model.name)}"
        deployed.model_version_id = str(model.version)
        deployed.display_name = deployed.display_name or model.name
        deployed.create_time = _now()
        resource_json = to_json(deployed)
        with self._lock:
            self._deploying.pop(id, None)
            try:
                record = self._read(parent, id)
            except EndpointNotFound as e:  # deleted meanwhile: nothing may serve for it
                served.undeploy()
                finish(None, e)
                return
            resource = record["resource"]
            resource["deployedModels"] = [*resource.get("deployedModels", []), resource_json]
            resource["trafficSplit"] = {(dmid if k == "0" else k): v for k, v in split.items() if v}
            resource["updateTime"] = _stamp()
            record["serving"][dmid] = served.id
            self._write(id, record)
        finish({"@type": _TYPE + "DeployModelResponse", "deployedModel": resource_json}, None)

    def undeploy_model(self, parent: str, id: str, body: dict[str, Any]) -> str:
        request = parse(vx.UndeployModelRequest, {k: v for k, v in body.items() if k != "endpoint"},
                        "google.cloud.aiplatform.v1.UndeployModelRequest")
        with self._lock:
            record = self._read(parent, id)
            resource = record["resource"]
            dmid = request.deployed_model_id
            if dmid not in record["serving"]:
                raise DeployedModelNotFound(f"deployed_model_id: {dmid!r} is not deployed to {resource['name']}; "
                                            f"its deployed models: {', '.join(record['serving']) or 'none'}")
            rest = {k: v for k, v in resource.get("trafficSplit", {}).items() if k != dmid}
            split = dict(request.traffic_split) if request.traffic_split else rest
            if split and (set(split) - (set(record["serving"]) - {dmid}) or sum(split.values()) != 100):
                raise SpecError("traffic_split", split, f"percentages of the deployed models that stay "
                                                        f"({', '.join(set(record['serving']) - {dmid}) or 'none'}) "
                                                        f"adding up to 100")
            try:
                self.serving.undeploy(record["serving"][dmid])
            except EndpointNotFound:
                pass  # its registry row is gone already (undeployed through gtc)
            del record["serving"][dmid]
            resource["deployedModels"] = [d for d in resource.get("deployedModels", []) if d["id"] != dmid]
            resource["trafficSplit"] = {k: v for k, v in split.items() if v}
            resource["updateTime"] = _stamp()
            self._write(id, record)
        return resource["name"]

    def close(self) -> None:
        """Undeploy every model this process serves (the endpoint is stopping): their fronts are
        its threads and end with it, and replicas left behind would hold the cluster's nodes for
        nothing. The endpoints stay, with nothing deployed, as after ``undeploy_all``."""
        with self._lock:
            for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
                record = json.loads(path.read_text())
                served = {d: s for d, s in record["serving"].items() if s in self.serving.fronts}
                if not served:
                    continue
                for dmid, serving_id in served.items():
                    try:
                        self.serving.undeploy(serving_id)
                    except GtcError:
                        pass  # gone already: nothing of it is left to end
                    del record["serving"][dmid]
                resource = record["resource"]
                resource["deployedModels"] = [d for d in resource.get("deployedModels", []) if d["id"] not in served]
                resource["trafficSplit"] = {k: v for k, v in resource.get("trafficSplit", {}).items()
                                            if k not in served}
                resource["updateTime"] = _stamp()
                self._write(path.stem, record)
            for serving_id in list(self.serving.fronts):  # one a deployModel was still waiting for
                try:
                    self.serving.undeploy(serving_id)
                except GtcError:
                    pass

    # -- PredictionService -------------------------------------------------------------------

    def predict(self, parent: str, id: str, body: dict[str, Any]) -> dict[str, Any]:
        request = parse(vx.PredictRequest, {k: v for k, v in body.items() if k != "endpoint"},
                        "google.cloud.aiplatform.v1.PredictRequest")
        if "parameters" in request:
            raise SpecError("parameters", json_format.MessageToDict(request._pb.parameters),
                            "leave it out: our LM server takes each instance's own max_tokens")
        instances = [_whole_numbers(json_format.MessageToDict(v)) for v in request._pb.instances]
        dmid, serving_id, resource = self._route(parent, id)
        predictions = self._predict(serving_id, instances)
        deployed = next(d for d in resource["deployedModels"] if d["id"] == dmid)
        answer = vx.PredictResponse(deployed_model_id=dmid, model=deployed["model"],
                                    model_version_id=deployed.get("modelVersionId", ""),
                                    model_display_name=deployed.get("displayName", ""))
        for prediction in predictions:
            answer._pb.predictions.append(json_format.ParseDict(prediction, struct_pb2.Value()))
        return to_json(answer)

    def raw_predict(self, parent: str, id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The body as the deployed model's server takes it (``{"instances": [...]}``), numbers as
        sent: no protobuf on the way. Answers the server's ``{"predictions": [...]}``."""
        dmid, serving_id, _ = self._route(parent, id)
        instances = body.get("instances")
        unknown = sorted(set(body) - {"instances"})
        if unknown:
            raise SpecError(unknown[0], body[unknown[0]], "not a field here; the body is {\"instances\": [...]}")
        return {"predictions": self._predict(serving_id, instances), "deployedModelId": dmid}

    def _route(self, parent: str, id: str) -> tuple[str, str, dict[str, Any]]:
        """(the deployed model chosen by the traffic split, its serving endpoint, the resource)."""
        record = self._read(parent, id)
        resource = record["resource"]
        split = {k: v for k, v in resource.get("trafficSplit", {}).items() if v and k in record["serving"]}
        if not split:
            if id in self._deploying:
                raise PredictionError(id, 429, f"{self._deploying[id]} is being deployed to {resource['name']} and "
                                               f"does not answer yet; retry shortly")
            if record["serving"]:
                raise NoDeployedModel("endpoint.traffic_split", resource.get("trafficSplit", {}),
                                      f"no deployed model of {resource['name']} takes traffic; give one a share "
                                      f"(endpoint.update(traffic_split={{...}}))")
            raise NoDeployedModel("endpoint", resource["name"],
                                  "no model is deployed to it; deploy one first (model.deploy(endpoint=endpoint, "
                                  "machine_type=...))")
        dmid = random.choices(list(split), weights=list(split.values()))[0]
        return dmid, record["serving"][dmid], resource

    def _predict(self, serving_id: str, instances: Any) -> list[Any]:
        try:
            return self.serving.predict(serving_id, instances)
        except EndpointNotFound:
            raise PredictionError(serving_id, 503, "its deployment is gone (undeployed outside this endpoint); "
                                                   "undeploy the model and deploy it again") from None

    # -- helpers ---------------------------------------------------------------------------

    def _resources(self, deployed: Any) -> tuple[int, int, list[str]]:
        """(min replicas, max replicas, sbatch options) of a DeployedModel's resources."""
        if "dedicated_resources" in deployed:
            resources, where = deployed.dedicated_resources, "deployed_model.dedicated_resources"
            spec = resources.machine_spec
        elif "automatic_resources" in deployed:
            resources, where, spec = deployed.automatic_resources, "deployed_model.automatic_resources", None
        else:
            raise SpecError("deployed_model.dedicated_resources", "not set", "machine_spec and min_replica_count "
                                                                             "(model.deploy(machine_type=..., "
                                                                             "min_replica_count=1))")
        low = resources.min_replica_count or 1
        high = max(resources.max_replica_count, low)
        if low < 1:
            raise SpecError(f"{where}.min_replica_count", low, "1 or more")
        options: list[str] = []
        if spec is not None and (spec.machine_type or spec.accelerator_count):
            partition = _partition_for(self.layouts(), spec, f"{where}.machine_spec.machine_type", self.cluster)
            options.append(f"--partition={partition.name}")
            if spec.accelerator_count:
                options.append(f"--gpus={spec.accelerator_count}")
        return low, high, options

    def _path(self, id: str) -> Path:
        return self.folder / f"{id}.json"

    def _read(self, parent: str, id: str) -> dict[str, Any]:
        name = f"{parent}/endpoints/{id}"
        try:
            record = json.loads(self._path(id).read_text()) if "/" not in id else None
        except FileNotFoundError:
            record = None
        if record is None or record["resource"]["name"] != name:
            raise EndpointNotFound(f"The Endpoint does not exist: {name}")
        return record

    def _write(self, id: str, record: dict[str, Any]) -> None:
        """The record, whole or not at all (a new file renamed over the old), 0600 from the start."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.folder / f".{id}.{threading.get_ident()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(temporary, self._path(id))


class _AlreadyExists(GtcError):
    http_status = 409
    google_status = "ALREADY_EXISTS"


class _LocalArtifacts:
    """A registry ``Model`` whose ``gs://`` artifacts (the SDK's uploads) are given to the
    replicas as the local buckets' folder they are, as Cloud Storage FUSE gives ``/gcs/`` to
    Vertex's containers: our LM server reads a folder."""

    def __init__(self, model: Any, gcs_root: Path):
        self._model, self._gcs_root = model, gcs_root

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    @property
    def record(self) -> Any:
        record = self._model.record
        if record.artifact_uri.startswith("gs://"):
            from .vertex import gcs_path

            path = gcs_path(self._gcs_root, record.artifact_uri.rstrip("/"), "model.artifact_uri")
            record = dataclasses.replace(record, artifact_uri=str(path))
        return record


def _traffic_split(split: dict[str, int], resource: dict[str, Any], new: str) -> dict[str, int]:
    """The endpoint's traffic split once ``new`` (``"0"``, the model being deployed) is there:
    the request's, which must add up to 100 over known ids; none given: all of it to ``new``
    where nothing else takes traffic, else the current one (``new`` gets none)."""
    known = {d["id"] for d in resource.get("deployedModels", [])}
    if not split:
        current = resource.get("trafficSplit", {})
        return dict(current) if current else {new: 100}
    wrong = sorted(set(split) - known - {new})
    if wrong or sum(split.values()) != 100 or any(v < 0 for v in split.values()):
        raise SpecError("traffic_split", split, f"percentages adding up to 100, keyed by deployed model IDs "
                                                f"({', '.join(sorted(known)) or 'none yet'}) and \"0\" for the "
                                                f"model being deployed")
    return split


def _whole_numbers(value: Any) -> Any:
    """``value`` with whole floats as ints: protobuf's ``Value`` holds every number as a double,
    so the SDK's ``32`` (a max_tokens, a token id) arrives as ``32.0``; Vertex's own JSON writes
    such a number back as ``32``, and a server that takes token ids needs ints."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _SAFE_INT:
        return int(value)
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    return value


def _now() -> datetime.datetime:
    return datetime.datetime.now(tz=datetime.timezone.utc)


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

