"""Jobs: submit an sbatch script to a cluster, follow it, cancel or requeue it.

A ``Job`` is a handle backed by the state store (it survives a kernel restart) whose live
state comes from the cluster's one ``ClusterPoller``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from ..backends import get_backend
from ..exceptions import (
    ClusterBusy, ClusterNotFound, CommandError, GtcError, JobNotFound, JobSubmitError, JobTimeout, SpecError,
)
from ..slurm.parse import FINISHED_STATES, JobStatus
from ..spec.cluster import parse_cluster_spec
from ..spec.job import option, parse_options, safe_name, sbatch_directives
from ..slurm.commands import SlurmCommands
from ..state import ClusterRecord, JobRecord, Store
from .clusters import RUNNING, ClusterService
from ..metrics import progress
from ..metrics.progress import Progress
from .logs import LogFollower, tail_lines
from .metrics import JobMetrics, as_table
from .poller import ClusterPoller, JobView


class Job:
    """A submitted job (an array is one Job). Cheap to create; ask it for fresh state."""

    def __init__(self, record: JobRecord, service: "JobService"):
        self._record = record
        self._service = service

    cluster = property(lambda self: self._record.cluster)
    id = property(lambda self: self._record.slurm_id)
    name = property(lambda self: self._record.name)
    job_dir = property(lambda self: Path(self._record.job_dir))

    @property
    def _view(self) -> JobView | None:
        return self._service.poller(self.cluster).view(self.id)

    @property
    def state(self) -> str:
        view = self._view
        return view.state if view else self._record.state

    @property
    def exit_code(self) -> int | None:
        view = self._view
        return view.exit_code if view else self._record.exit_code

    @property
    def tasks(self) -> dict[str, dict[str, Any]]:
        view = self._view
        return view.tasks if view else self._record.tasks

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def elapsed(self) -> float | None:
        """Seconds it has run (so far, or in all once finished); None before it starts."""
        view = self._view
        start, end = (view.start_time, view.end_time) if view else (self._record.start_time, self._record.end_time)
        if start is None or start > time.time():  # a requeued job's start lies in the future
            return None
        return (end or time.time()) - start

    @property
    def nodes(self) -> str:
        view = self._view
        return view.nodes if view else self._record.nodes

    @property
    def user(self) -> str | None:
        """The Slurm user it runs as (squeue's ``user_name``); None for jobs recorded before
        jupyter_gtc kept it."""
        view = self._view
        return (view.user if view else None) or self._record.user

    @property
    def log_path(self) -> Path:
        """The batch script's output (for an array, its first task's)."""
        found = sorted(self.job_dir.glob(f"slurm-{self.id}*.out"))
        return found[0] if found else self.job_dir / f"slurm-{self.id}.out"

    def wait(self, timeout: float | None = None) -> "Job":
        """Block until the job has finished; raises ``JobTimeout`` after ``timeout`` seconds."""
        view = self._service.poller(self.cluster).wait_for(self.id, lambda v: v.finished, timeout)
        if view is None or not view.finished:
            raise JobTimeout(f"job {self.id} ({self.name}) is still {self.state} after {timeout} s")
        return self

    def wait_until_running(self, timeout: float | None = None) -> "Job":
        view = self._service.poller(self.cluster).wait_for(
            self.id, lambda v: v.state not in ("PENDING", "CONFIGURING"), timeout)
        if view is None or view.state in ("PENDING", "CONFIGURING"):
            raise JobTimeout(f"job {self.id} ({self.name}) has not started after {timeout} s")
        return self

    def logs(self, tail: int | None = None) -> str:
        """The job's output so far; only the last ``tail`` lines when given."""
        if tail is not None:
            return tail_lines(self.log_path, tail)
        return LogFollower(self.log_path).read_new(limit=-1)

    def follow(self) -> LogFollower:
        """An incremental reader of the log: each ``read_new()`` returns only what was added."""
        return LogFollower(self.log_path)

    @property
    def model_dir(self) -> Path:
        """``AIP_MODEL_DIR``: where the job saves its final model."""
        return self.job_dir / "model"

    @property
    def checkpoint_dir(self) -> Path:
        """``AIP_CHECKPOINT_DIR``: the job's checkpoints, which a requeued job resumes from."""
        return self.job_dir / "checkpoints"

    # -- metrics ---------------------------------------------------------------------

    @property
    def log_dir(self) -> Path:
        """``AIP_TENSORBOARD_LOG_DIR``: where the job writes its TensorBoard event files."""
        return self.job_dir / "logs"

    @property
    def hypertune_file(self) -> Path:
        """``CLOUD_ML_HP_METRIC_FILE``: where cloudml-hypertune writes the job's reports."""
        return self.job_dir / "hypertune.metrics"

    @property
    def metrics_feed(self) -> JobMetrics:
        """The process's one incremental reader of this job's metrics, for live consumers
        (``subscribe`` to get every new scalar; ``refresh`` to read)."""
        return self._service.metrics_of(self)

    def metrics(self):
        """Every scalar the job has written so far: tag, step, wall_time, value (and run),
        as a pandas DataFrame where pandas is installed, else a list of ``Scalar``."""
        tail = self._service.metrics_of(self)
        tail.refresh()
        return as_table(tail.all())

    def progress(self) -> Progress | None:
        """How far the job is, from a ``progress/total_steps`` scalar or tqdm lines in its log."""
        tail = self._service.metrics_of(self)
        tail.refresh()
        return progress.from_scalars(tail.all()) or progress.from_log(self.logs(tail=5))

    def plot(self, tags: list[str] | None = None):
        """A live plot of the job's scalars (one line per tag) that grows while it trains;
        only ``tags`` when given (a name ending in "/" takes every tag under it, "perf/").
        Drawn by the notebook front end: ``%load_ext jupyter_gtc`` first."""
        if _plotter is None:
            raise GtcError("job.plot() draws in a notebook: run `%load_ext jupyter_gtc` first")
        return _plotter(self, tags)

    def cancel(self) -> "Job":
        self._service.cancel(self)
        return self

    def requeue(self) -> "Job":
        self._service.requeue(self)
        return self

    def hold(self) -> "Job":
        """Keep a pending job from starting until ``release()`` (squeue's reason becomes
        JobHeldUser, or JobHeldAdmin as root). A running job runs on; the hold applies if it
        is requeued."""
        self._service.hold(self)
        return self

    def release(self) -> "Job":
        """Let a held job start again."""
        self._service.release(self)
        return self

    def refresh(self) -> "Job":
        self._service.poller(self.cluster).watch(self.id)
        return self

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "id": self.id, "name": self.name, "state": self.state,
                "exit_code": self.exit_code, "nodes": self.nodes, "elapsed": self.elapsed, "user": self.user,
                "job_dir": str(self.job_dir), "tasks": self.tasks, "submitted_at": self._record.submitted_at}

    def __repr__(self) -> str:
        code = f", exit_code={self.exit_code}" if self.exit_code is not None else ""
        return f"<Job {self.id} {self.name!r} on {self.cluster}: {self.state}{code}>"


