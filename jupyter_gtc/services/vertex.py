"""Vertex AI's CustomJob (aiplatform v1) served from our jobs: what the local Vertex endpoint
answers. One CustomJob is one Slurm job on the endpoint's cluster: its worker pools are node
sets of one allocation, handed out in pool order (``vertex/task.py`` runs each node's pool),
its state is the job's as Vertex names it, and a failure's message carries the exit status
and the log's last lines, where a user looks first.

Requests are parsed, and resources emitted, with the SDK's own types
(``google.cloud.aiplatform_v1``): a field the API does not have is refused as Google's
service refuses it. That import takes seconds, so only the endpoint's process loads this
module (``api.vertex_jobs``), never ``%load_ext`` or the server extension.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import re
import secrets
from pathlib import Path
from typing import Any

from google.cloud.aiplatform_v1 import types as vx
from google.protobuf import json_format

from ..backends import get_backend
from ..backends.base import PartitionLayout
from ..exceptions import ClusterBusy, InvalidArgument, JobNotFound, SpecError
from ..hosts.gcs import split_uri, uri_problem
from ..spec import machines
from ..state.store import VertexJobRecord
from . import vertex_local
from .jobs import Job, JobService
from .vertex_containers import container_pool

log = logging.getLogger("jupyter_gtc.vertex_endpoint")

# The batch script of every CustomJob (no part of it comes from the request: the pools' commands
# reach each task as JSON in its environment). Host names are expanded once, here, for all tasks.
SCRIPT = """#!/bin/bash
# A Vertex AI CustomJob from jupyter_gtc's local Vertex endpoint: one task per node, each
# running its worker pool's program (python -m jupyter_gtc.vertex.task).
[ -n "${GTC_VERTEX_NOTE:-}" ] && printf '%s\\n' "$GTC_VERTEX_NOTE"
export GTC_VERTEX_HOSTS=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)
# PyTorch's MASTER_PORT: one free on this node (replica 0's) now; a fixed one is another job's
# too where jobs share a host (a local cluster's nodes), as catalogue.py's torchrun jobs found.
export GTC_VERTEX_MASTER_PORT=$(python -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
srun --kill-on-bad-exit=1 --ntasks-per-node=1 python -m jupyter_gtc.vertex.task
"""

_STATE = vx.JobState
# Our jobs' states (Slurm's) as Vertex names them.
STATES = {
    "PENDING": _STATE.JOB_STATE_PENDING, "CONFIGURING": _STATE.JOB_STATE_PENDING,
    "REQUEUED": _STATE.JOB_STATE_PENDING, "REQUEUE_HOLD": _STATE.JOB_STATE_PENDING,
    "RUNNING": _STATE.JOB_STATE_RUNNING, "COMPLETING": _STATE.JOB_STATE_RUNNING,
    "SUSPENDED": _STATE.JOB_STATE_PAUSED,
    "COMPLETED": _STATE.JOB_STATE_SUCCEEDED, "CANCELLED": _STATE.JOB_STATE_CANCELLED,
    "FAILED": _STATE.JOB_STATE_FAILED, "TIMEOUT": _STATE.JOB_STATE_FAILED, "NODE_FAIL": _STATE.JOB_STATE_FAILED,
    "OUT_OF_MEMORY": _STATE.JOB_STATE_FAILED, "BOOT_FAIL": _STATE.JOB_STATE_FAILED,
    "DEADLINE": _STATE.JOB_STATE_FAILED, "PREEMPTED": _STATE.JOB_STATE_FAILED,
}
FINAL = {_STATE.JOB_STATE_SUCCEEDED, _STATE.JOB_STATE_FAILED, _STATE.JOB_STATE_CANCELLED}
# google.rpc.Code numbers of a job's error (Vertex reports a replica's failure as INVALID_ARGUMENT).
_CODE_INVALID_ARGUMENT, _CODE_CANCELLED, _CODE_DEADLINE_EXCEEDED = 3, 1, 4
LOG_LINES_IN_ERROR = 20


def parse(message_type: Any, body: dict[str, Any] | str, what: str) -> Any:
    """``body`` (JSON) as the SDK's ``message_type``; a field the type lacks, or a value of the
    wrong type, is ``InvalidArgument`` naming it, as Google's API answers."""
    text = body if isinstance(body, str) else json.dumps(body)
    try:
        return message_type.from_json(text, ignore_unknown_fields=False)
    except (json_format.ParseError, ValueError, TypeError) as e:
        raise InvalidArgument(f"Invalid JSON payload received for {what}. {e}") from None


def to_json(message: Any) -> dict[str, Any]:
    """A resource as the service answers it: camelCase, enums by name, unset fields left out."""
    return json.loads(type(message).to_json(message, use_integers_for_enums=False,
                                            including_default_value_fields=False))


def with_zeros(message: Any) -> dict[str, Any]:
    """``message`` as JSON with its numbers at 0 spelled out. A proto3 client leaves every field
    at its default out of the request, a 0 it means included (``minValue: 0``), and the real
    service reads an absent number as 0; ``to_json`` leaves them out too. Unset enums, empty
    strings, lists and objects stay out, as a client that never set them means."""
    full = json.loads(type(message).to_json(message, use_integers_for_enums=False,
                                            including_default_value_fields=True))
    return _without_unset(full)


def _without_unset(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: _without_unset(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in ("", [], {}) and not
                (isinstance(v, str) and v.endswith("_UNSPECIFIED"))}
    if isinstance(value, list):
        return [_without_unset(v) for v in value]
    return value


_TERM = re.compile(r'\s*(display_name|displayName|state|labels\.[A-Za-z0-9_-]+)\s*=\s*("([^"]*)"|[^\s"]+)\s*')


def parse_filter(text: str) -> list[tuple[str, str]]:
    """``key="value"`` terms joined by AND, each (key in camelCase, value); anything else is
    ``InvalidArgument`` saying what the local endpoint understands."""
    terms = []
    for term in filter(None, (t.strip() for t in re.split(r"\s+AND\s+", text.strip()))):
        match = _TERM.fullmatch(term)
        if match is None:
            raise InvalidArgument(f"filter: {term!r} is not a term the local endpoint understands; it takes "
                                  f'display_name="NAME", state="JOB_STATE_..." and labels.KEY="VALUE", joined by AND')
        key = "displayName" if match[1] == "display_name" else match[1]
        terms.append((key, match[3] if match[3] is not None else match[2]))
    return terms


def _field(resource: dict[str, Any], key: str) -> Any:
    if key.startswith("labels."):
        return resource.get("labels", {}).get(key[len("labels."):])
    return resource.get(key)


# Fields the local endpoint takes (Vertex AI has them) but cannot apply on a Slurm cluster of
# this machine: a job that sets one runs without it, and says so (the label NOT_APPLIED_LABEL,
# a line at the top of its log, the endpoint's log). A disk_spec is left out: the SDK sends
# one by default, and a node's disk is what it is.
NOT_APPLIED = {
    "persistent_resource_id": "no persistent resources here: the job runs on the endpoint's cluster",
    "service_account": "the job runs as the endpoint's user",
    "network": "the job runs on the cluster's own network",
    "reserved_ip_ranges": "the job runs on the cluster's own network",
    "psc_interface_config": "no Private Service Connect here: the job runs on the cluster's own network",
    "protected_artifact_location_id": "artifacts stay in the local buckets",
    "tensorboard": "no Vertex AI TensorBoard here; the job's event files are in its folder (job.plot(), gtc)",
    "enable_web_access": "no interactive shell through Vertex here; the nodes are this machine's",
    "enable_dashboard_access": "no dashboard here",
    "experiment": "no Vertex AI Experiments here",
    "experiment_run": "no Vertex AI Experiments here",
    "models": "no Model Registry here",
    "scheduling.restart_job_on_worker_restart": "the job is not restarted when a replica ends",
    "scheduling.strategy": "the cluster's nodes are neither spot nor flex-start",
    "scheduling.max_wait_duration": "the job waits in the cluster's queue as long as it takes",
    "scheduling.disable_retries": "the local endpoint never retries a job",
}
NOT_APPLIED_IN_POOL = {
    "nfs_mounts": "no NFS mounts here; the buckets are mounted at GTC_GCS_MOUNT",
    "lustre_mounts": "no Lustre mounts here; the buckets are mounted at GTC_GCS_MOUNT",
    "machine_spec.tpu_topology": "no TPUs here",
    "machine_spec.reservation_affinity": "no reservations here: the cluster's nodes are all there is",
    "machine_spec.gpu_partition_size": "GPUs are not partitioned here",
}
NOT_APPLIED_LABEL = "gtc_not_applied"


def _is_set(message: Any, path: str) -> bool:
    for name in path.split("."):
        if name not in type(message).pb().DESCRIPTOR.fields_by_name or name not in message:
            return False
        message = getattr(message, name)
    return True


def not_applied(job_spec: Any, prefix: str) -> dict[str, str]:
    """The fields of ``job_spec`` (a ``CustomJobSpec``, at ``prefix``) that are set and that the
    local endpoint does not apply: {field's path: why}."""
    found = {f"{prefix}.{path}": why for path, why in NOT_APPLIED.items() if _is_set(job_spec, path)}
    for index, pool in enumerate(job_spec.worker_pool_specs):
        found.update({f"{prefix}.worker_pool_specs[{index}].{path}": why
                      for path, why in NOT_APPLIED_IN_POOL.items() if _is_set(pool, path)})
    return found


def mark_not_applied(message: Any, fields: dict[str, str]) -> str:
    """Label ``message`` with the short names of ``fields`` (a label value takes [a-z0-9_-],
    63 at most) and return the note for the job's log; '' when there are none."""
    if not fields:
        return ""
    short = "-".join(dict.fromkeys(path.rsplit(".", 1)[-1] for path in fields))
    message.labels[NOT_APPLIED_LABEL] = short if len(short) <= 63 else short[:58] + "-more"
    log.warning("%s %r: not applied: %s", type(message).__name__, message.display_name, ", ".join(fields))
    return "jupyter_gtc: not applied on this cluster: " + "; ".join(f"{path} ({why})" for path, why in fields.items())


def new_id() -> str:
    """A job id as Vertex makes them: 19 decimal digits."""
    return str(10**18 + secrets.randbelow(9 * 10**18))


class VertexCollection:
    """One collection of Vertex jobs (``kind``: customJobs, hyperparameterTuningJobs) under the
    projects/P/locations/L the endpoint serves, run on ``cluster``. Subclasses say how a request
    becomes our job or study (``_start``), and how that looks as the resource (``_resource``)."""

    kind = ""
    message_type: Any = None
    spec_field = ""  # the message's job spec (its worker pools), whose unapplied fields are named

    def __init__(self, jobs: JobService, cluster: str):
        self.jobs = jobs
        self.store = jobs.store
        self.cluster = cluster

    def create(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        message = parse(self.message_type, body, self.message_type.meta.full_name)
        if not message.display_name:
            raise SpecError("display_name", "", "a name for the job; the SDK's display_name=")
        job_id = new_id()
        note = mark_not_applied(message, self._not_applied(message))
        record = VertexJobRecord(f"{parent}/{self.kind}/{job_id}", self.kind, parent, self.cluster, "",
                                 to_json(message))
        record.ref = self._start(message, job_id, note)
        self.store.add_vertex_job(record)
        return self._resource(record)

    def get(self, name: str) -> dict[str, Any]:
        return self._resource(self._record(name))

    def list(self, parent: str, filter: str = "") -> list[dict[str, Any]]:
        """The jobs under ``parent``, newest first; ``filter`` as Vertex's list takes it, the
        common part (``display_name="x" AND state="JOB_STATE_SUCCEEDED" AND labels.team="a"``)."""
        wanted = parse_filter(filter)
        resources = [self._resource(r) for r in self.store.find_vertex_jobs(parent, self.kind)]
        return [r for r in resources if all(_field(r, key) == value for key, value in wanted)]

    def cancel(self, name: str) -> None:
        record = self._record(name)
        if self._running(record):
            self.store.mark_vertex_job_cancelled(name)
            self._cancel(record)

    def delete(self, name: str) -> None:
        """Forget the job; refused while it runs, as Vertex refuses (cancel it first)."""
        record = self._record(name)
        if self._running(record):
            raise ClusterBusy(record.cluster, f"{self.message_type.meta.full_name.rsplit('.', 1)[1]} {name} is "
                                              f"still running; cancel it and delete it once it has ended")
        self.store.remove_vertex_job(name)

    def _layouts(self) -> list[PartitionLayout]:
        """The endpoint's cluster's partitions (nodes, machine types, GPUs)."""
        record = self.store.get_cluster(self.cluster)
        backend = get_backend(record.backend, self.jobs.clusters.home)
        return backend.partitions(backend.parse_spec(record.spec), record.runtime)

    def _record(self, name: str) -> VertexJobRecord:
        record = self.store.get_vertex_job(name)
        if record is None or record.kind != self.kind:
            raise JobNotFound(name, message=f"The {self.kind[:-1]} does not exist: {name}")
        return record

    # -- what a subclass says ---------------------------------------------------------

    def _not_applied(self, message: Any) -> dict[str, str]:
        """Fields of ``message`` set but not applied here: {path: why}."""
        found = not_applied(getattr(message, self.spec_field), self.spec_field)
        if "encryption_spec" in message:
            found["encryption_spec"] = "the local buckets are not encrypted with your key"
        return found

    def _start(self, message: Any, job_id: str, note: str = "") -> str:
        """Submit ``message``'s job or study (``note``: what of it is not applied, for its log);
        returns its ``ref``."""
        raise NotImplementedError

    def _running(self, record: VertexJobRecord) -> bool:
        raise NotImplementedError

    def _cancel(self, record: VertexJobRecord) -> None:
        raise NotImplementedError

    def _resource(self, record: VertexJobRecord) -> dict[str, Any]:
        raise NotImplementedError


class VertexJobs(VertexCollection):
    """CustomJobs: each one Slurm job."""

    kind = "customJobs"
    message_type = vx.CustomJob
    spec_field = "job_spec"

    def _start(self, custom_job: Any, job_id: str, note: str = "") -> str:
        options, env = self._submission(custom_job, job_id)
        if note:
            env["GTC_VERTEX_NOTE"] = "; ".join(filter(None, [note, env.get("GTC_VERTEX_NOTE")]))
        return self.jobs.submit(self.cluster, SCRIPT, options, env=env, default_name=custom_job.display_name).id

    def _running(self, record: VertexJobRecord) -> bool:
        job = self._job(record)
        if job is None or job.finished:
            return False
        # This process's poller may be a tick behind a cancel that another process saw end (the
        # SDK's delete right after its wait): ask Slurm once more before refusing.
        job._poller.next_tick()
        job._changed()
        return not job.finished

    def _cancel(self, record: VertexJobRecord) -> None:
        self._job(record).cancel()

    # -- a request as a job ----------------------------------------------------------

    def _submission(self, custom_job: Any, job_id: str) -> tuple[list[str], dict[str, str]]:
        """sbatch's options and the job's environment for ``custom_job``."""
        spec = custom_job.job_spec
        gcs_root = vertex_local.gcs_root(self.jobs.clusters.home)
        pools = _pools(spec.worker_pool_specs, gcs_root)
        layouts = self._layouts()
        partition = None
        for index, pool in enumerate(spec.worker_pool_specs):
            if pools[index] is None:
                continue
            where = f"job_spec.worker_pool_specs[{index}].machine_spec.machine_type"
            chosen = _partition_for(layouts, pool.machine_spec, where, self.cluster)
            if partition is not None and chosen.name != partition.name:
                raise SpecError(where, pool.machine_spec.machine_type,
                                f"worker pool 0 runs on partition {partition.name} and this one on {chosen.name}; "
                                f"pools on different machines need a heterogeneous Slurm job, which the local "
                                f"endpoint does not make yet: give every pool one of partition {partition.name}'s "
                                f"machine types")
            partition = chosen
        nodes = sum(p["replicas"] for p in pools if p)
        if nodes > len(partition.nodes):
            raise SpecError("job_spec.worker_pool_specs[].replica_count", nodes,
                            f"at most {len(partition.nodes)} replicas in all: partition {partition.name} of "
                            f"{self.cluster} has {len(partition.nodes)} nodes")
        options = [f"--nodes={nodes}", "--ntasks-per-node=1", f"--partition={partition.name}"]
        gpus = max((p.machine_spec.accelerator_count for p in spec.worker_pool_specs), default=0)
        if gpus:
            options.append(f"--gpus-per-node={gpus}")
        timeout = spec.scheduling.timeout if "scheduling" in spec and "timeout" in spec.scheduling else None
        if timeout:
            options.append(f"--time={max(1, math.ceil(timeout.total_seconds() / 60))}")
        notes = []
        for pool in pools:
            if pool:
                pool["env"]["CLOUD_ML_JOB_ID"] = job_id  # over the TaskProlog's, which is Slurm's id
                notes.append(pool.pop("note"))
        env = {"GTC_VERTEX_POOLS": json.dumps(pools), "GTC_VERTEX_JOB": json.dumps({"job_id": job_id}),
               # Where gs:// URIs are files here, as Cloud Storage FUSE's /gcs is on Vertex AI.
               "GTC_GCS_MOUNT": str(gcs_root)}
        if any(notes):
            env["GTC_VERTEX_NOTE"] = "; ".join(dict.fromkeys(n for n in notes if n))
        output = spec.base_output_directory.output_uri_prefix if "base_output_directory" in spec else ""
        if output:
            base = output.rstrip("/")
            env.update({"AIP_MODEL_DIR": f"{base}/model/", "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
                        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/"})
        return options, env

    # -- a job as the resource -------------------------------------------------------

    def _job(self, record: VertexJobRecord) -> Job | None:
        try:
            return self.jobs.get(record.ref, record.cluster)
        except JobNotFound:
            return None  # its cluster was deleted and made again: the job is gone

    def _resource(self, record: VertexJobRecord) -> dict[str, Any]:
        job = self._job(record)
        resource = vx.CustomJob.from_json(json.dumps(record.body))
        resource.name = record.name
        resource.create_time = _time(record.created_at)
        if job is None:
            resource.state = _STATE.JOB_STATE_FAILED
            resource.error = {"code": 5, "message": f"its Slurm job {record.ref} on {record.cluster} is gone"}
            return to_json(resource)
        state = STATES.get(job.state, _STATE.JOB_STATE_PENDING)
        if record.cancelled and state not in FINAL:
            state = _STATE.JOB_STATE_CANCELLING
        resource.state = state
        if job.started_at and state != _STATE.JOB_STATE_PENDING:
            resource.start_time = _time(job.started_at)
        if job.finished:
            resource.end_time = _time(job.ended_at or record.created_at)
            if state == _STATE.JOB_STATE_FAILED:
                resource.error = {"code": _CODE_DEADLINE_EXCEEDED if job.state == "TIMEOUT" else _CODE_INVALID_ARGUMENT,
                                  "message": _failure(job)}
            elif state == _STATE.JOB_STATE_CANCELLED:
                resource.error = {"code": _CODE_CANCELLED, "message": "CANCELED"}
        resource.update_time = _time(max(t for t in (record.created_at, job.started_at, job.ended_at) if t))
        return to_json(resource)


def _pools(specs: Any, gcs_root: Path) -> list[dict[str, Any] | None]:
    """Each worker pool as the task runner gets it (``None``: an empty placeholder pool, as the
    SDK sends for a Reduction Server slot left unused). ``gcs_root`` holds the buckets."""
    if not specs:
        raise SpecError("job_spec.worker_pool_specs", [], "at least one worker pool, the primary (pool 0)")
    pools: list[dict[str, Any] | None] = []
    for index, pool in enumerate(specs):
        where = f"job_spec.worker_pool_specs[{index}]"
        has_program = "container_spec" in pool or "python_package_spec" in pool
        if not has_program and pool.replica_count == 0:
            if index == 0:
                raise SpecError(where, {}, "the primary pool: a machine_spec, replica_count 1 and a container_spec")
            pools.append(None)
            continue
        if index == 0 and pool.replica_count != 1:
            raise SpecError(f"{where}.replica_count", pool.replica_count, "1: the primary pool has one replica")
        if pool.replica_count < 1:
            raise SpecError(f"{where}.replica_count", pool.replica_count, "1 or more")
        if "python_package_spec" in pool:
            pools.append(_python_package(pool.python_package_spec, pool.replica_count, f"{where}.python_package_spec",
                                         gcs_root))
            continue
        if "container_spec" not in pool:
            raise SpecError(where, "no program", "a container_spec with the command to run")
        pools.append(container_pool(pool.container_spec, pool.replica_count, where))
    return pools


def _python_package(spec: Any, replicas: int, where: str, gcs_root: Path) -> dict[str, Any]:
    """A pool that installs source packages (``gs://`` URIs: files of the local buckets) and runs
    ``python -m`` their module, as Vertex's prebuilt executor images do."""
    if not spec.python_module:
        raise SpecError(f"{where}.python_module", "", "the module to run with python -m (trainer.task)")
    if not spec.package_uris:
        raise SpecError(f"{where}.package_uris", [], "the gs:// URIs of the source packages to install")
    packages = []
    for uri in spec.package_uris:
        path = gcs_path(gcs_root, uri, f"{where}.package_uris")
        if not path.is_file():
            raise SpecError(f"{where}.package_uris", uri, f"a package in the local buckets; there is no {path}")
        packages.append(str(path))
    return {
        "replicas": replicas,
        "packages": packages,
        "argv": ["python", "-m", spec.python_module, *spec.args],
        "env": {e.name: e.value for e in spec.env},
        "note": (f"jupyter_gtc: executor image {spec.executor_image_uri} is not run (no container runtime on this "
                 f"cluster); its packages are installed for the job's Python, without their requirements"),
    }


def gcs_path(gcs_root: Path, uri: str, where: str) -> Path:
    """Where ``gs://bucket/object`` lies here: ``<gcs_root>/bucket/object`` (what the local
    storage emulator serves); never outside that bucket's folder."""
    if not uri.startswith("gs://"):
        raise SpecError(where, uri, "a gs://BUCKET/OBJECT URI")
    problem = uri_problem(uri)
    if problem:
        raise SpecError(where, uri, problem)
    bucket, name = split_uri(uri)
    if not name:
        raise SpecError(where, uri, "a gs://BUCKET/OBJECT URI: it names a bucket, no object in it")
    return gcs_root / bucket / name


def _partition_for(layouts: list[PartitionLayout], machine_spec: Any, where: str, cluster: str) -> PartitionLayout:
    """The partition a pool of ``machine_spec`` runs on: one with nodes of that machine type; a
    machine type the cluster lacks is refused, naming those it has (never another machine in
    silence). Only a cluster whose partitions name no machine types (attached) is chosen by the
    GPUs asked: the default partition if its nodes have them, else the first that has."""
    want = machine_spec.machine_type
    exact = [p for p in layouts if want in p.node_types]
    if exact:
        return exact[0]
    types = sorted({t for p in layouts for t in p.node_types if t})
    if types:
        raise SpecError(where, want, f"a machine type of {cluster}'s nodes: {', '.join(types)} (the local endpoint "
                                     f"runs a pool on nodes of its machine type, and {cluster} has no "
                                     f"{want or 'unnamed'} nodes)")
    machine = machines.lookup(want) if want else None
    gpus = machine_spec.accelerator_count or (machine.gpu_count if machine else 0)
    fits = [p for p in layouts if p.nodes and min(p.node_gpus) >= gpus]
    if fits:
        return fits[0]
    types = sorted({t for p in layouts for t in p.node_types if t})
    raise SpecError(where, want, f"{cluster} has nodes of {', '.join(types) or 'unknown types'}; none has {gpus} GPUs")


def _failure(job: Job) -> str:
    """Vertex's message for a failed job, with the log's last lines (the reason a user wants)."""
    status = f"a non-zero status of {job.exit_code}" if job.exit_code is not None else job.state
    message = f"A replica exited with {status}." if job.state == "FAILED" else \
        f"The job ended {job.state} (Slurm's state)."
    try:
        tail = job.logs(tail=LOG_LINES_IN_ERROR).rstrip()
    except Exception:  # noqa: BLE001 - a log we cannot read must not hide the failure itself
        tail = ""
    return f"{message} Last lines of its log:\n{tail}" if tail else message


def _time(epoch: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
