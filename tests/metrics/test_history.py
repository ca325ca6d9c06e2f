"""ScalarHistory: a job's scalars kept at 28 bytes each, most of them in a temporary file."""

from __future__ import annotations

import gc
import math
import random
import tracemalloc

from jupyter_gtc.metrics import Scalar
from jupyter_gtc.metrics.history import BLOCK_ROWS, ROW_BYTES, ScalarHistory
from jupyter_gtc.metrics.progress import TOTAL_STEPS_TAG, from_scalars


def scalars(n: int, start: int = 0, runs=("", "eval")) -> list[Scalar]:
    return [Scalar(f"tag_{i % 7}", i, 1.7e9 + i / 8, i * 0.5, runs[i % len(runs)]) for i in range(start, start + n)]


def same(a: list[Scalar], b: list[Scalar]) -> bool:
    """Equal, NaN equal to NaN (Scalar's own == says NaN != NaN)."""
    return len(a) == len(b) and all(
        (x.tag, x.step, x.wall_time, x.run) == (y.tag, y.step, y.wall_time, y.run)
        and (x.value == y.value or (math.isnan(x.value) and math.isnan(y.value))) for x, y in zip(a, b))


def test_a_long_history_holds_at_most_a_block_in_memory_and_gives_every_scalar_back():
    n, page = 150_000, 25_000
    gc.collect()
    tracemalloc.start()
    try:
        history = ScalarHistory()
        for start in range(0, n, page):
            history.extend(scalars(page, start))  # a reader's page, handed on and dropped
        kept, _ = tracemalloc.get_traced_memory()
        as_a_list = scalars(n)
        list_size = tracemalloc.get_traced_memory()[0] - kept
    finally:
        tracemalloc.stop()
    # 150,000 Scalars in a list: ~25 MB; the history keeps under one block of rows (~2 MB).
    assert kept < BLOCK_ROWS * ROW_BYTES + (1 << 20) and kept < list_size / 20, (kept, list_size)
    view = history.view()
    assert len(view) == n
    walked = 0
    for got in view.pages(40_000):  # as a late subscriber gets its backlog
        assert same(got, as_a_list[walked:walked + len(got)])
        walked += len(got)
    assert walked == n


def test_a_view_is_a_snapshot_that_indexes_and_slices_like_a_list():
    rng = random.Random(11)
    history = ScalarHistory(block_rows=97)  # many blocks in the file, and rows in memory
    expected: list[Scalar] = []
    specials = [Scalar("loss", -(1 << 63), 0.0, float("nan"), "a/b"), Scalar("loss", (1 << 63) - 1, -1.5, float("inf")),
                Scalar("ünïcode/tag", 0, 1e300, -0.0, "runs/ü")]
    for _ in range(40):
        page = scalars(rng.randint(0, 60), len(expected)) + rng.sample(specials, rng.randint(0, 2))
        history.extend(page)
        expected += page
    view = history.view()
    history.extend(scalars(500, len(expected)))  # after the view was taken
    assert len(view) == len(expected) and same(list(view), expected)
    for _ in range(300):
        a, b = sorted(rng.randint(-len(expected) - 5, len(expected) + 5) for _ in range(2))
        step = rng.choice([1, 1, 2, 3, -1, -4])
        assert same(view[a:b:step], expected[a:b:step]), (a, b, step)
        i = rng.randint(-len(expected), len(expected) - 1)
        assert same([view[i]], [expected[i]])
    assert view[len(expected):] == [] and history.view(10, 5)[:] == []
    assert same(history.view(100, 400)[:], history.view()[100:400])


def test_progress_of_a_history_is_the_progress_of_its_scalars():
    history = ScalarHistory(block_rows=50)
    everything: list[Scalar] = []
    rng = random.Random(3)
    for step in range(0, 400):
        page = [Scalar("train/loss", step, 1000.0 + step / 4 + rng.random() / 100, 1.0 / (step + 1)),
                Scalar("eval/acc", step // 2, 1000.0 + step / 4, 0.5)]
        if step % 97 == 0:
            page.append(Scalar(TOTAL_STEPS_TAG, step, 1000.0, 1000 + step))
        history.extend(page)
        everything += page
        if step % 41 == 0:
            assert from_scalars(history.view()) == from_scalars(everything)
    assert from_scalars(history.view()) == from_scalars(everything)
    assert from_scalars(history.view()).done == 399
    assert from_scalars(history.view(1)) == from_scalars(everything[1:])  # not from the start: read
    assert from_scalars(ScalarHistory().view()) is None
