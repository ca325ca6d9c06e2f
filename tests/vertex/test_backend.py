"""The ``vertex`` backend against the local Vertex endpoint: our jobs become CustomJobs through
the official client (google-cloud-aiplatform's JobServiceClient, REST, unpatched), run on the
local cluster behind the endpoint, and are read back as a Slurm job is: state, exit status,
reason, log and metrics, the files through the staging bucket (the endpoint's storage
emulator) with google-cloud-storage.

No request may leave the machine: proxies point where nothing listens, and every call the
backend made is in the endpoint's request log."""

from __future__ import annotations

import json

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import ActionNotSupported, SettingMissing, SpecError
from tests.conftest import no_egress

pytestmark = pytest.mark.slurm

REPORT = ("import json, os; print(json.dumps({k: os.environ.get(k) for k in "
          "['CLOUD_ML_JOB_ID', 'AIP_MODEL_DIR', 'GTC_POOL', 'SLURMD_NODENAME', 'GREETING']}))")


@pytest.fixture(scope="module")
def target(slurm_available):
    from tests.conftest import small_gpu_spec

    with pytest.MonkeyPatch.context() as env:
        no_egress(env)
        cluster = api.create_cluster(small_gpu_spec("vxlocal", nodes=2, machine="n2-standard-4"))
        endpoint = api.start_vertex_endpoint(cluster.name)
        attached = api.attach_vertex({"display_name": "vx", "api_endpoint": f"local:{endpoint.port}",
                                      "poll_interval": 0.5})
        yield attached.name, endpoint
        api.detach_cluster(attached.name)
        api.delete_cluster(cluster.name)


