"""Goodput: the share of a job's wall time that made progress that was kept, and where the
rest went. Computed from the steps the job reported (a step tag's points, with the wall time
each was written) and the job's submit and end times; pure, so tested on made-up steps.

A step's time is the gap since the step before it in the same attempt. An attempt ends where
the step numbers go back (a requeued job resumes from its checkpoint, or from 0); its steps
past the step the next attempt resumed from were done again, so their time is *recompute*.
The gap between an attempt's last step and the next one's first is *restart* (detection,
requeue, start-up, loading the checkpoint). Before the first step is *startup* (queueing
too), after the last one *finish*. Within an attempt, a gap of more than ``STALL_FACTOR``
times the median step is a *stall* (a checkpoint written, a hang), not progress.
``productive + sum(badput) == wall``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

STALL_FACTOR = 10.0


@dataclass(frozen=True)
class Goodput:
    wall_s: float
    productive_s: float
    badput_s: dict[str, float] = field(default_factory=dict)  # startup, restart, recompute, stall, finish
    attempts: int = 1
    steps: int = 0  # distinct steps kept

    @property
    def goodput(self) -> float:
        return self.productive_s / self.wall_s if self.wall_s > 0 else 0.0

    def describe(self) -> str:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.badput_s.items() if v > 0.05)
        return (f"goodput {self.goodput:.0%}: {self.productive_s:.1f} s of {self.wall_s:.1f} s made {self.steps} "
                f"steps kept, over {self.attempts} attempt(s)" + (f"; the rest: {parts}" if parts else ""))


def goodput_of(points: list[tuple[int, float]], started: float, ended: float, restarts: int = 0) -> Goodput:
    """``points``: (step, wall_time) of one step tag, in any order; ``started``: when the job
    was submitted; ``ended``: when it ended (or now, while it runs); ``restarts``: how often
    Slurm started it again (its restart count), where the steps alone may not show it: an
    attempt that resumed right after the previous one's last step goes on counting upwards,
    so the largest gaps are taken for the restarts the steps did not show."""
    badput = {"startup": 0.0, "restart": 0.0, "recompute": 0.0, "stall": 0.0, "finish": 0.0}
    if not points:
        wall = max(0.0, ended - started)
        return Goodput(wall, 0.0, {**badput, "startup": wall}, 1, 0)
    ordered = sorted(points, key=lambda p: p[1])
    # Slurm's end time is in whole seconds: the last step may be written after the second it
    # names, and a job does not end before its last step (else productive + badput > wall).
    ended = max(ended, ordered[-1][1])
    wall = max(0.0, ended - started)
    attempts: list[list[tuple[int, float]]] = [[ordered[0]]]
    for step, at in ordered[1:]:
        if step <= attempts[-1][-1][0]:  # the steps went back: a new attempt resumed
            attempts.append([])
        attempts[-1].append((step, at))
    for _ in range(restarts - (len(attempts) - 1)):
        gaps_at = [(b[1] - a[1], i, j) for i, run in enumerate(attempts) for j, (a, b) in enumerate(zip(run, run[1:]))]
        widest = max(gaps_at, default=None)
        if widest is None:
            break
        _, i, j = widest
        attempts[i:i + 1] = [attempts[i][:j + 1], attempts[i][j + 1:]]
    gaps = [b[1] - a[1] for run in attempts for a, b in zip(run, run[1:])]
    typical = statistics.median(gaps) if gaps else 0.0
    productive = 0.0
    for i, run in enumerate(attempts):
        redone_from = attempts[i + 1][0][0] if i + 1 < len(attempts) else None  # first step of the next
        for (_, before), (step, at) in zip(run, run[1:]):
            gap = at - before
            if typical and gap > STALL_FACTOR * typical:
                badput["stall"] += gap
            elif redone_from is not None and step >= redone_from:
                badput["recompute"] += gap
            else:
                productive += gap
        if i + 1 < len(attempts):
            badput["restart"] += attempts[i + 1][0][1] - run[-1][1]
    badput["startup"] = max(0.0, ordered[0][1] - started)
    badput["finish"] = max(0.0, ended - ordered[-1][1])
    kept = {step for run in attempts for step, _ in run}
    return Goodput(wall, productive, badput, len(attempts), len(kept))
