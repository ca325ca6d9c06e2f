"""What trained a model, read from its job when the model is registered: the job, its script
and options, the tuning trial and its parameters when it came from a study, its final metrics,
its newest checkpoint. Taken once and stored with the version, so it outlives the job's folder
and the cluster.
"""

from __future__ import annotations

import re
from typing import Any

from ..metrics.resumed import latest_attempts
from ..state import Store
from .jobs import Job

SCRIPT_LIMIT = 64 * 1024  # a job's script is a few KB; a bigger one is kept cut, saying so
# A complete checkpoint folder of either layout: resume.py's step-N (with checkpoint.json) and
# the recipes' step-00000050 (complete once renamed from .partial).
_CHECKPOINT = re.compile(r"step-(\d+)")


def job_lineage(job: Job, store: Store, trial_of) -> dict[str, Any]:
    """The lineage of ``job``'s model. ``trial_of(job)``: the study trial that ran it, or None."""
    record = store.get_job(job.cluster, job.id)
    return {
        "job": {"cluster": job.cluster, "id": job.id, "name": job.name, "state": job.state,
                "exit_code": job.exit_code, "job_dir": str(job.job_dir), "user": job.user,
                "submitted_at": job.submitted_at, "ended_at": job.ended_at},
        "script": _script(job),
        "options": list(record.options) if record is not None else [],
        "trial": trial_of(job),
        "metrics": final_metrics(job),
        "checkpoint": newest_checkpoint(job),
    }


def _script(job: Job) -> dict[str, Any]:
    path = job.job_dir / "job.sbatch"
    try:
        data = job.host.read(path, 0, SCRIPT_LIMIT + 1)
    except (FileNotFoundError, PermissionError):
        return {"path": str(path), "text": None}
    text = data[:SCRIPT_LIMIT].decode("utf-8", "replace")
    return {"path": str(path), "text": text, **({"cut_at": SCRIPT_LIMIT} if len(data) > SCRIPT_LIMIT else {})}


def final_metrics(job: Job) -> dict[str, dict[str, float]]:
    """Each tag's last value: the point of its highest step, of the attempt that kept it (a
    requeued job's redone steps replace the dead attempt's, as ``job.metrics()`` shows them)."""
    feed = job.metrics_feed
    feed.refresh(final=job.finished)
    last: dict[str, Any] = {}
    for scalar in latest_attempts(feed.all()):
        if scalar.tag not in last or scalar.step >= last[scalar.tag].step:
            last[scalar.tag] = scalar
    return {tag: {"step": s.step, "value": s.value, "wall_time": s.wall_time} for tag, s in sorted(last.items())}


def newest_checkpoint(job: Job) -> str | None:
    """The job's newest complete checkpoint folder (``AIP_CHECKPOINT_DIR/step-N``), or None."""
    entries = job.host.list_dir(job.checkpoint_dir) or []
    steps = [(int(m.group(1)), e.name) for e in entries if e.is_dir and (m := _CHECKPOINT.fullmatch(e.name))]
    return str(job.checkpoint_dir / max(steps)[1]) if steps else None


def trial_of(job: Job, store: Store, snapshot) -> dict[str, Any] | None:
    """The study trial whose job ``job`` is (``snapshot(name)``: the study as its service reads
    it): its study, trial id, parameters and value; None for a job of no study. A trial names
    its job by id and folder: both must match (a cluster made again numbers jobs from 1)."""
    for study in store.find_studies(job.cluster):
        if study.name not in job.job_dir.parts:  # a trial's folder is <...>/<study>/<trial id>
            continue
        for trial in snapshot(study.name).trials:
            if trial.job_id == job.id and trial.job_dir in (None, str(job.job_dir)):
                return {"study": study.name, "trial_id": trial.trial_id, "number": trial.number,
                        "params": dict(trial.params), "value": trial.value, "state": trial.state}
    return None