def custom_job(endpoint, job):
    """The CustomJob behind ``job``, as the official client reads it from the endpoint."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    client = aiplatform_v1.JobServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                            client_options={"api_endpoint": endpoint.api_endpoint})
    return client.get_custom_job(name=f"projects/local-project/locations/us-central1/customJobs/{job.id}")


def requests_logged() -> list[dict]:
    return [json.loads(line) for line in api.vertex_request_log().read_text().splitlines()]


def test_a_job_runs_as_a_custom_job_and_its_log_is_read_from_the_bucket(target):
    name, endpoint = target
    before = len(requests_logged())
    job = api.submit_job(name, f"#!/bin/bash\necho hello from $CLOUD_ML_JOB_ID\npython3 -c \"{REPORT}\"\n",
                         ["--job-name=hello", "--machine-type=n2-standard-4"], env={"GREETING": "hi"})
    assert str(job.job_dir).startswith("/gcs/local-bucket/jupyter_gtc/jobs/vx/hello-")
    job.wait(timeout=300)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), job.logs()
    lines = job.logs().splitlines()
    assert f"hello from {job.id}" in lines
    seen = json.loads(lines[lines.index(f"hello from {job.id}") + 1])
    assert seen["CLOUD_ML_JOB_ID"] == job.id and seen["GREETING"] == "hi" and seen["GTC_POOL"] == "0"
    assert seen["AIP_MODEL_DIR"] == "gs://local-bucket/" + str(job.job_dir).removeprefix("/gcs/local-bucket/") + "/model/"
    resource = custom_job(endpoint, job)
    assert resource.display_name == "hello" and resource.labels["gtc_cluster"] == "vx"
    assert resource.state.name == "JOB_STATE_SUCCEEDED"
    assert resource.job_spec.worker_pool_specs[0].machine_spec.machine_type == "n2-standard-4"
    sent_env = {e.name for e in resource.job_spec.worker_pool_specs[0].container_spec.env}
    assert "GTC_JOB_DIR" in sent_env and "GTC_OUTPUT_APPENDED" not in sent_env  # a local cluster's TaskProlog's only
    calls = requests_logged()[before:]
    assert any(c["method"] == "POST" and c["path"].endswith("/customJobs") for c in calls), calls
    assert all(c["status"] == 200 for c in calls), calls  # every call the backend made reached the endpoint
    # The job's folder, as the job panel and the sidebar list it: through the bucket.
    names = {e.name for e in job.host.list_dir(job.job_dir)}
    assert {"job.sbatch", f"slurm-{job.id}.out"} <= names and ".gtc-folder" not in names
    sent = job.to_json()  # what the sidebar and `gtc job list --json` get
    assert (sent["state"], sent["exit_code"], sent["managed"]) == ("COMPLETED", 0, True)
    assert sent["log_path"] == f"{job.job_dir}/slurm-{job.id}.out"
    assert api.get_job("hello", name).id == job.id  # found again by name, from the state store


def test_replicas_run_the_srun_program_once_each(target):
    name, endpoint = target
    job = api.submit_job(name, f"#!/bin/bash\n#SBATCH --nodes=2\nsrun python3 -c \"{REPORT}\"\n",
                         ["--job-name=pair", "--machine-type=n2-standard-4", "--requeue", "--spot"])
    scheduling = custom_job(endpoint, job).job_spec.scheduling
    assert scheduling.restart_job_on_worker_restart and scheduling.strategy.name == "SPOT"
    job.wait(timeout=300)
    assert job.state == "COMPLETED", job.logs()
    primary = json.loads(job.logs().strip().splitlines()[-1])
    workers = [e.name for e in job.host.list_dir(job.job_dir) if ".workerpool1-" in e.name]
    assert len(workers) == 1, workers
    worker = json.loads(job.host.read(job.job_dir / workers[0]).decode().strip().splitlines()[-1])
    assert (primary["GTC_POOL"], worker["GTC_POOL"]) == ("0", "1")
    assert primary["SLURMD_NODENAME"] != worker["SLURMD_NODENAME"]  # two machines


def test_a_failing_job_has_its_exit_status_reason_and_log(target):
    name, _ = target
    job = api.submit_job(name, "#!/bin/bash\necho the data is not there >&2\nexit 7\n",
                         ["--job-name=fails", "--machine-type=n2-standard-4"])
    job.wait(timeout=300)
    assert (job.state, job.exit_code) == ("FAILED", 7)
    assert "non-zero status of 7" in job.reason
    assert "the data is not there" in job.logs()


def test_cancel_ends_the_custom_job_and_hold_is_refused(target):
    name, endpoint = target
    job = api.submit_job(name, "#!/bin/bash\necho started\nsleep 600\n", ["--job-name=long",
                                                                          "--machine-type=n2-standard-4"])
    job.wait_until_running(timeout=300)
    with pytest.raises(ActionNotSupported, match="cannot hold"):
        api.hold_job(job.id, name)
    api.cancel_job(job.id, name)
    job.wait(timeout=120)
    assert job.state == "CANCELLED"
    assert custom_job(endpoint, job).state.name == "JOB_STATE_CANCELLED"


def test_metrics_are_read_from_the_bucket(target):
    name, _ = target
    script = ("#!/bin/bash\n"
              "for step in 1 2 3; do echo '{\"accuracy\": \"0.'$step'\", \"global_step\": \"'$step'\"}' "
              ">> \"$CLOUD_ML_HP_METRIC_FILE\"; done\n")
    job = api.submit_job(name, script, ["--job-name=metrics", "--machine-type=n2-standard-4"])
    job.wait(timeout=300)
    assert job.state == "COMPLETED", job.logs()
    scalars = job.metrics()
    rows = scalars.to_dict("records") if hasattr(scalars, "to_dict") else [vars(s) for s in scalars]
    assert [(r["step"], r["value"]) for r in rows if r["tag"] == "accuracy"] == [(1, 0.1), (2, 0.2), (3, 0.3)]


def test_a_job_asking_more_gpus_than_its_machine_has_is_refused_before_anything_is_sent(target):
    name, _ = target
    before = len(requests_logged())
    with pytest.raises(SpecError) as info:
        api.submit_job(name, "#!/bin/bash\n#SBATCH --gpus-per-node=2\ntrue\n", ["--machine-type=g2-standard-8"])
    assert info.value.field == "--gpus-per-node" and "g2-standard-8 has 1 GPU" in str(info.value)
    assert not any(c["method"] == "POST" for c in requests_logged()[before:])


def test_a_missing_project_or_region_is_named_with_how_to_set_it(tmp_path, monkeypatch):
    for variable in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "CLOUD_ML_REGION", "CLOUDSDK_AI_REGION",
                     "CLOUDSDK_COMPUTE_REGION", "CLOUDSDK_ACTIVE_CONFIG_NAME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # a gcloud that was never configured
    monkeypatch.setenv("GTC_HOME", str(tmp_path / "home"))
    with pytest.raises(SettingMissing) as info:
        api.attach_vertex({"display_name": "real"})
    assert info.value.key == "vertex.project" and "gtc config set vertex.project" in str(info.value)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    with pytest.raises(SettingMissing) as info:
        api.attach_vertex({"display_name": "real"})
    assert info.value.key == "vertex.region" and "gtc config set vertex.region" in str(info.value)
    (tmp_path / "gcloud" / "configurations").mkdir(parents=True)
    (tmp_path / "gcloud" / "configurations" / "config_default").write_text("[ai]\nregion = europe-west4\n")
    with pytest.raises(SettingMissing) as info:
        api.attach_vertex({"display_name": "real"})
    assert info.value.key == "vertex.staging_bucket"  # project and region were found (environment, gcloud)
    assert api.list_clusters(with_status=False) == []  # nothing attached half-way


def test_the_sbatch_magic_sends_the_cell_to_vertex(target):
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    name, endpoint = target
    shell = start_ipython() or InteractiveShell.instance()  # one test shell per process
    shell.run_line_magic("load_ext", "jupyter_gtc")
    job = shell.run_cell_magic("sbatch", f"--backend vertex --cluster {name} --machine-type n2-standard-4 "
                                         f"--replicas 2 --job-name from-cell", f"python3 -c \"{REPORT}\"\n")
    assert job.cluster == name and job.name == "from-cell"
    job.wait(timeout=300)
    assert job.state == "COMPLETED", job.logs()
    pools = custom_job(endpoint, job).job_spec.worker_pool_specs
    assert [p.replica_count for p in pools] == [1, 1]
    with pytest.raises(UsageError, match="--time"):  # a user's mistake, named
        shell.run_cell_magic("sbatch", f"--backend vertex --cluster {name} --machine-type n2-standard-4 "
                                       f"--time soon", "true\n")
    with pytest.raises(UsageError, match="invalid choice"):
        shell.run_cell_magic("sbatch", "--backend gke", "true\n")
    panel = shell.run_cell_magic("gtc_cluster", "vx2 --backend vertex", f"api_endpoint: local:{endpoint.port}\n")
    assert (panel.cluster.backend, panel.cluster.attached) == ("vertex", True)
    assert panel.cluster.status.details["staging_bucket"] == "gs://local-bucket"
    api.detach_cluster("vx2")


def test_gtc_job_submit_with_the_vertex_backend(target, tmp_path):
    from tests.test_cli import gtc

    name, _ = target
    script = tmp_path / "hello.sbatch"
    script.write_text("#!/bin/bash\necho hello from the command line\n")
    result = gtc("job", "submit", str(script), "--backend", "vertex", "--cluster", name,
                 "--machine-type", "n2-standard-4", "--wait")
    assert result.returncode == 0, result.stderr
    assert "hello from the command line" in result.stdout and "COMPLETED (exit code 0)" in result.stdout
    assert api.vertex_cluster() == name  # the one attached is the default


OBJECTIVE = ("import sys, hypertune; x = float(sys.argv[1].split('=')[1]); "
             "hypertune.HyperTune().report_hyperparameter_tuning_metric("
             "hyperparameter_metric_tag='loss', metric_value=(x - 1) ** 2, global_step=1)")
STUDY = f"""parameters:
  x: {{double: [-2, 2]}}
