"""The official Vertex AI SDK (google-cloud-aiplatform), unpatched, against the local Vertex
endpoint: CustomJobs run as real Slurm jobs on a local cluster, and what the SDK shows of them
(states, errors, cancel, delete, list) is what Vertex would show.

No request may leave the machine: the SDK's proxies point at a port where nothing listens,
so a call to Google would fail the test, and every request the SDK made is in the
endpoint's request log."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from jupyter_gtc import api
from tests.conftest import no_egress, sleep_until
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)
from tests.vertex.test_gcs_host import BROWSER_HEADERS, call

pytestmark = pytest.mark.slurm

IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
REPORT = ("import json, os, socket; print(json.dumps({k: os.environ.get(k) for k in "
          "['CLUSTER_SPEC', 'CLOUD_ML_JOB_ID', 'AIP_MODEL_DIR', 'GREETING', 'SLURMD_NODENAME']}))")


@pytest.fixture(scope="module")
def endpoint(slurm_available):
    from tests.conftest import small_gpu_spec

    cluster = api.create_cluster(small_gpu_spec("vertex", nodes=2))
    endpoint = api.start_vertex_endpoint(cluster.name)
    yield endpoint
    api.delete_cluster(cluster.name)


@pytest.fixture
def aiplatform(endpoint, monkeypatch):
    """The SDK as a user points it at the endpoint (what %gtc_vertex_local does), with every
    other way out of the machine closed."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    no_egress(monkeypatch)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint.storage_host)  # the SDK's uploads (what the magic sets)
    aiplatform.init(project="local-project", location="us-central1", staging_bucket="gs://local-bucket",
                    api_endpoint=endpoint.api_endpoint, api_transport="rest", credentials=AnonymousCredentials())
    return aiplatform


