"""A tuning study run by Vertex AI: ``%%gtc_tune --backend vertex`` (``api.create_study`` on a
Vertex target). The study's ``TuningSpec`` becomes a HyperparameterTuningJob
(``TuningSpec.to_vertex``: the study spec, early stopping included, and the trial job made from
its script), and ``VertexStudy`` is a handle with the part of a ``Study``'s surface that the
study panel and a notebook use (``snapshot``, ``subscribe``, ``wait``, ``stop``,
``best_trial``), read from the job's resource: its trials, their parameters and measurements.

What differs from a study of ours: Vertex AI drives it (its search and early stopping, not
Optuna), so it needs no process of ours to go on; one trial cannot be stopped alone (Vertex's
API has no such call); and it is found again through Vertex AI (its ``gtc_cluster`` label), not
the state store, so ``api.get_study`` does not know it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ..backends.vertex import VertexCommands, _call
from ..backends.vertex_client import job_default
from ..exceptions import ActionNotSupported, StudyTimeout
from ..spec.study import TuningSpec
from ..spec.vertex_job import machine_spec
from .tuning.trials import StudySnapshot, TrialView

# A tuning job's states as a study's (services/tuning: RUNNING, STOPPING, SUCCEEDED, FAILED, STOPPED).
STUDY_STATES = {"JOB_STATE_QUEUED": "RUNNING", "JOB_STATE_PENDING": "RUNNING", "JOB_STATE_RUNNING": "RUNNING",
                "JOB_STATE_CANCELLING": "STOPPING", "JOB_STATE_SUCCEEDED": "SUCCEEDED",
                "JOB_STATE_FAILED": "FAILED", "JOB_STATE_CANCELLED": "STOPPED", "JOB_STATE_EXPIRED": "FAILED"}
# A Vertex trial's states as Optuna's, which the panel shows. A STOPPING trial with an end time
# has been stopped (a cancelled tuning job leaves its cut-off trials so): PRUNED (_trial).
TRIAL_STATES = {"REQUESTED": "RUNNING", "ACTIVE": "RUNNING", "STOPPING": "RUNNING", "SUCCEEDED": "COMPLETE",
                "INFEASIBLE": "FAIL"}


def create_vertex_study(commands: VertexCommands, cluster: str, spec: TuningSpec, name: str) -> "VertexStudy":
    """Start ``spec`` as a HyperparameterTuningJob of the target ``commands`` reaches."""
    from google.cloud import aiplatform_v1

    machine, image = machine_spec(job_default(commands.runtime, commands.home, "machine_type"),
                                  job_default(commands.runtime, commands.home, "image"))
    body = spec.to_vertex(machine, image)
    body["displayName"] = name
    body["labels"] = {**body.get("labels", {}), "gtc_cluster": cluster}
    client = commands.client
    created = _call(lambda: client.create_hyperparameter_tuning_job(
        parent=commands.parent, hyperparameter_tuning_job=aiplatform_v1.HyperparameterTuningJob.from_json(
            json.dumps(body))), f"create a HyperparameterTuningJob in {commands.parent}",
        commands._secret)
    return VertexStudy(commands, cluster, name, spec, created.name)


class VertexStudy:
    """A HyperparameterTuningJob as a study; every read asks Vertex AI (``snapshot``)."""

    def __init__(self, commands: VertexCommands, cluster: str, name: str, spec: TuningSpec, resource: str):
        self._commands, self.cluster, self.name, self.spec, self.resource_name = commands, cluster, name, spec, resource
        self._interval = commands.runtime.get("poll_interval", 5.0)

    def snapshot(self) -> StudySnapshot:
        client = self._commands.client
        job = _call(lambda: client.get_hyperparameter_tuning_job(name=self.resource_name),
                    f"read {self.resource_name}", self._commands._secret)
        state = STUDY_STATES.get(job.state.name, "RUNNING")
        return StudySnapshot(
            name=self.name, cluster=self.cluster, state=state,
            reason=job.error.message or None if job.error else None, sampler=f"Vertex AI ({self.spec.algorithm})",
            metric=self.spec.metric.metric_id, direction=self.spec.metric.direction,
            max_trials=job.max_trial_count, parallel=job.parallel_trial_count,
            trials=[_trial(t, self.spec.metric.metric_id) for t in job.trials],
            driven=state in ("RUNNING", "STOPPING"))  # Vertex AI drives it

    @property
    def state(self) -> str:
        return self.snapshot().state

    @property
    def finished(self) -> bool:
        return self.snapshot().finished

    @property
    def best_trial(self) -> TrialView | None:
        return self.snapshot().best

    def subscribe(self, listener: Callable[[StudySnapshot], None]) -> Callable[[], None]:
        """Call ``listener`` with a snapshot now (in this thread), then from a thread of its own at
        each change until the study ends or the returned function is called."""
        stopped = threading.Event()
        last = self.snapshot()
        listener(last)

        def follow() -> None:
            nonlocal last
            while not last.finished and not stopped.wait(self._interval):
                try:
                    now = self.snapshot()
                except Exception:  # noqa: BLE001 - a failed read is retried at the next interval
                    continue
                if now != last:
                    last = now
                    listener(now)

        threading.Thread(target=follow, name=f"gtc-vertex-study-{self.name}", daemon=True).start()
        return stopped.set

    def wait(self, timeout: float | None = None) -> "VertexStudy":
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.finished:
            if deadline is not None and time.monotonic() > deadline:
                raise StudyTimeout(f"study {self.name} has not ended after {timeout} s; it goes on on Vertex AI")
            time.sleep(self._interval)
        return self

    def stop(self) -> "VertexStudy":
        """Cancel the tuning job: Vertex AI stops its running trials."""
        client = self._commands.client
        _call(lambda: client.cancel_hyperparameter_tuning_job(name=self.resource_name),
              f"cancel {self.resource_name}", self._commands._secret)
        return self

    def stop_trial(self, trial_id: str) -> None:
        raise ActionNotSupported("vertex", "stop one trial of", trial_id,
                                 "Vertex AI stops trials itself (early stopping) or all with the study (stop())")

    def __repr__(self) -> str:
        return f"<VertexStudy {self.name!r} on {self.cluster}: {self.resource_name}>"


def _trial(trial: Any, metric: str) -> TrialView:
    def value_of(measurement: Any) -> float | None:
        return next((m.value for m in measurement.metrics if m.metric_id == metric), None) if measurement else None

    curve = [(int(m.step_count), v) for m in trial.measurements if (v := value_of(m)) is not None]
    final = value_of(trial.final_measurement) if "final_measurement" in trial else None
    stopped = trial.state.name == "STOPPING" and "end_time" in trial
    return TrialView(
        number=int(trial.id) - 1 if trial.id.isdigit() else 0, trial_id=trial.id,
        state="PRUNED" if stopped else TRIAL_STATES.get(trial.state.name, "RUNNING"),
        params={p.parameter_id: p.value for p in trial.parameters}, value=final,
        latest=curve[-1][1] if curve else final, step=curve[-1][0] if curve else None, job_id=None, job_dir=None,
        reason=trial.infeasible_reason or ("stopped before it ended (Vertex AI: STOPPING)" if stopped else None),
        started=trial.start_time.timestamp() if trial.start_time else None,
        finished=trial.end_time.timestamp() if trial.end_time else None, curve=curve)