algorithm: random
seed: 1
job: |
  srun python3 -c "{OBJECTIVE}" "$@"
"""


def test_a_study_on_vertex_stopped_shows_its_cut_off_trials_stopped_not_running(target):
    from tests.conftest import sleep_until

    name, _ = target
    api.set_config("vertex.machine_type", "n2-standard-4")
    try:
        spec = STUDY.replace(f'srun python3 -c "{OBJECTIVE}"', "srun sleep 300")
        study = api.create_study(name, spec + "metric: loss:minimize\nmax_trials: 2\nparallel: 2\n", name="vx-stop")
    finally:
        api.unset_config("vertex.machine_type")
    assert sleep_until(lambda: any(t.started for t in study.snapshot().trials), timeout=120)
    study.stop()
    assert sleep_until(lambda: study.snapshot().finished, timeout=120)
    snap = study.snapshot()
    assert snap.state == "STOPPED" and "cancelled" in snap.reason, snap
    assert snap.trials and {t.state for t in snap.trials} == {"PRUNED"}, snap.trials  # none RUNNING for ever
    assert all(t.value is None and "stopped" in t.reason for t in snap.trials)


def test_gtc_tune_runs_a_study_on_vertex_as_a_tuning_job_shown_in_the_study_panel(target):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    from jupyter_gtc.widgets.study_panel import StudyPanel

    name, endpoint = target
    shell = start_ipython() or InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_gtc")
    api.set_config("vertex.machine_type", "n2-standard-4")  # the trials' machine: the target has none of its own
    try:
        study = shell.run_cell_magic("gtc_tune", f"--backend vertex --cluster {name} --name vx-tune --trials 3 "
                                                 f"--parallel 3 --metric loss:minimize", STUDY)
    finally:
        api.unset_config("vertex.machine_type")
    panel = StudyPanel(study)  # what the notebook shows: subscribed, live
    study.wait(timeout=300)
    snap = study.snapshot()
    assert snap.state == "SUCCEEDED" and [t.state for t in snap.trials] == ["COMPLETE"] * 3, snap
    for trial in snap.trials:  # each trial's reported loss is its own x's
        assert trial.value == pytest.approx((trial.params["x"] - 1) ** 2)
    assert study.best_trial.value == min(t.value for t in snap.trials)
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    client = aiplatform_v1.JobServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                            client_options={"api_endpoint": endpoint.api_endpoint})
    resource = client.get_hyperparameter_tuning_job(name=study.resource_name)
    assert resource.display_name == "vx-tune" and resource.labels["gtc_cluster"] == name
    assert resource.trial_job_spec.worker_pool_specs[0].machine_spec.machine_type == "n2-standard-4"
    from tests.conftest import sleep_until

    assert sleep_until(lambda: panel.snapshot.finished, timeout=60)  # the panel followed it to its end
    assert "3/3" in panel.counts_label.value
    with pytest.raises(ActionNotSupported):
        study.stop_trial("1")
