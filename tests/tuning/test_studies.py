"""Studies on the real local cluster: every trial a Slurm job running objective.py, which
reports through the hypertune file. The test thread only waits, as a notebook would."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from itertools import product
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecErrors, StudyExists
from jupyter_gtc.spec.study import format_flag
from jupyter_gtc.state import default_home
from tests.conftest import sleep_until
from tests.tuning.conftest import short_spec, trial_script

pytestmark = pytest.mark.slurm


def args_of(trial) -> dict:
    """What the trial's job itself recorded: the flags it got, its environment, start and end."""
    return json.loads((Path(trial.job_dir) / "args.json").read_text())


def test_a_study_runs_to_completion_with_two_trials_at_a_time(cluster):
    # Each trial waits until two have started: with two at a time they overlap, whatever the load.
    spec = short_spec("{x: {double: [0, 1]}, y: {double: [-1, 1]}}", trials=6, parallel=2, extra="seed: 7\n",
                      script=trial_script("--delay=0.2", env={"OBJECTIVE_MEET": "2"}))
    study = api.create_study(cluster, spec, name="quadratic")
    assert study.driven and study.sampler.startswith("gp: ")
    study.wait(timeout=90)
    assert (study.state, study.reason) == ("SUCCEEDED", None)
    trials = study.snapshot().trials
    assert [t.state for t in trials] == ["COMPLETE"] * 6
    # The objective is (x - 0.3)^2 + (y - 0.3)^2 + noise, reported at steps 1..3 as value * (1 + 1/step).
    for t in trials:
        expected = (t.params["x"] - 0.3) ** 2 + (t.params["y"] - 0.3) ** 2
        assert t.step == 3 and expected * 4 / 3 <= t.value <= (expected + 0.01) * 4 / 3 + 1e-9
        ran = args_of(t)
        assert ran["flags"] == ["--delay=0.2", *(format_flag(k, v) for k, v in t.params.items())]
        assert all(float(f.split("=")[1]) == t.params[f[2:].split("=")[0]] for f in ran["flags"][1:])
        assert ran["trial"] == int(t.trial_id) and ran["metric_file"] == f"{t.job_dir}/hypertune.metrics"
        assert ran["aip_model_dir"] == f"{t.job_dir}/model/"
        assert Path(t.job_dir) == default_home() / "jobs" / cluster / "studies" / "quadratic" / t.trial_id
        job = api.get_job(t.job_id, cluster)
        assert (job.state, job.name) == ("COMPLETED", f"quadratic-{t.trial_id}")  # <study>-<trial id>
    # Never more than two at once, and two did overlap.
    spans = [(args_of(t)["start"], args_of(t)["end"]) for t in trials]
    overlap = max(sum(s <= start < e for s, e in spans) for start, _ in spans)
    assert overlap == 2
    best = study.best_trial
    assert best.value == min(t.value for t in trials)
    table = study.trials
    assert list(table.index) == [1, 2, 3, 4, 5, 6] and table.loc[int(best.trial_id), "value"] == best.value
    assert {"x", "y", "state", "latest", "value", "stopped_early", "job_id"} <= set(table.columns)
    with pytest.raises(StudyExists):
        api.create_study(cluster, spec, name="quadratic")


def test_grid_covers_its_grid_exactly(cluster):
    spec = short_spec("{n: {integer: [1, 3]}, opt: {categorical: [adam, sgd]}}", trials=20, parallel=2,
                      extra="algorithm: grid\n")
    study = api.create_study(cluster, spec, name="grid").wait(timeout=90)
    assert study.state == "SUCCEEDED"
    points = [(t.params["n"], t.params["opt"]) for t in study.snapshot().trials]
    assert sorted(points) == sorted(product([1, 2, 3], ["adam", "sgd"]))  # 6 trials, not 20


