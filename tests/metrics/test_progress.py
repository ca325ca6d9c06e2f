"""Progress from scalars and from tqdm lines."""

from jupyter_gtc.metrics import Scalar
from jupyter_gtc.metrics.progress import format_seconds, from_log, from_scalars


def test_progress_from_a_total_steps_scalar():
    scalars = [Scalar("progress/total_steps", 0, 100.0, 1000)] + [
        Scalar("train/loss", step, 100.0 + step / 10, 1.0 / (step + 1)) for step in range(0, 201, 10)]
    p = from_scalars(scalars)
    assert (p.done, p.total) == (200, 1000)
    assert abs(p.rate - 10.0) < 1e-9 and abs(p.eta_seconds - 80.0) < 1e-9
    assert p.describe() == "200/1000 steps (20%), 10.00 steps/s, ETA 1:20"


def test_no_total_no_progress():
    assert from_scalars([Scalar("train/loss", 1, 1.0, 0.5)]) is None


def test_progress_from_the_last_tqdm_line():
    log = ("epoch 1\n 10%|█         | 10/100 [00:02<00:18,  5.00it/s]\r"
           " 45%|████▌     | 45/100 [00:09<00:11,  4.95it/s]\rdone?\n")
    p = from_log(log)
    assert (p.done, p.total, p.rate, p.eta_seconds) == (45, 100, 4.95, 11.0)


def test_slow_tqdm_and_unknown_eta():
    p = from_log("  3/10 [01:30<?, 30.00s/it]")
    assert p.rate == 1 / 30 and p.eta_seconds is None
    assert from_log("no progress here") is None
    assert format_seconds(3725) == "1:02:05"
