"""What a study looks like to its readers (the panel, ``study.trials``, the CLI): plain
records built from Optuna's storage, the same in the driving process and in any other."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ...spec.study import TuningSpec
from . import engine

# Keys of the user attributes the driver sets on each Optuna trial.
TRIAL_ID = "trial_id"            # CLOUD_ML_TRIAL_ID: Optuna's number + 1, as Vertex counts
JOB_ID = "slurm_job_id"          # the trial's Slurm job, for re-attaching after a restart
JOB_DIR = "job_dir"              # <study dir>/<trial_id>/
STOP_REASON = "stop_reason"      # why a PRUNED trial was stopped early (a rule, the user, the study)
FAIL_REASON = "fail_reason"      # why a FAIL trial failed (its job's state, no metric, ...)
LOST = "lost"                    # asked, but its driver died before submitting: not counted

FINISHED_STUDY_STATES = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass(frozen=True)
class TrialView:
    """One trial as of the last read."""

    number: int                  # Optuna's trial number (0-based)
    trial_id: str                # CLOUD_ML_TRIAL_ID ("1"-based, as on Vertex)
    state: str                   # RUNNING, COMPLETE, PRUNED or FAIL (Optuna's)
    params: dict[str, Any]       # what the trial got, conditional parameters only where active
    value: float | None          # the final metric (COMPLETE; PRUNED: its last report)
    latest: float | None         # the newest intermediate value
    step: int | None             # ... and its step
    job_id: str | None
    job_dir: str | None
    reason: str | None           # why it stopped early or failed
    started: float | None        # epoch seconds
    finished: float | None
    curve: list[tuple[int, float]] = field(default_factory=list)  # every intermediate (step, value)

    @property
    def stopped_early(self) -> bool:
        return self.state == "PRUNED"

    @property
    def seconds(self) -> float | None:
        if self.started is None:
            return None
        import time

        return (self.finished or time.time()) - self.started

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "stopped_early": self.stopped_early, "curve": [list(p) for p in self.curve]}


@dataclass(frozen=True)
class StudySnapshot:
    """A study and its trials as of one read of the storage."""

    name: str
    cluster: str
    state: str
    reason: str | None
    sampler: str
    metric: str
    direction: str               # minimize or maximize
    max_trials: int
    parallel: int
    trials: list[TrialView]      # every trial once submitted (not those lost by a driver that died first)
    driven: bool                 # some live process drives it

    @property
    def best(self) -> TrialView | None:
        done = [t for t in self.trials if t.state == "COMPLETE" and t.value is not None]
        if not done:
            return None
        return (min if self.direction == "minimize" else max)(done, key=lambda t: t.value)

    @property
    def counts(self) -> dict[str, int]:
        counts = {"RUNNING": 0, "COMPLETE": 0, "PRUNED": 0, "FAIL": 0}
        for t in self.trials:
            counts[t.state] = counts.get(t.state, 0) + 1
        return counts

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STUDY_STATES

    def best_so_far(self) -> list[tuple[int, float, float]]:
        """(k, best value after the k-th completed trial, that trial's value), in completion order."""
        done = sorted((t for t in self.trials if t.state == "COMPLETE" and t.value is not None),
                      key=lambda t: (t.finished or 0, t.number))
        out, best = [], None
        pick = min if self.direction == "minimize" else max
        for k, t in enumerate(done, 1):
            best = t.value if best is None else pick(best, t.value)
            out.append((k, best, t.value))
        return out


def trial_view(frozen, spec: TuningSpec) -> TrialView:
    attrs = frozen.user_attrs
    curve = sorted(frozen.intermediate_values.items())
    latest = curve[-1] if curve else (None, None)
    value = frozen.value if frozen.value is not None and math.isfinite(frozen.value) else None
    if frozen.state.name == "PRUNED" and value is None and curve:
        value = latest[1]
    return TrialView(
        number=frozen.number, trial_id=str(attrs.get(TRIAL_ID, frozen.number + 1)), state=frozen.state.name,
        params=engine.decode(frozen.params, spec), value=value, latest=latest[1], step=latest[0],
        job_id=attrs.get(JOB_ID), job_dir=attrs.get(JOB_DIR),
        reason=attrs.get(STOP_REASON) or attrs.get(FAIL_REASON),
        started=frozen.datetime_start.timestamp() if frozen.datetime_start else None,
        finished=frozen.datetime_complete.timestamp() if frozen.datetime_complete else None,
        curve=curve,
    )


def failure_budget_spent(spec: TuningSpec, frozen_trials) -> str:
    """What happened when failed trials stop a study, and the first failure's cause (its log's
    line, as the trial recorded it when it ended): the first is the one to fix; the others most
    often failed the same way."""
    failed = [t for t in frozen_trials if t.state.name == "FAIL"]
    budget = spec.failure_budget
    limit = f"max_failed_trial_count={spec.max_failed_trial_count}" if spec.max_failed_trial_count else \
        f"the default limit of {budget} (max_failed_trial_count is not set)"
    how = f"more than {limit} allows" if len(failed) > budget else f"reaching {limit}"
    said = f"stopped: {len(failed)} trial{'s' if len(failed) != 1 else ''} failed, {how}"
    if not failed:
        return said
    first = min(failed, key=lambda t: (t.datetime_complete is None, t.datetime_complete or 0, t.number))
    reason = first.user_attrs.get(FAIL_REASON)
    trial_id = first.user_attrs.get(TRIAL_ID, first.number + 1)
    return f"{said}; the first failure, trial {trial_id}: {reason}" if reason else said


def counted(frozen_trials) -> list:
    """Trials that count against max_trial_count (not the lost ones)."""
    return [t for t in frozen_trials if not t.user_attrs.get(LOST)]


def shown(frozen_trials) -> list:
    """Trials a reader sees: counted ones, once submitted (a trial is asked, gets its
    parameters one by one, then its job: readers in other threads must not see it halfway)."""
    return [t for t in counted(frozen_trials) if t.state.name != "RUNNING" or JOB_ID in t.user_attrs]


def as_table(trials: list[TrialView], spec: TuningSpec):
    """A pandas DataFrame (one row per trial, one column per parameter) where pandas is
    installed, else a list of dicts."""
    names = [p.parameter_id for p in spec.parameters()]
    names = list(dict.fromkeys(names))
    rows = [{"trial": int(t.trial_id), "state": t.state, **{n: t.params.get(n) for n in names},
             "latest": t.latest, "step": t.step, "value": t.value, "stopped_early": t.stopped_early,
             "reason": t.reason, "job_id": t.job_id, "seconds": t.seconds} for t in trials]
    columns = ["trial", "state", *names, "latest", "step", "value", "stopped_early", "reason", "job_id", "seconds"]
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows, columns=columns).set_index("trial")