def pool(command: list[str], replicas: int = 1, env: dict[str, str] | None = None) -> dict:
    return {"machine_spec": {"machine_type": "a3-highgpu-8g", "accelerator_type": "NVIDIA_H100_80GB",
                             "accelerator_count": 8},
            "replica_count": replicas,
            "container_spec": {"image_uri": IMAGE, "command": command,
                               "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}}


def our_job(custom_job):
    """Our job behind a CustomJob: the newest of its display name on the cluster."""
    return api.get_job(custom_job.display_name, "vertex")


def requests_logged() -> list[dict]:
    return [json.loads(line) for line in api.vertex_request_log().read_text().splitlines()]


def test_run_completes_a_two_node_job_with_vertex_environment(aiplatform):
    before = len(requests_logged())
    job = aiplatform.CustomJob(display_name="two-pools", worker_pool_specs=[
        pool(["python3", "-c", REPORT], env={"GREETING": "chief"}),
        pool(["python3", "-c", REPORT], env={"GREETING": "worker"}),
    ])
    job.run()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    ours = our_job(job)
    lines = ours.logs().splitlines()
    assert lines[0].startswith(f"jupyter_gtc: image {IMAGE} is not run"), lines
    replicas = sorted((json.loads(line) for line in lines[1:]), key=lambda r: r["SLURMD_NODENAME"])
    assert [r["GREETING"] for r in replicas] == ["chief", "worker"]
    chief, worker = (json.loads(r["CLUSTER_SPEC"]) for r in replicas)
    assert chief["cluster"] == {"workerpool0": ["gpu-0:2222"], "workerpool1": ["gpu-1:2222"]}
    assert (chief["task"], worker["task"]) == ({"type": "workerpool0", "index": 0}, {"type": "workerpool1", "index": 0})
    job_id = job.resource_name.rsplit("/", 1)[1]
    assert {r["CLOUD_ML_JOB_ID"] for r in replicas} == {job_id}
    # The SDK made base_output_directory a folder of the staging bucket; Vertex's AIP_* follow it.
    model_dir = replicas[0]["AIP_MODEL_DIR"]
    assert model_dir.startswith("gs://local-bucket/") and model_dir.endswith("/model/")
    calls = requests_logged()[before:]
    assert calls[0]["method"] == "POST" and calls[0]["path"].startswith("/v1/projects/local-project/locations/"
                                                                        "us-central1/customJobs")
    assert all(c["status"] == 200 for c in calls) and len(calls) >= 2, calls


def test_a_failing_job_raises_with_its_exit_status_and_log(aiplatform):
    job = aiplatform.CustomJob(display_name="fails", worker_pool_specs=[
        pool(["bash", "-c", "echo the data is not there >&2; exit 7"])])
    with pytest.raises(RuntimeError) as info:
        job.run()
    assert "non-zero status of 7" in str(info.value) and "the data is not there" in str(info.value)
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_FAILED


def test_submit_then_wait_for_completion_and_list(aiplatform):
    job = aiplatform.CustomJob(display_name="submitted", worker_pool_specs=[pool(["true"])])
    job.submit()
    assert job.state in (aiplatform.gapic.JobState.JOB_STATE_PENDING, aiplatform.gapic.JobState.JOB_STATE_RUNNING,
                         aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED)
    job.wait_for_completion()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    listed = {j.resource_name: j.state for j in aiplatform.CustomJob.list()}
    assert listed[job.resource_name] == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    named = aiplatform.CustomJob.list(filter='display_name="submitted" AND state="JOB_STATE_SUCCEEDED"')
    assert [j.resource_name for j in named] == [job.resource_name]
    assert aiplatform.CustomJob.list(filter='display_name="submitted" AND state="JOB_STATE_FAILED"') == []
    from google.api_core import exceptions

    with pytest.raises(exceptions.BadRequest, match="create_time"):
        aiplatform.CustomJob.list(filter='create_time>"2026-01-01T00:00:00Z"')


def test_from_local_script_uploads_installs_and_runs_the_script(aiplatform, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import os, sys\nprint('trained with', sys.argv[1:], 'in', os.environ['CLOUD_ML_JOB_ID'])\n")
    job = aiplatform.CustomJob.from_local_script(
        display_name="local-script", script_path=str(script), args=["--lr", "0.1"], replica_count=1,
        container_uri="us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest",
        machine_type="a3-highgpu-8g")
    job.run()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    package = job.job_spec.worker_pool_specs[0].python_package_spec.package_uris[0]
    assert package.startswith("gs://local-bucket/")
    from jupyter_gtc.state import default_home

    assert (default_home() / "gcs" / package.removeprefix("gs://")).is_file()  # the bucket is a folder here
    job_id = job.resource_name.rsplit("/", 1)[1]
    assert f"trained with ['--lr', '0.1'] in {job_id}" in our_job(job).logs()


def test_cancel_ends_the_slurm_job(aiplatform):
    job = aiplatform.CustomJob(display_name="to-cancel", worker_pool_specs=[pool(["sleep", "300"])])
    job.submit()
    our_job(job).wait_until_running(timeout=60)
    job.cancel()
    assert our_job(job).wait(timeout=60).state == "CANCELLED"
    with pytest.raises(RuntimeError, match="CANCEL"):
        job.wait_for_completion()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_CANCELLED


def test_delete_forgets_a_finished_job_and_refuses_a_running_one(aiplatform):
    from google.api_core import exceptions

    running = aiplatform.CustomJob(display_name="still-running", worker_pool_specs=[pool(["sleep", "300"])])
    running.submit()
    with pytest.raises(exceptions.BadRequest, match="cancel it"):
        running.delete()
    running.cancel()
    our_job(running).wait(timeout=60)
    running.delete()
    with pytest.raises(exceptions.NotFound):
        aiplatform.CustomJob.get(running.resource_name)


OBJECTIVE = ("import sys, hypertune; x = float(sys.argv[1].split('=')[1]); "
             "hypertune.HyperTune().report_hyperparameter_tuning_metric("
             "hyperparameter_metric_tag='loss', metric_value=(x - 1) ** 2, global_step=1)")


def test_a_tuning_job_runs_its_trials_as_slurm_jobs_and_reports_the_best(aiplatform):
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    trial = aiplatform.CustomJob(display_name="trial", worker_pool_specs=[pool(["python3", "-c", OBJECTIVE])])
    job = aiplatform.HyperparameterTuningJob(
        display_name="tune-x", custom_job=trial, metric_spec={"loss": "minimize"},
        parameter_spec={"x": hpt.DoubleParameterSpec(min=-2, max=2, scale="linear")},
        max_trial_count=4, parallel_trial_count=2, search_algorithm="random")
    job.run()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    trials = job.trials
    assert len(trials) == 4 and {t.state.name for t in trials} == {"SUCCEEDED"}
    for t in trials:  # each trial's measurement is its own program's report for its own x
        (x,) = [p.value for p in t.parameters if p.parameter_id == "x"]
        (loss,) = [m.value for m in t.final_measurement.metrics if m.metric_id == "loss"]
        assert abs(loss - (x - 1) ** 2) < 1e-9
    best = min(trials, key=lambda t: t.final_measurement.metrics[0].value)
    study = api.get_study(f"hpt-{job.resource_name.rsplit('/', 1)[1]}")
    assert study.best_trial.trial_id == best.id
    ran = {j.id: j.state for j in api.list_jobs("vertex", foreign=False)}
    assert [ran[t.job_id] for t in study.snapshot().trials] == ["COMPLETED"] * 4  # each trial a Slurm job


def test_cancelling_a_tuning_job_stops_its_trials(aiplatform):
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    # Vertex appends the hyperparameters to the command: bash -c takes them as $1.. and ignores them.
    trial = aiplatform.CustomJob(display_name="slow-trial",
                                 worker_pool_specs=[pool(["bash", "-c", "sleep 300", "trial"])])
    job = aiplatform.HyperparameterTuningJob(
        display_name="to-stop", custom_job=trial, metric_spec={"loss": "minimize"},
        parameter_spec={"x": hpt.DoubleParameterSpec(min=0, max=1, scale="linear")},
        max_trial_count=4, parallel_trial_count=2, search_algorithm="random")
    job.run(sync=False)
    job.wait_for_resource_creation()
    study = api.get_study(f"hpt-{job.resource_name.rsplit('/', 1)[1]}")

    def a_trial_runs() -> bool:
        started = [t for t in study.snapshot().trials if t.job_id]
        return bool(started) and api.get_job(started[0].job_id, "vertex").state == "RUNNING"

    assert sleep_until(a_trial_runs, timeout=120)
    job.cancel()
    with pytest.raises(RuntimeError, match="CANCELED: the tuning job was cancelled") as info:
        job.wait_for_completion()  # what run() raises: never an empty error
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_CANCELLED and job.error.code == 1  # CANCELLED
    cut_off = job.trials  # the trials that had started; each was running when cancelled
    assert cut_off and {t.state.name for t in cut_off} == {"STOPPING"}, cut_off
    assert not [t for t in cut_off if t.final_measurement.metrics]  # no measurement made up
    assert f"trial(s) {', '.join(t.id for t in cut_off)} were stopped" in str(info.value)
    assert {api.get_job(t.job_id, "vertex").wait(timeout=60).state for t in study.snapshot().trials if t.job_id} \
        == {"CANCELLED"}


def refused(endpoint, collection: str, body: dict) -> tuple[int, dict]:
    """POST ``body`` to the endpoint's ``collection`` as raw JSON, which must be refused:
    (the HTTP code, Google's error object)."""
    request = urllib.request.Request(f"{endpoint.api_endpoint}/v1/projects/p/locations/l/{collection}",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=30)
    return info.value.code, json.loads(info.value.read())["error"]


def test_a_tuning_job_with_a_misspelled_study_field_names_it(endpoint):
    body = {"displayName": "typo", "maxTrialCount": 2, "studySpec": {
        "metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
        "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValu": 1}}]},
        "trialJobSpec": {"workerPoolSpecs": [pool(["true"])]}}
    code, error = refused(endpoint, "hyperparameterTuningJobs", body)
    assert error["status"] == "INVALID_ARGUMENT" and "maxValu" in error["message"], error


