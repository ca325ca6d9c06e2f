"""`MetricsReader`: the new scalars of a job's log dir since the last call.

A job writes TensorBoard event files under ``AIP_TENSORBOARD_LOG_DIR`` (new files appear
when it restarts or writes several runs) and, for trials, a cloudml-hypertune file. The
reader polls: it assumes nothing but POSIX stat and read, so it works on NFS, Lustre,
Filestore and FUSE mounts where inotify sees nothing.

What one `read_new()` costs, with D folders and F event files under the log dir:

* the walk: one ``stat`` per folder; a folder is listed again (``scandir``) only when
  its mtime changed or is too recent to trust, and every folder is listed on a full
  walk every `full_rescan_s` seconds (a safety net for filesystems whose folder mtimes
  lie, or whose clock differs from ours);
* one ``stat`` per event file; a file whose size and inode are unchanged is not opened;
* for a file that grew: one open, a 16-byte read to check the file is still the one we
  read (a replaced file starts again from 0), and a read of the new bytes only;
* the hypertune file: one ``stat``; read (a few KB) only when it changed.

What one call holds in memory is bounded, whatever the size of the log dir: a call returns
a page of at most about `PAGE_SCALARS` scalars (a ``Scalar`` costs ~190 bytes in memory
against ~50 on disk, so a first read of a 1 GB log dir kept whole would take ~4 GB), reads
files in `CHUNK_SIZE` pieces, and consumes at most `page_bytes` of records (events that are
no scalars, such as images, cost bytes but yield nothing). A first read of a big log dir
is therefore a series of pages: `caught_up` says whether the last call read everything
there was, and `pages()` reads until it did, for a caller that hands each page on and
drops it. The pages after the first go on through the files the first one's walk found (over
SSH a folder's stat is a round trip); a file made meanwhile is found by the walk of the call
after the catch-up.

On NFS, what a poll sees is as fresh as the client's attribute cache allows (``actimeo``).
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

from ..hosts import LOCAL, FileStat, Host
from .events import EventDecoder
from .hypertune import HypertuneTail
from .records import (CHUNK_SIZE, FOOTER_SIZE, HEADER_SIZE, TAIL_SIZE, RecordBatch, frame_record,
                      read_records)
from .scalar import Scalar

log = logging.getLogger(__name__)

EVENT_FILE_MARK = "tfevents"
# A folder whose mtime is this close to now may change again within the same mtime tick
# (1 s on some filesystems), so its listing is not reused.
RACY_SECONDS = 2.0
PAGE_SCALARS = 50_000     # at most about this many scalars per read_new() (~10 MB of Scalars)
PAGE_BYTES = 4 << 20      # at most about this many bytes of records consumed per read_new()
FRAMING_SIZE = HEADER_SIZE + FOOTER_SIZE
MIN_RECORDS = 1024        # records read at least per read of a file, when a page is nearly full


@dataclass
class PollStats:
    """What the last `read_new()` did: for tests, benchmarks and debugging slow polls."""

    seconds: float = 0.0
    dirs_listed: int = 0      # scandir calls
    dirs_statted: int = 0     # folders whose cached listing was reused after one stat
    files_statted: int = 0
    files_read: int = 0       # files opened because they changed
    bytes_read: int = 0
    scalars: int = 0
    corrupt_records: int = 0
    bytes_consumed: int = 0   # of records (bytes_read also counts re-checks and read-ahead)
    events_one_by_one: int = 0  # records not in a layout metrics/bulk.py decodes in bulk
    caught_up: bool = True    # every file was read to its end: nothing was left for the next call


@dataclass
class _Folder:
    mtime_ns: int
    trusted: bool                     # mtime old enough that a same-tick change is ruled out
    event_files: list[str] = field(default_factory=list)
    subfolders: list[str] = field(default_factory=list)


@dataclass
class _EventFile:
    run: str
    offset: int = 0                   # the first byte not consumed
    size: int = -1                    # st_size when last read; unchanged size -> skip
    inode: int = -1
    tail: bytes = b""                 # the bytes just before `offset`, as last read


class MetricsReader:
    """Incremental reader of a job's scalars: TensorBoard event files plus hypertune.

    `read_new()` returns each scalar once over the life of the reader, sorted by wall
    time within a call, in pages of bounded size. Calls are serialised by a lock, so one
    reader may be shared.
    """

    # Records are checked and decoded a chunk at a time with numpy (`bulk`), falling back to
    # one at a time for anything unusual; False reads every record one at a time, as before
    # (the reference that tests and bench/metrics_tail.py compare against).
    bulk = True

    def __init__(self, log_dir: Path, hypertune_file: Path | None = None, *,
                 full_rescan_s: float = 30.0, page_bytes: int = PAGE_BYTES, host: Host = LOCAL):
        self.log_dir = Path(log_dir)
        self.host = host  # where the log dir is: every stat, listing and read goes through it
        self.hypertune_file = Path(hypertune_file) if hypertune_file else None
        self.full_rescan_s = full_rescan_s
        self.page_bytes = page_bytes
        self.corrupt_records = 0          # skipped records, over the life of the reader
        self.caught_up = False            # the last call left nothing unread
        self.last_poll = PollStats(caught_up=False)
        self._hypertune = HypertuneTail(self.hypertune_file, host) if self.hypertune_file else None
        self._folders: dict[str, _Folder] = {}    # relative path -> cached listing
        self._files: dict[str, _EventFile] = {}   # relative path -> read position
        self._decoders: dict[str, EventDecoder] = {}  # run -> decoder (knows its tags)
        self._last_full_walk = float("-inf")
        self._catching_up: list[str] | None = None  # the walk's files while a catch-up goes on page after page
        self._lock = threading.Lock()

    @property
    def hypertune_problem(self) -> str | None:
        """Why the hypertune file gave nothing, where known (``HypertuneTail.problem``)."""
        return self._hypertune.problem() if self._hypertune is not None else None

    @property
    def undecodable_events(self) -> int:
        """Records whose checksum held but that were not a well-formed Event."""
        return sum(d.undecodable for d in self._decoders.values())

    def read_new(self, limit: int | None = PAGE_SCALARS, final: bool = False) -> list[Scalar]:
        """Scalars written since the last call: all of them, or when more than about
        `limit` are waiting (the first read of a big log dir), the first `limit` or so,
        and the next call goes on from there; `caught_up` tells which. `limit=None` reads
        everything in one list, however big (`read_metrics`). `final`: the job has ended, so
        the hypertune file's last line counts even without its newline (`HypertuneTail`)."""
        with self._lock:
            stats = PollStats()
            started = time.perf_counter()
            out: list[Scalar] = []
            budget = None if limit is None else _Budget(max(limit, 1), max(self.page_bytes, 1))
            with _gc_paused():
                # A catch-up's next page goes on through the files the first page found.
                files = self._catching_up if self._catching_up is not None else self._walk(stats)
                for rel in files:
                    if not self._read_file(rel, stats, out, budget):
                        stats.caught_up = False  # the page is full: the rest waits
                        break
            if self._hypertune is not None:
                out.extend(self._hypertune.read_new(final=final))
            out.sort(key=attrgetter("wall_time"))  # stable: file order breaks ties
            stats.scalars = len(out)
            stats.seconds = time.perf_counter() - started
            self.corrupt_records += stats.corrupt_records
            self.caught_up = stats.caught_up
            self._catching_up = None if stats.caught_up or limit is None else files
            self.last_poll = stats
            return out

    def pages(self, limit: int = PAGE_SCALARS, final: bool = False) -> Iterator[list[Scalar]]:
        """`read_new(limit, final)` until caught up, yielding each non-empty page: the new
        scalars of a log dir of any size, for a caller that hands each page on and drops it."""
        while True:
            page = self.read_new(limit, final)
            if page:
                yield page
            if self.caught_up:
                return

    def read_all(self) -> list[Scalar]:
        """Every scalar now on disk in one list, read by a fresh reader; this reader's place
        is kept. Its memory grows with the log dir: for big ones, use a fresh reader's `pages()`."""
        return MetricsReader(self.log_dir, self.hypertune_file, host=self.host).read_new(limit=None)

    # -- the walk ------------------------------------------------------------------

    def _walk(self, stats: PollStats) -> list[str]:
        """Relative paths of the event files under the log dir, folder listings cached."""
        now = time.time()
        full = time.monotonic() - self._last_full_walk >= self.full_rescan_s
        if full:
            self._last_full_walk = time.monotonic()
        folders: dict[str, _Folder] = {}
        files: list[str] = []
        stack = [""]
        while stack:
            rel = stack.pop()
            st = self.host.stat(self.log_dir / rel)
            if st is None:        # not created yet, or removed while we walked
                continue
            folder = self._folders.get(rel)
            if (not full and folder is not None and folder.trusted
                    and folder.mtime_ns == st.mtime_ns):
                stats.dirs_statted += 1
            else:
                folder = self._list(rel, st, now)
                stats.dirs_listed += 1
                if folder is None:
                    continue
            folders[rel] = folder
            files.extend(os.path.join(rel, name) for name in folder.event_files)
            stack.extend(os.path.join(rel, name) for name in folder.subfolders)
        self._folders = folders
        # Forget files that are gone, so a file that comes back is read from the start.
        for gone in self._files.keys() - set(files):
            del self._files[gone]
        return files

    def _list(self, rel: str, st: FileStat, now: float) -> _Folder | None:
        # Symlinked folders are not followed (as os.walk does not): no cycles to guard.
        trusted = now - st.mtime > RACY_SECONDS  # a future mtime (clock skew) is not
        folder = _Folder(st.mtime_ns, trusted)
        entries = self.host.list_dir(self.log_dir / rel)
        if entries is None:
            return None
        for entry in entries:
            if entry.is_dir:
                folder.subfolders.append(entry.name)
            elif EVENT_FILE_MARK in entry.name and entry.is_file:
                folder.event_files.append(entry.name)
        folder.event_files.sort()  # older files first (names start with a timestamp)
        return folder

    # -- one event file -------------------------------------------------------------

    def _read_file(self, rel: str, stats: PollStats, out: list[Scalar],
                   budget: _Budget | None) -> bool:
        """Read what is new in one file into `out`; False if the page filled up first."""
        path = self.log_dir / rel
        st = self.host.stat(path)
        if st is None:
            return True
        stats.files_statted += 1
        state = self._files.get(rel)
        if state is None:
            run = os.path.dirname(rel)
            state = self._files[rel] = _EventFile(run=run)
        if st.size == state.size and st.inode == state.inode:
            return True
        if budget is not None and not budget.left(out, stats):
            return False
        if st.size < state.offset:
            log.info("%s shrank (%d < %d bytes): reading it again from the start",
                     path, st.size, state.offset)
            state.offset, state.tail = 0, b""
        decoder = self._decoders.get(state.run)
        if decoder is None:
            decoder = self._decoders[state.run] = EventDecoder(state.run)
        try:
            with self.host.open_read(path) as f:
                if state.offset and not self._same_file(f, state, stats):
                    log.info("%s was replaced: reading it again from the start", path)
                    state.offset, state.tail = 0, b""
                stats.files_read += 1
                at_end = self._read_records(f, state, decoder, stats, out, budget)
                while not at_end and budget is not None and budget.left(out, stats):  # records of few scalars
                    at_end = self._read_records(f, state, decoder, stats, out, budget)
        except FileNotFoundError:
            return True
        # A file left midway is opened again next call, whatever its size says.
        state.size, state.inode = (st.size if at_end else -1), st.inode
        return at_end

    def _read_records(self, f, state: _EventFile, decoder: EventDecoder, stats: PollStats,
                      out: list[Scalar], budget: _Budget | None) -> bool:
        """Decode records from `state.offset` on into `out`, to the end of the file or until
        the page is full; move `state` past them. True if the end of the file was reached."""
        start = state.offset
        singly = decoder.decoded
        if self.bulk:
            from .bulk import read_scalars  # numpy: not at import time

            batch = read_scalars(f, start, state.tail, decoder, out, chunk_size=CHUNK_SIZE,
                                 limit=None if budget is None else budget.scalars,
                                 max_bytes=None if budget is None else budget.bytes - stats.bytes_consumed)
        else:
            batch = _read_records_one_by_one(f, start, state.tail, decoder, out, stats, budget)
        stats.bytes_read += batch.bytes_read
        stats.corrupt_records += batch.corrupt
        stats.events_one_by_one += decoder.decoded - singly
        stats.bytes_consumed += batch.next_offset - start
        state.offset, state.tail = batch.next_offset, batch.tail
        return batch.at_end

    @staticmethod
    def _same_file(f, state: _EventFile, stats: PollStats) -> bool:
        """True if the bytes before our offset are still the ones we read last time."""
        f.seek(state.offset - len(state.tail))
        before = f.read(len(state.tail))
        stats.bytes_read += len(before)
        return before == state.tail


