"""An endpoint's front: one address in front of its replicas.

A threaded HTTP proxy that runs in the process that deployed the endpoint (a thread of the
notebook's kernel, of the Jupyter server, or of ``gtc model deploy``, which serves until Ctrl-C).
A thread rather than a process of its own: it shares its owner's view of the replicas and their
token without handing them over, needs no supervisor of its own, and cannot outlive its owner as
an orphan holding a port; the price is that an endpoint answers as long as its owner runs.

Who may call is decided as the local Vertex endpoint decides it (``vertex/guard.py``, reused):
the owner's own processes on this machine (their socket's uid in the kernel's tables), nobody
else; browsers' requests are refused. The body is read only after that, up to 1.5 MB.

Each request goes to the healthy replica with the fewest requests outstanding (round-robin among
equals); a replica is healthy once its health route answered 200, and is polled every
``HEALTH_INTERVAL``. No healthy replica (starting) or every one holding ``max_outstanding``
requests: 429 at once, never a wait. Each request is a line of ``requests.jsonl`` in the
endpoint's folder (time, status, seconds, replica), appended as it ends, so it streams by byte
offset as a job's metrics do.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..vertex.guard import GuardedHandler, GuardedServer
from .contract import MAX_REQUEST_BYTES, BadRequest, parse_body

HEALTH_INTERVAL = 0.5  # s between health checks of each replica
HEALTH_TIMEOUT = 5.0  # s a replica's health route may take (Vertex allows 10)
PREDICT_TIMEOUT = 300.0  # s a replica may take to answer a prediction
MAX_OUTSTANDING = 8  # requests each replica holds at once before the endpoint says 429


@dataclass
class Replica:
    job: str
    host: str
    port: int
    healthy: bool = False
    outstanding: int = 0
    served: int = 0
    last_error: str | None = field(default=None)
    was_healthy: bool = False  # answered its health check once: a job that ends after is replaced
    # Where it listens, for one on another machine's node (port 0 until then): asked on each health
    # check until it answers (host, port), as the front reaches it.
    locate: Callable[[], tuple[str, int] | None] | None = field(default=None, repr=False)
    # Idle kept-alive connections to the replica: a new TCP connection (and a server thread) per
    # request cost more than the tiny model's generation.
    _idle: list = field(default_factory=list, repr=False)

    def connection(self, fresh: bool = False) -> http.client.HTTPConnection:
        if not fresh:
            try:
                connection = self._idle.pop()  # list.pop is atomic under the GIL
                connection.reused = True
                return connection
            except IndexError:
                pass
        connection = http.client.HTTPConnection(self.host, self.port, timeout=PREDICT_TIMEOUT)
        connection.reused = False
        return connection

    def keep(self, connection: http.client.HTTPConnection) -> None:
        if len(self._idle) < MAX_OUTSTANDING:
            self._idle.append(connection)
        else:
            connection.close()


class Front(GuardedServer):
    what = "endpoint"

    def __init__(self, endpoint_id: str, replicas: list[Replica], replica_token: str, health_route: str,
                 predict_route: str, metrics_file: Path, max_outstanding: int = MAX_OUTSTANDING,
                 still_deployed: Callable[[], bool] | None = None, host: str = "127.0.0.1",
                 maintain: Callable[["Front"], None] | None = None):
        self.endpoint_id = endpoint_id
        self.replicas = replicas
        self.replica_token = replica_token
        self.health_route, self.predict_route = health_route, predict_route
        self.max_outstanding = max_outstanding
        self.still_deployed = still_deployed
        self.maintain = maintain  # the service's: a replica whose job ended is replaced
        self.metrics_file = metrics_file
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._stop = threading.Event()
        fd = os.open(metrics_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._metrics = os.fdopen(fd, "a", buffering=1)
        super().__init__((host, 0), FrontHandler, token=None)  # the owner only: no token is valid

    @property
    def address(self) -> tuple[str, int]:
        return self.server_address[0], self.server_address[1]

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> "Front":
        threading.Thread(target=self.serve_forever, name=f"endpoint-{self.endpoint_id}", daemon=True).start()
        threading.Thread(target=self._watch, name=f"endpoint-{self.endpoint_id}-health", daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:  # after this, `add` and `replace` refuse: `replicas` is final for the undeploy
            self._stop.set()
        self.shutdown()
        self.server_close()
        with self._lock:
            self._metrics.close()

    # -- choosing a replica ---------------------------------------------------------------

    def take(self) -> tuple[Replica | None, str]:
        """The replica for the next request (its outstanding count raised), or None and why."""
        with self._lock:
            healthy = [r for r in self.replicas if r.healthy]
            if not healthy:
                return None, (f"endpoint {self.endpoint_id} is not ready: none of its {len(self.replicas)} "
                              f"replica(s) answers its health check yet; retry shortly")
            free = [r for r in healthy if r.outstanding < self.max_outstanding]
            if not free:
                return None, (f"endpoint {self.endpoint_id} is full: its {len(healthy)} replica(s) hold "
                              f"{self.max_outstanding} requests each; retry shortly")
            fewest = min(r.outstanding for r in free)
            equal = [r for r in free if r.outstanding == fewest]
            chosen = equal[next(self._turn) % len(equal)]
            chosen.outstanding += 1
            return chosen, ""

    def replace(self, old: Replica, new: Replica) -> bool:
        """``new`` takes ``old``'s place (its job ended); requests it holds finish or fail as they will.
        False where the front is stopping: ``new``'s job is the caller's to end (an undeploy has
        taken its list of jobs already)."""
        with self._lock:
            if self._stop.is_set():
                return False
            self.replicas = [new if r is old else r for r in self.replicas]
        for connection in old._idle:
            connection.close()
        return True

    def load(self) -> float:
        """Requests outstanding per replica (all of them, healthy or starting)."""
        with self._lock:
            return sum(r.outstanding for r in self.replicas) / max(1, len(self.replicas))

    def add(self, replica: Replica) -> bool:
        """False where the front is stopping (see `replace`)."""
        with self._lock:
            if self._stop.is_set():
                return False
            self.replicas = [*self.replicas, replica]
        return True

    def remove_idle(self) -> Replica | None:
        """The newest replica holding no request, taken out of rotation (its job is the caller's to end)."""
        with self._lock:
            idle = [r for r in self.replicas if r.outstanding == 0]
            if not idle:
                return None
            gone = idle[-1]
            self.replicas = [r for r in self.replicas if r is not gone]
        for connection in gone._idle:
            connection.close()
        return gone

    def release(self, replica: Replica) -> None:
        with self._lock:
            replica.outstanding -= 1
            replica.served += 1

    def record(self, status: int, seconds: float, replica: Replica | None) -> None:
        line = json.dumps({"time": time.time(), "status": status, "seconds": round(seconds, 6),
                           "replica": replica.job if replica else None})
        with self._lock:
            if not self._metrics.closed:
                self._metrics.write(line + "\n")

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [{"job": r.job, "address": f"{r.host}:{r.port}", "healthy": r.healthy,
                     "outstanding": r.outstanding, "served": r.served, "last_error": r.last_error}
                    for r in self.replicas]

    # -- health -----------------------------------------------------------------------------

    def _watch(self) -> None:
        ticks = 0
        while not self._stop.wait(HEALTH_INTERVAL):
            for replica in list(self.replicas):
                ok, why = self._healthy(replica)
                with self._lock:
                    replica.healthy, replica.last_error = ok, why
                    replica.was_healthy = replica.was_healthy or ok
            ticks += 1
            # Undeployed from another process (the CLI): this front has nothing left to serve.
            if self.still_deployed is not None and ticks % 4 == 0 and not self.still_deployed():
                threading.Thread(target=self.stop, daemon=True).start()
                return
            if self.maintain is not None and ticks % 4 == 0:
                try:
                    self.maintain(self)
                except Exception as e:  # a cluster that did not answer: the next tick tries again
                    print(f"endpoint {self.endpoint_id}: replacing a replica failed: {e}", flush=True)

    def _healthy(self, replica: Replica) -> tuple[bool, str | None]:
        if replica.port == 0 and replica.locate is not None:
            try:
                found = replica.locate()
            except Exception as e:  # the cluster's host did not answer: the next check asks again
                return False, f"finding where it listens: {type(e).__name__}: {e}"
            if found is None:
                return False, "starting: its job has not said where it listens yet"
            with self._lock:
                replica.host, replica.port = found
        connection = http.client.HTTPConnection(replica.host, replica.port, timeout=HEALTH_TIMEOUT)
        try:
            connection.request("GET", self.health_route, headers=self._replica_headers())
            response = connection.getresponse()
            body = response.read(4096)
            return response.status == 200, None if response.status == 200 else f"{response.status}: {body[:200]!r}"
        except OSError as e:
            return False, f"{type(e).__name__}: {e}"
        finally:
            connection.close()

    def _replica_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.replica_token}"}