def test_a_misspelled_field_is_refused_and_nothing_runs(endpoint):
    before = len(api.list_jobs("vertex", foreign=False))
    body = {"displayName": "typo", "jobSpec": {"workerPoolSpec": [pool(["true"])]}}
    code, error = refused(endpoint, "customJobs", body)
    assert (code, error["status"]) == (400, "INVALID_ARGUMENT")
    assert "workerPoolSpec" in error["message"]
    assert len(api.list_jobs("vertex", foreign=False)) == before


def test_a_package_uri_without_a_bucket_is_refused_not_read_from_the_root(endpoint):
    body = {"displayName": "escape", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "a3-highgpu-8g"}, "replicaCount": "1",
         "pythonPackageSpec": {"executorImageUri": IMAGE, "packageUris": ["gs:///etc/passwd"],
                               "pythonModule": "trainer.task"}}]}}
    code, error = refused(endpoint, "customJobs", body)
    assert error["status"] == "INVALID_ARGUMENT" and "gs:///etc/passwd" in error["message"], error
    assert "package_uris" in error["message"] and "no bucket" in error["message"], error


def test_a_machine_type_the_cluster_lacks_is_refused_naming_those_it_has(aiplatform):
    from google.api_core import exceptions
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    job = aiplatform.CustomJob(display_name="elsewhere", worker_pool_specs=[{
        "machine_spec": {"machine_type": "n2-standard-4"}, "replica_count": 1,
        "container_spec": {"image_uri": IMAGE, "command": ["true"]}}])
    with pytest.raises(exceptions.BadRequest) as info:
        job.run()
    for named in ("job_spec.worker_pool_specs[0].machine_spec.machine_type", "n2-standard-4", "a3-highgpu-8g"):
        assert named in str(info.value), info.value
    tuning = aiplatform.HyperparameterTuningJob(
        display_name="tune-elsewhere", custom_job=job, metric_spec={"loss": "minimize"},
        parameter_spec={"x": hpt.DoubleParameterSpec(min=0, max=1, scale="linear")}, max_trial_count=1,
        parallel_trial_count=1)
    with pytest.raises(exceptions.BadRequest) as info:
        tuning.run()
    for named in ("trial_job_spec.worker_pool_specs[0].machine_spec.machine_type", "n2-standard-4", "a3-highgpu-8g"):
        assert named in str(info.value), info.value


