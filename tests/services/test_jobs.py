"""Jobs on a real local cluster: submit, wait, cancel, requeue, arrays, dependencies, the
job contract inside the job, logs, one poller for many jobs, and reattaching later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import ClusterNotFound, JobSubmitError, SpecError
from jupyter_gtc.services.poller import ClusterPoller
from jupyter_gtc.slurm.commands import SlurmCommands
from jupyter_gtc.state import open_store
from tests.conftest import sleep_until, slurm, small_gpu_spec

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def jobs_cluster(slurm_available):
    cluster = api.create_cluster(small_gpu_spec("jobs", nodes=2))
    yield cluster.name
    api.delete_cluster(cluster.name)


def test_a_job_runs_and_reports_its_exit_code_and_output(jobs_cluster):
    job = api.submit_job(jobs_cluster, "#!/bin/bash\necho hello from $SLURMD_NODENAME\nexit 3\n", ["-J", "exit3"])
    job.wait(timeout=60)
    assert (job.state, job.exit_code) == ("FAILED", 3)
    assert job.logs().startswith("hello from gpu-")
    assert (job.job_dir / "job.sbatch").read_text().startswith("#!/bin/bash\necho hello")
    assert job.log_path == job.job_dir / f"slurm-{job.id}.out"


def test_options_win_over_sbatch_lines(jobs_cluster):
    script = "#!/bin/bash\n#SBATCH --job-name=from-script\n#SBATCH --nodes=1\nsrun printenv SLURMD_NODENAME\n"
    job = api.submit_job(jobs_cluster, script, ["--job-name", "from-magic", "--nodes=2"]).wait(timeout=60)
    assert job.name == "from-magic" and job.state == "COMPLETED"
    assert sorted(job.logs().split()) == ["gpu-0", "gpu-1"]


def test_the_job_contract_is_in_every_task(jobs_cluster):
    script = """#!/bin/bash
srun --nodes=2 python3 -c '
import json, os
print(json.dumps({k: os.environ.get(k) for k in
    ["AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLOUD_ML_JOB_ID", "CLUSTER_SPEC", "SLURM_NODEID"]}))'
