"""The one record every metrics reader produces and every consumer takes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scalar:
    """One value of one tag at one step, as a training job reported it."""

    tag: str          # e.g. "train/loss"; hypertune metrics use their metric tag
    step: int
    wall_time: float  # seconds since the epoch, when the job wrote it
    value: float
    run: str = ""     # the event file's folder relative to the job's log dir ("" for the top)