def test_fields_the_endpoint_does_not_apply_are_named_on_the_job_and_in_its_log(aiplatform, endpoint):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    client = aiplatform_v1.JobServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                            client_options={"api_endpoint": endpoint.api_endpoint})
    spec = pool(["true"])
    created = client.create_custom_job(parent="projects/local-project/locations/us-central1", custom_job={
        "display_name": "not-applied",
        "job_spec": {"worker_pool_specs": [spec], "service_account": "trainer@p.iam.gserviceaccount.com",
                     "psc_interface_config": {"network_attachment": "projects/p/regions/r/networkAttachments/a"}}})
    assert created.labels["gtc_not_applied"] == "service_account-psc_interface_config", created.labels
    job = aiplatform.CustomJob.get(created.name)
    job.wait_for_completion()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED  # it ran, without them
    note = our_job(job).logs().splitlines()[0]
    assert note.startswith("jupyter_gtc: not applied on this cluster: job_spec.service_account (the job runs as "
                           "the endpoint's user); job_spec.psc_interface_config (no Private Service Connect"), note


def test_a_pool_with_too_many_replicas_names_the_field(endpoint):
    body = {"displayName": "too-big", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "a3-highgpu-8g"}, "replicaCount": "1",
         "containerSpec": {"imageUri": IMAGE, "command": ["true"]}},
        {"machineSpec": {"machineType": "a3-highgpu-8g"}, "replicaCount": "5",
         "containerSpec": {"imageUri": IMAGE, "command": ["true"]}}]}}
    code, error = refused(endpoint, "customJobs", body)
    assert error["status"] == "INVALID_ARGUMENT"
    assert "replica_count" in error["message"] and "6" in error["message"] and "2 nodes" in error["message"]


