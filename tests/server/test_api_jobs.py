"""Job routes on a real local Slurm cluster: list, describe, log range reads, metrics,
cancel, hold, release, requeue."""

from __future__ import annotations

import os
import pwd

import pytest

from jupyter_gtc import api
from tests.server.api_client import call, ok, wait_for

# Writes UTF-8 text (two-byte characters, so small reads must not split one), and two
# hypertune reports, the way cloudml-hypertune writes them, the second a NaN.
WRITER = r"""#!/bin/bash
for i in $(seq 1 20); do echo "héllo wörld line $i"; done
echo '{"loss": "0.25", "global_step": "3", "timestamp": 1700000000.0}' > "$CLOUD_ML_HP_METRIC_FILE"
echo '{"loss": "nan", "global_step": "4", "timestamp": 1700000001.0}' >> "$CLOUD_ML_HP_METRIC_FILE"
"""
LATER = "#!/bin/bash\nsleep 600\n"


def job_state(server, cluster: str, job_id: str) -> dict:
    return ok(server, "GET", f"jobs/{cluster}/{job_id}")


@pytest.fixture(scope="module")
def finished_job(rest_cluster):
    return api.submit_job(rest_cluster.name, WRITER, ["--job-name=writer"]).wait(timeout=60)


def test_a_finished_job_is_listed_and_described(jupyter_server, rest_cluster, finished_job):
    jobs = ok(jupyter_server, "GET", f"jobs?cluster={rest_cluster.name}")["jobs"]
    listed = next(j for j in jobs if j["id"] == finished_job.id)
    assert listed["name"] == "writer" and listed["state"] == "COMPLETED" and listed["exit_code"] == 0
    assert set(listed) == {"cluster", "id", "name", "state", "exit_code", "nodes", "elapsed", "job_dir", "tasks",
                           "submitted_at", "reason", "user"}
    assert listed["user"] == pwd.getpwuid(os.getuid()).pw_name  # squeue's user_name: who submitted it
    by_name = ok(jupyter_server, "GET", f"jobs/{rest_cluster.name}/writer")  # a name works as everywhere else
    assert by_name["id"] == finished_job.id and by_name["nodes"]


def test_the_log_is_read_in_ranges_that_never_split_a_character(jupyter_server, rest_cluster, finished_job):
    whole = finished_job.log_path.read_bytes()
    path = f"jobs/{rest_cluster.name}/{finished_job.id}/log"
    text, offset = "", 0
    while True:
        chunk = ok(jupyter_server, "GET", f"{path}?offset={offset}&limit=7")
        assert chunk["offset"] == offset and chunk["finished"] is True and chunk["size"] == len(whole)
        if chunk["next_offset"] == offset:
            break
        text += chunk["text"]
        offset = chunk["next_offset"]
    assert text.encode() == whole and "\ufffd" not in text

    tail = ok(jupyter_server, "GET", f"{path}?limit=60")  # no offset: the end, from a line start
    assert tail["next_offset"] == len(whole) and tail["text"].endswith("line 20\n")
    assert tail["text"].startswith("héllo") and whole[tail["offset"] - 1:tail["offset"]] == b"\n"
    beyond = ok(jupyter_server, "GET", f"{path}?offset={len(whole) + 100}")  # a log that started over
    assert beyond["offset"] == 0 and beyond["text"].encode() == whole


def test_metrics_are_read_from_a_cursor(jupyter_server, rest_cluster, finished_job):
    path = f"jobs/{rest_cluster.name}/{finished_job.id}/metrics"
    first = ok(jupyter_server, "GET", path)
    # A NaN (a diverged loss) is null: the browser's JSON.parse refuses Python's NaN.
    assert [(s["tag"], s["step"], s["value"]) for s in first["scalars"]] == [("loss", 3, 0.25), ("loss", 4, None)]
    assert first["next"] == 2 and first["finished"] is True
    assert ok(jupyter_server, "GET", f"{path}?since=2") == {"scalars": [], "next": 2, "finished": True}
    second = ok(jupyter_server, "GET", f"{path}?since=1")
    assert [s["step"] for s in second["scalars"]] == [4] and second["next"] == 2


def test_hold_release_cancel_and_requeue(jupyter_server, rest_cluster):
    job = api.submit_job(rest_cluster.name, LATER, ["--job-name=later", "--begin=now+3600"])
    base = f"jobs/{rest_cluster.name}/{job.id}"
    try:
        wait_for(lambda: job_state(jupyter_server, rest_cluster.name, job.id)["reason"] == "BeginTime", what="BeginTime")
        ok(jupyter_server, "POST", f"{base}/hold")
        wait_for(lambda: (job_state(jupyter_server, rest_cluster.name, job.id)["reason"] or "").startswith("JobHeld"),
                 what="held")
        ok(jupyter_server, "POST", f"{base}/release")
        wait_for(lambda: job_state(jupyter_server, rest_cluster.name, job.id)["reason"] == "BeginTime", what="released")

        # Requeueing a job that has not run is refused by Slurm: a 500 that says why, no traceback.
        status, body = call(jupyter_server, "POST", f"{base}/requeue")
        assert status >= 400 and set(body) == {"kind", "message"} and str(job.id) in body["message"], body

        cancelled = ok(jupyter_server, "POST", f"{base}/cancel")
        assert cancelled["id"] == job.id
        wait_for(lambda: job_state(jupyter_server, rest_cluster.name, job.id)["state"] == "CANCELLED", what="CANCELLED")
        # This process's own poller (a notebook's, say) sees it at its next tick.
        wait_for(lambda: api.get_job(job.id, rest_cluster.name).state == "CANCELLED", timeout=10, what="seen here")

        ok(jupyter_server, "POST", f"{base}/requeue")
        wait_for(lambda: job_state(jupyter_server, rest_cluster.name, job.id)["state"] == "PENDING", what="requeued")
    finally:
        api.cancel_job(job.id, rest_cluster.name)


def test_unknown_jobs_and_actions(jupyter_server, rest_cluster):
    status, body = call(jupyter_server, "GET", f"jobs/{rest_cluster.name}/999999")
    assert (status, body["kind"]) == (404, "JobNotFound")
    status, _, _ = jupyter_server.request("POST", f"gtc/api/jobs/{rest_cluster.name}/1/explode", b"")
    assert status == 404  # not a route
    assert ok(jupyter_server, "GET", "jobs?cluster=nope") == {"jobs": []}