"""
    job = api.submit_job(jobs_cluster, script, ["--nodes=2", "-J", "contract"]).wait(timeout=60)
    assert job.state == "COMPLETED", job.logs()
    tasks = sorted((json.loads(line) for line in job.logs().splitlines()), key=lambda t: t["SLURM_NODEID"])
    for task in tasks:
        assert task["AIP_MODEL_DIR"] == f"{job.job_dir}/model/" and Path(task["AIP_MODEL_DIR"]).is_dir()
        assert task["AIP_CHECKPOINT_DIR"] == f"{job.job_dir}/checkpoints/"
        assert task["AIP_TENSORBOARD_LOG_DIR"] == f"{job.job_dir}/logs/"
        assert task["CLOUD_ML_JOB_ID"] == job.id
    chief, worker = (json.loads(t["CLUSTER_SPEC"]) for t in tasks)
    assert chief["cluster"] == {"workerpool0": ["gpu-0:2222"], "workerpool1": ["gpu-1:2222"]}
    assert chief["task"] == {"type": "workerpool0", "index": 0}
    assert worker["task"] == {"type": "workerpool1", "index": 0}


def test_cancel_a_running_job(jobs_cluster):
    job = api.submit_job(jobs_cluster, "sleep 300", ["-J", "to-cancel"]).wait_until_running(timeout=30)
    api.cancel_job(job.id, jobs_cluster)
    job.wait(timeout=30)
    assert job.state == "CANCELLED"
    assert slurm(jobs_cluster, "squeue", "-h", "-t", "RUNNING", "-j", job.id, check=False).stdout.strip() == ""


def test_requeue_restarts_the_job_with_a_restart_count(jobs_cluster):
    script = '#!/bin/bash\necho "run ${SLURM_RESTART_COUNT:-0}"\n[ -n "$SLURM_RESTART_COUNT" ] || sleep 300\n'
    job = api.submit_job(jobs_cluster, script, ["-J", "requeue-me", "--requeue"]).wait_until_running(timeout=30)
    assert sleep_until(lambda: "run 0" in job.logs(), 60)  # past its TaskProlog, as a user would see it
    job.requeue()
    job.wait(timeout=120)
    assert job.state == "COMPLETED"
    # Both attempts' output, the first kept above the second (Slurm would truncate it).
    # (slurmstepd's "CANCELLED ... DUE TO JOB REQUEUE" line ends the first).
    first, marker, second = job.logs().partition("--- jupyter_gtc: attempt 2 (requeued); the earlier attempts' "
                                                 "output is above ---\n")
    assert first.startswith("run 0\n") and "DUE TO JOB REQUEUE" in first and second == "run 1\n", job.logs()


def test_a_requeued_job_we_did_not_submit_gets_no_attempt_note(jobs_cluster, tmp_path):
    # A terminal's `sbatch --requeue` (open-mode truncate, Slurm's default): its first attempt's
    # output is gone, so a line saying it is above would be false.
    tmp_path.chmod(0o755)
    out, script = tmp_path / "foreign.out", tmp_path / "foreign.sbatch"
    script.write_text('#!/bin/bash\necho "run ${SLURM_RESTART_COUNT:-0}"\n[ -n "$SLURM_RESTART_COUNT" ] || sleep 300\n')
    job_id = slurm(jobs_cluster, "sbatch", "--parsable", "--requeue", f"--output={out}", str(script)).stdout.strip()
    assert sleep_until(lambda: out.exists() and "run 0" in out.read_text(), 60)
    slurm(jobs_cluster, "scontrol", "requeue", job_id)
    job = api.get_job(job_id, jobs_cluster)
    assert not job.managed
    assert job.wait(timeout=120).state == "COMPLETED"
    assert out.read_text() == "run 1\n"  # truncated, and no "attempt 2 (requeued)" line

    # Ours keep the note (test_requeue_restarts_the_job_with_a_restart_count), and the variable that
    # asks for it stays out of the job, so a job submitted from inside ours does not inherit it.
    ours = api.submit_job(jobs_cluster, 'echo "flag=${GTC_OUTPUT_APPENDED-unset}"', ["-J", "flag"]).wait(timeout=60)
    assert ours.logs() == "flag=unset\n"


def test_an_array_is_one_handle_with_a_state_per_task(jobs_cluster):
    script = '#!/bin/bash\nexit $SLURM_ARRAY_TASK_ID\n'
    job = api.submit_job(jobs_cluster, script, ["--array=0-2", "-J", "arr"]).wait(timeout=60)
    assert job.tasks == {"0": {"state": "COMPLETED", "exit_code": 0}, "1": {"state": "FAILED", "exit_code": 1},
                         "2": {"state": "FAILED", "exit_code": 2}}
    assert (job.state, job.exit_code) == ("FAILED", 2)
    assert sorted(p.name for p in job.job_dir.glob("slurm-*.out")) == [f"slurm-{job.id}_{i}.out" for i in range(3)]


def test_an_action_returns_a_handle_that_already_says_what_it_did(jobs_cluster):
    job = api.submit_job(jobs_cluster, "sleep 600", ["-J", "later", "--begin=now+3600"])
    assert job.state == "PENDING"
    assert job.hold().reason.startswith("JobHeld")  # JobHeldAdmin as root, JobHeldUser otherwise
    # Released: no longer held (slurmctld says BeginTime again at its next scheduling pass).
    assert not (job.release().reason or "").startswith("JobHeld")
    assert job.cancel().state == "CANCELLED"


def test_a_dependent_job_waits_for_its_dependency(jobs_cluster):
    # Held until the dependent job is queued, so the dependency cannot be met before it is seen.
    first = api.submit_job(jobs_cluster, "sleep 3", ["-J", "first", "--hold"])
    second = api.submit_job(jobs_cluster, "echo second", ["-J", "second", f"--dependency=afterok:{first.id}"])
    reason = slurm(jobs_cluster, "squeue", "-h", "-j", second.id, "-o", "%r").stdout.strip()
    assert reason == "Dependency"
    first.release()
    second.wait(timeout=60)
    assert first.state == "COMPLETED" and second.state == "COMPLETED"
    assert first.to_json()["elapsed"] >= 2.5


@pytest.mark.parametrize("options, kind, message", [
    (["--no-such-option"], JobSubmitError, "unrecognized option '--no-such-option'"),
    (["--gpus-per-node=9"], SpecError,
     "partition train has a3-highgpu-8g nodes with 8 GPUs; --gpus-per-node=9 asks for 9"),
    (["--partition=nope"], SpecError, "partitions of jobs: train"),
])
def test_bad_submissions_leave_nothing_behind(jobs_cluster, options, kind, message):
    before = {j.id for j in api.list_jobs(jobs_cluster)}
    folders = set((Path(os.environ["GTC_HOME"]) / "jobs" / jobs_cluster).glob("*"))
    with pytest.raises(kind) as info:
        api.submit_job(jobs_cluster, "true", ["-J", "bad", *options])
    assert message in str(info.value)
    assert {j.id for j in api.list_jobs(jobs_cluster)} == before
    assert set((Path(os.environ["GTC_HOME"]) / "jobs" / jobs_cluster).glob("*")) == folders


def test_a_missing_cluster_is_named(jobs_cluster):
    with pytest.raises(ClusterNotFound) as info:
        api.submit_job("ghost", "true")
    assert "jobs" in str(info.value)


def test_shell_hostile_names_reach_slurm_literally(jobs_cluster):
    name = "a'; echo pwned; $(id)"
    job = api.submit_job(jobs_cluster, "echo ok", ["--job-name", name]).wait(timeout=60)
    assert job.name == name and job.state == "COMPLETED" and job.logs() == "ok\n"
    assert job.job_dir.is_dir() and "'" not in job.job_dir.name
    assert api.get_job(name, jobs_cluster).id == job.id


def test_a_new_process_finds_and_waits_for_a_job(jobs_cluster):
    code = ("from jupyter_gtc import api; "
            "job = api.submit_job('jobs', 'sleep 2; echo done', ['-J', 'reattach']); print(job.id)")
    job_id = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            timeout=60).stdout.strip()
    import jupyter_gtc as gtc

    job = gtc.jobs.get("reattach")
    assert job.id == job_id and job.id in [j.id for j in gtc.jobs.list(jobs_cluster)]
    job.wait(timeout=60)
    assert job.state == "COMPLETED" and job.logs() == "done\n"


def test_logs_of_a_job_that_wrote_50_mb(jobs_cluster):
    script = "#!/bin/bash\nhead -c 52428800 /dev/zero | tr '\\0' 'x' | fold -w 99\necho\necho the-end\n"
    job = api.submit_job(jobs_cluster, script, ["-J", "big-log"]).wait(timeout=120)
    assert job.log_path.stat().st_size > 50_000_000
    assert job.logs(tail=1) == "the-end\n"
    follower, total = job.follow(), 0
    while chunk := follower.read_new(limit=8 << 20):
        total += len(chunk)
    assert total == job.log_path.stat().st_size
    assert follower.read_new() == ""  # nothing new, nothing re-read


def test_300_watched_jobs_cost_one_squeue_per_tick(jobs_cluster, tmp_path):
    # A counting squeue in front of the real one, first on the PATH of this poller's Slurm
    # commands only (the rest of the process, other pollers included, never runs it).
    count = tmp_path / "squeue-calls"
    shim = tmp_path / "bin" / "squeue"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\necho . >> {count}\nexec /usr/bin/squeue \"$@\"\n")
    shim.chmod(0o755)
    held = [api.submit_job(jobs_cluster, "true", ["--hold", "-J", f"held-{i}"]) for i in range(300)]
    commands = SlurmCommands({**api.cluster_env(jobs_cluster), "PATH": f"{shim.parent}:{os.environ['PATH']}"})
    poller = ClusterPoller(jobs_cluster, lambda: commands, open_store())

    def calls() -> int:
        return len(count.read_text().split()) if count.exists() else 0

    after_each_tick: list[tuple[int, int]] = []  # (ticks, squeue runs), on the poller's thread as a tick ends
    unsubscribe = poller.subscribe(lambda changed: after_each_tick.append((poller.ticks, calls())))
    try:
        for job in held:
            poller.watch(job.id)
        assert sleep_until(lambda: all(poller.view(j.id) for j in held), 60)
        ticked = len(after_each_tick)
        assert sleep_until(lambda: len(after_each_tick) >= ticked + 3, 60)  # three more with all 300 watched
        assert all(poller.view(j.id).state == "PENDING" for j in held)
    finally:
        unsubscribe()
        slurm(jobs_cluster, "scancel", *[j.id for j in held])
    assert all(calls == ticks for ticks, calls in after_each_tick), after_each_tick


def test_script_arguments_and_extra_environment_reach_the_job(jobs_cluster):
    job = api.submit_job(jobs_cluster, '#!/bin/bash\necho "args: $*"\necho "extra: $EXTRA_SETTING"\n',
                         ["-J", "args"], script_args=["--learning_rate=0.01", "it's one"],
                         env={"EXTRA_SETTING": "a b"}).wait(timeout=60)
    assert job.logs() == "args: --learning_rate=0.01 it's one\nextra: a b\n"


def test_a_cluster_created_again_under_the_same_name_starts_with_fresh_job_state(slurm_available):
    api.create_cluster(small_gpu_spec("again", nodes=1))
    first = api.submit_job("again", "sleep 300", ["-J", "old"]).wait_until_running(timeout=30)
    first.cancel().wait(timeout=30)
    assert first.state == "CANCELLED"
    api.delete_cluster("again")

    api.create_cluster(small_gpu_spec("again", nodes=1))
    try:
        second = api.submit_job("again", "sleep 1; echo new", ["-J", "new"])
        assert second.id == first.id  # Slurm numbers from 1 again...
        second.wait(timeout=60)
        assert second.state == "COMPLETED" and second.logs() == "new\n"  # ...but nothing of the old job leaks in
    finally:
        api.delete_cluster("again")