# Another local user against the endpoint (run as gtc-test): plain calls, a body the size of
# the attack's announced before it is sent, a token in the header, and idle connections.
AS_ANOTHER_USER = """
import http.client, json, socket, sys
port, token = int(sys.argv[1]), sys.argv[2]
def call(method, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    return r.status, r.read().decode(errors="replace")
def announce(length):  # headers only: the answer must come before any of the body
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(("POST /v1/projects/p/locations/l/customJobs HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n"
               "Content-Length: %s\\r\\n\\r\\n" % (port, length)).encode())
    answer = s.recv(4096).decode(errors="replace")
    s.close()
    return int(answer.split()[1])
jobs = "/v1/projects/p/locations/l/customJobs"
print(json.dumps({
    "list": call("GET", jobs), "huge": announce(300 * 2**20), "1e14": announce(10**14),
    "wrong_token": call("GET", jobs, {"Authorization": "Bearer nope"})[0],
    "with_token": call("GET", jobs, {"Authorization": "Bearer " + token})[0],
}), flush=True)
idle = [socket.create_connection(("127.0.0.1", port), timeout=120) for _ in range(200)]
print("opened", flush=True)
sys.stdin.readline()
closed = 0
for s in idle:  # the endpoint must close every one: answered 503 at once, or timed out unanswered
    try:
        while s.recv(4096):
            pass
        closed += 1
    except OSError:
        pass
print(json.dumps({"closed": closed}), flush=True)
"""


def test_another_local_user_is_refused_before_any_body_and_cannot_hold_its_threads(endpoint, aiplatform,
                                                                                   normal_user):
    import subprocess
    import sys

    import psutil

    from jupyter_gtc.vertex.guard import MAX_OTHER_CONNECTIONS

    served = psutil.Process(endpoint.process["pid"])
    rss_before, threads_before = served.memory_info().rss, served.num_threads()
    other = subprocess.Popen(["runuser", "-u", normal_user.name, "--", sys.executable, "-c", AS_ANOTHER_USER,
                              str(endpoint.port), endpoint.token], env=normal_user.env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = json.loads(other.stdout.readline() or "{}")
        assert got["list"][0] == 403 and "Authorization: Bearer" in got["list"][1], got
        assert (got["huge"], got["1e14"], got["wrong_token"]) == (403, 403, 401), got
        assert got["with_token"] == 200, got  # the token, in a header, lets in who cannot be looked up
        assert other.stdout.readline().strip() == "opened"
        # 200 idle connections of another user hold a few threads at most, and none of the owner's places.
        assert served.num_threads() <= threads_before + MAX_OTHER_CONNECTIONS + 4, served.num_threads()
        assert aiplatform.CustomJob.list(filter='display_name="none-such"') == []
        other.stdin.write("go\n")
        other.stdin.flush()
        assert json.loads(other.stdout.readline()) == {"closed": 200}
    finally:
        other.kill()
        other.wait()
    assert served.memory_info().rss < rss_before + 50 * 2**20  # no body was read


def test_a_body_too_large_or_a_length_that_is_no_size_is_refused_unread(endpoint):
    import socket

    import psutil

    served = psutil.Process(endpoint.process["pid"])
    rss_before = served.memory_info().rss

    def announce(length: str) -> tuple[int, dict]:
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=60) as s:
            s.sendall(f"POST /v1/projects/p/locations/l/customJobs HTTP/1.1\r\nHost: 127.0.0.1:{endpoint.port}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n".encode())
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        return int(head.split()[1]), json.loads(body)["error"]

    status, error = announce(str(300 * 2**20))
    assert status == 413 and str(300 * 2**20) in error["message"] and str(64 * 2**20) in error["message"]
    assert announce(str(10**14))[0] == 413
    for bad in ("-1", "1e14", "abc"):
        status, error = announce(bad)
        assert status == 400 and repr(bad) in error["message"], (bad, error)
    assert served.memory_info().rss < rss_before + 50 * 2**20


def jobs_named(name: str) -> list:
    return [j for j in api.list_jobs("vertex", foreign=False) if j.name == name]


def job_body(name: str) -> bytes:
    return json.dumps({"displayName": name, "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "a3-highgpu-8g"}, "replicaCount": "1",
         "containerSpec": {"imageUri": IMAGE, "command": ["true"]}}]}}).encode()


JOBS = "/v1/projects/p/locations/l/customJobs"
# The user's browser connects from loopback as the user, so without these checks any web page
# it shows could run jobs: fetch(url, {method: "POST", mode: "no-cors", body}) sends text/plain,
# with no preflight. A browser always adds some of these headers; the SDK never does.
WEB_PAGES = [{"Origin": "http://evil.example", "Sec-Fetch-Mode": "no-cors", "Content-Type": "text/plain;charset=UTF-8"},
             *({**header, "Content-Type": "application/json"} for header in BROWSER_HEADERS)]


