"""Vertex AI's Slurm Job API (``:callSlurmRestApi``) as the local Vertex endpoint serves it: Slurm's
REST API v0.0.42 in Google's envelope, answered by a real slurmrestd (22.05, v0.0.38, JWT) in
front of a training cluster the endpoint created, translated both ways (slurm/rest_v42.py).

Raw HTTP, as Google's own Slurm Job API sample calls it. One endpoint and one training cluster
(2 nodes, accounting on) for the module. No request may leave the machine."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import psutil
import pytest
import requests

import jupyter_gtc
from jupyter_gtc import api
from jupyter_gtc.spec.cluster import load_cluster_spec
from tests.conftest import sleep_until
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)
from tests.refusals import post_as_another_user
from tests.vertex_clusters.conftest import local_vertex_endpoint, training_clusters

pytestmark = pytest.mark.slurm

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"
PARENT = "projects/local-project/locations/us-central1"
CLUSTER = "vxrest"


@pytest.fixture(scope="module")
def endpoint(slurm_available):
    with local_vertex_endpoint("vxrhost", made=(CLUSTER,)) as served:
        clusters = training_clusters(served.endpoint)
        clusters.create(CLUSTER, load_cluster_spec(EXAMPLE).to_vertex())  # accounting on: the default
        yield served.endpoint


def call(endpoint, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """Slurm's (status, answer) through callSlurmRestApi; the envelope itself must be a 200."""
    request = {"method": f"HTTP_METHOD_{method}", "path": path, **({"body": body} if body is not None else {})}
    answer = requests.post(f"{endpoint.api_endpoint}/v1beta1/{PARENT}/modelDevelopmentClusters/{CLUSTER}"
                           ":callSlurmRestApi", json=request, timeout=120)
    assert answer.status_code == 200, answer.text
    envelope = answer.json()
    return envelope["status"], json.loads(envelope["body"])


def job(endpoint, job_id: int) -> dict:
    status, answer = call(endpoint, "GET", f"/slurm/v0.0.42/job/{job_id}")
    assert status == 200, answer
    return answer["jobs"][0]


def submit(endpoint, script: str, **fields) -> int:
    status, answer = call(endpoint, "POST", "/slurm/v0.0.42/job/submit", {"job": {"script": script, **fields}})
    assert status == 200 and not answer["errors"], answer
    return answer["job_id"]


def test_a_two_node_job_runs_and_its_state_and_exit_code_come_back_in_v0042_shapes(endpoint, tmp_path_factory):
    folder = tmp_path_factory.mktemp("restjob")
    job_id = submit(endpoint, "#!/bin/bash\nsrun hostname\necho \"greeting=$GREETING\"\nexit 3\n",
                    name="rest2", minimum_nodes=2, tasks=2, current_working_directory=str(folder),
                    environment=["PATH=/usr/bin:/bin", "GREETING=hello there"],
                    time_limit={"set": True, "infinite": False, "number": 5})
    assert sleep_until(lambda: job(endpoint, job_id)["job_state"] == ["FAILED"], timeout=60), job(endpoint, job_id)
    done = job(endpoint, job_id)
    assert done["exit_code"]["status"] == ["ERROR"]
    assert done["exit_code"]["return_code"] == {"set": True, "infinite": False, "number": 3}
    assert done["node_count"] == {"set": True, "infinite": False, "number": 2}
    assert done["time_limit"] == {"set": True, "infinite": False, "number": 5}
    out = (folder / f"slurm-{job_id}.out").read_text().splitlines()
    assert len([line for line in out if not line.startswith("greeting=")]) == 2, out  # one line per node's task
    assert "greeting=hello there" in out  # the environment list reached the job

    status, queue = call(endpoint, "GET", "/slurm/v0.0.42/jobs/")
    assert status == 200 and job_id in [j["job_id"] for j in queue["jobs"]]
    assert all(isinstance(j["job_state"], list) for j in queue["jobs"])

    def accounted() -> dict | None:
        status, answer = call(endpoint, "GET", f"/slurmdb/v0.0.42/job/{job_id}")
        return answer["jobs"][0] if status == 200 and answer.get("jobs") else None

    assert sleep_until(accounted, timeout=60)
    record = accounted()
    assert record["state"]["current"] == ["FAILED"]
    assert record["exit_code"]["status"] == ["ERROR"] and record["exit_code"]["return_code"]["number"] == 3, record["exit_code"]


