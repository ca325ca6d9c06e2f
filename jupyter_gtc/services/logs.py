"""Reading a job's output files without re-reading them, through the cluster's host: the
tail of a file by seeking from its end, new bytes since the last read by remembering an
offset, and a byte range for the sidebar's log view."""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import Any

from ..exceptions import LogRefused
from ..hosts import LOCAL, Host


def tail_lines(path: Path, lines: int, block: int = 64 * 1024, host: Host = LOCAL) -> str:
    """The last ``lines`` lines of ``path``, reading backwards only as far as needed."""
    try:
        with host.open_read(path) as f:
            end = f.seek(0, os.SEEK_END)
            data, pos = b"", end
            while pos > 0 and data.count(b"\n") <= lines:
                step = min(block, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except FileNotFoundError:
        return ""
    except PermissionError as e:
        raise LogRefused(str(path), e.strerror or str(e)) from None
    text = data.decode(errors="replace")
    return "".join(text.splitlines(keepends=True)[-lines:]) if lines > 0 else ""


PREFETCH_SIZE = 1024 * 1024  # per followed log and poll; the rest, if any, is read as before


class LogFollower:
    """Hands out what was appended to a file since the last call (a UTF-8 character cut in
    half by the writer is completed on the next call, never mangled)."""

    def __init__(self, path: Path, offset: int = 0, host: Host = LOCAL):
        self.path = Path(path)
        self.offset = offset
        self._host = host
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # What a poll read for us (``prefetch``): (offset, bytes, whether that was the file's
        # end then). Reads at that offset take it instead of asking the host.
        self._prefetched: tuple[int, bytes, bool] | None = None
        self.refused: str | None = None  # why the file may not be read, once a read found out

    def read_new(self, limit: int = 4 * 1024 * 1024) -> str:
        """At most ``limit`` bytes of what is new (-1: all of it)."""
        pre, self._prefetched = self._prefetched, None
        if pre is not None and pre[0] == self.offset:
            _, data, at_end = pre
            if 0 <= limit < len(data):
                data, rest = data[:limit], data[limit:]
                self._prefetched = (self.offset + limit, rest, at_end)
            elif at_end and data:  # nothing more was there at the poll: the next read need not ask
                self._prefetched = (self.offset + len(data), b"", True)
        else:
            if self.refused is not None:
                return ""
            try:
                data = self._host.read(self.path, self.offset, limit)
            except FileNotFoundError:
                return ""
            except PermissionError as e:  # said once, in the text a reader shows
                self.refused = e.strerror or str(e)
                return f"[{LogRefused(str(self.path), self.refused)}]\n"
        self.offset += len(data)
        return self._decoder.decode(data)


def prefetch(followers: list[LogFollower]) -> None:
    """Read what is new in every follower's file in one ``read_many`` per host (one round trip
    on a remote host, however many logs a poll follows); each follower's next ``read_new``
    takes it. Each follower is read through its own host: a job that others submitted reads
    only its user's files (``Host.owned_by``), here as in ``read_new``."""
    by_host: dict[Host, list[LogFollower]] = {}
    for follower in followers:
        by_host.setdefault(follower._host, []).append(follower)
    for host, group in by_host.items():
        found = host.read_many([(f.path, f.offset, PREFETCH_SIZE) for f in group])
        for follower, data in zip(group, found):
            data = data or b""  # no file yet (or one it may not read): nothing new
            follower._prefetched = (follower.offset, data, len(data) < PREFETCH_SIZE)


def read_log_range(path: Path, offset: int | None, limit: int, host: Host = LOCAL) -> dict[str, Any]:
    """Up to ``limit`` bytes of the file from ``offset``, or, without one, its last ``limit``
    bytes from a line start. ``offset`` in the answer is where ``text`` starts: 0 when the
    file is now shorter than the client's offset (a requeued job starts its log over).
    ``next_offset`` never splits a UTF-8 character: its first bytes wait for the next read."""
    from_end = offset is None
    st = host.stat(path)
    if st is None:  # the job has not started writing
        return {"text": "", "offset": 0, "next_offset": 0, "size": 0}
    size = st.size
    start = max(0, size - limit) if from_end else (offset if offset <= size else 0)
    try:
        data = host.read(path, start, limit)
    except FileNotFoundError:
        return {"text": "", "offset": 0, "next_offset": 0, "size": 0}
    except PermissionError as e:
        raise LogRefused(str(path), e.strerror or str(e)) from None
    if from_end and start > 0:  # begin at a whole line
        cut = data.find(b"\n") + 1
        start, data = start + cut, data[cut:]
    data = data[:_whole_utf8_length(data)]
    return {"text": data.decode(errors="replace"), "offset": start, "next_offset": start + len(data), "size": size}


def _whole_utf8_length(data: bytes) -> int:
    """``len(data)`` less a UTF-8 character cut off at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the last character starts here
            needed = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
            return len(data) if back >= needed else len(data) - back
    return len(data)