@pytest.mark.parametrize("browser", WEB_PAGES, ids=lambda h: "+".join(k for k in h if k != "Content-Type"))
def test_a_job_a_web_page_sends_through_the_users_browser_is_refused_and_never_runs(endpoint, browser):
    status, answer = call(endpoint.port, "POST", JOBS, job_body("from-a-web-page"), browser)
    assert (status, answer["error"]["status"]) == (403, "PERMISSION_DENIED"), answer
    assert "browser" in answer["error"]["message"], answer
    assert call(endpoint.port, "GET", JOBS, headers=browser)[0] == 403  # nor read
    assert jobs_named("from-a-web-page") == []


def test_a_body_not_declared_json_is_refused_and_never_runs(endpoint):
    # A form, or a program's text/plain: only the SDK's application/json (a charset is fine) is taken.
    for declared in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        status, answer = call(endpoint.port, "POST", JOBS, job_body("not-declared-json"),
                              {"Content-Type": declared} if declared else {})
        assert (status, answer["error"]["status"]) == (415, "INVALID_ARGUMENT"), (declared, answer)
        assert "application/json" in answer["error"]["message"], answer
    assert jobs_named("not-declared-json") == []
    status, answer = call(endpoint.port, "POST", JOBS, b"{}", {"Content-Type": "application/json; charset=UTF-8"})
    assert (status, answer["error"]["status"]) == (400, "INVALID_ARGUMENT"), answer  # read: an empty job


def test_a_request_to_a_name_that_is_not_the_endpoints_address_is_refused(endpoint):
    # DNS rebinding: a page's own name made to resolve to 127.0.0.1; the browser then sends that name as Host.
    status, answer = call(endpoint.port, "GET", JOBS, headers={"Host": f"evil.example:{endpoint.port}"})
    assert (status, answer["error"]["status"]) == (403, "PERMISSION_DENIED"), answer
    assert f"evil.example:{endpoint.port}" in answer["error"]["message"], answer
    assert call(endpoint.port, "POST", JOBS, job_body("rebound"), {"Host": f"evil.example:{endpoint.port}",
                                                                    "Content-Type": "application/json"})[0] == 403
    assert call(endpoint.port, "GET", JOBS, headers={"Host": f"127.0.0.1:{endpoint.port + 1}"})[0] == 403
    assert jobs_named("rebound") == []
    for name in ("127.0.0.1", "localhost", "[::1]"):  # its own addresses, as a program names them
        assert call(endpoint.port, "GET", JOBS, headers={"Host": f"{name}:{endpoint.port}"})[0] == 200, name


def test_an_endpoint_served_beyond_loopback_serves_its_own_user_with_no_token(endpoint, aiplatform, monkeypatch):
    import psutil
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    from jupyter_gtc._ports import free_ports
    from jupyter_gtc.services.vertex_local import start
    from jupyter_gtc.state import default_home
    from tests.vertex.test_guard import address_beyond_loopback

    address = address_beyond_loopback()
    if address is None:
        pytest.skip("this machine has no address beyond loopback to serve on")
    for variable in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(variable, f"127.0.0.1,localhost,{address}")
    served = start(default_home(), "vertex", free_ports(1, address)[0], host=address)  # gtc vertex serve --host
    try:
        assert served.api_endpoint == f"http://{address}:{served.port}"
        client = aiplatform_v1.JobServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                                client_options={"api_endpoint": served.api_endpoint})
        logged = len(requests_logged())
        list(client.list_custom_jobs(parent="projects/local-project/locations/us-central1"))  # no token given
        # The log is every endpoint's of this GTC_HOME (the fixture's is asked /healthz meanwhile),
        # and a request's line is written once its answer is sent.
        def listed() -> list[tuple]:
            return [(r["method"], r["status"]) for r in requests_logged()[logged:]
                    if r["path"] == "/v1/projects/local-project/locations/us-central1/customJobs"]

        assert sleep_until(lambda: listed(), 30) and listed() == [("GET", 200)], requests_logged()[logged:]
    finally:
        process = psutil.Process(served.process["pid"])
        process.terminate()
        process.wait(timeout=60)


