"""How far a job is: from a ``progress/total_steps`` scalar and the latest step, or from
tqdm-style lines in its log. Pure functions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .scalar import Scalar

TOTAL_STEPS_TAG = "progress/total_steps"

# " 45%|████▌     | 45/100 [00:10<00:12,  4.50it/s]" (also s/it, and h:mm:ss times)
_TQDM = re.compile(
    r"(?P<done>\d+)/(?P<total>\d+)\s*\[(?P<elapsed>[\d:]+)<(?P<left>[\d:?]+),\s*(?P<rate>[\d.]+)\s*(?P<unit>it/s|s/it)")


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    rate: float | None       # steps per second
    eta_seconds: float | None

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    def describe(self) -> str:
        parts = [f"{self.done}/{self.total} steps ({self.fraction:.0%})"]
        if self.rate:
            parts.append(f"{self.rate:.2f} steps/s")
        if self.eta_seconds is not None:
            parts.append(f"ETA {format_seconds(self.eta_seconds)}")
        return ", ".join(parts)


def from_scalars(scalars: Iterable[Scalar]) -> Progress | None:
    """Progress from the job's scalars: total from ``progress/total_steps``, done from the
    newest step of any other tag, rate from the steps and wall times seen.

    One pass in constant memory; a job's history (``ScalarHistory.view()``) answers from
    the summary it keeps, without reading its scalars again."""
    summary = scalars.progress_summary() if hasattr(scalars, "progress_summary") else None
    return (summary or ProgressSummary().add(scalars)).progress()


class ProgressSummary:
    """What `from_scalars` needs of a stream of scalars, kept up to date as it grows: the
    last total, the (step, wall time) of the earliest point and of the newest step."""

    def __init__(self):
        self.total: float | None = None               # the last progress/total_steps value
        self.first: tuple[int, float] | None = None   # (step, wall_time) of the earliest point
        self.last: tuple[int, float] | None = None    # the greatest (step, wall_time)

    def add(self, scalars: Iterable[Scalar]) -> ProgressSummary:
        first, last = self.first, self.last
        for s in scalars:
            if s.tag == TOTAL_STEPS_TAG:
                self.total = s.value
                continue
            if first is None or s.wall_time < first[1]:  # the first of equals stays, as min() keeps it
                first = (s.step, s.wall_time)
            if last is None or (s.step, s.wall_time) > last:
                last = (s.step, s.wall_time)
        self.first, self.last = first, last
        return self

    def add_columns(self, steps, wall_times, values, is_total) -> None:
        """The same as `add` for numpy columns of a stretch of scalars (``is_total``: a
        boolean mask of the progress/total_steps ones)."""
        import numpy as np

        totals = np.flatnonzero(is_total)
        if len(totals):
            self.total = float(values[totals[-1]])
        others = ~is_total
        if not others.any():
            return
        steps, wall_times = steps[others], wall_times[others]
        i = int(np.argmin(wall_times))  # the first of equals
        if self.first is None or wall_times[i] < self.first[1]:
            self.first = (int(steps[i]), float(wall_times[i]))
        newest = np.flatnonzero(steps == steps.max())
        j = newest[int(np.argmax(wall_times[newest]))]
        candidate = (int(steps[j]), float(wall_times[j]))
        if self.last is None or candidate > self.last:
            self.last = candidate

    def progress(self) -> Progress | None:
        if self.total is None or self.first is None:
            return None
        total = int(self.total)
        (first_step, first_wall), (last_step, last_wall) = self.first, self.last
        span = last_wall - first_wall
        rate = (last_step - first_step) / span if span > 0 and last_step > first_step else None
        eta = (total - last_step) / rate if rate else None
        return Progress(last_step, total, rate, max(0.0, eta) if eta is not None else None)

    def copy(self) -> ProgressSummary:
        other = ProgressSummary()
        other.total, other.first, other.last = self.total, self.first, self.last
        return other


def from_log(text: str) -> Progress | None:
    """Progress from the last tqdm-style line in ``text`` (tqdm rewrites its line with \\r)."""
    matches = list(_TQDM.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    rate = float(m["rate"])
    rate = rate if m["unit"] == "it/s" else (1 / rate if rate else None)
    left = _parse_clock(m["left"])
    return Progress(int(m["done"]), int(m["total"]), rate or None, left)


def _parse_clock(text: str) -> float | None:
    if "?" in text:
        return None
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
