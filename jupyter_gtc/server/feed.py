"""The change feed: what changed in clusters and jobs, pushed to every open sidebar.

``GET {base_url}gtc/api/events?cluster=NAME`` is a stream of server-sent events
(``text/event-stream``). The sidebar reads it with ``fetch``, not ``EventSource``, so the
request carries the same token header as every other call (EventSource can send only cookies).

    event: snapshot   {"clusters": [Cluster.to_json()...], "cluster": NAME, "jobs": [job_json...],
                       "studies": [study_json...], "operations": [Operation.to_json()...]}
                      first, on every (re)connect: the client starts over from it
    event: clusters   {"clusters": [...]}   whenever a cluster or a node changed (state, allocation)
    event: job        job_json              whenever one of NAME's jobs changed (not for elapsed alone)
    event: studies    {"cluster": NAME, "studies": [study_json...]}   whenever one of NAME's studies changed
    event: operation  Operation.to_json()   a create, scale or delete started, made progress or ended
    event: warning    {"message": ...}      a tick failed; the next one retries (its clusters event ends it)
    : keep-alive                            every 15 s, so both ends notice a dead connection

One ``ChangeFeed`` per server does the work for all connections, and only while one is
open. Each tick (1 s, or at once when a poller reports a change) reads the clusters' jobs
from the state store, which is how it finds jobs that notebooks and the CLI submitted (and
the jobs others submitted, a terminal's sbatch, from the poller's snapshot), and
their state from ``api.job_poller`` (the same poller the magics' panels use: it subscribes to
each cluster's, and watching a job makes the poller follow it). Clusters' node states
(one ``scontrol`` each) are read every few seconds, and at once after any job change, any
step of a cluster operation of this process (``api.cluster_operations()``, whose every step
it passes on at once), and any change of a cluster's state in the state store, which each
tick looks at (records only, no Slurm command): a create, scale or delete by another
process (a notebook's ``%%gtc_cluster``, the CLI) shows the tick after it ends, not a few
seconds later. A read that an operation's step overtook is not sent: it may predate the
step, and the step's own read follows at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from .. import api
from ..exceptions import GtcError
from .base import GtcHandler, call_on
from .handlers_jobs import jobs_json
from .handlers_studies import studies_json

log = logging.getLogger(__name__)

KEEP_ALIVE = 15.0
# How often clusters' node states are re-read when nothing says they changed, in seconds
# (one scontrol per cluster each time): 3, unless this variable says otherwise.
CLUSTER_INTERVAL_ENV = "GTC_FEED_CLUSTER_SECONDS"
# Events waiting for one connection. A client that reads slower than the feed writes (or not
# at all) would otherwise hold every event in memory: past this it is sent a new snapshot
# instead, once it reads again, as after a reconnect.
MAX_QUEUED_EVENTS = 1000
# One thread reads for every connection (a tick's reads are one after another): its own, so a
# burst of slow REST requests never stops the feed.
_feed_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gtc-feed")


@dataclass(eq=False)
class Subscription:
    cluster: str | None
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(MAX_QUEUED_EVENTS))
    needs_snapshot: bool = True
    dropped: int = 0  # events dropped as the queue overflowed, in all

    def offer(self, event: str, data: Any) -> bool:
        """Queue an event; False where the queue was full, which empties it and asks for a
        snapshot (what the client missed is in it)."""
        try:
            self.queue.put_nowait((event, data))
            return True
        except asyncio.QueueFull:
            while not self.queue.empty():
                self.queue.get_nowait()
                self.dropped += 1
            self.needs_snapshot = True
            return False

    def close(self) -> None:
        """Tell the connection's loop to end, whatever is queued."""
        if not self.offer("closed", None):
            self.queue.put_nowait(("closed", None))


