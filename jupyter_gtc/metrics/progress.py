"""How far a job is: from a ``progress/total_steps`` scalar and the latest step, or from
tqdm-style lines in its log. Pure functions."""

from __future__ import annotations

import re
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


def from_scalars(scalars: list[Scalar]) -> Progress | None:
    """Progress from the job's scalars: total from ``progress/total_steps``, done from the
    newest step of any other tag, rate from the steps and wall times seen."""
    totals = [s for s in scalars if s.tag == TOTAL_STEPS_TAG]
    others = [s for s in scalars if s.tag != TOTAL_STEPS_TAG]
    if not totals or not others:
        return None
    total = int(totals[-1].value)
    first = min(others, key=lambda s: s.wall_time)
    last = max(others, key=lambda s: (s.step, s.wall_time))
    span = last.wall_time - first.wall_time
    rate = (last.step - first.step) / span if span > 0 and last.step > first.step else None
    eta = (total - last.step) / rate if rate else None
    return Progress(last.step, total, rate, max(0.0, eta) if eta is not None else None)


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
