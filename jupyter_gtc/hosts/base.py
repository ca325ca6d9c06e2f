"""The host contract: run an argument list, and a few file operations on POSIX paths.

Small on purpose (as torchtitan's checkpoint storage is): everything services do with a
cluster's files is one of these, so an SSH host needs nothing else. Paths are the host's
own; they are never joined into a shell string (a host that needs one quotes each word).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from .._process import Result

HostPath = str | os.PathLike
READ_AHEAD_MIN = 64 << 10  # RangeReader reads ahead after a read this big (a chunk, not a header)


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int
    inode: int
    is_dir: bool

    @property
    def mtime(self) -> float:
        return self.mtime_ns / 1e9


@dataclass(frozen=True)
class DirEntry:
    """One name in a folder; symlinks are not followed (a link to a folder is neither)."""

    name: str
    is_dir: bool
    is_file: bool


class Host(ABC):
    """One machine's commands and files."""

    name: str

    @abstractmethod
    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True,
            timeout: float = 60, input: str | None = None) -> Result:
        """Run ``argv`` there to completion (``_process.run``'s contract: ``CommandError`` on
        failure with ``check``, and on timeout); ``env`` is added to the host's environment."""

    @abstractmethod
    def stat(self, path: HostPath) -> FileStat | None:
        """The file or folder at ``path`` (links followed), or None where nothing is."""

    @abstractmethod
    def list_dir(self, path: HostPath) -> list[DirEntry] | None:
        """The names in folder ``path``, or None where it is no folder (or is gone)."""

    @abstractmethod
    def read(self, path: HostPath, offset: int = 0, size: int = -1, *, owner: str | None = None) -> bytes:
        """Up to ``size`` bytes (-1: to the end) from ``offset``; ``FileNotFoundError`` where
        there is no file. Fewer bytes only at the end of the file. Only a regular file outside
        /proc, /dev and /sys is read, never waiting for a writer (a FIFO), and with ``owner``
        only a file that user owns: else ``PermissionError``, saying why."""

    @abstractmethod
    def write(self, path: HostPath, data: bytes) -> None:
        """Make ``path`` hold ``data``, whole: a reader sees the old file or the new one."""

    @abstractmethod
    def make_dirs(self, path: HostPath, exist_ok: bool = True, mode: int = 0o777) -> None:
        """``mkdir -p``; with ``exist_ok=False``, ``FileExistsError`` where ``path`` is already.
        ``path`` itself, where made, gets ``mode`` (less the umask) from its creation on, as
        ``os.makedirs`` does: 0o700 makes a folder its user's alone (a job's)."""

    @abstractmethod
    def remove_tree(self, path: HostPath) -> None:
        """Remove ``path`` and all under it; nothing there is fine."""

    def read_many(self, requests: Sequence[tuple[HostPath, int, int]], *,
                  owner: str | None = None) -> list[bytes | None]:
        """``read(path, offset, size, owner=owner)`` of each request, None where there is no
        file or it may not be read. A remote host does them in one round trip (the reason this
        exists: a poll that follows a hundred logs asks for them at once)."""
        out: list[bytes | None] = []
        for path, offset, size in requests:
            try:
                out.append(self.read(path, offset, size, owner=owner))
            except (FileNotFoundError, PermissionError):
                out.append(None)
        return out

    def read_later(self, path: HostPath, offset: int, size: int, *,
                   owner: str | None = None) -> Callable[[], bytes]:
        """``read``, asked for now and taken when the returned function is called (then raising
        what ``read`` would). A remote host sends the request at once, so the bytes cross the
        connection while the caller works on what it read before; here, where a read costs no
        round trip, the read happens when they are taken."""
        return partial(self.read, path, offset, size, owner=owner)

    def open_read(self, path: HostPath) -> "RangeReader":
        """A read-only file object (``seek``, ``tell``, ``read``) over ``read``, for parsers
        written against files; ``FileNotFoundError`` at once where there is no file."""
        return RangeReader(self, path)

    def owned_by(self, user: str | None) -> "Host":
        """This host, reading only files that ``user`` owns (``read``'s ``owner``): how the
        output of a job that others submitted is read, wherever its ``--output`` points."""
        return OwnedFilesHost(self, user)


