"""The local Vertex endpoint's HTTP server: routes of Vertex AI's ``JobService`` (v1, REST)
for ``customJobs`` and ``hyperparameterTuningJobs`` and their operations, answered by
``api.vertex_jobs`` and ``api.vertex_tuning_jobs``, and of ``ModelService`` (``models.py``).

Who may call it is decided before any body is read (``vertex/guard.py``): its own user on
this machine, found from the connection itself, with no secret at all; anyone else only
with its token in an ``Authorization: Bearer`` header (never in the URL, which the SDK puts
in every error message). Others get 403, a wrong token 401, and the connection is closed
unread. A web browser's requests are refused (403), whoever's browser: so are requests to a
Host that is not the endpoint's address, and a POST whose body is not declared
``application/json`` (415; the SDK always declares it, a page's form or no-cors fetch
cannot). Bodies are capped (413), a connection times out, and the connections served at
once are capped. It listens on loopback unless told otherwise. Errors are Google's
(``{"error": {code, message, status}}``) from the error's own class (``exceptions.py``).
Every request is a line of ``requests.log`` (method, path, status, milliseconds): how a
test shows that all the SDK's calls came here.

A thread per connection (``ThreadingHTTPServer``): a create runs sbatch, a slow one must
not hold up another client's poll.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

from .. import api
from ..exceptions import GtcError, InvalidArgument, JobNotFound, google_error_body
from ..vertex.guard import GuardedHandler, GuardedServer
from . import clusters, compute, endpoints, models

log = logging.getLogger("jupyter_gtc.vertex_endpoint")
DEFAULT_BUCKET = "local-bucket"  # %gtc_vertex_local's staging bucket, there from the start

_PARENT = r"(?P<parent>projects/[^/]+/locations/[^/]+)"
_COLLECTION = r"(?P<collection>customJobs|hyperparameterTuningJobs)"
_JOB = _PARENT + "/" + _COLLECTION + r"/(?P<id>[^/:]+)"
# (method, path after /v1/ or /ui/, handler name); the first match answers.
ROUTES = [
    ("POST", re.compile(_PARENT + "/" + _COLLECTION), "create"),
    ("GET", re.compile(_PARENT + "/" + _COLLECTION), "list"),
    ("GET", re.compile(_JOB), "get"),
    ("POST", re.compile(_JOB + r":cancel"), "cancel"),
    ("DELETE", re.compile(_JOB), "delete"),
    ("GET", re.compile(_JOB + r"/operations/(?P<op>[^/]+)"), "get_operation"),
] + models.MODEL_ROUTES + endpoints.ENDPOINT_ROUTES  # ModelService (models.py), EndpointService (endpoints.py)
ROUTES += clusters.CLUSTER_ROUTES  # training clusters (clusters.py)


class Endpoint(models.ModelMethods, endpoints.EndpointMethods, clusters.ClusterMethods, compute.ComputeMethods):
    """The API's methods over ``api.vertex_jobs`` and ``api.vertex_tuning_jobs`` for one cluster;
    operations kept in memory (a delete finishes at once: its operation is done when answered)."""

    def __init__(self, cluster: str):
        self.cluster = cluster
        self.collections = {"customJobs": api.vertex_jobs(cluster),
                            "hyperparameterTuningJobs": api.vertex_tuning_jobs(cluster)}
        self.operations: dict[str, dict[str, Any]] = {}

    def create(self, body: dict[str, Any], parent: str, collection: str) -> dict[str, Any]:
        return self.collections[collection].create(parent, body)

    def list(self, query: dict[str, str], parent: str, collection: str) -> dict[str, Any]:
        return {collection: self.collections[collection].list(parent, query.get("filter", ""))}

    def get(self, parent: str, collection: str, id: str) -> dict[str, Any]:
        return self.collections[collection].get(f"{parent}/{collection}/{id}")

    def cancel(self, parent: str, collection: str, id: str) -> dict[str, Any]:
        self.collections[collection].cancel(f"{parent}/{collection}/{id}")
        return {}

    def delete(self, parent: str, collection: str, id: str) -> dict[str, Any]:
        name = f"{parent}/{collection}/{id}"
        self.collections[collection].delete(name)
        operation = {
            "name": f"{name}/operations/{secrets.randbelow(10**18)}",
            "metadata": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                         "genericMetadata": {"createTime": _now(), "updateTime": _now()}},
            "done": True,
            "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
        }
        self.operations[operation["name"]] = operation
        return operation

    def get_operation(self, parent: str, collection: str, id: str, op: str) -> dict[str, Any]:
        name = f"{parent}/{collection}/{id}/operations/{op}"
        if name not in self.operations:
            raise JobNotFound(name, message=f"The operation does not exist: {name}")
        return self.operations[name]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Handler(GuardedHandler):
    server: "EndpointServer"

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def do_DELETE(self) -> None:
        self._answer("DELETE")

    def do_PATCH(self) -> None:  # a training cluster's update (clusters.py)
        self._answer("PATCH")

    def _answer(self, method: str) -> None:
        self._started = time.monotonic()
        url = urllib.parse.urlsplit(self.path)
        if not self.admit() or not self._json_declared(method):
            return
        length = self.body_length()
        if length is None:
            return
        for pattern, most in clusters.SMALL_BODY.items():
            if pattern.fullmatch(url.path) and length > most:
                self.refuse(400, "INVALID_ARGUMENT", f"a request of {length} bytes is over the {most} bytes (1 MB) "
                                                     f"this method takes; send less (stage big files on the cluster)")
                return
        body = self.rfile.read(length)
        # A token put in the path (as a URL of old had it) is never repeated: not in the log, not in an answer.
        path = url.path.replace(self.server.token, "…") if self.server.token else url.path
        status, answer = self._route(method, urllib.parse.unquote(path.lstrip("/")), url.query, body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.server.record(method, path, status, (time.monotonic() - self._started) * 1000)

    def _json_declared(self, method: str) -> bool:
        """Whether a POST's body (every POST here takes JSON) says it is JSON, as the SDK's do; a
        web page can send text/plain, a form's types or none without asking the server first.
        Answers 415 where it does not."""
        if method != "POST" or self.headers.get_content_type() == "application/json":
            return True
        declared = self.headers.get("Content-Type")
        self.refuse(415, "INVALID_ARGUMENT", f"a request's body here is JSON, declared with Content-Type: "
                                             f"application/json (a charset may follow); this one declares "
                                             f"{repr(declared) if declared is not None else 'none'}")
        return False

    def refused(self, code: int) -> None:
        started = getattr(self, "_started", time.monotonic())
        self.server.record(self.command or "?", "(refused)", code, (time.monotonic() - started) * 1000)

    def _route(self, method: str, path: str, query: str, body: bytes) -> tuple[int, Any]:
        if path == "healthz":
            return 200, {}
        version, _, resource = path.partition("/")
        routes = ROUTES
        if version == "compute":  # Compute Engine's few routes gtc capacity reads (compute.py)
            version, routes = "v1", compute.COMPUTE_ROUTES
        if version not in ("v1", "ui", "v1beta1"):  # the SDK polls operations under /ui/; clusters are v1beta1
            return 404, google_error_body(404, "NOT_FOUND", f"no API version {version!r} here; this endpoint serves v1")
        params = dict(urllib.parse.parse_qsl(query))
        for verb, pattern, name in routes:
            match = pattern.fullmatch(resource)
            if verb == method and match:
                try:
                    kwargs = match.groupdict()
                    if name == "create" or name in models.TAKES_BODY | endpoints.TAKES_BODY | clusters.TAKES_BODY:
                        kwargs["body"] = _json(body)
                    if name == "list" or name in models.TAKES_QUERY | endpoints.TAKES_QUERY | clusters.TAKES_QUERY:
                        kwargs["query"] = params
                    return 200, getattr(self.server.endpoint, name)(**kwargs)
                except GtcError as e:
                    error = e.google_error()
                    return error["error"]["code"], error
                except Exception:  # noqa: BLE001 - answered as Google's INTERNAL, the traceback to our log
                    log.exception("%s /%s failed", method, resource)
                    return 500, google_error_body(500, "INTERNAL", "the local endpoint failed; its log says why")
        return 404, google_error_body(404, "NOT_FOUND",
                                      f"{method} /{path} is not a method the local Vertex endpoint serves")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests.log has every request


class EndpointServer(GuardedServer):
    what = "Vertex endpoint"

    def __init__(self, address: tuple[str, int], endpoint: Endpoint, token: str, request_log: Path):
        super().__init__(address, Handler, token)
        self.endpoint = endpoint
        self.request_log = request_log
        self._log_lock = threading.Lock()

    def record(self, method: str, path: str, status: int, ms: float) -> None:
        line = json.dumps({"time": time.time(), "method": method, "path": path, "status": status,
                           "ms": round(ms, 1)})
        with self._log_lock, open(self.request_log, "a") as f:
            f.write(line + "\n")


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError as e:
        raise InvalidArgument(f"Invalid JSON payload received. {e}") from None
    if not isinstance(data, dict):
        raise InvalidArgument("Invalid JSON payload received: the body must be a JSON object")
    return data


def serve(cluster: str, port: int, host: str = "127.0.0.1", token: str | None = None,
          parent_pid: int | None = None, ready: Any = None) -> None:
    """Serve until SIGINT or SIGTERM (or, given ``parent_pid``, until that process is gone)."""
    # Taken out of this process's environment: every job it submits inherits the rest.
    token = token or os.environ.pop(api.VERTEX_TOKEN_VARIABLE, None)
    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        raise GtcError(f"--host {host}: an endpoint other machines can reach needs a token of your own, in "
                       f"${api.VERTEX_TOKEN_VARIABLE} (a long random one: whoever has it runs jobs as you)")
    token = token or secrets.token_urlsafe(24)
    api.get_cluster(cluster, with_status=False)  # a cluster that does not exist: say so now, not at a job
    server = EndpointServer((host, port), Endpoint(cluster), token, api.vertex_request_log())
    storage, storage_port = api.start_storage_emulator("127.0.0.1", DEFAULT_BUCKET, token)  # never beyond loopback
    endpoint, record = api.record_vertex_endpoint(cluster, host, server.server_address[1], token, storage_port)

    def stop(*_: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    if parent_pid:
        threading.Thread(target=_end_with, args=(parent_pid, stop), daemon=True).start()
    if ready:
        ready(endpoint, record)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        record.unlink(missing_ok=True)
        server.server_close()
        server.endpoint.close_endpoints()  # the models it deployed: their replicas would hold nodes for nothing
        server.endpoint.close_training_clusters()  # the slurmrestd daemons of their Slurm Job API
        storage.stop()


def _end_with(pid: int, stop: Any) -> None:
    while os.getppid() == pid:
        time.sleep(1)
    stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jupyter_gtc.vertex_endpoint")
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--port", type=int, default=8480)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--parent-pid", type=int)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    try:
        serve(args.cluster, args.port, args.host, parent_pid=args.parent_pid)
    except GtcError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
