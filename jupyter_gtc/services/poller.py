"""One poller per cluster per process: the only thing that asks Slurm how jobs are doing.

Each tick runs one ``squeue -h --states=all -O <fields>`` for every watched job together,
however many there are, and reads only the new lines of the cluster's job-completion file for
jobs that have left slurmctld's memory. Its cost stays flat with the number of jobs: squeue
prints only the fields a view needs, a job whose fields did not change since the last tick
keeps its JobStatus (``SqueueFormatReader``), and a view whose statuses are the same objects
as the last tick's is not built again. Widgets, ``Job.wait()`` and the sidebar all read its
snapshot or subscribe to its changes; none of them polls Slurm itself.

The same tick also keeps a ``Snapshot`` of every job of the cluster, whoever submitted it (a
terminal's ``sbatch``, another user): what squeue showed, and the newest finished jobs of the
completion file. It is built only while someone lists jobs (``snapshot()``, which waits for a
tick rather than running squeue itself, and keeps the poller ticking for ``linger`` seconds).

Ticks are fast while watched jobs change and back off (up to ``max_interval``, or 1 s while
a panel is subscribed or jobs are listed) while nothing does. A failed poll is kept as ``warning``
and retried; it never raises. A cluster being deleted is no failure: while it is, ticks pass
quietly (its jobs are being cancelled, its daemons stopped, so a squeue may be killed), and
once it is gone the poller forgets its jobs and stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..exceptions import ClusterBusy, ClusterNotFound
from ..hosts import LOCAL, Host
from ..slurm.commands import SlurmCommands
from ..slurm.parse import FINISHED_STATES, JobStatus, SqueueFormatReader
from ..state import Store
from .clusters import DELETING
from .listeners import Listeners
from .logs import LogFollower, prefetch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobView:
    """A submitted job (an array as a whole) as of the last tick."""

    slurm_id: str
    state: str
    exit_code: int | None = None
    reason: str | None = None
    nodes: str = ""
    start_time: float | None = None
    end_time: float | None = None
    restart_count: int = 0
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # array task id -> {state, exit_code}
    user: str = ""  # the Slurm user it runs as
    name: str = ""
    submitted_at: float | None = None
    log_path: str = ""  # where its batch script writes (an array's first task's), as Slurm says; "" unknown
    work_dir: str = ""
    task_logs: dict[str, str] = field(default_factory=dict)  # array task id -> where it writes, as Slurm says

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


@dataclass(frozen=True)
class Snapshot:
    """Every job of a cluster as of one tick, whoever submitted it."""

    views: dict[str, JobView]  # by the id a user submitted
    queued: frozenset[str]     # those slurmctld knows (squeue showed); the rest only the completion file
    taken_at: float            # time.monotonic() as the tick began


EMPTY = Snapshot({}, frozenset(), float("-inf"))
# Finished jobs of the completion file kept for snapshots (the newest ones): all a local
# cluster has run is in that file, read from its start by each process.
FINISHED_KEPT = 500


# Called from the poller's thread after every tick with the jobs that changed (maybe none),
# so a panel can also pick up new log lines once per tick.
Listener = Callable[[list[JobView]], None]


class ClusterPoller:
    def __init__(self, cluster: str, commands: Callable[[], SlurmCommands], store: Store,
                 interval: float = 0.5, max_interval: float = 5.0, linger: float = 5.0, host: Host = LOCAL,
                 min_interval: float = 0.0, incarnation: float | None = None):
        self.cluster = cluster
        # The cluster's created_at where known: a record gone, or of another creation, means
        # the cluster this poller followed was deleted.
        self.incarnation = incarnation
        self.host = host  # where the cluster's job folders and logs are read
        self._commands = commands
        self.store = store
        self.interval, self.max_interval, self.linger = interval, max_interval, linger
        # A shared scheduler's floor: no two ticks begin closer than this, whoever asks (an
        # action's next_tick, a listing's snapshot wait the longer).
        self.min_interval = min_interval
        self.warning: str | None = None
        self.ticks = 0
        # Counts the ticks that changed a view or the snapshot: a job handle reads its state
        # once per version (services/jobs.py), not on every property.
        self.version = 0
        self._views: dict[str, JobView] = {}
        self._reader = SqueueFormatReader()  # the last squeue's jobs: only changed ones are parsed
        # The statuses each view and snapshot view was built from, to skip building it again
        # when the tick brought the very same objects.
        self._built: dict[str, tuple[JobStatus, ...]] = {}
        self._snapshot_built: dict[str, tuple[JobStatus, ...]] = {}
        # The last tick's queue (the reader's list: the same object while no job changed), its
        # jobs by the id a user submitted, and the watched ids its views were last looked at for.
        self._grouped: tuple[list[JobStatus] | None, set[str], dict[str, list[JobStatus]]] = (None, set(), {})
        self._settled: tuple[list[JobStatus] | None, set[str]] = (None, set())
        self._snapshot_queue: list[JobStatus] | None = None
        self._watched: set[str] = set()
        # Completion-log lines of watched jobs, kept until the job's view is finished: the line
        # can be read while squeue still shows the job COMPLETING, and is read only once.
        self._ended: dict[str, list[JobStatus]] = {}
        self._finished: OrderedDict[str, list[JobStatus]] = OrderedDict()  # completion lines, newest last
        self._snapshot = EMPTY
        self._wanted_until = 0.0   # time.monotonic() until which ticks build the snapshot
        self._last_tick_began = float("-inf")  # of the last tick that ended
        self._listeners: Listeners[list[JobView]] = Listeners("poller")
        self._followers: set[LogFollower] = set()  # logs read for listeners at each tick, in one go
        self._jobcomp_offset = 0
        self._changed = threading.Condition()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what callers use ---------------------------------------------------------------

    def watch(self, slurm_id: str) -> None:
        with self._changed:
            self._watched.add(slurm_id)
        self._wake.set()
        self._ensure_thread()

    def view(self, slurm_id: str) -> JobView | None:
        """The job as of the last tick, while this poller follows it (``watch``)."""
        with self._changed:
            return self._views.get(slurm_id)

    def latest(self, slurm_id: str) -> JobView | None:
        """``view``, else the job as the last snapshot had it."""
        with self._changed:
            return self._views.get(slurm_id) or self._snapshot.views.get(slurm_id)

    def snapshot(self, max_age: float = 1.0, timeout: float = 10.0) -> Snapshot:
        """Every job of the cluster as of a tick that began at most ``max_age`` seconds ago
        (0: after this call), waiting for the poller's next tick when the last is older; the
        tick's one squeue serves every caller. Until ``linger`` seconds after the last call,
        ticks go on building it. A failed tick, or ``timeout``, returns the last one (or an
        empty snapshot; ``warning`` says why)."""
        asked = time.monotonic()
        if max_age > 0:  # no fresher than the scheduler may be asked
            max_age = max(max_age, self.min_interval)
        with self._changed:
            self._wanted_until = max(self._wanted_until, asked + self.linger)
            if asked - self._snapshot.taken_at <= max_age:
                return self._snapshot
        self._wait_for_tick_after(asked, timeout)
        with self._changed:
            return self._snapshot

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(changed_views)`` from the poller's thread after every tick; returns
        a function that unsubscribes."""
        return self._listeners.add(listener)

    def follow(self, follower: LogFollower) -> Callable[[], None]:
        """Read ``follower``'s new bytes at each tick, with every other followed log in one
        round trip, before the listeners run (a panel's ``read_new`` then costs nothing);
        returns a function that stops it."""
        with self._changed:
            self._followers.add(follower)

        def unfollow() -> None:
            with self._changed:
                self._followers.discard(follower)
        return unfollow

    def wait_for(self, slurm_id: str, done: Callable[[JobView], bool], timeout: float | None) -> JobView | None:
        """Block until ``done(view)`` holds for the job, or ``timeout`` seconds pass."""
        self.watch(slurm_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                view = self._views.get(slurm_id)
                if view is not None and done(view):
                    return view
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return view
                self._changed.wait(timeout=remaining if remaining is not None else 1.0)

    @property
    def running(self) -> bool:
        """Whether its thread ticks (while it watches jobs, or jobs were listed ``linger`` s ago)."""
        with self._changed:
            return self._thread is not None

    def poke(self) -> None:
        """Tick now (after a cancel or requeue, so the change shows at once)."""
        self._wake.set()

    def next_tick(self, timeout: float = 10.0) -> None:
        """Wait until a tick that began after this call has ended: one whose squeue saw what
        the caller just did (a hold's reason, a cancel's state). ``timeout`` bounds the wait;
        a poll that fails meanwhile (``warning``) ends it too."""
        self._wait_for_tick_after(time.monotonic(), timeout)

    def _wait_for_tick_after(self, asked: float, timeout: float) -> None:
        """Tick now, and wait until a tick that began at or after ``asked`` has ended (or
        ``timeout`` seconds from ``asked`` pass, or the thread has stopped: no tick comes)."""
        self._wake.set()
        self._ensure_thread()
        deadline = asked + timeout
        with self._changed:
            while self._last_tick_began < asked and time.monotonic() < deadline and self._thread is not None:
                self._changed.wait(timeout=max(0.0, deadline - time.monotonic()))

    # -- the loop -----------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        with self._changed:  # two watch() calls at once must not start two threads
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"gtc-poller-{self.cluster}", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        delay = self.interval
        while True:
            with self._changed:
                listing = time.monotonic() < self._wanted_until
                if not self._watched and not listing:
                    self._thread = None
                    return
            changed = self.tick()
            # Open panels read new log lines on each tick, and a sidebar lists jobs each second:
            # with any subscribed or listing, back off to 1 s only.
            ceiling = min(self.max_interval, 1.0) if self._listeners or listing else self.max_interval
            delay = self.interval if changed else min(delay * 1.5, max(ceiling, self.interval))
            self._wake.wait(max(delay, self.min_interval))
            self._wake.clear()
            rest = self._last_tick_began + self.min_interval - time.monotonic()
            if rest > 0:  # woken early (an action, a listing): the floor still holds
                time.sleep(rest)

    def tick(self) -> bool:
        """One poll of Slurm for every watched job (and, while jobs are listed, the snapshot of
        all of them); returns whether any job changed."""
        began = time.monotonic()
        self.ticks += 1
        try:
            return self._poll(began)
        finally:
            with self._changed:
                self._last_tick_began = began
                self._changed.notify_all()

    def _poll(self, began: float) -> bool:
        try:
            commands = self._commands()
            # A SlurmCommands' reader, kept across ticks, parses only what changed; Vertex's has none.
            queue = commands.queue(self._reader) if isinstance(commands, SlurmCommands) else commands.queue()
            if queue is not self._grouped[0]:
                queued: dict[str, list[JobStatus]] = {}
                for status in queue:
                    queued.setdefault(status.parent_id, []).append(status)
                self._grouped = (queue, set(queued), queued)
            _, listed, queued = self._grouped
            with self._changed:  # watched, yet slurmctld has forgotten them and nothing says how they ended
                unseen = [i for i in self._watched if i not in listed and i not in self._ended
                          and i not in self._finished]
            finished, self._jobcomp_offset = commands.finished_jobs(self._jobcomp_offset, unseen)
        except ClusterNotFound:
            self._forget_cluster()
            return False
        except Exception as e:  # noqa: BLE001 - a failed poll is a warning, retried next tick
            deletion = self._deletion(e)
            if deletion == "deleted":
                self._forget_cluster()
                return False
            self.warning = None if deletion == "deleting" else f"could not poll {self.cluster}: {e}"
            if self.warning:
                log.warning(self.warning)
            self._notify([])
            return False
        self.warning = None
        changed: list[JobView] = []
        with self._changed:
            for status in finished:
                if status.parent_id in self._watched:
                    self._ended.setdefault(status.parent_id, []).append(status)
                self._finished.setdefault(status.parent_id, []).append(status)
                self._finished.move_to_end(status.parent_id)
            while len(self._finished) > FINISHED_KEPT:
                self._finished.popitem(last=False)
            # Nothing a view is made of changed since the last tick: no view to look at again.
            settled = queue is self._settled[0] and not finished and self._watched == self._settled[1]
            for slurm_id in [] if settled else list(self._watched):
                # The queue last: slurmctld's view wins while it has one. (A job watched after
                # its completion line was read finds it among the kept ones.)
                ended = self._ended.get(slurm_id) or self._finished.get(slurm_id, [])
                statuses = (*ended, *queued.get(slurm_id, ()))
                if not statuses:
                    continue
                old = self._views.get(slurm_id)
                if old is not None and self._built.get(slurm_id) == statuses:
                    continue  # the same statuses as the last tick's (tuples compare items by identity first)
                view = _keep_paths(_aggregate(slurm_id, statuses), old)
                self._built[slurm_id] = statuses
                if view != old:
                    self._views[slurm_id] = view
                    changed.append(view)
                if view.finished:
                    self._watched.discard(slurm_id)
                    self._ended.pop(slurm_id, None)
                    self._built.pop(slurm_id, None)
            self._settled = (queue, set(self._watched))
            seen = self._take_snapshot(queue, queued, bool(finished), began) if began < self._wanted_until else []
            if changed or seen:
                self.version += 1
        for view in changed:
            self.store.update_job(self.cluster, view.slurm_id, state=view.state, exit_code=view.exit_code,
                                  tasks=view.tasks, reason=view.reason, nodes=view.nodes,
                                  start_time=view.start_time, end_time=view.end_time,
                                  **({"user": view.user} if view.user else {}))
        ids = {v.slurm_id for v in changed}
        self._prefetch_logs()
        self._notify(changed + [v for v in seen if v.slurm_id not in ids])
        return bool(changed)

    def _deletion(self, error: Exception) -> str | None:
        """Whether a failed poll is a delete's doing: "deleting" (the cluster is DELETING; the
        poll was refused, or its squeue killed as the delete stopped the daemons), "deleted"
        (its record is gone, or is another creation's), else None: a real failure."""
        if isinstance(error, ClusterBusy) and error.state == DELETING:
            return "deleting"
        try:
            record = self.store.get_cluster(self.cluster)
        except ClusterNotFound:
            return "deleted" if self.incarnation is not None else None
        except Exception:  # noqa: BLE001 - the store unreadable too: the failure stands
            return None
        if self.incarnation is not None and record.created_at != self.incarnation:
            return "deleted"
        return "deleting" if record.state == DELETING else None

    def _forget_cluster(self) -> None:
        with self._changed:  # the cluster was deleted: its jobs are gone with it
            self._watched.clear()
            self._ended.clear()
            self._finished.clear()
            self._built.clear()
            self._snapshot_built.clear()
            self._grouped, self._settled, self._snapshot_queue = (None, set(), {}), (None, set()), None
            self._snapshot = EMPTY

    def _prefetch_logs(self) -> None:
        """After squeue, so a job it saw finished has its whole log in what is read."""
        with self._changed:
            followers = list(self._followers)
        try:
            prefetch(followers)
        except Exception as e:  # noqa: BLE001 - the followers read for themselves instead
            log.warning("could not read the followed logs of %s: %s", self.cluster, e)

    def _take_snapshot(self, queue: list[JobStatus], queued: dict[str, list[JobStatus]], finished: bool,
                       began: float) -> list[JobView]:
        """Replace the snapshot with this tick's (under the lock); returns the views that changed."""
        if queue is self._snapshot_queue and not finished and self._snapshot is not EMPTY:
            self._snapshot = replace(self._snapshot, taken_at=began)  # no job changed: the same views
            return []
        self._snapshot_queue = queue
        before, built_before = self._snapshot.views, self._snapshot_built
        views, seen, built = {}, [], {}
        for slurm_id in [*self._finished, *(i for i in queued if i not in self._finished)]:
            old = before.get(slurm_id)
            statuses = (*self._finished.get(slurm_id, ()), *queued.get(slurm_id, ()))
            built[slurm_id] = statuses
            if old is not None and built_before.get(slurm_id) == statuses:
                views[slurm_id] = old
                continue
            view = _keep_paths(_aggregate(slurm_id, list(statuses)), old)
            views[slurm_id] = view
            if view != old:
                seen.append(view)
        self._snapshot, self._snapshot_built = Snapshot(views, frozenset(queued), began), built
        return seen

    def _notify(self, changed: list[JobView]) -> None:
        with self._changed:
            self._changed.notify_all()
        self._listeners.notify(changed)


def _keep_paths(view: JobView, old: JobView | None) -> JobView:
    """``view`` with the output paths an earlier view had and it lacks: the completion file
    does not say where a job wrote; squeue did, while it listed the job."""
    if old is None or (view.log_path or not old.log_path) and old.task_logs.items() <= view.task_logs.items():
        return view
    return replace(view, log_path=view.log_path or old.log_path, task_logs={**old.task_logs, **view.task_logs})


def _aggregate(slurm_id: str, statuses: list[JobStatus]) -> JobView:
    """One view of a job from its statuses: the job itself, or an array's tasks."""
    latest: dict[str, JobStatus] = {}
    for s in statuses:
        latest[s.job_id] = s
    tasks = {str(s.array_task_id): {"state": s.state, "exit_code": s.exit_code}
             for s in latest.values() if s.array_task_id is not None}
    if not tasks:
        s = latest.get(slurm_id) or next(iter(latest.values()))
        return JobView(slurm_id, s.state, s.exit_code, s.reason, s.nodes, s.start_time, s.end_time, s.restart_count,
                       user=s.user, name=s.name, submitted_at=s.submit_time, log_path=s.log_path, work_dir=s.work_dir)
    pending_rest = latest.get(slurm_id)  # the array's not-yet-started tasks, if any
    states = [t["state"] for t in tasks.values()] + ([pending_rest.state] if pending_rest else [])
    if any(st in ("RUNNING", "COMPLETING") for st in states):
        state = "RUNNING"
    elif any(st not in FINISHED_STATES for st in states):
        state = "PENDING"
    elif all(st == "COMPLETED" for st in states):
        state = "COMPLETED"
    else:  # all finished, not all completed: report the worst outcome
        state = next((st for st in ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "CANCELLED") if st in states),
                     next(st for st in states if st != "COMPLETED"))
    codes = [t["exit_code"] for t in tasks.values() if t["exit_code"] is not None]
    exit_code = max(codes) if state in FINISHED_STATES and codes else None
    nodes = ",".join(sorted({s.nodes for s in latest.values() if s.nodes}))
    starts = [s.start_time for s in latest.values() if s.start_time]
    ends = [s.end_time for s in latest.values() if s.end_time]
    first = min((s for s in latest.values() if s.array_task_id is not None), key=lambda s: s.array_task_id)
    submits = [s.submit_time for s in latest.values() if s.submit_time]
    return JobView(slurm_id, state, exit_code, None, nodes, min(starts, default=None),
                   max(ends, default=None) if state in FINISHED_STATES else None, 0, tasks,
                   user=next((s.user for s in latest.values() if s.user), ""),
                   name=next((s.name for s in latest.values() if s.name), ""), submitted_at=min(submits, default=None),
                   log_path=first.log_path or next((s.log_path for s in latest.values() if s.log_path), ""),
                   work_dir=first.work_dir,
                   task_logs={str(s.array_task_id): s.log_path for s in latest.values()
                              if s.array_task_id is not None and s.log_path})
