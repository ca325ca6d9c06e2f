"""The magics, driven through a real IPython shell against a real local Slurm cluster."""

from __future__ import annotations

import html
import json

import pytest
from IPython.core.error import UsageError

from tests.conftest import slurm, small_gpu_spec

pytestmark = pytest.mark.slurm
CLUSTER = "magics"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython() or InteractiveShell.instance()  # one test shell per process
    ip.run_line_magic("load_ext", "jupyter_gtc")
    return ip


@pytest.fixture(scope="module")
def cluster(slurm_available, shell):
    """A 2-node cluster made by %%gtc_cluster itself."""
    from jupyter_gtc import api

    panel = shell.run_cell_magic("gtc_cluster", "", json.dumps(small_gpu_spec(CLUSTER, nodes=2)))
    assert [n.name for n in panel.cluster.nodes] == ["gpu-0", "gpu-1"]
    yield CLUSTER
    api.delete_cluster(CLUSTER)


@pytest.fixture
def magics(shell, cluster):
    """The shell's GtcMagics, with this module's cluster as the current one."""
    instance = shell.magics_manager.registry["GtcMagics"]
    instance.current_cluster = cluster
    return instance


def records(table) -> list[dict]:
    """Rows of what %squeue or %gtc_clusters returned (a DataFrame where pandas is installed)."""
    return table.to_dict("records") if hasattr(table, "to_dict") else list(table)


def widget_shown(data: dict):
    """The widget instance behind a displayed widget view."""
    from ipywidgets.widgets.widget import _instances

    return _instances[data[WIDGET_VIEW]["model_id"]]


def submit(shell, line: str, script: str):
    """Run a %%sbatch cell as a user would, and return what `_` is in the next cell."""
    result = shell.run_cell(f"%%sbatch {line}\n{script}")
    result.raise_error()
    return shell.user_ns["_"]


def test_gtc_cluster_scales_an_existing_cluster_on_rerun(shell, magics):
    from jupyter_gtc import api

    panel = shell.run_cell_magic("gtc_cluster", "", json.dumps(small_gpu_spec(CLUSTER, nodes=3)))
    assert [n.name for n in panel.cluster.nodes] == ["gpu-0", "gpu-1", "gpu-2"]
    assert "nodes ready 3/3" in panel.summary_html.value
    assert api.get_cluster(CLUSTER).node_count == 3

    panel = shell.run_cell_magic("gtc_cluster", "", json.dumps(small_gpu_spec(CLUSTER, nodes=2)))
    assert [n.name for n in panel.cluster.nodes] == ["gpu-0", "gpu-1"]
    assert magics.current_cluster == CLUSTER


def test_gtc_cluster_refuses_changes_other_than_pool_sizes(shell, cluster):
    from jupyter_gtc import api

    changed = small_gpu_spec(CLUSTER, nodes=3, machine="g2-standard-8")
    with pytest.raises(UsageError, match=r"node_pools\[gpu\]\.machine_spec\.machine_type.*delete"):
        shell.run_cell_magic("gtc_cluster", "", json.dumps(changed))
    current = api.get_cluster(CLUSTER)  # nothing was scaled before the refusal
    assert current.node_count == 2 and current.spec.pool("gpu").machine_spec.machine_type == "a3-highgpu-8g"


def test_gtc_cluster_takes_yaml_and_a_name(shell, slurm_available):
    from jupyter_gtc import api

    yaml_spec = """
displayName: ignored
nodePools:
  - id: cpu
    machineSpec: {machineType: n2-standard-4}
    scalingSpec: {minNodeCount: 1, maxNodeCount: 1}
orchestratorSpec:
  slurmSpec:
    partitions: [{id: debug, nodePoolIds: [cpu]}]
local: {resourceScale: 0.5}
"""
    panel = shell.run_cell_magic("gtc_cluster", "named", yaml_spec)
    try:
        assert panel.cluster.name == "named" and "named" in [c.name for c in api.list_clusters(False)]
        assert "cpu-0" in panel.nodes_html.value
    finally:
        api.delete_cluster("named")