def test_conditional_parameters_appear_only_under_their_parent_value(cluster):
    hostile = "a'; touch /tmp/gtc-pwned; echo '"
    spec = short_spec(
        "{optimizer: {categorical: [adamw, sgd], children: {sgd: {momentum: {double: [0.0, 0.99]}}}},"
        f" tag: {{categorical: [{json.dumps(hostile)}, plain]}}}}", trials=8, parallel=2,
        extra="algorithm: random\nseed: 3\n")
    study = api.create_study(cluster, spec, name="conditional").wait(timeout=90)
    trials = study.snapshot().trials
    assert study.state == "SUCCEEDED" and {t.params["optimizer"] for t in trials} == {"adamw", "sgd"}
    for t in trials:
        flags = args_of(t)["flags"]
        assert ("momentum" in t.params) == (t.params["optimizer"] == "sgd")
        assert any(f.startswith("--momentum=") for f in flags) == (t.params["optimizer"] == "sgd")
        assert f"--tag={t.params['tag']}" in flags  # the hostile value arrives as one argument
    assert hostile in {t.params["tag"] for t in trials} and not Path("/tmp/gtc-pwned").exists()
    assert study.trials["momentum"].isna().sum() == sum(t.params["optimizer"] == "adamw" for t in trials)


def test_early_stopping_cancels_a_bad_trial_in_slurm(cluster):
    # Trials 1-3 are good and quick; trials 4 and 5 report a high loss every 0.5 s for 30 s.
    spec = short_spec("{x: {double: [0, 1]}}", trials=5, parallel=1, extra="early_stopping: median\n",
                      script=trial_script(env={"OBJECTIVE_BAD_AFTER": "3"}))
    study = api.create_study(cluster, spec, name="early").wait(timeout=300)
    trials = study.snapshot().trials
    assert [t.state for t in trials] == ["COMPLETE"] * 3 + ["PRUNED"] * 2
    for t in trials[3:]:
        assert t.stopped_early and t.reason == "median rule" and t.latest >= 100
        job = api.get_job(t.job_id, cluster)
        assert sleep_until(lambda job=job: job.finished, 60) and job.state == "CANCELLED"
        # Cut short: it never wrote its end, nor got through its 60 reports.
        assert not (Path(t.job_dir) / "args.json").exists()
        assert len((Path(t.job_dir) / "hypertune.metrics").read_text().splitlines()) < 60
    assert study.trials["stopped_early"].tolist() == [False] * 3 + [True] * 2


def test_the_failure_budget_stops_the_study(cluster):
    spec = short_spec("{x: {double: [0, 1]}}", trials=10, parallel=1, extra="max_failed_trials: 2\n",
                      script=trial_script(env={"OBJECTIVE_EXIT": "3"}))
    study = api.create_study(cluster, spec, name="failing").wait(timeout=60)
    assert study.state == "FAILED" and study.reason.startswith("stopped: 2 trials failed, reaching "
                                                                "max_failed_trial_count=2; the first failure, trial 1")
    trials = study.snapshot().trials
    assert [t.state for t in trials] == ["FAIL", "FAIL"]
    assert trials[0].reason.startswith(f"job {trials[0].job_id} FAILED (exit code 3)")


def test_a_trial_that_reports_nothing_fails_and_says_why(cluster):
    spec = short_spec("{x: {double: [0, 1]}}", trials=1, parallel=1, extra="max_failed_trials: 1\n",
                      script='#!/bin/bash\necho "got $@"\n')
    study = api.create_study(cluster, spec, name="silent").wait(timeout=60)
    [trial] = study.snapshot().trials
    assert trial.state == "FAIL" and trial.reason == (f"job {trial.job_id} reported no val_loss: its hypertune "
                                                      f"file {trial.job_dir}/hypertune.metrics was never written")


