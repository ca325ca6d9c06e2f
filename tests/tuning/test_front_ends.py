"""The study's front ends on the real cluster: the live panel (fed by the driver's thread;
the test thread only sleeps, as an idle kernel would), %%gtc_tune in a real IPython shell,
and `gtc study` as a separate process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from IPython.core.error import UsageError

from jupyter_gtc import api
from tests.conftest import sleep_until
from tests.tuning.conftest import trial_script
from tests.widgets.bokeh_view import BokehView

pytestmark = pytest.mark.slurm
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def cell(parameters: str, script: str) -> str:
    return f"parameters: {parameters}\njob: {json.dumps(script)}\n"


def wait_for(study: api.Study, condition, timeout: float = 60) -> bool:
    """Wait until a snapshot of ``study`` that a panel subscribed earlier has already shown
    satisfies ``condition``; False after ``timeout`` s."""
    met = threading.Event()
    unsubscribe = study.subscribe(lambda snap: met.set() if condition(snap) else None)
    try:
        return met.wait(timeout)
    finally:
        unsubscribe()


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
    assert "bayesian: Gaussian process" in panel.title_html.value  # which sampler runs it, shown
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
    for control in (panel.stop_button, panel.trial_picker, panel.stop_trial_button):
        assert control.layout.display == "none"  # an ended study offers nothing to stop
    # Each trial's Slurm job is named after the study and the trial, as the table numbers it.
    assert [api.get_job(t.job_id, cluster).name for t in snap.trials] == [f"paneled-{i}" for i in range(1, 5)]
    assert ">1</td><td>" in panel.table_html.value and ">4</td><td>" in panel.table_html.value
    panel.close()
    again = StudyPanel(api.get_study("paneled"))  # later, or from another kernel: the ended study
    assert not again.following and again.state_label.value == "SUCCEEDED"
    assert again.best_plot.point_count == {"best val_loss": 4, "trial val_loss": 4}
    again.close()


def test_the_chart_shows_every_finished_trial_in_the_page_too(cluster):
    """The best-so-far chart of a panel shown before any trial finished, read where the user
    reads it: in the view of the page (tests/widgets/bokeh_view.py), which answers every
    patch as BokehJS does, and in the kernel's document."""
    from jupyter_gtc.widgets.study_panel import StudyPanel

    gate = os.path.join(os.environ["GTC_HOME"], "charted-gate")  # the trials wait until the page shows the chart
    study = api.create_study(cluster, {"metric": "val_loss:minimize", "max_trials": 4, "parallel": 2,
                                       "parameters": {"x": {"double": [0, 1]}},
                                       "job": trial_script(env={"OBJECTIVE_GATE": gate})}, name="charted")
    panel = StudyPanel(study)
    view = BokehView(panel.best_plot)
    view.deliver(view.inbox.get(timeout=5))  # document_ready: from now on the chart goes as patches
    assert panel.best_plot._live
    unsubscribe = study.subscribe(lambda snap: view.inbox.put(None) if snap.finished else None)
    open(gate, "w").close()
    # The idle kernel: it hands the page's messages to the widget as they come, until the end.
    for message in iter(lambda: view.inbox.get(timeout=90), None):
        view.deliver(message)
    while not view.inbox.empty():
        view.deliver(view.inbox.get())
    unsubscribe()

    snap = panel.snapshot
    assert snap.state == "SUCCEEDED" and snap.counts["COMPLETE"] == 4
    curve = snap.best_so_far()  # (k, best so far, the k-th finished trial's value)
    assert sorted(v for _, _, v in curve) == sorted(t.value for t in snap.trials)
    expected = {"best val_loss": {"step": [1.0, 2.0, 3.0, 4.0], "value": [b for _, b, _ in curve]},
                "trial val_loss": {"step": [1.0, 2.0, 3.0, 4.0], "value": [v for _, _, v in curve]}}
    kernel = {r.name: {k: [float(x) for x in r.data_source.data[k]] for k in ("step", "value")}
              for r in panel.best_plot.figure.renderers}
    for shown in (view.sources(), kernel):
        assert set(shown) == set(expected)
        for name, data in expected.items():  # every finished trial, once each (float32 on the wire)
            assert shown[name]["step"] == data["step"]
            assert shown[name]["value"] == pytest.approx(data["value"], rel=1e-6)
    assert not view.errors  # nothing the page said back was refused by the kernel
    # The axes follow every line's data: auto ranges, nothing pinned, every line in them and shown.
    fig = next(m for m in view.doc.models if type(m).__name__ == "figure")
    for axis_range in (fig.x_range, fig.y_range):
        assert type(axis_range).__name__ == "DataRange1d" and axis_range.renderers in ([], "auto")  # all of them
        assert axis_range.start != axis_range.start and axis_range.end != axis_range.end  # NaN: unset
    assert sorted(r.name for r in fig.renderers if r.visible) == sorted(expected)
    panel.close()


def test_the_panel_buttons_stop_a_trial_then_the_study(cluster):
    from jupyter_gtc.widgets.study_panel import StudyPanel

    study = api.create_study(cluster, {"metric": "val_loss:minimize", "max_trials": 6, "parallel": 3,
                                       "parameters": {"x": {"double": [0, 1]}},
                                       "job": trial_script("--steps=300", "--delay=0.2")}, name="buttons")
    panel = StudyPanel(study)  # before its trials start: the picker starts empty
    assert wait_for(study, lambda snap: snap.counts["RUNNING"] == 3, 30)
    picker = panel.trial_picker
    assert picker.options == (("trial 1", "1"), ("trial 2", "2"), ("trial 3", "3"))
    assert picker.value == "1" and not panel.stop_trial_button.disabled  # one is chosen: Stop trial acts
    picker.value = "2"
    study.stop_trial(1)  # the running trials change (4 takes 1's slot): the user's pick stays
    assert wait_for(study, lambda snap: [t.trial_id for t in snap.trials if t.state == "RUNNING"] == ["2", "3", "4"])
    assert picker.options == (("trial 2", "2"), ("trial 3", "3"), ("trial 4", "4")) and picker.value == "2"
    panel.stop_trial_button.click()
    assert wait_for(study, lambda snap: snap.trials[1].state == "PRUNED", 15)
    assert panel.snapshot.trials[1].reason == "stopped by the user"
    panel.stop_button.click()
    assert wait_for(study, lambda snap: snap.state == "STOPPED", 30)
    assert panel.state_label.value == "STOPPED" and panel.stop_trial_button.disabled
    assert panel.trial_picker.layout.display == "none"
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