def test_gtc_cluster_reports_a_bad_spec_by_field(shell, slurm_available):
    with pytest.raises(UsageError, match="machine"):
        shell.run_cell_magic("gtc_cluster", "", json.dumps(small_gpu_spec("bad", machine="no-such-type")))


def test_sbatch_options_win_over_sbatch_lines_and_underscore_is_the_job(shell, magics):
    from jupyter_gtc import api

    job = submit(shell, "--job-name b --nodes 2", "#!/bin/bash\n#SBATCH --job-name a\nsrun bash -c 'echo hi from $SLURMD_NODENAME'")
    assert isinstance(job, api.Job)
    assert job.name == "b"
    job.wait(60)
    assert job.state == "COMPLETED", job
    assert slurm(CLUSTER, "squeue", "-h", "-t", "all", "-j", job.id, "-o", "%j").stdout.strip() == "b"  # Slurm's word
    assert sorted(job.logs().splitlines()) == ["hi from gpu-0", "hi from gpu-1"]


def test_a_job_displays_as_its_live_panel(shell, magics):
    job = submit(shell, "--job-name shown", "true")
    from jupyter_gtc.widgets import JobPanel

    from IPython.utils.capture import capture_output

    with capture_output() as shown:  # the panel is published as the loader, then the widget
        shell.display_formatter.format(job)
    loader, widget = (output.data for output in shown.outputs)
    assert "application/vnd.bokehjs_load.v0+json" in loader  # BokehJS for the plot the panel may grow
    assert widget["text/plain"].startswith(f"<Job {job.id} 'shown' on {CLUSTER}")
    panel = widget_shown(widget)
    assert isinstance(panel, JobPanel) and panel.job.id == job.id
    job.wait(60)


def test_sbatch_uses_the_current_or_only_cluster(shell, magics, monkeypatch, tmp_path):
    magics.current_cluster = None  # the only cluster is picked, then remembered
    job = submit(shell, "--job-name only", "true")
    assert job.cluster == CLUSTER and magics.current_cluster == CLUSTER
    job.wait(60)

    monkeypatch.setenv("GTC_HOME", str(tmp_path))  # a home without any cluster
    magics.current_cluster = None
    with pytest.raises(UsageError, match="no cluster exists"):
        shell.run_cell_magic("sbatch", "", "true")


def test_sbatch_asks_which_cluster_when_several_exist(shell, magics):
    from jupyter_gtc import api

    api.create_cluster(small_gpu_spec("second", nodes=1))
    try:
        magics.current_cluster = None
        with pytest.raises(UsageError, match=f"--cluster.*{CLUSTER}, second"):
            shell.run_cell_magic("sbatch", "", "true")
        job = shell.run_cell_magic("sbatch", "--cluster second --job-name there", "true")
        assert job.cluster == "second" and magics.current_cluster == "second"
        job.wait(60)
    finally:
        api.delete_cluster("second")


def test_unknown_cluster_is_a_usage_error_naming_it(shell, magics):
    for run in (lambda: shell.run_cell_magic("sbatch", "--cluster nosuch", "true"),
                lambda: shell.run_line_magic("squeue", "--cluster nosuch"),
                lambda: shell.run_line_magic("scancel", "1 --cluster nosuch")):
        with pytest.raises(UsageError, match=f"'nosuch'.*{CLUSTER}"):
            run()


def test_sbatch_refusals_are_usage_errors(shell, magics):
    with pytest.raises(UsageError, match="partition: 'nosuch'.*train"):
        shell.run_cell_magic("sbatch", "--partition nosuch", "true")
    with pytest.raises(UsageError, match="sbatch refused the job: .*Invalid --time"):
        shell.run_cell_magic("sbatch", "--time=notatime", "true")


