"""Job routes on a real local Slurm cluster: list, describe, log range reads, metrics,
cancel, hold, release, requeue, and the 409 of an action that the job's state rules out."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import JobStateConflict
from tests.conftest import sleep_until
from tests.server.api_client import answer, call, ok, wait_for

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
                           "submitted_at", "reason", "user", "managed", "finished", "log_path", "attempts", "failure"}
    assert (listed["managed"], listed["finished"], listed["log_path"]) == (True, True, str(finished_job.log_path))
    assert listed["attempts"] == 1  # never requeued
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

        # Requeueing a job that has not run is refused by Slurm because of its state: the
        # request's mistake (409), and the message says what the job is and what would do.
        status, body = call(jupyter_server, "POST", f"{base}/requeue")
        assert (status, body["kind"]) == (409, "JobStateConflict"), body
        assert f"job {job.id} (later) is PENDING" in body["message"], body
        assert "Job is pending execution" in body["message"] and "running or finished" in body["message"]

        cancelled = ok(jupyter_server, "POST", f"{base}/cancel")
        assert cancelled["id"] == job.id
        wait_for(lambda: job_state(jupyter_server, rest_cluster.name, job.id)["state"] == "CANCELLED", what="CANCELLED")
        # This process's own poller (a notebook's, say) sees it at its next tick.
        wait_for(lambda: api.get_job(job.id, rest_cluster.name).state == "CANCELLED", timeout=10, what="seen here")

        ok(jupyter_server, "POST", f"{base}/requeue")
        wait_for(lambda: job_state(jupyter_server, rest_cluster.name, job.id)["state"] == "PENDING", what="requeued")
    finally:
        api.cancel_job(job.id, rest_cluster.name)


@pytest.mark.parametrize("action", ["hold", "release"])
def test_holding_or_releasing_a_finished_job_is_a_conflict_that_says_why(jupyter_server, rest_cluster,
                                                                          finished_job, action):
    status, body = call(jupyter_server, "POST", f"jobs/{rest_cluster.name}/{finished_job.id}/{action}")
    assert (status, body["kind"]) == (409, "JobStateConflict"), body
    message = body["message"]
    assert f"job {finished_job.id} (writer) is COMPLETED" in message and "has not finished" in message, message
    # The magics and the CLI show the api's error as it is: the same words.
    with pytest.raises(JobStateConflict) as raised:
        getattr(api, f"{action}_job")(finished_job.id, rest_cluster.name)
    assert str(raised.value) == message
    assert job_state(jupyter_server, rest_cluster.name, finished_job.id)["state"] == "COMPLETED"  # untouched


def test_a_terminal_job_is_listed_not_ours_acted_on_and_its_log_read(jupyter_server, rest_cluster, tmp_path):
    (tmp_path / "by_hand.sh").write_text("#!/bin/bash\necho written by hand\nsleep 600\n")
    env = {**os.environ, **api.cluster_env(rest_cluster.name)}
    job_id = subprocess.run(["sbatch", "--parsable", "by_hand.sh"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, check=True, timeout=60).stdout.strip()
    base = f"jobs/{rest_cluster.name}/{job_id}"

    def the_job():
        return next((j for j in ok(jupyter_server, "GET", f"jobs?cluster={rest_cluster.name}")["jobs"]
                     if j["id"] == job_id), None)

    try:
        listed = wait_for(the_job, what="the terminal's job listed")
        assert (listed["managed"], listed["name"], listed["job_dir"]) == (False, "by_hand.sh", None)
        assert listed["log_path"] == str(tmp_path / f"slurm-{job_id}.out")
        log = wait_for(lambda: ok(jupyter_server, "GET", f"{base}/log")["text"], what="its log")
        assert log == "written by hand\n"
        assert ok(jupyter_server, "GET", f"{base}/metrics")["scalars"] == []  # no log dir of ours: none

        assert ok(jupyter_server, "POST", f"{base}/cancel")["id"] == job_id
        wait_for(lambda: job_state(jupyter_server, rest_cluster.name, job_id)["state"] == "CANCELLED", what="CANCELLED")
    finally:
        subprocess.run(["scancel", job_id], env=env, timeout=60)


def test_unknown_jobs_and_actions(jupyter_server, rest_cluster):
    status, body = call(jupyter_server, "GET", f"jobs/{rest_cluster.name}/999999")
    assert (status, body["kind"]) == (404, "JobNotFound")
    status, _, _ = jupyter_server.request("POST", f"gtc/api/jobs/{rest_cluster.name}/1/explode", b"")
    assert status == 404  # not a route
    assert ok(jupyter_server, "GET", "jobs?cluster=nope") == {"jobs": []}


# -- another user's job names its own output: we must not read through it ---------------------

@pytest.fixture
def other_user():
    if os.geteuid() != 0:
        pytest.skip("needs root: sbatch --uid submits as another user, as that user's own sbatch would")
    from tests.non_root import ensure_user

    return ensure_user()


def sbatch_as(cluster: str, user, *options: str) -> str:
    """A held job of ``user`` (root's ``sbatch --uid``: the same job that user's own sbatch makes),
    whose ``--output`` Slurm reports while it waits."""
    env = {**os.environ, **api.cluster_env(cluster)}
    done = subprocess.run(["sbatch", "--parsable", "--hold", f"--uid={user.pw_uid}", f"--gid={user.pw_gid}",
                           "--chdir=/tmp", *options, "--wrap", "sleep 300"],
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip().split(";")[0]


def test_another_users_job_cannot_make_us_read_files_it_could_not(rest_cluster, other_user, tmp_path, jupyter_server):
    """The review's attack: a second local user's job names a root-only file, the server's own
    environment (a JupyterHub token) or a FIFO as its output; the sidebar then asked us for its log."""
    cluster = rest_cluster.name
    secret = tmp_path / "root-only"
    secret.write_text("root's secret\n")
    secret.chmod(0o600)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    os.chmod(tmp_path, 0o755)
    own = Path(tempfile.mkdtemp(prefix="gtc-other-", dir="/tmp"))
    os.chown(own, other_user.pw_uid, other_user.pw_gid)
    (own / "mine.out").write_text("the user's own output\n")
    os.chown(own / "mine.out", other_user.pw_uid, other_user.pw_gid)
    jobs = {path: sbatch_as(cluster, other_user, f"--output={path}")
            for path in (secret, "/proc/self/environ", fifo, own / "mine.out")}
    try:
        for path, job_id in jobs.items():
            assert sleep_until(lambda: (j := _listed(cluster, job_id)) is not None and j.log_path is not None, 30)
            job = api.get_job(job_id, cluster)
            assert (job.managed, job.user, job.log_path) == (False, other_user.pw_name, Path(path))

        for path in (secret, "/proc/self/environ", fifo):
            job = api.get_job(jobs[path], cluster)
            outcome: list = []
            # Before the fix a FIFO blocked the reader for good: read on a thread, to fail, not hang.
            reader = threading.Thread(target=lambda: outcome.append(_read_all_ways(job)), daemon=True)
            reader.start()
            reader.join(60)
            assert outcome, f"reading {path} did not return"
            assert outcome[0] == "refused", (path, outcome)

            status, _, body = answer(jupyter_server, "GET", f"gtc/api/jobs/{cluster}/{jobs[path]}/log")
            assert status == 403 and body["kind"] == "LogRefused" and str(path) in body["message"], body
            assert "secret" not in body["message"] and "TOKEN" not in body["message"]

        mine = api.get_job(jobs[own / "mine.out"], cluster)  # the user's own file is still shown
        assert mine.logs() == "the user's own output\n"
    finally:
        slurm(cluster, "scancel", *jobs.values())
        shutil.rmtree(own, ignore_errors=True)


def _read_all_ways(job) -> str:
    """"refused" when every way to read the log refuses, else what one of them returned."""
    from jupyter_gtc.exceptions import LogRefused

    results = []
    for read in (lambda: job.logs(), lambda: job.logs(tail=5), lambda: job.log_range(None, 1024)["text"]):
        try:
            results.append(read())
        except LogRefused:
            results.append("refused")
    followed = job.follow().read_new()
    results.append("refused" if followed.startswith("[") and "is not shown" in followed else followed)
    # A panel's follower, whose new bytes the poller reads for it at each tick.
    poller = api.job_poller(job.cluster)
    panel = job.follow()
    unfollow = poller.follow(panel)
    try:
        ticks = poller.ticks
        poller.watch(job.id)
        poller.poke()
        assert sleep_until(lambda: poller.ticks >= ticks + 2, 60)
        shown = panel.read_new()
    finally:
        unfollow()
    results.append("refused" if shown == "" or "is not shown" in shown else shown)
    return "refused" if set(results) == {"refused"} else repr(results)


def _listed(cluster: str, job_id: str):
    return next((j for j in api.list_jobs(cluster) if j.id == job_id), None)


def slurm(cluster: str, *argv: str) -> None:
    subprocess.run(list(argv), env={**os.environ, **api.cluster_env(cluster)}, capture_output=True, timeout=60)