class FrontHandler(GuardedHandler):
    server: Front
    max_body = MAX_REQUEST_BYTES

    def setup(self) -> None:
        super().setup()
        # As the LM server's: no 40 ms wait (Nagle against a delayed ACK) between headers and body.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args) -> None:  # requests.jsonl is the record
        pass

    def do_GET(self) -> None:
        if not self.admit():
            return
        if self.path not in ("/health", f"/v1/endpoints/{self.server.endpoint_id}"):
            self.refuse(404, "NOT_FOUND", f"no route {self.path}; POST /v1/endpoints/{self.server.endpoint_id}"
                                          f":predict or /predict, GET /health")
            return
        replicas = self.server.snapshot()
        self.send_json(200, {"endpoint": self.server.endpoint_id, "replicas": replicas,
                             "ready": any(r["healthy"] for r in replicas)})

    def do_POST(self) -> None:
        started = time.monotonic()
        if not self.admit():
            return
        if self.path not in ("/predict", f"/v1/endpoints/{self.server.endpoint_id}:predict"):
            self.refuse(404, "NOT_FOUND", f"no route {self.path}; POST /v1/endpoints/{self.server.endpoint_id}"
                                          f":predict or /predict")
            return
        length = self.body_length()
        if length is None:
            self.server.record(413, time.monotonic() - started, None)
            return
        body = self.rfile.read(length)
        try:
            parse_body(body)  # the shape every server takes; what an instance holds is the server's to judge
        except BadRequest as e:
            self.refuse(400, "INVALID_ARGUMENT", str(e))
            self.server.record(400, time.monotonic() - started, None)
            return
        replica, why = self.server.take()
        if replica is None:
            self.refuse(429, "RESOURCE_EXHAUSTED", why)
            self.server.record(429, time.monotonic() - started, None)
            return
        try:
            status, data = self._forward(replica, body)
        finally:
            self.server.release(replica)
        self.server.record(status, time.monotonic() - started, replica)
        self.send_raw(status, data)

    def _forward(self, replica: Replica, body: bytes) -> tuple[int, bytes]:
        headers = {**self.server._replica_headers(), "Content-Type": "application/json"}
        for reused in (True, False):
            connection = replica.connection(fresh=not reused)
            try:
                connection.request("POST", self.server.predict_route, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                connection.close()
                if connection.reused:  # an idle kept-alive connection the server had closed: once more, anew
                    continue
                return self._unanswered(replica, e)
            except OSError as e:
                connection.close()
                return self._unanswered(replica, e)
            if response.will_close:
                connection.close()
            else:
                replica.keep(connection)
            return response.status, data
        raise AssertionError("unreachable")

    def _unanswered(self, replica: Replica, e: OSError) -> tuple[int, bytes]:
        with self.server._lock:  # the replica died meanwhile: the health check takes it out
            replica.healthy, replica.last_error = False, f"{type(e).__name__}: {e}"
        message = f"replica {replica.job} did not answer ({type(e).__name__}); retry"
        return 503, json.dumps({"error": {"code": 503, "message": message, "status": "UNAVAILABLE"}}).encode()

    def send_json(self, code: int, data: dict) -> None:
        self.send_raw(code, json.dumps(data).encode())

    def send_raw(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