def test_an_sdk_error_shows_no_secret(aiplatform, endpoint):
    import traceback

    from google.api_core import exceptions

    with pytest.raises(exceptions.NotFound) as info:
        aiplatform.CustomJob.get("projects/local-project/locations/us-central1/customJobs/1234567890123456789")
    shown = "".join(traceback.format_exception(info.value))
    assert f"127.0.0.1:{endpoint.port}/v1/projects" in shown  # the URL is there, as ever in the SDK's errors
    assert endpoint.token not in shown
    assert endpoint.token not in api.vertex_request_log().read_text()


def test_a_token_put_in_the_path_as_urls_of_old_did_is_never_repeated(endpoint):
    url = f"http://127.0.0.1:{endpoint.port}/{endpoint.token}/v1/projects/p/locations/l/customJobs"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url, timeout=30)
    assert info.value.code == 404 and endpoint.token not in info.value.read().decode()
    assert endpoint.token not in api.vertex_request_log().read_text()


def test_a_custom_jobs_environment_holds_no_token(aiplatform, endpoint):
    job = aiplatform.CustomJob(display_name="environment", worker_pool_specs=[
        pool(["python3", "-c", "import json, os; print(json.dumps(dict(os.environ)))"])])
    job.run()
    seen = json.loads(our_job(job).logs().splitlines()[-1])
    assert "CLOUD_ML_JOB_ID" in seen and api.VERTEX_TOKEN_VARIABLE not in seen
    assert not [k for k, v in seen.items() if endpoint.token in v]


def test_gtc_vertex_serve_serves_until_ctrl_c_and_never_prints_its_token(endpoint):
    import signal

    from tests.cli_process import running_gtc

    with running_gtc("vertex", "serve", "--cluster", "vertex", "--port", "0", sigint_ignored=True) as gtc:
        first = gtc.stdout.readline()
        assert first.startswith("Vertex AI endpoint for cluster vertex at http://127.0.0.1:"), first
        port = int(first.split("127.0.0.1:")[1].split("/")[0])
        served = api.find_vertex_endpoint(port)
        assert served is not None and served.cluster == "vertex"
        with urllib.request.urlopen(f"{served.api_endpoint}/v1/projects/p/locations/l/customJobs", timeout=30) as r:
            assert json.loads(r.read()) == {"customJobs": []}
        gtc.send_signal(signal.SIGINT)
        out, _ = gtc.communicate(timeout=60)
        assert gtc.returncode is not None
        assert served.token not in first + out
    assert api.find_vertex_endpoint(port) is None  # its record went with it


KERNEL = """
from IPython.testing.globalipapp import start_ipython
from google.cloud import aiplatform
ip = start_ipython()
ip.run_line_magic("load_ext", "jupyter_gtc")
ip.run_line_magic("gtc_vertex_local", "vertex")
aiplatform.init(project="my-project")  # a user's own init later keeps the endpoint
job = aiplatform.CustomJob(display_name="from-the-magic", worker_pool_specs=[{
    "machine_spec": {"machine_type": "a3-highgpu-8g"}, "replica_count": 1,
    "container_spec": {"image_uri": "python:3.11", "command": ["true"]}}])
job.run()
print("RESULT", job.resource_name, job.state.name)
"""


def test_the_magic_points_a_fresh_kernel_at_the_endpoint(endpoint, monkeypatch):
    import os
    import subprocess
    import sys

    for proxy in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    done = subprocess.run([sys.executable, "-c", KERNEL], capture_output=True, text=True, timeout=300,
                          env=os.environ)
    assert done.returncode == 0, done.stderr[-3000:]
    result = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    _, name, state = result.split()
    assert name.startswith("projects/my-project/locations/us-central1/customJobs/") and state == "JOB_STATE_SUCCEEDED"
    assert api.get_job("from-the-magic", "vertex").state == "COMPLETED"


