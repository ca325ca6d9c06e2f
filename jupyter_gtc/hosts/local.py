"""This machine as a host: a local cluster's, and the login node itself when JupyterLab
runs there."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from stat import S_ISDIR

from .. import _process
from .base import DirEntry, FileStat, Host, HostPath
from .remote_ops import open_log, read_log


class LocalHost(Host):
    name = "localhost"

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True,
            timeout: float = 60, input: str | None = None) -> _process.Result:
        return _process.run(argv, env=env, check=check, timeout=timeout, input=input)

    def stat(self, path: HostPath) -> FileStat | None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStat(st.st_size, st.st_mtime_ns, st.st_ino, S_ISDIR(st.st_mode))

    def list_dir(self, path: HostPath) -> list[DirEntry] | None:
        entries = []
        try:
            with os.scandir(path) as found:
                for entry in found:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        entries.append(DirEntry(entry.name, is_dir, not is_dir and entry.is_file()))
                    except OSError:  # removed while listed
                        continue
        except (NotADirectoryError, FileNotFoundError):
            return None
        return entries

    def read(self, path: HostPath, offset: int = 0, size: int = -1, *, owner: str | None = None) -> bytes:
        return read_log(path, offset, size, owner)

    def open_read(self, path: HostPath):
        return os.fdopen(open_log(path), "rb")  # the real file: no need to go through read() here

    def write(self, path: HostPath, data: bytes) -> None:
        folder = os.path.dirname(os.fspath(path)) or "."
        fd, partial = tempfile.mkstemp(dir=folder, prefix=".partial-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(partial, 0o666 & ~_UMASK)  # as open() would make it (mkstemp's is 0600)
            os.replace(partial, path)
        except BaseException:
            os.unlink(partial)
            raise

    def make_dirs(self, path: HostPath, exist_ok: bool = True, mode: int = 0o777) -> None:
        os.makedirs(path, mode=mode, exist_ok=exist_ok)

    def remove_tree(self, path: HostPath) -> None:
        shutil.rmtree(path, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)  # read it the only way there is, once, at import (before any thread)
    os.umask(mask)
    return mask


_UMASK = _umask()
LOCAL = LocalHost()