def test_delete_cancels_a_running_job(endpoint, tmp_path_factory):
    job_id = submit(endpoint, "#!/bin/bash\nsleep 600\n", name="restlong", minimum_nodes=1,
                    current_working_directory=str(tmp_path_factory.mktemp("restlong")),
                    environment=["PATH=/usr/bin:/bin"])
    assert sleep_until(lambda: job(endpoint, job_id)["job_state"] == ["RUNNING"], timeout=60), job(endpoint, job_id)
    status, answer = call(endpoint, "DELETE", f"/slurm/v0.0.42/job/{job_id}")
    assert status == 200 and not answer["errors"], answer
    assert sleep_until(lambda: job(endpoint, job_id)["job_state"] == ["CANCELLED"], timeout=60), job(endpoint, job_id)


def test_a_held_job_is_released_by_an_update_and_accounting_filters_by_user(endpoint, tmp_path_factory):
    status, answer = call(endpoint, "POST", "/slurm/v0.0.42/job/submit", {"job": {
        "script": "#!/bin/bash\ntrue\n", "name": "restheld", "hold": True, "environment": ["PATH=/usr/bin:/bin"],
        "current_working_directory": str(tmp_path_factory.mktemp("restheld"))}})
    assert status == 200 and not answer["errors"] and "held" in answer["warnings"][0]["description"], answer
    job_id = answer["job_id"]
    assert job(endpoint, job_id)["state_reason"].startswith("JobHeld")
    status, answer = call(endpoint, "POST", f"/slurm/v0.0.42/job/{job_id}", {"hold": False})
    assert status == 200 and not answer["errors"], answer
    assert sleep_until(lambda: job(endpoint, job_id)["job_state"] == ["COMPLETED"], timeout=60), job(endpoint, job_id)

    def listed(users: str) -> list[int] | None:
        status, answer = call(endpoint, "GET", f"/slurmdb/v0.0.42/jobs/?users={users}")
        return [j["job_id"] for j in answer["jobs"]] if status == 200 else None

    assert sleep_until(lambda: job_id in (listed("root") or []), timeout=60), listed("root")
    assert listed("nobody") == []


def test_nodes_and_partitions_come_back_in_v0042_shapes(endpoint):
    status, answer = call(endpoint, "GET", "/slurm/v0.0.42/nodes/")
    assert status == 200
    nodes = {n["name"]: n for n in answer["nodes"]}
    assert set(nodes) == {"a3-0", "a3-1"}, sorted(nodes)
    for node in nodes.values():
        assert isinstance(node["state"], list) and node["state"][0] in ("IDLE", "MIXED", "ALLOCATED"), node["state"]
        assert "state_flags" not in node
    status, answer = call(endpoint, "GET", "/slurm/v0.0.42/partitions/")
    assert status == 200
    part = next(p for p in answer["partitions"] if p["name"] == "a3")
    assert part["partition"]["state"] == ["UP"] and part["nodes"]["total"] == 2
    status, answer = call(endpoint, "GET", "/slurm/v0.0.42/ping/")
    assert status == 200 and answer["pings"][0]["responding"] is True


