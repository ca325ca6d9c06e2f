"""Calling the REST API of a real server from tests: JSON calls, and the change feed."""

from __future__ import annotations

import http.client
import json
import queue
import re
import socket
import threading
import time
from typing import Any


def call(server, method: str, path: str, payload: Any = None, **kwargs) -> tuple[int, Any]:
    """(status, parsed JSON body or None) of ``method gtc/api/<path>``, with the token."""
    body = None if payload is None else (payload if isinstance(payload, bytes) else json.dumps(payload).encode())
    status, _, data = server.request(method, f"gtc/api/{path}", body, **kwargs)
    return status, json.loads(data) if data else None


def ok(server, method: str, path: str, payload: Any = None) -> Any:
    status, body = call(server, method, path, payload)
    assert status < 300, (method, path, status, body)
    return body


def wait_for(predicate, timeout: float = 30, interval: float = 0.2, what: str = "condition"):
    """The first truthy ``predicate()``, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not met within {timeout} s (last: {last!r})")


class EventStream:
    """``GET gtc/api/events`` read on a thread; ``next(event)`` returns the next data of that event."""

    def __init__(self, server, query: str = "", token: bool = True):
        self.events: queue.Queue = queue.Queue()
        self.history: list[tuple[str, Any]] = []  # every event so far, also those next() passed over
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        headers = {"Authorization": f"token {server.token}"} if token else {}
        self.conn.request("GET", f"/gtc/api/events{query}", headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = self.response.headers
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        event, data = "message", ""
        try:
            for raw in self.response:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data += line[6:]
                elif not line and data:
                    self.history.append((event, json.loads(data)))
                    self.events.put(self.history[-1])
                    event, data = "message", ""
        except Exception:  # noqa: BLE001, S110 - close() cuts the connection under the reader
            pass

    def next(self, event: str | None = None, timeout: float = 20, where=lambda data: True):
        """The data of the next event named ``event`` (any, if None) for which ``where`` holds."""
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                name, data = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append((name, data))
            if (event is None or name == event) and where(data):
                return data
        shown = [name if name in ("clusters", "snapshot") else (name, _brief(data)) for name, data in seen]
        raise AssertionError(f"no {event or 'event'} matching within {timeout} s; saw {shown}")

    def seen(self, event: str, where=lambda data: True) -> bool:
        return any(name == event and where(data) for name, data in list(self.history))

    def close(self) -> None:
        # Shut the socket down first: closing alone waits for the reader thread's read,
        # which returns only at the server's next keep-alive.
        if self.conn.sock is not None:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def _brief(data: Any) -> Any:
    """What a failed wait shows of an event: a job's id, state and reason; else the data."""
    if isinstance(data, dict) and "state" in data and "id" in data:
        return {k: data.get(k) for k in ("id", "name", "state", "reason", "exit_code")}
    return data


# -- every route the extension adds, from its own route table -----------------------------

# What each placeholder of a route's pattern is filled with: names nothing exists under, so a
# request that passes the checks is answered by the api (404), never changes anything.
_EXAMPLES = {"[^/]+": ["none"], "[0-9]+": ["1"], ".*": ["js/bokeh.min.js"]}
_GROUP = re.compile(r"\((?:\?P<\w+>)?([^()]*)\)")
_METHODS = ("get", "head", "post", "put", "patch", "delete")  # options: jupyter_server's CORS preflight, public
READ_METHODS = {"GET", "HEAD"}


class _RouteRecorder:
    """Stands in for the server's tornado app in ``setup_routes``: keeps the rules it is given."""

    def __init__(self):
        self.settings = {"base_url": "/"}
        self.rules: list[tuple] = []

    def add_handlers(self, host_pattern: str, rules: list[tuple]) -> None:
        self.rules += rules


def app_routes() -> list[tuple[str, str]]:
    """(method, path under the server's root) for each method of each route that
    ``setup_routes`` adds, which is what the server extension adds: a new route or method is
    in this list without anyone writing it down. A pattern's alternatives (cancel|hold|...)
    each make a path."""
    from tornado.web import RequestHandler

    from jupyter_gtc.server.routes import setup_routes

    app = _RouteRecorder()
    setup_routes(app)
    routes = []
    for pattern, handler, *_ in app.rules:
        methods = [m.upper() for m in _METHODS if getattr(handler, m) is not getattr(RequestHandler, m)]
        assert methods, f"{handler.__name__} answers no method"
        for path in _paths(pattern):
            assert re.fullmatch(pattern, path), (pattern, path)  # a placeholder _EXAMPLES does not know
            routes += [(method, path.lstrip("/")) for method in methods]
    return routes


def _paths(pattern: str) -> list[str]:
    group = _GROUP.search(pattern)
    if group is None:
        return [pattern]
    choices = _EXAMPLES.get(group.group(1)) or group.group(1).split("|")
    return [path for choice in choices for path in _paths(pattern[:group.start()] + choice + pattern[group.end():])]


def answer(server, method: str, path: str, token: bool = True, headers: dict | None = None,
           body: bytes | None = None) -> tuple[int, Any, Any]:
    """(status, headers, JSON body or None) of one request to ``path`` (under the server's
    root). An event stream's body is not read: its status and headers say it was served."""
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"token {server.token}"
    if body is None and method in ("POST", "PUT", "PATCH"):
        body = b"{}"
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(method, f"/{path}", body=body, headers=headers)
        response = conn.getresponse()
        data = None
        kind = response.headers.get("Content-Type", "")
        if method != "HEAD" and kind.startswith("application/json"):
            data = json.loads(response.read() or b"null")
        return response.status, response.headers, data
    finally:
        if conn.sock is not None:
            conn.sock.shutdown(socket.SHUT_RDWR)  # an event stream would go on
        conn.close()
