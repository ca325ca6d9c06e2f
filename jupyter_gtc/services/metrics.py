"""A job's metrics, read once per process: every consumer (the job panel, ``job.metrics()``,
a live plot, tuning's early stopping) shares one incremental reader per job, so a file is
never read twice and a new point reaches every consumer from the same read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..hosts import LOCAL, Host
from ..metrics import Scalar
from ..metrics.history import HistoryView, ScalarHistory
from ..metrics.reader import MetricsReader
from .listeners import Listeners


class JobMetrics:
    """All scalars a job has written so far, topped up by ``refresh``.

    Consumers subscribe rather than take ``refresh``'s result: whoever triggers a read,
    every subscriber gets the new points, and a late subscriber first gets the backlog.

    Memory stays bounded whatever the size of the log dir: the reader reads a page at a
    time (``MetricsReader.pages``), each page goes to every subscriber and into the history,
    which keeps 28 bytes a scalar and moves all but its newest rows to a temporary file
    (``metrics.history``), and is then dropped."""

    def __init__(self, log_dir: Path, hypertune_file: Path | None = None, host: Host = LOCAL):
        self._reader = MetricsReader(log_dir, hypertune_file, host=host)
        self._history = ScalarHistory()
        self._listeners: Listeners[list[Scalar]] = Listeners("metrics")
        self._lock = threading.RLock()

    def refresh(self, until: int | None = None, final: bool = False) -> HistoryView:
        """Read what was written since the last call, hand it to every subscriber (a page,
        ~50,000 scalars, at a time), and return it (a view of the history). With ``until``,
        stop once the history holds that many scalars: a caller that wants the scalars up
        to a position need not wait for the whole catch-up of a big log dir. ``final``: the
        job has ended (known before this read), so a hypertune line without its newline is whole."""
        with self._lock:
            start = len(self._history)
            if until is None or start < until:
                for page in self._reader.pages(final=final):
                    self._history.extend(page)
                    self._listeners.notify(page)  # under the lock: a new subscriber's backlog never misses these
                    if until is not None and len(self._history) >= until:
                        break
            return self._history.view(start)

    def subscribe(self, listener: Callable[[list[Scalar]], None]) -> Callable[[], None]:
        """``listener(new_scalars)`` now with everything so far (in pages, for a long
        history), then on every read that finds more; returns a function that unsubscribes."""
        with self._lock:
            for page in self._history.view().pages():
                listener(page)
            return self._listeners.add(listener)

    @property
    def hypertune_problem(self) -> str | None:
        """Why the job's hypertune file gave nothing, where known: for a trial that reported nothing."""
        return self._reader.hypertune_problem

    def all(self) -> Sequence[Scalar]:
        """Every scalar read so far, in order: a snapshot that reads them from the history
        on demand (``len``, index, slice, iteration), so it costs nothing until used."""
        return self._history.view()


@dataclass(frozen=True)
class MetricRow:
    """One scalar as ``job.metrics()`` lists it where pandas is not installed."""

    tag: str
    step: int
    wall_time: datetime  # when the job wrote it, in UTC
    value: float
    run: str = ""


def as_table(scalars: Sequence[Scalar]):
    """A pandas DataFrame (tag, step, wall_time, value, and run where the scalars come from more
    than one run) where pandas is installed, else a list of ``MetricRow``. ``wall_time`` is a
    timestamp in UTC (a Scalar's is seconds since the epoch, which nobody reads): a pandas
    datetime column, or a ``datetime``."""
    try:
        import pandas
    except ImportError:
        return [MetricRow(s.tag, s.step, datetime.fromtimestamp(s.wall_time, timezone.utc), s.value, s.run)
                for s in scalars]
    table = pandas.DataFrame([(s.tag, s.step, s.wall_time, s.value, s.run) for s in scalars],
                             columns=["tag", "step", "wall_time", "value", "run"])
    table["wall_time"] = pandas.to_datetime(table["wall_time"], unit="s", utc=True)
    if table["run"].nunique() <= 1:
        # One run (the usual: every event file at the top of the log dir) makes a column of "".
        table = table.drop(columns="run")
    return table
