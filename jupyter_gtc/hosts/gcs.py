"""A Cloud Storage bucket as a host's files: where the ``vertex`` backend's jobs keep their
folders (the script, its log, event files, checkpoints, the model).

Paths are those a Vertex AI job sees through Cloud Storage FUSE: ``/gcs/BUCKET/OBJECT``, so
the same path is a job's folder in the job's environment and here. Each operation is one or
two requests of google-cloud-storage (imported when first used); a read asks a byte range,
so a followed log or a metrics poll costs the new bytes only, as over SSH.

Cloud Storage has no folders: a folder is a prefix that some object has. ``make_dirs`` writes
a zero-byte ``.gtc-folder`` object in a folder that has nothing yet (listings leave it out),
so a folder made exists at once and a second ``make_dirs(exist_ok=False)`` is refused, as on
a disk. There are no links, and no commands: ``run`` refuses.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._process import Result
from ..exceptions import GtcError, InvalidArgument
from .base import DirEntry, FileStat, Host, HostPath

MOUNT = "/gcs"  # where Vertex AI mounts buckets in a job (Cloud Storage FUSE)
FOLDER_MARK = ".gtc-folder"


_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # Cloud Storage's are stricter; this is what a folder may be


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` (``gs://BUCKET/OBJECT``, or ``BUCKET/OBJECT``) is no object of a bucket:
    no bucket (``gs:///etc/x``, which would be /etc/x as a path), or a path that steps out of
    its bucket (``..``); None when it is one."""
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    if not _BUCKET.fullmatch(bucket):
        return (f"{uri!r} names no bucket ({bucket!r}): a Cloud Storage URI is gs://BUCKET/OBJECT, BUCKET of "
                f"letters, digits, '.', '_' and '-'")
    if any(part in (".", "..") for part in name.split("/")):
        return f"{uri!r} steps out of its bucket ('.' or '..' in the object's path): gs://BUCKET/OBJECT, OBJECT inside it"
    return None


def split_uri(uri: str) -> tuple[str, str]:
    """``gs://b/x/y/`` -> ("b", "x/y"); a URI with no bucket, or stepping out of it, is
    ``InvalidArgument`` naming it (``uri_problem``)."""
    problem = uri_problem(uri)
    if problem:
        raise InvalidArgument(problem)
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    return bucket, "/".join(part for part in name.split("/") if part)


def gcs_path(uri: str) -> str:
    """``gs://b/x/y`` -> ``/gcs/b/x/y``."""
    bucket, name = split_uri(uri)
    return f"{MOUNT}/{bucket}" + (f"/{name}" if name else "")


def gcs_uri(path: HostPath) -> str:
    """``/gcs/b/x/y`` -> ``gs://b/x/y``."""
    return "gs://" + _split(path)[0] + ("/" + _split(path)[1] if _split(path)[1] else "")


def _split(path: HostPath) -> tuple[str, str]:
    """``/gcs/b/x/y`` -> ("b", "x/y"); a path outside ``/gcs/BUCKET`` is a ``ValueError``."""
    text = str(path)
    if not text.startswith(MOUNT + "/") or uri_problem(text[len(MOUNT) + 1:]):
        raise ValueError(f"{text!r} is no Cloud Storage path: /gcs/BUCKET/OBJECT, as a Vertex AI job mounts buckets")
    bucket, _, name = text[len(MOUNT) + 1:].partition("/")
    return bucket, name.strip("/")


class GcsHost(Host):
    """Buckets of one project through ``client_factory`` (a ``google.cloud.storage.Client``
    maker: the project's credentials, or the local endpoint's storage emulator)."""

    def __init__(self, name: str, client_factory: Callable[[], Any]):
        self.name = name
        self._factory = client_factory
        self._client = None
        self._lock = threading.Lock()

    def _bucket(self, bucket: str):
        with self._lock:
            if self._client is None:
                self._client = self._factory()
            return self._client.bucket(bucket)

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True,
            timeout: float = 60, input: str | None = None) -> Result:
        raise GtcError(f"{self.name} is Cloud Storage: it keeps the jobs' files and runs no commands "
                       f"(asked to run {argv[0] if argv else '(nothing)'})")

    def stat(self, path: HostPath) -> FileStat | None:
        bucket, name = _split(path)
        if name:
            blob = self._bucket(bucket).get_blob(name)
            if blob is not None:
                return FileStat(blob.size or 0, int(blob.updated.timestamp() * 1e9) if blob.updated else 0,
                                int(blob.generation or 0), False)
        if self._any_under(bucket, name):
            return FileStat(0, 0, 0, True)
        return None

    def list_dir(self, path: HostPath) -> list[DirEntry] | None:
        bucket, name = _split(path)
        prefix = f"{name}/" if name else ""
        pages = self._bucket(bucket).client.list_blobs(bucket, prefix=prefix, delimiter="/")
        files = [b.name[len(prefix):] for b in pages]  # the prefixes are known once the pages are read
        folders = [p[len(prefix):].rstrip("/") for p in pages.prefixes]
        if not files and not folders:
            return None
        entries = [DirEntry(f, False, True) for f in files if f and f != FOLDER_MARK]
        return sorted(entries + [DirEntry(d, True, False) for d in folders], key=lambda e: e.name)

    def read(self, path: HostPath, offset: int = 0, size: int = -1, *, owner: str | None = None) -> bytes:
        """(``owner`` is not checked: a bucket's objects have no owning user, and every job on a
        Vertex target is the target's own.)"""
        from google.api_core import exceptions

        bucket, name = _split(path)
        if size == 0:
            return b""
        blob = self._bucket(bucket).blob(name)
        try:
            # Ranges come back as they are stored (no decompressive transcoding), without the
            # whole-object checksum a part cannot match.
            return blob.download_as_bytes(start=offset, end=offset + size - 1 if size > 0 else None,
                                          raw_download=True, checksum=None)
        except exceptions.NotFound:
            raise FileNotFoundError(2, "No such file or directory", str(path)) from None
        except exceptions.RequestRangeNotSatisfiable:
            return b""  # at or past the end

    def write(self, path: HostPath, data: bytes) -> None:
        bucket, name = _split(path)
        self._bucket(bucket).blob(name).upload_from_string(data)  # an object is replaced whole

    def make_dirs(self, path: HostPath, exist_ok: bool = True, mode: int = 0o777) -> None:
        """(``mode`` does not apply: a bucket's objects have no permission bits.)"""
        bucket, name = _split(path)
        if not name:
            return
        if self._any_under(bucket, name):
            if not exist_ok:
                raise FileExistsError(17, "File exists", str(path))
            return
        self._bucket(bucket).blob(f"{name}/{FOLDER_MARK}").upload_from_string(b"")

    def remove_tree(self, path: HostPath) -> None:
        bucket, name = _split(path)
        handle = self._bucket(bucket)
        doomed = list(handle.client.list_blobs(bucket, prefix=f"{name}/" if name else ""))
        single = handle.get_blob(name) if name else None
        for blob in doomed + ([single] if single is not None else []):
            blob.delete()

    def _any_under(self, bucket: str, name: str) -> bool:
        handle = self._bucket(bucket)
        return any(True for _ in handle.client.list_blobs(bucket, prefix=f"{name}/" if name else "", max_results=1))
