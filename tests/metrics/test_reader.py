"""MetricsReader against files that real writers are still writing."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from collections import Counter

from jupyter_gtc.metrics import HYPERTUNE_RUN, MetricsReader
from jupyter_gtc.metrics.events import decode_events
from jupyter_gtc.metrics.records import parse_records

from .helpers import as_points, event_file, file_bytes, points, tf2_event, write_torch


def test_every_point_once_while_writers_write_and_flush(tmp_path):
    """Two writer threads (one starts a second run midway) against a polling reader."""
    from torch.utils.tensorboard import SummaryWriter

    expected: list[tuple[str, str, int, float]] = []
    # The first writer stops twice mid-file until the reader has found new points: two reads
    # that caught a file while it grew, however the threads are scheduled.
    caught = [threading.Event(), threading.Event()]

    def write(run: str, n: int, seed: int, pauses: tuple[int, ...] = ()):
        rng = random.Random(seed)
        w = SummaryWriter(str(tmp_path / run), max_queue=rng.randint(1, 50), flush_secs=1)
        for step in range(n):
            if step in pauses:
                w.flush()
                caught[pauses.index(step)].wait(60)
            for tag in ("loss", "lr"):
                value = seed * 10_000 + step * 0.25  # each writer's points differ
                w.add_scalar(tag, value, step)
                expected.append((run, tag, step, value))
            if rng.random() < 0.05:
                w.flush()
                time.sleep(0.001)
        w.close()

    def main_writer():
        write("", 1500, 1, pauses=(500, 1000))
        second = threading.Thread(target=write, args=("eval/run2", 800, 2))
        second.start()
        write("", 500, 3)          # a restart: a second file in the same run
        second.join()

    reader = MetricsReader(tmp_path)
    writer = threading.Thread(target=main_writer)
    writer.start()
    got, reads_mid_write = [], 0
    while writer.is_alive():
        new = reader.read_new()
        reads_mid_write += bool(new)
        if new and reads_mid_write <= len(caught):
            caught[reads_mid_write - 1].set()
        got += new
        time.sleep(0.002)
    got += reader.read_new()
    seen = Counter((s.run, s.tag, s.step, s.value) for s in got)
    assert max(seen.values()) == 1, "a point was read twice"
    assert seen == Counter(expected), "a point was lost"
    # What makes this test one of concurrency: reads that found points while files grew.
    assert reads_mid_write >= 2, "the reader never caught the writers mid-file"
    assert reader.corrupt_records == 0


def test_a_cut_record_is_read_once_the_writer_completes_it(tmp_path):
    source = write_torch(tmp_path / "src", points(300))
    data = source.read_bytes()
    boundaries = set()
    pos = 0
    for record in parse_records(data).records:
        pos += 16 + len(record)
        boundaries.add(pos)
    dest_dir = tmp_path / "log"
    dest_dir.mkdir()
    dest = dest_dir / source.name
    reader = MetricsReader(dest_dir)
    rng = random.Random(0)
    got, written, cuts = [], 0, 0
    with open(dest, "wb") as f:
        while written < len(data):
            n = rng.randint(1, 90)
            f.write(data[written:written + n])
            f.flush()
            written += n
            cuts += written not in boundaries and written < len(data)
            new = reader.read_new()
            got += new
            # Everything wholly written is read; nothing past the cut is.
            complete = max([b for b in boundaries if b <= written], default=0)
            assert len(got) == len(decode_events(parse_records(data[:complete]).records))
    assert cuts > 100
    assert as_points(got) == points(300)


def test_a_corrupt_record_in_the_middle_is_skipped_and_counted(tmp_path, caplog):
    path = write_torch(tmp_path, points(100))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    reader = MetricsReader(tmp_path)
    got = reader.read_new()
    assert len(got) == 199 and len(set(as_points(got))) == 199
    assert set(as_points(got)) < set(points(100))
    assert reader.corrupt_records == 1 and reader.last_poll.corrupt_records == 1
    assert "skipping" in caplog.text


def age(path, t=1_700_000_000):
    """Make a folder look long untouched, so its listing may be reused."""
    os.utime(path, (t, t))


def test_a_run_folder_that_appears_later_is_picked_up(tmp_path):
    write_torch(tmp_path / "a", points(10))
    age(tmp_path), age(tmp_path / "a")
    reader = MetricsReader(tmp_path, full_rescan_s=3600)
    assert {s.run for s in reader.read_new()} == {"a"}
    assert reader.read_new() == []
    # An idle poll: one stat per folder and per file, nothing listed, nothing read.
    assert (reader.last_poll.dirs_listed, reader.last_poll.dirs_statted) == (0, 2)
    assert (reader.last_poll.files_statted, reader.last_poll.bytes_read) == (1, 0)
    write_torch(tmp_path / "b" / "c", points(5))
    got = reader.read_new()
    assert {s.run for s in got} == {"b/c"} and len(got) == 10


def test_a_listing_reused_in_error_is_fixed_by_the_next_full_walk(tmp_path):
    (tmp_path / "a").mkdir()
    age(tmp_path / "a")
    reader = MetricsReader(tmp_path, full_rescan_s=3600)
    reader.read_new()
    write_torch(tmp_path / "a", points(5))
    age(tmp_path / "a")   # a filesystem whose folder mtime did not move
    assert reader.read_new() == []
    reader.full_rescan_s = 0
    assert len(reader.read_new()) == 10


def test_tensor_tags_stay_scalars_across_files_of_a_run(tmp_path):
    # TF2 writes the scalar metadata once per writer; a restart may append elsewhere.
    (tmp_path / "events.out.tfevents.1.h").write_bytes(
        file_bytes([tf2_event("loss", 0, 1.0, metadata=True)]))
    reader = MetricsReader(tmp_path)
    assert len(reader.read_new()) == 1
    (tmp_path / "events.out.tfevents.2.h").write_bytes(
        file_bytes([tf2_event("loss", 1, 2.0, metadata=False)]))
    assert as_points(reader.read_new()) == [("loss", 1, 2.0)]


def test_a_shrunk_or_replaced_file_is_read_again_from_the_start(tmp_path):
    path = write_torch(tmp_path / "src1", points(100))
    log = tmp_path / "log"
    log.mkdir()
    target = log / "events.out.tfevents.1.host"
    shutil.copy(path, target)
    reader = MetricsReader(log)
    assert len(reader.read_new()) == 200
    # Shrunk: a job started again and truncated its file.
    shutil.copy(write_torch(tmp_path / "src2", points(10, tags=("x",))), target)
    assert as_points(reader.read_new()) == points(10, tags=("x",))
    # Replaced by a different, longer file: the bytes before our offset changed.
    other = write_torch(tmp_path / "src3", points(300, tags=("y",)))
    shutil.copy(other, log / "tmp")
    os.replace(log / "tmp", target)
    assert as_points(reader.read_new()) == points(300, tags=("y",))
    # Replaced by a longer copy of the same file (a sync tool): only the new points.
    data = other.read_bytes()
    (log / "tmp").write_bytes(data + data[len(file_bytes([])):])  # the records again
    os.replace(log / "tmp", target)
    assert as_points(reader.read_new()) == points(300, tags=("y",))


def test_read_all_leaves_the_incremental_place_alone(tmp_path):
    write_torch(tmp_path, points(20))
    reader = MetricsReader(tmp_path)
    assert len(reader.read_new()) == 40
    assert len(reader.read_all()) == 40
    assert reader.read_new() == []


def test_scalars_of_one_call_are_ordered_by_wall_time(tmp_path):
    events_a = [tf2_event("a", s, 1.0, metadata=True, wall_time=100.0 + 2 * s) for s in range(5)]
    events_b = [tf2_event("b", s, 1.0, metadata=True, wall_time=101.0 + 2 * s) for s in range(5)]
    for run, events in (("r1", events_a), ("r2", events_b)):
        (tmp_path / run).mkdir()
        (tmp_path / run / "events.out.tfevents.1.h").write_bytes(file_bytes(events))
    got = MetricsReader(tmp_path).read_new()
    assert [s.wall_time for s in got] == sorted(s.wall_time for s in got)
    assert [s.tag for s in got] == ["a", "b"] * 5


def test_a_log_dir_that_does_not_exist_yet_reads_nothing(tmp_path):
    reader = MetricsReader(tmp_path / "not-yet", tmp_path / "not-yet" / "hp.metrics")
    assert reader.read_new() == []
    write_torch(tmp_path / "not-yet", points(3))
    assert len(reader.read_new()) == 6


def test_hypertune_entries_come_with_the_event_scalars(tmp_path, monkeypatch):
    import hypertune

    metric_file = tmp_path / "hp" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metric_file))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "3")
    write_torch(tmp_path / "logs", points(2))
    reader = MetricsReader(tmp_path / "logs", metric_file)
    ht = hypertune.HyperTune()
    ht.report_hyperparameter_tuning_metric("accuracy", 0.5, global_step=100)
    got = reader.read_new()
    hp = [s for s in got if s.run == HYPERTUNE_RUN]
    assert [(s.tag, s.step, s.value) for s in hp] == [("accuracy", 100, 0.5)]
    assert len(got) == 5
    assert reader.read_new() == []