def test_a_field_v0038_cannot_express_is_refused_naming_it_and_no_job_is_made(endpoint):
    status, before = call(endpoint, "GET", "/slurm/v0.0.42/jobs/")
    status, answer = call(endpoint, "POST", "/slurm/v0.0.42/job/submit",
                          {"job": {"script": "#!/bin/bash\ntrue\n", "name": "refused", "oom_kill_step": 1,
                                   "environment": ["PATH=/bin"], "current_working_directory": "/tmp"}})
    assert status == 400
    assert "job.oom_kill_step" in answer["errors"][0]["description"], answer
    status, answer = call(endpoint, "POST", "/slurm/v0.0.42/job/submit",
                          {"job": {"script": "#!/bin/bash\ntrue\n", "tres_per_job": "cpu=4",
                                   "environment": ["PATH=/bin"], "current_working_directory": "/tmp"}})
    assert status == 400 and "job.tres_per_job" in answer["errors"][0]["description"], answer
    status, after = call(endpoint, "GET", "/slurm/v0.0.42/jobs/")
    assert "refused" not in [j["name"] for j in after["jobs"]]
    assert len(after["jobs"]) == len(before["jobs"])
    status, answer = call(endpoint, "GET", "/slurm/v0.0.42/reservations/")  # a path not served: Slurm's 404
    assert status == 404 and answer["errors"][0]["error"] == "Unable to find requested URL"
    envelope = requests.post(f"{endpoint.api_endpoint}/v1beta1/{PARENT}/modelDevelopmentClusters/{CLUSTER}"
                             ":callSlurmRestApi", json={"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/ping/",
                                                        "verb": "GET"}, timeout=60)
    assert envelope.status_code == 400 and "verb" in envelope.json()["error"]["message"], envelope.text  # Google's