class OwnedFilesHost(Host):
    """A host's view that reads only one user's files; everything else is the host's own. A
    job's output is served to whoever may see the job (the sidebar, ``gtc job logs``), and a
    job names its output path itself: read as the server's user, another user's
    ``--output=/root/secret`` would be a way to read what that user may not."""

    def __init__(self, host: Host, user: str | None):
        self.host, self.user = host, user
        self.name = host.name

    # Views of one host for one user are one (a poll reads their followed logs in one request).
    def __eq__(self, other: object) -> bool:
        return isinstance(other, OwnedFilesHost) and (self.host, self.user) == (other.host, other.user)

    def __hash__(self) -> int:
        return hash((id(self.host), self.user))

    def _owner(self, path: HostPath) -> str:
        if not self.user:
            raise PermissionError(13, "the job's user is unknown, so whose file it is cannot be checked", str(path))
        return self.user

    def run(self, argv, *, env=None, check=True, timeout=60, input=None) -> Result:
        return self.host.run(argv, env=env, check=check, timeout=timeout, input=input)

    def stat(self, path: HostPath) -> FileStat | None:
        return self.host.stat(path)

    def list_dir(self, path: HostPath) -> list[DirEntry] | None:
        return self.host.list_dir(path)

    def read(self, path: HostPath, offset: int = 0, size: int = -1, *, owner: str | None = None) -> bytes:
        return self.host.read(path, offset, size, owner=self._owner(path))

    def read_later(self, path: HostPath, offset: int, size: int, *,
                   owner: str | None = None) -> Callable[[], bytes]:
        return self.host.read_later(path, offset, size, owner=self._owner(path))

    def open_read(self, path: HostPath) -> "RangeReader":
        self.read(path, 0, 0)  # refused at once, not at the first read (a tail that seeks past nothing)
        return RangeReader(self, path)

    def read_many(self, requests, *, owner: str | None = None) -> list[bytes | None]:
        if not self.user:
            return [None] * len(requests)
        return self.host.read_many(requests, owner=self.user)

    def write(self, path: HostPath, data: bytes) -> None:
        raise PermissionError(13, "a view of another user's files is read-only", str(path))

    def make_dirs(self, path: HostPath, exist_ok: bool = True, mode: int = 0o777) -> None:
        raise PermissionError(13, "a view of another user's files is read-only", str(path))

    def remove_tree(self, path: HostPath) -> None:
        raise PermissionError(13, "a view of another user's files is read-only", str(path))


class RangeReader:
    """A file object whose reads are ``Host.read`` calls: each read costs one round trip on
    a remote host, so callers read in big pieces. Seeking from the end asks the size.

    A read of `READ_AHEAD_MIN` bytes or more that comes back whole asks for the same number
    of bytes after it at once (``Host.read_later``): a caller that reads a file piece by piece
    (the metrics reader's first poll) then decodes one piece while the next crosses the
    connection, rather than waiting a round trip for each."""

    def __init__(self, host: Host, path: HostPath):
        self._host, self._path, self._pos = host, path, 0
        self._ahead: tuple[int, int, Callable[[], bytes]] | None = None  # offset, size, take
        if host.stat(path) is None:
            raise FileNotFoundError(2, "No such file or directory", str(path))

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_END:
            st = self._host.stat(self._path)
            if st is None:
                raise FileNotFoundError(2, "No such file or directory", str(self._path))
            offset += st.size
        elif whence == os.SEEK_CUR:
            offset += self._pos
        if offset < 0:
            raise ValueError(f"negative seek position {offset}")
        self._pos = offset
        return offset

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[:2] == (self._pos, size):
            data = ahead[2]()
        else:
            data = self._host.read(self._path, self._pos, size)
        self._pos += len(data)
        if size >= READ_AHEAD_MIN and len(data) == size:
            self._ahead = (self._pos, size, self._host.read_later(self._path, self._pos, size))
        return data

    def close(self) -> None:
        pass

    def __enter__(self) -> "RangeReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
