"""`ScalarHistory`: every scalar a job's reader has returned, in order, at 28 bytes each.

A job's consumers need its whole history: a plot opened late gets every point so far,
the REST route pages through it by position (``metrics?since=N``), ``job.metrics()``
makes a table of it. Kept as ``Scalar`` objects it costs ~190 bytes a scalar, so a 1 GB
log dir (~20M scalars) would hold ~4 GB. Here a scalar is a row of four fixed-width
columns (step int64, wall time and value float64, and the index of its (tag, run)); the
newest rows stay in memory, and every `block_rows` rows are written, one block at a
time, to a temporary file that is unlinked from the start (the disk space is freed when
the history is dropped or the process ends, whatever the way it ends). So the memory a
history holds is bounded (under 2 MB of rows, plus its (tag, run) names) whatever the
number of scalars; reading a stretch back costs a few ``pread`` calls per block.

A ``view()`` is a snapshot (its length is fixed when taken) that reads rows on demand:
``len()``, an index or a slice (a list of at most that many scalars), iteration and
``pages()`` (bounded lists). Positions never change, so a position is a cursor.
"""

from __future__ import annotations

import os
import tempfile
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter

from .progress import TOTAL_STEPS_TAG, ProgressSummary
from .scalar import Scalar, from_rows

# (array typecode, bytes) per column: step, wall_time, value, key of (tag, run).
COLUMNS = (("q", 8), ("d", 8), ("d", 8), ("I", 4))
ROW_BYTES = sum(width for _, width in COLUMNS)
BLOCK_ROWS = 1 << 16          # rows per block of the file: ~1.8 MB
PAGE_ROWS = 10_000            # scalars per list when a view is iterated
_STEP, _WALL_TIME, _VALUE = attrgetter("step"), attrgetter("wall_time"), attrgetter("value")


