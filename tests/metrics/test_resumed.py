"""Each step once after a resume (metrics/resumed.py): TensorBoard's rule, checked against
TensorBoard's own loader on event files written as a requeued job writes them."""

from __future__ import annotations

from jupyter_gtc.metrics import Scalar, read_metrics
from jupyter_gtc.metrics.resumed import kept_mask, latest_attempts


def test_a_point_is_kept_when_no_later_point_redid_its_step():
    assert kept_mask([]) == []
    assert kept_mask([1, 2, 3]) == [True, True, True]
    # steps 1-8, killed; resumed from the checkpoint at 5: 6-8 were redone, then 9, 10
    assert kept_mask([1, 2, 3, 4, 5, 6, 7, 8, 6, 7, 8, 9, 10]) == [True] * 5 + [False] * 3 + [True] * 5
    # a second fault before the new attempt reached the old one's last step
    assert kept_mask([1, 2, 3, 4, 2, 3, 1, 2, 3, 4, 5]) == [False] * 4 + [False] * 2 + [True] * 5
    # a step written twice by one attempt: the later value
    assert kept_mask([1, 2, 2, 3]) == [True, False, True, True]


def test_each_series_is_judged_alone_and_the_order_is_kept():
    def s(tag, step, at, run=""):
        return Scalar(tag, step, at, float(at), run)
    read = [s("loss", 1, 1), s("lr", 1, 1), s("loss", 2, 2), s("loss", 3, 3), s("loss", 2, 10),
            s("lr", 2, 10), s("loss", 2, 1, "eval"), s("loss", 3, 11)]
    assert latest_attempts(read) == [read[0], read[1], read[4], read[5], read[6], read[7]]
    # a later read may bring an earlier file's tail: the written order (wall time) decides
    late_tail = [s("loss", 1, 1), s("loss", 2, 10), s("loss", 2, 2)]
    assert latest_attempts(late_tail) == [late_tail[0], late_tail[1]]


def test_the_same_points_as_tensorboards_loader(tmp_path):
    """Two attempts as the recipes write them (the second with ``purge_step``): what TensorBoard
    shows is what we keep. A third as a plain script writes it (no marker): each step once still,
    where TensorBoard's loader shows the redone steps twice."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    def attempt(first_step: int, last: int, purge_step: int | None) -> None:
        writer = SummaryWriter(str(tmp_path), purge_step=purge_step)
        for step in range(first_step, last + 1):
            writer.add_scalar("train/loss", 100.0 * first_step + step, step)
        writer.close()

    def ours() -> list[tuple[int, float]]:
        return [(s.step, s.value) for s in latest_attempts(read_metrics(tmp_path)) if s.tag == "train/loss"]

    attempt(1, 8, None)
    attempt(6, 9, 6)
    loaded = EventAccumulator(str(tmp_path))
    loaded.Reload()
    assert ours() == [(e.step, e.value) for e in loaded.Scalars("train/loss")] == [
        (step, 100.0 + step) for step in range(1, 6)] + [(step, 600.0 + step) for step in range(6, 10)]
    attempt(8, 12, None)
    assert ours() == [(step, 100.0 + step) for step in range(1, 6)] + [(step, 600.0 + step) for step in (6, 7)] + [
        (step, 800.0 + step) for step in range(8, 13)]


def test_resume_points_are_the_lowest_step_each_requeue_came_back_at():
    """Two requeues (checkpoints at 2 and 13). loss is logged every step and comes back at 3
    and 14; lr every 5 steps, at 5 and 15. Each requeue is marked once, at loss's step."""
    from jupyter_gtc.metrics.resumed import Resume, resumes_of

    def attempt(began, steps):
        return ([Scalar("loss", s, began + i, 1.0) for i, s in enumerate(steps)]
                + [Scalar("lr", s, began + i, 0.1) for i, s in enumerate(steps) if s % 5 == 0])

    scalars = attempt(0, range(1, 13)) + attempt(100, range(3, 19)) + attempt(200, range(14, 30))
    assert resumes_of(scalars) == [Resume(3, 2), Resume(14, 3)]
    lr_first = [s for s in scalars if s.tag == "lr"] + [s for s in scalars if s.tag == "loss"]
    assert resumes_of(lr_first) == [Resume(3, 2), Resume(14, 3)]  # read in another order: the same
    assert resumes_of(attempt(0, range(1, 30))) == []  # never requeued
    # A series that went on counting across a requeue says nothing: no resume from the steps alone.
    assert resumes_of(attempt(0, range(1, 9)) + attempt(100, range(9, 20))) == []
