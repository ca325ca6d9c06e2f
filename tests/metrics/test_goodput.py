"""Goodput from a job's steps: what was kept, what was done twice, what went to restarts."""

from __future__ import annotations

import pytest

from jupyter_gtc.metrics.goodput import goodput_of


def test_an_uninterrupted_run_is_productive_but_for_its_start_and_end():
    points = [(step, 10.0 + step) for step in range(1, 11)]  # a step a second from t=11
    g = goodput_of(points, started=0.0, ended=25.0)
    assert (g.wall_s, g.productive_s, g.attempts, g.steps) == (25.0, 9.0, 1, 10)
    assert g.badput_s["startup"] == 11.0 and g.badput_s["finish"] == 5.0 and g.badput_s["recompute"] == 0


def test_a_requeued_run_counts_the_steps_past_its_checkpoint_as_recompute_and_the_gap_as_restart():
    first = [(step, float(step)) for step in range(1, 9)]            # steps 1..8 at t=1..8, then a crash
    second = [(step, 20.0 + step - 6) for step in range(6, 11)]      # resumed at 6 (checkpoint 5), t=20..24
    g = goodput_of(second + first, started=0.0, ended=24.0)
    assert g.attempts == 2 and g.steps == 10
    assert g.badput_s["recompute"] == pytest.approx(3.0)   # 5->6, 6->7, 7->8 were done again
    assert g.badput_s["restart"] == pytest.approx(12.0)    # t=8 to t=20
    assert g.productive_s == pytest.approx(4.0 + 4.0)      # 1->5 and 6->10
    assert g.productive_s + sum(g.badput_s.values()) == pytest.approx(g.wall_s)
    assert "goodput 33%" in g.describe() and "recompute 3.0 s" in g.describe()


def test_a_long_pause_within_an_attempt_is_a_stall_not_progress():
    points = [(1, 1.0), (2, 2.0), (3, 3.0), (4, 60.0), (5, 61.0)]
    g = goodput_of(points, started=0.0, ended=61.0)
    assert g.badput_s["stall"] == 57.0 and g.productive_s == 3.0


def test_a_job_without_steps_is_all_startup():
    g = goodput_of([], started=5.0, ended=15.0)
    assert (g.productive_s, g.badput_s["startup"], g.goodput) == (0.0, 10.0, 0.0)


def test_a_restart_right_after_the_last_step_is_found_from_the_restart_count():
    # Attempt 1 checkpointed at step 10 and was killed while holding there; attempt 2 went on at 11.
    points = [(s, float(s)) for s in range(1, 11)] + [(s, 30.0 + s - 11) for s in range(11, 21)]
    steps_only = goodput_of(points, started=0.0, ended=39.0)
    assert steps_only.attempts == 1 and steps_only.badput_s["stall"] == 20.0  # what the steps alone say
    g = goodput_of(points, started=0.0, ended=39.0, restarts=1)
    assert g.attempts == 2 and g.badput_s["restart"] == 20.0 and g.badput_s["stall"] == 0.0
    assert g.badput_s["recompute"] == 0.0 and g.productive_s == 18.0


def test_a_last_step_after_slurms_whole_second_end_still_adds_up():
    """Slurm's end time is whole seconds: a job's last step can be written after the second it
    names (CI: productive + badput came to 0.1 s more than the wall time)."""
    from jupyter_gtc.metrics.goodput import goodput_of

    g = goodput_of([(1, 102.0), (2, 103.0), (3, 113.6)], started=100.0, ended=113.0)
    assert g.productive_s + sum(g.badput_s.values()) == pytest.approx(g.wall_s)
    assert g.wall_s == pytest.approx(13.6) and g.badput_s["finish"] == 0.0