class ChangeFeed:
    def __init__(self, interval: float = 1.0, cluster_interval: float | None = None):
        if cluster_interval is None:
            cluster_interval = float(os.environ.get(CLUSTER_INTERVAL_ENV) or 3.0)
        self.interval, self.cluster_interval = interval, cluster_interval
        self._subscriptions: set[Subscription] = set()
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._clusters: list[dict[str, Any]] = []
        self._clusters_read_at = 0.0
        self._jobs: dict[str, dict[str, dict[str, Any]]] = {}  # cluster -> job id -> job_json
        self._studies: dict[str, list[dict[str, Any]]] = {}  # cluster -> study_json, newest first
        self._finished_studies: dict[str, dict[str, Any]] = {}  # name -> study_json; they never change
        self._poller_listeners: dict[str, Any] = {}  # cluster -> unsubscribe, touched only by _read
        self._operations_listener: Any = None  # unsubscribe, set by _read
        self._clusters_stale = True  # read them at the next tick (a poller saw a change, or a new connection)
        self._cluster_states: dict[str, str] = {}  # name -> state, as of the last read; touched only by _read
        self._operation_steps = 0  # operation events so far (on the loop): a read they overtook is dropped
        self._warned = False  # the last tick failed: the next clusters event is sent even if nothing changed

    # -- connections ------------------------------------------------------------------

    def subscribe(self, cluster: str | None) -> Subscription:
        subscription = Subscription(cluster)
        self._subscriptions.add(subscription)
        self._clusters_stale = True  # a snapshot must be current
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        self._wake.set()  # its snapshot now, not at the next tick
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    # -- the loop (on the server's event loop; the reading on the REST pool) ------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._subscriptions:
            wanted = {s.cluster for s in self._subscriptions if s.cluster}
            # New connections get their snapshot from this tick: read the clusters now, after
            # they came (a tick already under way when one came may have read them before).
            waiting = {s for s in self._subscriptions if s.needs_snapshot}
            if waiting:
                self._clusters_stale = True
            steps = self._operation_steps
            try:
                clusters, jobs, studies = await call_on(_feed_executor, functools.partial(self._read, wanted, loop))
                if clusters is not None and self._operation_steps != steps:
                    clusters = None  # read before the step, perhaps: _on_operation asked for a new read
            except Exception as e:  # a failed tick is reported and retried, never fatal
                log.warning("jupyter_gtc change feed: %s", e, exc_info=not isinstance(e, web.HTTPError))
                self._broadcast("warning", {"message": str(e) if isinstance(e, web.HTTPError) else
                                            "reading clusters and jobs failed; see the server log"})
                self._clusters_stale = True  # the next tick re-reads them, and its clusters event ends the warning
                self._warned = True
            else:
                self._publish(clusters, jobs, studies, waiting)
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
        self._stop_listening()

    def _read(self, wanted: set[str], loop) -> tuple[list[dict] | None, dict[str, dict[str, dict]], dict[str, list]]:
        """Runs on a REST thread: this tick's clusters (None when not due), and the jobs and
        studies of the ``wanted`` clusters."""
        clusters = None
        due = time.monotonic() - self._clusters_read_at >= self.cluster_interval
        if due or self._clusters_stale or self._cluster_states_changed():
            self._clusters_stale = False
            clusters = [c.to_json() for c in api.list_clusters()]
            self._clusters_read_at = time.monotonic()
            self._cluster_states = {c["name"]: c["state"] for c in clusters}
        names = {c["name"] for c in (clusters if clusters is not None else self._clusters)}
        self._listen_to_pollers(names, loop)
        if self._operations_listener is None:
            self._operations_listener = api.cluster_operations().subscribe(
                lambda op: loop.call_soon_threadsafe(self._on_operation, op.to_json()))
        jobs, studies = {}, {}
        for name in wanted & names:
            try:
                jobs[name] = {j["id"]: j for j in jobs_json(name)}
                studies[name] = studies_json(name, self._finished_studies)
            except GtcError:  # deleted since list_clusters: the next tick's clusters say so
                jobs.pop(name, None)
                continue
        return clusters, jobs, studies

    def _cluster_states_changed(self) -> bool:
        """Whether a cluster came, went or changed state since the last read: the state store's
        records only, so it costs no Slurm command."""
        return {c.name: c.state for c in api.list_clusters(with_status=False)} != self._cluster_states

    def _listen_to_pollers(self, names: set[str], loop) -> None:
        def on_tick(changed) -> None:  # on a poller's thread
            if changed:
                self._clusters_stale = True  # jobs started or ended: node allocations changed
                loop.call_soon_threadsafe(self._wake.set)

        for name in names - set(self._poller_listeners):
            self._poller_listeners[name] = api.job_poller(name).subscribe(on_tick)
        for name in set(self._poller_listeners) - names:
            self._poller_listeners.pop(name)()

    def _on_operation(self, operation: dict[str, Any]) -> None:
        """A step of a create, scale or delete (on the event loop): pass it on, and re-read the
        clusters now (a new one, a state, nodes)."""
        self._broadcast("operation", operation, only_snapshotted=True)
        self._operation_steps += 1
        self._clusters_stale = True
        self._wake.set()

    def _stop_listening(self) -> None:
        for unsubscribe in self._poller_listeners.values():
            unsubscribe()
        self._poller_listeners.clear()
        if self._operations_listener is not None:
            self._operations_listener()
            self._operations_listener = None
        self._jobs.clear()
        self._studies.clear()
        self._cluster_states.clear()
        self._clusters_stale = True

    def _publish(self, clusters: list[dict] | None, jobs: dict[str, dict[str, dict]],
                 studies: dict[str, list[dict]], waiting: set[Subscription]) -> None:
        if clusters is not None and (clusters != self._clusters or self._warned):
            self._clusters, self._warned = clusters, False
            self._broadcast("clusters", {"clusters": clusters}, only_snapshotted=True)
        for name, current in jobs.items():
            before = self._jobs.get(name, {})
            changed = [job for job_id, job in current.items()
                       if _without_elapsed(before.get(job_id)) != _without_elapsed(job)]
            self._jobs[name] = current
            for job in reversed(changed):  # oldest first, as they happened
                self._broadcast("job", job, cluster=name, only_snapshotted=True)
        for name, current in studies.items():
            if current != self._studies.get(name):
                self._studies[name] = current
                self._broadcast("studies", {"cluster": name, "studies": current}, cluster=name,
                                only_snapshotted=True)
        names = {c["name"] for c in self._clusters}
        operations = None
        for s in self._subscriptions:
            # A snapshot once this tick has read its cluster's jobs (or there are none to read).
            if s in waiting and s.needs_snapshot and (s.cluster is None or s.cluster in jobs or s.cluster not in names):
                s.needs_snapshot = False
                if operations is None:  # read here, on the loop: no later step can overtake it
                    operations = [op.to_json() for op in api.cluster_operations().list()]
                s.offer("snapshot", {"clusters": self._clusters, "cluster": s.cluster,
                                     "jobs": list(self._jobs.get(s.cluster, {}).values()),
                                     "studies": self._studies.get(s.cluster, []), "operations": operations})

    def _broadcast(self, event: str, data: Any, cluster: str | None = None, only_snapshotted: bool = False) -> None:
        for s in self._subscriptions:
            if (cluster is None or s.cluster == cluster) and not (only_snapshotted and s.needs_snapshot):
                if not s.offer(event, data):
                    self._clusters_stale = True  # its snapshot must be current
                    self._wake.set()


def _without_elapsed(job: dict | None) -> dict | None:
    return None if job is None else {k: v for k, v in job.items() if k != "elapsed"}


class EventsHandler(GtcHandler):
    """The feed as server-sent events, for as long as the client keeps the request open."""

    @web.authenticated
    @authorized
    async def get(self):
        feed: ChangeFeed = self.settings["gtc_feed"]
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # proxies (nginx) must pass events on at once
        self._subscription = feed.subscribe(self.get_query_argument("cluster", None))
        try:
            await self.flush()
            while True:
                try:
                    event, data = await asyncio.wait_for(self._subscription.queue.get(), KEEP_ALIVE)
                except asyncio.TimeoutError:
                    self.write(": keep-alive\n\n")
                else:
                    if event == "closed":
                        break
                    self.write(f"event: {event}\ndata: {json.dumps(data)}\n\n")
                await self.flush()
        except StreamClosedError:
            pass  # the browser went away
        finally:
            feed.unsubscribe(self._subscription)

    def on_connection_close(self) -> None:
        subscription = getattr(self, "_subscription", None)
        if subscription is not None:
            subscription.close()


def handlers(prefix: str) -> list[tuple]:
    return [(f"{prefix}/events", EventsHandler)]
