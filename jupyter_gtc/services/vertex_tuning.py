"""Vertex AI's HyperparameterTuningJob (aiplatform v1) served from our studies: each one a
study of our tuning engine on the endpoint's cluster, its trials Slurm jobs, and the resource
reporting them as Vertex does (``trials[]`` with parameters and final measurements, the state
of the whole). The request is already a tuning spec in Vertex's form: ``parse_tuning_spec``
takes it as it is, ``trial_job_spec`` becoming each trial's sbatch script.

Heavy like ``vertex.py`` (the SDK's types): only the endpoint's process imports it.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from google.cloud.aiplatform_v1 import types as vx

from ..exceptions import SpecError, StudyNotFound
from ..state.store import VertexJobRecord
from .jobs import JobService
from .tuning import Study, TuningService
from .vertex import VertexCollection, _partition_for, _time, to_json, with_zeros

_STATE = vx.JobState
# Our studies' states as Vertex names a tuning job's.
STUDY_STATES = {"RUNNING": _STATE.JOB_STATE_RUNNING, "STOPPING": _STATE.JOB_STATE_CANCELLING,
                "SUCCEEDED": _STATE.JOB_STATE_SUCCEEDED, "FAILED": _STATE.JOB_STATE_FAILED,
                "STOPPED": _STATE.JOB_STATE_CANCELLED}
# Optuna's trial states as Vertex's: a trial stopped early by the early-stopping rule has ended
# with its last measurement; one cut off by a cancel or a stop is STOPPING (Vertex's Trial has
# no later state for it), without a final measurement (_trial).
TRIAL_STATES = {"RUNNING": vx.Trial.State.ACTIVE, "COMPLETE": vx.Trial.State.SUCCEEDED,
                "PRUNED": vx.Trial.State.SUCCEEDED, "FAIL": vx.Trial.State.INFEASIBLE}
EARLY_STOPPED = " rule"  # how the driver's reason for a trial pruned by the early-stopping rule ends
_CODE_CANCELLED = 1  # google.rpc.Code CANCELLED


class VertexTuningJobs(VertexCollection):
    """HyperparameterTuningJobs: each one study, driven by a thread of the endpoint's process."""

    kind = "hyperparameterTuningJobs"
    message_type = vx.HyperparameterTuningJob
    spec_field = "trial_job_spec"

    def __init__(self, jobs: JobService, tuning: TuningService, cluster: str):
        super().__init__(jobs, cluster)
        self.tuning = tuning

    def _start(self, message: Any, job_id: str, note: str = "") -> str:
        layouts = self._layouts()
        for index, pool in enumerate(message.trial_job_spec.worker_pool_specs):
            if "container_spec" in pool or "python_package_spec" in pool or pool.replica_count:
                _partition_for(layouts, pool.machine_spec,
                               f"trial_job_spec.worker_pool_specs[{index}].machine_spec.machine_type", self.cluster)
        body = with_zeros(message)  # a parameter's bound of 0 is absent from the request
        pools = body.get("trialJobSpec", {}).get("workerPoolSpecs", [])
        script = self._package_script(body["trialJobSpec"]) if pools and "pythonPackageSpec" in pools[0] else None
        from ..spec.job import insert_after_header
        from ..spec.trial_job import script_from_worker_pools

        if script is None:  # pool 0's image: each trial's steps run in it (services/vertex_containers.py)
            from .vertex_containers import trial_in_image

            trial_spec, in_image = trial_in_image(body.get("trialJobSpec") or {})
            if in_image:  # the study's spec names the program run (the resource keeps the request's)
                body["trialJobSpec"] = trial_spec
                script = insert_after_header(script_from_worker_pools(trial_spec), in_image)
        if note:  # what is not applied (psc_interface_config, ...): each trial's first log line too
            script = insert_after_header(script or script_from_worker_pools(body.get("trialJobSpec") or {}),
                                         [f"echo {shlex.quote(note)}"])
        if script:
            body["local"] = {"script": script}
        return self.tuning.create(self.cluster, body, name=f"hpt-{job_id}").name

    def _package_script(self, job_spec: dict[str, Any]) -> str:
        """The trial's script for a pool 0 with a ``python_package_spec``: its packages (files of
        the local buckets) installed into each trial's own job folder, then ``python -m`` its
        module (``vertex/packages.py``); never into the job's Python environment."""
        from ..spec.trial_job import script_from_worker_pools
        from . import vertex_local
        from .vertex import gcs_path

        where = "trial_job_spec.worker_pool_specs[0].python_package_spec"
        package = job_spec["workerPoolSpecs"][0]["pythonPackageSpec"]
        module = package.get("pythonModule")
        if not module:
            raise SpecError(f"{where}.python_module", "", "the module to run with python -m (trainer.task)")
        uris = package.get("packageUris") or []
        if not uris:
            raise SpecError(f"{where}.package_uris", [], "the gs:// URIs of the source packages to install")
        root = vertex_local.gcs_root(self.jobs.clusters.home)
        paths = []
        for uri in uris:
            path = gcs_path(root, uri, f"{where}.package_uris")
            if not path.is_file():
                raise SpecError(f"{where}.package_uris", uri, f"a package in the local buckets; there is no {path}")
            paths.append(str(path))
        command = ["python3", "-m", "jupyter_gtc.vertex.packages", *paths, "--", module]
        pools = [{**job_spec["workerPoolSpecs"][0], "containerSpec": {
            "command": command, "args": package.get("args") or [], "env": package.get("env") or []}}]
        pools[0].pop("pythonPackageSpec")
        return script_from_worker_pools({"workerPoolSpecs": pools + job_spec["workerPoolSpecs"][1:]})

    def _study(self, record: VertexJobRecord) -> Study | None:
        try:
            return self.tuning.get(record.ref)
        except StudyNotFound:
            return None

    def _running(self, record: VertexJobRecord) -> bool:
        study = self._study(record)
        return study is not None and not study.finished

    def _cancel(self, record: VertexJobRecord) -> None:
        self.tuning.stop(record.ref)

    def _resource(self, record: VertexJobRecord) -> dict[str, Any]:
        resource = vx.HyperparameterTuningJob.from_json(json.dumps(record.body))
        resource.name = record.name
        resource.create_time = _time(record.created_at)
        study = self._study(record)
        if study is None:
            resource.state = _STATE.JOB_STATE_FAILED
            resource.error = {"code": 5, "message": f"its study {record.ref} is gone"}
            return to_json(resource)
        snapshot = study.snapshot()
        state = STUDY_STATES.get(snapshot.state, _STATE.JOB_STATE_RUNNING)
        if record.cancelled and state == _STATE.JOB_STATE_RUNNING:
            state = _STATE.JOB_STATE_CANCELLING
        resource.state = state
        if state == _STATE.JOB_STATE_FAILED:
            resource.error = {"code": 3, "message": snapshot.reason or "the study failed"}
        elif state == _STATE.JOB_STATE_CANCELLED:
            stopped = [t.trial_id for t in snapshot.trials if _cut_off(t)]
            resource.error = {"code": _CODE_CANCELLED, "message": "CANCELED: the tuning job was cancelled ("
                              + (snapshot.reason or "stopped") + ")"
                              + (f"; trial(s) {', '.join(stopped)} were stopped before they ended" if stopped
                                 else "")}
        started = [t.started for t in snapshot.trials if t.started]
        if started:
            resource.start_time = _time(min(started))
        if study.finished:
            ended = [t.finished for t in snapshot.trials if t.finished]
            resource.end_time = _time(max(ended) if ended else record.created_at)
        resource.trials = [_trial(t, snapshot.metric) for t in snapshot.trials]
        return to_json(resource)


def _cut_off(t: Any) -> bool:
    """A trial stopped by a cancel or a stop of the study (or of the trial), not by the
    early-stopping rule: it has no final measurement."""
    return t.state == "PRUNED" and not (t.reason or "").endswith(EARLY_STOPPED)


def _trial(t: Any, metric: str) -> vx.Trial:
    """One of our trials as Vertex reports it."""
    state = vx.Trial.State.STOPPING if _cut_off(t) else TRIAL_STATES.get(t.state, vx.Trial.State.ACTIVE)
    trial = vx.Trial(id=t.trial_id, state=state,
                     parameters=[vx.Trial.Parameter(parameter_id=k, value=v) for k, v in t.params.items()])
    if t.started:
        trial.start_time = _time(t.started)
    if t.finished:
        trial.end_time = _time(t.finished)
    if t.value is not None and state == vx.Trial.State.SUCCEEDED:
        trial.final_measurement = vx.Measurement(step_count=t.step or 0,
                                                 metrics=[vx.Measurement.Metric(metric_id=metric, value=t.value)])
    if t.state == "FAIL" and t.reason:
        trial.infeasible_reason = t.reason
    return trial