def test_a_last_hypertune_line_without_its_newline_is_the_trials_value(cluster):
    # A trial's own writer (not cloudml-hypertune) that ends its file without a newline; and one
    # killed mid-write, whose trial says why it reported nothing.
    whole = '{"val_loss": "0.25", "global_step": "1"}'
    script = f"#!/bin/bash\necho \"got $@\"\nprintf '%s' '{whole}' > \"$CLOUD_ML_HP_METRIC_FILE\"\n"
    spec = short_spec("{x: {double: [0, 1]}}", trials=1, parallel=1, script=script)
    [trial] = api.create_study(cluster, spec, name="unterminated").wait(timeout=60).snapshot().trials
    assert (trial.state, trial.value) == ("COMPLETE", 0.25), trial.reason

    cut = script.replace(whole, whole[:20])
    spec = short_spec("{x: {double: [0, 1]}}", trials=1, parallel=1, script=cut, extra="max_failed_trials: 1\n")
    [trial] = api.create_study(cluster, spec, name="cutoff").wait(timeout=60).snapshot().trials
    assert trial.state == "FAIL" and trial.reason.startswith(
        f"job {trial.job_id} reported no val_loss: 1 line(s) of its hypertune file {trial.job_dir}/hypertune.metrics "
        f"are no cloudml-hypertune JSON"), trial.reason


def test_stop_trial_and_stop_study(cluster):
    slow = trial_script("--steps=100000", "--delay=0.2")  # only the stops end these trials
    spec = short_spec("{x: {double: [0, 1]}}", trials=6, parallel=2, script=slow)
    study = api.create_study(cluster, spec, name="stopping")
    assert sleep_until(lambda: study.snapshot().counts["RUNNING"] == 2 and
                       all(t.latest is not None for t in study.snapshot().trials), 30)
    study.stop_trial(1)
    assert sleep_until(lambda: study.snapshot().trials[0].state == "PRUNED", 10)
    first = study.snapshot().trials[0]
    assert first.reason == "stopped by the user" and first.value == first.latest
    assert sleep_until(lambda: api.get_job(first.job_id, cluster).state == "CANCELLED", 10)
    assert sleep_until(lambda: study.snapshot().counts["RUNNING"] == 2, 10)  # trial 3 took its slot
    study.stop()
    assert (study.state, study.driven) == ("STOPPED", False)
    trials = study.snapshot().trials
    assert [t.state for t in trials] == ["PRUNED"] * 3
    assert {t.reason for t in trials[1:]} == {"study stopped: stopped by the user"}