def _current_user() -> str | None:
    """This process's user: the one sbatch submits as (the poller then reads Slurm's own word)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a passwd entry (some containers)
        return None


# The front end that can draw plots registers itself here (widgets do, on import), so this
# layer stays free of widget libraries.
_plotter = None


def set_plotter(plotter) -> None:
    global _plotter
    _plotter = plotter


class JobService:
    def __init__(self, store: Store, clusters: ClusterService):
        self.store = store
        self.clusters = clusters
        self._pollers: dict[str, tuple[float | None, ClusterPoller]] = {}
        self._metrics: dict[Path, JobMetrics] = {}
        self._lock = threading.Lock()

    def poller(self, cluster: str) -> ClusterPoller:
        """The process's one poller for ``cluster``: one per incarnation, since a cluster
        deleted and created again under the same name numbers its jobs from 1 again."""
        try:
            incarnation = self.store.get_cluster(cluster).created_at
        except ClusterNotFound:
            incarnation = None
        with self._lock:
            known = self._pollers.get(cluster)
            if known is None or known[0] != incarnation:
                known = self._pollers[cluster] = (
                    incarnation, ClusterPoller(cluster, lambda: self._commands(cluster), self.store))
            return known[1]

    def metrics_of(self, job: Job) -> JobMetrics:
        """The process's one metrics reader for ``job``."""
        with self._lock:
            key = job.job_dir  # unique, unlike (cluster, id) across a cluster's incarnations
            if key not in self._metrics:
                self._metrics[key] = JobMetrics(job.log_dir, job.hypertune_file)
            return self._metrics[key]

    def _commands(self, cluster: str, record: ClusterRecord | None = None) -> SlurmCommands:
        record = record or self.store.get_cluster(cluster)
        return get_backend(record.backend, self.clusters.home).commands(record.runtime)

    def submit(self, cluster: str, script: str, options: list[str] | None = None, *,
               script_args: list[str] | None = None, env: dict[str, str] | None = None,
               job_dir: Path | None = None) -> Job:
        """Submit ``script`` to ``cluster``; ``options`` (sbatch's) win over its #SBATCH lines.

        For callers that build on jobs (tuning): ``script_args`` reach the script as ``"$@"``
        (hyperparameter flags), ``env`` is added to the job contract's variables, and
        ``job_dir`` (new, or empty) replaces the folder made per job."""
        record = self.store.get_cluster(cluster)
        if record.state != RUNNING:
            raise ClusterBusy(f"cluster {cluster} is {record.state}; jobs can be submitted when it is RUNNING")
        options = list(options or [])
        pairs = parse_options(sbatch_directives(script) + options)
        spec = parse_cluster_spec(record.spec)
        partition = option(pairs, "partition")
        partitions = [p.id for p in spec.slurm.partitions]
        if partition is not None and partition not in partitions:
            raise SpecError("partition", partition, f"partitions of {cluster}: {', '.join(partitions)}")
        name = option(pairs, "job-name") or "job"
        array = option(pairs, "array")

        job_dir = self._new_job_dir(cluster, name, job_dir)
        (job_dir / "job.sbatch").write_text(script if script.startswith("#!") else "#!/bin/bash\n" + script)
        extra = [] if option(pairs, "job-name") else [f"--job-name={name}"]
        if option(pairs, "output") is None:
            extra.append(f"--output={job_dir}/slurm-{'%A_%a' if array else '%j'}.out")
        env = {**self._contract_env(cluster, job_dir, spec), **(env or {})}
        try:
            slurm_id = self._commands(cluster, record).submit(job_dir / "job.sbatch", [*extra, *options], env,
                                                              cwd_option=job_dir, script_args=script_args)
        except CommandError as e:
            shutil.rmtree(job_dir, ignore_errors=True)  # nothing half-recorded
            raise JobSubmitError(e.stderr.strip() or str(e), argv=e.argv) from None
        job = JobRecord(cluster, slurm_id, name, "PENDING", str(job_dir), options, user=_current_user())
        self.store.add_job(job)
        self.poller(cluster).watch(slurm_id)
        return Job(job, self)

    def get(self, ref: str, cluster: str | None = None) -> Job:
        """A job by Slurm id or by name (the newest of that name)."""
        found = self.store.find_jobs(cluster=cluster, slurm_id=ref) or self.store.find_jobs(cluster=cluster, name=ref)
        if not found:
            where = f" on {cluster}" if cluster else ""
            raise JobNotFound(f"no job {ref!r}{where}; `gtc job list` shows the jobs jupyter_gtc knows")
        job = Job(found[0], self)
        if found[0].state not in FINISHED_STATES:
            job.refresh()
        return job

    def list(self, cluster: str | None = None) -> list[Job]:
        jobs = [Job(r, self) for r in self.store.find_jobs(cluster=cluster)]
        for job in jobs:
            if job._record.state not in FINISHED_STATES:
                job.refresh()
        return jobs

    def queue(self, cluster: str) -> list[JobStatus]:
        """Every job the cluster's slurmctld knows (anyone's, not only ours), in one squeue."""
        return self._commands(cluster).queue()

    def cancel(self, job: Job) -> None:
        self._commands(job.cluster).cancel([job.id])
        self._show_soon(job)

    def requeue(self, job: Job) -> None:
        try:
            self._commands(job.cluster).requeue(job.id)
        except CommandError as e:
            raise GtcError(f"job {job.id} cannot be requeued: {e.stderr.strip() or e}") from None
        self._show_soon(job)

    def hold(self, job: Job) -> None:
        """``scontrol hold``; a finished job cannot be held (``CommandError``)."""
        self._commands(job.cluster).hold(job.id)
        self._show_soon(job)

    def release(self, job: Job) -> None:
        self._commands(job.cluster).release(job.id)
        self._show_soon(job)

    def _show_soon(self, job: Job) -> None:
        """After an action: the job's new state (and reason) shows at the poller's next tick, at once."""
        poller = self.poller(job.cluster)
        poller.watch(job.id)
        poller.poke()

    def _new_job_dir(self, cluster: str, name: str, chosen: Path | None = None) -> Path:
        if chosen is not None:
            chosen.mkdir(parents=True, exist_ok=True)
            for sub in ("model", "checkpoints", "logs"):
                (chosen / sub).mkdir(exist_ok=True)
            return chosen
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = self.clusters.home / "jobs" / cluster
        for n in range(1000):
            job_dir = base / (f"{safe_name(name)}-{stamp}" + (f"-{n}" if n else ""))
            try:
                job_dir.mkdir(parents=True)
                break
            except FileExistsError:
                continue
        for sub in ("model", "checkpoints", "logs"):
            (job_dir / sub).mkdir()
        return job_dir

    def _contract_env(self, cluster: str, job_dir: Path, spec) -> dict[str, str]:
        """The Vertex AI job contract (DESIGN.md). CLOUD_ML_JOB_ID and the per-task parts of
        CLUSTER_SPEC are set inside each task by the cluster's TaskProlog."""
        return {
            "AIP_MODEL_DIR": f"{job_dir}/model/",
            "AIP_CHECKPOINT_DIR": f"{job_dir}/checkpoints/",
            "AIP_TENSORBOARD_LOG_DIR": f"{job_dir}/logs/",
            "CLOUD_ML_HP_METRIC_FILE": f"{job_dir}/hypertune.metrics",
            "GTC_CLUSTER": cluster,
            "GTC_JOB_DIR": str(job_dir),
        }
