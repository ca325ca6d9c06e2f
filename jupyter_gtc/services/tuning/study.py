"""``Study``: the handle of a tuning study, backed by the state store and Optuna's storage, so
it survives a kernel restart and any number of processes can hold one. One of them drives
it (see ``driver``); the others watch.

A handle asks a ``StudyService`` (what ``service.TuningService`` is) for everything, so this
module never imports ``service``: the dependency points one way, service -> study.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ...exceptions import GtcError, SpecError, StudyTimeout
from ...spec.study import TuningSpec, parse_tuning_spec
from ...state import Store
from ...state.store import StudyRecord
from ..listeners import Listeners
from .trials import FINISHED_STUDY_STATES, StudySnapshot, TrialView, as_table

Listener = Callable[[StudySnapshot], None]
FOLLOW_S = 1.0  # how often a watching process re-reads a study it shows


class StudyService(Protocol):
    """What a ``Study`` handle needs of the service that made it."""

    store: Store

    def snapshot(self, name: str) -> StudySnapshot: ...
    def optuna_study(self, name: str) -> Any: ...
    def feed(self, name: str) -> StudyFeed: ...
    def is_driven(self, record: StudyRecord) -> bool: ...
    def stop(self, name: str) -> None: ...
    def stop_trial(self, name: str, number: int) -> None: ...
    def resume(self, name: str) -> Any: ...
    def to_vertex(self, name: str, image_uri: str | None = None) -> dict[str, Any]: ...


def _trial_number(trial: int | str) -> int:
    """Optuna's number of the trial whose id (as in ``trials``: "1", "2", ...) is ``trial``."""
    if isinstance(trial, int) and not isinstance(trial, bool) and trial >= 1:
        return trial - 1
    if isinstance(trial, str) and trial.isascii() and trial.isdigit() and not trial.startswith("0"):
        return int(trial) - 1
    raise SpecError("trial", trial, "a trial id as the study's trials show it: 1, 2, 3, ...")