def _read_records_one_by_one(f, start: int, tail: bytes, decoder: EventDecoder, out: list[Scalar],
                             stats: PollStats, budget: _Budget | None) -> RecordBatch:
    """The record-at-a-time path (`read_records`, then `EventDecoder.decode`), kept as the
    reference the bulk path is measured and tested against (`MetricsReader.bulk = False`)."""
    # Records for what the page still lacks (fewer, if some hold no scalar: the loop
    # in _read_file comes back), but not so few that a file of such records is read
    # a handful at a time.
    limits = {} if budget is None else {"max_records": max(budget.scalars - len(out), MIN_RECORDS),
                                        "max_bytes": budget.bytes - stats.bytes_consumed}
    batch = read_records(f, start, tail, CHUNK_SIZE, **limits)
    records = batch.records
    decoded = decoder.decode(records, out, None if budget is None else budget.scalars)
    if decoded < len(records) and not batch.corrupt:
        # The page filled up inside the batch. Records lie back to back here, so the
        # first one not decoded starts after the frames of those that were, and the
        # next call goes on from it.
        batch.next_offset = start + sum(map(len, records[:decoded])) + FRAMING_SIZE * decoded
        batch.tail = frame_record(records[decoded - 1])[-TAIL_SIZE:]
        batch.at_end = False
    elif decoded < len(records):  # a skipped stretch in between: where they lie is unknown
        decoder.decode(records[decoded:], out)
    return batch


@dataclass
class _Budget:
    """The size of one page: scalars, and bytes of records (images and histograms are no
    scalars, yet cost memory while they are read)."""

    scalars: int
    bytes: int

    def left(self, out: list[Scalar], stats: PollStats) -> bool:
        return len(out) < self.scalars and stats.bytes_consumed < self.bytes


@contextmanager
def _gc_paused():
    """Pause Python's cyclic GC while a poll builds Scalars.

    Every Scalar is a GC-tracked object, so a catch-up that builds millions of them
    sets off collections that rescan all of them again and again: 30% of the decode
    time for 1M scalars, and more as the count grows. They form no cycles, so nothing is
    lost by collecting after the poll. Another thread that paused too is left alone: the
    collector is turned back on only by the call that turned it off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_metrics(log_dir: Path, hypertune_file: Path | None = None, host: Host = LOCAL) -> list[Scalar]:
    """Every scalar now under `log_dir` (and in `hypertune_file`) in one list, sorted by
    wall time. Its memory grows with the log dir (~190 bytes a scalar): for big ones, use
    `MetricsReader(log_dir).pages()`."""
    return MetricsReader(log_dir, hypertune_file, host=host).read_new(limit=None)

