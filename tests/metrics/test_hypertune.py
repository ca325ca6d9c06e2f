"""The hypertune file is rewritten whole on each report: entries are tracked by content."""

from __future__ import annotations

import json
import os

import pytest

from jupyter_gtc.metrics.hypertune import HYPERTUNE_RUN, HypertuneTail, parse_hypertune_line


@pytest.fixture
def reporter(tmp_path, monkeypatch):
    import hypertune

    path = tmp_path / "hypertune" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(path))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "7")
    return path, hypertune.HyperTune()


def test_each_report_is_returned_once_across_rewrites_and_the_100_entry_window(reporter):
    path, ht = reporter
    tail = HypertuneTail(path)
    assert tail.read_new() == []  # no file yet
    got = []
    for step in range(1, 251):
        ht.report_hyperparameter_tuning_metric("accuracy", step / 1000, global_step=step)
        if step % 7 == 0:
            got += tail.read_new()
    got += tail.read_new()
    assert [(s.tag, s.step, s.value, s.run) for s in got] == [
        ("accuracy", step, step / 1000, HYPERTUNE_RUN) for step in range(1, 251)]
    assert len(path.read_text().splitlines()) == 100  # the library kept only the last 100
    assert tail.read_new() == []


def test_a_rewrite_caught_midway_waits_for_its_last_line(reporter):
    path, ht = reporter
    for step in (1, 2):
        ht.report_hyperparameter_tuning_metric("loss", 1.0 / step, global_step=step)
    full = path.read_text()
    tail = HypertuneTail(path)
    path.write_text(full[:len(full) - 10])           # the writer is halfway through line 2
    assert [s.step for s in tail.read_new()] == [1]
    path.write_text("")                              # truncated for the next rewrite
    assert tail.read_new() == []
    path.write_text(full)
    assert [s.step for s in tail.read_new()] == [2]


def test_bad_lines_are_counted_not_raised(tmp_path, caplog):
    path = tmp_path / "m"
    good = json.dumps({"auc": "0.9", "global_step": "5", "timestamp": 1.5, "trial": "1"})
    path.write_text("not json\n" + good + "\n" + '{"auc": "high"}\n')
    tail = HypertuneTail(path)
    assert [(s.tag, s.step, s.wall_time, s.value) for s in tail.read_new()] == [("auc", 5, 1.5, 0.9)]
    assert tail.bad_lines == 2 and "bad line" in caplog.text


def test_a_step_no_event_file_could_hold_is_a_bad_line(tmp_path):
    path = tmp_path / "m"
    lines = [{"auc": "0.9", "global_step": step, "timestamp": 1.0} for step in ("inf", "1e30", "7")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tail = HypertuneTail(path)
    assert [s.step for s in tail.read_new()] == [7] and tail.bad_lines == 2


def test_an_unchanged_file_is_not_read_again(tmp_path):
    path = tmp_path / "m"
    path.write_text(json.dumps({"auc": "0.9", "timestamp": 1.0}) + "\n")
    old = 1_000_000_000
    os.utime(path, (old, old))
    tail = HypertuneTail(path)
    assert len(tail.read_new()) == 1
    path.chmod(0)  # reading it now would fail for a non-root user; a stat still works
    try:
        assert tail.read_new() == []
    finally:
        path.chmod(0o644)


def test_parse_line_reads_the_metric_key():
    line = '{"checkpoint_path": "", "global_step": "0", "timestamp": 2.0, "trial": "0", "x/y": "-1"}'
    (s,) = parse_hypertune_line(line)
    assert (s.tag, s.step, s.wall_time, s.value) == ("x/y", 0, 2.0, -1.0)


def test_a_last_line_without_its_newline_is_read_once_the_job_has_ended(tmp_path):
    path = tmp_path / "m"
    first = json.dumps({"auc": "0.5", "global_step": "1", "timestamp": 1.0})
    last = json.dumps({"auc": "0.9", "global_step": "2", "timestamp": 2.0})
    path.write_text(first + "\n" + last)  # a writer of its own: print(json.dumps(...), end="")
    old = 1_000_000_000
    os.utime(path, (old, old))  # not racy: an unchanged file is not read again
    tail = HypertuneTail(path)
    assert [s.step for s in tail.read_new()] == [1]  # mid-write, line 2 could be half of itself
    assert tail.read_new() == []
    assert [(s.step, s.value) for s in tail.read_new(final=True)] == [(2, 0.9)]  # the job ended: it is whole
    assert tail.read_new(final=True) == [] and tail.problem() is None


def test_why_a_file_gave_nothing_is_said(tmp_path):
    path = tmp_path / "m"
    tail = HypertuneTail(path)
    tail.read_new(final=True)
    assert tail.problem() == f"its hypertune file {path} was never written"
    path.write_text("")
    tail.read_new(final=True)
    assert tail.problem() == f"its hypertune file {path} is empty"
    path.write_text('{"auc": "0.9", "global_st')  # cut off: the job was killed mid-write
    assert tail.read_new() == []
    assert tail.problem() == f"its hypertune file {path} had no complete line (its only line has no newline)"
    assert tail.read_new(final=True) == []
    assert tail.problem().startswith(f"1 line(s) of its hypertune file {path} are no cloudml-hypertune JSON")


def test_the_metrics_reader_passes_final_on(tmp_path):
    from jupyter_gtc.metrics.reader import MetricsReader

    path = tmp_path / "hypertune.metrics"
    path.write_text(json.dumps({"auc": "0.7", "global_step": "3", "timestamp": 1.0}))
    reader = MetricsReader(tmp_path / "logs", path)
    assert reader.read_new() == [] and "no complete line" in reader.hypertune_problem
    assert [(s.tag, s.step, s.value) for s in reader.read_new(final=True)] == [("auc", 3, 0.7)]
    assert reader.hypertune_problem is None
