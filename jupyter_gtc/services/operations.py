"""Cluster changes that run in the background: create, scale, delete.

A front end that must not wait minutes for a cluster (the REST API: a sidebar request, and
the sidebar with it) starts an ``Operation`` and follows it: its latest progress message
("starting slurmd 2/3"), then DONE with the result or FAILED with the error.

Starting one does the quick part in the caller: the checks, and the claim in the state
store (a new cluster's record, a cluster's state SCALING or DELETING), so a bad request
fails at once with its usual error and every process sees the cluster is busy. The slow
part (the backend's work) runs on a thread of its own. One process runs one operation per
cluster at a time; the registry keeps the finished ones for a while so a reconnecting
client can learn how they ended.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..exceptions import ClusterBusy, GtcError, OperationNotFound
from .listeners import Listeners

log = logging.getLogger(__name__)

RUNNING, DONE, FAILED = "RUNNING", "DONE", "FAILED"


class Operation:
    """One background change of a cluster. Its fields are replaced whole (never mutated in
    place), so another thread may read them at any time."""

    def __init__(self, op_id: str, action: str, cluster: str):
        self.id = op_id
        self.action = action          # create, scale, delete
        self.cluster = cluster
        self.state = RUNNING
        self.message = ""             # the latest progress message
        self.warnings: list[str] = [] # every progress message that was a warning ("warning: ..."), kept
        self.started_at = time.time()
        self.finished_at: float | None = None
        self.error: GtcError | None = None
        self.result: Any = None       # what the work returned (a Cluster; None for a delete)
        self._done = threading.Event()

    @property
    def finished(self) -> bool:
        return self.state != RUNNING

    def wait(self, timeout: float | None = None) -> Any:
        """The result once finished; raises the operation's error if it failed, or
        ``TimeoutError`` while it still runs after ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.action} {self.cluster} still runs after {timeout} s: {self.message}")
        if self.error is not None:
            raise self.error
        return self.result

    def to_json(self) -> dict[str, Any]:
        result = self.result
        return {
            "id": self.id, "action": self.action, "cluster": self.cluster, "state": self.state,
            "message": self.message, "warnings": self.warnings,
            "started_at": self.started_at, "finished_at": self.finished_at,
            "error": None if self.error is None else {"kind": self.error.kind, "message": str(self.error)},
            "result": result.to_json() if hasattr(result, "to_json") else None,
        }

    def __repr__(self) -> str:
        return f"<Operation {self.id} {self.action} {self.cluster}: {self.state} {self.message!r}>"


# Called with the operation after it started, after each progress message, and once it
# finished; on the operation's thread (or the starter's, for the start).
Listener = Callable[[Operation], None]


class Operations:
    """The process's registry of background cluster operations."""

    def __init__(self, keep_seconds: float = 3600, keep_count: int = 100):
        self.keep_seconds, self.keep_count = keep_seconds, keep_count
        self._operations: dict[str, Operation] = {}
        self._listeners: Listeners[Operation] = Listeners("operation")
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def start(self, action: str, cluster: str, claim: Callable[[], Any],
              work: Callable[[Any, Callable[[str], None]], Any]) -> Operation:
        """``claim()`` here and now (it checks, and marks the cluster busy in the store; its
        errors reach the caller and nothing runs), then ``work(claimed, progress)`` on a
        thread. Raises ``ClusterBusy`` while another operation of this process changes
        ``cluster``."""
        with self._lock:
            running = next((op for op in self._operations.values() if op.cluster == cluster and not op.finished), None)
            if running is not None:
                raise ClusterBusy(cluster, f"cluster {cluster} is busy: its {running.action} is running "
                                  f"({running.message or 'starting'}); try again when it has finished")
            claimed = claim()  # under the lock: two requests cannot both claim a cluster
            op = Operation(f"{int(time.time())}-{next(self._ids)}", action, cluster)
            self._operations[op.id] = op
            self._forget_old()
        self._notify(op)
        threading.Thread(target=self._run, args=(op, work, claimed), name=f"gtc-{action}-{cluster}",
                         daemon=True).start()
        return op

    def get(self, op_id: str) -> Operation:
        with self._lock:
            op = self._operations.get(op_id)
        if op is None:
            raise OperationNotFound(f"no operation {op_id!r}; finished operations are kept for "
                                    f"{self.keep_seconds / 60:g} minutes, and not across server restarts")
        return op

    def list(self) -> list[Operation]:
        """Running and recently finished operations, oldest first."""
        with self._lock:
            return list(self._operations.values())

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(operation)`` on every change of any operation; returns a function that unsubscribes."""
        return self._listeners.add(listener)

    # -- the thread -------------------------------------------------------------------------

    def _run(self, op: Operation, work: Callable, claimed: Any) -> None:
        def progress(message: str) -> None:
            if message.startswith("warning: "):
                op.warnings = [*op.warnings, message.removeprefix("warning: ")]
            op.message = message
            self._notify(op)

        try:
            op.result = work(claimed, progress)
        except GtcError as e:
            op.error = e
        except Exception as e:  # noqa: BLE001 - reported as the operation's outcome, logged with its traceback
            log.exception("%s of cluster %s failed", op.action, op.cluster)
            op.error = GtcError(f"{op.action} failed unexpectedly ({type(e).__name__}); the server's log says why")
        op.finished_at = time.time()
        op.state = FAILED if op.error is not None else DONE
        op._done.set()
        self._notify(op)

    def _notify(self, op: Operation) -> None:
        self._listeners.notify(op)

    def _forget_old(self) -> None:
        """Drop finished operations past ``keep_seconds``, and the oldest past ``keep_count``."""
        now = time.time()
        for op in [op for op in self._operations.values() if op.finished]:  # oldest first
            if now - op.finished_at > self.keep_seconds or len(self._operations) > self.keep_count:
                del self._operations[op.id]
