"""The study's front ends on the real cluster: the live panel (fed by the driver's thread;
the test thread only sleeps, as an idle kernel would), %%gtc_tune in a real IPython shell,
and `gtc study` as a separate process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from jupyter_gtc import api
from tests.conftest import sleep_until
from tests.tuning.conftest import trial_script

pytestmark = pytest.mark.slurm
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def cell(parameters: str, script: str) -> str:
    return f"parameters: {parameters}\njob: {json.dumps(script)}\n"


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython() or InteractiveShell.instance()  # one test shell per process
    ip.run_line_magic("load_ext", "jupyter_gtc")
    return ip


def test_the_panel_follows_a_study_to_its_end(cluster):
    from jupyter_gtc.widgets.study_panel import StudyPanel

    study = api.create_study(cluster, {"metric": "val_loss:minimize", "max_trials": 4, "parallel": 2,
                                       "parameters": {"lr": {"double": [1e-3, 1.0], "scale": "log"},
                                                      "opt": {"categorical": ["adam", "sgd"]}},
                                       "job": trial_script("--delay=0.2")}, name="paneled")
    panel = StudyPanel(study)
    assert panel.following and "study paneled" in panel.title_html.value
    assert sleep_until(lambda: not panel.following, 60)  # it lets go once the study has ended
    snap = panel.snapshot
    assert panel.state_label.value == "SUCCEEDED" and panel.counts_label.value.startswith("4/4: 0 running, 4 complete")
    assert f"trial {snap.best.trial_id}</b>" in panel.best_html.value
    assert panel.table_html.value.count("<tr>") == 1 + 4
    assert panel.best_plot.point_count == {"best val_loss": 4, "trial val_loss": 4}
    (coords,) = panel.coords_box.children  # parallel coordinates: lr, opt and the metric
    fig = coords._model.children[0] if hasattr(coords._model, "children") else coords._model
    assert fig.xaxis[0].major_label_overrides == {0: "lr", 1: "opt", 2: "val_loss"}
    assert snap.finished and panel.stop_button.disabled
    panel.close()
    again = StudyPanel(api.get_study("paneled"))  # later, or from another kernel: the ended study
    assert not again.following and again.state_label.value == "SUCCEEDED"
    assert again.best_plot.point_count == {"best val_loss": 4, "trial val_loss": 4}
    again.close()


def test_the_panel_buttons_stop_a_trial_then_the_study(cluster):
    from jupyter_gtc.widgets.study_panel import StudyPanel

    study = api.create_study(cluster, {"metric": "val_loss:minimize", "max_trials": 5, "parallel": 2,
                                       "parameters": {"x": {"double": [0, 1]}},
                                       "job": trial_script("--steps=300", "--delay=0.2")}, name="buttons")
    panel = StudyPanel(study)
    assert sleep_until(lambda: len(panel.trial_picker.options) == 2, 30)
    panel.trial_picker.value = "2"
    panel.stop_trial_button.click()
    assert sleep_until(lambda: panel.snapshot.trials[1].state == "PRUNED", 15)
    assert panel.snapshot.trials[1].reason == "stopped by the user"
    panel.stop_button.click()
    assert sleep_until(lambda: panel.snapshot.state == "STOPPED", 30)
    assert panel.state_label.value == "STOPPED" and panel.stop_trial_button.disabled
    panel.close()


def test_gtc_tune_runs_the_cell_and_shows_the_panel(shell, cluster):
    from IPython.utils.capture import capture_output
    from ipywidgets.widgets.widget import _instances

    from jupyter_gtc.widgets.study_panel import StudyPanel

    line = f"--cluster {cluster} --trials 2 --parallel 2 --metric val_loss:minimize --name magic-study"
    study = shell.run_cell_magic("gtc_tune", line, cell("{x: {double: [0, 1]}}", trial_script()))
    assert isinstance(study, api.Study) and study.spec.max_trial_count == 2
    with capture_output() as shown:
        shell.display_formatter.format(study)
    loader, widget = (output.data for output in shown.outputs)
    assert "application/vnd.bokehjs_load.v0+json" in loader
    panel = _instances[widget[WIDGET_VIEW]["model_id"]]
    assert isinstance(panel, StudyPanel) and panel.study.name == "magic-study"
    assert study.wait(60).state == "SUCCEEDED"
    panel.close()


def test_gtc_tune_mistakes_are_usage_errors(shell, cluster, tmp_path):
    with pytest.raises(UsageError, match=r"parameters.x.double: \[1, 0\]|parameters.x.double"):
        shell.run_cell_magic("gtc_tune", f"--cluster {cluster} --trials 2 --metric m:minimize",
                             cell("{x: {double: [1, 0]}}", trial_script()))
    with pytest.raises(UsageError, match="either as the cell or with --spec"):
        shell.run_cell_magic("gtc_tune", f"--cluster {cluster} --spec {tmp_path}/s.yaml", "parameters: {}")
    with pytest.raises(UsageError, match="could not be read"):
        shell.run_line_magic("gtc_tune", f"--cluster {cluster} --spec {tmp_path}/missing.json")


def gtc(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", *argv], capture_output=True, text=True,
                          timeout=120, env=os.environ)


def test_gtc_study_verbs(cluster, tmp_path):
    spec = tmp_path / "study.yaml"
    spec.write_text(cell("{x: {double: [0, 1]}}", trial_script()) + "metric: val_loss:minimize\n")
    created = gtc("study", "create", "-f", str(spec), "--cluster", cluster, "--trials", "2", "--name", "cli-study")
    assert created.returncode == 0, created.stderr
    assert "study cli-study on tuning: gp: " in created.stderr
    assert created.stdout.count("COMPLETE") == 2 and "study cli-study SUCCEEDED" in created.stdout
    listed = json.loads(gtc("study", "list", "--json").stdout)
    mine = next(s for s in listed if s["name"] == "cli-study")
    assert mine["counts"]["COMPLETE"] == 2 and mine["best"]["value"] > 0
    described = gtc("study", "describe", "cli-study")
    assert described.returncode == 0 and "SUCCEEDED" in described.stdout and "COMPLETE" in described.stdout
    exported = json.loads(gtc("study", "export", "cli-study", "--image-uri", "gcr.io/p/t:1").stdout)
    assert exported["displayName"] == "cli-study" and exported["maxTrialCount"] == 2
    pools = exported["trialJobSpec"]["workerPoolSpecs"]
    assert pools[0]["machineSpec"] == {"machineType": "n2-standard-8"}
    assert pools[0]["containerSpec"]["imageUri"] == "gcr.io/p/t:1"
    missing = gtc("study", "describe", "ghost")
    assert missing.returncode == 1 and "no study named 'ghost'" in missing.stderr
