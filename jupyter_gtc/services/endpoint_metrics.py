"""An endpoint's requests as a live feed of scalars, for ``ep.plot()``: requests per second,
p50 and p95 latency, errors per second and the replica count, a point a second.

The endpoint's front appends a line to ``requests.jsonl`` as each request ends (time, status,
seconds, replica: ``serving/front.py``). The feed reads that file by byte offset, as a job's
event files are read: each read costs the new lines only, and a line cut in half by the writer
waits for the next read. Lines are counted into one-second buckets from the deployment's time;
a bucket is handed on once it is closed (``CLOSE_AFTER`` past its end: a request that ended in
it has written its line by then), and is never changed after, so a plot only ever appends.
A line that comes later still (a stalled writer) counts in the first open bucket: every
request is counted exactly once, and the requests/s line sums to the requests answered.

Latency is of the answered requests (status 200) only: a refusal (429 full, 400 bad request)
answers in microseconds and would pull p50 down as the endpoint gets worse. Errors are every
other status. Seconds without a request are points of 0 requests, 0 errors and no latency.

Like a job's ``JobMetrics``, one feed per endpoint per process; subscribers get every point so
far, then each new one. A thread of its own (``endpoint-<id>-metrics``) reads once a second
while anyone subscribes and the endpoint is deployed; after an undeploy a last read closes every
bucket and says 0 replicas.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..metrics.scalar import Scalar
from ..serving.traffic import parse_lines, quantile
from .listeners import Listeners

REQUESTS = "requests/s"
ERRORS = "errors/s"
LATENCY = "latency (s)"  # two lines: runs "p50" and "p95"
REPLICAS = "replicas"
INTERVAL = 1.0  # s between reads, and the width of a bucket
CLOSE_AFTER = 0.5  # s after a bucket's end before it is handed on


class EndpointMetrics:
    """``requests.jsonl`` of one endpoint as scalars; ``subscribe`` for them, ``refresh`` to read."""

    def __init__(self, endpoint_id: str, path: Path, started_at: float, replicas: Callable[[], int],
                 deployed: Callable[[], bool], clock: Callable[[], float] = time.time):
        self.endpoint_id = endpoint_id
        self._path = path
        self._started_at = started_at
        self._replicas = replicas  # how many replicas now (the front's, or the registry's row)
        self._deployed = deployed
        self._clock = clock
        self._offset = 0
        self._partial = b""
        self._open: dict[int, list[tuple[int, float]]] = {}  # bucket -> (status, seconds) of its requests
        self._next = 0  # the first bucket not handed on yet
        self._history: list[Scalar] = []
        self._listeners: Listeners[list[Scalar]] = Listeners("endpoint metrics")
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self.finished = False  # undeployed, and the last read done

    def subscribe(self, listener: Callable[[list[Scalar]], None]) -> Callable[[], None]:
        """``listener(new_scalars)`` now with every point so far, then with each read's new
        points (on the feed's thread); returns the function that unsubscribes it."""
        with self._lock:
            self.refresh()
            if self._history:
                listener(list(self._history))
            remove = self._listeners.add(listener)
            if not self.finished and self._thread is None:
                self._thread = threading.Thread(target=self._follow, name=f"endpoint-{self.endpoint_id}-metrics",
                                                daemon=True)
                self._thread.start()
            return remove

    def all(self) -> list[Scalar]:
        with self._lock:
            return list(self._history)

    def refresh(self, final: bool = False) -> list[Scalar]:
        """Read the lines written since the last read, hand on the buckets that closed (all of
        them when ``final``: the endpoint is gone), and return the new points."""
        with self._lock:
            if self.finished:
                return []
            for status, seconds, ended in self._read_new_lines():
                bucket = max(int(ended - self._started_at), self._next)
                self._open.setdefault(bucket, []).append((status, seconds))
            elapsed = self._clock() - self._started_at
            closed = int(elapsed - CLOSE_AFTER)  # buckets before this one have ended
            if final:
                # Every bucket, and one more: the last point says 0 replicas, after any before it.
                closed = max([closed, self._next + 1, *(b + 1 for b in self._open)])
            new: list[Scalar] = []
            for bucket in range(self._next, closed):
                new += self._points(bucket, self._open.pop(bucket, []))
            if closed > self._next:
                self._next = closed
                replicas = 0 if final else self._replicas()
                new.append(Scalar(REPLICAS, closed - 1, self._started_at + closed, float(replicas)))
            if final:
                self.finished = True
            if new:
                self._history += new
                self._listeners.notify(new)
            return new

    def _points(self, bucket: int, requests: list[tuple[int, float]]) -> list[Scalar]:
        wall = self._started_at + bucket + 1
        answered = sorted(seconds for status, seconds in requests if status == 200)
        points = [Scalar(REQUESTS, bucket, wall, float(len(requests))),
                  Scalar(ERRORS, bucket, wall, float(len(requests) - len(answered)))]
        if answered:
            points += [Scalar(LATENCY, bucket, wall, percentile(answered, 50), "p50"),
                       Scalar(LATENCY, bucket, wall, percentile(answered, 95), "p95")]
        return points

    def _read_new_lines(self) -> list[tuple[int, float, float]]:
        try:
            with open(self._path, "rb") as f:  # the endpoint's own folder here, not a cluster's
                f.seek(self._offset)
                data = f.read()  # a line is ~80 bytes: a million requests are 80 MB, read once
        except FileNotFoundError:
            return []
        self._offset += len(data)
        data = self._partial + data
        whole, _, self._partial = data.rpartition(b"\n")  # a line being written waits for its newline
        found = []
        for record in parse_lines(whole):
            try:
                found.append((int(record["status"]), float(record["seconds"]), float(record["time"])))
            except (ValueError, KeyError, TypeError):
                continue  # not a line of ours: nothing to count
        return found

    def _follow(self) -> None:
        while True:
            time.sleep(INTERVAL)
            deployed = self._deployed()
            try:
                self.refresh(final=not deployed)
            except OSError as e:  # a read that failed: the plot says no more, the thread ends
                print(f"endpoint {self.endpoint_id}: reading its requests failed: {e}", flush=True)
                deployed = False
            with self._lock:  # under the lock: a subscriber meanwhile sees this thread gone and starts one
                if not deployed or not self._listeners:
                    self._thread = None
                    return


def percentile(sorted_values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``sorted_values`` by the nearest rank (a value one request took)."""
    return quantile(sorted_values, q / 100)