def test_a_request_over_1_mb_is_refused(endpoint):
    big = {"method": "HTTP_METHOD_POST", "path": "/slurm/v0.0.42/job/submit",
           "body": {"job": {"script": "#!/bin/bash\n" + "#" * (1024 * 1024), "environment": ["PATH=/bin"]}}}
    answer = requests.post(f"{endpoint.api_endpoint}/v1beta1/{PARENT}/modelDevelopmentClusters/{CLUSTER}"
                           ":callSlurmRestApi", json=big, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT" and "1 MB" in answer.json()["error"]["message"]


def test_another_local_user_without_the_token_is_refused_before_the_body(endpoint, normal_user):
    """Refused before the body is read without the endpoint's token (403) or with a wrong one
    (401), whatever the body would have asked; with the token, served."""
    path = f"/v1beta1/{PARENT}/modelDevelopmentClusters/{CLUSTER}:callSlurmRestApi"
    got = post_as_another_user(normal_user, endpoint.port, endpoint.token, path,
                               json.dumps({"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/ping/"}))
    assert (got["none"][0], got["wrong"][0]) == (403, 401), got
    status, envelope = got["token"]
    assert status == 200 and envelope["status"] == 200, got
    assert json.loads(envelope["body"])["pings"][0]["responding"] is True


def rest_folder(cluster: str) -> Path:
    from jupyter_gtc.backends import slurm_rest

    return slurm_rest.rest_folder(Path(os.environ["GTC_HOME"]) / "clusters" / cluster)


def slurmrestds(cluster: str) -> list[psutil.Process]:
    """The slurmrestd of ``cluster`` (its socket is in the cluster's own folder), if running."""
    folder = str(rest_folder(cluster))
    return [p for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"] == "slurmrestd" and any(folder in a for a in p.info["cmdline"] or [])]


def test_a_cluster_without_accounting_serves_slurm_and_says_why_slurmdb_has_nothing(endpoint):
    client = training_clusters(endpoint)
    spec = load_cluster_spec(EXAMPLE).to_vertex()
    spec["nodePools"][0]["scalingSpec"] = {"minNodeCount": 1, "maxNodeCount": 1}
    spec["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": False}  # ours: the endpoint takes it
    client.create("vxnoacct", spec)
    deleted = False
    try:
        url = f"{endpoint.api_endpoint}/v1beta1/{PARENT}/modelDevelopmentClusters/vxnoacct:callSlurmRestApi"
        ping = requests.post(url, json={"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/ping/"}, timeout=120)
        assert ping.json()["status"] == 200, ping.text  # slurmrestd started without its accounting plugin
        jobs = requests.post(url, json={"method": "HTTP_METHOD_GET", "path": "/slurmdb/v0.0.42/jobs/"}, timeout=120)
        assert jobs.json()["status"] == 404 and "keeps no accounting" in jobs.json()["body"], jobs.text
        assert slurmrestds("vxnoacct")
        # Deleted by another process than the endpoint (this one): the local delete stops the
        # cluster's slurmrestd too, and removes its folder.
        api.delete_cluster("vxnoacct")
        deleted = True
        assert not slurmrestds("vxnoacct")
        assert not rest_folder("vxnoacct").exists() or os.geteuid() != 0  # (a normal user's is in the cluster's)
    finally:
        if not deleted:
            client.delete("vxnoacct")


def test_the_endpoint_stop_stops_the_slurmrestd_it_started(endpoint):
    from jupyter_gtc.services import vertex_local

    call(endpoint, "GET", "/slurm/v0.0.42/ping/")
    assert slurmrestds(CLUSTER)
    vertex_local.stop_serving(Path(os.environ["GTC_HOME"]), "vxrhost")  # SIGTERM, as gtc vertex serve gets
    assert sleep_until(lambda: not slurmrestds(CLUSTER), timeout=30), [p.info for p in slurmrestds(CLUSTER)]


# A normal user's endpoint: slurmrestd runs as that user (the cluster's SlurmUser, the only account
# it has; backends/slurm_rest.py says why that is safe), and its jobs run as that user.
AS_A_NORMAL_USER = """
import json, os, sys
from tests.conftest import small_gpu_spec
from jupyter_gtc import api
from jupyter_gtc.services.vertex_slurm_rest import SlurmJobApi
api.create_cluster(small_gpu_spec("rnu", nodes=1, slurm_rest_api=True))
service = SlurmJobApi(api._clusters())
try:
    cluster = api.get_cluster("rnu")
    ping = service.call(cluster, {"method": "HTTP_METHOD_GET", "path": "/slurm/v0.0.42/ping/"})
    job = {"script": "#!/bin/bash\\nid -un > whoami.txt\\n", "environment": ["PATH=/usr/bin:/bin"],
           "current_working_directory": os.environ["GTC_HOME"]}
    sent = service.call(cluster, {"method": "HTTP_METHOD_POST", "path": "/slurm/v0.0.42/job/submit", "body": {"job": job}})
    job_id = json.loads(sent["body"])["job_id"]
    for _ in range(600):
        state = json.loads(service.call(cluster, {"method": "HTTP_METHOD_GET", "path": f"/slurm/v0.0.42/job/{job_id}"})["body"])
        if state["jobs"][0]["job_state"] == ["COMPLETED"]:
            break
        import time; time.sleep(0.1)
    print(json.dumps({"ping": ping["status"], "state": state["jobs"][0]["job_state"],
                      "whoami": open(os.path.join(os.environ["GTC_HOME"], "whoami.txt")).read().strip()}))
finally:
    service.close()
    api.delete_cluster("rnu")
"""


def test_a_normal_users_cluster_serves_the_slurm_job_api_as_that_user(slurm_available, normal_user):
    # In the user's own home, not new_home()'s /tmp: some machines keep /tmp closed to others.
    home = Path(tempfile.mkdtemp(prefix="gtc-rnu-", dir=normal_user.pw.pw_dir))
    os.chown(home, normal_user.uid, normal_user.pw.pw_gid)
    try:
        ran = normal_user.python(AS_A_NORMAL_USER, home, timeout=300)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == {"ping": 200, "state": ["COMPLETED"],
                                                               "whoami": normal_user.name}
