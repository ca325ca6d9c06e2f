"""The cloudml-hypertune metrics file, read for entries not seen before.

A trial reports tuning metrics with ``hypertune.HyperTune().report_hyperparameter_tuning_metric``,
which keeps its last 100 reports and REWRITES the whole file (``CLOUD_ML_HP_METRIC_FILE``)
on each report, one JSON object a line::

    {"accuracy": "0.93", "checkpoint_path": "", "global_step": "200", "timestamp": 1700000000.1, "trial": "3"}

So an offset means nothing here: entries are tracked by content. A line is new if that
exact line was never returned before. A line without its newline is a rewrite caught
midway and waits for the next read, unless the job has ended (``read_new(final=True)``):
then nothing writes any more, and a last line without its newline (a writer of its own,
``print(..., end="")``) is whole and read.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from ..hosts import LOCAL, Host
from .scalar import Scalar

log = logging.getLogger(__name__)

HYPERTUNE_RUN = "hypertune"  # the `run` of every hypertune Scalar, apart from event-file runs
NOT_METRICS = frozenset({"global_step", "timestamp", "trial", "checkpoint_path"})
# A rewrite within this many seconds of the file's mtime could share that mtime with an
# earlier read (coarse timestamps on some filesystems), so such a file is read again.
RACY_SECONDS = 2.0


def parse_hypertune_line(line: str) -> list[Scalar]:
    """The scalars in one JSON line: one per metric key (the library writes one)."""
    entry = json.loads(line)
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    step = int(float(entry.get("global_step") or 0))
    if not -(1 << 63) <= step < 1 << 63:  # what an event file's int64 step can hold
        raise ValueError(f"global_step {step} is out of range")
    wall_time = float(entry.get("timestamp") or 0.0)
    out = []
    for tag, value in entry.items():
        if tag not in NOT_METRICS:
            out.append(Scalar(tag, step, wall_time, float(value), HYPERTUNE_RUN))
    return out


class HypertuneTail:
    """Returns the entries of one hypertune file that earlier calls did not return.

    Memory grows with the number of distinct reports (one line each, ~130 bytes), which
    is the number of evaluations a trial makes: small.
    """

    def __init__(self, path: Path, host: Host = LOCAL):
        self.path = Path(path)
        self._host = host
        self.bad_lines = 0
        self.first_bad: str | None = None  # why the first bad line was skipped
        self.found = False                  # the file was there at a read
        self.unterminated = ""              # the last read's text after its last newline
        self._seen: set[str] = set()
        self._signature: tuple[int, int, int] | None = None

    def read_new(self, final: bool = False) -> list[Scalar]:
        """The entries not returned before. ``final``: the job has ended, so a last line
        without its newline is whole, and is read too (the file is read even if unchanged)."""
        st = self._host.stat(self.path)
        if st is None:
            return []
        self.found = True
        signature = (st.inode, st.size, st.mtime_ns)
        racy = time.time() - st.mtime < RACY_SECONDS
        if signature == self._signature and not racy and not (final and self.unterminated.strip()):
            return []
        try:
            text = self._host.read(self.path).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        self._signature = signature
        out: list[Scalar] = []
        # Only lines that end in a newline are whole; the rest is a rewrite in progress, until
        # the job has ended.
        *lines, self.unterminated = text.split("\n")
        for line in lines + ([self.unterminated] if final else []):
            line = line.strip()
            if not line or line in self._seen:
                continue
            try:
                scalars = parse_hypertune_line(line)
            except (ValueError, TypeError, OverflowError) as e:  # OverflowError: int(float("inf"))
                self.bad_lines += 1
                self.first_bad = self.first_bad or f"{e} ({line[:80]})"
                log.warning("skipping a bad line in %s: %s (%.80s)", self.path, e, line)
            else:
                out.extend(scalars)
            self._seen.add(line)
        return out

    def problem(self) -> str | None:
        """Why the file gave nothing, where that can be told: for a trial that reported nothing."""
        if not self.found:
            return f"its hypertune file {self.path} was never written"
        if self.bad_lines:
            return (f"{self.bad_lines} line(s) of its hypertune file {self.path} are no cloudml-hypertune JSON "
                    f"(the first: {self.first_bad})")
        if not self._seen:
            if self.unterminated.strip():
                return f"its hypertune file {self.path} had no complete line (its only line has no newline)"
            return f"its hypertune file {self.path} is empty"
        return None
