"""The driver: one background thread per study, in the process that started or resumed it,
that keeps ``parallel`` trials running until the study is done.

Each turn of its loop (woken by every tick of the cluster's one poller, at least once a
second while it is subscribed) it:

1. reads each running trial's new metric values from ``job.metrics_feed`` (the job's one
   incremental reader: hypertune file and TensorBoard scalars) and reports them to Optuna
   (``trial.report(value, step)``); if the pruner says so, it cancels the job in Slurm and
   tells Optuna PRUNED;
2. tells Optuna how each trial whose job has finished went: COMPLETE with the last or best
   value (measurement selection), or FAIL (the job failed, or reported no value);
3. stops the study when asked, or when failures reach the budget (running trials are
   cancelled and recorded as pruned, with the reason), or when every trial has finished;
4. asks Optuna for new trials and submits each as a Slurm job, up to ``parallel`` at once
   (a cancelled trial holds its slot until Slurm has ended its job).

Everything it knows lives in Optuna's storage (trials, values, each trial's Slurm job id)
and the state store (the study's state, stop requests from other processes, the driver's
heartbeat), so a new driver in another process can take over: ``resume()`` re-attaches
trials that were running, and finished trials stay as they were.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...exceptions import GtcError
from ...metrics import Scalar
from ...spec.study import TuningSpec, format_flag
from ...state import Store
from . import engine
from .trials import FAIL_REASON, JOB_DIR, JOB_ID, LOST, STOP_REASON, TRIAL_ID, counted, failure_budget_spent

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
TURN_S = 1.0  # the longest the loop sleeps when nothing wakes it


@dataclass(eq=False)
class _Running:
    """A trial whose job has not finished yet (maybe cancelled and told already)."""

    trial: object                       # optuna.trial.Trial
    job: object                         # jobs.Job
    reported: set[int] = field(default_factory=set)
    points: list[tuple[int, float, float]] = field(default_factory=list)  # (step, wall_time, value)
    inbox: deque = field(default_factory=deque)  # new Scalars, filled by the metrics feed's listener
    other_tags: set[str] = field(default_factory=set)  # what it reported besides the metric
    unsubscribe: Callable[[], None] | None = None
    told: bool = False                  # Optuna knows its end; waiting for Slurm to end the job


class StudyDriver:
    def __init__(self, name: str, cluster: str, spec: TuningSpec, trials_dir: Path, optuna_study, jobs,
                 store: Store, publish: Callable[[], None]):
        self.name, self.cluster, self.spec, self.trials_dir = name, cluster, spec, Path(trials_dir)
        self.study = optuna_study
        self.jobs = jobs
        self.store = store
        self._publish = publish
        self._running: dict[int, _Running] = {}
        self._wake = threading.Event()
        self._stop_reason: str | None = None
        self._stop_trials: set[int] = set()
        self._lock = threading.Lock()
        self._last_heartbeat = 0.0
        self._done = False
        self._thread = threading.Thread(target=self._run, name=f"gtc-study-{name}", daemon=True)
        self.error: str | None = None

    # -- what the Study handle calls (any thread) -----------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Whether it still drives the study (its thread may linger a moment after that)."""
        return self._thread.is_alive() and not self._done

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def request_stop(self, reason: str = "stopped by the user") -> None:
        with self._lock:
            self._stop_reason = self._stop_reason or reason
        self._wake.set()

    def request_stop_trial(self, number: int) -> None:
        with self._lock:
            self._stop_trials.add(number)
        self._wake.set()

    # -- the loop ----------------------------------------------------------------------

    def _run(self) -> None:
        unsubscribe = self.jobs.poller(self.cluster).subscribe(lambda _changed: self._wake.set())
        try:
            self._reattach()
            self._publish()
            while not self._turn():
                self._wake.wait(TURN_S)
                self._wake.clear()
        except Exception as e:  # noqa: BLE001 - recorded for the user; `resume()` starts over
            log.exception("the driver of study %s stopped", self.name)
            self.error = f"the driver stopped: {type(e).__name__}: {e}"
            self.store.update_study(self.name, reason=self.error)
        finally:
            unsubscribe()
            for run in self._running.values():
                if run.unsubscribe:
                    run.unsubscribe()
            self.store.update_study(self.name, driver_pid=None, driver_host=None)
            self._done = True
            self._publish()

    def _turn(self) -> bool:
        """One pass over the study; True once it has ended."""
        import optuna

        self._heartbeat()
        record = self.store.get_study(self.name)
        with self._lock:
            stop_reason, self._stop_reason = self._stop_reason, None
            wanted = self._stop_trials | set(record.stop_trials)
            self._stop_trials = set()
        if record.stop_trials:
            self.store.update_study(self.name, stop_trials=[])
        if record.state == "STOPPING":
            stop_reason = stop_reason or record.reason or "stopped by the user"
        changed = False
        for number in wanted:
            run = self._running.get(number)
            if run is not None and not run.told:
                self._cancel(run, "stopped by the user")
                changed = True
        for number, run in list(self._running.items()):
            changed |= self._follow(number, run)
        if stop_reason:
            return self._end("STOPPED", stop_reason)
        trials = counted(self.study.get_trials(deepcopy=False))
        failed = sum(t.state == optuna.trial.TrialState.FAIL for t in trials)
        if failed >= self.spec.failure_budget:
            return self._end("FAILED", failure_budget_spent(self.spec, trials))
        limit = self.spec.max_trial_count
        if self.spec.algorithm == "grid":
            limit = min(limit, engine.grid_size(self.spec))
        started = len(trials)
        while len(self._running) < self.spec.parallel_trial_count and started < limit:
            self._launch()
            started += 1
            changed = True
        if not self._running and started >= limit:
            return self._end("SUCCEEDED", None)
        if changed:
            self._publish()
        return False

    def _heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat >= HEARTBEAT_S:
            self.store.update_study(self.name, heartbeat_at=time.time())
            self._last_heartbeat = now

    # -- trials --------------------------------------------------------------------------

    def _launch(self) -> None:
        import optuna

        trial = self.study.ask()
        trial_id = str(trial.number + 1)
        params = engine.suggest(trial, self.spec)
        trial_dir = self.trials_dir / trial_id
        trial.set_user_attr(TRIAL_ID, trial_id)
        trial.set_user_attr(JOB_DIR, str(trial_dir))
        env = {"CLOUD_ML_TRIAL_ID": trial_id, "CLOUD_ML_HP_METRIC_FILE": f"{trial_dir}/hypertune.metrics"}
        try:
            job = self.jobs.submit(self.cluster, self.spec.script, [f"--job-name={self.name}-{trial_id}"],
                                   script_args=[format_flag(k, v) for k, v in params.items()], env=env,
                                   job_dir=trial_dir, submit_dir=self.spec.local.submit_dir)
        except GtcError as e:
            trial.set_user_attr(FAIL_REASON, f"not submitted: {e}")
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            return
        trial.set_user_attr(JOB_ID, job.id)
        self._attach(trial.number, trial, job, set())

    def _attach(self, number: int, trial, job, reported: set[int]) -> None:
        run = _Running(trial, job, reported=set(reported))
        metric = self.spec.metric.metric_id

        def take(scalars: list[Scalar]) -> None:  # called by whichever thread reads the files
            run.inbox.extend(s for s in scalars if s.tag == metric)
            run.other_tags.update(s.tag for s in scalars if s.tag != metric and not s.tag.startswith("progress/"))
            self._wake.set()

        run.unsubscribe = job.metrics_feed.subscribe(take)
        self._running[number] = run

    def _reattach(self) -> None:
        """Trials that were running when the last driver stopped: follow their jobs again,
        which still run in Slurm (or have finished meanwhile)."""
        import optuna

        for frozen in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            # Optuna's own integrations rebuild a live Trial from its storage id this way.
            trial = optuna.trial.Trial(self.study, frozen._trial_id)
            job_id = frozen.user_attrs.get(JOB_ID) or self._job_in_folder(frozen.user_attrs.get(JOB_DIR))
            if job_id is None:
                trial.set_user_attr(LOST, True)
                trial.set_user_attr(FAIL_REASON, "its driver stopped before submitting it")
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            try:
                job = self.jobs.get(job_id, self.cluster)
            except GtcError as e:
                trial.set_user_attr(FAIL_REASON, f"its job cannot be found: {e}")
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            self._attach(frozen.number, trial, job, set(frozen.intermediate_values))

    def _job_in_folder(self, job_dir: str | None) -> str | None:
        """The job submitted into ``job_dir``, for a driver that died between sbatch and
        recording the job id on the trial (the job service records every job it submits)."""
        if job_dir is None:
            return None
        found = [r for r in self.jobs.store.find_jobs(cluster=self.cluster) if r.job_dir == job_dir]
        return found[0].slurm_id if found else None

    def _follow(self, number: int, run: _Running) -> bool:
        """Report what the trial's job wrote; tell Optuna once the job has ended. Returns
        whether anything changed."""
        finished = run.job.finished  # read before the files: the last read then sees everything
        run.job.metrics_feed.refresh()
        changed = self._report(run)
        if finished:
            run.job.metrics_feed.refresh(final=True)  # nothing writes now: a last line without its newline counts
            self._report(run)
            if not run.told:
                self._tell_finished(run)
            if run.unsubscribe:
                run.unsubscribe()
            del self._running[number]
            return True
        return changed

    def _report(self, run: _Running) -> bool:
        new = []
        while run.inbox:
            s = run.inbox.popleft()
            new.append((s.step, s.wall_time, s.value))
        if not new:
            return False
        run.points = sorted(run.points + new)
        if run.told:
            return True
        for step, _, value in sorted(new):
            if step not in run.reported:
                run.trial.report(value, step)
                run.reported.add(step)
        if self.spec.early_stopping != "none" and run.trial.should_prune():
            self._cancel(run, f"{self.spec.early_stopping.replace('_', ' ')} rule")
        return True

    def _tell_finished(self, run: _Running) -> None:
        import optuna

        job = run.job
        value = engine.final_value([(s, v) for s, _, v in run.points], self.spec.measurement_selection,
                                   self.spec.metric.direction)
        if job.state != "COMPLETED":  # why, once, from its log: REST polls read the trial's attribute
            code = f", exit code {job.exit_code}" if job.exit_code is not None else ""
            run.trial.set_user_attr(FAIL_REASON, f"job {job.id} " + (job.failure() or f"ended {job.state}{code}"))
            self.study.tell(run.trial, state=optuna.trial.TrialState.FAIL)
        elif value is None:
            why = self._why_nothing(run)
            run.trial.set_user_attr(FAIL_REASON, f"job {job.id} reported no {self.spec.metric.metric_id}"
                                                 + (f": {why}" if why else ""))
            self.study.tell(run.trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(run.trial, value)
        run.told = True

    def _why_nothing(self, run: _Running) -> str | None:
        """Why a finished trial's job reported no value of the metric, where known: other
        metrics only, or what was wrong with its hypertune file."""
        if run.other_tags:
            return (f"it reported only {', '.join(sorted(run.other_tags)[:5])} (the study's metric is "
                    f"{self.spec.metric.metric_id})")
        return run.job.metrics_feed.hypertune_problem

    def _cancel(self, run: _Running, reason: str) -> None:
        """Stop a trial early: cancel its job and record it as pruned, saying why."""
        import optuna

        try:
            run.job.cancel()
        except GtcError as e:  # it may have ended just now; its end is recorded either way
            log.warning("could not cancel job %s of study %s: %s", run.job.id, self.name, e)
        run.trial.set_user_attr(STOP_REASON, reason)
        self.study.tell(run.trial, state=optuna.trial.TrialState.PRUNED)
        run.told = True

    def _end(self, state: str, reason: str | None) -> bool:
        for run in self._running.values():
            if not run.told:
                self._cancel(run, f"study {state.lower()}" + (f": {reason}" if reason else ""))
        self.store.update_study(self.name, state=state, reason=reason)
        return True
