"""The local Vertex endpoint as a process: started for a cluster on a free loopback port
with a fresh token, found again by port, stopped with the process that started it.

Its address and token are in ``<GTC_HOME>/vertex/endpoints/<port>.json``, readable by its
user only: the token is a secret (never in argv, where `ps` shows it, nor in a log), and
whoever holds it may run jobs on the cluster as that user. The SDK reaches the endpoint at
``http://127.0.0.1:PORT/TOKEN``: a path prefix is the one thing the SDK sends on every call,
operation polls included (headers it drops there).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import _process
from .._ports import free_ports
from ..exceptions import GtcError

TOKEN_VARIABLE = "GTC_VERTEX_TOKEN"  # how the endpoint's process gets its token (never argv)
READY_TIMEOUT = 120.0  # it imports the SDK's types first: 4 s here, far more on a loaded machine


@dataclass(frozen=True)
class LocalEndpoint:
    cluster: str
    host: str
    port: int
    token: str
    process: dict  # _process.this_process() of the endpoint: pid, host, start time
    storage_port: int = 0  # its Cloud Storage emulator (gcp-storage-emulator) over <GTC_HOME>/gcs

    @property
    def storage_host(self) -> str:
        """``STORAGE_EMULATOR_HOST`` for google-cloud-storage (the SDK's uploads)."""
        return f"http://{self.host}:{self.storage_port}"

    @property
    def api_endpoint(self) -> str:
        """What ``aiplatform.init(api_endpoint=...)`` takes: ``http://`` keeps the SDK on plain HTTP."""
        return f"http://{self.host}:{self.port}/{self.token}"

    def __repr__(self) -> str:  # never the token
        return (f"LocalEndpoint(cluster={self.cluster!r}, url='http://{self.host}:{self.port}/…', "
                f"pid={self.process.get('pid')})")


def gcs_root(home: Path) -> Path:
    """The folder the local Vertex endpoint's buckets are: ``gs://b/o`` is ``gcs_root(home) / "b/o"``."""
    return home / "gcs"


def endpoints_dir(home: Path) -> Path:
    return home / "vertex" / "endpoints"


def write_endpoint_file(home: Path, endpoint: LocalEndpoint) -> Path:
    """Record a running endpoint (the endpoint does, once it listens) for its user alone:
    mode 0600 from the file's creation on, and in place only when complete."""
    folder = endpoints_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{endpoint.port}.json"
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"cluster": endpoint.cluster, "host": endpoint.host, "port": endpoint.port,
                   "token": endpoint.token, "process": endpoint.process, "storage_port": endpoint.storage_port}, f)
    os.replace(partial, path)
    return path


def find(home: Path, port: int | None = None, cluster: str | None = None) -> LocalEndpoint | None:
    """A running endpoint of this GTC_HOME: on ``port``, or serving ``cluster``, or the only one."""
    found = []
    for path in sorted(endpoints_dir(home).glob("*.json")):
        try:
            endpoint = LocalEndpoint(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if not _process.process_alive(endpoint.process):
            path.unlink(missing_ok=True)
            continue
        if (port is None or endpoint.port == port) and (cluster is None or endpoint.cluster == cluster):
            found.append(endpoint)
    return found[0] if found else None


def start(home: Path, cluster: str, port: int | None = None, host: str = "127.0.0.1") -> LocalEndpoint:
    """An endpoint for ``cluster``: the one running already, or a new child of this process
    (it ends with it) once it answers."""
    import psutil

    existing = find(home, port, cluster)
    if existing is not None:
        return existing
    port = port or free_ports(1, host)[0]
    token = secrets.token_urlsafe(24)
    folder = home / "vertex"
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "jupyter_gtc.vertex_endpoint", "--cluster", cluster, "--port", str(port),
            "--host", host, "--parent-pid", str(os.getpid())]
    log_file = folder / f"endpoint-{port}.log"
    pid = _process.start_daemon(argv, log_file=log_file, env={TOKEN_VARIABLE: token, "GTC_HOME": str(home)},
                                detach=False)
    deadline = time.monotonic() + READY_TIMEOUT
    while (endpoint := find(home, port, cluster)) is None or not answers(endpoint):
        _process.reap_exited()
        if not psutil.pid_exists(pid) or time.monotonic() > deadline:
            log = log_file.read_text(errors="replace").strip().splitlines()[-5:]
            raise GtcError(f"the local Vertex endpoint for {cluster} did not start on port {port}: "
                           + (" / ".join(log) or "its log is empty"))
        time.sleep(0.2)
    return endpoint


def answers(endpoint: LocalEndpoint) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{endpoint.api_endpoint}/healthz", timeout=2) as reply:
            return reply.status == 200
    except (OSError, urllib.error.URLError):
        return False


def start_storage(root: Path, host: str, bucket: str | None = None):
    """gcp-storage-emulator (a maintained pure-Python one, on PyPI) on a free port, its files
    under ``root`` as ``root/<bucket>/<object>`` (its own index in ``root/.meta``), ``bucket``
    made if missing. Returns (server, port); ``server.stop()`` ends it."""
    # The emulator reads where it keeps files from its environment, once, at import: an empty
    # STORAGE_DIR puts buckets straight under data_dir. Only the endpoint's process imports it.
    os.environ["STORAGE_DIR"] = ""
    from gcp_storage_emulator.server import create_server

    root.mkdir(parents=True, exist_ok=True)
    port = free_ports(1, host)[0]
    server = create_server(host, port, in_memory=False, default_bucket=bucket, data_dir=str(root))
    server.start()
    return server, port
