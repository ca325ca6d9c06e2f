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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