def test_a_tuning_jobs_trials_install_their_python_package_into_their_own_job_folders(aiplatform, tmp_path):
    """The pattern of Google's tuning notebooks: each trial a python_package_spec (a source
    package in the bucket, its module run with python -m). It is installed into each trial's
    job folder, never into the job's Python environment (the kernel's venv, unchanged)."""
    import sys
    import tarfile
    from pathlib import Path

    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    from jupyter_gtc.state import default_home

    source = tmp_path / "tuned_trainer-0.1"
    (source / "tuned_trainer").mkdir(parents=True)
    (source / "tuned_trainer" / "__init__.py").write_text("")
    (source / "tuned_trainer" / "task.py").write_text(
        "import sys, hypertune\nx = float(sys.argv[-1].split('=')[1])\n"
        "print('installed at', __file__, flush=True)\n"
        "hypertune.HyperTune().report_hyperparameter_tuning_metric(hyperparameter_metric_tag='loss', "
        "metric_value=(x - 1) ** 2, global_step=1)\n")
    (source / "setup.py").write_text("from setuptools import setup\nsetup(name='tuned_trainer', version='0.1', "
                                      "packages=['tuned_trainer'])\n")
    bucket = default_home() / "gcs" / "local-bucket" / "packages"
    bucket.mkdir(parents=True, exist_ok=True)
    with tarfile.open(bucket / "tuned_trainer-0.1.tar.gz", "w:gz") as archive:
        archive.add(source, arcname=source.name)
    venv_before = sorted(p.name for p in Path(sys.prefix, "lib").glob("python3*/site-packages/*"))
    trial = aiplatform.CustomJob(display_name="package-trial", worker_pool_specs=[{
        "machine_spec": {"machine_type": "a3-highgpu-8g"}, "replica_count": 1,
        "python_package_spec": {"executor_image_uri": IMAGE, "python_module": "tuned_trainer.task",
                                "package_uris": ["gs://local-bucket/packages/tuned_trainer-0.1.tar.gz"],
                                "args": ["--epochs=1"]}}])
    job = aiplatform.HyperparameterTuningJob(
        display_name="tune-package", custom_job=trial, metric_spec={"loss": "minimize"},
        parameter_spec={"x": hpt.DoubleParameterSpec(min=-2, max=2, scale="linear")},
        max_trial_count=2, parallel_trial_count=2, search_algorithm="random")
    job.run()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    assert {t.state.name for t in job.trials} == {"SUCCEEDED"}
    study = api.get_study(f"hpt-{job.resource_name.rsplit('/', 1)[1]}")
    for trial_job in (api.get_job(t.job_id, "vertex") for t in study.snapshot().trials):
        assert f"installed at {trial_job.job_dir}/python/node-0/tuned_trainer/task.py" in trial_job.logs()
    assert sorted(p.name for p in Path(sys.prefix, "lib").glob("python3*/site-packages/*")) == venv_before


def test_a_tuning_job_names_the_trial_fields_not_applied_on_it_and_in_each_trials_log(aiplatform, endpoint):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    client = aiplatform_v1.JobServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                            client_options={"api_endpoint": endpoint.api_endpoint})
    created = client.create_hyperparameter_tuning_job(
        parent="projects/local-project/locations/us-central1", hyperparameter_tuning_job={
            "display_name": "tune-not-applied", "max_trial_count": 1, "parallel_trial_count": 1,
            "study_spec": {"metrics": [{"metric_id": "loss", "goal": "MINIMIZE"}],
                           "parameters": [{"parameter_id": "x", "double_value_spec": {"min_value": 0, "max_value": 1}}],
                           "algorithm": "RANDOM_SEARCH"},
            "trial_job_spec": {"worker_pool_specs": [pool(["python3", "-c", OBJECTIVE])],
                               "psc_interface_config": {"network_attachment": "projects/p/regions/r/networkAttachments/a"}}})
    assert created.labels["gtc_not_applied"] == "psc_interface_config", created.labels
    job = aiplatform.HyperparameterTuningJob.get(created.name)
    job._block_until_complete()
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED  # it ran, without it
    study = api.get_study(f"hpt-{created.name.rsplit('/', 1)[1]}")
    [trial] = study.snapshot().trials
    first = (api.get_job(trial.job_id, "vertex").logs().splitlines() or [""])[0]
    assert first.startswith("jupyter_gtc: not applied on this cluster: trial_job_spec.psc_interface_config "
                            "(no Private Service Connect"), first
