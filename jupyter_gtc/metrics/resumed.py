"""Each step once, when a job resumed from a checkpoint.

A requeued job starts again from its newest checkpoint, so the steps it had done since then
reach its event files twice: once from the attempt that died, once from the attempt that
redid them. TensorBoard shows only the newer ones where the new attempt's SummaryWriter was
given ``purge_step`` (as the recipes do): its loader then drops what was written at that step
and after. Every view of ours that shows a job's curve does the same: ``job.metrics()``, the
live plot and the sidebar's chart (labextension/src/metricsview.ts). The raw stream stays as
read: goodput counts the redone steps as recompute from it.

The rule, over one series (a run's tag) in the order its points were written: a point is
kept when every later point has a greater step. It needs no marker, so a plain script that
resumes without ``purge_step`` shows each step once too (TensorBoard's loader, measured with
tensorboard 2.21, shows such steps twice).

Where a requeued attempt took over (``ResumeFinder``) is marked on the plots' x-axes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .scalar import Scalar


def kept_mask(steps: Sequence[int | float]) -> list[bool]:
    """For each point of one series, in the order written: whether no later point redid its step."""
    kept = [False] * len(steps)
    lowest_later = float("inf")
    for i in range(len(steps) - 1, -1, -1):
        kept[i] = steps[i] < lowest_later
        lowest_later = min(lowest_later, steps[i])
    return kept


def latest_attempts(scalars: Iterable[Scalar]) -> list[Scalar]:
    """``scalars`` less the points a later attempt redid, in the same order. A series is taken in
    the order its points were written (wall time): a later read may bring an earlier file's tail."""
    ordered = list(scalars)
    series: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(ordered):
        series.setdefault((s.run, s.tag), []).append(i)
    keep = [False] * len(ordered)
    for indexes in series.values():
        indexes.sort(key=lambda i: ordered[i].wall_time)  # stable: equal times keep the read order
        for i, kept in zip(indexes, kept_mask([ordered[i].step for i in indexes])):
            keep[i] = kept
    return [s for s, k in zip(ordered, keep) if k]


@dataclass(frozen=True)
class Resume:
    """Where a requeued attempt took over: the first step it wrote (the step after the
    checkpoint it resumed from), and which attempt it was (2 for the first requeue)."""

    step: int
    attempt: int


class ResumeFinder:
    """The resume points of a job, from its scalars as they come (``add`` takes each new batch).

    A series (a run's tag) shows a resume where its step goes back. Every series of the job
    shows the same requeue, but each at its own first step after it (``lr`` logged every 10
    steps resumes at 60 where ``loss`` resumes at 51), and its step going back lies between
    its last point of the old attempt and its first of the new one. So one requeue is the
    drops whose (old last, new first) wall-time spans overlap; it resumed at the lowest of
    their steps. A series that went on counting upwards across a requeue shows no resume:
    only the steps tell, and they do not."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # series -> (wall time, step) of its newest point
        self._requeues: list[list[float]] = []  # [since, until, step]: a span every drop of it overlaps

    def add(self, scalars: Iterable[Scalar]) -> bool:
        """Take new scalars; whether the resume points changed."""
        changed = False
        for s in sorted(scalars, key=lambda s: s.wall_time):  # stable: equal times keep the read order
            key = (s.run, s.tag)
            last = self._last.get(key)
            if last is not None and s.wall_time < last[0]:
                continue  # an earlier event file's tail read late: it says nothing of a requeue
            self._last[key] = (s.wall_time, s.step)
            if last is not None and s.step <= last[1]:
                changed |= self._drop(last[0], s.wall_time, s.step)
        return changed

    @property
    def resumes(self) -> list[Resume]:
        """The requeues seen so far, in the order they happened."""
        return [Resume(int(step), attempt) for attempt, (_, _, step) in enumerate(self._requeues, start=2)]

    def _drop(self, since: float, until: float, step: int) -> bool:
        for requeue in self._requeues:
            if since <= requeue[1] and until >= requeue[0]:  # the spans overlap: the same requeue
                before = requeue[2]
                requeue[0], requeue[1], requeue[2] = max(requeue[0], since), min(requeue[1], until), min(before, step)
                return requeue[2] != before
        self._requeues.append([since, until, step])
        self._requeues.sort(key=lambda r: r[0])
        return True


def resumes_of(scalars: Iterable[Scalar]) -> list[Resume]:
    """Every resume point of a job's scalars (see ``ResumeFinder``)."""
    finder = ResumeFinder()
    finder.add(scalars)
    return finder.resumes
