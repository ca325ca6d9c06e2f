"""Reading a job's output files without re-reading them: the tail of a file by seeking from
its end, and new bytes since the last read by remembering an offset."""

from __future__ import annotations

import codecs
import os
from pathlib import Path


def tail_lines(path: Path, lines: int, block: int = 64 * 1024) -> str:
    """The last ``lines`` lines of ``path``, reading backwards only as far as needed."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            data, pos = b"", end
            while pos > 0 and data.count(b"\n") <= lines:
                step = min(block, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except FileNotFoundError:
        return ""
    text = data.decode(errors="replace")
    return "".join(text.splitlines(keepends=True)[-lines:]) if lines > 0 else ""


class LogFollower:
    """Hands out what was appended to a file since the last call (a UTF-8 character cut in
    half by the writer is completed on the next call, never mangled)."""

    def __init__(self, path: Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read_new(self, limit: int = 4 * 1024 * 1024) -> str:
        """At most ``limit`` bytes of what is new (-1: all of it)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(limit)
        except FileNotFoundError:
            return ""
        self.offset += len(data)
        return self._decoder.decode(data)