class ScalarHistory:
    """An append-only sequence of scalars; thread-safe (one lock around rows and file)."""

    def __init__(self, block_rows: int = BLOCK_ROWS):
        self.block_rows = block_rows
        self._tags: list[str] = []                    # key -> tag
        self._runs: list[str] = []                    # key -> run
        self._keys: dict[tuple[str, str], int] = {}   # (tag, run) -> key
        self._total_keys: list[int] = []              # keys whose tag is progress/total_steps
        self._memory = [array(code) for code, _ in COLUMNS]  # the rows after the last block
        self._blocks = 0                              # blocks written to the file
        self._file = None                             # opened with the first block
        self._summary = ProgressSummary()             # of rows [0, _summarised)
        self._summarised = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return self._length()

    def extend(self, scalars: Iterable[Scalar]) -> None:
        """Append `scalars` (a reader's page) after the rows there are."""
        scalars = scalars if isinstance(scalars, list) else list(scalars)
        if not scalars:
            return
        pairs = [(s.tag, s.run) for s in scalars]
        with self._lock:
            keys = self._keys
            for pair in set(pairs).difference(keys):
                keys[pair] = len(self._tags)
                self._tags.append(pair[0])
                self._runs.append(pair[1])
                if pair[0] == TOTAL_STEPS_TAG:
                    self._total_keys.append(keys[pair])
            # Whole new columns first: a value that does not fit (a step past int64) then
            # raises before any column has grown, so the columns stay the same length.
            new = (array("q", list(map(_STEP, scalars))), array("d", list(map(_WALL_TIME, scalars))),
                   array("d", list(map(_VALUE, scalars))), array("I", list(map(keys.__getitem__, pairs))))
            for column, added in zip(self._memory, new):
                column.extend(added)
            while len(self._memory[0]) >= self.block_rows:
                self._write_block()

    def view(self, start: int = 0, stop: int | None = None) -> HistoryView:
        """The rows from `start` to `stop` (the end, now) as a read-only sequence."""
        with self._lock:
            length = self._length()
        stop = length if stop is None else min(stop, length)
        return HistoryView(self, min(start, stop), stop)

    def read(self, start: int, stop: int) -> list[Scalar]:
        """The scalars at positions [start, stop)."""
        with self._lock:
            steps, walls, values, keys = self._columns(start, stop)
            tags, runs = self._tags, self._runs
        return from_rows(zip(map(tags.__getitem__, keys), steps, walls, values, map(runs.__getitem__, keys)))

    def summary_upto(self, stop: int) -> ProgressSummary:
        """The progress summary of rows [0, stop) or, where a later call got further, of
        more rows: brought up to date from the rows added since, a block at a time."""
        import numpy as np

        with self._lock:
            end = min(stop, self._length())
            while self._summarised < end:
                upto = min(end, (self._summarised // self.block_rows + 1) * self.block_rows)
                steps, walls, values, keys = (np.frombuffer(c, c.typecode) if len(c) else np.empty(0, c.typecode)
                                              for c in self._columns(self._summarised, upto))
                self._summary.add_columns(steps, walls, values, np.isin(keys, self._total_keys))
                self._summarised = upto
            return self._summary.copy()

    # -- rows and blocks (the lock held) ---------------------------------------------------

    def _length(self) -> int:
        return self._blocks * self.block_rows + len(self._memory[0])

    def _write_block(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="gtc-metrics-")  # unlinked already
        n = self.block_rows
        data = b"".join(column[:n].tobytes() for column in self._memory)
        os.pwrite(self._file.fileno(), data, self._blocks * n * ROW_BYTES)
        for column in self._memory:
            del column[:n]
        self._blocks += 1

    def _columns(self, start: int, stop: int) -> list[array]:
        """The four columns of rows [start, stop): from the file's blocks, then memory."""
        out = [array(code) for code, _ in COLUMNS]
        n = self.block_rows
        in_file = self._blocks * n
        position = start
        while position < min(stop, in_file):
            block, first = divmod(position, n)
            last = min(n, stop - block * n)
            column_start = block * n * ROW_BYTES
            for column, (_, width) in zip(out, COLUMNS):
                size = (last - first) * width
                data = os.pread(self._file.fileno(), size, column_start + first * width)
                if len(data) != size:
                    raise OSError(f"metrics history: short read from its file ({len(data)} of {size} bytes)")
                column.frombytes(data)
                column_start += n * width
            position = block * n + last
        if stop > in_file:
            lo, hi = max(start, in_file) - in_file, stop - in_file
            for column, kept in zip(out, self._memory):
                column.extend(kept[lo:hi])
        return out


class HistoryView(Sequence):
    """A fixed stretch of a `ScalarHistory`, read on demand: what ``JobMetrics.all()`` returns."""

    def __init__(self, history: ScalarHistory, start: int, stop: int):
        self._history, self._start, self._stop = history, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, index):
        positions = range(self._start, self._stop)[index]
        if isinstance(positions, int):
            return self._history.read(positions, positions + 1)[0]
        if not positions:
            return []
        if positions.step == 1:
            return self._history.read(positions.start, positions.stop)
        lo, hi = min(positions[0], positions[-1]), max(positions[0], positions[-1]) + 1
        return self._history.read(lo, hi)[positions.start - lo::positions.step]

    def __iter__(self) -> Iterator[Scalar]:
        for page in self.pages():
            yield from page

    def pages(self, size: int = PAGE_ROWS) -> Iterator[list[Scalar]]:
        """The view as lists of at most `size` scalars, read one at a time."""
        for start in range(self._start, self._stop, size):
            yield self._history.read(start, min(start + size, self._stop))

    def progress_summary(self) -> ProgressSummary | None:
        """The history's running progress summary, for `progress.from_scalars`; None for a
        view that starts after the first row (its summary is not the history's)."""
        return self._history.summary_upto(self._stop) if self._start == 0 else None

    def __repr__(self) -> str:
        return f"<HistoryView [{self._start}:{self._stop}] of {len(self._history)} scalars>"
