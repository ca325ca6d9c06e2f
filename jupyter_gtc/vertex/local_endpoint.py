"""A running local Vertex endpoint as its clients find it: the record it writes once it
listens (``<GTC_HOME>/vertex/endpoints/<port>.json``, readable by its user only: it holds the
token), and the folder its buckets are. The endpoint's process writes it
(``services/vertex_local.py`` starts that process); the ``vertex`` backend reads it, at each
connection, so the token is never copied into the state store or a settings file."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .. import _process


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
        """``STORAGE_EMULATOR_HOST`` for google-cloud-storage (the SDK's uploads): always on loopback."""
        return f"http://127.0.0.1:{self.storage_port}"

    @property
    def api_endpoint(self) -> str:
        """What ``aiplatform.init(api_endpoint=...)`` takes: ``http://`` keeps the SDK on plain HTTP.
        No secret: the endpoint knows its own user's calls by their connection (``vertex/guard.py``);
        anyone else sends the token in a header (``credentials=google.oauth2.credentials.Credentials(token)``)."""
        return f"http://{_url_host(self.host)}:{self.port}"

    def __repr__(self) -> str:  # never the token
        return f"LocalEndpoint(cluster={self.cluster!r}, url={self.api_endpoint!r}, pid={self.process.get('pid')})"


def _url_host(host: str) -> str:
    """Where a client on this machine reaches a server listening on ``host``: loopback for a
    wildcard (so the endpoint can tell its own user's calls), ``[v6]`` in brackets."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


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


def running(home: Path, port: int | None = None, cluster: str | None = None) -> list[LocalEndpoint]:
    """The running endpoints of this GTC_HOME, on ``port`` or serving ``cluster`` where given
    (the records of endpoints that are gone are removed on the way)."""
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
    return found


def find(home: Path, port: int | None = None, cluster: str | None = None) -> LocalEndpoint | None:
    """A running endpoint of this GTC_HOME: on ``port``, or serving ``cluster``, or the first."""
    found = running(home, port, cluster)
    return found[0] if found else None