def test_squeue_shows_a_running_job_and_scancel_cancels_it(shell, magics, tmp_path):
    job = submit(shell, "--job-name sleeper", "sleep 300")
    job.wait_until_running(60)
    (tmp_path / "mine.sh").write_text("#!/bin/bash\nsleep 300\n")  # and one from a terminal
    theirs = slurm(CLUSTER, "sbatch", "--parsable", "--hold", str(tmp_path / "mine.sh")).stdout.strip()
    rows = records(shell.run_line_magic("squeue", ""))
    assert {"job_id": job.id, "name": "sleeper", "state": "RUNNING", "managed": True}.items() <= next(
        r for r in rows if r["job_id"] == job.id).items()
    assert {"job_id": theirs, "name": "mine.sh", "state": "PENDING", "managed": False}.items() <= next(
        r for r in rows if r["job_id"] == theirs).items()
    assert shell.run_line_magic("scancel", theirs).wait(60).state == "CANCELLED"  # not ours, cancelled alike

    cancelled = shell.run_line_magic("scancel", job.id)
    assert cancelled.id == job.id
    assert job.wait(60).state == "CANCELLED"


def test_scancel_unknown_job_is_a_usage_error(shell, magics):
    with pytest.raises(UsageError, match="no job '99999'"):
        shell.run_line_magic("scancel", "99999")


def test_shell_hostile_job_name_is_submitted_literally(shell, magics):
    from jupyter_gtc.widgets import JobPanel

    name = "a'; echo x"
    job = submit(shell, '--job-name "a\'; echo x"', "echo ok")
    assert job.name == name
    panel = JobPanel(job)
    assert html.escape(name) in panel.title_html.value
    job.wait(60)
    assert job.logs() == "ok\n"
    assert name in [r["name"] for r in records(shell.run_line_magic("squeue", ""))]


def test_gtc_clusters_lists_clusters(shell, magics):
    rows = records(shell.run_line_magic("gtc_clusters", ""))
    assert {"name": CLUSTER, "backend": "local", "state": "RUNNING", "nodes": "2/2", "gpus": "0/16"} in rows
    with pytest.raises(UsageError, match="no arguments"):
        shell.run_line_magic("gtc_clusters", "extra")


def test_sbatch_help_shows_the_options(shell, capsys):
    shell.run_cell("%%sbatch?")
    out = capsys.readouterr().out
    assert "--cluster CLUSTER" in out and "wins over the script's #SBATCH lines" in out.replace("\n", " ")


def test_bad_arguments_are_usage_errors(shell, magics):
    with pytest.raises(UsageError, match="--cluster"):
        shell.run_cell_magic("sbatch", "--cluster", "true")
    with pytest.raises(UsageError, match="unrecognized arguments: --nodes"):
        shell.run_line_magic("squeue", "--nodes 2")


@pytest.mark.parametrize(("magic", "line", "cell", "error"), [
    ("sbatch", '--job-name "pre train --nodes 2', "srun hostname", "no closing quotation"),
    ("gtc_cluster", "'demo", "display_name: demo", "no closing quotation"),
    ("gtc_tune", "--name 'sweep", "metric: m:minimize", "no closing quotation"),
    ("squeue", "--cluster 'magics", None, "no closing quotation"),
    ("scancel", '"12', None, "no closing quotation"),
    ("gtc_tensorboard", "12 \\", None, "no escaped character"),
])
def test_a_line_a_shell_could_not_split_is_a_usage_error_naming_it(shell, magic, line, cell, error):
    """shlex's ValueError would show a traceback; the user sees which line and what to fix."""
    with pytest.raises(UsageError) as e:
        if cell is None:
            shell.run_line_magic(magic, line)
        else:
            shell.run_cell_magic(magic, line, cell)
    prefix = "%%" if cell is not None else "%"
    assert str(e.value) == (f"{prefix}{magic}: cannot split the arguments {line!r}: {error}; close the quote, "
                            "or escape a quote or backslash that is meant literally (\\\" or \\\\)")


