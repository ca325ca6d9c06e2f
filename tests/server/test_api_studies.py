"""Study routes on a real local Slurm cluster: a study driven by this test process (as a
notebook would drive it) is listed, described, stopped and resumed through the server."""

from __future__ import annotations

import os

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import StudyBusy
from tests.conftest import sleep_until
from tests.server.api_client import EventStream, call, ok, wait_for
from tests.tuning.conftest import short_spec, trial_script

pytestmark = pytest.mark.slurm

SLOW = trial_script("--steps=200", "--delay=0.2")


def listed(server, cluster: str, name: str) -> dict | None:
    return next((s for s in ok(server, "GET", f"studies?cluster={cluster}")["studies"] if s["name"] == name), None)


def test_a_study_is_listed_with_its_trials_and_described_whole(jupyter_server, rest_cluster):
    study = api.create_study(rest_cluster.name, short_spec("{x: {double: [0, 1]}}", trials=3), name="rest-listed")
    study.wait(timeout=90)
    row = listed(jupyter_server, rest_cluster.name, "rest-listed")
    assert (row["state"], row["cluster"], row["metric"], row["direction"]) == (
        "SUCCEEDED", rest_cluster.name, "val_loss", "minimize")
    assert row["counts"]["COMPLETE"] == 3 and [t["trial_id"] for t in row["trials"]] == ["1", "2", "3"]
    here = study.snapshot().trials
    assert [t["job_id"] for t in row["trials"]] == [t.job_id for t in here]
    assert [t["value"] for t in row["trials"]] == [t.value for t in here]
    assert row["best"]["value"] == min(t.value for t in here)
    assert "spec" not in row and "curve" not in row["trials"][0]  # a list stays small

    whole = ok(jupyter_server, "GET", "studies/rest-listed")
    assert whole["spec"]["max_trial_count"] == 3
    assert [step for step, _ in whole["trials"][0]["curve"]] == [1, 2, 3]

    status, body = call(jupyter_server, "GET", "studies/no-such-study")
    assert status == 404 and body["kind"] == "StudyNotFound" and "rest-listed" in body["message"]


def test_the_server_stops_a_trial_and_the_study_another_process_drives(jupyter_server, rest_cluster):
    spec = short_spec("{x: {double: [0, 1]}}", trials=6, parallel=2, script=SLOW)
    study = api.create_study(rest_cluster.name, spec, name="rest-stopped")
    assert sleep_until(lambda: study.snapshot().counts["RUNNING"] == 2, 30)

    status, body = call(jupyter_server, "POST", "studies/rest-stopped/resume")
    assert status == 409 and body["kind"] == "StudyBusy" and str(os.getpid()) in body["message"]
    status, body = call(jupyter_server, "POST", "studies/rest-stopped/trials/9/stop")
    assert status == 400 and body["kind"] == "SpecError"
    assert "trial: '9'" in body["message"] and "running: 1, 2" in body["message"]

    ok(jupyter_server, "POST", "studies/rest-stopped/trials/1/stop")
    assert sleep_until(lambda: study.snapshot().trials[0].state == "PRUNED", 15)
    assert study.snapshot().trials[0].reason == "stopped by the user"

    ok(jupyter_server, "POST", "studies/rest-stopped/stop")
    study.wait(timeout=30)  # this process's driver saw the request and stopped
    assert study.state == "STOPPED" and study.reason == "stopped by the user"
    row = wait_for(lambda: listed(jupyter_server, rest_cluster.name, "rest-stopped"), what="the study listed")
    assert row["state"] == "STOPPED" and row["counts"]["RUNNING"] == 0 and not row["driven"]


def test_a_stopped_study_resumed_by_the_server_runs_to_the_end_there(jupyter_server, rest_cluster):
    spec = short_spec("{x: {double: [0, 1]}}", trials=4, parallel=2, script=trial_script("--steps=10", "--delay=0.3"))
    study = api.create_study(rest_cluster.name, spec, name="rest-resumed")
    study.stop()
    assert (study.state, study.driven) == ("STOPPED", False)

    answer = ok(jupyter_server, "POST", "studies/rest-resumed/resume")
    assert (answer["state"], answer["driven"]) == ("RUNNING", True)
    with pytest.raises(StudyBusy):  # the server drives it now (its trials take seconds), so this process may not
        study.resume()
    done = wait_for(lambda: (s := listed(jupyter_server, rest_cluster.name, "rest-resumed"))["state"] == "SUCCEEDED"
                    and s, timeout=90, what="the server's driver to finish the study")
    assert done["counts"]["COMPLETE"] >= 1 and done["counts"]["RUNNING"] == 0
    assert study.state == "SUCCEEDED"  # what the server did is what every process reads


def test_the_feed_sends_a_clusters_studies_as_they_change(jupyter_server, rest_cluster):
    def fed(data: dict) -> dict | None:
        return next((s for s in data["studies"] if s["name"] == "rest-fed"), None)

    stream = EventStream(jupyter_server, f"?cluster={rest_cluster.name}")
    try:
        snapshot = stream.next("snapshot")
        assert isinstance(snapshot["studies"], list)
        # Both trials wait at a gate the test opens once the feed has shown them running.
        gate = os.path.join(os.environ["GTC_HOME"], "rest-fed-gate")
        spec = short_spec("{x: {double: [0, 1]}}", trials=2,
                          script=trial_script("--steps=10", "--delay=0.1", env={"OBJECTIVE_GATE": gate}))
        api.create_study(rest_cluster.name, spec, name="rest-fed")
        stream.next("studies", timeout=90, where=lambda d: (s := fed(d)) is not None and s["counts"]["RUNNING"] == 2)
        open(gate, "w").close()
        last = stream.next("studies", timeout=90, where=lambda d: (s := fed(d)) is not None and s["state"] == "SUCCEEDED")
        assert last["cluster"] == rest_cluster.name
        assert fed(last)["counts"]["COMPLETE"] == 2 and fed(last)["best"] is not None
        seen = [fed(data) for event, data in stream.history if event == "studies" and fed(data)]
        assert any(s["state"] == "RUNNING" and s["counts"]["RUNNING"] == 2 for s in seen), seen  # live, not only at the end
        assert seen[-1]["state"] == "SUCCEEDED"
    finally:
        stream.close()
