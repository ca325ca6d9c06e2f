"""A job's metrics, read once per process: every consumer (the job panel, ``job.metrics()``,
a live plot, tuning's early stopping) shares one incremental reader per job, so a file is
never read twice and a new point reaches every consumer from the same read."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from ..metrics import Scalar
from ..metrics.reader import MetricsReader
from .listeners import Listeners


class JobMetrics:
    """All scalars a job has written so far, kept in memory and topped up by ``refresh``.

    Consumers subscribe rather than take ``refresh``'s result: whoever triggers a read,
    every subscriber gets the new points, and a late subscriber first gets the backlog."""

    def __init__(self, log_dir: Path, hypertune_file: Path | None = None):
        self._reader = MetricsReader(log_dir, hypertune_file)
        self._scalars: list[Scalar] = []
        self._listeners: Listeners[list[Scalar]] = Listeners("metrics")
        self._lock = threading.RLock()

    def refresh(self) -> list[Scalar]:
        """Read what was written since the last call, hand it to every subscriber, return it."""
        with self._lock:
            new = self._reader.read_new()
            if new:
                self._scalars.extend(new)
                self._listeners.notify(new)  # under the lock: a new subscriber's backlog never misses these
            return new

    def subscribe(self, listener: Callable[[list[Scalar]], None]) -> Callable[[], None]:
        """``listener(new_scalars)`` now with everything so far, then on every read that finds
        more; returns a function that unsubscribes."""
        with self._lock:
            if self._scalars:
                listener(list(self._scalars))
            return self._listeners.add(listener)

    def all(self) -> list[Scalar]:
        with self._lock:
            return list(self._scalars)


def as_table(scalars: list[Scalar]):
    """A pandas DataFrame (tag, step, wall_time, value, run) where pandas is installed,
    else the list of scalars itself."""
    try:
        import pandas
    except ImportError:
        return scalars
    return pandas.DataFrame([(s.tag, s.step, s.wall_time, s.value, s.run) for s in scalars],
                            columns=["tag", "step", "wall_time", "value", "run"])