def test_gtc_cluster_shows_progress_below_the_cell(shell, slurm_available):
    from IPython.utils.capture import capture_output
    from jupyter_gtc import api
    from jupyter_gtc.widgets import ClusterProgress

    with capture_output() as captured:
        shell.run_cell_magic("gtc_cluster", "", json.dumps(small_gpu_spec("progress", nodes=1)))
    try:
        (progress,) = [widget_shown(out.data) for out in captured.outputs if WIDGET_VIEW in out.data]
        assert isinstance(progress, ClusterProgress)
        assert "starting slurmd 1/1: gpu-0" in progress.steps
        assert progress.message_label.value.startswith("creating cluster progress: done in")
    finally:
        api.delete_cluster("progress")


def test_squeue_shows_exit_codes_as_integers_and_blank_until_there_is_one(shell, magics):
    failed = submit(shell, "--job-name exits3", "exit 3").wait(60)
    done = submit(shell, "--job-name exits0", "true").wait(60)
    running = submit(shell, "--job-name runs", "sleep 300").wait_until_running(60)
    try:
        queue = shell.run_line_magic("squeue", "")
        codes = {r["job_id"]: r["exit_code"] for r in records(queue)}
        assert (codes[failed.id], codes[done.id], codes[running.id]) == (3, 0, "")
        assert type(codes[failed.id]) is int
        shown = queue._repr_html_()  # what the notebook shows
        assert "<td>3</td>" in shown and "NaN" not in shown and "3.0" not in shown
    finally:
        running.cancel().wait(60)


def test_sbatch_runs_the_kernels_python_unless_told_otherwise(shell, magics, monkeypatch, capsys):
    import sys
    from pathlib import Path

    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a venv")
    monkeypatch.delenv("GTC_JOB_PYTHON_ENV", raising=False)
    script = "#!/bin/bash\nsrun python -c 'import sys; print(sys.prefix)'"
    job = submit(shell, "--job-name kernels-python", script).wait(60)
    assert job.logs() == f"{sys.prefix}\n" and job.python_env == Path(sys.prefix)
    plain = submit(shell, "--python-env none --job-name sbatch-path", "true").wait(60)
    assert plain.state == "COMPLETED" and plain.python_env is None
    with pytest.raises(UsageError, match=r"^--python-env: '/usr/share' is not valid; a Python environment: a venv"):
        shell.run_cell_magic("sbatch", "--python-env /usr/share", "true")
    shell.run_cell("%%sbatch?")
    assert "--python-env PATH|none" in capsys.readouterr().out


def test_gtc_tune_takes_a_tensorboard_tag_with_a_slash(shell, magics):
    report = ': "$@"; printf \'{"train/loss": "%s", "global_step": "1"}\\n\' 0.25 > "$CLOUD_ML_HP_METRIC_FILE"'
    cell = f"parameters: {{x: {{double: [0, 1]}}}}\njob: {json.dumps(report)}\n"
    study = shell.run_cell_magic("gtc_tune", "--metric train/loss:minimize --trials 1 --parallel 1 --name slash-tag",
                                 cell)
    assert study.spec.metric.metric_id == "train/loss"
    assert study.wait(120).state == "SUCCEEDED" and study.best_trial.value == 0.25


def test_job_plot_draws_in_a_fresh_kernel_that_only_loaded_the_extension(cluster):
    """A kernel after a restart: `%load_ext jupyter_gtc`, then `job.plot()` of a job from before,
    with no panel shown first. The widgets were registered as the plotter only when some panel
    imported them, so the plot said "run `%load_ext jupyter_gtc` first" after the user had."""
    import subprocess
    import sys

    from jupyter_gtc import api

    job = api.submit_job(cluster, "#!/bin/bash\ntrue\n").wait(60)
    fresh_kernel = (
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'jupyter_gtc')\n"
        "import sys\n"
        "assert 'jupyter_gtc.widgets' not in sys.modules  # %load_ext stays light\n"
        f"from jupyter_gtc import api\nprint(type(api.get_job({job.id!r}, {cluster!r}).plot()).__name__)\n")
    done = subprocess.run([sys.executable, "-c", fresh_kernel], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "TagGrid"), done.stderr