def test_resume_after_the_driving_process_dies_loses_no_finished_trial(cluster, tmp_path):
    """A process drives the study and is killed (SIGKILL: no cleanup); this one watches it,
    then resumes it: finished trials stay as they were, running ones are followed again."""
    spec = short_spec("{x: {double: [0, 1]}}", trials=8, parallel=2, extra="algorithm: random\n",
                      script=trial_script("--steps=4", "--delay=0.4"))
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    driver = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import json, time
        from jupyter_gtc import api
        api.create_study({cluster!r}, json.load(open({str(tmp_path / 'spec.json')!r})), name="resumable")
        time.sleep(600)
        """)], env={**os.environ}, cwd=Path(__file__).parents[2])
    try:
        assert sleep_until(lambda: "resumable" in [s.name for s in api.list_studies()], 30)
        watched = api.get_study("resumable")
        # A second process sees the study live: trials finish while the other one drives, and
        # a subscriber here (a panel) gets snapshots from this process's feed as they change.
        seen = []
        unsubscribe = watched.subscribe(seen.append)
        assert sleep_until(lambda: watched.snapshot().counts["COMPLETE"] >= 2
                           and watched.snapshot().counts["RUNNING"] == 2, 60)
        assert watched.driven
        assert sleep_until(lambda: seen and seen[-1].counts["COMPLETE"] >= 2, 60) and seen[-1].driven
        assert len(seen) >= 2
        unsubscribe()
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
    finally:
        driver.kill()
    before = {t.number: t for t in watched.snapshot().trials}
    # A trial asked but not yet submitted when the driver died is dropped (not counted) on resume.
    running = {n for n, t in before.items() if t.state == "RUNNING" and t.job_id}
    assert not watched.driven and watched.state == "RUNNING"
    with pytest.raises(Exception, match="no process drives it"):
        watched.wait(timeout=1)
    watched.resume().wait(timeout=90)
    after = {t.number: t for t in watched.snapshot().trials}
    assert watched.state == "SUCCEEDED" and len(after) == 8
    assert all(t.state == "COMPLETE" for t in after.values())
    for number, t in before.items():
        if t.state == "COMPLETE":
            assert (after[number].value, after[number].params, after[number].job_id) == (t.value, t.params, t.job_id)
    for number in running:  # re-attached: the same Slurm job, which ran on, and its full result
        assert after[number].job_id == before[number].job_id and after[number].step == 4


def test_a_vertex_hyperparameter_tuning_job_runs_and_goes_back_out_unchanged(cluster):
    resource = {
        "displayName": "vertex-sweep", "maxTrialCount": 3, "parallelTrialCount": 2, "maxFailedTrialCount": 1,
        "studySpec": {
            "metrics": [{"metricId": "val_loss", "goal": "MINIMIZE"}],
            "parameters": [{"parameterId": "batch", "discreteValueSpec": {"values": [16, 32, 64]}},
                           {"parameterId": "depth", "integerValueSpec": {"minValue": "2", "maxValue": "6"}}],
            "algorithm": "RANDOM_SEARCH", "measurementSelectionType": "BEST_MEASUREMENT"},
        "trialJobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "n2-standard-8"}, "replicaCount": 1,
            "containerSpec": {"imageUri": "gcr.io/p/objective:1", "command": [sys.executable, str(
                Path(__file__).with_name("objective.py"))], "args": ["--steps=2"]}}]},
    }
    study = api.create_study(cluster, json.dumps(resource)).wait(timeout=60)
    assert study.name == "vertex-sweep" and study.state == "SUCCEEDED"
    for t in study.snapshot().trials:
        assert t.params["batch"] in (16.0, 32.0, 64.0) and 2 <= t.params["depth"] <= 6
        assert f"--batch={int(t.params['batch'])}" in args_of(t)["flags"]
        assert t.value == min(v for _, v in t.curve)  # BEST_MEASUREMENT
    out = study.to_vertex()
    assert out["studySpec"] == {**resource["studySpec"], "parameters": [
        {"parameterId": "batch", "discreteValueSpec": {"values": [16.0, 32.0, 64.0]}, "conditionalParameterSpecs": []},
        {"parameterId": "depth", "integerValueSpec": {"minValue": 2, "maxValue": 6}, "conditionalParameterSpecs": []}]}
    assert {k: v for k, v in out.items() if k != "studySpec"} == {k: v for k, v in resource.items() if k != "studySpec"}


def test_a_study_given_no_name_gets_a_short_one_of_its_own(cluster):
    spec = short_spec("{x: {double: [0, 1]}}", trials=1, parallel=1)
    first, second = api.create_study(cluster, spec), api.create_study(cluster, spec)
    assert first.name != second.name  # the same minute: the second is numbered
    for study in (first, second):
        assert re.fullmatch(r"val_loss-\d{4}-\d{4}(-2)?", study.name), study.name
        assert api.get_study(study.name).wait(timeout=60).state == "SUCCEEDED"
        [trial] = study.snapshot().trials
        assert api.get_job(trial.job_id, cluster).name == f"{study.name}-1"


def test_a_bad_spec_starts_nothing(cluster):
    before = len(api.list_studies())
    with pytest.raises(SpecErrors, match="parameters.x.double"):
        api.create_study(cluster, short_spec("{x: {double: [1, 0]}}", trials=2))
    assert len(api.list_studies()) == before
