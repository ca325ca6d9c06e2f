"""Every job on a real local cluster, whoever submitted it: a terminal's plain ``sbatch`` is
listed next to ours (marked as not ours), acted on (hold, release, requeue, cancel), its log
read where Slurm says it writes; a job submitted from a file is named after the file; a
listing costs two queries of the state store however many jobs it shows; and the poller
still runs one squeue per tick however many callers list jobs."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import threading
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import get_backend
from jupyter_gtc.services.clusters import ClusterService
from jupyter_gtc.services.jobs import JobService
from jupyter_gtc.services.poller import ClusterPoller
from jupyter_gtc.slurm.commands import SlurmCommands
from jupyter_gtc.state import default_home, open_store
from tests.conftest import sleep_until, slurm, small_gpu_spec
from tests.test_cli import gtc

pytestmark = pytest.mark.slurm
ME = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture(scope="module")
def cluster(slurm_available):
    """A name no other test uses (a process's poller outlives a deleted cluster of its name)."""
    created = api.create_cluster(small_gpu_spec("foreign", nodes=2))
    yield created.name
    api.delete_cluster(created.name)


def terminal_sbatch(cluster: str, folder: Path, file: str, script: str, *options: str) -> str:
    """Submit ``script`` as a user does in a terminal: the file in ``folder``, plain ``sbatch``
    run there with the cluster's SLURM_CONF; returns the job id."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(script)
    env = {**os.environ, **api.cluster_env(cluster)}
    done = subprocess.run(["sbatch", "--parsable", *options, file], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.strip().split(";")[0]


def listed(cluster: str, job_id: str) -> api.Job | None:
    return next((j for j in api.list_jobs(cluster) if j.id == job_id), None)


def slurm_field(cluster: str, job_id: str, field: str) -> str:
    """A field of ``scontrol -o show job``: Slurm's own word."""
    line = slurm(cluster, "scontrol", "-o", "show", "job", job_id).stdout
    return next(part.split("=", 1)[1] for part in line.split() if part.startswith(f"{field}="))


def test_a_terminal_job_is_listed_as_not_ours_and_its_log_read_where_slurm_says(cluster, tmp_path):
    ours = api.submit_job(cluster, "sleep 300", ["-J", "ours"])
    job_id = terminal_sbatch(cluster, tmp_path, "from_terminal.sh",
                             "#!/bin/bash\necho hello from the terminal\nsleep 300\n")
    try:
        assert sleep_until(lambda: listed(cluster, job_id) is not None, timeout=30)
        jobs = {j.id: j for j in api.list_jobs(cluster)}
        theirs = jobs[job_id]
        assert (theirs.managed, theirs.name, theirs.user) == (False, "from_terminal.sh", ME)
        assert jobs[ours.id].managed and jobs[ours.id].name == "ours"
        as_json = theirs.to_json()
        assert (as_json["managed"], as_json["job_dir"], as_json["finished"]) == (False, None, False)
        assert set(as_json) == set(jobs[ours.id].to_json())  # one shape for every job

        api.get_job(job_id, cluster).wait_until_running(timeout=60)
        theirs = api.get_job(job_id, cluster)
        assert theirs.log_path == tmp_path / f"slurm-{job_id}.out"  # sbatch's default, in its folder
        assert sleep_until(lambda: "hello from the terminal" in api.get_job(job_id, cluster).logs(), timeout=30)
        assert api.get_job("from_terminal.sh", cluster).id == job_id  # by name too
    finally:
        slurm(cluster, "scancel", ours.id, job_id)


def test_cancel_hold_release_and_requeue_work_on_a_terminal_job(cluster, tmp_path):
    later = terminal_sbatch(cluster, tmp_path, "later.sh", "#!/bin/bash\nsleep 300\n", "--begin=now+3600")
    running = terminal_sbatch(cluster, tmp_path, "running.sh", "#!/bin/bash\necho up\nsleep 300\n", "--requeue")
    try:
        api.hold_job(later, cluster)
        assert sleep_until(lambda: slurm_field(cluster, later, "Reason").startswith("JobHeld"), timeout=30)
        assert sleep_until(lambda: (api.get_job(later, cluster).reason or "").startswith("JobHeld"), timeout=30)
        api.release_job(later, cluster)
        assert sleep_until(lambda: slurm_field(cluster, later, "Reason") == "BeginTime", timeout=30)

        api.get_job(running, cluster).wait_until_running(timeout=60)
        # sbatch's default output, slurm-<id>.out beside the script: the script has started.
        output = tmp_path / f"slurm-{running}.out"
        assert sleep_until(lambda: output.exists() and "up" in output.read_text(), timeout=60)
        api.requeue_job(running, cluster)
        assert sleep_until(lambda: slurm_field(cluster, running, "Restarts") == "1", timeout=60)

        cancelled = api.cancel_job(later, cluster)
        assert cancelled.wait(timeout=60).state == "CANCELLED"
        assert slurm_field(cluster, later, "JobState") == "CANCELLED"
        assert listed(cluster, later).state == "CANCELLED"
    finally:
        slurm(cluster, "scancel", later, running)


def test_an_array_writes_where_its_output_pattern_says(cluster, tmp_path):
    job_id = terminal_sbatch(cluster, tmp_path, "sweep.sh", "#!/bin/bash\necho task $SLURM_ARRAY_TASK_ID\n",
                             "--array=0-1", "--output=out-%x-%A_%a.log")
    job = api.get_job(job_id, cluster).wait(timeout=60)
    assert job.state == "COMPLETED" and not job.managed and set(job.tasks) == {"0", "1"}
    assert job.log_path == tmp_path / f"out-sweep.sh-{job_id}_0.log"
    assert job.logs() == "task 0\n"


def test_the_cli_lists_every_job_and_names_a_file_job_after_the_file(cluster, tmp_path):
    script = tmp_path / "train.sbatch"
    script.write_text("#!/bin/bash\nsleep 300\n")
    submitted = gtc("job", "submit", str(script), "--cluster", cluster)
    assert submitted.returncode == 0, submitted.stderr
    ours = submitted.stdout.split()[2]
    assert api.get_job(ours, cluster).name == "train.sbatch"  # as sbatch names it
    assert slurm(cluster, "squeue", "-h", "-j", ours, "-o", "%j").stdout.strip() == "train.sbatch"
    named = tmp_path / "named.sbatch"
    named.write_text("#!/bin/bash\n#SBATCH --job-name=from-the-script\ntrue\n")
    out = gtc("job", "submit", str(named), "--cluster", cluster, check=True).stdout
    assert api.get_job(out.split()[2], cluster).name == "from-the-script"  # the script's own name wins

    theirs = terminal_sbatch(cluster, tmp_path / "terminal", "eval.sh", "#!/bin/bash\nsleep 300\n")
    try:
        jobs = {j["id"]: j for j in json.loads(gtc("job", "list", "--cluster", cluster, "--json", check=True).stdout)}
        assert (jobs[ours]["managed"], jobs[ours]["name"]) == (True, "train.sbatch")
        assert (jobs[theirs]["managed"], jobs[theirs]["name"], jobs[theirs]["user"]) == (False, "eval.sh", ME)
        table = gtc("job", "list", "--cluster", cluster, check=True).stdout
        row = next(line.split() for line in table.splitlines() if line.split()[:1] == [theirs])
        # the user's column, the same on every row, may be said once above the table instead
        assert "no" in row and (ME in row or f"user {ME}" in table.splitlines()[0])

        cancelled = gtc("job", "cancel", theirs, "--cluster", cluster)
        assert cancelled.returncode == 0 and f"cancelled job {theirs} (eval.sh)" in cancelled.stdout
        assert sleep_until(lambda: slurm_field(cluster, theirs, "JobState") == "CANCELLED", timeout=30)
    finally:
        slurm(cluster, "scancel", ours, theirs)


def test_a_listing_costs_two_queries_however_many_jobs(cluster):
    """Counted on the real state store by sqlite3's trace callback: before, each handle read the
    store on every field (about six queries per ``to_json``, times every job in the feed)."""
    home = default_home()
    store = open_store(home)
    service = JobService(store, ClusterService(store, home))  # what api builds, on a store we trace

    def queries(action) -> list[str]:
        statements: list[str] = []
        with store.traced(statements.append):
            action()
        return [s for s in statements if s.lstrip().split()[0].upper() in ("SELECT", "INSERT", "UPDATE", "DELETE")]

    first = service.submit(cluster, "true", ["--hold", "-J", "counted-0"])
    few = queries(lambda: [j.to_json() for j in service.list(cluster, foreign=True)])
    held = [first] + [service.submit(cluster, "true", ["--hold", "-J", f"counted-{i}"]) for i in range(1, 25)]
    try:
        jobs: list = []
        many = queries(lambda: jobs.extend(service.list(cluster, foreign=True)))
        assert len(many) == len(few) == 2, many  # the cluster, then its jobs
        assert {j.id for j in held} <= {j.id for j in jobs}
        assert queries(lambda: [j.to_json() for j in jobs]) == []  # no query per job, nor per field
        assert queries(lambda: [(j.state, j.nodes, j.elapsed, j.user, j.tasks, j.exit_code) for j in jobs]) == []
    finally:
        slurm(cluster, "scancel", *[j.id for j in held])


def test_listing_from_many_threads_still_costs_one_squeue_per_tick(cluster, tmp_path):
    """A poller of its own whose squeue is the real one behind a counting script on its PATH
    (its own environment, not this process's)."""
    count = tmp_path / "squeue-calls"
    shim = tmp_path / "bin" / "squeue"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\necho . >> {count}\nexec /usr/bin/squeue \"$@\"\n")
    shim.chmod(0o755)
    store = open_store(default_home())
    record = store.get_cluster(cluster)
    commands = get_backend(record.backend, default_home()).commands(record.runtime)
    counted = SlurmCommands({**commands.env, "PATH": f"{shim.parent}:{os.environ['PATH']}"},
                            jobcomp_file=commands.jobcomp_file)
    poller = ClusterPoller(cluster, lambda: counted, store, linger=0.5)
    theirs = terminal_sbatch(cluster, tmp_path, "held.sh", "#!/bin/bash\ntrue\n", "--hold")
    seen: list[bool] = []

    def lister() -> None:
        for _ in range(5):
            seen.append(theirs in poller.snapshot(max_age=0).views)  # each asks for a tick after it

    try:
        threads = [threading.Thread(target=lister) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert seen == [True] * 20
        assert sleep_until(lambda: not poller.running, timeout=30)  # it stops once no one lists
        assert len(count.read_text().split()) == poller.ticks
    finally:
        slurm(cluster, "scancel", theirs)
