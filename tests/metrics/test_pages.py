"""A big log dir is read in pages of bounded size: memory stays well under the size of the
files, and every value still arrives once, in order."""

from __future__ import annotations

import tracemalloc

import pytest

from jupyter_gtc.metrics import MetricsReader
from jupyter_gtc.metrics.reader import PAGE_SCALARS

from .helpers import InOrder, points, scalar_events, write_event_file, write_torch

RUNS = {"": ("loss", "lr"), "eval": ("acc",)}
STEPS = {"": 30_000, "eval": 30_000}   # 90,000 scalars, ~4 MB


@pytest.fixture(scope="module")
def big_log_dir(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("big")
    size = 0
    for run, tags in RUNS.items():
        size += write_event_file(log_dir / run / "events.out.tfevents.1700000000.host",
                                 scalar_events(tags, STEPS[run]))
    return log_dir, size


def test_a_big_log_dir_is_read_in_pages_in_little_memory_with_every_value_in_order(big_log_dir):
    log_dir, size = big_log_dir
    total = sum(len(RUNS[run]) * STEPS[run] for run in RUNS)
    reader = MetricsReader(log_dir)
    check = InOrder(RUNS)
    sizes = []
    import jupyter_gtc.metrics.bulk  # noqa: F401  numpy's import: a fixed cost, not the pages'
    tracemalloc.start()
    try:
        for page in reader.pages(limit=2_000):
            sizes.append(len(page))
            check.take(page)
            del page
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert check.bad == [] and check.next_step == {(run, tag): STEPS[run] for run in RUNS for tag in RUNS[run]}
    assert sum(sizes) == total and len(sizes) >= total // 2_000 and max(sizes) <= 2_000
    # Read whole, these scalars would take ~190 bytes each (~17 MB, 4x the files); a page at
    # a time, the reader holds a chunk of a file and a page.
    assert peak < size / 2, f"peak {peak / 1e6:.1f} MB for {size / 1e6:.1f} MB of event files"
    assert reader.caught_up and reader.read_new() == [] and reader.corrupt_records == 0


def test_the_default_page_is_bounded_and_a_call_without_a_limit_reads_everything(big_log_dir):
    log_dir, _ = big_log_dir
    reader = MetricsReader(log_dir)
    first = reader.read_new()
    assert len(first) == PAGE_SCALARS and not reader.caught_up
    rest = reader.read_new(limit=None)
    assert len(first) + len(rest) == 90_000 and reader.caught_up


def test_events_of_many_values_fill_a_page_to_its_limit_not_past_it(tmp_path):
    """TF1's merge_all writes every tag of a step in one event: a page stops inside a
    batch of records, and the next one goes on from the first event it did not take."""
    tags = tuple(f"layer_{i}/norm" for i in range(30))
    write_event_file(tmp_path / "events.out.tfevents.1.h", scalar_events(tags, 2_000, values_per_event=30))
    reader = MetricsReader(tmp_path)
    check = InOrder({"": tags})
    sizes = []
    for page in reader.pages(limit=1_000):
        sizes.append(len(page))
        check.take(page)
    assert check.bad == [] and set(check.next_step.values()) == {2_000}
    # A page stops before the event that would start with it full: at most 29 values over.
    assert max(sizes) < 1_000 + 30 and sum(sizes) == 60_000 and len(sizes) >= 60_000 // 1_030


def test_pages_stop_at_a_corrupt_record_in_a_batch_without_losing_or_repeating_values(tmp_path):
    tags = tuple(f"m{i}" for i in range(10))
    path = tmp_path / "events.out.tfevents.1.h"
    write_event_file(path, scalar_events(tags, 500, values_per_event=10))
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # one event's values are lost, no others
    path.write_bytes(bytes(data))
    reader = MetricsReader(tmp_path)
    seen = [(s.tag, s.step) for page in reader.pages(limit=25) for s in page]
    assert len(seen) == len(set(seen)) == 4990 and reader.corrupt_records == 1


@pytest.mark.parametrize("limit", [1, 7])
def test_small_pages_of_a_file_being_written_take_each_point_once(tmp_path, limit):
    source = write_torch(tmp_path / "src", points(200))
    data = source.read_bytes()
    (tmp_path / "log").mkdir()
    dest = tmp_path / "log" / source.name
    reader = MetricsReader(tmp_path / "log")
    got = []
    with open(dest, "wb") as f:
        for start in range(0, len(data), 333):  # cuts records; a page ends inside the new bytes
            f.write(data[start:start + 333])
            f.flush()
            page = reader.read_new(limit=limit)
            assert len(page) <= limit
            got += page
    for page in reader.pages(limit=limit):
        got += page
    assert [(s.tag, s.step, s.value) for s in got] == points(200)


def test_a_jobs_feed_catches_up_a_page_at_a_time_for_subscribers_and_the_cursor(big_log_dir):
    from jupyter_gtc.services.metrics import JobMetrics

    log_dir, _ = big_log_dir
    total = sum(len(RUNS[run]) * STEPS[run] for run in RUNS)
    feed = JobMetrics(log_dir)
    early, sizes = InOrder(RUNS), []
    feed.subscribe(lambda page: (sizes.append(len(page)), early.take(page)))
    # What the REST route asks for `since=0`: enough for one answer, not the whole log dir.
    first = feed.refresh(until=10)
    assert 10 <= len(first) <= PAGE_SCALARS < total
    assert len(feed.refresh()) == total - len(first) and len(feed.refresh()) == 0
    assert early.bad == [] and sum(sizes) == total and max(sizes) <= PAGE_SCALARS
    late = InOrder(RUNS)
    feed.subscribe(late.take)  # a plot opened after the catch-up gets the backlog
    cursor, since = InOrder(RUNS), 0
    while chunk := feed.all()[since:since + 7_000]:  # the REST route's `metrics?since=N`
        cursor.take(chunk)
        since += len(chunk)
    done = {(run, tag): STEPS[run] for run in RUNS for tag in RUNS[run]}
    for check in (early, late, cursor):
        assert check.bad == [] and check.next_step == done
    assert since == total


def test_a_catch_up_walks_the_log_dir_once_and_a_run_made_meanwhile_comes_after(tmp_path):
    """A first read of a big log dir is many pages: the later ones go on through the files the
    first one found, without looking at the folders again (over SSH each look is a round
    trip). A run that appears during the catch-up is read by the next poll, each point once."""
    for run in ("a", "b"):
        write_torch(tmp_path / run, points(1500))
    reader = MetricsReader(tmp_path)
    got = reader.read_new(limit=1000)
    assert reader.last_poll.dirs_listed == 3 and not reader.caught_up
    write_torch(tmp_path / "c", points(10))
    while not reader.caught_up:
        got += reader.read_new(limit=1000)
        assert reader.last_poll.dirs_listed == reader.last_poll.dirs_statted == 0
    assert {s.run for s in got} == {"a", "b"}
    got += reader.read_new(limit=1000)  # a poll: the walk again, which finds the new run
    assert reader.last_poll.dirs_listed >= 1
    assert sorted((s.run, s.tag, s.step) for s in got) == sorted(
        (run, tag, step) for run, n in (("a", 1500), ("b", 1500), ("c", 10)) for tag, step, _ in points(n))
