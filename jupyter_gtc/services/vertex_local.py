"""The local Vertex endpoint as a process: started for a cluster on a free loopback port
with a fresh token, found again by port, stopped with the process that started it.

Its address and token are in ``<GTC_HOME>/vertex/endpoints/<port>.json``, readable by its
user only. Its user's own calls need no token (the endpoint knows them by their connection,
``vertex/guard.py``), so the SDK reaches it at plain ``http://127.0.0.1:PORT`` and nothing a
user sees or saves holds a secret; the token is for callers it cannot know so, in an
``Authorization: Bearer`` header. It is never in argv (where `ps` shows it), a log, a URL or
a job's environment: whoever holds it may run jobs on the cluster as that user.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .. import _process
from .._ports import free_ports
from ..exceptions import GtcError
# Where a running endpoint is recorded, and its buckets' folder: core, so the vertex backend
# (which reaches an endpoint as a client) reads the same record.
from ..vertex.guard import GuardedHandler, GuardedServer, is_loopback
from ..vertex.local_endpoint import LocalEndpoint, endpoints_dir, find, gcs_root, running, write_endpoint_file

TOKEN_VARIABLE = "GTC_VERTEX_TOKEN"  # how the endpoint's process gets its token (never argv)
log = logging.getLogger("jupyter_gtc.vertex_local")
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

    from ..backends.daemons import _runs_as

    stopped = []
    for endpoint in running(home, cluster=cluster):
        record = endpoints_dir(home) / f"{endpoint.port}.json"
        try:
            proc = psutil.Process(endpoint.process["pid"])
            # Only a process of the record's writer, really and effectively (a set-uid program
            # that user started is not the user's): root deleting a normal user's cluster
            # reads that user's records, which may name any process.
            if not _runs_as(proc, record.lstat().st_uid):
                continue
            proc.terminate()  # it ends its server and storage emulator on SIGTERM
            proc.wait(timeout=10)
        except psutil.TimeoutExpired:
            proc.kill()
        except (psutil.NoSuchProcess, FileNotFoundError):
            pass
        record.unlink(missing_ok=True)
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


STORAGE_MAX_BODY = 512 * 1024 * 1024  # an upload's request (the SDK's packages); larger files: copy them in


def start_storage(root: Path, host: str = "127.0.0.1", bucket: str | None = None, token: str | None = None):
    """gcp-storage-emulator (a maintained pure-Python one, on PyPI) on a free loopback port, its
    files under ``root`` as ``root/<bucket>/<object>`` (its own index in ``root/.meta``),
    ``bucket`` made if missing. Returns (server, port); ``server.stop()`` ends it.

    Its callers are checked as the endpoint's (``vertex/guard.py``): this machine's user that
    runs it, or whoever shows ``token``; a thread per connection, with its timeout and a cap,
    each request's body read whole before the emulator (not thread-safe) works on it, one
    request at a time."""
    if not is_loopback((host, 0)):
        raise GtcError(f"the Cloud Storage emulator listens on loopback only, not {host}: the files it serves "
                       f"are its user's, and jobs reach them as files")
    # The emulator reads where it keeps files from its environment, once, at import: an empty
    # STORAGE_DIR puts buckets straight under data_dir. Only the endpoint's process imports it.
    os.environ["STORAGE_DIR"] = ""
    from gcp_storage_emulator.handlers import buckets
    from gcp_storage_emulator.storage import Storage

    root.mkdir(parents=True, exist_ok=True)
    server = _StorageServer((host, 0), token)
    port = server.server_address[1]
    storage = Storage(use_memory_fs=False, data_dir=str(root))
    # The emulator keeps its own index of objects; what jobs write through GTC_GCS_MOUNT (as
    # Cloud Storage FUSE writes objects on Vertex AI) must be objects too, or a job's log and
    # event files would not exist for a storage client (the vertex backend's host).
    # gcp-storage-emulator is pinned to a year's releases.
    storage.__class__ = _mounted_storage(root, f"http://{host}:{port}")
    if bucket:
        buckets.create_bucket(bucket, storage)
    server.storage = storage
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True,
                              name=f"storage-emulator-{port}")
    thread.start()
    return server, port


class _StorageHandler(GuardedHandler):
    max_body = STORAGE_MAX_BODY

    @property
    def storage(self):  # what the emulator's Router works on
        return self.server.storage

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        import io
        import urllib.parse

        from gcp_storage_emulator.server import Router

        if not self.admit():
            return
        if urllib.parse.urlsplit(self.path).path.rstrip("/") == "/wipe":
            self.refuse(403, "PERMISSION_DENIED", "/wipe (the emulator's own: every object deleted) is not "
                                                  "served here; delete objects one by one")
            return
        length = self.body_length()
        if length is None:
            return
        body = self.rfile.read(length)
        # The emulator reads the body from rfile and writes its answer to wfile, all while it
        # works on its Storage: here from memory and into memory, under the lock, so a slow
        # client holds its own thread only.
        sockets = self.rfile, self.wfile
        self.rfile, self.wfile = io.BytesIO(body), io.BytesIO()
        try:
            with self.server.storage_lock:
                Router(self).handle(method)
            answer = self.wfile.getvalue()
        except Exception:  # noqa: BLE001 - the emulator's failure, answered as one
            log.exception("the storage emulator failed on %s %s", method, self.path)
            answer = None
        finally:
            self.rfile, self.wfile = sockets
        if answer is None:
            self._headers_buffer = []
            self.refuse(500, "INTERNAL", "the storage emulator failed; the endpoint's log says why")
            return
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _StorageServer(GuardedServer):
    what = "Cloud Storage emulator"

    def __init__(self, address: tuple[str, int], token: str | None):
        super().__init__(address, _StorageHandler, token)
        self.storage = None
        self.storage_lock = threading.Lock()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


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
