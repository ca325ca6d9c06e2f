"""The local Vertex endpoint as a process: started for a cluster on a free loopback port
with a fresh token, found again by port, stopped with the process that started it.

Its address and token are in ``<GTC_HOME>/vertex/endpoints/<port>.json``, readable by its
user only: the token is a secret (never in argv, where `ps` shows it, nor in a log), and
whoever holds it may run jobs on the cluster as that user. The SDK reaches the endpoint at
``http://127.0.0.1:PORT/TOKEN``: a path prefix is the one thing the SDK sends on every call,
operation polls included (headers it drops there).
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

from .. import _process
from .._ports import free_ports
from ..exceptions import GtcError
# Where a running endpoint is recorded, and its buckets' folder: core, so the vertex backend
# (which reaches an endpoint as a client) reads the same record.
from ..vertex.local_endpoint import LocalEndpoint, endpoints_dir, find, gcs_root, running, write_endpoint_file

TOKEN_VARIABLE = "GTC_VERTEX_TOKEN"  # how the endpoint's process gets its token (never argv)
READY_TIMEOUT = 120.0  # it imports the SDK's types first: 4 s here, far more on a loaded machine


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


def stop_serving(home: Path, cluster: str) -> list[int]:
    """Stop every endpoint that serves ``cluster`` (deleted: they would answer for nothing, and
    a target's ``local`` would have to choose among them); the ports they had."""
    import psutil

    stopped = []
    for endpoint in running(home, cluster=cluster):
        try:
            proc = psutil.Process(endpoint.process["pid"])
            proc.terminate()  # it ends its server and storage emulator on SIGTERM
            proc.wait(timeout=10)
        except psutil.TimeoutExpired:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
        (endpoints_dir(home) / f"{endpoint.port}.json").unlink(missing_ok=True)
        stopped.append(endpoint.port)
    return stopped


def answers(endpoint: LocalEndpoint) -> bool:
    import urllib.error
    import urllib.request

    # Never through a proxy: the endpoint is on loopback. (urlopen's own opener is made once per
    # process from the proxy variables of then, and a kernel with HTTP_PROXY set and no
    # NO_PROXY sent this to the proxy: the endpoint never seemed to start.)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with direct.open(f"{endpoint.api_endpoint}/healthz", timeout=2) as reply:
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
    # The emulator keeps its own index of objects; what jobs write through GTC_GCS_MOUNT (as
    # Cloud Storage FUSE writes objects on Vertex AI) must be objects too, or a job's log and
    # event files would not exist for a storage client (the vertex backend's host). Its
    # Storage is private (``_storage``); gcp-storage-emulator is pinned to a year's releases.
    server._storage.__class__ = _mounted_storage(root, f"http://{host}:{port}")
    server.start()
    return server, port


def _mounted_storage(root: Path, base_url: str):
    """gcp-storage-emulator's ``Storage``, where a file under ``root/<bucket>/`` is an object
    whether it came through the API or was written there: a file the index lacks, or whose
    size or time changed since, is indexed (with fresh checksums) when it is asked for or
    listed."""
    import stat as stat_module

    from gcp_storage_emulator.handlers.objects import _checksums, _make_object_resource
    from gcp_storage_emulator.storage import Storage

    class MountedStorage(Storage):
        def _adopt(self, bucket: str, name: str) -> None:
            if bucket not in self.buckets or ".." in name.split("/"):
                return  # nothing outside the bucket's folder is an object of it
            path = root / bucket / name
            try:
                info = path.stat()
            except (OSError, ValueError):
                return
            if not stat_module.S_ISREG(info.st_mode):
                return
            seen = self.__dict__.setdefault("_gtc_seen", {})  # (bucket, name) -> (size, mtime) when indexed
            key, mark = (bucket, name), (info.st_size, info.st_mtime_ns)
            known = self.objects.get(bucket, {}).get(name)
            if known is not None:
                if key not in seen and str(known.get("size")) == str(info.st_size):
                    seen[key] = mark  # indexed by an earlier run of the emulator: as it was then
                if seen.get(key) == mark:
                    return
            content = path.read_bytes()
            obj = _checksums(content, _make_object_resource(base_url, bucket, name, "application/octet-stream",
                                                            str(len(content))))
            self.objects.setdefault(bucket, {})[name] = obj
            seen[(bucket, name)] = (info.st_size, info.st_mtime_ns)

        def create_file(self, bucket_name, file_name, content, file_obj, file_id=None):
            super().create_file(bucket_name, file_name, content, file_obj, file_id)
            try:
                info = (root / bucket_name / file_name).stat()
                self.__dict__.setdefault("_gtc_seen", {})[(bucket_name, file_name)] = (info.st_size,
                                                                                        info.st_mtime_ns)
            except OSError:
                pass

        def get_file_obj(self, bucket_name, file_name):
            self._adopt(bucket_name, file_name)
            return super().get_file_obj(bucket_name, file_name)

        def delete_file(self, bucket_name, file_name):
            self._adopt(bucket_name, file_name)
            self.__dict__.get("_gtc_seen", {}).pop((bucket_name, file_name), None)
            return super().delete_file(bucket_name, file_name)

        def _list_live_candidates(self, bucket_name, prefix=None):
            folder = root / bucket_name / (prefix or "").rpartition("/")[0]
            if bucket_name in self.buckets and ".." not in (prefix or "").split("/") and folder.is_dir():
                for where, _dirs, files in os.walk(folder):
                    for file in files:
                        name = (Path(where) / file).relative_to(root / bucket_name).as_posix()
                        if name.startswith(prefix or ""):
                            self._adopt(bucket_name, name)
            return super()._list_live_candidates(bucket_name, prefix)

    return MountedStorage
