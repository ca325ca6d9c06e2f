"""Jobs: submit an sbatch script to a cluster, follow it, cancel or requeue it.

A ``Job`` is a handle backed by the state store (it survives a kernel restart) whose live
state comes from the cluster's one ``ClusterPoller``. Jobs that others submitted (a terminal's
``sbatch``, another user) are ``ForeignJob`` handles on what the poller's snapshot says; they
are listed and acted on alike, but never recorded.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from ..backends import get_backend
from ..exceptions import (
    AmbiguousCluster, ClusterBusy, ClusterNotFound, CommandError, GtcError, JobLogUnknown, JobNotFound, LogRefused,
    JobStateConflict, JobTimeout,
)
from ..failure import FAILED_STATES, failure_line, read_log_ends
from ..hosts import LOCAL
from ..slurm.parse import FINISHED_STATES
from ..slurm.commands import SlurmCommands, state_refusal
from ..state import ClusterRecord, JobRecord, Store
from .clusters import DELETING, RUNNING, ClusterService
from ..metrics import progress
from ..metrics.goodput import Goodput, goodput_of
from ..metrics.progress import Progress
from ..metrics.resumed import latest_attempts
from .logs import LogFollower, read_log_range, tail_lines
from .metrics import JobMetrics, as_table
from .poller import ClusterPoller, JobView, Snapshot
from .submit import PYTHON_ENV_OPTION, submit_job


class Job:
    """A job jupyter_gtc submitted (an array is one Job). Cheap to create; ask it for fresh state.

    Its fields come from one view per poller tick: the poller's while it follows the job, else
    the row the state store had when the handle was made. The view is read again only once
    the poller has seen a change (``ClusterPoller.version``), so a listing of many jobs costs
    no query per job and per field."""

    managed = True  # submitted through jupyter_gtc: it has a job folder, the job contract, metrics

    def __init__(self, record: JobRecord, service: "JobService", poller: ClusterPoller, seen: JobView | None = None):
        self._record = record
        self._service = service
        self._poller = poller
        self._seen = seen  # Slurm's view in the snapshot the handle came from: fresher than the row
        self._cached: tuple[int, JobView] | None = None

    cluster = property(lambda self: self._record.cluster)
    id = property(lambda self: self._record.slurm_id)
    name = property(lambda self: self._record.name)
    job_dir = property(lambda self: Path(self._record.job_dir))
    host = property(lambda self: self._poller.host, doc="Where its folder and log are (the cluster's host).")

    @property
    def _live(self) -> JobView:
        version = self._poller.version  # before the read: a tick in between only re-reads next time
        if self._cached is None or self._cached[0] != version:
            self._cached = (version, self._poller.view(self.id) or self._recorded())
        return self._cached[1]

    def _recorded(self) -> JobView:
        if self._seen is not None:
            return self._seen
        r = self._record
        return JobView(r.slurm_id, r.state, r.exit_code, r.reason, r.nodes, r.start_time, r.end_time, 0, r.tasks,
                       r.user or "", r.name, r.submitted_at)

    def _changed(self) -> None:
        """An action of this handle: read the poller's view again, whatever its version."""
        self._cached = None

    state = property(lambda self: self._live.state)
    exit_code = property(lambda self: self._live.exit_code)
    tasks = property(lambda self: self._live.tasks)
    nodes = property(lambda self: self._live.nodes)
    reason = property(lambda self: self._live.reason, doc="Why it waits (Resources, JobHeldUser, ...) when Slurm says.")
    started_at = property(lambda self: self._live.start_time, doc="When it started (epoch seconds); None before.")
    ended_at = property(lambda self: self._live.end_time, doc="When it ended (epoch seconds); None before.")

    @property
    def finished(self) -> bool:
        return self._live.finished

    @property
    def attempts(self) -> int:
        """How many times it has started: 1, and one more for each requeue (a node failure, a
        hang, ``requeue()``); each attempt's output is in its one log."""
        return self._live.restart_count + 1

    @property
    def elapsed(self) -> float | None:
        """Seconds it has run (so far, or in all once finished); None before it starts."""
        live = self._live
        if live.start_time is None or live.start_time > time.time():  # a requeued job's start lies in the future
            return None
        return (live.end_time or time.time()) - live.start_time

    @property
    def user(self) -> str | None:
        """The Slurm user it runs as (squeue's ``user_name``); None for jobs recorded before
        jupyter_gtc kept it."""
        return self._live.user or self._record.user

    @property
    def submitted_at(self) -> float:
        return self._record.submitted_at

    @property
    def python_env(self) -> Path | None:
        """The Python environment the job got first on its PATH (``--python-env``, recorded
        with its options); None when it got none, or was submitted before jupyter_gtc gave one."""
        given = [o.split("=", 1)[1] for o in self._record.options if o.startswith(PYTHON_ENV_OPTION + "=")]
        return Path(given[-1]) if given and given[-1] != "none" else None

    @property
    def log_path(self) -> Path | None:
        """The batch script's output (for an array, its first task's): in the job folder,
        unless its ``--output`` sent it where Slurm says."""
        names = self._job_dir_names()
        if f"slurm-{self.id}.out" in names:
            return self.job_dir / f"slurm-{self.id}.out"
        tasks = self._task_logs(names)
        if tasks:
            return next(iter(tasks.values()))
        said = self._live.log_path
        return Path(said) if said and "%" not in said else self.job_dir / f"slurm-{self.id}.out"

    def task_logs(self) -> dict[str, Path]:
        """An array job's output file per task id, in task order (none for a job that is no
        array, or tasks that have not started): in the job folder as our submit names it, else
        where Slurm said the task writes. Tasks may share one file (an ``--output`` without %a)."""
        return self._task_logs(self._job_dir_names())

    def _job_dir_names(self) -> set[str]:
        return {e.name for e in self.host.list_dir(self.job_dir) or ()} if self.job_dir is not None else set()

    def _task_logs(self, names: set[str]) -> dict[str, Path]:
        live = self._live
        prefix = f"slurm-{self.id}_"
        written = {n[len(prefix):-len(".out")] for n in names if n.startswith(prefix) and n.endswith(".out")}
        found: dict[str, Path] = {}
        for task in sorted(set(live.tasks) | {t for t in written if t.isdigit()}, key=int):
            said = live.task_logs.get(task, "")
            if task in written:
                found[task] = self.job_dir / f"{prefix}{task}.out"
            elif said and "%" not in said:
                found[task] = Path(said)
        return found

    def log_file(self, task: str | None = None) -> Path:
        """``log_path`` (or array task ``task``'s file); ``JobLogUnknown`` where Slurm does not
        say where the job writes."""
        path = self.log_path if task is None else self.task_logs().get(str(task))
        if path is None and task is not None:
            raise JobLogUnknown(self.id, self.cluster, f"job {self.id} ({self.name}) has no output of a task {task} "
                                f"yet (its tasks: {', '.join(self._live.tasks) or 'none'})")
        if path is None:
            raise JobLogUnknown(self.id, self.cluster, f"Slurm does not say where job {self.id} ({self.name}) writes "
                                f"its output: it ended before this process saw it in the queue, and the completion "
                                f"file has no path")
        return path

    def wait(self, timeout: float | None = None) -> "Job":
        """Block until the job has finished; raises ``JobTimeout`` after ``timeout`` seconds."""
        view = self._poller.wait_for(self.id, lambda v: v.finished, timeout)
        if view is None or not view.finished:
            raise JobTimeout(self.id, self.name, self.state, timeout)
        return self

    def wait_until_running(self, timeout: float | None = None) -> "Job":
        view = self._poller.wait_for(self.id, lambda v: v.state not in ("PENDING", "CONFIGURING"), timeout)
        if view is None or view.state in ("PENDING", "CONFIGURING"):
            raise JobTimeout(self.id, self.name, self.state, timeout, until="started")
        return self

    def logs(self, tail: int | None = None, task: str | int | None = None) -> str:
        """The job's output so far (an array's first task's, or task ``task``'s: ``task_logs``);
        only the last ``tail`` lines when given."""
        path = self.log_file(None if task is None else str(task))
        if tail is not None:
            return tail_lines(path, tail, host=self.host)
        follower = LogFollower(path, host=self.host)
        text = follower.read_new(limit=-1)
        if follower.refused is not None:
            raise LogRefused(str(follower.path), follower.refused)
        return text

    def failure(self) -> str | None:
        """Why it failed, in one line: its state, exit code and the log line that says why
        (``jupyter_gtc/failure.py``, reading only the log's head and tail); None while it runs
        or once it completed."""
        live = self._live
        if live.state not in FAILED_STATES:
            return None
        path = self.log_path
        return failure_line(live.state, live.exit_code, None if path is None else read_log_ends(self.host, path), path)

    def follow(self) -> LogFollower:
        """An incremental reader of the log: each ``read_new()`` returns only what was added."""
        return LogFollower(self.log_file(), host=self.host)

    def log_range(self, offset: int | None, limit: int) -> dict[str, Any]:
        """Up to ``limit`` bytes of the log from ``offset`` (or its last ``limit`` bytes):
        ``services.logs.read_log_range``, what the sidebar's log view pages through."""
        return read_log_range(self.log_file(), offset, limit, self.host)

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

    def metrics(self, all_attempts: bool = False):
        """Every scalar the job has written so far: tag, step, wall_time (a UTC timestamp),
        value, and run where its event files are in more than one folder, as a pandas
        DataFrame where pandas is installed, else a list of ``MetricRow``. Each step
        once: where a requeued attempt redid steps since its checkpoint, its values replace the
        dead attempt's, as in TensorBoard (``metrics/resumed.py``); ``all_attempts`` keeps both."""
        tail = self.metrics_feed
        tail.refresh(final=self.finished)  # an ended job's last hypertune line counts without its newline
        return as_table(tail.all() if all_attempts else latest_attempts(tail.all()))

    def progress(self) -> Progress | None:
        """How far the job is, from a ``progress/total_steps`` scalar or tqdm lines in its log."""
        tail = self.metrics_feed
        tail.refresh()
        log = self.logs(tail=5) if self.log_path is not None else ""
        return progress.from_scalars(tail.all()) or progress.from_log(log)

    def goodput(self, tag: str | None = None) -> Goodput:
        """Its wall time so far (from submit), the share that made steps that were kept, and
        where the rest went: startup, restart, recompute, stall, finish (``metrics/goodput.py``).
        Steps are those of ``tag`` (default ``train/loss``, else the tag with the most points)."""
        tail = self.metrics_feed
        tail.refresh()
        by_tag: dict[str, list[tuple[int, float]]] = {}
        for s in tail.all():
            if not s.tag.startswith("progress/"):
                by_tag.setdefault(s.tag, []).append((s.step, s.wall_time))
        chosen = tag or ("train/loss" if "train/loss" in by_tag else max(by_tag, key=lambda t: len(by_tag[t]),
                                                                           default=None))
        live = self._live
        return goodput_of(by_tag.get(chosen, []) if chosen else [], self.submitted_at,
                          live.end_time if live.finished and live.end_time else time.time(), live.restart_count)

    def plot(self, tags: list[str] | None = None):
        """A live plot of the job's scalars (a chart per tag, in a grid) that grows while it trains;
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
        self._poller.watch(self.id)
        return self

    def to_json(self) -> dict[str, Any]:
        """What the REST routes, the change feed and ``gtc job list --json`` send (the
        labextension's ``IJob``; tests/server/test_wire_types.py keeps the two alike)."""
        live = self._live
        log_path = self.log_path
        return {"cluster": self.cluster, "id": self.id, "name": self.name, "state": live.state,
                "exit_code": live.exit_code, "nodes": live.nodes, "elapsed": self.elapsed, "user": self.user,
                "job_dir": None if self.job_dir is None else str(self.job_dir), "tasks": live.tasks,
                "submitted_at": self.submitted_at, "reason": live.reason, "managed": self.managed,
                "finished": live.finished, "log_path": None if log_path is None else str(log_path),
                "attempts": self.attempts}

    def __repr__(self) -> str:
        code = f", exit_code={self.exit_code}" if self.exit_code is not None else ""
        mark = "" if self.managed else f", not ours: {self.user or 'unknown user'}"
        return f"<Job {self.id} {self.name!r} on {self.cluster}: {self.state}{code}{mark}>"


class ForeignJob(Job):
    """A job on the cluster that jupyter_gtc did not submit (a terminal's ``sbatch``, another
    user's), as Slurm knows it: from the poller's snapshot of the queue, or of the completion
    file once slurmctld has forgotten it. It is not in the state store. Cancel, hold, release,
    requeue and waiting work as on ours; it has no job folder, so no metrics, model or
    checkpoints; its log is where Slurm says the job writes (while squeue reports it)."""

    managed = False

    def __init__(self, cluster: str, view: JobView, service: "JobService", poller: ClusterPoller):
        record = JobRecord(cluster, view.slurm_id, view.name, view.state, "", user=view.user or None,
                           submitted_at=view.submitted_at or 0.0)
        super().__init__(record, service, poller, view)

    def _recorded(self) -> JobView:
        return self._poller.latest(self.id) or self._seen

    job_dir = property(lambda self: None)
    model_dir = checkpoint_dir = log_dir = hypertune_file = job_dir

    @property
    def host(self):
        """The cluster's host, reading only files of the job's user: its ``--output`` is its
        submitter's choice, and must not show what that user could not read."""
        return self._poller.host.owned_by(self.user)

    @property
    def log_path(self) -> Path | None:
        """Where Slurm says the job writes; for a job only the completion file knows (it does not
        say), sbatch's default file in the job's folder if the job wrote it (not an older job's
        of the same id: a local cluster made again numbers from 1 again), else None."""
        live = self._live
        if live.log_path:
            return Path(live.log_path)
        if not live.work_dir:
            return None
        first = min(live.tasks, key=int, default=None)
        name = f"slurm-{self.id}_{first}.out" if first is not None else f"slurm-{self.id}.out"
        default = Path(live.work_dir) / name
        written = self.host.stat(default)
        if written is None:
            return None
        return default if live.start_time is not None and written.mtime >= live.start_time else None

    @property
    def metrics_feed(self) -> JobMetrics:
        """A reader of nothing: the job has no log dir of ours (``AIP_TENSORBOARD_LOG_DIR``)."""
        global _no_metrics
        with _no_metrics_lock:
            if _no_metrics is None:
                _no_metrics = JobMetrics(Path(os.devnull) / "no-log-dir")  # a folder that cannot exist
            return _no_metrics


_no_metrics: JobMetrics | None = None
_no_metrics_lock = threading.Lock()


def _lookup(snapshot: Snapshot, ref: str) -> JobView | None:
    """The job ``ref`` names in ``snapshot``: by id, else the newest of that name."""
    if ref in snapshot.views:
        return snapshot.views[ref]
    named = [v for v in snapshot.views.values() if v.name == ref]
    return max(named, key=lambda v: (v.submitted_at or 0.0, _numeric(v.slurm_id)), default=None)


def _numeric(slurm_id: str) -> int:
    return int(slurm_id) if slurm_id.isdigit() else 0


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

    def poller(self, cluster: str, record: ClusterRecord | None = None) -> ClusterPoller:
        """The process's one poller for ``cluster``: one per incarnation, since a cluster
        deleted and created again under the same name numbers its jobs from 1 again. (Given
        the cluster's ``record``, no query.)"""
        if record is None:
            try:
                record = self.store.get_cluster(cluster)
            except ClusterNotFound:
                pass
        incarnation = None if record is None else record.created_at
        with self._lock:
            known = self._pollers.get(cluster)
            if known is None or known[0] != incarnation:
                backend = get_backend(record.backend, self.clusters.home) if record is not None else None
                known = self._pollers[cluster] = (
                    incarnation, ClusterPoller(
                        cluster, lambda: self._commands(cluster), self.store,
                        host=backend.host(record.runtime) if backend else LOCAL,
                        min_interval=backend.min_poll_interval(record.runtime) if backend else 0.0,
                        incarnation=incarnation))
            return known[1]

    def metrics_of(self, job: Job) -> JobMetrics:
        """The process's one metrics reader for ``job``."""
        with self._lock:
            key = job.job_dir  # unique, unlike (cluster, id) across a cluster's incarnations
            if key not in self._metrics:
                self._metrics[key] = JobMetrics(job.log_dir, job.hypertune_file, host=job.host)
            return self._metrics[key]

    def _commands(self, cluster: str, record: ClusterRecord | None = None) -> SlurmCommands:
        record = record or self.store.get_cluster(cluster)
        if record.state == DELETING:
            # Its daemons may be stopping: a squeue of a controller that is gone retries for a
            # minute (and outlives a process that exits meanwhile). Its jobs are being cancelled.
            raise ClusterBusy(cluster, f"{cluster} is being deleted", record.state)
        return get_backend(record.backend, self.clusters.home).commands(record.runtime)

    def jobs_root(self, cluster: str) -> Path:
        """The folder on the cluster's host under which its jobs get their folders."""
        record = self.store.get_cluster(cluster)
        return Path(get_backend(record.backend, self.clusters.home).jobs_root(cluster, record.runtime))

    def submit(self, cluster: str, script: str, options: list[str] | None = None, *,
               script_args: list[str] | None = None, env: dict[str, str] | None = None,
               job_dir: Path | None = None, default_name: str = "job",
               python_env: str | os.PathLike | bool | None = None, hang_timeout: float | None = None,
               submit_dir: str | os.PathLike | None = None) -> Job:
        """Submit ``script`` to ``cluster``; ``options`` (sbatch's) win over its #SBATCH lines.
        Without a job name in either, the job is named ``default_name`` (a script file's name,
        as sbatch names it). The job runs with ``python_env`` first on its PATH (``job_env``:
        by default this interpreter's environment; ``"none"`` for sbatch's PATH as it is).

        For callers that build on jobs (tuning): ``script_args`` reach the script as ``"$@"``
        (hyperparameter flags), ``env`` is added to the job contract's variables, and
        ``job_dir`` (new, or empty) replaces the folder made per job. It runs in ``submit_dir``
        (the submitter's working directory) where the cluster has it, else in its job folder
        (``services/submit.py``)."""
        record = self.store.get_cluster(cluster)
        poller = self.poller(cluster, record)
        job = submit_job(self.store, get_backend(record.backend, self.clusters.home), record, poller.host,
                         lambda: self._commands(cluster, record), script, options, script_args=script_args, env=env,
                         job_dir=job_dir, default_name=default_name, python_env=python_env,
                         hang_timeout=hang_timeout, submit_dir=submit_dir)
        poller.watch(job.slurm_id)
        return Job(job, self, poller)

    def get(self, ref: str, cluster: str | None = None) -> Job:
        """A job by Slurm id or by name (the newest of that name): ours from the state store,
        else one that slurmctld or the completion file knows (a ``ForeignJob``)."""
        found = self.store.find_jobs(cluster=cluster, slurm_id=ref) or self.store.find_jobs(cluster=cluster, name=ref)
        if found:
            job = Job(found[0], self, self.poller(found[0].cluster))
        else:
            job = self._find_foreign(ref, cluster)
        if job is None:
            raise JobNotFound(ref, cluster)
        if not job.finished:
            job.refresh()
        return job

    def list(self, cluster: str | None = None, foreign: bool = False) -> list[Job]:
        """Jobs of ``cluster`` (or of every cluster), newest first: ours, all that the state
        store holds; with ``foreign``, also the others that slurmctld knows (a terminal's
        ``sbatch``, another user's) and finished ones the completion file recorded. Costs two
        queries however many jobs, and with ``foreign`` waits for a poller tick when its last
        snapshot is over a second old."""
        records = self._clusters_named(cluster)
        pollers = {r.name: self.poller(r.name, r) for r in records}
        # The snapshots first: a job submitted through us meanwhile is then in the store, never
        # taken for someone else's.
        snapshots = {r.name: pollers[r.name].snapshot() for r in records if foreign and r.state == RUNNING}
        jobs: list[Job] = []
        ours: dict[str, set[str]] = {}
        for r in self.store.find_jobs(cluster=cluster):
            poller = pollers.get(r.cluster) or self.poller(r.cluster)
            snapshot = snapshots.get(r.cluster)
            seen = snapshot.views.get(r.slurm_id) if snapshot is not None and r.slurm_id in snapshot.queued else None
            jobs.append(Job(r, self, poller, seen))
            ours.setdefault(r.cluster, set()).add(r.slurm_id)
        for job in jobs:
            if job._record.state not in FINISHED_STATES:
                job.refresh()
        for name, snapshot in snapshots.items():
            jobs += [ForeignJob(name, view, self, pollers[name]) for slurm_id, view in snapshot.views.items()
                     if slurm_id not in ours.get(name, ())]
        if snapshots:
            jobs.sort(key=lambda j: (j.submitted_at or 0.0, _numeric(j.id)), reverse=True)
        return jobs

    def queue(self, cluster: str) -> list[Job]:
        """Every job the cluster's slurmctld knows now (what ``squeue`` shows: anyone's,
        finished ones for a while), newest first; ours as ``Job``, others as ``ForeignJob``."""
        record = self.store.get_cluster(cluster)
        poller = self.poller(cluster, record)
        snapshot = poller.snapshot()
        ours = {r.slurm_id: r for r in self.store.find_jobs(cluster=cluster)}
        jobs = [Job(ours[i], self, poller, v) if i in ours else ForeignJob(cluster, v, self, poller)
                for i, v in snapshot.views.items() if i in snapshot.queued]
        return sorted(jobs, key=lambda j: (j.submitted_at or 0.0, _numeric(j.id)), reverse=True)

    def _clusters_named(self, cluster: str | None) -> list[ClusterRecord]:
        if cluster is None:
            return self.store.list_clusters()
        try:
            return [self.store.get_cluster(cluster)]
        except ClusterNotFound:
            return []

    def _find_foreign(self, ref: str, cluster: str | None) -> ForeignJob | None:
        """A job we did not submit, by id or name, in the running clusters' snapshots: first as
        of the last second, then (not found) as of a tick after this call."""
        records = [r for r in self._clusters_named(cluster) if r.state == RUNNING]
        for max_age in (1.0, 0.0):
            hits = []
            for record in records:
                poller = self.poller(record.name, record)
                view = _lookup(poller.snapshot(max_age), ref)
                if view is not None:
                    hits.append(ForeignJob(record.name, view, self, poller))
            if len(hits) > 1:
                raise AmbiguousCluster([j.cluster for j in hits], what=f"job {ref!r}")
            if hits:
                return hits[0]
        return None

    def cancel(self, job: Job) -> None:
        self._commands(job.cluster).cancel([job.id])
        self._show_soon(job)

    def requeue(self, job: Job) -> None:
        try:
            self._act(job, "requeue")
        except CommandError as e:
            raise GtcError(f"job {job.id} cannot be requeued: {e.stderr.strip() or e}") from None

    def hold(self, job: Job) -> None:
        """``scontrol hold``; a finished job cannot be held (``JobStateConflict``)."""
        self._act(job, "hold")

    def release(self, job: Job) -> None:
        self._act(job, "release")

    def _act(self, job: Job, action: str) -> None:
        """``scontrol <action> <id>``. A refusal because of the job's state is the caller's
        mistake: ``JobStateConflict``, with the state slurmctld has now (the poller's view may be
        a tick behind, and the message must not contradict Slurm's reason)."""
        commands = self._commands(job.cluster)
        try:
            getattr(commands, action)(job.id)
        except CommandError as e:
            reason = state_refusal(e)
            if reason is None:
                raise
            try:
                state = next((s.state for s in commands.queue() if s.job_id == job.id), job.state)
            except CommandError:
                state = job.state
            raise JobStateConflict(job.id, job.name, state, action, reason) from None
        self._show_soon(job)

    def _show_soon(self, job: Job) -> None:
        """After an action: the handle (and the REST answer made from it) says the job's new
        state and reason, read by a tick that began after the action, not the view before it
        (``job.hold().reason`` is JobHeld..., not BeginTime)."""
        job._poller.watch(job.id)
        job._poller.next_tick()
        job._changed()
