"""Tuning studies: create one from a ``TuningSpec`` on a cluster, find it again, drive it,
stop it. Each trial is a Slurm job (``JobService.submit`` with the trial's flags, env and
folder); Optuna suggests, prunes and keeps the record (see ``engine`` and ``driver``).

Files: ``<GTC_HOME>/studies/<name>/`` holds ``optuna.db`` (the study's Optuna storage) and
one folder per trial, ``<trial_id>/``, which is that trial's job folder (``job.sbatch``,
``slurm-<id>.out``, ``hypertune.metrics``, ``model/``, ``checkpoints/``, ``logs/``).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from ..._process import process_alive, this_process
from ...backends import get_backend
from ...exceptions import ClusterBusy, GtcError, SpecError, StudyBusy, StudyExists
from ...spec.cluster import parse_cluster_spec
from ...spec.study import TuningSpec, parse_tuning_spec
from ...state import Store
from ...state.store import StudyRecord
from . import engine
from .driver import HEARTBEAT_S, StudyDriver
from .naming import name_taken, next_free
from ..submit import trials_submit_dir
from .study import Study, StudyFeed
from .trials import FINISHED_STUDY_STATES, JOB_ID, STOP_REASON, StudySnapshot, shown, trial_view

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")  # with fullmatch: `$` lets "abc\n" through
NAME_RULE = "1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"
STALE_AFTER_S = 10 * HEARTBEAT_S  # a driver on another host silent this long is taken for dead


class TuningService:
    def __init__(self, store: Store, jobs, home: Path):
        self.store = store
        self.jobs = jobs
        self.home = Path(home)
        self._drivers: dict[str, StudyDriver] = {}
        self._feeds: dict[str, StudyFeed] = {}
        self._optuna: dict[str, Any] = {}
        self._lock = threading.RLock()

    # -- the public actions ------------------------------------------------------------

    def create(self, cluster: str, spec: TuningSpec | dict | str, name: str | None = None,
               submit_dir: str | None = None) -> Study:
        """Record a new study and start driving it from this process. Its trials run in
        ``submit_dir`` (the creator's working directory; the spec's ``local.submit_dir`` wins),
        kept with the study for whichever process drives it; None: each in its job folder."""
        spec = spec if isinstance(spec, TuningSpec) else parse_tuning_spec(spec)
        name = name or default_name(spec, {r.name for r in self.store.find_studies()})
        if not NAME_RE.fullmatch(name):
            raise SpecError("name", name, NAME_RULE)
        record = self.store.get_cluster(cluster)  # raises ClusterNotFound, naming the clusters
        if record.state != "RUNNING":
            raise ClusterBusy(cluster, f"cluster {cluster} is {record.state}; a study can start when it is RUNNING",
                              record.state)
        place = trials_submit_dir(get_backend(record.backend, self.home), record, name,
                                  spec.local.submit_dir or submit_dir)
        spec = spec.model_copy(update={"local": spec.local.model_copy(update={"submit_dir": place})})
        study_dir = self.home / "studies" / name
        storage_path = study_dir / "optuna.db"
        _, sampler_name, why = engine.make_sampler(spec)
        pid, host = _pid_and_host()
        try:
            self.store.add_study(StudyRecord(
                name=name, cluster=cluster, spec=spec.to_json(), state="RUNNING", study_dir=str(study_dir),
                storage=f"sqlite:///{storage_path}", sampler=f"{sampler_name}: {why}", driver_pid=pid,
                driver_host=host, heartbeat_at=time.time()))
        except StudyExists:
            raise name_taken(self.store.get_study(name), {r.name for r in self.store.find_studies()}) from None
        self._start_driver(name)
        return Study(name, self)

    def get(self, name: str) -> Study:
        self.store.get_study(name)  # raises StudyNotFound, naming the studies
        return Study(name, self)

    def list(self, cluster: str | None = None) -> list[Study]:
        return [Study(r.name, self) for r in self.store.find_studies(cluster)]

    def resume(self, name: str) -> Study:
        """Drive the study from this process, unless a live process drives it already."""
        record = self.store.get_study(name)
        with self._lock:
            driver = self._drivers.get(name)
            if driver is not None and driver.alive:
                return Study(name, self)
            if record.state in ("SUCCEEDED", "FAILED"):
                return Study(name, self)  # nothing left to run: a new study tries again
            pid, host = _pid_and_host()
            holder = self.store.claim_study(name, pid, host, self._holder_alive)
            if holder is not None:
                raise StudyBusy(f"study {name} is driven by process {holder.driver_pid} on {holder.driver_host}; "
                               "watch it from here, or stop that process first")
            self.store.update_study(name, state="RUNNING", reason=None)
            self._start_driver(name)
        return Study(name, self)

    def stop(self, name: str) -> None:
        """Stop the study: by its driver here, by asking the driver elsewhere through the state
        store, or, when nothing drives it, here and now."""
        record = self.store.get_study(name)
        if record.state in FINISHED_STUDY_STATES:
            return
        driver = self._drivers.get(name)
        if driver is not None and driver.alive:
            driver.request_stop()
            driver.join(timeout=30)
            return
        self.store.update_study(name, state="STOPPING", reason="stopped by the user")
        if not self.is_driven(record):
            self._stop_undriven(name)

    def stop_trial(self, name: str, number: int) -> None:
        running = [t for t in self.snapshot(name).trials if t.state == "RUNNING"]
        if number not in {t.number for t in running}:
            ids = ", ".join(t.trial_id for t in running) or "none now"
            raise SpecError("trial", str(number + 1), f"a running trial of study {name} (running: {ids})")
        driver = self._drivers.get(name)
        if driver is not None and driver.alive:
            driver.request_stop_trial(number)
            return
        record = self.store.get_study(name)
        if not self.is_driven(record):
            raise StudyBusy(f"study {name} is not driven by any process; resume it first")
        self.store.update_study(name, stop_trials=sorted({*record.stop_trials, number}))

    def to_vertex(self, name: str, image_uri: str | None = None) -> dict[str, Any]:
        record = self.store.get_study(name)
        spec = parse_tuning_spec(record.spec)
        machine = None
        try:
            cluster = parse_cluster_spec(self.store.get_cluster(record.cluster).spec)
            pool = cluster.pool(cluster.slurm.partitions[0].node_pool_ids[0])
            machine = pool.machine_spec.model_dump(mode="json", exclude_none=True, by_alias=True)
        except GtcError:
            pass  # the cluster is gone: the trial job spec goes without a machine type
        body = spec.to_vertex(machine, image_uri)
        body.setdefault("displayName", name)
        return body

    # -- what the handles use ------------------------------------------------------------

    def optuna_study(self, name: str):
        with self._lock:
            if name not in self._optuna:
                record = self.store.get_study(name)
                spec = parse_tuning_spec(record.spec)
                storage = engine.open_storage(Path(record.storage.removeprefix("sqlite:///")))
                self._optuna[name] = engine.create_or_load(spec, name, storage)
            return self._optuna[name]

    def snapshot(self, name: str) -> StudySnapshot:
        record = self.store.get_study(name)
        spec = parse_tuning_spec(record.spec)
        frozen = self.optuna_study(name).get_trials(deepcopy=False)
        return StudySnapshot(
            name=name, cluster=record.cluster, state=record.state, reason=record.reason, sampler=record.sampler,
            metric=spec.metric.metric_id, direction=spec.metric.direction, max_trials=spec.max_trial_count,
            parallel=spec.parallel_trial_count, trials=[trial_view(t, spec) for t in shown(frozen)],
            driven=self.is_driven(record))

    def feed(self, name: str) -> StudyFeed:
        with self._lock:
            if name not in self._feeds:
                self._feeds[name] = StudyFeed(name, lambda: self.snapshot(name), lambda: self._driving_here(name))
            return self._feeds[name]

    def is_driven(self, record: StudyRecord) -> bool:
        if self._driving_here(record.name):
            return True
        if record.driver_pid is None or (record.driver_pid, record.driver_host) == _pid_and_host():
            return False
        return self._holder_alive(record)

    # -- internals ----------------------------------------------------------------------

    def _start_driver(self, name: str) -> None:
        record = self.store.get_study(name)
        spec = parse_tuning_spec(record.spec)
        sampler, sampler_name, why = engine.make_sampler(spec)
        with self._lock:
            study = self.optuna_study(name)
            study.sampler = sampler  # a sampler is per process: each driver makes its own
            self.store.update_study(name, sampler=f"{sampler_name}: {why}")
            study.set_user_attr("sampler", f"{sampler_name}: {why}")
            # Trial folders go where the cluster's jobs go (on its host: an attached cluster's own
            # file system); the study's folder here keeps its Optuna storage.
            trials_dir = self.jobs.jobs_root(record.cluster) / "studies" / name
            driver = StudyDriver(name, record.cluster, spec, trials_dir, study, self.jobs, self.store,
                                 publish=lambda: self.feed(name).publish())
            self._drivers[name] = driver
        driver.start()

    def _driving_here(self, name: str) -> bool:
        driver = self._drivers.get(name)
        return driver is not None and driver.alive

    def _holder_alive(self, record: StudyRecord) -> bool:
        """Whether the process recorded as driving ``record`` still runs: its pid checked on
        this host (``process_alive``), and anywhere a heartbeat younger than ``STALE_AFTER_S``."""
        if record.driver_pid is None:
            return False
        if (record.driver_pid, record.driver_host) == _pid_and_host():
            return self._driving_here(record.name)
        return (process_alive({"pid": record.driver_pid, "host": record.driver_host})
                and time.time() - (record.heartbeat_at or 0) < STALE_AFTER_S)

    def _stop_undriven(self, name: str) -> None:
        """Stop a study that no process drives: cancel its running trials' jobs, record them."""
        import optuna

        study = self.optuna_study(name)
        record = self.store.get_study(name)
        for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            job_id = frozen.user_attrs.get(JOB_ID)
            if job_id is not None:
                try:
                    self.jobs.get(job_id, record.cluster).cancel()
                except GtcError:
                    pass  # gone already
            trial = optuna.trial.Trial(study, frozen._trial_id)
            trial.set_user_attr(STOP_REASON, "study stopped: stopped by the user")
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        self.store.update_study(name, state="STOPPED", reason="stopped by the user")


def default_name(spec: TuningSpec, taken: set[str], now: float | None = None) -> str:
    """A study's name where the user gave none: the spec's display_name if it makes a valid
    name, else its metric and the minute it starts (local time), ``val_loss-1201-0905``:
    short enough to read in a list of jobs (a trial's job is ``<study>-<trial id>``) and to
    type back. ``-2``, ``-3``, ... follow where ``taken`` (the store's studies) has it."""
    base = spec.display_name if spec.display_name and NAME_RE.fullmatch(spec.display_name) else None
    if base is None:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.metric.metric_id)[:24].strip("-._") or "study"
        base = f"{stem}-{time.strftime('%m%d-%H%M', time.localtime(now))}"
    return next_free(base, taken)


def _pid_and_host() -> tuple[int, str]:
    """This process as a study record names its driver (``driver_pid``, ``driver_host``)."""
    me = this_process()
    return me["pid"], me["host"]