class Study:
    """A tuning study: ``trials``, ``best_trial``, ``wait()``, ``stop()``, ``stop_trial()``,
    ``resume()``, ``to_vertex()``. Cheap to create; every read is fresh."""

    def __init__(self, name: str, service: StudyService):
        self.name = name
        self._service = service
        self._spec: TuningSpec | None = None

    @property
    def record(self) -> StudyRecord:
        return self._service.store.get_study(self.name)

    @property
    def cluster(self) -> str:
        return self.record.cluster

    @property
    def spec(self) -> TuningSpec:
        if self._spec is None:
            self._spec = parse_tuning_spec(self.record.spec)
        return self._spec

    @property
    def state(self) -> str:
        """RUNNING, STOPPING, SUCCEEDED, FAILED or STOPPED."""
        return self.record.state

    @property
    def reason(self) -> str | None:
        return self.record.reason

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STUDY_STATES

    @property
    def driven(self) -> bool:
        """Whether a live process (this one or another) drives the study now."""
        return self._service.is_driven(self.record)

    @property
    def sampler(self) -> str:
        """Which Optuna sampler drives it, and why (e.g. "tpe: bayesian: TPE, since ...")."""
        return self.record.sampler

    def snapshot(self) -> StudySnapshot:
        """The study and all its trials, as of now."""
        return self._service.snapshot(self.name)

    @property
    def trials(self):
        """One row per trial (pandas DataFrame where pandas is installed): state, parameters,
        latest and final metric, stopped early or not, why, Slurm job id, seconds."""
        return as_table(self.snapshot().trials, self.spec)

    @property
    def best_trial(self) -> TrialView | None:
        """The best completed trial so far (None before the first)."""
        return self.snapshot().best

    @property
    def optuna_study(self):
        """The underlying ``optuna.Study`` (read it; only the driver should tell it)."""
        return self._service.optuna_study(self.name)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(snapshot)`` now and whenever the study changes, from a background
        thread; returns a function that unsubscribes."""
        return self._service.feed(self.name).subscribe(listener)

    def wait(self, timeout: float | None = None) -> Study:
        """Block until the study has ended; ``StudyTimeout`` after ``timeout`` seconds. Raises
        at once if no process drives an unfinished study (``resume()`` it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.record
            if record.state in FINISHED_STUDY_STATES:
                return self
            if not self._service.is_driven(record):
                why = f" ({record.reason})" if record.reason else ""
                raise GtcError(f"study {self.name} is {record.state} but no process drives it{why}; "
                               "study.resume() continues it here")
            if deadline is not None and time.monotonic() >= deadline:
                counts = self.snapshot().counts
                raise StudyTimeout(f"study {self.name} is still {record.state} after {timeout} s ({counts})")
            time.sleep(0.2)

    def stop(self) -> Study:
        """Stop the study: running trials are cancelled and recorded as pruned."""
        self._service.stop(self.name)
        return self

    def stop_trial(self, trial: int | str) -> Study:
        """Stop one running trial (by its trial id, as in ``trials``): its job is cancelled and
        it is recorded as pruned, "stopped by the user"."""
        number = _trial_number(trial)
        self._service.stop_trial(self.name, number)
        return self

    def resume(self) -> Study:
        """Drive the study from this process again (after a kernel or server restart): finished
        trials are kept, trials whose jobs still run are followed again."""
        self._service.resume(self.name)
        return self

    def to_vertex(self, image_uri: str | None = None) -> dict[str, Any]:
        """The study as a Vertex ``HyperparameterTuningJob`` body (camelCase)."""
        return self._service.to_vertex(self.name, image_uri)

    def to_json(self) -> dict[str, Any]:
        snap = self.snapshot()
        best = snap.best
        return {"name": snap.name, "cluster": snap.cluster, "state": snap.state, "reason": snap.reason,
                "sampler": snap.sampler, "metric": snap.metric, "direction": snap.direction,
                "max_trials": snap.max_trials, "parallel": snap.parallel, "driven": snap.driven,
                "counts": snap.counts, "best": best.to_json() if best else None,
                "trials": [t.to_json() for t in snap.trials], "spec": self.spec.to_json()}

    def __repr__(self) -> str:
        snap = self.snapshot()
        best = snap.best
        best_text = f", best {snap.metric}={best.value:.6g} (trial {best.trial_id})" if best else ""
        done = sum(n for s, n in snap.counts.items() if s != "RUNNING")
        return f"<Study {self.name!r} on {snap.cluster}: {snap.state}, {done}/{snap.max_trials} trials{best_text}>"


class StudyFeed:
    """Snapshots of one study for this process's listeners. In the driving process the driver
    publishes after each change; elsewhere a follower thread re-reads the storage every
    second while anyone listens and the study has not ended."""

    def __init__(self, name: str, read: Callable[[], StudySnapshot], driven_here: Callable[[], bool]):
        self.name = name
        self._read = read
        self._driven_here = driven_here
        self._listeners: Listeners[StudySnapshot] = Listeners("study")
        self._lock = threading.Lock()  # guards the follower
        # Held from a read to its delivery, so a listener gets snapshots in the order they were
        # read: a subscriber's first one cannot overtake the driver's newer one (a panel opened
        # as the first trials start would show none of them until the next change).
        self._in_order = threading.RLock()
        self._follower: threading.Thread | None = None
        self.latest: StudySnapshot | None = None

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._in_order:
            unsubscribe = self._listeners.add(listener)
            listener(self._read())
        self._ensure_follower()
        return unsubscribe

    def publish(self) -> None:
        """Read the study now and hand the snapshot to every listener."""
        with self._in_order:
            snapshot = self._read()
            self.latest = snapshot
            self._listeners.notify(snapshot)  # a broken panel must not stop the driver

    def _ensure_follower(self) -> None:
        with self._lock:
            if self._follower is None or not self._follower.is_alive():
                self._follower = threading.Thread(target=self._follow, name=f"gtc-study-feed-{self.name}",
                                                  daemon=True)
                self._follower.start()

    def _follow(self) -> None:
        while True:
            time.sleep(FOLLOW_S)
            with self._lock:
                if not self._listeners:
                    self._follower = None
                    return
            if self._driven_here():
                continue  # the driver publishes; keep watching in case it stops
            self.publish()
            if self.latest is not None and self.latest.finished and not self.latest.driven:
                with self._lock:
                    self._follower = None
                return
